//! [`Rewinder`]: the rewind use case, from request to completed operation.

use std::sync::Arc;

use sqlx::pool::PoolConnection;
use sqlx::{Acquire as _, PgPool, Postgres};

use crate::apply::{self, apply_rewind, Applied};
use crate::delivery;
use crate::error::{DbContext, RewindError};
use crate::lifecycle::{self, OperationStatus};
use crate::messages::{self, NewMessage, Posted};
use crate::plan::{self, RewindPlan};
use crate::realtime::{self, RealtimeSink};
use crate::recovery::{self, RestoreTarget};
use crate::runtimes::{self, RestoreFailure, Restored, RuntimeSettings};
use crate::variant::Variant;

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
    variant: Variant,
}

/// A planned rewind with its `preparing` operation recorded, and the connection that did it.
struct Prepared {
    plan: RewindPlan,
    targets: Vec<RestoreTarget>,
    operation_id: String,
    conn: PoolConnection<Postgres>,
}

impl Rewinder {
    /// A rewinder working on the spec schema behind `pool`, publishing realtime events to `sink`.
    pub fn new(pool: PgPool, sink: Arc<dyn RealtimeSink>) -> Self {
        Rewinder {
            pool,
            sink,
            runtimes: None,
            supported: None,
            variant: Variant::Recommended,
        }
    }

    /// Takes the readings of `variant` where the spec leaves a choice open (default:
    /// [`Variant::Recommended`]).
    pub fn with_variant(mut self, variant: Variant) -> Self {
        self.variant = variant;
        self
    }

    /// The variant this rewinder runs.
    pub fn variant(&self) -> Variant {
        self.variant
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

    /// Appends a message (live mode) on `conn` and publishes its `message.created`.
    pub async fn post_message(
        &self,
        conn: &mut sqlx::PgConnection,
        message: &NewMessage,
    ) -> Result<Option<Posted>, RewindError> {
        let posted = messages::post(conn, message).await?;
        if let Some(posted) = &posted {
            self.sink.publish(messages::created_event(message, posted));
        }
        Ok(posted)
    }

    /// Delivers message `message_id` to the agent runtimes it reaches, as a daemon would
    /// (recovery point committed before each input; see [`delivery`]), publishing each
    /// answer's `message.created`.
    pub async fn deliver(
        &self,
        message_id: &str,
    ) -> Result<Vec<delivery::Delivery>, delivery::DeliverError> {
        let daemon = delivery::Daemon {
            pool: &self.pool,
            sink: self.sink.as_ref(),
            runtimes: self.runtimes.as_deref(),
            supported: self.supported.as_deref(),
        };
        delivery::deliver(&daemon, message_id).await
    }

    /// The apply transaction, then (recommended variant) the notice after its commit, both on
    /// one connection that holds the scope's apply lock in between
    /// ([`crate::apply::hold_for_notice`]): `conn`, or one from the pool.
    async fn apply_and_announce(
        &self,
        plan: &RewindPlan,
        operation_id: &str,
        conn: Option<PoolConnection<Postgres>>,
    ) -> Result<Applied, RewindError> {
        let mut conn = match conn {
            Some(conn) => conn,
            None => self
                .pool
                .acquire()
                .await
                .db("acquiring the apply connection")?,
        };
        if self.variant.is_alternative() {
            return apply_rewind(&mut conn, plan, operation_id, self.variant).await;
        }
        let scope = plan.scope_id.0.as_str();
        apply::hold_for_notice(&mut conn, scope).await?;
        let applied = apply_rewind(&mut conn, plan, operation_id, self.variant).await;
        if applied.is_ok() {
            // Post-commit: the rewind has happened; a lost notice is recovered by the refetch
            // that `conversation:rewound` triggers, so it does not fail the rewind.
            if let Err(e) =
                realtime::announce(&mut conn, self.sink.as_ref(), plan, operation_id).await
            {
                tracing::warn!(operation_id, "rewind notice not written: {e}");
            }
        }
        if apply::release_after_notice(&mut conn, scope).await.is_err() {
            // A session that may still hold the lock must not go back to the pool.
            let _ = conn.close().await;
        }
        applied
    }

    /// Runs the whole rewind in the spec's order (section 5): build the suffix, collect the
    /// related agents, validate them, record the operation, restore and verify every runtime,
    /// and only then apply.
    pub async fn rewind(&self, command: &RewindCommand) -> Result<RewindOutcome, RewindError> {
        let Prepared {
            plan,
            targets,
            operation_id,
            conn,
        } = match self.plan_and_begin(command).await {
            Ok(prepared) => prepared,
            Err(err) => return Err(self.record_refusal(command, err).await),
        };
        // With no runtime to restore the apply follows at once, on the plan's connection. A
        // restore may take long, and no connection is held across it.
        let conn = targets.is_empty().then_some(conn);
        self.restore_runtimes(&operation_id, &targets).await?;
        match self.apply_and_announce(&plan, &operation_id, conn).await {
            Ok(Applied {
                rewound_message_ids,
                notice,
            }) => {
                // Alternative: the notice was written by the apply; announce it.
                if let Some((notice, posted)) = notice {
                    realtime::publish_rewound(
                        self.sink.as_ref(),
                        &plan,
                        &operation_id,
                        self.variant,
                    );
                    self.sink.publish(messages::created_event(&notice, &posted));
                }
                let rewound_message_ids = match self.variant {
                    Variant::Recommended => rewound_message_ids,
                    // Alternative: the answer names the primary boundary only.
                    Variant::Alternative => plan.boundary.primary.message_ids.clone(),
                };
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
                    err.code_for(self.variant),
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
                    err.code_for(self.variant),
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

    /// Plans the rewind, validates the related agents and records the `preparing` operation.
    ///
    /// [`Variant::Recommended`] plans on plain reads and lets the apply take the scope's row
    /// lock. [`Variant::Alternative`] takes that lock (`SELECT ... FOR UPDATE` on the primary
    /// scope's `scopes` row) first and plans and records `preparing` in the same transaction:
    /// while someone else holds the lock it waits before any `preparing` row exists, and it plans
    /// on what was committed meanwhile. The apply re-locks and re-validates either way.
    async fn plan_and_begin(&self, command: &RewindCommand) -> Result<Prepared, RewindError> {
        let Actor::Human(initiator) = &command.actor else {
            return Err(RewindError::refused(crate::SpecError::InitiatorNotHuman));
        };
        match self.variant {
            Variant::Recommended => {
                let mut conn = self.pool.acquire().await.db("acquiring a connection")?;
                let (plan, targets) = self.plan(&mut conn, initiator, command).await?;
                let operation_id = lifecycle::begin(&mut conn, &plan).await?;
                Ok(Prepared {
                    plan,
                    targets,
                    operation_id,
                    conn,
                })
            }
            Variant::Alternative => {
                let mut conn = self.pool.acquire().await.db("acquiring a connection")?;
                let mut tx = conn.begin().await.db("beginning the plan transaction")?;
                sqlx::query("SELECT id FROM scopes WHERE id = $1 FOR UPDATE")
                    .bind(&command.scope_id)
                    .fetch_optional(&mut *tx)
                    .await
                    .db("locking the scope")?;
                let (plan, targets) = self.plan(&mut tx, initiator, command).await?;
                let operation_id = lifecycle::begin(&mut tx, &plan).await?;
                tx.commit().await.db("committing the plan transaction")?;
                Ok(Prepared {
                    plan,
                    targets,
                    operation_id,
                    conn,
                })
            }
        }
    }

    /// Builds the plan and validates the related agents (spec 5, steps 1 to 4).
    async fn plan(
        &self,
        conn: &mut sqlx::PgConnection,
        initiator: &str,
        command: &RewindCommand,
    ) -> Result<(RewindPlan, Vec<RestoreTarget>), RewindError> {
        let plan = plan::prepare(
            conn,
            initiator,
            &command.scope_id,
            &command.target_message_id,
            self.variant,
        )
        .await?;
        let targets = if plan.related_agent_ids.is_empty() {
            Vec::new()
        } else {
            recovery::validate_related_agents(
                conn,
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
        Ok((plan, targets))
    }

    /// A refusal at planning time. [`Variant::Recommended`] records nothing;
    /// [`Variant::Alternative`] records it as a `failed` operation of the requested scope and
    /// target (when the schema can hold it: see [`lifecycle::record_refusal`]) and names that
    /// operation in the answer.
    async fn record_refusal(&self, command: &RewindCommand, err: RewindError) -> RewindError {
        let (
            Variant::Alternative,
            RewindError::Refused {
                error,
                operation_id: None,
            },
        ) = (self.variant, &err)
        else {
            return err;
        };
        let Actor::Human(initiator) = &command.actor else {
            // `rewind_operations.initiator_user_id` references a user: nowhere to record it.
            return err;
        };
        let recorded = lifecycle::record_refusal(
            &self.pool,
            &command.scope_id,
            &command.target_message_id,
            initiator,
            error.code_for(self.variant),
            &error.to_string(),
        )
        .await;
        match recorded {
            Ok(operation_id) => RewindError::Refused {
                error: *error,
                operation_id,
            },
            Err(db) => db,
        }
    }

    /// Restores every target's runtime, one after the other, verifying each. The first failure
    /// ends the rewind: `failed` when no runtime had been restored yet (the database is
    /// untouched), `repair_required` when an earlier one had. Under [`Variant::Alternative`] a
    /// failure whose outcome is unknown ([`RestoreFailure::outcome_unknown`]) is
    /// `repair_required` too: that runtime may have changed.
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
                Ok(Restored::Verified { detail } | Restored::Bound { detail }) => {
                    tracing::debug!(agent = target.agent_id, "runtime restored: {detail}");
                    Ok(())
                }
                Err(failure) => Err(failure),
            };
            if let Err(failure) = result {
                // Alternative: a restore whose outcome is unknown may have changed the runtime.
                let maybe_changed = self.variant.is_alternative() && failure.outcome_unknown();
                let status = if restored == 0 && !maybe_changed {
                    OperationStatus::Failed
                } else {
                    OperationStatus::RepairRequired
                };
                let error = RewindError::RuntimeRestoreFailed {
                    agent_id: target.agent_id.clone(),
                    runtime: target.runtime.clone(),
                    failure: Box::new(failure),
                    operation_id: operation_id.to_owned(),
                    status,
                };
                let message = match self.variant {
                    Variant::Recommended => error.to_string(),
                    Variant::Alternative => {
                        format!("{}: {error}", error.answer_message(self.variant))
                    }
                };
                lifecycle::fail(
                    &self.pool,
                    operation_id,
                    status,
                    error.code_for(self.variant),
                    &message,
                )
                .await?;
                return Err(error);
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
