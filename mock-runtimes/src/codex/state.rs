//! Threads as the mock keeps them on disk: one JSON file per thread under
//! `mock_dir($CODEX_HOME)/threads/<threadId>.json`, rewritten (atomically) on every change, so
//! a later app-server process resumes them and the harness reads them back from its own process.
//!
//! The real runtime keeps a rollout JSONL per thread (`$CODEX_HOME/sessions/...`) and replays it;
//! the mock keeps the replayed result (`turns`) next to the events that produced it (`history`),
//! which is all the harness needs: the live turns in order, and whether a rollback (the real
//! rollout's `thread_rolled_back` event) or a revert happened.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::journal::now_rfc3339;

/// How a thread stores its history. Codex 0.155 and later start `paginated` threads by default;
/// `legacy` threads (asked for with `historyMode: "legacy"`, an experimental field) are the only
/// ones `thread/rollback` accepts (on 0.155; later releases have no rollback at all), and
/// `thread/revert` accepts only paginated ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HistoryMode {
    /// The whole-rollout history of older releases.
    Legacy,
    /// The paged history of newer releases.
    Paginated,
}

/// The status of one turn, as the app-server reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TurnStatus {
    /// Still running (a later process reports it `interrupted`).
    InProgress,
    /// Finished normally.
    Completed,
    /// Stopped before it finished.
    Interrupted,
    /// Finished with an error.
    Failed,
}

impl TurnStatus {
    /// The wire name (`inProgress`, `completed`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::InProgress => "inProgress",
            TurnStatus::Completed => "completed",
            TurnStatus::Interrupted => "interrupted",
            TurnStatus::Failed => "failed",
        }
    }
}

/// One turn: a user input and the agent's reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnRecord {
    /// The turn id.
    pub id: String,
    /// The user's input text.
    pub input: String,
    /// The agent's reply text (empty while the turn runs).
    pub output: String,
    /// Where the turn stands.
    pub status: TurnStatus,
    /// Unix seconds when the turn started.
    pub started_at: i64,
    /// Unix seconds when it finished.
    #[serde(default)]
    pub completed_at: Option<i64>,
}

impl TurnRecord {
    /// The id of the turn's user-message item (synthetic, stable per turn).
    pub fn user_item_id(&self) -> String {
        format!("{}-user", self.id)
    }

    /// The id of the turn's agent-message item (synthetic, stable per turn).
    pub fn agent_item_id(&self) -> String {
        format!("{}-agent", self.id)
    }
}

/// One event of a thread's history (the mock's reduced rollout).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HistoryEvent {
    /// The thread was created (`thread/start`, or seeded by the harness).
    ThreadStarted {
        /// When (RFC 3339).
        at: String,
        /// `true` when the harness seeded the thread.
        #[serde(default)]
        seeded: bool,
    },
    /// A turn started.
    TurnStarted {
        /// The turn.
        turn_id: String,
        /// When (RFC 3339).
        at: String,
    },
    /// A turn finished.
    TurnCompleted {
        /// The turn.
        turn_id: String,
        /// How it finished.
        status: TurnStatus,
        /// When (RFC 3339).
        at: String,
    },
    /// `thread/rollback` dropped turns from the end (the real rollout's `thread_rolled_back`).
    ThreadRolledBack {
        /// The `numTurns` asked for.
        num_turns: u32,
        /// The turns dropped, in order.
        dropped: Vec<String>,
        /// When (RFC 3339).
        at: String,
    },
    /// `thread/revert` dropped a turn and everything after it.
    ThreadReverted {
        /// The `beforeTurnId` asked for.
        before_turn_id: String,
        /// The turns dropped, in order.
        dropped: Vec<String>,
        /// When (RFC 3339).
        at: String,
    },
}

/// A thread as persisted by the mock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadState {
    /// The thread id (a UUID, as in the real runtime).
    pub thread_id: String,
    /// Legacy or paginated history.
    pub history_mode: HistoryMode,
    /// Unix seconds when the thread was created.
    pub created_at: i64,
    /// Unix seconds of the last change.
    pub updated_at: i64,
    /// The working directory captured for the thread.
    pub cwd: String,
    /// The (mock) CLI version that created the thread.
    pub cli_version: String,
    /// The live turns, oldest first.
    pub turns: Vec<TurnRecord>,
    /// Everything that happened to the thread, oldest first.
    #[serde(default)]
    pub history: Vec<HistoryEvent>,
}

impl ThreadState {
    /// A new, empty thread.
    pub fn new(thread_id: &str, history_mode: HistoryMode, cwd: &str, cli_version: &str) -> Self {
        let now = unix_now();
        ThreadState {
            thread_id: thread_id.to_owned(),
            history_mode,
            created_at: now,
            updated_at: now,
            cwd: cwd.to_owned(),
            cli_version: cli_version.to_owned(),
            turns: Vec::new(),
            history: vec![HistoryEvent::ThreadStarted {
                at: now_rfc3339(),
                seeded: false,
            }],
        }
    }

    /// The live turn ids, oldest first.
    pub fn turn_ids(&self) -> Vec<String> {
        self.turns.iter().map(|t| t.id.clone()).collect()
    }

    /// Whether `thread/rollback` ever took effect on this thread.
    pub fn rolled_back(&self) -> bool {
        self.rollback_count() > 0
    }

    /// How many rollbacks took effect on this thread.
    pub fn rollback_count(&self) -> usize {
        self.history
            .iter()
            .filter(|e| matches!(e, HistoryEvent::ThreadRolledBack { .. }))
            .count()
    }

    /// Whether `thread/revert` ever took effect on this thread.
    pub fn reverted(&self) -> bool {
        self.history
            .iter()
            .any(|e| matches!(e, HistoryEvent::ThreadReverted { .. }))
    }

    /// The first user input, as the thread's preview.
    pub fn preview(&self) -> String {
        self.turns
            .first()
            .map(|t| t.input.clone())
            .unwrap_or_default()
    }
}

/// A turn for [`seed_thread`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedTurn {
    /// The turn id (any non-empty string; the fixtures use `turn-1`, ...).
    pub id: String,
    /// The user's input.
    pub input: String,
    /// The agent's reply.
    pub output: String,
}

/// A thread for [`seed_thread`]: a thread whose turns all completed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedThread {
    /// The thread id; must be a UUID, as the real app-server refuses anything else.
    pub thread_id: String,
    /// The completed turns, oldest first.
    pub turns: Vec<SeedTurn>,
    /// Its history mode; `None`: the mode the default release's users hold
    /// ([`super::Version::seed_history_mode`] of [`super::DEFAULT_VERSION`]).
    #[serde(default)]
    pub history_mode: Option<HistoryMode>,
}

/// The history mode a seeded thread gets under release `version` (see
/// [`super::Version::seed_history_mode`]): `legacy` while the release has `thread/rollback`,
/// `paginated` after. An unparsable version gets the default release's mode.
pub fn seed_history_mode(version: &str) -> HistoryMode {
    super::Version::parse(version)
        .or_else(|_| super::Version::parse(super::DEFAULT_VERSION))
        .map(super::Version::seed_history_mode)
        .unwrap_or(HistoryMode::Paginated)
}

/// Switches a stored thread to `mode` (as if a release of that generation had created it);
/// `Ok(false)` when the mock holds no such thread.
pub fn set_history_mode(
    codex_home: &Path,
    thread_id: &str,
    mode: HistoryMode,
) -> std::io::Result<bool> {
    let Some(mut state) = read_thread(codex_home, thread_id)? else {
        return Ok(false);
    };
    state.history_mode = mode;
    save_thread(codex_home, &state)?;
    Ok(true)
}

/// The file the mock keeps `thread_id` in, or `None` when the id is not a UUID (the real
/// runtime cannot hold such a thread; this also keeps ids from naming paths).
pub fn thread_path(codex_home: &Path, thread_id: &str) -> Option<PathBuf> {
    let id = uuid::Uuid::parse_str(thread_id).ok()?;
    Some(threads_dir(codex_home).join(format!("{}.json", id.hyphenated())))
}

/// The directory holding every thread file.
pub fn threads_dir(codex_home: &Path) -> PathBuf {
    crate::mock_dir(codex_home).join("threads")
}

/// Writes a thread with completed turns, replacing any thread with that id.
/// The thread is then resumable by any later `codex app-server` on `codex_home`.
pub fn seed_thread(codex_home: &Path, thread: &SeedThread) -> std::io::Result<()> {
    if thread_path(codex_home, &thread.thread_id).is_none() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "codex thread id `{}` is not a UUID (the real app-server refuses it)",
                thread.thread_id
            ),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for turn in &thread.turns {
        if turn.id.is_empty() || !seen.insert(turn.id.as_str()) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "codex thread `{}`: turn id `{}` is empty or repeated",
                    thread.thread_id, turn.id
                ),
            ));
        }
    }
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|_| "/".to_owned());
    let mode = thread
        .history_mode
        .unwrap_or_else(|| seed_history_mode(super::DEFAULT_VERSION));
    let mut state = ThreadState::new(&thread.thread_id, mode, &cwd, super::DEFAULT_VERSION);
    state.history = vec![HistoryEvent::ThreadStarted {
        at: now_rfc3339(),
        seeded: true,
    }];
    let now = state.created_at;
    for turn in &thread.turns {
        let at = now_rfc3339();
        state.turns.push(TurnRecord {
            id: turn.id.clone(),
            input: turn.input.clone(),
            output: turn.output.clone(),
            status: TurnStatus::Completed,
            started_at: now,
            completed_at: Some(now),
        });
        state.history.push(HistoryEvent::TurnStarted {
            turn_id: turn.id.clone(),
            at: at.clone(),
        });
        state.history.push(HistoryEvent::TurnCompleted {
            turn_id: turn.id.clone(),
            status: TurnStatus::Completed,
            at,
        });
    }
    save_thread(codex_home, &state)
}

/// Reads a thread back; `Ok(None)` when the mock holds no such thread (or the id is not a UUID).
pub fn read_thread(codex_home: &Path, thread_id: &str) -> std::io::Result<Option<ThreadState>> {
    let Some(path) = thread_path(codex_home, thread_id) else {
        return Ok(None);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: not a mock codex thread: {e}", path.display()),
        )
    })
}

/// Writes a thread atomically (a temporary file renamed over the old one, synced first), so a
/// crash right after an acknowledged change never loses it and a reader never sees half a file.
pub fn save_thread(codex_home: &Path, state: &ThreadState) -> std::io::Result<()> {
    let path = thread_path(codex_home, &state.thread_id).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("codex thread id `{}` is not a UUID", state.thread_id),
        )
    })?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
    let body = serde_json::to_vec_pretty(state).map_err(std::io::Error::other)?;
    {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(&body)?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, &path)
}

/// Unix seconds now.
pub fn unix_now() -> i64 {
    chrono::Utc::now().timestamp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_threads_read_back_with_their_turns() {
        let home = tempfile::tempdir().unwrap();
        let id = "5ee8fe45-121f-45e4-af6b-8ae4a14c4c3d";
        seed_thread(
            home.path(),
            &SeedThread {
                thread_id: id.into(),
                turns: vec![
                    SeedTurn {
                        id: "turn-1".into(),
                        input: "a".into(),
                        output: "b".into(),
                    },
                    SeedTurn {
                        id: "turn-2".into(),
                        input: "c".into(),
                        output: "d".into(),
                    },
                ],
                history_mode: None,
            },
        )
        .unwrap();
        let state = read_thread(home.path(), id).unwrap().unwrap();
        assert_eq!(state.turn_ids(), vec!["turn-1", "turn-2"]);
        // The default release has no rollback: its threads are paginated.
        assert_eq!(state.history_mode, HistoryMode::Paginated);
        assert_eq!(seed_history_mode("0.155.1"), HistoryMode::Legacy);
        assert_eq!(seed_history_mode("0.171.0"), HistoryMode::Paginated);
        assert!(set_history_mode(home.path(), id, HistoryMode::Legacy).unwrap());
        let state = read_thread(home.path(), id).unwrap().unwrap();
        assert_eq!(state.history_mode, HistoryMode::Legacy);
        assert_eq!(state.turn_ids(), vec!["turn-1", "turn-2"]);
        assert!(!set_history_mode(
            home.path(),
            "04cd6ae5-fcb9-4c6a-b6da-92b711162dc1",
            HistoryMode::Legacy
        )
        .unwrap());
        assert!(!state.rolled_back());
        assert!(read_thread(home.path(), "not-a-uuid").unwrap().is_none());
        assert!(
            read_thread(home.path(), "04cd6ae5-fcb9-4c6a-b6da-92b711162dc1")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn seeding_refuses_bad_ids() {
        let home = tempfile::tempdir().unwrap();
        let err = seed_thread(
            home.path(),
            &SeedThread {
                thread_id: "../escape".into(),
                turns: vec![],
                history_mode: None,
            },
        )
        .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        let err = seed_thread(
            home.path(),
            &SeedThread {
                thread_id: "5ee8fe45-121f-45e4-af6b-8ae4a14c4c3d".into(),
                turns: vec![
                    SeedTurn {
                        id: "t".into(),
                        input: String::new(),
                        output: String::new(),
                    },
                    SeedTurn {
                        id: "t".into(),
                        input: String::new(),
                        output: String::new(),
                    },
                ],
                history_mode: None,
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("repeated"), "{err}");
    }
}
