//! [`post`]: appending a message to a scope (live mode), above the physical high-water marks.

use serde_json::json;
use sqlx::{Acquire as _, PgConnection};

use crate::error::{DbContext, RewindError};
use crate::realtime::RealtimeEvent;

/// Who writes a new message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Author {
    /// A human (`users.id`).
    Human(String),
    /// An agent (`agents.id`).
    Agent(String),
    /// The system.
    System,
}

/// A message to append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMessage {
    /// The scope to append to.
    pub scope_id: String,
    /// The author.
    pub author: Author,
    /// The content.
    pub content: String,
    /// An idempotency key: a second post with the same key in the scope writes nothing.
    pub client_message_id: Option<String>,
    /// Metadata to store.
    pub metadata: serde_json::Value,
    /// Whether to queue delivery (fanout rows to the other members). The rewind notice does not.
    pub fanout: bool,
}

/// Where a posted message landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posted {
    /// The new message id.
    pub id: String,
    /// Its scope-local seq.
    pub seq: i64,
    /// Its workspace-global seq.
    pub global_seq: i64,
}

/// Appends `message`; returns `None` when its client message id already exists in the scope, or
/// when the scope is archived (checked under the scope's row lock: a cascading rewind that
/// archived a reply thread while the message waited for the lock leaves it no place to go).
///
/// The seq is one above the scope's `latest_seq` high-water mark and the global seq one above the
/// workspace's, so a message after a rewind never reuses a rewound seq.
pub async fn post(
    conn: &mut PgConnection,
    message: &NewMessage,
) -> Result<Option<Posted>, RewindError> {
    let mut tx = conn.begin().await.db("beginning the post transaction")?;
    let posted = post_in(&mut tx, message).await?;
    if posted.is_some() {
        tx.commit().await.db("committing the post")?;
    }
    Ok(posted)
}

/// [`post`] inside the caller's transaction (which it neither begins nor commits).
pub async fn post_in(
    tx: &mut PgConnection,
    message: &NewMessage,
) -> Result<Option<Posted>, RewindError> {
    let scope: Option<(String, i64, bool)> = sqlx::query_as(
        "SELECT workspace_id, latest_seq, archived_at IS NOT NULL FROM scopes WHERE id = $1 \
         FOR UPDATE",
    )
    .bind(&message.scope_id)
    .fetch_optional(&mut *tx)
    .await
    .db("locking the scope")?;
    let Some((workspace_id, latest_seq, archived)) = scope else {
        return Err(RewindError::Database {
            action: "posting a message",
            source: sqlx::Error::RowNotFound,
        });
    };
    if archived {
        return Ok(None);
    }
    if let Some(client_id) = &message.client_message_id {
        let exists: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM scope_messages WHERE scope_id = $1 AND client_message_id = $2)",
        )
        .bind(&message.scope_id)
        .bind(client_id)
        .fetch_one(&mut *tx)
        .await
        .db("checking the client message id")?;
        if exists {
            return Ok(None);
        }
    }
    let global_seq: i64 = sqlx::query_scalar(
        "UPDATE workspaces SET latest_global_seq = latest_global_seq + 1 WHERE id = $1 \
         RETURNING latest_global_seq",
    )
    .bind(&workspace_id)
    .fetch_one(&mut *tx)
    .await
    .db("allocating a global seq")?;
    let seq = latest_seq + 1;
    let id = uuid::Uuid::now_v7().to_string();
    let (kind, user, agent) = match &message.author {
        Author::Human(u) => ("human", Some(u.as_str()), None),
        Author::Agent(a) => ("agent", None, Some(a.as_str())),
        Author::System => ("system", None, None),
    };
    sqlx::query(
        "INSERT INTO scope_messages (id, workspace_id, scope_id, seq, global_seq, author_kind, \
         author_user_id, author_agent_id, content, metadata, client_message_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(&id)
    .bind(&workspace_id)
    .bind(&message.scope_id)
    .bind(seq)
    .bind(global_seq)
    .bind(kind)
    .bind(user)
    .bind(agent)
    .bind(&message.content)
    .bind(&message.metadata)
    .bind(&message.client_message_id)
    .execute(&mut *tx)
    .await
    .db("inserting the message")?;
    sqlx::query(
        // `greatest`: a post that waited for the scope's lock started (and takes its time)
        // before the one it waited for, whose later time must stay.
        "UPDATE scopes SET latest_seq = $2, latest_global_seq = greatest(latest_global_seq, $3), \
         latest_message_at = greatest(latest_message_at, now()), \
         visible_last_message_at = greatest(visible_last_message_at, now()), \
         visible_message_count = visible_message_count + 1 WHERE id = $1",
    )
    .bind(&message.scope_id)
    .bind(seq)
    .bind(global_seq)
    .execute(&mut *tx)
    .await
    .db("updating the scope summary")?;
    if message.fanout {
        // Every other member; in a channel an agent only when the message mentions it (the
        // agents a channel message reaches).
        sqlx::query(
            "INSERT INTO scope_fanout_outbox (scope_id, message_id, recipient_kind, recipient_id, status) \
             SELECT $1, $2, sm.member_kind, coalesce(sm.user_id, sm.agent_id), 'pending' \
             FROM scope_memberships sm JOIN scopes s ON s.id = sm.scope_id WHERE sm.scope_id = $1 \
             AND coalesce(sm.user_id, sm.agent_id) IS DISTINCT FROM coalesce($3, $4) \
             AND (sm.member_kind = 'human' OR s.kind <> 'channel' OR $5::jsonb ? sm.agent_id)",
        )
        .bind(&message.scope_id)
        .bind(&id)
        .bind(user)
        .bind(agent)
        .bind(
            message
                .metadata
                .get("mentions")
                .cloned()
                .unwrap_or_else(|| json!([])),
        )
        .execute(&mut *tx)
        .await
        .db("queueing delivery")?;
    }
    Ok(Some(Posted {
        id,
        seq,
        global_seq,
    }))
}

/// The `message.created` event announcing `posted`.
pub fn created_event(message: &NewMessage, posted: &Posted) -> RealtimeEvent {
    RealtimeEvent {
        name: "message.created".to_owned(),
        scope_id: message.scope_id.clone(),
        payload: json!({
            "messageId": posted.id,
            "scopeId": message.scope_id,
            "seq": posted.seq,
            "clientMessageId": message.client_message_id,
        }),
    }
}
