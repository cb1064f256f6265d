//! The lower bound: the row changes of a rewind (spec 6.1 to 6.4, recommended reading, a
//! channel without a cascading reply thread) as one set-based statement, and nothing else: no
//! guard, no plan, no row lock beyond what the writes take.
//!
//! Every sub-statement selects the suffix through one materialised set (the target's scope
//! from the target's seq on, visible messages only); the visible tail that the summary and the
//! clamps need is read once, from the messages before the target.

/// `$1` scope, `$2` target message, `$3` initiator, `$4` operation id. Returns the number of
/// messages tombstoned.
pub const BOUND_SQL: &str = r#"
WITH target AS (
  SELECT t.seq, t.workspace_id FROM scope_messages t WHERE t.scope_id = $1 AND t.id = $2
), suffix AS MATERIALIZED (
  SELECT x.id, x.seq FROM scope_messages x JOIN target ON x.seq >= target.seq
  WHERE x.scope_id = $1 AND (x.metadata -> 'messageRecall' ->> 'status') IS DISTINCT FROM 'rewound'
), kept AS MATERIALIZED (
  SELECT count(*)::int AS visible, max(k.created_at) AS last_at,
         coalesce(max(k.seq), 0) AS tail_seq, coalesce(max(k.global_seq), 0) AS tail_gseq
  FROM scope_messages k JOIN target ON k.seq < target.seq
  WHERE k.scope_id = $1 AND (k.metadata -> 'messageRecall' ->> 'status') IS DISTINCT FROM 'rewound'
), content_keys(k) AS (
  SELECT ARRAY['content', 'attachments', 'reactions', 'mentions', 'sources', 'sourceSnippets',
               'deliveryPreview', 'preview']
), activity AS (
  UPDATE scope_activity_events a SET status = 'suppressed'
  FROM suffix WHERE a.message_id = suffix.id AND a.status = 'pending'
), fanout AS (
  UPDATE scope_fanout_outbox f SET status = 'suppressed', leased_until = NULL
  FROM suffix WHERE f.message_id = suffix.id AND f.status IN ('pending', 'leased')
), cards AS (
  DELETE FROM scope_share_cards c USING suffix WHERE c.message_id = suffix.id
), reactions AS (
  DELETE FROM scope_message_reactions r USING suffix WHERE r.message_id = suffix.id
), pins AS (
  DELETE FROM scope_message_pins p USING suffix WHERE p.message_id = suffix.id
), notices AS (
  DELETE FROM scope_message_top_notices n USING suffix WHERE n.message_id = suffix.id
), docs AS (
  DELETE FROM scope_message_search_docs d USING suffix WHERE d.message_id = suffix.id
), citing_sources AS (
  DELETE FROM scope_message_sources o USING suffix WHERE o.message_id = suffix.id
), cited_sources AS (
  DELETE FROM scope_message_sources o USING suffix
  WHERE o.source_message_id = suffix.id
    AND NOT EXISTS (SELECT FROM suffix citing WHERE citing.id = o.message_id)
), files AS (
  DELETE FROM attachments f USING suffix
  WHERE f.message_id = suffix.id AND f.owner_kind = 'message'
), stream AS (
  UPDATE im_stream_events e SET payload_json = e.payload_json - content_keys.k
  FROM content_keys, suffix WHERE e.message_id = suffix.id
), conv_index AS (
  UPDATE im_conversation_index i SET
    projection_json = CASE
      WHEN i.projection_json ? 'lastMessage'
        THEN jsonb_set(i.projection_json - content_keys.k, '{lastMessage}',
                       (i.projection_json -> 'lastMessage') - content_keys.k)
      ELSE i.projection_json - content_keys.k END,
    updated_at = now()
  FROM content_keys, suffix WHERE i.last_message_id = suffix.id
), points AS (
  DELETE FROM message_recovery_points rp USING suffix WHERE rp.message_id = suffix.id
), tombstone AS (
  UPDATE scope_messages m SET content = '',
    metadata = jsonb_build_object('messageRecall', jsonb_build_object(
      'status', 'rewound',
      'rewoundAt', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')))
  FROM target
  WHERE m.scope_id = $1 AND m.seq >= target.seq
    AND (m.metadata -> 'messageRecall' ->> 'status') IS DISTINCT FROM 'rewound'
), summary AS (
  UPDATE scopes s SET visible_message_count = kept.visible, latest_message_at = kept.last_at,
    visible_last_message_at = kept.last_at
  FROM kept WHERE s.id = $1
), cursors AS (
  UPDATE scope_memberships sm SET
    last_read_seq = least(sm.last_read_seq, kept.tail_seq),
    last_read_global_seq = least(sm.last_read_global_seq, kept.tail_gseq),
    owner_context_dismissed_through_global_seq =
      least(sm.owner_context_dismissed_through_global_seq, kept.tail_gseq)
  FROM kept
  WHERE sm.scope_id = $1
    AND (sm.last_read_seq > kept.tail_seq OR sm.last_read_global_seq > kept.tail_gseq
         OR sm.owner_context_dismissed_through_global_seq > kept.tail_gseq)
), dirty AS (
  UPDATE scope_sync_dirty d SET latest_message_seq = kept.tail_seq, updated_at = now()
  FROM kept WHERE d.scope_id = $1 AND d.latest_message_seq > kept.tail_seq
), member_dirty AS (
  UPDATE member_scope_sync_dirty d SET latest_message_seq = kept.tail_seq, updated_at = now()
  FROM kept WHERE d.scope_id = $1 AND d.latest_message_seq > kept.tail_seq
), operation AS (
  INSERT INTO rewind_operations (id, workspace_id, thread_id, target_message_id,
                                 initiator_user_id, status, rewound_message_ids, completed_at)
  SELECT $4, target.workspace_id, $1, $2, $3, 'completed',
         (SELECT array_agg(id ORDER BY seq) FROM suffix), now()
  FROM target
)
SELECT count(*) FROM suffix
"#;
