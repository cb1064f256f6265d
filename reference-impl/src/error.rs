//! [`SpecError`]: the refusals the spec defines, each with its verbatim message and a stable code.

use crate::restore_failure::RestoreFailure;
use crate::status::OperationStatus;
use crate::variant::Variant;

/// The message of a failed runtime restore under [`Variant::Alternative`] (section 9 gives this
/// failure no wording; the recommended variant answers with the failure's own description).
pub const ALTERNATIVE_RESTORE_FAILED_MESSAGE: &str =
    "rewind failed because a related agent's runtime could not be restored";

/// The code of a failed runtime restore, per variant.
fn restore_failed_code(variant: Variant) -> &'static str {
    match variant {
        Variant::Recommended => "runtime_restore_failed",
        Variant::Alternative => "RW-E301",
    }
}

/// A refusal defined by the spec (section 9), plus the two the spec implies without wording:
/// a non-human initiator and a target that does not exist (or is no longer visible).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The target is not the initiator's own human-authored message.
    #[error("message must be your own human-authored message")]
    NotOwnHumanMessage,
    /// The target is a system, service or app message.
    #[error("system messages cannot be rewound")]
    SystemMessageTarget,
    /// The target is not in the live hot scope history.
    #[error("rewind would cross the hot/cold boundary")]
    CrossesHotColdBoundary,
    /// The suffix (or a cascaded scope) holds another human's message.
    #[error("rewind is blocked because another human sent a later message")]
    OtherHumanMessage,
    /// A later main-line message has a reply thread: rewind from the tail first.
    #[error("rewind is blocked because a later message has a reply thread")]
    LaterReplyThread,
    /// A related agent's runtime cannot rewind.
    #[error("rewind is blocked because a related agent does not support rewind")]
    AgentRuntimeUnsupported,
    /// A recovery point is missing or of the wrong strategy.
    #[error("rewind is blocked because a required recovery point is missing")]
    RecoveryPointMissing,
    /// A related agent or its machine was deleted.
    #[error("rewind is blocked because a related agent is no longer available for recovery")]
    AgentUnavailable,
    /// A related agent was active in another scope after its first participation.
    #[error("rewind is blocked because a related agent touched another conversation after first participation")]
    AgentCrossScopeActivity,
    /// The suffix changed between prepare and apply.
    #[error("rewind is blocked because newer activity changed the conversation")]
    SuffixDrift,
    /// Another rewind of the same scope is in progress.
    #[error("another rewind is already in progress")]
    RewindInProgress,
    /// The initiator is not a human (the spec gives no wording; section 8 calls it a
    /// permission failure).
    #[error("only a human can rewind a conversation")]
    InitiatorNotHuman,
    /// The target does not exist in the scope or is no longer visible.
    #[error("message not found")]
    MessageNotFound,
}

impl SpecError {
    /// The stable machine code, as listed in the conformance rule catalog.
    pub fn code(self) -> &'static str {
        match self {
            SpecError::NotOwnHumanMessage => "not_own_human_message",
            SpecError::SystemMessageTarget => "system_message_target",
            SpecError::CrossesHotColdBoundary => "crosses_hot_cold_boundary",
            SpecError::OtherHumanMessage => "other_human_message",
            SpecError::LaterReplyThread => "later_reply_thread",
            SpecError::AgentRuntimeUnsupported => "agent_runtime_unsupported",
            SpecError::RecoveryPointMissing => "recovery_point_missing",
            SpecError::AgentUnavailable => "agent_unavailable",
            SpecError::AgentCrossScopeActivity => "agent_cross_scope_activity",
            SpecError::SuffixDrift => "suffix_drift",
            SpecError::RewindInProgress => "rewind_in_progress",
            SpecError::InitiatorNotHuman => "permission_denied",
            SpecError::MessageNotFound => "message_not_found",
        }
    }

    /// The machine code under `variant`: the catalog's code ([`SpecError::code`]) for
    /// [`Variant::Recommended`], an `RW-E…` code (one per error, none shared) for
    /// [`Variant::Alternative`].
    pub fn code_for(self, variant: Variant) -> &'static str {
        match variant {
            Variant::Recommended => self.code(),
            Variant::Alternative => match self {
                SpecError::NotOwnHumanMessage => "RW-E101",
                SpecError::SystemMessageTarget => "RW-E102",
                SpecError::CrossesHotColdBoundary => "RW-E103",
                SpecError::OtherHumanMessage => "RW-E104",
                SpecError::LaterReplyThread => "RW-E105",
                SpecError::AgentRuntimeUnsupported => "RW-E106",
                SpecError::RecoveryPointMissing => "RW-E107",
                SpecError::AgentUnavailable => "RW-E108",
                SpecError::AgentCrossScopeActivity => "RW-E109",
                SpecError::SuffixDrift => "RW-E110",
                SpecError::RewindInProgress => "RW-E111",
                SpecError::InitiatorNotHuman => "RW-E201",
                SpecError::MessageNotFound => "RW-E202",
            },
        }
    }
}

/// Why a rewind did not complete.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RewindError {
    /// The spec refuses this rewind; `operation_id` is set when a durable operation had been
    /// recorded (its status tells whether the runtime had already been restored).
    #[error("{error}")]
    Refused {
        /// The refusal.
        error: SpecError,
        /// The operation that recorded the failure, if one was created.
        operation_id: Option<String>,
    },
    /// A related agent's native restore failed. `status` tells whether the database is
    /// untouched (`failed`: no runtime had been restored yet) or needs repair
    /// (`repair_required`: an earlier agent's runtime was already restored).
    #[error("runtime restore of agent `{agent_id}` ({runtime}) failed: {failure}")]
    RuntimeRestoreFailed {
        /// The agent whose restore failed.
        agent_id: String,
        /// Its runtime id.
        runtime: String,
        /// What went wrong.
        failure: Box<RestoreFailure>,
        /// The operation that recorded the failure.
        operation_id: String,
        /// The status recorded for it.
        status: OperationStatus,
    },
    /// The suffix reached agents, and no runtime settings were given to reach their runtimes.
    #[error("runtime recovery is not configured (agents reached by the suffix: {agents})")]
    RuntimeRecoveryUnavailable {
        /// The related agents, comma separated.
        agents: String,
    },
    /// Every runtime was restored but the database apply (or a later step) failed: the
    /// operation is `repair_required`.
    #[error("runtimes were restored but the rewind could not be applied ({cause}); operation `{operation_id}` needs repair")]
    RepairRequired {
        /// The operation, recorded as `repair_required`.
        operation_id: String,
        /// The spec refusal behind it, when there is one (e.g. suffix drift).
        refusal: Option<SpecError>,
        /// What failed.
        cause: String,
    },
    /// The database failed.
    #[error("database error while {action}: {source}")]
    Database {
        /// What the implementation was doing.
        action: &'static str,
        /// The driver error.
        #[source]
        source: sqlx::Error,
    },
}

impl RewindError {
    /// A stable machine code for any failure: the spec code of a refusal,
    /// `runtime_restore_failed`, `repair_required`, or `internal`.
    pub fn code(&self) -> &'static str {
        self.code_for(Variant::Recommended)
    }

    /// [`RewindError::code`] under `variant`: refusals, a repair behind a section 9 refusal
    /// (drift) and a failed restore take the variant's codes; `repair_required` and `internal`
    /// are the same in every variant.
    pub fn code_for(&self, variant: Variant) -> &'static str {
        match self {
            RewindError::Refused { error, .. } => error.code_for(variant),
            RewindError::RuntimeRestoreFailed { .. } => restore_failed_code(variant),
            // A section 9 refusal behind the repair (drift) answers as that refusal.
            RewindError::RepairRequired {
                refusal: Some(error),
                ..
            } => error.code_for(variant),
            RewindError::RepairRequired { .. } => "repair_required",
            RewindError::RuntimeRecoveryUnavailable { .. } | RewindError::Database { .. } => {
                "internal"
            }
        }
    }

    /// The message an API answer carries under `variant`: a refusal's verbatim section 9 text
    /// (or its own, for the unworded ones), and for a failed runtime restore the failure's
    /// description ([`Variant::Recommended`]) or [`ALTERNATIVE_RESTORE_FAILED_MESSAGE`].
    /// [`Variant::Alternative`] words the refusal of a non-human initiator, which the spec leaves
    /// unworded, with a section 9 message ("message must be your own human-authored message")
    /// under a code of its own: the spec allows any wording there.
    pub fn answer_message(&self, variant: Variant) -> String {
        match (self, variant) {
            (
                RewindError::Refused {
                    error: SpecError::InitiatorNotHuman,
                    ..
                },
                Variant::Alternative,
            ) => SpecError::NotOwnHumanMessage.to_string(),
            (RewindError::Refused { error, .. }, _)
            | (
                RewindError::RepairRequired {
                    refusal: Some(error),
                    ..
                },
                _,
            ) => error.to_string(),
            (RewindError::RuntimeRestoreFailed { .. }, Variant::Alternative) => {
                ALTERNATIVE_RESTORE_FAILED_MESSAGE.to_owned()
            }
            (other, _) => other.to_string(),
        }
    }

    /// The durable operation that recorded this failure, if one was created.
    pub fn operation_id(&self) -> Option<&str> {
        match self {
            RewindError::Refused { operation_id, .. } => operation_id.as_deref(),
            RewindError::RuntimeRestoreFailed { operation_id, .. }
            | RewindError::RepairRequired { operation_id, .. } => Some(operation_id),
            _ => None,
        }
    }

    pub(crate) fn refused(error: SpecError) -> Self {
        RewindError::Refused {
            error,
            operation_id: None,
        }
    }
}

/// Attaches what the implementation was doing to a database error.
pub(crate) trait DbContext<T> {
    fn db(self, action: &'static str) -> Result<T, RewindError>;
}

impl<T> DbContext<T> for Result<T, sqlx::Error> {
    fn db(self, action: &'static str) -> Result<T, RewindError> {
        self.map_err(|source| RewindError::Database { action, source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [SpecError; 13] = [
        SpecError::NotOwnHumanMessage,
        SpecError::SystemMessageTarget,
        SpecError::CrossesHotColdBoundary,
        SpecError::OtherHumanMessage,
        SpecError::LaterReplyThread,
        SpecError::AgentRuntimeUnsupported,
        SpecError::RecoveryPointMissing,
        SpecError::AgentUnavailable,
        SpecError::AgentCrossScopeActivity,
        SpecError::SuffixDrift,
        SpecError::RewindInProgress,
        SpecError::InitiatorNotHuman,
        SpecError::MessageNotFound,
    ];

    /// Every code a variant can answer with, refusals and the failed restore.
    fn codes(variant: Variant) -> Vec<&'static str> {
        let mut codes: Vec<&'static str> = ALL.iter().map(|e| e.code_for(variant)).collect();
        codes.push(restore_failed_code(variant));
        codes
    }

    #[test]
    fn each_variant_gives_every_row_its_own_code() {
        for variant in Variant::ALL {
            let codes = codes(variant);
            let distinct: std::collections::BTreeSet<_> = codes.iter().collect();
            assert_eq!(distinct.len(), codes.len(), "{variant}: {codes:?}");
            assert!(
                !codes.contains(&"repair_required") && !codes.contains(&"internal"),
                "{variant}: {codes:?}"
            );
        }
    }

    #[test]
    fn the_recommended_codes_are_the_defaults_and_the_alternative_ones_differ_from_all_of_them() {
        for e in ALL {
            assert_eq!(e.code_for(Variant::Recommended), e.code());
        }
        let recommended = codes(Variant::Recommended);
        for code in codes(Variant::Alternative) {
            assert!(
                !recommended.contains(&code),
                "`{code}` is also a recommended code"
            );
            assert!(code.starts_with("RW-E"), "{code}");
        }
    }

    #[test]
    fn answer_messages_keep_the_spec_texts_and_reword_only_the_failed_restore() {
        for variant in Variant::ALL {
            for error in ALL {
                let refused = RewindError::Refused {
                    error,
                    operation_id: None,
                };
                let expected = match (error, variant) {
                    (SpecError::InitiatorNotHuman, Variant::Alternative) => {
                        SpecError::NotOwnHumanMessage
                    }
                    _ => error,
                };
                assert_eq!(refused.answer_message(variant), expected.to_string());
            }
            // The reused message keeps the unworded refusal's own code.
            assert_ne!(
                RewindError::refused(SpecError::InitiatorNotHuman).code_for(variant),
                RewindError::refused(SpecError::NotOwnHumanMessage).code_for(variant)
            );
            {}
        }
        let failed = RewindError::RuntimeRestoreFailed {
            agent_id: "cody".into(),
            runtime: "codex".into(),
            failure: Box::new(RestoreFailure::Busy {
                runtime: "codex",
                message: "busy".into(),
            }),
            operation_id: "op".into(),
            status: OperationStatus::Failed,
        };
        assert_eq!(
            failed.answer_message(Variant::Recommended),
            failed.to_string()
        );
        assert_eq!(
            failed.answer_message(Variant::Alternative),
            ALTERNATIVE_RESTORE_FAILED_MESSAGE
        );
        assert!(ALL
            .iter()
            .all(|e| e.to_string() != ALTERNATIVE_RESTORE_FAILED_MESSAGE));
        assert_eq!(failed.code_for(Variant::Alternative), "RW-E301");
        assert_eq!(failed.code(), "runtime_restore_failed");
    }
}
