//! [`EmbeddedCluster`]: an ephemeral PostgreSQL cluster started from the machine's binaries.
//!
//! The cluster lives in a fresh temporary directory, listens on a free loopback port (and a unix
//! socket in the same directory), and is stopped and removed on drop, on Ctrl-C (through
//! [`stop_all_embedded`]) and, should the process die anyway, by the next start, which reaps
//! clusters whose owning process is gone. `initdb` refuses to run as root: as root the directory
//! is handed to the `postgres` account (or `nobody`) and the commands run through `runuser`.

use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::initdb_cache;
use super::ProvisionError;

/// Prefix of every cluster directory under the temporary directory.
const DIR_PREFIX: &str = "rewind-pg-";

/// The options of every `initdb` (the data directory aside): no durability is needed.
const INITDB_OPTIONS: [&str; 8] = [
    "-A",
    "trust",
    "-U",
    "postgres",
    "-E",
    "UTF8",
    "--locale=C",
    "--no-sync",
];

/// Directories of the clusters this process started and has not stopped yet.
static RUNNING: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::new(Vec::new());

/// Process groups of the PostgreSQL commands (`initdb`, `pg_ctl`) running now.
static COMMANDS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Set once [`stop_all_embedded`] ran: no new command starts after it.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// A marker file: the user asked to keep this cluster (`--keep-databases`); no later run reaps
/// it.
const KEPT_FILE: &str = ".rewind-kept";

/// A running ephemeral cluster; dropping it stops the server and removes its directory.
#[derive(Debug)]
pub struct EmbeddedCluster {
    dir: PathBuf,
    bindir: PathBuf,
    admin_url: String,
    port: u16,
    stopped: bool,
}

/// A cluster left running on purpose ([`EmbeddedCluster::keep`]).
#[derive(Debug, Clone)]
pub struct KeptCluster {
    /// The cluster's directory (data, socket, log).
    pub dir: PathBuf,
    /// The URL of its `postgres` database.
    pub admin_url: String,
    /// A shell command that stops the server and removes the directory.
    pub remove_command: String,
}

/// Where clusters live when the machine has memory-backed storage with room: `/dev/shm`
/// (tmpfs), unless `TMPDIR` names a place on purpose. `CREATE DATABASE` copies a template file
/// by file (some 400 files for the spec schema): on tmpfs that takes milliseconds, on a virtual
/// disk often a hundred or more, and every scenario makes one.
pub fn memory_dir() -> Option<PathBuf> {
    /// What must be free there: a full run holds the cluster, its WAL and the databases made
    /// ahead (a few hundred megabytes).
    const NEEDED: u64 = 2 << 30;
    if std::env::var_os("TMPDIR").is_some() {
        return None;
    }
    let dir = Path::new("/dev/shm");
    let path = std::ffi::CString::new("/dev/shm").ok()?;
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a valid C string and `stat` a properly sized, writable struct.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    let free = stat.f_bavail.saturating_mul(stat.f_frsize);
    let writable = unsafe { libc::access(path.as_ptr(), libc::W_OK | libc::X_OK) } == 0;
    (dir.is_dir() && writable && free >= NEEDED).then(|| dir.to_path_buf())
}

/// Finds a directory holding both `initdb` and `pg_ctl`.
///
/// Looks, in order, at `PG_BIN`, `pg_config --bindir`, the directories of `PATH`, and the newest
/// `/usr/lib/postgresql/*/bin`.
pub fn find_pg_bindir() -> Result<PathBuf, ProvisionError> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("PG_BIN").filter(|d| !d.is_empty()) {
        // Said explicitly, so a wrong value is an error rather than a silent fallback.
        let dir = PathBuf::from(dir);
        if !(dir.join("initdb").is_file() && dir.join("pg_ctl").is_file()) {
            return Err(ProvisionError::BadPgBin {
                dir,
                found: pg_bin_finding(&candidates_after_pg_bin()),
            });
        }
        candidates.push(dir);
    }
    candidates.extend(candidates_after_pg_bin());
    for dir in &candidates {
        let initdb = dir.join("initdb");
        let pg_ctl = dir.join("pg_ctl");
        if initdb.is_file() && pg_ctl.is_file() {
            // PATH often holds symlinks; the real directory also holds `postgres` itself.
            let initdb = std::fs::canonicalize(&initdb).unwrap_or(initdb);
            return Ok(initdb
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or(dir.clone()));
        }
    }
    Err(ProvisionError::BinariesNotFound {
        searched: "`PG_BIN`, `pg_config --bindir`, PATH, /usr/lib/postgresql/*/bin".to_owned(),
    })
}

/// What a wrong `PG_BIN` could be replaced by: the first directory found elsewhere.
fn pg_bin_finding(candidates: &[PathBuf]) -> String {
    match candidates
        .iter()
        .find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
    {
        Some(dir) => format!(
            "unset it to use `{}`, found on this machine, or point it at another directory \
             holding both",
            dir.display()
        ),
        None => "point it at the directory holding both (`pg_config --bindir` prints it), or \
                 unset it and give a server with `--database-url`"
            .to_owned(),
    }
}

/// The places searched after `PG_BIN`: `pg_config --bindir`, PATH, `/usr/lib/postgresql/*/bin`.
fn candidates_after_pg_bin() -> Vec<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        if out.status.success() {
            candidates.push(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path));
    }
    let mut versioned: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    versioned.sort();
    candidates.extend(versioned.into_iter().rev().map(|(_, dir)| dir));
    candidates
}

impl EmbeddedCluster {
    /// Initialises and starts a new cluster; reaps the leftovers of dead runs first.
    pub async fn start() -> Result<Self, ProvisionError> {
        let bindir = find_pg_bindir()?;
        tokio::task::spawn_blocking(move || Self::start_blocking(bindir))
            .await
            .map_err(|e| ProvisionError::Io {
                dir: std::env::temp_dir(),
                source: std::io::Error::other(e.to_string()),
            })?
    }

    fn start_blocking(bindir: PathBuf) -> Result<Self, ProvisionError> {
        reap_leftovers();
        let in_memory = memory_dir();
        let dir = in_memory
            .clone()
            .unwrap_or_else(std::env::temp_dir)
            .join(format!(
                "{DIR_PREFIX}{}-{}",
                std::process::id(),
                uuid::Uuid::new_v4().simple()
            ));
        let io = |source| ProvisionError::Io {
            dir: dir.clone(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        crate::leftovers::claim(&dir).map_err(io)?;
        // Registered from the start: an interruption during `initdb` removes it too.
        register(&dir, &bindir);
        let mut cluster = EmbeddedCluster {
            dir: dir.clone(),
            bindir,
            admin_url: String::new(),
            port: 0,
            stopped: false,
        };
        let account = run_as_account();
        if let Some(account) = &account {
            chown_recursive(&dir, account).map_err(io)?;
        }
        let data = dir.join("data");
        let cached = cluster.init_data(account.as_deref(), &data)?;
        let port = free_port().map_err(io)?;
        let options = format!(
            // Throwaway data: no durability, and minimal WAL so that cloning a template
            // database per scenario costs milliseconds. In memory, WAL is held to 512 MB.
            "-c listen_addresses=127.0.0.1 -p {port} -k {} -c fsync=off -c synchronous_commit=off \
             -c full_page_writes=off -c wal_level=minimal -c max_wal_senders=0 \
             -c checkpoint_timeout=1h -c max_wal_size={} -c max_connections=300 \
             -c shared_buffers=128MB",
            dir.display(),
            if in_memory.is_some() { "512MB" } else { "4GB" },
        );
        cluster.port = port;
        let data_arg = data.to_string_lossy().into_owned();
        let log_arg = dir.join("server.log").to_string_lossy().into_owned();
        let start = [
            "-w", "-t", "60", "-D", &data_arg, "-l", &log_arg, "-o", &options, "start",
        ];
        match (cluster.run(account.as_deref(), "pg_ctl", &start), cached) {
            (Ok(()), _) => {}
            (Err(error), Some(entry)) => {
                // A copy that does not start (the cache damaged by hand, say): made again by
                // `initdb`, once.
                tracing::warn!(%error, "the cluster did not start from the cached initdb");
                initdb_cache::forget(&entry);
                stop_cluster(&cluster.bindir, &dir);
                std::fs::remove_dir_all(&data).map_err(io)?;
                cluster.run_initdb(account.as_deref(), &data)?;
                cluster.store_initdb(account.as_deref(), &data);
                cluster.run(account.as_deref(), "pg_ctl", &start)?;
            }
            (Err(error), None) => return Err(error),
        }
        cluster.admin_url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
        tracing::info!(dir = %dir.display(), port, "embedded PostgreSQL started");
        Ok(cluster)
    }

    /// The URL of the `postgres` database, as the `postgres` superuser.
    pub fn admin_url(&self) -> &str {
        &self.admin_url
    }

    /// The cluster's directory (data, socket, log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stops the server immediately and removes the directory.
    pub fn stop(mut self) {
        self.stop_inner();
    }

    /// Leaves the server running and its directory in place, for the user to inspect; no later
    /// run reaps it. Returns how to reach and remove it.
    pub fn keep(mut self) -> std::io::Result<KeptCluster> {
        std::fs::write(self.dir.join(KEPT_FILE), "kept with --keep-databases\n")?;
        unregister(&self.dir);
        self.stopped = true;
        let data = self.dir.join("data");
        let pg_ctl = format!(
            "{} -D {} -m fast stop",
            self.bindir.join("pg_ctl").display(),
            data.display()
        );
        let pg_ctl = match run_as_account() {
            Some(account) => format!("{} -u {account} -- {pg_ctl}", runuser().display()),
            None => pg_ctl,
        };
        let kept = KeptCluster {
            dir: self.dir.clone(),
            admin_url: self.admin_url.clone(),
            remove_command: format!("{pg_ctl} && rm -rf {}", self.dir.display()),
        };
        // Nothing of `self` is to be undone now.
        self.dir = PathBuf::new();
        Ok(kept)
    }

    /// The port the server listens on (loopback).
    pub fn port(&self) -> u16 {
        self.port
    }

    fn stop_inner(&mut self) {
        if self.dir.as_os_str().is_empty() {
            return;
        }
        if !self.stopped {
            stop_cluster(&self.bindir, &self.dir);
            unregister(&self.dir);
            self.stopped = true;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    /// Writes the new cluster's data directory: a copy of the cached `initdb` output when there
    /// is one ([`initdb_cache`]; returns its entry), else `initdb`'s, which is then cached.
    fn init_data(
        &self,
        account: Option<&str>,
        data: &Path,
    ) -> Result<Option<PathBuf>, ProvisionError> {
        let entry = initdb_cache::entry_name(&self.bindir, account, &INITDB_OPTIONS);
        if let Some(cached) = entry
            .as_deref()
            .and_then(|name| initdb_cache::restore(name, data))
        {
            if let Some(account) = account {
                chown_recursive(data, account).map_err(|source| ProvisionError::Io {
                    dir: data.to_path_buf(),
                    source,
                })?;
            }
            return Ok(Some(cached));
        }
        self.run_initdb(account, data)?;
        self.store_initdb(account, data);
        Ok(None)
    }

    /// Keeps `initdb`'s output in `data` for the next clusters ([`initdb_cache`]).
    fn store_initdb(&self, account: Option<&str>, data: &Path) {
        if let Some(name) = initdb_cache::entry_name(&self.bindir, account, &INITDB_OPTIONS) {
            initdb_cache::store(&name, data);
        }
    }

    fn run_initdb(&self, account: Option<&str>, data: &Path) -> Result<(), ProvisionError> {
        let data = data.to_string_lossy();
        let mut args = INITDB_OPTIONS.to_vec();
        args.extend(["-D", &data]);
        self.run(account, "initdb", &args)
    }

    fn run(
        &self,
        account: Option<&str>,
        program: &str,
        args: &[&str],
    ) -> Result<(), ProvisionError> {
        let binary = self.bindir.join(program);
        let mut command = match account {
            Some(account) => {
                let mut c = Command::new(runuser());
                c.args(["-u", account, "--"]).arg(&binary);
                c
            }
            None => Command::new(&binary),
        };
        command.args(args).env("LC_ALL", "C");
        // A group of its own: a terminal's Ctrl-C reaches the harness only, which stops the
        // command itself ([`stop_all_embedded`]) and removes what it made.
        command.process_group(0);
        let shown = match account {
            Some(account) => format!(
                "{} -u {account} -- {} {}",
                runuser().display(),
                binary.display(),
                args.join(" ")
            ),
            None => format!("{} {}", binary.display(), args.join(" ")),
        };
        let spawn_error = |detail: String| ProvisionError::Command {
            command: shown.clone(),
            dir: self.dir.clone(),
            detail,
        };
        if STOPPING.load(Ordering::SeqCst) {
            return Err(spawn_error("the run is being interrupted".to_owned()));
        }
        let child = command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| spawn_error(e.to_string()))?;
        let group = i32::try_from(child.id()).unwrap_or(0);
        lock(&COMMANDS).push(group);
        let output = child.wait_with_output();
        lock(&COMMANDS).retain(|g| *g != group);
        let output = output.map_err(|e| spawn_error(e.to_string()))?;
        if output.status.success() {
            return Ok(());
        }
        let mut detail = format!("{}", output.status);
        for stream in [&output.stderr, &output.stdout] {
            let text = String::from_utf8_lossy(stream);
            if !text.trim().is_empty() {
                detail.push_str(": ");
                detail.push_str(text.trim());
            }
        }
        if let Ok(log) = std::fs::read_to_string(self.dir.join("server.log")) {
            detail.push_str(" (server log: ");
            detail.push_str(log.trim());
            detail.push(')');
        }
        Err(ProvisionError::Command {
            command: shown,
            dir: self.dir.clone(),
            detail,
        })
    }
}

impl Drop for EmbeddedCluster {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Stops every cluster this process started or is starting (killing an `initdb` or `pg_ctl`
/// under way) and removes their directories; for the signal handlers, which exit without
/// running destructors.
pub fn stop_all_embedded() {
    STOPPING.store(true, Ordering::SeqCst);
    for group in std::mem::take(&mut *lock(&COMMANDS)) {
        if group > 0 {
            // SAFETY: `kill` has no memory effects; the group is the command's own.
            unsafe {
                libc::kill(-group, libc::SIGKILL);
            }
        }
    }
    let running = std::mem::take(&mut *lock(&RUNNING));
    for (dir, bindir) in running {
        stop_cluster(&bindir, &dir);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Removes what killed runs left under the temporary directory: stops their clusters, kills
/// their mock servers, removes their directories. Clusters kept with `--keep-databases` stay.
pub fn reap_leftovers() -> crate::leftovers::Reaped {
    crate::leftovers::reap_stale(&|dir: &Path| {
        if dir.join(KEPT_FILE).exists() {
            return false;
        }
        kill_postmaster(dir);
        true
    })
}

/// Stops the server of a cluster whose owner is gone, without needing its binaries: the
/// postmaster of `postmaster.pid`, if it still serves this directory, gets SIGQUIT (immediate
/// shutdown) and then SIGKILL.
fn kill_postmaster(dir: &Path) {
    let data = dir.join("data");
    let Some(pid) = std::fs::read_to_string(data.join("postmaster.pid"))
        .ok()
        .and_then(|text| text.lines().next()?.trim().parse::<i32>().ok())
    else {
        return;
    };
    let serves_dir = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|cmdline| String::from_utf8_lossy(&cmdline).contains(&*data.to_string_lossy()))
        .unwrap_or(false);
    if !serves_dir {
        return;
    }
    for (signal, wait_ms) in [(libc::SIGQUIT, 5000), (libc::SIGKILL, 2000)] {
        // SAFETY: `kill` has no memory effects; the process was checked to be this cluster's.
        unsafe {
            libc::kill(pid, signal);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(wait_ms);
        while std::path::Path::new(&format!("/proc/{pid}")).exists()
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return;
        }
    }
}

fn register(dir: &Path, bindir: &Path) {
    lock(&RUNNING).push((dir.to_path_buf(), bindir.to_path_buf()));
}

fn unregister(dir: &Path) {
    lock(&RUNNING).retain(|(d, _)| d != dir);
}

/// Stops the server of `dir` at once. The data is throwaway, so "immediate" is the right mode.
fn stop_cluster(bindir: &Path, dir: &Path) {
    let data = dir.join("data");
    if !data.join("postmaster.pid").exists() {
        return;
    }
    let pg_ctl = bindir.join("pg_ctl");
    let mut command = match run_as_account() {
        Some(account) => {
            let mut c = Command::new(runuser());
            c.args(["-u", &account, "--"]).arg(&pg_ctl);
            c
        }
        None => Command::new(&pg_ctl),
    };
    let status = command
        .args([
            "-D",
            &data.to_string_lossy(),
            "-m",
            "immediate",
            "-w",
            "stop",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        tracing::warn!(dir = %dir.display(), "could not stop embedded PostgreSQL cleanly");
    }
}

/// The account to run PostgreSQL as: `None` for an ordinary user, `postgres` (or `nobody`)
/// for root, since `initdb` refuses to run as root.
fn run_as_account() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    for account in ["postgres", "nobody"] {
        let known = Command::new("id")
            .arg("-u")
            .arg(account)
            .output()
            .is_ok_and(|o| o.status.success());
        if known {
            return Some(account.to_owned());
        }
    }
    Some("nobody".to_owned())
}

/// `runuser`, which lives in an sbin directory that a trimmed PATH may lack.
fn runuser() -> PathBuf {
    ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("runuser"))
}

fn chown_recursive(dir: &Path, account: &str) -> std::io::Result<()> {
    let status = Command::new("chown")
        .arg("-R")
        .arg(account)
        .arg(dir)
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "chown -R {account} failed: {status}"
        )))
    }
}

fn free_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_binaries_or_names_every_place_searched() {
        match find_pg_bindir() {
            Ok(dir) => assert!(dir.join("pg_ctl").is_file()),
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains("PG_BIN") && text.contains("--database-url"));
            }
        }
    }

    #[test]
    fn a_cluster_without_its_pid_file_yet_is_not_reaped_while_its_owner_runs() {
        let dir = std::env::temp_dir().join(format!(
            "{DIR_PREFIX}{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).expect("a cluster directory");
        reap_leftovers();
        let kept = dir.exists();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            kept,
            "a concurrent start reaped a cluster that is being created"
        );
    }

    #[tokio::test]
    async fn starts_answers_and_cleans_up() {
        if find_pg_bindir().is_err() {
            eprintln!("no PostgreSQL binaries here; skipping");
            return;
        }
        let cluster = EmbeddedCluster::start().await.expect("cluster starts");
        let dir = cluster.dir().to_path_buf();
        let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(cluster.admin_url())
            .await
            .expect("connects");
        let one: i32 = sqlx::query_scalar("select 1")
            .fetch_one(&mut conn)
            .await
            .expect("select");
        assert_eq!(one, 1);
        drop(conn);
        cluster.stop();
        assert!(!dir.exists(), "cluster directory removed");
    }
}
