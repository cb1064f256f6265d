//! [`finish`]: a built and ordered case turned into a [`CaseModel`]: scopes and messages with
//! their final ids, the projection rows of each message (payloads quoting a message copy its
//! canary), the scope-level rows, the sessions, the request and the [`Shape`].

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, TimeDelta, Utc};
use rewind_driver_protocol::RewindRequest;
use serde_json::{json, Value};

use super::build::{Auth, Builder, Life};
use super::model::*;
use super::recipe::ProjRecipe;
use super::sessions::sessions;
use super::shape::{Feature, Projection, Shape, SuffixLen, TargetScope};
use crate::fixtures::{ActivityStatus, AttachmentOwnerKind, OutboxStatus, ScopeKind};

/// The fixture format's default `base_time`.
const BASE_SECONDS: i64 = 1_767_225_600;

const EMOJI: [&str; 6] = ["👍", "🎉", "✅", "👀", "🤔", "🚀"];

/// The time of a message with this `global_seq` (the format's default: base time plus that
/// many minutes), shifted by `seconds`.
pub(super) fn time_of(global_seq: i64, seconds: i64) -> String {
    let base = DateTime::<Utc>::from_timestamp(BASE_SECONDS, 0).unwrap_or(DateTime::UNIX_EPOCH);
    let at = base + TimeDelta::minutes(global_seq) + TimeDelta::seconds(seconds);
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Builds the model of a built, ordered and numbered case.
pub(super) fn finish(b: &Builder<'_>) -> CaseModel {
    let sessions = sessions(b);
    let mut model = CaseModel {
        seed: b.seed,
        index: b.index,
        workspace: format!("ws-g{:x}-{}", b.seed, b.index),
        humans: b
            .humans
            .iter()
            .map(|(id, name)| HumanModel {
                id: id.clone(),
                name: name.clone(),
            })
            .collect(),
        machines: vec![MachineModel {
            id: "mach-1".to_owned(),
            name: "devbox".to_owned(),
            deleted: false,
        }],
        agents: Vec::new(),
        scopes: Vec::new(),
        activity_events: Vec::new(),
        fanout_outbox: Vec::new(),
        scope_sync_dirty: Vec::new(),
        member_scope_sync_dirty: Vec::new(),
        share_cards: Vec::new(),
        reactions: Vec::new(),
        pins: Vec::new(),
        top_notices: Vec::new(),
        search_docs: Vec::new(),
        sources: Vec::new(),
        attachments: Vec::new(),
        stream_events: Vec::new(),
        conversation_index: Vec::new(),
        recovery_points: sessions.recovery_points,
        runtime_sessions: sessions.states,
        request: RewindRequest {
            actor: b.actor.clone(),
            scope_id: b.scopes[b.request_scope].id.clone(),
            target_message_id: b.msgs[b.target].id.clone(),
        },
        shape: empty_shape(),
        config: super::recipe::GenConfig::default(),
        shrink_path: String::new(),
    };
    if b.agents.iter().any(|a| a.machine_gone) {
        model.machines.push(MachineModel {
            id: "mach-gone".to_owned(),
            name: "old laptop".to_owned(),
            deleted: true,
        });
    }
    for (a, agent) in b.agents.iter().enumerate() {
        model.agents.push(AgentModel {
            id: agent.id.clone(),
            name: agent.name.clone(),
            runtime: agent.runtime.clone(),
            machine: if agent.machine_gone {
                "mach-gone"
            } else {
                "mach-1"
            }
            .to_owned(),
            session: sessions.session_ids[a].clone(),
            deleted: agent.deleted,
        });
    }
    scopes(b, &mut model);
    message_rows(b, &mut model);
    scope_rows(b, &mut model);
    let (task, upload) = b.loose_attachments();
    if task {
        model.attachments.push(AttachmentRow {
            id: "att-task".to_owned(),
            owner: AttachmentOwnerKind::TaskDiscussion,
            message: None,
            task: Some(format!("task-{}", b.index)),
            scope: Some(b.scopes[b.target_main].id.clone()),
            uploaded_by: Some(b.humans[b.initiator].0.clone()),
            file_name: "launch-checklist.md".to_owned(),
            content_type: "text/markdown".to_owned(),
            byte_size: 1024,
        });
    }
    if upload {
        model.attachments.push(AttachmentRow {
            id: "att-upload".to_owned(),
            owner: AttachmentOwnerKind::Upload,
            message: None,
            task: None,
            scope: None,
            uploaded_by: Some(b.humans[b.initiator].0.clone()),
            file_name: "draft-logo.svg".to_owned(),
            content_type: "image/svg+xml".to_owned(),
            byte_size: 2048,
        });
    }
    model.shape = shape(b, &model);
    model
}

fn empty_shape() -> Shape {
    Shape {
        target_scope: TargetScope::Dm,
        suffix_len: SuffixLen::Zero,
        cascade: false,
        runtimes: BTreeSet::new(),
        aim: super::shape::Aim::Complete,
        also: BTreeSet::new(),
        projections: BTreeSet::new(),
        features: BTreeSet::new(),
        messages: 0,
    }
}

/// The scopes with their members and messages.
fn scopes(b: &Builder<'_>, model: &mut CaseModel) {
    let mut by_scope: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &m in &b.order {
        by_scope.entry(b.msgs[m].scope).or_default().push(m);
    }
    for (s, scope) in b.scopes.iter().enumerate() {
        let msgs = by_scope.get(&s).cloned().unwrap_or_default();
        let latest = msgs
            .last()
            .map_or((0, 0), |&m| (b.msgs[m].seq, b.msgs[m].global_seq));
        let (flags, picks) = scope.rows;
        let mut members = Vec::new();
        let owner = if scope.humans.contains(&b.initiator) {
            Some(b.initiator)
        } else {
            scope.humans.iter().next().copied()
        };
        for (k, &h) in scope.humans.iter().enumerate() {
            let (mut seq, mut global, mut dismissed) = (0, 0, 0);
            if flags[5] && !msgs.is_empty() {
                let pick = usize::from(picks[0]) + k + s;
                // At the tail (above any rewind's new tail) or somewhere below it.
                let at = if pick % 2 == 0 {
                    msgs.len() - 1
                } else {
                    (pick / 2) % msgs.len()
                };
                seq = b.msgs[msgs[at]].seq;
                global = b.msgs[msgs[at]].global_seq;
                if flags[6] && Some(h) == owner {
                    dismissed = latest.1;
                }
            }
            members.push(MemberModel {
                party: PartyModel::Human(b.humans[h].0.clone()),
                role: if Some(h) == owner { "owner" } else { "member" }.to_owned(),
                last_read_seq: seq,
                last_read_global_seq: global,
                owner_context_dismissed_through_global_seq: dismissed,
            });
        }
        for &a in &scope.agents {
            members.push(MemberModel {
                party: PartyModel::Agent(b.agents[a].id.clone()),
                role: "member".to_owned(),
                last_read_seq: 0,
                last_read_global_seq: 0,
                owner_context_dismissed_through_global_seq: 0,
            });
        }
        let messages = msgs.iter().map(|&m| message_model(b, m)).collect();
        model.scopes.push(ScopeModel {
            id: scope.id.clone(),
            kind: scope.kind,
            name: scope.name.clone(),
            parent: scope
                .parent
                .map(|p| (b.scopes[b.msgs[p].scope].id.clone(), b.msgs[p].id.clone())),
            archived: scope.archived,
            members,
            messages,
        });
    }
}

fn message_model(b: &Builder<'_>, m: usize) -> MessageModel {
    let message = &b.msgs[m];
    let author = match message.author {
        Auth::Human(h) => AuthorModel::Human(b.humans[h].0.clone()),
        Auth::Agent(a) => AuthorModel::Agent(b.agents[a].id.clone()),
        Auth::System => AuthorModel::System,
        Auth::Service => AuthorModel::Service,
        Auth::App => AuthorModel::App,
    };
    let metadata = match message.life {
        Life::Visible => json!({}),
        Life::Recalled => json!({"messageRecall": {
            "status": "recalled",
            "recalledAt": time_of(message.global_seq, 30),
        }}),
        Life::Rewound(notice) => json!({"messageRecall": {
            "status": "rewound",
            "rewoundAt": time_of(b.msgs[notice].global_seq, 0),
        }}),
    };
    MessageModel {
        id: message.id.clone(),
        seq: message.seq,
        global_seq: message.global_seq,
        author,
        content: message.content.clone(),
        cold: message.cold,
        metadata,
        client_message_id: message.notice.clone(),
    }
}

/// The human members of a scope.
fn human_members(b: &Builder<'_>, scope: usize) -> Vec<usize> {
    b.scopes[scope].humans.iter().copied().collect()
}

/// The rows bound to each message, from its projection recipe.
fn message_rows(b: &Builder<'_>, model: &mut CaseModel) {
    let mut earlier: Vec<usize> = Vec::new();
    for &m in &b.order {
        let message = &b.msgs[m];
        let forced: Vec<_> = message
            .deliveries
            .iter()
            .filter_map(|d| d.outbox.map(|status| (d.agent, status)))
            .collect();
        for (agent, status) in forced {
            model.fanout_outbox.push(OutboxModelRow {
                message: message.id.clone(),
                recipient: PartyModel::Agent(b.agents[agent].id.clone()),
                status,
                payload: json!({"preview": message.content}),
                leased_until: (status == OutboxStatus::Leased)
                    .then(|| time_of(message.global_seq, 600)),
            });
        }
        let Some(proj) = &message.proj else {
            if message.visible() {
                earlier.push(m);
            }
            continue;
        };
        if !message.visible() {
            tombstone_rows(b, m, proj, model);
            continue;
        }
        visible_rows(b, m, proj, &earlier, model);
        earlier.push(m);
    }
}

/// What an earlier rewind left of a tombstone: suppressed facts with empty payloads.
fn tombstone_rows(b: &Builder<'_>, m: usize, proj: &ProjRecipe, model: &mut CaseModel) {
    let message = &b.msgs[m];
    if proj.bits[ProjRecipe::ACTIVITY] {
        model.activity_events.push(ActivityRow {
            message: Some(message.id.clone()),
            scope: None,
            kind: "message.created".to_owned(),
            status: ActivityStatus::Suppressed,
            payload: json!({}),
        });
    }
    if proj.bits[ProjRecipe::OUTBOX] {
        if let Some(&h) = human_members(b, message.scope).first() {
            model.fanout_outbox.push(OutboxModelRow {
                message: message.id.clone(),
                recipient: PartyModel::Human(b.humans[h].0.clone()),
                status: OutboxStatus::Suppressed,
                payload: json!({}),
                leased_until: None,
            });
        }
    }
}

fn visible_rows(
    b: &Builder<'_>,
    m: usize,
    proj: &ProjRecipe,
    earlier: &[usize],
    model: &mut CaseModel,
) {
    let message = &b.msgs[m];
    let id = message.id.clone();
    let content = message.content.clone();
    let canary = content.rsplit(' ').next().unwrap_or_default().to_owned();
    let picks = proj.picks.map(usize::from);
    let humans = human_members(b, message.scope);
    let human = |k: usize| {
        humans
            .get(k % humans.len().max(1))
            .map(|&h| b.humans[h].0.clone())
    };
    let author_human = match message.author {
        Auth::Human(h) => Some(b.humans[h].0.clone()),
        _ => None,
    };
    let mut stream = json!({"messageId": id, "content": content});
    let mut mention = None;

    if proj.bits[ProjRecipe::ACTIVITY] {
        let status = [
            ActivityStatus::Pending,
            ActivityStatus::Consumed,
            ActivityStatus::Suppressed,
        ][picks[0] % 3];
        let (kind, payload) = match human(picks[1]) {
            Some(who) if picks[0] % 4 == 1 => {
                mention = Some(who.clone());
                ("mention", json!({"mentioned": who, "excerpt": content}))
            }
            _ => ("message.created", json!({})),
        };
        model.activity_events.push(ActivityRow {
            message: Some(id.clone()),
            scope: None,
            kind: kind.to_owned(),
            status,
            payload,
        });
    }
    if proj.bits[ProjRecipe::OUTBOX] {
        let status = [
            OutboxStatus::Pending,
            OutboxStatus::Leased,
            OutboxStatus::Delivered,
            OutboxStatus::Failed,
            OutboxStatus::Suppressed,
        ][picks[1] % 5];
        let recipient = match message.deliveries.first() {
            Some(delivery) if picks[2] % 2 == 0 => {
                Some(PartyModel::Agent(b.agents[delivery.agent].id.clone()))
            }
            _ => humans
                .iter()
                .map(|&h| b.humans[h].0.clone())
                .find(|h| Some(h) != author_human.as_ref())
                .map(PartyModel::Human),
        };
        if let Some(recipient) = recipient {
            model.fanout_outbox.push(OutboxModelRow {
                message: id.clone(),
                recipient,
                status,
                payload: if picks[3] % 2 == 0 {
                    json!({"preview": content})
                } else {
                    json!({})
                },
                leased_until: (status == OutboxStatus::Leased)
                    .then(|| time_of(message.global_seq, 600)),
            });
        }
    }
    if proj.bits[ProjRecipe::SHARE_CARD] {
        let others: Vec<usize> = (0..b.scopes.len())
            .filter(|&s| s != message.scope)
            .collect();
        let target = others
            .get(picks[2] % others.len().max(1))
            .copied()
            .unwrap_or(message.scope);
        if let Some(by) = author_human.clone().or_else(|| human(picks[3])) {
            model.share_cards.push(ShareCardRow {
                id: format!("card-{id}"),
                message: id.clone(),
                target_scope: b.scopes[target].id.clone(),
                shared_by: by.clone(),
                action_state: if picks[0] % 2 == 0 {
                    json!({"status": "open"})
                } else {
                    json!({"status": "open", "approvals": [by]})
                },
            });
        }
    }
    if proj.bits[ProjRecipe::REACTION] {
        let mut reactors: Vec<PartyModel> = humans
            .iter()
            .map(|&h| PartyModel::Human(b.humans[h].0.clone()))
            .collect();
        reactors.extend(
            b.scopes[message.scope]
                .agents
                .iter()
                .map(|&a| PartyModel::Agent(b.agents[a].id.clone())),
        );
        let mut listed = Vec::new();
        let count = 1 + picks[3] % 2;
        for k in 0..count.min(reactors.len()) {
            let reactor = reactors[(picks[1] + k) % reactors.len()].clone();
            let emoji = EMOJI[(picks[2] + k) % EMOJI.len()];
            let by = match &reactor {
                PartyModel::Human(h) | PartyModel::Agent(h) => h.clone(),
            };
            listed.push(json!({"emoji": emoji, "by": by}));
            model.reactions.push(ReactionRow {
                message: id.clone(),
                reactor,
                emoji: emoji.to_owned(),
            });
        }
        stream["reactions"] = Value::Array(listed);
    }
    if proj.bits[ProjRecipe::PIN] {
        if let Some(by) = human(picks[0]) {
            model.pins.push(PinRow {
                message: id.clone(),
                pinned_by: by,
            });
        }
    }
    if proj.bits[ProjRecipe::TOP_NOTICE] {
        if let Some(by) = human(picks[1] + 1) {
            model.top_notices.push(TopNoticeRow {
                message: id.clone(),
                set_by: by,
            });
        }
    }
    if proj.bits[ProjRecipe::SEARCH_DOC] {
        model.search_docs.push(SearchDocRow {
            message: id.clone(),
            body: (picks[2] % 3 == 0).then(|| format!("{content} (indexed)")),
        });
    }
    if proj.bits[ProjRecipe::SOURCE] && !earlier.is_empty() {
        let cited = earlier[earlier.len() - 1 - picks[3] % earlier.len()];
        model.sources.push(SourceRow {
            message: id.clone(),
            source_message: b.msgs[cited].id.clone(),
        });
        stream["sources"] = json!([{"messageId": b.msgs[cited].id}]);
    }
    if proj.bits[ProjRecipe::ATTACHMENT] {
        let (word, ext, content_type) = [
            ("notes", "md", "text/markdown"),
            (
                "budget",
                "xlsx",
                "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            ),
            ("screenshot", "png", "image/png"),
            ("report", "pdf", "application/pdf"),
        ][picks[0] % 4];
        let file_name = format!("{word}-{canary}.{ext}");
        stream["attachments"] = json!([{"id": format!("att-{id}"), "name": file_name}]);
        model.attachments.push(AttachmentRow {
            id: format!("att-{id}"),
            owner: AttachmentOwnerKind::Message,
            message: Some(id.clone()),
            task: None,
            scope: None,
            uploaded_by: author_human.clone(),
            file_name,
            content_type: content_type.to_owned(),
            byte_size: 512 + (picks[1] as i64) * 64,
        });
    }
    if proj.bits[ProjRecipe::STREAM] {
        if let Some(who) = mention {
            stream["mentions"] = json!([who]);
        }
        if picks[3] % 3 == 1 {
            stream["deliveryPreview"] = json!(content);
        }
        model.stream_events.push(StreamEventRow {
            message: Some(id),
            scope: None,
            event_type: "message.created".to_owned(),
            payload_json: stream,
        });
    }
}

/// Frontiers, cursors' companions, the conversation index and scope-level events.
fn scope_rows(b: &Builder<'_>, model: &mut CaseModel) {
    for (s, scope) in b.scopes.iter().enumerate() {
        let (flags, picks) = scope.rows;
        let Some(model_scope) = model.scopes.get(s) else {
            continue;
        };
        let msgs: Vec<MessageModel> = model_scope.messages.clone();
        let Some(last) = msgs.last() else {
            continue;
        };
        let latest = last.seq;
        let picks = picks.map(usize::from);
        let id = scope.id.clone();
        let humans = human_members(b, s);
        if flags[0] {
            model.scope_sync_dirty.push(SyncDirtyRow {
                scope: id.clone(),
                latest_message_seq: flags[7].then_some(latest),
                latest_activity_seq: ((picks[1] + s) % 5) as i64,
            });
        }
        if flags[1] {
            for (k, &h) in humans.iter().enumerate() {
                if (picks[2] + k + s) % 3 == 2 {
                    continue;
                }
                let frontier = (picks[3] + k) % 3;
                model.member_scope_sync_dirty.push(MemberSyncDirtyRow {
                    scope: id.clone(),
                    human: b.humans[h].0.clone(),
                    latest_message_seq: match frontier {
                        0 => None,
                        1 => Some(latest),
                        _ => Some(msgs[(picks[0] + k) % msgs.len()].seq),
                    },
                    latest_activity_seq: ((picks[0] + k) % 4) as i64,
                });
            }
        }
        if flags[2] {
            let visible: Vec<&MessageModel> = msgs.iter().filter(|m| !m.is_rewound()).collect();
            if let Some(shown) = visible.last() {
                for (k, &h) in humans.iter().enumerate() {
                    if (picks[1] + k) % 4 == 3 {
                        continue;
                    }
                    model.conversation_index.push(ConversationIndexModelRow {
                        scope: id.clone(),
                        human: b.humans[h].0.clone(),
                        last_message: Some(shown.id.clone()),
                        projection_json: json!({
                            "lastMessage": {"id": shown.id, "preview": shown.content},
                            "unread": (picks[2] + k) % 3,
                        }),
                    });
                }
            }
        }
        if flags[3] {
            if let Some(&h) = humans.get(picks[0] % humans.len().max(1)) {
                model.activity_events.push(ActivityRow {
                    message: None,
                    scope: Some(id.clone()),
                    kind: "member.joined".to_owned(),
                    status: [
                        ActivityStatus::Pending,
                        ActivityStatus::Consumed,
                        ActivityStatus::Suppressed,
                    ][(picks[3] + s) % 3],
                    payload: json!({"member": b.humans[h].0}),
                });
            }
        }
        if flags[4] {
            if let Some(&h) = humans.get(picks[1] % humans.len().max(1)) {
                model.stream_events.push(StreamEventRow {
                    message: None,
                    scope: Some(id.clone()),
                    event_type: "scope.read".to_owned(),
                    payload_json: json!({"user": b.humans[h].0, "seq": latest}),
                });
            }
        }
    }
}

/// The shape of the finished case.
fn shape(b: &Builder<'_>, model: &CaseModel) -> Shape {
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
