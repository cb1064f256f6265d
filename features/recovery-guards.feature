Feature: Runtime recovery guards (spec sections 3, 5 and 9)
  Before anything is restored or tombstoned, every agent the suffix reached must
  be available, run on a rewind-capable runtime, hold a recovery point of its
  runtime's strategy, and have done nothing outside the rewound scopes since it
  first took part. Each failure is refused with its own message, and the
  database is left exactly as it was.

  Background:
    Given the conversation "agent-guards"

  @rule:init.agent-capability @rule:err.agent-unsupported @rule:runtime.capable-runtimes
  Scenario: an agent on a runtime without rewind support blocks the rewind
    When human "alice" rewinds to before message "u-1"
    Then the rewind is refused with "rewind is blocked because a related agent does not support rewind"
    And the database is unchanged
    And no rewind operation is recorded but a failed one

  @rule:runtime.strategy-not-deliverable-runtime @rule:runtime.ids-strategies-separate @rule:err.agent-unsupported
  Scenario: a recovery strategy name is not accepted as a runtime
    When human "alice" rewinds to before message "s-1"
    Then the rewind is refused with "rewind is blocked because a related agent does not support rewind"
    And the database is unchanged

  @rule:init.agent-capability @rule:err.recovery-point-missing
  Scenario: an agent without a recovery point blocks the rewind
    When human "alice" rewinds to before message "m-1"
    Then the rewind is refused with "rewind is blocked because a required recovery point is missing"
    And the database is unchanged
    And no rewind operation is recorded but a failed one

  @rule:runtime.validate-strategy-match @rule:err.recovery-point-missing
  Scenario: a recovery point of another runtime's strategy counts as missing
    When human "alice" rewinds to before message "w-1"
    Then the rewind is refused with "rewind is blocked because a required recovery point is missing"
    And the database is unchanged

  @rule:runtime.validate-agent-available @rule:err.agent-unavailable
  Scenario: a deleted agent blocks the rewind
    When human "alice" rewinds to before message "d-1"
    Then the rewind is refused with "rewind is blocked because a related agent is no longer available for recovery"
    And the database is unchanged
    And no rewind operation is recorded but a failed one

  @rule:runtime.validate-agent-available @rule:err.agent-unavailable
  Scenario: an agent whose machine was deleted blocks the rewind
    When human "alice" rewinds to before message "o-1"
    Then the rewind is refused with "rewind is blocked because a related agent is no longer available for recovery"
    And the database is unchanged

  @rule:runtime.no-cross-scope-activity @rule:err.agent-cross-scope-activity
  Scenario: an agent that worked elsewhere after its first touch blocks the rewind
    When human "alice" rewinds to before message "b-1"
    Then the rewind is refused with "rewind is blocked because a related agent touched another conversation after first participation"
    And the database is unchanged
    And no rewind operation is recorded but a failed one

  @rule:thread.cascade-recovery-point-check @rule:err.recovery-point-missing
  Scenario: an agent in the cascaded reply thread needs a recovery point too
    When human "alice" rewinds to before message "c-1"
    Then the rewind is refused with "rewind is blocked because a required recovery point is missing"
    And the database is unchanged
