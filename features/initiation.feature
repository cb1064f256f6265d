Feature: Initiation guards (spec section 3)
  Who may rewind, and to before which message. Every refusal leaves the
  database exactly as it was and records no operation.

  @rule:init.human-only @ambiguity:unworded-refusals
  Scenario: an agent cannot initiate a rewind
    Given the conversation "dm-one-agent"
    When agent "agent-codex" rewinds to before message "msg-dm-1"
    Then the rewind is refused
    And the database is unchanged

  @rule:init.human-only @ambiguity:unworded-refusals
  Scenario: the system cannot initiate a rewind
    Given the conversation "dm-one-agent"
    When the system rewinds to before message "msg-dm-1"
    Then the rewind is refused
    And the database is unchanged

  @rule:init.own-human-target @rule:err.not-own-human-message
  Scenario: a human cannot rewind to before another human's message
    Given the conversation "dm-two-humans"
    When human "bob" rewinds to before message "h-m4"
    Then the rewind is refused with "message must be your own human-authored message"
    And the database is unchanged
    And no rewind operation is recorded but a failed one

  @rule:init.own-human-target @rule:err.not-own-human-message
  Scenario: a human cannot rewind to before an agent's message
    Given the conversation "dm-one-agent"
    When human "alice" rewinds to before message "msg-dm-2"
    Then the rewind is refused with "message must be your own human-authored message"
    And the database is unchanged

  @rule:init.no-system-target @rule:err.system-message-target
  Scenario Outline: a <kind> message cannot be the target
    Given the conversation "dm-two-humans"
    When human "alice" rewinds to before message "<message>"
    Then the rewind is refused with "system messages cannot be rewound"
    And the database is unchanged
    And no rewind operation is recorded but a failed one

    Examples:
      | kind    | message     |
      | system  | h-system    |
      | service | h-service   |
      | app     | h-app       |

  @rule:init.target-visible-hot @rule:sem.rewound-invisible-everywhere @ambiguity:unworded-refusals
  Scenario: an already rewound message cannot be the target
    Given the conversation "dm-two-humans"
    When human "alice" rewinds to before message "h-rewound"
    Then the rewind is refused
    And the database is unchanged
    And no rewind operation is recorded but a failed one

  @rule:init.target-visible-hot @ambiguity:unworded-refusals
  Scenario: the target must belong to the scope being rewound
    Given the conversation "dm-two-humans"
    When human "alice" rewinds scope "dm-alice-carol" to before message "h-m4"
    Then the rewind is refused
    And the database is unchanged

  @rule:init.target-visible-hot @rule:init.no-cold-crossing @rule:err.hot-cold-boundary
  Scenario: a cold message cannot be the target
    Given the conversation "cold-history"
    When human "alice" rewinds to before message "msg-cold-3"
    Then the rewind is refused with "rewind would cross the hot/cold boundary"
    And the database is unchanged
    And no rewind operation is recorded but a failed one

  @rule:init.other-human-guard @rule:err.other-human-message
  Scenario: a later message of another human blocks the rewind
    Given the conversation "dm-two-humans"
    When human "alice" rewinds to before message "h-m1"
    Then the rewind is refused with "rewind is blocked because another human sent a later message"
    And the database is unchanged
    And no rewind operation is recorded but a failed one
