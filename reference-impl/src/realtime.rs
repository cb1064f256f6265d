//! Realtime (spec 8): [`RealtimeSink`] receives the events an implementation emits after commit,
//! and [`notice`] writes the rewind notice.
//!
//! `conversation:rewound` is a coarse invalidation to the broadcast scope: it names the scopes
//! and the operation, never suffix content, patches or per-surface facts. The notice is one
//! human-visible `system` message in the primary scope, written idempotently under client
//! message id `rewind-notice:<operationID>` and announced as `message.created`; it creates no
//! fanout or activity row, so it notifies nobody and wakes no agent.

use std::sync::Mutex;

use serde_json::json;
use sqlx::{Connection, PgConnection};

use crate::error::{DbContext, RewindError};
use crate::messages::{self, Author, NewMessage};
use crate::plan::RewindPlan;
use crate::variant::Variant;

/// One realtime event as the implementation publishes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RealtimeEvent {
    /// `conversation:rewound` or `message.created`.
    pub name: String,
    /// The scope the event is published to.
    pub scope_id: String,
    /// The event payload.
    pub payload: serde_json::Value,
}

/// Where published events go (a websocket hub in production, memory here).
pub trait RealtimeSink: Send + Sync + std::fmt::Debug {
    /// Publishes one event; called only after the writes it announces have committed.
    fn publish(&self, event: RealtimeEvent);
}

/// A sink that keeps every event in memory, in publication order.
#[derive(Debug, Default)]
pub struct MemorySink {
    events: Mutex<Vec<RealtimeEvent>>,
}

impl MemorySink {
    /// Takes every event published so far.
    pub fn take(&self) -> Vec<RealtimeEvent> {
        match self.events.lock() {
            Ok(mut events) => std::mem::take(&mut *events),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        }
    }
}

impl RealtimeSink for MemorySink {
    fn publish(&self, event: RealtimeEvent) {
        match self.events.lock() {
            Ok(mut events) => events.push(event),
            Err(poisoned) => poisoned.into_inner().push(event),
        }
    }
}

/// The client message id of an operation's notice.
pub fn notice_client_id(operation_id: &str) -> String {
    format!("rewind-notice:{operation_id}")
}

/// Writes the rewind notice (idempotently) and publishes `conversation:rewound` and the
/// notice's `message.created`.
pub async fn announce(
    conn: &mut PgConnection,
    sink: &dyn RealtimeSink,
    plan: &RewindPlan,
    operation_id: &str,
) -> Result<(), RewindError> {
    publish_rewound(sink, plan, operation_id, Variant::Recommended);
    let notice = notice(conn, plan, operation_id).await?;
    let mut tx = conn.begin().await.db("beginning the notice transaction")?;
    let posted = messages::post_in(&mut tx, &notice).await?;
    tx.commit().await.db("committing the notice")?;
    if let Some(sent) = posted {
        sink.publish(messages::created_event(&notice, &sent));
    }
    Ok(())
}

/// Publishes the post-commit `conversation:rewound` invalidation to the broadcast scope.
///
/// Under [`Variant::Alternative`] a reply-thread rewind is also announced to the thread scope
/// itself (one event per scope); a channel or DM rewind is one event either way.
pub fn publish_rewound(
    sink: &dyn RealtimeSink,
    plan: &RewindPlan,
    operation_id: &str,
    variant: Variant,
) {
    let mut scopes = vec![&plan.broadcast_scope_id];
    if variant.is_alternative() && plan.broadcast_scope_id != plan.scope_id {
        scopes.push(&plan.scope_id);
    }
    for scope in scopes {
        sink.publish(RealtimeEvent {
            name: "conversation:rewound".to_owned(),
            scope_id: scope.0.clone(),
            payload: json!({
                "scopeId": scope,
                "rewindScopeId": plan.scope_id,
                "operationId": operation_id,
            }),
        });
    }
}

/// The rewind notice of `operation_id`: a `system` message in the primary scope, under client
/// message id `rewind-notice:<operationId>`, without fanout.
pub async fn notice(
    conn: &mut PgConnection,
    plan: &RewindPlan,
    operation_id: &str,
) -> Result<NewMessage, RewindError> {
    let initiator: String = sqlx::query_scalar("SELECT display_name FROM users WHERE id = $1")
        .bind(&plan.initiator_user_id)
        .fetch_optional(conn)
        .await
        .map_err(|source| RewindError::Database {
            action: "loading the initiator's name",
            source,
        })?
        .unwrap_or_else(|| plan.initiator_user_id.clone());
    Ok(NewMessage {
        scope_id: plan.scope_id.0.clone(),
        author: Author::System,
        content: format!("{initiator} rewound the conversation"),
        client_message_id: Some(notice_client_id(operation_id)),
        metadata: json!({"rewindNotice": {"operationId": operation_id}}),
        fanout: false,
    })
}
