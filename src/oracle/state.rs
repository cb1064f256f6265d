//! [`State`]: a database snapshot read as the spec schema (`0001_spec_schema.sql`).
//!
//! Every row of every table is kept as its full JSON, keyed by the table's primary key, so that
//! rows a rewind must leave alone can be compared exactly. The tables the oracle reasons about
//! are also read into typed rows. Tables the schema does not define are kept as raw text and
//! must stay unchanged; columns it does not define are kept inside each row's JSON and so are
//! compared with the rest of the row.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::error::OracleError;
use crate::inspect::DbSnapshot;

/// The spec tables and the columns of each one's primary key.
pub const SPEC_TABLES: [(&str, &[&str]); 23] = [
    ("workspaces", &["id"]),
    ("users", &["id"]),
    ("machines", &["id"]),
    ("agents", &["id"]),
    ("scopes", &["id"]),
    ("scope_messages", &["id"]),
    ("scope_memberships", &["id"]),
    (
        "scope_private_grants",
        &["scope_id", "user_id", "grant_kind"],
    ),
    ("scope_activity_events", &["id"]),
    ("scope_fanout_outbox", &["id"]),
    ("scope_sync_dirty", &["scope_id"]),
    ("member_scope_sync_dirty", &["scope_id", "user_id"]),
    ("scope_share_cards", &["id"]),
    (
        "scope_message_reactions",
        &["message_id", "reactor_kind", "reactor_id", "emoji"],
    ),
    ("scope_message_pins", &["scope_id", "message_id"]),
    ("scope_message_top_notices", &["scope_id", "message_id"]),
    ("scope_message_search_docs", &["message_id"]),
    ("scope_message_sources", &["id"]),
    ("attachments", &["id"]),
    ("im_stream_events", &["id"]),
    ("im_conversation_index", &["scope_id", "user_id"]),
    ("message_recovery_points", &["id"]),
    ("rewind_operations", &["id"]),
];

/// One row: its primary key (the key columns' values joined by ` / `) and every column.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The primary key as text.
    pub key: String,
    /// Every column of the row, as PostgreSQL's `to_jsonb` rendered it.
    pub columns: Map<String, Value>,
}

impl Row {
    /// The value of `column`, if the row has it.
    pub fn get(&self, column: &str) -> Option<&Value> {
        self.columns.get(column)
    }

    /// The value of `column` when it is a string.
    pub fn str(&self, column: &str) -> Option<&str> {
        self.columns.get(column).and_then(Value::as_str)
    }

    /// The row as one line of JSON.
    pub fn text(&self) -> String {
        Value::Object(self.columns.clone()).to_string()
    }
}

/// The rows of one spec table, by primary key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    /// Key to row.
    pub rows: BTreeMap<String, Row>,
}

impl Table {
    /// The row with this key.
    pub fn get(&self, key: &str) -> Option<&Row> {
        self.rows.get(key)
    }
}

/// Who wrote a message (`scope_messages.author_kind` with its author column).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Author {
    /// A human (`author_user_id`).
    Human(String),
    /// An agent (`author_agent_id`).
    Agent(String),
    /// The system.
    System,
    /// A service.
    Service,
    /// An app.
    App,
    /// An author kind the schema does not know.
    Other(String),
}

impl Author {
    /// Whether the spec's section 3 counts this author as "system / service / app".
    pub fn is_non_participant(&self) -> bool {
        matches!(self, Author::System | Author::Service | Author::App)
    }
}

/// A message's lifecycle, from `metadata.messageRecall.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// Neither recalled nor rewound.
    Live,
    /// Recalled: a visible placeholder (section 1).
    Recalled,
    /// Rewound: a tombstone, treated as non-existent by every read.
    Rewound,
}

/// A `scope_messages` row.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// `id`.
    pub id: String,
    /// `workspace_id`.
    pub workspace_id: String,
    /// `scope_id`.
    pub scope_id: String,
    /// `seq`, scope-local.
    pub seq: i64,
    /// `global_seq`, workspace-wide.
    pub global_seq: i64,
    /// `author_kind` with its author id.
    pub author: Author,
    /// `content`.
    pub content: String,
    /// `metadata`.
    pub metadata: Value,
    /// `client_message_id`.
    pub client_message_id: Option<String>,
    /// `storage_tier`: `hot` or `cold`.
    pub storage_tier: String,
    /// `reply_count`.
    pub reply_count: i64,
    /// `last_reply_at`.
    pub last_reply_at: Option<String>,
    /// `created_at`.
    pub created_at: Option<String>,
}

impl Message {
    /// The lifecycle its metadata records.
    pub fn lifecycle(&self) -> Lifecycle {
        match self
            .metadata
            .get("messageRecall")
            .and_then(|r| r.get("status"))
            .and_then(Value::as_str)
        {
            Some("rewound") => Lifecycle::Rewound,
            Some("recalled") => Lifecycle::Recalled,
            _ => Lifecycle::Live,
        }
    }

    /// Whether the message is a rewound tombstone.
    pub fn is_rewound(&self) -> bool {
        self.lifecycle() == Lifecycle::Rewound
    }

    /// Whether the message is in the live hot history.
    pub fn is_hot(&self) -> bool {
        self.storage_tier == "hot"
    }
}

/// A `scopes` row.
#[derive(Debug, Clone, PartialEq)]
pub struct Scope {
    /// `id`.
    pub id: String,
    /// `workspace_id`.
    pub workspace_id: String,
    /// `kind`: `dm`, `channel` or `reply_thread`.
    pub kind: String,
    /// `parent_scope_id`, for a reply thread.
    pub parent_scope_id: Option<String>,
    /// `parent_message_id`, for a reply thread.
    pub parent_message_id: Option<String>,
    /// Whether `archived_at` is set.
    pub archived: bool,
    /// `latest_seq`, the physical high-water mark.
    pub latest_seq: i64,
    /// `latest_global_seq`, the physical high-water mark.
    pub latest_global_seq: i64,
    /// `latest_message_at`.
    pub latest_message_at: Option<String>,
    /// `visible_message_count`.
    pub visible_message_count: i64,
    /// `visible_last_message_at`.
    pub visible_last_message_at: Option<String>,
}

/// An `agents` row.
#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    /// `id`.
    pub id: String,
    /// `runtime`: a runtime id (or anything else: an unsupported runtime).
    pub runtime: String,
    /// `machine_id`.
    pub machine_id: Option<String>,
    /// Whether `deleted_at` is set.
    pub deleted: bool,
}

/// A `scope_memberships` row.
#[derive(Debug, Clone, PartialEq)]
pub struct Membership {
    /// `id`.
    pub id: String,
    /// `scope_id`.
    pub scope_id: String,
    /// `user_id`, for a human member.
    pub user_id: Option<String>,
    /// `agent_id`, for an agent member.
    pub agent_id: Option<String>,
    /// `last_read_seq`.
    pub last_read_seq: i64,
    /// `last_read_global_seq`.
    pub last_read_global_seq: i64,
    /// `owner_context_dismissed_through_global_seq`.
    pub dismissed_through_global_seq: i64,
}

/// A `message_recovery_points` row.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveryPoint {
    /// `id`.
    pub id: String,
    /// `message_id`.
    pub message_id: String,
    /// `agent_id`.
    pub agent_id: String,
    /// `strategy`.
    pub strategy: String,
}

/// A `scope_fanout_outbox` row.
#[derive(Debug, Clone, PartialEq)]
pub struct Outbox {
    /// `id`.
    pub id: String,
    /// `message_id`.
    pub message_id: Option<String>,
    /// `recipient_kind`: `human` or `agent`.
    pub recipient_kind: String,
    /// `recipient_id`.
    pub recipient_id: String,
    /// `status`.
    pub status: String,
}

/// A `scope_activity_events` row.
#[derive(Debug, Clone, PartialEq)]
pub struct ActivityEvent {
    /// `id`.
    pub id: String,
    /// `message_id`.
    pub message_id: Option<String>,
    /// `status`.
    pub status: String,
}

/// A `rewind_operations` row.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    /// `id`.
    pub id: String,
    /// `workspace_id`.
    pub workspace_id: String,
    /// `thread_id`: the primary rewind scope.
    pub thread_id: String,
    /// `target_message_id`.
    pub target_message_id: String,
    /// `initiator_user_id`.
    pub initiator_user_id: String,
    /// `status`.
    pub status: String,
    /// `rewound_message_ids`.
    pub rewound_message_ids: Vec<String>,
}

/// A database state read as the spec schema.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct State {
    /// Every spec table's rows, by table name.
    pub tables: BTreeMap<String, Table>,
    /// Tables the spec schema does not define: their rows as the snapshot's text, sorted.
    pub extra_tables: BTreeMap<String, Vec<String>>,
    /// `workspaces.latest_global_seq` by workspace id.
    pub workspace_global_seq: BTreeMap<String, i64>,
    /// Deleted machines (`machines.deleted_at` set), and the machines that exist.
    pub machines: BTreeMap<String, bool>,
    /// `agents` by id.
    pub agents: BTreeMap<String, Agent>,
    /// `scopes` by id.
    pub scopes: BTreeMap<String, Scope>,
    /// `scope_messages` by id.
    pub messages: BTreeMap<String, Message>,
    /// `scope_memberships` by id.
    pub memberships: BTreeMap<String, Membership>,
    /// `message_recovery_points` by id.
    pub recovery_points: BTreeMap<String, RecoveryPoint>,
    /// `scope_fanout_outbox` by id.
    pub outbox: BTreeMap<String, Outbox>,
    /// `scope_activity_events` by id.
    pub activity: BTreeMap<String, ActivityEvent>,
    /// `rewind_operations` by id.
    pub operations: BTreeMap<String, Operation>,
    by_scope: BTreeMap<String, Vec<String>>,
}

impl State {
    /// Reads every table of `snapshot`. Fails on a missing spec table, a row that is not a JSON
    /// object, a missing key or typed column, a value of the wrong type or a duplicate key.
    pub fn from_snapshot(snapshot: &DbSnapshot) -> Result<State, OracleError> {
        let mut state = State::default();
        for (name, key_columns) in SPEC_TABLES {
            let rows = snapshot
                .tables
                .get(name)
                .ok_or_else(|| OracleError::MissingTable {
                    table: name.to_owned(),
                })?;
            state
                .tables
                .insert(name.to_owned(), read_table(name, key_columns, rows)?);
        }
        for (name, rows) in &snapshot.tables {
            if !SPEC_TABLES.iter().any(|(spec, _)| spec == name) {
                let mut rows = rows.clone();
                rows.sort();
                state.extra_tables.insert(name.clone(), rows);
            }
        }
        state.read_typed()?;
        Ok(state)
    }

    /// The rows of spec table `name` (empty for a name the schema does not define).
    pub fn table(&self, name: &str) -> &Table {
        static EMPTY: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
        self.tables
            .get(name)
            .unwrap_or_else(|| EMPTY.get_or_init(Table::default))
    }

    /// The message with this id.
    pub fn message(&self, id: &str) -> Option<&Message> {
        self.messages.get(id)
    }

    /// The scope with this id.
    pub fn scope(&self, id: &str) -> Option<&Scope> {
        self.scopes.get(id)
    }

    /// Every message of `scope_id`, rewound ones included, in `seq` order.
    pub fn scope_messages<'a>(&'a self, scope_id: &str) -> impl Iterator<Item = &'a Message> + 'a {
        self.by_scope
            .get(scope_id)
            .into_iter()
            .flatten()
            .filter_map(move |id| self.messages.get(id))
    }

    /// The non-rewound messages of `scope_id`, in `seq` order.
    pub fn visible_messages<'a>(
        &'a self,
        scope_id: &str,
    ) -> impl Iterator<Item = &'a Message> + 'a {
        self.scope_messages(scope_id).filter(|m| !m.is_rewound())
    }

    /// The live (non-archived) reply threads forking from `message_id`, by scope id.
    pub fn live_threads_of(&self, message_id: &str) -> Vec<&Scope> {
        self.scopes
            .values()
            .filter(|s| !s.archived && s.parent_message_id.as_deref() == Some(message_id))
            .collect()
    }

    /// Every reply thread forking from `message_id`, archived ones included.
    pub fn threads_of(&self, message_id: &str) -> Vec<&Scope> {
        self.scopes
            .values()
            .filter(|s| s.parent_message_id.as_deref() == Some(message_id))
            .collect()
    }

    /// The ids of every rewound message.
    pub fn rewound_ids(&self) -> BTreeSet<String> {
        self.messages
            .values()
            .filter(|m| m.is_rewound())
            .map(|m| m.id.clone())
            .collect()
    }

    fn read_typed(&mut self) -> Result<(), OracleError> {
        let tables = std::mem::take(&mut self.tables);
        let result = self.read_typed_from(&tables);
        self.tables = tables;
        result
    }

    fn read_typed_from(&mut self, tables: &BTreeMap<String, Table>) -> Result<(), OracleError> {
        let empty = Table::default();
        let table = |name: &str| tables.get(name).unwrap_or(&empty);
        for row in table("workspaces").rows.values() {
            let r = Reader::new("workspaces", row);
            self.workspace_global_seq
                .insert(r.text("id")?, r.int("latest_global_seq")?);
        }
        for row in table("machines").rows.values() {
            let r = Reader::new("machines", row);
            self.machines.insert(r.text("id")?, r.is_set("deleted_at")?);
        }
        for row in table("agents").rows.values() {
            let r = Reader::new("agents", row);
            let agent = Agent {
                id: r.text("id")?,
                runtime: r.text("runtime")?,
                machine_id: r.opt_text("machine_id")?,
                deleted: r.is_set("deleted_at")?,
            };
            self.agents.insert(agent.id.clone(), agent);
        }
        for row in table("scopes").rows.values() {
            let r = Reader::new("scopes", row);
            let scope = Scope {
                id: r.text("id")?,
                workspace_id: r.text("workspace_id")?,
                kind: r.text("kind")?,
                parent_scope_id: r.opt_text("parent_scope_id")?,
                parent_message_id: r.opt_text("parent_message_id")?,
                archived: r.is_set("archived_at")?,
                latest_seq: r.int("latest_seq")?,
                latest_global_seq: r.int("latest_global_seq")?,
                latest_message_at: r.opt_text("latest_message_at")?,
                visible_message_count: r.int("visible_message_count")?,
                visible_last_message_at: r.opt_text("visible_last_message_at")?,
            };
            self.scopes.insert(scope.id.clone(), scope);
        }
        for row in table("scope_messages").rows.values() {
            let message = read_message(row)?;
            self.messages.insert(message.id.clone(), message);
        }
        let mut by_scope: BTreeMap<String, Vec<(i64, String)>> = BTreeMap::new();
        for m in self.messages.values() {
            by_scope
                .entry(m.scope_id.clone())
                .or_default()
                .push((m.seq, m.id.clone()));
        }
        self.by_scope = by_scope
            .into_iter()
            .map(|(scope, mut ids)| {
                ids.sort();
                (scope, ids.into_iter().map(|(_, id)| id).collect())
            })
            .collect();
        for row in table("scope_memberships").rows.values() {
            let r = Reader::new("scope_memberships", row);
            let membership = Membership {
                id: row.key.clone(),
                scope_id: r.text("scope_id")?,
                user_id: r.opt_text("user_id")?,
                agent_id: r.opt_text("agent_id")?,
                last_read_seq: r.int("last_read_seq")?,
                last_read_global_seq: r.int("last_read_global_seq")?,
                dismissed_through_global_seq: r
                    .int("owner_context_dismissed_through_global_seq")?,
            };
            self.memberships.insert(membership.id.clone(), membership);
        }
        for row in table("message_recovery_points").rows.values() {
            let r = Reader::new("message_recovery_points", row);
            let point = RecoveryPoint {
                id: r.text("id")?,
                message_id: r.text("message_id")?,
                agent_id: r.text("agent_id")?,
                strategy: r.text("strategy")?,
            };
            self.recovery_points.insert(point.id.clone(), point);
        }
        for row in table("scope_fanout_outbox").rows.values() {
            let r = Reader::new("scope_fanout_outbox", row);
            let outbox = Outbox {
                id: row.key.clone(),
                message_id: r.opt_text("message_id")?,
                recipient_kind: r.text("recipient_kind")?,
                recipient_id: r.text("recipient_id")?,
                status: r.text("status")?,
            };
            self.outbox.insert(outbox.id.clone(), outbox);
        }
        for row in table("scope_activity_events").rows.values() {
            let r = Reader::new("scope_activity_events", row);
            let event = ActivityEvent {
                id: row.key.clone(),
                message_id: r.opt_text("message_id")?,
                status: r.text("status")?,
            };
            self.activity.insert(event.id.clone(), event);
        }
        for row in table("rewind_operations").rows.values() {
            let r = Reader::new("rewind_operations", row);
            let operation = Operation {
                id: r.text("id")?,
                workspace_id: r.text("workspace_id")?,
                thread_id: r.text("thread_id")?,
                target_message_id: r.text("target_message_id")?,
                initiator_user_id: r.text("initiator_user_id")?,
                status: r.text("status")?,
                rewound_message_ids: r.text_list("rewound_message_ids")?,
            };
            self.operations.insert(operation.id.clone(), operation);
        }
        Ok(())
    }
}

fn read_message(row: &Row) -> Result<Message, OracleError> {
    let r = Reader::new("scope_messages", row);
    let kind = r.text("author_kind")?;
    let author = match kind.as_str() {
        "human" => Author::Human(r.text("author_user_id")?),
        "agent" => Author::Agent(r.text("author_agent_id")?),
        "system" => Author::System,
        "service" => Author::Service,
        "app" => Author::App,
        _ => Author::Other(kind),
    };
    Ok(Message {
        id: r.text("id")?,
        workspace_id: r.text("workspace_id")?,
        scope_id: r.text("scope_id")?,
        seq: r.int("seq")?,
        global_seq: r.int("global_seq")?,
        author,
        content: r.text("content")?,
        metadata: r.value("metadata")?.clone(),
        client_message_id: r.opt_text("client_message_id")?,
        storage_tier: r.text("storage_tier")?,
        reply_count: r.int("reply_count")?,
        last_reply_at: r.opt_text("last_reply_at")?,
        created_at: r.opt_text("created_at")?,
    })
}

fn read_table(name: &str, key_columns: &[&str], rows: &[String]) -> Result<Table, OracleError> {
    let mut table = Table::default();
    for (index, text) in rows.iter().enumerate() {
        let value: Value = serde_json::from_str(text).map_err(|e| OracleError::NotAnObject {
            table: name.to_owned(),
            index,
            detail: e.to_string(),
        })?;
        let Value::Object(columns) = value else {
            return Err(OracleError::NotAnObject {
                table: name.to_owned(),
                index,
                detail: format!("found {value}"),
            });
        };
        let mut parts = Vec::new();
        for column in key_columns {
            let part = match columns.get(*column) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => {
                    return Err(OracleError::MissingColumn {
                        table: name.to_owned(),
                        key: format!("#{index}"),
                        column: (*column).to_owned(),
                    })
                }
                Some(other) => other.to_string(),
            };
            parts.push(part);
        }
        let key = parts.join(" / ");
        if table.rows.contains_key(&key) {
            return Err(OracleError::DuplicateKey {
                table: name.to_owned(),
                key,
            });
        }
        table.rows.insert(key.clone(), Row { key, columns });
    }
    Ok(table)
}

/// Typed access to one row's columns, with errors that name the table, row and column.
pub(crate) struct Reader<'a> {
    table: &'static str,
    row: &'a Row,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(table: &'static str, row: &'a Row) -> Self {
        Reader { table, row }
    }

    fn missing(&self, column: &str) -> OracleError {
        OracleError::MissingColumn {
            table: self.table.to_owned(),
            key: self.row.key.clone(),
            column: column.to_owned(),
        }
    }

    fn wrong(&self, column: &str, expected: &'static str, found: &Value) -> OracleError {
        OracleError::WrongType {
            table: self.table.to_owned(),
            key: self.row.key.clone(),
            column: column.to_owned(),
            expected,
            found: found.to_string(),
        }
    }

    pub(crate) fn value(&self, column: &str) -> Result<&'a Value, OracleError> {
        self.row.get(column).ok_or_else(|| self.missing(column))
    }

    pub(crate) fn text(&self, column: &str) -> Result<String, OracleError> {
        let value = self.value(column)?;
        match value {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            other => Err(self.wrong(column, "a string", other)),
        }
    }

    pub(crate) fn opt_text(&self, column: &str) -> Result<Option<String>, OracleError> {
        match self.value(column)? {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s.clone())),
            Value::Number(n) => Ok(Some(n.to_string())),
            other => Err(self.wrong(column, "a string or null", other)),
        }
    }

    pub(crate) fn int(&self, column: &str) -> Result<i64, OracleError> {
        let value = self.value(column)?;
        value
            .as_i64()
            .ok_or_else(|| self.wrong(column, "an integer", value))
    }

    pub(crate) fn is_set(&self, column: &str) -> Result<bool, OracleError> {
        Ok(!self.value(column)?.is_null())
    }

    pub(crate) fn text_list(&self, column: &str) -> Result<Vec<String>, OracleError> {
        let value = self.value(column)?;
        let wrong = || self.wrong(column, "an array of strings", value);
        match value {
            Value::Null => Ok(Vec::new()),
            Value::Array(items) => items
                .iter()
                .map(|v| v.as_str().map(str::to_owned).ok_or_else(wrong))
                .collect(),
            _ => Err(wrong()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle::testkit::Seed;

    #[test]
    fn reads_typed_rows_and_keys() {
        let state = Seed::dm().state();
        let m = state.message("m-2").expect("m-2 is seeded");
        assert_eq!(m.author, Author::Agent("cody".into()));
        assert_eq!(m.seq, 2);
        let ids: Vec<&str> = state.scope_messages("dm").map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["m-1", "m-2", "m-3", "m-4"]);
        assert!(state
            .table("scope_private_grants")
            .get("dm / alice / read")
            .is_some());
    }

    #[test]
    fn unknown_tables_and_columns_are_kept() {
        let mut snapshot = Seed::dm().snapshot();
        snapshot
            .tables
            .insert("audit_log".into(), vec![r#"{"id": 1}"#.into()]);
        let rows = snapshot
            .tables
            .get_mut("scope_messages")
            .expect("messages are seeded");
        let first = rows[0].replacen('{', r#"{"extra_column": "x", "#, 1);
        rows[0] = first;
        let state = State::from_snapshot(&snapshot).expect("extra tables and columns are fine");
        assert_eq!(
            state.extra_tables["audit_log"],
            vec![r#"{"id": 1}"#.to_owned()]
        );
        assert!(state
            .table("scope_messages")
            .rows
            .values()
            .any(|r| r.str("extra_column") == Some("x")));
    }

    #[test]
    fn malformed_snapshots_name_table_row_and_column() {
        let mut snapshot = Seed::dm().snapshot();
        snapshot.tables.remove("attachments");
        assert_eq!(
            State::from_snapshot(&snapshot),
            Err(OracleError::MissingTable {
                table: "attachments".into()
            })
        );

        let mut snapshot = Seed::dm().snapshot();
        snapshot
            .tables
            .insert("scope_messages".into(), vec!["[1]".into()]);
        assert!(matches!(
            State::from_snapshot(&snapshot),
            Err(OracleError::NotAnObject { table, index: 0, .. }) if table == "scope_messages"
        ));

        let mut seed = Seed::dm();
        seed.edit("scope_messages", "m-1", |row| {
            row.insert("seq".into(), Value::String("one".into()));
        });
        let err = State::from_snapshot(&seed.snapshot()).expect_err("a text seq is refused");
        assert_eq!(
            err.to_string(),
            "`scope_messages` row `m-1` column `seq` holds \"one\", expected an integer"
        );

        let mut seed = Seed::dm();
        seed.edit("agents", "cody", |row| {
            row.remove("runtime");
        });
        assert_eq!(
            State::from_snapshot(&seed.snapshot()),
            Err(OracleError::MissingColumn {
                table: "agents".into(),
                key: "cody".into(),
                column: "runtime".into()
            })
        );

        let mut snapshot = Seed::dm().snapshot();
        let users = snapshot.tables.get_mut("users").expect("users are seeded");
        let copy = users[0].clone();
        users.push(copy);
        assert!(matches!(
            State::from_snapshot(&snapshot),
            Err(OracleError::DuplicateKey { table, .. }) if table == "users"
        ));
    }
}
