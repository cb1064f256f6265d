//! Tests of the generator: generated fixtures load (and their runtime sessions seed into the
//! mocks), generation is deterministic, canaries are unique, shrinking keeps cases valid, the
//! conditions each case aims at hold, and the shapes of a run cover what the generator claims.
//!
//! Seeding into PostgreSQL is tested when `REWIND_TEST_DATABASE_URL` names a server (as the
//! fixture seeding tests are; `REWIND_FUZZ_SEED_CASES` sets how many cases, 120 by default);
//! without it that test prints a note and passes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use proptest::strategy::ValueTree;
use rewind_driver_protocol::Actor;
use serde_json::Value;

use super::*;
use crate::fixtures::{parse_fixture, Author, Fixture, OutboxStatus, ScopeKind, StorageTier};
use crate::leak_scan::canaries_in;
use crate::mocks::MockRuntimes;

/// The seeds and case counts the loading tests walk: a few hundred cases.
const SEEDS: [(u64, u64); 3] = [(1, 120), (0xdead_beef, 100), (u64::MAX, 80)];

/// Loads a generated case through the fixture loader, failing with the YAML on error.
fn load(case: &GeneratedCase) -> Fixture {
    let path = PathBuf::from(format!("{}.yaml", case.name));
    match parse_fixture(&path, &case.yaml) {
        Ok(fixture) => fixture,
        Err(err) => panic!("{}: {err}\n{}", case.name, case.yaml),
    }
}

/// The checks every generated case must pass besides loading.
fn check_case(case: &GeneratedCase, fixture: &Fixture) {
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

#[test]
fn generated_cases_load_and_hold_together() {
    for (seed, count) in SEEDS {
        for index in 0..count {
            let (case, _) = case(seed, index);
            let fixture = load(&case);
            check_case(&case, &fixture);
        }
    }
}

#[test]
fn generation_is_deterministic_and_cases_differ() {
    let mut seen = BTreeSet::new();
    for index in 0..40 {
        let (first, _) = case(7, index);
        let (again, _) = case(7, index);
        assert_eq!(first.yaml, again.yaml, "case {index}");
        assert_eq!(first.request, again.request);
        assert_eq!(first.shape, again.shape);
        // Through the public strategy and the case's random generator, the same case.
        let mut runner = proptest::test_runner::TestRunner::new_with_rng(
            proptest::test_runner::Config::default(),
            case_rng(7, index),
        );
        let tree = proptest::strategy::Strategy::new_tree(
            &case_strategy(&GenConfig::default(), 7, index),
            &mut runner,
        )
        .expect("tree");
        assert_eq!(
            tree.current().yaml,
            first.yaml,
            "case {index} via the strategy"
        );
        // Cases differ beyond their names.
        let body = first.yaml.replace(&format!("{:x}-{index}", 7), "");
        assert!(seen.insert(body), "case {index} repeats an earlier case");
    }
    let (other_seed, _) = case(8, 0);
    assert_ne!(other_seed.yaml, case(7, 0).0.yaml);
}

#[test]
fn canaries_are_unique_across_a_run() {
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (seed, count) in [(1u64, 150u64), (0x10, 50), (0x1, 0)] {
        for index in 0..count {
            let (case, _) = case(seed, index);
            let fixture = load(&case);
            for canary in fixture.canaries() {
                if let Some(first) = seen.insert(canary.clone(), case.name.clone()) {
                    panic!("{canary} in {} and {first}", case.name);
                }
            }
        }
    }
    assert!(seen.len() > 1000, "only {} canaries", seen.len());
}

#[test]
fn shrinking_keeps_cases_valid() {
    let mut simplified = 0;
    for index in 0..24 {
        let (first, mut tree) = case(0x5eed, index);
        let mut steps = 0;
        let mut last = first.yaml.clone();
        // Accept a few simplifications (as a failing property would), reject some.
        while steps < 30 && tree.simplify() {
            steps += 1;
            let current = tree.current();
            let fixture = load(&current);
            check_case(&current, &fixture);
            assert_eq!(current.name, first.name);
            if current.yaml != last {
                simplified += 1;
            }
            if steps % 5 == 4 && tree.complicate() {
                let current = tree.current();
                let fixture = load(&current);
                check_case(&current, &fixture);
            }
            last = current.yaml;
        }
        assert!(steps > 0, "case {index} cannot be simplified");
    }
    assert!(
        simplified > 100,
        "only {simplified} simplifications changed a case"
    );
}

#[test]
fn shrinking_reaches_a_small_case() {
    // Simplify as far as it goes, accepting every step: the result is small and still valid.
    let (first, mut tree) = case(3, 11);
    let mut steps = 0;
    while steps < 2000 && tree.simplify() {
        steps += 1;
    }
    let smallest = tree.current();
    let fixture = load(&smallest);
    check_case(&smallest, &fixture);
    assert!(
        smallest.shape.messages <= 4 && smallest.shape.messages < first.shape.messages.max(5),
        "{} messages left of {}:\n{}",
        smallest.shape.messages,
        first.shape.messages,
        smallest.yaml
    );
    assert_eq!(smallest.shape.aim, Aim::Complete);
}

#[test]
fn replay_rebuilds_any_case_along_a_walk() {
    for index in 0..6 {
        let (_, mut tree) = case(0xabc, index);
        for step in 0..25 {
            if step % 7 == 6 {
                tree.complicate();
            } else if !tree.simplify() {
                break;
            }
            let current = tree.current();
            let path = tree.path();
            assert!(
                current.yaml.contains(&format!("{path:?}")),
                "the header names {path}"
            );
            let (again, _) = replay(&GenConfig::default(), 0xabc, index, &path).expect("path");
            assert_eq!(again.yaml, current.yaml, "case {index} along {path}");
        }
    }
    assert!(replay(&GenConfig::default(), 1, 1, "x3").is_none());
    assert!(replay(&GenConfig::default(), 1, 1, "s").is_none());
    assert_eq!(
        replay(&GenConfig::default(), 1, 1, "")
            .expect("empty path")
            .0
            .yaml,
        case(1, 1).0.yaml
    );
}

/// The shapes of `count` cases of run `seed`.
fn shapes(seed: u64, count: u64) -> Vec<Shape> {
    (0..count).map(|index| case(seed, index).0.shape).collect()
}

#[test]
fn shapes_cover_what_the_generator_claims() {
    let shapes = shapes(1, 500);
    let count = |f: &dyn Fn(&Shape) -> bool| shapes.iter().filter(|s| f(s)).count();
    for kind in TargetScope::ALL {
        assert!(
            count(&|s| s.target_scope == kind) >= 50,
            "target scope {kind:?}"
        );
    }
    for runtime in ["codex", "claude", "opencode", "builtin"] {
        assert!(
            count(&|s| s.runtimes.contains(runtime)) >= 50,
            "runtime {runtime}"
        );
    }
    assert!(
        count(&|s| s
            .runtimes
            .iter()
            .any(|r| !["codex", "claude", "opencode", "builtin"].contains(&r.as_str())))
            >= 10,
        "unsupported runtimes in the suffix"
    );
    assert!(
        count(&|s| s.runtimes.is_empty()) >= 20,
        "human-only suffixes"
    );
    assert!(
        count(&|s| s.cascade && s.target_scope != TargetScope::ReplyThread) >= 50,
        "cascades"
    );
    assert!(
        count(&|s| s.cascade && s.aim == Aim::Complete) >= 20,
        "completing cascades"
    );
    for aim in Aim::ALL {
        assert!(count(&|s| s.aim == aim) >= 10, "aim {aim}");
    }
    let complete = count(&|s| s.aim == Aim::Complete);
    assert!(
        (175..=325).contains(&complete),
        "{complete} of 500 aimed at completing"
    );
    assert!(
        count(&|s| !s.also.is_empty()) >= 30,
        "cases with more than one guard"
    );
    for feature in Feature::ALL {
        assert!(
            count(&|s| s.features.contains(&feature)) >= 10,
            "feature {feature:?}"
        );
    }
    for projection in Projection::ALL {
        assert!(
            count(&|s| s.projections.contains(&projection)) >= 25,
            "projection {projection:?}"
        );
    }
    for len in [
        SuffixLen::One,
        SuffixLen::Few,
        SuffixLen::Several,
        SuffixLen::Many,
    ] {
        assert!(
            count(&|s| s.suffix_len == len) >= 10,
            "suffix length {len:?}"
        );
    }
    let largest = shapes.iter().map(|s| s.messages).max().unwrap_or(0);
    let mean = shapes.iter().map(|s| s.messages).sum::<usize>() / shapes.len();
    assert!(
        mean <= 40 && largest <= 90,
        "mean {mean}, largest {largest} messages"
    );
}

#[test]
fn size_knobs_bound_the_cases() {
    let small = GenConfig {
        max_background: 0,
        max_other_humans: 1,
        max_agents: 1,
        max_cold_rounds: 0,
        max_prefix_rounds: 1,
        max_suffix_rounds: 0,
        max_threads: 0,
        max_thread_rounds: 1,
        max_replies: 1,
    };
    for index in 0..60 {
        let (case, _) = case_with(&small, 9, index);
        let fixture = load(&case);
        check_case(&case, &fixture);
        assert!(
            case.shape.messages <= 16,
            "{}: {} messages",
            case.name,
            case.shape.messages
        );
        let main_lines = fixture
            .scopes
            .iter()
            .filter(|s| s.kind != ScopeKind::ReplyThread)
            .count();
        assert!(main_lines <= 3, "{}: {main_lines} conversations", case.name);
    }
}

/// Prints the shape histogram of 1000 cases of seed 1 (`cargo test --lib fuzz -- --ignored
/// --nocapture histogram`).
#[test]
#[ignore = "prints a report"]
fn histogram() {
    let shapes = shapes(1, 1000);
    let mut fields: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    let mut add = |field: &str, value: String| {
        *fields
            .entry(field.to_owned())
            .or_default()
            .entry(value)
            .or_default() += 1;
    };
    for s in &shapes {
        add("target scope", s.target_scope.name().to_owned());
        add("suffix length", s.suffix_len.name().to_owned());
        add("cascade", s.cascade.to_string());
        add("aim", s.aim.to_string());
        for also in &s.also {
            add("also", also.to_string());
        }
        if s.runtimes.is_empty() {
            add("runtime in suffix", "(none)".to_owned());
        }
        for runtime in &s.runtimes {
            add("runtime in suffix", runtime.clone());
        }
        for feature in &s.features {
            add("feature", feature.name().to_owned());
        }
        for projection in &s.projections {
            add("projection on suffix", projection.name().to_owned());
        }
        add(
            "messages",
            format!(
                "{:>2}-{:>2}",
                s.messages / 10 * 10,
                s.messages / 10 * 10 + 9
            ),
        );
    }
    for (field, values) in fields {
        println!("{field}:");
        for (value, n) in values {
            println!("  {value:<24} {n}");
        }
    }
}

#[tokio::test]
async fn generated_cases_seed_into_postgres() {
    use sqlx::{ConnectOptions, Connection};
    let Ok(url) = std::env::var("REWIND_TEST_DATABASE_URL") else {
        eprintln!("note: REWIND_TEST_DATABASE_URL is unset; skipping seeding generated cases");
        return;
    };
    let server: sqlx::postgres::PgConnectOptions = url.parse().expect("database url");
    let name = format!("fuzz_seed_{}", std::process::id());
    let mut admin = server.connect().await.expect("connect");
    for sql in [
        format!("DROP DATABASE IF EXISTS \"{name}\""),
        format!("CREATE DATABASE \"{name}\""),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&mut admin)
            .await
            .expect("create");
    }
    let mut conn = server
        .clone()
        .database(&name)
        .connect()
        .await
        .expect("connect");
    rewind_reference::MIGRATOR
        .run(&mut conn)
        .await
        .expect("migrate");
    let count: u64 = std::env::var("REWIND_FUZZ_SEED_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(120);
    for index in 0..count {
        let (case, _) = case(0x5eed, index);
        let fixture = load(&case);
        // Each case in a transaction rolled back, so that the next starts from empty tables.
        let mut tx = conn.begin().await.expect("begin");
        if let Err(err) = crate::fixtures::seed_fixture(&mut tx, &fixture).await {
            panic!("{}: {err}\n{}", case.name, case.yaml);
        }
        let seeded: i64 = sqlx::query_scalar("SELECT count(*) FROM scope_messages")
            .fetch_one(&mut *tx)
            .await
            .expect("count");
        assert_eq!(seeded, fixture.messages().count() as i64, "{}", case.name);
        tx.rollback().await.expect("rollback");
    }
    let _ = conn.close().await;
    let drop = format!("DROP DATABASE IF EXISTS \"{name}\"");
    sqlx::query(sqlx::AssertSqlSafe(drop))
        .execute(&mut admin)
        .await
        .expect("drop");
}
