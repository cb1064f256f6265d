//! Suffix fact suppression and projection scrub (spec 6.1): everything that could keep a rewound
//! message alive outside its transcript row.
//!
//! Runs inside the apply transaction and before the transcript tombstone: projection-backed
//! surfaces are removed first, so `scope_messages` is the last authority to change.

use sqlx::PgConnection;

use crate::error::{DbContext, RewindError};
use crate::plan::SuffixBoundary;
use crate::sql::{suffix_cte, MESSAGE_NOT_REWOUND_SQL};
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

/// Suppresses and scrubs every suffix-bound fact of the rewind's suffix, and deletes the
/// recovery points it consumed, in one statement: each part below is a data-modifying `WITH`
/// item over the `suffix` set ([`suffix_cte`]; `$1` and `$2` are the boundary's ranges, `$3`
/// the content-bearing keys).
///
/// Under [`Variant::Alternative`], scrubbed stream events carry `"rewound": true`, and a
/// scrubbed conversation index row's `lastMessage` is repointed to the last visible message of
/// its scope outside the suffix (`{"id": ...}`, no preview), or dropped when there is none.
pub async fn scrub_suffix_facts(
    conn: &mut PgConnection,
    boundary: &SuffixBoundary,
    variant: Variant,
) -> Result<(), RewindError> {
    let parts: [(&str, String); 13] = [
        // Delivery facts: unconsumed activity and unfinished fanout are suppressed; consumed
        // and delivered rows stay as history (read paths never resurrect from them).
        (
            "activity",
            "UPDATE scope_activity_events a SET status = 'suppressed' \
             FROM suffix WHERE a.message_id = suffix.id AND a.status = 'pending'"
                .into(),
        ),
        (
            "fanout",
            match variant {
                Variant::Recommended => {
                    "UPDATE scope_fanout_outbox f SET status = 'suppressed', leased_until = NULL \
                     FROM suffix WHERE f.message_id = suffix.id AND f.status IN ('pending', 'leased')"
                }
                // Alternative: a failed delivery may be retried, so it is not completed either.
                Variant::Alternative => {
                    "UPDATE scope_fanout_outbox f SET status = 'suppressed', leased_until = NULL \
                     FROM suffix WHERE f.message_id = suffix.id AND f.status IN ('pending', 'leased', 'failed')"
                }
            }
            .into(),
        ),
        // Projection-backed read surfaces: removed outright.
        ("cards", "DELETE FROM scope_share_cards c USING suffix WHERE c.message_id = suffix.id".into()),
        ("reactions", "DELETE FROM scope_message_reactions r USING suffix WHERE r.message_id = suffix.id".into()),
        ("pins", "DELETE FROM scope_message_pins p USING suffix WHERE p.message_id = suffix.id".into()),
        ("notices", "DELETE FROM scope_message_top_notices n USING suffix WHERE n.message_id = suffix.id".into()),
        ("docs", "DELETE FROM scope_message_search_docs d USING suffix WHERE d.message_id = suffix.id".into()),
        // A source row goes with either end: the citing message or the cited one. Each end
        // is its own join (an index probe or a hash join per end), not an `OR` join condition,
        // which only a nested loop over the suffix can evaluate; a row that both ends select is
        // deleted by the first.
        ("sources", "DELETE FROM scope_message_sources o USING suffix s WHERE o.message_id = s.id".into()),
        (
            "cited_sources",
            "DELETE FROM scope_message_sources o USING suffix s WHERE o.source_message_id = s.id \
             AND NOT EXISTS (SELECT FROM suffix c WHERE c.id = o.message_id)"
                .into(),
        ),
        (
            "files",
            "DELETE FROM attachments f USING suffix WHERE f.owner_kind = 'message' AND f.message_id = suffix.id"
                .into(),
        ),
        // Durable IM projections keep their row (a stream position, an index entry) but lose
        // every content-bearing key.
        (
            "stream",
            match variant {
                Variant::Recommended => STREAM_SCRUB_SQL,
                Variant::Alternative => STREAM_SCRUB_MARKED_SQL,
            }
            .into(),
        ),
        (
            "conversation_index",
            match variant {
                Variant::Recommended => INDEX_SCRUB_SQL.to_owned(),
                Variant::Alternative => format!(
                    "UPDATE im_conversation_index c SET \
                       projection_json = c.projection_json - $3::text[] - 'lastMessage' \
                         || CASE WHEN c.projection_json ? 'lastMessage' THEN coalesce( \
                              (SELECT jsonb_build_object('lastMessage', jsonb_build_object('id', m.id)) \
                               FROM scope_messages m \
                               WHERE m.scope_id = c.scope_id AND m.id NOT IN (SELECT id FROM suffix) \
                                 AND {MESSAGE_NOT_REWOUND_SQL} \
                               ORDER BY m.seq DESC LIMIT 1), \
                              '{{}}'::jsonb) \
                            ELSE '{{}}'::jsonb END, \
                       updated_at = now() \
                     FROM suffix WHERE c.last_message_id = suffix.id"
                ),
            },
        ),
        // Restore consumed the suffix's recovery points, and a later plan must never restore to
        // a tombstoned message.
        ("points", CONSUMED_POINTS_SQL.into()),
    ];
    let items: Vec<String> = parts
        .iter()
        .map(|(name, sql)| format!("{name} AS ({sql})"))
        .collect();
    let sql = format!(
        "WITH {}, {} SELECT count(*) FROM suffix",
        suffix_cte(),
        items.join(", ")
    );
    let (scopes, froms) = boundary.ranges();
    let keys: Vec<String> = CONTENT_KEYS.iter().map(|k| (*k).to_owned()).collect();
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(&scopes)
        .bind(&froms)
        .bind(&keys)
        .execute(conn)
        .await
        .db("scrubbing the suffix's facts")?;
    Ok(())
}

/// Stream events lose their content-bearing keys.
const STREAM_SCRUB_SQL: &str =
    "UPDATE im_stream_events e SET payload_json = e.payload_json - $3::text[] \
     FROM suffix WHERE e.message_id = suffix.id";

/// [`Variant::Alternative`]: stream events lose their content-bearing keys and gain the
/// content-free lifecycle marker `"rewound": true`.
const STREAM_SCRUB_MARKED_SQL: &str =
    "UPDATE im_stream_events e SET payload_json = e.payload_json - $3::text[] \
       || jsonb_build_object('rewound', true) \
     FROM suffix WHERE e.message_id = suffix.id";

/// Index rows whose last message is rewound lose their content-bearing keys, and so does their
/// `lastMessage` (which keeps its id).
const INDEX_SCRUB_SQL: &str = "UPDATE im_conversation_index SET \
       projection_json = projection_json - $3::text[] \
         || CASE WHEN projection_json ? 'lastMessage' \
                 THEN jsonb_build_object('lastMessage', (projection_json -> 'lastMessage') - $3::text[]) \
                 ELSE '{}'::jsonb END, \
       updated_at = now() \
     FROM suffix WHERE last_message_id = suffix.id";

/// The recovery points the suffix consumed.
const CONSUMED_POINTS_SQL: &str =
    "DELETE FROM message_recovery_points p USING suffix WHERE p.message_id = suffix.id";
