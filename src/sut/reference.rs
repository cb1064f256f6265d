//! [`ReferenceSut`]: the in-process adapter for the `rewind-reference` crate.

use std::sync::Arc;

use async_trait::async_trait;
use rewind_reference::messages::{Author, NewMessage};
use rewind_reference::realtime::MemorySink;
use rewind_reference::{RewindCommand, RewindError, Rewinder};
use sqlx::PgPool;

use super::{
    Actor, CapabilityProfile, ConversationApi, RealtimeEvent, RewindRequest, RewindResponse,
    SendMessage, SentMessage, SutError, SystemUnderTest,
};
use crate::postgres::ScenarioDatabase;

const NAME: &str = "reference";

/// The reference implementation, called directly.
#[derive(Debug, Default, Clone)]
pub struct ReferenceSut;

#[async_trait]
impl SystemUnderTest for ReferenceSut {
    fn name(&self) -> &str {
        NAME
    }

    fn profile(&self) -> CapabilityProfile {
        CapabilityProfile::default()
    }

    async fn attach(&self, db: &ScenarioDatabase) -> Result<Box<dyn ConversationApi>, SutError> {
        let pool = db.pool(4).await.map_err(|e| SutError::Attach {
            sut: NAME.to_owned(),
            database: db.name.clone(),
            detail: e.to_string(),
        })?;
        let sink = Arc::new(MemorySink::default());
        Ok(Box::new(ReferenceApi {
            rewinder: Rewinder::new(pool.clone(), sink.clone()),
            sink,
            pool,
        }))
    }
}

struct ReferenceApi {
    rewinder: Rewinder,
    sink: Arc<MemorySink>,
    pool: PgPool,
}

fn internal(detail: impl std::fmt::Display) -> SutError {
    SutError::Internal {
        sut: NAME.to_owned(),
        detail: detail.to_string(),
    }
}

#[async_trait]
impl ConversationApi for ReferenceApi {
    async fn rewind(&self, request: &RewindRequest) -> Result<RewindResponse, SutError> {
        let command = RewindCommand {
            actor: match &request.actor {
                Actor::Human(id) => rewind_reference::Actor::Human(id.clone()),
                Actor::Agent(id) => rewind_reference::Actor::Agent(id.clone()),
                Actor::System => rewind_reference::Actor::System,
            },
            scope_id: request.scope_id.clone(),
            target_message_id: request.target_message_id.clone(),
        };
        match self.rewinder.rewind(&command).await {
            Ok(outcome) => Ok(RewindResponse::Completed {
                operation_id: outcome.operation_id,
                status: outcome.status.as_str().to_owned(),
                rewound_message_ids: outcome.rewound_message_ids,
            }),
            Err(RewindError::Refused {
                error,
                operation_id,
            }) => Ok(RewindResponse::Refused {
                code: error.code().to_owned(),
                message: error.to_string(),
                operation_id,
            }),
            Err(other) => Err(internal(other)),
        }
    }

    async fn send_message(&self, message: &SendMessage) -> Result<SentMessage, SutError> {
        let author = match &message.actor {
            Actor::Human(id) => Author::Human(id.clone()),
            Actor::Agent(id) => Author::Agent(id.clone()),
            Actor::System => Author::System,
        };
        let new = NewMessage {
            scope_id: message.scope_id.clone(),
            author,
            content: message.content.clone(),
            client_message_id: None,
            metadata: serde_json::json!({}),
            fanout: true,
        };
        match self.rewinder.post_message(&new).await {
            Ok(Some(posted)) => Ok(SentMessage {
                message_id: posted.id,
                seq: posted.seq,
            }),
            Ok(None) => Err(internal("the message was not written")),
            Err(e) => Err(internal(e)),
        }
    }

    async fn take_events(&self) -> Result<Vec<RealtimeEvent>, SutError> {
        Ok(self
            .sink
            .take()
            .into_iter()
            .map(|e| RealtimeEvent {
                name: e.name,
                scope_id: e.scope_id,
                payload: e.payload,
            })
            .collect())
    }

    async fn detach(&self) {
        self.pool.close().await;
    }
}
