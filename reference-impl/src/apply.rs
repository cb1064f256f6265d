//! ApplyRewind (spec 6.1, 6.3): the one transaction that tombstones the suffix.
//!
//! The transaction locks the scope rows and their read state, re-validates that the suffix has
//! not drifted since the plan was made, suppresses and scrubs the suffix's facts and deletes its
//! consumed recovery points, tombstones the suffix (primary and cascades) last while marking the
//! operation completed, archives cascaded reply threads, and recomputes and clamps. Every
//! statement selects the suffix by the boundary's `(scope, seq)` ranges, a handful of statements
//! whatever its length.

use std::collections::BTreeMap;

use sqlx::{Connection, PgConnection};

use crate::error::{DbContext, RewindError, SpecError};
use crate::lifecycle::OperationStatus;
use crate::messages::{self, NewMessage, Posted};
use crate::plan::RewindPlan;
use crate::realtime;
use crate::recompute;
use crate::scrub;
use crate::sql::{suffix_cte, MESSAGE_NOT_REWOUND_SQL};
use crate::variant::Variant;

/// The tombstone metadata: `messageRecall.status = "rewound"` and `rewoundAt`, which sits inside
/// `messageRecall` ([`Variant::Recommended`]) or at the top level ([`Variant::Alternative`]).
/// The rows are the suffix's, selected by the boundary's ranges (`$1` scopes, `$2` first
/// seqs), which the drift check has just compared with the plan; each comes back with its place
/// in the boundary for the operation row ([`TOMBSTONE_AND_COMPLETE_SQL`]).
const TOMBSTONE_SQL: &str = "UPDATE scope_messages m SET content = '', \
     metadata = jsonb_build_object('messageRecall', jsonb_build_object( \
       'status', 'rewound', \
       'rewoundAt', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'))) \
     FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS b(scope_id, from_seq, ord) \
     WHERE m.scope_id = b.scope_id AND m.seq >= b.from_seq AND {visible} \
     RETURNING m.id, m.seq, b.ord";
const TOMBSTONE_TOP_LEVEL_AT_SQL: &str = "UPDATE scope_messages m SET content = '', \
     metadata = jsonb_build_object( \
       'messageRecall', jsonb_build_object('status', 'rewound'), \
       'rewoundAt', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')) \
     FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS b(scope_id, from_seq, ord) \
     WHERE m.scope_id = b.scope_id AND m.seq >= b.from_seq AND {visible} \
     RETURNING m.id, m.seq, b.ord";

/// The tombstone ([`TOMBSTONE_SQL`] as `{tombstone}`), and the operation completed with the ids
/// it tombstoned, in boundary order (`$3` the operation, `$4` its completed status).
const TOMBSTONE_AND_COMPLETE_SQL: &str = "WITH tombstoned AS ({tombstone}) \
     UPDATE rewind_operations SET status = $4, \
       rewound_message_ids = (SELECT coalesce(array_agg(id ORDER BY ord, seq), '{}') FROM tombstoned), \
       updated_at = now(), completed_at = now() \
     WHERE id = $3";

/// The advisory lock an apply takes on each scope it tombstones, for its transaction: it waits
/// while another rewind of that scope holds it for its notice ([`hold_for_notice`]).
const APPLY_LOCK_SQL: &str =
    "SELECT pg_advisory_xact_lock(hashtextextended('rewind-apply:' || $1, 0))";
const HOLD_SQL: &str = "SELECT pg_advisory_lock(hashtextextended('rewind-apply:' || $1, 0))";
const RELEASE_SQL: &str = "SELECT pg_advisory_unlock(hashtextextended('rewind-apply:' || $1, 0))";

/// Holds `scope_id`'s apply lock on `conn`'s session, beyond its transactions: a rewind whose
/// notice is written after its apply commits ([`Variant::Recommended`]) holds it from before the
/// apply until the notice is written, so no other apply of that scope (a parent channel's
/// rewind that archives this reply thread, say) comes in between and leaves a completed rewind
/// without its notice (spec 8). The same session takes the lock again inside its own apply.
pub async fn hold_for_notice(conn: &mut PgConnection, scope_id: &str) -> Result<(), RewindError> {
    sqlx::query(HOLD_SQL)
        .bind(scope_id)
        .execute(conn)
        .await
        .db("holding the scope for the rewind notice")?;
    Ok(())
}

/// Releases what [`hold_for_notice`] took.
pub async fn release_after_notice(
    conn: &mut PgConnection,
    scope_id: &str,
) -> Result<(), RewindError> {
    sqlx::query(RELEASE_SQL)
        .bind(scope_id)
        .execute(conn)
        .await
        .db("releasing the scope after the rewind notice")?;
    Ok(())
}

/// What an apply did.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// Every message it tombstoned (primary suffix first, then the cascades).
    pub rewound_message_ids: Vec<String>,
    /// [`Variant::Alternative`]: the rewind notice it wrote inside the transaction, and where
    /// the notice landed (the recommended variant writes the notice after the commit).
    pub notice: Option<(NewMessage, Posted)>,
}

/// Applies `plan` for `operation_id`.
///
/// Under [`Variant::Alternative`] the rewind notice is written in this transaction, after the
/// scope's recompute (so read cursors are clamped to the surviving messages) and before the
/// reply-thread summary: it then counts as a reply, and it marks message sync dirty like any new
/// message ([`recompute::mark_sync_dirty`]).
pub async fn apply_rewind(
    conn: &mut PgConnection,
    plan: &RewindPlan,
    operation_id: &str,
    variant: Variant,
) -> Result<Applied, RewindError> {
    let mut tx = conn.begin().await.db("beginning the apply transaction")?;
    let applied = apply_in(&mut tx, plan, operation_id, variant).await?;
    tx.commit().await.db("committing the apply transaction")?;
    Ok(applied)
}

/// The statements of [`apply_rewind`] on `conn`, which must be inside a transaction the caller
/// commits (or, to measure the apply without keeping it, rolls back).
pub async fn apply_in(
    conn: &mut PgConnection,
    plan: &RewindPlan,
    operation_id: &str,
    variant: Variant,
) -> Result<Applied, RewindError> {
    let (scopes, froms) = plan.boundary.ranges();
    // First, before any row lock: wait until no other rewind of these scopes is still writing
    // its notice. In name order, so two applies cannot wait for each other.
    let mut keyed = scopes.clone();
    keyed.sort();
    for scope in &keyed {
        sqlx::query(APPLY_LOCK_SQL)
            .bind(scope)
            .execute(&mut *conn)
            .await
            .db("waiting for an earlier rewind's notice")?;
    }
    // A reply thread's row references its parent scope, and updating a row twice in one
    // transaction re-checks that reference (a key-share lock on the parent's row). Take it
    // first: an apply of the parent channel holding its row while it waits for the workspace's
    // global seq (its notice) would otherwise deadlock with this one.
    if let Some(thread) = &plan.reply_thread_scope_id {
        sqlx::query(
            "SELECT p.id FROM scopes t JOIN scopes p ON p.id = t.parent_scope_id \
             WHERE t.id = $1 FOR KEY SHARE OF p",
        )
        .bind(thread.as_str())
        .fetch_optional(&mut *conn)
        .await
        .db("locking the reply thread's parent scope")?;
    }
    // Lock in id order so two rewinds touching the same scopes cannot deadlock.
    sqlx::query("SELECT id FROM scopes WHERE id = ANY($1) ORDER BY id FOR UPDATE")
        .bind(&scopes)
        .fetch_all(&mut *conn)
        .await
        .db("locking the scopes")?;
    sqlx::query("SELECT id FROM scope_memberships WHERE scope_id = ANY($1) ORDER BY id FOR UPDATE")
        .bind(&scopes)
        .fetch_all(&mut *conn)
        .await
        .db("locking the read state")?;

    // Drift: the suffix (and each cascade) must be exactly what the plan validated.
    let mut now: BTreeMap<i64, Vec<String>> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "WITH {} SELECT ord, array_agg(id ORDER BY seq) FROM suffix GROUP BY ord",
        suffix_cte()
    )))
    .bind(&scopes)
    .bind(&froms)
    .fetch_all(&mut *conn)
    .await
    .db("reading the suffix again")?
    .into_iter()
    .collect();
    let primary = &plan.boundary.primary;
    if now.remove(&1).unwrap_or_default() != primary.message_ids {
        return Err(RewindError::refused(SpecError::SuffixDrift));
    }
    for (ord, cascade) in (2..).zip(&plan.boundary.cascades) {
        if now.remove(&ord).unwrap_or_default() != cascade.message_ids {
            return Err(RewindError::refused(SpecError::SuffixDrift));
        }
    }

    scrub::scrub_suffix_facts(conn, &plan.boundary, variant).await?;
    // The transcript row is the read-visibility authority, so it is written last among the
    // suffix facts; the operation completes with it.
    let tombstone = match variant {
        Variant::Recommended => TOMBSTONE_SQL,
        Variant::Alternative => TOMBSTONE_TOP_LEVEL_AT_SQL,
    }
    .replace("{visible}", MESSAGE_NOT_REWOUND_SQL);
    sqlx::query(sqlx::AssertSqlSafe(
        TOMBSTONE_AND_COMPLETE_SQL.replace("{tombstone}", &tombstone),
    ))
    .bind(&scopes)
    .bind(&froms)
    .bind(operation_id)
    .bind(OperationStatus::Completed.as_str())
    .execute(&mut *conn)
    .await
    .db("tombstoning the suffix")?;

    for cascade in &plan.boundary.cascades {
        sqlx::query("UPDATE scopes SET archived_at = now() WHERE id = $1")
            .bind(cascade.scope_id.as_str())
            .execute(&mut *conn)
            .await
            .db("archiving a cascaded reply thread")?;
        recompute::recompute_scope(conn, cascade.scope_id.as_str()).await?;
        recompute::recompute_reply_summary(conn, &cascade.parent_message_id).await?;
    }
    recompute::recompute_scope(conn, primary.scope_id.as_str()).await?;
    // Alternative: the notice is written here, after the read cursors were clamped to the tail
    // of the surviving messages (a clamp against a tail that includes the notice would lower no
    // cursor) and before the reply-thread summary is recomputed, which then counts it.
    let notice = match variant {
        Variant::Recommended => None,
        Variant::Alternative => {
            let notice = realtime::notice(conn, plan, operation_id).await?;
            messages::post_in(conn, &notice)
                .await?
                .map(|posted| (notice, posted))
        }
    };
    if let Some(thread) = &plan.reply_thread_scope_id {
        recompute::recompute_thread_parent(conn, thread.as_str()).await?;
    }
    if let Some((_, posted)) = &notice {
        recompute::mark_sync_dirty(conn, primary.scope_id.as_str(), posted.seq).await?;
    }
    Ok(Applied {
        rewound_message_ids: plan.boundary.all_message_ids(),
        notice,
    })
}
