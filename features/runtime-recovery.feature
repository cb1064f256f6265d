Feature: Runtime recovery (spec sections 1, 4, 5, 6.1, 6.4 and 10)
  Every agent the suffix reached is first returned, through its runtime's own
  restore mechanism, to the state before the target entered it; the restore is
  verified through the runtime's own read-back, and only when every restore
  succeeded is the conversation tombstoned. The mock runtimes speak the real
  protocols (codex app-server, claude CLI, opencode server; builtin is served by
  opencode) and journal every call they receive.

  @rule:runtime.codex-thread-rollback @rule:runtime.codex-recovery-ref @rule:sem.runtime-restore-first @rule:runtime.restore-verify @rule:sem.recovery-ref-column @rule:runtime.recovery-point-is-restore-ref @rule:runtime.capable-runtimes
  Scenario: a codex agent is rolled back to the turns before the target, then the DM is rewound
    Given the conversation "runtime-agents"
    When human "alice" rewinds to before message "codex-3"
    Then the rewind completes
    And the runtime of agent "cody" was restored to its recovery point for message "codex-3"
    And the codex thread of agent "cody" has turns "turn-1"
    And every runtime restore happened before the first tombstone
    And messages "codex-3, codex-4" are rewound tombstones

  # Every projection kind and delivery fact around a suffix a codex agent took part in, with a
  # recalled placeholder just before the target and a private grant on the channel.
  @rule:runtime.apply-after-all-restores @rule:sem.scrub-leaking-projections @rule:sem.rewound-not-recalled @rule:inv.no-private-grant-change
  Scenario: a codex agent in a suffix with every projection kind is restored first, then only the suffix is scrubbed
    Given the conversation "all-projections"
    When human "alice" rewinds to before message "msg-p-5"
    Then the rewind completes
    And the runtime of agent "agent-codex" was restored to its recovery point for message "msg-p-5"
    And the codex thread of agent "agent-codex" has turns "turn-1"
    And every runtime restore happened before the first tombstone
    And messages "msg-p-5, msg-p-6, msg-p-7, msg-p-8" are rewound tombstones
    And messages "msg-p-1, msg-p-2, msg-p-3, msg-p-4, msg-o-1, msg-o-2" are untouched
    And every projection, delivery fact and recovery point not bound to messages "msg-p-5, msg-p-6, msg-p-7, msg-p-8" is as before
    And no transcript or projection holds the canaries of messages "msg-p-5, msg-p-6, msg-p-7, msg-p-8"
    And no membership or private grant changed

  @rule:runtime.codex-recovery-ref @rule:runtime.codex-thread-rollback
  Scenario: turnCount 0 rewinds a codex agent's first turn
    Given the conversation "runtime-agents"
    When human "alice" rewinds to before message "codex-1"
    Then the rewind completes
    And the runtime of agent "cody" was restored to its recovery point for message "codex-1"
    And the codex thread of agent "cody" has no turns

  @rule:runtime.codex-thread-rollback @rule:runtime.apply-after-all-restores @rule:runtime.restore-verify @ambiguity:restore-failure-wording
  Scenario: a Codex release without thread/rollback fails the restore with nothing applied, or restores by thread/revert
    Given the conversation "runtime-agents"
    And the codex runtime is release "0.171.0"
    When human "alice" rewinds to before message "codex-3"
    Then the rewind of "codex-3, codex-4" either fails the codex restore of agent "cody", leaving them and its thread as they were, or completes with the thread restored to its recovery point for message "codex-3"

  @rule:runtime.codex-thread-rollback @rule:runtime.codex-recovery-ref @rule:runtime.restore-verify
  Scenario: on Codex 0.155 a legacy-history thread is rolled back with thread/rollback
    Given the conversation "runtime-agents"
    And the codex runtime is release "0.155.1"
    When human "alice" rewinds to before message "codex-3"
    Then the rewind completes
    And the runtime of agent "cody" was restored to its recovery point for message "codex-3"
    And the codex thread of agent "cody" has turns "turn-1"
    And messages "codex-3, codex-4" are rewound tombstones

  @rule:runtime.codex-thread-rollback @rule:runtime.apply-after-all-restores @rule:runtime.restore-verify @ambiguity:restore-failure-wording
  Scenario: a codex thread another app-server holds is not rolled back, and nothing is applied
    Given the conversation "runtime-agents"
    And another codex app-server holds the thread of agent "cody"
    When human "alice" rewinds to before message "codex-3"
    Then the rewind is refused as a failed runtime restore
    And messages "codex-3, codex-4" are untouched
    And no rewind operation is recorded but a failed one
    And the codex session of agent "cody" is as seeded

  @rule:runtime.claude-resume-session-at @rule:runtime.claude-recovery-ref @rule:runtime.claude-no-rewind-files @rule:runtime.formal-strategies @rule:sem.no-workspace-restore @rule:runtime.restore-verify @ambiguity:claude-restore-evidence
  Scenario: a claude agent resumes its session at the boundary before the target, without rewinding files
    Given the conversation "runtime-agents"
    When human "alice" rewinds to before message "claude-3"
    Then the rewind completes
    And the runtime of agent "clio" was restored to its recovery point for message "claude-3"
    And no claude run passed "--rewind-files"
    And every runtime restore happened before the first tombstone
    And messages "claude-3, claude-4" are rewound tombstones

  @rule:runtime.claude-before-first-input @rule:runtime.claude-recovery-ref @ambiguity:claude-restore-evidence
  Scenario: rewinding a claude agent to before its first input starts a fresh session instead of resuming
    Given the conversation "runtime-agents"
    When human "alice" rewinds to before message "claude-1"
    Then the rewind completes
    And agent "clio" starts its next delivery in a fresh session
    And the claude runtime received no call
    And messages "claude-1, claude-2, claude-3, claude-4" are rewound tombstones

  @rule:runtime.opencode-session-revert @rule:runtime.opencode-recovery-ref @rule:runtime.formal-strategies @rule:runtime.restore-verify
  Scenario: an opencode agent's session is reverted to the prompt the target was delivered as
    Given the conversation "runtime-agents"
    When human "alice" rewinds to before message "opencode-3"
    Then the rewind completes
    And the runtime of agent "ode" was restored to its recovery point for message "opencode-3"
    And every runtime restore happened before the first tombstone
    And messages "opencode-3, opencode-4" are rewound tombstones

  @rule:runtime.builtin-follows-opencode @rule:runtime.opencode-session-revert @rule:runtime.capable-runtimes
  Scenario: a builtin agent is restored as an opencode session
    Given the conversation "runtime-agents"
    When human "alice" rewinds to before message "builtin-3"
    Then the rewind completes
    And the runtime of agent "bix" was restored to its recovery point for message "builtin-3"
    And messages "builtin-3, builtin-4" are rewound tombstones

  @rule:runtime.opencode-context-only @rule:sem.no-workspace-restore @ambiguity:restore-failure-wording @ambiguity:opencode-context-only
  Scenario: an opencode server that would also revert files is not used for a rewind
    Given the conversation "runtime-agents"
    And the opencode server keeps file snapshots
    When human "alice" rewinds to before message "opencode-3"
    Then the rewind is refused as a failed runtime restore
    And the opencode runtime received no "revert" call
    And messages "opencode-3, opencode-4" are untouched
    And no rewind operation is recorded but a failed one

  @rule:thread.cascade-runtime-restore @rule:runtime.flow-order @ambiguity:claude-restore-evidence
  Scenario Outline: an agent reached only through the cascaded reply thread is restored too (<runtime>)
    Given the conversation "runtime-agents"
    When human "alice" rewinds to before message "<runtime>-c3"
    Then the rewind completes
    And the runtime of agent "<agent>" was restored to its recovery point for message "<runtime>-t1"
    And every runtime restore happened before the first tombstone
    And messages "<runtime>-c3, <runtime>-t1, <runtime>-t2" are rewound tombstones
    And messages "<runtime>-c1, <runtime>-c2" are untouched

    Examples:
      | runtime  | agent  |
      | codex    | cody-t |
      | claude   | clio-t |
      | opencode | ode-t  |
      | builtin  | bix-t  |

  @rule:runtime.apply-after-all-restores @rule:runtime.flow-order @ambiguity:claude-restore-evidence
  Scenario: every related agent is restored before anything is tombstoned
    Given the conversation "channel-two-humans-two-agents"
    When human "alice" rewinds to before message "msg-ch-7"
    Then the rewind completes
    And the runtime of agent "agent-claude" was restored to its recovery point for message "msg-ch-7"
    And the runtime of agent "agent-opencode" was restored to its recovery point for message "msg-ch-7"
    And every runtime restore happened before the first tombstone

  @rule:runtime.apply-after-all-restores @rule:lifecycle.repair-required @rule:realtime.notice-only-after-success @ambiguity:restore-failure-wording
  Scenario: a second agent's failed restore applies nothing, and a restore that already ran asks for repair
    Given the conversation "channel-two-humans-two-agents"
    And the opencode runtime answers the restore of agent "agent-opencode" with "error"
    When human "alice" rewinds to before message "msg-ch-7"
    Then the rewind is refused as a failed runtime restore
    And messages "msg-ch-7, msg-ch-8, msg-ch-9" are untouched
    And the operation is "repair_required" if another agent's runtime was restored first, else "failed"
    And no rewind notice was posted
    And no "message.created" event was published

  @rule:lifecycle.repair-required @rule:conc.revalidate-suffix-before-apply @rule:conc.no-partial-success @rule:realtime.notice-only-after-success
  Scenario: newer activity during the restore leaves a restored runtime and an operation that needs repair
    Given the conversation "runtime-agents"
    And the codex runtime delays the restore of agent "cody" by 1500 ms
    When human "alice" starts rewinding to before message "codex-3"
    And the codex runtime has received the restore of agent "cody"
    And the harness appends a message by human "alice" to scope "dm-codex"
    And the started rewind finishes
    Then the rewind is refused with "rewind is blocked because newer activity changed the conversation"
    And messages "codex-3, codex-4" are untouched
    And the rewind operation has status "repair_required"
    And no rewind notice was posted
    And no "message.created" event was published

  @rule:apply.delete-consumed-recovery-points @rule:inv.recovery-point-lifecycle @ambiguity:consumed-recovery-points
  Scenario: the rewind deletes only the recovery points of the rewound messages
    Given the conversation "runtime-agents"
    When human "alice" rewinds to before message "codex-3"
    Then the rewind completes
    And the recovery points of agent "cody" are for messages "codex-1"

  @rule:runtime.codex-gc-noop @rule:runtime.codex-gc-no-side-effects @rule:runtime.codex-transcript-mutation-rewind-only @rule:inv.recovery-point-lifecycle
  Scenario: pruning codex recovery points never reaches the runtime
    Given the conversation "runtime-agents"
    When the recovery points of agent "cody" are pruned
    Then the recovery points of agent "cody" are for messages ""
    And the codex runtime received no call
    And the codex thread of agent "cody" has turns "turn-1, turn-2"

  @rule:runtime.flow-order @rule:runtime.validate-agent-available @rule:runtime.validate-strategy-match @rule:runtime.no-cross-scope-activity @rule:err.agent-unavailable @rule:err.recovery-point-missing @rule:err.agent-cross-scope-activity
  Scenario Outline: a <runtime> agent that fails validation blocks the rewind before its runtime is called (<problem>)
    Given the conversation "runtime-agents"
    And agent "<agent>" has this problem: <problem>
    When human "alice" rewinds to before message "<runtime>-3"
    Then the rewind is refused with "<message>"
    And the database is unchanged
    And no rewind operation is recorded but a failed one
    And no runtime received a call

    Examples: codex
      | runtime | agent | problem                                  | message                                                                                           |
      | codex   | cody  | the agent was deleted                    | rewind is blocked because a related agent is no longer available for recovery                     |
      | codex   | cody  | the agent's machine was deleted          | rewind is blocked because a related agent is no longer available for recovery                     |
      | codex   | cody  | the recovery points were removed         | rewind is blocked because a required recovery point is missing                                    |
      | codex   | cody  | the recovery points use another strategy | rewind is blocked because a required recovery point is missing                                    |
      | codex   | cody  | activity in another conversation         | rewind is blocked because a related agent touched another conversation after first participation |

    Examples: claude
      | runtime | agent | problem                                  | message                                                                                           |
      | claude  | clio  | the agent was deleted                    | rewind is blocked because a related agent is no longer available for recovery                     |
      | claude  | clio  | the agent's machine was deleted          | rewind is blocked because a related agent is no longer available for recovery                     |
      | claude  | clio  | the recovery points were removed         | rewind is blocked because a required recovery point is missing                                    |
      | claude  | clio  | the recovery points use another strategy | rewind is blocked because a required recovery point is missing                                    |
      | claude  | clio  | activity in another conversation         | rewind is blocked because a related agent touched another conversation after first participation |

    Examples: opencode
      | runtime  | agent | problem                                  | message                                                                                           |
      | opencode | ode   | the agent was deleted                    | rewind is blocked because a related agent is no longer available for recovery                     |
      | opencode | ode   | the agent's machine was deleted          | rewind is blocked because a related agent is no longer available for recovery                     |
      | opencode | ode   | the recovery points were removed         | rewind is blocked because a required recovery point is missing                                    |
      | opencode | ode   | the recovery points use another strategy | rewind is blocked because a required recovery point is missing                                    |
      | opencode | ode   | activity in another conversation         | rewind is blocked because a related agent touched another conversation after first participation |

    Examples: builtin
      | runtime | agent | problem                                  | message                                                                                           |
      | builtin | bix   | the agent was deleted                    | rewind is blocked because a related agent is no longer available for recovery                     |
      | builtin | bix   | the agent's machine was deleted          | rewind is blocked because a related agent is no longer available for recovery                     |
      | builtin | bix   | the recovery points were removed         | rewind is blocked because a required recovery point is missing                                    |
      | builtin | bix   | the recovery points use another strategy | rewind is blocked because a required recovery point is missing                                    |
      | builtin | bix   | activity in another conversation         | rewind is blocked because a related agent touched another conversation after first participation |

  @rule:err.agent-unsupported @rule:runtime.strategy-not-deliverable-runtime @rule:init.agent-capability
  Scenario Outline: an agent whose runtime id is a strategy name or unknown blocks the rewind (<runtime_id>)
    Given the conversation "runtime-agents"
    And the runtime of agent "cody" is recorded as "<runtime_id>"
    When human "alice" rewinds to before message "codex-3"
    Then the rewind is refused with "rewind is blocked because a related agent does not support rewind"
    And the database is unchanged
    And no runtime received a call

    Examples:
      | runtime_id               |
      | codex_app_server_turns   |
      | claude_session_resume_at |
      | opencode_session_revert  |
      | gemini                   |
