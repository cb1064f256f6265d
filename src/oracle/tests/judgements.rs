//! Judgements: a correct rewind passes under each reading; typical wrong implementations are
//! caught, each with a discrepancy that names the table, row and column.

use super::*;

#[test]
fn a_correct_rewind_passes_under_every_reading_it_may_take() {
    let variants = [
        Choices::default(),
        Choices {
            rewound_at_beside: true,
            notice_dirty: true,
            suppress_failed: true,
            delete_stream_events: true,
            delete_index_rows: true,
            notice_is_reply: true,
            answer_lists_ids: true,
        },
    ];
    for choices in variants {
        let (seed, p, after, answer) = dm_rewound(choices);
        let j = check(&seed, &after, &answer, &p);
        assert_ok(&j);
        let readings = j.readings();
        let tombstone = if choices.rewound_at_beside {
            "beside-message-recall"
        } else {
            "inside-message-recall"
        };
        assert_eq!(
            readings.get(readings::TOMBSTONE_REWOUND_AT),
            Some(&set(&[tombstone]))
        );
        let dirty = if choices.notice_dirty {
            "notice-dirty"
        } else {
            "notice-not-dirty"
        };
        assert_eq!(
            readings.get(readings::NOTICE_MARKS_SYNC_DIRTY),
            Some(&set(&[dirty]))
        );
    }
}

#[test]
fn kept_content_and_extra_metadata_are_caught() {
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.set(
        "scope_messages",
        "m-4",
        "content",
        json!("said m-4 CANARY-m-4"),
    );
    assert_caught(
        &check(&seed, &after, &answer, &p),
        "`scope_messages` row `m-4` column `content`",
    );
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.set(
        "scope_messages",
        "m-3",
        "metadata",
        json!({"messageRecall": {"status": "rewound", "rewoundAt": "2026-06-28T00:00:00Z"},
               "mentions": ["bob"]}),
    );
    assert_caught(&check(&seed, &after, &answer, &p), "column `metadata`");
}

#[test]
fn an_extra_tombstone_or_a_missing_one_is_caught() {
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.set("scope_messages", "m-2", "content", json!(""));
    after.set(
        "scope_messages",
        "m-2",
        "metadata",
        json!({"messageRecall": {"status": "rewound", "rewoundAt": "2026-06-28T00:00:00Z"}}),
    );
    assert_caught(
        &check(&seed, &after, &answer, &p),
        "row `m-2` column `content`",
    );
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    let original = seed.find("scope_messages", "m-4").cloned().expect("m-4");
    after.edit("scope_messages", "m-4", |r| *r = original);
    assert_caught(
        &check(&seed, &after, &answer, &p),
        "row `m-4` column `content`",
    );
}

#[test]
fn a_cursor_left_in_the_suffix_is_caught_and_lower_ones_must_stay() {
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    let alice = membership_key(&after, "alice");
    after.set("scope_memberships", &alice, "last_read_seq", json!(4));
    assert_caught(&check(&seed, &after, &answer, &p), "column `last_read_seq`");
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    let cody = membership_key(&after, "cody");
    after.set(
        "scope_memberships",
        &cody,
        "owner_context_dismissed_through_global_seq",
        json!(2),
    );
    assert_caught(
        &check(&seed, &after, &answer, &p),
        "column `owner_context_dismissed_through_global_seq`",
    );
}

#[test]
fn projections_of_other_messages_must_stay_and_the_suffixes_must_go() {
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.retain("scope_message_pins", |r| {
        r.get("message_id") != Some(&json!("m-1"))
    });
    assert_caught(
        &check(&seed, &after, &answer, &p),
        "`scope_message_pins` row `dm / m-1`",
    );
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    let card = seed
        .find("scope_share_cards", "card-m-4")
        .cloned()
        .expect("card");
    after
        .tables
        .entry("scope_share_cards".into())
        .or_default()
        .push(card);
    assert_caught(
        &check(&seed, &after, &answer, &p),
        "`scope_share_cards` row `card-m-4`",
    );
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    let point = seed
        .find("message_recovery_points", "rp-m-3-cody")
        .cloned()
        .expect("point");
    after
        .tables
        .entry("message_recovery_points".into())
        .or_default()
        .push(point);
    assert_caught(&check(&seed, &after, &answer, &p), "row `rp-m-3-cody`");
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.retain("message_recovery_points", |r| {
        r.get("message_id") != Some(&json!("m-1"))
    });
    assert_caught(&check(&seed, &after, &answer, &p), "row `rp-m-1-cody`");
}

#[test]
fn delivery_facts_follow_their_status_rules() {
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    let pending = outbox_key(&after, "m-4", "alice");
    after.set("scope_fanout_outbox", &pending, "status", json!("pending"));
    assert_caught(&check(&seed, &after, &answer, &p), "column `status`");
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    let delivered = outbox_key(&after, "m-3", "cody");
    after.set(
        "scope_fanout_outbox",
        &delivered,
        "status",
        json!("suppressed"),
    );
    assert_caught(&check(&seed, &after, &answer, &p), "column `status`");
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    let before_m2 = outbox_key(&after, "m-2", "alice");
    after.set(
        "scope_fanout_outbox",
        &before_m2,
        "status",
        json!("suppressed"),
    );
    assert_caught(&check(&seed, &after, &answer, &p), "column `status`");
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.activity("m-4", "pending");
    assert_caught(
        &check(&seed, &after, &answer, &p),
        "`scope_activity_events`",
    );
}

#[test]
fn failed_fanout_rows_may_stay_or_be_suppressed_but_not_both_ways_at_once() {
    let mut seed = Seed::dm();
    seed.outbox("m-4", "bob", "failed")
        .outbox("m-3", "bob", "failed");
    let p = rewind(&seed, "alice", "m-3");
    for suppress_failed in [false, true] {
        let choices = Choices {
            suppress_failed,
            ..Choices::default()
        };
        let (after, answer) = apply(&seed, &the_effect(&p), "op-1", choices);
        assert_ok(&check(&seed, &after, &answer, &p));
    }
    let (mut after, answer) = apply(&seed, &the_effect(&p), "op-1", Choices::default());
    let one = outbox_key(&after, "m-4", "bob");
    after.set("scope_fanout_outbox", &one, "status", json!("suppressed"));
    assert_caught(
        &check(&seed, &after, &answer, &p),
        "one reading of `failed-fanout-rows`",
    );
}

#[test]
fn stream_events_and_the_index_must_lose_the_suffixes_content() {
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    let event = after
        .rows("im_stream_events")
        .find(|r| r.get("message_id") == Some(&json!("m-4")))
        .and_then(|r| r.get("id"))
        .map(|v| v.to_string())
        .expect("an event");
    after.set(
        "im_stream_events",
        &event,
        "payload_json",
        json!({"messageId": "m-4", "preview": "said m-4"}),
    );
    assert_caught(&check(&seed, &after, &answer, &p), "column `payload_json`");
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    let row = after
        .rows("im_conversation_index")
        .find(|r| {
            r.get("projection_json")
                .and_then(|p| p.get("unread"))
                .is_some()
        })
        .map(|r| {
            format!(
                "{} / {}",
                r["scope_id"].as_str().unwrap_or(""),
                r["user_id"].as_str().unwrap_or("")
            )
        })
        .expect("an index row");
    after.set(
        "im_conversation_index",
        &row,
        "projection_json",
        json!({"lastMessage": {"id": "m-4", "preview": "CANARY-m-4"}}),
    );
    assert_caught(
        &check(&seed, &after, &answer, &p),
        "`im_conversation_index`",
    );
}

#[test]
fn the_notice_must_be_there_once_above_the_high_water_mark_and_quote_nothing() {
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.retain("scope_messages", |r| {
        r.get("id") != Some(&json!("notice-op-1"))
    });
    assert_caught(&check(&seed, &after, &answer, &p), "the rewind notice");
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.set(
        "scope_messages",
        "notice-op-1",
        "content",
        json!("alice rewound: said m-4 CANARY-m-4"),
    );
    assert_caught(&check(&seed, &after, &answer, &p), "`CANARY-m-4`");
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.set("scope_messages", "notice-op-1", "seq", json!(4));
    assert_caught(&check(&seed, &after, &answer, &p), "column `seq`");
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.set(
        "scope_messages",
        "notice-op-1",
        "author_kind",
        json!("service"),
    );
    assert_caught(&check(&seed, &after, &answer, &p), "column `author_kind`");
}

#[test]
fn summaries_must_follow_the_visible_tail_and_high_water_marks_stay() {
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.set("scopes", "dm", "visible_message_count", json!(5));
    assert_caught(
        &check(&seed, &after, &answer, &p),
        "column `visible_message_count`",
    );
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.set("scopes", "dm", "latest_message_at", json!(at(4)));
    assert_caught(
        &check(&seed, &after, &answer, &p),
        "column `latest_message_at`",
    );
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.set("scopes", "dm", "latest_seq", json!(2));
    assert_caught(&check(&seed, &after, &answer, &p), "column `latest_seq`");
}

#[test]
fn memberships_grants_and_unrelated_rows_must_stay() {
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    let alice = membership_key(&after, "alice");
    after.set("scope_memberships", &alice, "role", json!("owner"));
    assert_caught(&check(&seed, &after, &answer, &p), "column `role`");
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.retain("scope_private_grants", |_| false);
    assert_caught(&check(&seed, &after, &answer, &p), "`scope_private_grants`");
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.set("agents", "cody", "display_name", json!("Cody 2"));
    assert_caught(&check(&seed, &after, &answer, &p), "`agents` row `cody`");
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.set("agents", "cody", "runtime_session_id", json!("fresh"));
    let j = check(&seed, &after, &answer, &p);
    assert_ok(&j);
    assert_eq!(
        j.readings().get(readings::RESTORE_SESSION_POINTER),
        Some(&set(&["replaced"]))
    );
}

#[test]
fn the_operation_and_the_answer_must_agree() {
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.set("rewind_operations", "op-1", "status", json!("preparing"));
    assert_caught(&check(&seed, &after, &answer, &p), "column `status`");
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.set("rewind_operations", "op-1", "thread_id", json!("elsewhere"));
    assert_caught(&check(&seed, &after, &answer, &p), "column `thread_id`");
    let (seed, p, after, _) = dm_rewound(Choices::default());
    let wrong_id = RewindResponse::Completed {
        operation_id: "op-9".into(),
        status: "completed".into(),
        rewound_message_ids: vec![],
    };
    assert_caught(
        &check(&seed, &after, &wrong_id, &p),
        "answer field `operationId`",
    );
    let too_many = RewindResponse::Completed {
        operation_id: "op-1".into(),
        status: "completed".into(),
        rewound_message_ids: vec!["m-2".into(), "m-3".into(), "m-4".into()],
    };
    assert_caught(
        &check(&seed, &after, &too_many, &p),
        "answer field `rewoundMessageIds`",
    );
    let refusal = refused(OTHER_HUMAN);
    assert_caught(
        &check(&seed, &after, &refusal, &p),
        "answer field `message`",
    );
}

#[test]
fn an_unknown_table_must_stay_as_it_was() {
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    let mut before = seed.clone();
    before.tables.insert("audit".into(), vec![]);
    after.insert("audit", json!({"id": 1, "what": "rewound m-3"}));
    assert_caught(&check(&before, &after, &answer, &p), "table `audit`");
}

#[test]
fn a_cascade_is_tombstoned_archived_and_its_parent_summary_cleared() {
    let seed = channel_with_thread("c-3", "alice");
    let p = rewind(&seed, "alice", "c-3");
    let (after, answer) = apply(&seed, &the_effect(&p), "op-1", Choices::default());
    assert_ok(&check(&seed, &after, &answer, &p));
    let mut live = after.clone();
    live.set("scopes", "th", "archived_at", Value::Null);
    assert_caught(
        &check(&seed, &live, &answer, &p),
        "`scopes` row `th` column `archived_at`",
    );
    let mut counted = after.clone();
    counted.set("scope_messages", "c-3", "reply_count", json!(2));
    assert_caught(
        &check(&seed, &counted, &answer, &p),
        "row `c-3` column `reply_count`",
    );
    let mut cursor = after.clone();
    let key = cursor
        .rows("scope_memberships")
        .find(|r| r.get("scope_id") == Some(&json!("th")))
        .map(|r| r["id"].to_string())
        .expect("a thread membership");
    cursor.set("scope_memberships", &key, "last_read_seq", json!(2));
    assert_caught(
        &check(&seed, &cursor, &answer, &p),
        "column `last_read_seq`",
    );
    let mut frontier = after;
    frontier.set("scope_sync_dirty", "th", "latest_message_seq", json!(2));
    assert_caught(
        &check(&seed, &frontier, &answer, &p),
        "`scope_sync_dirty` row `th`",
    );
}

#[test]
fn a_tail_fork_below_the_target_may_cascade_or_refuse() {
    let seed = channel_with_thread("c-3", "alice");
    let p = rewind(&seed, "alice", "c-2");
    let (after, answer) = apply(&seed, &the_effect(&p), "op-1", Choices::default());
    let j = check(&seed, &after, &answer, &p);
    assert_ok(&j);
    assert_eq!(
        j.readings().get(readings::TAIL_FORK_BELOW_TARGET),
        Some(&set(&["cascade"]))
    );
    let j = check(&seed, &seed, &refused(LATER_REPLY_THREAD), &p);
    assert_ok(&j);
    assert_eq!(
        j.readings().get(readings::TAIL_FORK_BELOW_TARGET),
        Some(&set(&["refuse"]))
    );
}

#[test]
fn a_rewind_inside_a_thread_recounts_the_parent_with_or_without_the_notice() {
    let mut seed = channel_with_thread("c-3", "alice");
    seed.say("th", "t-3", "alice").derive();
    let p = rewind(&seed, "alice", "t-2");
    let effect = the_effect(&p);
    assert_eq!(effect.rewound_ids(), ["t-2", "t-3"]);
    for notice_is_reply in [false, true] {
        let choices = Choices {
            notice_is_reply,
            ..Choices::default()
        };
        let (after, answer) = apply(&seed, &effect, "op-1", choices);
        let j = check(&seed, &after, &answer, &p);
        assert_ok(&j);
        let reading = if notice_is_reply {
            "notice-is-a-reply"
        } else {
            "notice-not-a-reply"
        };
        assert_eq!(
            j.readings().get(readings::NOTICE_IN_REPLY_SUMMARY),
            Some(&set(&[reading]))
        );
    }
    let (mut after, answer) = apply(&seed, &effect, "op-1", Choices::default());
    after.set("scope_messages", "c-3", "reply_count", json!(3));
    assert_caught(
        &check(&seed, &after, &answer, &p),
        "row `c-3` column `reply_count`",
    );
    let (mut after, answer) = apply(&seed, &effect, "op-1", Choices::default());
    after.set("scope_sync_dirty", "th", "latest_activity_seq", json!(0));
    assert_caught(
        &check(&seed, &after, &answer, &p),
        "column `latest_activity_seq`",
    );
}

#[test]
fn a_refusal_must_leave_the_database_as_it_was() {
    let mut seed = Seed::dm();
    seed.say("dm", "m-5", "bob").derive();
    let p = rewind(&seed, "alice", "m-3");
    let j = check(&seed, &seed, &refused(OTHER_HUMAN), &p);
    assert_ok(&j);
    assert_eq!(
        j.readings().get(readings::REFUSAL_RECORDS_OPERATION),
        Some(&set(&["no-operation"]))
    );
    assert_caught(
        &check(&seed, &seed, &refused(NOT_OWN_MESSAGE), &p),
        "answer field `message`",
    );
    let mut changed = seed.clone();
    changed.set("scope_messages", "m-4", "content", json!(""));
    assert_caught(
        &check(&seed, &changed, &refused(OTHER_HUMAN), &p),
        "`scope_messages` row `m-4` column `content`",
    );
    let effect_like = the_effect(&rewind(&Seed::dm(), "alice", "m-3"));
    let (done, answer) = apply(&seed, &effect_like, "op-1", Choices::default());
    assert_caught(&check(&seed, &done, &answer, &p), "answer field `outcome`");
}

#[test]
fn a_refusal_may_record_one_failed_operation_of_its_own_target() {
    let mut seed = Seed::dm();
    seed.say("dm", "m-5", "bob").derive();
    let p = rewind(&seed, "alice", "m-3");
    let operation = |status: &str, target: &str| {
        json!({"id": "op-f", "workspace_id": "ws", "thread_id": "dm", "target_message_id": target,
               "initiator_user_id": "alice", "status": status, "plan": {},
               "rewound_message_ids": [], "error_code": "other_human",
               "error_message": OTHER_HUMAN, "created_at": REWIND_AT, "updated_at": REWIND_AT,
               "completed_at": null})
    };
    let answer = RewindResponse::Refused {
        code: "other_human".into(),
        message: OTHER_HUMAN.into(),
        operation_id: Some("op-f".into()),
    };
    let mut failed = seed.clone();
    failed.insert("rewind_operations", operation("failed", "m-3"));
    let j = check(&seed, &failed, &answer, &p);
    assert_ok(&j);
    assert_eq!(
        j.readings().get(readings::REFUSAL_RECORDS_OPERATION),
        Some(&set(&["failed-operation"]))
    );
    let mut preparing = seed.clone();
    preparing.insert("rewind_operations", operation("preparing", "m-3"));
    assert_caught(&check(&seed, &preparing, &answer, &p), "column `status`");
    let mut other = seed.clone();
    other.insert("rewind_operations", operation("failed", "m-1"));
    assert_caught(
        &check(&seed, &other, &answer, &p),
        "column `target_message_id`",
    );
    assert_caught(
        &check(&seed, &seed, &answer, &p),
        "answer field `operationId`",
    );
}

#[test]
fn an_unworded_refusal_accepts_any_message_but_not_a_completion() {
    let seed = Seed::dm();
    let p = predict(
        &seed.state(),
        &request(Actor::Agent("cody".into()), "dm", "m-3"),
        &Deployment::every_runtime(),
    );
    assert_ok(&check(&seed, &seed, &refused("agents cannot rewind"), &p));
    let effect = the_effect(&rewind(&seed, "alice", "m-3"));
    let (after, answer) = apply(&seed, &effect, "op-1", Choices::default());
    assert_caught(&check(&seed, &after, &answer, &p), "answer field `outcome`");
}

#[test]
fn sources_go_when_either_side_is_rewound_and_stay_otherwise() {
    let mut seed = Seed::dm();
    seed.source("m-1", "m-4")
        .source("m-4", "m-1")
        .source("m-2", "m-1");
    let p = rewind(&seed, "alice", "m-3");
    let (after, answer) = apply(&seed, &the_effect(&p), "op-1", Choices::default());
    assert_ok(&check(&seed, &after, &answer, &p));
    let cited = seed
        .find("scope_message_sources", "src-m-1-m-4")
        .cloned()
        .expect("a source");
    let mut kept = after.clone();
    kept.tables
        .entry("scope_message_sources".into())
        .or_default()
        .push(cited);
    assert_caught(
        &check(&seed, &kept, &answer, &p),
        "`scope_message_sources` row `src-m-1-m-4`: expected no row (bound to the rewound `m-4`)",
    );
    let mut lost = after;
    lost.retain("scope_message_sources", |_| false);
    assert_caught(
        &check(&seed, &lost, &answer, &p),
        "`scope_message_sources` row `src-m-2-m-1`",
    );
}

#[test]
fn discrepancies_read_as_expected_versus_found() {
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.set(
        "scope_messages",
        "m-4",
        "content",
        json!("said m-4 CANARY-m-4"),
    );
    let text = check(&seed, &after, &answer, &p).to_string();
    assert!(
        text.contains(
            "\n- `scope_messages` row `m-4` column `content`: expected `\"\"`, found \
             `\"said m-4 CANARY-m-4\"`"
        ),
        "{text}"
    );
}

#[test]
fn the_scrubbed_shapes_are_reported_as_readings() {
    let (seed, p, after, answer) = dm_rewound(Choices::default());
    let j = check(&seed, &after, &answer, &p);
    assert_ok(&j);
    assert_eq!(
        j.readings().get(readings::SCRUBBED_STREAM_EVENT_SHAPE),
        Some(&set(&["keys-removed"]))
    );
    assert_eq!(
        j.readings().get(readings::SCRUBBED_INDEX_SHAPE),
        Some(&set(&["drops-last-message"]))
    );
    let deleting = Choices {
        delete_stream_events: true,
        delete_index_rows: true,
        ..Choices::default()
    };
    let (seed, p, after, answer) = dm_rewound(deleting);
    let j = check(&seed, &after, &answer, &p);
    assert_eq!(
        j.readings().get(readings::SCRUBBED_STREAM_EVENT_SHAPE),
        Some(&set(&["row-removed"]))
    );
    assert_eq!(
        j.readings().get(readings::SCRUBBED_INDEX_SHAPE),
        Some(&set(&["row-removed"]))
    );
}

#[test]
fn an_operation_plan_quoting_the_suffix_is_caught() {
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    after.set(
        "rewind_operations",
        "op-1",
        "plan",
        json!({"target": {"id": "m-3", "content": "said m-3 CANARY-m-3"}}),
    );
    assert_caught(
        &check(&seed, &after, &answer, &p),
        "`rewind_operations` row `op-1`: expected no content of a rewound message",
    );
}

#[test]
fn a_cascade_may_be_listed_with_the_primary_boundary_only() {
    let seed = channel_with_thread("c-3", "alice");
    let p = rewind(&seed, "alice", "c-3");
    let (mut after, _) = apply(&seed, &the_effect(&p), "op-1", Choices::default());
    after.set(
        "rewind_operations",
        "op-1",
        "rewound_message_ids",
        json!(["c-3"]),
    );
    let answer = RewindResponse::Completed {
        operation_id: "op-1".into(),
        status: "completed".into(),
        rewound_message_ids: vec!["c-3".into()],
    };
    let j = check(&seed, &after, &answer, &p);
    assert_ok(&j);
    assert_eq!(
        j.readings().get(readings::API_REWOUND_IDS),
        Some(&set(&["primary-boundary"]))
    );
    assert_eq!(
        j.readings().get(readings::OPERATION_REWOUND_IDS),
        Some(&set(&["primary-boundary"]))
    );
    assert_eq!(consistency(&after.state(), Some(&seed.state())), vec![]);
    after.set(
        "rewind_operations",
        "op-1",
        "rewound_message_ids",
        json!(["c-3", "t-1"]),
    );
    assert_caught(
        &check(&seed, &after, &answer, &p),
        "row `op-1` column `rewound_message_ids`",
    );
}

#[test]
fn an_operation_may_record_no_ids_and_is_then_held_to_its_target_and_notice() {
    let seed = channel_with_thread("c-3", "alice");
    let p = rewind(&seed, "alice", "c-3");
    let (mut after, answer) = apply(&seed, &the_effect(&p), "op-1", Choices::default());
    after.set(
        "rewind_operations",
        "op-1",
        "rewound_message_ids",
        json!([]),
    );
    let j = check(&seed, &after, &answer, &p);
    assert_ok(&j);
    assert_eq!(
        j.readings().get(readings::OPERATION_REWOUND_IDS),
        Some(&set(&["not-recorded"]))
    );
    assert_eq!(consistency(&after.state(), Some(&seed.state())), vec![]);
    // Without the ids, a message of the cascaded thread left visible is still caught.
    after.set("scope_messages", "t-1", "content", json!("back again"));
    after.set("scope_messages", "t-1", "metadata", json!({}));
    let violations = consistency(&after.state(), Some(&seed.state()));
    assert!(
        violations
            .iter()
            .any(|v| v.to_string().contains("`t-1`") || v.to_string().contains("t-1")),
        "{violations:?}"
    );
}

#[test]
fn other_scrubbed_shapes_and_suppressions_are_accepted() {
    let (seed, p, mut after, answer) = dm_rewound(Choices::default());
    let event = after
        .rows("im_stream_events")
        .find(|r| r.get("message_id") == Some(&json!("m-4")))
        .map(|r| r["id"].to_string())
        .expect("an event");
    after.set(
        "im_stream_events",
        &event,
        "payload_json",
        json!({"messageId": "m-4", "rewound": true}),
    );
    let index = after
        .rows("im_conversation_index")
        .find(|r| {
            r.get("scope_id") == Some(&json!("dm"))
                && r.get("last_message_id").is_some_and(Value::is_null)
        })
        .map(|r| format!("dm / {}", r["user_id"].as_str().unwrap_or_default()))
        .expect("an index row");
    after.set(
        "im_conversation_index",
        &index,
        "projection_json",
        json!({"unread": 0, "lastMessage": {"id": "m-4"}}),
    );
    let leased = outbox_key(&after, "m-4", "alice");
    after.set("scope_fanout_outbox", &leased, "payload", json!({}));
    let j = check(&seed, &after, &answer, &p);
    assert_ok(&j);
    assert_eq!(
        j.readings().get(readings::SCRUBBED_STREAM_EVENT_SHAPE),
        Some(&set(&["marker-added"]))
    );
    assert_eq!(
        j.readings().get(readings::SCRUBBED_INDEX_SHAPE),
        Some(&set(&["keeps-rewound-id"]))
    );
    assert_eq!(
        j.readings().get(readings::SUPPRESSED_ROW_PAYLOAD),
        Some(&set(&["kept", "scrubbed"]))
    );
    after.set(
        "im_conversation_index",
        &index,
        "projection_json",
        json!({"unread": 0, "lastMessage": {"id": "m-2", "preview": "said m-2"}}),
    );
    after.set(
        "im_conversation_index",
        &index,
        "last_message_id",
        json!("m-2"),
    );
    let j = check(&seed, &after, &answer, &p);
    assert_ok(&j);
    assert_eq!(
        j.readings().get(readings::SCRUBBED_INDEX_SHAPE),
        Some(&set(&["repoints"]))
    );
    after.set(
        "im_conversation_index",
        &index,
        "last_message_id",
        json!("m-4x"),
    );
    assert_caught(
        &check(&seed, &after, &answer, &p),
        "column `last_message_id`",
    );
}

#[test]
fn a_leased_row_may_lose_its_lease_when_suppressed() {
    let mut seed = Seed::dm();
    seed.outbox("m-4", "bob", "leased");
    let p = rewind(&seed, "alice", "m-3");
    let (mut after, answer) = apply(&seed, &the_effect(&p), "op-1", Choices::default());
    assert_ok(&check(&seed, &after, &answer, &p));
    let leased = outbox_key(&after, "m-4", "bob");
    after.set("scope_fanout_outbox", &leased, "leased_until", Value::Null);
    assert_ok(&check(&seed, &after, &answer, &p));
    after.set("scope_fanout_outbox", &leased, "leased_until", json!(at(7)));
    assert_caught(&check(&seed, &after, &answer, &p), "column `leased_until`");
}

#[test]
fn a_thread_rewind_may_announce_the_parent_summary() {
    let mut seed = channel_with_thread("c-3", "alice");
    seed.insert(
        "scope_sync_dirty",
        json!({"scope_id": "ch", "latest_message_seq": 3, "latest_activity_seq": 4,
               "updated_at": at(0)}),
    );
    let p = rewind(&seed, "alice", "t-2");
    let (mut after, answer) = apply(&seed, &the_effect(&p), "op-1", Choices::default());
    let j = check(&seed, &after, &answer, &p);
    assert_ok(&j);
    assert_eq!(
        j.readings().get(readings::PARENT_REFRESH),
        Some(&set(&["untouched"]))
    );
    after.set("scope_sync_dirty", "ch", "latest_activity_seq", json!(5));
    let j = check(&seed, &after, &answer, &p);
    assert_ok(&j);
    assert_eq!(
        j.readings().get(readings::PARENT_REFRESH),
        Some(&set(&["activity-marked"]))
    );
    after.set("scope_sync_dirty", "ch", "latest_message_seq", json!(2));
    assert_caught(
        &check(&seed, &after, &answer, &p),
        "`scope_sync_dirty` row `ch`",
    );
}

#[test]
fn a_second_rewind_over_the_first_notice_may_word_its_notice_the_same() {
    let (_, _, first, _) = dm_rewound(Choices::default());
    let p = rewind(&first, "alice", "m-1");
    let effect = the_effect(&p);
    assert_eq!(effect.rewound_ids(), ["m-1", "m-2", "notice-op-1"]);
    let (second, answer) = apply(&first, &effect, "op-2", Choices::default());
    assert_ok(&check(&first, &second, &answer, &p));
    assert_eq!(
        consistency(&second.state(), Some(&Seed::dm().state())),
        vec![]
    );
}

#[test]
fn a_refusal_where_completing_or_another_refusal_was_allowed_names_both() {
    let seed = channel_with_thread("c-3", "alice");
    let p = rewind(&seed, "alice", "c-2");
    let j = check(&seed, &seed, &refused(OTHER_HUMAN), &p);
    assert_caught(
        &j,
        "answer field `message`: expected a refusal with `rewind is blocked because a later \
         message has a reply thread`, or the rewind to complete, tombstoning `c-2`, `c-3`, \
         `t-1`, `t-2`, found a refusal with `rewind is blocked because another human sent a \
         later message`",
    );
}
