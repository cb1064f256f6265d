Feature: Rewind storms (spec sections 6.4, 7 and 10)
  Many rewinds at once, of one scope, of a channel and its reply threads, and between live
  sends and deliveries. The winner of each scope is held (in its agent's restore, or on a row
  lock the harness holds) until every other rewind of its scope has answered, so they all
  overlap whatever the implementation's lock order: exactly one rewind of a scope completes,
  every other is refused with the spec's message, no operation is left `preparing`, nothing is
  half-applied, and the section 10 invariants hold. Each scenario counts in the storm matrix of
  the run summary (storm x rewinds started at once).

  @storm:one-scope @rule:conc.single-active-per-scope @rule:err.rewind-in-progress @rule:lifecycle.preparing-only-active @rule:conc.no-partial-success
  Scenario Outline: <count> rewinds of one scope at once: one winner, every other refused at once
    Given the conversation "runtime-agents"
    And the codex runtime holds the restore of agent "cody"
    When <count> rewinds by human "alice" to before messages "codex-3, codex-1" start at once
    Then every racing rewind but one of each scope answers while that one is preparing
    When the harness lets the runtime answer the restore of agent "cody"
    And every racing rewind finishes
    Then exactly one rewind of scopes "dm-codex" completed, every other refused with "another rewind is already in progress"

    Examples:
      | count |
      | 2     |
      | 8     |
      | 32    |

  # A channel rewind of its tail message cascades the tail thread, so it and the thread's own
  # rewinds touch one scope from two operations: whichever completes first, the other finds its
  # suffix changed, or plans after it and takes what is left. The middle thread's rewinds race
  # only among themselves. Every rewind of a scope asks for one target, so at most one of them
  # can complete. The harness holds the scopes' row locks until the rewinds have settled; an
  # implementation that takes those locks before planning runs them one after the other.
  @storm:a-channel-and-its-reply-threads @rule:conc.single-active-per-scope @rule:err.rewind-in-progress @rule:conc.revalidate-suffix-before-apply @rule:conc.no-partial-success @rule:thread.tail-target-fork-cascades
  Scenario Outline: <count> rewinds of a channel and its reply threads at once: at most one winner per scope, one outcome each
    Given the conversation "reply-threads-human"
    And the harness holds the row locks of scopes "ch-team, th-mid, th-tail"
    When <count> rewinds by human "alice" to before messages "t-4, tm-1, tt-2" start at once
    And the racing rewinds have settled
    And the harness releases its locks
    And every racing rewind finishes
    Then exactly one rewind of scopes "th-mid" completed, every other refused with "another rewind is already in progress" or "rewind is blocked because newer activity changed the conversation"
    And the rewinds of scopes "ch-team, th-tail" had one outcome each, as if run one after the other, at most one completing per scope
    And messages "t-1, t-3" are untouched

    Examples:
      | count |
      | 3     |
      | 9     |
      | 32    |

  @storm:with-live-sends-and-deliveries @rule:conc.single-active-per-scope @rule:err.rewind-in-progress @rule:conc.no-partial-success @rule:scope.scope-id-transaction-boundary
  Scenario Outline: <count> rewinds each of two conversations at once, between live sends and deliveries elsewhere
    Given the conversation "runtime-agents"
    And the codex runtime holds the restore of agent "cody"
    And the opencode runtime holds the restore of agent "ode"
    When <count> rewinds by human "alice" to before messages "codex-3, codex-1" start at once
    And human "alice" sends "Clio, one more question" in scope "dm-claude" as "live-1"
    And <count> rewinds by human "alice" to before messages "opencode-1, opencode-3" start at once
    And message "live-1" is delivered
    And human "bob" sends "Lunch is on the terrace" in scope "ch-lobby" as "live-2"
    Then every racing rewind but one of each scope answers while that one is preparing
    And agent "clio" answered "live-1"
    When the harness lets the runtime answer the restore of agent "cody"
    And the harness lets the runtime answer the restore of agent "ode"
    And every racing rewind finishes
    Then exactly one rewind of scopes "dm-codex" completed, every other refused with "another rewind is already in progress"
    And exactly one rewind of scopes "dm-opencode" completed, every other refused with "another rewind is already in progress"

    Examples:
      | count |
      | 2     |
      | 8     |

  # The initiator writes into the scope while its winning rewind is held in the restore: the
  # rewind restored its agent, then finds newer activity, so nothing is rewound and the
  # operation needs repair; the others were refused as in progress.
  @storm:a-live-send-into-the-held-scope @rule:conc.revalidate-suffix-before-apply @rule:err.suffix-drift @rule:lifecycle.repair-required @rule:conc.no-partial-success @rule:conc.diagnosable-failure-status
  Scenario Outline: <count> rewinds of one scope while the initiator writes into it: nobody completes, nothing is half-applied
    Given the conversation "runtime-agents"
    And the codex runtime holds the restore of agent "cody"
    When <count> rewinds by human "alice" to before messages "codex-3, codex-1" start at once
    Then every racing rewind but one of each scope answers while that one is preparing
    When human "alice" sends "Wait, one more thing" in scope "dm-codex" as "live-1"
    And the harness lets the runtime answer the restore of agent "cody"
    And every racing rewind finishes
    Then no rewind of scopes "dm-codex" completed, every one refused with "another rewind is already in progress" or "rewind is blocked because newer activity changed the conversation"
    And exactly one operation of scope "dm-codex" is "repair_required"
    And messages "codex-1, codex-2, codex-3, codex-4" are untouched

    Examples:
      | count |
      | 2     |
      | 8     |
