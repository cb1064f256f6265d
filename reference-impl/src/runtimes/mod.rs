//! Native runtime restore (spec 5, step 5): each related agent's runtime is returned to its
//! recovery point through the runtime's own mechanism, then verified through the runtime's own
//! read-back. The reference acts as the daemon here: it spawns `codex app-server`, runs the
//! `claude` CLI, and calls the OpenCode server, exactly as a daemon would.

pub mod claude;
pub mod codex;
pub mod opencode;

use std::path::PathBuf;
use std::time::Duration;

use crate::capabilities::strategy;
use crate::recovery::RestoreTarget;

/// How to start a Codex app-server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexSettings {
    /// The `codex` program.
    pub program: PathBuf,
    /// Its arguments (`["app-server"]`).
    pub args: Vec<String>,
    /// Extra environment (`CODEX_HOME`).
    pub env: Vec<(String, String)>,
}

/// How to run the Claude Code CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaudeSettings {
    /// The `claude` program.
    pub program: PathBuf,
    /// Extra environment (`CLAUDE_CONFIG_DIR`).
    pub env: Vec<(String, String)>,
    /// The working directory the agent's sessions were started in (it names the transcript
    /// project directory).
    pub cwd: PathBuf,
}

/// Where the OpenCode server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenCodeSettings {
    /// Its base URL (`http://127.0.0.1:4096`).
    pub base_url: String,
}

/// Everything the restore step needs to reach the runtimes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeSettings {
    /// Codex.
    pub codex: CodexSettings,
    /// Claude.
    pub claude: ClaudeSettings,
    /// OpenCode (and builtin, its alias).
    pub opencode: OpenCodeSettings,
    /// The longest one runtime call (or CLI run) may take.
    pub timeout: Duration,
}

/// A restore that took effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restored {
    /// The runtime was restored and its read-back shows the recovery point.
    Verified {
        /// What the read-back showed, for logs.
        detail: String,
    },
    /// Claude before its first input: nothing to resume; the agent's next delivery starts a
    /// fresh session.
    FreshSession,
}

/// Why a native restore failed. Every variant means the database must not be touched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreFailure {
    /// The runtime did not answer in time.
    #[error("{runtime} did not answer within {timeout_ms} ms while {action}")]
    Timeout {
        /// The runtime id.
        runtime: &'static str,
        /// What the restore was doing.
        action: String,
        /// The limit.
        timeout_ms: u128,
    },
    /// The runtime answered with an error.
    #[error("{runtime} refused {action}: {message}")]
    Refused {
        /// The runtime id.
        runtime: &'static str,
        /// What the restore was doing.
        action: String,
        /// The runtime's own error message.
        message: String,
    },
    /// The thread or session does not exist in the runtime (detached).
    #[error("{runtime} has no thread or session `{id}`")]
    UnknownSession {
        /// The runtime id.
        runtime: &'static str,
        /// The thread or session id.
        id: String,
    },
    /// A turn is in progress.
    #[error("{runtime} is busy: {message}")]
    Busy {
        /// The runtime id.
        runtime: &'static str,
        /// The runtime's own message.
        message: String,
    },
    /// The runtime process died or dropped the connection mid-call.
    #[error("{runtime} stopped during {action}: {detail}")]
    Crashed {
        /// The runtime id.
        runtime: &'static str,
        /// What the restore was doing.
        action: String,
        /// Exit status or connection error.
        detail: String,
    },
    /// The runtime reported success, but its read-back does not show the recovery point.
    #[error("{runtime} restore did not take effect: expected {expected}, read back {found}")]
    NotVerified {
        /// The runtime id.
        runtime: &'static str,
        /// What the read-back should show.
        expected: String,
        /// What it showed.
        found: String,
    },
    /// The runtime could not be started or reached, or broke its protocol.
    #[error("cannot use {runtime}: {detail}")]
    Unreachable {
        /// The runtime id.
        runtime: &'static str,
        /// Why.
        detail: String,
    },
    /// The recovery ref does not have the shape the strategy needs.
    #[error("recovery ref for {strategy} is malformed: {detail}")]
    BadRef {
        /// The strategy.
        strategy: String,
        /// What is wrong.
        detail: String,
    },
}

impl RestoreFailure {
    /// A stable name for the failure class, as scenarios and reports name it.
    pub fn kind(&self) -> &'static str {
        match self {
            RestoreFailure::Timeout { .. } => "timeout",
            RestoreFailure::Refused { .. } => "error",
            RestoreFailure::UnknownSession { .. } => "unknown_session",
            RestoreFailure::Busy { .. } => "busy",
            RestoreFailure::Crashed { .. } => "crash",
            RestoreFailure::NotVerified { .. } => "not_verified",
            RestoreFailure::Unreachable { .. } => "unreachable",
            RestoreFailure::BadRef { .. } => "bad_ref",
        }
    }

    /// Whether the runtime may have changed although the restore failed: the call hung past
    /// the restore time limit (it may still land), the runtime died or dropped the connection
    /// in the middle of it, or it reported success while the verifying read-back shows no
    /// effect. The other failures are definite refusals before any effect (an error answer, an
    /// unknown session, a busy runtime, a release without the method, an unreachable runtime,
    /// a malformed ref).
    ///
    /// The service sees one restore call per agent, not the runtime's individual requests, so
    /// a hang or crash is unknown whichever request of the restore it hit.
    pub fn outcome_unknown(&self) -> bool {
        matches!(
            self,
            RestoreFailure::Timeout { .. }
                | RestoreFailure::Crashed { .. }
                | RestoreFailure::NotVerified { .. }
        )
    }
}

fn ref_str<'a>(target: &'a RestoreTarget, key: &str) -> Result<Option<&'a str>, RestoreFailure> {
    match target.recovery_ref.get(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) if !s.is_empty() => Ok(Some(s)),
        Some(other) => Err(RestoreFailure::BadRef {
            strategy: target.strategy.clone(),
            detail: format!("`{key}` must be a non-empty string, found {other}"),
        }),
    }
}

fn required<'a>(target: &'a RestoreTarget, key: &str) -> Result<&'a str, RestoreFailure> {
    ref_str(target, key)?.ok_or_else(|| RestoreFailure::BadRef {
        strategy: target.strategy.clone(),
        detail: format!("`{key}` is missing"),
    })
}

/// Restores `target` through its strategy's native mechanism and verifies it.
pub async fn restore(
    settings: &RuntimeSettings,
    target: &RestoreTarget,
) -> Result<Restored, RestoreFailure> {
    match target.strategy.as_str() {
        strategy::CODEX_APP_SERVER_TURNS => {
            let thread_id = required(target, "threadId")?;
            let turn_count = target
                .recovery_ref
                .get("turnCount")
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| RestoreFailure::BadRef {
                    strategy: target.strategy.clone(),
                    detail: "`turnCount` must be a non-negative integer".to_owned(),
                })?;
            codex::restore(&settings.codex, settings.timeout, thread_id, turn_count).await
        }
        strategy::CLAUDE_SESSION_RESUME_AT => {
            let session_id = required(target, "sessionId")?;
            match ref_str(target, "boundaryUuid")? {
                // Before the first input: a fresh session boundary, nothing to resume.
                None => Ok(Restored::FreshSession),
                Some(boundary) => {
                    claude::restore(&settings.claude, settings.timeout, session_id, boundary).await
                }
            }
        }
        strategy::OPENCODE_SESSION_REVERT => {
            let session_id = required(target, "sessionId")?;
            let message_id = required(target, "messageId")?;
            opencode::restore(&settings.opencode, settings.timeout, session_id, message_id).await
        }
        other => Err(RestoreFailure::BadRef {
            strategy: other.to_owned(),
            detail: "no restore implementation for this strategy".to_owned(),
        }),
    }
}

/// Whether [`restore`] has an implementation for `strategy_name`.
pub fn implements(strategy_name: &str) -> bool {
    matches!(
        strategy_name,
        strategy::CODEX_APP_SERVER_TURNS
            | strategy::CLAUDE_SESSION_RESUME_AT
            | strategy::OPENCODE_SESSION_REVERT
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::CAPABILITIES;

    /// A runtime may be marked rewind-capable only with a restore strategy that this module
    /// implements: adding a runtime to the capability map without one fails here.
    #[test]
    fn every_capable_runtime_has_a_restore_implementation() {
        for capability in CAPABILITIES {
            assert!(
                implements(capability.strategy),
                "runtime `{}` is marked rewind-capable, but strategy `{}` has no restore",
                capability.runtime,
                capability.strategy
            );
        }
    }

    #[test]
    fn only_hangs_crashes_and_unverified_successes_leave_the_outcome_unknown() {
        let r = "codex";
        let unknown = [
            RestoreFailure::Timeout {
                runtime: r,
                action: "thread/rollback".into(),
                timeout_ms: 1,
            },
            RestoreFailure::Crashed {
                runtime: r,
                action: "thread/rollback".into(),
                detail: "exit 134".into(),
            },
            RestoreFailure::NotVerified {
                runtime: r,
                expected: "1 turn".into(),
                found: "3 turns".into(),
            },
        ];
        let definite = [
            RestoreFailure::Refused {
                runtime: r,
                action: "thread/rollback".into(),
                message: "unknown variant".into(),
            },
            RestoreFailure::UnknownSession {
                runtime: r,
                id: "t".into(),
            },
            RestoreFailure::Busy {
                runtime: r,
                message: "in progress".into(),
            },
            RestoreFailure::Unreachable {
                runtime: r,
                detail: "refused".into(),
            },
            RestoreFailure::BadRef {
                strategy: "s".into(),
                detail: "missing".into(),
            },
        ];
        assert!(unknown.iter().all(RestoreFailure::outcome_unknown));
        assert!(!definite.iter().any(RestoreFailure::outcome_unknown));
    }

    #[tokio::test]
    async fn malformed_refs_fail_before_any_runtime_is_reached() {
        let settings = RuntimeSettings {
            codex: CodexSettings {
                program: PathBuf::from("/nonexistent/codex"),
                args: vec!["app-server".into()],
                env: Vec::new(),
            },
            claude: ClaudeSettings {
                program: PathBuf::from("/nonexistent/claude"),
                env: Vec::new(),
                cwd: PathBuf::from("."),
            },
            opencode: OpenCodeSettings {
                base_url: "http://127.0.0.1:9".into(),
            },
            timeout: Duration::from_secs(1),
        };
        let target = |strategy: &str, recovery_ref: serde_json::Value| RestoreTarget {
            agent_id: "a".into(),
            runtime: "r".into(),
            strategy: strategy.into(),
            message_id: "m".into(),
            recovery_ref,
        };
        for (strategy, recovery_ref) in [
            (
                strategy::CODEX_APP_SERVER_TURNS,
                serde_json::json!({"threadId": "t"}),
            ),
            (
                strategy::CODEX_APP_SERVER_TURNS,
                serde_json::json!({"threadId": "t", "turnCount": -1}),
            ),
            (
                strategy::CLAUDE_SESSION_RESUME_AT,
                serde_json::json!({"boundaryUuid": "u"}),
            ),
            (
                strategy::OPENCODE_SESSION_REVERT,
                serde_json::json!({"sessionId": "s"}),
            ),
            (
                strategy::OPENCODE_SESSION_REVERT,
                serde_json::json!({"sessionId": 3, "messageId": "m"}),
            ),
            ("made_up", serde_json::json!({})),
        ] {
            let err = restore(&settings, &target(strategy, recovery_ref.clone()))
                .await
                .unwrap_err();
            assert_eq!(err.kind(), "bad_ref", "{strategy} {recovery_ref}: {err}");
        }
        // A claude ref without a boundary is the fresh-session boundary: no CLI run.
        let fresh = restore(
            &settings,
            &target(
                strategy::CLAUDE_SESSION_RESUME_AT,
                serde_json::json!({"sessionId": "s", "boundaryUuid": null}),
            ),
        )
        .await
        .unwrap();
        assert_eq!(fresh, Restored::FreshSession);
    }
}
