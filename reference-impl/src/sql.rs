//! Shared SQL fragments: the lifecycle gate every read of `scope_messages` applies, and the
//! rewind's suffix as a set.

/// True for a `scope_messages` row (aliased `m`) that is not a rewound tombstone.
pub const MESSAGE_NOT_REWOUND_SQL: &str =
    "coalesce(m.metadata #>> '{messageRecall,status}', '') <> 'rewound'";

/// A `WITH` item naming the suffix `suffix` (`id`, `scope_id`, `seq`, `global_seq`,
/// `author_agent_id`, `ord`): the visible messages of each scope `$1[i]` from seq `$2[i]` on,
/// where `ord` is `i` (the primary scope first). Materialised once per statement, from the
/// `(scope_id, seq)` key: every statement that touches the suffix's rows selects them through
/// it, so none carries the message ids as a parameter.
pub fn suffix_cte() -> String {
    format!(
        "suffix AS MATERIALIZED ( \
           SELECT m.id, m.scope_id, m.seq, m.global_seq, m.author_agent_id, b.ord \
           FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS b(scope_id, from_seq, ord) \
           JOIN scope_messages m ON m.scope_id = b.scope_id AND m.seq >= b.from_seq \
           WHERE {MESSAGE_NOT_REWOUND_SQL})"
    )
}
