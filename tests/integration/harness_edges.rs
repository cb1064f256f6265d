//! The harness itself under bad conditions: signals in the middle of a run, a run killed
//! outright (and the next run reaping what it left), a given server whose databases must not
//! outlive a run, every usage and input error's exit code and message, `--keep-databases`.
//!
//! Each test runs the real binary from the crate root (so the default `features/`, `fixtures/`
//! paths resolve) with a temporary directory of its own as `TMPDIR`, and checks afterwards that
//! the directory is empty and that no process on the machine still refers to it.

use crate::common::harness_env;

use std::fs::Permissions;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rewind_conformance::postgres::EmbeddedCluster;
use sqlx::Connection as _;

const BIN: &str = env!("CARGO_BIN_EXE_rewind-conformance");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// One fast scenario (a refusal; no mock runtime server).
const ONE: &str = "^an agent cannot initiate a rewind$";
/// The scenarios that start a mock OpenCode server: a run that lasts several seconds.
const OPENCODE: &str = "OpenCode|opencode";

/// How long a run may take to show that a scenario is running, and to end after a signal.
const PATIENCE: Duration = Duration::from_secs(60);

/// How long processes a run stopped may take to be gone from /proc.
const GRACE: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A fresh directory, mode 0755 (as root the harness runs PostgreSQL as the `postgres` account,
/// which must reach the cluster directory inside it). On drop, any process still referring to
/// it (a failed test's leftovers) is killed before the directory goes.
struct Scratch {
    dir: Option<tempfile::TempDir>,
}

impl Scratch {
    fn new(what: &str) -> Scratch {
        let dir = tempfile::Builder::new()
            .prefix(&format!("harness-edges-{what}-"))
            .tempdir()
            .expect("a temporary directory");
        std::fs::set_permissions(dir.path(), Permissions::from_mode(0o755)).expect("chmod 0755");
        Scratch { dir: Some(dir) }
    }

    fn path(&self) -> &Path {
        self.dir.as_ref().expect("not dropped").path()
    }

    fn arg(&self) -> &str {
        self.path().to_str().expect("a UTF-8 temporary path")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let Some(dir) = self.dir.take() else { return };
        for process in processes_referring_to(dir.path()) {
            // Only processes of this test's runs can refer to its private directory.
            // SAFETY: `kill` has no memory effects.
            unsafe {
                libc::kill(process.pid, libc::SIGKILL);
            }
        }
        let _ = dir.close();
    }
}

/// How a harness run ended.
#[derive(Debug)]
struct Finished {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl Finished {
    fn code(&self) -> Option<i32> {
        self.status.code()
    }

    fn describe(&self) -> String {
        format!(
            "{} after {:.1} s\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status,
            self.elapsed.as_secs_f64(),
            self.stdout,
            self.stderr
        )
    }

    /// Asserts the exit code, showing the whole run when it differs.
    fn assert_code(&self, code: i32) {
        assert_eq!(
            self.code(),
            Some(code),
            "expected exit {code}, got {}",
            self.describe()
        );
    }

    fn assert_stderr_has(&self, needle: &str) {
        assert!(
            self.stderr.contains(needle),
            "stderr does not say `{needle}`: {}",
            self.describe()
        );
    }

    fn assert_stdout_has(&self, needle: &str) {
        assert!(
            self.stdout.contains(needle),
            "stdout does not say `{needle}`: {}",
            self.describe()
        );
    }
}

/// A running harness. Dropped while still running (a failed test), it gets SIGTERM, then
/// SIGKILL, so that it stops what it started.
struct Harness {
    child: Option<Child>,
    logs: tempfile::TempDir,
    started: Instant,
}

impl Harness {
    /// `rewind-conformance run <args>` with `TMPDIR` = `tmp` and `env` on top of this process's
    /// environment (the harness's own `REWIND_*` variables removed).
    fn run(args: &[&str], tmp: &Path, env: &[(&str, &str)]) -> Harness {
        let logs = tempfile::Builder::new()
            .prefix("harness-edges-logs-")
            .tempdir()
            .expect("a log directory");
        let stdout = std::fs::File::create(logs.path().join("stdout")).expect("stdout file");
        let stderr = std::fs::File::create(logs.path().join("stderr")).expect("stderr file");
        let mut command = Command::new(BIN);
        command
            .arg("run")
            .args(args)
            .current_dir(ROOT)
            .env("TMPDIR", tmp)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr);
        harness_env::clean(&mut command);
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command.spawn().expect("the harness starts");
        Harness {
            child: Some(child),
            logs,
            started: Instant::now(),
        }
    }

    fn pid(&self) -> libc::pid_t {
        let child = self.child.as_ref().expect("still held");
        libc::pid_t::try_from(child.id()).expect("a pid")
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: `kill` has no memory effects; the pid is our own child's, not yet waited for.
        let rc = unsafe { libc::kill(self.pid(), signal) };
        assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
    }

    fn output(&self) -> (String, String) {
        let read =
            |name: &str| std::fs::read_to_string(self.logs.path().join(name)).unwrap_or_default();
        (read("stdout"), read("stderr"))
    }

    /// Whether it has ended (`Some` with its status).
    fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .expect("still held")
            .try_wait()
            .expect("try_wait")
    }

    /// Waits for the end, at most `limit`.
    fn wait(mut self, limit: Duration) -> Finished {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.try_wait() {
                break status;
            }
            if Instant::now() > deadline {
                let (stdout, stderr) = self.output();
                panic!(
                    "the harness did not end within {} s\n--- stdout ---\n{stdout}\n--- stderr \
                     ---\n{stderr}",
                    limit.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.child = None;
        let (stdout, stderr) = self.output();
        Finished {
            status,
            stdout,
            stderr,
            elapsed: self.started.elapsed(),
        }
    }

    /// Waits until the harness's temporary directory holds a directory of every prefix (a
    /// scenario is running), at most [`PATIENCE`].
    fn wait_for_dirs(&mut self, tmp: &Path, prefixes: &[&str]) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let names = entries(tmp);
            if prefixes
                .iter()
                .all(|p| names.iter().any(|n| n.starts_with(p)))
            {
                return;
            }
            if let Some(status) = self.try_wait() {
                let (stdout, stderr) = self.output();
                panic!(
                    "the harness ended ({status}) before {prefixes:?} appeared in {} (it held \
                     {names:?})\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
                    tmp.display()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{prefixes:?} did not appear in {} within {} s (it holds {names:?})",
                tmp.display(),
                PATIENCE.as_secs()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        if let Ok(pid) = libc::pid_t::try_from(child.id()) {
            // SAFETY: `kill` has no memory effects; the child has not been waited for.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The names in `dir`.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A process referring to a directory.
#[derive(Debug, Clone)]
struct Referrer {
    pid: libc::pid_t,
    exe: String,
    cmdline: String,
    cwd: String,
}

impl Referrer {
    /// One line per process, for assertion messages.
    fn show(processes: &[Referrer]) -> String {
        processes
            .iter()
            .map(|p| {
                format!(
                    "\n  pid {} ({}) cwd `{}`: {}",
                    p.pid, p.exe, p.cwd, p.cmdline
                )
            })
            .collect()
    }

    fn is_postgres(&self) -> bool {
        self.exe.ends_with("/postgres") || self.exe.ends_with("/postgres (deleted)")
    }
}

/// Every process on the machine whose command line names `dir` (or a path inside it) or whose
/// working directory is under it; processes that vanish while looked at are ignored.
fn processes_referring_to(dir: &Path) -> Vec<Referrer> {
    let text = dir.to_string_lossy().into_owned();
    let inside = format!("{text}/");
    let me = std::process::id();
    let mut found = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let base = entry.path();
        let cmdline = std::fs::read(base.join("cmdline")).unwrap_or_default();
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let names_dir = args.iter().any(|a| *a == text || a.contains(&inside));
        let cwd = std::fs::read_link(base.join("cwd")).ok();
        let cwd_inside = cwd.as_deref().is_some_and(|c| c.starts_with(dir));
        if names_dir || cwd_inside {
            let exe = std::fs::read_link(base.join("exe"))
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            found.push(Referrer {
                pid: libc::pid_t::try_from(pid).unwrap_or(0),
                exe,
                cmdline: args.join(" "),
                cwd: cwd.map(|c| c.display().to_string()).unwrap_or_default(),
            });
        }
    }
    found
}

/// Waits up to `limit` for the processes `which` selects among those referring to `dir` to be
/// gone; returns those still there.
fn wait_gone(dir: &Path, limit: Duration, which: impl Fn(&Referrer) -> bool) -> Vec<Referrer> {
    let deadline = Instant::now() + limit;
    loop {
        let left: Vec<Referrer> = processes_referring_to(dir)
            .into_iter()
            .filter(|p| which(p))
            .collect();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Nothing of the harness is left: `tmp` is empty and, within [`GRACE`], no process refers to
/// it.
fn assert_nothing_left(tmp: &Path, after: &str) {
    let names = entries(tmp);
    let tree = std::process::Command::new("find")
        .arg(tmp)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    assert!(
        names.is_empty(),
        "{after}: {} still holds {names:?}\n{tree}",
        tmp.display()
    );
    let left = wait_gone(tmp, GRACE, |_| true);
    assert!(
        left.is_empty(),
        "{after}: processes still refer to {} after {} s:{}",
        tmp.display(),
        GRACE.as_secs(),
        Referrer::show(&left)
    );
}

/// The databases named `rewind_...` on the server at `url`.
async fn rewind_databases(url: &str) -> Vec<String> {
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .expect("connects to the test's PostgreSQL");
    // One statement, so the list and its count come from one snapshot even while a run is
    // creating or dropping databases.
    let (names, count): (Vec<String>, i64) = sqlx::query_as(
        "SELECT coalesce(array_agg(datname::text ORDER BY datname), '{}'), count(*) \
         FROM pg_database WHERE datname LIKE 'rewind\\_%'",
    )
    .fetch_one(&mut conn)
    .await
    .expect("lists the databases");
    assert_eq!(count, i64::try_from(names.len()).expect("a count"));
    let _ = conn.close().await;
    names
}

/// Waits (at most 20 s) until no other client session is active on the server at `url`: a
/// statement a killed or stopped run left under way (a `CREATE DATABASE`) has ended, so that
/// what it made is counted.
async fn quiesce(url: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .expect("connects to the test's PostgreSQL");
    loop {
        let active: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' \
             AND state <> 'idle' AND pid <> pg_backend_pid()",
        )
        .fetch_one(&mut conn)
        .await
        .expect("reads pg_stat_activity");
        if active == 0 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = conn.close().await;
}

/// A row of `pg_stat_activity`: pid, database, state, query.
type Session = (i32, Option<String>, Option<String>, Option<String>);

/// What the server at `url` is doing, and the `rewind_` databases with their comments: for
/// assertion messages.
async fn server_state(url: &str) -> String {
    let Ok(mut conn) = sqlx::PgConnection::connect(url).await else {
        return "(cannot connect)".to_owned();
    };
    let databases: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT datname::text, shobj_description(oid, 'pg_database') FROM pg_database \
         WHERE datname LIKE 'rewind\\_%' ORDER BY 1",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap_or_default();
    let sessions: Vec<Session> = sqlx::query_as(
        "SELECT pid, datname::text, state, query FROM pg_stat_activity \
         WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() ORDER BY pid",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap_or_default();
    let _ = conn.close().await;
    let mut text = String::from("\n  databases (name, comment):");
    for (name, comment) in databases {
        text.push_str(&format!("\n    {name} {comment:?}"));
    }
    text.push_str("\n  other sessions (pid, database, state, query):");
    for (pid, database, state, query) in sessions {
        text.push_str(&format!("\n    {pid} {database:?} {state:?} {query:?}"));
    }
    text
}

/// Runs the harness expecting it to refuse to run: exit `code`, stderr saying every one of
/// `needles` (what is wrong, and the offending value), nothing left in its `TMPDIR` and no
/// process referring to it, and, with `database_url` (passed as `--database-url`), no
/// `rewind_` database on that server afterwards.
async fn expect_refusal(
    args: &[&str],
    env: &[(&str, &str)],
    code: i32,
    needles: &[&str],
    database_url: Option<&str>,
) -> Finished {
    let tmp = Scratch::new("refusal");
    let mut all: Vec<&str> = args.to_vec();
    if let Some(url) = database_url {
        all.extend(["--database-url", url]);
    }
    let finished = Harness::run(&all, tmp.path(), env).wait(PATIENCE);
    finished.assert_code(code);
    for needle in needles {
        finished.assert_stderr_has(needle);
    }
    assert_nothing_left(tmp.path(), &format!("run {all:?}"));
    if let Some(url) = database_url {
        quiesce(url).await;
        let left = rewind_databases(url).await;
        assert!(
            left.is_empty(),
            "run {all:?} left databases {left:?}: {}",
            finished.describe()
        );
    }
    finished
}

/// The `Feature:` line of `features/initiation.feature`, the lines of its first scenario (tags
/// included), and the file's whole text.
fn first_initiation_scenario() -> (String, Vec<String>, String) {
    let text = std::fs::read_to_string(Path::new(ROOT).join("features/initiation.feature"))
        .expect("features/initiation.feature");
    let lines: Vec<&str> = text.lines().collect();
    let feature = lines
        .iter()
        .find(|l| l.trim_start().starts_with("Feature:"))
        .expect("a Feature line")
        .to_string();
    let scenario = lines
        .iter()
        .position(|l| l.trim_start().starts_with("Scenario:"))
        .expect("a first scenario");
    let mut start = scenario;
    while start > 0 && lines[start - 1].trim_start().starts_with('@') {
        start -= 1;
    }
    let end = lines[scenario..]
        .iter()
        .position(|l| l.trim().is_empty())
        .map_or(lines.len(), |n| scenario + n);
    let block = lines[start..end].iter().map(|l| l.to_string()).collect();
    (feature, block, text)
}

/// A feature file of the first initiation scenario, edited by `edit`, its `@ambiguity:` tags
/// left out (the register lists the original, not the copy); returns the file.
fn edited_scenario(dir: &Path, edit: impl Fn(&str) -> String) -> PathBuf {
    let (feature, block, _) = first_initiation_scenario();
    let mut text = format!("{feature}\n\n");
    for line in block {
        let line = if line.trim_start().starts_with('@') {
            line.split(' ')
                .filter(|w| !w.starts_with("@ambiguity:"))
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            edit(&line)
        };
        text.push_str(&line);
        text.push('\n');
    }
    let path = dir.join("edge.feature");
    std::fs::write(&path, text).expect("writes the feature");
    path
}

/// The 1-based line of the first line of `path` holding `needle`.
fn line_of(path: &Path, needle: &str) -> usize {
    std::fs::read_to_string(path)
        .expect("reads the feature")
        .lines()
        .position(|l| l.contains(needle))
        .map(|n| n + 1)
        .unwrap_or_else(|| panic!("`{needle}` is not in {}", path.display()))
}

// ---------------------------------------------------------------------------------------------
// A. SIGINT, SIGTERM, SIGHUP in the middle of a run
// ---------------------------------------------------------------------------------------------

fn interrupted_run(signal: libc::c_int, name: &str) {
    let tmp = Scratch::new(name);
    let mut harness = Harness::run(&["--name", OPENCODE], tmp.path(), &[]);
    harness.wait_for_dirs(tmp.path(), &["rewind-mocks-", "rewind-pg-"]);
    harness.signal(signal);
    let finished = harness.wait(PATIENCE);
    finished.assert_code(128 + signal);
    finished.assert_stderr_has(&format!("interrupted by {name}"));
    assert_nothing_left(tmp.path(), &format!("{name} mid-run"));
}

#[test]
fn sigint_mid_run_exits_130_and_leaves_nothing() {
    interrupted_run(libc::SIGINT, "SIGINT");
}

#[test]
fn sigterm_mid_run_exits_143_and_leaves_nothing() {
    interrupted_run(libc::SIGTERM, "SIGTERM");
}

#[test]
fn sighup_mid_run_exits_129_and_leaves_nothing() {
    interrupted_run(libc::SIGHUP, "SIGHUP");
}

#[test]
fn sigint_while_initdb_runs_stops_initdb_too() {
    let tmp = Scratch::new("sigint-initdb");
    // An empty cache, so that the cluster is made by `initdb` rather than copied.
    let cache = tempfile::tempdir().expect("a cache directory");
    let cache_dir = cache.path().to_str().expect("a UTF-8 path");
    let env = [("XDG_CACHE_HOME", cache_dir), ("HOME", cache_dir)];
    let mut harness = Harness::run(&["--name", OPENCODE], tmp.path(), &env);
    harness.wait_for_dirs(tmp.path(), &["rewind-pg-"]);
    // Interrupt while `initdb` (a process of its own, in a process group of its own) runs.
    let deadline = Instant::now() + PATIENCE;
    let initdb = |p: &Referrer| p.exe.ends_with("/initdb") || p.cmdline.contains("/initdb ");
    while !processes_referring_to(tmp.path()).iter().any(initdb) {
        assert!(
            harness.try_wait().is_none() && Instant::now() < deadline,
            "initdb was never seen running: {}",
            entries(tmp.path()).join(", ")
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    harness.signal(libc::SIGINT);
    let finished = harness.wait(PATIENCE);
    finished.assert_code(130);
    finished.assert_stderr_has("interrupted by SIGINT");
    // Killed by the run before it exits, not left to fail on its own later.
    let survivors = wait_gone(tmp.path(), Duration::from_millis(500), initdb);
    assert!(
        survivors.is_empty(),
        "initdb outlived the interrupted run:{}",
        Referrer::show(&survivors)
    );
    assert_nothing_left(tmp.path(), "SIGINT while initdb runs");
}

/// Clusters start from a copy of a cached `initdb`; an entry that does not start is made again.
#[test]
fn clusters_start_from_the_cached_initdb_and_a_damaged_entry_is_made_again() {
    let cache = tempfile::tempdir().expect("a cache directory");
    let cache_dir = cache.path().to_str().expect("a UTF-8 path");
    let env = [("XDG_CACHE_HOME", cache_dir), ("HOME", cache_dir)];
    let entries_dir = cache.path().join("rewind-conformance/initdb");
    let whole_entries = || -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(&entries_dir)
            .map(|e| e.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        found.retain(|p| p.join("complete").is_file());
        found
    };
    let tmp = Scratch::new("initdb-cache");
    let run = || {
        let finished = Harness::run(&["--name", ONE], tmp.path(), &env).wait(PATIENCE);
        finished.assert_code(0);
        finished.assert_stdout_has("conformance: 1 passed");
    };
    run();
    let kept = whole_entries();
    assert_eq!(kept.len(), 1, "one entry after the first run: {kept:?}");
    let control = kept[0].join("data/global/pg_control");
    assert!(control.is_file(), "the entry holds no data directory");
    std::fs::remove_file(&control).expect("damaging the entry");
    run();
    assert_eq!(
        whole_entries(),
        kept,
        "the damaged entry was not made again"
    );
    assert!(
        control.is_file(),
        "the entry that did not start was kept as it was"
    );
    assert_nothing_left(tmp.path(), "runs from the initdb cache");
}

// ---------------------------------------------------------------------------------------------
// B. SIGKILL: the next run reaps what the killed one left
// ---------------------------------------------------------------------------------------------

#[test]
fn sigkill_leaves_a_cluster_that_the_next_run_reaps() {
    let tmp = Scratch::new("sigkill");
    let mut harness = Harness::run(&["--name", OPENCODE], tmp.path(), &[]);
    harness.wait_for_dirs(tmp.path(), &["rewind-mocks-", "rewind-pg-"]);
    harness.signal(libc::SIGKILL);
    let killed = harness.wait(PATIENCE);
    assert_eq!(
        killed.status.code(),
        None,
        "killed by a signal: {}",
        killed.describe()
    );

    // What SIGKILL could not clean up: the cluster, its directory, a postmaster naming it.
    let names = entries(tmp.path());
    assert!(
        names.iter().any(|n| n.starts_with("rewind-pg-")),
        "no cluster directory left after SIGKILL: {names:?}"
    );
    let referrers = processes_referring_to(tmp.path());
    assert!(
        referrers
            .iter()
            .any(|p| p.is_postgres() && p.cmdline.contains(tmp.arg())),
        "no live postgres naming {} after SIGKILL:{}",
        tmp.path().display(),
        Referrer::show(&referrers)
    );
    // The mock OpenCode server (and any mock runtime) goes by itself once its parent is dead;
    // only PostgreSQL, which is detached on purpose, stays.
    let others = wait_gone(tmp.path(), Duration::from_secs(3), |p| !p.is_postgres());
    assert!(
        others.is_empty(),
        "processes other than PostgreSQL outlived the killed run by 3 s:{}",
        Referrer::show(&others)
    );

    let next = Harness::run(&["--name", ONE], tmp.path(), &[]).wait(PATIENCE);
    next.assert_code(0);
    next.assert_stderr_has("removed ");
    next.assert_stderr_has(" director");
    next.assert_stderr_has("that killed runs left");
    assert_nothing_left(tmp.path(), "the run after SIGKILL");
}

// ---------------------------------------------------------------------------------------------
// C. A given server (`--database-url`): no database outlives a run
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_given_servers_databases_are_dropped_on_sigterm_and_reaped_after_sigkill() {
    let cluster = EmbeddedCluster::start()
        .await
        .expect("the test's PostgreSQL starts");
    let url = cluster.admin_url().to_owned();
    let args = ["--database-url", url.as_str(), "--name", OPENCODE];

    // SIGTERM: the run drops its databases itself.
    let tmp = Scratch::new("url-sigterm");
    let mut harness = Harness::run(&args, tmp.path(), &[]);
    harness.wait_for_dirs(tmp.path(), &["rewind-mocks-"]);
    assert!(
        !rewind_databases(&url).await.is_empty(),
        "a scenario runs but no database exists"
    );
    harness.signal(libc::SIGTERM);
    let finished = harness.wait(PATIENCE);
    finished.assert_code(143);
    finished.assert_stderr_has("interrupted by SIGTERM");
    quiesce(&url).await;
    let left = rewind_databases(&url).await;
    assert!(
        left.is_empty(),
        "SIGTERM left databases {left:?}: {}",
        finished.describe()
    );
    assert_nothing_left(tmp.path(), "SIGTERM on a given server");

    // SIGKILL: the databases stay until the next run drops them.
    let tmp = Scratch::new("url-sigkill");
    let mut harness = Harness::run(&args, tmp.path(), &[]);
    harness.wait_for_dirs(tmp.path(), &["rewind-mocks-"]);
    harness.signal(libc::SIGKILL);
    let killed = harness.wait(PATIENCE);
    assert_eq!(killed.status.code(), None, "{}", killed.describe());
    let left = rewind_databases(&url).await;
    assert!(!left.is_empty(), "SIGKILL left no database");
    let before_next = server_state(&url).await;
    // The next run starts at once, as a rerun after a crash would: a `CREATE DATABASE` the
    // killed run's server session still has under way must not outlive the reaping either
    // (`quiesce` below lets it finish before the count).
    let next = Harness::run(
        &["--database-url", url.as_str(), "--name", ONE],
        tmp.path(),
        &[],
    )
    .wait(PATIENCE);
    next.assert_code(0);
    // A clone the killed run had under way may land after the count above: at least those
    // counted, each named.
    let dropped: usize = next
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("dropped ")?.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no `dropped N databases`: {}", next.describe()));
    assert!(
        dropped >= left.len(),
        "dropped {dropped} of {left:?}: {}",
        next.describe()
    );
    next.assert_stderr_has("that killed runs left");
    for name in &left {
        next.assert_stderr_has(name);
    }
    quiesce(&url).await;
    let after = rewind_databases(&url).await;
    assert!(
        after.is_empty(),
        "databases remain after the next run: {after:?}\nthe server before the next run:{}\n\
         the server now:{}\nthe next run: {}",
        before_next,
        server_state(&url).await,
        next.describe()
    );
    assert_nothing_left(tmp.path(), "the run after SIGKILL on a given server");
    cluster.stop();
}

/// Every usage and input error, on a given server: none creates a database there.
#[tokio::test]
async fn usage_and_input_errors_create_no_database_on_a_given_server() {
    let cluster = EmbeddedCluster::start()
        .await
        .expect("the test's PostgreSQL starts");
    let url = cluster.admin_url().to_owned();
    let inputs = Scratch::new("url-inputs");
    let file = inputs.path().join("file");
    std::fs::write(&file, "a regular file").expect("writes a file");
    let junit = file.join("x.xml");
    let junit = junit.to_str().expect("UTF-8");
    let empty = inputs.path().join("empty");
    std::fs::create_dir(&empty).expect("an empty directory");
    let missing = inputs.path().join("missing");
    std::fs::create_dir(&missing).expect("a directory");
    let feature = edited_scenario(&missing, |l| {
        l.replace("\"dm-one-agent\"", "\"no-such-fixture\"")
    });
    let cases: Vec<(Vec<&str>, i32, Vec<&str>)> = vec![
        (
            vec!["--tags", "((("],
            2,
            vec!["is not a tag expression", "`--tags (((`"],
        ),
        (
            vec!["--name", "["],
            2,
            vec!["is not a regular expression", "`--name [`"],
        ),
        (
            vec!["--tags", "@rule:no.such-rule"],
            2,
            vec!["selects none", "@rule:no.such-rule"],
        ),
        (
            vec!["--concurrency", "0"],
            2,
            vec!["'0'", "--concurrency", "would run no scenario"],
        ),
        (
            vec!["--concurrency", "100000"],
            2,
            vec![
                "'100000'",
                "--concurrency",
                "is more than this machine's limit",
            ],
        ),
        (
            vec!["--junit", junit],
            2,
            vec![junit, "cannot be written", "is not a directory"],
        ),
        (
            vec!["--features", empty.to_str().expect("UTF-8")],
            3,
            vec![empty.to_str().expect("UTF-8"), "holds no `*.feature` file"],
        ),
        (
            vec!["--features", missing.to_str().expect("UTF-8")],
            3,
            vec![feature.to_str().expect("UTF-8"), "no-such-fixture"],
        ),
    ];
    for (args, code, needles) in cases {
        expect_refusal(&args, &[], code, &needles, Some(&url)).await;
    }
    cluster.stop();
}

// ---------------------------------------------------------------------------------------------
// D. Exit codes
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn exit_2_for_a_tag_expression_that_does_not_parse() {
    expect_refusal(
        &["--tags", "((("],
        &[],
        2,
        &["is not a tag expression", "`--tags (((`"],
        None,
    )
    .await;
}

#[tokio::test]
async fn exit_2_for_a_name_regex_that_does_not_parse() {
    expect_refusal(
        &["--name", "["],
        &[],
        2,
        &["is not a regular expression", "`--name [`"],
        None,
    )
    .await;
}

#[tokio::test]
async fn exit_2_for_a_tag_expression_that_selects_nothing() {
    expect_refusal(
        &["--tags", "@rule:no.such-rule"],
        &[],
        2,
        &["--tags `@rule:no.such-rule` selects none"],
        None,
    )
    .await;
}

#[tokio::test]
async fn exit_2_for_a_name_that_selects_nothing() {
    expect_refusal(
        &["--name", "no scenario is called this"],
        &[],
        2,
        &["--name `no scenario is called this` selects none"],
        None,
    )
    .await;
}

#[tokio::test]
async fn exit_2_for_concurrency_0() {
    expect_refusal(
        &["--concurrency", "0"],
        &[],
        2,
        &[
            "invalid value '0' for '--concurrency",
            "would run no scenario",
        ],
        None,
    )
    .await;
}

#[tokio::test]
async fn exit_2_for_concurrency_minus_1() {
    expect_refusal(
        &["--concurrency", "-1"],
        &[],
        2,
        &[
            "invalid value '-1' for '--concurrency",
            "would run no scenario",
        ],
        None,
    )
    .await;
}

#[tokio::test]
async fn exit_2_for_concurrency_100000() {
    expect_refusal(
        &["--concurrency", "100000"],
        &[],
        2,
        &[
            "invalid value '100000' for '--concurrency",
            "is more than this machine's limit",
        ],
        None,
    )
    .await;
}

#[tokio::test]
async fn exit_2_for_postgres_url_without_a_url() {
    // `Harness::run` removes REWIND_DATABASE_URL from the child's environment.
    expect_refusal(
        &["--postgres", "url"],
        &[],
        2,
        &["`--postgres url` needs a server URL", "--database-url"],
        None,
    )
    .await;
}

#[tokio::test]
async fn exit_2_for_a_junit_path_inside_a_regular_file() {
    let inputs = Scratch::new("junit");
    let file = inputs.path().join("file");
    std::fs::write(&file, "a regular file").expect("writes a file");
    let junit = file.join("x.xml");
    let junit = junit.to_str().expect("UTF-8");
    expect_refusal(
        &["--junit", junit],
        &[],
        2,
        &[
            &format!("`--junit {junit}` cannot be written"),
            &format!("`{}` is not a directory", file.display()),
        ],
        None,
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(&file).expect("the file is still there"),
        "a regular file"
    );
}

#[tokio::test]
async fn exit_3_for_a_features_dir_without_features() {
    let inputs = Scratch::new("empty");
    let dir = inputs.arg();
    expect_refusal(
        &["--features", dir],
        &[],
        3,
        &[&format!("`{dir}` holds no `*.feature` file")],
        None,
    )
    .await;
}

#[tokio::test]
async fn exit_3_for_a_scenario_tagged_with_an_unknown_rule() {
    let inputs = Scratch::new("unknown-rule");
    let (_, block, text) = first_initiation_scenario();
    let tags = block.first().expect("the scenario's tag line").clone();
    assert!(tags.trim_start().starts_with('@'), "{tags}");
    let tagged = text.replacen(&tags, &format!("{tags} @rule:no.such-rule"), 1);
    let path = inputs.path().join("initiation.feature");
    std::fs::write(&path, tagged).expect("writes the feature");
    let scenario = block
        .iter()
        .find(|l| l.trim_start().starts_with("Scenario:"))
        .expect("the scenario line");
    let line = line_of(&path, scenario);
    let column = scenario.len() - scenario.trim_start().len() + 1;
    expect_refusal(
        &["--features", inputs.arg()],
        &[],
        3,
        &[
            &format!("{}:{line}:{column}", path.display()),
            "`@rule:no.such-rule`",
            "which the catalog does not define",
        ],
        None,
    )
    .await;
}

#[tokio::test]
async fn exit_3_for_a_scenario_naming_a_fixture_that_does_not_exist() {
    let inputs = Scratch::new("missing-fixture");
    let path = edited_scenario(inputs.path(), |l| {
        l.replace("\"dm-one-agent\"", "\"no-such-fixture\"")
    });
    let line = line_of(&path, "Given the conversation \"no-such-fixture\"");
    let finished = expect_refusal(
        &["--features", inputs.arg()],
        &[],
        3,
        &[
            &format!("{}:{line}", path.display()),
            "names fixture `no-such-fixture`",
        ],
        None,
    )
    .await;
    assert!(
        finished.elapsed < Duration::from_secs(5),
        "a missing fixture is found before PostgreSQL starts: {}",
        finished.describe()
    );
}

#[tokio::test]
async fn exit_3_for_a_leak_allowance_naming_an_unknown_rule() {
    let inputs = Scratch::new("leak-allow");
    let path = inputs.path().join("leak-allow.yaml");
    std::fs::write(
        &path,
        "version: 1\nallowed:\n  - table: scope_fanout_outbox\n    column: payload\n    \
         rules: [apply.no-such-rule]\n    reason: a typo\n",
    )
    .expect("allow-list written");
    let file = path.to_str().expect("a UTF-8 path");
    expect_refusal(
        &["--leak-allow", file, "--name", ONE],
        &[],
        3,
        &[
            &format!("{file}:3:5"),
            "rule `apply.no-such-rule` is not in the catalog",
        ],
        None,
    )
    .await;
}

#[tokio::test]
async fn exit_3_for_a_pg_bin_without_postgresql() {
    expect_refusal(
        &["--name", ONE],
        &[("PG_BIN", "/nonexistent")],
        3,
        &[
            "`PG_BIN` is `/nonexistent`",
            "holds no `initdb` and `pg_ctl`",
        ],
        None,
    )
    .await;
}

#[test]
fn exit_1_when_a_scenario_fails() {
    let inputs = Scratch::new("failing");
    let path = edited_scenario(inputs.path(), |l| {
        if l.trim() == "Then the rewind is refused" {
            l.replace("the rewind is refused", "the rewind completes")
        } else {
            l.to_owned()
        }
    });
    line_of(&path, "Then the rewind completes");
    let tmp = Scratch::new("failing-run");
    let finished = Harness::run(&["--features", inputs.arg()], tmp.path(), &[]).wait(PATIENCE);
    finished.assert_code(1);
    finished.assert_stdout_has("expected the rewind to complete, but the rewind was refused");
    // cucumber's failure block names the feature by a path that resolves from where the run
    // started (it used to cut the leading `/` off a path outside the project).
    let defined = finished
        .stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("Defined: "))
        .unwrap_or_else(|| panic!("no `Defined:` line: {}", finished.describe()));
    let file = defined.rsplitn(3, ':').nth(2).expect("path:line:column");
    assert!(
        Path::new(ROOT).join(file).is_file(),
        "the failure block names `{file}`, which is no file from {ROOT}"
    );
    finished.assert_stdout_has("conformance: 0 passed, 1 failed");
    assert_nothing_left(tmp.path(), "a failing run");
}

#[test]
fn exit_0_when_the_selected_scenario_passes() {
    let tmp = Scratch::new("passing");
    let finished = Harness::run(&["--name", ONE], tmp.path(), &[]).wait(PATIENCE);
    finished.assert_code(0);
    finished.assert_stdout_has("conformance: 1 passed, 0 failed");
    assert_nothing_left(tmp.path(), "a passing run");
}

// ---------------------------------------------------------------------------------------------
// E. --keep-databases on the embedded default
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn keep_databases_leaves_a_reachable_cluster_and_says_how_to_remove_it() {
    let tmp = Scratch::new("keep");
    let finished =
        Harness::run(&["--keep-databases", "--name", ONE], tmp.path(), &[]).wait(PATIENCE);
    finished.assert_code(0);
    finished.assert_stdout_has("kept 2 databases");
    let kept: Vec<(String, String)> = finished
        .stdout
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next()?;
            let url = words.next()?;
            (name.starts_with("rewind_") && url.starts_with("postgres://"))
                .then(|| (name.to_owned(), url.to_owned()))
        })
        .collect();
    assert_eq!(
        kept.len(),
        2,
        "two databases listed: {}",
        finished.describe()
    );
    assert!(
        kept.iter().any(|(name, _)| name.ends_with("_template")),
        "the template is listed: {kept:?}"
    );
    for (name, url) in &kept {
        assert!(url.ends_with(&format!("/{name}")), "{name}: {url}");
    }
    let mut conn = sqlx::PgConnection::connect(&kept[1].1)
        .await
        .unwrap_or_else(|e| panic!("connects to {}: {e}", kept[1].1));
    let one: i32 = sqlx::query_scalar("SELECT 1")
        .fetch_one(&mut conn)
        .await
        .expect("SELECT 1");
    assert_eq!(one, 1);
    let _ = conn.close().await;

    // Only the kept cluster is left, and it runs.
    let names = entries(tmp.path());
    assert!(
        names.len() == 1 && names[0].starts_with("rewind-pg-"),
        "only the kept cluster is left: {names:?}"
    );
    let remove = finished
        .stdout
        .lines()
        .find_map(|l| l.split_once("stop and remove it with: ").map(|(_, c)| c))
        .unwrap_or_else(|| panic!("no removal command: {}", finished.describe()))
        .to_owned();
    let status = Command::new("sh")
        .args(["-c", &remove])
        .stdout(Stdio::null())
        .status()
        .expect("sh runs");
    assert!(status.success(), "`{remove}` failed: {status}");
    assert_nothing_left(tmp.path(), &format!("`{remove}`"));
}
