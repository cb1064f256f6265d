"""An implementation of the AgentTeam conversation Rewind spec on PostgreSQL (psycopg 3).

It works directly on the spec schema (the harness's `0001_spec_schema.sql`) and supports no agent
runtime: any rewind whose suffix reaches an agent is refused before anything is written. Section
numbers (§) refer to the Rewind spec (`rewind.md`).

The public entry points are `Session` (one per attached scenario) and the functions `rewind`,
`send_message`, `prune_recovery_points`, `read_state`, `sync_messages`, `read` (the read surfaces
of §1); `adapter.py` maps the driver protocol's HTTP endpoints onto them.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone

import psycopg
from psycopg import errors, pq
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

# The lifecycle gate (§1): a row whose `metadata.messageRecall.status` is `rewound` does not exist
# for any read path. `recalled` placeholders stay visible.
NOT_REWOUND = "coalesce(m.metadata #>> '{messageRecall,status}', '') <> 'rewound'"
# The rewind notice (§8) is a visible system message, but not ordinary unread and not a reply.
IS_NOTICE = "coalesce(starts_with(m.client_message_id, 'rewind-notice:'), false)"
NOTICE_PREFIX = "rewind-notice:"

# Keys of a durable IM projection (`im_stream_events.payload_json`,
# `im_conversation_index.projection_json`) that can carry message content (§6.1): content,
# attachments, reactions, mentions, source snippets and delivery previews.
CONTENT_KEYS = frozenset({
    "content", "body", "text", "excerpt", "preview", "deliveryPreview", "snippet", "snippets",
    "attachments", "reactions", "mentions", "sources",
})


# --- Refusals (§9) and driver errors ---------------------------------------------------------

class Refusal(Exception):
    """A spec refusal: answered with status 200 and `outcome: refused`."""

    def __init__(self, code: str, message: str, operation_id: str | None = None):
        super().__init__(message)
        self.code, self.message, self.operation_id = code, message, operation_id


# Section 9's wording, with the stable codes of the rule catalog.
NOT_OWN_MESSAGE = ("not_own_human_message", "message must be your own human-authored message")
SYSTEM_TARGET = ("system_message_target", "system messages cannot be rewound")
HOT_COLD = ("crosses_hot_cold_boundary", "rewind would cross the hot/cold boundary")
OTHER_HUMAN = ("other_human_message",
               "rewind is blocked because another human sent a later message")
LATER_THREAD = ("later_reply_thread",
                "rewind is blocked because a later message has a reply thread")
AGENT_UNSUPPORTED = ("agent_runtime_unsupported",
                     "rewind is blocked because a related agent does not support rewind")
DRIFT = ("suffix_drift", "rewind is blocked because newer activity changed the conversation")
IN_PROGRESS = ("rewind_in_progress", "another rewind is already in progress")
# Refusals the spec requires but does not word.
NOT_HUMAN = ("initiator_not_human", "only a human can rewind a conversation")
NOT_FOUND = ("target_not_found", "message not found in this conversation")
NOT_VISIBLE = ("target_not_visible", "message is no longer visible")


class DriverError(Exception):
    """A failure outside the rewind contract, answered with a non-2xx status."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


# --- Sessions ----------------------------------------------------------------------------------

class Session:
    """One attached scenario: a small connection pool on its database and its published events."""

    def __init__(self, database_url: str, request_timeout_ms: int):
        self._url = database_url
        self._idle: list[psycopg.Connection] = []
        self._lock = threading.Lock()
        self._events: list[dict] = []
        self._closed = False
        # The apply waits for the scope's row lock (§7), but never longer than the caller does.
        self.lock_timeout_ms = max(1000, request_timeout_ms * 2 // 3)
        try:
            with self.connection():
                pass
        except psycopg.OperationalError as e:
            raise DriverError(503, "database_unreachable", f"cannot connect: {e}") from e

    @contextmanager
    def connection(self):
        """An autocommit connection; transactions are explicit (`with conn.transaction()`)."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = psycopg.connect(self._url, autocommit=True, row_factory=dict_row,
                                   connect_timeout=10, application_name="rewind-python-example")
        try:
            yield conn
        finally:
            with self._lock:
                reusable = not self._closed and not conn.closed \
                    and conn.info.transaction_status == pq.TransactionStatus.IDLE
                if reusable:
                    self._idle.append(conn)
            if not reusable:
                conn.close()

    def publish(self, name: str, scope_id: str, payload: dict) -> None:
        with self._lock:
            self._events.append({"name": name, "scopeId": scope_id, "payload": payload})

    def take_events(self) -> list[dict]:
        with self._lock:
            events, self._events = self._events, []
        return events

    def close(self) -> None:
        """Closes every connection (those in use when they are handed back), so that the
        harness can drop the database."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


# --- The rewind plan (§2.1) --------------------------------------------------------------------

@dataclass(frozen=True)
class Boundary:
    """A scope-local suffix to tombstone: `message_ids` in seq order from `from_seq`."""
    scope_id: str
    from_seq: int
    message_ids: tuple[str, ...]
    parent_message_id: str | None = None  # cascade boundaries only

    def as_json(self) -> dict:
        out = {"scopeId": self.scope_id, "fromSeq": self.from_seq,
               "messageIds": list(self.message_ids)}
        if self.parent_message_id is not None:
            out["parentMessageId"] = self.parent_message_id
        return out


@dataclass(frozen=True)
class Plan:
    workspace_id: str
    initiator_user_id: str
    target_message_id: str
    primary: Boundary                 # ScopeID: the primary tombstone scope (also OperationScopeID)
    cascades: tuple[Boundary, ...]    # cascade reply-thread scopes (§4)
    broadcast_scope_id: str           # BroadcastScopeID: gets `conversation:rewound`
    thread_parent_message_id: str | None  # when the primary scope is a reply thread
    related_agent_ids: tuple[str, ...] = field(default=())

    @property
    def boundaries(self) -> tuple[Boundary, ...]:
        return (self.primary, *self.cascades)

    @property
    def message_ids(self) -> list[str]:
        return [m for b in self.boundaries for m in b.message_ids]

    @property
    def tombstone_scope_ids(self) -> list[str]:
        return [b.scope_id for b in self.boundaries]

    def as_json(self) -> dict:
        return {"workspaceId": self.workspace_id, "targetMessageId": self.target_message_id,
                "scopeId": self.primary.scope_id, "operationScopeId": self.primary.scope_id,
                "broadcastScopeId": self.broadcast_scope_id,
                "primary": self.primary.as_json(),
                "cascades": [b.as_json() for b in self.cascades],
                "relatedAgentIds": list(self.related_agent_ids)}


def _one(conn, sql: str, *params):
    return conn.execute(sql, params).fetchone()


def _all(conn, sql: str, *params) -> list[dict]:
    return conn.execute(sql, params).fetchall()


def _visible_messages(conn, scope_id: str, from_seq: int) -> list[dict]:
    """The scope's non-rewound messages from `from_seq` on, in seq order (the suffix, §2.1)."""
    return _all(conn, f"""
        SELECT id, seq, author_kind, author_user_id, storage_tier FROM scope_messages m
        WHERE m.scope_id = %s AND m.seq >= %s AND {NOT_REWOUND} ORDER BY m.seq""",
                scope_id, from_seq)


def _guard_suffix(messages: list[dict], initiator: str) -> None:
    for m in messages:
        if m["storage_tier"] != "hot":                       # §3: never cross hot/cold
            raise Refusal(*HOT_COLD)
        if m["author_kind"] == "human" and m["author_user_id"] != initiator:
            raise Refusal(*OTHER_HUMAN)                      # §3 other-human guard, §4 cascade


def build_plan(conn, initiator: str, scope_id: str, target_id: str) -> Plan:
    """Builds the suffix and runs the initiation and reply-thread guards (§3, §4).

    Only plain reads: a rewind parked on the scope's row lock must not block this one."""
    scope = _one(conn, "SELECT * FROM scopes WHERE id = %s", scope_id)
    target = _one(conn, "SELECT * FROM scope_messages WHERE id = %s", target_id)
    if scope is None or target is None or target["scope_id"] != scope_id:
        raise Refusal(*NOT_FOUND)
    if (target["metadata"].get("messageRecall") or {}).get("status") == "rewound" \
            or scope["archived_at"] is not None:
        raise Refusal(*NOT_VISIBLE)
    if target["author_kind"] in ("system", "service", "app"):
        raise Refusal(*SYSTEM_TARGET)
    if target["author_kind"] != "human" or target["author_user_id"] != initiator:
        raise Refusal(*NOT_OWN_MESSAGE)
    if target["storage_tier"] != "hot":
        raise Refusal(*HOT_COLD)

    suffix = _visible_messages(conn, scope_id, target["seq"])
    _guard_suffix(suffix, initiator)
    suffix_ids = [m["id"] for m in suffix]

    # §4: a live reply thread may fork only from the suffix's last main-line message; that
    # thread is then rewound with it, from seq 1, as a cascade scope.
    forks = _all(conn, """
        SELECT id, parent_message_id FROM scopes
        WHERE kind = 'reply_thread' AND archived_at IS NULL AND parent_message_id = ANY(%s)
        ORDER BY id""", suffix_ids)
    if any(f["parent_message_id"] != suffix_ids[-1] for f in forks):
        raise Refusal(*LATER_THREAD)
    cascades = []
    for fork in forks:
        child = _visible_messages(conn, fork["id"], 1)
        _guard_suffix(child, initiator)
        cascades.append(Boundary(fork["id"], 1, tuple(m["id"] for m in child),
                                 parent_message_id=fork["parent_message_id"]))

    primary = Boundary(scope_id, target["seq"], tuple(suffix_ids))
    all_ids = suffix_ids + [m for b in cascades for m in b.message_ids]
    is_thread = scope["kind"] == "reply_thread"
    return Plan(
        workspace_id=target["workspace_id"], initiator_user_id=initiator,
        target_message_id=target_id, primary=primary, cascades=tuple(cascades),
        broadcast_scope_id=scope["parent_scope_id"] if is_thread else scope_id,
        thread_parent_message_id=scope["parent_message_id"] if is_thread else None,
        related_agent_ids=tuple(_related_agents(conn, all_ids)))


def _related_agents(conn, message_ids: list[str]) -> list[str]:
    """Agents the suffix reached (§5 step 2): its authors, its fanout recipients and the holders
    of recovery points on it."""
    rows = conn.execute("""
        SELECT author_agent_id AS id FROM scope_messages
            WHERE id = ANY(%(ids)s) AND author_agent_id IS NOT NULL
        UNION SELECT recipient_id FROM scope_fanout_outbox
            WHERE message_id = ANY(%(ids)s) AND recipient_kind = 'agent'
        UNION SELECT agent_id FROM message_recovery_points WHERE message_id = ANY(%(ids)s)
        ORDER BY 1""", {"ids": message_ids}).fetchall()
    return [r["id"] for r in rows]


def _check_runtimes(plan: Plan) -> None:
    """§3 / §5 step 3: every related agent needs a rewind-capable runtime. This implementation
    restores no runtime, so any related agent refuses the rewind before anything is written.
    (An implementation with runtimes would validate recovery points, agent availability and
    out-of-scope activity here, then restore and verify each agent natively, §5 steps 3-5.)"""
    if plan.related_agent_ids:
        raise Refusal(*AGENT_UNSUPPORTED)


# --- Rewind ------------------------------------------------------------------------------------

def rewind(session: Session, actor: dict, scope_id: str, target_message_id: str) -> dict:
    """The whole rewind of §5: plan and guards, the durable operation, the apply transaction
    (§6), then the post-commit invalidation and notice (§8). Raises `Refusal`."""
    kind, initiator = _actor(actor)
    if kind != "human":                                     # §3: only humans initiate
        raise Refusal(*NOT_HUMAN)
    with session.connection() as conn:
        with conn.transaction():                            # one consistent, read-only view
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            plan = build_plan(conn, initiator, scope_id, target_message_id)
            _check_runtimes(plan)
        operation_id = _start_operation(conn, plan)
        try:
            _apply(conn, session, plan, operation_id)
        except Exception as e:
            # §6.4/§7: nothing was restored, so a failed apply leaves a `failed` operation
            # (the transaction rolled back: no half tombstone).
            refusal = e if isinstance(e, Refusal) else \
                Refusal("apply_failed", f"rewind failed: {e}")
            with session.connection() as fresh:
                fresh.execute("""
                    UPDATE rewind_operations SET status = 'failed', error_code = %s,
                           error_message = %s, updated_at = now()
                    WHERE id = %s AND status = 'preparing'""",
                              (refusal.code, refusal.message, operation_id))
            refusal.operation_id = operation_id
            raise refusal from None
        # §8, after the commit: a coarse invalidation (ids only, never suffix content) ...
        session.publish("conversation:rewound", plan.broadcast_scope_id,
                        {"scopeId": plan.primary.scope_id, "operationId": operation_id})
        # ... and the system notice in the primary scope.
        _post_notice(conn, session, plan, operation_id)
    return {"outcome": "completed", "operationId": operation_id, "status": "completed",
            "rewoundMessageIds": plan.message_ids}


def _actor(actor) -> tuple[str, str | None]:
    """The protocol's actor: `{"kind": "human" | "agent", "id": ...}` or `{"kind": "system"}`."""
    kind = actor.get("kind") if isinstance(actor, dict) else None
    if kind not in ("human", "agent", "system") or (kind != "system" and not actor.get("id")):
        raise DriverError(400, "bad_request", f"malformed actor {actor!r}")
    return kind, actor.get("id")


def _start_operation(conn, plan: Plan) -> str:
    """Persists the plan as a `preparing` operation (§6.4). The partial unique index on
    `thread_id` (the primary scope) makes a second active rewind fail at once, without waiting."""
    operation_id = f"rwop-{uuid.uuid4().hex}"
    try:
        conn.execute("""
            INSERT INTO rewind_operations
                (id, workspace_id, thread_id, target_message_id, initiator_user_id, status, plan)
            VALUES (%s, %s, %s, %s, %s, 'preparing', %s)""",
                     (operation_id, plan.workspace_id, plan.primary.scope_id,
                      plan.target_message_id, plan.initiator_user_id, Jsonb(plan.as_json())))
    except errors.UniqueViolation:
        raise Refusal(*IN_PROGRESS) from None
    return operation_id


def _apply(conn, session: Session, plan: Plan, operation_id: str) -> None:
    """ApplyRewind (§6): one transaction that locks the scopes, re-validates the suffix, scrubs
    every projection, tombstones the transcript last, recomputes and completes the operation."""
    ids, scopes = plan.message_ids, plan.tombstone_scope_ids
    with conn.transaction():
        conn.execute(f"SET LOCAL lock_timeout = {int(session.lock_timeout_ms)}")
        # §7: lock the scopes' stats and read-state rows (this is where a racing writer waits).
        conn.execute("SELECT id FROM scopes WHERE id = ANY(%s) ORDER BY id FOR UPDATE", (scopes,))
        conn.execute("SELECT id FROM scope_memberships WHERE scope_id = ANY(%s) ORDER BY id "
                     "FOR UPDATE", (scopes,))
        # §7: re-validate under the lock; any change to the suffix is drift.
        try:
            fresh = build_plan(conn, plan.initiator_user_id, plan.primary.scope_id,
                               plan.target_message_id)
        except Refusal:
            raise Refusal(*DRIFT) from None
        if fresh != plan:
            raise Refusal(*DRIFT)

        _scrub_projections(conn, ids)
        # §6.3: archive cascaded reply threads so the parent's thread entry disappears.
        conn.execute("UPDATE scopes SET archived_at = now() WHERE id = ANY(%s)",
                     ([b.scope_id for b in plan.cascades],))
        # §6.1: the transcript tombstone, last of all suffix writes.
        rewound_at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        conn.execute("""
            UPDATE scope_messages SET content = '', metadata = jsonb_build_object(
                'messageRecall', jsonb_build_object('status', 'rewound', 'rewoundAt', %s::text))
            WHERE id = ANY(%s)""", (rewound_at, ids))
        # §6.2 / §6.3: recompute summaries, clamp cursors and sync-dirty frontiers.
        _recompute_scope_summaries(conn, scopes)
        parents = [b.parent_message_id for b in plan.cascades]
        if plan.thread_parent_message_id:
            parents.append(plan.thread_parent_message_id)
        _recompute_reply_summaries(conn, parents)
        _clamp_to_visible_tail(conn, scopes)
        conn.execute("""
            UPDATE rewind_operations SET status = 'completed', rewound_message_ids = %s,
                   updated_at = now(), completed_at = now()
            WHERE id = %s""", (ids, operation_id))


def _scrub_projections(conn, ids: list[str]) -> None:
    """§6.1: suppress or scrub every delivery fact and projection of the suffix messages."""
    for sql in (
        # unconsumed activity and unfinished fanout are suppressed; delivered history stays
        "UPDATE scope_activity_events SET status = 'suppressed' "
        "WHERE message_id = ANY(%(ids)s) AND status = 'pending'",
        "UPDATE scope_fanout_outbox SET status = 'suppressed' "
        "WHERE message_id = ANY(%(ids)s) AND status IN ('pending', 'leased')",
        "DELETE FROM scope_share_cards WHERE message_id = ANY(%(ids)s)",
        "DELETE FROM scope_message_reactions WHERE message_id = ANY(%(ids)s)",
        "DELETE FROM scope_message_pins WHERE message_id = ANY(%(ids)s)",
        "DELETE FROM scope_message_top_notices WHERE message_id = ANY(%(ids)s)",
        "DELETE FROM scope_message_search_docs WHERE message_id = ANY(%(ids)s)",
        # a suffix message as the citing or the cited side
        "DELETE FROM scope_message_sources "
        "WHERE message_id = ANY(%(ids)s) OR source_message_id = ANY(%(ids)s)",
        # only message-bound attachments: task discussion files and uploads are not the suffix's
        "DELETE FROM attachments WHERE owner_kind = 'message' AND message_id = ANY(%(ids)s)",
        # consumed restore refs must not serve a future plan
        "DELETE FROM message_recovery_points WHERE message_id = ANY(%(ids)s)",
    ):
        conn.execute(sql, {"ids": ids})

    # Durable IM projections of a suffix message lose every content-bearing key, and any other
    # string that quotes a suffix message's text.
    contents = [r["content"] for r in _all(
        conn, "SELECT content FROM scope_messages WHERE id = ANY(%s) AND content <> ''", ids)]
    for row in _all(conn, "SELECT id, payload_json FROM im_stream_events "
                          "WHERE message_id = ANY(%s)", ids):
        conn.execute("UPDATE im_stream_events SET payload_json = %s WHERE id = %s",
                     (Jsonb(_scrub_doc(row["payload_json"], contents)), row["id"]))
    for row in _all(conn, "SELECT scope_id, user_id, projection_json FROM im_conversation_index "
                          "WHERE last_message_id = ANY(%s)", ids):
        conn.execute("UPDATE im_conversation_index SET projection_json = %s, updated_at = now() "
                     "WHERE scope_id = %s AND user_id = %s",
                     (Jsonb(_scrub_doc(row["projection_json"], contents)), row["scope_id"],
                      row["user_id"]))


def _scrub_doc(value, contents: list[str]):
    """A projection document without content-bearing keys or strings quoting `contents`."""
    def keep(key, v) -> bool:
        quotes = isinstance(v, str) and any(c in v for c in contents)
        return key not in CONTENT_KEYS and not quotes

    if isinstance(value, dict):
        return {k: _scrub_doc(v, contents) for k, v in value.items() if keep(k, v)}
    if isinstance(value, list):
        return [_scrub_doc(v, contents) for v in value if keep(None, v)]
    return value


def _recompute_scope_summaries(conn, scope_ids: list[str]) -> None:
    """§6.2: the visible summary counts non-rewound messages only; `latest_seq` and
    `latest_global_seq` are physical high-water marks and are left alone."""
    conn.execute(f"""
        UPDATE scopes s SET visible_message_count = v.n, latest_message_at = v.last_at,
                            visible_last_message_at = v.last_at
        FROM (SELECT s2.id, count(m.id)::int AS n, max(m.created_at) AS last_at
              FROM scopes s2 LEFT JOIN scope_messages m ON m.scope_id = s2.id AND {NOT_REWOUND}
              WHERE s2.id = ANY(%s) GROUP BY s2.id) v
        WHERE s.id = v.id""", (scope_ids,))


def _recompute_reply_summaries(conn, parent_message_ids: list[str]) -> None:
    """§6.2/§6.3: a parent message's reply summary counts the visible replies of its live reply
    threads (an archived cascade thread counts none; rewind notices are not replies)."""
    if not parent_message_ids:
        return
    conn.execute(f"""
        UPDATE scope_messages p SET reply_count = v.n, last_reply_at = v.last_at
        FROM (SELECT p2.id, count(m.id)::int AS n, max(m.created_at) AS last_at
              FROM scope_messages p2
              LEFT JOIN scopes t ON t.parent_message_id = p2.id AND t.archived_at IS NULL
              LEFT JOIN scope_messages m ON m.scope_id = t.id AND {NOT_REWOUND} AND NOT {IS_NOTICE}
              WHERE p2.id = ANY(%s) GROUP BY p2.id) v
        WHERE p.id = v.id AND (p.reply_count, p.last_reply_at) IS DISTINCT FROM (v.n, v.last_at)""",
                 (parent_message_ids,))


def _clamp_to_visible_tail(conn, scope_ids: list[str]) -> None:
    """§6.1/§6.2: no read or dismiss cursor and no sync-dirty message frontier may stay past the
    post-rewind visible tail; lower values (messages still unsynced or unread) are kept, and the
    non-message activity frontier is never touched."""
    tail = f"""(SELECT s.id AS scope_id, coalesce(max(m.seq), 0) AS seq,
                       coalesce(max(m.global_seq), 0) AS gseq
                FROM scopes s LEFT JOIN scope_messages m ON m.scope_id = s.id AND {NOT_REWOUND}
                WHERE s.id = ANY(%(scopes)s) GROUP BY s.id) t"""
    conn.execute(f"""
        UPDATE scope_memberships sm SET
            last_read_seq = least(sm.last_read_seq, t.seq),
            last_read_global_seq = least(sm.last_read_global_seq, t.gseq),
            owner_context_dismissed_through_global_seq =
                least(sm.owner_context_dismissed_through_global_seq, t.gseq)
        FROM {tail}
        WHERE sm.scope_id = t.scope_id AND (sm.last_read_seq > t.seq
            OR sm.last_read_global_seq > t.gseq
            OR sm.owner_context_dismissed_through_global_seq > t.gseq)""", {"scopes": scope_ids})
    for table in ("scope_sync_dirty", "member_scope_sync_dirty"):
        conn.execute(f"""
            UPDATE {table} d SET latest_message_seq = t.seq, updated_at = now() FROM {tail}
            WHERE d.scope_id = t.scope_id AND d.latest_message_seq > t.seq""",
                     {"scopes": scope_ids})


def _post_notice(conn, session: Session, plan: Plan, operation_id: str) -> None:
    """§8: one human-visible `system` message in the primary scope, written idempotently under
    the client message id `rewind-notice:<operationId>`. It quotes nothing of the suffix, and
    creates no activity, fanout or stream row (no unread, notification or agent wake)."""
    client_id = NOTICE_PREFIX + operation_id
    with conn.transaction():
        if _one(conn, "SELECT 1 FROM scope_messages WHERE scope_id = %s AND client_message_id = %s",
                plan.primary.scope_id, client_id):
            return
        who = _one(conn, "SELECT display_name FROM users WHERE id = %s", plan.initiator_user_id)
        name = who["display_name"] if who else plan.initiator_user_id
        message = _append(conn, plan.primary.scope_id, "system", None, None,
                          f"{name} rewound the conversation", client_id,
                          {"rewindNotice": {"operationId": operation_id}}, mark_dirty=False)
    session.publish("message.created", plan.primary.scope_id, message)


# --- Live messages -----------------------------------------------------------------------------

def send_message(session: Session, actor: dict, scope_id: str, content: str) -> dict:
    """Appends a message with the next seq and global seq and publishes `message.created`."""
    kind, author = _actor(actor)
    with session.connection() as conn:
        try:
            with conn.transaction():
                message = _append(conn, scope_id, kind, author if kind == "human" else None,
                                  author if kind == "agent" else None, content)
        except errors.ForeignKeyViolation as e:
            raise DriverError(400, "bad_request", f"unknown author: {e.diag.message_detail}") from e
    session.publish("message.created", scope_id, message)
    return {"messageId": message["messageId"], "seq": message["seq"]}


def _append(conn, scope_id, author_kind, user_id, agent_id, content, client_id=None,
            metadata=None, mark_dirty=True) -> dict:
    """Inserts a message above both high-water marks (so a rewound seq is never reused, §6.2)
    and keeps the scope's summaries current. Runs inside the caller's transaction."""
    scope = _one(conn, "SELECT workspace_id, archived_at, parent_message_id FROM scopes "
                       "WHERE id = %s", scope_id)
    if scope is None:
        raise DriverError(400, "bad_request", f"unknown scope `{scope_id}`")
    if scope["archived_at"] is not None:
        raise DriverError(400, "scope_archived", f"scope `{scope_id}` is archived")
    # Workspace row first, then the scope row: the order every writer of both takes.
    global_seq = _one(conn, """
        UPDATE workspaces w SET latest_global_seq = greatest(w.latest_global_seq,
            (SELECT coalesce(max(global_seq), 0) FROM scope_messages WHERE workspace_id = w.id)) + 1
        WHERE id = %s RETURNING latest_global_seq""", scope["workspace_id"])["latest_global_seq"]
    seq = _one(conn, """
        UPDATE scopes s SET latest_seq = greatest(s.latest_seq,
                (SELECT coalesce(max(seq), 0) FROM scope_messages WHERE scope_id = s.id)) + 1,
            latest_global_seq = greatest(s.latest_global_seq, %s)
        WHERE id = %s RETURNING latest_seq""", global_seq, scope_id)["latest_seq"]
    message_id = f"msg-{uuid.uuid4().hex}"
    conn.execute("""
        INSERT INTO scope_messages (id, workspace_id, scope_id, seq, global_seq, author_kind,
                                    author_user_id, author_agent_id, content, metadata,
                                    client_message_id)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)""",
                 (message_id, scope["workspace_id"], scope_id, seq, global_seq, author_kind,
                  user_id, agent_id, content, Jsonb(metadata or {}), client_id))
    _recompute_scope_summaries(conn, [scope_id])
    if scope["parent_message_id"]:                          # a reply: the parent's summary
        _recompute_reply_summaries(conn, [scope["parent_message_id"]])
    if mark_dirty:
        # the browser message-sync dirty index (§6.1 names it; a live send advances it)
        conn.execute("""
            INSERT INTO scope_sync_dirty (scope_id, latest_message_seq) VALUES (%s, %s)
            ON CONFLICT (scope_id) DO UPDATE SET latest_message_seq = EXCLUDED.latest_message_seq,
                                                 updated_at = now()""", (scope_id, seq))
        conn.execute("""
            UPDATE member_scope_sync_dirty SET latest_message_seq = %s, updated_at = now()
            WHERE scope_id = %s""", (seq, scope_id))
    return {"messageId": message_id, "scopeId": scope_id, "seq": seq}


# --- Read surfaces -----------------------------------------------------------------------------

def read_state(session: Session, scope_id: str, user_id: str) -> dict | None:
    """A member's derived read cursor, the visible tail and the ordinary unread count (§6.2:
    derived from the clamped cursor; §8: rewind notices are not ordinary unread)."""
    with session.connection() as conn:
        member = _one(conn, "SELECT last_read_seq FROM scope_memberships "
                            "WHERE scope_id = %s AND user_id = %s", scope_id, user_id)
        if member is None:
            return None
        tail = _one(conn, f"SELECT coalesce(max(m.seq), 0) AS seq FROM scope_messages m "
                          f"WHERE m.scope_id = %s AND {NOT_REWOUND}", scope_id)["seq"]
        cursor = min(member["last_read_seq"], tail)
        unread = _one(conn, f"""
            SELECT count(*) AS n FROM scope_messages m
            WHERE m.scope_id = %s AND m.seq > %s AND {NOT_REWOUND} AND NOT {IS_NOTICE}
              AND m.author_user_id IS DISTINCT FROM %s""", scope_id, cursor, user_id)["n"]
    return {"lastReadSeq": cursor, "visibleTailSeq": tail, "unreadCount": unread}


# A page never holds more than this, whatever `limit` asks (it must fit a bigint plus one).
MAX_PAGE = 10_000


def sync_messages(session: Session, user_id: str, scope_id: str, after_seq: int,
                  limit: int) -> dict:
    """Message sync: visible messages after a seq. Never a tombstone page (§8): rewound rows are
    simply absent."""
    if limit < 1:
        raise DriverError(400, "bad_request", "limit must be at least 1")
    with session.connection() as conn:
        if _one(conn, "SELECT 1 FROM scope_memberships WHERE scope_id = %s AND user_id = %s",
                scope_id, user_id) is None:
            raise DriverError(400, "not_a_member", f"`{user_id}` is not a member of `{scope_id}`")
        rows = _all(conn, f"""
            SELECT m.id, m.seq, m.content FROM scope_messages m
            WHERE m.scope_id = %s AND m.seq > %s AND {NOT_REWOUND}
            ORDER BY m.seq LIMIT %s""", scope_id, after_seq, min(limit, MAX_PAGE) + 1)
    return {"messages": rows[:limit], "hasMore": len(rows) > limit}


# --- The read surfaces of §1 (driver `read`) ----------------------------------------------------
#
# Every surface starts from `scope_messages` and its lifecycle gate (§6.1.1): projection rows
# (cards, reactions, pins, sources, attachments, stream events, the conversation index, outbox and
# activity evidence) only name a message, and a row naming a rewound message shows nothing. What
# is shown of a message always comes from its transcript row, never from a projection's copy.

class _ReadAnswer(Exception):
    """A `not_found` or `rejected` answer of a read (status 200)."""

    def __init__(self, answer: dict):
        super().__init__(answer["message"])
        self.answer = answer


def _rejected(reason: str, message: str) -> _ReadAnswer:
    return _ReadAnswer({"outcome": "rejected", "reason": reason, "message": message})


def _not_found(message: str) -> _ReadAnswer:
    return _ReadAnswer({"outcome": "not_found", "message": message})


# A message as the surfaces read it: only through the gate, so a rewound row is never selected.
READABLE = f"""
    SELECT m.id, m.scope_id, m.seq, m.content, m.created_at,
           coalesce(m.metadata #>> '{{messageRecall,status}}', '') = 'recalled' AS recalled
    FROM scope_messages m WHERE {NOT_REWOUND}"""
# Search and receive skip recalled placeholders: they have no content to match or deliver.
NOT_RECALLED = "coalesce(m.metadata #>> '{messageRecall,status}', '') <> 'recalled'"
DEFAULT_PAGE = 50


@dataclass
class _Reading:
    """One read in progress: the request, its reader and scope, and the answer being built."""
    conn: psycopg.Connection
    surface: str
    kind: str                       # the reader's kind, `human` or `agent`
    reader: str
    scope: dict
    body: dict
    messages: dict[str, dict] = field(default_factory=dict)   # insertion order, deduplicated
    records: list[dict] = field(default_factory=list)
    next_cursor: str | None = None

    def show(self, row: dict) -> None:
        """Shows a readable message: a recalled one as an empty placeholder."""
        self.messages.setdefault(row["id"], {
            "id": row["id"], "scopeId": row["scope_id"], "seq": row["seq"],
            "content": "" if row["recalled"] else row["content"], "recalled": row["recalled"]})

    def need(self, name: str) -> str:
        value = self.body.get(name)
        if not isinstance(value, str) or not value.strip():
            raise _rejected("bad_request", f"surface `{self.surface}` needs `{name}`")
        return value

    def limit(self, default: int = DEFAULT_PAGE) -> int:
        return self.body.get("limit") or default

    def message(self, message_id: str | None = None) -> dict:
        """The readable message `messageId` of the read's scope, or `not_found`: an id that never
        existed, one of another scope and a rewound one are indistinguishable."""
        message_id = message_id or self.need("messageId")
        row = _one(self.conn, READABLE + " AND m.id = %s AND m.scope_id = %s",
                   message_id, self.scope["id"])
        if row is None:
            raise _not_found(f"no message `{message_id}` in scope `{self.scope['id']}`")
        return row

    def cursor(self) -> int:
        """Where a paged surface resumes (0: the first page); a cursor this implementation did
        not hand out for this surface and scope is `bad_cursor`."""
        cursor = self.body.get("cursor")
        if cursor is None:
            return 0
        try:
            surface, scope_id, after = json.loads(
                base64.urlsafe_b64decode(cursor.encode("ascii")).decode())
            valid = (surface, scope_id) == (self.surface, self.scope["id"]) \
                and type(after) is int and after >= 0
        except (AttributeError, ValueError, TypeError, UnicodeError):
            valid = False
        if not valid:
            raise _rejected("bad_cursor", f"cursor `{cursor}` is not a {self.surface} cursor "
                                          f"of scope `{self.scope['id']}`")
        return after

    def page_after(self, after: int) -> None:
        """Sets the next page's cursor: it resumes after `after`."""
        raw = json.dumps([self.surface, self.scope["id"], after]).encode()
        self.next_cursor = base64.urlsafe_b64encode(raw).decode("ascii")

    def read_position(self) -> int:
        """The reader's derived read cursor in the scope: `last_read_seq` clamped to the visible
        tail (§6.2); 0 without a membership of this very scope (a thread read through its
        parent's membership)."""
        column = "user_id" if self.kind == "human" else "agent_id"
        row = _one(self.conn, f"""
            SELECT least(sm.last_read_seq,
                         (SELECT coalesce(max(m.seq), 0) FROM scope_messages m
                          WHERE m.scope_id = sm.scope_id AND {NOT_REWOUND})) AS seq
            FROM scope_memberships sm WHERE sm.scope_id = %s AND sm.{column} = %s""",
                   self.scope["id"], self.reader)
        return row["seq"] if row else 0

    def not_written_by_reader(self) -> str:
        """SQL: the message `m` was written by someone other than the reader (`%s`)."""
        column = "author_user_id" if self.kind == "human" else "author_agent_id"
        return f"m.{column} IS DISTINCT FROM %s"


def read(session: Session, body: dict) -> dict:
    """`POST .../read`: one read through one read surface of §1, as `reader` makes it. A bad read
    is `rejected`, an unreadable message or attachment `not_found` (both status 200)."""
    if not isinstance(body, dict):
        raise DriverError(400, "bad_request", "the read request must be a JSON object")
    surface = body.get("surface")
    if surface not in SURFACES:
        raise DriverError(400, "bad_request", f"unknown read surface {surface!r}")
    for name in ("reader", "scopeId"):
        if body.get(name) is None:
            raise DriverError(400, "bad_request", f"missing field `{name}`")
    kind, reader = _actor(body["reader"])
    try:
        limit = body.get("limit")
        if limit is not None and (type(limit) is not int or limit < 1):
            raise _rejected("bad_request", f"limit {json.dumps(limit)} is not 1 or more")
        if kind == "system":
            raise _rejected("bad_request", "a reader is a human or an agent")
        with session.connection() as conn:
            with conn.transaction():                        # one consistent, read-only view
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                scope = _one(conn, "SELECT * FROM scopes WHERE id = %s", body["scopeId"])
                if scope is None:
                    raise _rejected("unknown_scope", f"no scope `{body['scopeId']}`")
                if not _can_read(conn, scope, kind, reader):
                    raise _rejected("not_member",
                                    f"{kind} `{reader}` is not a member of scope `{scope['id']}`")
                reading = _Reading(conn, surface, kind, reader, scope, body)
                SURFACES[surface](reading)
    except _ReadAnswer as answer:
        return answer.answer
    return {"outcome": "found", "messages": list(reading.messages.values()),
            "records": reading.records, "nextCursor": reading.next_cursor}


def _can_read(conn, scope: dict, kind: str, reader: str) -> bool:
    """Membership of the scope, or for a reply thread of the thread or its parent scope."""
    column = "user_id" if kind == "human" else "agent_id"
    scopes = [scope["id"]] + ([scope["parent_scope_id"]] if scope["parent_scope_id"] else [])
    return _one(conn, f"SELECT 1 FROM scope_memberships WHERE scope_id = ANY(%s) AND {column} = %s",
                scopes, reader) is not None


def _history(r: _Reading) -> None:
    """The transcript, oldest first, paged by seq; recalled messages as placeholders."""
    after, limit = r.cursor(), r.limit()
    rows = _all(r.conn, READABLE + " AND m.scope_id = %s AND m.seq > %s ORDER BY m.seq LIMIT %s",
                r.scope["id"], after, limit + 1)
    for row in rows[:limit]:
        r.show(row)
    if len(rows) > limit:
        r.page_after(rows[limit - 1]["seq"])


def _message(r: _Reading) -> None:
    r.show(r.message())


def _search(r: _Reading) -> None:
    """Messages whose content holds every word of the query (the transcript row's content, not a
    search document, which may be stale); recalled placeholders have no content to match."""
    words = r.need("query").split()
    rows = _all(r.conn, READABLE + f"""
        AND m.scope_id = %s AND {NOT_RECALLED}
        AND to_tsvector('simple', m.content) @@ plainto_tsquery('simple', %s)
        ORDER BY m.seq""", r.scope["id"], " ".join(words))
    for row in rows:
        r.show(row)


def _receive(r: _Reading) -> None:
    """What a daemon fetches for the reader: visible, non-recalled messages after its read
    position that someone else wrote. The rewind notice wakes nobody (§8), so it is not one."""
    rows = _all(r.conn, READABLE + f"""
        AND m.scope_id = %s AND m.seq > %s AND {r.not_written_by_reader()} AND NOT {IS_NOTICE}
        AND {NOT_RECALLED} ORDER BY m.seq""", r.scope["id"], r.read_position(), r.reader)
    for row in rows:
        r.show(row)


def _root_context(r: _Reading) -> None:
    """A reply thread's root message, when it is still readable; other scopes have none."""
    if r.scope["parent_message_id"] is None:
        return
    row = _one(r.conn, READABLE + " AND m.id = %s", r.scope["parent_message_id"])
    if row is not None:
        r.show(row)
        r.records.append({"kind": "root", "messageId": row["id"], "threadScopeId": r.scope["id"]})


def _source_context(r: _Reading) -> None:
    """The readable messages the (readable) message cites. The projection's snippet is not
    shown: the cited message's own row is."""
    citing = r.message()
    rows = _all(r.conn, """
        SELECT s.id AS source_id, c.* FROM scope_message_sources s
        JOIN (""" + READABLE + """) c ON c.id = s.source_message_id
        WHERE s.message_id = %s ORDER BY s.created_at, s.id""", citing["id"])
    for row in rows:
        cited_scope = _one(r.conn, "SELECT * FROM scopes WHERE id = %s", row["scope_id"])
        if not _can_read(r.conn, cited_scope, r.kind, r.reader):
            continue                        # cited from a scope the reader cannot read
        r.show(row)
        r.records.append({"sourceId": row["source_id"], "messageId": row["id"],
                          "citedBy": citing["id"]})


def _share_cards(r: _Reading) -> None:
    """The cards shared into the scope, with their action state, while their message is
    readable (the card shows the message's own row, wherever it lives)."""
    rows = _all(r.conn, """
        SELECT c.id AS card_id, c.scope_id AS card_scope_id, c.target_scope_id, c.shared_by,
               c.action_state, m.* FROM scope_share_cards c
        JOIN (""" + READABLE + """) m ON m.id = c.message_id
        WHERE c.target_scope_id = %s ORDER BY c.created_at, c.id""", r.scope["id"])
    for row in rows:
        r.show(row)
        r.records.append({"cardId": row["card_id"], "messageId": row["id"],
                          "scopeId": row["card_scope_id"], "targetScopeId": row["target_scope_id"],
                          "sharedBy": row["shared_by"], "actionState": row["action_state"]})


def _pins(r: _Reading) -> None:
    rows = _all(r.conn, """
        SELECT p.pinned_by, p.created_at AS pinned_at, m.* FROM scope_message_pins p
        JOIN (""" + READABLE + """) m ON m.id = p.message_id
        WHERE p.scope_id = %s ORDER BY p.created_at, m.seq""", r.scope["id"])
    for row in rows:
        r.show(row)
        r.records.append({"messageId": row["id"], "pinnedBy": row["pinned_by"],
                          "pinnedAt": _timestamp(row["pinned_at"])})


def _reactions(r: _Reading) -> None:
    message = r.message()
    r.show(message)
    for row in _all(r.conn, """
            SELECT reactor_kind, reactor_id, emoji FROM scope_message_reactions
            WHERE message_id = %s ORDER BY created_at, reactor_kind, reactor_id, emoji""",
                    message["id"]):
        r.records.append({"messageId": message["id"], "reactorKind": row["reactor_kind"],
                          "reactorId": row["reactor_id"], "emoji": row["emoji"]})


def _readable_attachment(r: _Reading) -> tuple[dict, dict | None]:
    """The attachment `attachmentId` as the reader may see it, with its message: a message-bound
    one only while its message is a readable, non-recalled row of the scope; a task discussion
    file of the scope; an unclaimed upload only for its uploader."""
    attachment_id = r.need("attachmentId")
    missing = _not_found(f"no attachment `{attachment_id}` in scope `{r.scope['id']}`")
    row = _one(r.conn, "SELECT * FROM attachments WHERE id = %s", attachment_id)
    if row is None:
        raise missing
    message = None
    if row["owner_kind"] == "message":
        message = _one(r.conn, READABLE + " AND m.id = %s AND m.scope_id = %s",
                       row["message_id"], r.scope["id"])
        if message is None or message["recalled"]:
            raise missing
    elif row["owner_kind"] == "task_discussion":
        if row["scope_id"] != r.scope["id"]:
            raise missing
    elif row["scope_id"] not in (None, r.scope["id"]) \
            or (row["scope_id"] is None and (r.kind, r.reader) != ("human", row["uploaded_by"])):
        raise missing
    return row, message


def _attachment_record(row: dict, message: dict | None) -> dict:
    record = {"attachmentId": row["id"], "ownerKind": row["owner_kind"],
              "fileName": row["file_name"], "contentType": row["content_type"],
              "byteSize": row["byte_size"]}
    if message is not None:
        record["messageId"] = message["id"]
    if row["task_id"] is not None:
        record["taskId"] = row["task_id"]
    return record


def _attachment(r: _Reading) -> None:
    row, message = _readable_attachment(r)
    if message is not None:
        r.show(message)
    r.records.append(_attachment_record(row, message) | {"readable": True})


def _attachment_download(r: _Reading) -> None:
    row, message = _readable_attachment(r)
    if message is not None:
        r.show(message)
    r.records.append(_attachment_record(row, message) | {
        "storageKey": row["storage_key"], "download": f"/files/{row['storage_key']}"})


def _deliveries(conn, message_ids: list[str]) -> dict[str, list[dict]]:
    """The delivery facts (outbox rows) of readable messages: who, and in which state. Payloads
    are evidence, not content, and are not shown."""
    out: dict[str, list[dict]] = {m: [] for m in message_ids}
    for row in _all(conn, """
            SELECT message_id, recipient_kind, recipient_id, status FROM scope_fanout_outbox
            WHERE message_id = ANY(%s) ORDER BY id""", message_ids):
        out[row["message_id"]].append({"recipientKind": row["recipient_kind"],
                                       "recipientId": row["recipient_id"],
                                       "status": row["status"]})
    return out


def _diagnostics(r: _Reading) -> None:
    """Delivery diagnostics start from the readable transcript row (§6.1.1): evidence about a
    rewound message is never reached."""
    message = r.message()
    r.show(message)
    for delivery in _deliveries(r.conn, [message["id"]])[message["id"]]:
        r.records.append({"messageId": message["id"], "kind": "delivery"} | delivery)
    for row in _all(r.conn, """
            SELECT kind, status FROM scope_activity_events WHERE message_id = %s ORDER BY id""",
                    message["id"]):
        r.records.append({"messageId": message["id"], "kind": "activity",
                          "activityKind": row["kind"], "status": row["status"]})
    for row in _all(r.conn, """
            SELECT agent_id, runtime, strategy FROM message_recovery_points
            WHERE message_id = %s ORDER BY agent_id""", message["id"]):
        r.records.append({"messageId": message["id"], "kind": "recovery_point",
                          "agentId": row["agent_id"], "runtime": row["runtime"],
                          "strategy": row["strategy"]})


def _diagnostics_preview(r: _Reading) -> None:
    """The scope's most recent readable messages (oldest first), each with its deliveries."""
    rows = _all(r.conn, READABLE + " AND m.scope_id = %s ORDER BY m.seq DESC LIMIT %s",
                r.scope["id"], r.limit())
    rows.reverse()
    deliveries = _deliveries(r.conn, [row["id"] for row in rows])
    for row in rows:
        r.show(row)
        r.records.append({"messageId": row["id"], "deliveries": deliveries[row["id"]]})


def _stream(r: _Reading) -> None:
    """The durable stream replay, oldest first, paged by event id. An event about a message is
    replayed only while the message is readable, and shows the message's own row, never the
    event's stored payload; an event about no message shows its type only."""
    after, limit = r.cursor(), r.limit()
    rows = _all(r.conn, """
        SELECT e.id AS event_id, e.event_type, e.message_id, m.* FROM im_stream_events e
        LEFT JOIN (""" + READABLE + """) m ON m.id = e.message_id
        WHERE e.scope_id = %s AND e.id > %s AND (e.message_id IS NULL OR m.id IS NOT NULL)
        ORDER BY e.id LIMIT %s""", r.scope["id"], after, limit + 1)
    for row in rows[:limit]:
        record = {"eventId": row["event_id"], "eventType": row["event_type"]}
        if row["message_id"] is not None:
            r.show(row)
            record["messageId"] = row["id"]
        r.records.append(record)
    if len(rows) > limit:
        r.page_after(rows[limit - 1]["event_id"])


def _conversation_index(r: _Reading) -> None:
    """The reader's entry for the scope, derived from the transcript: its last message is the
    visible tail (not the stored projection's `last_message_id`, which may name a rewound one)."""
    tail = _one(r.conn, READABLE + " AND m.scope_id = %s ORDER BY m.seq DESC LIMIT 1",
                r.scope["id"])
    cursor = r.read_position()
    unread = _one(r.conn, f"""
        SELECT count(*) AS n FROM scope_messages m
        WHERE m.scope_id = %s AND m.seq > %s AND {NOT_REWOUND} AND NOT {IS_NOTICE}
          AND {r.not_written_by_reader()}""", r.scope["id"], cursor, r.reader)["n"]
    record = {"scopeId": r.scope["id"], "lastReadSeq": cursor, "unreadCount": unread,
              "lastMessage": None}
    if tail is not None:
        r.show(tail)
        record |= {"messageId": tail["id"], "lastMessage": {"id": tail["id"], "seq": tail["seq"]},
                   "lastMessageAt": _timestamp(tail["created_at"])}
    r.records.append(record)


def _timestamp(value: datetime) -> str:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


SURFACES = {
    "history": _history, "message": _message, "search": _search, "receive": _receive,
    "root-context": _root_context, "source-context": _source_context,
    "share-cards": _share_cards, "pins": _pins, "reactions": _reactions,
    "attachment": _attachment, "attachment-download": _attachment_download,
    "diagnostics": _diagnostics, "diagnostics-preview": _diagnostics_preview,
    "stream": _stream, "conversation-index": _conversation_index,
}


# --- Recovery point GC -------------------------------------------------------------------------

def prune_recovery_points(session: Session, agent_id: str) -> list[str]:
    """Deletes an agent's recovery points as the GC would. A database-only operation: pruning
    never reaches a runtime (§5: a codex point is a coordinate, its pruning a runtime no-op)."""
    with session.connection() as conn:
        rows = _all(conn, "DELETE FROM message_recovery_points WHERE agent_id = %s RETURNING id",
                    agent_id)
    return sorted(r["id"] for r in rows)
