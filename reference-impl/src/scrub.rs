//! Suffix fact suppression and projection scrub (spec 6.1): everything that could keep a rewound
//! message alive outside its transcript row.
//!
//! Runs inside the apply transaction and before the transcript tombstone: projection-backed
//! surfaces are removed first, so `scope_messages` is the last authority to change.

use sqlx::PgConnection;

use crate::error::{DbContext, RewindError};
use crate::sql::MESSAGE_NOT_REWOUND_SQL;
use crate::variant::Variant;

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
///
/// Under [`Variant::Alternative`], scrubbed stream events carry `"rewound": true`, and a
/// scrubbed conversation index row's `lastMessage` is repointed to the last visible message of
/// its scope outside `ids` (`{"id": ...}`, no preview), or dropped when there is none.
pub async fn scrub_suffix_facts(
    conn: &mut PgConnection,
    ids: &[String],
    variant: Variant,
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
        match variant {
            Variant::Recommended => {
                "UPDATE scope_fanout_outbox SET status = 'suppressed', leased_until = NULL \
                 WHERE message_id = ANY($1) AND status IN ('pending', 'leased')"
            }
            // Alternative: a failed delivery may be retried, so it is not completed either.
            Variant::Alternative => {
                "UPDATE scope_fanout_outbox SET status = 'suppressed', leased_until = NULL \
                 WHERE message_id = ANY($1) AND status IN ('pending', 'leased', 'failed')"
            }
        },
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
    let (stream_sql, index_sql) = match variant {
        Variant::Recommended => (STREAM_SCRUB_SQL, INDEX_SCRUB_SQL.to_owned()),
        Variant::Alternative => (
            STREAM_SCRUB_MARKED_SQL,
            format!(
                "UPDATE im_conversation_index c SET \
                   projection_json = c.projection_json - $2::text[] - 'lastMessage' \
                     || CASE WHEN c.projection_json ? 'lastMessage' THEN coalesce( \
                          (SELECT jsonb_build_object('lastMessage', jsonb_build_object('id', m.id)) \
                           FROM scope_messages m \
                           WHERE m.scope_id = c.scope_id AND NOT m.id = ANY($1) \
                             AND {MESSAGE_NOT_REWOUND_SQL} \
                           ORDER BY m.seq DESC LIMIT 1), \
                          '{{}}'::jsonb) \
                        ELSE '{{}}'::jsonb END, \
                   updated_at = now() \
                 WHERE c.last_message_id = ANY($1)"
            ),
        ),
    };
    sqlx::query(stream_sql)
        .bind(ids)
        .bind(&keys)
        .execute(&mut *conn)
        .await
        .db("scrubbing durable stream events")?;
    sqlx::query(sqlx::AssertSqlSafe(index_sql))
        .bind(ids)
        .bind(&keys)
        .execute(&mut *conn)
        .await
        .db("scrubbing the conversation index")?;
    Ok(())
}

/// Stream events lose their content-bearing keys.
const STREAM_SCRUB_SQL: &str =
    "UPDATE im_stream_events SET payload_json = payload_json - $2::text[] \
     WHERE message_id = ANY($1)";

/// [`Variant::Alternative`]: stream events lose their content-bearing keys and gain the
/// content-free lifecycle marker `"rewound": true`.
const STREAM_SCRUB_MARKED_SQL: &str =
    "UPDATE im_stream_events SET payload_json = payload_json - $2::text[] \
       || jsonb_build_object('rewound', true) \
     WHERE message_id = ANY($1)";

/// Index rows whose last message is rewound lose their content-bearing keys, and so does their
/// `lastMessage` (which keeps its id).
const INDEX_SCRUB_SQL: &str = "UPDATE im_conversation_index SET \
       projection_json = projection_json - $2::text[] \
         || CASE WHEN projection_json ? 'lastMessage' \
                 THEN jsonb_build_object('lastMessage', (projection_json -> 'lastMessage') - $2::text[]) \
                 ELSE '{}'::jsonb END, \
       updated_at = now() \
     WHERE last_message_id = ANY($1)";

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
