//! [`EmbeddedCluster`]: an ephemeral PostgreSQL cluster started from the machine's binaries.
//!
//! The cluster lives in a fresh temporary directory, listens on a free loopback port (and a unix
//! socket in the same directory), and is stopped and removed on drop, on Ctrl-C (through
//! [`stop_all_embedded`]) and, should the process die anyway, by the next start, which reaps
//! clusters whose owning process is gone. `initdb` refuses to run as root: as root the directory
//! is handed to the `postgres` account (or `nobody`) and the commands run through `runuser`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use super::ProvisionError;

/// Prefix of every cluster directory under the temporary directory.
const DIR_PREFIX: &str = "rewind-pg-";

/// Directories of the clusters this process started and has not stopped yet.
static RUNNING: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::new(Vec::new());

/// A running ephemeral cluster; dropping it stops the server and removes its directory.
#[derive(Debug)]
pub struct EmbeddedCluster {
    dir: PathBuf,
    bindir: PathBuf,
    admin_url: String,
    stopped: bool,
}

/// Finds a directory holding both `initdb` and `pg_ctl`.
///
/// Looks, in order, at `PG_BIN`, `pg_config --bindir`, the directories of `PATH`, and the newest
/// `/usr/lib/postgresql/*/bin`.
pub fn find_pg_bindir() -> Result<PathBuf, ProvisionError> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("PG_BIN") {
        candidates.push(PathBuf::from(dir));
    }
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
        reap_stale_clusters(&bindir);
        let dir = std::env::temp_dir().join(format!(
            "{DIR_PREFIX}{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let io = |source| ProvisionError::Io {
            dir: dir.clone(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        std::fs::write(dir.join("owner.pid"), std::process::id().to_string()).map_err(io)?;
        let mut cluster = EmbeddedCluster {
            dir: dir.clone(),
            bindir,
            admin_url: String::new(),
            stopped: true,
        };
        let account = run_as_account();
        if let Some(account) = &account {
            chown_recursive(&dir, account).map_err(io)?;
        }
        let data = dir.join("data");
        cluster.run(
            account.as_deref(),
            "initdb",
            &[
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
                "-D",
                &data.to_string_lossy(),
            ],
        )?;
        let port = free_port().map_err(io)?;
        let options = format!(
            // Throwaway data: no durability, and minimal WAL so that cloning a template
            // database per scenario costs tens of milliseconds rather than hundreds.
            "-c listen_addresses=127.0.0.1 -p {port} -k {} -c fsync=off -c synchronous_commit=off \
             -c full_page_writes=off -c wal_level=minimal -c max_wal_senders=0 \
             -c checkpoint_timeout=1h -c max_wal_size=4GB -c max_connections=300 \
             -c shared_buffers=128MB",
            dir.display()
        );
        cluster.stopped = false;
        register(&dir, &cluster.bindir);
        cluster.run(
            account.as_deref(),
            "pg_ctl",
            &[
                "-w",
                "-t",
                "60",
                "-D",
                &data.to_string_lossy(),
                "-l",
                &dir.join("server.log").to_string_lossy(),
                "-o",
                &options,
                "start",
            ],
        )?;
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

    fn stop_inner(&mut self) {
        if !self.stopped {
            stop_cluster(&self.bindir, &self.dir);
            unregister(&self.dir);
            self.stopped = true;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
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
        let shown = match account {
            Some(account) => format!(
                "{} -u {account} -- {} {}",
                runuser().display(),
                binary.display(),
                args.join(" ")
            ),
            None => format!("{} {}", binary.display(), args.join(" ")),
        };
        let output = command.output().map_err(|e| ProvisionError::Command {
            command: shown.clone(),
            dir: self.dir.clone(),
            detail: e.to_string(),
        })?;
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

/// Stops every cluster this process started; for the Ctrl-C handler.
pub fn stop_all_embedded() {
    let running = match RUNNING.lock() {
        Ok(mut guard) => std::mem::take(&mut *guard),
        Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
    };
    for (dir, bindir) in running {
        stop_cluster(&bindir, &dir);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn register(dir: &Path, bindir: &Path) {
    if let Ok(mut guard) = RUNNING.lock() {
        guard.push((dir.to_path_buf(), bindir.to_path_buf()));
    }
}

fn unregister(dir: &Path) {
    if let Ok(mut guard) = RUNNING.lock() {
        guard.retain(|(d, _)| d != dir);
    }
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

/// Removes cluster directories whose owning process no longer runs.
fn reap_stale_clusters(bindir: &Path) {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with(DIR_PREFIX) {
            continue;
        }
        let dir = entry.path();
        // A cluster being created has no `owner.pid` yet: its name (`rewind-pg-<pid>-<uuid>`)
        // also names its owner, so a concurrent run does not reap it from under its creator.
        let owner = std::fs::read_to_string(dir.join("owner.pid"))
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
            .or_else(|| {
                let rest = name.to_string_lossy();
                let rest = rest.strip_prefix(DIR_PREFIX)?;
                rest.split('-').next()?.parse::<i32>().ok()
            });
        let alive = owner.is_some_and(process_alive);
        if !alive {
            tracing::info!(dir = %dir.display(), "reaping a stale embedded cluster");
            stop_cluster(bindir, &dir);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

fn process_alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks that the process exists; it sends nothing.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
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
        reap_stale_clusters(Path::new("/nonexistent"));
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
