//! ApplyRewind (spec 6.1, 6.3): the one transaction that tombstones the suffix.
//!
//! The transaction locks the scope rows and their read state, re-validates that the suffix has
//! not drifted since the plan was made, suppresses and scrubs the suffix's facts, tombstones the
//! suffix (primary and cascades) last, archives cascaded reply threads, recomputes and clamps,
//! deletes the consumed recovery points and marks the operation completed.

use sqlx::{Acquire, PgPool};

use crate::error::{DbContext, RewindError, SpecError};
use crate::lifecycle;
use crate::plan::{load_suffix, RewindPlan};
use crate::recompute;
use crate::scrub;

/// Applies `plan` for `operation_id`; returns the ids it tombstoned.
pub async fn apply_rewind(
    pool: &PgPool,
    plan: &RewindPlan,
    operation_id: &str,
) -> Result<Vec<String>, RewindError> {
    let mut tx = pool.begin().await.db("beginning the apply transaction")?;
    let conn = tx.acquire().await.db("acquiring the apply connection")?;

    let scopes: Vec<String> = plan
        .boundary
        .tombstone_scopes()
        .into_iter()
        .map(|s| s.0)
        .collect();
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
    let primary = &plan.boundary.primary;
    let now: Vec<String> = load_suffix(conn, primary.scope_id.as_str(), primary.from_seq)
        .await?
        .into_iter()
        .map(|m| m.id)
        .collect();
    if now != primary.message_ids {
        return Err(RewindError::refused(SpecError::SuffixDrift));
    }
    for cascade in &plan.boundary.cascades {
        let now: Vec<String> = load_suffix(conn, cascade.scope_id.as_str(), cascade.from_seq)
            .await?
            .into_iter()
            .map(|m| m.id)
            .collect();
        if now != cascade.message_ids {
            return Err(RewindError::refused(SpecError::SuffixDrift));
        }
    }

    let ids = plan.boundary.all_message_ids();
    scrub::scrub_suffix_facts(conn, &ids).await?;
    // The transcript row is the read-visibility authority, so it is written last among the
    // suffix facts.
    sqlx::query(
        "UPDATE scope_messages SET content = '', \
         metadata = jsonb_build_object('messageRecall', jsonb_build_object( \
           'status', 'rewound', \
           'rewoundAt', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'))) \
         WHERE id = ANY($1)",
    )
    .bind(&ids)
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
    if let Some(thread) = &plan.reply_thread_scope_id {
        recompute::recompute_thread_parent(conn, thread.as_str()).await?;
    }
    scrub::delete_consumed_recovery_points(conn, &ids).await?;
    lifecycle::complete(conn, operation_id, &ids).await?;
    tx.commit().await.db("committing the apply transaction")?;
    Ok(ids)
}
