Feature: Runtime restore faults (spec sections 5, 6.4 and 7)
  Each mock runtime can fail its restore in every way a real one can: an error,
  a hang past the caller's timeout, a "success" that changes nothing (only the
  verifying read-back can notice), an unknown (detached) session, a busy
  session, or a crash in the middle of the call. Whatever the fault, a restore
  that did not take effect fails the rewind before the apply: the operation is
  recorded as failed and the conversation is left as it was. Each example is one
  cell of the fault matrix (runtime x fault kind) the run report prints.

  @rule:runtime.restore-verify @rule:runtime.apply-after-all-restores @rule:lifecycle.failed @rule:conc.no-partial-success
  Scenario Outline: a <runtime> restore that fails with "<fault>" fails the rewind and applies nothing
    Given the conversation "runtime-agents"
    And the <mock> runtime answers the restore of agent "<agent>" with "<fault>"
    When human "alice" rewinds to before message "<target>"
    Then the rewind is refused with code "runtime_restore_failed"
    And the <mock> runtime answered the restore of agent "<agent>" with the fault "<fault>"
    And messages "<target>, <next>" are untouched
    And the rewind operation has status "failed"
    And the <mock> session of agent "<agent>" is as seeded

    Examples: codex
      | runtime | mock | agent | target | next | fault |
      | codex | codex | cody | codex-3 | codex-4 | error |
      | codex | codex | cody | codex-3 | codex-4 | hang |
      | codex | codex | cody | codex-3 | codex-4 | success-without-effect |
      | codex | codex | cody | codex-3 | codex-4 | unknown session |
      | codex | codex | cody | codex-3 | codex-4 | busy |
      | codex | codex | cody | codex-3 | codex-4 | crash |

    Examples: claude
      | runtime | mock | agent | target | next | fault |
      | claude | claude | clio | claude-3 | claude-4 | error |
      | claude | claude | clio | claude-3 | claude-4 | hang |
      | claude | claude | clio | claude-3 | claude-4 | success-without-effect |
      | claude | claude | clio | claude-3 | claude-4 | unknown session |
      | claude | claude | clio | claude-3 | claude-4 | busy |
      | claude | claude | clio | claude-3 | claude-4 | crash |

    Examples: opencode
      | runtime | mock | agent | target | next | fault |
      | opencode | opencode | ode | opencode-3 | opencode-4 | error |
      | opencode | opencode | ode | opencode-3 | opencode-4 | hang |
      | opencode | opencode | ode | opencode-3 | opencode-4 | success-without-effect |
      | opencode | opencode | ode | opencode-3 | opencode-4 | unknown session |
      | opencode | opencode | ode | opencode-3 | opencode-4 | busy |
      | opencode | opencode | ode | opencode-3 | opencode-4 | crash |

    Examples: builtin
      | runtime | mock | agent | target | next | fault |
      | builtin | opencode | bix | builtin-3 | builtin-4 | error |
      | builtin | opencode | bix | builtin-3 | builtin-4 | hang |
      | builtin | opencode | bix | builtin-3 | builtin-4 | success-without-effect |
      | builtin | opencode | bix | builtin-3 | builtin-4 | unknown session |
      | builtin | opencode | bix | builtin-3 | builtin-4 | busy |
      | builtin | opencode | bix | builtin-3 | builtin-4 | crash |
