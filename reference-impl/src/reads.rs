//! The read surfaces a rewind must keep consistent (spec 6.2 and 8): a member's read state with
//! its derived unread count, and message sync. Both read `scope_messages` through the lifecycle
//! gate ([`MESSAGE_NOT_REWOUND_SQL`]): a rewound tombstone does not exist for them.
//!
//! - The derived read cursor never points past the visible tail, even when a stored cursor (or
//!   a stale high-water mark) does.
//! - Unread counts visible messages after the cursor written by someone else, except the rewind
//!   notice: it is a projection-only message that enters no ordinary unread.
//! - Sync pages hold visible messages only: a rewind never produces a tombstone page; clients
//!   learn of it through `conversation:rewound` and refetch.

use sqlx::{PgConnection, PgPool};

use crate::error::{DbContext, RewindError};
use crate::sql::MESSAGE_NOT_REWOUND_SQL;

/// A member's read position in one scope, as a client would be shown it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadState {
    /// The derived read cursor: the stored `last_read_seq`, clamped to the visible tail.
    pub last_read_seq: i64,
    /// The seq of the last visible message (0 when none).
    pub visible_tail_seq: i64,
    /// Visible messages after the cursor, not by the member, and not the rewind notice.
    pub unread_count: i64,
}

/// One message of a sync page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncedMessage {
    /// `scope_messages.id`.
    pub id: String,
    /// Its seq.
    pub seq: i64,
    /// `human`, `agent`, `system`, `service` or `app`.
    pub author_kind: String,
    /// The content.
    pub content: String,
}

/// A page of message sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncPage {
    /// Visible messages after the cursor, in seq order.
    pub messages: Vec<SyncedMessage>,
    /// Whether more visible messages follow.
    pub has_more: bool,
    /// The cursor to resume from (the last returned seq, or the one given).
    pub next_after_seq: i64,
}

/// The rewind notice, which counts toward no ordinary unread.
const NOT_REWIND_NOTICE_SQL: &str = "NOT (m.metadata ? 'rewindNotice')";

/// The read state of human `user_id` in `scope_id`; `None` when the user is not a member.
pub async fn read_state(
    pool: &PgPool,
    scope_id: &str,
    user_id: &str,
) -> Result<Option<ReadState>, RewindError> {
    let sql = format!(
        "WITH tail AS (SELECT coalesce(max(m.seq), 0) AS seq FROM scope_messages m \
                       WHERE m.scope_id = $1 AND {MESSAGE_NOT_REWOUND_SQL}), \
              cursor AS (SELECT least(sm.last_read_seq, tail.seq) AS seq, tail.seq AS tail \
                         FROM scope_memberships sm, tail \
                         WHERE sm.scope_id = $1 AND sm.user_id = $2) \
         SELECT cursor.seq, cursor.tail, \
                (SELECT count(*) FROM scope_messages m \
                 WHERE m.scope_id = $1 AND m.seq > cursor.seq AND {MESSAGE_NOT_REWOUND_SQL} \
                   AND {NOT_REWIND_NOTICE_SQL} \
                   AND m.author_user_id IS DISTINCT FROM $2) \
         FROM cursor"
    );
    let row: Option<(i64, i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(scope_id)
        .bind(user_id)
        .fetch_optional(pool)
        .await
        .db("reading the read state")?;
    Ok(row.map(
        |(last_read_seq, visible_tail_seq, unread_count)| ReadState {
            last_read_seq,
            visible_tail_seq,
            unread_count,
        },
    ))
}

/// Whether human `user_id` is a member of `scope_id` (message sync serves members only).
pub async fn is_member(
    conn: &mut PgConnection,
    scope_id: &str,
    user_id: &str,
) -> Result<bool, RewindError> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM scope_memberships WHERE scope_id = $1 AND user_id = $2)",
    )
    .bind(scope_id)
    .bind(user_id)
    .fetch_one(conn)
    .await
    .db("checking membership")
}

/// Up to `limit` visible messages of `scope_id` after seq `after_seq`.
pub async fn sync_messages(
    conn: &mut PgConnection,
    scope_id: &str,
    after_seq: i64,
    limit: i64,
) -> Result<SyncPage, RewindError> {
    let limit = limit.clamp(1, 500);
    let sql = format!(
        "SELECT m.id, m.seq, m.author_kind, m.content FROM scope_messages m \
         WHERE m.scope_id = $1 AND m.seq > $2 AND {MESSAGE_NOT_REWOUND_SQL} \
         ORDER BY m.seq LIMIT $3"
    );
    let mut rows: Vec<(String, i64, String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(scope_id)
        .bind(after_seq)
        .bind(limit + 1)
        .fetch_all(conn)
        .await
        .db("syncing messages")?;
    let has_more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    let next_after_seq = rows.last().map_or(after_seq, |r| r.1);
    Ok(SyncPage {
        messages: rows
            .into_iter()
            .map(|(id, seq, author_kind, content)| SyncedMessage {
                id,
                seq,
                author_kind,
                content,
            })
            .collect(),
        has_more,
        next_after_seq,
    })
}
