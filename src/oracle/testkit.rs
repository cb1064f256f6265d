//! Test support: [`Seed`], a builder of spec-table snapshots by hand, and [`apply`], a plain
//! application of an [`Effect`] to a seed that makes the after-state of a correct rewind (which
//! the tests then break in the ways wrong implementations do).

use std::collections::BTreeMap;

use chrono::{Duration, TimeZone, Utc};
use serde_json::{json, Map, Value};

use super::predict::Effect;
use super::spec;
use super::state::{State, SPEC_TABLES};
use crate::inspect::DbSnapshot;
use rewind_driver_protocol::RewindResponse;

/// The workspace every seed lives in.
pub const WS: &str = "ws";

/// The time of global seq `g`: `g` minutes after the base time, as `to_jsonb` renders it.
pub fn at(g: i64) -> String {
    let base = Utc
        .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or_default();
    (base + Duration::minutes(g))
        .format("%Y-%m-%dT%H:%M:%S+00:00")
        .to_string()
}

/// Rows of every spec table, as JSON objects, editable.
#[derive(Debug, Clone)]
pub struct Seed {
    pub tables: BTreeMap<String, Vec<Map<String, Value>>>,
    next_global: i64,
    next_serial: i64,
}

fn obj(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

impl Seed {
    /// One workspace, nothing else.
    pub fn new() -> Self {
        let mut tables: BTreeMap<String, Vec<Map<String, Value>>> = SPEC_TABLES
            .iter()
            .map(|(name, _)| ((*name).to_owned(), Vec::new()))
            .collect();
        tables.insert(
            "workspaces".into(),
            vec![obj(
                json!({"id": WS, "name": "Acme", "latest_global_seq": 0,
                            "created_at": at(0)}),
            )],
        );
        Seed {
            tables,
            next_global: 1,
            next_serial: 1,
        }
    }

    /// A DM between alice and the codex agent cody: alice `m-1`, cody `m-2`, alice `m-3`, cody
    /// `m-4`; cody's recovery points on `m-1` and `m-3`; a bob in the workspace; a projection
    /// of every kind on `m-1` and on `m-4`; cursors and sync-dirty frontiers at the end.
    pub fn dm() -> Self {
        let mut s = Seed::new();
        s.human("alice").human("bob").machine("box", false);
        s.agent("cody", "codex", Some("box"));
        s.scope("dm", "dm");
        s.say("dm", "m-1", "alice")
            .say("dm", "m-2", "@cody")
            .say("dm", "m-3", "alice")
            .say("dm", "m-4", "@cody");
        s.member("dm", "alice", 4, 4, 4)
            .member("dm", "@cody", 4, 4, 0);
        s.insert(
            "scope_private_grants",
            json!({"scope_id": "dm", "user_id": "alice", "grant_kind": "read", "created_at": at(0)}),
        );
        s.point("cody", "m-1").point("cody", "m-3");
        s.outbox("m-1", "@cody", "delivered")
            .outbox("m-3", "@cody", "delivered")
            .outbox("m-4", "alice", "pending")
            .outbox("m-2", "alice", "delivered");
        s.activity("m-3", "consumed").activity("m-4", "pending");
        s.insert(
            "scope_sync_dirty",
            json!({"scope_id": "dm", "latest_message_seq": 4, "latest_activity_seq": 2,
                   "updated_at": at(0)}),
        );
        s.insert(
            "member_scope_sync_dirty",
            json!({"scope_id": "dm", "user_id": "alice", "latest_message_seq": 4,
                   "latest_activity_seq": 2, "updated_at": at(0)}),
        );
        for m in ["m-1", "m-4"] {
            s.projections(m);
        }
        s.derive();
        s
    }

    pub fn human(&mut self, id: &str) -> &mut Self {
        self.insert(
            "users",
            json!({"id": id, "workspace_id": WS, "display_name": id, "created_at": at(0)}),
        )
    }

    pub fn machine(&mut self, id: &str, deleted: bool) -> &mut Self {
        let deleted_at = if deleted { json!(at(0)) } else { Value::Null };
        self.insert(
            "machines",
            json!({"id": id, "workspace_id": WS, "name": id, "deleted_at": deleted_at,
                   "created_at": at(0)}),
        )
    }

    pub fn agent(&mut self, id: &str, runtime: &str, machine: Option<&str>) -> &mut Self {
        self.insert(
            "agents",
            json!({"id": id, "workspace_id": WS, "display_name": id, "runtime": runtime,
                   "machine_id": machine, "runtime_session_id": format!("session-{id}"),
                   "deleted_at": null, "created_at": at(0)}),
        )
    }

    pub fn scope(&mut self, id: &str, kind: &str) -> &mut Self {
        self.insert(
            "scopes",
            json!({"id": id, "workspace_id": WS, "kind": kind, "name": id,
                   "parent_scope_id": null, "parent_message_id": null, "archived_at": null,
                   "latest_seq": 0, "latest_global_seq": 0, "latest_message_at": null,
                   "visible_message_count": 0, "visible_last_message_at": null,
                   "created_at": at(0)}),
        )
    }

    pub fn thread(&mut self, id: &str, parent_scope: &str, parent_message: &str) -> &mut Self {
        self.scope(id, "reply_thread");
        self.edit("scopes", id, |r| {
            r.insert("parent_scope_id".into(), json!(parent_scope));
            r.insert("parent_message_id".into(), json!(parent_message));
        })
    }

    /// Appends a message: `author` is a human id, `@agent`, `system`, `service` or `app`. Its
    /// content is `said <id> CANARY-<id>`.
    pub fn say(&mut self, scope: &str, id: &str, author: &str) -> &mut Self {
        let seq = self
            .rows("scope_messages")
            .filter(|r| r.get("scope_id") == Some(&json!(scope)))
            .filter_map(|r| r.get("seq").and_then(Value::as_i64))
            .max()
            .unwrap_or(0)
            + 1;
        let g = self.next_global;
        self.next_global += 1;
        let (kind, user, agent) = match author {
            "system" | "service" | "app" => (author, Value::Null, Value::Null),
            a if a.starts_with('@') => ("agent", Value::Null, json!(&a[1..])),
            human => ("human", json!(human), Value::Null),
        };
        self.insert(
            "scope_messages",
            json!({"id": id, "workspace_id": WS, "scope_id": scope, "seq": seq, "global_seq": g,
                   "author_kind": kind, "author_user_id": user, "author_agent_id": agent,
                   "content": format!("said {id} CANARY-{id}"), "metadata": {},
                   "client_message_id": null, "storage_tier": "hot", "reply_count": 0,
                   "last_reply_at": null, "created_at": at(g)}),
        )
    }

    /// A membership of a human (`alice`) or an agent (`@cody`) with its cursors.
    pub fn member(
        &mut self,
        scope: &str,
        who: &str,
        seq: i64,
        gseq: i64,
        dismissed: i64,
    ) -> &mut Self {
        let id = self.serial();
        let (kind, user, agent) = match who.strip_prefix('@') {
            Some(a) => ("agent", Value::Null, json!(a)),
            None => ("human", json!(who), Value::Null),
        };
        self.insert(
            "scope_memberships",
            json!({"id": id, "scope_id": scope, "member_kind": kind, "user_id": user,
                   "agent_id": agent, "role": "member", "last_read_seq": seq,
                   "last_read_global_seq": gseq,
                   "owner_context_dismissed_through_global_seq": dismissed,
                   "created_at": at(0)}),
        )
    }

    /// A recovery point of `agent` on `message`, of its runtime's strategy.
    pub fn point(&mut self, agent: &str, message: &str) -> &mut Self {
        let runtime = self
            .find("agents", agent)
            .and_then(|r| r.get("runtime").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default();
        let strategy = spec::strategy_of(&runtime).unwrap_or("opencode_session_revert");
        let scope = self.scope_of(message);
        self.insert(
            "message_recovery_points",
            json!({"id": format!("rp-{message}-{agent}"), "workspace_id": WS, "scope_id": scope,
                   "message_id": message, "agent_id": agent, "runtime": runtime,
                   "strategy": strategy, "recovery_ref": {"threadId": "t", "turnCount": 0},
                   "created_at": at(0)}),
        )
    }

    /// A fanout row of `message` to a human or (`@agent`) an agent.
    pub fn outbox(&mut self, message: &str, to: &str, status: &str) -> &mut Self {
        let id = self.serial();
        let (kind, recipient) = match to.strip_prefix('@') {
            Some(a) => ("agent", a),
            None => ("human", to),
        };
        let scope = self.scope_of(message);
        let leased = if status == "leased" {
            json!(at(90))
        } else {
            Value::Null
        };
        self.insert(
            "scope_fanout_outbox",
            json!({"id": id, "scope_id": scope, "message_id": message, "recipient_kind": kind,
                   "recipient_id": recipient, "status": status,
                   "payload": {"preview": format!("CANARY-{message}")}, "leased_until": leased,
                   "created_at": at(0)}),
        )
    }

    /// An activity event of `message`.
    pub fn activity(&mut self, message: &str, status: &str) -> &mut Self {
        let id = self.serial();
        let scope = self.scope_of(message);
        self.insert(
            "scope_activity_events",
            json!({"id": id, "scope_id": scope, "message_id": message, "kind": "message.created",
                   "status": status, "payload": {"excerpt": format!("CANARY-{message}")},
                   "created_at": at(0)}),
        )
    }

    /// One row of every projection kind bound to `message`, quoting it where a projection
    /// quotes.
    pub fn projections(&mut self, message: &str) -> &mut Self {
        let scope = self.scope_of(message);
        let canary = format!("CANARY-{message}");
        let serial = self.serial();
        let serial2 = self.serial();
        self.insert(
            "scope_share_cards",
            json!({"id": format!("card-{message}"), "scope_id": scope,
            "message_id": message, "target_scope_id": null, "shared_by": "alice",
            "action_state": {}, "created_at": at(0)}),
        )
        .insert(
            "scope_message_reactions",
            json!({"scope_id": scope, "message_id": message,
            "reactor_kind": "human", "reactor_id": "alice", "emoji": "+1", "created_at": at(0)}),
        )
        .insert(
            "scope_message_pins",
            json!({"scope_id": scope, "message_id": message,
            "pinned_by": "alice", "created_at": at(0)}),
        )
        .insert(
            "scope_message_top_notices",
            json!({"scope_id": scope, "message_id": message,
            "set_by": "alice", "created_at": at(0)}),
        )
        .insert(
            "scope_message_search_docs",
            json!({"message_id": message, "scope_id": scope,
            "body": canary, "body_tsv": "'x':1", "created_at": at(0)}),
        )
        .insert(
            "attachments",
            json!({"id": format!("att-{message}"), "workspace_id": WS,
            "owner_kind": "message", "scope_id": scope, "message_id": message, "task_id": null,
            "uploaded_by": "alice", "file_name": format!("{canary}.txt"),
            "content_type": "text/plain", "byte_size": 1, "storage_key": "k", "created_at": at(0)}),
        )
        .insert(
            "im_stream_events",
            json!({"id": serial, "workspace_id": WS, "scope_id": scope,
            "message_id": message, "event_type": "message.created",
            "payload_json": {"messageId": message, "content": canary}, "created_at": at(0)}),
        )
        .insert(
            "im_conversation_index",
            json!({"scope_id": scope,
            "user_id": format!("reader-{serial2}"), "last_message_id": message,
            "projection_json": {"unread": 0, "lastMessage": {"id": message, "preview": canary}},
            "updated_at": at(0)}),
        )
    }

    /// A source: `message` cites `cited`.
    pub fn source(&mut self, message: &str, cited: &str) -> &mut Self {
        let scope = self.scope_of(message);
        self.insert(
            "scope_message_sources",
            json!({"id": format!("src-{message}-{cited}"), "scope_id": scope, "message_id": message,
                   "source_message_id": cited, "snippet": format!("CANARY-{cited}"),
                   "created_at": at(0)}),
        )
    }

    pub fn insert(&mut self, table: &str, row: Value) -> &mut Self {
        self.tables
            .entry(table.to_owned())
            .or_default()
            .push(obj(row));
        self
    }

    /// Edits the row of `table` whose key columns render as `key`.
    pub fn edit(
        &mut self,
        table: &str,
        key: &str,
        f: impl FnOnce(&mut Map<String, Value>),
    ) -> &mut Self {
        let columns = key_columns(table);
        if let Some(row) = self
            .tables
            .get_mut(table)
            .and_then(|rows| rows.iter_mut().find(|r| row_key(r, columns) == key))
        {
            f(row);
        } else {
            panic!("no `{table}` row `{key}` to edit");
        }
        self
    }

    /// Sets one column of one row.
    pub fn set(&mut self, table: &str, key: &str, column: &str, value: Value) -> &mut Self {
        self.edit(table, key, |r| {
            r.insert(column.to_owned(), value);
        })
    }

    /// Removes the rows of `table` that `keep` rejects.
    pub fn retain(&mut self, table: &str, keep: impl Fn(&Map<String, Value>) -> bool) -> &mut Self {
        if let Some(rows) = self.tables.get_mut(table) {
            rows.retain(|r| keep(r));
        }
        self
    }

    pub fn find(&self, table: &str, key: &str) -> Option<&Map<String, Value>> {
        let columns = key_columns(table);
        self.tables
            .get(table)
            .and_then(|rows| rows.iter().find(|r| row_key(r, columns) == key))
    }

    pub fn rows<'a>(&'a self, table: &str) -> impl Iterator<Item = &'a Map<String, Value>> + 'a {
        self.tables.get(table).into_iter().flatten()
    }

    fn serial(&mut self) -> i64 {
        self.next_serial += 1;
        self.next_serial
    }

    fn scope_of(&self, message: &str) -> String {
        self.find("scope_messages", message)
            .and_then(|r| r.get("scope_id").and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned()
    }

    /// Recomputes the derived columns as a live system keeps them (the fixtures' rules).
    pub fn derive(&mut self) -> &mut Self {
        let messages: Vec<Map<String, Value>> = self.rows("scope_messages").cloned().collect();
        let rewound = |m: &Map<String, Value>| {
            m.get("metadata")
                .and_then(|v| v.get("messageRecall"))
                .and_then(|v| v.get("status"))
                .and_then(Value::as_str)
                == Some("rewound")
        };
        let int = |m: &Map<String, Value>, c: &str| m.get(c).and_then(Value::as_i64).unwrap_or(0);
        let scopes: Vec<Map<String, Value>> = self.rows("scopes").cloned().collect();
        for scope in &scopes {
            let id = scope.get("id").cloned().unwrap_or_default();
            let mine: Vec<&Map<String, Value>> = messages
                .iter()
                .filter(|m| m.get("scope_id") == Some(&id))
                .collect();
            let visible: Vec<&&Map<String, Value>> = mine.iter().filter(|m| !rewound(m)).collect();
            let last = visible.iter().map(|m| int(m, "global_seq")).max().map(at);
            let key = id.as_str().unwrap_or_default().to_owned();
            self.edit("scopes", &key, |r| {
                r.insert(
                    "latest_seq".into(),
                    json!(mine.iter().map(|m| int(m, "seq")).max().unwrap_or(0)),
                );
                r.insert(
                    "latest_global_seq".into(),
                    json!(mine.iter().map(|m| int(m, "global_seq")).max().unwrap_or(0)),
                );
                r.insert("visible_message_count".into(), json!(visible.len()));
                r.insert("latest_message_at".into(), json!(last));
                r.insert("visible_last_message_at".into(), json!(last));
            });
        }
        for m in &messages {
            let id = m.get("id").cloned().unwrap_or_default();
            let replies: Vec<&Map<String, Value>> = scopes
                .iter()
                .filter(|s| {
                    s.get("parent_message_id") == Some(&id)
                        && s.get("archived_at") == Some(&Value::Null)
                })
                .flat_map(|s| {
                    messages
                        .iter()
                        .filter(move |x| x.get("scope_id") == s.get("id"))
                })
                .filter(|x| !rewound(x))
                .collect();
            let last = replies.iter().map(|x| int(x, "global_seq")).max().map(at);
            let key = id.as_str().unwrap_or_default().to_owned();
            self.edit("scope_messages", &key, |r| {
                r.insert("reply_count".into(), json!(replies.len()));
                r.insert("last_reply_at".into(), json!(last));
            });
        }
        let top = messages
            .iter()
            .map(|m| int(m, "global_seq"))
            .max()
            .unwrap_or(0);
        self.set("workspaces", WS, "latest_global_seq", json!(top));
        self
    }

    pub fn snapshot(&self) -> DbSnapshot {
        let mut snapshot = DbSnapshot::default();
        for (name, rows) in &self.tables {
            let mut texts: Vec<String> = rows
                .iter()
                .map(|r| Value::Object(r.clone()).to_string())
                .collect();
            texts.sort();
            snapshot.tables.insert(name.clone(), texts);
        }
        snapshot
    }

    pub fn state(&self) -> State {
        match State::from_snapshot(&self.snapshot()) {
            Ok(state) => state,
            Err(e) => panic!("a test seed must read: {e}"),
        }
    }
}

fn key_columns(table: &str) -> &'static [&'static str] {
    SPEC_TABLES
        .iter()
        .find(|(name, _)| *name == table)
        .map(|(_, k)| *k)
        .unwrap_or(&["id"])
}

fn row_key(row: &Map<String, Value>, columns: &[&str]) -> String {
    columns
        .iter()
        .map(|c| match row.get(*c) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        })
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The readings a correct implementation built by [`apply`] takes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Choices {
    /// `rewoundAt` beside `messageRecall` instead of inside.
    pub rewound_at_beside: bool,
    /// The notice moves the primary scope's sync-dirty frontiers to its seq.
    pub notice_dirty: bool,
    /// Failed fanout rows of the suffix are suppressed too.
    pub suppress_failed: bool,
    /// Stream events of the suffix are deleted instead of losing their content keys.
    pub delete_stream_events: bool,
    /// Index rows of the suffix are deleted instead of dropping their last message.
    pub delete_index_rows: bool,
    /// The notice counts as a reply in the parent's summary.
    pub notice_is_reply: bool,
    /// The answer lists the rewound ids.
    pub answer_lists_ids: bool,
}

/// The time a rewind happens at in tests: after every seeded message.
pub const REWIND_AT: &str = "2026-06-28T00:00:00+00:00";

/// What a correct implementation leaves after completing `effect` as operation `op`, and its
/// answer.
pub fn apply(before: &Seed, effect: &Effect, op: &str, choices: Choices) -> (Seed, RewindResponse) {
    let mut s = before.clone();
    let ids = effect.rewound_ids();
    let rewound = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .is_some_and(|id| ids.iter().any(|i| i == id))
    };
    for table in [
        "scope_share_cards",
        "scope_message_reactions",
        "scope_message_pins",
        "scope_message_top_notices",
        "scope_message_search_docs",
        "attachments",
        "message_recovery_points",
    ] {
        s.retain(table, |r| !rewound(r.get("message_id")));
    }
    s.retain("scope_message_sources", |r| {
        !rewound(r.get("message_id")) && !rewound(r.get("source_message_id"))
    });
    for row in s
        .tables
        .get_mut("scope_activity_events")
        .into_iter()
        .flatten()
    {
        if rewound(row.get("message_id")) && row.get("status") == Some(&json!("pending")) {
            row.insert("status".into(), json!("suppressed"));
        }
    }
    for row in s
        .tables
        .get_mut("scope_fanout_outbox")
        .into_iter()
        .flatten()
    {
        let status = row
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let suppress = matches!(status.as_str(), "pending" | "leased")
            || (status == "failed" && choices.suppress_failed);
        if rewound(row.get("message_id")) && suppress {
            row.insert("status".into(), json!("suppressed"));
        }
    }
    if choices.delete_stream_events {
        s.retain("im_stream_events", |r| !rewound(r.get("message_id")));
    } else {
        for row in s.tables.get_mut("im_stream_events").into_iter().flatten() {
            if rewound(row.get("message_id")) {
                if let Some(Value::Object(payload)) = row.get_mut("payload_json") {
                    payload.retain(|k, _| {
                        !spec::CONTENT_BEARING_KEYS.contains(&k.to_ascii_lowercase().as_str())
                    });
                }
            }
        }
    }
    if choices.delete_index_rows {
        s.retain("im_conversation_index", |r| {
            !rewound(r.get("last_message_id"))
        });
    } else {
        for row in s
            .tables
            .get_mut("im_conversation_index")
            .into_iter()
            .flatten()
        {
            if rewound(row.get("last_message_id")) {
                row.insert("last_message_id".into(), Value::Null);
                if let Some(Value::Object(p)) = row.get_mut("projection_json") {
                    p.remove("lastMessage");
                }
                row.insert("updated_at".into(), json!(REWIND_AT));
            }
        }
    }
    let metadata = if choices.rewound_at_beside {
        json!({"messageRecall": {"status": "rewound"}, "rewoundAt": "2026-06-28T00:00:00Z"})
    } else {
        json!({"messageRecall": {"status": "rewound", "rewoundAt": "2026-06-28T00:00:00Z"}})
    };
    for id in &ids {
        s.set("scope_messages", id, "content", json!(""));
        s.set("scope_messages", id, "metadata", metadata.clone());
    }
    for cascade in &effect.cascades {
        s.set("scopes", &cascade.scope_id, "archived_at", json!(REWIND_AT));
        s.set(
            "scope_messages",
            &cascade.parent_message_id,
            "reply_count",
            json!(0),
        );
        s.set(
            "scope_messages",
            &cascade.parent_message_id,
            "last_reply_at",
            Value::Null,
        );
    }
    let mut tails = BTreeMap::new();
    for scope in effect.tombstone_scopes() {
        let tail = s
            .rows("scope_messages")
            .filter(|m| m.get("scope_id") == Some(&json!(scope)))
            .filter(|m| {
                m.get("metadata")
                    .and_then(|v| v.get("messageRecall"))
                    .is_none()
                    || m["metadata"]["messageRecall"]["status"] != json!("rewound")
            })
            .fold((0, 0), |(a, b), m| {
                (
                    a.max(m["seq"].as_i64().unwrap_or(0)),
                    b.max(m["global_seq"].as_i64().unwrap_or(0)),
                )
            });
        tails.insert(scope, tail);
    }
    for row in s.tables.get_mut("scope_memberships").into_iter().flatten() {
        let scope = row
            .get("scope_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if let Some((seq, gseq)) = tails.get(&scope) {
            for (column, tail) in [
                ("last_read_seq", seq),
                ("last_read_global_seq", gseq),
                ("owner_context_dismissed_through_global_seq", gseq),
            ] {
                let old = row.get(column).and_then(Value::as_i64).unwrap_or(0);
                row.insert(column.into(), json!(old.min(*tail)));
            }
        }
    }
    let primary = effect.primary.scope_id.clone();
    let notice_seq = s
        .find("scopes", &primary)
        .and_then(|r| r["latest_seq"].as_i64())
        .unwrap_or(0)
        + 1;
    let notice_global = s
        .find("workspaces", WS)
        .and_then(|r| r["latest_global_seq"].as_i64())
        .unwrap_or(0)
        + 1;
    for table in ["scope_sync_dirty", "member_scope_sync_dirty"] {
        for row in s.tables.get_mut(table).into_iter().flatten() {
            let scope = row
                .get("scope_id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if let Some((seq, _)) = tails.get(&scope) {
                let old = row
                    .get("latest_message_seq")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                let new = if choices.notice_dirty && scope == primary {
                    notice_seq
                } else {
                    old.min(*seq)
                };
                row.insert("latest_message_seq".into(), json!(new));
                row.insert("updated_at".into(), json!(REWIND_AT));
            }
        }
    }
    let notice_id = format!("notice-{op}");
    s.insert(
        "scope_messages",
        json!({"id": notice_id, "workspace_id": WS, "scope_id": primary,
        "seq": notice_seq, "global_seq": notice_global, "author_kind": "system",
        "author_user_id": null, "author_agent_id": null,
        "content": format!("{} rewound the conversation", effect.initiator_user_id),
        "metadata": {}, "client_message_id": spec::notice_client_id(op), "storage_tier": "hot",
        "reply_count": 0, "last_reply_at": null, "created_at": REWIND_AT}),
    );
    s.set("workspaces", WS, "latest_global_seq", json!(notice_global));
    for scope in effect.tombstone_scopes() {
        let visible: Vec<Map<String, Value>> = s
            .rows("scope_messages")
            .filter(|m| m.get("scope_id") == Some(&json!(scope)))
            .filter(|m| m["metadata"]["messageRecall"]["status"] != json!("rewound"))
            .cloned()
            .collect();
        let last = visible
            .iter()
            .filter_map(|m| m["created_at"].as_str().map(str::to_owned))
            .max();
        s.edit("scopes", &scope, |r| {
            r.insert("visible_message_count".into(), json!(visible.len()));
            r.insert("latest_message_at".into(), json!(last));
            r.insert("visible_last_message_at".into(), json!(last));
            if scope == primary {
                r.insert("latest_seq".into(), json!(notice_seq));
                r.insert("latest_global_seq".into(), json!(notice_global));
            }
        });
    }
    if let Some(parent) = &effect.thread_parent {
        let replies: Vec<Map<String, Value>> = s
            .rows("scope_messages")
            .filter(|m| m.get("scope_id") == Some(&json!(primary)))
            .filter(|m| m["metadata"]["messageRecall"]["status"] != json!("rewound"))
            .filter(|m| choices.notice_is_reply || m["id"] != json!(notice_id))
            .cloned()
            .collect();
        let last = replies
            .iter()
            .filter_map(|m| m["created_at"].as_str().map(str::to_owned))
            .max();
        s.set(
            "scope_messages",
            &parent.message_id,
            "reply_count",
            json!(replies.len()),
        );
        s.set(
            "scope_messages",
            &parent.message_id,
            "last_reply_at",
            json!(last),
        );
    }
    s.insert(
        "rewind_operations",
        json!({"id": op, "workspace_id": WS, "thread_id": primary,
        "target_message_id": effect.primary.target_message_id,
        "initiator_user_id": effect.initiator_user_id, "status": "completed", "plan": {},
        "rewound_message_ids": ids, "error_code": null, "error_message": null,
        "created_at": REWIND_AT, "updated_at": REWIND_AT, "completed_at": REWIND_AT}),
    );
    let answer = RewindResponse::Completed {
        operation_id: op.to_owned(),
        status: "completed".to_owned(),
        rewound_message_ids: if choices.answer_lists_ids {
            ids.clone()
        } else {
            Vec::new()
        },
    };
    (s, answer)
}
