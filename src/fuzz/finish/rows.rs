//! The rows of a finished case: each message's projections from its recipe (payloads quoting
//! a message copy its canary), what an earlier rewind left of its tombstones, and each scope's
//! frontiers, conversation index rows and scope-level events.

use serde_json::{json, Value};

use super::time_of;
use crate::fixtures::{ActivityStatus, AttachmentOwnerKind, OutboxStatus};
use crate::fuzz::build::{Auth, Builder};
use crate::fuzz::model::*;
use crate::fuzz::recipe::ProjRecipe;

const EMOJI: [&str; 6] = ["👍", "🎉", "✅", "👀", "🤔", "🚀"];

/// The human members of a scope.
fn human_members(b: &Builder<'_>, scope: usize) -> Vec<usize> {
    b.scopes[scope].humans.iter().copied().collect()
}

/// The rows bound to each message, from its projection recipe.
pub(super) fn message_rows(b: &Builder<'_>, model: &mut CaseModel) {
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
pub(super) fn scope_rows(b: &Builder<'_>, model: &mut CaseModel) {
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
