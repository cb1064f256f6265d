//! Consistency: a correct state passes; each broken invariant is named.

use super::*;

#[test]
fn a_correct_rewind_and_the_starting_state_are_consistent() {
    let (seed, _, after, _) = dm_rewound(Choices::default());
    assert_eq!(consistency(&seed.state(), None), vec![]);
    assert_eq!(consistency(&after.state(), Some(&seed.state())), vec![]);
    let thread = channel_with_thread("c-3", "alice");
    let p = rewind(&thread, "alice", "c-3");
    let (after, _) = apply(&thread, &the_effect(&p), "op-1", Choices::default());
    assert_eq!(consistency(&after.state(), Some(&thread.state())), vec![]);
}

#[test]
fn left_preparing_half_tombstoned_or_unaccounted_states_are_inconsistent() {
    let (seed, _, mut after, _) = dm_rewound(Choices::default());
    after.set("rewind_operations", "op-1", "status", json!("preparing"));
    assert_inconsistent(&seed, &after, "left `preparing`");
    let (seed, _, mut after, _) = dm_rewound(Choices::default());
    after.set("scope_messages", "m-4", "content", json!("said m-4"));
    assert_inconsistent(&seed, &after, "kept its content");
    let (seed, _, mut after, _) = dm_rewound(Choices::default());
    let original = seed.find("scope_messages", "m-3").cloned().expect("m-3");
    after.edit("scope_messages", "m-3", |r| *r = original);
    assert_inconsistent(&seed, &after, "not a rewound tombstone");
    let (seed, _, mut after, _) = dm_rewound(Choices::default());
    after.set(
        "rewind_operations",
        "op-1",
        "rewound_message_ids",
        json!(["m-3"]),
    );
    assert_inconsistent(&seed, &after, "no completed rewind operation lists");
    let (seed, _, mut after, _) = dm_rewound(Choices::default());
    after.retain("rewind_operations", |_| false);
    assert_inconsistent(&seed, &after, "row `m-4`");
}

#[test]
fn a_gap_in_a_completed_suffix_is_inconsistent() {
    let mut seed = Seed::dm();
    seed.say("dm", "m-5", "alice").derive();
    let p = rewind(&seed, "alice", "m-3");
    let (mut after, _) = apply(&seed, &the_effect(&p), "op-1", Choices::default());
    let original = seed.find("scope_messages", "m-4").cloned().expect("m-4");
    after.edit("scope_messages", "m-4", |r| *r = original);
    after.set(
        "rewind_operations",
        "op-1",
        "rewound_message_ids",
        json!(["m-3", "m-5"]),
    );
    assert_inconsistent(&seed, &after, "visible inside the suffix");
}

#[test]
fn leftovers_of_a_rewound_message_are_inconsistent() {
    let (seed, _, mut after, _) = dm_rewound(Choices::default());
    let pin = seed
        .find("scope_message_pins", "dm / m-4")
        .cloned()
        .expect("pin");
    after
        .tables
        .entry("scope_message_pins".into())
        .or_default()
        .push(pin);
    assert_inconsistent(&seed, &after, "still bound to the tombstone `m-4`");
    let (seed, _, mut after, _) = dm_rewound(Choices::default());
    let row = outbox_key(&after, "m-4", "alice");
    after.set("scope_fanout_outbox", &row, "status", json!("pending"));
    assert_inconsistent(&seed, &after, "`pending`, still bound");
    let (seed, _, mut after, _) = dm_rewound(Choices::default());
    after.point("cody", "m-3");
    assert_inconsistent(&seed, &after, "`message_recovery_points`");
    let (seed, _, mut after, _) = dm_rewound(Choices::default());
    let alice = membership_key(&after, "alice");
    after.set(
        "scope_memberships",
        &alice,
        "last_read_global_seq",
        json!(4),
    );
    assert_inconsistent(&seed, &after, "inside the rewound messages");
    let (seed, _, mut after, _) = dm_rewound(Choices::default());
    after.set("scope_sync_dirty", "dm", "latest_message_seq", json!(3));
    assert_inconsistent(&seed, &after, "inside the rewound messages");
    let (seed, _, mut after, _) = dm_rewound(Choices::default());
    let alice = membership_key(&after, "alice");
    after.set("scope_memberships", &alice, "last_read_seq", json!(9));
    assert_inconsistent(&seed, &after, "past the visible tail");
    let (seed, _, mut after, _) = dm_rewound(Choices::default());
    after.set("scopes", "dm", "visible_message_count", json!(5));
    assert_inconsistent(&seed, &after, "column `visible_message_count`");
    let (seed, _, mut after, _) = dm_rewound(Choices::default());
    after.set(
        "scope_messages",
        "notice-op-1",
        "client_message_id",
        json!("web-1"),
    );
    assert_inconsistent(&seed, &after, "without its notice");
}

#[test]
fn an_archived_thread_without_a_completed_rewind_is_inconsistent() {
    let seed = channel_with_thread("c-2", "alice");
    let mut after = seed.clone();
    after.set("scopes", "th", "archived_at", json!(REWIND_AT));
    assert_inconsistent(&seed, &after, "not as the cascade of a completed rewind");
}

#[test]
fn a_live_thread_under_a_tombstone_is_inconsistent() {
    let seed = channel_with_thread("c-3", "alice");
    let p = rewind(&seed, "alice", "c-3");
    let (mut after, _) = apply(&seed, &the_effect(&p), "op-1", Choices::default());
    after.set("scopes", "th", "archived_at", Value::Null);
    assert_inconsistent(&seed, &after, "should have cascaded");
}
