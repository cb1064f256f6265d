//! Steps that stage races with row locks the harness holds: the implementation's apply
//! transaction must lock the scope (spec 7), so holding that lock parks a rewind between its
//! plan and its apply, and lets the scenario change the conversation in between.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context as _};
use cucumber::{given, then, when};
use rewind_conformance::inspect::line_diff;
use rewind_conformance::sut::RewindResponse;

use super::id_list;
use crate::suite::world::{Racing, RewindWorld};

/// Locks the scope's row in a transaction the harness keeps open. `FOR NO KEY UPDATE` is what an
/// `UPDATE` of the row takes: it blocks the apply's lock and updates, not the foreign-key checks
/// of rows that merely reference the scope (such as a new `rewind_operations` row). A
/// transaction the harness already holds takes this lock too.
#[given(expr = "the harness holds the row lock of scope {string}")]
async fn hold_scope_lock(world: &mut RewindWorld, scope: String) -> anyhow::Result<()> {
    let mut tx = match world.held.take() {
        Some(tx) => tx,
        None => world
            .hold_pool()?
            .begin()
            .await
            .context("beginning the harness transaction")?,
    };
    let found: Option<String> =
        sqlx::query_scalar("SELECT id FROM scopes WHERE id = $1 FOR NO KEY UPDATE")
            .bind(&scope)
            .fetch_optional(&mut *tx)
            .await
            .context("locking the scope row")?;
    found.ok_or_else(|| anyhow!("scope `{scope}` does not exist"))?;
    world.held = Some(tx);
    Ok(())
}

/// `Given the harness holds the row locks of scopes "ch-team, th-tail"`: several scopes, in one
/// transaction, locked in id order.
#[given(expr = "the harness holds the row locks of scopes {string}")]
async fn hold_scope_locks(world: &mut RewindWorld, scopes: String) -> anyhow::Result<()> {
    let mut scopes = id_list(&scopes);
    scopes.sort();
    for scope in scopes {
        hold_scope_lock(world, scope).await?;
    }
    Ok(())
}

/// Some session of the scenario database is waiting on a lock (the parked rewind).
#[then("the started rewind waits on a lock")]
async fn waits_on_lock(world: &mut RewindWorld) -> anyhow::Result<()> {
    sessions_wait_on_locks(world, 1).await
}

/// `Then 2 racing rewinds wait on a lock`: at least that many sessions of the scenario database
/// wait on a lock.
#[then(regex = r"^(\d+) racing rewinds wait on a lock$")]
async fn racing_wait_on_locks(world: &mut RewindWorld, count: i64) -> anyhow::Result<()> {
    sessions_wait_on_locks(world, count).await
}

async fn sessions_wait_on_locks(world: &mut RewindWorld, count: i64) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(world.pool()?)
        .await
        .context("reading pg_stat_activity")?;
        if waiting >= count {
            return Ok(());
        }
        if world
            .racing
            .iter()
            .any(|r| r.task.as_ref().is_some_and(|t| t.is_finished()))
        {
            bail!(
                "a racing rewind finished without waiting for the row locks the harness holds \
                 (the apply transaction must lock the scopes it changes)"
            );
        }
        if let Some((_, task)) = &world.started {
            if task.is_finished() {
                bail!(
                    "the rewind finished without waiting for the scope's row lock \
                     (its apply transaction must lock the scope's stats/read-state rows)"
                );
            }
        }
        if Instant::now() > deadline {
            bail!("{waiting} sessions waited on a lock within 15s, expected {count}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Appends a message to the scope, as another writer would; with `as "<name>"`, later steps can
/// name it (its id is generated).
#[when(
    regex = r#"^the harness appends a message by human "([^"]+)" to scope "([^"]+)"(?: as "([^"]+)")?$"#
)]
async fn harness_appends(
    world: &mut RewindWorld,
    human: String,
    scope: String,
    name: String,
) -> anyhow::Result<()> {
    let id = format!("late-{}", uuid::Uuid::new_v4().simple());
    let query = sqlx::query(
        "WITH g AS (UPDATE workspaces w SET latest_global_seq = w.latest_global_seq + 1 \
                    FROM scopes s WHERE s.id = $2 AND w.id = s.workspace_id \
                    RETURNING w.id AS workspace_id, w.latest_global_seq), \
              s AS (UPDATE scopes SET latest_seq = latest_seq + 1, \
                    latest_global_seq = greatest(latest_global_seq, (SELECT latest_global_seq FROM g)), \
                    visible_message_count = visible_message_count + 1 \
                    WHERE id = $2 RETURNING latest_seq) \
         INSERT INTO scope_messages (id, workspace_id, scope_id, seq, global_seq, author_kind, \
                                     author_user_id, content) \
         SELECT $1, g.workspace_id, $2, s.latest_seq, g.latest_global_seq, 'human', $3, \
                'a late message CANARY-late-' || $1 FROM g, s",
    )
    .bind(&id)
    .bind(&scope)
    .bind(&human);
    // Inside the harness's transaction when it holds one (committed on release), else at once.
    match world.held.as_mut() {
        Some(tx) => query.execute(&mut **tx).await,
        None => query.execute(world.pool()?).await,
    }
    .context("appending the late message")?;
    if !name.is_empty() {
        world.name_message(&name, &id)?;
    }
    Ok(())
}

/// Commits the harness's transaction, releasing its locks.
#[when("the harness releases its locks")]
async fn release(world: &mut RewindWorld) -> anyhow::Result<()> {
    let tx = world
        .held
        .take()
        .ok_or_else(|| anyhow!("the harness holds no transaction"))?;
    tx.commit()
        .await
        .context("committing the harness transaction")?;
    Ok(())
}

/// A message's row as JSON, or `None` when it does not exist.
async fn message_row(world: &RewindWorld, id: &str) -> anyhow::Result<Option<serde_json::Value>> {
    let row: Option<String> =
        sqlx::query_scalar("SELECT to_jsonb(m)::text FROM scope_messages m WHERE id = $1")
            .bind(id)
            .fetch_optional(world.pool()?)
            .await
            .context("reading scope_messages")?;
    row.map(|r| serde_json::from_str(&r).context("parsing a scope_messages row"))
        .transpose()
}

fn is_rewound(row: &serde_json::Value) -> bool {
    row.pointer("/metadata/messageRecall/status")
        .and_then(|s| s.as_str())
        == Some("rewound")
}

/// `Then the rewind is refused with "<message>", leaving messages "<ids>" untouched and scope
/// "<thread>" not archived, or completes with them all rewound tombstones and that scope
/// archived`: the outcomes of a change committed to a scope the rewind tombstones while the
/// started rewind waited on a lock (spec 7: the suffix is re-validated before the apply, and no
/// rewind is half-tombstoned). A rewind that planned before the change refuses with the drift
/// message and leaves every listed message (the appended one included) and the thread as they
/// were, with no operation but a `failed` one; a rewind that planned after the change committed
/// (it took every scope's lock before planning) completes, and tombstones every listed message,
/// the appended one included, and archives the thread. Anything in between fails: a completed
/// rewind that left the appended message visible, a refusal that tombstoned or archived.
#[then(
    regex = r#"^the rewind is refused with "([^"]+)", leaving messages "([^"]+)" untouched and scope "([^"]+)" not archived, or completes with them all rewound tombstones and that scope archived$"#
)]
async fn drift_refused_or_all_rewound(
    world: &mut RewindWorld,
    expected: String,
    names: String,
    scope: String,
) -> anyhow::Result<()> {
    let names = id_list(&names);
    let archived: bool =
        sqlx::query_scalar("SELECT archived_at IS NOT NULL FROM scopes WHERE id = $1")
            .bind(&scope)
            .fetch_optional(world.pool()?)
            .await
            .context("reading scopes")?
            .ok_or_else(|| anyhow!("scope `{scope}` does not exist (it must never be deleted)"))?;
    let (request, response) = world
        .last
        .clone()
        .ok_or_else(|| anyhow!("no rewind was attempted in this scenario"))?;
    match response {
        RewindResponse::Refused { code, message, .. } => {
            ensure!(
                message == expected,
                "the rewind was refused, but with another message\n{}",
                line_diff(&expected, &message)
            );
            super::then::check_code(world, &message, &code)?;
            let before: Vec<serde_json::Value> = world
                .before_snapshot()?
                .tables
                .get("scope_messages")
                .into_iter()
                .flatten()
                .filter_map(|r| serde_json::from_str(r).ok())
                .collect();
            for name in &names {
                let id = world.resolve(name);
                let now = message_row(world, &id)
                    .await?
                    .ok_or_else(|| anyhow!("scope_messages row `{id}` ({name}) is gone"))?;
                let was = before
                    .iter()
                    .find(|r| r.get("id").and_then(|v| v.as_str()) == Some(id.as_str()));
                match was {
                    Some(was) => ensure!(
                        *was == now,
                        "the rewind was refused, yet scope_messages row `{id}` changed:\n{}",
                        line_diff(&was.to_string(), &now.to_string())
                    ),
                    // Written after the rewind started: it must still be visible as written.
                    None => ensure!(
                        !is_rewound(&now)
                            && now
                                .get("content")
                                .and_then(|c| c.as_str())
                                .is_some_and(|c| !c.is_empty()),
                        "the rewind was refused, yet the message `{id}` ({name}) written while it \
                         waited was tombstoned: {now}"
                    ),
                }
            }
            ensure!(
                !archived,
                "the rewind was refused, yet scope `{scope}` was archived"
            );
            let statuses: Vec<String> = sqlx::query_scalar(
                "SELECT status FROM rewind_operations WHERE target_message_id = $1 \
                 ORDER BY created_at",
            )
            .bind(&request.target_message_id)
            .fetch_all(world.pool()?)
            .await
            .context("reading rewind_operations")?;
            ensure!(
                statuses.iter().all(|s| s == "failed"),
                "the rewind was refused before anything was restored, so its operation can only \
                 be `failed` (or not recorded); rewind_operations targeting `{}`: {statuses:?}",
                request.target_message_id
            );
            Ok(())
        }
        RewindResponse::Completed { status, .. } => {
            ensure!(
                status == "completed",
                "the rewind answered status `{status}`, expected `completed` or the refusal \
                 `{expected}`"
            );
            for name in &names {
                let id = world.resolve(name);
                let now = message_row(world, &id).await?.ok_or_else(|| {
                    anyhow!("scope_messages row `{id}` ({name}) is gone: a rewind must tombstone, never delete")
                })?;
                ensure!(
                    is_rewound(&now)
                        && now.get("content").and_then(|c| c.as_str()) == Some(""),
                    "the rewind completed, but `{id}` ({name}) is not a rewound tombstone: a rewind \
                     that planned before the change had to refuse (\"{expected}\"), one that \
                     planned after it had to tombstone it too; row: {now}"
                );
            }
            ensure!(
                archived,
                "the rewind completed, but the cascaded scope `{scope}` is not archived"
            );
            super::invariants::check_after_rewind(world).await
        }
    }
}

/// `When human "alice" rewinds to before message "codex-1" while the started rewind is
/// preparing` (held in its restore) or `... while the started rewind waits on a lock` (parked on
/// a row lock the harness holds): the answer must come within [`super::storm::ANSWER_BOUND`],
/// while the started rewind is still where it was held; an answer that comes only after it
/// finished proves the rewind waited for it, which nothing in the spec allows.
///
/// One case may wait: a rewind of the same scope as a started rewind that waits on the scope's
/// row lock without having recorded its operation (ambiguity `plan-persist-vs-scope-lock`,
/// reading `plan-under-lock`): it then queues for the same lock, and keeps racing.
#[when(
    regex = r#"^(human|agent) "([^"]+)" rewinds to before message "([^"]+)" while the started rewind (is preparing|waits on a lock)$"#
)]
async fn rewinds_while_held(
    world: &mut RewindWorld,
    kind: String,
    who: String,
    message: String,
    held: String,
) -> anyhow::Result<()> {
    let request =
        super::when::request_in_own_scope(world, super::when::actor(&kind, who)?, message).await?;
    let (first, first_target) = match &world.started {
        Some((first, task)) if !task.is_finished() => {
            (first.scope_id.clone(), first.target_message_id.clone())
        }
        Some(_) => bail!("the started rewind has already finished"),
        None => bail!("no rewind was started in the background"),
    };
    let preparing = held == "is preparing";
    let first_recorded = super::then::statuses_targeting(world, &first_target)
        .await?
        .iter()
        .any(|s| s == "preparing");
    ensure!(
        !preparing || first_recorded,
        "the started rewind of `{first}` has no `preparing` operation"
    );
    let same_scope = request.scope_id == first;
    let api = Arc::clone(&world.attached()?.api);
    let mut racing = Racing::start(api, request.clone());
    let started = Instant::now();
    while !racing.poll().await {
        if started.elapsed() > super::storm::ANSWER_BOUND {
            let bound = super::storm::ANSWER_BOUND.as_secs();
            if same_scope && !preparing && !first_recorded {
                // Both wait for the same lock, before either has planned.
                world.take_reading("plan-persist-vs-scope-lock", "plan-under-lock")?;
                world.racing.push(racing);
                return Ok(());
            }
            if same_scope {
                bail!(
                    "the rewind of `{}` did not answer within {bound}s while the started rewind \
                     of the same scope was `preparing`: it must be refused at once with \
                     \"another rewind is already in progress\" (spec 7, 9), not wait for it",
                    request.scope_id
                );
            }
            bail!(
                "the rewind of `{}` did not answer within {bound}s while the started rewind of \
                 `{first}` {held}: nothing in the spec lets a rewind of one scope wait for a \
                 rewind of another (only a `preparing` operation of the same primary scope stops \
                 a rewind, spec 6.4 and 7)",
                request.scope_id
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The answer is in: the started rewind must still be held where it was.
    let first_finished = world
        .started
        .as_ref()
        .is_some_and(|(_, task)| task.is_finished());
    let still_preparing = super::then::statuses_targeting(world, &first_target)
        .await?
        .iter()
        .any(|s| s == "preparing");
    ensure!(
        !first_finished && (!preparing || still_preparing),
        "the rewind of `{}` answered only after the started rewind of `{first}` had finished: \
         it waited for it (a rewind is refused while another of its scope is `preparing`, and \
         nothing else may stop it, spec 7)",
        request.scope_id
    );
    let response = match racing.answer {
        Some(Ok(response)) => response,
        Some(Err(e)) => bail!("{e}"),
        None => bail!("the rewind has no answer"),
    };
    if same_scope && first_recorded && !preparing {
        world.take_reading("plan-persist-vs-scope-lock", "plan-before-lock")?;
    }
    world.record_answer(request, response);
    world.collect_events().await?;
    world.events_mark = Some(world.events.len());
    world.reads_mark = Some(world.reads.len());
    Ok(())
}

/// After `... while the started rewind waits on a lock` for the same scope: refused with the
/// message, unless the started rewind had recorded nothing and the second one queued behind it
/// for the same lock (reading `plan-under-lock`, taken by that step).
#[then(expr = "the rewind is refused with {string}, unless it waits behind the started rewind")]
async fn refused_unless_waiting(world: &mut RewindWorld, expected: String) -> anyhow::Result<()> {
    if !world.racing.is_empty()
        && world
            .readings
            .get("plan-persist-vs-scope-lock")
            .map(String::as_str)
            == Some("plan-under-lock")
    {
        return Ok(());
    }
    let response = world.last_response()?.clone();
    let RewindResponse::Refused { code, message, .. } = response else {
        bail!("expected a refusal with `{expected}`, but the rewind completed");
    };
    ensure!(
        message == expected,
        "wrong refusal message\n{}",
        line_diff(&expected, &message)
    );
    super::then::check_code(world, &message, &code)
}
