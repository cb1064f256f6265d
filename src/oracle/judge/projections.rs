//! Delivery facts and projections of the suffix (section 6.1): suppressed, deleted or
//! scrubbed; those of every other message exactly as they were.

use serde_json::Value;

use super::collector::{keys, row_place, show, Collector};
use super::completion::Ctx;
use crate::oracle::readings as r;
use crate::oracle::spec;
use crate::oracle::state::Row;

/// Projection tables whose rows of a rewound message are deleted (register
/// `projection-scrub-deletes-rows`, one reading), with the columns that bind a row to a
/// message. Attachments bound to a message are `owner_kind = 'message'` by the schema's check.
const DELETED_WITH_THE_MESSAGE: [(&str, &[&str]); 8] = [
    ("scope_share_cards", &["message_id"]),
    ("scope_message_reactions", &["message_id"]),
    ("scope_message_pins", &["message_id"]),
    ("scope_message_top_notices", &["message_id"]),
    ("scope_message_search_docs", &["message_id"]),
    (
        "scope_message_sources",
        &["message_id", "source_message_id"],
    ),
    ("attachments", &["message_id"]),
    ("message_recovery_points", &["message_id"]),
];

/// Checks every delivery-fact and projection table.
pub(crate) fn check(c: &mut Collector, ctx: &Ctx) {
    for (table, columns) in DELETED_WITH_THE_MESSAGE {
        deleted_with_message(c, ctx, table, columns);
    }
    activity_events(c, ctx);
    outbox(c, ctx);
    stream_events(c, ctx);
    conversation_index(c, ctx);
}

fn bound(ctx: &Ctx, row: &Row, columns: &[&str]) -> Option<String> {
    columns
        .iter()
        .filter_map(|c| row.str(c))
        .find(|id| ctx.rewound.contains(*id))
        .map(str::to_owned)
}

fn deleted_with_message(c: &mut Collector, ctx: &Ctx, table: &str, columns: &[&str]) {
    let (was, now) = (ctx.before.table(table), ctx.after.table(table));
    for key in keys(was, now) {
        let (before, after) = (was.get(key), now.get(key));
        match before.and_then(|row| bound(ctx, row, columns)) {
            Some(message) => c.deleted(
                table,
                key,
                after,
                &format!("bound to the rewound `{message}`"),
            ),
            None => c.unchanged(table, key, before, after, &[]),
        }
    }
}

/// A suppressed row's payload may stay as evidence or lose the suffix's content (oracle entry
/// `suppressed-row-payload`).
fn payload(c: &mut Collector, ctx: &Ctx, table: &str, key: &str, before: &Row, after: &Row) {
    if before.get("payload") == after.get("payload") {
        c.observe(r::SUPPRESSED_ROW_PAYLOAD, &["kept"]);
        return;
    }
    let text = after
        .get("payload")
        .map(Value::to_string)
        .unwrap_or_default();
    match ctx.text.quoted_in(&text) {
        None => c.observe(r::SUPPRESSED_ROW_PAYLOAD, &["scrubbed"]),
        Some(quoted) => c.cell(
            table,
            key,
            "payload",
            "the payload as it was, or one that quotes no rewound message",
            format!("a new payload still quoting `{quoted}`"),
        ),
    }
}

/// Unconsumed (`pending`) activity events of the suffix are suppressed; the rewind adds none.
fn activity_events(c: &mut Collector, ctx: &Ctx) {
    let table = "scope_activity_events";
    let (was, now) = (ctx.before.table(table), ctx.after.table(table));
    for key in keys(was, now) {
        let (Some(before), Some(after)) = (was.get(key), now.get(key)) else {
            c.unchanged(table, key, was.get(key), now.get(key), &[]);
            continue;
        };
        if bound(ctx, before, &["message_id"]).is_none() {
            c.same_columns(table, key, &before.columns, &after.columns, &[]);
            continue;
        }
        let mut expected = before.columns.clone();
        if before.str("status") == Some("pending") {
            expected.insert("status".into(), Value::from("suppressed"));
        }
        payload(c, ctx, table, key, before, after);
        c.same_columns(table, key, &expected, &after.columns, &["payload"]);
    }
}

/// Unfinished (`pending`, `leased`) fanout rows of the suffix are suppressed, `failed` ones
/// stay or are suppressed (register `failed-fanout-rows`), delivered ones stay; the rewind adds
/// none. A suppressed row may lose its lease time.
fn outbox(c: &mut Collector, ctx: &Ctx) {
    let table = "scope_fanout_outbox";
    let (was, now) = (ctx.before.table(table), ctx.after.table(table));
    for key in keys(was, now) {
        let (Some(before), Some(after)) = (was.get(key), now.get(key)) else {
            c.unchanged(table, key, was.get(key), now.get(key), &[]);
            continue;
        };
        if bound(ctx, before, &["message_id"]).is_none() {
            c.same_columns(table, key, &before.columns, &after.columns, &[]);
            continue;
        }
        let mut expected = before.columns.clone();
        let mut skip = vec!["payload"];
        let now_status = after.str("status").unwrap_or_default();
        match before.str("status").unwrap_or_default() {
            "pending" | "leased" => {
                expected.insert("status".into(), Value::from("suppressed"));
                if after.get("leased_until").is_some_and(Value::is_null) {
                    skip.push("leased_until");
                }
            }
            "failed" => match now_status {
                "failed" => c.observe(r::FAILED_FANOUT_ROWS, &["failed-is-finished"]),
                "suppressed" => {
                    c.observe(r::FAILED_FANOUT_ROWS, &["failed-is-unfinished"]);
                    expected.insert("status".into(), Value::from("suppressed"));
                }
                _ => {
                    c.cell(
                        table,
                        key,
                        "status",
                        "`failed` or `suppressed`",
                        format!("`{now_status}`"),
                    );
                    skip.push("status");
                }
            },
            _ => {}
        }
        payload(c, ctx, table, key, before, after);
        c.same_columns(table, key, &expected, &after.columns, &skip);
    }
}

/// Whether a stream or index row concerns the suffix: it names a rewound message or quotes one.
fn concerns(ctx: &Ctx, row: &Row, column: &str) -> bool {
    bound(ctx, row, &[column]).is_some() || ctx.text.quoted_in(&row.text()).is_some()
}

/// Durable stream events of the suffix lose every content-bearing key, or go (register
/// `scrubbed-stream-event-shape`); the others stay; the rewind adds none.
fn stream_events(c: &mut Collector, ctx: &Ctx) {
    let table = "im_stream_events";
    let (was, now) = (ctx.before.table(table), ctx.after.table(table));
    for key in keys(was, now) {
        let (before, after) = (was.get(key), now.get(key));
        let Some(before) = before.filter(|b| concerns(ctx, b, "message_id")) else {
            c.unchanged(table, key, before, after, &[]);
            continue;
        };
        let Some(after) = after else {
            c.observe(r::SCRUBBED_STREAM_EVENT_SHAPE, &["row-removed"]);
            continue;
        };
        let payload = after.get("payload_json").cloned().unwrap_or(Value::Null);
        let found = spec::content_keys(&payload);
        let quoted = ctx.text.quoted_in(&after.text());
        if !found.is_empty() || quoted.is_some() {
            c.cell(
                table,
                key,
                "payload_json",
                "no content-bearing key and no content of a rewound message",
                format!(
                    "{}{}",
                    show(Some(&payload)),
                    quoted
                        .map(|q| format!(" quoting `{q}`"))
                        .unwrap_or_default()
                ),
            );
        } else {
            let original: Vec<&String> = before
                .get("payload_json")
                .and_then(Value::as_object)
                .map(|m| m.keys().collect())
                .unwrap_or_default();
            let kept = payload
                .as_object()
                .is_none_or(|m| m.keys().all(|k| original.contains(&k)));
            c.observe(
                r::SCRUBBED_STREAM_EVENT_SHAPE,
                &[if kept { "keys-removed" } else { "marker-added" }],
            );
        }
        c.same_columns(
            table,
            key,
            &before.columns,
            &after.columns,
            &["payload_json"],
        );
    }
}

/// Conversation index rows that concern the suffix keep none of its content; what they say of
/// their last message follows one of register `scrubbed-index-shape`'s readings, and
/// `last_message_id` stays, is cleared or names a visible message of the scope. The others stay
/// (`updated_at` aside); the rewind adds none.
fn conversation_index(c: &mut Collector, ctx: &Ctx) {
    let table = "im_conversation_index";
    let (was, now) = (ctx.before.table(table), ctx.after.table(table));
    for key in keys(was, now) {
        let (before, after) = (was.get(key), now.get(key));
        let Some(before) = before.filter(|b| concerns(ctx, b, "last_message_id")) else {
            c.unchanged(table, key, before, after, &["updated_at"]);
            continue;
        };
        let Some(after) = after else {
            c.observe(r::SCRUBBED_INDEX_SHAPE, &["row-removed"]);
            continue;
        };
        if let Some(quoted) = ctx.text.quoted_in(&after.text()) {
            c.cell(
                table,
                key,
                "projection_json",
                "no content of a rewound message",
                format!("{} quoting `{quoted}`", show(after.get("projection_json"))),
            );
        }
        let projection = after.get("projection_json").cloned().unwrap_or(Value::Null);
        match projection.get("lastMessage") {
            None | Some(Value::Null) => c.observe(r::SCRUBBED_INDEX_SHAPE, &["drops-last-message"]),
            Some(last) => {
                let id = last.get("id").and_then(Value::as_str).unwrap_or_default();
                if ctx.rewound.contains(id) {
                    let found = spec::content_keys(last);
                    if found.is_empty() {
                        c.observe(r::SCRUBBED_INDEX_SHAPE, &["keeps-rewound-id"]);
                    } else {
                        c.cell(
                            table,
                            key,
                            "projection_json",
                            format!("no content-bearing key on the rewound `{id}`"),
                            format!("the keys {} in {}", found.join(", "), last),
                        );
                    }
                } else {
                    c.observe(r::SCRUBBED_INDEX_SHAPE, &["repoints"]);
                }
            }
        }
        let scope = before.str("scope_id").unwrap_or_default();
        let last_id = after.get("last_message_id");
        let fine = last_id == before.get("last_message_id")
            || last_id.is_some_and(Value::is_null)
            || last_id
                .and_then(Value::as_str)
                .and_then(|id| ctx.after.message(id))
                .is_some_and(|m| m.scope_id == scope && !m.is_rewound());
        if !fine {
            c.wrong(
                row_place(table, key, Some("last_message_id")),
                format!(
                    "{}, `null` or a visible message of `{scope}`",
                    show(before.get("last_message_id"))
                ),
                show(last_id),
            );
        }
        c.same_columns(
            table,
            key,
            &before.columns,
            &after.columns,
            &["projection_json", "last_message_id", "updated_at"],
        );
    }
}
