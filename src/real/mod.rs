//! The real runtimes under `--runtimes real`: releases of Codex, Claude Code and OpenCode
//! ([`install`]), run offline against fake model APIs on loopback ([`fake_model`]), with every
//! home and config directory in the scenario's temporary directory.
//!
//! A scenario's runtime sessions are seeded by driving the real runtime through the fixture's
//! turns, the fake model answering each with the fixture's reply ([`codex`], [`claude`],
//! [`opencode`]): the runtime picks its own ids, so each seed returns the ids it got
//! ([`SeededSession`]) and the harness rewrites the fixture's recovery points with them before
//! the database is seeded. The implementation under test reaches the runtimes through
//! journaling proxies (the harness binary started under the runtime's name with
//! [`PROXY_TARGET_ENV`] set; for OpenCode an HTTP proxy in front of the server) that write the
//! same call journal the mocks write, so every step that reads a journal reads one here too.

pub mod claude;
pub mod codex;
pub mod fake_model;
pub mod host;
pub mod install;
pub mod live_codex;
pub mod opencode;
pub mod scenario;
pub mod seeds;

use std::path::{Path, PathBuf};

/// Set in the environment of the harness binary started as `codex` or `claude`: the path of the
/// real program it stands in front of, as a journaling proxy instead of a mock.
pub const PROXY_TARGET_ENV: &str = "REWIND_REAL_PROGRAM";

/// One turn of a session to seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedTurn {
    /// What the user said.
    pub input: String,
    /// What the model answers (`None`: a turn the agent has not answered; the runtime is told
    /// nothing more about it).
    pub output: Option<String>,
}

/// What seeding a session produced: the ids the real runtime chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeededSession {
    /// The thread (codex) or session (claude, opencode) id.
    pub session_id: String,
    /// One id per entry of the fixture's session description, in its order: codex turn ids (one
    /// per turn), claude transcript uuids (one per user and one per assistant entry), opencode
    /// message ids (one per user and one per assistant message).
    pub ids: Vec<String>,
}

/// Something about a real runtime went wrong.
#[derive(Debug, thiserror::Error)]
pub enum RealError {
    /// The release could not be had.
    #[error(transparent)]
    Install(#[from] install::InstallError),
    /// A file or process operation failed.
    #[error("{action}: {source}")]
    Io {
        /// What the harness was doing.
        action: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The runtime answered something the harness cannot use.
    #[error("{runtime}: {detail}")]
    Runtime {
        /// `codex`, `claude` or `opencode`.
        runtime: &'static str,
        /// What it answered, and to what.
        detail: String,
    },
}

impl RealError {
    /// A runtime error.
    pub fn runtime(runtime: &'static str, detail: impl Into<String>) -> RealError {
        RealError::Runtime {
            runtime,
            detail: detail.into(),
        }
    }
}

/// An `io::Error` mapper naming what was being done.
pub fn io(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> RealError {
    let action = action.into();
    move |source| RealError::Io { action, source }
}

/// HOME and the XDG directories inside `root`, created, plus `extra`: the environment every real
/// runtime process of a scenario gets on top of `PATH` (nothing of the harness's own home).
pub fn isolated_env(
    root: &Path,
    extra: &[(&str, &Path)],
) -> Result<Vec<(String, String)>, RealError> {
    let mut env = Vec::new();
    for (key, sub) in [
        ("HOME", "home"),
        ("XDG_CONFIG_HOME", "xdg/config"),
        ("XDG_DATA_HOME", "xdg/data"),
        ("XDG_STATE_HOME", "xdg/state"),
        ("XDG_CACHE_HOME", "xdg/cache"),
    ] {
        let dir = root.join(sub);
        std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        env.push((key.to_owned(), dir.display().to_string()));
    }
    for (key, path) in extra {
        env.push(((*key).to_owned(), path.display().to_string()));
    }
    Ok(env)
}

/// A directory `root/sub`, created.
pub fn subdir(root: &Path, sub: &str) -> Result<PathBuf, RealError> {
    let dir = root.join(sub);
    std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
    Ok(dir)
}
