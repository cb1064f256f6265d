Feature: Realtime and API behaviour after a rewind (spec section 8)
  A successful rewind publishes one coarse `conversation:rewound` invalidation to
  the broadcast scope and posts one system notice in the primary scope; neither,
  nor the API answer, carries the rewound content.

  @rule:realtime.conversation-rewound @rule:realtime.post-commit @rule:realtime.payload-invalidation-only @rule:realtime.payload-no-suffix-content @rule:surface.contract-not-sync-payload
  Scenario: a channel rewind invalidates the channel without quoting the suffix
    Given the conversation "projections-human-suffix"
    When human "alice" rewinds to before message "n-4"
    Then the rewind completes
    And a "conversation:rewound" event was published to scope "ch-notes"
    And the conversation:rewound payload carries no suffix content

  @rule:realtime.post-commit @rule:realtime.conversation-rewound
  Scenario: the invalidation and the notice are published only after the apply commits
    Given the conversation "projections-human-suffix"
    And the harness holds the commit of the rewind's tombstones
    When human "alice" starts rewinding to before message "n-4"
    Then the started rewind waits on a lock
    And no "conversation:rewound" event has been published yet
    And no "message.created" event has been published yet
    When the harness releases its locks
    And the started rewind finishes
    Then the rewind completes
    And a "conversation:rewound" event was published to scope "ch-notes"
    And a rewind notice was posted in scope "ch-notes"

  @rule:realtime.conversation-rewound @rule:scope.parent-broadcast-not-tombstone @ambiguity:reply-thread-broadcast-scope
  Scenario: a reply-thread rewind invalidates the thread's parent scope
    Given the conversation "reply-threads-human"
    When human "alice" rewinds to before message "tt-2"
    Then the rewind completes
    And a "conversation:rewound" event was published to the parent "ch-team", or to it and the thread "th-tail"

  @rule:realtime.notice-system-message @rule:realtime.notice-message-created @rule:realtime.notice-idempotent-client-id @rule:realtime.notice-no-suffix-text @ambiguity:notice-is-the-named-exception
  Scenario: the rewind posts one system notice in the primary scope
    Given the conversation "dm-two-humans"
    When human "alice" rewinds to before message "h-m4"
    Then the rewind completes
    And a rewind notice was posted in scope "dm-alice-bob"

  @rule:realtime.notice-system-message @ambiguity:notice-is-the-named-exception
  Scenario: a thread rewind's notice goes to the thread, not its parent
    Given the conversation "reply-threads-human"
    When human "alice" rewinds to before message "tt-2"
    Then the rewind completes
    And a rewind notice was posted in scope "th-tail"

  @rule:realtime.not-other-event @rule:realtime.notice-no-notification @rule:realtime.notice-no-agent-wake @rule:inv.no-side-records @ambiguity:notice-is-the-named-exception
  Scenario: the rewind and its notice create no activity, delivery or stream rows
    Given the conversation "projections-human-suffix"
    When human "alice" rewinds to before message "n-4"
    Then the rewind completes
    And the rewind created no activity, delivery or stream rows

  @rule:realtime.api-rewound-ids-coarse @rule:realtime.api-no-rewound-content
  Scenario: the API answer names at most the rewound ids, never their content
    Given the conversation "projections-human-suffix"
    When human "alice" rewinds to before message "n-4"
    Then the rewind completes
    And the answer carries no suffix content

  @rule:realtime.failure-specific-errors
  Scenario: a refused rewind publishes nothing
    Given the conversation "dm-two-humans"
    When human "alice" rewinds to before message "h-m1"
    Then the rewind is refused with "rewind is blocked because another human sent a later message"
    And no "conversation:rewound" event was published
    And no "message.created" event was published

  @rule:realtime.notice-no-unread
  Scenario: the rewind notice enters nobody's ordinary unread
    Given the conversation "projections-human-suffix"
    When human "alice" rewinds to before message "n-4"
    Then the rewind completes
    And a rewind notice was posted in scope "ch-notes"
    And human "bob" has 0 unread messages in scope "ch-notes"
    And human "alice" has 0 unread messages in scope "ch-notes"
    When human "bob" sends "Noted, back to the vendor list CANARY-nt-after" in scope "ch-notes"
    Then human "alice" has 1 unread message in scope "ch-notes"

  @rule:realtime.notice-no-unread @rule:lifecycle.preparing-only-active
  Scenario: an earlier rewind's notice stays out of ordinary unread after a second rewind
    Given the conversation "projections-human-suffix"
    When human "alice" rewinds to before message "n-6"
    Then the rewind completes
    And the rewind notice is known as "first notice"
    When human "alice" sends "Second thoughts on the venue CANARY-nt-second" in scope "ch-notes" as "second thoughts"
    And human "alice" rewinds to before message "second thoughts"
    Then the rewind completes
    And message "first notice" is visible
    And a rewind notice was posted in scope "ch-notes"
    And human "bob" has 0 unread messages in scope "ch-notes"
    And human "alice" has 0 unread messages in scope "ch-notes"

  @rule:surface.sync-authority @rule:surface.stale-reference-no-revival
  Scenario: stale rows and a cursor from before the rewind do not bring a rewound message back into message sync
    Given the conversation "projections-human-suffix"
    When human "alice" rewinds to before message "n-4"
    Then the rewind completes
    Given stale rows still name the rewound message "n-5"
    When human "bob" syncs scope "ch-notes" after seq 0
    Then the sync page holds messages "n-1, n-2, n-3" and the rewind notice
    And the sync page holds no tombstone
    When human "bob" syncs scope "ch-notes" after seq 5
    Then the sync page holds messages "" and the rewind notice

  @rule:realtime.sync-no-tombstone-page @rule:sem.rewound-invisible-everywhere @rule:surface.contract-not-sync-payload
  Scenario: message sync after a rewind returns the visible messages and no tombstone page
    Given the conversation "projections-human-suffix"
    When human "alice" rewinds to before message "n-4"
    Then the rewind completes
    When human "bob" syncs scope "ch-notes" after seq 0
    Then the sync page holds messages "n-1, n-2, n-3" and the rewind notice
    And the sync page holds no tombstone
    When human "bob" syncs scope "ch-notes" after seq 3
    Then the sync page holds messages "" and the rewind notice
