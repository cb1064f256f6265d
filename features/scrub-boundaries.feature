Feature: What a rewind leaves alone (spec sections 2, 6.1, 6.2 and 6.3)
  The suppress, scrub, clamp and recompute of the apply transaction reach the suffix only: the
  rewound scope's earlier messages, their reply threads, the parent channel of a rewound thread
  and every other conversation of the workspace keep their transcript, projections, delivery
  facts, read cursors, sync-dirty frontiers, summaries and recovery points exactly as they were.
  Every scope of the conversation holds every projection kind, and cursors and frontiers above
  any rewound scope's visible tail, so a scrub or clamp that reaches too far changes a row.

  Background:
    Given the conversation "scrub-boundaries"

  @rule:scope.scope-id-transaction-boundary @rule:apply.tombstone-suffix @rule:apply.suppress-activity-events @rule:apply.suppress-fanout-outbox @rule:apply.clamp-scope-sync-dirty @rule:apply.clamp-member-scope-sync-dirty @rule:apply.scrub-share-cards @rule:apply.scrub-reactions @rule:apply.scrub-pins @rule:apply.scrub-top-notices @rule:apply.scrub-search-docs @rule:apply.scrub-sources @rule:apply.scrub-attachments @rule:apply.scrub-im-stream-events @rule:apply.scrub-im-conversation-index @rule:apply.delete-consumed-recovery-points @rule:inv.recovery-point-lifecycle @rule:recompute.visible-summary-fields @rule:recompute.clamp-last-read-seq @rule:recompute.clamp-last-read-global-seq @rule:recompute.clamp-owner-context-dismissed
  Scenario: a main-line rewind leaves its earlier messages, their thread and the other conversations as they were
    When human "alice" rewinds to before message "m-4"
    Then the rewind completes
    And messages "m-4, m-5" are rewound tombstones
    And messages "m-1, m-2, m-3" are untouched
    And every projection, delivery fact and recovery point not bound to messages "m-4, m-5" is as before
    And every row of scopes "th-side, ch-fork, th-keep, th-fork, dm-bot" is as before

  @rule:scope.reply-thread-supported @rule:scope.parent-broadcast-not-tombstone @rule:scope.scope-id-transaction-boundary @rule:apply.scrub-reactions @rule:apply.scrub-search-docs @rule:recompute.clamp-last-read-seq
  Scenario: a rewind inside a reply thread leaves the parent channel and the other conversations as they were
    When human "alice" rewinds to before message "s-2"
    Then the rewind completes
    And messages "s-2, s-3" are rewound tombstones
    And every projection, delivery fact and recovery point not bound to messages "s-2, s-3" is as before
    And every row of scope "ch-main" is as before, reply summaries aside
    And every row of scopes "ch-fork, th-keep, th-fork, dm-bot" is as before

  @rule:cascade.child-tombstone-from-seq-one @rule:cascade.suppress-child-state-facts @rule:cascade.archive-child-scope @rule:cascade.recompute-parent-scope-summary @rule:recompute.visible-summary-fields @rule:recompute.clamp-last-read-seq @rule:recompute.clamp-last-read-global-seq @rule:recompute.clamp-owner-context-dismissed @rule:apply.clamp-scope-sync-dirty @rule:apply.clamp-member-scope-sync-dirty @rule:scope.scope-id-transaction-boundary @ambiguity:cursor-clamp-and-notice
  Scenario: a cascade leaves the earlier messages, their live thread and the other conversations as they were
    When human "alice" rewinds to before message "k-4"
    Then the rewind completes
    And messages "k-4, kf-1, kf-2" are rewound tombstones
    And messages "k-1, k-2, k-3" are untouched
    And scope "th-fork" is archived
    And the visible summary of scope "th-fork" counts only its non-rewound messages
    And the visible summary of scope "ch-fork" counts only its non-rewound messages
    And the "scope_memberships" rows where "scope_id" is "ch-fork" are:
      | user_id | last_read_seq | last_read_global_seq | owner_context_dismissed_through_global_seq |
      | alice   | 3             | 11                   | 11                                         |
      | bob     | 3             | 11                   | 0                                          |
    And every projection, delivery fact and recovery point not bound to messages "k-4, kf-1, kf-2" is as before
    And every row of scopes "th-keep, ch-main, th-side, dm-bot" is as before
