Feature: ApplyRewind suppresses and scrubs the suffix's facts (spec section 6.1)
  In the one apply transaction, every delivery fact and projection that could keep
  a rewound message alive is suppressed or scrubbed, and the transcript row is
  tombstoned last. Facts of messages outside the suffix stay as they were.

  Background:
    Given the conversation "projections-human-suffix"
    When human "alice" rewinds to before message "n-4"
    Then the rewind completes

  @rule:apply.suppress-activity-events
  Scenario: unconsumed activity events of the suffix are suppressed
    Then the "scope_activity_events" rows where "scope_id" is "ch-notes" are:
      | message_id | kind           | status     |
      | <null>     | member.joined  | pending    |
      | n-2        | message.created | pending   |
      | n-3        | message.created | consumed  |
      | n-4        | message.created | consumed  |
      | n-5        | mention        | suppressed |
      | n-6        | message.created | suppressed |

  @rule:apply.suppress-fanout-outbox @rule:guard.delivered-outbox-retained @ambiguity:failed-fanout-rows
  Scenario: only unfinished fanout rows of the suffix are suppressed
    Then the "scope_fanout_outbox" rows where "scope_id" is "ch-notes" are, by ambiguity "failed-fanout-rows":
      | message_id | recipient_id | status               |
      | n-2        | bob          | pending              |
      | n-3        | alice        | delivered            |
      | n-4        | bob          | delivered            |
      | n-5        | bob          | suppressed           |
      | n-6        | alice        | failed or suppressed |
      | n-6        | bob          | suppressed           |

  @rule:apply.clamp-scope-sync-dirty @rule:recompute.no-frontier-past-tail @rule:guard.sync-dirty-keep-activity-frontier @ambiguity:notice-marks-sync-dirty
  Scenario: the scope's sync-dirty message frontier is clamped to the visible tail
    Then the "scope_sync_dirty" rows where "scope_id" is "ch-notes" are, by ambiguity "notice-marks-sync-dirty":
      | latest_message_seq | latest_activity_seq |
      | 3 or <notice>      | 9                   |
    And the "scope_sync_dirty" rows where "scope_id" is "ch-other" are:
      | latest_message_seq | latest_activity_seq |
      | 2                  | 1                   |

  @rule:apply.clamp-member-scope-sync-dirty @rule:apply.sync-dirty-keep-non-suffix @rule:recompute.no-frontier-past-tail @rule:guard.sync-dirty-keep-activity-frontier @ambiguity:notice-marks-sync-dirty
  Scenario: members' sync-dirty frontiers are clamped, earlier unsynced messages kept
    Then the "member_scope_sync_dirty" rows where "scope_id" is "ch-notes" are, by ambiguity "notice-marks-sync-dirty":
      | user_id | latest_message_seq | latest_activity_seq |
      | alice   | 3 or <notice>      | 9                   |
      | bob     | 2 or <notice>      | 7                   |

  @rule:apply.scrub-share-cards @ambiguity:projection-scrub-deletes-rows
  Scenario: share cards of the suffix are scrubbed
    Then the "scope_share_cards" rows where "scope_id" is "ch-notes" are:
      | id      | message_id |
      | card-n2 | n-2        |

  @rule:apply.scrub-reactions @ambiguity:projection-scrub-deletes-rows
  Scenario: reactions to the suffix are scrubbed
    Then the "scope_message_reactions" rows where "scope_id" is "ch-notes" are:
      | message_id | reactor_id | emoji |
      | n-3        | alice      | 👍    |

  @rule:apply.scrub-pins @rule:apply.scrub-top-notices @ambiguity:projection-scrub-deletes-rows
  Scenario: pins and top notices of the suffix are scrubbed
    Then the "scope_message_pins" rows where "scope_id" is "ch-notes" are:
      | message_id |
      | n-1        |
    And the "scope_message_top_notices" rows where "scope_id" is "ch-notes" are:
      | message_id |
      | n-2        |

  @rule:apply.scrub-search-docs @ambiguity:projection-scrub-deletes-rows
  Scenario: search documents of the suffix are scrubbed
    Then the "scope_message_search_docs" rows where "scope_id" is "ch-notes" are:
      | message_id |
      | n-1        |
      | n-2        |
      | n-3        |

  @rule:apply.scrub-sources @ambiguity:projection-scrub-deletes-rows
  Scenario: sources are scrubbed when the suffix is the citing or the cited message
    Then the "scope_message_sources" rows where "scope_id" is "ch-notes" are:
      | message_id | source_message_id |
      | n-3        | n-1               |
    And the "scope_message_sources" rows where "scope_id" is "ch-other" are:
      | message_id | source_message_id |

  @rule:apply.scrub-attachments @rule:apply.unrelated-attachments-untouched @ambiguity:projection-scrub-deletes-rows
  Scenario: attachments of suffix messages go; task, upload and other messages' attachments stay
    Then the "attachments" rows where "workspace_id" is "ws-notes" are:
      | id          | owner_kind      | message_id |
      | att-task    | task_discussion | <null>     |
      | att-upload  | upload          | <null>     |
      | att-vendors | message         | n-2        |

  @rule:apply.scrub-im-stream-events @ambiguity:scrubbed-stream-event-shape
  Scenario: durable stream events of the suffix lose every content-bearing key
    Then the "im_stream_events" rows of scope "ch-notes" keep no content of messages "n-4, n-5, n-6", the others untouched

  @rule:apply.scrub-im-conversation-index @ambiguity:scrubbed-index-shape
  Scenario: the conversation index loses the suffix's preview
    Then the "im_conversation_index" rows of scope "ch-notes" keep no content of messages "n-4, n-5, n-6", the others untouched
    And the "im_conversation_index" rows where "scope_id" is "ch-other" are:
      | user_id | projection_json                                                                 |
      | alice   | {"unread": 0, "lastMessage": {"id": "o-2", "preview": "Sharing the vendor card here CANARY-nt-o2b8"}} |

  @rule:apply.suppress-activity-events @rule:apply.suppress-fanout-outbox @rule:apply.scrub-share-cards @rule:apply.scrub-reactions @rule:apply.scrub-pins @rule:apply.scrub-top-notices @rule:apply.scrub-search-docs @rule:apply.scrub-sources @rule:apply.scrub-attachments @rule:apply.scrub-im-stream-events @rule:apply.scrub-im-conversation-index @rule:scope.scope-id-transaction-boundary
  Scenario: the scrub stays inside the suffix: earlier messages and the other channel keep their rows
    Then every projection, delivery fact and recovery point not bound to messages "n-4, n-5, n-6" is as before
    And every row of scope "ch-other" not bound to messages "n-4, n-5, n-6" is as before

  @rule:sem.scrub-leaking-projections @rule:inv.read-paths-no-suffix
  Scenario: no transcript, projection or sidecar keeps the suffix's content
    Then no transcript or projection holds the canaries of messages "n-4, n-5, n-6"

  @rule:apply.transcript-last @rule:apply.single-transaction
  Scenario: projections are scrubbed before the transcript is tombstoned, in one transaction
    Then the suffix was tombstoned in one transaction, after every projection scrub
