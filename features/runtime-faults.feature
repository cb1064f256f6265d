Feature: Runtime restore faults (spec sections 5, 6.4 and 7)
  Each mock runtime can fail its restore in every way a real one can: an error,
  a hang past the caller's timeout, a "success" that changes nothing (only the
  verifying read-back can notice), an unknown (detached) session, a busy
  session, or a crash in the middle of the call. Whatever the fault, a restore
  that did not take effect fails the rewind before the apply and leaves the
  conversation as it was. A definite refusal (an error, an unknown or busy
  session) records the operation as failed; after a hang, a crash mid-call or a
  "success" without effect the implementation cannot know whether the runtime
  changed, so `failed` and `repair_required` are both accepted. Each example is
  one cell of the fault matrix (runtime x fault kind) the run report prints.
  Claude has no "success without effect" cell here: its validating run without a
  prompt changes nothing on the real CLI either, so the boundary may take effect
  only with the next prompt; `delivery.feature` checks a delivery without effect
  there.

  @rule:runtime.restore-verify @rule:runtime.apply-after-all-restores @rule:lifecycle.failed @rule:conc.no-partial-success @rule:realtime.notice-only-after-success @ambiguity:restore-failure-wording
  Scenario Outline: a <runtime> restore refused with "<fault>" fails the rewind and applies nothing
    Given the conversation "runtime-agents"
    And the <mock> runtime answers the restore of agent "<agent>" with "<fault>"
    When human "alice" rewinds to before message "<target>"
    Then the rewind is refused as a failed runtime restore
    And the <mock> runtime answered the restore of agent "<agent>" with the fault "<fault>"
    And messages "<target>, <next>" are untouched
    And the rewind operation has status "failed"
    And the <mock> session of agent "<agent>" is as seeded
    And no rewind notice was posted
    And no "message.created" event was published

    Examples: codex
      | runtime | mock | agent | target | next | fault |
      | codex | codex | cody | codex-3 | codex-4 | error |
      | codex | codex | cody | codex-3 | codex-4 | unknown session |
      | codex | codex | cody | codex-3 | codex-4 | busy |

    Examples: claude
      | runtime | mock | agent | target | next | fault |
      | claude | claude | clio | claude-3 | claude-4 | error |
      | claude | claude | clio | claude-3 | claude-4 | unknown session |
      | claude | claude | clio | claude-3 | claude-4 | busy |

    Examples: opencode
      | runtime | mock | agent | target | next | fault |
      | opencode | opencode | ode | opencode-3 | opencode-4 | error |
      | opencode | opencode | ode | opencode-3 | opencode-4 | unknown session |
      | opencode | opencode | ode | opencode-3 | opencode-4 | busy |

    Examples: builtin
      | runtime | mock | agent | target | next | fault |
      | builtin | opencode | bix | builtin-3 | builtin-4 | error |
      | builtin | opencode | bix | builtin-3 | builtin-4 | unknown session |
      | builtin | opencode | bix | builtin-3 | builtin-4 | busy |

  @rule:runtime.restore-verify @rule:runtime.apply-after-all-restores @rule:conc.no-partial-success @rule:realtime.notice-only-after-success @ambiguity:restore-failure-wording @ambiguity:restore-outcome-unknown
  Scenario Outline: a <runtime> restore whose outcome is unknown ("<fault>") applies nothing
    Given the conversation "runtime-agents"
    And the <mock> runtime answers the restore of agent "<agent>" with "<fault>"
    When human "alice" rewinds to before message "<target>"
    Then the rewind is refused as a failed runtime restore
    And the <mock> runtime answered the restore of agent "<agent>" with the fault "<fault>"
    And messages "<target>, <next>" are untouched
    And the rewind operation is "failed", or "repair_required" as the restore's outcome is unknown
    And the <mock> session of agent "<agent>" is as seeded
    And no rewind notice was posted
    And no "message.created" event was published

    Examples: codex
      | runtime | mock | agent | target | next | fault |
      | codex | codex | cody | codex-3 | codex-4 | hang |
      | codex | codex | cody | codex-3 | codex-4 | success-without-effect |
      | codex | codex | cody | codex-3 | codex-4 | crash |

    Examples: claude
      | runtime | mock | agent | target | next | fault |
      | claude | claude | clio | claude-3 | claude-4 | hang |
      | claude | claude | clio | claude-3 | claude-4 | crash |

    Examples: opencode
      | runtime | mock | agent | target | next | fault |
      | opencode | opencode | ode | opencode-3 | opencode-4 | hang |
      | opencode | opencode | ode | opencode-3 | opencode-4 | success-without-effect |
      | opencode | opencode | ode | opencode-3 | opencode-4 | crash |

    Examples: builtin
      | runtime | mock | agent | target | next | fault |
      | builtin | opencode | bix | builtin-3 | builtin-4 | hang |
      | builtin | opencode | bix | builtin-3 | builtin-4 | success-without-effect |
      | builtin | opencode | bix | builtin-3 | builtin-4 | crash |
