@reads
Feature: Every read surface after a rewind (spec sections 1 and 6.1.1)
  A rewound message does not exist for any read surface: history, by id, search, receive,
  root and source context, share cards, pins, reactions, attachment read-check and download,
  delivery diagnostics and their preview, durable stream replay and the conversation index.
  The transcript row and its lifecycle metadata are the authority: a projection, delivery
  evidence or stream event that still names a rewound message (here: every such row written
  back after the rewind, its text neutralised) never brings it back. A recalled message stays
  a placeholder, distinct from a rewound one. Each surface is read before and after a rewind in
  a DM, a channel and a reply thread.

  Scenario Outline: the <surface> of a scope shows no rewound message after a rewind in <place>, even when stale rows name it
    Given the conversation "<fixture>"
    When human "bob" reads the <surface> of scope "<read>"
    Then the read <before>
    When human "alice" rewinds to before message "<target>"
    Then the rewind completes
    When every projection row that named a rewound message comes back
    And human "bob" reads the <surface> of scope "<read>"
    Then the read <after>

    @rule:surface.history-authority @rule:surface.lifecycle-gate-reread @rule:sem.rewound-invisible-everywhere @rule:sem.rewound-not-recalled
    Examples: history
      | surface | place          | fixture                  | target | read     | before                                                | after                                                 |
      | history | a DM           | read-surfaces            | d-4    | dm-ab    | shows messages "d-1, d-2, d-3, d-4, d-5"              | shows messages "d-1, d-2, d-3" and the rewind notice  |
      | history | a reply thread | read-surfaces            | r-2    | th-plan  | shows messages "r-1, r-2, r-3"                        | shows messages "r-1" and the rewind notice            |
      | history | a channel      | projections-human-suffix | n-4    | ch-notes | shows messages "n-1, n-2, n-3, n-4, n-5, n-6"         | shows messages "n-1, n-2, n-3" and the rewind notice  |

    @rule:guard.receive-invisible @rule:sem.rewound-invisible-everywhere
    Examples: receive
      | surface | place          | fixture                  | target | read     | before                       | after                                           |
      | receive | a DM           | read-surfaces            | d-4    | dm-ab    | shows messages "d-4, d-5"    | shows messages "" and maybe the rewind notice   |
      | receive | a reply thread | read-surfaces            | r-2    | th-plan  | shows messages "r-2, r-3"    | shows messages "" and maybe the rewind notice   |
      | receive | a channel      | projections-human-suffix | n-4    | ch-notes | shows messages "n-6"         | shows messages "" and maybe the rewind notice   |

    @rule:surface.source-context-authority
    Examples: root context
      | surface      | place                                  | fixture       | target | read    | before                 | after                  |
      | root-context | a reply thread (its root stays)        | read-surfaces | r-2    | th-plan | shows messages "p-2"   | shows messages "p-2"   |
      | root-context | a channel whose tail thread cascades   | read-surfaces | p-4    | th-late | shows messages "p-4"   | shows messages ""      |

    @rule:surface.projections-not-authority @rule:surface.stale-reference-no-revival
    Examples: share cards
      | surface     | place          | fixture                  | target | read     | before                                 | after                               |
      | share-cards | a DM           | read-surfaces            | d-4    | ch-plan  | shows messages "d-2, d-4, r-1, r-3"    | shows messages "d-2, r-1, r-3"      |
      | share-cards | a reply thread | read-surfaces            | r-2    | ch-plan  | shows messages "d-2, d-4, r-1, r-3"    | shows messages "d-2, d-4, r-1"      |
      | share-cards | a channel      | projections-human-suffix | n-4    | ch-other | shows messages "n-2, n-4"              | shows messages "n-2"                |

    @rule:surface.projections-not-authority @rule:surface.stale-reference-no-revival
    Examples: pins
      | surface | place          | fixture                  | target | read     | before                     | after                 |
      | pins    | a DM           | read-surfaces            | d-4    | dm-ab    | shows messages "d-1, d-4"  | shows messages "d-1"  |
      | pins    | a reply thread | read-surfaces            | r-2    | th-plan  | shows messages "r-1, r-2"  | shows messages "r-1"  |
      | pins    | a channel      | projections-human-suffix | n-4    | ch-notes | shows messages "n-1, n-5"  | shows messages "n-1"  |

    @rule:surface.diagnostics-preview-authority @rule:surface.diag-no-resurrect
    Examples: diagnostics preview
      | surface             | place          | fixture                  | target | read     | before                                         | after                                                     |
      | diagnostics-preview | a DM           | read-surfaces            | d-4    | dm-ab    | shows messages "d-1, d-2, d-4, d-5"            | shows messages "d-1, d-2" and maybe the rewind notice     |
      | diagnostics-preview | a reply thread | read-surfaces            | r-2    | th-plan  | shows messages "r-1, r-2, r-3"                 | shows messages "r-1" and maybe the rewind notice          |
      | diagnostics-preview | a channel      | projections-human-suffix | n-4    | ch-notes | shows messages "n-1, n-2, n-3, n-4, n-5, n-6"  | shows messages "n-1, n-2, n-3" and maybe the rewind notice |

    @rule:surface.stale-reference-no-revival @rule:sem.rewound-invisible-everywhere
    Examples: durable stream replay
      | surface | place          | fixture                  | target | read     | before                             | after                                            |
      | stream  | a DM           | read-surfaces            | d-4    | dm-ab    | shows messages "d-2, d-4, d-5"     | shows messages "d-2" and maybe the rewind notice |
      | stream  | a reply thread | read-surfaces            | r-2    | th-plan  | shows messages "r-1, r-3"          | shows messages "r-1" and maybe the rewind notice |
      | stream  | a channel      | projections-human-suffix | n-4    | ch-notes | shows messages "n-3, n-4, n-5, n-6" | shows messages "n-3" and maybe the rewind notice |

    @rule:surface.stale-reference-no-revival @rule:sem.rewound-invisible-everywhere
    Examples: conversation index
      | surface            | place          | fixture                  | target | read     | before                                      | after                                       |
      | conversation-index | a DM           | read-surfaces            | d-4    | dm-ab    | shows the visible tail of scope "dm-ab"     | shows the visible tail of scope "dm-ab"     |
      | conversation-index | a reply thread | read-surfaces            | r-2    | th-plan  | shows the visible tail of scope "th-plan"   | shows the visible tail of scope "th-plan"   |
      | conversation-index | a channel      | projections-human-suffix | n-4    | ch-notes | shows the visible tail of scope "ch-notes"  | shows the visible tail of scope "ch-notes"  |
      | conversation-index | a reply thread its channel's rewind cascades | read-surfaces | p-4 | th-late | shows the visible tail of scope "th-late" | shows the visible tail of scope "th-late" |

  Scenario Outline: the <surface> of a message finds nothing once it is rewound in <place>, even when stale rows name it
    Given the conversation "<fixture>"
    When human "bob" reads the <surface> of scope "<read>" for message "<message>"
    Then the read <before>
    When human "alice" rewinds to before message "<target>"
    Then the rewind completes
    When every projection row that named a rewound message comes back
    And human "bob" reads the <surface> of scope "<read>" for message "<message>"
    Then the read <after>

    @rule:sem.rewound-invisible-everywhere @rule:sem.rewound-not-recalled @rule:surface.lifecycle-gate-reread
    Examples: by id
      | surface | place                        | fixture                  | target | read     | message | before                  | after                   |
      | message | a DM                         | read-surfaces            | d-4    | dm-ab    | d-4     | shows messages "d-4"    | finds nothing           |
      | message | a DM (a recalled message)    | read-surfaces            | d-4    | dm-ab    | d-3     | shows messages "d-3"    | shows messages "d-3"    |
      | message | a reply thread               | read-surfaces            | r-2    | th-plan  | r-3     | shows messages "r-3"    | finds nothing           |
      | message | a channel                    | projections-human-suffix | n-4    | ch-notes | n-5     | shows messages "n-5"    | finds nothing           |

    @rule:surface.source-context-authority @rule:surface.stale-reference-no-revival
    Examples: source context
      | surface        | place                              | fixture                  | target | read     | message | before                       | after                  |
      | source-context | a DM (cited from a channel)        | read-surfaces            | d-4    | ch-plan  | p-1     | shows messages "d-4"         | shows messages ""      |
      | source-context | a DM (a rewound citing message)    | read-surfaces            | d-4    | dm-ab    | d-5     | shows messages "d-2"         | finds nothing          |
      | source-context | a reply thread (cited from above)  | read-surfaces            | r-2    | ch-plan  | p-3     | shows messages "r-1, r-3"    | shows messages "r-1"   |
      | source-context | a channel (cited from another)     | projections-human-suffix | n-4    | ch-other | o-1     | shows messages "n-4"         | shows messages ""      |

    @rule:surface.projections-not-authority @rule:surface.stale-reference-no-revival
    Examples: reactions
      | surface   | place          | fixture                  | target | read     | message | before                | after          |
      | reactions | a DM           | read-surfaces            | d-4    | dm-ab    | d-4     | shows messages "d-4"  | finds nothing  |
      | reactions | a reply thread | read-surfaces            | r-2    | th-plan  | r-3     | shows messages "r-3"  | finds nothing  |
      | reactions | a channel      | projections-human-suffix | n-4    | ch-notes | n-4     | shows messages "n-4"  | finds nothing  |

    @rule:surface.diag-transcript-first @rule:surface.diag-rewound-not-found @rule:surface.diag-no-resurrect @rule:guard.diag-no-evidence-join
    Examples: delivery diagnostics
      | surface     | place          | fixture                  | target | read     | message | before                | after          |
      | diagnostics | a DM           | read-surfaces            | d-4    | dm-ab    | d-4     | shows messages "d-4"  | finds nothing  |
      | diagnostics | a reply thread | read-surfaces            | r-2    | th-plan  | r-2     | shows messages "r-2"  | finds nothing  |
      | diagnostics | a channel      | projections-human-suffix | n-4    | ch-notes | n-4     | shows messages "n-4"  | finds nothing  |

  @rule:surface.attachment-authority @rule:surface.stale-reference-no-revival
  Scenario Outline: the <surface> of an attachment finds nothing once its message is rewound in <place>, even when its row comes back
    Given the conversation "<fixture>"
    When human "bob" reads the <surface> of scope "<read>" for attachment "<attachment>"
    Then the read shows messages "<message>"
    When human "alice" rewinds to before message "<target>"
    Then the rewind completes
    When every projection row that named a rewound message comes back
    And human "bob" reads the <surface> of scope "<read>" for attachment "<attachment>"
    Then the read finds nothing

    Examples:
      | surface             | place          | fixture                  | target | read     | attachment | message |
      | attachment          | a DM           | read-surfaces            | d-4    | dm-ab    | att-table  | d-4     |
      | attachment          | a reply thread | read-surfaces            | r-2    | th-plan  | att-rota   | r-2     |
      | attachment          | a channel      | projections-human-suffix | n-4    | ch-notes | att-budget | n-4     |
      | attachment-download | a DM           | read-surfaces            | d-4    | dm-ab    | att-table  | d-4     |
      | attachment-download | a reply thread | read-surfaces            | r-2    | th-plan  | att-rota   | r-2     |
      | attachment-download | a channel      | projections-human-suffix | n-4    | ch-notes | att-budget | n-4     |

  @rule:surface.projections-not-authority @rule:surface.stale-reference-no-revival @rule:sem.rewound-invisible-everywhere
  Scenario Outline: search finds no rewound message after a rewind in <place>, even when its search document comes back
    Given the conversation "<fixture>"
    When human "bob" reads the search of scope "<read>" for "<query>"
    Then the read shows messages "<before>"
    When human "alice" rewinds to before message "<target>"
    Then the rewind completes
    When every projection row that named a rewound message comes back
    And human "bob" reads the search of scope "<read>" for "<query>"
    Then the read shows messages "<after>"

    Examples:
      | place          | fixture                  | target | read     | query  | before             | after     |
      | a DM           | read-surfaces            | d-4    | dm-ab    | Friday | d-1, d-2, d-4, d-5 | d-1, d-2  |
      | a reply thread | read-surfaces            | r-2    | th-plan  | costs  | r-1, r-2, r-3      | r-1       |
      | a channel      | projections-human-suffix | n-4    | ch-notes | venue  | n-5, n-6           |           |

  @rule:surface.no-stale-projection-patch @rule:surface.stale-reference-no-revival
  Scenario: a client resuming the durable stream from a cursor taken before the rewind gets nothing of the rewound suffix to patch in
    Given the conversation "read-surfaces"
    When human "bob" reads the stream of scope "dm-ab", 1 at a time
    Then the read shows messages "d-2"
    When human "alice" rewinds to before message "d-4"
    Then the rewind completes
    When every projection row that named a rewound message comes back
    And human "bob" reads the stream of scope "dm-ab" from the last read's cursor
    Then the read shows messages "" and maybe the rewind notice

  @rule:surface.no-stale-projection-patch @rule:surface.history-authority @ambiguity:stale-cursor-after-rewind
  Scenario: a client paging history with a cursor taken before the rewind gets no rewound message and no page past the visible tail
    Given the conversation "read-surfaces"
    When human "bob" reads the history of scope "dm-ab", 2 at a time
    Then the read shows messages "d-1, d-2"
    When human "alice" rewinds to before message "d-4"
    Then the rewind completes
    When human "bob" reads the history of scope "dm-ab" from the last read's cursor
    Then the read shows messages "d-3" and the rewind notice, or rejects the stale cursor

  @bad-read
  Scenario Outline: a bad read is answered, not failed: <case>
    Given the conversation "read-surfaces"
    When human "<reader>" reads the <surface> of scope "<read>"<argument>
    Then the read <answer>

    Examples:
      | case                                  | reader | surface   | read       | argument                      | answer                          |
      | an unknown scope                      | bob    | history   | dm-nowhere |                               | is rejected as unknown_scope    |
      | a reader who is not a member          | carol  | history   | dm-ab      |                               | is rejected as not_member       |
      | a reader who is in no scope of thread | carol  | pins      | th-plan    |                               | is rejected as not_member       |
      | a cursor that does not parse          | bob    | history   | dm-ab      | for cursor "%not a cursor%"   | is rejected as bad_cursor       |
      | a message read without its id         | bob    | reactions | dm-ab      |                               | is rejected as bad_request      |

    @rule:sem.rewound-invisible-everywhere
    Examples: an unknown message is not found, like a rewound one
      | case              | reader | surface | read  | argument             | answer         |
      | an unknown message | bob    | message | dm-ab | for message "d-404"  | finds nothing  |
