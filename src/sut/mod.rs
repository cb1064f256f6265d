//! The system-under-test contract: [`SystemUnderTest`] makes a [`ConversationApi`] per scenario.
//!
//! The spec's tables are normative, so the database is shared: the harness seeds fixture state
//! into a scenario's database and inspects it afterwards, and the implementation under test works
//! on that same database. Everything else goes through these two traits. Steps never name a
//! concrete implementation; adapters live in submodules ([`reference`] in process).

pub mod reference;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::postgres::ScenarioDatabase;

/// Who asks for a rewind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum Actor {
    /// A human (`users.id`).
    Human(String),
    /// An agent (`agents.id`).
    Agent(String),
    /// The system itself.
    System,
}

/// A rewind request: `actor` returns `scope_id` to before `target_message_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewindRequest {
    /// The initiator.
    pub actor: Actor,
    /// The scope of the target.
    pub scope_id: String,
    /// The first message to rewind.
    pub target_message_id: String,
}

/// What the implementation answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RewindResponse {
    /// The rewind completed.
    Completed {
        /// The durable operation id.
        #[serde(rename = "operationId")]
        operation_id: String,
        /// The operation status reported (should be `completed`).
        status: String,
        /// The tombstoned ids, if the implementation reports them.
        #[serde(rename = "rewoundMessageIds", default)]
        rewound_message_ids: Vec<String>,
    },
    /// The rewind was refused.
    Refused {
        /// The stable machine code.
        code: String,
        /// The human-readable message (section 9 wording where the spec has one).
        message: String,
        /// The operation that recorded the failure, if one was created.
        #[serde(rename = "operationId", default)]
        operation_id: Option<String>,
    },
}

/// A message to append in live mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessage {
    /// The author (a human or an agent).
    pub actor: Actor,
    /// The scope to append to.
    pub scope_id: String,
    /// The content.
    pub content: String,
}

/// Where a sent message landed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SentMessage {
    /// The new `scope_messages.id`.
    pub message_id: String,
    /// Its scope-local seq.
    pub seq: i64,
}

/// A realtime event the implementation published.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RealtimeEvent {
    /// The event name (`conversation:rewound`, `message.created`).
    pub name: String,
    /// The scope it was published to.
    pub scope_id: String,
    /// Its payload.
    pub payload: serde_json::Value,
}

/// How an implementation reaches the (mock) agent runtimes of a scenario: the programs a
/// daemon spawns and the server it calls, with the environment that points them at the
/// scenario's runtime state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeEndpoints {
    /// The `codex` program (started as `codex app-server`).
    pub codex_program: std::path::PathBuf,
    /// Its arguments (`["app-server"]`).
    pub codex_args: Vec<String>,
    /// Its environment (`CODEX_HOME`).
    pub codex_env: Vec<(String, String)>,
    /// The `claude` program.
    pub claude_program: std::path::PathBuf,
    /// Its environment (`CLAUDE_CONFIG_DIR`).
    pub claude_env: Vec<(String, String)>,
    /// The working directory the claude sessions belong to.
    pub claude_cwd: std::path::PathBuf,
    /// The OpenCode server's base URL (also serves `builtin`).
    pub opencode_url: String,
}

/// Which recovery points to prune (the runtime/GC side of the recovery point lifecycle).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneRequest {
    /// Prune every recovery point of this agent.
    pub agent_id: String,
}

/// A member's read position as the read API reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadState {
    /// The derived read cursor (a scope seq).
    pub last_read_seq: i64,
    /// The seq of the scope's last visible message.
    pub visible_tail_seq: i64,
    /// The member's ordinary unread count.
    pub unread_count: i64,
}

/// A message-sync request: visible messages of a scope after a seq, as a member sees them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncRequest {
    /// The reader (a member human).
    pub user_id: String,
    /// The scope.
    pub scope_id: String,
    /// The cursor: messages with a greater seq.
    pub after_seq: i64,
    /// At most this many messages.
    pub limit: i64,
}

/// One synced message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncedMessage {
    /// The message id.
    pub id: String,
    /// Its seq.
    pub seq: i64,
    /// Its content as synced.
    pub content: String,
}

/// A page of message sync.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncPage {
    /// The messages, in seq order.
    pub messages: Vec<SyncedMessage>,
    /// Whether more follow.
    pub has_more: bool,
}

/// What an implementation declares it supports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityProfile {
    /// Runtime ids the implementation can restore (`codex`, `claude`, `opencode`, `builtin`).
    pub runtimes: Vec<String>,
    /// Optional surfaces the implementation exposes.
    pub surfaces: Vec<String>,
}

/// A failure of the harness/implementation plumbing, as opposed to a conformance outcome.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SutError {
    /// The implementation could not be attached to the scenario database.
    #[error("cannot attach `{sut}` to database `{database}`: {detail}")]
    Attach {
        /// The implementation's name.
        sut: String,
        /// The scenario database.
        database: String,
        /// What went wrong.
        detail: String,
    },
    /// The implementation failed in a way the contract does not allow (not a spec refusal).
    #[error("`{sut}` failed outside the contract: {detail}")]
    Internal {
        /// The implementation's name.
        sut: String,
        /// What went wrong.
        detail: String,
    },
}

/// A factory for per-scenario handles on one implementation.
#[async_trait]
pub trait SystemUnderTest: Send + Sync {
    /// A short name for reports.
    fn name(&self) -> &str;

    /// What the implementation supports.
    fn profile(&self) -> CapabilityProfile;

    /// Points the implementation at one scenario's database and mock runtimes.
    async fn attach(
        &self,
        db: &ScenarioDatabase,
        runtimes: &RuntimeEndpoints,
    ) -> Result<Box<dyn ConversationApi>, SutError>;
}

/// The operations a scenario drives. Implementations must answer a spec refusal with
/// [`RewindResponse::Refused`] (not an error) and leave the database unchanged when they do.
#[async_trait]
pub trait ConversationApi: Send + Sync {
    /// Asks for a rewind.
    async fn rewind(&self, request: &RewindRequest) -> Result<RewindResponse, SutError>;

    /// Appends a message in live mode (publishing its `message.created`).
    async fn send_message(&self, message: &SendMessage) -> Result<SentMessage, SutError>;

    /// Prunes recovery points as the server's GC would; returns the pruned point ids.
    async fn prune_recovery_points(&self, request: &PruneRequest) -> Result<Vec<String>, SutError>;

    /// The read state of human `user_id` in `scope_id` (`None`: not a member).
    async fn read_state(
        &self,
        scope_id: &str,
        user_id: &str,
    ) -> Result<Option<ReadState>, SutError>;

    /// A page of message sync.
    async fn sync_messages(&self, request: &SyncRequest) -> Result<SyncPage, SutError>;

    /// Takes the realtime events published since the last call, in publication order.
    async fn take_events(&self) -> Result<Vec<RealtimeEvent>, SutError>;

    /// Releases what the handle holds (connections); called at the end of each scenario.
    async fn detach(&self);
}
