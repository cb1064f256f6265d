//! Transcript rows, summaries and read state.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Facts, Violation};
use crate::oracle::judge::{tombstone_reading, Place};
use crate::oracle::state::{Message, State};
use crate::oracle::text::{instant, latest};

fn row(table: &str, key: &str, column: Option<&str>) -> Place {
    Place::Row {
        table: table.to_owned(),
        key: key.to_owned(),
        column: column.map(str::to_owned),
    }
}

pub(super) fn check(f: &Facts, out: &mut Vec<Violation>) {
    tombstones(f, out);
    if let Some(start) = f.start {
        kept_messages(f, start, out);
        memberships_kept(f, start, out);
    }
    let touched: BTreeSet<String> = f
        .new_tombstones
        .iter()
        .filter_map(|id| f.state.message(id))
        .map(|m| m.scope_id.clone())
        .collect();
    for scope in &touched {
        summary(f, scope, out);
        cursors(f, scope, out);
    }
    reply_summaries(f, &touched, out);
    for (workspace, latest) in &f.state.workspace_global_seq {
        let used = f
            .state
            .messages
            .values()
            .filter(|m| &m.workspace_id == workspace)
            .map(|m| m.global_seq)
            .max()
            .unwrap_or(0);
        if used > *latest {
            f.violation(
                out,
                row("workspaces", workspace, Some("latest_global_seq")),
                format!("{latest}, below the global seq {used} a message uses"),
            );
        }
    }
}

/// Every tombstone made since the start is a proper one.
fn tombstones(f: &Facts, out: &mut Vec<Violation>) {
    for id in &f.new_tombstones {
        let Some(m) = f.state.message(id) else {
            continue;
        };
        if !m.content.is_empty() {
            f.violation(
                out,
                row("scope_messages", id, Some("content")),
                "a rewound tombstone that kept its content",
            );
        }
        if tombstone_reading(Some(&m.metadata)).is_none() {
            f.violation(
                out,
                row("scope_messages", id, Some("metadata")),
                format!(
                    "`{}` is not only `messageRecall.status = \"rewound\"` and `rewoundAt`",
                    m.metadata
                ),
            );
        }
    }
}

/// No message went away or came back; survivors are as they were, reply summaries aside, and
/// a tombstone changed only its content and metadata.
fn kept_messages(f: &Facts, start: &State, out: &mut Vec<Violation>) {
    let now = f.state.table("scope_messages");
    for (key, was) in &start.table("scope_messages").rows {
        let Some(row_now) = now.get(key) else {
            f.violation(
                out,
                row("scope_messages", key, None),
                "the message went away",
            );
            continue;
        };
        let rewound_now = f.state.message(key).is_some_and(Message::is_rewound);
        if f.old_tombstones.contains(key) && !rewound_now {
            f.violation(
                out,
                row("scope_messages", key, Some("metadata")),
                "a tombstone came back to life",
            );
        }
        let mut skip = vec!["reply_count", "last_reply_at"];
        if rewound_now {
            skip.extend(["content", "metadata"]);
        }
        let columns: BTreeSet<&String> = was.columns.keys().chain(row_now.columns.keys()).collect();
        for column in columns {
            if !skip.contains(&column.as_str()) && was.get(column) != row_now.get(column) {
                f.violation(
                    out,
                    row("scope_messages", key, Some(column)),
                    format!(
                        "changed from {} to {}",
                        show(was.get(column)),
                        show(row_now.get(column))
                    ),
                );
            }
        }
    }
}

fn show(value: Option<&Value>) -> String {
    value.map_or_else(|| "no column".to_owned(), |v| format!("`{v}`"))
}

/// Memberships (cursors aside) and private grants are as in the starting state.
fn memberships_kept(f: &Facts, start: &State, out: &mut Vec<Violation>) {
    const CURSORS: [&str; 3] = [
        "last_read_seq",
        "last_read_global_seq",
        "owner_context_dismissed_through_global_seq",
    ];
    for table in ["scope_memberships", "scope_private_grants"] {
        let (was, now) = (start.table(table), f.state.table(table));
        let keys: BTreeSet<&String> = was.rows.keys().chain(now.rows.keys()).collect();
        for key in keys {
            match (was.get(key), now.get(key)) {
                (Some(a), Some(b)) => {
                    let strip = |r: &crate::oracle::state::Row| {
                        let mut m = r.columns.clone();
                        for c in CURSORS {
                            m.remove(c);
                        }
                        m
                    };
                    if strip(a) != strip(b) {
                        f.violation(
                            out,
                            row(table, key, None),
                            format!("changed from {} to {}", a.text(), b.text()),
                        );
                    }
                }
                (Some(_), None) => f.violation(out, row(table, key, None), "went away"),
                (None, Some(_)) => f.violation(out, row(table, key, None), "appeared"),
                (None, None) => {}
            }
        }
    }
}

/// The visible summary and high-water marks of a scope holding a new tombstone.
fn summary(f: &Facts, scope_id: &str, out: &mut Vec<Violation>) {
    let Some(scope) = f.state.scope(scope_id) else {
        return;
    };
    let visible: Vec<&Message> = f.state.visible_messages(scope_id).collect();
    let place = |column: &str| row("scopes", scope_id, Some(column));
    if scope.visible_message_count != visible.len() as i64 {
        f.violation(
            out,
            place("visible_message_count"),
            format!(
                "{}, but {} messages are visible",
                scope.visible_message_count,
                visible.len()
            ),
        );
    }
    let last = latest(visible.iter().filter_map(|m| m.created_at.as_deref()));
    for (column, value) in [
        ("latest_message_at", &scope.latest_message_at),
        ("visible_last_message_at", &scope.visible_last_message_at),
    ] {
        if value.as_deref().and_then(instant) != last {
            f.violation(
                out,
                place(column),
                format!(
                    "{value:?}, but the last visible message's time is {}",
                    last.map_or_else(|| "none".to_owned(), |t| t.to_rfc3339())
                ),
            );
        }
    }
    let all: Vec<&Message> = f.state.scope_messages(scope_id).collect();
    let seq = all.iter().map(|m| m.seq).max().unwrap_or(0);
    let gseq = all.iter().map(|m| m.global_seq).max().unwrap_or(0);
    if scope.latest_seq < seq {
        f.violation(
            out,
            place("latest_seq"),
            format!("{}, below the seq {seq} a message uses", scope.latest_seq),
        );
    }
    if scope.latest_global_seq < gseq {
        f.violation(
            out,
            place("latest_global_seq"),
            format!(
                "{}, below the global seq {gseq} a message uses",
                scope.latest_global_seq
            ),
        );
    }
}

/// No cursor or sync-dirty message frontier past the visible tail of a scope holding a new
/// tombstone, nor inside its rewound messages: the message a cursor points at, or the last one
/// below it, must not be a tombstone made since the start (a rewind clamps cursors to the
/// surviving tail before its notice, register `cursor-clamp-and-notice`; readers only advance
/// to visible messages).
fn cursors(f: &Facts, scope_id: &str, out: &mut Vec<Violation>) {
    let messages: Vec<&Message> = f.state.scope_messages(scope_id).collect();
    let (seq, gseq) = messages
        .iter()
        .filter(|m| !m.is_rewound())
        .fold((0, 0), |(s, g), m| (s.max(m.seq), g.max(m.global_seq)));
    let judge = |value: i64, global: bool, tail: i64| -> Option<String> {
        if value > tail {
            return Some(format!("{value}, past the visible tail {tail}"));
        }
        let at = |m: &&&Message| if global { m.global_seq } else { m.seq };
        let below = messages
            .iter()
            .filter(|m| at(m) <= value)
            .max_by_key(|m| at(m))?;
        f.new_tombstones.contains(&below.id).then(|| {
            format!(
                "{value}, inside the rewound messages (at or after `{}`)",
                below.id
            )
        })
    };
    for m in f
        .state
        .memberships
        .values()
        .filter(|m| m.scope_id == scope_id)
    {
        for (column, value, global, tail) in [
            ("last_read_seq", m.last_read_seq, false, seq),
            ("last_read_global_seq", m.last_read_global_seq, true, gseq),
            (
                "owner_context_dismissed_through_global_seq",
                m.dismissed_through_global_seq,
                true,
                gseq,
            ),
        ] {
            if let Some(problem) = judge(value, global, tail) {
                f.violation(out, row("scope_memberships", &m.id, Some(column)), problem);
            }
        }
    }
    for table in ["scope_sync_dirty", "member_scope_sync_dirty"] {
        for r in f.state.table(table).rows.values() {
            if r.str("scope_id") != Some(scope_id) {
                continue;
            }
            let frontier = r
                .get("latest_message_seq")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if let Some(problem) = judge(frontier, false, seq) {
                f.violation(out, row(table, &r.key, Some("latest_message_seq")), problem);
            }
        }
    }
}

/// A rewound thread parent counts no reply; a live parent of a thread holding a new tombstone
/// counts no more replies than its live threads' visible messages.
fn reply_summaries(f: &Facts, touched: &BTreeSet<String>, out: &mut Vec<Violation>) {
    for m in f.state.messages.values() {
        let threads = f.state.threads_of(&m.id);
        if threads.is_empty() {
            continue;
        }
        let place = |column: &str| row("scope_messages", &m.id, Some(column));
        if f.new_tombstones.contains(&m.id) {
            if m.reply_count != 0 || m.last_reply_at.is_some() {
                f.violation(
                    out,
                    place("reply_count"),
                    format!(
                        "a rewound thread parent still counts {} replies (last at {:?})",
                        m.reply_count, m.last_reply_at
                    ),
                );
            }
            continue;
        }
        if !threads.iter().any(|t| touched.contains(&t.id)) || m.is_rewound() {
            continue;
        }
        let visible = threads
            .iter()
            .filter(|t| !t.archived)
            .map(|t| f.state.visible_messages(&t.id).count() as i64)
            .sum::<i64>();
        if m.reply_count > visible {
            f.violation(
                out,
                place("reply_count"),
                format!(
                    "{}, more than the {visible} visible messages of its live threads",
                    m.reply_count
                ),
            );
        }
    }
}
