//! Rewinds that race: several started at once in the background (a storm), a rewind sent while
//! another one is held in its restore or parked on a row lock, and what must hold once they
//! have all answered (spec 6.4, 7): one outcome per rewind, one winner per scope when they
//! overlapped, nothing half-applied.
//!
//! An answer that arrives only after the rewind it raced against has finished proves nothing
//! about concurrency: the steps that send a rewind "while" another one is held bound the wait
//! ([`ANSWER_BOUND`]) and check, when the answer arrives, that the other one is still held.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context as _};
use cucumber::gherkin::Step;
use cucumber::{then, when};
use rewind_conformance::sut::{Actor, RewindRequest, RewindResponse};

use super::id_list;
use crate::suite::matrix::{Cell, MatrixKind};
use crate::suite::world::{Racing, RewindWorld};

/// How long a rewind may take to answer while another rewind is held: generous for a refusal
/// or a small rewind on a loaded two-core machine, and far below the hold, which lasts until
/// the scenario lifts it.
pub(super) const ANSWER_BOUND: Duration = Duration::from_secs(10);

/// The section 9 refusal of a concurrent rewind of the same scope.
const IN_PROGRESS: &str = "another rewind is already in progress";

/// A human's rewind of `message`'s own scope.
async fn human_request(
    world: &RewindWorld,
    human: &str,
    message: &str,
) -> anyhow::Result<RewindRequest> {
    let target = world.resolve(message);
    let scope_id: String = sqlx::query_scalar("SELECT scope_id FROM scope_messages WHERE id = $1")
        .bind(&target)
        .fetch_optional(world.pool()?)
        .await
        .context("looking up the message's scope")?
        .ok_or_else(|| anyhow!("message `{message}` is not in the scenario's conversation"))?;
    Ok(RewindRequest {
        actor: Actor::Human(human.to_owned()),
        scope_id,
        target_message_id: target,
    })
}

/// Starts every request at once, after the snapshot the checks compare with (taken before the
/// first rewind of the scenario that is still racing).
async fn start_all(world: &mut RewindWorld, requests: Vec<RewindRequest>) -> anyhow::Result<()> {
    if world.started.is_none() && world.racing.is_empty() {
        super::when::mark_before(world).await?;
    }
    let api = Arc::clone(&world.attached()?.api);
    for request in requests {
        world.racing.push(Racing::start(Arc::clone(&api), request));
    }
    Ok(())
}

/// `When 8 rewinds by human "alice" to before messages "codex-1, codex-3" start at once`: the
/// targets are taken in turn.
#[when(regex = r#"^(\d+) rewinds by human "([^"]+)" to before messages "([^"]+)" start at once$"#)]
async fn n_at_once(
    world: &mut RewindWorld,
    count: usize,
    human: String,
    targets: String,
) -> anyhow::Result<()> {
    let targets = id_list(&targets);
    ensure!(
        count > 0 && !targets.is_empty(),
        "a storm needs at least one rewind and one target"
    );
    let mut requests = Vec::with_capacity(count);
    for i in 0..count {
        requests.push(human_request(world, &human, &targets[i % targets.len()]).await?);
    }
    start_all(world, requests).await
}

/// `When these rewinds start at once:` with a table of `human` and `target` columns.
#[when("these rewinds start at once:")]
async fn table_at_once(world: &mut RewindWorld, step: &Step) -> anyhow::Result<()> {
    let table = step
        .table
        .as_ref()
        .ok_or_else(|| anyhow!("this step needs a table with `human` and `target` columns"))?;
    let mut rows = table.rows.iter();
    let header = rows
        .next()
        .ok_or_else(|| anyhow!("the table has no header row"))?;
    let column = |name: &str| {
        header
            .iter()
            .position(|h| h.trim() == name)
            .ok_or_else(|| anyhow!("the table has no `{name}` column (columns: {header:?})"))
    };
    let (human, target) = (column("human")?, column("target")?);
    let mut requests = Vec::new();
    for row in rows {
        requests.push(human_request(world, row[human].trim(), row[target].trim()).await?);
    }
    start_all(world, requests).await
}

/// Takes the answers of the racing rewinds that have finished; returns how many are in.
async fn poll_racing(world: &mut RewindWorld) -> usize {
    let mut answered = 0;
    for racing in &mut world.racing {
        if racing.poll().await {
            answered += 1;
        }
    }
    answered
}

/// Moves the answers of finished racing rewinds into the scenario's answers, failing on a call
/// that failed (a hung or crashed implementation, a protocol violation).
async fn record_racing_answers(world: &mut RewindWorld) -> anyhow::Result<()> {
    let mut failures = Vec::new();
    let mut recorded = Vec::new();
    world
        .racing
        .retain_mut(|racing| match racing.answer.take() {
            Some(Ok(response)) => {
                recorded.push((racing.request.clone(), response));
                false
            }
            Some(Err(e)) => {
                failures.push(format!(
                    "the rewind of `{}` to before `{}` failed: {e}",
                    racing.request.scope_id, racing.request.target_message_id
                ));
                false
            }
            None => true,
        });
    for (request, response) in recorded {
        world.record_answer(request, response);
    }
    world.collect_events().await?;
    world.events_mark = Some(world.events.len());
    world.reads_mark = Some(world.reads.len());
    ensure!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

/// `Then every racing rewind but one of each scope answers while that one is preparing`: within
/// [`ANSWER_BOUND`] (more for larger storms), all but one rewind of each primary scope answered,
/// and the one left has a `preparing` operation. With the winner held in its restore, every
/// other rewind of its scope must be refused at once (spec 7, 9), whatever the lock order.
#[then("every racing rewind but one of each scope answers while that one is preparing")]
async fn all_but_one_answer(world: &mut RewindWorld) -> anyhow::Result<()> {
    let bound = ANSWER_BOUND + Duration::from_millis(250) * world.racing.len() as u32;
    let started = Instant::now();
    loop {
        poll_racing(world).await;
        let mut waiting: BTreeMap<&str, Vec<&RewindRequest>> = BTreeMap::new();
        let mut scopes = BTreeSet::new();
        for racing in &world.racing {
            scopes.insert(racing.request.scope_id.as_str());
            if racing.answer.is_none() {
                waiting
                    .entry(racing.request.scope_id.as_str())
                    .or_default()
                    .push(&racing.request);
            }
        }
        if let Some(scope) = scopes.iter().find(|s| !waiting.contains_key(*s)) {
            bail!(
                "every racing rewind of scope `{scope}` answered, although one of them is held \
                 in its restore and cannot have finished: {}",
                describe_answers(world, scope)
            );
        }
        if waiting.values().all(|w| w.len() == 1) {
            let left: Vec<RewindRequest> = waiting.values().map(|w| w[0].clone()).collect();
            for request in left {
                let statuses =
                    super::then::statuses_targeting(world, &request.target_message_id).await?;
                ensure!(
                    statuses.iter().any(|s| s == "preparing"),
                    "the rewind of `{}` left waiting has no `preparing` operation (statuses of \
                     the operations targeting `{}`: {statuses:?})",
                    request.scope_id,
                    request.target_message_id
                );
            }
            return record_racing_answers(world).await;
        }
        if started.elapsed() > bound {
            let late: Vec<String> = waiting
                .iter()
                .map(|(scope, w)| format!("`{scope}`: {} still waiting", w.len()))
                .collect();
            bail!(
                "within {}s, more than one rewind of a scope was still unanswered ({}): a rewind \
                 of a scope whose rewind is `preparing` must be refused with \"{IN_PROGRESS}\" \
                 at once, not wait for it (spec 7: `preparing` is the only thing that stops it, \
                 and it stops it with a refusal)",
                bound.as_secs(),
                late.join(", ")
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn describe_answers(world: &RewindWorld, scope: &str) -> String {
    let answers: Vec<String> = world
        .racing
        .iter()
        .filter(|r| r.request.scope_id == scope)
        .map(|r| match &r.answer {
            Some(Ok(RewindResponse::Completed { .. })) => "completed".to_owned(),
            Some(Ok(RewindResponse::Refused { message, .. })) => format!("refused: {message}"),
            Some(Err(e)) => format!("failed: {e}"),
            None => "waiting".to_owned(),
        })
        .collect();
    answers.join("; ")
}

/// `When the racing rewinds have settled`: before the harness releases the row locks it holds,
/// every racing rewind has either answered or waits for one of those locks (a rewind that
/// planned first was refused while the one that recorded its operation waits; one that takes
/// the lock before planning waits too). An implementation whose connection pool is smaller
/// than the storm keeps some rewinds out of the database altogether: those count as settled
/// once nothing has answered for [`SETTLE_QUIET`] and none of the implementation's sessions is
/// doing anything but waiting for a lock.
#[when("the racing rewinds have settled")]
async fn settled(world: &mut RewindWorld) -> anyhow::Result<()> {
    let bound = ANSWER_BOUND + Duration::from_millis(250) * world.racing.len() as u32;
    let started = Instant::now();
    let (mut answered, mut since) = (0, Instant::now());
    loop {
        let now = poll_racing(world).await;
        let (waiting, working): (i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE wait_event_type = 'Lock'), \
                    count(*) FILTER (WHERE wait_event_type IS DISTINCT FROM 'Lock' \
                                     AND state <> 'idle') \
             FROM pg_stat_activity \
             WHERE datname = current_database() AND backend_type = 'client backend' \
               AND pid <> pg_backend_pid() AND application_name IS DISTINCT FROM $1",
        )
        .bind(rewind_conformance::inspect::HARNESS_SESSION)
        .fetch_one(world.pool()?)
        .await
        .context("reading pg_stat_activity")?;
        // A rewind started before the racing ones waits on a lock too, or has finished.
        let first = usize::from(
            world
                .started
                .as_ref()
                .is_some_and(|(_, t)| !t.is_finished()),
        );
        if now + usize::try_from(waiting).unwrap_or(0) >= world.racing.len() + first {
            return Ok(());
        }
        if now != answered || working > 0 || waiting == 0 {
            (answered, since) = (now, Instant::now());
        } else if since.elapsed() > SETTLE_QUIET {
            return Ok(());
        }
        if started.elapsed() > bound {
            bail!(
                "the racing rewinds did not settle within {}s ({answered} of {} answered, \
                 {waiting} waiting for a lock)",
                bound.as_secs(),
                world.racing.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How long racing rewinds that cannot all reach the database stay quiet before they count as
/// settled.
const SETTLE_QUIET: Duration = Duration::from_secs(5);

/// `When every racing rewind finishes` (the started one too, if there is one).
#[when("every racing rewind finishes")]
async fn all_finish(world: &mut RewindWorld) -> anyhow::Result<()> {
    if world.started.is_some() {
        super::when::finish_started(world).await?;
    }
    let limit = super::when::rewind_timeout();
    let started = Instant::now();
    while poll_racing(world).await < world.racing.len() {
        if started.elapsed() > limit {
            bail!(
                "{} racing rewinds did not finish within {}s",
                world.racing.iter().filter(|r| r.answer.is_none()).count(),
                limit.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    record_racing_answers(world).await?;
    count_storm(world);
    Ok(())
}

/// A scenario tagged `@storm:<shape>` (`@storm:one-scope`) counts in the storm matrix, in the
/// column of how many rewinds it answered.
fn count_storm(world: &mut RewindWorld) {
    let Some(shape) = world.tags.iter().find_map(|t| t.strip_prefix("storm:")) else {
        return;
    };
    let cell = Cell {
        kind: MatrixKind::Storm,
        row: shape.replace('-', " "),
        column: world.answers.len().to_string(),
    };
    world.cells.retain(|c| c.kind != MatrixKind::Storm);
    world.cells.push(cell);
}

/// Whether the message is a rewound tombstone now, or its scope is archived: a rewind of it
/// refused for that has no section 9 wording (register entry `unworded-refusals`).
async fn target_gone(world: &RewindWorld, message: &str) -> anyhow::Result<bool> {
    let gone: Option<bool> = sqlx::query_scalar(
        "SELECT m.metadata #>> '{messageRecall,status}' = 'rewound' OR s.archived_at IS NOT NULL \
         FROM scope_messages m JOIN scopes s ON s.id = m.scope_id WHERE m.id = $1",
    )
    .bind(message)
    .fetch_optional(world.pool()?)
    .await
    .context("reading scope_messages")?
    .flatten();
    Ok(gone.unwrap_or(true))
}

/// The answers of the scenario's rewinds of these primary scopes: (completed, refused).
async fn outcomes_of(
    world: &RewindWorld,
    scopes: &[String],
    allowed: &[String],
) -> anyhow::Result<(usize, usize)> {
    ensure!(
        world.racing.is_empty() && world.started.is_none(),
        "some rewinds have not finished (add `When every racing rewind finishes`)"
    );
    let mut completed = 0;
    let mut refused = 0;
    for (request, response) in &world.answers {
        if !scopes.contains(&request.scope_id) {
            continue;
        }
        match response {
            RewindResponse::Completed { status, .. } => {
                ensure!(
                    status == "completed",
                    "the rewind of `{}` to before `{}` answered status `{status}`",
                    request.scope_id,
                    request.target_message_id
                );
                completed += 1;
            }
            RewindResponse::Refused { code, message, .. } => {
                refused += 1;
                // A rewind whose target another rewind of the storm tombstoned or archived may
                // have been refused after that, for a reason section 9 does not word (register
                // entry `unworded-refusals`): any message and code, a section 9 one included.
                // Which refusal it was cannot be told, so its code is not compared.
                if target_gone(world, &request.target_message_id).await? {
                    continue;
                }
                ensure!(
                    allowed.contains(message),
                    "the rewind of `{}` to before `{}` was refused with \"{message}\" (code \
                     `{code}`); expected one of {allowed:?} (its target is still there, so the \
                     refusal is one section 9 words)",
                    request.scope_id,
                    request.target_message_id
                );
                super::then::check_code(world, message, code)?;
            }
        }
    }
    Ok((completed, refused))
}

/// `Then exactly one rewind of scopes "dm-codex" completed, every other refused with "another
/// rewind is already in progress"` (several messages: `"a" or "b"`), or `Then no rewind of
/// scopes ... completed, every one refused with ...`. A rewind whose target was rewound by the
/// winner may also be refused with any message and code (register entry `unworded-refusals`).
#[then(
    regex = r#"^(exactly one|no) rewinds? of scopes "([^"]+)" completed, every (?:other|one) refused with "([^"]+)"(?: or "([^"]+)")?$"#
)]
async fn winners(
    world: &mut RewindWorld,
    how_many: String,
    scopes: String,
    first: String,
    second: String,
) -> anyhow::Result<()> {
    let scopes = id_list(&scopes);
    let allowed: Vec<String> = [first, second]
        .into_iter()
        .filter(|m| !m.is_empty())
        .collect();
    let (completed, refused) = outcomes_of(world, &scopes, &allowed).await?;
    let expected = usize::from(how_many == "exactly one");
    ensure!(
        completed == expected,
        "{completed} of the {} rewinds of {scopes:?} completed, expected {how_many}: they \
         overlapped, and only one rewind of a scope may be active at a time (spec 7)",
        completed + refused
    );
    nothing_half_applied(world).await
}

/// `Then exactly one operation of scope "dm-codex" is "repair_required"`.
#[then(regex = r#"^exactly one operation of scope "([^"]+)" is "([^"]+)"$"#)]
async fn one_operation_with_status(
    world: &mut RewindWorld,
    scope: String,
    status: String,
) -> anyhow::Result<()> {
    let statuses: Vec<String> =
        sqlx::query_scalar("SELECT status FROM rewind_operations WHERE thread_id = $1")
            .bind(&scope)
            .fetch_all(world.pool()?)
            .await
            .context("reading rewind_operations")?;
    let count = statuses.iter().filter(|s| **s == status).count();
    ensure!(
        count == 1,
        "{count} operations of scope `{scope}` are `{status}`, expected exactly one (statuses: \
         {statuses:?})"
    );
    Ok(())
}

/// `Then the rewinds of scopes "ch-team, th-tail" had one outcome each, as if run one after
/// the other`: every rewind completed or was refused with one of the messages a rewind that
/// overlapped another may get (drift, another rewind in progress, or, once its target was
/// rewound, a refusal the spec does not word); at least one completed; and the database is
/// what completing them one after the other makes ([`nothing_half_applied`]). With `, at most
/// one completing per scope`, no two rewinds of one scope completed: they all asked for one
/// target, which the first to complete took away from the others.
#[then(
    regex = r#"^the rewinds of scopes "([^"]+)" had one outcome each, as if run one after the other(, at most one completing per scope)?$"#
)]
async fn serial_outcomes(
    world: &mut RewindWorld,
    scopes: String,
    one_per_scope: String,
) -> anyhow::Result<()> {
    let scopes = id_list(&scopes);
    let allowed = vec![
        "rewind is blocked because newer activity changed the conversation".to_owned(),
        IN_PROGRESS.to_owned(),
    ];
    let (completed, refused) = outcomes_of(world, &scopes, &allowed).await?;
    ensure!(
        completed >= 1,
        "none of the {refused} rewinds of {scopes:?} completed: one of them ran first, and \
         nothing had changed its conversation then"
    );
    if !one_per_scope.is_empty() {
        for scope in &scopes {
            let (won, _) = outcomes_of(world, std::slice::from_ref(scope), &allowed).await?;
            ensure!(
                won <= 1,
                "{won} rewinds of scope `{scope}` completed: they all asked for the same \
                 target, so whichever completed first left nothing for another"
            );
        }
    }
    nothing_half_applied(world).await
}

/// `Then nothing is half-applied`: the database is what completing the rewinds answered
/// `completed` one after the other makes, and nothing else.
#[then("nothing is half-applied")]
async fn nothing_half_applied_step(world: &mut RewindWorld) -> anyhow::Result<()> {
    nothing_half_applied(world).await
}

/// What must hold after any mix of completed and refused rewinds, whatever order they ran in
/// (spec 6.1 to 6.4, 7, 10): no operation is left `preparing`; an operation of the scenario is
/// `completed` exactly when its rewind was answered `completed`; and the database keeps the
/// invariants of any sequence of rewinds and sends ([`rewind_conformance::oracle::consistency`]:
/// whole tombstones, each in the range of a completed operation up to its notice or in a thread
/// its cascade archived, nothing bound to a tombstone, summaries, cursors and frontiers on the
/// visible tail, memberships and grants as they were).
pub(super) async fn nothing_half_applied(world: &RewindWorld) -> anyhow::Result<()> {
    use rewind_conformance::oracle::{consistency, State};
    let before = world.before_snapshot()?;
    let old_operations: BTreeSet<String> = before
        .tables
        .get("rewind_operations")
        .into_iter()
        .flatten()
        .filter_map(|r| serde_json::from_str::<serde_json::Value>(r).ok())
        .filter_map(|v| v.get("id").and_then(|i| i.as_str()).map(str::to_owned))
        .collect();
    let mut problems: Vec<String> = Vec::new();
    let operations: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT id, thread_id, target_message_id, status FROM rewind_operations ORDER BY id",
    )
    .fetch_all(world.pool()?)
    .await
    .context("reading rewind_operations")?;
    let answered: BTreeSet<&str> = world
        .answers
        .iter()
        .filter_map(|(_, r)| match r {
            RewindResponse::Completed { operation_id, .. } => Some(operation_id.as_str()),
            RewindResponse::Refused { .. } => None,
        })
        .collect();
    let mut completed = BTreeSet::new();
    for (id, scope, target, status) in &operations {
        if old_operations.contains(id) {
            continue;
        }
        match status.as_str() {
            "preparing" => problems.push(format!(
                "operation `{id}` (scope `{scope}`, target `{target}`) is left `preparing`"
            )),
            "completed" if !answered.contains(id.as_str()) => problems.push(format!(
                "operation `{id}` (scope `{scope}`, target `{target}`) is `completed`, but no \
                 rewind was answered `completed` with it"
            )),
            "completed" => {
                completed.insert(id.as_str());
            }
            _ => {}
        }
    }
    for id in &answered {
        if !completed.contains(id) {
            problems.push(format!(
                "a rewind was answered `completed` with operation `{id}`, which is not a \
                 `completed` operation of this scenario"
            ));
        }
    }
    let start = State::from_snapshot(before).context("reading the database before")?;
    let now = State::from_snapshot(&world.snapshot().await?).context("reading the database")?;
    problems.extend(
        consistency(&now, Some(&start))
            .iter()
            .map(ToString::to_string),
    );
    ensure!(
        problems.is_empty(),
        "the rewinds left the conversation half-applied:\n  {}",
        problems.join("\n  ")
    );
    Ok(())
}
