//! Then steps about what a rewind leaves behind: canary leaks, the order of writes, and the rows
//! outside the suffix that no scrub, clamp or recompute may reach.

use std::collections::BTreeSet;

use anyhow::{anyhow, bail, ensure, Context as _};
use cucumber::then;
use rewind_conformance::inspect::{line_diff, writes_since, DbSnapshot};
use rewind_conformance::leak_scan::canaries_in as canaries;
// The keys that carry content in a durable stream event or a conversation index projection
// (spec section 6.1), as the spec model reads them.
use rewind_conformance::oracle::spec::CONTENT_BEARING_KEYS;

use super::id_list;
use crate::suite::world::RewindWorld;

/// Tables whose suffix rows are projections or delivery facts (spec 6.1), as opposed to the
/// transcript row in `scope_messages`.
const PROJECTION_TABLES: &[&str] = &[
    "scope_activity_events",
    "scope_fanout_outbox",
    "scope_share_cards",
    "scope_message_reactions",
    "scope_message_pins",
    "scope_message_top_notices",
    "scope_message_search_docs",
    "scope_message_sources",
    "attachments",
    "im_stream_events",
    "im_conversation_index",
];

/// The message rows of a snapshot as JSON objects.
pub(super) fn message_rows(snapshot: &DbSnapshot) -> Vec<serde_json::Value> {
    snapshot
        .tables
        .get("scope_messages")
        .map(|rows| {
            rows.iter()
                .filter_map(|r| serde_json::from_str(r).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The canaries in the content that `ids` had in `snapshot`.
pub(super) fn canaries_of(snapshot: &DbSnapshot, ids: &BTreeSet<String>) -> BTreeSet<String> {
    message_rows(snapshot)
        .iter()
        .filter(|r| {
            r.get("id")
                .and_then(|v| v.as_str())
                .is_some_and(|id| ids.contains(id))
        })
        .filter_map(|r| r.get("content").and_then(|v| v.as_str()))
        .flat_map(canaries)
        .collect()
}

/// Delivery evidence the spec keeps as history (suppressed or delivered rows may still quote the
/// message they delivered); every other table is a transcript, projection or sidecar.
const DELIVERY_EVIDENCE: &[&str] = &["scope_activity_events", "scope_fanout_outbox"];

/// No transcript, projection or sidecar row still holds a canary that was in the content of
/// these messages (delivery evidence excepted, see [`DELIVERY_EVIDENCE`]).
#[then(expr = "no transcript or projection holds the canaries of messages {string}")]
async fn no_canaries(world: &mut RewindWorld, ids: String) -> anyhow::Result<()> {
    let before = world.before_snapshot()?;
    let wanted = id_list(&ids);
    let mut tokens = BTreeSet::new();
    for row in message_rows(before) {
        let id = row.get("id").and_then(|v| v.as_str()).unwrap_or_default();
        if wanted.iter().any(|w| w == id) {
            let content = row
                .get("content")
                .and_then(|v| v.as_str())
                .unwrap_or_default();
            let found = canaries(content);
            ensure!(
                !found.is_empty(),
                "message `{id}` has no canary in its content (fixtures put a `CANARY-...` token in every message)"
            );
            tokens.extend(found);
        }
    }
    ensure!(
        !tokens.is_empty(),
        "none of {ids} exists in the conversation"
    );
    let after = world.snapshot().await?;
    let mut leaks = Vec::new();
    for (table, rows) in &after.tables {
        if DELIVERY_EVIDENCE.contains(&table.as_str()) {
            continue;
        }
        for row in rows {
            for token in &tokens {
                if row.contains(token.as_str()) {
                    leaks.push(format!("`{table}` still holds `{token}` in {row}"));
                }
            }
        }
    }
    ensure!(
        leaks.is_empty(),
        "rewound content leaked:\n{}",
        leaks.join("\n")
    );
    Ok(())
}

/// The messages the last operation turned into tombstones (rewound now, not in the snapshot).
pub(super) async fn newly_rewound(world: &RewindWorld) -> anyhow::Result<BTreeSet<String>> {
    let before = world.before_snapshot()?;
    let was: BTreeSet<String> = message_rows(before)
        .into_iter()
        .filter(|r| {
            r.pointer("/metadata/messageRecall/status")
                .and_then(|s| s.as_str())
                == Some("rewound")
        })
        .filter_map(|r| r.get("id").and_then(|v| v.as_str()).map(str::to_owned))
        .collect();
    let now: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM scope_messages m WHERE m.metadata #>> '{messageRecall,status}' = 'rewound'",
    )
    .fetch_all(world.pool()?)
    .await
    .context("reading scope_messages")?;
    Ok(now.into_iter().filter(|id| !was.contains(id)).collect())
}

/// Every projection write for the suffix and the transcript tombstone happened in one
/// transaction, and the tombstone came after the last projection write.
#[then("the suffix was tombstoned in one transaction, after every projection scrub")]
async fn transcript_last(world: &mut RewindWorld) -> anyhow::Result<()> {
    let mark = world
        .log_mark
        .ok_or_else(|| anyhow!("no statement-log mark (this step follows a `When`)"))?;
    let suffix = newly_rewound(world).await?;
    ensure!(
        !suffix.is_empty(),
        "no message was tombstoned by the last operation"
    );

    let mut conn = world
        .pool()?
        .acquire()
        .await
        .context("acquiring a connection")?;
    let writes = writes_since(&mut conn, mark)
        .await
        .context("reading the statement log")?;
    let in_suffix = |w: &&rewind_conformance::inspect::LoggedWrite| {
        w.message_id.as_ref().is_some_and(|m| suffix.contains(m))
    };
    let tombstones: Vec<_> = writes
        .iter()
        .filter(in_suffix)
        .filter(|w| w.table_name == "scope_messages" && w.op == "UPDATE")
        .collect();
    let projections: Vec<_> = writes
        .iter()
        .filter(in_suffix)
        .filter(|w| PROJECTION_TABLES.contains(&w.table_name.as_str()))
        .collect();
    let first_tombstone = tombstones.iter().map(|w| w.id).min().ok_or_else(|| {
        anyhow!("the statement log shows no UPDATE of the suffix's scope_messages rows")
    })?;
    if projections.is_empty() {
        bail!("no projection row of the suffix was written; use a fixture whose suffix has projections");
    }
    let txids: BTreeSet<i64> = tombstones
        .iter()
        .chain(projections.iter())
        .map(|w| w.txid)
        .collect();
    ensure!(
        txids.len() == 1,
        "the suffix's projection scrub and tombstone ran in {} transactions, expected one",
        txids.len()
    );
    let late: Vec<String> = projections
        .iter()
        .filter(|w| w.id > first_tombstone)
        .map(|w| {
            format!(
                "{} of `{}` for `{}`",
                w.op,
                w.table_name,
                w.message_id.as_deref().unwrap_or("?")
            )
        })
        .collect();
    ensure!(
        late.is_empty(),
        "the transcript tombstone must come last, but these projection writes followed it:\n{}",
        late.join("\n")
    );
    Ok(())
}

/// The content-bearing keys anywhere in `value`.
fn content_keys(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                if CONTENT_BEARING_KEYS.contains(&k.to_ascii_lowercase().as_str()) {
                    out.push(k.clone());
                }
                content_keys(v, out);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| content_keys(v, out)),
        _ => {}
    }
}

/// The JSON column a scrub empties, per table.
fn scrubbed_column(table: &str) -> anyhow::Result<&'static str> {
    match table {
        "im_stream_events" => Ok("payload_json"),
        "im_conversation_index" => Ok("projection_json"),
        other => {
            bail!("`{other}` has no scrubbed JSON column (im_stream_events, im_conversation_index)")
        }
    }
}

fn rows_of(snapshot: &DbSnapshot, table: &str, scope: &str) -> Vec<serde_json::Value> {
    snapshot
        .tables
        .get(table)
        .into_iter()
        .flatten()
        .filter_map(|r| serde_json::from_str::<serde_json::Value>(r).ok())
        .filter(|r| r.get("scope_id").and_then(|v| v.as_str()) == Some(scope))
        .collect()
}

/// The key that identifies a row of `table` across the rewind.
fn row_key(table: &str, row: &serde_json::Value) -> String {
    match table {
        "im_conversation_index" => row.get("user_id").map(|v| v.to_string()),
        _ => row.get("id").map(|v| v.to_string()),
    }
    .unwrap_or_default()
}

/// What a scrubbed row of `table` looks like now: the reading it shows, or why it leaks.
fn scrub_reading(
    table: &str,
    column: &str,
    was: &serde_json::Value,
    now: Option<&serde_json::Value>,
    suffix: &[String],
    tokens: &BTreeSet<String>,
) -> Result<&'static str, String> {
    let Some(now) = now else {
        return Ok("row-removed");
    };
    let text = now.to_string();
    if let Some(token) = tokens.iter().find(|t| text.contains(t.as_str())) {
        return Err(format!("still quotes `{token}`: {text}"));
    }
    let payload = now.get(column).cloned().unwrap_or_default();
    if table == "im_stream_events" {
        let mut found = Vec::new();
        content_keys(&payload, &mut found);
        if !found.is_empty() {
            return Err(format!(
                "still carries the content-bearing keys {found:?}: {payload}"
            ));
        }
        let original: BTreeSet<&String> = was
            .get(column)
            .and_then(|p| p.as_object())
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        let kept = payload
            .as_object()
            .is_none_or(|m| m.keys().all(|k| original.contains(k)));
        return Ok(if kept { "keys-removed" } else { "marker-added" });
    }
    // The conversation index: what it says about its last message.
    match payload.get("lastMessage") {
        None | Some(serde_json::Value::Null) => Ok("drops-last-message"),
        Some(last) => {
            let id = last.get("id").and_then(|v| v.as_str()).unwrap_or_default();
            if suffix.iter().any(|s| s == id) {
                let mut found = Vec::new();
                content_keys(last, &mut found);
                if found.is_empty() {
                    Ok("keeps-rewound-id")
                } else {
                    Err(format!(
                        "names the rewound `{id}` with the content-bearing keys {found:?}: {payload}"
                    ))
                }
            } else {
                Ok("repoints")
            }
        }
    }
}

/// Spec section 6.1 requires the listed content-bearing keys to be removed from scrubbed
/// durable stream events and conversation index projections; it does not fix the shape that
/// remains (ambiguities `scrubbed-stream-event-shape` and `scrubbed-index-shape`). The scope's
/// rows that concern no suffix message stay exactly as they were.
#[then(
    regex = r#"^the "([a-z_]+)" rows of scope "([^"]+)" keep no content of messages "([^"]+)", the others untouched$"#
)]
async fn scrubbed_rows(
    world: &mut RewindWorld,
    table: String,
    scope: String,
    ids: String,
) -> anyhow::Result<()> {
    let column = scrubbed_column(&table)?;
    let suffix = id_list(&ids);
    let before = world.before_snapshot()?;
    let set: BTreeSet<String> = suffix.iter().cloned().collect();
    let tokens = canaries_of(before, &set);
    ensure!(
        !tokens.is_empty(),
        "messages {ids} carry no canary, so the check proves nothing"
    );
    let was = rows_of(before, &table, &scope);
    let after = world.snapshot().await?;
    let now = rows_of(&after, &table, &scope);
    let concerns = |row: &serde_json::Value| {
        let named = [row.get("message_id"), row.get("last_message_id")]
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .any(|id| set.contains(id));
        let text = row.to_string();
        named || tokens.iter().any(|t| text.contains(t.as_str()))
    };
    let (affected, others): (Vec<_>, Vec<_>) = was.iter().partition(|r| concerns(r));
    ensure!(
        !affected.is_empty(),
        "no `{table}` row of scope `{scope}` concerned messages {ids} before the rewind"
    );
    let mut readings = BTreeSet::new();
    for row in &affected {
        let key = row_key(&table, row);
        let current = now.iter().find(|r| row_key(&table, r) == key);
        let reading = scrub_reading(&table, column, row, current, &suffix, &tokens)
            .map_err(|e| anyhow!("`{table}` row {key} of scope `{scope}` {e}"))?;
        readings.insert(reading);
    }
    for row in &others {
        let key = row_key(&table, row);
        let current = now.iter().find(|r| row_key(&table, r) == key);
        ensure!(
            current == Some(row),
            "`{table}` row {key} of scope `{scope}` concerns no rewound message but changed:\n{}",
            line_diff(
                &row.to_string(),
                &current
                    .map(|r| r.to_string())
                    .unwrap_or_else(|| "<gone>".to_owned())
            )
        );
    }
    let ambiguity = match table.as_str() {
        "im_stream_events" => "scrubbed-stream-event-shape",
        _ => "scrubbed-index-shape",
    };
    for reading in readings {
        world.take_reading(ambiguity, reading)?;
    }
    Ok(())
}

/// The columns through which a row is bound to a message.
const MESSAGE_COLUMNS: &[&str] = &["message_id", "source_message_id", "last_message_id"];

/// Whether `row` names one of `ids` in a message column.
fn bound_to(row: &serde_json::Value, ids: &BTreeSet<String>) -> bool {
    MESSAGE_COLUMNS
        .iter()
        .filter_map(|c| row.get(*c).and_then(|v| v.as_str()))
        .any(|id| ids.contains(id))
}

/// The rows of `table` in `snapshot` that `keep` selects, as JSON text (after `normalize`),
/// sorted.
fn selected_rows(
    snapshot: &DbSnapshot,
    table: &str,
    keep: &dyn Fn(&serde_json::Value) -> bool,
    normalize: &dyn Fn(&mut serde_json::Value),
) -> Vec<String> {
    let mut rows: Vec<String> = snapshot
        .tables
        .get(table)
        .into_iter()
        .flatten()
        .filter_map(|r| serde_json::from_str::<serde_json::Value>(r).ok())
        .filter(|r| keep(r))
        .map(|mut r| {
            normalize(&mut r);
            r.to_string()
        })
        .collect();
    rows.sort();
    rows
}

/// Every row of the projection and delivery-fact tables ([`PROJECTION_TABLES`]) and of the
/// recovery points that names none of these messages (in `message_id`, `source_message_id` or
/// `last_message_id`) is still there, unchanged: earlier messages of the rewound scope, other
/// scopes and other conversations, and rows bound to no message (task attachments, uploads,
/// scope-level events). Rows the rewind added are not judged here.
#[then(
    expr = "every projection, delivery fact and recovery point not bound to messages {string} is as before"
)]
async fn unbound_rows_kept(world: &mut RewindWorld, ids: String) -> anyhow::Result<()> {
    let suffix: BTreeSet<String> = id_list(&ids).into_iter().collect();
    ensure!(!suffix.is_empty(), "name the suffix's messages");
    let before = world.before_snapshot()?;
    let after = world.snapshot().await?;
    let keep = |r: &serde_json::Value| !bound_to(r, &suffix);
    let mut problems = Vec::new();
    let mut compared = 0;
    // The tables a section 6.1 apply writes for suffix messages besides the transcript.
    for table in PROJECTION_TABLES.iter().chain(&["message_recovery_points"]) {
        let was = selected_rows(before, table, &keep, &|_| {});
        let now = selected_rows(&after, table, &keep, &|_| {});
        compared += was.len();
        let now_set: BTreeSet<&String> = now.iter().collect();
        if was.iter().any(|r| !now_set.contains(r)) {
            problems.push(format!(
                "`{table}` rows not bound to {ids} changed or went away (rows the rewind added \
                 are allowed):\n{}",
                line_diff(&was.join("\n"), &now.join("\n"))
            ));
        }
    }
    ensure!(
        compared > 0,
        "no row outside messages {ids} existed before the rewind, so the check proves nothing"
    );
    ensure!(problems.is_empty(), "{}", problems.join("\n"));
    Ok(())
}

/// The sync-dirty frontiers (spec 6.1).
const SYNC_DIRTY_TABLES: [&str; 2] = ["scope_sync_dirty", "member_scope_sync_dirty"];

/// The scope a row belongs to: `scopes.id`, else the row's `scope_id`.
fn row_scope<'a>(table: &str, row: &'a serde_json::Value) -> Option<&'a str> {
    let column = if table == "scopes" { "id" } else { "scope_id" };
    row.get(column).and_then(|v| v.as_str())
}

/// Every row of every table that belongs to these scopes (the `scopes` row itself and every row
/// whose `scope_id` is one of them: messages, memberships, grants, delivery facts, sync-dirty
/// frontiers, projections, recovery points) is exactly as before, and none was added.
/// `not bound to messages "<ids>"` leaves out rows naming one of those messages (a source in
/// another conversation that cites a suffix message); `, reply summaries aside` leaves out the
/// `reply_count` / `last_reply_at` of messages (a thread's parent, whose summary is recomputed)
/// and lets the scope's sync-dirty activity frontiers move. `updated_at` is never compared.
#[then(
    regex = r#"^every row of scopes? "([^"]+)"(?: not bound to messages "([^"]+)")? is as before(, reply summaries aside)?$"#
)]
async fn scope_rows_kept(
    world: &mut RewindWorld,
    scopes: String,
    ids: String,
    summaries_aside: String,
) -> anyhow::Result<()> {
    let scopes: BTreeSet<String> = id_list(&scopes).into_iter().collect();
    let suffix: BTreeSet<String> = id_list(&ids).into_iter().collect();
    let before = world.before_snapshot()?;
    let after = world.snapshot().await?;
    let mut problems = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let tables: BTreeSet<&String> = before.tables.keys().chain(after.tables.keys()).collect();
    for table in tables {
        let keep = |r: &serde_json::Value| {
            row_scope(table, r).is_some_and(|s| scopes.contains(s)) && !bound_to(r, &suffix)
        };
        // `updated_at` is bookkeeping the spec gives no meaning. Beside a thread's parent, the
        // parent's sync-dirty activity frontier may move: announcing the recomputed summary to
        // syncing clients is defensible (ambiguity `parent-refresh-after-thread-rewind`).
        let aside = !summaries_aside.is_empty();
        let normalize = |r: &mut serde_json::Value| {
            let Some(map) = r.as_object_mut() else {
                return;
            };
            map.remove("updated_at");
            if aside && table == "scope_messages" {
                map.remove("reply_count");
                map.remove("last_reply_at");
            }
            if aside && SYNC_DIRTY_TABLES.contains(&table.as_str()) {
                map.remove("latest_activity_seq");
            }
        };
        let was = selected_rows(before, table, &keep, &normalize);
        let now = selected_rows(&after, table, &keep, &normalize);
        if table == "scopes" {
            seen.extend(
                was.iter()
                    .filter_map(|r| serde_json::from_str::<serde_json::Value>(r).ok())
                    .filter_map(|r| r.get("id").and_then(|v| v.as_str()).map(str::to_owned)),
            );
        }
        if was != now {
            problems.push(format!(
                "`{table}` rows of {} changed:\n{}",
                scopes.iter().cloned().collect::<Vec<_>>().join(", "),
                line_diff(&was.join("\n"), &now.join("\n"))
            ));
        }
    }
    if !summaries_aside.is_empty() {
        let frontier = |snapshot: &DbSnapshot| -> i64 {
            SYNC_DIRTY_TABLES
                .iter()
                .flat_map(|t| snapshot.tables.get(*t).into_iter().flatten())
                .filter_map(|r| serde_json::from_str::<serde_json::Value>(r).ok())
                .filter(|r| row_scope("", r).is_some_and(|s| scopes.contains(s)))
                .filter_map(|r| r.get("latest_activity_seq").and_then(|v| v.as_i64()))
                .sum()
        };
        let reading = if frontier(&after) > frontier(before) {
            "activity-marked"
        } else {
            "untouched"
        };
        world.take_reading("parent-refresh-after-thread-rewind", reading)?;
    }
    let missing: Vec<&String> = scopes.difference(&seen).collect();
    ensure!(
        missing.is_empty(),
        "scopes {missing:?} did not exist before the rewind"
    );
    ensure!(problems.is_empty(), "{}", problems.join("\n"));
    Ok(())
}
