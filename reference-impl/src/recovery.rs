//! Runtime recovery validation (spec 5, steps 2 to 4): every agent the suffix reached must be
//! available, on a rewind-capable runtime, hold a recovery point of its runtime's strategy, and
//! have done nothing outside the rewound scopes since it first took part in the suffix.

use sqlx::PgConnection;

use crate::capabilities;
use crate::error::{DbContext, RewindError, SpecError};
use crate::plan::SuffixBoundary;
use crate::sql::suffix_cte;

/// An agent to restore and the recovery point to restore it to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreTarget {
    /// The agent.
    pub agent_id: String,
    /// Its runtime id.
    pub runtime: String,
    /// The recovery strategy.
    pub strategy: String,
    /// The recovery point's message (the agent's first touch in the suffix).
    pub message_id: String,
    /// The runtime's restore ref.
    pub recovery_ref: serde_json::Value,
}

#[derive(Debug, sqlx::FromRow)]
struct AgentFacts {
    id: String,
    runtime: String,
    agent_deleted: bool,
    machine_deleted: bool,
}

#[derive(Debug, sqlx::FromRow)]
struct PointFacts {
    agent_id: String,
    message_id: String,
    strategy: String,
    recovery_ref: serde_json::Value,
    global_seq: i64,
}

/// Validates every related agent; returns what each must be restored to.
///
/// `supported`, when given, narrows the runtimes this deployment may restore to those listed
/// (an agent on any other runtime is refused as unsupported).
pub async fn validate_related_agents(
    conn: &mut PgConnection,
    boundary: &SuffixBoundary,
    agent_ids: &[String],
    supported: Option<&std::collections::BTreeSet<String>>,
) -> Result<Vec<RestoreTarget>, RewindError> {
    let (scopes, froms) = boundary.ranges();
    let agents: Vec<AgentFacts> = sqlx::query_as(
        "SELECT a.id, a.runtime, a.deleted_at IS NOT NULL AS agent_deleted, \
                coalesce(m.deleted_at IS NOT NULL, false) AS machine_deleted \
         FROM agents a LEFT JOIN machines m ON m.id = a.machine_id \
         WHERE a.id = ANY($1) ORDER BY a.id",
    )
    .bind(agent_ids)
    .fetch_all(&mut *conn)
    .await
    .db("loading related agents")?;

    // Each agent's first touch in the suffix is its earliest recovery point there.
    let mut first_points: std::collections::BTreeMap<String, PointFacts> =
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "WITH {} SELECT DISTINCT ON (p.agent_id) p.agent_id, p.message_id, p.strategy, \
               p.recovery_ref, s.global_seq \
             FROM message_recovery_points p JOIN suffix s ON s.id = p.message_id \
             WHERE p.agent_id = ANY($3) ORDER BY p.agent_id, s.global_seq",
            suffix_cte()
        )))
        .bind(&scopes)
        .bind(&froms)
        .bind(agent_ids)
        .fetch_all(&mut *conn)
        .await
        .db("loading recovery points")?
        .into_iter()
        .map(|p: PointFacts| (p.agent_id.clone(), p))
        .collect();

    let mut targets = Vec::new();
    let mut since = Vec::new();
    for agent in agents {
        if agent.agent_deleted || agent.machine_deleted {
            return Err(RewindError::refused(SpecError::AgentUnavailable));
        }
        let capability = capabilities::for_runtime(&agent.runtime)
            .filter(|_| supported.is_none_or(|s| s.contains(&agent.runtime)))
            .ok_or_else(|| RewindError::refused(SpecError::AgentRuntimeUnsupported))?;
        let point = match first_points.remove(&agent.id) {
            Some(p) if p.strategy == capability.strategy => p,
            Some(_) => return Err(RewindError::refused(SpecError::RecoveryPointMissing)),
            None if capability.needs_recovery_point => {
                return Err(RewindError::refused(SpecError::RecoveryPointMissing))
            }
            None => continue,
        };
        since.push(point.global_seq);
        targets.push(RestoreTarget {
            agent_id: agent.id,
            runtime: agent.runtime,
            strategy: point.strategy,
            message_id: point.message_id,
            recovery_ref: point.recovery_ref,
        });
    }
    // Step 4, for every agent at once, after step 3 passed for all of them: nothing outside
    // the rewound scopes after its first touch.
    if targets.is_empty() {
        return Ok(targets);
    }
    let agents: Vec<&str> = targets.iter().map(|t| t.agent_id.as_str()).collect();
    let elsewhere: bool = sqlx::query_scalar(ACTIVITY_ELSEWHERE_SQL)
        .bind(&agents)
        .bind(&since)
        .bind(&scopes)
        .fetch_one(&mut *conn)
        .await
        .db("checking activity outside the rewound scopes")?;
    if elsewhere {
        return Err(RewindError::refused(SpecError::AgentCrossScopeActivity));
    }
    Ok(targets)
}

/// Whether any agent `$1[i]` wrote a message, or took a delivery (`leased` or `delivered`), in a
/// scope outside `$3` after global seq `$2[i]` (its first touch of the suffix).
const ACTIVITY_ELSEWHERE_SQL: &str = "SELECT EXISTS ( \
       SELECT FROM unnest($1::text[], $2::bigint[]) AS a(agent_id, since) \
       WHERE EXISTS (SELECT FROM scope_messages m \
                     WHERE m.author_agent_id = a.agent_id AND m.global_seq > a.since \
                       AND NOT m.scope_id = ANY($3)) \
          OR EXISTS (SELECT FROM scope_fanout_outbox o JOIN scope_messages m ON m.id = o.message_id \
                     WHERE o.recipient_kind = 'agent' AND o.recipient_id = a.agent_id \
                       AND o.status IN ('leased', 'delivered') \
                       AND m.global_seq > a.since AND NOT m.scope_id = ANY($3)))";
