//! The [`Shape`] of a finished case: its target, suffix, cascade, the runtimes the suffix
//! reaches, the projection kinds touching it and the case's features.

use std::collections::BTreeSet;

use crate::fixtures::{AttachmentOwnerKind, ScopeKind};
use crate::fuzz::build::Builder;
use crate::fuzz::model::*;
use crate::fuzz::shape::{Feature, Projection, Shape, SuffixLen, TargetScope};

/// The shape of the finished case.
pub(super) fn shape(b: &Builder<'_>, model: &CaseModel) -> Shape {
    let target = &b.msgs[b.target];
    let target_scope = &b.scopes[target.scope];
    let kind = match target_scope.kind {
        ScopeKind::Dm => TargetScope::Dm,
        ScopeKind::Channel => TargetScope::Channel,
        ScopeKind::ReplyThread => TargetScope::ReplyThread,
    };
    let scope_model = &model.scopes[target.scope];
    let suffix: Vec<&MessageModel> = scope_model
        .messages
        .iter()
        .filter(|m| m.seq >= target.seq && !m.is_rewound())
        .collect();
    let mut reached: BTreeSet<String> = suffix.iter().map(|m| m.id.clone()).collect();
    let last = suffix.last().map(|m| m.id.clone());
    let mut cascade = false;
    if let Some(last) = &last {
        for scope in &model.scopes {
            let forks_last = scope
                .parent
                .as_ref()
                .is_some_and(|(_, message)| message == last);
            if forks_last && !scope.archived {
                cascade = true;
                if kind != TargetScope::ReplyThread {
                    reached.extend(
                        scope
                            .messages
                            .iter()
                            .filter(|m| !m.is_rewound())
                            .map(|m| m.id.clone()),
                    );
                }
            }
        }
    }
    let mut runtimes = BTreeSet::new();
    let runtime_of = |agent: &str| {
        model
            .agents
            .iter()
            .find(|a| a.id == agent)
            .map(|a| a.runtime.clone())
    };
    for message in model.messages().filter(|m| reached.contains(&m.id)) {
        if let AuthorModel::Agent(agent) = &message.author {
            runtimes.extend(runtime_of(agent));
        }
    }
    for row in &model.fanout_outbox {
        if let (true, PartyModel::Agent(agent)) = (reached.contains(&row.message), &row.recipient) {
            runtimes.extend(runtime_of(agent));
        }
    }
    for row in model
        .recovery_points
        .iter()
        .filter(|r| reached.contains(&r.message))
    {
        runtimes.extend(runtime_of(&row.agent));
    }

    let mut projections = BTreeSet::new();
    let on = |message: &str| reached.contains(message);
    let mut add = |present: bool, kind: Projection| {
        if present {
            projections.insert(kind);
        }
    };
    add(
        model
            .activity_events
            .iter()
            .any(|r| r.message.as_deref().is_some_and(on)),
        Projection::ActivityEvent,
    );
    add(
        model
            .activity_events
            .iter()
            .any(|r| r.scope.as_deref() == Some(&scope_model.id)),
        Projection::ScopeActivityEvent,
    );
    add(
        model
            .fanout_outbox
            .iter()
            .any(|r| on(&r.message) && matches!(r.recipient, PartyModel::Human(_))),
        Projection::OutboxHuman,
    );
    add(
        model
            .fanout_outbox
            .iter()
            .any(|r| on(&r.message) && matches!(r.recipient, PartyModel::Agent(_))),
        Projection::OutboxAgent,
    );
    add(
        model
            .scope_sync_dirty
            .iter()
            .any(|r| r.scope == scope_model.id),
        Projection::ScopeSyncDirty,
    );
    add(
        model
            .member_scope_sync_dirty
            .iter()
            .any(|r| r.scope == scope_model.id),
        Projection::MemberSyncDirty,
    );
    add(
        model.share_cards.iter().any(|r| on(&r.message)),
        Projection::ShareCard,
    );
    add(
        model.reactions.iter().any(|r| on(&r.message)),
        Projection::Reaction,
    );
    add(model.pins.iter().any(|r| on(&r.message)), Projection::Pin);
    add(
        model.top_notices.iter().any(|r| on(&r.message)),
        Projection::TopNotice,
    );
    add(
        model.search_docs.iter().any(|r| on(&r.message)),
        Projection::SearchDoc,
    );
    add(
        model.sources.iter().any(|r| on(&r.message)),
        Projection::SourceCiting,
    );
    add(
        model.sources.iter().any(|r| on(&r.source_message)),
        Projection::SourceCited,
    );
    add(
        model
            .attachments
            .iter()
            .any(|r| r.message.as_deref().is_some_and(on)),
        Projection::MessageAttachment,
    );
    add(
        model
            .attachments
            .iter()
            .any(|r| r.owner == AttachmentOwnerKind::TaskDiscussion),
        Projection::TaskAttachment,
    );
    add(
        model
            .attachments
            .iter()
            .any(|r| r.owner == AttachmentOwnerKind::Upload),
        Projection::UploadAttachment,
    );
    add(
        model
            .stream_events
            .iter()
            .any(|r| r.message.as_deref().is_some_and(on)),
        Projection::StreamEvent,
    );
    add(
        model
            .stream_events
            .iter()
            .any(|r| r.scope.as_deref() == Some(&scope_model.id)),
        Projection::ScopeStreamEvent,
    );
    add(
        model
            .conversation_index
            .iter()
            .any(|r| r.scope == scope_model.id),
        Projection::ConversationIndex,
    );
    let cursors: Vec<i64> = scope_model
        .members
        .iter()
        .filter(|m| matches!(m.party, PartyModel::Human(_)))
        .map(|m| m.last_read_seq)
        .collect();
    add(
        cursors.iter().any(|&c| c >= target.seq),
        Projection::CursorAbove,
    );
    add(
        cursors.iter().any(|&c| c > 0 && c < target.seq),
        Projection::CursorBelow,
    );
    add(
        model.recovery_points.iter().any(|r| on(&r.message)),
        Projection::RecoveryPoint,
    );

    let mut features = b.features.clone();
    if model.messages().any(MessageModel::is_recalled) {
        features.insert(Feature::Recalled);
    }
    Shape {
        target_scope: kind,
        suffix_len: SuffixLen::of(suffix.len()),
        cascade,
        runtimes,
        aim: b.aim(),
        also: b.also.clone(),
        projections,
        features,
        messages: b.order.len(),
    }
}
