//! Runtime recovery steps: faults planted in the mock runtimes, what the mocks were asked (their
//! journals), and what their state says afterwards.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context as _};
use cucumber::{given, then, when};
use rewind_conformance::fixtures::RecoveryPoint;
use rewind_conformance::mocks::{MockRuntime, MockRuntimes, SessionView};
use rewind_conformance::sut::{PruneRequest, RewindResponse};
use rewind_mock_runtimes::faults::FaultKind;
use rewind_mock_runtimes::journal::JournalEntry;

use super::id_list;
use crate::suite::world::{context, FaultCell, RewindWorld};

fn mock_named(name: &str) -> anyhow::Result<MockRuntime> {
    MockRuntime::ALL
        .into_iter()
        .find(|m| m.program() == name)
        .ok_or_else(|| anyhow!("`{name}` is not a mock runtime (codex, claude, opencode)"))
}

/// The agent's runtime id in the fixture, its mock, and its seeded thread or session id.
fn agent_session<'a>(
    world: &'a RewindWorld,
    agent: &str,
) -> anyhow::Result<(String, MockRuntime, &'a str)> {
    let mocks = world.mocks()?;
    let (mock, session) = mocks.session_of(agent).ok_or_else(|| {
        anyhow!("agent `{agent}` has no runtime session in the fixture (`runtime_sessions`)")
    })?;
    Ok((fixture_runtime(world, agent)?, mock, session))
}

/// The agent's runtime id in the scenario's fixture.
pub(super) fn fixture_runtime(world: &RewindWorld, agent: &str) -> anyhow::Result<String> {
    let ctx = context()?;
    let fixture = world
        .fixture
        .as_deref()
        .and_then(|f| ctx.fixtures.get(f))
        .ok_or_else(|| anyhow!("the scenario has no fixture"))?;
    fixture
        .agents
        .iter()
        .find(|a| a.id == agent)
        .map(|a| a.runtime.clone())
        .ok_or_else(|| anyhow!("agent `{agent}` is not in the fixture"))
}

/// The fixture's recovery point of `agent` for `message` (the database row is consumed by the
/// rewind, so the fixture is the reference).
fn recovery_point(
    world: &RewindWorld,
    agent: &str,
    message: &str,
) -> anyhow::Result<RecoveryPoint> {
    let ctx = context()?;
    let fixture = world
        .fixture
        .as_deref()
        .and_then(|f| ctx.fixtures.get(f))
        .ok_or_else(|| anyhow!("the scenario has no fixture"))?;
    fixture
        .recovery_points
        .iter()
        .find(|p| p.agent == agent && p.message == message)
        .cloned()
        .ok_or_else(|| anyhow!("the fixture has no recovery point of `{agent}` for `{message}`"))
}

fn ref_str(point: &RecoveryPoint, key: &str) -> Option<String> {
    point
        .recovery_ref
        .get(key)
        .and_then(|v| v.as_str())
        .map(str::to_owned)
}

fn describe_journal(entries: &[JournalEntry]) -> String {
    if entries.is_empty() {
        return "  (no calls)".to_owned();
    }
    entries
        .iter()
        .map(|e| {
            format!(
                "  {} {} {} -> {}{}",
                e.at,
                e.call,
                e.target.as_deref().unwrap_or("-"),
                e.outcome,
                e.detail
                    .as_deref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether a journal entry is the native restore call of `mock` on `session`.
fn is_restore_call(mock: MockRuntime, session: &str, entry: &JournalEntry) -> bool {
    entry.target.as_deref() == Some(session) && is_a_restore(mock, entry)
}

/// Whether some runtime answered a restore with success in this scenario (a runtime was
/// restored, whatever happened to the rewind afterwards).
pub(super) fn some_runtime_restored(world: &RewindWorld) -> anyhow::Result<bool> {
    let mocks = world.mocks()?;
    for mock in MockRuntime::ALL {
        if mocks
            .journal(mock)?
            .iter()
            .any(|e| e.outcome == "ok" && is_a_restore(mock, e))
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether the journaled call is a restore of this runtime (of any thread or session).
fn is_a_restore(mock: MockRuntime, entry: &JournalEntry) -> bool {
    match mock {
        MockRuntime::Codex => MockRuntime::Codex
            .restore_calls()
            .contains(&entry.call.as_str()),
        // A run that carries a prompt is a delivery (which may name its leaf), not a restore.
        MockRuntime::Claude => {
            argv(entry)
                .iter()
                .any(|a| a.starts_with("--resume-session-at"))
                && !carries_prompt(entry)
        }
        MockRuntime::OpenCode => entry.call.ends_with("/revert") && entry.call.starts_with("POST"),
    }
}

/// Whether a claude run had a user message on stdin (or a prompt argument).
pub(super) fn carries_prompt(entry: &JournalEntry) -> bool {
    entry
        .request
        .get("stdin")
        .and_then(|s| s.as_array())
        .is_some_and(|s| !s.is_empty())
}

/// The command line a claude run journaled.
pub(super) fn argv(entry: &JournalEntry) -> Vec<String> {
    let list = entry
        .request
        .get("argv")
        .or_else(|| entry.request.get("args"))
        .unwrap_or(&entry.request);
    list.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A flag's value in `--flag=value` or `--flag value` form.
pub(super) fn flag_value(argv: &[String], flag: &str) -> Option<String> {
    argv.iter().enumerate().find_map(|(i, a)| {
        if let Some(v) = a.strip_prefix(&format!("{flag}=")) {
            Some(v.to_owned())
        } else if a == flag {
            argv.get(i + 1).cloned()
        } else {
            None
        }
    })
}

/// Plants a restore fault: `the codex runtime answers the restore of agent "cody" with "busy"`.
#[given(
    regex = r#"^the (codex|claude|opencode) runtime answers the restore of agent "([^"]+)" with "([^"]+)"$"#
)]
async fn plant_fault(
    world: &mut RewindWorld,
    mock: String,
    agent: String,
    fault: String,
) -> anyhow::Result<()> {
    let kind = FaultKind::parse(&fault).ok_or_else(|| {
        let known: Vec<&str> = FaultKind::ALL.iter().map(|k| k.label()).collect();
        anyhow!("unknown fault `{fault}` (known: {})", known.join(", "))
    })?;
    let (runtime, agent_mock, session) = agent_session(world, &agent)?;
    let mock = mock_named(&mock)?;
    ensure!(
        mock == agent_mock,
        "agent `{agent}` runs on `{runtime}`, served by the {} mock, not {}",
        agent_mock.program(),
        mock.program()
    );
    world.mocks()?.add_fault(mock, session, None, kind, None)?;
    world.fault_cell = Some(FaultCell {
        runtime,
        fault: kind.label().to_owned(),
    });
    Ok(())
}

/// A restore that answers only after a delay (a hang shorter than the caller's timeout).
#[given(
    regex = r#"^the (codex|claude|opencode) runtime delays the restore of agent "([^"]+)" by (\d+) ms$"#
)]
async fn delay_restore(
    world: &mut RewindWorld,
    mock: String,
    agent: String,
    ms: u64,
) -> anyhow::Result<()> {
    plant_hang(world, &mock, &agent, Some(ms))
}

/// Plants a hang on the agent's restore in its runtime's mock (`hang_ms`: answer after that
/// long; `None`: hold it until it is lifted).
fn plant_hang(
    world: &RewindWorld,
    mock: &str,
    agent: &str,
    hang_ms: Option<u64>,
) -> anyhow::Result<()> {
    let (_, agent_mock, session) = agent_session(world, agent)?;
    let mock = mock_named(mock)?;
    ensure!(
        mock == agent_mock,
        "agent `{agent}` is not served by the {} mock",
        mock.program()
    );
    world
        .mocks()?
        .add_fault(mock, session, None, FaultKind::Hang, hang_ms)?;
    Ok(())
}

/// A restore held for as long as the scenario needs: the runtime does not answer it until
/// `the harness lets the runtime answer the restore of agent "<agent>"`. The rewind stays in
/// the middle of its restore, so its operation is `preparing` meanwhile (spec 6.4).
#[given(regex = r#"^the (codex|claude|opencode) runtime holds the restore of agent "([^"]+)"$"#)]
async fn hold_restore(world: &mut RewindWorld, mock: String, agent: String) -> anyhow::Result<()> {
    plant_hang(world, &mock, &agent, None)
}

/// Lifts the hold planted by `the ... runtime holds the restore of agent "<agent>"`: the held
/// call goes ahead as if nothing had been planted.
#[when(regex = r#"^the harness lets the runtime answer the restore of agent "([^"]+)"$"#)]
async fn release_restore(world: &mut RewindWorld, agent: String) -> anyhow::Result<()> {
    let (_, mock, session) = agent_session(world, &agent)?;
    world.mocks()?.clear_faults(mock, session)?;
    Ok(())
}

/// `Given another codex app-server holds the thread of agent "cody"`: the harness starts an app-server
/// of its own and resumes the agent's thread in it, as a daemon's live session would, and
/// keeps it running. A real app-server lets one process at a time load a thread.
#[given(expr = "another codex app-server holds the thread of agent {string}")]
async fn another_writer(world: &mut RewindWorld, agent: String) -> anyhow::Result<()> {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let (_, mock, thread) = agent_session(world, &agent)?;
    ensure!(
        mock == MockRuntime::Codex,
        "agent `{agent}` is not a codex agent"
    );
    let thread = world.mocks()?.native_id(thread);
    let endpoints = world.mocks()?.endpoints();
    let mut child = tokio::process::Command::new(&endpoints.codex_program)
        .args(&endpoints.codex_args)
        .envs(&endpoints.codex_env)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting the holding codex app-server")?;
    let mut stdin = child.stdin.take().context("the app-server's stdin")?;
    let stdout = child.stdout.take().context("the app-server's stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let requests = [
        serde_json::json!({ "id": 1, "method": "initialize", "params": { "clientInfo": { "name": "rewind-harness", "version": "1" }, "capabilities": { "experimentalApi": true } } }),
        serde_json::json!({ "method": "initialized" }),
        serde_json::json!({ "id": 2, "method": "thread/resume", "params": { "threadId": thread } }),
    ];
    for request in requests {
        stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .context("writing to the holding app-server")?;
    }
    stdin
        .flush()
        .await
        .context("writing to the holding app-server")?;
    let answer = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(line) = lines.next_line().await? {
            let value: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            if value.get("id") == Some(&serde_json::json!(2)) {
                return Ok(value);
            }
        }
        anyhow::Ok(serde_json::Value::Null)
    })
    .await
    .context("the holding app-server did not answer thread/resume within 10 s")??;
    ensure!(
        answer.get("result").is_some(),
        "the holding app-server could not resume thread `{thread}`: {answer}"
    );
    world
        .runtime_holders
        .push(crate::suite::world::RuntimeHolder {
            child,
            _pipes: (stdin, lines),
        });
    Ok(())
}

/// Restarts the OpenCode server with snapshots on (reverting would roll back files too).
#[given("the opencode server keeps file snapshots")]
async fn opencode_snapshots(world: &mut RewindWorld) -> anyhow::Result<()> {
    let mocks = world
        .mocks
        .as_mut()
        .ok_or_else(|| anyhow!("no mock runtimes yet"))?;
    mocks.use_opencode_with_snapshots().await?;
    // The restarted server listens elsewhere: point the implementation at it.
    reattach(world).await
}

/// Makes the Codex mock imitate another release.
#[given(expr = "the codex runtime is release {string}")]
async fn codex_release(world: &mut RewindWorld, version: String) -> anyhow::Result<()> {
    world
        .mocks
        .as_mut()
        .ok_or_else(|| anyhow!("no mock runtimes yet"))?
        .use_codex_version(&version)?;
    reattach(world).await
}

/// Attaches the implementation again, to the mock runtimes' current endpoints.
pub(super) async fn reattach(world: &mut RewindWorld) -> anyhow::Result<()> {
    let endpoints = world.mocks()?.endpoints();
    let holds_restore = world.holds_restore;
    let ctx = context()?;
    let attached = world
        .attached
        .as_mut()
        .ok_or_else(|| anyhow!("no conversation yet"))?;
    attached.api.detach().await?;
    let request = ctx.attach_request(&attached.db, endpoints, holds_restore);
    attached.api = attached.violations.watch(ctx.sut.attach(&request).await)?;
    Ok(())
}

/// Waits (up to 10 s) until the mock journaled the restore call of the agent's session.
#[when(
    regex = r#"^the (codex|claude|opencode) runtime has received the restore of agent "([^"]+)"$"#
)]
async fn wait_for_restore(
    world: &mut RewindWorld,
    mock: String,
    agent: String,
) -> anyhow::Result<()> {
    let mock = mock_named(&mock)?;
    let (_, _, session) = agent_session(world, &agent)?;
    let session = session.to_owned();
    let started = Instant::now();
    loop {
        let journal = world.mocks()?.journal(mock)?;
        if journal.iter().any(|e| is_restore_call(mock, &session, e)) {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(10) {
            bail!(
                "the {} mock did not receive the restore of `{agent}` within 10 s; it received:\n{}",
                mock.program(),
                describe_journal(&journal)
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Guard problems staged in the database before the rewind.
#[given(regex = r#"^agent "([^"]+)" has this problem: (.+)$"#)]
async fn agent_problem(
    world: &mut RewindWorld,
    agent: String,
    problem: String,
) -> anyhow::Result<()> {
    let pool = world.pool()?;
    let sql = match problem.as_str() {
        "the agent was deleted" => "UPDATE agents SET deleted_at = now() WHERE id = $1",
        "the agent's machine was deleted" => {
            "UPDATE machines SET deleted_at = now() \
             WHERE id = (SELECT machine_id FROM agents WHERE id = $1)"
        }
        "the recovery points were removed" => {
            "DELETE FROM message_recovery_points WHERE agent_id = $1"
        }
        "the recovery points use another strategy" => {
            "UPDATE message_recovery_points SET strategy = CASE strategy \
                 WHEN 'codex_app_server_turns' THEN 'opencode_session_revert' \
                 ELSE 'codex_app_server_turns' END \
             WHERE agent_id = $1"
        }
        "activity in another conversation" => {
            // The agent answers in the lobby after everything else: a later global seq in a
            // scope the rewind does not cover.
            "WITH g AS (UPDATE workspaces w SET latest_global_seq = w.latest_global_seq + 1 \
                        FROM agents a WHERE a.id = $1 AND w.id = a.workspace_id \
                        RETURNING w.id AS workspace_id, w.latest_global_seq), \
                  s AS (UPDATE scopes SET latest_seq = latest_seq + 1, \
                        latest_global_seq = (SELECT latest_global_seq FROM g), \
                        visible_message_count = visible_message_count + 1 \
                        WHERE id = 'ch-lobby' RETURNING latest_seq) \
             INSERT INTO scope_messages (id, workspace_id, scope_id, seq, global_seq, author_kind, \
                                         author_agent_id, content) \
             SELECT 'elsewhere-' || $1, g.workspace_id, 'ch-lobby', s.latest_seq, \
                    g.latest_global_seq, 'agent', $1, 'an answer in the lobby' FROM g, s"
        }
        other => bail!(
            "unknown agent problem `{other}` (known: the agent was deleted; the agent's machine \
             was deleted; the recovery points were removed; the recovery points use another \
             strategy; activity in another conversation)"
        ),
    };
    let done = sqlx::query(sql)
        .bind(&agent)
        .execute(pool)
        .await
        .with_context(|| format!("staging `{problem}` for agent `{agent}`"))?;
    ensure!(
        done.rows_affected() > 0,
        "staging `{problem}` changed nothing for agent `{agent}`"
    );
    Ok(())
}

/// Records the agent under another runtime id (a strategy name, an unknown runtime).
#[given(expr = "the runtime of agent {string} is recorded as {string}")]
async fn agent_runtime(
    world: &mut RewindWorld,
    agent: String,
    runtime: String,
) -> anyhow::Result<()> {
    let done = sqlx::query("UPDATE agents SET runtime = $2 WHERE id = $1")
        .bind(&agent)
        .bind(&runtime)
        .execute(world.pool()?)
        .await
        .context("changing the agent's runtime")?;
    ensure!(done.rows_affected() == 1, "agent `{agent}` does not exist");
    Ok(())
}

/// Prunes recovery points through the implementation's GC.
#[when(expr = "the recovery points of agent {string} are pruned")]
async fn prune(world: &mut RewindWorld, agent: String) -> anyhow::Result<()> {
    let api = std::sync::Arc::clone(&world.attached()?.api);
    api.prune_recovery_points(&PruneRequest { agent_id: agent })
        .await?;
    Ok(())
}

/// The section 9 messages that are not about runtime recovery (spec section 8 asks failures to
/// tell permission, other-human, reply-thread, hot/cold, runtime recovery and concurrent
/// modification apart).
const NOT_RUNTIME_ERRORS: [&str; 7] = [
    "err.not-own-human-message",
    "err.system-message-target",
    "err.hot-cold-boundary",
    "err.other-human-message",
    "err.later-reply-thread",
    "err.suffix-drift",
    "err.rewind-in-progress",
];

/// A failed restore is refused; section 9 gives it no text, so any wording passes that does not
/// claim one of the non-runtime causes (ambiguity `restore-failure-wording`).
#[then("the rewind is refused as a failed runtime restore")]
pub(super) async fn refused_as_restore_failure(world: &mut RewindWorld) -> anyhow::Result<()> {
    let (code, message) = match world.last_response()? {
        RewindResponse::Refused { code, message, .. } => (code.clone(), message.clone()),
        RewindResponse::Completed { status, .. } => {
            bail!("expected the rewind to be refused as a failed runtime restore, but it completed with status `{status}`")
        }
    };
    let ctx = context()?;
    let rule = ctx.catalog.error_by_message(&message);
    if let Some(rule) = rule.filter(|r| NOT_RUNTIME_ERRORS.contains(&r.id.as_str())) {
        bail!(
            "a failed runtime restore was refused with `{message}` (rule `{}`), which names \
             another cause; section 8 asks for errors that tell runtime recovery apart",
            rule.id
        );
    }
    let reading = if rule.is_some() {
        "runtime-guard-message"
    } else {
        "own-wording"
    };
    world.take_reading("restore-failure-wording", reading)?;
    super::then::check_code(world, &message, &code)
}

/// After a restore whose outcome the implementation cannot know (it hung past the limit, the
/// runtime died mid-call, or a "success" had no effect), `failed` and `repair_required` are both
/// defensible (ambiguity `restore-outcome-unknown`).
#[then(
    regex = r#"^the rewind operation is "failed", or "repair_required" as the restore's outcome is unknown$"#
)]
async fn failed_or_unknown(world: &mut RewindWorld) -> anyhow::Result<()> {
    let statuses: Vec<String> = sqlx::query_scalar("SELECT status FROM rewind_operations")
        .fetch_all(world.pool()?)
        .await
        .context("reading rewind operations")?;
    let reading = match statuses.as_slice() {
        [s] if s == "failed" => "failed",
        [s] if s == "repair_required" => "repair-required",
        _ => bail!(
            "expected one operation with status `failed` or `repair_required`, found {statuses:?}"
        ),
    };
    world.take_reading("restore-outcome-unknown", reading)
}

async fn expect_view(mocks: &MockRuntimes, agent: &str) -> anyhow::Result<SessionView> {
    mocks
        .view(agent)
        .await?
        .ok_or_else(|| anyhow!("the runtime no longer has the session of agent `{agent}`"))
}

/// The agent's runtime was asked for its native restore with the coordinates of the recovery
/// point, the restore was verified by a later read-back, and the runtime's state now sits
/// exactly at the recovery point.
#[then(
    expr = "the runtime of agent {string} was restored to its recovery point for message {string}"
)]
async fn restored_to_point(
    world: &mut RewindWorld,
    agent: String,
    message: String,
) -> anyhow::Result<()> {
    let (_, mock, session) = agent_session(world, &agent)?;
    let point = recovery_point(world, &agent, &message)?;
    let mocks = world.mocks()?;
    let journal = mocks.journal(mock)?;
    let seeded = mocks
        .seeded_ids(&agent)
        .ok_or_else(|| anyhow!("agent `{agent}` has no seeded session"))?
        .to_vec();
    let view = expect_view(mocks, &agent).await?;
    let restore_at = journal
        .iter()
        .position(|e| is_restore_call(mock, session, e) && e.outcome == "ok");
    let show = || describe_journal(&journal);
    match mock {
        MockRuntime::Codex => {
            let turn_count = point
                .recovery_ref
                .get("turnCount")
                .and_then(|v| v.as_u64())
                .ok_or_else(|| anyhow!("recovery point `{}` has no turnCount", point.id))?
                as usize;
            let want: Vec<String> = seeded.iter().take(turn_count).cloned().collect();
            ensure!(
                view.ids == want,
                "the codex thread of `{agent}` has turns {:?}, but the recovery point \
                 (turnCount {turn_count}) leaves {:?}",
                view.ids,
                want
            );
            if seeded.len() > turn_count {
                // Either native restore counts (ambiguity `codex-restore-method`): the spec's
                // `thread/rollback` dropping the turns after the point, or, on releases without
                // it, `thread/revert` before the first turn to drop.
                let at = restore_at.ok_or_else(|| {
                    anyhow!("no successful thread/rollback or thread/revert of thread `{session}`; the codex mock received:\n{}", show())
                })?;
                let request = &journal[at].request;
                let reading = if journal[at].call == "thread/revert" {
                    let before = request.get("beforeTurnId").and_then(|v| v.as_str());
                    ensure!(
                        before == Some(seeded[turn_count].as_str()),
                        "thread/revert asked for beforeTurnId {before:?}, but the first turn to \
                         drop is {:?}",
                        seeded[turn_count]
                    );
                    "thread-revert"
                } else {
                    let num_turns = request.get("numTurns").and_then(|v| v.as_u64());
                    ensure!(
                        num_turns == Some((seeded.len() - turn_count) as u64),
                        "thread/rollback asked for numTurns {num_turns:?}, but {} turns had to go",
                        seeded.len() - turn_count
                    );
                    "thread-rollback"
                };
                ensure!(
                    journal[at + 1..].iter().any(|e| {
                        (e.call == "thread/read" || e.call == "thread/turns/list")
                            && e.target.as_deref() == Some(session)
                            && e.outcome == "ok"
                    }),
                    "the restore of thread `{session}` was not verified by a later thread/read or \
                     thread/turns/list; the codex mock received:\n{}",
                    show()
                );
                world.take_reading("codex-restore-method", reading)?;
            }
        }
        MockRuntime::Claude => {
            let boundary = ref_str(&point, "boundaryUuid").ok_or_else(|| {
                anyhow!("recovery point `{}` is a fresh-session boundary", point.id)
            })?;
            let at = restore_at.ok_or_else(|| {
                anyhow!("no successful claude run resumed session `{session}` at a boundary; the claude mock received:\n{}", show())
            })?;
            let args = argv(&journal[at]);
            ensure!(
                flag_value(&args, "--resume-session-at").as_deref() == Some(boundary.as_str())
                    && flag_value(&args, "--resume").as_deref() == Some(session),
                "the claude run was {args:?}, not `--resume {session} --resume-session-at {boundary}`"
            );
            let upto = seeded
                .iter()
                .position(|u| *u == boundary)
                .ok_or_else(|| anyhow!("boundary `{boundary}` is not in the seeded transcript"))?;
            let reading =
                claude_restore_reading(&view.ids, &seeded[..=upto], true).ok_or_else(|| {
                    anyhow!(
                        "the live claude chain of `{agent}` is {:?}: it neither ends at the \
                         boundary {boundary} nor still runs through it, the boundary left for \
                         the next delivery",
                        view.ids
                    )
                })?;
            world.take_reading("claude-restore-evidence", reading)?;
        }
        MockRuntime::OpenCode => {
            let message_id = ref_str(&point, "messageId")
                .ok_or_else(|| anyhow!("recovery point `{}` has no messageId", point.id))?;
            let at = restore_at.ok_or_else(|| {
                anyhow!(
                    "no successful revert of session `{session}`; the opencode mock received:\n{}",
                    show()
                )
            })?;
            let asked = journal[at]
                .request
                .get("messageID")
                .and_then(|v| v.as_str());
            ensure!(
                asked == Some(message_id.as_str()),
                "the revert asked for messageID {asked:?}, but the recovery point is the prompt {message_id}"
            );
            ensure!(
                journal[at + 1..].iter().any(|e| e.call.starts_with("GET")
                    && e.target.as_deref() == Some(session)),
                "the revert of session `{session}` was not verified by a later read; the opencode mock received:\n{}",
                show()
            );
            ensure!(
                view.reverted_at.as_deref() == Some(message_id.as_str()),
                "the opencode session of `{agent}` is reverted at {:?}, not at {message_id}",
                view.reverted_at
            );
        }
    }
    Ok(())
}

/// Which reading of register entry `claude-restore-evidence` a claude session shows right after
/// a restore: its live chain ends at the boundary (`leaf-at-boundary`), or, when a
/// `--resume-session-at` run validated the boundary, the chain still runs through it to the
/// turns after it, the boundary taking effect with the next prompt
/// (`boundary-with-next-prompt`, which the next delivery's checks then prove); `None` for
/// anything else.
pub(super) fn claude_restore_reading(
    now: &[String],
    at_boundary: &[String],
    validated: bool,
) -> Option<&'static str> {
    if now == at_boundary {
        Some("leaf-at-boundary")
    } else if validated && now.len() > at_boundary.len() && now.starts_with(at_boundary) {
        Some("boundary-with-next-prompt")
    } else {
        None
    }
}

/// The codex thread's turns now.
#[then(regex = r#"^the codex thread of agent "([^"]+)" has (?:turns "([^"]*)"|no turns)$"#)]
async fn codex_turns(world: &mut RewindWorld, agent: String, turns: String) -> anyhow::Result<()> {
    let view = expect_view(world.mocks()?, &agent).await?;
    let want = id_list(&turns);
    ensure!(
        view.ids == want,
        "the codex thread of `{agent}` has turns {:?}, expected {want:?}",
        view.ids
    );
    Ok(())
}

/// The session is exactly as seeded (no restore took effect).
#[then(regex = r#"^the (codex|claude|opencode) session of agent "([^"]+)" is as seeded$"#)]
async fn as_seeded(world: &mut RewindWorld, _mock: String, agent: String) -> anyhow::Result<()> {
    let mocks = world.mocks()?;
    let view = expect_view(mocks, &agent).await?;
    let seeded = mocks.seeded_ids(&agent).unwrap_or_default();
    ensure!(
        view.ids == seeded && view.reverted_at.is_none(),
        "the session of `{agent}` changed: now {:?} (reverted at {:?}), seeded {:?}",
        view.ids,
        view.reverted_at,
        seeded
    );
    Ok(())
}

/// `Then the rewind of "codex-3, codex-4" either fails the codex restore of agent "cody", leaving
/// them and its thread as they were, or completes with the thread restored to its recovery point
/// for message "codex-3"`: a Codex release without `thread/rollback`, the spec's restore (register
/// `codex-restore-method`). Refused: a failed runtime restore, the messages untouched, at most a
/// failed operation, the thread as seeded. Completed: the thread restored by `thread/revert`
/// (checked as any codex restore) and the messages rewound tombstones.
#[then(
    regex = r#"^the rewind of "([^"]+)" either fails the codex restore of agent "([^"]+)", leaving them and its thread as they were, or completes with the thread restored to its recovery point for message "([^"]+)"$"#
)]
async fn codex_restore_or_refusal(
    world: &mut RewindWorld,
    names: String,
    agent: String,
    message: String,
) -> anyhow::Result<()> {
    let refused = matches!(world.last_response()?, RewindResponse::Refused { .. });
    if refused {
        refused_as_restore_failure(world).await?;
        super::then::untouched(world, names).await?;
        super::then::no_operation(world).await?;
        as_seeded(world, "codex".to_owned(), agent).await?;
        world.take_reading("codex-restore-method", "refuse")
    } else {
        super::then::completes(world).await?;
        restored_to_point(world, agent, message).await?;
        super::then::are_tombstones(world, names).await
    }
}

/// The journal shows the planted fault answered the restore.
#[then(
    regex = r#"^the (codex|claude|opencode) runtime answered the restore of agent "([^"]+)" with the fault "([^"]+)"$"#
)]
async fn answered_with_fault(
    world: &mut RewindWorld,
    mock: String,
    agent: String,
    fault: String,
) -> anyhow::Result<()> {
    let mock = mock_named(&mock)?;
    let kind = FaultKind::parse(&fault).ok_or_else(|| anyhow!("unknown fault `{fault}`"))?;
    let (_, _, session) = agent_session(world, &agent)?;
    let journal = world.mocks()?.journal(mock)?;
    ensure!(
        journal
            .iter()
            .any(|e| is_restore_call(mock, session, e) && e.outcome == kind.outcome()),
        "the {} mock never answered a restore of `{session}` with {}; it received:\n{}",
        mock.program(),
        kind.outcome(),
        describe_journal(&journal)
    );
    Ok(())
}

/// No claude run carried the flag (restores must not roll back files by default).
#[then(expr = "no claude run passed {string}")]
async fn no_claude_flag(world: &mut RewindWorld, flag: String) -> anyhow::Result<()> {
    let journal = world.mocks()?.journal(MockRuntime::Claude)?;
    ensure!(
        journal.iter().any(|e| e.call != "process/start"),
        "the claude mock received no call at all, so the check proves nothing"
    );
    let offending: Vec<&JournalEntry> = journal
        .iter()
        .filter(|e| {
            argv(e)
                .iter()
                .any(|a| *a == flag || a.starts_with(&format!("{flag}=")))
        })
        .collect();
    ensure!(
        offending.is_empty(),
        "claude was run with `{flag}`:\n{}",
        describe_journal(&offending.into_iter().cloned().collect::<Vec<_>>())
    );
    Ok(())
}

fn calls(journal: &[JournalEntry], mock: MockRuntime) -> Vec<JournalEntry> {
    journal
        .iter()
        // The harness itself starts the OpenCode server; its start is not a call.
        .filter(|e| !(mock == MockRuntime::OpenCode && e.call == "process/start"))
        .cloned()
        .collect()
}

/// The mock received nothing (for codex and claude: not even a process start).
#[then(regex = r#"^the (codex|claude|opencode) runtime received no call$"#)]
async fn no_call(world: &mut RewindWorld, mock: String) -> anyhow::Result<()> {
    let mock = mock_named(&mock)?;
    let received = calls(&world.mocks()?.journal(mock)?, mock);
    ensure!(
        received.is_empty(),
        "the {} mock was called:\n{}",
        mock.program(),
        describe_journal(&received)
    );
    Ok(())
}

/// The mock received no call of this name (`revert`, `thread/rollback`, ...).
#[then(regex = r#"^the (codex|claude|opencode) runtime received no "([^"]+)" call$"#)]
async fn no_named_call(world: &mut RewindWorld, mock: String, call: String) -> anyhow::Result<()> {
    let mock = mock_named(&mock)?;
    let journal = world.mocks()?.journal(mock)?;
    let named: Vec<JournalEntry> = journal
        .iter()
        .filter(|e| e.call == call || e.call.ends_with(&format!("/{call}")))
        .cloned()
        .collect();
    ensure!(
        named.is_empty(),
        "the {} mock received `{call}`:\n{}",
        mock.program(),
        describe_journal(&named)
    );
    Ok(())
}

/// No mock received anything: the rewind was refused before the restore step.
#[then("no runtime received a call")]
async fn no_runtime_call(world: &mut RewindWorld) -> anyhow::Result<()> {
    let mocks = world.mocks()?;
    for mock in MockRuntime::ALL {
        let received = calls(&mocks.journal(mock)?, mock);
        ensure!(
            received.is_empty(),
            "the {} mock was called although the rewind was refused before any restore:\n{}",
            mock.program(),
            describe_journal(&received)
        );
    }
    Ok(())
}

/// The agent forgot its claude session: its next delivery starts a new one.
#[then(expr = "agent {string} starts its next delivery in a fresh session")]
async fn fresh_session(world: &mut RewindWorld, agent: String) -> anyhow::Result<()> {
    let (_, _, seeded_session) = agent_session(world, &agent)?;
    let session: Option<String> =
        sqlx::query_scalar("SELECT runtime_session_id FROM agents WHERE id = $1")
            .bind(&agent)
            .fetch_one(world.pool()?)
            .await
            .context("reading the agent's session")?;
    ensure!(
        session.as_deref() != Some(seeded_session),
        "agent `{agent}` still points at session `{seeded_session}`: its next delivery would resume the rewound context"
    );
    Ok(())
}

/// Every successful restore call any mock received came before the first tombstone write.
#[then("every runtime restore happened before the first tombstone")]
async fn restores_before_apply(world: &mut RewindWorld) -> anyhow::Result<()> {
    let mark = world
        .log_mark
        .ok_or_else(|| anyhow!("no statement-log mark (this step follows a `When`)"))?;
    let first = {
        let mut conn = world
            .pool()?
            .acquire()
            .await
            .context("acquiring a connection")?;
        rewind_conformance::inspect::first_message_update_since(&mut conn, mark)
            .await
            .context("reading the statement log")?
            .ok_or_else(|| anyhow!("nothing was tombstoned"))?
    };
    let mocks = world.mocks()?;
    let mut restores = 0;
    for mock in MockRuntime::ALL {
        for entry in mocks.journal(mock)? {
            let Some(session) = entry.target.as_deref() else {
                continue;
            };
            if !is_restore_call(mock, session, &entry) || entry.outcome != "ok" {
                continue;
            }
            restores += 1;
            let at = chrono::DateTime::parse_from_rfc3339(&entry.at)
                .with_context(|| format!("journal time `{}`", entry.at))?;
            ensure!(
                at <= first,
                "{} restored `{session}` at {} but the first tombstone was written at {}",
                mock.program(),
                entry.at,
                first.to_rfc3339()
            );
        }
    }
    ensure!(restores > 0, "no runtime restore call was journaled");
    Ok(())
}

/// The recovery points the agent still has, by message.
#[then(expr = "the recovery points of agent {string} are for messages {string}")]
async fn remaining_points(
    world: &mut RewindWorld,
    agent: String,
    messages: String,
) -> anyhow::Result<()> {
    let found: Vec<String> = sqlx::query_scalar(
        "SELECT message_id FROM message_recovery_points WHERE agent_id = $1 ORDER BY message_id",
    )
    .bind(&agent)
    .fetch_all(world.pool()?)
    .await
    .context("reading recovery points")?;
    let mut want = id_list(&messages);
    want.sort();
    ensure!(
        found == want,
        "agent `{agent}` has recovery points for {found:?}, expected {want:?}"
    );
    Ok(())
}

/// With several agents, a failure after another agent's restore took effect needs repair;
/// one before any restore took effect is a plain failure.
#[then(
    regex = r#"^the operation is "repair_required" if another agent's runtime was restored first, else "failed"$"#
)]
async fn failed_or_repair(world: &mut RewindWorld) -> anyhow::Result<()> {
    let mocks = world.mocks()?;
    let mut restored_ok = false;
    for mock in MockRuntime::ALL {
        for entry in mocks.journal(mock)? {
            if let Some(session) = entry.target.as_deref() {
                restored_ok |= is_restore_call(mock, session, &entry) && entry.outcome == "ok";
            }
        }
    }
    let want = if restored_ok {
        "repair_required"
    } else {
        "failed"
    };
    let statuses: Vec<String> = sqlx::query_scalar("SELECT status FROM rewind_operations")
        .fetch_all(world.pool()?)
        .await
        .context("reading rewind operations")?;
    ensure!(
        statuses == [want],
        "expected one operation with status `{want}` (a runtime restore {} before the failure), found {statuses:?}",
        if restored_ok { "had taken effect" } else { "had not taken effect" }
    );
    Ok(())
}
