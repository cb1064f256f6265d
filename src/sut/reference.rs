//! [`ReferenceSut`]: the in-process adapter for the `rewind-reference` crate.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rewind_reference::messages::{Author, NewMessage};
use rewind_reference::realtime::MemorySink;
use rewind_reference::runtimes::{
    ClaudeSettings, CodexSettings, OpenCodeSettings, RuntimeSettings,
};
use rewind_reference::{RewindCommand, RewindError, Rewinder};
use sqlx::PgPool;

use super::{
    Actor, CapabilityProfile, ConversationApi, PruneRequest, ReadState, RealtimeEvent,
    RewindRequest, RewindResponse, RuntimeEndpoints, SendMessage, SentMessage, SutError, SyncPage,
    SyncRequest, SyncedMessage, SystemUnderTest,
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
        CapabilityProfile {
            runtimes: rewind_reference::capabilities::CAPABILITIES
                .iter()
                .map(|c| c.runtime.to_owned())
                .collect(),
            surfaces: Vec::new(),
        }
    }

    async fn attach(
        &self,
        db: &ScenarioDatabase,
        runtimes: &RuntimeEndpoints,
    ) -> Result<Box<dyn ConversationApi>, SutError> {
        let pool = db.pool(4).await.map_err(|e| SutError::Attach {
            sut: NAME.to_owned(),
            database: db.name.clone(),
            detail: e.to_string(),
        })?;
        let sink = Arc::new(MemorySink::default());
        Ok(Box::new(ReferenceApi {
            rewinder: Rewinder::new(pool.clone(), sink.clone())
                .with_runtimes(runtime_settings(runtimes)),
            sink,
            pool,
        }))
    }
}

/// How long one agent's restore (start, calls and read-back) may take before the reference
/// gives up on it: generous for a loaded two-core CI machine, and what a hang fault costs.
const RUNTIME_TIMEOUT: Duration = Duration::from_secs(5);

fn runtime_settings(endpoints: &RuntimeEndpoints) -> RuntimeSettings {
    RuntimeSettings {
        codex: CodexSettings {
            program: endpoints.codex_program.clone(),
            args: endpoints.codex_args.clone(),
            env: endpoints.codex_env.clone(),
        },
        claude: ClaudeSettings {
            program: endpoints.claude_program.clone(),
            env: endpoints.claude_env.clone(),
            cwd: endpoints.claude_cwd.clone(),
        },
        opencode: OpenCodeSettings {
            base_url: endpoints.opencode_url.clone(),
        },
        timeout: RUNTIME_TIMEOUT,
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
            Err(err @ RewindError::Refused { .. })
            | Err(err @ RewindError::RuntimeRestoreFailed { .. })
            | Err(err @ RewindError::RepairRequired { .. }) => Ok(RewindResponse::Refused {
                code: err.code().to_owned(),
                message: match &err {
                    RewindError::Refused { error, .. } => error.to_string(),
                    other => other.to_string(),
                },
                operation_id: err.operation_id().map(str::to_owned),
            }),
            Err(other) => Err(internal(other)),
        }
    }

    async fn read_state(
        &self,
        scope_id: &str,
        user_id: &str,
    ) -> Result<Option<ReadState>, SutError> {
        let state = rewind_reference::reads::read_state(&self.pool, scope_id, user_id)
            .await
            .map_err(internal)?;
        Ok(state.map(|s| ReadState {
            last_read_seq: s.last_read_seq,
            visible_tail_seq: s.visible_tail_seq,
            unread_count: s.unread_count,
        }))
    }

    async fn sync_messages(&self, request: &SyncRequest) -> Result<SyncPage, SutError> {
        let page = rewind_reference::reads::sync_messages(
            &self.pool,
            &request.scope_id,
            request.after_seq,
            request.limit,
        )
        .await
        .map_err(internal)?;
        Ok(SyncPage {
            messages: page
                .messages
                .into_iter()
                .map(|m| SyncedMessage {
                    id: m.id,
                    seq: m.seq,
                    content: m.content,
                })
                .collect(),
            has_more: page.has_more,
        })
    }

    async fn prune_recovery_points(&self, request: &PruneRequest) -> Result<Vec<String>, SutError> {
        let pruned = rewind_reference::gc::prune_recovery_points(
            &self.pool,
            &rewind_reference::gc::PrunePolicy::Agent(request.agent_id.clone()),
        )
        .await
        .map_err(internal)?;
        Ok(pruned.into_iter().map(|p| p.id).collect())
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
