#!/usr/bin/env python3
"""Break the reference implementation on purpose, one way at a time, and check that the
scenarios of the rules each breakage violates fail.

Every mutation names a file, an exact text that must occur once, its replacement (an edit may
name another file first, for a breakage that moves code between files), and the tag expression
of the scenarios that must now fail. The check runs on a copy of the committed tree
(`git archive HEAD`) with its own target directory, so the work tree is never touched.

    ci/mutation-check.py                 # all mutations
    ci/mutation-check.py sources pins    # only those whose id contains one of the words
    ci/mutation-check.py --check         # only check that every mutation still applies

A mutation whose expression starts with `fuzz` is checked against the generated cases of the
`fuzz` command (the options that follow) instead of the Gherkin suite. One whose expression
starts with `real ` is checked with the rest of the expression on real runtime releases
(`run --runtimes real`; the releases are installed from the npm registry into the cache once):
a breakage the release gate, which only real runtimes serve, must catch.

A mutation of `client/rewind-client.js` breaks the reference browser client, which the client
scenarios (`features/client.feature`) must catch: the harness is built with the `browser`
feature, so the check needs Chromium and chromedriver (`apt-get install -y chromium
chromium-driver`).

Exit status: 0 when every mutation was caught, 1 when one survived, 2 on a setup error.
"""
import os
import re
import subprocess
import sys
import tempfile
import time

APPLY = "reference-impl/src/apply.rs"
SCRUB = "reference-impl/src/scrub.rs"
RECOMPUTE = "reference-impl/src/recompute.rs"
GUARDS = "reference-impl/src/guards.rs"
PLAN = "reference-impl/src/plan.rs"
LIFECYCLE = "reference-impl/src/lifecycle.rs"
SERVICE = "reference-impl/src/service.rs"
REALTIME = "reference-impl/src/realtime.rs"
RECOVERY = "reference-impl/src/recovery.rs"
CAPABILITIES = "reference-impl/src/capabilities.rs"
SCHEMA = "reference-impl/migrations/0001_spec_schema.sql"
MESSAGES = "reference-impl/src/messages.rs"
CODEX = "reference-impl/src/runtimes/codex.rs"
CLAUDE = "reference-impl/src/runtimes/claude.rs"
OPENCODE = "reference-impl/src/runtimes/opencode.rs"
READS = "reference-impl/src/reads.rs"
SURFACES = "reference-impl/src/surfaces.rs"
GC = "reference-impl/src/gc.rs"
ERROR = "reference-impl/src/error.rs"
DELIVERY = "reference-impl/src/delivery.rs"
DRIVER = "reference-impl/src/driver.rs"
CLIENT = "client/rewind-client.js"

# The readable gate left out, for the read-surface breakages: `ungated_message` reads one message
# of a scope whatever its lifecycle (a surface's own query is ungated in place).
UNGATED_MESSAGE_DEF = [("/// One readable message of `scope`, or not found.\n",
                        "async fn ungated_message(conn: &mut PgConnection, scope: &str, id: &str) -> Result<ReadMessage, Stop> {\n"
                        "    let sql = format!(\n"
                        "        \"SELECT {MESSAGE_COLUMNS} FROM {} r WHERE r.id = $1 AND r.scope_id = $2\",\n"
                        "        readable().replace(MESSAGE_NOT_REWOUND_SQL, \"true\")\n"
                        "    );\n"
                        "    let row: Option<MessageRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))\n"
                        "        .bind(id)\n        .bind(scope)\n        .fetch_optional(&mut *conn)\n        .await\n"
                        "        .db(\"reading a message\")?;\n"
                        "    row.map(message).ok_or_else(|| not_found(format!(\"no message `{id}`\")))\n"
                        "}\n\n"
                        "/// One readable message of `scope`, or not found.\n")]

# (id, file, [(old, new), ...], tag expression whose scenarios must fail)
MUTATIONS = [
    ("tombstone-keeps-content", APPLY,
     [('const TOMBSTONE_SQL: &str = "UPDATE scope_messages m SET content = \'\', ',
       'const TOMBSTONE_SQL: &str = "UPDATE scope_messages m SET content = m.content, ')],
     "@rule:apply.tombstone-suffix"),
    ("tombstone-keeps-metadata", APPLY,
     [("metadata = jsonb_build_object('messageRecall'", "metadata = metadata || jsonb_build_object('messageRecall'")],
     "@rule:apply.tombstone-suffix"),
    ("tombstone-marks-recalled", APPLY,
     [("'status', 'rewound', ", "'status', 'recalled', ")], "@rule:sem.rewound-not-recalled"),
    ("activity-not-suppressed", SCRUB,
     [('AND a.status = \'pending\'"',
       'AND a.status = \'never\'"')],
     "@rule:apply.suppress-activity-events"),
    ("outbox-leased-kept", SCRUB,
     [("status IN ('pending', 'leased')", "status IN ('pending')")], "@rule:apply.suppress-fanout-outbox"),
    ("outbox-delivered-suppressed", SCRUB,
     [("status IN ('pending', 'leased')", "status IN ('pending', 'leased', 'delivered')")],
     "@rule:guard.delivered-outbox-retained"),
    ("share-cards-kept", SCRUB,
     [('DELETE FROM scope_share_cards c USING suffix WHERE c.message_id',
       'DELETE FROM scope_share_cards c USING suffix WHERE false AND c.message_id')],
     "@rule:apply.scrub-share-cards"),
    ("reactions-kept", SCRUB,
     [('DELETE FROM scope_message_reactions r USING suffix WHERE r.message_id',
       'DELETE FROM scope_message_reactions r USING suffix WHERE false AND r.message_id')],
     "@rule:apply.scrub-reactions"),
    ("pins-kept", SCRUB,
     [('DELETE FROM scope_message_pins p USING suffix WHERE p.message_id',
       'DELETE FROM scope_message_pins p USING suffix WHERE false AND p.message_id')],
     "@rule:apply.scrub-pins"),
    ("top-notices-kept", SCRUB,
     [('DELETE FROM scope_message_top_notices n USING suffix WHERE n.message_id',
       'DELETE FROM scope_message_top_notices n USING suffix WHERE false AND n.message_id')],
     "@rule:apply.scrub-top-notices"),
    ("search-docs-kept", SCRUB,
     [('DELETE FROM scope_message_search_docs d USING suffix WHERE d.message_id',
       'DELETE FROM scope_message_search_docs d USING suffix WHERE false AND d.message_id')],
     "@rule:apply.scrub-search-docs"),
    ("sources-cited-side-kept", SCRUB,
     [('WHERE o.source_message_id = s.id \\', 'WHERE false AND o.source_message_id = s.id \\')],
     "@rule:apply.scrub-sources"),
    ("attachments-over-deleted", SCRUB,
     [("WHERE f.owner_kind = 'message' AND f.message_id = suffix.id",
       "WHERE f.message_id = suffix.id OR f.owner_kind <> 'message'")],
     "@rule:apply.unrelated-attachments-untouched"),
    ("attachments-kept", SCRUB,
     [("WHERE f.owner_kind = 'message' AND f.message_id = suffix.id",
       'WHERE false')],
     "@rule:apply.scrub-attachments"),
    ("stream-events-kept", SCRUB,
     [('const STREAM_SCRUB_SQL: &str =\n    "UPDATE im_stream_events e SET payload_json = e.payload_json - $3::text[] ',
       'const STREAM_SCRUB_SQL: &str =\n    "UPDATE im_stream_events e SET payload_json = e.payload_json - \'x\' ')],
     "@rule:apply.scrub-im-stream-events"),
    # Caught only by the leak scan every completed rewind scenario ends with: no step names
    # `rewind_operations.plan`, the scan reads every text column the catalog lists.
    ("operation-plan-quotes-target", LIFECYCLE,
     [("         VALUES ($1, $2, $3, $4, $5, $6, $7)\",",
       "         VALUES ($1, $2, $3, $4, $5, $6, $7 || jsonb_build_object('target', \\\n"
       "         (SELECT content FROM scope_messages WHERE id = $4)))\",")],
     "@rule:apply.tombstone-suffix"),
    # Also caught by the leak scan alone: the attachment names a stream payload keeps carry
    # their message's canary (the scenario of this tag checks activity events, not streams).
    ("stream-attachments-kept", SCRUB,
     [("const CONTENT_KEYS: [&str; 8] = [\n    \"content\",\n    \"attachments\",",
       "const CONTENT_KEYS: [&str; 7] = [\n    \"content\",")],
     "@rule:apply.suppress-activity-events"),
    # Sync takes a projection row for an authority: only a scenario that plants a stale search
    # document after the rewind tells (the scrub removes the fixture's own).
    ("sync-trusts-search-docs", READS,
     [("         WHERE m.scope_id = $1 AND m.seq > $2 AND {MESSAGE_NOT_REWOUND_SQL} \\",
       "         WHERE m.scope_id = $1 AND m.seq > $2 AND ({MESSAGE_NOT_REWOUND_SQL} \\\n"
       "         OR EXISTS (SELECT 1 FROM scope_message_search_docs d WHERE d.message_id = m.id)) \\")],
     "@rule:surface.sync-authority"),
    ("conversation-index-kept", SCRUB,
     [('FROM suffix WHERE last_message_id = suffix.id',
       'FROM suffix WHERE false AND last_message_id = suffix.id')],
     "@rule:apply.scrub-im-conversation-index"),
    # The suffix is built from every row from the target on, an earlier tombstone included.
    ("suffix-includes-tombstones", PLAN,
     [("WHERE m.scope_id = $1 AND m.seq >= $2 AND {MESSAGE_NOT_REWOUND_SQL} ORDER BY m.seq",
       "WHERE m.scope_id = $1 AND m.seq >= $2 ORDER BY m.seq")],
     "@rule:guard.prepare-suffix-non-rewound"),
    # The rewound range is kept in a hidden-range table of its own.
    ("hidden-range-table", APPLY,
     [('    scrub::scrub_suffix_facts(conn, &plan.boundary, variant).await?;\n',
       '    scrub::scrub_suffix_facts(conn, &plan.boundary, variant).await?;\n    sqlx::query("CREATE TABLE IF NOT EXISTS rewind_hidden_ranges (message_ids text[])")\n        .execute(&mut *conn)\n        .await\n        .db("hiding")?;\n')],
     "@rule:sem.no-hidden-range-table"),
    ("transcript-first", APPLY,
     [('    scrub::scrub_suffix_facts(conn, &plan.boundary, variant).await?;\n',
       ''),
      ('    .db("tombstoning the suffix")?;\n',
       '    .db("tombstoning the suffix")?;\n    scrub::scrub_suffix_facts(conn, &plan.boundary, variant).await?;\n')],
     "@rule:apply.transcript-last"),
    ("visible-count-includes-rewound", RECOMPUTE,
     [('FROM scope_messages m WHERE m.scope_id = $1 AND {MESSAGE_NOT_REWOUND_SQL})"',
       'FROM scope_messages m WHERE m.scope_id = $1)"')],
     "@rule:recompute.visible-summary-fields"),
    ("high-water-lowered", RECOMPUTE,
     [("SET latest_message_at = v.last_at, ", "SET latest_seq = v.n, latest_message_at = v.last_at, ")],
     "@rule:recompute.latest-seq-high-water"),
    ("last-read-not-clamped", RECOMPUTE,
     [("last_read_seq = least(sm.last_read_seq, t.seq)", "last_read_seq = sm.last_read_seq")],
     "@rule:recompute.clamp-last-read-seq"),
    ("last-read-global-not-clamped", RECOMPUTE,
     [("last_read_global_seq = least(sm.last_read_global_seq, t.gseq)", "last_read_global_seq = sm.last_read_global_seq")],
     "@rule:recompute.clamp-last-read-global-seq"),
    ("dismissed-not-clamped", RECOMPUTE,
     [("least(sm.owner_context_dismissed_through_global_seq, t.gseq)", "sm.owner_context_dismissed_through_global_seq")],
     "@rule:recompute.clamp-owner-context-dismissed"),
    ("dismissed-raised-to-tail", RECOMPUTE,
     [("least(sm.owner_context_dismissed_through_global_seq, t.gseq)", "t.gseq")],
     "@rule:recompute.clamp-owner-context-dismissed"),
    ("sync-dirty-not-clamped", RECOMPUTE,
     [("WHERE d.scope_id = $1 AND d.latest_message_seq > t.seq", "WHERE false")],
     "@rule:apply.clamp-scope-sync-dirty or @rule:apply.clamp-member-scope-sync-dirty"),
    ("sync-dirty-activity-reset", RECOMPUTE,
     [("SET latest_message_seq = least(d.latest_message_seq, t.seq), ", "SET latest_message_seq = least(d.latest_message_seq, t.seq), latest_activity_seq = 0, ")],
     "@rule:guard.sync-dirty-keep-activity-frontier"),
    ("sync-dirty-raised-to-tail", RECOMPUTE,
     [("WHERE d.scope_id = $1 AND d.latest_message_seq > t.seq", "WHERE d.scope_id = $1"),
      ("SET latest_message_seq = least(d.latest_message_seq, t.seq), ", "SET latest_message_seq = t.seq, ")],
     "@rule:apply.sync-dirty-keep-non-suffix"),
    ("other-human-allowed", GUARDS,
     [("m.author_user_id.as_deref() != Some(initiator_user_id)", "m.author_user_id.as_deref() == Some(\"nobody\")")],
     "@rule:init.other-human-guard"),
    ("service-and-app-targets-allowed", GUARDS,
     [("\"system\" | \"service\" | \"app\" => return Err(SpecError::SystemMessageTarget),",
       "\"system\" => return Err(SpecError::SystemMessageTarget),")],
     "@rule:init.no-system-target"),
    ("cold-target-allowed", GUARDS,
     [("if target.storage_tier != \"hot\" {", "if target.storage_tier == \"never\" {"),
      ("if suffix.iter().any(|m| m.storage_tier != \"hot\") {", "if suffix.iter().any(|m| m.storage_tier == \"never\") {")],
     "@rule:init.no-cold-crossing"),
    ("other-humans-target-allowed", GUARDS,
     [("\"human\" if target.author_user_id.as_deref() == Some(initiator_user_id) => {}", "\"human\" => {}")],
     "@rule:init.own-human-target"),
    ("rewound-target-allowed", PLAN,
     [("WHERE m.scope_id = $1 AND m.id = $2 AND {MESSAGE_NOT_REWOUND_SQL}", "WHERE m.scope_id = $1 AND m.id = $2")],
     "@rule:init.target-visible-hot"),
    ("target-scope-ignored", PLAN,
     [("WHERE m.scope_id = $1 AND m.id = $2 AND {MESSAGE_NOT_REWOUND_SQL}", "WHERE $1 <> '' AND m.id = $2 AND {MESSAGE_NOT_REWOUND_SQL}")],
     "@rule:init.target-visible-hot"),
    ("operation-left-preparing", APPLY,
     [('.bind(OperationStatus::Completed.as_str())',
       '.bind(OperationStatus::Preparing.as_str())')],
     "@rule:lifecycle.completed"),
    ("thread-id-holds-broadcast-scope", LIFECYCLE,
     [(".bind(plan.operation_scope_id.as_str())", ".bind(plan.broadcast_scope_id.as_str())")],
     "@rule:lifecycle.thread-id-no-broadcast"),
    ("failure-recorded-as-repair", SERVICE,
     [("OperationStatus::Failed,", "OperationStatus::RepairRequired,")], "@rule:lifecycle.failed"),
    ("drift-not-revalidated", APPLY,
     [('if now.remove(&1).unwrap_or_default() != primary.message_ids {',
       'if false && now.remove(&1).unwrap_or_default() != primary.message_ids {')],
     "@rule:conc.revalidate-suffix-before-apply"),
    ("scope-not-locked-before-revalidation", APPLY,
     [("\"SELECT id FROM scopes WHERE id = ANY($1) ORDER BY id FOR UPDATE\"", "\"SELECT id FROM scopes WHERE id = ANY($1) ORDER BY id\"")],
     "@rule:conc.revalidate-suffix-before-apply"),
    ("several-preparing-operations-allowed", SCHEMA,
     [("CREATE UNIQUE INDEX rewind_operations_one_preparing_idx", "CREATE INDEX rewind_operations_one_preparing_idx")],
     "@rule:conc.single-active-per-scope"),
    ("cascade-not-archived", APPLY,
     [("UPDATE scopes SET archived_at = now() WHERE id = $1", "UPDATE scopes SET archived_at = archived_at WHERE id = $1")],
     "@rule:cascade.archive-child-scope"),
    ("thread-parent-summary-stale", APPLY,
     [("        recompute::recompute_thread_parent(conn, thread.as_str()).await?;\n", "        let _ = thread;\n")],
     "@rule:recompute.reply-thread-summary"),
    ("non-tail-fork-allowed", GUARDS,
     [("if parent != last || ", "if parent == \"never\" || ")], "@rule:thread.non-tail-fork-blocked"),
    # Forks checked on the target and the tail only: a thread on a message between them (fixture
    # reply-thread-middle) lets the rewind through.
    ("middle-fork-allowed", GUARDS,
     [("    for (child, parent) in forks {",
       "    for (child, parent) in forks.iter().filter(|(_, p)| p == &suffix_ids[0] || p == last) {")],
     "@rule:thread.non-tail-fork-blocked"),
    # Archived reply threads taken for live ones: an archived fork blocks, an archived tail thread
    # cascades (and its other human's reply refuses the rewind).
    ("archived-forks-checked", PLAN,
     [('WHERE c.archived_at IS NULL ORDER BY c.id',
       'ORDER BY c.id')],
     "@rule:guard.cascade-active-child-topology"),
    ("cascade-other-human-unchecked", PLAN,
     [("guards::check_other_humans(initiator_user_id, &child).map_err(RewindError::refused)?;", "let _ = &child;")],
     "@rule:thread.cascade-other-human-guard"),
    ("event-to-primary-scope", REALTIME,
     [("let mut scopes = vec![&plan.broadcast_scope_id];", "let mut scopes = vec![&plan.scope_id];")],
     "@rule:realtime.conversation-rewound"),
    ("event-payload-carries-messages", REALTIME,
     [("                \"operationId\": operation_id,\n            }),",
       "                \"operationId\": operation_id,\n                \"messages\": [],\n            }),")],
     "@rule:realtime.payload-no-suffix-content"),
    # The invalidation doubles as a typed per-client sync payload: a tombstone page per surface.
    ("event-payload-is-a-sync-tombstone-page", REALTIME,
     [("                \"operationId\": operation_id,\n            }),",
       "                \"operationId\": operation_id,\n                \"sync\": {\"tombstones\": [], \"patch\": {}},\n            }),")],
     "@rule:surface.contract-not-sync-payload"),
    ("notice-without-client-id", REALTIME,
     [("client_message_id: Some(notice_client_id(operation_id)),", "client_message_id: None,")],
     "@rule:realtime.notice-idempotent-client-id"),
    ("notice-fans-out", REALTIME,
     [("fanout: false,", "fanout: true,")], "@rule:realtime.notice-no-notification"),
    ("deleted-machine-ignored", RECOVERY,
     [("if agent.agent_deleted || agent.machine_deleted {", "if agent.agent_deleted {")],
     "@rule:runtime.validate-agent-available"),
    ("strategy-mismatch-accepted", RECOVERY,
     [("Some(p) if p.strategy == capability.strategy => p,", "Some(p) => p,")],
     "@rule:runtime.validate-strategy-match"),
    ("activity-elsewhere-ignored", RECOVERY,
     [("if elsewhere {", "if false && elsewhere {")], "@rule:runtime.no-cross-scope-activity"),
    ("strategy-accepted-as-runtime", CAPABILITIES,
     [("find(|c| c.runtime == id)", "find(|c| c.runtime == id || c.strategy == id)")],
     "@rule:runtime.strategy-not-deliverable-runtime"),
    ("agent-acts-as-its-human", SERVICE,
     [("let Actor::Human(initiator) = &command.actor else {\n            return Err(RewindError::refused(crate::SpecError::InitiatorNotHuman));\n        };",
       "let alice = \"alice\".to_owned();\n        let initiator = match &command.actor {\n            Actor::Human(id) => id,\n            _ => &alice,\n        };")],
     "@rule:init.human-only"),
    ("agent-message-target-allowed", GUARDS,
     [("_ => return Err(SpecError::NotOwnHumanMessage),", "\"agent\" => {}\n        _ => return Err(SpecError::NotOwnHumanMessage),")],
     "@rule:init.own-human-target"),
    ("preview-kept-in-projections", SCRUB,
     [("    \"preview\",\n", "    \"not-a-key\",\n")], "@rule:inv.read-paths-no-suffix"),
    ("completed-operations-block", SCHEMA,
     [("    WHERE status = 'preparing';", "    WHERE status IN ('preparing', 'completed');")],
     "@rule:lifecycle.preparing-only-active"),
    ("notice-in-broadcast-scope", REALTIME,
     [("        scope_id: plan.scope_id.0.clone(),", "        scope_id: plan.broadcast_scope_id.0.clone(),")],
     "@rule:realtime.notice-system-message"),
    ("answer-ids-incomplete", SERVICE,
     [("                    rewound_message_ids,\n", "                    rewound_message_ids: rewound_message_ids.into_iter().skip(1).collect(),\n")],
     "@rule:realtime.api-rewound-ids-coarse"),
    ("unsupported-runtime-mapped-to-codex", CAPABILITIES,
     [("find(|c| c.runtime == id)", "find(|c| c.runtime == id).or(Some(CAPABILITIES[0]))")],
     "@rule:init.agent-capability"),
    ("missing-recovery-point-accepted", RECOVERY,
     [("None if capability.needs_recovery_point => {", "None if false => {")],
     "@rule:err.recovery-point-missing"),
    ("deleted-agent-accepted", RECOVERY,
     [("if agent.agent_deleted || agent.machine_deleted {", "if agent.machine_deleted {")],
     "@rule:err.agent-unavailable"),
    ("tail-thread-not-cascaded", PLAN,
     [("if let Some((child_scope, parent_message_id)) = tail_fork {", "if let Some((child_scope, parent_message_id)) = tail_fork.filter(|_| false) {")],
     "@rule:thread.tail-target-fork-cascades"),
    ("cascade-parent-summary-stale", APPLY,
     [("        recompute::recompute_reply_summary(conn, &cascade.parent_message_id).await?;\n", "")],
     "@rule:cascade.recompute-parent-message-summary"),
    ("cascade-facts-not-scrubbed", APPLY,
     [('scrub::scrub_suffix_facts(conn, &plan.boundary, variant).await?;',
       'scrub::scrub_suffix_facts(conn, &crate::plan::SuffixBoundary { cascades: Vec::new(), ..plan.boundary.clone() }, variant).await?;')],
     "@rule:cascade.suppress-child-state-facts"),
    ("membership-role-reset", RECOMPUTE,
     [("last_read_seq = least(sm.last_read_seq, t.seq), \\", "role = 'member', last_read_seq = least(sm.last_read_seq, t.seq), \\")],
     "@rule:inv.no-membership-change"),
    # Concurrency, realtime and recompute scenarios no earlier breakage reached.
    ("apply-lock-nowait", APPLY,
     [("SELECT id FROM scopes WHERE id = ANY($1) ORDER BY id FOR UPDATE\")",
       "SELECT id FROM scopes WHERE id = ANY($1) ORDER BY id FOR UPDATE NOWAIT\")")],
     "@rule:conc.lock-stats-read-state"),
    ("refusal-publishes-invalidation", SERVICE,
     [("        let Prepared {\n",
       "        self.sink.publish(crate::realtime::RealtimeEvent { name: \"conversation:rewound\".into(), "
       "scope_id: command.scope_id.clone(), payload: serde_json::json!({}) });\n"
       "        let Prepared {\n")],
     "@rule:realtime.failure-specific-errors"),
    ("seq-from-visible-count", MESSAGES,
     [("SELECT workspace_id, latest_seq, archived_at IS NOT NULL FROM scopes WHERE id = $1",
       "SELECT workspace_id, visible_message_count AS latest_seq, archived_at IS NOT NULL FROM scopes WHERE id = $1")],
     "@rule:recompute.no-seq-reuse"),
    # Scrub, clamp and recompute that reach past the suffix (spec 6.1-6.3): the rows of earlier
    # messages, other scopes and other conversations must stay as they were.
    ("search-docs-suffix-by-global-seq", SCRUB,
     [('"DELETE FROM scope_message_search_docs d USING suffix WHERE d.message_id = suffix.id"',
       '"DELETE FROM scope_message_search_docs d WHERE d.message_id IN (SELECT m.id FROM scope_messages m \\\n           JOIN scope_messages s ON s.workspace_id = m.workspace_id JOIN suffix ON suffix.id = s.id WHERE m.global_seq >= s.global_seq)"')],
     "@rule:apply.scrub-search-docs"),
    ("reactions-suffix-by-seq-unscoped", SCRUB,
     [('"DELETE FROM scope_message_reactions r USING suffix WHERE r.message_id = suffix.id"',
       '"DELETE FROM scope_message_reactions r WHERE r.message_id IN (SELECT m.id FROM scope_messages m \\\n           JOIN scope_messages s ON s.workspace_id = m.workspace_id JOIN suffix ON suffix.id = s.id WHERE m.seq >= s.seq)"')],
     "@rule:scope.parent-broadcast-not-tombstone"),
    ("recovery-points-by-global-seq", SCRUB,
     [('"DELETE FROM message_recovery_points p USING suffix WHERE p.message_id = suffix.id"',
       '"DELETE FROM message_recovery_points p WHERE p.message_id IN (SELECT m.id FROM scope_messages m \\\n         JOIN scope_messages s ON s.workspace_id = m.workspace_id JOIN suffix ON suffix.id = s.id WHERE m.global_seq >= s.global_seq)"')],
     "@rule:apply.delete-consumed-recovery-points"),
    ("read-cursors-clamped-workspace-wide", RECOMPUTE,
     [('FROM v t WHERE sm.scope_id = $1)"',
       'FROM v t WHERE sm.scope_id IN (SELECT w.id FROM scopes w \\\n           WHERE w.workspace_id = (SELECT workspace_id FROM scopes WHERE id = $1)))"')],
     "@rule:recompute.clamp-last-read-seq"),
    ("thread-clamp-reaches-parent", RECOMPUTE,
     [('FROM v t WHERE sm.scope_id = $1)"',
       'FROM v t WHERE sm.scope_id IN ($1, (SELECT parent_scope_id FROM scopes WHERE id = $1)))"')],
     "@rule:recompute.clamp-last-read-seq or @rule:scope.parent-broadcast-not-tombstone"),
    ("sync-dirty-clamped-workspace-wide", RECOMPUTE,
     [('WHERE d.scope_id = $1 AND d.latest_message_seq > t.seq)"',
       'WHERE d.latest_message_seq > t.seq AND d.scope_id IN (SELECT w.id FROM scopes w \\\n             WHERE w.workspace_id = (SELECT workspace_id FROM scopes WHERE id = $1)))"')],
     "@rule:apply.clamp-scope-sync-dirty or @rule:apply.clamp-member-scope-sync-dirty"),
    ("summary-skips-archived-scope", RECOMPUTE,
     [('FROM v WHERE s.id = $1)"',
       'FROM v WHERE s.id = $1 AND s.archived_at IS NULL)"')],
     "@rule:recompute.visible-summary-fields"),
    ("summary-skips-emptied-scope", RECOMPUTE,
     [('FROM scope_messages m WHERE m.scope_id = $1 AND {MESSAGE_NOT_REWOUND_SQL})"',
       'FROM scope_messages m WHERE m.scope_id = $1 AND {MESSAGE_NOT_REWOUND_SQL} GROUP BY m.scope_id)"')],
     "@rule:recompute.visible-summary-fields"),
    # Runtime recovery (spec section 5).
    ("restore-skipped", SERVICE,
     [("        self.restore_runtimes(&operation_id, &targets).await?;\n", "")],
     "@rule:sem.runtime-restore-first or @rule:runtime.restore-verify"),
    ("apply-before-restore", SERVICE,
     [('        self.restore_runtimes(&operation_id, &targets).await?;\n        match self.apply_and_announce(&plan, &operation_id, conn).await {',
       '        let applied = self.apply_and_announce(&plan, &operation_id, conn).await;\n        self.restore_runtimes(&operation_id, &targets).await?;\n        match applied {')],
     "@rule:runtime.apply-after-all-restores"),
    ("repair-recorded-as-failed", SERVICE,
     [("                    OperationStatus::RepairRequired,\n                    err.code_for(self.variant),",
       "                    OperationStatus::Failed,\n                    err.code_for(self.variant),")],
     "@rule:lifecycle.repair-required"),
    ("partial-restore-recorded-as-failed", SERVICE,
     [("let status = if restored == 0 && !maybe_changed {", "let status = if restored < usize::MAX {")],
     "@rule:lifecycle.repair-required"),
    # Precision steps: what the spec leaves open is accepted, what it requires still fails.
    ("restore-failure-claims-other-human", ERROR,
     [("#[error(\"runtime restore of agent `{agent_id}` ({runtime}) failed: {failure}\")]",
       "#[error(\"rewind is blocked because another human sent a later message\")]")],
     "@ambiguity:restore-failure-wording"),
    ("unknown-restore-outcome-completes", SERVICE,
     [("let status = if restored == 0 && !maybe_changed {\n                    OperationStatus::Failed",
       "let status = if restored == 0 && !maybe_changed {\n                    OperationStatus::Completed")],
     "@ambiguity:restore-outcome-unknown"),
    ("two-errors-share-a-code", ERROR,
     [("SpecError::LaterReplyThread => \"later_reply_thread\",",
       "SpecError::LaterReplyThread => \"other_human_message\",")],
     "@rule:err.later-reply-thread or @rule:err.other-human-message"),
    ("repair-hides-the-drift-message", ERROR,
     [("            | (\n                RewindError::RepairRequired {\n                    refusal: Some(error),\n                    ..\n                },\n                _,\n            ) => error.to_string(),",
       "            => error.to_string(),")],
     "@rule:lifecycle.repair-required"),
    ("fresh-session-not-recorded", SERVICE,
     [("UPDATE agents SET runtime_session_id = NULL WHERE id = $1",
       "UPDATE agents SET runtime_session_id = runtime_session_id WHERE id = $1")],
     "@rule:runtime.claude-before-first-input"),
    ("consumed-points-kept", SCRUB,
     [('DELETE FROM message_recovery_points p USING suffix WHERE p.message_id',
       'DELETE FROM message_recovery_points p USING suffix WHERE false AND p.message_id')],
     "@rule:apply.delete-consumed-recovery-points"),
    ("cascade-agents-ignored", PLAN,
     [('    let (scopes, froms) = boundary.ranges();\n    sqlx::query_scalar(',
       '    let (mut scopes, mut froms) = boundary.ranges();\n    scopes.truncate(1);\n    froms.truncate(1);\n    sqlx::query_scalar(')],
     "@rule:thread.cascade-runtime-restore"),
    ("codex-unverified", CODEX,
     [("    if after == expected {", "    if after == expected || !after.is_empty() || after.is_empty() {")],
     "@rule:runtime.restore-verify"),
    ("codex-keeps-target-turn", CODEX,
     [("    let num_turns = turns_to_drop(before.len(), turn_count)?;",
       "    let num_turns = turns_to_drop(before.len(), turn_count + 1)?;")],
     "@rule:runtime.codex-recovery-ref"),
    ("claude-rewinds-files", CLAUDE,
     [('    args.push(format!("--resume-session-at={boundary_uuid}"));\n',
       '    args.push(format!("--resume-session-at={boundary_uuid}"));\n    args.push("--rewind-files".to_owned());\n')],
     "@rule:runtime.claude-no-rewind-files"),
    # The prompt-less `--resume-session-at` run is trusted as the restore: nothing is bound to
    # the next delivery, which then continues from the old leaf (the real CLI's behaviour).
    ("claude-boundary-not-bound", CLAUDE,
     [("    write_pending(settings, session_id, boundary_uuid)?;\n", "")],
     "@rule:runtime.claude-recovery-ref"),
    # The boundary stays bound after the delivery that applied it: every later delivery
    # rewinds again.
    ("claude-boundary-applied-twice", CLAUDE,
     [("        if *bound {\n            clear_pending(settings, session_id)?;\n        }\n", "")],
     "@rule:runtime.claude-recovery-ref"),
    # The live chain is searched for the boundary among user and assistant messages only:
    # Claude Code 2.1.332 names a prompt_snapshot attachment as the leaf, and such a boundary
    # is then never found.
    ("claude-boundary-among-messages-only", CLAUDE,
     [("        self.entries.iter().position(|m| m.uuid == uuid)\n",
       "        self.messages.iter().position(|m| m.uuid == uuid)\n")],
     "@rule:runtime.claude-recovery-ref"),
    # A delivery that applies a bound boundary is not checked: a run without effect uses the
    # boundary up, and the rewind is lost.
    ("claude-bound-delivery-unverified", CLAUDE,
     [("        verify_continues_from(settings, session_id, boundary, &known)?;\n", "")],
     "@rule:runtime.claude-resume-session-at and @rule:runtime.restore-verify"),
    # On real runtime releases (`run --runtimes real`): what the runtime sends its model after a
    # rewind. A Claude delivery that resumes at the transcript's old leaf instead of the boundary
    # the restore bound to it (relying on the prompt-less `--resume-session-at` of the restore,
    # which the real CLI never applies) sends the model the rewound turns.
    ("real-claude-delivery-ignores-bound-boundary", CLAUDE,
     [("    if let Some(boundary) = read_pending(settings, session_id)? {",
       "    if let Some(boundary) = read_pending(settings, session_id)?.filter(|_| false) {")],
     "real @rule:runtime.lan-e2e-release-gate and @rule:guard.new-runtime-supported-gate"),
    # A Codex restore that leaves its app-server running, holding the thread: the real
    # app-server lets one process at a time load a thread, so the next delivery cannot.
    ("real-codex-restore-keeps-app-server", CODEX,
     [("            server.shut_down(grace).await;\n            result",
       "            std::mem::forget(server);\n            result")],
     "real @rule:guard.codex-lan-e2e"),
    # A Codex restore that starts an app-server of its own instead of going through the one
    # that holds the session live (a daemon's long-lived app-server): the real app-server lets
    # one process at a time write a thread, so the restore is refused. It passes on the mocks
    # and on detached real sessions; only a live one shows it.
    ("real-codex-restore-bypasses-live-app-server", CODEX,
     [("    let mut server = AppServer::spawn(settings)?;\n    let outcome =\n",
       "    let own = CodexSettings { env: settings.env.iter()\n"
       "        .filter(|(k, _)| k != \"REWIND_REAL_ATTACH\").cloned().collect(), ..settings.clone() };\n"
       "    let mut server = AppServer::spawn(&own)?;\n    let outcome =\n")],
     "real @rule:guard.codex-lan-e2e"),
    # An OpenCode restore that reverts nothing and calls it verified: the next prompt carries the
    # rewound turns to the model, on a live server and on a restarted one.
    ("real-opencode-reverts-nothing", OPENCODE,
     [("    if held.iter().all(|id| id.as_str() < message_id) {",
       "    if true || held.iter().all(|id| id.as_str() < message_id) {")],
     "real @rule:runtime.lan-e2e-release-gate and @rule:guard.new-runtime-supported-gate"),
    ("opencode-snapshots-accepted", OPENCODE,
     [("        Some(Value::Bool(false)) => Ok(()),", "        Some(_) | None => Ok(()),")],
     "@rule:runtime.opencode-context-only"),
    ("opencode-unverified", OPENCODE,
     [("        None | Some(Value::Null) => return Err(not_verified(\"no pending revert\".to_owned())),",
       "        None | Some(Value::Null) => return Ok(()),")],
     "@rule:runtime.restore-verify"),
    # Cascade drift, the notice after a failure, the global seq high-water.
    # Also what lets a parent channel's cascade overwrite a thread rewind that applied first,
    # archiving the thread with that rewind's notice still visible.
    ("cascade-drift-not-revalidated", APPLY,
     [('        if now.remove(&ord).unwrap_or_default() != cascade.message_ids {',
       '        if false && now.remove(&ord).unwrap_or_default() != cascade.message_ids {')],
     "@rule:conc.revalidate-suffix-before-apply"),
    ("notice-despite-failed-apply", SERVICE,
     [("            Err(err) if !targets.is_empty() => {\n",
       "            Err(err) if !targets.is_empty() => {\n"
       "                let _ = realtime::announce(&self.pool, self.sink.as_ref(), &plan, &operation_id).await;\n"),
      ("            Err(err) => {\n                let message = err.to_string();\n",
       "            Err(err) => {\n"
       "                let _ = realtime::announce(&self.pool, self.sink.as_ref(), &plan, &operation_id).await;\n"
       "                let message = err.to_string();\n")],
     "@rule:realtime.notice-only-after-success"),
    ("notice-despite-failed-restore", SERVICE,
     [("        self.restore_runtimes(&operation_id, &targets).await?;\n",
       "        if let Err(e) = self.restore_runtimes(&operation_id, &targets).await {\n"
       "            let _ = realtime::announce(&self.pool, self.sink.as_ref(), &plan, &operation_id).await;\n"
       "            return Err(e);\n"
       "        }\n")],
     "@rule:realtime.notice-only-after-success"),
    ("global-seq-from-visible-max", MESSAGES,
     [("\"UPDATE workspaces SET latest_global_seq = latest_global_seq + 1 WHERE id = $1 \\\n",
       "\"UPDATE workspaces SET latest_global_seq = (SELECT coalesce(max(m.global_seq), 0) + 1 \\\n"
       "         FROM scope_messages m WHERE m.workspace_id = $1 \\\n"
       "         AND coalesce(m.metadata #>> '{messageRecall,status}', '') <> 'rewound') WHERE id = $1 \\\n")],
     "@rule:recompute.no-global-seq-reuse"),
    # Read surfaces.
    ("notice-counted-unread", READS,
     [("                   AND {NOT_REWIND_NOTICE_SQL} \\\n", "")],
     "@rule:realtime.notice-no-unread"),
    ("derived-unread-counts-rewound", READS,
     [("WHERE m.scope_id = $1 AND m.seq > cursor.seq AND {MESSAGE_NOT_REWOUND_SQL}",
       "WHERE m.scope_id = $1 AND m.seq > cursor.seq")],
     "@rule:recompute.clamp-derived-read-cursor"),
    ("sync-returns-tombstones", READS,
     [("WHERE m.scope_id = $1 AND m.seq > $2 AND {MESSAGE_NOT_REWOUND_SQL}",
       "WHERE m.scope_id = $1 AND m.seq > $2")],
     "@rule:realtime.sync-no-tombstone-page"),
    ("builtin-not-capable", CAPABILITIES,
     [("        runtime: runtime::BUILTIN,", "        runtime: \"builtin-disabled\",")],
     "@rule:runtime.builtin-follows-opencode"),
    ("gc-keeps-points", GC,
     [("DELETE FROM message_recovery_points WHERE agent_id = $1",
       "DELETE FROM message_recovery_points WHERE false AND agent_id = $1")],
     "@rule:runtime.codex-gc-noop"),
    ("invalidation-published-before-commit", SERVICE,
     [('        match self.apply_and_announce(&plan, &operation_id, conn).await {',
       '        realtime::publish_rewound(self.sink.as_ref(), &plan, &operation_id, self.variant);\n        match self.apply_and_announce(&plan, &operation_id, conn).await {'),
      (REALTIME, '    publish_rewound(sink, plan, operation_id, Variant::Recommended);\n', '')],
     "@rule:realtime.post-commit"),
    ("only-latest-notice-not-unread", READS,
     [("const NOT_REWIND_NOTICE_SQL: &str = \"NOT (m.metadata ? 'rewindNotice')\";",
       "const NOT_REWIND_NOTICE_SQL: &str = \"m.client_message_id IS DISTINCT FROM (SELECT 'rewind-notice:' || o.id "
       "FROM rewind_operations o WHERE o.thread_id = m.scope_id ORDER BY o.created_at DESC LIMIT 1)\";")],
     "@rule:realtime.notice-no-unread"),
    # Every read surface (features/read-surfaces.feature): one surface at a time reads past the
    # readable gate, so stale projection rows bring a rewound message back on it alone.
    ("history-ungated", SURFACES,
     [("         ORDER BY r.seq LIMIT {}\",\n        readable(),",
       "         ORDER BY r.seq LIMIT {}\",\n        readable().replace(MESSAGE_NOT_REWOUND_SQL, \"true\"),")],
     "@rule:surface.history-authority"),
    ("search-trusts-search-docs", SURFACES,
     [("FROM unnest($2::text[]) w) \\\n         ORDER BY r.seq\",\n        readable()",
       "FROM unnest($2::text[]) w) \\\n         ORDER BY r.seq\",\n        readable().replace(MESSAGE_NOT_REWOUND_SQL, \"true\")")],
     "@reads and @rule:surface.projections-not-authority"),
    ("receive-ungated", SURFACES,
     [("IS DISTINCT FROM $2 \\\n         ORDER BY r.seq\",\n        readable()",
       "IS DISTINCT FROM $2 \\\n         ORDER BY r.seq\",\n        readable().replace(MESSAGE_NOT_REWOUND_SQL, \"true\")")],
     "@rule:guard.receive-invisible"),
    ("root-context-ungated", SURFACES,
     [("         WHERE s.id = $1\",\n        readable()", "         WHERE s.id = $1\",\n        readable().replace(MESSAGE_NOT_REWOUND_SQL, \"true\")")],
     "@rule:surface.source-context-authority"),
    ("sources-ungated", SURFACES,
     [("WHERE src.message_id = $1 ORDER BY r.scope_id, r.seq\",\n        readable()",
       "WHERE src.message_id = $1 ORDER BY r.scope_id, r.seq\",\n        readable().replace(MESSAGE_NOT_REWOUND_SQL, \"true\")")],
     "@rule:surface.source-context-authority"),
    ("source-of-rewound-citing-message", SURFACES,
     [("let citing = readable_message(", "let citing = ungated_message(")] + UNGATED_MESSAGE_DEF,
     "@rule:surface.source-context-authority"),
    ("share-cards-ungated", SURFACES,
     [("WHERE c.target_scope_id = $1 ORDER BY c.id\",\n        readable()",
       "WHERE c.target_scope_id = $1 ORDER BY c.id\",\n        readable().replace(MESSAGE_NOT_REWOUND_SQL, \"true\")")],
     "@reads and @rule:surface.projections-not-authority"),
    ("pins-ungated", SURFACES,
     [("WHERE p.scope_id = $1 ORDER BY r.seq\",\n        readable()",
       "WHERE p.scope_id = $1 ORDER BY r.seq\",\n        readable().replace(MESSAGE_NOT_REWOUND_SQL, \"true\")")],
     "@reads and @rule:surface.projections-not-authority"),
    ("reactions-ungated", SURFACES,
     [("let reacted = readable_message(", "let reacted = ungated_message(")] + UNGATED_MESSAGE_DEF,
     "@reads and @rule:surface.projections-not-authority"),
    ("by-id-ungated", SURFACES,
     [("        vec![readable_message(conn, scope, id).await?],", "        vec![ungated_message(conn, scope, id).await?],")]
     + UNGATED_MESSAGE_DEF,
     "@reads and @rule:surface.lifecycle-gate-reread"),
    ("attachment-ungated", SURFACES,
     [("let owner_message = readable_message(", "let owner_message = ungated_message(")] + UNGATED_MESSAGE_DEF,
     "@rule:surface.attachment-authority"),
    ("diagnostics-from-evidence", SURFACES,
     [("let diagnosed = readable_message(", "let diagnosed = ungated_message(")] + UNGATED_MESSAGE_DEF,
     "@rule:surface.diag-rewound-not-found"),
    ("diagnostics-preview-ungated", SURFACES,
     [("ORDER BY r.seq DESC LIMIT 20\",\n        readable()", "ORDER BY r.seq DESC LIMIT 20\",\n        readable().replace(MESSAGE_NOT_REWOUND_SQL, \"true\")")]
    ,
     "@rule:surface.diagnostics-preview-authority"),
    ("stream-replays-rewound", SURFACES,
     [("         ORDER BY e.id LIMIT {}\",\n        readable(),", "         ORDER BY e.id LIMIT {}\",\n        readable().replace(MESSAGE_NOT_REWOUND_SQL, \"true\"),")]
    ,
     "@reads and @rule:surface.stale-reference-no-revival"),
    ("conversation-index-trusts-stored-entry", SURFACES,
     [("\"SELECT {MESSAGE_COLUMNS} FROM {} r WHERE r.scope_id = $1 ORDER BY r.seq DESC LIMIT 1\",\n        readable()",
       "\"SELECT {MESSAGE_COLUMNS} FROM {} r WHERE r.scope_id = $1 ORDER BY (r.id IN (SELECT i.last_message_id \\\n"
       "         FROM im_conversation_index i WHERE i.scope_id = $1)) DESC, r.seq DESC LIMIT 1\",\n        readable().replace(MESSAGE_NOT_REWOUND_SQL, \"true\")")]
    ,
     "@reads and @rule:surface.stale-reference-no-revival"),
    ("recalled-read-as-rewound", SURFACES,
     [("          FROM scope_messages m WHERE {MESSAGE_NOT_REWOUND_SQL})\"",
       "          FROM scope_messages m WHERE {MESSAGE_NOT_REWOUND_SQL} \\\n"
       "            AND coalesce(m.metadata #>> '{{messageRecall,status}}', '') <> 'recalled')\"")],
     "@reads and @rule:sem.rewound-not-recalled"),
    # Bad reads are answered with their reason.
    ("reads-skip-membership", SURFACES, [("    if member {", "    if member || !member {")], "@bad-read"),
    ("unknown-scope-called-not-member", SURFACES,
     [("            ReadRejection::UnknownScope,", "            ReadRejection::NotMember,")], "@bad-read"),
    ("bad-cursor-read-from-start", SURFACES,
     [("        .filter(|n| *n >= 0)\n        .ok_or_else(", "        .filter(|n| *n >= 0)\n        .or(Some(0))\n        .ok_or_else(")],
     "@bad-read"),
    ("missing-message-id-read-as-empty", SURFACES,
     [("    value.as_deref().ok_or_else(|| {", "    value.as_deref().or(Some(\"\")).ok_or_else(|| {")], "@bad-read"),
    ("unknown-message-rejected", SURFACES,
     [("        .ok_or_else(|| not_found(format!(\"no message `{id}` in scope `{scope}`\")))",
       "        .ok_or_else(|| rejected(ReadRejection::BadRequest, format!(\"no message `{id}` in scope `{scope}`\")))")],
     "@bad-read"),
    # Live delivery (features/delivery.feature): the points the delivery path writes itself.
    ("codex-turncount-off-by-one", CODEX,
     [("recovery_ref: turns_ref(&opened.thread_id, opened.turn_count),",
       "recovery_ref: turns_ref(&opened.thread_id, opened.turn_count + 1),")],
     "@rule:runtime.codex-recovery-ref"),
    ("codex-point-after-delivery", CODEX,
     [("    if let Err(e) = commit(point).await {\n"
       "        server.shut_down(EXIT_GRACE).await;\n"
       "        return Err(DeliveryError::Commit(e));\n"
       "    }\n", ""),
      ("    let answered = settle(&mut server, answered, timeout);\n",
       "    let answered = settle(&mut server, answered, timeout);\n"
       "    commit(point).await.map_err(DeliveryError::Commit)?;\n")],
     "@rule:runtime.recovery-point-before-delivery"),
    ("claude-boundary-after-turn", CLAUDE,
     [("    commit(point).await.map_err(DeliveryError::Commit)?;\n\n    let session_id = plan.session_id();",
       "    let session_id = plan.session_id();"),
      ("            clear_pending(settings, session_id)?;\n        }\n    }\n    Ok(answer_text(&lines))",
       "            clear_pending(settings, session_id)?;\n        }\n    }\n"
       "    let after = plan_session(settings, Some(session_id))?;\n"
       "    commit(PointToCommit { recovery_ref: after.recovery_ref(), new_session: point.new_session })\n"
       "        .await\n        .map_err(DeliveryError::Commit)?;\n"
       "    Ok(answer_text(&lines))")],
     "@rule:runtime.claude-recovery-ref"),
    ("opencode-wrong-message-id", OPENCODE,
     [('recovery_ref: json!({ "sessionId": session_id, "messageId": message_id }),',
       'recovery_ref: json!({ "sessionId": session_id, "messageId": existing.last().cloned().unwrap_or_else(|| message_id.clone()) }),')],
     "@rule:runtime.opencode-recovery-ref"),
    ("no-point-for-first-delivery", DELIVERY,
     [("    if let Some(capability) = capability {",
       "    if let Some(capability) = capability.filter(|_| point.new_session.is_none()) {")],
     "@rule:runtime.recovery-point-before-delivery"),
    ("first-touch-authored-messages-only", RECOVERY,
     [("AND o.status IN ('leased', 'delivered')", "AND o.status IN ('never')")],
     "@rule:runtime.no-cross-scope-activity"),
    ("first-touch-any-time", RECOVERY,
     [("AND m.global_seq > a.since AND NOT m.scope_id = ANY($3)))\";",
       "AND m.global_seq > 0 AND NOT m.scope_id = ANY($3)))\";")],
     "@rule:runtime.no-cross-scope-activity"),
    ("notice-wakes-agents", REALTIME,
     [("        fanout: false,", "        fanout: true,")],
     "@rule:realtime.notice-no-agent-wake"),
    ("delivered-twice", DELIVERY,
     [("           AND status = 'pending' \\", "           AND status IN ('pending', 'delivered') \\")],
     "@rule:realtime.notice-no-agent-wake"),
    ("delivers-suppressed-rows", DELIVERY,
     [("           AND status = 'pending' \\", "           AND status IN ('pending', 'suppressed') \\")],
     "@rule:apply.suppress-fanout-outbox"),
    ("channel-fans-out-to-every-agent", MESSAGES,
     [("OR $5::jsonb ? sm.agent_id)", "OR $5::jsonb IS NOT NULL)")],
     "@rule:runtime.recovery-point-before-delivery"),
    ("channel-delivers-to-every-agent", MESSAGES,
     [("OR $5::jsonb ? sm.agent_id)", "OR $5::jsonb IS NOT NULL)"),
      (DELIVERY, '.filter(|agent| scope_kind != "channel" || mentions.contains(agent))',
       '.filter(|agent| scope_kind != "channel" || !mentions.contains(agent) || mentions.contains(agent))')],
     "@rule:runtime.recovery-point-before-delivery"),
    ("thread-reaches-no-agent", DELIVERY,
     [('.filter(|agent| scope_kind != "channel" || mentions.contains(agent))',
       '.filter(|agent| scope_kind == "dm" || (scope_kind == "channel" && mentions.contains(agent)))')],
     "@rule:runtime.claude-recovery-ref"),
    ("busy-revert-taken-as-restored", OPENCODE,
     [("    api.call(\n        Method::POST,\n        &[\"session\", session_id, \"revert\"],",
       "    match api.call(\n        Method::POST,\n        &[\"session\", session_id, \"revert\"],"),
      ("        &revert_action,\n    )\n    .await?;",
       "        &revert_action,\n    )\n    .await {\n"
       "        Err(RestoreFailure::Busy { .. }) => return Ok(Restored::Verified { detail: String::new() }),\n"
       "        other => {\n            other?;\n        }\n    }")],
     "@rule:runtime.opencode-session-revert"),
    ("codex-held-thread-taken-as-restored", CODEX,
     [("    let mode = load_thread(server, thread_id).await?;\n    let before",
       "    let mode = match load_thread(server, thread_id).await {\n"
       "        Err(e) if e.to_string().contains(\"active writer\") => {\n"
       "            return Ok(Restored::Verified { detail: String::new() })\n"
       "        }\n"
       "        other => other?,\n"
       "    };\n    let before")],
     "@rule:runtime.codex-thread-rollback"),
    # Codex restores by the thread's history mode: a legacy thread (Codex 0.155) taken for a
    # paginated one is reverted, which 0.155 refuses for legacy threads.
    ("codex-legacy-thread-reverted", CODEX,
     [("            Some(\"paginated\") => HistoryMode::Paginated,\n",
       "            Some(_) | None => HistoryMode::Paginated,\n")],
     "@rule:runtime.codex-thread-rollback"),
    # The restore (rollback or revert) is trusted without reading the turns back.
    ("codex-restore-not-read-back", CODEX,
     [("    let after = thread_turns(server, thread_id, mode).await?;\n    verify(",
       "    let after: Vec<String> = before.iter().take(turn_count as usize).cloned().collect();\n    verify(")],
     "@rule:runtime.restore-verify"),
    ("channel-first-mention-only", DELIVERY,
     [("reached.into_iter().cloned().collect()", "reached.into_iter().take(1).cloned().collect()")],
     "@rule:runtime.apply-after-all-restores"),
    ("answer-not-verbatim", DELIVERY,
     [("        content: answer.to_owned(),", "        content: answer.trim_end_matches(|c: char| c != ' ').to_owned(),")],
     "@rule:runtime.recovery-point-before-delivery"),
    ("failed-delivery-drops-point", DELIVERY,
     [("\"UPDATE scope_fanout_outbox SET status = 'failed', leased_until = NULL \\\n"
       "         WHERE id = ANY($1) AND status = 'leased'\",",
       "\"WITH f AS (UPDATE scope_fanout_outbox SET status = 'failed', leased_until = NULL \\\n"
       "         WHERE id = ANY($1) AND status = 'leased' RETURNING message_id, recipient_id) \\\n"
       "         DELETE FROM message_recovery_points p USING f \\\n"
       "         WHERE p.message_id = f.message_id AND p.agent_id = f.recipient_id\",")],
     "@rule:inv.recovery-point-lifecycle"),
    # Concurrency by the spec: only a `preparing` operation of the same primary scope stops a
    # rewind, and it stops it with a refusal, never a wait.
    # A workspace-wide lock held for the whole rewind: a second rewind of the scope waits, then
    # goes ahead; a rewind of another scope of the workspace waits too.
    ("workspace-wide-rewind-lock", SERVICE,
     [("    pub async fn rewind(&self, command: &RewindCommand) -> Result<RewindOutcome, RewindError> {\n",
       "    pub async fn rewind(&self, command: &RewindCommand) -> Result<RewindOutcome, RewindError> {\n"
       "        let mut serial = self.pool.acquire().await.db(\"acquiring a connection\")?;\n"
       "        sqlx::query(\"SELECT pg_advisory_lock(hashtext(coalesce((SELECT workspace_id FROM scopes WHERE id = $1), '')))\")\n"
       "            .bind(&command.scope_id)\n"
       "            .execute(&mut *serial)\n"
       "            .await\n"
       "            .db(\"locking the workspace\")?;\n"
       "        let result = self.rewind_serialized(command).await;\n"
       "        let _ = sqlx::query(\"SELECT pg_advisory_unlock_all()\").execute(&mut *serial).await;\n"
       "        result\n"
       "    }\n\n"
       "    async fn rewind_serialized(&self, command: &RewindCommand) -> Result<RewindOutcome, RewindError> {\n")],
     "@rule:conc.single-active-per-scope"),
    # The same lock per scope: a second rewind of the scope waits for the first, then goes ahead.
    ("same-scope-waits-then-proceeds", SERVICE,
     [("    pub async fn rewind(&self, command: &RewindCommand) -> Result<RewindOutcome, RewindError> {\n",
       "    pub async fn rewind(&self, command: &RewindCommand) -> Result<RewindOutcome, RewindError> {\n"
       "        let mut serial = self.pool.acquire().await.db(\"acquiring a connection\")?;\n"
       "        sqlx::query(\"SELECT pg_advisory_lock(hashtext($1))\")\n"
       "            .bind(&command.scope_id)\n"
       "            .execute(&mut *serial)\n"
       "            .await\n"
       "            .db(\"locking the scope\")?;\n"
       "        let result = self.rewind_serialized(command).await;\n"
       "        let _ = sqlx::query(\"SELECT pg_advisory_unlock_all()\").execute(&mut *serial).await;\n"
       "        result\n"
       "    }\n\n"
       "    async fn rewind_serialized(&self, command: &RewindCommand) -> Result<RewindOutcome, RewindError> {\n")],
     "@rule:err.rewind-in-progress"),
    # One active operation per workspace instead of per primary scope: a rewind of another scope
    # is refused as "in progress".
    ("one-preparing-per-workspace", SCHEMA,
     [("CREATE UNIQUE INDEX rewind_operations_one_preparing_idx ON rewind_operations (thread_id)",
       "CREATE UNIQUE INDEX rewind_operations_one_preparing_idx ON rewind_operations (workspace_id)")],
     "@rule:scope.scope-id-transaction-boundary"),
    # The conversation index answers the scope's physical last row, a tombstone in a cascaded
    # thread (after a rewind of the scope itself it is the notice, which is also the readable tail).
    ("conversation-index-physical-tail", SURFACES,
     [("        readable()\n    );\n    let last = messages_of(conn, sql, scope).await?;",
       "        readable().replace(MESSAGE_NOT_REWOUND_SQL, \"true\")\n    );\n    let last = messages_of(conn, sql, scope).await?;")],
     "@reads and @rule:surface.stale-reference-no-revival"),
    # Database faults: the operation must say what happened, and nothing be half-applied.
    # A database error ends the rewind without recording the failure: `preparing` forever.
    ("database-error-leaves-preparing", SERVICE,
     [("            Err(err) => {\n                let message = err.to_string();",
       "            Err(err @ RewindError::Database { .. }) => Err(err),\n"
       "            Err(err) => {\n                let message = err.to_string();")],
     "@rule:conc.diagnosable-failure-status"),
    # A database error after a runtime was restored is recorded `failed`, as if nothing had.
    ("database-error-after-restore-recorded-failed", SERVICE,
     [("                    OperationStatus::RepairRequired,\n                    err.code_for(self.variant),",
       "                    if matches!(err, RewindError::Database { .. }) {\n"
       "                        OperationStatus::Failed\n"
       "                    } else {\n"
       "                        OperationStatus::RepairRequired\n"
       "                    },\n                    err.code_for(self.variant),")],
     "@rule:lifecycle.repair-required"),
    # The scrub commits on a session of its own: a failure before the tombstones leaves the
    # projections gone and the messages visible.
    ("scrub-outside-the-apply-transaction", APPLY,
     [('    scrub::scrub_suffix_facts(conn, &plan.boundary, variant).await?;\n',
       '    scrub::scrub_suffix_facts(conn, &plan.boundary, variant).await?;\n    sqlx::raw_sql("COMMIT; BEGIN").execute(&mut *conn).await.db("splitting the apply")?;\n')],
     "@rule:apply.single-transaction"),
    # Bad input over the contract: a NUL character reaches the database (a 500), and a live
    # send to an unknown scope or by an unknown author fails inside instead of being rejected.
    ("nul-reaches-the-database", DRIVER,
     [("    if find(&value, &mut path) {", "    if false && find(&value, &mut path) {")],
     "@contract"),
    ("send-unchecked", DRIVER,
     [("        self.check_author_and_scope(&mut conn, &message.actor, &message.scope_id)\n            .await?;\n", "")],
     "@contract"),
    # Missed by every hand-written scenario (none rewinds over a recalled placeholder), caught
    # by the generated cases and the spec model: a recalled message in the suffix stays a
    # placeholder instead of becoming a tombstone.
    ("recalled-suffix-message-not-tombstoned", APPLY,
     [('     RETURNING m.id, m.seq, b.ord";\nconst TOMBSTONE_TOP_LEVEL_AT_SQL',
       '       AND coalesce(m.metadata #>> \'{messageRecall,status}\', \'\') <> \'recalled\' \\\n     RETURNING m.id, m.seq, b.ord";\nconst TOMBSTONE_TOP_LEVEL_AT_SQL')],
     "fuzz --cases 100 --seed 7"),
    ("opencode-reverts-to-an-absent-message", OPENCODE,
     [("    if held.iter().all(|id| id.as_str() < message_id) {",
       "    if held.iter().all(|id| id.as_str() < message_id) && held.is_empty() && !held.is_empty() {")],
     "@rule:inv.recovery-point-lifecycle"),
    # The reference browser client (features/client.feature, section 8's client duties): each
    # breakage is a client that gets one step of the rewind recovery or the stale guard wrong.
    ("client-persists-cursor-before-generation-check", CLIENT,
     [("      if (!page) return;\n      if (generation !== this.generation) {",
       "      if (!page) return;\n      if (page.cursor) localStorage.setItem(CURSOR_KEY(this.scopeId), page.cursor);\n"
       "      if (generation !== this.generation) {")],
     "@rule:realtime.client-stale-return-early"),
    ("client-persists-resume-cursor-before-generation-check", CLIENT,
     [("    this.outstanding.delete(frame.requestId);\n",
       "    this.outstanding.delete(frame.requestId);\n"
       "    if (frame.cursor) localStorage.setItem(CURSOR_KEY(this.scopeId), frame.cursor);\n")],
     "@rule:realtime.client-stale-return-early"),
    ("client-follows-hasmore-on-stale-page", CLIENT,
     [("      if (generation !== this.generation) {\n        this.stale();\n        return;",
       "      if (generation !== this.generation) {\n        this.stale();\n"
       "        if (page.hasMore) this.post(\"/sync/messages\", { scopeId: this.scopeId, cursor: page.cursor });\n        return;")],
     "@rule:realtime.client-stale-return-early"),
    ("client-queues-two-syncs", CLIENT,
     [("      this.freshQueued = false;\n      this.sync();", "      this.freshQueued = false;\n      this.sync();\n      this.sync();")],
     "@rule:realtime.client-stale-queue-fresh-sync"),
    ("client-skips-search-refetch", CLIENT,
     [("      this.query === null\n", "      this.query === null || this.generation > 0\n")],
     "@rule:realtime.client-refresh-surfaces"),
    ("client-bootstraps-before-refetch", CLIENT,
     [("    await this.refreshAll();\n    // 4. A fresh syncGap",
       "    await this.sync(null);\n    await this.refreshAll();\n    // 4. A fresh syncGap"),
      ("    if (generation === this.generation) await this.sync(null);\n", "")],
     "@rule:realtime.client-recovery-order"),
    ("client-clears-cursor-after-refetch", CLIENT,
     [("    this.cursor = null;\n    localStorage.removeItem(CURSOR_KEY(this.scopeId));\n", ""),
      ("    await this.refreshAll();\n    // 4. A fresh syncGap",
       "    await this.refreshAll();\n    this.cursor = null;\n    localStorage.removeItem(CURSOR_KEY(this.scopeId));\n    // 4. A fresh syncGap")],
     "@rule:realtime.client-recovery-order"),
    ("client-keeps-cursor-across-rewind", CLIENT,
     [("    this.cursor = null;\n    localStorage.removeItem(CURSOR_KEY(this.scopeId));\n", "")],
     "@rule:realtime.client-cursor-rewind-boundary"),
    ("client-resyncs-from-a-cursor-stored-during-the-refetch", CLIENT,
     [("if (generation === this.generation) await this.sync(null);",
       "if (generation === this.generation) await this.sync();")],
     "@rule:realtime.client-cursor-rewind-boundary"),
    ("client-keeps-resume-generation", CLIENT,
     [("    this.generation += 1;\n    const generation = this.generation;\n    this.outstanding.clear();\n",
       "    const generation = this.generation;\n")],
     "@rule:realtime.client-stale-responses-guarded"),
    ("client-ignores-rewound-while-recovering", CLIENT,
     [("  async recover() {\n", "  async recover() {\n    if (this.recovering) return;\n    this.recovering = true;\n"),
      ("    if (generation === this.generation) await this.sync(null);\n",
       "    if (generation === this.generation) await this.sync(null);\n    this.recovering = false;\n")],
     "@rule:realtime.client-recovery-order"),
    ("client-applies-refetch-of-an-older-generation", CLIENT,
     [("if (!body || this.latest.get(surface) !== number || generation !== this.generation) return;",
       "if (!body) return;")],
     "@rule:realtime.client-recovery-order"),
    ("client-recovers-on-notice-event-only", CLIENT,
     [("        if (payload.scopeId === this.scopeId || payload.rewindScopeId === this.scopeId) {\n          this.recover();\n        }",
       "        break;"),
      ("        if (payload.scopeId === this.scopeId) {\n          this.resume();",
       "        if (JSON.stringify(payload).includes(\"rewind-notice:\")) this.recover();\n"
       "        if (payload.scopeId === this.scopeId) {\n          this.resume();")],
     "@rule:realtime.notice-recovery-via-refetch"),
]


def by_file(path, edits):
    """The edits of a mutation grouped by file: an edit is `(old, new)` in the mutation's file,
    or `(file, old, new)` in another one (a breakage that moves code between files)."""
    grouped = {}
    for edit in edits:
        file, old, new = edit if len(edit) == 3 else (path, *edit)
        grouped.setdefault(file, []).append((old, new))
    return grouped


def run(cmd, cwd, env, quiet=True):
    out = subprocess.DEVNULL if quiet else None
    return subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=out).returncode


def run_suite(binary, cwd, env, tags):
    """Runs the suite; returns the exit code and the `file:line` of each failed scenario. A
    mutation whose expression starts with `fuzz` is for the generated cases instead: the rest
    are the `fuzz` command's options (e.g. `fuzz --cases 100 --seed 7`)."""
    if tags.startswith("fuzz"):
        command = [binary, *tags.split(), "--shrink-cases", "0", "-c", "4"]
    elif tags.startswith("real "):
        command = [binary, "run", "-c", "4", "--runtimes", "real", "--tags", tags[len("real "):]]
    else:
        command = [binary, "run", "-c", "4", "--tags", tags]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    failed = set()
    for line in done.stdout.splitlines():
        m = re.match(r"^\s{6}(features/\S+\.feature):(\d+) ", line)
        if m:
            failed.add((m.group(1), int(m.group(2))))
    return done.returncode, failed


def scenarios(work):
    """Every scenario header of the feature files: (file, line, name)."""
    found = []
    for base, _dirs, files in os.walk(os.path.join(work, "features")):
        for name in sorted(files):
            if not name.endswith(".feature"):
                continue
            path = os.path.join(base, name)
            rel = os.path.relpath(path, work)
            with open(path, encoding="utf-8") as f:
                for number, text in enumerate(f, 1):
                    stripped = text.strip()
                    if stripped.startswith(("Scenario:", "Scenario Outline:", "Example:")):
                        found.append((rel, number, stripped.split(":", 1)[1].strip()))
    return found


def owner(headers, file, line):
    """The scenario header at or above `line` in `file` (outline examples report their row)."""
    best = None
    for h in headers:
        if h[0] == file and h[1] <= line and (best is None or h[1] > best[1]):
            best = h
    return best


def check_only(words):
    """Checks that every selected mutation applies to the work tree, without building."""
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True).stdout.strip()
    bad = 0
    for ident, path, edits, _ in MUTATIONS:
        if words and not any(w in ident for w in words):
            continue
        for file, file_edits in by_file(path, edits).items():
            with open(os.path.join(root, file), encoding="utf-8") as f:
                text = f.read()
            for old, _new in file_edits:
                if text.count(old) != 1:
                    print(f"  {ident}: `{old}` occurs {text.count(old)} times in {file}")
                    bad += 1
    print(f"mutation-check --check: {len(MUTATIONS)} mutations, {bad} do not apply")
    return 1 if bad else 0


def main():
    words = [a for a in sys.argv[1:] if a != "--check"]
    if "--check" in sys.argv[1:]:
        return check_only(words)
    selected = [m for m in MUTATIONS if not words or any(w in m[0] for w in words)]
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True).stdout.strip()
    if not root:
        print("mutation-check: run it inside the repository", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="rewind-mutants-")
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=root, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", work], input=archive, check=True)
    # `git archive` stamps files with the commit time; make them newer than anything a reused
    # target directory holds, so cargo rebuilds the workspace crates.
    subprocess.run(["find", work, "-type", "f", "-exec", "touch", "{}", "+"], check=True)
    env = dict(os.environ, CARGO_TARGET_DIR=os.environ.get("MUTANTS_TARGET_DIR", os.path.join(work, "target")))
    binary = os.path.join(env["CARGO_TARGET_DIR"], "debug", "rewind-conformance")
    print(f"mutation-check: {len(selected)} mutations in {work}", flush=True)
    if run(["cargo", "build", "-q", "--features", "browser", "--bin", "rewind-conformance"], work, env, quiet=False) != 0:
        return 2
    if run([binary, "run", "-c", "4"], work, env) != 0:
        print("mutation-check: the unmutated suite does not pass; fix that first", file=sys.stderr)
        return 2
    missed = 0
    headers = scenarios(work)
    seen_failing = set()
    for ident, path, edits, tags in selected:
        originals = {}
        for file, file_edits in by_file(path, edits).items():
            target = os.path.join(work, file)
            with open(target, encoding="utf-8") as f:
                originals[target] = f.read()
            mutated = originals[target]
            for old, new in file_edits:
                if mutated.count(old) != 1:
                    print(f"  {ident:36} SETUP: `{old}` occurs {mutated.count(old)} times in {file}")
                    for restore, text in originals.items():
                        with open(restore, "w", encoding="utf-8") as f:
                            f.write(text)
                    return 2
                mutated = mutated.replace(old, new)
            with open(target, "w", encoding="utf-8") as f:
                f.write(mutated)
        started = time.time()
        try:
            if run(["cargo", "build", "-q", "--features", "browser", "--bin", "rewind-conformance"], work, env) != 0:
                verdict = "BUILD FAILED (mutation is invalid)"
                missed += 1
            else:
                code, failed = run_suite(binary, work, env, tags)
                for file, line in failed:
                    header = owner(headers, file, line)
                    if header:
                        seen_failing.add(header)
                verdict = {0: "MISSED", 1: "caught"}.get(code, f"harness error (exit {code})")
                if code != 1:
                    missed += 1
        finally:
            for restore, text in originals.items():
                with open(restore, "w", encoding="utf-8") as f:
                    f.write(text)
        print(f"  {ident:36} {verdict:10} {tags}  ({time.time() - started:.0f}s)", flush=True)
    print(f"mutation-check: {len(selected) - missed} of {len(selected)} caught")
    never = [h for h in headers if h not in seen_failing]
    print(f"mutation-check: {len(headers) - len(never)} of {len(headers)} scenarios failed under some mutation")
    for file, line, name in never:
        print(f"  never failed: {file}:{line} {name}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
