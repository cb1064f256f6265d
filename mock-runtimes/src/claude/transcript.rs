//! Session transcripts as the Claude Code CLI keeps them: one JSON object per line in
//! `<config dir>/projects/<project slug>/<session id>.jsonl`.
//!
//! Lines are either chain entries (they carry `uuid` and a `parentUuid` key: `user`,
//! `assistant`, `attachment`, `system`) or metadata records without a place in the chain
//! (`queue-operation`, `last-prompt`, `mode`, ...). The live conversation is the chain walked
//! back through `parentUuid` from the live leaf: the `leafUuid` of the newest `last-prompt`
//! record, else the newest chain entry.

use std::collections::{HashMap, HashSet};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The release the mock imitates when `REWIND_MOCK_CLAUDE_VERSION` is unset.
pub const VERSION: &str = "2.1.332";

/// Every release the mock imitates, oldest first.
pub const VERSIONS: [&str; 2] = ["2.1.197", "2.1.332"];

/// The release imitated by this process: `REWIND_MOCK_CLAUDE_VERSION` when it names one of
/// [`VERSIONS`], else [`VERSION`]. It is what the mock reports (`--version`, `system/init`,
/// transcript `version`) and whose behaviour it follows.
pub fn version() -> &'static str {
    let wanted = std::env::var(super::VERSION_ENV).unwrap_or_default();
    VERSIONS
        .iter()
        .find(|v| **v == wanted)
        .copied()
        .unwrap_or(VERSION)
}

/// Whether the release imitated is `release` or a later one.
pub fn at_least(release: &str) -> bool {
    fn parts(v: &str) -> Vec<u32> {
        v.split('.').map(|p| p.parse().unwrap_or(0)).collect()
    }
    parts(version()) >= parts(release)
}

/// Whether this process imitates a release that writes a `prompt_snapshot` attachment after an
/// answer whose chain holds none yet (Claude Code 2.1.332; 2.1.197 writes none).
pub fn writes_prompt_snapshots() -> bool {
    at_least("2.1.332")
}

/// The model the canned replies claim when `--model` is not given.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5-20250929";

/// The project directory name the CLI derives from a working directory: every character that
/// is not an ASCII letter or digit becomes `-` (a character outside the Basic Multilingual
/// Plane becomes two, as the CLI replaces UTF-16 code units).
pub fn project_slug(cwd: &Path) -> String {
    let text = cwd.to_string_lossy();
    let mut slug = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else {
            for _ in 0..c.len_utf16() {
                slug.push('-');
            }
        }
    }
    slug
}

/// `<config dir>/projects`.
pub fn projects_dir(config_dir: &Path) -> PathBuf {
    config_dir.join("projects")
}

/// The transcript of `session_id` for sessions started in `cwd`. The working directory is
/// resolved first (as the CLI's `process.cwd()` is), falling back to `cwd` as given.
pub fn transcript_path(config_dir: &Path, cwd: &Path, session_id: &str) -> PathBuf {
    let cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    projects_dir(config_dir)
        .join(project_slug(&cwd))
        .join(format!("{session_id}.jsonl"))
}

/// Finds the transcript of `session_id`: in the project of `cwd` first, then in any other
/// project directory (the CLI finds a session by id from another directory too).
pub fn find_transcript(config_dir: &Path, cwd: &Path, session_id: &str) -> Option<PathBuf> {
    let own = transcript_path(config_dir, cwd, session_id);
    if own.is_file() {
        return Some(own);
    }
    let name = format!("{session_id}.jsonl");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(projects_dir(config_dir))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|d| d.join(&name))
        .find(|p| p.is_file())
}

/// A session to plant before a scenario: a linear chain of messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedSession {
    /// The session id (the real CLI only accepts UUIDs for `--resume`).
    pub session_id: String,
    /// The working directory the session belongs to (it names the project directory).
    pub cwd: PathBuf,
    /// The messages, oldest first; each one's parent is the one before.
    pub entries: Vec<SeedEntry>,
}

/// One message of a [`SeedSession`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedEntry {
    /// The transcript uuid (what `--resume-session-at` takes).
    pub uuid: String,
    /// `user` or `assistant`.
    pub role: String,
    /// The message text.
    pub text: String,
}

/// One message of the live conversation, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainEntry {
    /// The transcript uuid.
    pub uuid: String,
    /// The previous message (user or assistant) on the live chain; `None` for the first. The
    /// raw `parentUuid` may name an `attachment` entry in between, which is skipped here.
    pub parent_uuid: Option<String>,
    /// `user` or `assistant`.
    pub role: String,
    /// The text of the message (text blocks joined by newlines).
    pub text: String,
}

/// Writes `session` as the CLI would have written it (replacing any transcript of that id in
/// that project): the chain entries, then a `last-prompt` record naming the leaf.
pub fn seed_session(config_dir: &Path, session: &SeedSession) -> std::io::Result<()> {
    let path = transcript_path(config_dir, &session.cwd, &session.session_id);
    let cwd = std::fs::canonicalize(&session.cwd).unwrap_or_else(|_| session.cwd.clone());
    let ctx = EntryContext {
        session_id: session.session_id.clone(),
        cwd: cwd.to_string_lossy().into_owned(),
        model: DEFAULT_MODEL.to_owned(),
    };
    let mut lines = Vec::new();
    let mut parent: Option<String> = None;
    let mut last_prompt: Option<String> = None;
    for entry in &session.entries {
        let line = match entry.role.as_str() {
            "user" => {
                last_prompt = Some(entry.text.clone());
                ctx.user_entry(&entry.uuid, parent.as_deref(), json!(entry.text))
            }
            "assistant" => ctx.assistant_entry(&entry.uuid, parent.as_deref(), &entry.text),
            other => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "seed entry {}: role must be user or assistant, not {other:?}",
                        entry.uuid
                    ),
                ))
            }
        };
        lines.push(line);
        parent = Some(entry.uuid.clone());
    }
    if let Some(leaf) = parent {
        lines.push(ctx.last_prompt(last_prompt.as_deref().unwrap_or(""), &leaf));
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, render(&lines))
}

/// The live leaf of `session_id` in the project of `cwd`: the chain entry a new turn continues
/// from (any type: an answer, or the `prompt_snapshot` attachment 2.1.332 writes after one).
/// `None` when there is no transcript or no chain.
pub fn live_leaf(
    config_dir: &Path,
    cwd: &Path,
    session_id: &str,
) -> std::io::Result<Option<String>> {
    let path = transcript_path(config_dir, cwd, session_id);
    Ok(Transcript::load(&path)?.and_then(|t| t.leaf()))
}

/// The live conversation of `session_id` in the project of `cwd`: user and assistant
/// messages on the chain from the live leaf, oldest first. `None` when there is no
/// transcript.
pub fn live_chain(
    config_dir: &Path,
    cwd: &Path,
    session_id: &str,
) -> std::io::Result<Option<Vec<ChainEntry>>> {
    let path = transcript_path(config_dir, cwd, session_id);
    Ok(Transcript::load(&path)?.map(|t| t.live_messages()))
}

/// [`live_chain`] and [`live_leaf`] of a transcript's text (read from wherever the transcript
/// lives, e.g. another host): the live conversation, oldest first, and the live leaf.
pub fn live_state_of(text: &str) -> (Vec<ChainEntry>, Option<String>) {
    let transcript = Transcript::parse(text);
    (transcript.live_messages(), transcript.leaf())
}

/// Fields every chain entry the mock writes shares.
#[derive(Debug, Clone)]
pub(crate) struct EntryContext {
    pub session_id: String,
    pub cwd: String,
    pub model: String,
}

impl EntryContext {
    fn envelope(
        &self,
        kind: &str,
        uuid: &str,
        parent: Option<&str>,
    ) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        m.insert("parentUuid".into(), json!(parent));
        m.insert("isSidechain".into(), json!(false));
        m.insert("userType".into(), json!("external"));
        m.insert("cwd".into(), json!(self.cwd));
        m.insert("sessionId".into(), json!(self.session_id));
        m.insert("version".into(), json!(version()));
        m.insert("gitBranch".into(), json!(""));
        m.insert("type".into(), json!(kind));
        m.insert("uuid".into(), json!(uuid));
        m.insert("timestamp".into(), json!(now()));
        m
    }

    /// A `user` chain entry; `content` is a string or an array of content blocks.
    pub fn user_entry(&self, uuid: &str, parent: Option<&str>, content: Value) -> Value {
        let mut m = self.envelope("user", uuid, parent);
        m.insert(
            "message".into(),
            json!({"role": "user", "content": content}),
        );
        Value::Object(m)
    }

    /// An `assistant` chain entry with one text block.
    pub fn assistant_entry(&self, uuid: &str, parent: Option<&str>, text: &str) -> Value {
        let mut m = self.envelope("assistant", uuid, parent);
        m.insert("message".into(), self.assistant_message(text));
        m.insert(
            "requestId".into(),
            json!(format!("req_mock{}", uuid.replace('-', ""))),
        );
        Value::Object(m)
    }

    /// An `attachment` chain entry of `kind` (context the CLI adds to a session's first turn,
    /// after its user entry: `agent_listing_delta`, `skill_listing`).
    /// The `prompt_snapshot` attachment Claude Code 2.1.332 writes after an answer: a chain
    /// entry (the next prompt chains from it) recording the system prompt and tools in use.
    pub fn prompt_snapshot_entry(&self, uuid: &str, parent: &str) -> Value {
        let mut m = self.envelope("attachment", uuid, Some(parent));
        m.insert(
            "attachment".into(),
            json!({"type": "prompt_snapshot", "cliPrefix": "mock", "systemPrompt": [],
                   "tools": [], "contextRendering": "announced"}),
        );
        Value::Object(m)
    }

    pub fn attachment_entry(&self, uuid: &str, parent: Option<&str>, kind: &str) -> Value {
        let mut m = self.envelope("attachment", uuid, parent);
        m.insert(
            "attachment".into(),
            json!({"type": kind, "addedNames": [], "removedNames": []}),
        );
        Value::Object(m)
    }

    /// The Messages API message of a canned reply.
    pub fn assistant_message(&self, text: &str) -> Value {
        json!({
            "id": format!("msg_mock{}", &uuid::Uuid::new_v4().simple().to_string()[..24]),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": null,
            "usage": empty_usage(),
        })
    }

    /// The `last-prompt` record naming the live leaf.
    pub fn last_prompt(&self, prompt: &str, leaf: &str) -> Value {
        json!({
            "type": "last-prompt",
            "lastPrompt": prompt,
            "leafUuid": leaf,
            "sessionId": self.session_id,
        })
    }

    /// A `queue-operation` record (the CLI logs every stdin prompt it queues and takes).
    pub fn queue_operation(&self, operation: &str, content: Option<&str>) -> Value {
        let mut v = json!({
            "type": "queue-operation",
            "operation": operation,
            "timestamp": now(),
            "sessionId": self.session_id,
        });
        if let Some(c) = content {
            v["content"] = json!(c);
        }
        v
    }

    /// The `mode` record a forked transcript opens with.
    pub fn mode_record(&self) -> Value {
        json!({"type": "mode", "mode": "normal", "sessionId": self.session_id})
    }
}

/// Token usage with every count zero (the mock calls no model).
pub fn empty_usage() -> Value {
    json!({
        "input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 0,
        "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
        "service_tier": "standard",
    })
}

/// Now, RFC 3339 with milliseconds.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Lines as JSONL text.
pub(crate) fn render(lines: &[Value]) -> String {
    let mut text = String::new();
    for line in lines {
        text.push_str(&line.to_string());
        text.push('\n');
    }
    text
}

/// Appends `lines` with a single write (creating the file and its directory).
pub(crate) fn append_lines(path: &Path, lines: &[Value]) -> std::io::Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(render(lines).as_bytes())?;
    file.sync_data()
}

/// A transcript read back: every line that parses as a JSON object, in file order (the CLI
/// skips lines it cannot parse, and so does the mock).
#[derive(Debug, Clone, Default)]
pub(crate) struct Transcript {
    pub lines: Vec<Value>,
}

/// The text of a message's `content` (a string, or the text blocks of an array).
pub(crate) fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn is_chain_entry(line: &Value) -> bool {
    line.get("uuid").and_then(Value::as_str).is_some() && line.get("parentUuid").is_some()
}

fn is_message(line: &Value) -> bool {
    matches!(
        line.get("type").and_then(Value::as_str),
        Some("user") | Some("assistant")
    )
}

fn uuid_of(line: &Value) -> &str {
    line.get("uuid").and_then(Value::as_str).unwrap_or_default()
}

impl Transcript {
    /// Reads `path`; `None` when it does not exist.
    pub fn load(path: &Path) -> std::io::Result<Option<Transcript>> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(Some(Transcript::parse(&text)))
    }

    /// A transcript from its text: every line that is a JSON object.
    pub fn parse(text: &str) -> Transcript {
        let lines = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(Value::is_object)
            .collect();
        Transcript { lines }
    }

    /// The live leaf: the newest `last-prompt.leafUuid` that names a chain entry, else the
    /// newest chain entry.
    pub fn leaf(&self) -> Option<String> {
        let known: HashSet<&str> = self
            .lines
            .iter()
            .filter(|l| is_chain_entry(l))
            .map(uuid_of)
            .collect();
        let marked = self
            .lines
            .iter()
            .rev()
            .filter(|l| l.get("type").and_then(Value::as_str) == Some("last-prompt"))
            .find_map(|l| l.get("leafUuid").and_then(Value::as_str))
            .filter(|leaf| known.contains(leaf));
        marked
            .or_else(|| {
                self.lines
                    .iter()
                    .rev()
                    .find(|l| is_chain_entry(l))
                    .map(uuid_of)
            })
            .map(str::to_owned)
    }

    /// The leaf a plain `--resume` continues from, as Claude Code 2.1.197 picks it: the NEWEST
    /// chain entry in the file that no entry names as its parent. So after a
    /// `--resume-session-at` branch a plain resume follows the newer branch (observed on the
    /// real CLI with a model API that gives every answer an id of its own, as real ones do; an
    /// API that repeats one message id makes the CLI go back to the first branch instead).
    pub fn resume_leaf(&self) -> Option<String> {
        let parents: HashSet<&str> = self
            .lines
            .iter()
            .filter(|l| is_chain_entry(l))
            .filter_map(|l| l.get("parentUuid").and_then(Value::as_str))
            .collect();
        self.lines
            .iter()
            .rev()
            .filter(|l| is_chain_entry(l))
            .map(uuid_of)
            .find(|uuid| !parents.contains(uuid))
            .map(str::to_owned)
    }

    /// The chain entries (of every kind) from the root to `leaf`, when it is a chain entry.
    pub fn chain_to(&self, leaf: &str) -> Option<Vec<Value>> {
        let entries = self.entries_to(leaf);
        (!entries.is_empty()).then_some(entries)
    }

    /// The chain entries (of every kind) from the root to the live leaf.
    pub fn live_entries(&self) -> Vec<Value> {
        match self.leaf() {
            Some(leaf) => self.entries_to(&leaf),
            None => Vec::new(),
        }
    }

    fn entries_to(&self, leaf: &str) -> Vec<Value> {
        let by_uuid: HashMap<&str, &Value> = self
            .lines
            .iter()
            .filter(|l| is_chain_entry(l))
            .map(|l| (uuid_of(l), l))
            .collect();
        let mut chain = Vec::new();
        let mut seen = HashSet::new();
        let mut next = Some(leaf);
        while let Some(uuid) = next {
            if !seen.insert(uuid.to_owned()) {
                break;
            }
            let Some(entry) = by_uuid.get(uuid) else {
                break;
            };
            chain.push((*entry).clone());
            next = entry.get("parentUuid").and_then(Value::as_str);
        }
        chain.reverse();
        chain
    }

    /// Whether the live chain holds a user or assistant message (the CLI's test for a
    /// resumable conversation).
    pub fn has_conversation(&self) -> bool {
        self.live_entries().iter().any(is_message)
    }

    /// The live user and assistant messages, oldest first.
    pub fn live_messages(&self) -> Vec<ChainEntry> {
        messages_of(&self.live_entries())
    }
}

/// The user and assistant messages of a list of chain entries.
pub(crate) fn messages_of(entries: &[Value]) -> Vec<ChainEntry> {
    let mut out: Vec<ChainEntry> = Vec::new();
    for entry in entries.iter().filter(|e| is_message(e)) {
        let role = entry
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let text = entry
            .get("message")
            .and_then(|m| m.get("content"))
            .map(content_text)
            .unwrap_or_default();
        out.push(ChainEntry {
            uuid: uuid_of(entry).to_owned(),
            parent_uuid: out.last().map(|p| p.uuid.clone()),
            role,
            text,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_replace_every_non_alphanumeric_character() {
        assert_eq!(
            project_slug(Path::new("/home/me/my_proj.v2")),
            "-home-me-my-proj-v2"
        );
        assert_eq!(project_slug(Path::new("/tmp/é")), "-tmp--");
        assert_eq!(project_slug(Path::new("/tmp/😀")), "-tmp---");
    }

    fn ctx() -> EntryContext {
        EntryContext {
            session_id: "s".into(),
            cwd: "/w".into(),
            model: DEFAULT_MODEL.into(),
        }
    }

    #[test]
    fn the_newest_last_prompt_names_the_leaf_and_attachments_are_skipped() {
        let c = ctx();
        let t = Transcript {
            lines: vec![
                c.queue_operation("enqueue", Some("one")),
                c.user_entry("u1", None, json!("one")),
                c.assistant_entry("a1", Some("u1"), "r1"),
                c.last_prompt("one", "a1"),
                c.user_entry("u2", Some("a1"), json!([{"type": "text", "text": "two"}])),
                c.assistant_entry("a2", Some("u2"), "r2"),
                c.last_prompt("two", "a2"),
                c.attachment_entry("x3", Some("a1"), "skill_listing"),
                c.user_entry("u3", Some("x3"), json!("three")),
                c.assistant_entry("a3", Some("u3"), "r3"),
                c.last_prompt("three", "a3"),
            ],
        };
        let chain = t.live_messages();
        let uuids: Vec<_> = chain.iter().map(|e| e.uuid.as_str()).collect();
        assert_eq!(uuids, ["u1", "a1", "u3", "a3"]);
        assert_eq!(chain[2].parent_uuid.as_deref(), Some("a1"));
        let mut rewound = t.clone();
        rewound.lines.push(c.last_prompt("one", "a1"));
        assert_eq!(rewound.leaf().as_deref(), Some("a1"));
        assert_eq!(rewound.live_messages().len(), 2);
        let mut unmarked = t;
        unmarked
            .lines
            .retain(|l| l.get("type").and_then(Value::as_str) != Some("last-prompt"));
        assert_eq!(unmarked.leaf().as_deref(), Some("a3"));
        assert_eq!(
            content_text(&json!([{"type": "text", "text": "a"}, {"type": "image"}])),
            "a"
        );
    }
}
