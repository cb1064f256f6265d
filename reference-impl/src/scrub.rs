//! Suffix fact suppression and projection scrub (spec 6.1): everything that could keep a rewound
//! message alive outside its transcript row.
//!
//! Runs inside the apply transaction and before the transcript tombstone: projection-backed
//! surfaces are removed first, so `scope_messages` is the last authority to change.

use sqlx::PgConnection;

use crate::error::{DbContext, RewindError};

/// Keys of durable IM payloads that carry (or quote) message content.
const CONTENT_KEYS: [&str; 8] = [
    "content",
    "attachments",
    "reactions",
    "mentions",
    "sources",
    "sourceSnippets",
    "deliveryPreview",
    "preview",
];

/// Suppresses and scrubs every suffix-bound fact of `ids`.
pub async fn scrub_suffix_facts(
    conn: &mut PgConnection,
    ids: &[String],
) -> Result<(), RewindError> {
    // Delivery facts: unconsumed activity and unfinished fanout are suppressed; consumed and
    // delivered rows stay as history (read paths never resurrect from them).
    exec(
        conn,
        "UPDATE scope_activity_events SET status = 'suppressed' \
         WHERE message_id = ANY($1) AND status = 'pending'",
        ids,
        "suppressing activity events",
    )
    .await?;
    exec(
        conn,
        "UPDATE scope_fanout_outbox SET status = 'suppressed', leased_until = NULL \
         WHERE message_id = ANY($1) AND status IN ('pending', 'leased')",
        ids,
        "suppressing fanout outbox rows",
    )
    .await?;

    // Projection-backed read surfaces: removed outright.
    for (sql, action) in [
        ("DELETE FROM scope_share_cards WHERE message_id = ANY($1)", "scrubbing share cards"),
        ("DELETE FROM scope_message_reactions WHERE message_id = ANY($1)", "scrubbing reactions"),
        ("DELETE FROM scope_message_pins WHERE message_id = ANY($1)", "scrubbing pins"),
        ("DELETE FROM scope_message_top_notices WHERE message_id = ANY($1)", "scrubbing top notices"),
        ("DELETE FROM scope_message_search_docs WHERE message_id = ANY($1)", "scrubbing search docs"),
        (
            "DELETE FROM scope_message_sources WHERE message_id = ANY($1) OR source_message_id = ANY($1)",
            "scrubbing sources",
        ),
        (
            "DELETE FROM attachments WHERE owner_kind = 'message' AND message_id = ANY($1)",
            "scrubbing message attachments",
        ),
    ] {
        exec(conn, sql, ids, action).await?;
    }

    // Durable IM projections keep their row (a stream position, an index entry) but lose every
    // content-bearing key.
    let keys: Vec<String> = CONTENT_KEYS.iter().map(|k| (*k).to_owned()).collect();
    sqlx::query(
        "UPDATE im_stream_events SET payload_json = payload_json - $2::text[] \
         WHERE message_id = ANY($1)",
    )
    .bind(ids)
    .bind(&keys)
    .execute(&mut *conn)
    .await
    .db("scrubbing durable stream events")?;
    sqlx::query(
        "UPDATE im_conversation_index SET \
           projection_json = projection_json - $2::text[] \
             || CASE WHEN projection_json ? 'lastMessage' \
                     THEN jsonb_build_object('lastMessage', (projection_json -> 'lastMessage') - $2::text[]) \
                     ELSE '{}'::jsonb END, \
           updated_at = now() \
         WHERE last_message_id = ANY($1)",
    )
    .bind(ids)
    .bind(&keys)
    .execute(&mut *conn)
    .await
    .db("scrubbing the conversation index")?;
    Ok(())
}

/// Deletes the suffix's recovery points: restore consumed them, and a later plan must never
/// restore to a tombstoned message.
pub async fn delete_consumed_recovery_points(
    conn: &mut PgConnection,
    ids: &[String],
) -> Result<(), RewindError> {
    exec(
        conn,
        "DELETE FROM message_recovery_points WHERE message_id = ANY($1)",
        ids,
        "deleting consumed recovery points",
    )
    .await
}

async fn exec(
    conn: &mut PgConnection,
    sql: &'static str,
    ids: &[String],
    action: &'static str,
) -> Result<(), RewindError> {
    sqlx::query(sql).bind(ids).execute(conn).await.db(action)?;
    Ok(())
}
