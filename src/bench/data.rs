//! Set-based generation of benchmark conversations in the spec schema.
//!
//! One workspace (`ws`), two humans (`alice` rewinds, `bob` only reads) and, per scope, two
//! agents of its own (`<scope>-a1` on codex, `<scope>-a2` on claude), so that no agent of one
//! scope has acted in another (a rewind would be refused for cross-scope activity otherwise).
//!
//! A scope of `len` messages: seq `g` is human (alice) when `g % 3 == 1`, else agent-authored.
//! Each message carries the projections a live conversation leaves behind: an activity event,
//! three fanout rows (bob and both agents, in mixed states), a search document, two stream
//! events, and on a share of the messages reactions, sources, attachments, share cards, pins
//! and top notices; every human message holds a recovery point per agent; each human member has
//! a conversation index row pointing at the scope's last message and sync-dirty rows.

use sqlx::{AssertSqlSafe, PgConnection};

/// The human who rewinds.
pub const INITIATOR: &str = "alice";

/// Messages before the rewound suffix in every benchmark scope (the target is seq
/// `PREFIX + 1`, a human message).
pub const PREFIX: i64 = 99;

/// The shared rows: workspace, users, machine.
pub async fn base(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(
        "INSERT INTO workspaces (id, name) VALUES ('ws', 'bench');
         INSERT INTO users (id, workspace_id, display_name) VALUES
           ('alice', 'ws', 'Alice'), ('bob', 'ws', 'Bob');
         INSERT INTO machines (id, workspace_id, name) VALUES ('mach', 'ws', 'machine');",
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Generates `count` scopes named `<prefix><i>` (i from 0) of `len` messages each, their
/// `global_seq` starting after `global_offset` (scope i takes `global_offset + i * len + seq`).
/// Foreign-key triggers are off while it runs (the rows are consistent by construction).
pub async fn scopes(
    conn: &mut PgConnection,
    prefix: &str,
    count: i64,
    len: i64,
    global_offset: i64,
) -> Result<(), sqlx::Error> {
    let sql = GENERATE_SQL
        .replace("{prefix}", &prefix.replace('\'', "''"))
        .replace("{count}", &count.to_string())
        .replace("{len}", &len.to_string())
        .replace("{goff}", &global_offset.to_string());
    sqlx::raw_sql(AssertSqlSafe(sql)).execute(conn).await?;
    Ok(())
}

/// The generation script; `{prefix}`, `{count}`, `{len}` and `{goff}` are substituted.
const GENERATE_SQL: &str = r#"
BEGIN;
SET LOCAL session_replication_role = replica;
CREATE TEMP TABLE gen_scope ON COMMIT DROP AS
  SELECT '{prefix}' || i AS sid, i::bigint AS i FROM generate_series(0, {count} - 1) i;
CREATE TEMP TABLE gen_msg ON COMMIT DROP AS
  SELECT s.sid, s.i, g::bigint AS seq, s.sid || '-m' || g AS mid,
         {goff} + s.i * {len} + g AS gseq,
         CASE WHEN g % 3 = 1 THEN 'human' ELSE 'agent' END AS kind,
         CASE WHEN g % 3 = 2 THEN s.sid || '-a1' WHEN g % 3 = 0 THEN s.sid || '-a2' END AS agent,
         timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second' AS at
  FROM gen_scope s, generate_series(1, {len}) g;
INSERT INTO scopes (id, workspace_id, kind, name, latest_seq, latest_global_seq,
                    latest_message_at, visible_message_count, visible_last_message_at)
  SELECT sid, 'ws', 'channel', sid, {len}, {goff} + i * {len} + {len},
         timestamptz '2024-01-01 00:00:00+00' + {len} * interval '1 second', {len},
         timestamptz '2024-01-01 00:00:00+00' + {len} * interval '1 second'
  FROM gen_scope;
INSERT INTO agents (id, workspace_id, display_name, runtime, machine_id)
  SELECT sid || '-a1', 'ws', 'Codex', 'codex', 'mach' FROM gen_scope
  UNION ALL SELECT sid || '-a2', 'ws', 'Claude', 'claude', 'mach' FROM gen_scope;
INSERT INTO scope_memberships (scope_id, member_kind, user_id, agent_id, last_read_seq,
                               last_read_global_seq, owner_context_dismissed_through_global_seq)
  SELECT sid, 'human', 'alice', NULL, {len}, {goff} + i * {len} + {len}, {goff} + i * {len} + {len} FROM gen_scope
  UNION ALL SELECT sid, 'human', 'bob', NULL, {len} - 1, {goff} + i * {len} + {len} - 1, 0 FROM gen_scope
  UNION ALL SELECT sid, 'agent', NULL, sid || '-a1', {len}, {goff} + i * {len} + {len}, 0 FROM gen_scope
  UNION ALL SELECT sid, 'agent', NULL, sid || '-a2', {len}, {goff} + i * {len} + {len}, 0 FROM gen_scope;
INSERT INTO scope_messages (id, workspace_id, scope_id, seq, global_seq, author_kind,
                            author_user_id, author_agent_id, content, created_at)
  SELECT mid, 'ws', sid, seq, gseq, kind, CASE WHEN kind = 'human' THEN 'alice' END, agent,
         'message ' || seq || ' of ' || sid || ': some words to search for', at
  FROM gen_msg;
INSERT INTO scope_activity_events (scope_id, message_id, kind, status, payload)
  SELECT sid, mid, 'message.created', CASE WHEN seq % 2 = 0 THEN 'pending' ELSE 'consumed' END,
         jsonb_build_object('messageId', mid, 'preview', 'message ' || seq)
  FROM gen_msg;
INSERT INTO scope_fanout_outbox (scope_id, message_id, recipient_kind, recipient_id, status,
                                 payload, leased_until)
  SELECT sid, mid, r.kind, CASE r.k WHEN 0 THEN 'bob' WHEN 1 THEN sid || '-a1' ELSE sid || '-a2' END,
         (ARRAY['pending', 'leased', 'delivered', 'failed'])[1 + (seq + r.k) % 4],
         jsonb_build_object('messageId', mid, 'deliveryPreview', 'message ' || seq),
         CASE WHEN (seq + r.k) % 4 = 1 THEN at + interval '1 hour' END
  FROM gen_msg, (VALUES (0, 'human'), (1, 'agent'), (2, 'agent')) r(k, kind);
INSERT INTO scope_message_search_docs (message_id, scope_id, body, created_at)
  SELECT mid, sid, 'message ' || seq || ' of ' || sid || ': some words to search for', at FROM gen_msg;
INSERT INTO scope_message_reactions (scope_id, message_id, reactor_kind, reactor_id, emoji)
  SELECT sid, mid, 'human', 'alice', '+1' FROM gen_msg WHERE seq % 2 = 0
  UNION ALL SELECT sid, mid, 'human', 'bob', 'eyes' FROM gen_msg WHERE seq % 4 = 0
  UNION ALL SELECT sid, mid, 'agent', agent, 'check' FROM gen_msg WHERE seq % 6 = 5;
INSERT INTO scope_message_pins (scope_id, message_id, pinned_by)
  SELECT sid, mid, 'alice' FROM gen_msg WHERE seq % 100 = 7;
INSERT INTO scope_message_top_notices (scope_id, message_id, set_by)
  SELECT sid, mid, 'bob' FROM gen_msg WHERE seq % 500 = 7;
INSERT INTO scope_share_cards (id, scope_id, message_id, shared_by, action_state)
  SELECT mid || '-card', sid, mid, 'alice', '{"open": true}' FROM gen_msg WHERE seq % 50 = 3;
INSERT INTO scope_message_sources (id, scope_id, message_id, source_message_id, snippet)
  SELECT mid || '-src', sid, mid, sid || '-m' || (seq - 5), 'quoted words'
  FROM gen_msg WHERE seq % 10 = 0 AND seq > 5;
INSERT INTO attachments (id, workspace_id, owner_kind, scope_id, message_id, uploaded_by,
                         file_name, byte_size, storage_key)
  SELECT mid || '-att', 'ws', 'message', sid, mid, 'alice', 'file-' || seq || '.txt', 100,
         'blobs/' || mid
  FROM gen_msg WHERE seq % 5 = 1;
INSERT INTO im_stream_events (workspace_id, scope_id, message_id, event_type, payload_json)
  SELECT 'ws', sid, mid, e.t,
         jsonb_build_object('messageId', mid, 'seq', seq, 'content', 'message ' || seq,
                            'preview', 'message ' || seq, 'mentions', '[]'::jsonb)
  FROM gen_msg, (VALUES ('message.created'), ('message.delivered')) e(t);
INSERT INTO message_recovery_points (id, workspace_id, scope_id, message_id, agent_id, runtime,
                                     strategy, recovery_ref)
  SELECT mid || '-rp1', 'ws', sid, mid, sid || '-a1', 'codex', 'codex_app_server_turns',
         jsonb_build_object('threadId', sid || '-thread', 'turnCount', seq)
  FROM gen_msg WHERE kind = 'human'
  UNION ALL
  SELECT mid || '-rp2', 'ws', sid, mid, sid || '-a2', 'claude', 'claude_session_resume_at',
         jsonb_build_object('sessionId', sid || '-session', 'resumeAt', mid)
  FROM gen_msg WHERE kind = 'human';
INSERT INTO im_conversation_index (scope_id, user_id, last_message_id, projection_json)
  SELECT sid, u, mid, jsonb_build_object(
           'lastMessage', jsonb_build_object('id', mid, 'content', 'message ' || seq,
                                             'preview', 'message ' || seq),
           'preview', 'message ' || seq, 'unreadCount', 1)
  FROM gen_msg, (VALUES ('alice'), ('bob')) u(u) WHERE seq = {len};
INSERT INTO scope_sync_dirty (scope_id, latest_message_seq, latest_activity_seq)
  SELECT sid, {len}, 5 FROM gen_scope;
INSERT INTO member_scope_sync_dirty (scope_id, user_id, latest_message_seq, latest_activity_seq)
  SELECT sid, u, {len}, 5 FROM gen_scope, (VALUES ('alice'), ('bob')) u(u);
UPDATE workspaces SET latest_global_seq = greatest(latest_global_seq, {goff} + {count} * {len})
  WHERE id = 'ws';
COMMIT;
"#;
