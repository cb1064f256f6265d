//! Claude Code under `--runtimes real`: the environment that points the CLI at the fake Messages
//! API, and the seeding of sessions ([`seed_session`]). The transcript the CLI writes is read
//! back with the same reader the mock's state is read with
//! ([`rewind_mock_runtimes::claude::live_chain`]), since the mock writes the CLI's own format.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncWriteExt as _;

use super::{RealError, SeedTurn, SeededSession};

/// How long one CLI run may take.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(90);

/// The variables that point the CLI at the fake Messages API at `base` and keep it offline and
/// quiet.
pub fn model_env(base: &str) -> Vec<(String, String)> {
    [
        ("ANTHROPIC_BASE_URL", base),
        ("ANTHROPIC_API_KEY", "sk-ant-fake"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
        ("DISABLE_TELEMETRY", "1"),
        ("DISABLE_ERROR_REPORTING", "1"),
        ("CLAUDE_CODE_MAX_RETRIES", "0"),
        // Permission-bypass flags are refused as root outside a sandbox.
        ("IS_SANDBOX", "1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// Where a scenario's real Claude Code runs.
#[derive(Debug, Clone)]
pub struct ClaudeHome {
    /// The real program.
    pub program: PathBuf,
    /// HOME, XDG, `CLAUDE_CONFIG_DIR` and [`model_env`].
    pub env: Vec<(String, String)>,
    /// The working directory the sessions belong to.
    pub cwd: PathBuf,
    /// `CLAUDE_CONFIG_DIR`.
    pub config_dir: PathBuf,
    /// Where it runs.
    pub host: super::host::RuntimeHost,
}

/// One stream-json user message.
pub fn user_line(text: &str) -> String {
    json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": text}]}})
        .to_string()
}

impl ClaudeHome {
    /// Runs the CLI with `args` in stream-json mode, writing `stdin` lines and closing it.
    /// Returns stdout; a non-zero exit is an error with the end of stderr.
    pub async fn run(&self, args: &[String], stdin: &[String]) -> Result<String, RealError> {
        let mut all = vec![
            "--output-format=stream-json".to_owned(),
            "--input-format=stream-json".to_owned(),
            "--verbose".to_owned(),
        ];
        all.extend(args.iter().cloned());
        let argv: Vec<&str> = all.iter().map(String::as_str).collect();
        let mut child = self
            .host
            .command(&self.program, &argv, &self.env, &self.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(super::io(format!("starting {}", self.program.display())))?;
        if let Some(mut input) = child.stdin.take() {
            // A CLI that exits before reading its input fails below, with its own words; one
            // that never reads it is cut off with the run's time limit.
            let _ = tokio::time::timeout(RUN_TIMEOUT, async {
                for line in stdin {
                    input.write_all(format!("{line}\n").as_bytes()).await?;
                }
                std::io::Result::Ok(())
            })
            .await;
        }
        let out = tokio::time::timeout(RUN_TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| {
                RealError::runtime("claude", format!("claude {all:?} did not exit in time"))
            })?
            .map_err(super::io("waiting for claude"))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(RealError::runtime(
                "claude",
                format!(
                    "claude {all:?} exited with {}: {}",
                    out.status,
                    stderr.trim().lines().last().unwrap_or_default()
                ),
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// A claude session's live conversation (oldest first) and its live leaf.
pub type LiveState = (
    Vec<rewind_mock_runtimes::claude::ChainEntry>,
    Option<String>,
);

impl ClaudeHome {
    /// The live conversation of `session_id` (oldest first) and its live leaf, read from the
    /// transcript where the CLI runs; `None` when there is no transcript.
    pub async fn live_state(&self, session_id: &str) -> Result<Option<LiveState>, RealError> {
        let path =
            rewind_mock_runtimes::claude::transcript_path(&self.config_dir, &self.cwd, session_id);
        Ok(self
            .host
            .read_file(&path)
            .await?
            .map(|text| rewind_mock_runtimes::claude::live_state_of(&text)))
    }
}

/// Runs `turns` as a new session `session_id` (`--session-id`, then `--resume` for every later
/// turn), the fake model answering each with its scripted output. Returns the uuids of the
/// live chain's entries, a user and an assistant one per turn, in order.
pub async fn seed_session(
    home: &ClaudeHome,
    session_id: &str,
    turns: &[SeedTurn],
) -> Result<SeededSession, RealError> {
    for (i, turn) in turns.iter().enumerate() {
        let flag = if i == 0 {
            format!("--session-id={session_id}")
        } else {
            format!("--resume={session_id}")
        };
        home.run(&[flag], &[user_line(&turn.input)]).await?;
    }
    let chain = home
        .live_state(session_id)
        .await?
        .map(|(chain, _)| chain)
        .unwrap_or_default();
    let roles: Vec<&str> = chain.iter().map(|e| e.role.as_str()).collect();
    let expected: Vec<&str> = turns.iter().flat_map(|_| ["user", "assistant"]).collect();
    if roles != expected {
        return Err(RealError::runtime(
            "claude",
            format!(
                "seeding session {session_id}: the live chain holds {roles:?}, not one user and \
                 one assistant entry per turn"
            ),
        ));
    }
    Ok(SeededSession {
        session_id: session_id.to_owned(),
        ids: chain.into_iter().map(|e| e.uuid).collect(),
    })
}

/// The project directory the CLI files `cwd`'s sessions under, made absolute.
pub fn canonical_cwd(cwd: &Path) -> PathBuf {
    std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf())
}
