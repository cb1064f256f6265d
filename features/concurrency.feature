Feature: Concurrency and the operation lifecycle (spec sections 6.4 and 7)
  These scenarios stage races the way the spec's flow allows them: a rewind plans,
  records a `preparing` operation, and only then applies in a transaction that
  locks the scope. The harness holds that scope's row lock to park the rewind
  between its plan and its apply.

  Background:
    Given the conversation "projections-human-suffix"

  @rule:conc.lock-stats-read-state @rule:lifecycle.preparing
  Scenario: the apply waits for the scope's row lock while its operation is preparing
    Given the harness holds the row lock of scope "ch-notes"
    When human "alice" starts rewinding to before message "n-4"
    Then the started rewind waits on a lock
    And the operation targeting "n-4" is "preparing"
    When the harness releases its locks
    And the started rewind finishes
    Then the rewind completes
    And the rewind operation has status "completed"

  @rule:conc.single-active-per-scope @rule:lifecycle.preparing-only-active @rule:err.rewind-in-progress
  Scenario: a second rewind of the scope is refused while the first is in progress
    Given the harness holds the row lock of scope "ch-notes"
    When human "alice" starts rewinding to before message "n-5"
    Then the started rewind waits on a lock
    When human "alice" rewinds to before message "n-4"
    Then the rewind is refused with "another rewind is already in progress"
    When the harness releases its locks
    And the started rewind finishes
    Then the rewind completes
    And messages "n-5, n-6" are rewound tombstones

  @rule:conc.revalidate-suffix-before-apply @rule:conc.no-partial-success @rule:err.suffix-drift @rule:lifecycle.failed @rule:conc.diagnosable-failure-status
  Scenario: a message appended between plan and apply fails the rewind, nothing tombstoned
    Given the harness holds the row lock of scope "ch-notes"
    When human "alice" starts rewinding to before message "n-4"
    Then the started rewind waits on a lock
    When the harness appends a message by human "alice" to scope "ch-notes"
    And the harness releases its locks
    And the started rewind finishes
    Then the rewind is refused with "rewind is blocked because newer activity changed the conversation"
    And messages "n-4, n-5, n-6" are untouched
    And the rewind operation has status "failed"

  @rule:lifecycle.preparing-only-active @rule:lifecycle.status-set
  Scenario: finished operations do not block the next rewind of the scope
    When human "alice" rewinds to before message "n-6"
    Then the rewind completes
    When human "alice" rewinds to before message "n-4"
    Then the rewind completes
    And messages "n-4, n-5" are rewound tombstones
    And every rewind operation has a status of the spec
