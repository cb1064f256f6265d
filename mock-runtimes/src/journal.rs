//! The call journal: one JSON object per line, appended by every mock for every call it
//! receives (and for its own process start), so the harness can prove what a runtime was asked
//! to do, and what it was never asked to do.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One call a mock received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// When the mock received the call (RFC 3339, UTC).
    pub at: String,
    /// `codex`, `claude` or `opencode`.
    pub runtime: String,
    /// The mock's process id (a codex app-server or a claude CLI run is one process).
    pub pid: u32,
    /// What was called: a JSON-RPC method (`thread/rollback`), an HTTP route
    /// (`POST /session/{id}/revert`), a CLI mode (`claude --resume`), or `process/start`.
    pub call: String,
    /// The thread or session the call addressed, when it addressed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The request as received (params, body, or argv).
    #[serde(default)]
    pub request: serde_json::Value,
    /// `ok`, `error`, or `fault:<kind>` when an injected fault answered the call.
    pub outcome: String,
    /// A short human-readable detail (an error message, the injected fault).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The number the delivery witness answered for this call (see [`crate::witness`]); only
    /// on delivering inputs made while a witness was configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness: Option<u64>,
}

impl JournalEntry {
    /// A new entry stamped now with this process's id; `outcome` starts as `ok`.
    pub fn new(runtime: &str, call: impl Into<String>) -> Self {
        JournalEntry {
            at: now_rfc3339(),
            runtime: runtime.to_owned(),
            pid: std::process::id(),
            call: call.into(),
            target: None,
            request: serde_json::Value::Null,
            outcome: "ok".to_owned(),
            detail: None,
            witness: None,
        }
    }

    /// Sets the addressed thread or session.
    pub fn target(mut self, target: impl Into<String>) -> Self {
        self.target = Some(target.into());
        self
    }

    /// Sets the request as received.
    pub fn request(mut self, request: serde_json::Value) -> Self {
        self.request = request;
        self
    }
}

/// Appends entries to one journal file. Each entry is written with a single `write` on a file
/// opened in append mode, so concurrent mock processes never interleave within a line.
#[derive(Debug, Clone)]
pub struct Journal {
    path: PathBuf,
}

impl Journal {
    /// A journal writing to `path` (created, with its directory, on the first append).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Journal { path: path.into() }
    }

    /// Where the journal lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `entry`. A mock must not fail a call because its journal could not be written,
    /// so the error is returned for the caller to report on stderr.
    pub fn append(&self, entry: &JournalEntry) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut line = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        file.write_all(&line)
    }

    /// Appends `entry`, reporting a failure on stderr instead of returning it.
    pub fn record(&self, entry: &JournalEntry) {
        if let Err(e) = self.append(entry) {
            eprintln!(
                "mock runtime: cannot write journal {}: {e}",
                self.path.display()
            );
        }
    }

    /// Every entry so far, in append order. A missing file is an empty journal.
    pub fn read(&self) -> Result<Vec<JournalEntry>, JournalError> {
        read_journal(&self.path)
    }
}

/// A journal that cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The file exists but cannot be read.
    #[error("cannot read journal {path}: {source}")]
    Io {
        /// The journal file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not a journal entry.
    #[error("{path}:{line}: not a journal entry: {source}")]
    Entry {
        /// The journal file.
        path: String,
        /// The 1-based line.
        line: usize,
        /// Why.
        source: serde_json::Error,
    },
}

/// Reads the journal at `path`; a missing file is an empty journal.
pub fn read_journal(path: &Path) -> Result<Vec<JournalEntry>, JournalError> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(JournalError::Io {
                path: path.display().to_string(),
                source,
            })
        }
    };
    let mut entries = Vec::new();
    for (index, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|source| JournalError::Io {
            path: path.display().to_string(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let entry = serde_json::from_str(&line).map_err(|source| JournalError::Entry {
            path: path.display().to_string(),
            line: index + 1,
            source,
        })?;
        entries.push(entry);
    }
    Ok(entries)
}

/// The current time as RFC 3339 with milliseconds, UTC.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::new(dir.path().join("sub/journal.jsonl"));
        assert!(journal.read().unwrap().is_empty());
        journal
            .append(&JournalEntry::new("codex", "initialize"))
            .unwrap();
        let mut second = JournalEntry::new("codex", "thread/rollback").target("t-1");
        second.outcome = "fault:error".into();
        journal.append(&second).unwrap();
        let read = journal.read().unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!(read[1].call, "thread/rollback");
        assert_eq!(read[1].target.as_deref(), Some("t-1"));
        assert_eq!(read[1].outcome, "fault:error");
    }

    #[test]
    fn a_broken_line_names_its_line_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let journal = Journal::new(&path);
        journal.append(&JournalEntry::new("claude", "x")).unwrap();
        std::fs::write(
            &path,
            format!("{}not json\n", std::fs::read_to_string(&path).unwrap()),
        )
        .unwrap();
        let err = journal.read().unwrap_err().to_string();
        assert!(err.contains("journal.jsonl:2:"), "{err}");
    }
}
