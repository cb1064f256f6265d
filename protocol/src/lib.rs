//! `rewind-driver-protocol`: the wire types of the rewind conformance driver protocol, version
//! [`VERSION`], and the OpenAPI document ([`schema`]) every message is validated against.
//!
//! The harness drives an implementation of the Rewind spec through these types: in process for
//! the reference implementation, over HTTP+JSON for everyone else. The OpenAPI document
//! `driver-v1.openapi.json` beside this crate is the contract implementers read; a test checks
//! that the schemas these types generate are exactly the document's components, so neither can
//! change without the other.
//!
//! One exchange, as the harness sends it and a conforming server answers it:
//!
//! ```text
//! POST /v1/sessions/s-1/rewind
//! {"actor":{"kind":"human","id":"alice"},"scopeId":"dm-1","targetMessageId":"m-3"}
//!
//! 200 OK
//! {"outcome":"refused","code":"other_human_message",
//!  "message":"rewind is blocked because another human sent a later message"}
//! ```

pub mod schema;

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The protocol's name, as the handshake reports it.
pub const PROTOCOL: &str = "rewind-driver";

/// The protocol version these types describe.
pub const VERSION: u32 = 1;

/// The handshake path, outside any versioned prefix so that every version answers it.
pub const HANDSHAKE_PATH: &str = "/rewind-driver";

/// The answer to `GET /rewind-driver`: which protocol and version the server speaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Handshake {
    /// Always `rewind-driver`.
    pub protocol: String,
    /// The protocol version the server speaks (this document describes version 1).
    pub version: u32,
    /// The implementation behind the server, for reports.
    pub implementation: Implementation,
}

/// Names the implementation behind a driver server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Implementation {
    /// A short name (`reference`, `acme-chat`).
    pub name: String,
    /// Its version, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// `POST /v1/sessions`: points the implementation at one scenario's database and mock runtimes.
///
/// What the harness guarantees about them, and what it does not, is part of the contract
/// (IMPLEMENTING.md, "What the harness guarantees, and what it does not"): the database is the
/// session's own, migrated and seeded, but the harness itself may write to it between calls; the
/// runtime endpoints reach the agents' existing sessions, under faults a scenario may plant; the
/// OpenCode server is not guaranteed to be context-only; the limits bound every restore and
/// every call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttachRequest {
    /// The scenario's database, already migrated to the spec schema and seeded.
    pub database: DatabaseTarget,
    /// Where the scenario's (mock) agent runtimes are, valid for this session only (a re-attach
    /// hands over new ones).
    pub runtimes: RuntimeEndpoints,
    /// Time budgets: each runtime restore must give up within `restoreTimeoutMs`, so that every
    /// answer arrives within `requestTimeoutMs`.
    pub limits: Limits,
}

/// A PostgreSQL database the implementation works on for the whole session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DatabaseTarget {
    /// A `postgres://` URL with credentials that may read and write every spec table.
    pub url: String,
    /// The database name (also in the URL), for logs.
    pub name: String,
}

/// Time budgets handed to the implementation, from the harness's `--restore-timeout-ms` and
/// `--request-timeout` options (the same values whichever way the implementation is driven).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Limits {
    /// The budget of each agent's restore: how long one agent's native restore (process start,
    /// calls and verifying read-back) may take before the implementation gives up on it, stops
    /// it, and fails the rewind. A planted hang fault never answers: only this limit ends the
    /// call. `--restore-timeout-ms`, 5000 by default. The harness does not time restores: it
    /// judges that every rewind answers within `requestTimeoutMs` and that a restore delayed by
    /// 1500 ms succeeds, so bounding each runtime call instead passes too. A scenario that holds
    /// a restore on purpose while other rewinds race attaches with at least 25000 here, longer
    /// than any hold the harness waits out: keeping to the limit outlasts the hold.
    pub restore_timeout_ms: u64,
    /// The harness's per-request time-out: how long it waits for the complete answer to any one
    /// call before it fails the scenario (`--request-timeout` in seconds, times 1000; 30000 by
    /// default). A rewind step gives up 5 s after it. Every restore of a rewind, bounded by
    /// `restoreTimeoutMs`, plus the rest of the operation must fit inside it.
    pub request_timeout_ms: u64,
}

/// The answer to an attach: the session the scenario's calls name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Session {
    /// An opaque id, unique among the server's open sessions.
    pub session_id: String,
}

/// How an implementation reaches the (mock) agent runtimes of a scenario: the programs a daemon
/// spawns and the server it calls, with the environment that points them at the scenario's
/// runtime state. The programs are on the harness's machine: the server must run there too.
///
/// The agents' sessions named by the fixture's recovery points already exist behind these
/// endpoints; an agent without `runtime_session_id` has none yet, and its first delivery makes
/// one. Nothing is running for the implementation except the OpenCode server; no call may be
/// made at attach. The environments carry `REWIND_MOCK_WITNESS_URL`, which the mocks call while
/// they hold a delivering input: pass every variable on. Any call may meet a fault a scenario planted (an error, a hang, a
/// "success" without effect, an unknown session, a busy session, a crash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimeEndpoints {
    /// The `codex` program. Started with `codexArgs` (`codex app-server`) and `codexEnv`, it
    /// serves the Codex app-server JSON-RPC over stdin/stdout. No app-server is running: the
    /// implementation starts its own for each restore and each delivery and stops it afterwards. Each spawn is a
    /// fresh process that reads the threads from `CODEX_HOME`; the threads are the agents'
    /// existing sessions (the `threadId` of each codex recovery point). The release is not
    /// guaranteed: a scenario may hand over one without `thread/rollback`.
    pub codex_program: PathBuf,
    /// Its arguments (`["app-server"]`).
    pub codex_args: Vec<String>,
    /// Environment variables to add for it, every one (`CODEX_HOME`, sometimes
    /// `REWIND_MOCK_CODEX_VERSION`).
    pub codex_env: BTreeMap<String, String>,
    /// The `claude` program: the Claude Code CLI, one process per run (stream-json). The harness
    /// does not prescribe how a session is restored with it; note that a real CLI applies
    /// `--resume-session-at` only together with a following prompt.
    pub claude_program: PathBuf,
    /// Environment variables to add for it, every one (`CLAUDE_CONFIG_DIR`: the agents' session
    /// transcripts live under that config dir, in `projects/<slug of claudeCwd>/`).
    pub claude_env: BTreeMap<String, String>,
    /// The working directory the claude sessions belong to: run `claude` there.
    pub claude_cwd: PathBuf,
    /// The base URL of an OpenCode server that is already running, started by the harness (not
    /// by the implementation); it also serves `builtin` agents. It is NOT guaranteed to be
    /// context-only: a scenario may hand over a server that keeps file snapshots (`GET /config`
    /// shows `"snapshot": true`). Spec section 5 makes AgentTeam-managed OpenCode context-only
    /// and the implementation plays AgentTeam's part, so before any revert through this server
    /// it must make sure the server is context-only (`"snapshot": false`) and otherwise refuse
    /// the rewind without any `revert` call. A closed port (`http://127.0.0.1:9`) when the
    /// fixture has no OpenCode or builtin agent.
    pub opencode_url: String,
}

/// Who asks for a rewind or sends a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "kind",
    content = "id",
    rename_all = "snake_case",
    deny_unknown_fields
)]
pub enum Actor {
    /// A human (`users.id`).
    Human(String),
    /// An agent (`agents.id`).
    Agent(String),
    /// The system itself (no id).
    System,
}

/// `POST /v1/sessions/{sessionId}/rewind`: `actor` returns `scopeId` to before
/// `targetMessageId`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RewindRequest {
    /// The initiator.
    pub actor: Actor,
    /// The scope to rewind (the target's own scope unless a scenario says otherwise).
    pub scope_id: String,
    /// The first message to rewind.
    pub target_message_id: String,
}

/// What the implementation answered a rewind with. A spec refusal is an answer, not an error:
/// it comes back with status 200.
///
/// A spec refusal is identified by its section 9 message; its `code` is the implementation's
/// own. The rule catalog's codes (`features/rules.yaml`) are the reference's, recommended but
/// not required.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
pub enum RewindResponse {
    /// The rewind completed.
    Completed {
        /// The durable operation id (`rewind_operations.id`).
        #[serde(rename = "operationId")]
        operation_id: String,
        /// The operation status (`completed`).
        status: String,
        /// The tombstoned ids, if the implementation reports them (spec section 8 allows it).
        #[serde(rename = "rewoundMessageIds", default)]
        rewound_message_ids: Vec<String>,
    },
    /// The rewind was refused or failed.
    Refused {
        /// A stable machine code for the refusal, free-form. The harness checks codes for
        /// consistency within a run: one code per section 9 message, distinct messages distinct
        /// codes, and no refusal outside section 9 with the code of a section 9 one. A capability
        /// profile that declares `errorCodes` (catalog rule id `err.*` to code) makes those
        /// codes required.
        code: String,
        /// The human-readable message: section 9's exact text where the spec words the refusal
        /// (it identifies the refusal). A failed runtime restore has no section 9 text: any
        /// message passes except one of section 9's messages for another cause (not own
        /// message, system message, hot/cold boundary, other human, later reply thread, drift,
        /// rewind in progress).
        message: String,
        /// The durable operation that recorded the failure, if one was created. Optional: `null`
        /// is read exactly as an absent field. A string must name a `rewind_operations` row:
        /// after a failed runtime restore the one recorded `failed` or `repair_required`;
        /// otherwise this refusal's own `failed` row or an operation that already existed (e.g.
        /// the `preparing` one that refused it).
        #[serde(
            rename = "operationId",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        operation_id: Option<String>,
    },
}

/// `POST /v1/sessions/{sessionId}/messages`: a message appended in live mode, published with
/// its `message.created` event (whose payload no check reads).
///
/// The harness sends human members of live scopes. A scope or an author that does not exist, or
/// content that cannot be stored (a NUL character), is a `400 bad_request`; the harness sends
/// those only with bad input, where any 4xx `DriverError` passes. It never sends an archived
/// scope, a non-member author or a system author: what they get is not judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SendMessage {
    /// The author: a human or an agent. The `Actor` schema is shared with rewinds and admits
    /// `system`, but the harness never sends a system author (its scenarios send humans).
    pub actor: Actor,
    /// The scope to append to.
    pub scope_id: String,
    /// The content.
    pub content: String,
    /// The agents a channel message mentions (`agents.id`): in a channel, a human message
    /// reaches only the agents it mentions. Ignored in a DM or a reply thread, where a human
    /// message reaches every agent member. Empty when omitted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<String>,
}

/// Where a sent message landed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SentMessage {
    /// The new `scope_messages.id`.
    pub message_id: String,
    /// Its scope-local seq.
    pub seq: i64,
}

/// `POST /v1/sessions/{sessionId}/deliveries`: deliver a message to the agent runtimes it
/// reaches, now, the way the implementation's daemon would, and wait until every delivery has
/// finished (answered, or failed).
///
/// A visible human message reaches the agent members of its DM or reply thread, and in a
/// channel the agent members it mentions ([`SendMessage::mentions`]). For each agent it
/// reaches that has not been delivered the message yet, one after another in `agents.id`
/// order: when the agent's runtime is rewind-capable, the implementation commits the
/// `message_recovery_points` row of (message, agent) holding the runtime's state before this
/// input, and only then hands the input to the runtime (a codex turn through `codex
/// app-server`, a claude run of the CLI, an OpenCode prompt); the input text contains the
/// message content verbatim. The runtime's answer, when it has text, is posted verbatim as a
/// message of the agent in the same scope (with its `message.created`); an answer without
/// text posts nothing. Nothing else is delivered: not a system message, not the rewind notice
/// (section 8: it never wakes an agent), not a rewound message, not a message twice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeliverRequest {
    /// The message to deliver (`scope_messages.id`).
    pub message_id: String,
}

/// What a delivery request did: one entry per agent the message was handed to (none when it
/// reached no agent, or every one had been delivered it already).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeliveryReport {
    /// The deliveries, in the order they were made.
    pub deliveries: Vec<Delivery>,
}

/// One delivery of a message to one agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Delivery {
    /// The agent (`agents.id`).
    pub agent_id: String,
    /// `delivered` (the runtime answered) or `failed` (the runtime failed, crashed, or did not
    /// answer in time; nothing was posted).
    pub outcome: DeliveryOutcome,
    /// The agent message that carries the answer, when one was posted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_message_id: Option<String>,
    /// What went wrong, for a failed delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// How a delivery ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryOutcome {
    /// The runtime took the input and answered.
    Delivered,
    /// The runtime failed the delivery.
    Failed,
}

/// `POST /v1/sessions/{sessionId}/recovery-points/prune`: prune recovery points as the server's
/// GC would (never touching a runtime).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PruneRequest {
    /// Prune every recovery point of this agent.
    pub agent_id: String,
}

/// The recovery points a prune removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrunedPoints {
    /// The removed `message_recovery_points.id` values.
    pub pruned_ids: Vec<String>,
}

/// `GET /v1/sessions/{sessionId}/read-state?scopeId=..&userId=..`: a member's read position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadStateAnswer {
    /// The read state, or `null` when the user is not a member of the scope (required).
    #[schemars(required, schema_with = "nullable_read_state")]
    pub read_state: Option<ReadState>,
}

/// `ReadState` or `null`: the field must be present either way.
fn nullable_read_state(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let state = generator.subschema_for::<ReadState>();
    schemars::json_schema!({ "anyOf": [state, { "type": "null" }] })
}

/// A member's read position as the read API reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadState {
    /// The derived read cursor (a scope seq).
    pub last_read_seq: i64,
    /// The seq of the scope's last visible message.
    pub visible_tail_seq: i64,
    /// The member's ordinary unread count.
    pub unread_count: i64,
}

/// `POST /v1/sessions/{sessionId}/sync`: visible messages of a scope after a seq, as a member
/// sees them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SyncRequest {
    /// The reader, a human. The scenarios sync as members (a `scope_memberships` row); what a
    /// non-member or an unknown scope gets is defined neither by the spec nor by the protocol:
    /// a 4xx `DriverError` (recommended: `400 bad_request`) and a page that changes nothing both
    /// pass.
    pub user_id: String,
    /// The scope.
    pub scope_id: String,
    /// The cursor: messages with a greater seq.
    pub after_seq: i64,
    /// At most this many messages.
    pub limit: i64,
}

/// One synced message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SyncedMessage {
    /// The message id.
    pub id: String,
    /// Its seq.
    pub seq: i64,
    /// Its content as synced.
    pub content: String,
}

/// A page of message sync.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SyncPage {
    /// The messages, in seq order.
    pub messages: Vec<SyncedMessage>,
    /// Whether more follow.
    pub has_more: bool,
}

/// `POST /v1/sessions/{sessionId}/read`: one read through one of the spec's read surfaces, as
/// `reader` would make it through the implementation's own API (spec 1 and 6.1.1).
///
/// Every surface answers with the messages it shows. A rewound message does not exist for any of
/// them: it is never shown, and reading it by id is `not_found`, exactly like an id that never
/// existed. A recalled message stays a placeholder (`recalled: true`) where the surface shows
/// placeholders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadRequest {
    /// Which surface to read.
    pub surface: ReadSurface,
    /// Who reads: a human or an agent, a member of `scopeId` (a `scope_memberships` row of it).
    /// A reader who is a member of nothing there is `rejected` as `not_member`; whether a
    /// private grant or a membership of a thread's parent scope also lets one read is open and
    /// not judged. The harness reads as humans, never as the system.
    pub reader: Actor,
    /// The scope read (for a message or attachment read, the scope it belongs to).
    pub scope_id: String,
    /// The message, for `message`, `reactions`, `source-context`, `diagnostics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// The attachment, for `attachment` and `attachment-download`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment_id: Option<String>,
    /// The search text, for `search`: a message matches when its content holds every word,
    /// ignoring case (whole words or substrings: both pass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Where a paged surface (`history`, `stream`) resumes: a `nextCursor` this implementation
    /// returned earlier, or absent for the first page. Opaque to the harness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// The page size of a paged surface, 1 or more; the implementation's default when absent.
    /// On `history` it counts messages; on `stream`, events or the messages they are about
    /// (either passes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
}

/// The read surfaces of spec section 1, each as a user or agent meets it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ReadSurface {
    /// The scope's transcript, oldest first, paged (`cursor`, `limit`); recalled messages as
    /// placeholders.
    History,
    /// One message by id (`messageId`).
    Message,
    /// The scope's messages whose content holds every word of `query`, ignoring case, from the
    /// transcript or from search documents checked against it.
    Search,
    /// What the reader receives: visible messages after the reader's read position (its own
    /// `last_read_seq` in the scope) that someone else wrote, as a daemon fetches them for an
    /// agent.
    Receive,
    /// The root message of a reply-thread scope (empty for other scopes).
    RootContext,
    /// The messages that message `messageId` cites (its sources); `not_found` when the citing
    /// message itself is not there.
    SourceContext,
    /// The share cards shown in the scope (those shared into it: `target_scope_id` is the
    /// scope), with their action state.
    ShareCards,
    /// The scope's pinned messages.
    Pins,
    /// The reactions on message `messageId`.
    Reactions,
    /// The read-check of attachment `attachmentId`: may the reader see it, and what it is. A
    /// message attachment exists only while its message is readable.
    Attachment,
    /// The download of attachment `attachmentId`, judged like the read-check; what it serves
    /// goes in its record.
    AttachmentDownload,
    /// The delivery diagnostics of message `messageId`.
    Diagnostics,
    /// The scope's diagnostics preview: its newest messages with their delivery state (without
    /// a `limit`, 20 or more is recommended).
    DiagnosticsPreview,
    /// The durable stream replay of the scope, oldest first, paged (`cursor`, `limit`).
    Stream,
    /// The reader's conversation-index entry for the scope (its last message and preview),
    /// derived from the transcript: its last message is the scope's visible tail.
    ConversationIndex,
}

impl ReadSurface {
    /// Every surface, in the order above.
    pub const ALL: [ReadSurface; 15] = [
        ReadSurface::History,
        ReadSurface::Message,
        ReadSurface::Search,
        ReadSurface::Receive,
        ReadSurface::RootContext,
        ReadSurface::SourceContext,
        ReadSurface::ShareCards,
        ReadSurface::Pins,
        ReadSurface::Reactions,
        ReadSurface::Attachment,
        ReadSurface::AttachmentDownload,
        ReadSurface::Diagnostics,
        ReadSurface::DiagnosticsPreview,
        ReadSurface::Stream,
        ReadSurface::ConversationIndex,
    ];

    /// Its name on the wire (`root-context`).
    pub const fn name(self) -> &'static str {
        match self {
            ReadSurface::History => "history",
            ReadSurface::Message => "message",
            ReadSurface::Search => "search",
            ReadSurface::Receive => "receive",
            ReadSurface::RootContext => "root-context",
            ReadSurface::SourceContext => "source-context",
            ReadSurface::ShareCards => "share-cards",
            ReadSurface::Pins => "pins",
            ReadSurface::Reactions => "reactions",
            ReadSurface::Attachment => "attachment",
            ReadSurface::AttachmentDownload => "attachment-download",
            ReadSurface::Diagnostics => "diagnostics",
            ReadSurface::DiagnosticsPreview => "diagnostics-preview",
            ReadSurface::Stream => "stream",
            ReadSurface::ConversationIndex => "conversation-index",
        }
    }

    /// The surface named `name` on the wire.
    pub fn from_name(name: &str) -> Option<ReadSurface> {
        ReadSurface::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// What a read answered. Not finding a message or attachment, and refusing a bad read, are
/// answers (status 200), not errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
pub enum ReadAnswer {
    /// The surface answered.
    Found {
        /// Every message the answer shows, in the surface's order: the transcript's messages,
        /// the hits, the cited or root message, the message a card, reaction, attachment,
        /// diagnostic, stream event or index entry is about. A message shown twice is listed
        /// once.
        messages: Vec<ReadMessage>,
        /// What the surface shows besides messages (cards with their action state, reactions,
        /// attachment metadata, deliveries, stream events, the index entry), one JSON object
        /// each, in the implementation's own shape. A record about a message names it in a
        /// `messageId` field.
        records: Vec<serde_json::Value>,
        /// The cursor of the next page (paged surfaces), or `null` when nothing follows
        /// (required).
        #[schemars(required, schema_with = "nullable_string")]
        #[serde(rename = "nextCursor")]
        next_cursor: Option<String>,
    },
    /// The message or attachment read does not exist for this reader: it never existed, or it
    /// was rewound (the two are indistinguishable), or its message was.
    NotFound {
        /// What was not found, for people.
        message: String,
    },
    /// The read itself is wrong.
    Rejected {
        /// Why.
        reason: ReadRejection,
        /// What is wrong, naming the value, for people.
        message: String,
    },
}

/// `string` or `null`: the field must be present either way.
fn nullable_string(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": ["string", "null"] })
}

/// Why a read was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReadRejection {
    /// `scopeId` names no scope (it comes before `not_member`).
    UnknownScope,
    /// The reader is not a member of the scope.
    NotMember,
    /// `cursor` is not a cursor this implementation returned.
    BadCursor,
    /// A field the surface needs is missing, or a value is out of range.
    BadRequest,
}

/// A message as a read surface shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadMessage {
    /// The message id.
    pub id: String,
    /// Its scope.
    pub scope_id: String,
    /// Its seq in that scope.
    pub seq: i64,
    /// Its content as shown (a recalled placeholder may show none).
    pub content: String,
    /// Whether it is a recalled placeholder.
    pub recalled: bool,
}

/// A realtime event the implementation published.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RealtimeEvent {
    /// The event name (`conversation:rewound`, `message.created`).
    pub name: String,
    /// The scope it was published to.
    pub scope_id: String,
    /// Its payload, exactly as published, in the implementation's own shape. The rewind
    /// notice's `message.created` is recognised by the notice's message id, or its client
    /// message id `rewind-notice:<operationId>`, appearing in it as a JSON string.
    pub payload: serde_json::Value,
}

/// `POST /v1/sessions/{sessionId}/events/take`: the realtime events published since the last
/// take, in publication order; taking them removes them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventBatch {
    /// The events.
    pub events: Vec<RealtimeEvent>,
}

/// The body of every non-2xx answer: something other than a spec refusal went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DriverError {
    /// What went wrong.
    pub error: ErrorBody,
}

/// A driver-level error: a stable code and a message for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ErrorBody {
    /// One of `bad_request`, `unknown_session`, `database_unreachable`, `internal`, or an
    /// implementation's own code.
    pub code: String,
    /// What happened, for the person reading the report.
    pub message: String,
}

impl DriverError {
    /// An error with this code and message.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        DriverError {
            error: ErrorBody {
                code: code.into(),
                message: message.into(),
            },
        }
    }
}
