//! [`Rewinder`]: the rewind use case, from request to completed operation.

use std::sync::Arc;

use sqlx::PgPool;

use crate::apply::apply_rewind;
use crate::error::{DbContext, RewindError};
use crate::lifecycle::{self, OperationStatus};
use crate::messages::{self, NewMessage, Posted};
use crate::plan;
use crate::realtime::{self, RealtimeSink};
use crate::recovery;

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
}

impl Rewinder {
    /// A rewinder working on the spec schema behind `pool`, publishing realtime events to `sink`.
    pub fn new(pool: PgPool, sink: Arc<dyn RealtimeSink>) -> Self {
        Rewinder { pool, sink }
    }

    /// Appends a message (live mode) and publishes its `message.created`.
    pub async fn post_message(&self, message: &NewMessage) -> Result<Option<Posted>, RewindError> {
        let posted = messages::post(&self.pool, message).await?;
        if let Some(posted) = &posted {
            self.sink.publish(messages::created_event(message, posted));
        }
        Ok(posted)
    }

    /// Runs the whole rewind: guards, durable operation, restore, apply.
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
        if !plan.related_agent_ids.is_empty() {
            let mut conn = self.pool.acquire().await.db("acquiring a connection")?;
            recovery::validate_related_agents(&mut conn, &plan.boundary, &plan.related_agent_ids)
                .await?;
            // Native restore through the runtimes is not built yet: refuse rather than tombstone
            // a conversation whose agents would keep the rewound context.
            return Err(RewindError::RuntimeRecoveryUnavailable {
                agents: plan.related_agent_ids.join(", "),
            });
        }
        let operation_id = lifecycle::begin(&self.pool, &plan).await?;
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
            Err(err) => {
                // No runtime was restored in this flow, so the failure is `failed`.
                let (code, message) = match &err {
                    RewindError::Refused { error, .. } => (error.code(), error.to_string()),
                    other => ("internal", other.to_string()),
                };
                lifecycle::fail(
                    &self.pool,
                    &operation_id,
                    OperationStatus::Failed,
                    code,
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
}
