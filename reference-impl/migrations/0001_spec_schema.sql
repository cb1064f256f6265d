-- The tables the Rewind spec names, with the spec's column names.
--
-- Identifiers are text so that fixture ids (`msg-dm-3`) are the database ids and every diff the
-- harness prints reads in the fixture's own words. Timestamps are timestamptz.

CREATE TABLE workspaces (
    id                text PRIMARY KEY,
    name              text NOT NULL,
    -- workspace-wide message counter; scope_messages.global_seq draws from it
    latest_global_seq bigint NOT NULL DEFAULT 0 CHECK (latest_global_seq >= 0),
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
    id           text PRIMARY KEY,
    workspace_id text NOT NULL REFERENCES workspaces (id),
    display_name text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE machines (
    id           text PRIMARY KEY,
    workspace_id text NOT NULL REFERENCES workspaces (id),
    name         text NOT NULL,
    deleted_at   timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE agents (
    id           text PRIMARY KEY,
    workspace_id text NOT NULL REFERENCES workspaces (id),
    display_name text NOT NULL,
    -- runtime id: codex, claude, opencode, builtin (never a recovery strategy name)
    runtime      text NOT NULL,
    machine_id   text REFERENCES machines (id),
    -- the runtime's native session/thread for this agent, when it has one
    runtime_session_id text,
    deleted_at   timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE scopes (
    id                      text PRIMARY KEY,
    workspace_id            text NOT NULL REFERENCES workspaces (id),
    kind                    text NOT NULL CHECK (kind IN ('dm', 'channel', 'reply_thread')),
    name                    text NOT NULL DEFAULT '',
    -- reply threads only: the scope and message they fork from
    parent_scope_id         text REFERENCES scopes (id),
    parent_message_id       text,
    archived_at             timestamptz,
    -- physical high-water marks: never lowered, so a new message never reuses a rewound seq
    latest_seq              bigint NOT NULL DEFAULT 0 CHECK (latest_seq >= 0),
    latest_global_seq       bigint NOT NULL DEFAULT 0 CHECK (latest_global_seq >= 0),
    -- visible summary: human-visible, non-rewound messages only
    latest_message_at       timestamptz,
    visible_message_count   integer NOT NULL DEFAULT 0 CHECK (visible_message_count >= 0),
    visible_last_message_at timestamptz,
    created_at              timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'reply_thread') = (parent_scope_id IS NOT NULL)),
    CHECK ((kind = 'reply_thread') = (parent_message_id IS NOT NULL))
);
CREATE INDEX scopes_workspace_idx ON scopes (workspace_id);
CREATE INDEX scopes_parent_message_idx ON scopes (parent_message_id) WHERE parent_message_id IS NOT NULL;

CREATE TABLE scope_messages (
    id                text PRIMARY KEY,
    workspace_id      text NOT NULL REFERENCES workspaces (id),
    scope_id          text NOT NULL REFERENCES scopes (id),
    seq               bigint NOT NULL CHECK (seq >= 1),
    global_seq        bigint NOT NULL CHECK (global_seq >= 1),
    author_kind       text NOT NULL CHECK (author_kind IN ('human', 'agent', 'system', 'service', 'app')),
    author_user_id    text REFERENCES users (id),
    author_agent_id   text REFERENCES agents (id),
    content           text NOT NULL,
    -- lifecycle lives here: metadata.messageRecall.status = 'recalled' | 'rewound'
    metadata          jsonb NOT NULL DEFAULT '{}'::jsonb,
    client_message_id text,
    -- 'hot': live scope history; 'cold': moved behind the archive boundary
    storage_tier      text NOT NULL DEFAULT 'hot' CHECK (storage_tier IN ('hot', 'cold')),
    -- reply-thread summary, for a message that has a reply thread
    reply_count       integer NOT NULL DEFAULT 0 CHECK (reply_count >= 0),
    last_reply_at     timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (scope_id, seq),
    UNIQUE (workspace_id, global_seq),
    CHECK ((author_kind = 'human') = (author_user_id IS NOT NULL)),
    CHECK ((author_kind = 'agent') = (author_agent_id IS NOT NULL))
);
CREATE UNIQUE INDEX scope_messages_client_id_idx ON scope_messages (scope_id, client_message_id)
    WHERE client_message_id IS NOT NULL;

ALTER TABLE scopes ADD CONSTRAINT scopes_parent_message_fk
    FOREIGN KEY (parent_message_id) REFERENCES scope_messages (id);

CREATE TABLE scope_memberships (
    id                                        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope_id                                  text NOT NULL REFERENCES scopes (id),
    member_kind                               text NOT NULL CHECK (member_kind IN ('human', 'agent')),
    user_id                                   text REFERENCES users (id),
    agent_id                                  text REFERENCES agents (id),
    role                                      text NOT NULL DEFAULT 'member',
    last_read_seq                             bigint NOT NULL DEFAULT 0 CHECK (last_read_seq >= 0),
    last_read_global_seq                      bigint NOT NULL DEFAULT 0 CHECK (last_read_global_seq >= 0),
    owner_context_dismissed_through_global_seq bigint NOT NULL DEFAULT 0,
    created_at                                timestamptz NOT NULL DEFAULT now(),
    CHECK ((member_kind = 'human') = (user_id IS NOT NULL)),
    CHECK ((member_kind = 'agent') = (agent_id IS NOT NULL))
);
CREATE UNIQUE INDEX scope_memberships_user_idx ON scope_memberships (scope_id, user_id) WHERE user_id IS NOT NULL;
CREATE UNIQUE INDEX scope_memberships_agent_idx ON scope_memberships (scope_id, agent_id) WHERE agent_id IS NOT NULL;

CREATE TABLE scope_private_grants (
    scope_id   text NOT NULL REFERENCES scopes (id),
    user_id    text NOT NULL REFERENCES users (id),
    grant_kind text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope_id, user_id, grant_kind)
);

CREATE TABLE scope_activity_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope_id    text NOT NULL REFERENCES scopes (id),
    message_id  text REFERENCES scope_messages (id),
    kind        text NOT NULL,
    status      text NOT NULL CHECK (status IN ('pending', 'consumed', 'suppressed')),
    payload     jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX scope_activity_events_message_idx ON scope_activity_events (message_id);

CREATE TABLE scope_fanout_outbox (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope_id       text NOT NULL REFERENCES scopes (id),
    message_id     text REFERENCES scope_messages (id),
    recipient_kind text NOT NULL CHECK (recipient_kind IN ('human', 'agent')),
    recipient_id   text NOT NULL,
    status         text NOT NULL CHECK (status IN ('pending', 'leased', 'delivered', 'failed', 'suppressed')),
    payload        jsonb NOT NULL DEFAULT '{}'::jsonb,
    leased_until   timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX scope_fanout_outbox_message_idx ON scope_fanout_outbox (message_id);

CREATE TABLE scope_sync_dirty (
    scope_id            text PRIMARY KEY REFERENCES scopes (id),
    latest_message_seq  bigint NOT NULL DEFAULT 0 CHECK (latest_message_seq >= 0),
    -- non-message frontier (reactions, pins, membership changes): rewind keeps it
    latest_activity_seq bigint NOT NULL DEFAULT 0 CHECK (latest_activity_seq >= 0),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE member_scope_sync_dirty (
    scope_id            text NOT NULL REFERENCES scopes (id),
    user_id             text NOT NULL REFERENCES users (id),
    latest_message_seq  bigint NOT NULL DEFAULT 0 CHECK (latest_message_seq >= 0),
    latest_activity_seq bigint NOT NULL DEFAULT 0 CHECK (latest_activity_seq >= 0),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope_id, user_id)
);

CREATE TABLE scope_share_cards (
    id              text PRIMARY KEY,
    scope_id        text NOT NULL REFERENCES scopes (id),
    message_id      text NOT NULL REFERENCES scope_messages (id),
    target_scope_id text REFERENCES scopes (id),
    shared_by       text REFERENCES users (id),
    action_state    jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX scope_share_cards_message_idx ON scope_share_cards (message_id);

CREATE TABLE scope_message_reactions (
    scope_id     text NOT NULL REFERENCES scopes (id),
    message_id   text NOT NULL REFERENCES scope_messages (id),
    reactor_kind text NOT NULL CHECK (reactor_kind IN ('human', 'agent')),
    reactor_id   text NOT NULL,
    emoji        text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (message_id, reactor_kind, reactor_id, emoji)
);

CREATE TABLE scope_message_pins (
    scope_id   text NOT NULL REFERENCES scopes (id),
    message_id text NOT NULL REFERENCES scope_messages (id),
    pinned_by  text REFERENCES users (id),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope_id, message_id)
);

CREATE TABLE scope_message_top_notices (
    scope_id   text NOT NULL REFERENCES scopes (id),
    message_id text NOT NULL REFERENCES scope_messages (id),
    set_by     text REFERENCES users (id),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope_id, message_id)
);

CREATE TABLE scope_message_search_docs (
    message_id text PRIMARY KEY REFERENCES scope_messages (id),
    scope_id   text NOT NULL REFERENCES scopes (id),
    body       text NOT NULL,
    body_tsv   tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX scope_message_search_docs_scope_idx ON scope_message_search_docs (scope_id);
CREATE INDEX scope_message_search_docs_tsv_idx ON scope_message_search_docs USING gin (body_tsv);

-- message_id cites source_message_id; a suffix message on either side is scrubbed
CREATE TABLE scope_message_sources (
    id                text PRIMARY KEY,
    scope_id          text NOT NULL REFERENCES scopes (id),
    message_id        text NOT NULL REFERENCES scope_messages (id),
    source_message_id text NOT NULL REFERENCES scope_messages (id),
    snippet           text NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX scope_message_sources_message_idx ON scope_message_sources (message_id);
CREATE INDEX scope_message_sources_source_idx ON scope_message_sources (source_message_id);

CREATE TABLE attachments (
    id           text PRIMARY KEY,
    workspace_id text NOT NULL REFERENCES workspaces (id),
    -- 'message': bound to message_id; 'task_discussion': bound to task_id; 'upload': not yet claimed
    owner_kind   text NOT NULL CHECK (owner_kind IN ('message', 'task_discussion', 'upload')),
    scope_id     text REFERENCES scopes (id),
    message_id   text REFERENCES scope_messages (id),
    task_id      text,
    uploaded_by  text REFERENCES users (id),
    file_name    text NOT NULL,
    content_type text NOT NULL DEFAULT 'application/octet-stream',
    byte_size    bigint NOT NULL DEFAULT 0 CHECK (byte_size >= 0),
    storage_key  text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CHECK ((owner_kind = 'message') = (message_id IS NOT NULL)),
    CHECK ((owner_kind = 'task_discussion') = (task_id IS NOT NULL))
);
CREATE INDEX attachments_message_idx ON attachments (message_id) WHERE message_id IS NOT NULL;

CREATE TABLE im_stream_events (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace_id text NOT NULL REFERENCES workspaces (id),
    scope_id     text NOT NULL REFERENCES scopes (id),
    message_id   text REFERENCES scope_messages (id),
    event_type   text NOT NULL,
    payload_json jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX im_stream_events_message_idx ON im_stream_events (message_id);
CREATE INDEX im_stream_events_scope_idx ON im_stream_events (scope_id, id);

CREATE TABLE im_conversation_index (
    scope_id        text NOT NULL REFERENCES scopes (id),
    user_id         text NOT NULL REFERENCES users (id),
    last_message_id text REFERENCES scope_messages (id),
    projection_json jsonb NOT NULL DEFAULT '{}'::jsonb,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope_id, user_id)
);

CREATE TABLE message_recovery_points (
    id           text PRIMARY KEY,
    workspace_id text NOT NULL REFERENCES workspaces (id),
    scope_id     text NOT NULL REFERENCES scopes (id),
    message_id   text NOT NULL REFERENCES scope_messages (id),
    agent_id     text NOT NULL REFERENCES agents (id),
    runtime      text NOT NULL,
    strategy     text NOT NULL,
    recovery_ref jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (message_id, agent_id)
);
CREATE INDEX message_recovery_points_agent_idx ON message_recovery_points (agent_id);

CREATE TABLE rewind_operations (
    id                  text PRIMARY KEY,
    workspace_id        text NOT NULL REFERENCES workspaces (id),
    -- historical column name: holds the primary rewind scope id, never a parent/broadcast scope
    thread_id           text NOT NULL REFERENCES scopes (id),
    target_message_id   text NOT NULL REFERENCES scope_messages (id),
    initiator_user_id   text NOT NULL REFERENCES users (id),
    status              text NOT NULL CHECK (status IN ('preparing', 'completed', 'failed', 'repair_required')),
    plan                jsonb NOT NULL DEFAULT '{}'::jsonb,
    rewound_message_ids text[] NOT NULL DEFAULT '{}',
    error_code          text,
    error_message       text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    completed_at        timestamptz
);
-- only one active (preparing) operation per primary scope
CREATE UNIQUE INDEX rewind_operations_one_preparing_idx ON rewind_operations (thread_id)
    WHERE status = 'preparing';
CREATE INDEX rewind_operations_thread_idx ON rewind_operations (thread_id, created_at);

-- Lookups a rewind makes that no key above serves once a workspace has many scopes: the pins
-- and top notices of a message (their keys lead with the scope), the conversation index rows
-- whose last message is rewound, the read state of a scope (the unique membership indexes are
-- partial), and an agent's activity after its recovery point (authored messages, deliveries).
CREATE INDEX scope_message_pins_message_idx ON scope_message_pins (message_id);
CREATE INDEX scope_message_top_notices_message_idx ON scope_message_top_notices (message_id);
CREATE INDEX im_conversation_index_last_message_idx ON im_conversation_index (last_message_id)
    WHERE last_message_id IS NOT NULL;
CREATE INDEX scope_memberships_scope_idx ON scope_memberships (scope_id);
CREATE INDEX scope_messages_agent_idx ON scope_messages (author_agent_id, global_seq)
    WHERE author_agent_id IS NOT NULL;
CREATE INDEX scope_fanout_outbox_agent_idx ON scope_fanout_outbox (recipient_id)
    WHERE recipient_kind = 'agent';
