//! A mock (or real) OpenCode server process for the harness: started with `serve --port 0
//! --hostname 127.0.0.1`, ready once it printed its listening line, killed when dropped.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::state::runtime_home;

/// How long [`ServerProcess::start`] waits for the listening line.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The stdout line a server prints once it accepts connections, before its URL.
pub const LISTENING_PREFIX: &str = "opencode server listening on ";

/// A running OpenCode server.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    base_url: String,
    data_home: PathBuf,
}

/// The file the server's stderr goes to: `<runtime home>/mock/stderr.log`.
pub fn stderr_log_path(data_home: &Path) -> PathBuf {
    crate::mock_dir(&runtime_home(data_home)).join("stderr.log")
}

fn stderr_tail(data_home: &Path) -> String {
    let text = std::fs::read_to_string(stderr_log_path(data_home)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

impl ServerProcess {
    /// Spawns `<program> <prefix_args...> serve --port 0 --hostname 127.0.0.1` in `cwd` with
    /// `XDG_DATA_HOME=data_home` (stderr appended to [`stderr_log_path`]) and waits, at most
    /// [`START_TIMEOUT`], for its listening line.
    pub async fn start(
        program: &Path,
        prefix_args: &[String],
        data_home: &Path,
        cwd: &Path,
    ) -> io::Result<ServerProcess> {
        Self::start_with_env(program, prefix_args, data_home, cwd, &[]).await
    }

    /// [`start`](Self::start) with extra environment variables (e.g. `OPENCODE_CONFIG`).
    pub async fn start_with_env(
        program: &Path,
        prefix_args: &[String],
        data_home: &Path,
        cwd: &Path,
        env: &[(String, String)],
    ) -> io::Result<ServerProcess> {
        let log_path = stderr_log_path(data_home);
        if let Some(dir) = log_path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)?;
        let mut command = Command::new(program);
        command
            .args(prefix_args)
            .args(["serve", "--port", "0", "--hostname", "127.0.0.1"])
            .current_dir(cwd)
            .env("XDG_DATA_HOME", data_home)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|e| {
            io::Error::new(e.kind(), format!("cannot start {}: {e}", program.display()))
        })?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("the server's stdout is not piped"))?;
        let mut lines = BufReader::new(stdout).lines();
        let wait = async {
            while let Some(line) = lines.next_line().await? {
                if let Some(url) = line.trim().strip_prefix(LISTENING_PREFIX) {
                    return Ok(Some(url.trim().trim_end_matches('/').to_owned()));
                }
            }
            Ok::<_, io::Error>(None)
        };
        let outcome = tokio::time::timeout(START_TIMEOUT, wait).await;
        let failure = match outcome {
            Ok(Ok(Some(base_url))) => {
                // Keep draining stdout so the server never blocks on a full pipe.
                tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
                return Ok(ServerProcess {
                    child,
                    base_url,
                    data_home: data_home.to_owned(),
                });
            }
            Ok(Ok(None)) => "it closed stdout without printing its listening line".to_owned(),
            Ok(Err(e)) => format!("cannot read its stdout: {e}"),
            Err(_) => format!("no listening line within {} s", START_TIMEOUT.as_secs()),
        };
        let _ = child.start_kill();
        let status = child.wait().await.ok();
        Err(io::Error::other(format!(
            "{} did not start: {failure} (exit: {}); stderr:\n{}",
            program.display(),
            status.map_or_else(|| "unknown".to_owned(), |s| s.to_string()),
            stderr_tail(data_home)
        )))
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The `XDG_DATA_HOME` it runs with.
    pub fn data_home(&self) -> &Path {
        &self.data_home
    }

    /// Its runtime home, `<data_home>/opencode` (journal, faults, sessions).
    pub fn runtime_home(&self) -> PathBuf {
        runtime_home(&self.data_home)
    }

    /// The exit status if it has exited (e.g. an injected crash: status 134).
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// Waits at most `timeout` for it to exit on its own.
    pub async fn wait_exit(&mut self, timeout: Duration) -> io::Result<Option<ExitStatus>> {
        match tokio::time::timeout(timeout, self.child.wait()).await {
            Ok(status) => status.map(Some),
            Err(_) => Ok(None),
        }
    }

    /// Kills it (if still running) and reaps it.
    pub async fn stop(mut self) -> io::Result<()> {
        if self.child.try_wait()?.is_none() {
            self.child.start_kill()?;
        }
        self.child.wait().await.map(|_| ())
    }
}
