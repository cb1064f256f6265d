//! [`Rewinder`]: the rewind use case, from request to completed operation.

use std::sync::Arc;

use sqlx::PgPool;

use crate::apply::apply_rewind;
use crate::error::{DbContext, RewindError};
use crate::lifecycle::{self, OperationStatus};
use crate::messages::{self, NewMessage, Posted};
use crate::plan;
use crate::realtime::{self, RealtimeSink};
use crate::recovery::{self, RestoreTarget};
use crate::runtimes::{self, RestoreFailure, Restored, RuntimeSettings};

/// Who asks for the rewind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// A human user (`users.id`).
    Human(String),
    /// An agent (`agents.id`).
    Agent(String),
    /// The system itself.
    System,
}

/// "Return `scope_id` to before `target_message_id`", asked by `actor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewindCommand {
    /// The initiator.
    pub actor: Actor,
    /// The scope the target lives in.
    pub scope_id: String,
    /// The first message to rewind.
    pub target_message_id: String,
}

/// A completed rewind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewindOutcome {
    /// The `rewind_operations.id`.
    pub operation_id: String,
    /// Always [`OperationStatus::Completed`] for an outcome.
    pub status: OperationStatus,
    /// The tombstoned message ids (ids only: never bodies).
    pub rewound_message_ids: Vec<String>,
}

/// The reference implementation's entry point.
#[derive(Debug, Clone)]
pub struct Rewinder {
    pool: PgPool,
    sink: Arc<dyn RealtimeSink>,
    runtimes: Option<Arc<RuntimeSettings>>,
    supported: Option<Arc<std::collections::BTreeSet<String>>>,
}

impl Rewinder {
    /// A rewinder working on the spec schema behind `pool`, publishing realtime events to `sink`.
    pub fn new(pool: PgPool, sink: Arc<dyn RealtimeSink>) -> Self {
        Rewinder {
            pool,
            sink,
            runtimes: None,
            supported: None,
        }
    }

    /// Narrows the runtimes this deployment restores to `runtime_ids` (a deployment that does
    /// not ship every runtime client): agents on any other runtime are refused as unsupported.
    pub fn with_supported_runtimes(
        mut self,
        runtime_ids: impl IntoIterator<Item = String>,
    ) -> Self {
        self.supported = Some(Arc::new(runtime_ids.into_iter().collect()));
        self
    }

    /// Reaches the agents' runtimes through `settings` for the restore step. Without it, a
    /// rewind whose suffix reached an agent is refused before anything is recorded.
    pub fn with_runtimes(mut self, settings: RuntimeSettings) -> Self {
        self.runtimes = Some(Arc::new(settings));
        self
    }

    /// Appends a message (live mode) and publishes its `message.created`.
    pub async fn post_message(&self, message: &NewMessage) -> Result<Option<Posted>, RewindError> {
        let posted = messages::post(&self.pool, message).await?;
        if let Some(posted) = &posted {
            self.sink.publish(messages::created_event(message, posted));
        }
        Ok(posted)
    }

    /// Runs the whole rewind in the spec's order (section 5): build the suffix, collect the
    /// related agents, validate them, record the operation, restore and verify every runtime,
    /// and only then apply.
    pub async fn rewind(&self, command: &RewindCommand) -> Result<RewindOutcome, RewindError> {
        let Actor::Human(initiator) = &command.actor else {
            return Err(RewindError::refused(crate::SpecError::InitiatorNotHuman));
        };
        let plan = {
            let mut conn = self.pool.acquire().await.db("acquiring a connection")?;
            plan::prepare(
                &mut conn,
                initiator,
                &command.scope_id,
                &command.target_message_id,
            )
            .await?
        };
        let targets = if plan.related_agent_ids.is_empty() {
            Vec::new()
        } else {
            let mut conn = self.pool.acquire().await.db("acquiring a connection")?;
            recovery::validate_related_agents(
                &mut conn,
                &plan.boundary,
                &plan.related_agent_ids,
                self.supported.as_deref(),
            )
            .await?
        };
        if !targets.is_empty() && self.runtimes.is_none() {
            return Err(RewindError::RuntimeRecoveryUnavailable {
                agents: plan.related_agent_ids.join(", "),
            });
        }
        let operation_id = lifecycle::begin(&self.pool, &plan).await?;
        self.restore_runtimes(&operation_id, &targets).await?;
        match apply_rewind(&self.pool, &plan, &operation_id).await {
            Ok(rewound_message_ids) => {
                // Post-commit: the rewind has happened; a lost notice is recovered by the
                // refetch that `conversation:rewound` triggers, so it does not fail the rewind.
                if let Err(e) =
                    realtime::announce(&self.pool, self.sink.as_ref(), &plan, &operation_id).await
                {
                    tracing::warn!(operation_id, "rewind notice not written: {e}");
                }
                Ok(RewindOutcome {
                    operation_id,
                    status: OperationStatus::Completed,
                    rewound_message_ids,
                })
            }
            Err(err) if !targets.is_empty() => {
                // The runtimes already forgot the suffix: the conversation needs repair, and
                // nothing was half-tombstoned (apply is one transaction).
                let refusal = match &err {
                    RewindError::Refused { error, .. } => Some(*error),
                    _ => None,
                };
                let cause = err.to_string();
                lifecycle::fail(
                    &self.pool,
                    &operation_id,
                    OperationStatus::RepairRequired,
                    err.code(),
                    &cause,
                )
                .await?;
                Err(RewindError::RepairRequired {
                    operation_id,
                    refusal,
                    cause,
                })
            }
            Err(err) => {
                let message = err.to_string();
                lifecycle::fail(
                    &self.pool,
                    &operation_id,
                    OperationStatus::Failed,
                    err.code(),
                    &message,
                )
                .await?;
                Err(match err {
                    RewindError::Refused { error, .. } => RewindError::Refused {
                        error,
                        operation_id: Some(operation_id),
                    },
                    other => other,
                })
            }
        }
    }

    /// Restores every target's runtime, one after the other, verifying each. The first failure
    /// ends the rewind: `failed` when no runtime had been restored yet (the database is
    /// untouched), `repair_required` when an earlier one had.
    async fn restore_runtimes(
        &self,
        operation_id: &str,
        targets: &[RestoreTarget],
    ) -> Result<(), RewindError> {
        let Some(settings) = self.runtimes.as_deref() else {
            return Ok(());
        };
        for (restored, target) in targets.iter().enumerate() {
            let result = runtimes::restore(settings, target).await;
            let result = match result {
                Ok(Restored::FreshSession) => self.start_fresh_session(&target.agent_id).await,
                Ok(Restored::Verified { detail }) => {
                    tracing::debug!(agent = target.agent_id, "runtime restored: {detail}");
                    Ok(())
                }
                Err(failure) => Err(failure),
            };
            if let Err(failure) = result {
                let status = if restored == 0 {
                    OperationStatus::Failed
                } else {
                    OperationStatus::RepairRequired
                };
                let message = format!(
                    "runtime restore of agent `{}` ({}) failed: {failure}",
                    target.agent_id, target.runtime
                );
                lifecycle::fail(
                    &self.pool,
                    operation_id,
                    status,
                    "runtime_restore_failed",
                    &message,
                )
                .await?;
                return Err(RewindError::RuntimeRestoreFailed {
                    agent_id: target.agent_id.clone(),
                    runtime: target.runtime.clone(),
                    failure: Box::new(failure),
                    operation_id: operation_id.to_owned(),
                    status,
                });
            }
        }
        Ok(())
    }

    /// Claude before its first input: the agent's next delivery starts a new session, so the
    /// agent forgets its session pointer.
    async fn start_fresh_session(&self, agent_id: &str) -> Result<(), RestoreFailure> {
        sqlx::query("UPDATE agents SET runtime_session_id = NULL WHERE id = $1")
            .bind(agent_id)
            .execute(&self.pool)
            .await
            .map(|_| ())
            .map_err(|e| RestoreFailure::Unreachable {
                runtime: "claude",
                detail: format!("cannot record the fresh session boundary: {e}"),
            })
    }
}
