//! Then steps about what the implementation announced: realtime events, the rewind notice, the
//! API answer, and the rows a rewind must not create.

use std::collections::BTreeSet;

use anyhow::{anyhow, ensure, Context as _};
use cucumber::{given, then};
use rewind_conformance::sut::RewindResponse;

use super::scrub::{canaries_of, message_rows, newly_rewound};
use crate::suite::world::RewindWorld;

/// Keys that would carry suffix content or per-surface facts inside an invalidation payload.
const CONTENT_KEYS: &[&str] = &[
    "content",
    "body",
    "messages",
    "attachments",
    "reactions",
    "snippet",
    "snippets",
    "preview",
    "patch",
    "tombstones",
    "sources",
];

fn keys(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                keys(v, out);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| keys(v, out)),
        _ => {}
    }
}

/// Exactly one `conversation:rewound` was published, to this scope.
#[then(expr = "a {string} event was published to scope {string}")]
async fn event_published(
    world: &mut RewindWorld,
    name: String,
    scope: String,
) -> anyhow::Result<()> {
    let matching: Vec<_> = world.events.iter().filter(|e| e.name == name).collect();
    ensure!(
        matching.len() == 1,
        "expected one `{name}` event, got {} (events: {:?})",
        matching.len(),
        world
            .events
            .iter()
            .map(|e| format!("{} -> {}", e.name, e.scope_id))
            .collect::<Vec<_>>()
    );
    ensure!(
        matching[0].scope_id == scope,
        "`{name}` went to scope `{}`, expected `{scope}`",
        matching[0].scope_id
    );
    Ok(())
}

/// A reply-thread rewind invalidates the thread's parent scope (spec section 2.1 names the parent
/// as the scope of realtime); publishing to the thread as well is also accepted (ambiguity
/// `reply-thread-broadcast-scope`). One event per scope.
#[then(
    expr = "a {string} event was published to the parent {string}, or to it and the thread {string}"
)]
async fn event_to_parent(
    world: &mut RewindWorld,
    name: String,
    parent: String,
    thread: String,
) -> anyhow::Result<()> {
    let mut scopes: Vec<&str> = world
        .events
        .iter()
        .filter(|e| e.name == name)
        .map(|e| e.scope_id.as_str())
        .collect();
    scopes.sort_unstable();
    let mut expected_both = vec![parent.as_str(), thread.as_str()];
    expected_both.sort_unstable();
    let reading = if scopes == [parent.as_str()] {
        "parent"
    } else if scopes == expected_both {
        "parent-and-thread"
    } else {
        anyhow::bail!(
            "`{name}` went to scopes {scopes:?}; expected one event to the parent `{parent}`, or \
             one to it and one to the thread `{thread}`"
        );
    };
    world.take_reading("reply-thread-broadcast-scope", reading)
}

/// No event of this name was published.
#[then(expr = "no {string} event was published")]
async fn no_event(world: &mut RewindWorld, name: String) -> anyhow::Result<()> {
    let count = world.events.iter().filter(|e| e.name == name).count();
    ensure!(
        count == 0,
        "{count} `{name}` events were published, expected none"
    );
    Ok(())
}

/// The `conversation:rewound` payload is an invalidation: no suffix content, no content keys.
#[then("the conversation:rewound payload carries no suffix content")]
async fn rewound_payload_clean(world: &mut RewindWorld) -> anyhow::Result<()> {
    let event = world
        .events
        .iter()
        .find(|e| e.name == "conversation:rewound")
        .ok_or_else(|| anyhow!("no `conversation:rewound` event was published"))?;
    let suffix = newly_rewound(world).await?;
    let before = world.before_snapshot()?;
    let text = event.payload.to_string();
    for token in canaries_of(before, &suffix) {
        ensure!(
            !text.contains(&token),
            "the payload quotes `{token}`: {text}"
        );
    }
    let mut found = Vec::new();
    keys(&event.payload, &mut found);
    let bad: Vec<&String> = found
        .iter()
        .filter(|k| CONTENT_KEYS.contains(&k.as_str()))
        .collect();
    ensure!(
        bad.is_empty(),
        "the payload carries content or per-surface keys {bad:?}: {text}"
    );
    Ok(())
}

/// The rewind notice: one `system` message with client id `rewind-notice:<operation>`, above the
/// old high-water mark, free of suffix text, announced with `message.created`.
#[then(expr = "a rewind notice was posted in scope {string}")]
async fn notice_posted(world: &mut RewindWorld, scope: String) -> anyhow::Result<()> {
    let operation = match world.last_response()? {
        RewindResponse::Completed { operation_id, .. } => operation_id.clone(),
        other => return Err(anyhow!("the rewind did not complete: {other:?}")),
    };
    let client_id = format!("rewind-notice:{operation}");
    let rows: Vec<(String, String, String, i64)> = sqlx::query_as(
        "SELECT id, scope_id, author_kind, seq FROM scope_messages WHERE client_message_id = $1",
    )
    .bind(&client_id)
    .fetch_all(world.pool()?)
    .await
    .context("reading scope_messages")?;
    ensure!(
        rows.len() == 1,
        "expected one message with client id `{client_id}`, found {}",
        rows.len()
    );
    let (id, scope_id, author_kind, seq) = &rows[0];
    ensure!(
        *scope_id == scope,
        "the notice is in scope `{scope_id}`, expected `{scope}`"
    );
    ensure!(
        author_kind == "system",
        "the notice's author_kind is `{author_kind}`, expected `system`"
    );
    let before = world.before_snapshot()?;
    let high_water = message_rows(before)
        .iter()
        .filter(|r| r.get("scope_id").and_then(|v| v.as_str()) == Some(scope.as_str()))
        .filter_map(|r| r.get("seq").and_then(|v| v.as_i64()))
        .max()
        .unwrap_or(0);
    ensure!(
        *seq > high_water,
        "the notice has seq {seq}, not above the old high-water {high_water}"
    );
    let content: String = sqlx::query_scalar("SELECT content FROM scope_messages WHERE id = $1")
        .bind(id)
        .fetch_one(world.pool()?)
        .await
        .context("reading the notice")?;
    ensure!(
        !content.trim().is_empty(),
        "the notice is empty: it must tell humans what happened"
    );
    let suffix = newly_rewound(world).await?;
    for token in canaries_of(before, &suffix) {
        ensure!(
            !content.contains(&token),
            "the notice quotes the rewound `{token}`"
        );
    }
    // The event names the notice by its id or by its client message id (ambiguity
    // `notice-event-identity`).
    let names = |e: &&rewind_conformance::sut::RealtimeEvent, needle: &str| {
        e.name == "message.created"
            && e.scope_id == scope
            && e.payload.to_string().contains(&format!("\"{needle}\""))
    };
    let reading = if world.events.iter().any(|e| names(&e, id)) {
        "message-id"
    } else if world.events.iter().any(|e| names(&e, &client_id)) {
        "client-message-id"
    } else {
        anyhow::bail!(
            "no `message.created` event in `{scope}` names the notice (`{id}` or `{client_id}`)"
        );
    };
    world.take_reading("notice-event-identity", reading)
}

/// The rewind added no activity event, fanout row or durable stream event (rows that existed
/// before may have changed status).
#[then("the rewind created no activity, delivery or stream rows")]
async fn no_side_rows(world: &mut RewindWorld) -> anyhow::Result<()> {
    let before = world.before_snapshot()?;
    let after = world.snapshot().await?;
    let ids = |rows: Option<&Vec<String>>| -> BTreeSet<String> {
        rows.into_iter()
            .flatten()
            .filter_map(|r| serde_json::from_str::<serde_json::Value>(r).ok())
            .filter_map(|v| v.get("id").map(|i| i.to_string()))
            .collect()
    };
    for table in [
        "scope_activity_events",
        "scope_fanout_outbox",
        "im_stream_events",
    ] {
        let was = ids(before.tables.get(table));
        let now = ids(after.tables.get(table));
        let added: Vec<&String> = now.difference(&was).collect();
        ensure!(
            added.is_empty(),
            "the rewind added rows to `{table}`: ids {added:?}"
        );
    }
    Ok(())
}

/// The API answer quotes no suffix content; its `rewoundMessageIds`, when given, are exactly the
/// tombstoned messages.
#[then("the answer carries no suffix content")]
async fn answer_clean(world: &mut RewindWorld) -> anyhow::Result<()> {
    let response = world.last_response()?.clone();
    let suffix = newly_rewound(world).await?;
    let before = world.before_snapshot()?;
    let text = serde_json::to_string(&response).context("serialising the answer")?;
    for token in canaries_of(before, &suffix) {
        ensure!(
            !text.contains(&token),
            "the answer quotes the rewound `{token}`: {text}"
        );
    }
    let RewindResponse::Completed {
        rewound_message_ids,
        ..
    } = &response
    else {
        return Ok(());
    };
    // Coarse invalidation information (spec section 8): absent, the primary boundary, or every
    // tombstoned message (ambiguity `api-rewound-ids`); never a message that was not rewound.
    let scope = world
        .last
        .as_ref()
        .map(|(request, _)| request.scope_id.clone())
        .unwrap_or_default();
    let primary: BTreeSet<String> = message_rows(before)
        .iter()
        .filter(|r| r.get("scope_id").and_then(|v| v.as_str()) == Some(scope.as_str()))
        .filter_map(|r| r.get("id").and_then(|v| v.as_str()))
        .filter(|id| suffix.contains(*id))
        .map(str::to_owned)
        .collect();
    let reported: BTreeSet<String> = rewound_message_ids.iter().cloned().collect();
    let reading = if reported.is_empty() {
        "omitted"
    } else if reported == suffix {
        "every-rewound-message"
    } else if reported == primary {
        "primary-boundary"
    } else {
        anyhow::bail!(
            "rewoundMessageIds {reported:?} are neither the primary boundary {primary:?} nor every \
             tombstoned message {suffix:?}"
        );
    };
    world.take_reading("api-rewound-ids", reading)
}

/// The last live message landed above this seq.
#[then(expr = "the new message's seq is above {int}")]
async fn seq_above(world: &mut RewindWorld, floor: i64) -> anyhow::Result<()> {
    let sent = world
        .sent
        .as_ref()
        .ok_or_else(|| anyhow!("no message was sent in this scenario"))?;
    ensure!(
        sent.seq > floor,
        "the new message got seq {}, not above {floor}",
        sent.seq
    );
    Ok(())
}

/// `Then the rewind notice is known as "first notice"`: names the last rewind's notice (found by
/// its client message id `rewind-notice:<operation id>`), so later steps can name it.
#[then(expr = "the rewind notice is known as {string}")]
async fn name_notice(world: &mut RewindWorld, name: String) -> anyhow::Result<()> {
    let operation = match world.last_response()? {
        RewindResponse::Completed { operation_id, .. } => operation_id.clone(),
        other => return Err(anyhow!("the rewind did not complete: {other:?}")),
    };
    let id: Option<String> =
        sqlx::query_scalar("SELECT id FROM scope_messages WHERE client_message_id = $1")
            .bind(format!("rewind-notice:{operation}"))
            .fetch_optional(world.pool()?)
            .await
            .context("reading scope_messages")?;
    let id =
        id.ok_or_else(|| anyhow!("the rewind posted no notice `rewind-notice:{operation}`"))?;
    world.name_message(&name, &id)
}

/// `Then message "first notice" is visible`: the message exists and is not rewound.
#[then(expr = "message {string} is visible")]
async fn visible(world: &mut RewindWorld, name: String) -> anyhow::Result<()> {
    let id = world.resolve(&name);
    let status: Option<Option<String>> = sqlx::query_scalar(
        "SELECT metadata #>> '{messageRecall,status}' FROM scope_messages WHERE id = $1",
    )
    .bind(&id)
    .fetch_optional(world.pool()?)
    .await
    .context("reading scope_messages")?;
    match status {
        None => Err(anyhow!("message `{id}` ({name}) does not exist")),
        Some(Some(s)) if s == "rewound" => Err(anyhow!("message `{id}` ({name}) was rewound")),
        Some(_) => Ok(()),
    }
}

/// `Given the harness holds the commit of the rewind's tombstones`: the harness takes the commit
/// gate ([`rewind_conformance::inspect::COMMIT_GATE_KEY`]) in a transaction of its own, so the
/// implementation's apply transaction blocks inside its COMMIT until `When the harness releases
/// its locks`. What the implementation published meanwhile was published before the commit.
#[given("the harness holds the commit of the rewind's tombstones")]
async fn hold_commit(world: &mut RewindWorld) -> anyhow::Result<()> {
    anyhow::ensure!(
        world.held.is_none(),
        "the harness already holds a transaction in this scenario"
    );
    let mut tx = world
        .hold_pool()?
        .begin()
        .await
        .context("beginning the harness transaction")?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(rewind_conformance::inspect::COMMIT_GATE_KEY)
        .execute(&mut *tx)
        .await
        .context("taking the commit gate")?;
    world.held = Some(tx);
    Ok(())
}

/// While the apply transaction is held in its COMMIT: the implementation has published no such
/// event yet (spec section 8: `conversation:rewound` is a post-commit invalidation).
#[then(expr = "no {string} event has been published yet")]
async fn none_yet(world: &mut RewindWorld, name: String) -> anyhow::Result<()> {
    world.collect_events().await?;
    let early: Vec<String> = world
        .events
        .iter()
        .filter(|e| e.name == name)
        .map(|e| format!("{} -> {}: {}", e.name, e.scope_id, e.payload))
        .collect();
    ensure!(
        early.is_empty(),
        "`{name}` was published while the rewind's apply transaction had not committed: {early:?}"
    );
    Ok(())
}
