//! The spec's fixed vocabulary: the section 9 refusal texts, the runtime ids and recovery
//! strategies of section 5, the rewind notice's client message id (section 8) and the keys that
//! carry content in scrubbed JSON (section 6.1).

/// Section 9: the target is not a human message of the initiator.
pub const NOT_OWN_MESSAGE: &str = "message must be your own human-authored message";
/// Section 9: the target is a system, service or app message.
pub const SYSTEM_MESSAGE: &str = "system messages cannot be rewound";
/// Section 9: the target or the suffix is not in the live hot history.
pub const HOT_COLD_BOUNDARY: &str = "rewind would cross the hot/cold boundary";
/// Section 9: another human wrote in the suffix or in a cascaded thread.
pub const OTHER_HUMAN: &str = "rewind is blocked because another human sent a later message";
/// Section 9: a suffix message other than the tail has a live reply thread.
pub const LATER_REPLY_THREAD: &str = "rewind is blocked because a later message has a reply thread";
/// Section 9: a related agent's runtime cannot restore.
pub const AGENT_UNSUPPORTED: &str =
    "rewind is blocked because a related agent does not support rewind";
/// Section 9: the recovery point a related agent needs is missing or of another strategy.
pub const RECOVERY_POINT_MISSING: &str =
    "rewind is blocked because a required recovery point is missing";
/// Section 9: a related agent or its machine was deleted.
pub const AGENT_UNAVAILABLE: &str =
    "rewind is blocked because a related agent is no longer available for recovery";
/// Section 9: a related agent was active outside the rewound scopes after it first took part.
pub const CROSS_SCOPE_ACTIVITY: &str =
    "rewind is blocked because a related agent touched another conversation after first participation";
/// Section 9: the suffix changed between planning and apply.
pub const SUFFIX_DRIFT: &str = "rewind is blocked because newer activity changed the conversation";
/// Section 9: another rewind of the scope is `preparing`.
pub const REWIND_IN_PROGRESS: &str = "another rewind is already in progress";

/// Every section 9 message, in the spec's order.
pub const SECTION_9: [&str; 11] = [
    NOT_OWN_MESSAGE,
    SYSTEM_MESSAGE,
    HOT_COLD_BOUNDARY,
    OTHER_HUMAN,
    LATER_REPLY_THREAD,
    AGENT_UNSUPPORTED,
    RECOVERY_POINT_MISSING,
    AGENT_UNAVAILABLE,
    CROSS_SCOPE_ACTIVITY,
    SUFFIX_DRIFT,
    REWIND_IN_PROGRESS,
];

/// The section 9 messages a failed runtime restore may not use: section 8 asks that runtime
/// recovery failures be told apart from permission, other-human, reply-thread fork, hot/cold
/// and concurrent-modification failures (register `restore-failure-wording`; the runtime guard
/// messages themselves are allowed).
pub const NOT_A_RESTORE_FAILURE: [&str; 7] = [
    NOT_OWN_MESSAGE,
    SYSTEM_MESSAGE,
    HOT_COLD_BOUNDARY,
    OTHER_HUMAN,
    LATER_REPLY_THREAD,
    SUFFIX_DRIFT,
    REWIND_IN_PROGRESS,
];

/// The rewind-capable runtime ids of section 5. A recovery strategy name is never one of them.
pub const RUNTIMES: [&str; 4] = ["codex", "claude", "opencode", "builtin"];

/// The recovery strategy of a rewind-capable runtime (section 5's table), or `None` for any
/// other runtime id, strategy names included: `builtin` follows OpenCode.
pub fn strategy_of(runtime: &str) -> Option<&'static str> {
    match runtime {
        "codex" => Some("codex_app_server_turns"),
        "claude" => Some("claude_session_resume_at"),
        "opencode" | "builtin" => Some("opencode_session_revert"),
        _ => None,
    }
}

/// The client message id of the notice of operation `operation_id` (section 8).
pub fn notice_client_id(operation_id: &str) -> String {
    format!("rewind-notice:{operation_id}")
}

/// The prefix of every rewind notice's client message id.
pub const NOTICE_PREFIX: &str = "rewind-notice:";

/// The keys that carry content in a durable stream event payload or a conversation index
/// projection (section 6.1: "content, attachments, reactions, mentions, source snippets,
/// delivery previews"), compared case-insensitively at any depth. The scrub steps use it too.
pub const CONTENT_BEARING_KEYS: [&str; 13] = [
    "content",
    "body",
    "text",
    "attachments",
    "reactions",
    "mentions",
    "sources",
    "snippet",
    "snippets",
    "sourcesnippets",
    "preview",
    "previews",
    "deliverypreview",
];

/// The content-bearing keys anywhere in `value`, in document order.
pub fn content_keys(value: &serde_json::Value) -> Vec<String> {
    let mut found = Vec::new();
    collect_content_keys(value, &mut found);
    found
}

fn collect_content_keys(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, inner) in map {
                if CONTENT_BEARING_KEYS.contains(&key.to_ascii_lowercase().as_str()) {
                    out.push(key.clone());
                }
                collect_content_keys(inner, out);
            }
        }
        serde_json::Value::Array(items) => {
            for inner in items {
                collect_content_keys(inner, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategy_names_are_not_runtimes() {
        for runtime in RUNTIMES {
            let strategy = strategy_of(runtime).expect("every capable runtime has a strategy");
            assert!(
                strategy_of(strategy).is_none(),
                "{strategy} is not a runtime"
            );
        }
        assert_eq!(strategy_of("builtin"), strategy_of("opencode"));
        assert_eq!(strategy_of("gemini"), None);
    }

    #[test]
    fn content_keys_are_found_at_any_depth_whatever_their_case() {
        let value = serde_json::json!({"messageId": "m", "lastMessage": {"Preview": "x"},
                                       "items": [{"body": 1}]});
        let mut found = content_keys(&value);
        found.sort();
        assert_eq!(found, vec!["Preview", "body"]);
        assert!(content_keys(&serde_json::json!({"messageId": "m"})).is_empty());
    }
}
