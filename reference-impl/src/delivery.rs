//! Live delivery (spec 5: "the daemon writes a recovery point before it may deliver"): what a
//! daemon does with a new message, done now and waited for.
//!
//! A visible (not rewound, not recalled) human message reaches the agent members of its DM or
//! reply thread, and in a channel only the agent members its `metadata.mentions` names
//! ([`reached_agents`]). Deleted agents, and agents on a deleted machine, are reached by
//! nothing. The delivery facts are the `scope_fanout_outbox` rows [`crate::messages::post`]
//! queued for the message (`fanout: true`): an agent whose row is no longer `pending` has been
//! delivered the message already (or the rewind suppressed it), and is skipped. So a rewound
//! message, and the rewind notice (posted without fanout), are never delivered.
//!
//! For each reached agent, one after another in `agents.id` order:
//! 1. its `pending` rows are marked `leased` (committed);
//! 2. the runtime's session is established and its current state read, and, for a
//!    rewind-capable runtime this deployment restores, the `message_recovery_points` row of
//!    (message, agent) is written and COMMITTED (with any new native session pointer in
//!    `agents.runtime_session_id`) before the runtime gets the input ([`runtimes::deliver`]);
//! 3. the runtime answers; in one transaction the rows are marked `delivered` and a non-empty
//!    answer is posted verbatim as the agent's message in the same scope (`fanout: true`); its
//!    `message.created` is published after the commit.
//!
//! A runtime failure (an error answer, a crash, a time-out, a broken protocol, a failed turn)
//! marks the rows `failed`, posts nothing and keeps the recovery point: it is the delivery's
//! outcome, not an error of the request.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use sqlx::PgPool;

use crate::capabilities::{self, Capability};
use crate::error::{DbContext, RewindError};
use crate::messages::{self, Author, NewMessage};
use crate::realtime::RealtimeSink;
use crate::runtimes::{self, DeliveryError, PointToCommit, RuntimeSettings};

/// What a delivery works with: the database, where events go, how to reach the runtimes, and
/// the runtimes this deployment restores (`None`: every rewind-capable one).
#[derive(Debug, Clone, Copy)]
pub struct Daemon<'a> {
    /// The spec schema.
    pub pool: &'a PgPool,
    /// Where the answers' `message.created` go.
    pub sink: &'a dyn RealtimeSink,
    /// How to reach the runtimes (`None`: every reached agent's delivery fails).
    pub runtimes: Option<&'a RuntimeSettings>,
    /// The runtimes this deployment restores; an agent on another one gets no recovery point.
    pub supported: Option<&'a BTreeSet<String>>,
}

/// How one delivery ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The runtime took the input and answered.
    Delivered,
    /// The runtime failed the delivery; nothing was posted.
    Failed,
}

/// One delivery of a message to one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The agent.
    pub agent_id: String,
    /// How it ended.
    pub outcome: Outcome,
    /// The agent message carrying the answer, when one was posted.
    pub reply_message_id: Option<String>,
    /// What went wrong, for a failed delivery.
    pub detail: Option<String>,
}

impl Delivery {
    fn failed(agent_id: &str, detail: impl Into<String>) -> Delivery {
        Delivery {
            agent_id: agent_id.to_owned(),
            outcome: Outcome::Failed,
            reply_message_id: None,
            detail: Some(detail.into()),
        }
    }
}

/// Why a delivery request could not be carried out (a runtime failure is not one of these).
#[derive(Debug, thiserror::Error)]
pub enum DeliverError {
    /// No message has this id.
    #[error("no message `{0}`")]
    UnknownMessage(String),
    /// The database failed.
    #[error(transparent)]
    Database(#[from] RewindError),
    /// The recovery point of an agent could not be committed, so its input was not sent.
    #[error("delivery to agent `{agent_id}` stopped: {detail}")]
    PointNotCommitted {
        /// The agent.
        agent_id: String,
        /// Why.
        detail: String,
    },
}

/// The message a delivery starts from.
#[derive(Debug, Clone, sqlx::FromRow)]
struct MessageFacts {
    id: String,
    workspace_id: String,
    scope_id: String,
    author_kind: String,
    content: String,
    metadata: Value,
    scope_kind: String,
}

/// Whether a message of `author_kind` with `metadata` is delivered at all: a human message that
/// is not rewound or recalled.
pub fn is_deliverable(author_kind: &str, metadata: &Value) -> bool {
    let status = metadata
        .pointer("/messageRecall/status")
        .and_then(Value::as_str);
    author_kind == "human" && !matches!(status, Some("rewound") | Some("recalled"))
}

/// The agent ids a message's `metadata.mentions` names (strings only).
pub fn mentions_of(metadata: &Value) -> Vec<String> {
    metadata
        .get("mentions")
        .and_then(Value::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The agents a human message in a scope of `scope_kind` reaches, in id order: every agent
/// member of a DM or reply thread, and in a channel the agent members it mentions.
pub fn reached_agents(
    scope_kind: &str,
    agent_members: &[String],
    mentions: &[String],
) -> Vec<String> {
    let reached: BTreeSet<&String> = agent_members
        .iter()
        .filter(|agent| scope_kind != "channel" || mentions.contains(agent))
        .collect();
    reached.into_iter().cloned().collect()
}

/// Delivers message `message_id` to every agent it reaches that has not been delivered it yet.
pub async fn deliver(daemon: &Daemon<'_>, message_id: &str) -> Result<Vec<Delivery>, DeliverError> {
    let message: Option<MessageFacts> = sqlx::query_as(
        "SELECT m.id, m.workspace_id, m.scope_id, m.author_kind, m.content, m.metadata, \
                s.kind AS scope_kind \
         FROM scope_messages m JOIN scopes s ON s.id = m.scope_id WHERE m.id = $1",
    )
    .bind(message_id)
    .fetch_optional(daemon.pool)
    .await
    .db("loading the message to deliver")?;
    let Some(message) = message else {
        return Err(DeliverError::UnknownMessage(message_id.to_owned()));
    };
    if !is_deliverable(&message.author_kind, &message.metadata) {
        return Ok(Vec::new());
    }
    let members: Vec<String> = sqlx::query_scalar(
        "SELECT sm.agent_id FROM scope_memberships sm \
         JOIN agents a ON a.id = sm.agent_id \
         LEFT JOIN machines mc ON mc.id = a.machine_id \
         WHERE sm.scope_id = $1 AND sm.member_kind = 'agent' \
           AND a.deleted_at IS NULL AND mc.deleted_at IS NULL \
         ORDER BY sm.agent_id",
    )
    .bind(&message.scope_id)
    .fetch_all(daemon.pool)
    .await
    .db("loading the scope's agent members")?;
    let reached = reached_agents(
        &message.scope_kind,
        &members,
        &mentions_of(&message.metadata),
    );
    let mut deliveries = Vec::new();
    for agent_id in reached {
        if let Some(delivery) = deliver_to(daemon, &message, &agent_id).await? {
            deliveries.push(delivery);
        }
    }
    Ok(deliveries)
}

/// Delivers `message` to `agent_id`; `None` when the agent has no pending delivery of it.
async fn deliver_to(
    daemon: &Daemon<'_>,
    message: &MessageFacts,
    agent_id: &str,
) -> Result<Option<Delivery>, DeliverError> {
    // A lease outlives the two bounded phases of a delivery.
    let lease_secs = daemon
        .runtimes
        .map(|s| s.timeout.as_secs_f64() * 3.0)
        .unwrap_or(60.0)
        .max(60.0);
    let rows: Vec<i64> = sqlx::query_scalar(
        "UPDATE scope_fanout_outbox SET status = 'leased', \
                leased_until = now() + make_interval(secs => $3) \
         WHERE message_id = $1 AND recipient_kind = 'agent' AND recipient_id = $2 \
           AND status = 'pending' \
         RETURNING id",
    )
    .bind(&message.id)
    .bind(agent_id)
    .bind(lease_secs)
    .fetch_all(daemon.pool)
    .await
    .db("leasing the agent's delivery")?;
    if rows.is_empty() {
        return Ok(None);
    }
    let agent: Option<(String, Option<String>)> =
        sqlx::query_as("SELECT runtime, runtime_session_id FROM agents WHERE id = $1")
            .bind(agent_id)
            .fetch_optional(daemon.pool)
            .await
            .db("loading the agent")?;
    let Some((runtime, session)) = agent else {
        return fail(
            daemon,
            &rows,
            Delivery::failed(agent_id, "the agent does not exist"),
        )
        .await
        .map(Some);
    };
    let Some(settings) = daemon.runtimes else {
        let detail = format!("runtime delivery is not configured (agent runtime `{runtime}`)");
        return fail(daemon, &rows, Delivery::failed(agent_id, detail))
            .await
            .map(Some);
    };
    if !runtimes::delivers_to(&runtime) {
        let detail = format!("the reference has no delivery client for runtime `{runtime}`");
        return fail(daemon, &rows, Delivery::failed(agent_id, detail))
            .await
            .map(Some);
    }
    // A runtime this deployment does not restore gets its input without a recovery point.
    let capability = capabilities::for_runtime(&runtime)
        .filter(|_| daemon.supported.is_none_or(|s| s.contains(&runtime)));
    let pool = daemon.pool;
    let commit = |point: PointToCommit| async move {
        commit_point(pool, message, agent_id, capability, &point)
            .await
            .map_err(|e| e.to_string())
    };
    let delivered = runtimes::deliver(
        settings,
        &runtime,
        session.as_deref(),
        &message.content,
        commit,
    )
    .await;
    match delivered {
        Ok(answer) => finish(daemon, message, agent_id, &rows, &answer)
            .await
            .map(Some),
        Err(DeliveryError::Runtime(failure)) => {
            let detail = format!("{} ({})", failure, failure.kind());
            fail(daemon, &rows, Delivery::failed(agent_id, detail))
                .await
                .map(Some)
        }
        Err(DeliveryError::Commit(detail)) => {
            // The input was never sent; the lease is given up as a failed attempt.
            let _ = fail(daemon, &rows, Delivery::failed(agent_id, detail.clone())).await;
            Err(DeliverError::PointNotCommitted {
                agent_id: agent_id.to_owned(),
                detail,
            })
        }
    }
}

/// Commits the recovery point of (message, agent) and the agent's new session pointer, in one
/// transaction, before the runtime gets the input.
async fn commit_point(
    pool: &PgPool,
    message: &MessageFacts,
    agent_id: &str,
    capability: Option<Capability>,
    point: &PointToCommit,
) -> Result<(), RewindError> {
    let mut tx = pool.begin().await.db("beginning the recovery point")?;
    if let Some(session) = &point.new_session {
        sqlx::query("UPDATE agents SET runtime_session_id = $2 WHERE id = $1")
            .bind(agent_id)
            .bind(session)
            .execute(&mut *tx)
            .await
            .db("recording the agent's new runtime session")?;
    }
    if let Some(capability) = capability {
        sqlx::query(
            "INSERT INTO message_recovery_points \
                 (id, workspace_id, scope_id, message_id, agent_id, runtime, strategy, recovery_ref) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (message_id, agent_id) DO UPDATE SET runtime = EXCLUDED.runtime, \
                 strategy = EXCLUDED.strategy, recovery_ref = EXCLUDED.recovery_ref, \
                 created_at = now()",
        )
        .bind(uuid::Uuid::now_v7().to_string())
        .bind(&message.workspace_id)
        .bind(&message.scope_id)
        .bind(&message.id)
        .bind(agent_id)
        .bind(capability.runtime)
        .bind(capability.strategy)
        .bind(&point.recovery_ref)
        .execute(&mut *tx)
        .await
        .db("writing the recovery point")?;
    }
    tx.commit().await.db("committing the recovery point")
}

/// Marks the leased rows `failed` (only if still leased: a rewind may have suppressed them).
async fn fail(
    daemon: &Daemon<'_>,
    rows: &[i64],
    delivery: Delivery,
) -> Result<Delivery, DeliverError> {
    sqlx::query(
        "UPDATE scope_fanout_outbox SET status = 'failed', leased_until = NULL \
         WHERE id = ANY($1) AND status = 'leased'",
    )
    .bind(rows)
    .execute(daemon.pool)
    .await
    .db("recording the failed delivery")?;
    Ok(delivery)
}

/// Marks the leased rows `delivered` and posts a non-empty answer, in one transaction; then
/// publishes the answer's `message.created`.
async fn finish(
    daemon: &Daemon<'_>,
    message: &MessageFacts,
    agent_id: &str,
    rows: &[i64],
    answer: &str,
) -> Result<Delivery, DeliverError> {
    let mut tx = daemon
        .pool
        .begin()
        .await
        .db("beginning the delivery's end")?;
    // The scope first, as every writer of it does (a rewind's apply included).
    sqlx::query("SELECT id FROM scopes WHERE id = $1 FOR UPDATE")
        .bind(&message.scope_id)
        .fetch_optional(&mut *tx)
        .await
        .db("locking the scope")?;
    let finished: Vec<i64> = sqlx::query_scalar(
        "UPDATE scope_fanout_outbox SET status = 'delivered', leased_until = NULL \
         WHERE id = ANY($1) AND status = 'leased' RETURNING id",
    )
    .bind(rows)
    .fetch_all(&mut *tx)
    .await
    .db("recording the delivery")?;
    if finished.is_empty() {
        drop(tx);
        return Ok(Delivery::failed(
            agent_id,
            "the delivery was suppressed (the message was rewound) while the runtime answered; \
             the answer was not posted",
        ));
    }
    let reply = NewMessage {
        scope_id: message.scope_id.clone(),
        author: Author::Agent(agent_id.to_owned()),
        content: answer.to_owned(),
        client_message_id: None,
        metadata: json!({}),
        fanout: true,
    };
    let posted = if answer.trim().is_empty() {
        None
    } else {
        messages::post_in(&mut tx, &reply).await?
    };
    tx.commit().await.db("committing the delivery")?;
    if let Some(posted) = &posted {
        daemon.sink.publish(messages::created_event(&reply, posted));
    }
    Ok(Delivery {
        agent_id: agent_id.to_owned(),
        outcome: Outcome::Delivered,
        reply_message_id: posted.map(|p| p.id),
        detail: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn dms_and_threads_reach_every_agent_channels_only_the_mentioned() {
        let members = ids(&["zed", "ana", "kit"]);
        for kind in ["dm", "reply_thread"] {
            assert_eq!(
                reached_agents(kind, &members, &[]),
                ids(&["ana", "kit", "zed"]),
                "{kind}"
            );
            // Mentions do not narrow a DM or a thread.
            assert_eq!(
                reached_agents(kind, &members, &ids(&["kit"])),
                ids(&["ana", "kit", "zed"])
            );
        }
        assert!(reached_agents("channel", &members, &[]).is_empty());
        assert_eq!(
            reached_agents("channel", &members, &ids(&["zed", "kit", "nobody", "zed"])),
            ids(&["kit", "zed"])
        );
    }

    #[test]
    fn only_visible_human_messages_are_delivered() {
        assert!(is_deliverable("human", &json!({})));
        assert!(is_deliverable("human", &json!({"mentions": ["a"]})));
        for author in ["agent", "system", "service", "app"] {
            assert!(!is_deliverable(author, &json!({})), "{author}");
        }
        // The rewind notice is a system message.
        assert!(!is_deliverable(
            "system",
            &json!({"rewindNotice": {"operationId": "op"}})
        ));
        for status in ["rewound", "recalled"] {
            assert!(!is_deliverable(
                "human",
                &json!({"messageRecall": {"status": status}})
            ));
        }
        // The alternative tombstone keeps `rewoundAt` at the top level, the status inside.
        assert!(!is_deliverable(
            "human",
            &json!({"messageRecall": {"status": "rewound"}, "rewoundAt": "x"})
        ));
    }

    #[test]
    fn mentions_are_read_from_the_metadata() {
        assert_eq!(
            mentions_of(&json!({"mentions": ["a", 3, "b"]})),
            ids(&["a", "b"])
        );
        assert!(mentions_of(&json!({})).is_empty());
        assert!(mentions_of(&json!({"mentions": "a"})).is_empty());
    }
}
