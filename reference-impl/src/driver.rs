//! [`ReferenceDriver`]: the reference implementation behind the conformance driver protocol.
//!
//! Both ways the harness reaches the reference go through here: linked in process, and over
//! HTTP through the reference server ([`crate::server`]). Requests and answers are the
//! protocol's wire types, so the two transports cannot drift apart.

use std::sync::Arc;
use std::time::Duration;

use rewind_driver_protocol as wire;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres};

use crate::delivery;
use crate::messages::{Author, NewMessage};
use crate::realtime::MemorySink;
use crate::runtimes::{ClaudeSettings, CodexSettings, OpenCodeSettings, RuntimeSettings};
use crate::{RewindCommand, RewindError, Rewinder, Variant};

/// How the reference is deployed: which runtimes it restores, and which reading it takes where
/// the spec leaves a choice open.
#[derive(Debug, Clone, Default)]
pub struct ReferenceDriver {
    /// Restore only these runtime ids (`None`: every runtime the capability map knows).
    pub supported_runtimes: Option<Vec<String>>,
    /// The readings it takes (default: [`Variant::Recommended`]).
    pub variant: Variant,
}

/// A driver-level failure: its protocol error code and a message.
pub type DriverFailure = wire::DriverError;

fn failure(code: &str, message: impl std::fmt::Display) -> DriverFailure {
    wire::DriverError::new(code, message.to_string())
}

/// Refuses a request any of whose strings holds a NUL character, naming where: no id or text
/// of the spec schema can hold one (PostgreSQL's `text` and `jsonb` refuse it), so it is bad
/// input, not something to send to the database.
fn refuse_nul(request: &impl serde::Serialize) -> Result<(), DriverFailure> {
    fn find(value: &serde_json::Value, path: &mut String) -> bool {
        match value {
            serde_json::Value::String(s) => s.contains('\0'),
            serde_json::Value::Array(items) => items.iter().enumerate().any(|(i, item)| {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                let found = find(item, path);
                if !found {
                    path.truncate(len);
                }
                found
            }),
            serde_json::Value::Object(fields) => fields.iter().any(|(key, item)| {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                let found = find(item, path);
                if !found {
                    path.truncate(len);
                }
                found
            }),
            _ => false,
        }
    }
    let value = serde_json::to_value(request).unwrap_or_default();
    let mut path = String::new();
    if find(&value, &mut path) {
        return Err(failure(
            "bad_request",
            format!("`{path}` holds a NUL character, which no id or text can hold"),
        ));
    }
    Ok(())
}

impl ReferenceDriver {
    /// The implementation's name and version, as the handshake reports them (the alternative
    /// variant calls itself `reference-alternative`, so reports tell the runs apart).
    pub fn implementation(&self) -> wire::Implementation {
        wire::Implementation {
            name: match self.variant {
                Variant::Recommended => "reference".to_owned(),
                Variant::Alternative => "reference-alternative".to_owned(),
            },
            version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        }
    }

    /// Opens a session on one scenario's database and runtimes.
    pub async fn attach(&self, request: &wire::AttachRequest) -> Result<Session, DriverFailure> {
        let options: PgConnectOptions = request.database.url.parse().map_err(|e| {
            failure(
                "bad_request",
                format!("database.url is not a PostgreSQL URL: {e}"),
            )
        })?;
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(30))
            .connect_lazy_with(options);
        // The first connection within the request's own limit: a refused connection is retried
        // until then, not for the pool's whole acquire time-out.
        let unreachable = |detail: String| {
            failure(
                "database_unreachable",
                format!("cannot connect to `{}`: {detail}", request.database.name),
            )
        };
        let limit = Duration::from_millis(request.limits.request_timeout_ms.clamp(100, 30_000));
        match tokio::time::timeout(limit, pool.acquire()).await {
            Ok(Ok(_first)) => {}
            Ok(Err(e)) => return Err(unreachable(e.to_string())),
            Err(_) => {
                return Err(unreachable(format!(
                    "no connection within the request limit of {} ms",
                    limit.as_millis()
                )))
            }
        }
        let sink = Arc::new(MemorySink::default());
        let mut rewinder = Rewinder::new(pool.clone(), sink.clone())
            .with_runtimes(runtime_settings(&request.runtimes, &request.limits))
            .with_variant(self.variant);
        if let Some(runtimes) = &self.supported_runtimes {
            rewinder = rewinder.with_supported_runtimes(runtimes.iter().cloned());
        }
        Ok(Session {
            rewinder,
            sink,
            pool,
        })
    }
}

fn runtime_settings(endpoints: &wire::RuntimeEndpoints, limits: &wire::Limits) -> RuntimeSettings {
    let env = |map: &std::collections::BTreeMap<String, String>| {
        map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    };
    RuntimeSettings {
        codex: CodexSettings {
            program: endpoints.codex_program.clone(),
            args: endpoints.codex_args.clone(),
            env: env(&endpoints.codex_env),
        },
        claude: ClaudeSettings {
            program: endpoints.claude_program.clone(),
            env: env(&endpoints.claude_env),
            cwd: endpoints.claude_cwd.clone(),
        },
        opencode: OpenCodeSettings {
            base_url: endpoints.opencode_url.clone(),
        },
        timeout: Duration::from_millis(limits.restore_timeout_ms),
    }
}

/// One scenario's handle on the reference: a pool on its database, the rewinder, and the
/// realtime events published since the last take.
#[derive(Debug)]
pub struct Session {
    rewinder: Rewinder,
    sink: Arc<MemorySink>,
    pool: PgPool,
}

fn actor(actor: &wire::Actor) -> crate::Actor {
    match actor {
        wire::Actor::Human(id) => crate::Actor::Human(id.clone()),
        wire::Actor::Agent(id) => crate::Actor::Agent(id.clone()),
        wire::Actor::System => crate::Actor::System,
    }
}

impl Session {
    /// Runs a rewind; spec refusals and runtime failures are answers, not errors.
    pub async fn rewind(
        &self,
        request: &wire::RewindRequest,
    ) -> Result<wire::RewindResponse, DriverFailure> {
        refuse_nul(request)?;
        let command = RewindCommand {
            actor: actor(&request.actor),
            scope_id: request.scope_id.clone(),
            target_message_id: request.target_message_id.clone(),
        };
        match self.rewinder.rewind(&command).await {
            Ok(outcome) => Ok(wire::RewindResponse::Completed {
                operation_id: outcome.operation_id,
                status: outcome.status.as_str().to_owned(),
                rewound_message_ids: outcome.rewound_message_ids,
            }),
            Err(err @ RewindError::Refused { .. })
            | Err(err @ RewindError::RuntimeRestoreFailed { .. })
            | Err(err @ RewindError::RepairRequired { .. }) => Ok(wire::RewindResponse::Refused {
                code: err.code_for(self.rewinder.variant()).to_owned(),
                message: err.answer_message(self.rewinder.variant()),
                operation_id: err.operation_id().map(str::to_owned),
            }),
            Err(other) => Err(failure("internal", other)),
        }
    }

    /// Appends a message in live mode.
    pub async fn send_message(
        &self,
        message: &wire::SendMessage,
    ) -> Result<wire::SentMessage, DriverFailure> {
        refuse_nul(message)?;
        let author = match &message.actor {
            wire::Actor::Human(id) => Author::Human(id.clone()),
            wire::Actor::Agent(id) => Author::Agent(id.clone()),
            wire::Actor::System => Author::System,
        };
        // The mentions live in the message's metadata, where a delivery reads them.
        let metadata = if message.mentions.is_empty() {
            serde_json::json!({})
        } else {
            serde_json::json!({ "mentions": message.mentions })
        };
        let new = NewMessage {
            scope_id: message.scope_id.clone(),
            author,
            content: message.content.clone(),
            client_message_id: None,
            metadata,
            fanout: true,
        };
        // The check and the post on one connection: handing one back and asking for the next
        // at once would open another.
        let mut conn = self.connection().await?;
        self.check_author_and_scope(&mut conn, &message.actor, &message.scope_id)
            .await?;
        match self.rewinder.post_message(&mut conn, &new).await {
            Ok(Some(posted)) => Ok(wire::SentMessage {
                message_id: posted.id,
                seq: posted.seq,
            }),
            // No client message id is sent, so nothing but an archived scope refuses it.
            Ok(None) => Err(failure(
                "bad_request",
                format!(
                    "scope `{}` is archived: it takes no messages",
                    message.scope_id
                ),
            )),
            Err(e) => Err(failure("internal", e)),
        }
    }

    /// A live message needs a scope to go to and an author that exists: anything else is a
    /// `bad_request`, answered before anything is written.
    async fn check_author_and_scope(
        &self,
        conn: &mut sqlx::PgConnection,
        actor: &wire::Actor,
        scope_id: &str,
    ) -> Result<(), DriverFailure> {
        let (author_table, author) = match actor {
            wire::Actor::Human(id) => ("users", Some(id.as_str())),
            wire::Actor::Agent(id) => ("agents", Some(id.as_str())),
            wire::Actor::System => ("users", None),
        };
        let sql = format!(
            "SELECT EXISTS (SELECT 1 FROM scopes WHERE id = $1), \
                    $2::text IS NULL OR EXISTS (SELECT 1 FROM {author_table} WHERE id = $2)"
        );
        let (scope, author_known): (bool, bool) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(scope_id)
            .bind(author)
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| failure("internal", format!("checking the message's scope: {e}")))?;
        if !scope {
            return Err(failure(
                "bad_request",
                format!("no scope `{scope_id}` to send to"),
            ));
        }
        if !author_known {
            return Err(failure(
                "bad_request",
                format!(
                    "no {} `{}` to write the message",
                    if author_table == "users" {
                        "human"
                    } else {
                        "agent"
                    },
                    author.unwrap_or_default()
                ),
            ));
        }
        Ok(())
    }

    /// A connection of the session's pool, for a request's statements to share.
    async fn connection(&self) -> Result<PoolConnection<Postgres>, DriverFailure> {
        self.pool
            .acquire()
            .await
            .map_err(|e| failure("internal", format!("acquiring a connection: {e}")))
    }

    /// Delivers a message to the agent runtimes it reaches, as the daemon would, and waits
    /// for every delivery. A runtime failure is a `failed` delivery of the report; an unknown
    /// message is a `bad_request`.
    pub async fn deliver(
        &self,
        request: &wire::DeliverRequest,
    ) -> Result<wire::DeliveryReport, DriverFailure> {
        refuse_nul(request)?;
        match self.rewinder.deliver(&request.message_id).await {
            Ok(deliveries) => Ok(wire::DeliveryReport {
                deliveries: deliveries
                    .into_iter()
                    .map(|d| wire::Delivery {
                        agent_id: d.agent_id,
                        outcome: match d.outcome {
                            delivery::Outcome::Delivered => wire::DeliveryOutcome::Delivered,
                            delivery::Outcome::Failed => wire::DeliveryOutcome::Failed,
                        },
                        reply_message_id: d.reply_message_id,
                        detail: d.detail,
                    })
                    .collect(),
            }),
            Err(err @ delivery::DeliverError::UnknownMessage(_)) => {
                Err(failure("bad_request", err))
            }
            Err(err) => Err(failure("internal", err)),
        }
    }

    /// Prunes recovery points as the GC would.
    pub async fn prune_recovery_points(
        &self,
        request: &wire::PruneRequest,
    ) -> Result<wire::PrunedPoints, DriverFailure> {
        refuse_nul(request)?;
        let pruned = crate::gc::prune_recovery_points(
            &self.pool,
            &crate::gc::PrunePolicy::Agent(request.agent_id.clone()),
        )
        .await
        .map_err(|e| failure("internal", e))?;
        Ok(wire::PrunedPoints {
            pruned_ids: pruned.into_iter().map(|p| p.id).collect(),
        })
    }

    /// A member's read state (`None`: not a member).
    pub async fn read_state(
        &self,
        scope_id: &str,
        user_id: &str,
    ) -> Result<wire::ReadStateAnswer, DriverFailure> {
        refuse_nul(&serde_json::json!({ "scopeId": scope_id, "userId": user_id }))?;
        let state = crate::reads::read_state(&self.pool, scope_id, user_id)
            .await
            .map_err(|e| failure("internal", e))?;
        Ok(wire::ReadStateAnswer {
            read_state: state.map(|s| wire::ReadState {
                last_read_seq: s.last_read_seq,
                visible_tail_seq: s.visible_tail_seq,
                unread_count: s.unread_count,
            }),
        })
    }

    /// A page of message sync.
    pub async fn sync_messages(
        &self,
        request: &wire::SyncRequest,
    ) -> Result<wire::SyncPage, DriverFailure> {
        refuse_nul(request)?;
        let mut conn = self.connection().await?;
        let member = crate::reads::is_member(&mut conn, &request.scope_id, &request.user_id)
            .await
            .map_err(|e| failure("internal", e))?;
        if !member {
            return Err(failure(
                "bad_request",
                format!(
                    "human `{}` is not a member of scope `{}`: message sync serves members only",
                    request.user_id, request.scope_id
                ),
            ));
        }
        let page = crate::reads::sync_messages(
            &mut conn,
            &request.scope_id,
            request.after_seq,
            request.limit,
        )
        .await
        .map_err(|e| failure("internal", e))?;
        Ok(wire::SyncPage {
            messages: page
                .messages
                .into_iter()
                .map(|m| wire::SyncedMessage {
                    id: m.id,
                    seq: m.seq,
                    content: m.content,
                })
                .collect(),
            has_more: page.has_more,
        })
    }

    /// One read through one read surface.
    pub async fn read(
        &self,
        request: &wire::ReadRequest,
    ) -> Result<wire::ReadAnswer, DriverFailure> {
        refuse_nul(request)?;
        crate::surfaces::read(&self.pool, request)
            .await
            .map_err(|e| failure("internal", e))
    }

    /// The realtime events published since the last take.
    pub fn take_events(&self) -> wire::EventBatch {
        wire::EventBatch {
            events: self
                .sink
                .take()
                .into_iter()
                .map(|e| wire::RealtimeEvent {
                    name: e.name,
                    scope_id: e.scope_id,
                    payload: e.payload,
                })
                .collect(),
        }
    }

    /// Closes the session's connections.
    pub async fn detach(&self) {
        self.pool.close().await;
    }
}
