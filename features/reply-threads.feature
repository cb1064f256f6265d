Feature: Reply threads (spec sections 2, 2.1, 4 and 6.3)
  A rewind runs along one main line. A reply thread forking from a suffix message
  blocks the rewind unless it forks from the suffix's last main-line message, in
  which case the thread is rewound with it, as a cascade, and archived.

  @rule:thread.non-tail-fork-blocked @rule:thread.single-mainline @rule:thread.tail-first-error-hint @rule:err.later-reply-thread
  Scenario: a reply thread on a suffix message before the tail blocks the rewind
    Given the conversation "reply-threads-human"
    When human "alice" rewinds to before message "t-2"
    Then the rewind is refused with "rewind is blocked because a later message has a reply thread"
    And the database is unchanged
    And no rewind operation is recorded but a failed one

  # The fork is neither the target nor the tail: checking only those two lets this rewind through.
  @rule:thread.non-tail-fork-blocked @rule:thread.single-mainline @rule:err.later-reply-thread
  Scenario: a reply thread on a suffix message between the target and the tail blocks the rewind
    Given the conversation "reply-thread-middle"
    When human "alice" rewinds to before message "msg-mid-1"
    Then the rewind is refused with "rewind is blocked because a later message has a reply thread"
    And the database is unchanged
    And no rewind operation is recorded but a failed one
    And no runtime received a call

  # Archived threads are not part of the suffix's topology: live, either thread would block
  # (a later reply thread; another human's reply in the cascade).
  @rule:guard.cascade-active-child-topology
  Scenario Outline: an archived reply thread in the suffix is neither checked nor cascaded (<target>)
    Given the conversation "reply-threads-archived"
    When human "alice" rewinds to before message "<target>"
    Then the rewind completes
    And messages "<rewound>" are rewound tombstones
    And messages "<kept>" are untouched
    And scope "th-budget" is archived
    And scope "th-freeze" is archived

    Examples:
      | target | rewound                | kept                            |
      | ar-1   | ar-1, ar-2, ar-3, ar-4 | ar-b1, ar-r1, ar-r2             |
      | ar-3   | ar-3, ar-4             | ar-1, ar-2, ar-b1, ar-r1, ar-r2 |

  @rule:thread.tail-target-fork-cascades @rule:cascade.child-tombstone-from-seq-one @rule:scope.cascade-from-seq-one @rule:scope.channel-supported
  Scenario: the target's own tail thread is rewound with it
    Given the conversation "reply-threads-human"
    When human "alice" rewinds to before message "t-4"
    Then the rewind completes
    And messages "t-4, tt-1, tt-2" are rewound tombstones
    And messages "t-1, t-2, t-3, tm-1" are untouched

  # The agent answered in the thread, between alice's turns: restoring it to before the target
  # takes the thread's turns back too.
  @rule:thread.tail-target-fork-cascades @rule:thread.cascade-runtime-restore
  Scenario: an agent that answered in the cascaded thread is restored to before the target
    Given the conversation "reply-thread-tail"
    When human "alice" rewinds to before message "msg-tail-3"
    Then the rewind completes
    And the runtime of agent "agent-codex" was restored to its recovery point for message "msg-tail-3"
    And the codex thread of agent "agent-codex" has turns "turn-1"
    And every runtime restore happened before the first tombstone
    And messages "msg-tail-3, msg-tail-t1, msg-tail-t2, msg-tail-t3" are rewound tombstones
    And messages "msg-tail-1, msg-tail-2" are untouched
    And scope "thread-save-bar" is archived

  @rule:thread.tail-target-fork-cascades @rule:scope.cascade-boundary-fields @ambiguity:tail-fork-below-target
  Scenario: a thread on the suffix's last message cascades when the target is earlier, or blocks it
    Given the conversation "reply-threads-human"
    When human "alice" rewinds to before message "t-3"
    Then the rewind cascades into the tail thread "th-tail", tombstoning "t-3, t-4, tt-1, tt-2", or is refused for the later reply thread
    And scope "th-mid" is not archived

  @rule:thread.cascade-other-human-guard @rule:err.other-human-message
  Scenario: another human's reply in the cascaded thread blocks the rewind
    Given the conversation "reply-threads-human"
    When human "alice" rewinds to before message "b-2"
    Then the rewind is refused with "rewind is blocked because another human sent a later message"
    And the database is unchanged
    And no rewind operation is recorded but a failed one

  @rule:cascade.archive-child-scope @rule:cascade.no-delete-path
  Scenario: the cascaded thread is archived, not deleted
    Given the conversation "reply-threads-human"
    When human "alice" rewinds to before message "t-4"
    Then the rewind completes
    And scope "th-tail" is archived
    And the "scope_messages" rows where "scope_id" is "th-tail" are:
      | id   | seq | content |
      | tt-1 | 1   |         |
      | tt-2 | 2   |         |

  @rule:cascade.recompute-parent-message-summary @rule:cascade.recompute-parent-scope-summary
  Scenario: the parent message and the parent scope summaries are recomputed
    Given the conversation "reply-threads-human"
    When human "alice" rewinds to before message "t-4"
    Then the rewind completes
    And the "scope_messages" rows where "id" is "t-4" are:
      | reply_count | last_reply_at |
      | 0           | <null>        |
    And the visible summary of scope "ch-team" counts only its non-rewound messages
    And the high-water marks of scope "ch-team" did not go down

  @rule:recompute.visible-summary-fields @rule:recompute.latest-seq-high-water @rule:recompute.latest-global-seq-high-water @rule:cascade.archive-child-scope
  Scenario: the archived thread's own summary counts none of its rewound messages
    Given the conversation "reply-threads-human"
    When human "alice" rewinds to before message "t-4"
    Then the rewind completes
    And scope "th-tail" is archived
    And the visible summary of scope "th-tail" counts only its non-rewound messages
    And the "scopes" rows where "id" is "th-tail" are:
      | latest_seq | latest_global_seq | visible_message_count | latest_message_at | visible_last_message_at |
      | 2          | 7                 | 0                     | <null>            | <null>                  |

  @rule:cascade.suppress-child-state-facts
  Scenario: the cascaded thread's reactions, search docs and activity are scrubbed
    Given the conversation "reply-threads-human"
    When human "alice" rewinds to before message "t-4"
    Then the rewind completes
    And the "scope_message_reactions" rows where "scope_id" is "th-tail" are:
      | message_id |
    And the "scope_message_search_docs" rows where "scope_id" is "th-tail" are:
      | message_id |
    And the "scope_activity_events" rows where "scope_id" is "th-tail" are:
      | message_id | status     |
      | tt-2       | suppressed |
    And no transcript or projection holds the canaries of messages "t-4, tt-1, tt-2"

  @rule:scope.reply-thread-supported @rule:recompute.reply-thread-summary @rule:scope.parent-broadcast-not-tombstone @ambiguity:notice-in-reply-summary
  Scenario: a rewind inside a reply thread leaves the parent scope alone
    Given the conversation "reply-threads-human"
    When human "alice" rewinds to before message "tt-2"
    Then the rewind completes
    And messages "tt-2" are rewound tombstones
    And messages "t-1, t-2, t-3, tt-1" are untouched
    And scope "th-tail" is not archived
    And the "scope_messages" rows where "id" is "t-4" are, by ambiguity "notice-in-reply-summary":
      | content                                 | reply_count | last_reply_at                          |
      | Decision: managed hosting CANARY-th-t4d | 1 or 2      | 2026-01-01 00:06:00+00 or <notice at> |

  @rule:lifecycle.thread-id-primary-scope @rule:lifecycle.thread-id-no-broadcast
  Scenario: the operation of a thread rewind belongs to the thread, not its parent
    Given the conversation "reply-threads-human"
    When human "alice" rewinds to before message "tt-1"
    Then the rewind completes
    And the rewind operation has status "completed"
