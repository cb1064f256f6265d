//! [`RestoreFailure`]: why a related agent's native runtime restore failed (spec 5, step 5).
//!
//! The runtime clients ([`crate::runtimes`]) return it, and [`crate::RewindError`] carries it
//! for a failed restore; it depends on nothing else in the crate, so the errors need not import
//! the runtimes.

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
