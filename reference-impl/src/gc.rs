//! Recovery point garbage collection (spec 5 and 10): the recovery point lifecycle belongs to
//! the runtime and GC, not to rewind. Pruning a point deletes its row; no current strategy owns
//! a runtime artifact, so pruning never reaches a runtime. For `codex_app_server_turns` the spec
//! says so explicitly: the ref is only a `{threadId, turnCount}` coordinate, and pruning it must
//! not start an app-server, interrupt a turn or call `thread/rollback`.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::capabilities::strategy;
use crate::error::{DbContext, RewindError};

/// Which recovery points to prune.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrunePolicy {
    /// Every point created before this instant.
    CreatedBefore(DateTime<Utc>),
    /// Every point of this agent.
    Agent(String),
}

/// What pruning a point did to its runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeEffect {
    /// Nothing: the ref is a coordinate and owns no runtime artifact.
    None,
}

/// One pruned point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrunedPoint {
    /// `message_recovery_points.id`.
    pub id: String,
    /// The agent it belonged to.
    pub agent_id: String,
    /// Its strategy.
    pub strategy: String,
    /// What pruning did to the runtime.
    pub runtime_effect: RuntimeEffect,
}

/// The runtime effect of pruning a point of `strategy`: none for every current strategy.
pub fn runtime_effect(strategy_name: &str) -> RuntimeEffect {
    match strategy_name {
        // A turn coordinate: no app-server, no interrupt, no rollback.
        strategy::CODEX_APP_SERVER_TURNS => RuntimeEffect::None,
        // A transcript uuid and a prompt message id: the session stays the runtime's own.
        strategy::CLAUDE_SESSION_RESUME_AT | strategy::OPENCODE_SESSION_REVERT => {
            RuntimeEffect::None
        }
        // A point of an unknown strategy is a dangling row; deleting it touches nothing else.
        _ => RuntimeEffect::None,
    }
}

/// Deletes the recovery points `policy` selects, in one statement, and says what each cost the
/// runtime (nothing).
pub async fn prune_recovery_points(
    pool: &PgPool,
    policy: &PrunePolicy,
) -> Result<Vec<PrunedPoint>, RewindError> {
    let rows: Vec<(String, String, String)> = match policy {
        PrunePolicy::CreatedBefore(before) => {
            sqlx::query_as(
                "DELETE FROM message_recovery_points WHERE created_at < $1 \
             RETURNING id, agent_id, strategy",
            )
            .bind(before)
            .fetch_all(pool)
            .await
        }
        PrunePolicy::Agent(agent) => {
            sqlx::query_as(
                "DELETE FROM message_recovery_points WHERE agent_id = $1 \
             RETURNING id, agent_id, strategy",
            )
            .bind(agent)
            .fetch_all(pool)
            .await
        }
    }
    .db("pruning recovery points")?;
    let mut pruned: Vec<PrunedPoint> = rows
        .into_iter()
        .map(|(id, agent_id, strategy)| PrunedPoint {
            runtime_effect: runtime_effect(&strategy),
            id,
            agent_id,
            strategy,
        })
        .collect();
    pruned.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(pruned)
}
