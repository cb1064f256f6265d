//! [`DbSnapshot`]: every row of every spec table, for "the database is unchanged" checks and
//! readable expected-vs-actual diffs; and the statement log ([`STATEMENT_LOG_SQL`]) that records
//! the order in which an implementation wrote rows.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use sqlx::{AssertSqlSafe, PgConnection};

/// The rows of every table of the `public` schema, each row as its JSON text, sorted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DbSnapshot {
    /// Table name to its rows.
    pub tables: BTreeMap<String, Vec<String>>,
}

/// Harness instrumentation installed in the template database: a row-level trigger on every spec
/// table appends `(transaction, table, operation, message id)` to `harness.statement_log`, so a
/// scenario can tell the order of writes inside one transaction (e.g. projections scrubbed before
/// the transcript tombstone); and the commit gate ([`COMMIT_GATE_KEY`]). It lives in its own
/// schema, outside every snapshot.
pub const STATEMENT_LOG_SQL: &str = r#"
CREATE SCHEMA harness;
CREATE TABLE harness.statement_log (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    txid       bigint NOT NULL DEFAULT txid_current(),
    table_name text   NOT NULL,
    op         text   NOT NULL,
    message_id text,
    logged_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION harness.log_row() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    r jsonb := CASE WHEN TG_OP = 'DELETE' THEN to_jsonb(OLD) ELSE to_jsonb(NEW) END;
BEGIN
    INSERT INTO harness.statement_log (table_name, op, message_id)
    VALUES (TG_TABLE_NAME, TG_OP,
            CASE WHEN TG_TABLE_NAME = 'scope_messages' THEN r ->> 'id' ELSE r ->> 'message_id' END);
    RETURN NULL;
END
$fn$;
DO $do$
DECLARE t text;
BEGIN
    FOR t IN SELECT table_name FROM information_schema.tables
             WHERE table_schema = 'public' AND table_type = 'BASE TABLE'
               AND table_name NOT LIKE '\_sqlx%'
    LOOP
        EXECUTE format('CREATE TRIGGER harness_log AFTER INSERT OR UPDATE OR DELETE ON public.%I '
                       'FOR EACH ROW EXECUTE FUNCTION harness.log_row()', t);
    END LOOP;
END
$do$;
CREATE FUNCTION harness.commit_gate() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(7201959);
    RETURN NULL;
END
$fn$;
CREATE CONSTRAINT TRIGGER harness_commit_gate AFTER UPDATE ON public.scope_messages
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.metadata #>> '{messageRecall,status}' = 'rewound'
          AND OLD.metadata #>> '{messageRecall,status}' IS DISTINCT FROM 'rewound')
    EXECUTE FUNCTION harness.commit_gate();
CREATE TABLE harness.planted_faults (
    phase  text PRIMARY KEY,
    action text NOT NULL CHECK (action IN ('terminate', 'timeout'))
);
CREATE SEQUENCE harness.fault_shots;
CREATE FUNCTION harness.strike(at_phase text) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE planted text;
BEGIN
    SELECT action INTO planted FROM harness.planted_faults WHERE phase = at_phase;
    -- One shot: the sequence counts outside the transaction the fault aborts.
    IF planted IS NULL OR nextval('harness.fault_shots') > 1 THEN
        RETURN;
    END IF;
    IF planted = 'terminate' THEN
        PERFORM pg_terminate_backend(pg_backend_pid());
        PERFORM pg_sleep(30);
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'query_canceled',
        MESSAGE = 'canceling statement due to statement timeout';
END
$fn$;
CREATE FUNCTION harness.strike_row() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM harness.strike(TG_ARGV[0]);
    RETURN NEW;
END
$fn$;
CREATE FUNCTION harness.strike_after_tombstones() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF EXISTS (SELECT 1 FROM harness.planted_faults WHERE phase = 'apply-after-tombstones')
       AND EXISTS (SELECT 1 FROM harness_new n JOIN harness_old o ON o.id = n.id
                   WHERE n.metadata #>> '{messageRecall,status}' = 'rewound'
                     AND o.metadata #>> '{messageRecall,status}' IS DISTINCT FROM 'rewound') THEN
        PERFORM harness.strike('apply-after-tombstones');
    END IF;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER harness_fault_before_tombstones BEFORE UPDATE ON public.scope_messages
    FOR EACH ROW
    WHEN (NEW.metadata #>> '{messageRecall,status}' = 'rewound'
          AND OLD.metadata #>> '{messageRecall,status}' IS DISTINCT FROM 'rewound')
    EXECUTE FUNCTION harness.strike_row('apply-before-tombstones');
CREATE TRIGGER harness_fault_after_tombstones AFTER UPDATE ON public.scope_messages
    REFERENCING OLD TABLE AS harness_old NEW TABLE AS harness_new
    FOR EACH STATEMENT EXECUTE FUNCTION harness.strike_after_tombstones();
CREATE CONSTRAINT TRIGGER harness_fault_at_commit AFTER UPDATE ON public.scope_messages
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.metadata #>> '{messageRecall,status}' = 'rewound'
          AND OLD.metadata #>> '{messageRecall,status}' IS DISTINCT FROM 'rewound')
    EXECUTE FUNCTION harness.strike_row('commit');
"#;

/// The `application_name` of the harness's own sessions on a scenario database, so that a
/// database fault strikes only the implementation's sessions.
pub const HARNESS_SESSION: &str = "rewind-conformance harness";

/// A fault the harness's triggers plant in the implementation's database session at a point of
/// its apply transaction (see [`STATEMENT_LOG_SQL`]): `phase` is `apply-before-tombstones`
/// (the first tombstone row), `apply-after-tombstones` (after the first statement that
/// tombstoned) or `commit` (the deferred check at COMMIT); `action` is `terminate` (the backend
/// is terminated, as `pg_terminate_backend` does) or `timeout` (the statement fails as a
/// statement time-out does, SQLSTATE 57014). It strikes once.
pub async fn plant_fault(
    conn: &mut PgConnection,
    phase: &str,
    action: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM harness.planted_faults")
        .execute(&mut *conn)
        .await?;
    sqlx::query("INSERT INTO harness.planted_faults (phase, action) VALUES ($1, $2)")
        .bind(phase)
        .bind(action)
        .execute(&mut *conn)
        .await?;
    sqlx::query("SELECT setval('harness.fault_shots', 1, false)")
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Lifts the planted fault; returns whether it struck.
pub async fn lift_fault(conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
    sqlx::query("DELETE FROM harness.planted_faults")
        .execute(&mut *conn)
        .await?;
    sqlx::query_scalar("SELECT is_called FROM harness.fault_shots")
        .fetch_one(&mut *conn)
        .await
}

/// The advisory lock key of the commit gate: a transaction that tombstones a message takes it
/// (shared) at COMMIT, through a deferred constraint trigger of [`STATEMENT_LOG_SQL`]. While the
/// harness holds it exclusively, such a transaction cannot finish committing, so the harness can
/// look at what was published before the commit. Uncontended, it costs nothing.
pub const COMMIT_GATE_KEY: i64 = 7_201_959;

/// One entry of `harness.statement_log`.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct LoggedWrite {
    /// Order of the write.
    pub id: i64,
    /// The writing transaction.
    pub txid: i64,
    /// The table written.
    pub table_name: String,
    /// INSERT, UPDATE or DELETE.
    pub op: String,
    /// The message the row belongs to (the row id for `scope_messages`).
    pub message_id: Option<String>,
}

/// When the first tombstone (an update of a `scope_messages` row) after log entry `after` was
/// written, if one was.
pub async fn first_message_update_since(
    conn: &mut PgConnection,
    after: i64,
) -> Result<Option<chrono::DateTime<chrono::Utc>>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT min(logged_at) FROM harness.statement_log \
         WHERE id > $1 AND table_name = 'scope_messages' AND op = 'UPDATE'",
    )
    .bind(after)
    .fetch_one(conn)
    .await
}

/// Every logged write after log entry `after`, in order.
pub async fn writes_since(
    conn: &mut PgConnection,
    after: i64,
) -> Result<Vec<LoggedWrite>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, txid, table_name, op, message_id FROM harness.statement_log \
         WHERE id > $1 ORDER BY id",
    )
    .bind(after)
    .fetch_all(conn)
    .await
}

/// The id of the newest log entry (0 when empty).
pub async fn log_position(conn: &mut PgConnection) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT coalesce(max(id), 0) FROM harness.statement_log")
        .fetch_one(conn)
        .await
}

/// The spec tables of the database (the migration bookkeeping table excluded): the ordinary and
/// partitioned tables of schema `public`, by name. Read from the catalog itself, not from
/// `information_schema.tables`, a view whose planning alone costs a millisecond.
pub async fn spec_tables(conn: &mut PgConnection) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_catalog.pg_class c \
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') \
         AND c.relname NOT LIKE '\\_sqlx%' ORDER BY c.relname",
    )
    .fetch_all(conn)
    .await
}

impl DbSnapshot {
    /// Reads every row of every spec table: one statement for all of them, each table's rows
    /// as JSON text in order.
    pub async fn capture(conn: &mut PgConnection) -> Result<Self, sqlx::Error> {
        let tables = spec_tables(conn).await?;
        if tables.is_empty() {
            return Ok(DbSnapshot::default());
        }
        let reads: Vec<String> = tables
            .iter()
            .map(|table| {
                let name = table.replace('\'', "''");
                let quoted = table.replace('"', "\"\"");
                format!(
                    "SELECT '{name}'::text, \
                     ARRAY(SELECT to_jsonb(t)::text FROM \"{quoted}\" t ORDER BY 1)"
                )
            })
            .collect();
        let rows: Vec<(String, Vec<String>)> =
            sqlx::query_as(AssertSqlSafe(reads.join(" UNION ALL ")))
                .fetch_all(&mut *conn)
                .await?;
        Ok(DbSnapshot {
            tables: rows.into_iter().collect(),
        })
    }

    /// A unified diff per changed table (`-` before, `+` after); empty when equal.
    pub fn diff(&self, after: &DbSnapshot) -> String {
        let mut out = String::new();
        let empty = Vec::new();
        let names: std::collections::BTreeSet<&String> =
            self.tables.keys().chain(after.tables.keys()).collect();
        for name in names {
            let before = self.tables.get(name).unwrap_or(&empty);
            let now = after.tables.get(name).unwrap_or(&empty);
            if before != now {
                let _ = writeln!(out, "table `{name}` changed (-before, +after):");
                out.push_str(&line_diff(&before.join("\n"), &now.join("\n")));
            }
        }
        out
    }
}

/// A unified line diff of `expected` and `actual`, labelled, without colour codes.
pub fn line_diff(expected: &str, actual: &str) -> String {
    let mut expected = expected.to_owned();
    let mut actual = actual.to_owned();
    expected.push('\n');
    actual.push('\n');
    similar::TextDiff::from_lines(&expected, &actual)
        .unified_diff()
        .context_radius(3)
        .header("expected", "actual")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_names_the_table_and_the_rows() {
        let mut before = DbSnapshot::default();
        before.tables.insert(
            "scope_messages".into(),
            vec![r#"{"id":"m1","content":"hi"}"#.into()],
        );
        let mut after = before.clone();
        assert_eq!(before.diff(&after), "");
        after.tables.insert(
            "scope_messages".into(),
            vec![r#"{"id":"m1","content":""}"#.into()],
        );
        let diff = before.diff(&after);
        assert!(diff.contains("table `scope_messages` changed"));
        assert!(diff.contains(r#"-{"id":"m1","content":"hi"}"#), "{diff}");
        assert!(diff.contains(r#"+{"id":"m1","content":""}"#), "{diff}");
    }
}
