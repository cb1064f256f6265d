Feature: New messages after a rewind of the workspace's newest messages (spec sections 6.2 and 8)
  The seq and global seq high-water marks are physical: a rewind keeps the
  maximum its suffix used, so no later message reuses one of the suffix's seqs.
  When the suffix holds the newest messages of the whole workspace, the highest
  visible global seq drops below the highest one ever used; the rewind notice
  and every later message still take global seqs above that highest one.

  @rule:recompute.no-global-seq-reuse @rule:recompute.latest-global-seq-high-water @rule:recompute.no-seq-reuse @rule:realtime.notice-system-message
  Scenario: after the workspace's newest messages are rewound, the notice and a new message take global seqs above every one used
    Given the conversation "workspace-newest-suffix"
    When human "alice" rewinds to before message "w-3"
    Then the rewind completes
    And messages "w-3, w-4" are rewound tombstones
    And messages "w-1, w-2, o-1, o-2, o-3" are untouched
    And the high-water marks of scope "dm-pair" did not go down
    And a rewind notice was posted in scope "dm-pair"
    And the rewind notice's global_seq is above every global_seq the workspace used before the rewind
    When human "bob" sends "Where did the draft go? CANARY-hw-after" in scope "dm-pair"
    Then the new message's seq is above 4
    And the new message's global_seq is above every global_seq the workspace used before the rewind
