//! Database faults: the implementation's database session fails at one phase of a rewind, by a
//! terminated backend (what `pg_terminate_backend` does, as an operator or a failover would) or
//! a statement time-out (SQLSTATE 57014). Afterwards the operation must say what happened
//! (`failed` before any runtime was restored, `repair_required` after), nothing may be
//! half-tombstoned, no operation may be left `preparing`, and a retry must succeed (spec 6.4,
//! 7). Each scenario counts in the database fault matrix of the run summary.
//!
//! How each phase is reached, from outside the implementation:
//! - while planning: the harness holds an exclusive lock on `scope_messages`, so the
//!   implementation's first read of the conversation waits; that session is terminated;
//! - after the operation is recorded: the harness holds the scope's row lock; once a
//!   `preparing` operation exists and a session waits for the lock (the apply), that session
//!   is terminated (an implementation that takes the lock before recording is struck while
//!   planning instead, ambiguity `plan-persist-vs-scope-lock`);
//! - during the runtime restore: the restore is held; every session of the implementation is
//!   terminated, then the restore is let go;
//! - inside apply before the tombstones, after them, and at commit: triggers the harness
//!   installs in the template strike the session that writes the first tombstone, that ends the
//!   first statement that tombstoned, or that commits tombstones
//!   ([`rewind_conformance::inspect::plant_fault`]).

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context as _};
use cucumber::{then, when};
use rewind_conformance::inspect::{lift_fault, plant_fault, HARNESS_SESSION};
use rewind_conformance::sut::RewindResponse;
use rewind_mock_runtimes::faults::FaultKind;
use sqlx::PgConnection;

use crate::suite::matrix::{Cell, MatrixKind};
use crate::suite::world::{Racing, RewindWorld};

/// Where in the rewind the fault strikes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Planning,
    Recorded,
    Restore { agent: String },
    BeforeTombstones,
    AfterTombstones,
    Commit,
}

impl Phase {
    fn parse(text: &str, agent: &str) -> anyhow::Result<Phase> {
        Ok(match text {
            "while planning" => Phase::Planning,
            "after the operation is recorded" => Phase::Recorded,
            "during the runtime restore" => Phase::Restore {
                agent: agent.to_owned(),
            },
            "inside apply, before the tombstones" => Phase::BeforeTombstones,
            "inside apply, after the tombstones" => Phase::AfterTombstones,
            "at commit" => Phase::Commit,
            other => bail!("unknown phase `{other}`"),
        })
    }

    /// The matrix row.
    fn label(&self) -> &'static str {
        match self {
            Phase::Planning => "while planning",
            Phase::Recorded => "after the operation is recorded",
            Phase::Restore { .. } => "during the runtime restore",
            Phase::BeforeTombstones => "inside apply, before the tombstones",
            Phase::AfterTombstones => "inside apply, after the tombstones",
            Phase::Commit => "at commit",
        }
    }

    /// The trigger point of the phases the database's own triggers strike.
    fn trigger(&self) -> Option<&'static str> {
        match self {
            Phase::BeforeTombstones => Some("apply-before-tombstones"),
            Phase::AfterTombstones => Some("apply-after-tombstones"),
            Phase::Commit => Some("commit"),
            _ => None,
        }
    }
}

/// What a database fault did to the rewind, for the steps after it.
#[derive(Debug, Clone)]
pub struct DatabaseFault {
    /// The phase, as the scenario named it.
    phase: Phase,
    /// What was asked.
    request: rewind_conformance::sut::RewindRequest,
    /// Whether it struck before the rewind had recorded its operation.
    before_recording: bool,
    /// The rewind's answer, or how its call failed.
    outcome: Result<RewindResponse, String>,
}

/// Terminates the implementation's sessions on the scenario database (all of them, or only
/// those waiting on a lock); returns how many.
async fn terminate(conn: &mut PgConnection, only_waiting: bool) -> anyhow::Result<usize> {
    let pids: Vec<i32> = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid() \
           AND backend_type = 'client backend' \
           AND application_name IS DISTINCT FROM $1 \
           AND (NOT $2 OR wait_event_type = 'Lock')",
    )
    .bind(HARNESS_SESSION)
    .bind(only_waiting)
    .fetch_all(&mut *conn)
    .await
    .context("reading pg_stat_activity")?;
    for pid in &pids {
        sqlx::query("SELECT pg_terminate_backend($1)")
            .bind(pid)
            .execute(&mut *conn)
            .await
            .context("terminating a backend")?;
    }
    Ok(pids.len())
}

/// Whether a `preparing` operation targets `message`.
async fn preparing(conn: &mut PgConnection, message: &str) -> anyhow::Result<bool> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM rewind_operations \
                        WHERE target_message_id = $1 AND status = 'preparing')",
    )
    .bind(message)
    .fetch_one(conn)
    .await
    .context("reading rewind_operations")
}

/// How long an implementation that locks before planning may wait for the scope's lock without
/// recording its operation before the harness strikes it there.
const RECORD_GRACE: Duration = Duration::from_secs(3);

/// `When human "alice" rewinds to before message "n-4" with a "backend terminated" fault at
/// commit` (phases: `while planning`, `after the operation is recorded`, `during the runtime
/// restore of agent "cody"`, `inside apply, before the tombstones`, `inside apply, after the
/// tombstones`, `at commit`; faults: `backend terminated`, `statement timeout`, the latter
/// inside apply and at commit).
#[when(
    regex = r#"^human "([^"]+)" rewinds to before message "([^"]+)" with a "(backend terminated|statement timeout)" fault (while planning|after the operation is recorded|during the runtime restore|inside apply, before the tombstones|inside apply, after the tombstones|at commit)(?: of agent "([^"]+)")?$"#
)]
async fn rewind_with_fault(
    world: &mut RewindWorld,
    human: String,
    target: String,
    fault: String,
    phase: String,
    agent: String,
) -> anyhow::Result<()> {
    let phase = Phase::parse(&phase, &agent)?;
    ensure!(
        matches!(phase, Phase::Restore { .. }) == !agent.is_empty(),
        "name the agent (`of agent \"<id>\"`) for a fault during the runtime restore, and only then"
    );
    let timeout = fault == "statement timeout";
    ensure!(
        !timeout || phase.trigger().is_some(),
        "a statement time-out is planted inside apply or at commit, where a statement runs long"
    );
    let request = super::when::request_in_own_scope(
        world,
        rewind_conformance::sut::Actor::Human(human),
        target,
    )
    .await?;
    super::when::mark_before(world).await?;
    let pool = world.hold_pool()?.clone();
    let mut admin = pool.acquire().await.context("acquiring a connection")?;

    // Arm the fault.
    let mut held = None;
    match &phase {
        Phase::Planning => {
            let mut tx = pool
                .begin()
                .await
                .context("beginning the harness transaction")?;
            sqlx::query("LOCK TABLE scope_messages IN ACCESS EXCLUSIVE MODE")
                .execute(&mut *tx)
                .await
                .context("locking scope_messages")?;
            held = Some(tx);
        }
        Phase::Recorded => {
            let mut tx = pool
                .begin()
                .await
                .context("beginning the harness transaction")?;
            sqlx::query("SELECT id FROM scopes WHERE id = $1 FOR NO KEY UPDATE")
                .bind(&request.scope_id)
                .fetch_optional(&mut *tx)
                .await
                .context("locking the scope row")?;
            held = Some(tx);
        }
        Phase::Restore { agent } => {
            let (mock, session) = world
                .mocks()?
                .session_of(agent)
                .ok_or_else(|| anyhow!("agent `{agent}` has no runtime session in the fixture"))?;
            world
                .mocks()?
                .add_fault(mock, session, None, FaultKind::Hang, None)?;
        }
        _ => {
            let point = phase.trigger().unwrap_or_default();
            plant_fault(
                &mut admin,
                point,
                if timeout { "timeout" } else { "terminate" },
            )
            .await
            .context("planting the fault")?;
        }
    }

    let api = std::sync::Arc::clone(&world.attached()?.api);
    let mut racing = Racing::start(api, request.clone());
    let limit = super::when::rewind_timeout();
    let started = Instant::now();
    let mut struck = phase.trigger().is_some();
    let mut waited_unrecorded: Option<Instant> = None;
    let mut before_recording = phase == Phase::Planning;
    while !racing.poll().await {
        if !struck {
            match &phase {
                // The harness's own lock-holding transaction would see pg_stat_activity frozen
                // at its first look: every look goes through another session.
                Phase::Planning => {
                    struck = terminate(&mut admin, true).await? > 0;
                    let release = if struck { held.take() } else { None };
                    if let Some(tx) = release {
                        tx.commit().await.context("releasing the harness's lock")?;
                    }
                }
                Phase::Recorded => {
                    let recorded = preparing(&mut admin, &request.target_message_id).await?;
                    let waiting: i64 = sqlx::query_scalar(
                        "SELECT count(*) FROM pg_stat_activity \
                         WHERE datname = current_database() AND wait_event_type = 'Lock' \
                           AND application_name IS DISTINCT FROM $1",
                    )
                    .bind(HARNESS_SESSION)
                    .fetch_one(&mut *admin)
                    .await
                    .context("reading pg_stat_activity")?;
                    let unrecorded_for = match (waiting > 0, recorded) {
                        (true, false) => {
                            waited_unrecorded.get_or_insert_with(Instant::now).elapsed()
                        }
                        _ => Duration::ZERO,
                    };
                    if waiting > 0 && (recorded || unrecorded_for > RECORD_GRACE) {
                        if !recorded {
                            world.take_reading("plan-persist-vs-scope-lock", "plan-under-lock")?;
                            before_recording = true;
                        }
                        terminate(&mut admin, true).await?;
                        struck = true;
                        if let Some(tx) = held.take() {
                            tx.commit().await.context("releasing the harness's lock")?;
                        }
                    }
                }
                Phase::Restore { agent } => {
                    let (mock, session) = world
                        .mocks()?
                        .session_of(agent)
                        .ok_or_else(|| anyhow!("agent `{agent}` has no runtime session"))?;
                    let session = session.to_owned();
                    let journal = world.mocks()?.journal(mock)?;
                    if journal.iter().any(|e| {
                        e.target.as_deref() == Some(session.as_str())
                            && e.outcome == FaultKind::Hang.outcome()
                    }) {
                        terminate(&mut admin, false).await?;
                        struck = true;
                        world.mocks()?.clear_faults(mock, &session)?;
                    }
                }
                _ => {}
            }
        }
        if started.elapsed() > limit {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Disarm whatever did not strike.
    if let Some(tx) = held.take() {
        tx.rollback()
            .await
            .context("releasing the harness's lock")?;
    }
    if let Phase::Restore { agent } = &phase {
        if let Some((mock, session)) = world.mocks()?.session_of(agent) {
            let session = session.to_owned();
            world.mocks()?.clear_faults(mock, &session)?;
        }
    }
    if phase.trigger().is_some() {
        struck = lift_fault(&mut admin).await.context("lifting the fault")?;
    }
    drop(admin);
    let outcome = match racing.answer {
        Some(answer) => answer,
        None => bail!(
            "the rewind did not answer within {}s of its database session failing {}: an \
             implementation answers even when its database fails",
            limit.as_secs(),
            phase.label()
        ),
    };
    ensure!(
        struck,
        "the fault never struck {}: the rewind answered {} without the harness seeing that \
         phase (see the database fault steps for how each phase is reached)",
        phase.label(),
        match &outcome {
            Ok(RewindResponse::Completed { .. }) => "completed".to_owned(),
            Ok(RewindResponse::Refused { message, .. }) => format!("refused ({message})"),
            Err(e) => format!("with an error ({e})"),
        }
    );
    world.cells.push(Cell {
        kind: MatrixKind::DatabaseFault,
        row: phase.label().to_owned(),
        column: fault,
    });
    if let Ok(response) = &outcome {
        world.record_answer(request.clone(), response.clone());
    }
    world.collect_events().await?;
    world.events_mark = Some(world.events.len());
    world.reads_mark = Some(world.reads.len());
    world.db_fault = Some(DatabaseFault {
        phase,
        request,
        before_recording,
        outcome,
    });
    Ok(())
}

/// `Then the database fault left the rewind whole or undone, its operation saying which`: the
/// rewind either completed (everything of it applied: its answer said so) or changed nothing
/// but its operation, which is `failed` when no runtime was restored and `repair_required` when
/// one was (spec 6.4), never `preparing`. An answer that is an error, not a refusal, is
/// accepted: the database failed, and section 9 has no message for that.
#[then("the database fault left the rewind whole or undone, its operation saying which")]
async fn whole_or_undone(world: &mut RewindWorld) -> anyhow::Result<()> {
    let fault = world
        .db_fault
        .clone()
        .ok_or_else(|| anyhow!("no rewind met a database fault in this scenario"))?;
    if let Ok(RewindResponse::Completed { .. }) = &fault.outcome {
        super::then::completes(world).await?;
        return super::storm::nothing_half_applied(world).await;
    }
    if let Ok(RewindResponse::Refused { code, message, .. }) = &fault.outcome {
        super::then::check_code(world, message, code)?;
    }
    // A restore may have started a fresh claude session (the agent's session pointer).
    let (diff, was, now) = super::then::changes_since_before(world, &["agents"]).await?;
    ensure!(
        diff.is_empty(),
        "the rewind did not complete ({}), yet the database changed:\n{diff}",
        describe(&fault.outcome)
    );
    let restored = super::runtime::some_runtime_restored(world)?;
    let added: Vec<serde_json::Value> = now
        .iter()
        .filter(|r| !was.contains(r))
        .filter_map(|r| serde_json::from_str(r).ok())
        .collect();
    let want = if restored {
        "repair_required"
    } else {
        "failed"
    };
    for op in &added {
        let status = op
            .get("status")
            .and_then(|s| s.as_str())
            .unwrap_or_default();
        ensure!(
            status == want,
            "after the database failed {} the operation `{}` is `{status}`, expected `{want}` \
             ({}; spec 6.4)",
            fault.phase.label(),
            op.get("id").and_then(|s| s.as_str()).unwrap_or_default(),
            if restored {
                "a runtime was restored before the failure"
            } else {
                "no runtime was restored"
            }
        );
    }
    ensure!(
        !added.is_empty() || fault.before_recording,
        "after the database failed {} no operation was recorded: the rewind had recorded its \
         `preparing` operation, which must end `{want}` (spec 6.4, 7)",
        fault.phase.label()
    );
    Ok(())
}

fn describe(outcome: &Result<RewindResponse, String>) -> String {
    match outcome {
        Ok(RewindResponse::Completed { .. }) => "it completed".to_owned(),
        Ok(RewindResponse::Refused { message, .. }) => format!("refused with `{message}`"),
        Err(e) => format!("answered with an error: {e}"),
    }
}

/// `When the rewind is retried unless it completed`: the same request again, after a database
/// fault ended it without completing it.
#[when("the rewind is retried unless it completed")]
async fn retry(world: &mut RewindWorld) -> anyhow::Result<()> {
    let fault = world
        .db_fault
        .clone()
        .ok_or_else(|| anyhow!("no rewind met a database fault in this scenario"))?;
    if let Ok(RewindResponse::Completed { .. }) = fault.outcome {
        return Ok(());
    }
    super::when::rewind(world, fault.request).await
}
