//! [`ReferenceSut`]: the in-process adapter for the `rewind-reference` crate.

use async_trait::async_trait;
use rewind_reference::{RewindCommand, RewindError, Rewinder};
use sqlx::PgPool;

use super::{
    Actor, CapabilityProfile, ConversationApi, RewindRequest, RewindResponse, SutError,
    SystemUnderTest,
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
        Ok(Box::new(ReferenceApi {
            rewinder: Rewinder::new(pool.clone()),
            pool,
        }))
    }
}

struct ReferenceApi {
    rewinder: Rewinder,
    pool: PgPool,
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
            Err(other) => Err(SutError::Internal {
                sut: NAME.to_owned(),
                detail: other.to_string(),
            }),
        }
    }

    async fn detach(&self) {
        self.pool.close().await;
    }
}
