//! Recompute and clamp after the tombstone (spec 6.2 and 6.3).
//!
//! `latest_seq` / `latest_global_seq` are physical high-water marks and are never touched; the
//! visible summary is recomputed from non-rewound messages; every read cursor and sync-dirty
//! message frontier is clamped to the visible tail.

use sqlx::PgConnection;

use crate::error::{DbContext, RewindError};
use crate::sql::MESSAGE_NOT_REWOUND_SQL;

/// Recomputes the visible summary of `scope_id` and clamps its cursors to the visible tail, in
/// one statement: the tail (`v`) is read once, and each write is a `WITH` item over it.
pub async fn recompute_scope(conn: &mut PgConnection, scope_id: &str) -> Result<(), RewindError> {
    let parts = [
        format!(
            "v AS MATERIALIZED (SELECT count(*)::int AS n, max(m.created_at) AS last_at, \
               coalesce(max(m.seq), 0) AS seq, coalesce(max(m.global_seq), 0) AS gseq \
             FROM scope_messages m WHERE m.scope_id = $1 AND {MESSAGE_NOT_REWOUND_SQL})"
        ),
        "summary AS (UPDATE scopes s SET latest_message_at = v.last_at, visible_last_message_at = v.last_at, \
           visible_message_count = v.n FROM v WHERE s.id = $1)"
            .to_owned(),
        "cursors AS (UPDATE scope_memberships sm SET \
           last_read_seq = least(sm.last_read_seq, t.seq), \
           last_read_global_seq = least(sm.last_read_global_seq, t.gseq), \
           owner_context_dismissed_through_global_seq = \
             least(sm.owner_context_dismissed_through_global_seq, t.gseq) \
         FROM v t WHERE sm.scope_id = $1)"
            .to_owned(),
        dirty_clamp("scope_sync_dirty"),
        dirty_clamp("member_scope_sync_dirty"),
    ];
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "WITH {} SELECT n FROM v",
        parts.join(", ")
    )))
    .bind(scope_id)
    .execute(&mut *conn)
    .await
    .db("recomputing the scope summary and clamping its cursors")?;
    Ok(())
}

/// The `WITH` item clamping `table`'s message frontiers of scope `$1` to the tail `v`.
fn dirty_clamp(table: &str) -> String {
    format!(
        "{table} AS (UPDATE {table} d SET latest_message_seq = least(d.latest_message_seq, t.seq), \
         updated_at = now() FROM v t \
         WHERE d.scope_id = $1 AND d.latest_message_seq > t.seq)"
    )
}

/// Recomputes a parent message's reply-thread summary from its non-archived threads.
pub async fn recompute_reply_summary(
    conn: &mut PgConnection,
    parent_message_id: &str,
) -> Result<(), RewindError> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE scope_messages p SET reply_count = v.n, last_reply_at = v.last_at \
         FROM (SELECT count(m.id)::int AS n, max(m.created_at) AS last_at \
               FROM scopes c LEFT JOIN scope_messages m ON m.scope_id = c.id AND {MESSAGE_NOT_REWOUND_SQL} \
               WHERE c.parent_message_id = $1 AND c.archived_at IS NULL) v \
         WHERE p.id = $1"
    )))
    .bind(parent_message_id)
    .execute(conn)
    .await
    .db("recomputing the reply-thread summary")?;
    Ok(())
}

/// Recomputes the reply-thread summary on the parent message of reply thread `thread_scope_id`.
pub async fn recompute_thread_parent(
    conn: &mut PgConnection,
    thread_scope_id: &str,
) -> Result<(), RewindError> {
    let parent: Option<String> =
        sqlx::query_scalar("SELECT parent_message_id FROM scopes WHERE id = $1")
            .bind(thread_scope_id)
            .fetch_optional(&mut *conn)
            .await
            .db("loading the reply thread's parent")?
            .flatten();
    match parent {
        Some(parent) => recompute_reply_summary(conn, &parent).await,
        None => Ok(()),
    }
}

/// [`crate::Variant::Alternative`]: the rewind notice marks message sync dirty like any new
/// message. After the clamp, the scope's and every human member's `latest_message_seq` become
/// the notice's `seq` (rows are created where missing; activity frontiers are untouched).
pub async fn mark_sync_dirty(
    conn: &mut PgConnection,
    scope_id: &str,
    seq: i64,
) -> Result<(), RewindError> {
    sqlx::query(
        "INSERT INTO scope_sync_dirty (scope_id, latest_message_seq) VALUES ($1, $2) \
         ON CONFLICT (scope_id) DO UPDATE SET \
           latest_message_seq = EXCLUDED.latest_message_seq, updated_at = now()",
    )
    .bind(scope_id)
    .bind(seq)
    .execute(&mut *conn)
    .await
    .db("marking the scope's messages dirty")?;
    sqlx::query(
        "INSERT INTO member_scope_sync_dirty (scope_id, user_id, latest_message_seq) \
         SELECT scope_id, user_id, $2 FROM scope_memberships \
         WHERE scope_id = $1 AND user_id IS NOT NULL \
         ON CONFLICT (scope_id, user_id) DO UPDATE SET \
           latest_message_seq = EXCLUDED.latest_message_seq, updated_at = now()",
    )
    .bind(scope_id)
    .bind(seq)
    .execute(conn)
    .await
    .db("marking the members' messages dirty")?;
    Ok(())
}
