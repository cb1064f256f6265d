Feature: End to end on real runtimes (spec section 5 and the guardrail inventory)
  The release gate of every rewind-capable runtime: its restore strategy, run by the
  implementation against a real release of the runtime (`--runtimes real`), recovers a session
  the way the runtime's next turn sees it. Each turn is delivered live through the
  implementation; after the rewind the runtime's own read-back shows the state before the
  target, and the next turn proves it where it matters: the runtime sends its model the turns
  before the boundary and nothing of the rewound ones. A detached session is on disk only
  when the rewind comes (no runtime process holds it: codex and claude run a process per call,
  and the OpenCode server is restarted); a live one is held by the running process that ran its
  turns: the OpenCode server, or one codex app-server the harness keeps running for the
  implementation's calls (as a daemon's long-lived app-server). A claude session is live only
  inside one CLI run, and a restore is a run of its own, so claude has no live case. On the mock
  runtimes there is no model to ask, so these scenarios are not applicable there.

  @real-runtimes @rule:runtime.lan-e2e-release-gate @rule:guard.codex-lan-e2e @rule:guard.new-runtime-supported-gate @rule:runtime.restore-verify @ambiguity:claude-restore-evidence @ambiguity:claude-zero-boundary
  Scenario Outline: a detached <runtime> session is restored, and the next turn sends the model nothing of the rewound turns
    Given the conversation "live-agents"
    And human "alice" has said "m1, m2, m3" to agent "<agent>" in scope "<scope>"
    And <detached>
    When human "alice" rewinds to before message "m2"
    Then the rewind completes
    And the runtime of agent "<agent>" is as it was before "m2" was delivered
    Given human "alice" has said "m4" to agent "<agent>" in scope "<scope>"
    Then agent "<agent>" received "m4" in the state it had before "m2"
    And the model behind agent "<agent>" was sent "m4" after the turn of "m1" and nothing of "m2, m3"

    Examples:
      | runtime  | agent | scope       | detached                                            |
      | codex    | cody  | dm-codex    | no runtime process holds the session of agent "cody" |
      | claude   | clio  | dm-claude   | no runtime process holds the session of agent "clio" |
      | opencode | ode   | dm-opencode | the opencode server is restarted                    |
      | builtin  | bix   | dm-builtin  | the opencode server is restarted                    |

  @real-runtimes @rule:runtime.lan-e2e-release-gate @rule:guard.new-runtime-supported-gate @rule:runtime.restore-verify
  Scenario Outline: a live <runtime> session, held by the server that ran its turns, is restored, and the next turn sends the model nothing of the rewound turns
    Given the conversation "live-agents"
    And human "alice" has said "m1, m2, m3" to agent "<agent>" in scope "<scope>"
    When human "alice" rewinds to before message "m2"
    Then the rewind completes
    And the runtime of agent "<agent>" is as it was before "m2" was delivered
    Given human "alice" has said "m4" to agent "<agent>" in scope "<scope>"
    Then agent "<agent>" received "m4" in the state it had before "m2"
    And the model behind agent "<agent>" was sent "m4" after the turn of "m1" and nothing of "m2, m3"

    Examples:
      | runtime  | agent | scope       |
      | opencode | ode   | dm-opencode |
      | builtin  | bix   | dm-builtin  |

  @real-runtimes @rule:runtime.lan-e2e-release-gate @rule:guard.codex-lan-e2e @rule:guard.new-runtime-supported-gate @rule:runtime.restore-verify
  Scenario: a live codex session, held by the app-server that ran its turns, is restored, and the next turn sends the model nothing of the rewound turns
    Given the conversation "live-agents"
    And one codex app-server stays running and holds every thread it loads
    And human "alice" has said "m1, m2, m3" to agent "cody" in scope "dm-codex"
    When human "alice" rewinds to before message "m2"
    Then the rewind completes
    And the runtime of agent "cody" is as it was before "m2" was delivered
    Given human "alice" has said "m4" to agent "cody" in scope "dm-codex"
    Then agent "cody" received "m4" in the state it had before "m2"
    And the model behind agent "cody" was sent "m4" after the turn of "m1" and nothing of "m2, m3"
    And the live codex app-server served every codex call and still runs
