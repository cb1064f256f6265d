Feature: The implementation's database session fails in the middle of a rewind (spec sections 6, 6.4 and 7)
  The database session the implementation rewinds with is terminated, or a statement of its
  apply times out, at each phase of a rewind: while it plans, once its operation is recorded,
  while a runtime restores, inside the apply before and after the tombstones, and at commit.
  Afterwards the rewind has either completed whole (an implementation may retry on a new
  session) or changed nothing but its operation, which says what happened: `failed` when no
  runtime had been restored, `repair_required` when one had; no operation is left `preparing`,
  and the same rewind, asked again, completes. Each scenario counts in the database fault
  matrix of the run summary (phase x fault).

  # An implementation that takes the scope's lock before recording its operation has no phase
  # "after the operation is recorded" in which it waits: it is struck while it waits for the
  # lock, before recording (ambiguity `plan-persist-vs-scope-lock`).
  @rule:conc.no-partial-success @rule:conc.diagnosable-failure-status @rule:lifecycle.failed @rule:apply.single-transaction @rule:lifecycle.preparing-only-active @ambiguity:plan-persist-vs-scope-lock
  Scenario Outline: a "<fault>" fault <phase>: nothing half-applied, a diagnosable status, and the retry completes
    Given the conversation "projections-human-suffix"
    When human "alice" rewinds to before message "n-4" with a "<fault>" fault <phase>
    Then the database fault left the rewind whole or undone, its operation saying which
    When the rewind is retried unless it completed
    Then the rewind completes
    And messages "n-4, n-5, n-6" are rewound tombstones
    And messages "n-1, n-2, n-3" are untouched

    Examples:
      | fault              | phase                               |
      | backend terminated | while planning                      |
      | backend terminated | after the operation is recorded     |
      | backend terminated | inside apply, before the tombstones |
      | backend terminated | inside apply, after the tombstones  |
      | backend terminated | at commit                           |
      | statement timeout  | inside apply, before the tombstones |
      | statement timeout  | inside apply, after the tombstones  |
      | statement timeout  | at commit                           |

  # With an agent in the suffix, the runtime is restored before the apply: a failure after
  # that leaves a runtime that forgot the suffix and a conversation that still shows it, which
  # only `repair_required` describes. The retry restores again (the runtime is already there)
  # and completes.
  @rule:conc.no-partial-success @rule:conc.diagnosable-failure-status @rule:lifecycle.repair-required @rule:apply.single-transaction @rule:runtime.apply-after-all-restores
  Scenario Outline: a "<fault>" fault <phase> of a rewind that restores an agent: nothing half-applied, repair required, and the retry completes
    Given the conversation "runtime-agents"
    When human "alice" rewinds to before message "codex-3" with a "<fault>" fault <phase>
    Then the database fault left the rewind whole or undone, its operation saying which
    When the rewind is retried unless it completed
    Then the rewind completes
    And messages "codex-3, codex-4" are rewound tombstones
    And messages "codex-1, codex-2" are untouched

    Examples:
      | fault              | phase                                               |
      | backend terminated | during the runtime restore of agent "cody"          |
      | backend terminated | inside apply, before the tombstones                 |
      | backend terminated | at commit                                           |
      | statement timeout  | inside apply, after the tombstones                  |
