//! [`DbSnapshot`]: every row of every spec table, for "the database is unchanged" checks and
//! readable expected-vs-actual diffs.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use sqlx::{AssertSqlSafe, PgConnection};

/// The rows of every table of the `public` schema, each row as its JSON text, sorted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DbSnapshot {
    /// Table name to its rows.
    pub tables: BTreeMap<String, Vec<String>>,
}

/// The spec tables of the database (the migration bookkeeping table excluded).
pub async fn spec_tables(conn: &mut PgConnection) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE' \
         AND table_name NOT LIKE '\\_sqlx%' ORDER BY table_name",
    )
    .fetch_all(conn)
    .await
}

impl DbSnapshot {
    /// Reads every row of every spec table.
    pub async fn capture(conn: &mut PgConnection) -> Result<Self, sqlx::Error> {
        let mut tables = BTreeMap::new();
        for table in spec_tables(conn).await? {
            let rows: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!(
                "SELECT to_jsonb(t)::text FROM \"{table}\" t ORDER BY 1"
            )))
            .fetch_all(&mut *conn)
            .await?;
            tables.insert(table, rows);
        }
        Ok(DbSnapshot { tables })
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
