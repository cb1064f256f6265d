@client
Feature: The browser client's rewind recovery (spec section 8, client side)
  The server announces a rewind with one coarse `conversation:rewound`; what the page then does
  is the browser client's duty. Each scenario runs the client under test in headless Chromium
  against the harness's gateway, which answers every call from the implementation under test
  (message sync, history, summary, unread, search, share cards) and controls the network in
  between: it holds, drops, duplicates and reorders HTTP answers and websocket frames. Message-
  sync cursors are opaque positions among the visible messages, so a cursor kept across a rewind
  points past the new visible tail. Bob reads #lanterns; alice rewinds her own tail (w-4..w-6).

  Background:
    Given the conversation "browser-client"

  @rule:realtime.client-refresh-surfaces
  Scenario: after a rewind the page refetches every surface it shows and shows what the server now shows
    Given the browser shows scope "ch-lanterns" to human "bob"
    And the browser searched for "lantern"
    Then the browser shows what the implementation shows
    When human "alice" rewinds to before message "w-4"
    Then the rewind completes
    And the browser refetched the conversation, summary, unread, search, share-cards and tasks after the rewind
    And the browser shows what the implementation shows
    And the browser keeps no rewound text

  @rule:realtime.client-recovery-order
  Scenario: the recovery drops outstanding resumes, clears the cursor, refetches, then bootstraps a fresh syncGap
    Given the browser shows scope "ch-lanterns" to human "bob"
    And the browser searched for "lantern"
    And the network holds every "sync:resume:response"
    When human "alice" sends "One more lantern idea CANARY-bc-live-07" in scope "ch-lanterns"
    Then the network holds 1 "sync:resume:response"
    Given the network holds every "conversation", "summary", "unread", "search", "share-cards" and "tasks"
    When human "alice" rewinds to before message "w-4"
    Then the rewind completes
    And the browser requests its first refetch after the rewind
    And the browser keeps no message-sync cursor from before the rewind
    When the network releases everything it holds of "sync:resume:response"
    And the network passes every "conversation", "summary", "unread", "search", "share-cards" and "tasks" again
    And the network releases everything it holds
    Then the browser bootstrapped its fresh syncGap only after every refetch
    And the browser shows what the implementation shows
    And the browser keeps no rewound text

  @rule:realtime.client-cursor-rewind-boundary
  Scenario: the cursor is rebuilt at the rewind boundary, so the new tail and a live message after the rewind are not skipped
    Given the browser shows scope "ch-lanterns" to human "bob"
    When human "alice" rewinds to before message "w-4"
    Then the rewind completes
    When human "alice" sends "Back to the stage plan CANARY-bc-after-08" in scope "ch-lanterns"
    Then the browser shows what the implementation shows
    And the browser shows the rewind notice and the message sent after the rewind
    And no sync request after the rewind carried a cursor from before it
    And the browser keeps no message-sync cursor from before the rewind

  @rule:realtime.client-cursor-rewind-boundary
  Scenario: a live message synced while the refetched conversation is on its way is still shown when it lands
    Given the browser shows scope "ch-lanterns" to human "bob"
    And the network holds every "conversation"
    When human "alice" rewinds to before message "w-4"
    Then the rewind completes
    And the browser requests its first refetch after the rewind
    When human "alice" sends "Back to the stage plan CANARY-bc-late-09" in scope "ch-lanterns"
    And the browser has settled
    And the network passes every "conversation" again
    And the network releases everything it holds
    Then the browser shows what the implementation shows
    And the browser shows the rewind notice and the message sent after the rewind
    And no sync request after the rewind carried a cursor from before it

  @rule:realtime.client-stale-responses-guarded @rule:realtime.client-stale-return-early @rule:realtime.client-stale-queue-fresh-sync
  Scenario: a syncMessages page from before the rewind that arrives after it is ignored, and one fresh sync follows
    Given the browser pages message sync 2 messages at a time
    And the network holds the next "syncMessages"
    And the browser shows scope "ch-lanterns" to human "bob"
    Then the network holds 1 "syncMessages"
    When human "alice" rewinds to before message "w-4"
    Then the rewind completes
    And the browser shows what the implementation shows
    Given the network holds every "syncGap" and "syncMessages"
    When the network releases everything it holds of "syncMessages"
    Then the stale "syncMessages" page was delivered after the rewind
    And the browser merged nothing of the stale page
    And the browser keeps no message-sync cursor from before the rewind
    When the network passes every "syncGap" and "syncMessages" again
    And the network releases everything it holds
    Then no sync request after the rewind carried a cursor from before it
    And the browser keeps no message-sync cursor from before the rewind
    And the browser started exactly one fresh sync after the stale page arrived
    And the browser shows what the implementation shows
    And the browser keeps no rewound text

  @rule:realtime.client-stale-responses-guarded @rule:realtime.client-stale-return-early @rule:realtime.client-stale-queue-fresh-sync
  Scenario: a websocket sync:resume:response from before the rewind that arrives after it is ignored, and one fresh sync follows
    Given the browser shows scope "ch-lanterns" to human "bob"
    And the network holds the next "sync:resume:response"
    When human "alice" sends "Lantern colours are amber and teal CANARY-bc-live-09" in scope "ch-lanterns"
    Then the network holds 1 "sync:resume:response"
    When human "alice" rewinds to before message "w-4"
    Then the rewind completes
    And the browser shows what the implementation shows
    Given the network holds every "syncGap", "syncMessages" and "sync:resume:response"
    When the network releases everything it holds of "sync:resume:response"
    Then the stale "sync:resume:response" page was delivered after the rewind
    And the browser merged nothing of the stale page
    And the browser keeps no message-sync cursor from before the rewind
    When the network passes every "syncGap", "syncMessages" and "sync:resume:response" again
    And the network releases everything it holds
    Then no sync request after the rewind carried a cursor from before it
    And the browser keeps no message-sync cursor from before the rewind
    And the browser started exactly one fresh sync after the stale page arrived
    And the browser shows what the implementation shows
    And the browser keeps no rewound text

  @rule:realtime.notice-recovery-via-refetch
  Scenario: the notice's own event is lost and the page shows the notice from its refetch
    Given the browser shows scope "ch-lanterns" to human "bob"
    And the network drops every "message.created"
    When human "alice" rewinds to before message "w-4"
    Then the rewind completes
    And the network dropped the rewind notice's "message.created"
    And the browser shows the rewind notice
    And the browser shows what the implementation shows
    And the browser keeps no rewound text

  @rule:realtime.client-recovery-order @rule:realtime.client-stale-responses-guarded
  Scenario: a second rewind during the recovery from the first restarts the recovery; a duplicated invalidation changes nothing
    Given the browser shows scope "ch-lanterns" to human "bob"
    And the network duplicates every "conversation:rewound"
    And the network holds every "conversation"
    When human "alice" rewinds to before message "w-6"
    Then the rewind completes
    And the browser requests its first refetch after the rewind
    When human "alice" rewinds to before message "w-5"
    Then the rewind completes
    And the browser requests its first refetch after the rewind
    When the network passes every "conversation" again
    And the network releases everything it holds, newest first
    Then the browser shows what the implementation shows
    And no sync request after the rewind carried a cursor from before it
    And the browser keeps no rewound text
