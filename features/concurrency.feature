Feature: Concurrency and the operation lifecycle (spec sections 6.4 and 7)
  These scenarios stage races the way the spec's flow allows them. A rewind that
  restores agent runtimes has a `preparing` operation while the restore runs, so
  a second rewind of the scope is refused then. The apply transaction locks the
  scope, so the harness can hold that scope's row lock to park a rewind; whether
  the rewind has planned (and recorded `preparing`) before it asks for the lock
  is the implementation's choice, and both orders pass.

  @rule:conc.lock-stats-read-state @rule:lifecycle.preparing @ambiguity:plan-persist-vs-scope-lock
  Scenario: a rewind waits for the scope's row lock, then completes
    Given the conversation "projections-human-suffix"
    And the harness holds the row lock of scope "ch-notes"
    When human "alice" starts rewinding to before message "n-4"
    Then the started rewind waits on a lock
    And the operation targeting "n-4" is "preparing", or not yet recorded
    When the harness releases its locks
    And the started rewind finishes
    Then the rewind completes
    And the rewind operation has status "completed"

  # The first rewind is held in its agent's restore for as long as the scenario needs, so it is
  # `preparing` under every lock order. The second must be answered while the first is still
  # held: an answer that arrives only after the first finished means it waited, whatever it says.
  @rule:conc.single-active-per-scope @rule:lifecycle.preparing-only-active @rule:err.rewind-in-progress @rule:lifecycle.preparing
  Scenario: a second rewind of the scope is refused at once while the first is preparing
    Given the conversation "runtime-agents"
    And the codex runtime holds the restore of agent "cody"
    When human "alice" starts rewinding to before message "codex-3"
    And the codex runtime has received the restore of agent "cody"
    Then the operation targeting "codex-3" is "preparing"
    When human "alice" rewinds to before message "codex-1" while the started rewind is preparing
    Then the rewind is refused with "another rewind is already in progress"
    When the harness lets the runtime answer the restore of agent "cody"
    And the started rewind finishes
    Then the rewind completes
    And messages "codex-3, codex-4" are rewound tombstones
    And messages "codex-1, codex-2" are untouched
    And nothing is half-applied

  # Only a `preparing` operation of the same primary scope stops a rewind: a rewind of any other
  # scope of the workspace goes ahead while the first is held.
  @rule:conc.single-active-per-scope @rule:lifecycle.preparing-only-active @rule:scope.scope-id-transaction-boundary
  Scenario Outline: a rewind of another scope completes while the first is still preparing (<other>)
    Given the conversation "runtime-agents"
    And the codex runtime holds the restore of agent "cody"
    When human "alice" starts rewinding to before message "codex-3"
    And the codex runtime has received the restore of agent "cody"
    And human "<who>" rewinds to before message "<target>" while the started rewind is preparing
    Then the rewind completes
    And messages "<rewound>" are rewound tombstones
    When the harness lets the runtime answer the restore of agent "cody"
    And the started rewind finishes
    Then the rewind completes
    And messages "codex-3, codex-4" are rewound tombstones
    And nothing is half-applied

    Examples:
      | other                               | who   | target   | rewound            |
      | a second DM                         | alice | claude-3 | claude-3, claude-4 |
      | a channel                           | bob   | lobby-1  | lobby-1            |
      | a reply thread outside its plan     | alice | codex-t1 | codex-t1, codex-t2 |

  # The same race with the first rewind parked on the scope's row lock, which the harness holds.
  # Whether it recorded `preparing` before asking for the lock is the implementation's choice:
  # if it did, a second rewind of the scope is refused at once; if not, the second queues for
  # the same lock and one of them wins once the lock is released. A rewind of another scope
  # never waits.
  @rule:conc.single-active-per-scope @rule:lifecycle.preparing-only-active @rule:err.rewind-in-progress @rule:conc.lock-stats-read-state @ambiguity:plan-persist-vs-scope-lock
  Scenario: a second rewind of a scope whose first rewind waits for the row lock is refused, or queues behind it
    Given the conversation "projections-human-suffix"
    And the harness holds the row lock of scope "ch-notes"
    When human "alice" starts rewinding to before message "n-4"
    Then the started rewind waits on a lock
    When human "alice" rewinds to before message "n-5" while the started rewind waits on a lock
    Then the rewind is refused with "another rewind is already in progress", unless it waits behind the started rewind
    When the harness releases its locks
    And every racing rewind finishes
    Then the rewinds of scopes "ch-notes" had one outcome each, as if run one after the other
    And messages "n-1, n-2, n-3" are untouched

  @rule:conc.single-active-per-scope @rule:lifecycle.preparing-only-active @rule:conc.lock-stats-read-state @rule:scope.scope-id-transaction-boundary @ambiguity:plan-persist-vs-scope-lock
  Scenario: a rewind of another scope completes while the first waits for its scope's row lock
    Given the conversation "projections-human-suffix"
    And the harness holds the row lock of scope "ch-notes"
    When human "alice" starts rewinding to before message "n-4"
    Then the started rewind waits on a lock
    And the operation targeting "n-4" is "preparing", or not yet recorded
    When human "alice" rewinds to before message "o-2" while the started rewind waits on a lock
    Then the rewind completes
    And messages "o-2" are rewound tombstones
    When the harness releases its locks
    And the started rewind finishes
    Then the rewind completes
    And messages "n-4, n-5, n-6" are rewound tombstones
    And nothing is half-applied

  # A reply thread's rewind and its parent channel's rewind whose tail fork cascades that thread
  # touch one scope from two operations: the operation scope serializes neither against the
  # other (each is its own primary scope), so the apply's locks and its drift check do. The
  # harness holds both scopes' row locks until both rewinds wait, so they overlap.
  @rule:conc.revalidate-suffix-before-apply @rule:conc.no-partial-success @rule:thread.tail-target-fork-cascades @rule:lifecycle.thread-id-primary-scope
  Scenario: a reply thread's rewind and its parent channel's cascading rewind at once: one outcome each, nothing half-applied
    Given the conversation "reply-threads-human"
    And the harness holds the row locks of scopes "ch-team, th-tail"
    When these rewinds start at once:
      | human | target |
      | alice | t-4    |
      | alice | tt-2   |
    Then 2 racing rewinds wait on a lock
    When the harness releases its locks
    And every racing rewind finishes
    Then the rewinds of scopes "ch-team, th-tail" had one outcome each, as if run one after the other
    And messages "t-1, t-2, t-3, tm-1" are untouched

  # The thread's own rewind is sent while the channel's rewind waits for the channel's row lock.
  # An implementation that locks only the scopes it changes lets the thread's rewind complete
  # first: a channel rewind that planned before must then find its cascade changed (drift); one
  # that locks before planning plans after, and cascades the thread as it is then, notice
  # included. One that also serializes a thread's rewind behind its parent's (the spec's
  # operation scope does not decide it) makes it wait: the outcomes must still compose.
  @rule:conc.revalidate-suffix-before-apply @rule:conc.no-partial-success @rule:thread.tail-target-fork-cascades @ambiguity:plan-persist-vs-scope-lock
  Scenario: a reply thread's rewind while its parent channel's cascading rewind waits: the cascade is re-validated
    Given the conversation "reply-threads-human"
    And the harness holds the row lock of scope "ch-team"
    When human "alice" starts rewinding to before message "t-4"
    Then the started rewind waits on a lock
    When these rewinds start at once:
      | human | target |
      | alice | tt-2   |
    And the racing rewinds have settled
    And the harness releases its locks
    And every racing rewind finishes
    Then the rewinds of scopes "ch-team, th-tail" had one outcome each, as if run one after the other
    And messages "t-1, t-2, t-3, tm-1" are untouched

  @rule:conc.revalidate-suffix-before-apply @rule:conc.no-partial-success @rule:err.suffix-drift @rule:lifecycle.failed @rule:conc.diagnosable-failure-status @rule:realtime.notice-only-after-success
  Scenario: another human's message appended while the rewind waits fails it, nothing tombstoned
    Given the conversation "projections-human-suffix"
    And the harness holds the row lock of scope "ch-notes"
    When human "alice" starts rewinding to before message "n-4"
    Then the started rewind waits on a lock
    When the harness appends a message by human "bob" to scope "ch-notes"
    And the harness releases its locks
    And the started rewind finishes
    Then the rewind is refused with "rewind is blocked because newer activity changed the conversation" or "rewind is blocked because another human sent a later message"
    And messages "n-4, n-5, n-6" are untouched
    And no rewind operation is recorded but a failed one
    And no rewind notice was posted
    And no "message.created" event was published

  # The harness holds the cascaded thread's row lock, not the primary scope's: the apply locks
  # every scope it tombstones, so a rewind parks on it whether it planned before taking locks or
  # under the primary scope's lock, and both orders have planned before the reply exists. Only
  # a rewind that locks every scope before planning plans after the reply, and must then rewind
  # it too.
  @rule:conc.revalidate-suffix-before-apply @rule:conc.no-partial-success @rule:err.suffix-drift @rule:thread.tail-target-fork-cascades @rule:lifecycle.failed @ambiguity:plan-persist-vs-scope-lock
  Scenario: the initiator's reply added to the cascaded thread while the rewind waits is drift, never half-rewound
    Given the conversation "reply-threads-human"
    And the harness holds the row lock of scope "th-tail"
    When human "alice" starts rewinding to before message "t-4"
    Then the started rewind waits on a lock
    When the harness appends a message by human "alice" to scope "th-tail" as "late reply"
    And the harness releases its locks
    And the started rewind finishes
    Then the rewind is refused with "rewind is blocked because newer activity changed the conversation", leaving messages "t-4, tt-1, tt-2, late reply" untouched and scope "th-tail" not archived, or completes with them all rewound tombstones and that scope archived
    And messages "t-1, t-2, t-3, tm-1" are untouched
    And every rewind operation has a status of the spec

  # Another human's reply in the cascaded thread: whichever order the implementation plans in,
  # the rewind may not take it. One that planned before the reply finds its cascade changed
  # (drift); one that locks every scope before planning finds another human's message in the
  # cascade (section 4). Tombstoning the thread's scope as it is at apply time, without comparing
  # it with the plan, would rewind bob's words.
  @rule:conc.revalidate-suffix-before-apply @rule:conc.no-partial-success @rule:err.suffix-drift @rule:thread.cascade-other-human-guard @ambiguity:plan-persist-vs-scope-lock
  Scenario: another human's reply added to the cascaded thread while the rewind waits fails it, nothing tombstoned
    Given the conversation "reply-threads-human"
    And the harness holds the row lock of scope "th-tail"
    When human "alice" starts rewinding to before message "t-4"
    Then the started rewind waits on a lock
    When the harness appends a message by human "bob" to scope "th-tail" as "bob's reply"
    And the harness releases its locks
    And the started rewind finishes
    Then the rewind is refused with "rewind is blocked because newer activity changed the conversation" or "rewind is blocked because another human sent a later message"
    And messages "t-1, t-2, t-3, t-4, tm-1, tt-1, tt-2" are untouched
    And message "bob's reply" is visible
    And scope "th-tail" is not archived
    And no rewind operation is recorded but a failed one

  @rule:lifecycle.preparing-only-active @rule:lifecycle.status-set
  Scenario: finished operations do not block the next rewind of the scope
    Given the conversation "projections-human-suffix"
    When human "alice" rewinds to before message "n-6"
    Then the rewind completes
    When human "alice" rewinds to before message "n-4"
    Then the rewind completes
    And messages "n-4, n-5" are rewound tombstones
    And every rewind operation has a status of the spec
