//! The leak scan: after a rewind, no stored text may keep a canary of the rewound suffix,
//! except where the spec keeps history ([`AllowList`]).
//!
//! The scan needs no list of tables: it reads the PostgreSQL catalog for every column of every
//! table of the `public` schema whose type holds text (`text`, `varchar`, `char`, `json`,
//! `jsonb`, and arrays of them), and searches each for the canaries. A column added to the
//! schema later is scanned with no code change. Each finding names the table, the column, the
//! row (its primary key) and the canary.
//!
//! The allow-list (`features/leak-allow.yaml`) names each column the spec lets keep a rewound
//! message's text, the rules that allow it, and, where the allowance holds only for some rows,
//! the row states it holds for (`where: {status: [suppressed, delivered]}`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;
use sqlx::{AssertSqlSafe, PgConnection};

use crate::fixtures::Position;
use crate::input_file::InputFileError;

/// A canary of the rewound suffix found where it may not be.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Leak {
    /// The table.
    pub table: String,
    /// The column.
    pub column: String,
    /// The row: its primary key as JSON (`{"id":"m3"}`), or the whole row without one.
    pub row: String,
    /// The canary found.
    pub canary: String,
}

impl fmt::Display for Leak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}`.`{}` of row {} still holds `{}`",
            self.table, self.column, self.row, self.canary
        )
    }
}

/// One column the spec lets keep a rewound message's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowance {
    /// The table.
    pub table: String,
    /// The column.
    pub column: String,
    /// The rules of the catalog that allow it.
    pub rules: Vec<String>,
    /// Why, in a sentence.
    pub reason: String,
    /// Only rows whose column (key) holds one of these values (none: every row).
    pub only_where: BTreeMap<String, Vec<String>>,
    /// Where the entry is.
    pub at: Position,
}

/// The reviewed places where the spec lets a rewound message's text stay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    /// The entries, in file order.
    pub entries: Vec<Allowance>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    version: u32,
    allowed: Vec<Spanned<EntryDoc>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryDoc {
    table: String,
    column: String,
    rules: Vec<String>,
    reason: String,
    #[serde(default, rename = "where")]
    only_where: BTreeMap<String, Vec<String>>,
}

/// Identifiers the scan puts in SQL: letters, digits, `_`, starting with a letter or `_`.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl AllowList {
    /// Reads the allow-list; every rule it names must be in `rules`.
    pub fn load(path: &Path, rules: &BTreeSet<String>) -> Result<Self, InputFileError> {
        Self::parse(
            path,
            &crate::input_file::read("leak allow-list", path)?,
            rules,
        )
    }

    /// Parses allow-list text; `path` names it in errors.
    pub fn parse(
        path: &Path,
        text: &str,
        rules: &BTreeSet<String>,
    ) -> Result<Self, InputFileError> {
        let doc: Doc = crate::input_file::parse_yaml(path, text)?;
        if doc.version != 1 {
            return Err(InputFileError::Invalid {
                at: Position {
                    path: path.to_path_buf(),
                    line: 1,
                    column: 1,
                },
                message: format!("unsupported `version: {}` (expected 1)", doc.version),
            });
        }
        let mut entries: Vec<Allowance> = Vec::new();
        for item in doc.allowed {
            let at = Position {
                path: PathBuf::from(path),
                line: item.referenced.line(),
                column: item.referenced.column(),
            };
            let invalid = |message: String| InputFileError::Invalid {
                at: at.clone(),
                message,
            };
            let entry = item.value;
            for name in [&entry.table, &entry.column]
                .into_iter()
                .chain(entry.only_where.keys())
            {
                if !is_identifier(name) {
                    return Err(invalid(format!(
                        "`{name}` is not a table or column name (letters, digits and `_`)"
                    )));
                }
            }
            if entry.rules.is_empty() {
                return Err(invalid(
                    "an allowance needs `rules`: the catalog rules that allow it".to_owned(),
                ));
            }
            if let Some(unknown) = entry.rules.iter().find(|r| !rules.contains(*r)) {
                return Err(invalid(format!(
                    "rule `{unknown}` is not in the catalog: every allowance names the rules that \
                     allow it"
                )));
            }
            if entry.reason.trim().is_empty() {
                return Err(invalid(
                    "an allowance needs a `reason` (what the spec keeps, and why)".to_owned(),
                ));
            }
            if let Some(first) = entries
                .iter()
                .find(|e| e.table == entry.table && e.column == entry.column)
            {
                return Err(invalid(format!(
                    "`{}`.`{}` is listed twice (first at line {})",
                    entry.table, entry.column, first.at.line
                )));
            }
            entries.push(Allowance {
                table: entry.table,
                column: entry.column,
                rules: entry.rules,
                reason: entry.reason.trim().to_owned(),
                only_where: entry.only_where,
                at,
            });
        }
        Ok(AllowList { entries })
    }

    fn find(&self, table: &str, column: &str) -> Option<&Allowance> {
        self.entries
            .iter()
            .find(|e| e.table == table && e.column == column)
    }
}

/// A column of the scanned schema that can hold text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextColumn {
    /// The table.
    pub table: String,
    /// The column.
    pub column: String,
}

/// Every column of every base table of the `public` schema that can hold text, from the
/// catalog (the migration bookkeeping tables excluded).
pub async fn text_columns(conn: &mut PgConnection) -> Result<Vec<TextColumn>, sqlx::Error> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT c.relname::text, a.attname::text \
         FROM pg_attribute a \
         JOIN pg_class c ON c.oid = a.attrelid \
         JOIN pg_namespace n ON n.oid = c.relnamespace \
         JOIN pg_type t ON t.oid = a.atttypid \
         LEFT JOIN pg_type e ON e.oid = t.typelem AND t.typcategory = 'A' \
         WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') \
           AND c.relname NOT LIKE '\\_sqlx%' \
           AND a.attnum > 0 AND NOT a.attisdropped \
           AND (t.typcategory = 'S' OR t.typname IN ('json', 'jsonb') \
                OR e.typcategory = 'S' OR e.typname IN ('json', 'jsonb')) \
         ORDER BY c.relname, a.attnum",
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(table, column)| TextColumn { table, column })
        .collect())
}

/// The primary key columns of every table of the `public` schema that has one.
async fn primary_keys(
    conn: &mut PgConnection,
) -> Result<BTreeMap<String, Vec<String>>, sqlx::Error> {
    let rows: Vec<(String, Vec<String>)> = sqlx::query_as(
        "SELECT c.relname::text, \
                array_agg(a.attname::text ORDER BY array_position(i.indkey::int2[], a.attnum)) \
         FROM pg_index i \
         JOIN pg_class c ON c.oid = i.indrelid \
         JOIN pg_namespace n ON n.oid = c.relnamespace \
         JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey) \
         WHERE i.indisprimary AND n.nspname = 'public' \
         GROUP BY c.relname",
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().collect())
}

/// A row the search matched: its key, its text columns (in order), the whole row.
type FoundRow = (
    sqlx::types::Json<serde_json::Value>,
    Vec<Option<String>>,
    sqlx::types::Json<serde_json::Value>,
);

/// Searches every text column of the database for `canaries`; findings in an allowed column
/// (and, for a conditional allowance, an allowed row) are left out.
pub async fn scan(
    conn: &mut PgConnection,
    canaries: &BTreeSet<String>,
    allow: &AllowList,
) -> Result<Vec<Leak>, sqlx::Error> {
    if canaries.is_empty() {
        return Ok(Vec::new());
    }
    let patterns: Vec<String> = canaries.iter().map(|c| format!("%{c}%")).collect();
    let mut by_table: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for column in text_columns(conn).await? {
        if is_identifier(&column.table) && is_identifier(&column.column) {
            by_table
                .entry(column.table)
                .or_default()
                .push(column.column);
        }
    }
    let keys = primary_keys(conn).await?;
    let mut leaks = Vec::new();
    for (table, columns) in by_table {
        let key: Vec<String> = keys
            .get(&table)
            .into_iter()
            .flatten()
            .filter(|k| is_identifier(k))
            .cloned()
            .collect();
        let key_sql = if key.is_empty() {
            "to_jsonb(t)".to_owned()
        } else {
            format!(
                "jsonb_build_object({})",
                key.iter()
                    .map(|k| format!("'{k}', t.\"{k}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let texts = columns
            .iter()
            .map(|c| format!("t.\"{c}\"::text"))
            .collect::<Vec<_>>()
            .join(", ");
        let filter = columns
            .iter()
            .map(|c| format!("t.\"{c}\"::text LIKE ANY($1)"))
            .collect::<Vec<_>>()
            .join(" OR ");
        let rows: Vec<FoundRow> = sqlx::query_as(AssertSqlSafe(format!(
            "SELECT {key_sql}, ARRAY[{texts}], to_jsonb(t) FROM \"{table}\" t WHERE {filter}"
        )))
        .bind(&patterns)
        .fetch_all(&mut *conn)
        .await?;
        for (row_key, values, whole) in rows {
            for (column, value) in columns.iter().zip(values) {
                let Some(value) = value else { continue };
                // Whole tokens only: `CANARY-a1` is not found in `CANARY-a12`.
                let tokens = canaries_in(&value);
                for canary in canaries.iter().filter(|c| tokens.contains(c)) {
                    if allowed(allow.find(&table, column), &whole.0) {
                        continue;
                    }
                    leaks.push(Leak {
                        table: table.clone(),
                        column: column.clone(),
                        row: row_key.0.to_string(),
                        canary: canary.clone(),
                    });
                }
            }
        }
    }
    leaks.sort();
    Ok(leaks)
}

/// Whether `allowance` covers the row `whole` (its columns as JSON).
fn allowed(allowance: Option<&Allowance>, whole: &serde_json::Value) -> bool {
    let Some(allowance) = allowance else {
        return false;
    };
    allowance.only_where.iter().all(|(column, values)| {
        let found = match whole.get(column) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => return false,
        };
        values.contains(&found)
    })
}

/// The `CANARY-...` tokens in `text` (a canary is `CANARY-` and ASCII letters, digits and inner
/// hyphens).
pub fn canaries_in(text: &str) -> Vec<String> {
    const MARK: &str = "CANARY-";
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(MARK) {
        let tail = &rest[start + MARK.len()..];
        let len = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(tail.len());
        let token = tail[..len].trim_end_matches('-');
        if !token.is_empty() {
            found.push(format!("{MARK}{token}"));
        }
        rest = &tail[len..];
    }
    found
}

/// The findings of `canaries` in what the implementation answered or published (`seen`: a
/// label and the JSON text of each response or realtime payload, observed after the rewind).
pub fn scan_payloads(seen: &[(String, String)], canaries: &BTreeSet<String>) -> Vec<String> {
    let mut leaks = Vec::new();
    for (label, text) in seen {
        let tokens = canaries_in(text);
        for canary in canaries.iter().filter(|c| tokens.contains(c)) {
            leaks.push(format!("{label} holds `{canary}`"));
        }
    }
    leaks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> BTreeSet<String> {
        ["apply.suppress-fanout-outbox".to_owned()]
            .into_iter()
            .collect()
    }

    #[test]
    fn canaries_are_found_in_any_text() {
        assert_eq!(
            canaries_in("a CANARY-nt-44d3, {\"x\":\"CANARY-x1\"} CANARY- end"),
            ["CANARY-nt-44d3", "CANARY-x1"]
        );
    }

    #[test]
    fn allowances_name_a_catalog_rule_and_a_reason() {
        let path = Path::new("leak-allow.yaml");
        let good = "version: 1\nallowed:\n  - table: scope_fanout_outbox\n    column: payload\n    \
                    rules: [apply.suppress-fanout-outbox]\n    reason: kept as delivery history\n    \
                    where: {status: [suppressed, delivered]}\n";
        let list = AllowList::parse(path, good, &rules()).expect("parses");
        assert_eq!(list.entries.len(), 1);
        assert_eq!(
            list.entries[0].only_where["status"],
            ["suppressed", "delivered"]
        );

        let unknown = good.replace("apply.suppress-fanout-outbox", "apply.nope");
        let e = AllowList::parse(path, &unknown, &rules()).expect_err("unknown rule");
        assert_eq!(
            e.to_string(),
            "leak-allow.yaml:3:5: rule `apply.nope` is not in the catalog: every allowance names \
             the rules that allow it"
        );
        let bad_name = good.replace("column: payload", "column: \"payload; drop\"");
        let e = AllowList::parse(path, &bad_name, &rules()).expect_err("bad identifier");
        assert!(
            e.to_string()
                .contains("`payload; drop` is not a table or column name"),
            "{e}"
        );
        let twice = format!(
            "{good}  - table: scope_fanout_outbox\n    column: payload\n    rules: \
             [apply.suppress-fanout-outbox]\n    reason: again\n"
        );
        let e = AllowList::parse(path, &twice, &rules()).expect_err("twice");
        assert!(
            e.to_string().contains("listed twice (first at line 3)"),
            "{e}"
        );
    }

    #[test]
    fn a_conditional_allowance_covers_only_its_rows() {
        let allowance = Allowance {
            table: "t".into(),
            column: "c".into(),
            rules: vec!["r".into()],
            reason: "why".into(),
            only_where: [("status".to_owned(), vec!["delivered".to_owned()])]
                .into_iter()
                .collect(),
            at: Position {
                path: PathBuf::from("x"),
                line: 1,
                column: 1,
            },
        };
        assert!(allowed(
            Some(&allowance),
            &serde_json::json!({"status": "delivered"})
        ));
        assert!(!allowed(
            Some(&allowance),
            &serde_json::json!({"status": "pending"})
        ));
        assert!(!allowed(None, &serde_json::json!({"status": "delivered"})));
    }

    /// A database where one projection was left unscrubbed: the scan names the table, the
    /// column, the row and the canary; a column added later is scanned with no code change; an
    /// allowed column is not reported.
    #[tokio::test]
    async fn the_scan_names_table_column_row_and_canary_and_follows_the_catalog() {
        if crate::postgres::find_pg_bindir().is_err() {
            eprintln!("no PostgreSQL binaries here; skipping");
            return;
        }
        let cluster = crate::postgres::EmbeddedCluster::start()
            .await
            .expect("cluster starts");
        let mut conn = <PgConnection as sqlx::Connection>::connect(cluster.admin_url())
            .await
            .expect("connects");
        sqlx::raw_sql(
            "CREATE TABLE search_docs (message_id text PRIMARY KEY, body text, meta jsonb);
             INSERT INTO search_docs VALUES
                 ('m1', 'kept CANARY-keep-1, not CANARY-gone-3x', '{}'),
                 ('m3', '', '{\"snippet\": \"was CANARY-gone-3\"}');
             CREATE TABLE outbox (id int PRIMARY KEY, status text, payload jsonb);
             INSERT INTO outbox VALUES (1, 'delivered', '{\"c\": \"CANARY-gone-3\"}'),
                                       (2, 'pending', '{\"c\": \"CANARY-gone-3\"}');",
        )
        .execute(&mut conn)
        .await
        .expect("schema");
        let canaries: BTreeSet<String> = ["CANARY-gone-3".to_owned()].into_iter().collect();
        let allow = AllowList::parse(
            Path::new("allow.yaml"),
            "version: 1\nallowed:\n  - table: outbox\n    column: payload\n    rules: \
             [apply.suppress-fanout-outbox]\n    reason: delivered rows are history\n    where: \
             {status: [delivered]}\n",
            &rules(),
        )
        .expect("allow-list");
        let leaks = scan(&mut conn, &canaries, &allow).await.expect("scans");
        let shown: Vec<String> = leaks.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "`outbox`.`payload` of row {\"id\":2} still holds `CANARY-gone-3`",
                "`search_docs`.`meta` of row {\"message_id\":\"m3\"} still holds `CANARY-gone-3`",
            ]
        );

        // A column added to the schema later is scanned with no code change.
        sqlx::raw_sql(
            "ALTER TABLE search_docs ADD COLUMN preview varchar(200);
             UPDATE search_docs SET meta = '{}', preview = 'CANARY-gone-3' WHERE message_id = 'm3';
             ALTER TABLE outbox ADD COLUMN notes text[];
             UPDATE outbox SET payload = '{}', notes = ARRAY['x', 'CANARY-gone-3'] WHERE id = 2;",
        )
        .execute(&mut conn)
        .await
        .expect("columns added");
        let leaks = scan(&mut conn, &canaries, &allow).await.expect("scans");
        let places: Vec<(String, String)> = leaks
            .iter()
            .map(|l| (l.table.clone(), l.column.clone()))
            .collect();
        assert_eq!(
            places,
            [
                ("outbox".to_owned(), "notes".to_owned()),
                ("search_docs".to_owned(), "preview".to_owned())
            ]
        );
        drop(conn);
        cluster.stop();
    }

    #[test]
    fn a_response_that_echoes_a_body_is_named() {
        let canaries: BTreeSet<String> = ["CANARY-gone-3".to_owned()].into_iter().collect();
        let seen = vec![
            ("rewind response".to_owned(), "{\"ok\":true}".to_owned()),
            (
                "another message's canary".to_owned(),
                "{\"content\":\"CANARY-gone-31\"}".to_owned(),
            ),
            (
                "realtime `message.updated` on `dm-1`".to_owned(),
                "{\"content\":\"CANARY-gone-3\"}".to_owned(),
            ),
        ];
        assert_eq!(
            scan_payloads(&seen, &canaries),
            ["realtime `message.updated` on `dm-1` holds `CANARY-gone-3`"]
        );
    }
}
