//! Predictions: each guard of sections 3 to 5 and each reading that splits the outcome.

use super::*;

#[test]
fn a_plain_rewind_completes_with_the_suffix_from_the_target() {
    let p = rewind(&Seed::dm(), "alice", "m-3");
    assert!(refusal_texts(&p).is_empty(), "{p:#?}");
    let effect = the_effect(&p);
    assert_eq!(effect.primary.message_ids, ["m-3", "m-4"]);
    assert_eq!(effect.primary.from_seq, 3);
    assert_eq!(effect.primary.scope_id, "dm");
    assert!(effect.cascades.is_empty());
    assert_eq!(effect.related_agents, set(&["cody"]));
}

#[test]
fn unworded_refusals_accept_any_message() {
    let seed = Seed::dm();
    let state = seed.state();
    let any = |req: RewindRequest| {
        let p = predict(&state, &req, &Deployment::every_runtime());
        refused_only(&p, &["*"]);
        assert!(p.refusals().all(|(r, _)| r.texts.accepts("whatever")));
    };
    any(request(Actor::Agent("cody".into()), "dm", "m-1"));
    any(request(Actor::System, "dm", "m-1"));
    any(request(Actor::Human("alice".into()), "dm", "m-404"));
    any(request(Actor::Human("alice".into()), "elsewhere", "m-1"));
    let mut seed = Seed::dm();
    seed.scope("other", "dm")
        .say("other", "o-1", "alice")
        .derive();
    let p = predict(
        &seed.state(),
        &request(Actor::Human("alice".into()), "other", "m-1"),
        &Deployment::every_runtime(),
    );
    refused_only(&p, &["*"]);
    let mut seed = Seed::dm();
    seed.set(
        "scope_messages",
        "m-3",
        "metadata",
        json!({"messageRecall": {"status": "rewound"}}),
    );
    refused_only(&rewind(&seed, "alice", "m-3"), &["*"]);
}

#[test]
fn the_target_must_be_the_initiators_own_human_message() {
    let mut seed = Seed::dm();
    seed.member("dm", "bob", 0, 0, 0);
    refused_only(
        &rewind(&seed, "bob", "m-3"),
        &[NOT_OWN_MESSAGE, OTHER_HUMAN],
    );
    // cody's own message: not alice's, and cody holds no recovery point on it either (guards
    // are unordered).
    refused_only(
        &rewind(&seed, "alice", "m-4"),
        &[NOT_OWN_MESSAGE, RECOVERY_POINT_MISSING],
    );
    let mut seed = Seed::dm();
    seed.say("dm", "h-1", "bob").derive();
    refused_only(
        &rewind(&seed, "alice", "h-1"),
        &[NOT_OWN_MESSAGE, OTHER_HUMAN],
    );
    let mut seed = Seed::dm();
    for kind in ["system", "service", "app"] {
        let id = format!("x-{kind}");
        seed.say("dm", &id, kind);
    }
    seed.derive();
    for kind in ["system", "service", "app"] {
        refused_only(
            &rewind(&seed, "alice", &format!("x-{kind}")),
            &[SYSTEM_MESSAGE],
        );
    }
}

#[test]
fn cold_targets_and_cold_suffixes_cross_the_boundary() {
    let mut seed = Seed::dm();
    seed.set("scope_messages", "m-3", "storage_tier", json!("cold"));
    refused_only(&rewind(&seed, "alice", "m-3"), &[HOT_COLD_BOUNDARY]);
    let mut seed = Seed::dm();
    seed.set("scope_messages", "m-4", "storage_tier", json!("cold"));
    refused_only(&rewind(&seed, "alice", "m-1"), &[HOT_COLD_BOUNDARY]);
}

#[test]
fn another_humans_later_message_blocks_and_guards_are_unordered() {
    let mut seed = Seed::dm();
    seed.say("dm", "m-5", "bob").derive();
    refused_only(&rewind(&seed, "alice", "m-3"), &[OTHER_HUMAN]);
    seed.thread("th", "dm", "m-4")
        .say("th", "t-1", "alice")
        .derive();
    let p = rewind(&seed, "alice", "m-3");
    refused_only(&p, &[OTHER_HUMAN, LATER_REPLY_THREAD]);
    assert!(p
        .refusals()
        .any(|(_, r)| r.get(readings::GUARD_ORDER).is_some()));
}

#[test]
fn a_preparing_operation_on_the_scope_refuses() {
    let mut seed = Seed::dm();
    seed.insert(
        "rewind_operations",
        json!({"id": "op-0", "workspace_id": "ws", "thread_id": "dm", "target_message_id": "m-1",
               "initiator_user_id": "alice", "status": "preparing", "plan": {},
               "rewound_message_ids": [], "error_code": null, "error_message": null,
               "created_at": at(0), "updated_at": at(0), "completed_at": null}),
    );
    refused_only(&rewind(&seed, "alice", "m-3"), &[REWIND_IN_PROGRESS]);
}

#[test]
fn a_recalled_target_or_a_former_member_is_allowed_and_refused() {
    let mut seed = Seed::dm();
    seed.set(
        "scope_messages",
        "m-3",
        "metadata",
        json!({"messageRecall": {"status": "recalled"}}),
    );
    let p = rewind(&seed, "alice", "m-3");
    assert_eq!(completions(&p).len(), 1);
    assert_eq!(refusal_texts(&p), set(&["*"]));
    let mut seed = Seed::dm();
    seed.retain("scope_memberships", |r| {
        r.get("user_id") != Some(&json!("alice"))
    });
    let p = rewind(&seed, "alice", "m-3");
    assert_eq!(completions(&p).len(), 1);
    assert_eq!(refusal_texts(&p), set(&["*"]));
}

#[test]
fn a_thread_before_the_tail_blocks() {
    let seed = channel_with_thread("c-2", "alice");
    refused_only(&rewind(&seed, "alice", "c-1"), &[LATER_REPLY_THREAD]);
}

#[test]
fn the_targets_own_tail_thread_cascades() {
    let seed = channel_with_thread("c-3", "alice");
    let effect = the_effect(&rewind(&seed, "alice", "c-3"));
    assert_eq!(effect.rewound_ids(), ["c-3", "t-1", "t-2"]);
    assert_eq!(effect.cascades[0].scope_id, "th");
    assert_eq!(effect.cascades[0].parent_message_id, "c-3");
    assert_eq!(effect.cascades[0].from_seq, 1);
}

#[test]
fn a_tail_thread_below_an_earlier_target_cascades_or_refuses() {
    let seed = channel_with_thread("c-3", "alice");
    let p = rewind(&seed, "alice", "c-2");
    assert_eq!(completions(&p), [vec!["c-2", "c-3", "t-1", "t-2"]]);
    assert_eq!(refusal_texts(&p), set(&[LATER_REPLY_THREAD]));
    let (_, readings) = p.completions().next().expect("a completion");
    assert_eq!(
        readings.get(readings::TAIL_FORK_BELOW_TARGET),
        Some(&set(&["cascade"]))
    );
}

#[test]
fn another_human_in_the_cascade_blocks_and_archived_threads_are_ignored() {
    let seed = channel_with_thread("c-3", "bob");
    refused_only(&rewind(&seed, "alice", "c-3"), &[OTHER_HUMAN]);
    let mut seed = channel_with_thread("c-2", "bob");
    seed.set("scopes", "th", "archived_at", json!(at(0)))
        .derive();
    assert_eq!(
        completions(&rewind(&seed, "alice", "c-1")),
        [vec!["c-1", "c-2", "c-3"]]
    );
}

#[test]
fn a_cold_message_in_the_cascade_is_refused_and_allowed() {
    let mut seed = channel_with_thread("c-3", "alice");
    seed.set("scope_messages", "t-1", "storage_tier", json!("cold"));
    let p = rewind(&seed, "alice", "c-3");
    assert_eq!(completions(&p).len(), 1);
    assert_eq!(refusal_texts(&p), set(&[HOT_COLD_BOUNDARY]));
}

#[test]
fn runtimes_without_rewind_support_refuse() {
    for runtime in [
        "gemini",
        "opencode_session_revert",
        "codex_app_server_turns",
    ] {
        let mut seed = Seed::dm();
        seed.set("agents", "cody", "runtime", json!(runtime));
        refused_only(&rewind(&seed, "alice", "m-3"), &[AGENT_UNSUPPORTED]);
    }
    let seed = Seed::dm();
    let lacking = Deployment::with_runtimes(["claude", "opencode"]);
    refused_only(
        &rewind_on(&seed, "alice", "m-3", &lacking),
        &[AGENT_UNSUPPORTED],
    );
    let mut seed = Seed::dm();
    seed.set("agents", "cody", "runtime", json!("builtin"));
    seed.set(
        "message_recovery_points",
        "rp-m-3-cody",
        "strategy",
        json!("opencode_session_revert"),
    );
    assert_eq!(completions(&rewind(&seed, "alice", "m-3")).len(), 1);
}

#[test]
fn the_required_recovery_point_is_the_earliest_on_the_suffix_of_the_runtimes_strategy() {
    let mut seed = Seed::dm();
    seed.retain("message_recovery_points", |r| {
        r.get("message_id") != Some(&json!("m-3"))
    });
    refused_only(&rewind(&seed, "alice", "m-3"), &[RECOVERY_POINT_MISSING]);
    let mut seed = Seed::dm();
    seed.set(
        "message_recovery_points",
        "rp-m-3-cody",
        "strategy",
        json!("claude_session_resume_at"),
    );
    refused_only(&rewind(&seed, "alice", "m-3"), &[RECOVERY_POINT_MISSING]);
    // A point only after the agent's first rewound message: completing and refusing both pass.
    let mut seed = Seed::dm();
    seed.say("dm", "m-5", "alice").derive();
    seed.retain("message_recovery_points", |r| {
        r.get("message_id") != Some(&json!("m-3"))
    });
    seed.point("cody", "m-5");
    let p = rewind(&seed, "alice", "m-3");
    assert_eq!(completions(&p).len(), 1);
    assert_eq!(refusal_texts(&p), set(&[RECOVERY_POINT_MISSING]));
}

#[test]
fn deleted_agents_and_machines_are_unavailable_and_a_missing_machine_is_doubtful() {
    let mut seed = Seed::dm();
    seed.set("agents", "cody", "deleted_at", json!(at(0)));
    refused_only(&rewind(&seed, "alice", "m-3"), &[AGENT_UNAVAILABLE]);
    let mut seed = Seed::dm();
    seed.set("machines", "box", "deleted_at", json!(at(0)));
    refused_only(&rewind(&seed, "alice", "m-3"), &[AGENT_UNAVAILABLE]);
    let mut seed = Seed::dm();
    seed.set("agents", "cody", "machine_id", Value::Null);
    let p = rewind(&seed, "alice", "m-3");
    assert_eq!(completions(&p).len(), 1);
    assert_eq!(refusal_texts(&p), set(&[AGENT_UNAVAILABLE]));
}

#[test]
fn activity_elsewhere_after_the_first_participation_refuses_and_before_it_does_not() {
    let mut later = Seed::dm();
    later
        .scope("lobby", "channel")
        .say("lobby", "l-1", "@cody")
        .derive();
    refused_only(&rewind(&later, "alice", "m-3"), &[CROSS_SCOPE_ACTIVITY]);
    // Activity before the target does not count.
    let mut earlier = Seed::new();
    earlier
        .human("alice")
        .machine("box", false)
        .agent("cody", "codex", Some("box"));
    earlier
        .scope("lobby", "channel")
        .say("lobby", "l-1", "@cody");
    earlier
        .scope("dm", "dm")
        .say("dm", "m-1", "alice")
        .say("dm", "m-2", "@cody");
    earlier
        .member("dm", "alice", 0, 0, 0)
        .point("cody", "m-1")
        .derive();
    assert_eq!(completions(&rewind(&earlier, "alice", "m-1")).len(), 1);
    // A delivery taken elsewhere counts; a failed one is doubtful.
    let mut delivered = Seed::dm();
    delivered
        .scope("lobby", "channel")
        .say("lobby", "l-1", "bob")
        .derive();
    delivered.outbox("l-1", "@cody", "delivered");
    refused_only(&rewind(&delivered, "alice", "m-3"), &[CROSS_SCOPE_ACTIVITY]);
    let mut failed = Seed::dm();
    failed
        .scope("lobby", "channel")
        .say("lobby", "l-1", "bob")
        .derive();
    failed.outbox("l-1", "@cody", "failed");
    let p = rewind(&failed, "alice", "m-3");
    assert_eq!(completions(&p).len(), 1);
    assert_eq!(refusal_texts(&p), set(&[CROSS_SCOPE_ACTIVITY]));
}

#[test]
fn an_agent_that_only_received_the_suffix_is_related_under_one_reading() {
    let mut seed = Seed::dm();
    seed.agent("ode", "gemini", Some("box"));
    seed.say("dm", "m-5", "alice").derive();
    seed.outbox("m-5", "@ode", "delivered");
    let p = rewind(&seed, "alice", "m-5");
    assert_eq!(completions(&p), [vec!["m-5"]]);
    assert_eq!(refusal_texts(&p), set(&[AGENT_UNSUPPORTED]));
    let (_, completing) = p.completions().next().expect("a completion");
    assert_eq!(
        completing.get(readings::RELATED_AGENTS),
        Some(&set(&["wrote-suffix"]))
    );
}

#[test]
fn an_agent_reached_through_the_cascade_needs_its_recovery_point() {
    let mut seed = channel_with_thread("c-3", "alice");
    seed.machine("box", false)
        .agent("cody", "codex", Some("box"));
    seed.say("th", "t-3", "@cody").derive();
    refused_only(&rewind(&seed, "alice", "c-3"), &[RECOVERY_POINT_MISSING]);
    seed.point("cody", "t-1");
    assert_eq!(completions(&rewind(&seed, "alice", "c-3")).len(), 1);
}

#[test]
fn restores_that_may_fail_add_a_refusal_worded_freely() {
    let seed = Seed::dm();
    let p = rewind_on(
        &seed,
        "alice",
        "m-3",
        &Deployment::every_runtime().restores_may_fail(true),
    );
    assert_eq!(completions(&p).len(), 1);
    let (failure, _) = p.refusals().next().expect("a restore failure");
    assert!(failure.texts.accepts("codex thread/rollback failed"));
    assert!(failure.texts.accepts(AGENT_UNSUPPORTED));
    assert!(!failure.texts.accepts(OTHER_HUMAN));
    assert!(failure.operation_statuses.contains("repair_required"));
    // No agent, nothing to restore: no failure.
    let mut human_only = Seed::dm();
    human_only.say("dm", "m-5", "alice").derive();
    let p = rewind_on(
        &human_only,
        "alice",
        "m-5",
        &Deployment::every_runtime().restores_may_fail(true),
    );
    assert!(p.refusals().next().is_none() || refusal_texts(&p) == set(&[]));
}
