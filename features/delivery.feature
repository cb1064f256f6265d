Feature: Live delivery writes the recovery points a rewind restores (spec sections 1, 5 and 8)
  Nothing here is seeded: every turn is built live. A human message is delivered to the
  agent's runtime through the implementation's own delivery path, which must commit the
  message's recovery point, holding the runtime's state, before the runtime receives the
  input (codex `turnCount`, claude `boundaryUuid` or the zero boundary, OpenCode `messageId`).
  The mock runtimes answer every turn deterministically and, while they hold each input, call
  the harness's delivery witness, which reads the recovery points committed at that moment:
  the order is observed, never inferred from clocks.

  @rule:runtime.recovery-point-before-delivery @rule:runtime.codex-recovery-ref @rule:runtime.claude-recovery-ref @rule:runtime.opencode-recovery-ref @rule:runtime.builtin-follows-opencode @rule:sem.runtime-restore-first @ambiguity:claude-restore-evidence @ambiguity:claude-zero-boundary
  Scenario Outline: several deliveries, then a rewind to before the second, restore the point the implementation wrote (<runtime>)
    Given the conversation "live-agents"
    And human "alice" has said "m1, m2, m3" to agent "<agent>" in scope "<scope>"
    Then every delivery wrote its recovery point first, holding the runtime's state at that moment
    When human "alice" rewinds to before message "m2"
    Then the rewind completes
    And the runtime of agent "<agent>" is as it was before "m2" was delivered
    And messages "m2, m2-<agent>, m3, m3-<agent>" are rewound tombstones
    And messages "m1, m1-<agent>" are untouched

    Examples:
      | runtime               | agent | scope       |
      | codex                 | cody  | dm-codex    |
      | claude                | clio  | dm-claude   |
      | opencode              | ode   | dm-opencode |
      | builtin               | bix   | dm-builtin  |
      | claude, reply thread  | clio  | th-welcome  |

  @rule:runtime.recovery-point-before-delivery @rule:runtime.codex-recovery-ref @rule:runtime.claude-before-first-input @rule:runtime.claude-recovery-ref @rule:runtime.opencode-recovery-ref @ambiguity:claude-restore-evidence @ambiguity:claude-zero-boundary
  Scenario Outline: the first delivery ever writes the point before any turn, and a rewind to before it returns the runtime there (<runtime>)
    Given the conversation "live-agents"
    And human "alice" has said "m1, m2" to agent "<agent>" in scope "<scope>"
    Then every delivery wrote its recovery point first, holding the runtime's state at that moment
    When human "alice" rewinds to before message "m1"
    Then the rewind completes
    And the runtime of agent "<agent>" is as it was before "m1" was delivered
    Given human "alice" has said "m5" to agent "<agent>" in scope "<scope>"
    Then agent "<agent>" received "m5" in the state it had before "m1"

    Examples:
      | runtime  | agent | scope       |
      | codex    | cody  | dm-codex    |
      | claude   | clio  | dm-claude   |
      | opencode | ode   | dm-opencode |
      | builtin  | bix   | dm-builtin  |

  @rule:runtime.recovery-point-before-delivery @rule:runtime.codex-recovery-ref @rule:runtime.claude-recovery-ref @rule:runtime.opencode-recovery-ref @ambiguity:claude-zero-boundary @ambiguity:claude-restore-evidence
  Scenario Outline: after a rewind the next delivery continues from the restored state, and its point agrees (<runtime>)
    Given the conversation "live-agents"
    And human "alice" has said "m1, m2, m3" to agent "<agent>" in scope "<scope>"
    When human "alice" rewinds to before message "m2"
    Then the rewind completes
    Given human "alice" has said "m4, m5" to agent "<agent>" in scope "<scope>"
    Then agent "<agent>" received "m4" in the state it had before "m2"
    And agent "<agent>" received "m5" right after its answer to "m4"
    And every delivery wrote its recovery point first, holding the runtime's state at that moment

    Examples:
      | runtime  | agent | scope       |
      | codex    | cody  | dm-codex    |
      | claude   | clio  | dm-claude   |
      | opencode | ode   | dm-opencode |
      | builtin  | bix   | dm-builtin  |

  @rule:runtime.restore-verify @rule:runtime.claude-resume-session-at @ambiguity:claude-restore-evidence
  Scenario: a claude delivery that does not continue from the restored boundary does not use the boundary up
    Given the conversation "live-agents"
    And human "alice" has said "m1, m2, m3" to agent "clio" in scope "dm-claude"
    When human "alice" rewinds to before message "m2"
    Then the rewind completes
    And the runtime of agent "clio" is as it was before "m2" was delivered
    Given agent "clio" fails its next delivery with "success-without-effect"
    When human "alice" sends "are you there?" in scope "dm-claude" as "m4"
    And message "m4" is delivered
    Given the runtime of agent "clio" answers normally again
    And human "alice" has said "m5" to agent "clio" in scope "dm-claude"
    Then agent "clio" received "m5" in the state it had before "m2"

  @rule:runtime.recovery-point-before-delivery @rule:sem.runtime-restore-first @rule:runtime.apply-after-all-restores @rule:runtime.codex-recovery-ref @rule:runtime.opencode-recovery-ref
  Scenario: two agents mentioned in one channel are each restored to their own state before the target
    Given the conversation "live-agents"
    When human "alice" sends "Cody and Ode, plan the release" in scope "pair" mentioning "cody, ode" as "p1"
    And message "p1" is delivered
    Then agent "cody" answered "p1"
    And agent "ode" answered "p1"
    When human "alice" sends "now split the work" in scope "pair" mentioning "cody, ode" as "p2"
    And message "p2" is delivered
    Then agent "cody" answered "p2"
    And agent "ode" answered "p2"
    And every delivery wrote its recovery point first, holding the runtime's state at that moment
    When human "alice" rewinds to before message "p2"
    Then the rewind completes
    And the runtime of agent "cody" is as it was before "p2" was delivered
    And the runtime of agent "ode" is as it was before "p2" was delivered
    And messages "p2, p2-cody, p2-ode" are rewound tombstones
    And messages "p1, p1-cody, p1-ode" are untouched

  @rule:runtime.recovery-point-before-delivery @rule:runtime.opencode-session-revert @ambiguity:related-agents
  Scenario: a channel message reaches only the agents it mentions, and a rewind of it needs only their runtimes
    Given the conversation "live-agents"
    When human "alice" sends "Cody and Ode, plan the release" in scope "pair" mentioning "cody, ode" as "p1"
    And message "p1" is delivered
    Then agent "cody" answered "p1"
    And agent "ode" answered "p1"
    When human "alice" sends "Cody, just you now" in scope "pair" mentioning "cody" as "p2"
    And message "p2" is delivered
    Then agent "cody" answered "p2"
    And message "p2" was not delivered to agent "ode"
    When human "alice" rewinds to before message "p2"
    Then the rewind completes
    And the runtime of agent "cody" is as it was before "p2" was delivered
    And the opencode runtime received no "revert" call
    And messages "p2, p2-cody" are rewound tombstones

  @rule:runtime.recovery-point-before-delivery @rule:inv.recovery-point-lifecycle @ambiguity:failed-delivery-point @ambiguity:related-agents @ambiguity:claude-restore-evidence
  Scenario Outline: a delivery the runtime failed changes nothing, and a rewind over it completes (<runtime>)
    Given the conversation "live-agents"
    And human "alice" has said "m1" to agent "<agent>" in scope "<scope>"
    And agent "<agent>" fails its next delivery with "<fault>"
    When the runtime state of agent "<agent>" is noted
    And human "alice" sends "one more thing" in scope "<scope>" as "m2"
    And message "m2" is delivered
    Then the delivery of "m2" to agent "<agent>" failed, and nothing answered it
    And the runtime of agent "<agent>" is as noted
    And any recovery point the failed delivery of "m2" to agent "<agent>" left restores the noted state
    Given the runtime of agent "<agent>" answers normally again
    When human "alice" rewinds to before message "m2"
    Then the rewind completes
    And the runtime of agent "<agent>" is as noted
    And messages "m2" are rewound tombstones

    Examples:
      | runtime  | agent | scope       | fault |
      | codex    | cody  | dm-codex    | error |
      | claude   | clio  | dm-claude   | error |
      | opencode | ode   | dm-opencode | error |
      | codex    | cody  | dm-codex    | crash |
      | claude   | clio  | dm-claude   | crash |

  @rule:runtime.no-cross-scope-activity @rule:err.agent-cross-scope-activity @rule:runtime.flow-order
  Scenario: a delivery the agent received in another conversation after its first participation blocks the rewind, answered or not
    Given the conversation "live-agents"
    And human "alice" has said "m1, m2" to agent "cody" in scope "dm-codex"
    When human "bob" sends "Cody, just read this [no reply]" in scope "lobby" mentioning "cody" as "l1"
    And message "l1" is delivered
    Then agent "cody" took "l1" without answering
    When human "alice" rewinds to before message "m2"
    Then the rewind is refused with "rewind is blocked because a related agent touched another conversation after first participation"
    And messages "m2, m2-cody" are untouched
    And no rewind operation is recorded but a failed one
    And the codex runtime received no "thread/rollback" call
    And the codex runtime received no "thread/revert" call

  @rule:runtime.no-cross-scope-activity
  Scenario: deliveries in another conversation before the agent's first participation do not block the rewind
    Given the conversation "live-agents"
    And human "alice" has said "m1" to agent "cody" in scope "dm-codex"
    When human "bob" sends "Cody, just read this [no reply]" in scope "lobby" mentioning "cody" as "l1"
    And message "l1" is delivered
    Then agent "cody" took "l1" without answering
    Given human "alice" has said "m2" to agent "cody" in scope "dm-codex"
    When human "alice" rewinds to before message "m2"
    Then the rewind completes
    And the runtime of agent "cody" is as it was before "m2" was delivered

  @rule:realtime.notice-no-agent-wake
  Scenario: neither the rewind notice nor an already delivered message is delivered to an agent
    Given the conversation "live-agents"
    And human "alice" has said "m1, m2" to agent "cody" in scope "dm-codex"
    When human "alice" rewinds to before message "m2"
    Then the rewind completes
    And the rewind notice is known as "notice"
    When message "notice" is delivered
    Then message "notice" was delivered to no agent
    When message "m1" is delivered
    Then message "m1" was delivered to no agent

  @rule:runtime.recovery-point-before-delivery @rule:apply.suppress-fanout-outbox @rule:conc.no-partial-success @rule:runtime.codex-recovery-ref
  Scenario: while a rewind waits to commit its tombstones, a suffix message is never delivered and a new one reaches the restored runtime
    Given the conversation "live-agents"
    And human "alice" has said "m1, m2" to agent "cody" in scope "dm-codex"
    When human "alice" sends "and one more thing" in scope "dm-codex" as "m3"
    Given the harness holds the commit of the rewind's tombstones
    When human "alice" starts rewinding to before message "m2"
    Then the started rewind waits on a lock
    When the delivery of message "m3" starts
    And human "alice" starts sending "and another thing" in scope "dm-codex" as "m4", then its delivery
    And the harness releases its locks
    And the started rewind finishes
    And the started deliveries finish
    Then the rewind completes
    And message "m3" was delivered to no agent
    And agent "cody" answered "m4"
    And agent "cody" received "m4" in the state it had before "m2"
    And every delivery wrote its recovery point first, holding the runtime's state at that moment
    And message "m4" is visible
    And messages "m2, m2-cody, m3" are rewound tombstones

  @rule:runtime.opencode-session-revert @rule:runtime.apply-after-all-restores @rule:runtime.restore-verify @ambiguity:busy-runtime-restore @ambiguity:restore-failure-wording
  Scenario: a rewind while the agent's OpenCode prompt is still running does not revert under it
    Given the conversation "live-agents"
    And human "alice" has said "m1, m2" to agent "ode" in scope "dm-opencode"
    And agent "ode" answers its next delivery only after 3000 ms
    When human "alice" sends "a question the model takes long over" in scope "dm-opencode" as "m3"
    And the delivery of message "m3" starts
    And the runtime of agent "ode" is working on a delivery
    And human "alice" rewinds to before message "m2"
    And the started deliveries finish
    Then the rewind failed its restore, leaving "m2, m2-ode, m3" as they were, or completed after the running delivery to agent "ode" with them rewound

