//! Native runtime restore (spec 5, step 5): each related agent's runtime is returned to its
//! recovery point through the runtime's own mechanism, then verified through the runtime's own
//! read-back. The reference acts as the daemon here: it spawns `codex app-server`, runs the
//! `claude` CLI, and calls the OpenCode server, exactly as a daemon would.
//!
//! Live delivery ([`deliver`]) is the daemon's other half: it establishes the agent's native
//! session and reads the runtime's CURRENT state, hands the recovery ref of that state to a
//! callback that commits the recovery point (spec 5: "the daemon writes a recovery point before
//! it may deliver"), and only after the callback returned `Ok` sends the input and collects the
//! answer.

pub mod claude;
pub mod codex;
pub mod opencode;

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use crate::capabilities::{runtime, strategy};
use crate::recovery::RestoreTarget;
pub use crate::restore_failure::RestoreFailure;

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
    /// Claude: the boundary was validated on the session's live chain and bound to the
    /// session's next delivery, which resumes there and verifies that its turn continues from
    /// it (the CLI applies `--resume-session-at` only together with a prompt).
    Bound {
        /// What the validation showed, for logs.
        detail: String,
    },
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

/// What a delivery found before its input: the recovery point to commit first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointToCommit {
    /// The strategy's restore ref of the runtime's state right before the input.
    pub recovery_ref: serde_json::Value,
    /// The native session (thread) the delivery created for the agent, which
    /// `agents.runtime_session_id` must name from now on; `None` when it reused the agent's.
    pub new_session: Option<String>,
}

/// Why a delivery did not end with an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    /// The runtime failed (an error answer, a crash, a time-out, a broken protocol, a failed
    /// turn), before or after it got the input.
    #[error(transparent)]
    Runtime(RestoreFailure),
    /// The commit callback failed: the input was never sent.
    #[error("the recovery point could not be committed, so the input was not sent: {0}")]
    Commit(String),
}

impl From<RestoreFailure> for DeliveryError {
    fn from(failure: RestoreFailure) -> Self {
        DeliveryError::Runtime(failure)
    }
}

/// Whether the reference has a delivery client for runtime `runtime_id` (every rewind-capable
/// runtime, builtin through OpenCode).
pub fn delivers_to(runtime_id: &str) -> bool {
    matches!(
        runtime_id,
        runtime::CODEX | runtime::CLAUDE | runtime::OPENCODE | runtime::BUILTIN
    )
}

/// Delivers `input` to the agent's runtime `runtime_id`, whose native session or thread is
/// `session` (`agents.runtime_session_id`; `None` starts a new one).
///
/// The runtime's session is established and its current state read first; `commit` gets the
/// recovery point of that state and must make it durable; only after it returned `Ok` is the
/// input sent. Returns the answer text (empty when the runtime answered without text).
pub async fn deliver<F, Fut>(
    settings: &RuntimeSettings,
    runtime_id: &str,
    session: Option<&str>,
    input: &str,
    commit: F,
) -> Result<String, DeliveryError>
where
    F: FnOnce(PointToCommit) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    match runtime_id {
        runtime::CODEX => {
            codex::deliver(&settings.codex, settings.timeout, session, input, commit).await
        }
        runtime::CLAUDE => {
            claude::deliver(&settings.claude, settings.timeout, session, input, commit).await
        }
        runtime::OPENCODE | runtime::BUILTIN => {
            opencode::deliver(&settings.opencode, settings.timeout, session, input, commit).await
        }
        other => Err(DeliveryError::Runtime(RestoreFailure::Unreachable {
            runtime: "unsupported",
            detail: format!("the reference has no delivery client for runtime `{other}`"),
        })),
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

/// Test helpers shared by the runtime modules.
#[cfg(test)]
pub(crate) mod test_support {
    use std::path::PathBuf;

    /// The mock runtime program `name` of the workspace (`$<env>`, else the binary next to the
    /// test's directory), when it was built (`cargo build -p rewind-mock-runtimes`).
    pub(crate) fn mock_program(name: &str, env: &str) -> Option<PathBuf> {
        if let Some(path) = std::env::var_os(env) {
            return Some(PathBuf::from(path));
        }
        let exe = std::env::current_exe().ok()?;
        let candidate = exe.parent()?.parent()?.join(name);
        candidate.is_file().then_some(candidate)
    }

    /// [`mock_program`], or `None` after saying why the test is skipped (never under CI).
    pub(crate) fn mock_or_skip(name: &str, env: &str) -> Option<PathBuf> {
        let found = mock_program(name, env);
        if found.is_none() {
            assert!(
                std::env::var_os("CI").is_none(),
                "{name} is not built (build the workspace or set {env})"
            );
            eprintln!("{name} is not built: skipping the process test");
        }
        found
    }

    /// A commit callback that records every point it is given, in order, in `log`.
    pub(crate) fn recorder(
        log: &std::sync::Arc<std::sync::Mutex<Vec<super::PointToCommit>>>,
    ) -> impl FnOnce(super::PointToCommit) -> std::future::Ready<Result<(), String>> {
        let log = std::sync::Arc::clone(log);
        move |point| {
            log.lock().unwrap().push(point);
            std::future::ready(Ok(()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::CAPABILITIES;

    /// Every rewind-capable runtime can be delivered to, and nothing else.
    #[test]
    fn every_capable_runtime_has_a_delivery_client() {
        for capability in CAPABILITIES {
            assert!(delivers_to(capability.runtime), "{}", capability.runtime);
        }
        assert!(!delivers_to("gemini"));
        assert!(!delivers_to(strategy::OPENCODE_SESSION_REVERT));
    }

    #[tokio::test]
    async fn an_unknown_runtime_fails_before_anything_is_committed() {
        let settings = RuntimeSettings {
            codex: CodexSettings {
                program: PathBuf::from("/nonexistent/codex"),
                args: vec![],
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
        let err = deliver(&settings, "gemini", None, "hi", |_| async {
            panic!("nothing may be committed for a runtime without a client")
        })
        .await
        .unwrap_err();
        assert!(err.to_string().contains("no delivery client"), "{err}");
    }

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
