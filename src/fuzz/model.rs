//! [`CaseModel`]: a generated conversation state, valid by construction, as plain data close to
//! the fixture format (`fixtures/README.md`), with the rewind request and the case's [`Shape`].
//!
//! Every message carries its explicit `seq` and `global_seq`; every row its explicit keys. The
//! model says nothing about the expected outcome: an independent oracle derives that.

use rewind_driver_protocol::RewindRequest;
use serde_json::Value;

use super::recipe::GenConfig;
use super::shape::Shape;
use crate::fixtures::{ActivityStatus, AttachmentOwnerKind, OutboxStatus, ScopeKind};

/// One generated conversation state and the rewind asked of it.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseModel {
    /// The run's seed.
    pub seed: u64,
    /// The case's index in the run.
    pub index: u64,
    /// The workspace id.
    pub workspace: String,
    /// `users`.
    pub humans: Vec<HumanModel>,
    /// `machines`.
    pub machines: Vec<MachineModel>,
    /// `agents`.
    pub agents: Vec<AgentModel>,
    /// `scopes` with their members and messages, in file order (a reply thread after its
    /// parent scope).
    pub scopes: Vec<ScopeModel>,
    /// `scope_activity_events`.
    pub activity_events: Vec<ActivityRow>,
    /// `scope_fanout_outbox`.
    pub fanout_outbox: Vec<OutboxModelRow>,
    /// `scope_sync_dirty`.
    pub scope_sync_dirty: Vec<SyncDirtyRow>,
    /// `member_scope_sync_dirty`.
    pub member_scope_sync_dirty: Vec<MemberSyncDirtyRow>,
    /// `scope_share_cards`.
    pub share_cards: Vec<ShareCardRow>,
    /// `scope_message_reactions`.
    pub reactions: Vec<ReactionRow>,
    /// `scope_message_pins`.
    pub pins: Vec<PinRow>,
    /// `scope_message_top_notices`.
    pub top_notices: Vec<TopNoticeRow>,
    /// `scope_message_search_docs`.
    pub search_docs: Vec<SearchDocRow>,
    /// `scope_message_sources`.
    pub sources: Vec<SourceRow>,
    /// `attachments`.
    pub attachments: Vec<AttachmentRow>,
    /// `im_stream_events`.
    pub stream_events: Vec<StreamEventRow>,
    /// `im_conversation_index`.
    pub conversation_index: Vec<ConversationIndexModelRow>,
    /// `message_recovery_points`.
    pub recovery_points: Vec<RecoveryPointRow>,
    /// Mock-runtime state by agent id (`runtime_sessions`), in agent order.
    pub runtime_sessions: Vec<(String, Value)>,
    /// The rewind to ask for.
    pub request: RewindRequest,
    /// What the case is made of.
    pub shape: Shape,
    /// The size knobs it was generated with.
    pub config: GenConfig,
    /// The shrink walk from the case as drawn (empty: the case as drawn); see
    /// [`super::replay`].
    pub shrink_path: String,
}

impl CaseModel {
    /// Returns every message of every scope, scope by scope.
    pub fn messages(&self) -> impl Iterator<Item = &MessageModel> {
        self.scopes.iter().flat_map(|scope| scope.messages.iter())
    }

    /// Returns the message with this id.
    pub fn message(&self, id: &str) -> Option<&MessageModel> {
        self.messages().find(|message| message.id == id)
    }

    /// Returns the scope with this id.
    pub fn scope(&self, id: &str) -> Option<&ScopeModel> {
        self.scopes.iter().find(|scope| scope.id == id)
    }
}

/// A `users` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HumanModel {
    /// The user id.
    pub id: String,
    /// The display name.
    pub name: String,
}

/// A `machines` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineModel {
    /// The machine id.
    pub id: String,
    /// The machine name.
    pub name: String,
    /// Whether the machine is deleted.
    pub deleted: bool,
}

/// An `agents` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentModel {
    /// The agent id.
    pub id: String,
    /// The display name.
    pub name: String,
    /// The runtime id: `codex`, `claude`, `opencode`, `builtin` or an unsupported one.
    pub runtime: String,
    /// The machine it runs on.
    pub machine: String,
    /// The native thread or session id, when the agent has taken a turn.
    pub session: Option<String>,
    /// Whether the agent is deleted.
    pub deleted: bool,
}

/// A scope with its members and messages.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopeModel {
    /// The scope id.
    pub id: String,
    /// `dm`, `channel` or `reply_thread`.
    pub kind: ScopeKind,
    /// The scope name.
    pub name: String,
    /// A reply thread's parent scope and message.
    pub parent: Option<(String, String)>,
    /// Whether the scope is archived.
    pub archived: bool,
    /// `scope_memberships`.
    pub members: Vec<MemberModel>,
    /// `scope_messages`, in seq order.
    pub messages: Vec<MessageModel>,
}

/// Who a member, author, reactor or recipient is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum PartyModel {
    /// A human (`users.id`).
    Human(String),
    /// An agent (`agents.id`).
    Agent(String),
}

/// A `scope_memberships` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberModel {
    /// The member.
    pub party: PartyModel,
    /// `owner` or `member`.
    pub role: String,
    /// `last_read_seq`.
    pub last_read_seq: i64,
    /// `last_read_global_seq`.
    pub last_read_global_seq: i64,
    /// `owner_context_dismissed_through_global_seq`.
    pub owner_context_dismissed_through_global_seq: i64,
}

/// A message's author.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthorModel {
    /// A human.
    Human(String),
    /// An agent.
    Agent(String),
    /// `system`.
    System,
    /// `service`.
    Service,
    /// `app`.
    App,
}

/// A `scope_messages` row.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageModel {
    /// The message id.
    pub id: String,
    /// The scope-local seq.
    pub seq: i64,
    /// The workspace-wide seq.
    pub global_seq: i64,
    /// The author.
    pub author: AuthorModel,
    /// The text (empty for an earlier rewind's tombstone).
    pub content: String,
    /// Behind the archive boundary.
    pub cold: bool,
    /// `metadata` (`{}` when empty).
    pub metadata: Value,
    /// `client_message_id`.
    pub client_message_id: Option<String>,
}

impl MessageModel {
    /// Whether the message is an earlier rewind's tombstone.
    pub fn is_rewound(&self) -> bool {
        self.recall_status() == Some("rewound")
    }

    /// Whether the message is a recalled placeholder.
    pub fn is_recalled(&self) -> bool {
        self.recall_status() == Some("recalled")
    }

    fn recall_status(&self) -> Option<&str> {
        self.metadata
            .get("messageRecall")
            .and_then(|recall| recall.get("status"))
            .and_then(Value::as_str)
    }
}

/// A `scope_activity_events` row.
#[derive(Debug, Clone, PartialEq)]
pub struct ActivityRow {
    /// The message, or `None` for a scope-level event.
    pub message: Option<String>,
    /// The scope (always written for scope-level events).
    pub scope: Option<String>,
    /// The event kind.
    pub kind: String,
    /// The status.
    pub status: ActivityStatus,
    /// The payload.
    pub payload: Value,
}

/// A `scope_fanout_outbox` row.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxModelRow {
    /// The message delivered.
    pub message: String,
    /// The recipient.
    pub recipient: PartyModel,
    /// The status.
    pub status: OutboxStatus,
    /// The payload.
    pub payload: Value,
    /// `leased_until`, for leased rows.
    pub leased_until: Option<String>,
}

/// A `scope_sync_dirty` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncDirtyRow {
    /// The scope.
    pub scope: String,
    /// The message frontier (`None`: the format's default, the scope's `latest_seq`).
    pub latest_message_seq: Option<i64>,
    /// The non-message frontier.
    pub latest_activity_seq: i64,
}

/// A `member_scope_sync_dirty` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSyncDirtyRow {
    /// The scope.
    pub scope: String,
    /// The human.
    pub human: String,
    /// The message frontier (`None`: the scope's `latest_seq`).
    pub latest_message_seq: Option<i64>,
    /// The non-message frontier.
    pub latest_activity_seq: i64,
}

/// A `scope_share_cards` row.
#[derive(Debug, Clone, PartialEq)]
pub struct ShareCardRow {
    /// The card id.
    pub id: String,
    /// The shared message.
    pub message: String,
    /// The scope it was shared into.
    pub target_scope: String,
    /// The human who shared it.
    pub shared_by: String,
    /// The action state.
    pub action_state: Value,
}

/// A `scope_message_reactions` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReactionRow {
    /// The message.
    pub message: String,
    /// The reactor.
    pub reactor: PartyModel,
    /// The emoji.
    pub emoji: String,
}

/// A `scope_message_pins` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinRow {
    /// The message.
    pub message: String,
    /// The human who pinned it.
    pub pinned_by: String,
}

/// A `scope_message_top_notices` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopNoticeRow {
    /// The message.
    pub message: String,
    /// The human who set it.
    pub set_by: String,
}

/// A `scope_message_search_docs` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchDocRow {
    /// The message.
    pub message: String,
    /// An explicit body (`None`: the message content).
    pub body: Option<String>,
}

/// A `scope_message_sources` row: `message` cites `source_message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRow {
    /// The citing message.
    pub message: String,
    /// The cited message.
    pub source_message: String,
}

/// An `attachments` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentRow {
    /// The attachment id.
    pub id: String,
    /// The owner kind.
    pub owner: AttachmentOwnerKind,
    /// The owning message (owner `message`).
    pub message: Option<String>,
    /// The owning task (owner `task_discussion`).
    pub task: Option<String>,
    /// The scope (owners other than `message`).
    pub scope: Option<String>,
    /// The uploader.
    pub uploaded_by: Option<String>,
    /// The file name (a message attachment's carries the message's canary).
    pub file_name: String,
    /// The MIME type.
    pub content_type: String,
    /// The size.
    pub byte_size: i64,
}

/// An `im_stream_events` row.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEventRow {
    /// The message, or `None` for a scope-level event.
    pub message: Option<String>,
    /// The scope (written for scope-level events).
    pub scope: Option<String>,
    /// The event type.
    pub event_type: String,
    /// The payload.
    pub payload_json: Value,
}

/// An `im_conversation_index` row.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationIndexModelRow {
    /// The scope.
    pub scope: String,
    /// The human.
    pub human: String,
    /// The last message (of the scope).
    pub last_message: Option<String>,
    /// The projection.
    pub projection_json: Value,
}

/// A `message_recovery_points` row.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveryPointRow {
    /// The agent.
    pub agent: String,
    /// The message the point precedes.
    pub message: String,
    /// An explicit strategy (`None`: the runtime's strategy from spec section 5).
    pub strategy: Option<String>,
    /// The restore coordinates.
    pub recovery_ref: Value,
}
