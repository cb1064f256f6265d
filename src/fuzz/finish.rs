//! [`finish`]: a built and ordered case turned into a [`CaseModel`]: scopes and messages with
//! their final ids, the projection rows of each message (payloads quoting a message copy its
//! canary), the scope-level rows, the sessions, the request and the [`Shape`].

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, TimeDelta, Utc};
use rewind_driver_protocol::RewindRequest;
use serde_json::json;

use super::build::{Auth, Builder, Life};
use super::model::*;
use super::sessions::sessions;
use super::shape::{Shape, SuffixLen, TargetScope};
use crate::fixtures::AttachmentOwnerKind;

mod rows;
mod shape;

use rows::{message_rows, scope_rows};
use shape::shape;

/// The fixture format's default `base_time`.
const BASE_SECONDS: i64 = 1_767_225_600;

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
