//! Then steps about what a rewind leaves behind: canary leaks and the order of writes.

use std::collections::BTreeSet;

use anyhow::{anyhow, bail, ensure, Context as _};
use cucumber::then;
use rewind_conformance::inspect::{writes_since, DbSnapshot};

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

/// The `CANARY-...` tokens in `text`.
fn canaries(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("CANARY-") {
        let token: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        rest = &rest[at + token.len()..];
        out.push(token);
    }
    out
}

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

#[cfg(test)]
mod tests {
    use super::canaries;

    #[test]
    fn finds_every_canary() {
        assert_eq!(
            canaries("a CANARY-nt-44d3, b CANARY-x1 end"),
            vec!["CANARY-nt-44d3", "CANARY-x1"]
        );
        assert!(canaries("none").is_empty());
    }
}
