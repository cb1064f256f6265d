//! Session state as the mock OpenCode server keeps it: one JSON file per session under
//! `<runtime home>/mock/sessions/<sessionID>.json`, holding the session info exactly as the HTTP
//! API returns it and the messages as `GET /session/{id}/message` lists them (`{info, parts}` in
//! creation order). Every change is written through at once (write to a temporary file, then
//! rename), so another process reads a consistent state and a crash loses nothing acknowledged.
//!
//! The real runtime keeps this in a SQLite database (older releases: a JSON file per message and
//! per part under `storage/`); the mock's layout is its own, read back through [`read_session`].

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::ids::{self, IdKind};

/// The version the mock reports in sessions and `/global/health`: the release whose behaviour
/// it imitates.
pub const VERSION: &str = "1.18.33";

/// The mock's runtime home for an `XDG_DATA_HOME`: `<data_home>/opencode`, as the real runtime.
pub fn runtime_home(data_home: &Path) -> PathBuf {
    data_home.join("opencode")
}

/// Where the sessions of the runtime whose home is `runtime_home` are stored.
pub fn sessions_dir(runtime_home: &Path) -> PathBuf {
    crate::mock_dir(runtime_home).join("sessions")
}

fn session_path(runtime_home: &Path, id: &str) -> Option<PathBuf> {
    ids::is_storable(id).then(|| sessions_dir(runtime_home).join(format!("{id}.json")))
}

/// Milliseconds since the epoch, the unit of every real OpenCode timestamp.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// `time` of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionTime {
    /// Creation, ms since the epoch.
    pub created: i64,
    /// Last change, ms since the epoch.
    pub updated: i64,
}

/// A pending revert (`Session.revert`): messages from `messageID` on are deleted by the next
/// prompt; `unrevert` drops it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revert {
    /// The first message the next prompt deletes (always a user message unless `partID` is set).
    #[serde(rename = "messageID")]
    pub message_id: String,
    /// Set when only the parts from this one on are reverted.
    #[serde(rename = "partID", default, skip_serializing_if = "Option::is_none")]
    pub part_id: Option<String>,
    /// The snapshot taken before reverting files (snapshots on only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// The file diff the revert undid (snapshots on only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

/// A session as `GET /session/{id}` returns it. `revert` is absent (not null) when nothing is
/// reverted, as in the real runtime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// `ses_...`
    pub id: String,
    /// A human-readable word pair.
    pub slug: String,
    /// The project (the real runtime: the git root commit, or `global`).
    #[serde(rename = "projectID")]
    pub project_id: String,
    /// The directory the session works in.
    pub directory: String,
    /// The parent session of a child (task) session.
    #[serde(rename = "parentID", default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// The title.
    pub title: String,
    /// The runtime version that created it.
    pub version: String,
    /// Timestamps.
    pub time: SessionTime,
    /// The pending revert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revert: Option<Revert>,
}

/// One message with its parts, as listed by `GET /session/{id}/message`. Kept as JSON so the
/// shapes stay those of the real API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    /// `{id, sessionID, role, time, ...}`; assistants also carry `parentID`.
    pub info: Value,
    /// `[{id, sessionID, messageID, type, ...}]`.
    pub parts: Vec<Value>,
}

impl StoredMessage {
    /// `info.id`.
    pub fn id(&self) -> &str {
        self.info.get("id").and_then(Value::as_str).unwrap_or("")
    }

    /// `info.role` (`user` or `assistant`).
    pub fn role(&self) -> &str {
        self.info.get("role").and_then(Value::as_str).unwrap_or("")
    }

    /// `info.parentID` (assistant messages).
    pub fn parent_id(&self) -> Option<&str> {
        self.info.get("parentID").and_then(Value::as_str)
    }

    /// The text of the message's text parts, joined by newlines.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn part_id(part: &Value) -> &str {
        part.get("id").and_then(Value::as_str).unwrap_or("")
    }

    fn part_type(part: &Value) -> &str {
        part.get("type").and_then(Value::as_str).unwrap_or("")
    }
}

/// The model a message was answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    /// `providerID`.
    pub provider_id: String,
    /// `modelID`.
    pub model_id: String,
}

impl Default for Model {
    fn default() -> Self {
        Model {
            provider_id: "mock".to_owned(),
            model_id: "mock-model".to_owned(),
        }
    }
}

/// A user message whose parts are `parts` (each an object with at least `type`; ids and the
/// owning session and message are filled in).
pub fn user_message(
    session_id: &str,
    message_id: &str,
    parts: Vec<Value>,
    model: &Model,
    agent: &str,
) -> StoredMessage {
    let parts = parts
        .into_iter()
        .map(|mut part| {
            if let Value::Object(map) = &mut part {
                if map.get("id").is_none_or(|v| !v.is_string()) {
                    map.insert("id".into(), Value::String(ids::ascending(IdKind::Part)));
                }
                map.insert("sessionID".into(), Value::String(session_id.to_owned()));
                map.insert("messageID".into(), Value::String(message_id.to_owned()));
            }
            part
        })
        .collect();
    StoredMessage {
        info: json!({
            "id": message_id,
            "sessionID": session_id,
            "role": "user",
            "time": { "created": now_ms() },
            "agent": agent,
            "model": { "providerID": model.provider_id, "modelID": model.model_id },
        }),
        parts,
    }
}

/// A user message with one text part.
pub fn user_text_message(session_id: &str, message_id: &str, text: &str) -> StoredMessage {
    user_message(
        session_id,
        message_id,
        vec![json!({ "type": "text", "text": text })],
        &Model::default(),
        "build",
    )
}

/// A finished assistant message answering `parent_id` with `text`: parts `step-start`, `text`,
/// `step-finish`, as a one-step turn of the real runtime (an empty `text` makes no `text` part:
/// only `step-start` and `step-finish`). `snapshot` is recorded on the step parts when
/// snapshots are on.
pub fn assistant_message(
    session_id: &str,
    message_id: &str,
    parent_id: &str,
    text: &str,
    model: &Model,
    directory: &str,
    snapshot: Option<&str>,
) -> StoredMessage {
    let created = now_ms();
    let tokens =
        json!({ "input": 0, "output": 0, "reasoning": 0, "cache": { "read": 0, "write": 0 } });
    let mut step_start = json!({
        "id": ids::ascending(IdKind::Part),
        "sessionID": session_id,
        "messageID": message_id,
        "type": "step-start",
    });
    let text_part = json!({
        "id": ids::ascending(IdKind::Part),
        "sessionID": session_id,
        "messageID": message_id,
        "type": "text",
        "text": text,
        "time": { "start": created, "end": created },
    });
    let mut step_finish = json!({
        "id": ids::ascending(IdKind::Part),
        "sessionID": session_id,
        "messageID": message_id,
        "type": "step-finish",
        "reason": "stop",
        "cost": 0,
        "tokens": tokens,
    });
    if let Some(snapshot) = snapshot {
        step_start["snapshot"] = Value::String(snapshot.to_owned());
        step_finish["snapshot"] = Value::String(snapshot.to_owned());
    }
    StoredMessage {
        info: json!({
            "id": message_id,
            "sessionID": session_id,
            "role": "assistant",
            "time": { "created": created, "completed": created },
            "parentID": parent_id,
            "modelID": model.model_id,
            "providerID": model.provider_id,
            "mode": "build",
            "agent": "build",
            "path": { "cwd": directory, "root": directory },
            "cost": 0,
            "tokens": tokens,
            "finish": "stop",
        }),
        parts: if text.is_empty() {
            vec![step_start, step_finish]
        } else {
            vec![step_start, text_part, step_finish]
        },
    }
}

/// One session with its messages, as stored by the mock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    /// The session as `GET /session/{id}` returns it.
    pub info: SessionInfo,
    /// The messages in creation order.
    pub messages: Vec<StoredMessage>,
}

impl SessionState {
    /// A new empty session.
    pub fn new(id: &str, directory: &str, title: Option<&str>, parent_id: Option<&str>) -> Self {
        let now = now_ms();
        let title = match title {
            Some(t) => t.to_owned(),
            None => format!(
                "New session - {}",
                chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            ),
        };
        SessionState {
            info: SessionInfo {
                id: id.to_owned(),
                slug: ids::slug(),
                project_id: "global".to_owned(),
                directory: directory.to_owned(),
                parent_id: parent_id.map(str::to_owned),
                title,
                version: VERSION.to_owned(),
                time: SessionTime {
                    created: now,
                    updated: now,
                },
                revert: None,
            },
            messages: Vec::new(),
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.info.id
    }

    /// The pending revert.
    pub fn revert(&self) -> Option<&Revert> {
        self.info.revert.as_ref()
    }

    /// `revert.messageID` of the pending revert.
    pub fn revert_message_id(&self) -> Option<&str> {
        self.info.revert.as_ref().map(|r| r.message_id.as_str())
    }

    /// The message ids in creation order.
    pub fn message_ids(&self) -> Vec<&str> {
        self.messages.iter().map(StoredMessage::id).collect()
    }

    /// The user message ids in creation order.
    pub fn user_message_ids(&self) -> Vec<&str> {
        self.messages
            .iter()
            .filter(|m| m.role() == "user")
            .map(StoredMessage::id)
            .collect()
    }

    /// The message with `id`.
    pub fn message(&self, id: &str) -> Option<&StoredMessage> {
        self.messages.iter().find(|m| m.id() == id)
    }

    /// Marks the session changed now.
    pub fn touch(&mut self) {
        self.info.time.updated = now_ms().max(self.info.time.updated);
    }

    /// `POST /session/{id}/revert`: records a pending revert the way the real runtime does and
    /// returns whether it did. The target is the message `message_id` (or, with `part_id`, the
    /// part with that id); a whole-message revert is anchored on the last user message at or
    /// before the target, so reverting an assistant message reverts its prompt. A part revert
    /// keeps `partID` only when a text or tool part precedes it in its message. Nothing matches:
    /// no change (the real runtime answers 200 with the session unchanged). Messages are not
    /// deleted here: the next prompt does that ([`cleanup_revert`](Self::cleanup_revert)).
    pub fn apply_revert(
        &mut self,
        message_id: &str,
        part_id: Option<&str>,
        snapshots: bool,
    ) -> bool {
        let mut last_user: Option<&str> = None;
        let mut found: Option<(String, Option<String>)> = None;
        'messages: for message in &self.messages {
            if message.role() == "user" {
                last_user = Some(message.id());
            }
            for (index, part) in message.parts.iter().enumerate() {
                let hit = (message.id() == message_id && part_id.is_none())
                    || part_id.is_some_and(|p| StoredMessage::part_id(part) == p);
                if hit {
                    let keeps_part = message.parts[..index]
                        .iter()
                        .any(|p| matches!(StoredMessage::part_type(p), "text" | "tool"));
                    let part = if keeps_part {
                        part_id.map(str::to_owned)
                    } else {
                        None
                    };
                    let anchor = match (&part, last_user) {
                        (None, Some(user)) => user.to_owned(),
                        _ => message.id().to_owned(),
                    };
                    found = Some((anchor, part));
                    break 'messages;
                }
            }
        }
        let Some((anchor, part)) = found else {
            return false;
        };
        let (snapshot, diff) = if snapshots {
            let snapshot = self
                .info
                .revert
                .as_ref()
                .and_then(|r| r.snapshot.clone())
                .unwrap_or_else(ids::snapshot_hash);
            (Some(snapshot), Some(String::new()))
        } else {
            (None, None)
        };
        self.info.revert = Some(Revert {
            message_id: anchor,
            part_id: part,
            snapshot,
            diff,
        });
        self.touch();
        true
    }

    /// `POST /session/{id}/unrevert`: drops the pending revert; returns whether there was one.
    pub fn unrevert(&mut self) -> bool {
        let had = self.info.revert.take().is_some();
        if had {
            self.touch();
        }
        had
    }

    /// What the next prompt does first: deletes the message `revert.messageID` and every later
    /// one (then, with `partID`, the parts from it on in the last message kept), and clears
    /// `revert`. Returns the ids of the deleted messages.
    pub fn cleanup_revert(&mut self) -> Vec<String> {
        let Some(revert) = self.info.revert.take() else {
            return Vec::new();
        };
        let mut removed = Vec::new();
        if let Some(index) = self
            .messages
            .iter()
            .position(|m| m.id() == revert.message_id)
        {
            removed = self
                .messages
                .drain(index..)
                .map(|m| m.id().to_owned())
                .collect();
        }
        if let (Some(part_id), Some(last)) = (&revert.part_id, self.messages.last_mut()) {
            if let Some(index) = last
                .parts
                .iter()
                .position(|p| StoredMessage::part_id(p) == part_id)
            {
                last.parts.truncate(index);
            }
        }
        self.touch();
        removed
    }
}

/// Reads the session `id` from the runtime home; `None` when it does not exist.
pub fn load(runtime_home: &Path, id: &str) -> io::Result<Option<SessionState>> {
    let Some(path) = session_path(runtime_home, id) else {
        return Ok(None);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not a mock opencode session: {e}", path.display()),
        )
    })
}

/// Writes `state` through to the runtime home (atomically: a reader never sees half a file).
pub fn save(runtime_home: &Path, state: &SessionState) -> io::Result<()> {
    let path = session_path(runtime_home, state.id()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{}` cannot name a session file", state.id()),
        )
    })?;
    let dir = sessions_dir(runtime_home);
    std::fs::create_dir_all(&dir)?;
    let tmp = dir.join(format!(".{}.{}.tmp", state.id(), std::process::id()));
    let bytes = serde_json::to_vec_pretty(state).map_err(io::Error::other)?;
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, &path)
}

/// Every stored session, most recently updated first (as the real `GET /session` lists them).
pub fn list(runtime_home: &Path) -> io::Result<Vec<SessionState>> {
    let dir = sessions_dir(runtime_home);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut sessions = Vec::new();
    for entry in entries {
        let name = entry?.file_name();
        let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
            continue;
        };
        if let Some(state) = load(runtime_home, id)? {
            sessions.push(state);
        }
    }
    sessions.sort_by_key(|s| std::cmp::Reverse(s.info.time.updated));
    Ok(sessions)
}

/// A session to plant before (or between) server runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedSession {
    /// `ses_...`
    pub session_id: String,
    /// Its messages, in order.
    pub messages: Vec<SeedMessage>,
}

/// A message of a [`SeedSession`]. An assistant message answers the user message before it
/// (its `parentID`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedMessage {
    /// `msg_...`
    pub id: String,
    /// `user` or `assistant`.
    pub role: String,
    /// The text of its one text part.
    pub text: String,
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

fn seeded_state(seed: &SeedSession, directory: &str) -> io::Result<SessionState> {
    if !seed.session_id.starts_with("ses") || !ids::is_storable(&seed.session_id) {
        return Err(invalid(format!(
            "seed session id `{}` must start with `ses` and use only letters, digits, `_`, `-`",
            seed.session_id
        )));
    }
    let mut state = SessionState::new(&seed.session_id, directory, None, None);
    let mut last_user: Option<String> = None;
    for message in &seed.messages {
        if !message.id.starts_with("msg") {
            return Err(invalid(format!(
                "seed message id `{}` must start with `msg`",
                message.id
            )));
        }
        if state.message(&message.id).is_some() {
            return Err(invalid(format!(
                "seed message id `{}` appears twice in session `{}`",
                message.id, seed.session_id
            )));
        }
        let stored = match message.role.as_str() {
            "user" => {
                last_user = Some(message.id.clone());
                user_text_message(&seed.session_id, &message.id, &message.text)
            }
            "assistant" => {
                let parent = last_user.as_deref().ok_or_else(|| {
                    invalid(format!(
                        "seed assistant message `{}` has no user message before it",
                        message.id
                    ))
                })?;
                assistant_message(
                    &seed.session_id,
                    &message.id,
                    parent,
                    &message.text,
                    &Model::default(),
                    directory,
                    None,
                )
            }
            other => {
                return Err(invalid(format!(
                    "seed message `{}` has role `{other}`; expected `user` or `assistant`",
                    message.id
                )))
            }
        };
        state.messages.push(stored);
    }
    Ok(state)
}

/// Plants `sessions` (replacing any stored session with the same id) in the mock whose
/// `XDG_DATA_HOME` is `data_home`. Safe before or between server runs; a running server reads
/// sessions from disk on every call, so it sees them too.
pub fn seed_sessions(data_home: &Path, sessions: &[SeedSession]) -> io::Result<()> {
    let home = runtime_home(data_home);
    let directory = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let states = sessions
        .iter()
        .map(|seed| seeded_state(seed, &directory))
        .collect::<io::Result<Vec<_>>>()?;
    for state in &states {
        save(&home, state)?;
    }
    Ok(())
}

/// Reads the session `id` of the mock whose `XDG_DATA_HOME` is `data_home`, as last written.
pub fn read_session(data_home: &Path, id: &str) -> io::Result<Option<SessionState>> {
    load(&runtime_home(data_home), id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeded() -> SessionState {
        let seed = SeedSession {
            session_id: "ses_test".into(),
            messages: vec![
                SeedMessage {
                    id: "msg_01".into(),
                    role: "user".into(),
                    text: "one".into(),
                },
                SeedMessage {
                    id: "msg_02".into(),
                    role: "assistant".into(),
                    text: "r1".into(),
                },
                SeedMessage {
                    id: "msg_03".into(),
                    role: "user".into(),
                    text: "two".into(),
                },
                SeedMessage {
                    id: "msg_04".into(),
                    role: "assistant".into(),
                    text: "r2".into(),
                },
            ],
        };
        seeded_state(&seed, "/work").unwrap()
    }

    #[test]
    fn seeded_assistants_answer_the_user_before_them() {
        let state = seeded();
        assert_eq!(
            state.message_ids(),
            ["msg_01", "msg_02", "msg_03", "msg_04"]
        );
        assert_eq!(state.message("msg_04").unwrap().parent_id(), Some("msg_03"));
        assert_eq!(state.message("msg_03").unwrap().text(), "two");
        assert_eq!(state.user_message_ids(), ["msg_01", "msg_03"]);
    }

    #[test]
    fn revert_is_two_phase_and_anchors_on_the_user_message() {
        let mut state = seeded();
        assert!(state.apply_revert("msg_04", None, false));
        assert_eq!(state.revert_message_id(), Some("msg_03"));
        assert_eq!(state.message_ids().len(), 4, "revert deletes nothing yet");
        let json = serde_json::to_value(&state.info).unwrap();
        assert_eq!(json["revert"], json!({ "messageID": "msg_03" }));
        assert_eq!(state.cleanup_revert(), ["msg_03", "msg_04"]);
        assert_eq!(state.message_ids(), ["msg_01", "msg_02"]);
        assert!(state.revert().is_none());
    }

    #[test]
    fn unknown_targets_change_nothing_and_unrevert_clears() {
        let mut state = seeded();
        assert!(!state.apply_revert("msg_99", None, false));
        assert!(state.revert().is_none());
        assert!(state.apply_revert("msg_01", None, true));
        let revert = state.revert().unwrap().clone();
        assert!(revert.snapshot.is_some() && revert.diff.is_some());
        assert!(state.apply_revert("msg_03", None, true));
        assert_eq!(
            state.revert().unwrap().snapshot,
            revert.snapshot,
            "snapshot kept"
        );
        assert!(state.unrevert());
        assert!(!state.unrevert());
        let json = serde_json::to_value(&state.info).unwrap();
        assert!(json.get("revert").is_none(), "revert key absent: {json}");
    }

    #[test]
    fn part_reverts_keep_the_part_only_after_text() {
        let mut state = seeded();
        let parts: Vec<String> = state.messages[3]
            .parts
            .iter()
            .map(|p| p["id"].as_str().unwrap().to_owned())
            .collect();
        // The text part follows only step-start: whole-message revert, anchored on the user.
        assert!(state.apply_revert("msg_04", Some(&parts[1]), false));
        assert_eq!(state.revert().unwrap().part_id, None);
        assert_eq!(state.revert_message_id(), Some("msg_03"));
        // step-finish follows the text part: the part is kept.
        assert!(state.apply_revert("msg_04", Some(&parts[2]), false));
        assert_eq!(
            state.revert().unwrap().part_id.as_deref(),
            Some(parts[2].as_str())
        );
        assert_eq!(state.revert_message_id(), Some("msg_04"));
    }

    #[test]
    fn seeds_are_checked() {
        let bad = SeedSession {
            session_id: "ses_x".into(),
            messages: vec![SeedMessage {
                id: "msg_1".into(),
                role: "assistant".into(),
                text: "x".into(),
            }],
        };
        assert!(seeded_state(&bad, "/").is_err());
        let bad = SeedSession {
            session_id: "nope".into(),
            messages: vec![],
        };
        assert!(seeded_state(&bad, "/").is_err());
    }

    #[test]
    fn sessions_round_trip_through_files() {
        let dir = tempfile::tempdir().unwrap();
        let home = runtime_home(dir.path());
        assert!(load(&home, "ses_test").unwrap().is_none());
        assert!(load(&home, "ses_../x").unwrap().is_none());
        let state = seeded();
        save(&home, &state).unwrap();
        assert_eq!(load(&home, "ses_test").unwrap().unwrap(), state);
        assert_eq!(list(&home).unwrap().len(), 1);
    }
}
