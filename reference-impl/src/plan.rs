//! [`RewindPlan`] and its [`SuffixBoundary`]: what a rewind will tombstone, and which scope plays
//! which role.
//!
//! The plan carries one typed field per scope role (spec 2.1) and no alias fields: the primary
//! storage/tombstone scope, the operation-serialisation scope (stored in the historical
//! `rewind_operations.thread_id` column), the broadcast scope of the post-commit invalidation,
//! the reply-thread recompute scope and, inside the boundary, each cascade scope.

use serde::Serialize;
use sqlx::PgConnection;

use crate::error::{DbContext, RewindError, SpecError};
use crate::guards;
pub use crate::guards::MessageFacts;
use crate::sql::{suffix_cte, MESSAGE_NOT_REWOUND_SQL};
use crate::variant::Variant;

/// A `scopes.id`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ScopeId(pub String);

impl ScopeId {
    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ScopeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The primary scope-local suffix: the target and every later visible message of its scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrimaryBoundary {
    /// The workspace of the scope.
    pub workspace_id: String,
    /// The primary (tombstone) scope.
    pub scope_id: ScopeId,
    /// The target message; always `message_ids[0]`.
    pub target_message_id: String,
    /// The target's seq.
    pub from_seq: i64,
    /// The suffix in `seq ASC` order, target first.
    pub message_ids: Vec<String>,
}

/// A reply thread cascaded because its parent is the tail fork of the primary suffix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CascadeBoundary {
    /// The child reply-thread scope, tombstoned and archived.
    pub scope_id: ScopeId,
    /// The primary-suffix message the thread forks from.
    pub parent_message_id: String,
    /// Always 1: the whole thread goes.
    pub from_seq: i64,
    /// The thread's visible messages in `seq ASC` order.
    pub message_ids: Vec<String>,
}

/// The typed suffix lifecycle contract: one primary boundary plus explicit cascades.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SuffixBoundary {
    /// The primary scope's suffix.
    pub primary: PrimaryBoundary,
    /// Cascaded reply threads (at most one: only the tail fork cascades).
    pub cascades: Vec<CascadeBoundary>,
}

impl SuffixBoundary {
    /// Every message the rewind tombstones, primary suffix first.
    pub fn all_message_ids(&self) -> Vec<String> {
        let mut ids = self.primary.message_ids.clone();
        for cascade in &self.cascades {
            ids.extend(cascade.message_ids.iter().cloned());
        }
        ids
    }

    /// The boundary as the parameters of [`crate::sql::suffix_cte`]: each tombstoned scope and
    /// the seq its suffix starts at, primary first.
    pub fn ranges(&self) -> (Vec<String>, Vec<i64>) {
        let mut scopes = vec![self.primary.scope_id.0.clone()];
        let mut froms = vec![self.primary.from_seq];
        for cascade in &self.cascades {
            scopes.push(cascade.scope_id.0.clone());
            froms.push(cascade.from_seq);
        }
        (scopes, froms)
    }
}

/// A validated rewind, ready for restore and apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RewindPlan {
    /// The primary storage/tombstone scope.
    pub scope_id: ScopeId,
    /// The scope that serialises durable operations (the `thread_id` column's value).
    pub operation_scope_id: ScopeId,
    /// The scope that receives the post-commit `conversation:rewound` invalidation.
    pub broadcast_scope_id: ScopeId,
    /// The reply-thread scope whose participant/read state is recomputed, when the primary
    /// scope is a reply thread.
    pub reply_thread_scope_id: Option<ScopeId>,
    /// What gets tombstoned.
    pub boundary: SuffixBoundary,
    /// The human who asked.
    pub initiator_user_id: String,
    /// Agents the suffix reached (authors, delivery recipients, recovery-point holders).
    pub related_agent_ids: Vec<String>,
}

#[derive(Debug, sqlx::FromRow)]
struct ScopeFacts {
    kind: String,
    parent_scope_id: Option<String>,
}

/// Builds and validates the plan for `initiator` rewinding `scope_id` to before `target`.
///
/// Runs every initiation guard that needs only the database; reads, never writes. `variant`
/// picks which reply threads may cascade ([`guards::check_forks`]).
pub async fn prepare(
    conn: &mut PgConnection,
    initiator_user_id: &str,
    scope_id: &str,
    target_message_id: &str,
    variant: Variant,
) -> Result<RewindPlan, RewindError> {
    let scope: ScopeFacts = sqlx::query_as(
        "SELECT kind, parent_scope_id FROM scopes WHERE id = $1 AND archived_at IS NULL",
    )
    .bind(scope_id)
    .fetch_optional(&mut *conn)
    .await
    .db("loading the scope")?
    .ok_or_else(|| RewindError::refused(SpecError::MessageNotFound))?;

    let target = load_visible_message(conn, scope_id, target_message_id)
        .await?
        .ok_or_else(|| RewindError::refused(SpecError::MessageNotFound))?;
    guards::check_target(initiator_user_id, &target).map_err(RewindError::refused)?;

    let suffix = load_suffix(conn, scope_id, target.seq).await?;
    // The reads above are separate statements: a rewind of an earlier message (or a parent
    // channel's cascade) that commits between them leaves a suffix without the target, which
    // the apply's drift check, comparing against this very list, would not catch. The target
    // is then rewound, as if it had been read a moment later.
    if suffix.first().map(|m| m.id.as_str()) != Some(target.id.as_str()) {
        return Err(RewindError::refused(SpecError::MessageNotFound));
    }
    guards::check_suffix_hot(&suffix).map_err(RewindError::refused)?;
    guards::check_other_humans(initiator_user_id, &suffix).map_err(RewindError::refused)?;

    let suffix_ids: Vec<String> = suffix.iter().map(|m| m.id.clone()).collect();
    let forks = active_forks(conn, scope_id, target.seq).await?;
    let tail_fork =
        guards::check_forks(&suffix_ids, &forks, variant).map_err(RewindError::refused)?;

    let mut cascades = Vec::new();
    if let Some((child_scope, parent_message_id)) = tail_fork {
        let child = load_suffix(conn, &child_scope, 1).await?;
        guards::check_other_humans(initiator_user_id, &child).map_err(RewindError::refused)?;
        cascades.push(CascadeBoundary {
            scope_id: ScopeId(child_scope),
            parent_message_id,
            from_seq: 1,
            message_ids: child.iter().map(|m| m.id.clone()).collect(),
        });
    }

    let boundary = SuffixBoundary {
        primary: PrimaryBoundary {
            workspace_id: target.workspace_id.clone(),
            scope_id: ScopeId(scope_id.to_owned()),
            target_message_id: target.id.clone(),
            from_seq: target.seq,
            message_ids: suffix_ids,
        },
        cascades,
    };
    let related_agent_ids = related_agents(conn, &boundary).await?;
    let primary = ScopeId(scope_id.to_owned());
    let is_thread = scope.kind == "reply_thread";
    let broadcast = match (&scope.parent_scope_id, is_thread) {
        (Some(parent), true) => ScopeId(parent.clone()),
        _ => primary.clone(),
    };
    Ok(RewindPlan {
        operation_scope_id: primary.clone(),
        broadcast_scope_id: broadcast,
        reply_thread_scope_id: is_thread.then(|| primary.clone()),
        scope_id: primary,
        boundary,
        initiator_user_id: initiator_user_id.to_owned(),
        related_agent_ids,
    })
}

const MESSAGE_COLUMNS: &str =
    "m.id, m.workspace_id, m.scope_id, m.seq, m.author_kind, m.author_user_id, m.author_agent_id, m.storage_tier";

async fn load_visible_message(
    conn: &mut PgConnection,
    scope_id: &str,
    message_id: &str,
) -> Result<Option<MessageFacts>, RewindError> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {MESSAGE_COLUMNS} FROM scope_messages m \
         WHERE m.scope_id = $1 AND m.id = $2 AND {MESSAGE_NOT_REWOUND_SQL}"
    )))
    .bind(scope_id)
    .bind(message_id)
    .fetch_optional(conn)
    .await
    .db("loading the target message")
}

/// The visible messages of `scope_id` from `from_seq` on, in `seq ASC` order.
pub async fn load_suffix(
    conn: &mut PgConnection,
    scope_id: &str,
    from_seq: i64,
) -> Result<Vec<MessageFacts>, RewindError> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {MESSAGE_COLUMNS} FROM scope_messages m \
         WHERE m.scope_id = $1 AND m.seq >= $2 AND {MESSAGE_NOT_REWOUND_SQL} ORDER BY m.seq"
    )))
    .bind(scope_id)
    .bind(from_seq)
    .fetch_all(conn)
    .await
    .db("loading the suffix")
}

/// Active (non-archived) reply threads forking from any message of the suffix of `scope_id`
/// from `from_seq` on: `(child scope id, parent message id)`.
async fn active_forks(
    conn: &mut PgConnection,
    scope_id: &str,
    from_seq: i64,
) -> Result<Vec<(String, String)>, RewindError> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "WITH {} SELECT c.id, c.parent_message_id FROM scopes c JOIN suffix s ON s.id = c.parent_message_id \
         WHERE c.archived_at IS NULL ORDER BY c.id",
        suffix_cte()
    )))
    .bind([scope_id])
    .bind([from_seq])
    .fetch_all(conn)
    .await
    .db("loading reply-thread forks")
}

/// Agents the suffix reached: its authors, the agents its fanout rows address and the holders
/// of its recovery points.
async fn related_agents(
    conn: &mut PgConnection,
    boundary: &SuffixBoundary,
) -> Result<Vec<String>, RewindError> {
    let (scopes, froms) = boundary.ranges();
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "WITH {} \
         SELECT s.author_agent_id FROM suffix s WHERE s.author_agent_id IS NOT NULL \
         UNION SELECT o.recipient_id FROM scope_fanout_outbox o JOIN suffix s ON s.id = o.message_id \
           WHERE o.recipient_kind = 'agent' \
         UNION SELECT p.agent_id FROM message_recovery_points p JOIN suffix s ON s.id = p.message_id \
         ORDER BY 1",
        suffix_cte()
    )))
    .bind(&scopes)
    .bind(&froms)
    .fetch_all(conn)
    .await
    .db("collecting related agents")
}
