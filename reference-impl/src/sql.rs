//! Shared SQL fragments: the lifecycle gate every read of `scope_messages` applies.

/// True for a `scope_messages` row (aliased `m`) that is not a rewound tombstone.
pub const MESSAGE_NOT_REWOUND_SQL: &str =
    "coalesce(m.metadata #>> '{messageRecall,status}', '') <> 'rewound'";
