//! The section 10 invariants, checked after every completed rewind (by `Then the rewind
//! completes`) and by their own steps.

use anyhow::{ensure, Context as _};
use cucumber::then;
use rewind_conformance::inspect::line_diff;

use crate::suite::world::RewindWorld;

/// Cursor columns a rewind is allowed (and required) to lower.
const CURSOR_COLUMNS: [&str; 3] = [
    "last_read_seq",
    "last_read_global_seq",
    "owner_context_dismissed_through_global_seq",
];

/// Memberships (cursors aside) and private grants are unchanged; no cursor of a scope with
/// rewound messages is past that scope's visible tail.
pub(super) async fn check_after_rewind(world: &RewindWorld) -> anyhow::Result<()> {
    no_membership_change(world).await?;
    cursors_within_tail(world).await
}

fn without_cursors(rows: &[String]) -> Vec<String> {
    let mut out: Vec<String> = rows
        .iter()
        .filter_map(|r| serde_json::from_str::<serde_json::Value>(r).ok())
        .map(|mut v| {
            if let Some(map) = v.as_object_mut() {
                for column in CURSOR_COLUMNS {
                    map.remove(column);
                }
            }
            v.to_string()
        })
        .collect();
    out.sort();
    out
}

async fn no_membership_change(world: &RewindWorld) -> anyhow::Result<()> {
    let before = world.before_snapshot()?;
    let after = world.snapshot().await?;
    for table in ["scope_memberships", "scope_private_grants"] {
        let was = without_cursors(before.tables.get(table).map(Vec::as_slice).unwrap_or(&[]));
        let now = without_cursors(after.tables.get(table).map(Vec::as_slice).unwrap_or(&[]));
        ensure!(
            was == now,
            "the rewind changed `{table}` (a rewind never changes membership or grants):\n{}",
            line_diff(&was.join("\n"), &now.join("\n"))
        );
    }
    Ok(())
}

/// The messages that were rewound tombstones already before the last operation: a scope whose
/// only tombstones are those was not rewound by it.
fn tombstones_before(world: &RewindWorld) -> Vec<String> {
    world
        .before
        .as_ref()
        .and_then(|b| b.tables.get("scope_messages"))
        .into_iter()
        .flatten()
        .filter_map(|r| serde_json::from_str::<serde_json::Value>(r).ok())
        .filter(|v| {
            v.pointer("/metadata/messageRecall/status")
                .and_then(|s| s.as_str())
                == Some("rewound")
        })
        .filter_map(|v| v.get("id").and_then(|i| i.as_str()).map(str::to_owned))
        .collect()
}

/// No cursor of a scope the scenario rewound messages of is past that scope's visible tail
/// (section 10). Scopes whose tombstones all predate the operation are left alone: their
/// cursors are the state the scenario started from, not something a rewind did.
async fn cursors_within_tail(world: &RewindWorld) -> anyhow::Result<()> {
    let earlier = tombstones_before(world);
    let past: Vec<(String, String, i64, i64, i64, i64, i64)> = sqlx::query_as(
        "WITH tail AS ( \
           SELECT s.id AS scope_id, \
                  coalesce(max(m.seq), 0) AS seq, coalesce(max(m.global_seq), 0) AS gseq \
           FROM scopes s LEFT JOIN scope_messages m ON m.scope_id = s.id \
             AND coalesce(m.metadata #>> '{messageRecall,status}', '') <> 'rewound' \
           GROUP BY s.id) \
         SELECT sm.scope_id, coalesce(sm.user_id, sm.agent_id), sm.last_read_seq, \
                sm.last_read_global_seq, sm.owner_context_dismissed_through_global_seq, \
                t.seq, t.gseq \
         FROM scope_memberships sm JOIN tail t ON t.scope_id = sm.scope_id \
         WHERE sm.scope_id IN (SELECT scope_id FROM scope_messages \
                               WHERE metadata #>> '{messageRecall,status}' = 'rewound' \
                                 AND NOT id = ANY($1)) \
           AND (sm.last_read_seq > t.seq OR sm.last_read_global_seq > t.gseq \
            OR sm.owner_context_dismissed_through_global_seq > t.gseq)",
    )
    .bind(&earlier)
    .fetch_all(world.pool()?)
    .await
    .context("reading scope_memberships")?;
    let lines: Vec<String> = past
        .iter()
        .map(|(scope, member, seq, gseq, dismissed, tail, gtail)| {
            format!(
                "`{scope}` / `{member}`: last_read_seq {seq}, last_read_global_seq {gseq}, \
                 owner_context_dismissed_through_global_seq {dismissed} (visible tail: seq {tail}, global seq {gtail})"
            )
        })
        .collect();
    ensure!(
        lines.is_empty(),
        "cursors past the visible tail:\n{}",
        lines.join("\n")
    );
    Ok(())
}

/// Membership and private grants are exactly as before (read cursors aside).
#[then("no membership or private grant changed")]
async fn membership_unchanged(world: &mut RewindWorld) -> anyhow::Result<()> {
    no_membership_change(world).await
}

/// No read or dismiss cursor is past its scope's visible tail.
#[then("no cursor is past its scope's visible tail")]
async fn cursors_ok(world: &mut RewindWorld) -> anyhow::Result<()> {
    cursors_within_tail(world).await
}
