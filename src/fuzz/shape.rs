//! [`Shape`]: what a generated case is made of, as plain data to count in a histogram.
//!
//! A shape records what the generator built and aimed at, never the outcome it expects: the
//! outcome is an independent oracle's to derive.

use std::collections::BTreeSet;
use std::fmt;

/// What the generator aimed the rewind request at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Aim {
    /// The initiator's own hot message whose suffix has no other human, no non-tail reply
    /// thread and only healthy agents: a rewind meant to complete.
    Complete,
    /// Another human's (or an agent's) message as the target.
    NotOwnTarget,
    /// A system, service or app message as the target.
    SystemTarget,
    /// A cold message as the target.
    ColdTarget,
    /// An agent as the initiator.
    AgentInitiator,
    /// The system as the initiator.
    SystemInitiator,
    /// A `scope_id` other than the target's scope.
    WrongScope,
    /// An earlier rewind's tombstone as the target.
    AlreadyRewound,
    /// Another human's message later in the suffix or in the cascaded reply thread.
    OtherHumanLater,
    /// A live reply thread on a suffix message that is not the suffix's last.
    LaterReplyThread,
    /// An agent of the suffix on an unsupported runtime.
    UnsupportedRuntime,
    /// An agent of the suffix without a usable recovery point.
    MissingRecoveryPoint,
    /// An agent of the suffix that is deleted or whose machine is.
    AgentUnavailable,
    /// An agent of the suffix active in another scope after its first participation.
    ActivityElsewhere,
}

impl Aim {
    /// Every aim, [`Aim::Complete`] first.
    pub const ALL: [Aim; 14] = [
        Aim::Complete,
        Aim::NotOwnTarget,
        Aim::SystemTarget,
        Aim::ColdTarget,
        Aim::AgentInitiator,
        Aim::SystemInitiator,
        Aim::WrongScope,
        Aim::AlreadyRewound,
        Aim::OtherHumanLater,
        Aim::LaterReplyThread,
        Aim::UnsupportedRuntime,
        Aim::MissingRecoveryPoint,
        Aim::AgentUnavailable,
        Aim::ActivityElsewhere,
    ];

    /// The guards that can be planted in the suffix on top of another aim.
    pub const COMBINABLE: [Aim; 6] = [
        Aim::OtherHumanLater,
        Aim::LaterReplyThread,
        Aim::UnsupportedRuntime,
        Aim::MissingRecoveryPoint,
        Aim::AgentUnavailable,
        Aim::ActivityElsewhere,
    ];

    /// A short kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            Aim::Complete => "complete",
            Aim::NotOwnTarget => "not-own-target",
            Aim::SystemTarget => "system-target",
            Aim::ColdTarget => "cold-target",
            Aim::AgentInitiator => "agent-initiator",
            Aim::SystemInitiator => "system-initiator",
            Aim::WrongScope => "wrong-scope",
            Aim::AlreadyRewound => "already-rewound",
            Aim::OtherHumanLater => "other-human-later",
            Aim::LaterReplyThread => "later-reply-thread",
            Aim::UnsupportedRuntime => "unsupported-runtime",
            Aim::MissingRecoveryPoint => "missing-recovery-point",
            Aim::AgentUnavailable => "agent-unavailable",
            Aim::ActivityElsewhere => "activity-elsewhere",
        }
    }

    /// Whether the aim needs the target on a DM or channel main line.
    pub(crate) fn needs_main_line(self) -> bool {
        matches!(
            self,
            Aim::ColdTarget | Aim::AlreadyRewound | Aim::LaterReplyThread
        )
    }

    /// Whether the aim plants a faulty agent in the suffix.
    pub(crate) fn needs_agent(self) -> bool {
        matches!(
            self,
            Aim::UnsupportedRuntime
                | Aim::MissingRecoveryPoint
                | Aim::AgentUnavailable
                | Aim::ActivityElsewhere
        )
    }
}

impl fmt::Display for Aim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The kind of the target message's scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TargetScope {
    /// A DM main line.
    Dm,
    /// A channel main line.
    Channel,
    /// A reply thread.
    ReplyThread,
}

impl TargetScope {
    /// Every target scope kind.
    pub const ALL: [TargetScope; 3] = [
        TargetScope::Dm,
        TargetScope::Channel,
        TargetScope::ReplyThread,
    ];

    /// The fixture format's spelling.
    pub fn name(self) -> &'static str {
        match self {
            TargetScope::Dm => "dm",
            TargetScope::Channel => "channel",
            TargetScope::ReplyThread => "reply_thread",
        }
    }
}

/// How many visible messages the target's scope holds from the target on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SuffixLen {
    /// None (the target itself is not visible, e.g. an earlier tombstone, and nothing follows).
    Zero,
    /// The target alone.
    One,
    /// Two or three.
    Few,
    /// Four to seven.
    Several,
    /// Eight or more.
    Many,
}

impl SuffixLen {
    /// The bucket of `len` visible messages.
    pub fn of(len: usize) -> SuffixLen {
        match len {
            0 => SuffixLen::Zero,
            1 => SuffixLen::One,
            2..=3 => SuffixLen::Few,
            4..=7 => SuffixLen::Several,
            _ => SuffixLen::Many,
        }
    }

    /// The bucket's label.
    pub fn name(self) -> &'static str {
        match self {
            SuffixLen::Zero => "0",
            SuffixLen::One => "1",
            SuffixLen::Few => "2-3",
            SuffixLen::Several => "4-7",
            SuffixLen::Many => "8+",
        }
    }
}

/// A projection, sidecar or delivery-fact kind of the fixture format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Projection {
    /// `activity_events` about a message.
    ActivityEvent,
    /// `activity_events` about a scope only.
    ScopeActivityEvent,
    /// `fanout_outbox` to a human.
    OutboxHuman,
    /// `fanout_outbox` to an agent.
    OutboxAgent,
    /// `scope_sync_dirty`.
    ScopeSyncDirty,
    /// `member_scope_sync_dirty`.
    MemberSyncDirty,
    /// `share_cards`.
    ShareCard,
    /// `reactions`.
    Reaction,
    /// `pins`.
    Pin,
    /// `top_notices`.
    TopNotice,
    /// `search_docs`.
    SearchDoc,
    /// `sources` whose citing message is in the suffix.
    SourceCiting,
    /// `sources` whose cited message is in the suffix.
    SourceCited,
    /// `attachments` owned by a message.
    MessageAttachment,
    /// `attachments` of a task discussion.
    TaskAttachment,
    /// `attachments` not yet claimed.
    UploadAttachment,
    /// `stream_events` about a message.
    StreamEvent,
    /// `stream_events` about a scope only.
    ScopeStreamEvent,
    /// `conversation_index`.
    ConversationIndex,
    /// A member's read cursor at or above the target's seq.
    CursorAbove,
    /// A member's read cursor below the target's seq.
    CursorBelow,
    /// `recovery_points`.
    RecoveryPoint,
}

impl Projection {
    /// Every kind.
    pub const ALL: [Projection; 22] = [
        Projection::ActivityEvent,
        Projection::ScopeActivityEvent,
        Projection::OutboxHuman,
        Projection::OutboxAgent,
        Projection::ScopeSyncDirty,
        Projection::MemberSyncDirty,
        Projection::ShareCard,
        Projection::Reaction,
        Projection::Pin,
        Projection::TopNotice,
        Projection::SearchDoc,
        Projection::SourceCiting,
        Projection::SourceCited,
        Projection::MessageAttachment,
        Projection::TaskAttachment,
        Projection::UploadAttachment,
        Projection::StreamEvent,
        Projection::ScopeStreamEvent,
        Projection::ConversationIndex,
        Projection::CursorAbove,
        Projection::CursorBelow,
        Projection::RecoveryPoint,
    ];

    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            Projection::ActivityEvent => "activity",
            Projection::ScopeActivityEvent => "scope-activity",
            Projection::OutboxHuman => "outbox-human",
            Projection::OutboxAgent => "outbox-agent",
            Projection::ScopeSyncDirty => "sync-dirty",
            Projection::MemberSyncDirty => "member-sync-dirty",
            Projection::ShareCard => "share-card",
            Projection::Reaction => "reaction",
            Projection::Pin => "pin",
            Projection::TopNotice => "top-notice",
            Projection::SearchDoc => "search-doc",
            Projection::SourceCiting => "source-citing",
            Projection::SourceCited => "source-cited",
            Projection::MessageAttachment => "attachment",
            Projection::TaskAttachment => "task-attachment",
            Projection::UploadAttachment => "upload",
            Projection::StreamEvent => "stream",
            Projection::ScopeStreamEvent => "scope-stream",
            Projection::ConversationIndex => "conversation-index",
            Projection::CursorAbove => "cursor-above",
            Projection::CursorBelow => "cursor-below",
            Projection::RecoveryPoint => "recovery-point",
        }
    }
}

/// A feature of the whole case, beside its target and projections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feature {
    /// Messages behind the archive boundary.
    ColdHistory,
    /// A recalled placeholder.
    Recalled,
    /// An earlier rewind's tombstones (and its notice).
    EarlierTombstones,
    /// A system, service or app message.
    SystemMessages,
    /// A live reply thread on a message before the target (or on the main line of a thread
    /// target).
    MiddleThread,
    /// An archived reply thread.
    ArchivedThread,
    /// A reply thread whose messages interleave with its parent's main line by `global_seq`.
    InterleavedThread,
    /// An agent on an unsupported runtime somewhere in the case.
    UnsupportedAgent,
    /// A deleted agent somewhere in the case.
    DeletedAgent,
    /// A deleted machine somewhere in the case.
    DeletedMachine,
    /// A suffix agent active in another scope before its first participation (allowed).
    EarlierActivityElsewhere,
    /// Other conversations beside the target's.
    OtherConversations,
}

impl Feature {
    /// Every feature.
    pub const ALL: [Feature; 12] = [
        Feature::ColdHistory,
        Feature::Recalled,
        Feature::EarlierTombstones,
        Feature::SystemMessages,
        Feature::MiddleThread,
        Feature::ArchivedThread,
        Feature::InterleavedThread,
        Feature::UnsupportedAgent,
        Feature::DeletedAgent,
        Feature::DeletedMachine,
        Feature::EarlierActivityElsewhere,
        Feature::OtherConversations,
    ];

    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            Feature::ColdHistory => "cold",
            Feature::Recalled => "recalled",
            Feature::EarlierTombstones => "tombstones",
            Feature::SystemMessages => "system-messages",
            Feature::MiddleThread => "middle-thread",
            Feature::ArchivedThread => "archived-thread",
            Feature::InterleavedThread => "interleaved",
            Feature::UnsupportedAgent => "unsupported-agent",
            Feature::DeletedAgent => "deleted-agent",
            Feature::DeletedMachine => "deleted-machine",
            Feature::EarlierActivityElsewhere => "earlier-elsewhere",
            Feature::OtherConversations => "other-conversations",
        }
    }
}

/// What a generated case is made of: plain data, `Display`-able, usable as a histogram key
/// (whole or field by field).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shape {
    /// The target message's scope kind.
    pub target_scope: TargetScope,
    /// How many visible messages the target's scope holds from the target on.
    pub suffix_len: SuffixLen,
    /// Whether the last visible message of the target's scope has a live reply thread (the
    /// cascade case when the target is on a main line).
    pub cascade: bool,
    /// The runtime ids of the agents the suffix (and a cascaded thread) reaches: authors,
    /// outbox recipients and recovery-point holders.
    pub runtimes: BTreeSet<String>,
    /// The guard the generator aimed at ([`Aim::Complete`] for none).
    pub aim: Aim,
    /// Further guards planted on top of `aim`.
    pub also: BTreeSet<Aim>,
    /// The projection kinds touching the suffix (message-bound rows of suffix messages,
    /// sources on either side, the target scope's frontiers and cursors).
    pub projections: BTreeSet<Projection>,
    /// Features of the whole case.
    pub features: BTreeSet<Feature>,
    /// How many messages the case holds.
    pub messages: usize,
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} suffix={} {}",
            self.target_scope.name(),
            self.suffix_len.name(),
            if self.cascade {
                "cascade"
            } else {
                "no-cascade"
            }
        )?;
        let runtimes: Vec<&str> = self.runtimes.iter().map(String::as_str).collect();
        if runtimes.is_empty() {
            f.write_str(" runtimes=none")?;
        } else {
            write!(f, " runtimes={}", runtimes.join(","))?;
        }
        write!(f, " aim={}", self.aim)?;
        if !self.also.is_empty() {
            let also: Vec<&str> = self.also.iter().map(|aim| aim.name()).collect();
            write!(f, "+{}", also.join("+"))?;
        }
        write!(
            f,
            " projections={}/{}",
            self.projections.len(),
            Projection::ALL.len()
        )?;
        let features: Vec<&str> = self.features.iter().map(|x| x.name()).collect();
        if !features.is_empty() {
            write!(f, " [{}]", features.join(","))?;
        }
        write!(f, " messages={}", self.messages)
    }
}
