//! What every generated case must satisfy besides loading: the fixture's name and request,
//! runtime sessions the mocks accept, canaries, recovery refs matching the sessions, and the
//! conditions the case aims at.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use rewind_driver_protocol::Actor;
use serde_json::Value;

use crate::fixtures::{parse_fixture, Author, Fixture, OutboxStatus, StorageTier};
use crate::fuzz::{Aim, GeneratedCase};
use crate::leak_scan::canaries_in;
use crate::mocks::MockRuntimes;

/// Loads a generated case through the fixture loader, failing with the YAML on error.
pub(super) fn load(case: &GeneratedCase) -> Fixture {
    let path = PathBuf::from(format!("{}.yaml", case.name));
    match parse_fixture(&path, &case.yaml) {
        Ok(fixture) => fixture,
        Err(err) => panic!("{}: {err}\n{}", case.name, case.yaml),
    }
}

/// The checks every generated case must pass besides loading.
pub(super) fn check_case(case: &GeneratedCase, fixture: &Fixture) {
    assert_eq!(fixture.name, case.name);
    assert!(
        fixture.description.contains(&format!("{:#x}", case.seed))
            && fixture
                .description
                .contains(&format!("case {}", case.index)),
        "{}: description `{}`",
        case.name,
        fixture.description
    );
    let request = &case.request;
    assert!(
        fixture.message(&request.target_message_id).is_some(),
        "{}: target `{}` is not in the fixture",
        case.name,
        request.target_message_id
    );
    assert!(
        fixture.scope(&request.scope_id).is_some(),
        "{}: scope `{}` is not in the fixture",
        case.name,
        request.scope_id
    );
    match &request.actor {
        Actor::Human(id) => assert!(fixture.humans.iter().any(|h| &h.id == id), "{id}"),
        Actor::Agent(id) => assert!(fixture.agent(id).is_some(), "{id}"),
        Actor::System => {}
    }
    if let Err(err) = MockRuntimes::check_sessions(fixture) {
        panic!(
            "{}: runtime sessions do not seed: {err}\n{}",
            case.name, case.yaml
        );
    }
    check_canaries(case, fixture);
    check_recovery_refs(case, fixture);
    check_aim(case, fixture);
}

/// Every visible message carries its one canary, and every payload or file name quoting
/// messages quotes the canary of the message its row is bound to.
fn check_canaries(case: &GeneratedCase, fixture: &Fixture) {
    let prefix = format!("CANARY-g{:x}-{}-", case.seed, case.index);
    let mut by_message: BTreeMap<&str, String> = BTreeMap::new();
    for message in fixture.messages() {
        let found = canaries_in(&message.content);
        if message.is_rewound() {
            assert!(
                message.content.is_empty(),
                "{}: tombstone {}",
                case.name,
                message.id
            );
            continue;
        }
        assert_eq!(
            found.len(),
            1,
            "{}: message `{}`: {found:?}",
            case.name,
            message.id
        );
        assert!(found[0].starts_with(&prefix), "{}: {}", case.name, found[0]);
        by_message.insert(&message.id, found[0].clone());
    }
    let quoted = |what: &str, message: Option<&String>, text: String| {
        for canary in canaries_in(&text) {
            let own = message.and_then(|m| by_message.get(m.as_str()));
            assert_eq!(
                own,
                Some(&canary),
                "{}: {what} of `{message:?}` quotes {canary}",
                case.name
            );
        }
    };
    for row in &fixture.activity_events {
        quoted("activity", row.message.as_ref(), row.payload.to_string());
    }
    for row in &fixture.fanout_outbox {
        quoted("outbox", row.message.as_ref(), row.payload.to_string());
    }
    for row in &fixture.stream_events {
        quoted(
            "stream event",
            row.message.as_ref(),
            row.payload_json.to_string(),
        );
    }
    for row in &fixture.conversation_index {
        quoted(
            "conversation index",
            row.last_message.as_ref(),
            row.projection_json.to_string(),
        );
    }
    for row in &fixture.attachments {
        if let crate::fixtures::AttachmentOwner::Message(message) = &row.owner {
            let canary = &by_message[message.as_str()];
            assert!(
                row.file_name.contains(canary.as_str()),
                "{}: {}",
                case.name,
                row.file_name
            );
        }
    }
}

/// Every recovery point of a runtime's own strategy matches the agent's session exactly, as
/// the shipped fixtures' do.
fn check_recovery_refs(case: &GeneratedCase, fixture: &Fixture) {
    for point in &fixture.recovery_points {
        let agent = fixture.agent(&point.agent).expect("agent");
        let strategy = match agent.runtime.as_str() {
            "codex" => "codex_app_server_turns",
            "claude" => "claude_session_resume_at",
            "opencode" | "builtin" => "opencode_session_revert",
            _ => continue,
        };
        if point.strategy != strategy {
            continue;
        }
        let session = &fixture.runtime_sessions[&agent.id];
        let ours = |key: &str| session[key].as_str().map(str::to_owned);
        let r = &point.recovery_ref;
        let what = format!(
            "{}: point of `{}` on `{}`",
            case.name, agent.id, point.message
        );
        match strategy {
            "codex_app_server_turns" => {
                assert_eq!(
                    r["threadId"].as_str().map(str::to_owned),
                    ours("thread_id"),
                    "{what}"
                );
                assert_eq!(agent.session, ours("thread_id"), "{what}");
                let turns = session["turns"].as_array().expect("turns");
                let k = turns
                    .iter()
                    .position(|t| t["input_message"] == point.message.as_str())
                    .expect("the point's message is a turn's input");
                assert_eq!(r["turnCount"].as_u64(), Some(k as u64), "{what}");
            }
            "claude_session_resume_at" => {
                assert_eq!(
                    r["sessionId"].as_str().map(str::to_owned),
                    ours("session_id"),
                    "{what}"
                );
                let entries = session["transcript"].as_array().expect("transcript");
                let k = entries
                    .iter()
                    .position(|e| e["type"] == "user" && e["message"] == point.message.as_str())
                    .expect("the point's message is a user entry");
                let boundary = if k == 0 {
                    Value::Null
                } else {
                    entries[k - 1]["uuid"].clone()
                };
                assert_eq!(r["boundaryUuid"], boundary, "{what}");
            }
            _ => {
                assert_eq!(
                    r["sessionId"].as_str().map(str::to_owned),
                    ours("session_id"),
                    "{what}"
                );
                let messages = session["messages"].as_array().expect("messages");
                let user = messages
                    .iter()
                    .find(|m| m["role"] == "user" && m["message"] == point.message.as_str())
                    .expect("the point's message is a user message");
                assert_eq!(r["messageId"], user["id"], "{what}");
            }
        }
    }
}

/// The conditions of spec sections 3 to 5 a request meets, as the aims name them. Only a
/// test's check of what the generator claims to have built; not an oracle of the outcome
/// (which guard an implementation reports first, what it answers, what it changes).
fn conditions(fixture: &Fixture, request: &rewind_driver_protocol::RewindRequest) -> BTreeSet<Aim> {
    let mut found = BTreeSet::new();
    let actor = match &request.actor {
        Actor::Human(id) => Some(id.as_str()),
        Actor::Agent(_) => {
            found.insert(Aim::AgentInitiator);
            None
        }
        Actor::System => {
            found.insert(Aim::SystemInitiator);
            None
        }
    };
    let Some(target) = fixture.message(&request.target_message_id) else {
        return found;
    };
    // Whose rewind it is: the actor's, or (an agent or the system asking) the target author's.
    let initiator = actor.or(match &target.author {
        Author::Human(h) => Some(h.as_str()),
        _ => None,
    });
    if target.scope != request.scope_id {
        found.insert(Aim::WrongScope);
    }
    if target.is_rewound() {
        found.insert(Aim::AlreadyRewound);
    }
    match &target.author {
        Author::System | Author::Service | Author::App => {
            found.insert(Aim::SystemTarget);
        }
        Author::Human(h) if initiator == Some(h.as_str()) => {}
        _ => {
            found.insert(Aim::NotOwnTarget);
        }
    }
    if target.tier == StorageTier::Cold {
        found.insert(Aim::ColdTarget);
    }
    let scope = fixture.scope(&target.scope).expect("target scope");
    let suffix: Vec<_> = scope
        .messages
        .iter()
        .filter(|m| m.seq >= target.seq && !m.is_rewound())
        .collect();
    let mut reached: Vec<_> = suffix.clone();
    let mut rewound_scopes = vec![scope.id.clone()];
    for thread in fixture
        .scopes
        .iter()
        .filter(|s| s.archived_at.is_none() && s.parent.is_some())
    {
        let parent = &thread.parent.as_ref().expect("parent").message;
        let Some(position) = suffix.iter().position(|m| &m.id == parent) else {
            continue;
        };
        if position + 1 < suffix.len() {
            found.insert(Aim::LaterReplyThread);
        } else {
            rewound_scopes.push(thread.id.clone());
            reached.extend(thread.messages.iter().filter(|m| !m.is_rewound()));
        }
    }
    let mut agents = BTreeSet::new();
    for message in &reached {
        if message.tier == StorageTier::Cold && message.id != target.id {
            found.insert(Aim::ColdTarget);
        }
        match &message.author {
            Author::Human(h) if initiator.is_some_and(|i| i != h) => {
                found.insert(Aim::OtherHumanLater);
            }
            Author::Agent(a) => {
                agents.insert(a.clone());
            }
            _ => {}
        }
    }
    let ids: BTreeSet<&str> = reached.iter().map(|m| m.id.as_str()).collect();
    for row in &fixture.fanout_outbox {
        if let (Some(m), crate::fixtures::Party::Agent(a)) = (&row.message, &row.recipient) {
            if ids.contains(m.as_str()) {
                agents.insert(a.clone());
            }
        }
    }
    for point in fixture
        .recovery_points
        .iter()
        .filter(|p| ids.contains(p.message.as_str()))
    {
        agents.insert(point.agent.clone());
    }
    let global = |id: &str| fixture.message(id).map_or(0, |m| m.global_seq);
    for id in agents {
        let agent = fixture.agent(&id).expect("agent");
        let machine_gone = agent
            .machine
            .as_ref()
            .is_some_and(|m| fixture.machines.iter().any(|x| &x.id == m && x.deleted));
        if agent.deleted || machine_gone {
            found.insert(Aim::AgentUnavailable);
        }
        let strategy = match agent.runtime.as_str() {
            "codex" => "codex_app_server_turns",
            "claude" => "claude_session_resume_at",
            "opencode" | "builtin" => "opencode_session_revert",
            _ => {
                found.insert(Aim::UnsupportedRuntime);
                continue;
            }
        };
        let point = fixture
            .recovery_points
            .iter()
            .filter(|p| p.agent == id && ids.contains(p.message.as_str()))
            .min_by_key(|p| global(&p.message));
        let Some(point) = point.filter(|p| p.strategy == strategy) else {
            found.insert(Aim::MissingRecoveryPoint);
            continue;
        };
        // An agent's message after its first participation answers an input; if that input
        // is from before the target, the agent took part before its first recovery point.
        let touch = global(&point.message);
        let late = reached
            .iter()
            .any(|m| m.author == Author::Agent(id.clone()) && m.global_seq < touch);
        if late {
            found.insert(Aim::MissingRecoveryPoint);
        }
        let elsewhere = |scope: &String| !rewound_scopes.contains(scope);
        let authored = fixture.messages().any(|m| {
            m.author == Author::Agent(id.clone()) && m.global_seq > touch && elsewhere(&m.scope)
        });
        let delivered = fixture.fanout_outbox.iter().any(|row| {
            row.recipient == crate::fixtures::Party::Agent(id.clone())
                && matches!(row.status, OutboxStatus::Leased | OutboxStatus::Delivered)
                && row.message.as_ref().is_some_and(|m| global(m) > touch)
                && elsewhere(&row.scope)
        });
        if authored || delivered {
            found.insert(Aim::ActivityElsewhere);
        }
    }
    found
}

/// A case aimed at completing meets every condition; a case aimed at guards meets those.
fn check_aim(case: &GeneratedCase, fixture: &Fixture) {
    let found = conditions(fixture, &case.request);
    let shape = &case.shape;
    if shape.aim == Aim::Complete {
        assert!(
            found.is_empty() && shape.also.is_empty(),
            "{}: aimed at completing, yet {found:?} (also {:?})\n{}",
            case.name,
            shape.also,
            case.yaml
        );
    } else {
        for aim in std::iter::once(shape.aim).chain(shape.also.iter().copied()) {
            assert!(
                found.contains(&aim),
                "{}: aimed at {aim}, found {found:?}\n{}",
                case.name,
                case.yaml
            );
        }
    }
}
