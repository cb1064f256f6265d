//! Projections and delivery facts bound to tombstones made since the start.

use serde_json::Value;

use super::{Facts, Violation};
use crate::oracle::judge::Place;
use crate::oracle::spec;
use crate::oracle::state::Row;
use crate::oracle::text::SuffixText;

/// A table, the columns that bind its rows to a message, and the statuses a row bound to a
/// tombstone may keep (`None`: no row may stay bound).
type Binding = (
    &'static str,
    &'static [&'static str],
    Option<&'static [&'static str]>,
);

/// Tables whose rows may not stay bound to a new tombstone.
const NOT_BOUND: [Binding; 10] = [
    ("scope_share_cards", &["message_id"], None),
    ("scope_message_reactions", &["message_id"], None),
    ("scope_message_pins", &["message_id"], None),
    ("scope_message_top_notices", &["message_id"], None),
    ("scope_message_search_docs", &["message_id"], None),
    (
        "scope_message_sources",
        &["message_id", "source_message_id"],
        None,
    ),
    ("attachments", &["message_id"], None),
    ("message_recovery_points", &["message_id"], None),
    (
        "scope_fanout_outbox",
        &["message_id"],
        Some(&["delivered", "failed", "suppressed"]),
    ),
    (
        "scope_activity_events",
        &["message_id"],
        Some(&["consumed", "suppressed"]),
    ),
];

fn place(table: &str, key: &str, column: Option<&str>) -> Place {
    Place::Row {
        table: table.to_owned(),
        key: key.to_owned(),
        column: column.map(str::to_owned),
    }
}

pub(super) fn check(f: &Facts, out: &mut Vec<Violation>) {
    let bound = |row: &Row, columns: &[&str]| {
        columns
            .iter()
            .filter_map(|c| row.str(c))
            .find(|id| f.new_tombstones.contains(*id))
            .map(str::to_owned)
    };
    for (table, columns, allowed) in NOT_BOUND {
        for row in f.state.table(table).rows.values() {
            let Some(message) = bound(row, columns) else {
                continue;
            };
            let status = row.str("status").unwrap_or_default();
            if allowed.is_some_and(|ok| ok.contains(&status)) {
                continue;
            }
            let what = if allowed.is_some() {
                format!("`{status}`, still bound to the tombstone `{message}`")
            } else {
                format!("still bound to the tombstone `{message}`")
            };
            f.violation(out, place(table, &row.key, None), what);
        }
    }
    let text = f
        .start
        .map(|start| SuffixText::of(start, &f.new_tombstones))
        .unwrap_or_default();
    for (table, column, message_column) in [
        ("im_stream_events", "payload_json", "message_id"),
        (
            "im_conversation_index",
            "projection_json",
            "last_message_id",
        ),
    ] {
        for row in f.state.table(table).rows.values() {
            let json = row.get(column).cloned().unwrap_or(Value::Null);
            if let Some(message) = bound(row, &[message_column]) {
                let keys = match table {
                    "im_stream_events" => spec::content_keys(&json),
                    _ => json
                        .get("lastMessage")
                        .filter(|last| {
                            last.get("id").and_then(Value::as_str) == Some(message.as_str())
                        })
                        .map(spec::content_keys)
                        .unwrap_or_default(),
                };
                if !keys.is_empty() {
                    f.violation(
                        out,
                        place(table, &row.key, Some(column)),
                        format!(
                            "keeps the content-bearing keys {} of the tombstone `{message}`",
                            keys.join(", ")
                        ),
                    );
                }
            }
            if let Some(quoted) = text.quoted_in(&row.text()) {
                f.violation(
                    out,
                    place(table, &row.key, Some(column)),
                    format!("quotes `{quoted}` of a rewound message"),
                );
            }
        }
    }
    for m in f.state.messages.values() {
        if m.client_message_id
            .as_deref()
            .is_some_and(|c| c.starts_with(spec::NOTICE_PREFIX))
        {
            if let Some(quoted) = text.quoted_in(&m.content) {
                f.violation(
                    out,
                    place("scope_messages", &m.id, Some("content")),
                    format!("a rewind notice quoting `{quoted}` of a rewound message"),
                );
            }
        }
    }
}
