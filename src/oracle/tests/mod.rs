//! End-to-end tests of the oracle over hand-built snapshots: [`predictions`] for each guard and
//! reading, [`judgements`] of a correct rewind and of typical wrong ones (each must be caught),
//! and the [`consistency`] checks.

mod consistency;
mod judgements;
mod predictions;

pub(super) use std::collections::BTreeSet;

pub(super) use rewind_driver_protocol::{Actor, RewindRequest, RewindResponse};
pub(super) use serde_json::{json, Value};

pub(super) use super::spec::*;
pub(super) use super::testkit::{apply, at, Choices, Seed, REWIND_AT};
pub(super) use super::*;

pub(super) fn request(actor: Actor, scope: &str, target: &str) -> RewindRequest {
    RewindRequest {
        actor,
        scope_id: scope.to_owned(),
        target_message_id: target.to_owned(),
    }
}

pub(super) fn scope_of(seed: &Seed, message: &str) -> String {
    seed.find("scope_messages", message)
        .and_then(|r| r.get("scope_id").and_then(Value::as_str))
        .unwrap_or("nowhere")
        .to_owned()
}

/// `who` rewinds the target's own scope, on every runtime.
pub(super) fn rewind(seed: &Seed, who: &str, target: &str) -> Prediction {
    rewind_on(seed, who, target, &Deployment::every_runtime())
}

pub(super) fn rewind_on(
    seed: &Seed,
    who: &str,
    target: &str,
    deployment: &Deployment,
) -> Prediction {
    let req = request(Actor::Human(who.into()), &scope_of(seed, target), target);
    predict(&seed.state(), &req, deployment)
}

/// The messages of the refusals the prediction allows (`*` for any message).
pub(super) fn refusal_texts(p: &Prediction) -> BTreeSet<String> {
    p.refusals()
        .flat_map(|(refusal, _)| match &refusal.texts {
            RefusalTexts::OneOf(set) => set.iter().cloned().collect::<Vec<_>>(),
            RefusalTexts::Any => vec!["*".to_owned()],
            RefusalTexts::AnyExcept(_) => vec!["* but".to_owned()],
        })
        .collect()
}

pub(super) fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// The rewound ids of each allowed completion.
pub(super) fn completions(p: &Prediction) -> Vec<Vec<String>> {
    p.completions().map(|(e, _)| e.rewound_ids()).collect()
}

pub(super) fn refused_only(p: &Prediction, messages: &[&str]) {
    assert!(completions(p).is_empty(), "{p:#?}");
    assert_eq!(refusal_texts(p), set(messages), "{p:#?}");
}

pub(super) fn the_effect(p: &Prediction) -> Effect {
    let all: Vec<&Effect> = p.completions().map(|(e, _)| e).collect();
    assert_eq!(all.len(), 1, "one completion: {p:#?}");
    all[0].clone()
}

pub(super) fn check(
    before: &Seed,
    after: &Seed,
    answer: &RewindResponse,
    p: &Prediction,
) -> Judgement {
    judge(&before.state(), &after.state(), answer, p)
}

pub(super) fn assert_ok(j: &Judgement) {
    assert!(j.is_ok(), "{j}");
}

/// The judgement must be wrong and name `fragment` in one discrepancy.
pub(super) fn assert_caught(j: &Judgement, fragment: &str) {
    assert!(!j.is_ok(), "a wrong implementation passed: {j}");
    assert!(
        j.discrepancies()
            .iter()
            .any(|d| d.to_string().contains(fragment)),
        "no discrepancy names {fragment:?}:\n{j}"
    );
}

pub(super) fn refused(message: &str) -> RewindResponse {
    RewindResponse::Refused {
        code: "x".into(),
        message: message.into(),
        operation_id: None,
    }
}

/// The DM rewound correctly at `m-3`: its seed, prediction, after-state and answer.
pub(super) fn dm_rewound(choices: Choices) -> (Seed, Prediction, Seed, RewindResponse) {
    let seed = Seed::dm();
    let p = rewind(&seed, "alice", "m-3");
    let (after, answer) = apply(&seed, &the_effect(&p), "op-1", choices);
    (seed, p, after, answer)
}

/// A channel of alice's: `c-1`..`c-3`, then a thread `th` on `fork` (`t-1` alice, `t-2`
/// `author`).
pub(super) fn channel_with_thread(fork: &str, author: &str) -> Seed {
    let mut seed = Seed::new();
    seed.human("alice").human("bob");
    seed.scope("ch", "channel");
    seed.say("ch", "c-1", "alice")
        .say("ch", "c-2", "alice")
        .say("ch", "c-3", "alice");
    seed.member("ch", "alice", 3, 3, 3)
        .member("ch", "bob", 3, 3, 3);
    seed.thread("th", "ch", fork)
        .say("th", "t-1", "alice")
        .say("th", "t-2", author);
    seed.member("th", "alice", 2, 5, 5);
    seed.insert(
        "scope_sync_dirty",
        json!({"scope_id": "th", "latest_message_seq": 2, "latest_activity_seq": 1,
               "updated_at": at(0)}),
    );
    seed.projections("t-2");
    seed.derive();
    seed
}

pub(super) fn membership_key(seed: &Seed, member: &str) -> String {
    seed.rows("scope_memberships")
        .find(|r| {
            r.get("user_id") == Some(&json!(member)) || r.get("agent_id") == Some(&json!(member))
        })
        .and_then(|r| r.get("id"))
        .map(|v| v.to_string())
        .expect("a membership")
}

pub(super) fn outbox_key(seed: &Seed, message: &str, recipient: &str) -> String {
    seed.rows("scope_fanout_outbox")
        .find(|r| {
            r.get("message_id") == Some(&json!(message))
                && r.get("recipient_id") == Some(&json!(recipient))
        })
        .and_then(|r| r.get("id"))
        .map(|v| v.to_string())
        .expect("an outbox row")
}

/// The consistency violations of `after`, from the DM's start, must name `fragment`.
pub(super) fn assert_inconsistent(start: &Seed, after: &Seed, fragment: &str) {
    let found = consistency(&after.state(), Some(&start.state()));
    assert!(
        found.iter().any(|v| v.to_string().contains(fragment)),
        "no violation names {fragment:?}: {found:#?}"
    );
}

/// Every reading the oracle decides on its own is in the ambiguity register, step-wide on the
/// spec model's step, with the reading ids the oracle reports.
#[test]
fn the_oracles_own_ambiguities_are_registered() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("features/ambiguities.yaml");
    let register = crate::catalog::Register::load(&path).expect("the register loads");
    for (id, _) in crate::oracle::ORACLE_AMBIGUITIES {
        let entry = register
            .get(id)
            .unwrap_or_else(|| panic!("`{id}` is not in {}", path.display()));
        assert!(
            entry
                .steps
                .iter()
                .any(|s| s == "the outcome is what the spec model predicts"),
            "`{id}` must apply to the spec model's step"
        );
    }
    for (id, readings) in [
        (
            "operation-rewound-ids",
            &["every-rewound-message", "primary-boundary", "not-recorded"][..],
        ),
        (
            "first-participation",
            &["earliest-touch", "later-touch"][..],
        ),
        ("suppressed-row-payload", &["kept", "scrubbed"][..]),
    ] {
        let entry = register.get(id).expect("registered");
        for reading in readings {
            assert!(
                entry.readings.iter().any(|r| r.id == *reading),
                "`{id}` has no reading `{reading}`"
            );
        }
    }
}
