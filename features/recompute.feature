Feature: Recompute and clamp after the tombstone (spec section 6.2)
  The physical seq high-water marks stay; the visible summary counts only
  visible messages; every read cursor is clamped to the visible tail.

  Background:
    Given the conversation "projections-human-suffix"
    When human "alice" rewinds to before message "n-4"
    Then the rewind completes

  @rule:recompute.latest-seq-high-water @rule:recompute.latest-global-seq-high-water @rule:recompute.visible-summary-fields
  Scenario: the scope keeps its high-water marks and recounts its visible messages
    Then the high-water marks of scope "ch-notes" did not go down
    And the visible summary of scope "ch-notes" counts only its non-rewound messages
    And the "scopes" rows where "id" is "ch-other" are:
      | latest_seq | latest_global_seq | visible_message_count |
      | 2          | 8                 | 2                     |

  @rule:recompute.no-seq-reuse
  Scenario: a message sent after the rewind gets a seq above the old high-water mark
    When human "alice" sends "Back to planning CANARY-nt-new1" in scope "ch-notes"
    Then the new message's seq is above 6
    And the visible summary of scope "ch-notes" counts only its non-rewound messages

  @rule:recompute.clamp-last-read-seq @rule:recompute.clamp-last-read-global-seq @rule:recompute.clamp-owner-context-dismissed @rule:recompute.scope-read-state @rule:inv.cursors-within-visible-tail @ambiguity:cursor-clamp-and-notice
  Scenario: read and dismiss cursors are clamped to the visible tail, lower ones kept
    Then the "scope_memberships" rows where "scope_id" is "ch-notes" are:
      | user_id | last_read_seq | last_read_global_seq | owner_context_dismissed_through_global_seq |
      | alice   | 3             | 3                    | 3                                          |
      | bob     | 3             | 3                    | 2                                          |
    And no cursor is past its scope's visible tail

  @rule:recompute.clamp-derived-read-cursor @rule:inv.cursors-within-visible-tail @ambiguity:cursor-clamp-and-notice
  Scenario: the read state derived from the cursors stays within the visible tail
    Then the read cursor of human "alice" in scope "ch-notes" is 3, within the visible tail
    And the read cursor of human "bob" in scope "ch-notes" is 3, within the visible tail
    And human "bob" has 0 unread messages in scope "ch-notes"
