Feature: A DM rewind tombstones the suffix (spec sections 1, 6.1, 6.4, 10)
  Rewinding to before a message turns that message and every later message of
  the scope into a `rewound` tombstone: the row stays, its content is emptied
  and its metadata holds nothing but the rewound marker. The operation is
  recorded as `completed` on the primary scope.

  Background:
    Given the conversation "dm-two-humans"

  @rule:apply.tombstone-suffix @rule:inv.no-physical-delete @rule:sem.rewound-status-marker @rule:sem.rewound-not-recalled @rule:sem.tombstone-target-and-suffix @rule:scope.primary-first-is-target @rule:scope.primary-from-seq-is-target-seq
  Scenario: alice rewinds her own trailing messages
    When human "alice" rewinds to before message "h-m4"
    Then the rewind completes
    And messages "h-m4, h-service, h-app, h-m5, h-m6" are rewound tombstones
    And messages "h-m1, h-m2, h-system, h-m3, h-rewound" are untouched

  @rule:guard.prepare-suffix-non-rewound
  Scenario: an earlier rewind's tombstone inside the new suffix is left as it was
    When human "alice" rewinds to before message "h-m3"
    Then the rewind completes
    And messages "h-m3, h-m4, h-service, h-app, h-m5, h-m6" are rewound tombstones
    And messages "h-m1, h-m2, h-system, h-rewound" are untouched

  @rule:sem.no-hidden-range-table
  Scenario: a rewind keeps its facts in the spec's tables and creates no table of its own
    When human "alice" rewinds to before message "h-m4"
    Then the rewind completes
    And the rewind created or dropped no table

  @rule:lifecycle.completed @rule:lifecycle.thread-id-primary-scope
  Scenario: the completed operation is recorded on the primary scope
    When human "alice" rewinds to before message "h-m5"
    Then the rewind completes
    And the rewind operation has status "completed"

  @rule:apply.tombstone-suffix @rule:scope.dm-supported @rule:scope.scope-id-transaction-boundary
  Scenario: only the rewound scope's rows change
    When human "alice" rewinds to before message "h-m6"
    Then the rewind completes
    And the "scope_messages" rows where "author_kind" is "human" are:
      | id        | seq | content                                                     |
      | ac-m1     | 1   | Carol, lunch? CANARY-2h-77e0d1                              |
      | h-m1      | 1   | Morning Bob, the draft is in the folder CANARY-2h-a1f04c    |
      | h-m2      | 2   | Thanks, reading it now CANARY-2h-b7e311                     |
      | h-m3      | 4   | Section two still needs numbers CANARY-2h-c4410a            |
      | h-m4      | 6   | Actually, scrap section two CANARY-2h-d83b5f                |
      | h-m5      | 9   | And move the appendix up CANARY-2h-0a9e77                   |
      | h-m6      | 10  |                                                             |
      | h-rewound | 5   |                                                             |

  @rule:inv.no-membership-change @rule:inv.no-private-grant-change @rule:inv.cursors-within-visible-tail @ambiguity:cursor-clamp-and-notice
  Scenario: membership, grants and cursors after a rewind
    When human "alice" rewinds to before message "h-m3"
    Then the rewind completes
    And no membership or private grant changed
    And no cursor is past its scope's visible tail
    And the "scope_memberships" rows where "scope_id" is "dm-alice-bob" are:
      | user_id | last_read_seq | last_read_global_seq |
      | alice   | 3             | 3                    |
      | bob     | 3             | 3                    |
