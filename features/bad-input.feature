Feature: Bad input over the contract (spec sections 2.1 and 3)
  Every field of every request the driver protocol carries gets values no client should send:
  unknown ids, ids of another conversation, empty and 10,000-character strings, SQL- and
  path-shaped strings, a NUL character, bidirectional text, out-of-range numbers. Each is turned
  away cleanly: a refusal (a rewind), a read's own answer, or a client-error `DriverError`,
  never a failure of the implementation (a 5xx, a crash, a hang), and the database is as it
  was. A message's content and a search query are data: injection-shaped text is stored or
  searched as it is.

  @contract @rule:init.target-visible-hot @rule:init.human-only
  Scenario: every field of a rewind request, with bad values
    Given the conversation "projections-human-suffix"
    When every field of the rewind of human "alice" to before message "n-4" gets bad values
    Then every bad request was turned away cleanly, the database unchanged

  @contract
  Scenario Outline: every field of a <request>, with bad values
    Given the conversation "<fixture>"
    When every field of the <step> gets bad values
    Then every bad request was turned away cleanly, the database unchanged

    Examples:
      | request                 | fixture                  | step                                      |
      | live send               | projections-human-suffix | send of human "alice" in scope "ch-notes" |
      | read-state read         | projections-human-suffix | read state of human "bob" in scope "ch-notes" |
      | message sync            | projections-human-suffix | sync of human "bob" in scope "ch-notes"   |
      | search read             | projections-human-suffix | read of human "bob" in scope "ch-notes"   |
      | delivery                | runtime-agents           | delivery of message "codex-3"             |
      | recovery-point pruning  | runtime-agents           | pruning of agent "cody"                   |
