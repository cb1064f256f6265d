//! Codex restore (`codex_app_server_turns`): the reference acts as the daemon. It starts
//! `codex app-server` (JSON-RPC 2.0 without the `"jsonrpc"` field, one JSON object per line on
//! stdio), initializes, and loads the thread with `thread/resume {threadId, excludeTurns: true}`
//! (which also makes this process the thread's writer). What follows depends on the thread's
//! `historyMode`, as the app-server reports it, never on a configured release:
//!
//! - **paginated** (what Codex 0.155 and later start by default): the turns are read with
//!   `thread/turns/list {sortDirection: "asc", itemsView: "notLoaded", limit}`, following
//!   `nextCursor` until it is null (not with the full-history `thread/read {includeTurns}`,
//!   which these releases deprecate for paginated threads); then `thread/revert {threadId,
//!   beforeTurnId}` with the id of turn number `turnCount` (counted from 0: the first turn to
//!   drop), and the turns are listed again. Codex 0.155 and 0.171 both revert paginated
//!   threads.
//! - **legacy** (threads started with `historyMode: "legacy"`, or a release that reports no
//!   mode): the turns are read with `thread/read {includeTurns: true}`, `thread/rollback
//!   {threadId, numTurns: turns - turnCount}` drops the turns after the recovery point, and
//!   `thread/read` reads them back. Only releases before 0.156 have `thread/rollback`; a later
//!   one answers it as an unknown variant, so a legacy thread there fails the restore as
//!   [`RestoreFailure::Refused`] and nothing is changed (such a release cannot revert a legacy
//!   thread either).
//!
//! Either way nothing is dropped when the thread already holds exactly `turnCount` turns (the
//! read-back still verifies it), and the read-back must hold exactly the first `turnCount`
//! turns read before (same ids, same order).
//!
//! One writer per thread: an app-server refuses to load a thread another app-server process
//! has loaded (`thread <id> already has an active writer`). The reference holds no app-server
//! between calls (one per restore or delivery, shut down at its end), so it never blocks
//! itself; a thread held by someone else (a daemon's own app-server, say) is refused at
//! `thread/resume`, before anything changed: [`RestoreFailure::Refused`], and nothing is
//! applied.
//!
//! Failure classes (every one leaves the database untouched):
//! - a `threadId` that is not a UUID: [`RestoreFailure::BadRef`], and no app-server is started
//!   (the real app-server refuses such ids with `invalid thread id`);
//! - the program cannot be started: [`RestoreFailure::Unreachable`]; a line on its stdout that is
//!   not a JSON object, or an answer without the expected turns (`thread.turns`, `data`), or a
//!   turn listing whose cursor does not advance: `Unreachable` too (the runtime broke its
//!   protocol);
//! - no answer within `timeout` (the whole restore, start to verification):
//!   [`RestoreFailure::Timeout`], naming the call in flight;
//! - stdout closes (the process exits) before an answer: [`RestoreFailure::Crashed`] with the exit
//!   status and the tail of its stderr;
//! - `no rollout found for thread id ...`, `thread not found: ...`, `thread not loaded: ...`:
//!   [`RestoreFailure::UnknownSession`];
//! - a refusal because a turn is in progress (`Cannot rollback while a turn is in progress.`), or
//!   `-32001 "Server overloaded; retry later."`: [`RestoreFailure::Busy`];
//! - any other JSON-RPC error (a release without `thread/rollback` for a legacy thread, another
//!   writer, `turn not found: ...`): [`RestoreFailure::Refused`] with the runtime's message;
//! - the thread holds FEWER turns than `turnCount`: [`RestoreFailure::NotVerified`] (the runtime
//!   cannot show the recovery point; nothing is dropped);
//! - the read-back does not hold exactly the first `turnCount` turns read before:
//!   [`RestoreFailure::NotVerified`].
//!
//! Notifications (`deprecationNotice`, `thread/status/changed`, `thread/reverted`, ...) are
//! ignored; server-to-client requests are answered with a JSON-RPC error (the restore approves
//! nothing). At the end the child's stdin is closed and the child awaited (killed when it does
//! not exit in time, and at once after a timeout): no process outlives the restore.
//!
//! Live delivery ([`deliver`]) drives the same app-server: load the agent's thread the same
//! way and count its turns (or start a new thread in the release's default mode, which is
//! paginated from 0.155 on, so that every current release can revert it), hand `{threadId,
//! turnCount}` to the commit callback, then `turn/start` and read the turn's notifications
//! until its `turn/completed`, with the same failure classes.

use std::collections::VecDeque;
use std::future::Future;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{CodexSettings, DeliveryError, PointToCommit, RestoreFailure, Restored};
use crate::capabilities::strategy;

const RUNTIME: &str = "codex";
/// How much of the child's stderr a crash report keeps.
const STDERR_TAIL: usize = 2000;
/// How long a child that closed stdout, or whose stdin was closed, gets to exit.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// The JSON-RPC code of a server too busy to take the request.
const OVERLOADED: i64 = -32001;

/// Rolls the thread back to `turn_count` turns and verifies it.
pub async fn restore(
    settings: &CodexSettings,
    timeout: Duration,
    thread_id: &str,
    turn_count: u64,
) -> Result<Restored, RestoreFailure> {
    if uuid::Uuid::parse_str(thread_id).is_err() {
        return Err(RestoreFailure::BadRef {
            strategy: strategy::CODEX_APP_SERVER_TURNS.to_owned(),
            detail: format!("`threadId` `{thread_id}` is not a Codex thread id (a UUID)"),
        });
    }
    let deadline = Instant::now() + timeout;
    let mut server = AppServer::spawn(settings)?;
    let outcome =
        tokio::time::timeout_at(deadline, restore_thread(&mut server, thread_id, turn_count)).await;
    match outcome {
        Ok(result) => {
            let grace = deadline
                .saturating_duration_since(Instant::now())
                .min(EXIT_GRACE);
            server.shut_down(grace).await;
            result
        }
        Err(_) => {
            let action = server.action.clone();
            server.shut_down(Duration::ZERO).await;
            Err(RestoreFailure::Timeout {
                runtime: RUNTIME,
                action,
                timeout_ms: timeout.as_millis(),
            })
        }
    }
}

/// `initialize` and `initialized` (no experimental capability: nothing here needs one).
async fn initialize(server: &mut AppServer, thread_id: &str) -> Result<(), RestoreFailure> {
    server
        .call(
            "initialize",
            json!({
                "clientInfo": {
                    "name": "rewind-reference",
                    "title": "Rewind reference implementation",
                    "version": env!("CARGO_PKG_VERSION"),
                },
            }),
            "initialize",
            thread_id,
        )
        .await?;
    server.notify("initialized").await
}

/// How a thread keeps its history, as `thread/resume` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HistoryMode {
    /// Paged history: restored by `thread/revert`, read by `thread/turns/list`.
    Paginated,
    /// Whole-rollout history (or a release that reports no mode): restored by
    /// `thread/rollback`, read by `thread/read`.
    Legacy,
}

impl HistoryMode {
    fn of(resumed: &Value) -> HistoryMode {
        match resumed
            .pointer("/thread/historyMode")
            .and_then(Value::as_str)
        {
            Some("paginated") => HistoryMode::Paginated,
            _ => HistoryMode::Legacy,
        }
    }
}

/// How many turns one `thread/turns/list` page asks for.
const TURNS_PAGE: u64 = 100;

/// `thread/resume {threadId, excludeTurns: true}`: loads the thread in this process (as its
/// writer) and learns its history mode.
async fn load_thread(
    server: &mut AppServer,
    thread_id: &str,
) -> Result<HistoryMode, RestoreFailure> {
    let resumed = server
        .call(
            "thread/resume",
            json!({ "threadId": thread_id, "excludeTurns": true }),
            &format!("thread/resume {thread_id}"),
            thread_id,
        )
        .await?;
    if resumed.get("thread").and_then(Value::as_object).is_none() {
        return Err(RestoreFailure::Unreachable {
            runtime: RUNTIME,
            detail: format!(
                "thread/resume answered without a thread: {}",
                clip(&resumed.to_string())
            ),
        });
    }
    Ok(HistoryMode::of(&resumed))
}

/// The thread's turn ids, oldest first: paged with `thread/turns/list` on a paginated thread,
/// `thread/read {includeTurns: true}` on a legacy one.
async fn thread_turns(
    server: &mut AppServer,
    thread_id: &str,
    mode: HistoryMode,
) -> Result<Vec<String>, RestoreFailure> {
    match mode {
        HistoryMode::Legacy => {
            let read = server
                .call(
                    "thread/read",
                    json!({ "threadId": thread_id, "includeTurns": true }),
                    &format!("thread/read {thread_id}"),
                    thread_id,
                )
                .await?;
            turn_ids(&read, "thread/read")
        }
        HistoryMode::Paginated => {
            let mut ids = Vec::new();
            let mut cursor: Option<String> = None;
            let mut seen = std::collections::HashSet::new();
            loop {
                let mut params = json!({
                    "threadId": thread_id,
                    "sortDirection": "asc",
                    "itemsView": "notLoaded",
                    "limit": TURNS_PAGE,
                });
                if let Some(cursor) = &cursor {
                    params["cursor"] = json!(cursor);
                }
                let page = server
                    .call(
                        "thread/turns/list",
                        params,
                        &format!("thread/turns/list {thread_id}"),
                        thread_id,
                    )
                    .await?;
                ids.extend(page_turn_ids(&page)?);
                match page.get("nextCursor") {
                    None | Some(Value::Null) => return Ok(ids),
                    Some(Value::String(next)) if seen.insert(next.clone()) => {
                        cursor = Some(next.clone());
                    }
                    Some(other) => {
                        return Err(RestoreFailure::Unreachable {
                            runtime: RUNTIME,
                            detail: format!(
                                "thread/turns/list answered a cursor that does not advance: {}",
                                clip(&other.to_string())
                            ),
                        })
                    }
                }
            }
        }
    }
}

/// The conversation, once the app-server runs.
async fn restore_thread(
    server: &mut AppServer,
    thread_id: &str,
    turn_count: u64,
) -> Result<Restored, RestoreFailure> {
    initialize(server, thread_id).await?;
    let mode = load_thread(server, thread_id).await?;
    let before = thread_turns(server, thread_id, mode).await?;
    let num_turns = turns_to_drop(before.len(), turn_count)?;
    let how = if num_turns == 0 {
        "nothing to drop".to_owned()
    } else {
        match mode {
            HistoryMode::Paginated => {
                // Turn number `turn_count` (`turns_to_drop` checked it exists): the first to go.
                let first_dropped = &before[before.len() - num_turns as usize];
                server
                    .call(
                        "thread/revert",
                        json!({ "threadId": thread_id, "beforeTurnId": first_dropped }),
                        &format!("thread/revert {thread_id} beforeTurnId={first_dropped}"),
                        thread_id,
                    )
                    .await?;
                format!("reverted before turn {first_dropped}")
            }
            HistoryMode::Legacy => {
                server
                    .call(
                        "thread/rollback",
                        json!({ "threadId": thread_id, "numTurns": num_turns }),
                        &format!("thread/rollback {thread_id} numTurns={num_turns}"),
                        thread_id,
                    )
                    .await?;
                format!("rolled back {num_turns} turns")
            }
        }
    };
    let after = thread_turns(server, thread_id, mode).await?;
    verify(&before, turn_count, &after)?;
    Ok(Restored::Verified {
        detail: format!(
            "codex thread {thread_id} ({} history): {how} of {}; read back {} [{}]",
            match mode {
                HistoryMode::Paginated => "paginated",
                HistoryMode::Legacy => "legacy",
            },
            describe(&before),
            describe(&after),
            after.join(", ")
        ),
    })
}

/// Delivers `input` as one turn of the agent's thread `thread_id` (`None`: a new thread).
///
/// One app-server per delivery: `initialize` + `initialized`, then `thread/resume {threadId,
/// excludeTurns: true}` and the thread's turns read as a restore reads them (the recovery
/// point's `turnCount` is their number) or, without a thread, `thread/start {}` (`turnCount`
/// 0; the release's default history mode, paginated from Codex 0.155 on, which every current
/// release can revert; a legacy thread could not be restored after an upgrade past 0.155,
/// which has no `thread/rollback`). `commit` gets
/// `{threadId, turnCount}` (and the new thread id); only after it returned `Ok` is
/// `turn/start {threadId, input: [{type: "text", text}]}` sent. The answer is the text of the
/// turn's `agentMessage` items (`item/completed`), joined by blank lines, once `turn/completed`
/// for that turn says `completed`; `failed` or `interrupted` fails the delivery. Opening the
/// thread and running the turn are each bounded by `timeout`; the app-server is shut down at
/// the end either way.
pub async fn deliver<F, Fut>(
    settings: &CodexSettings,
    timeout: Duration,
    thread_id: Option<&str>,
    input: &str,
    commit: F,
) -> Result<String, DeliveryError>
where
    F: FnOnce(PointToCommit) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    if let Some(id) = thread_id {
        if uuid::Uuid::parse_str(id).is_err() {
            return Err(RestoreFailure::BadRef {
                strategy: strategy::CODEX_APP_SERVER_TURNS.to_owned(),
                detail: format!("the agent's thread `{id}` is not a Codex thread id (a UUID)"),
            }
            .into());
        }
    }
    let mut server = AppServer::spawn(settings)?;
    let deadline = Instant::now() + timeout;
    let opened = tokio::time::timeout_at(deadline, open_thread(&mut server, thread_id)).await;
    let opened = match settle(&mut server, opened, timeout) {
        Ok(opened) => opened,
        Err(failure) => {
            server.shut_down(exit_grace(deadline, &failure)).await;
            return Err(failure.into());
        }
    };
    let point = PointToCommit {
        recovery_ref: turns_ref(&opened.thread_id, opened.turn_count),
        new_session: opened.started.then(|| opened.thread_id.clone()),
    };
    if let Err(e) = commit(point).await {
        server.shut_down(EXIT_GRACE).await;
        return Err(DeliveryError::Commit(e));
    }
    let deadline = Instant::now() + timeout;
    let answered =
        tokio::time::timeout_at(deadline, run_turn(&mut server, &opened.thread_id, input)).await;
    let answered = settle(&mut server, answered, timeout);
    let grace = match &answered {
        Ok(_) => deadline
            .saturating_duration_since(Instant::now())
            .min(EXIT_GRACE),
        Err(failure) => exit_grace(deadline, failure),
    };
    server.shut_down(grace).await;
    Ok(answered?)
}

/// The `codex_app_server_turns` ref: `{threadId, turnCount}`.
pub fn turns_ref(thread_id: &str, turn_count: u64) -> Value {
    json!({ "threadId": thread_id, "turnCount": turn_count })
}

/// A phase's result, with a time-out turned into [`RestoreFailure::Timeout`] naming the call in
/// flight.
fn settle<T>(
    server: &mut AppServer,
    outcome: Result<Result<T, RestoreFailure>, tokio::time::error::Elapsed>,
    timeout: Duration,
) -> Result<T, RestoreFailure> {
    outcome.unwrap_or_else(|_| {
        Err(RestoreFailure::Timeout {
            runtime: RUNTIME,
            action: server.action.clone(),
            timeout_ms: timeout.as_millis(),
        })
    })
}

/// How long a failed app-server gets to exit: none after a time-out.
fn exit_grace(deadline: Instant, failure: &RestoreFailure) -> Duration {
    if matches!(failure, RestoreFailure::Timeout { .. }) {
        Duration::ZERO
    } else {
        deadline
            .saturating_duration_since(Instant::now())
            .min(EXIT_GRACE)
    }
}

/// The agent's thread, opened for a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OpenedThread {
    thread_id: String,
    /// Its turns before the delivery.
    turn_count: u64,
    /// Whether the delivery started it.
    started: bool,
}

/// Initializes, then loads `thread_id` and counts its turns, or starts a new thread.
async fn open_thread(
    server: &mut AppServer,
    thread_id: Option<&str>,
) -> Result<OpenedThread, RestoreFailure> {
    initialize(server, thread_id.unwrap_or("")).await?;
    match thread_id {
        Some(id) => {
            let mode = load_thread(server, id).await?;
            let turns = thread_turns(server, id, mode).await?;
            Ok(OpenedThread {
                thread_id: id.to_owned(),
                turn_count: turns.len() as u64,
                started: false,
            })
        }
        None => {
            let started = server
                .call("thread/start", json!({}), "thread/start", "")
                .await?;
            let id = started
                .pointer("/thread/id")
                .and_then(Value::as_str)
                .filter(|id| uuid::Uuid::parse_str(id).is_ok())
                .ok_or_else(|| RestoreFailure::Unreachable {
                    runtime: RUNTIME,
                    detail: format!(
                        "thread/start answered without a thread id (a UUID): {}",
                        clip(&started.to_string())
                    ),
                })?;
            Ok(OpenedThread {
                thread_id: id.to_owned(),
                turn_count: 0,
                started: true,
            })
        }
    }
}

/// `turn/start`, then the turn's notifications until its `turn/completed`.
async fn run_turn(
    server: &mut AppServer,
    thread_id: &str,
    input: &str,
) -> Result<String, RestoreFailure> {
    let started = server
        .call(
            "turn/start",
            json!({ "threadId": thread_id, "input": [{ "type": "text", "text": input }] }),
            &format!("turn/start {thread_id}"),
            thread_id,
        )
        .await?;
    let turn_id = started
        .pointer("/turn/id")
        .and_then(Value::as_str)
        .ok_or_else(|| RestoreFailure::Unreachable {
            runtime: RUNTIME,
            detail: format!(
                "turn/start answered without `turn.id`: {}",
                clip(&started.to_string())
            ),
        })?
        .to_owned();
    server.action = format!("waiting for turn {turn_id} of thread {thread_id} to complete");
    let mut turn = TurnAnswer::new(thread_id, &turn_id);
    loop {
        let notification = server.next_notification().await?;
        if let Some(done) = turn.observe(&notification) {
            return done;
        }
    }
}

/// What a turn has said so far.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TurnAnswer {
    thread_id: String,
    turn_id: String,
    /// The texts of its completed `agentMessage` items, in order.
    texts: Vec<String>,
    /// The last `error` notification's message.
    error: Option<String>,
}

impl TurnAnswer {
    fn new(thread_id: &str, turn_id: &str) -> TurnAnswer {
        TurnAnswer {
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.to_owned(),
            texts: Vec::new(),
            error: None,
        }
    }

    /// Whether `params` concern this turn (a field the notification leaves out matches).
    fn concerns(&self, params: &Value, turn_id: Option<&Value>) -> bool {
        let thread = params.get("threadId").and_then(Value::as_str);
        let turn = turn_id.and_then(Value::as_str);
        thread.is_none_or(|t| t == self.thread_id) && turn.is_none_or(|t| t == self.turn_id)
    }

    /// Takes one notification; `Some` once the turn completed: the answer, or why it failed.
    fn observe(&mut self, notification: &Value) -> Option<Result<String, RestoreFailure>> {
        let method = notification.get("method").and_then(Value::as_str)?;
        let params = notification.get("params").unwrap_or(&Value::Null);
        match method {
            "item/completed" if self.concerns(params, params.get("turnId")) => {
                let item = params.get("item")?;
                if item.get("type").and_then(Value::as_str) == Some("agentMessage") {
                    if let Some(text) = item.get("text").and_then(Value::as_str) {
                        self.texts.push(text.to_owned());
                    }
                }
                None
            }
            "error" if self.concerns(params, params.get("turnId")) => {
                self.error = params
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                None
            }
            "turn/completed" if self.concerns(params, params.pointer("/turn/id")) => {
                let turn = params.get("turn").unwrap_or(&Value::Null);
                let status = turn.get("status").and_then(Value::as_str).unwrap_or("");
                let action = format!("turn {} of thread {}", self.turn_id, self.thread_id);
                Some(match status {
                    "completed" => Ok(self
                        .texts
                        .iter()
                        .filter(|t| !t.is_empty())
                        .cloned()
                        .collect::<Vec<_>>()
                        .join("\n\n")),
                    "failed" | "interrupted" => {
                        let why = turn
                            .pointer("/error/message")
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                            .or_else(|| self.error.clone())
                            .unwrap_or_else(|| "no error given".to_owned());
                        Err(RestoreFailure::Refused {
                            runtime: RUNTIME,
                            action,
                            message: format!("the turn ended `{status}`: {why}"),
                        })
                    }
                    other => Err(RestoreFailure::Unreachable {
                        runtime: RUNTIME,
                        detail: format!(
                            "turn/completed for {action} with status `{other}`: {}",
                            clip(&params.to_string())
                        ),
                    }),
                })
            }
            _ => None,
        }
    }
}

/// How many turns to drop from a thread of `turns` turns to keep `turn_count`.
fn turns_to_drop(turns: usize, turn_count: u64) -> Result<u32, RestoreFailure> {
    let turns = turns as u64;
    if turn_count > turns {
        return Err(RestoreFailure::NotVerified {
            runtime: RUNTIME,
            expected: format!("a thread holding at least {turn_count} turns"),
            found: format!("{turns} turns (nothing was dropped)"),
        });
    }
    u32::try_from(turns - turn_count).map_err(|_| RestoreFailure::Refused {
        runtime: RUNTIME,
        action: "thread/rollback".to_owned(),
        message: format!(
            "{} turns to roll back do not fit the protocol's u32",
            turns - turn_count
        ),
    })
}

/// The read-back must hold exactly the first `turn_count` turns of the resumed thread.
fn verify(before: &[String], turn_count: u64, after: &[String]) -> Result<(), RestoreFailure> {
    let keep = usize::try_from(turn_count)
        .unwrap_or(usize::MAX)
        .min(before.len());
    let expected = &before[..keep];
    if after == expected {
        Ok(())
    } else {
        Err(RestoreFailure::NotVerified {
            runtime: RUNTIME,
            expected: format!("{} [{}]", describe(expected), expected.join(", ")),
            found: format!("{} [{}]", describe(after), after.join(", ")),
        })
    }
}

fn describe(turns: &[String]) -> String {
    match turns.len() {
        1 => "1 turn".to_owned(),
        n => format!("{n} turns"),
    }
}

/// `result.thread.turns[*].id`.
fn turn_ids(result: &Value, method: &str) -> Result<Vec<String>, RestoreFailure> {
    let turns = result
        .get("thread")
        .and_then(|t| t.get("turns"))
        .and_then(Value::as_array)
        .ok_or_else(|| RestoreFailure::Unreachable {
            runtime: RUNTIME,
            detail: format!("{method} answered without `thread.turns`: {result}"),
        })?;
    ids_of(turns, method)
}

/// `result.data[*].id` of a `thread/turns/list` page.
fn page_turn_ids(result: &Value) -> Result<Vec<String>, RestoreFailure> {
    let turns = result
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| RestoreFailure::Unreachable {
            runtime: RUNTIME,
            detail: format!(
                "thread/turns/list answered without `data`: {}",
                clip(&result.to_string())
            ),
        })?;
    ids_of(turns, "thread/turns/list")
}

fn ids_of(turns: &[Value], method: &str) -> Result<Vec<String>, RestoreFailure> {
    turns
        .iter()
        .map(|turn| {
            turn.get("id")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| RestoreFailure::Unreachable {
                    runtime: RUNTIME,
                    detail: format!("{method} answered a turn without an id: {turn}"),
                })
        })
        .collect()
}

/// A JSON-RPC error the app-server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RpcError {
    code: i64,
    message: String,
}

/// Maps an app-server error to the most precise failure.
fn classify(error: RpcError, action: &str, thread_id: &str) -> RestoreFailure {
    let message = error.message;
    let unknown_thread = [
        "no rollout found for thread id",
        "thread not found:",
        "thread not loaded:",
    ];
    if unknown_thread.iter().any(|p| message.starts_with(p)) {
        RestoreFailure::UnknownSession {
            runtime: RUNTIME,
            id: thread_id.to_owned(),
        }
    } else if error.code == OVERLOADED || message.to_lowercase().contains("in progress") {
        RestoreFailure::Busy {
            runtime: RUNTIME,
            message,
        }
    } else {
        RestoreFailure::Refused {
            runtime: RUNTIME,
            action: action.to_owned(),
            message,
        }
    }
}

/// A running `codex app-server` child.
struct AppServer {
    program: String,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_task: Option<JoinHandle<()>>,
    next_id: u64,
    /// Notifications read while waiting for an answer, oldest first.
    notifications: VecDeque<Value>,
    /// What the restore is doing (for timeout and crash reports).
    action: String,
}

impl AppServer {
    fn spawn(settings: &CodexSettings) -> Result<AppServer, RestoreFailure> {
        let program = settings.program.display().to_string();
        let mut child = Command::new(&settings.program)
            .args(&settings.args)
            .envs(settings.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| RestoreFailure::Unreachable {
                runtime: RUNTIME,
                detail: format!("cannot start `{program}`: {e}"),
            })?;
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(RestoreFailure::Unreachable {
                runtime: RUNTIME,
                detail: format!("`{program}` started without piped stdio"),
            });
        };
        let tail = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&tail);
        let stderr_task = tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            loop {
                match stderr.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let mut tail = sink.lock().unwrap_or_else(|e| e.into_inner());
                        tail.extend_from_slice(&buf[..n]);
                        if tail.len() > 2 * STDERR_TAIL {
                            let cut = tail.len() - STDERR_TAIL;
                            tail.drain(..cut);
                        }
                    }
                }
            }
        });
        Ok(AppServer {
            program,
            child,
            stdin: Some(stdin),
            stdout: BufReader::new(stdout).lines(),
            stderr: tail,
            stderr_task: Some(stderr_task),
            next_id: 0,
            notifications: VecDeque::new(),
            action: "starting the app-server".to_owned(),
        })
    }

    async fn write(&mut self, message: &Value) -> Result<(), RestoreFailure> {
        let mut line = message.to_string();
        line.push('\n');
        let written = match self.stdin.as_mut() {
            Some(stdin) => match stdin.write_all(line.as_bytes()).await {
                Ok(()) => stdin.flush().await,
                Err(e) => Err(e),
            },
            None => Err(std::io::Error::other("stdin already closed")),
        };
        match written {
            Ok(()) => Ok(()),
            Err(e) => Err(self.crashed(&format!("stopped taking input ({e})")).await),
        }
    }

    async fn notify(&mut self, method: &str) -> Result<(), RestoreFailure> {
        self.action = method.to_owned();
        self.write(&json!({ "method": method })).await
    }

    /// Sends a request and waits for its answer. Notifications that arrive meanwhile are kept
    /// (see [`AppServer::next_notification`]); server-to-client requests are refused.
    async fn call(
        &mut self,
        method: &str,
        params: Value,
        action: &str,
        thread_id: &str,
    ) -> Result<Value, RestoreFailure> {
        self.action = action.to_owned();
        let id = self.next_id;
        self.next_id += 1;
        self.write(&json!({ "id": id, "method": method, "params": params }))
            .await?;
        loop {
            let (message, line) = self.read_message().await?;
            let has_method = message.get("method").is_some();
            match message.get("id") {
                Some(answer_id) if !has_method && answer_id == &json!(id) => {
                    if let Some(result) = message.get("result") {
                        return Ok(result.clone());
                    }
                    let error = message.get("error").cloned().unwrap_or(Value::Null);
                    let rpc = RpcError {
                        code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                        message: error
                            .get("message")
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                            .unwrap_or_else(|| format!("malformed answer: {}", clip(&line))),
                    };
                    return Err(classify(rpc, action, thread_id));
                }
                Some(request_id) if has_method => self.refuse(request_id.clone()).await?,
                // A notification: kept for whoever waits for one.
                None if has_method => self.notifications.push_back(message),
                // Answers to other ids.
                _ => {}
            }
        }
    }

    /// The next notification (`{method, params}`), kept ones first; server-to-client requests
    /// are refused and answers to other ids skipped on the way.
    async fn next_notification(&mut self) -> Result<Value, RestoreFailure> {
        if let Some(kept) = self.notifications.pop_front() {
            return Ok(kept);
        }
        loop {
            let (message, _) = self.read_message().await?;
            let has_method = message.get("method").is_some();
            match message.get("id") {
                Some(request_id) if has_method => self.refuse(request_id.clone()).await?,
                None if has_method => return Ok(message),
                _ => {}
            }
        }
    }

    /// Answers a server-to-client request (an approval, ...) with an error: the client grants
    /// nothing.
    async fn refuse(&mut self, request_id: Value) -> Result<(), RestoreFailure> {
        let refusal = json!({
            "id": request_id,
            "error": { "code": -32601, "message": "not supported by the rewind reference client" },
        });
        self.write(&refusal).await
    }

    /// Reads the next JSON object from stdout (and the line it came from).
    async fn read_message(&mut self) -> Result<(Value, String), RestoreFailure> {
        loop {
            let line = match self.stdout.next_line().await {
                Ok(Some(line)) => line,
                Ok(None) => return Err(self.crashed("closed its stdout").await),
                Err(e) => return Err(self.crashed(&format!("broke its stdout ({e})")).await),
            };
            if line.trim().is_empty() {
                continue;
            }
            return match serde_json::from_str(&line) {
                Ok(Value::Object(object)) => Ok((Value::Object(object), line)),
                _ => Err(RestoreFailure::Unreachable {
                    runtime: RUNTIME,
                    detail: format!(
                        "`{}` broke the app-server protocol during {}: {}",
                        self.program,
                        self.action,
                        clip(&line)
                    ),
                }),
            };
        }
    }

    /// The failure for a child that stopped answering: its exit status and stderr tail.
    async fn crashed(&mut self, how: &str) -> RestoreFailure {
        let status = match tokio::time::timeout(EXIT_GRACE, self.child.wait()).await {
            Ok(Ok(status)) => status.to_string(),
            Ok(Err(e)) => format!("unknown exit status ({e})"),
            Err(_) => "still running".to_owned(),
        };
        if let Some(task) = self.stderr_task.take() {
            let _ = tokio::time::timeout(Duration::from_millis(500), task).await;
        }
        let tail = self.stderr_tail();
        RestoreFailure::Crashed {
            runtime: RUNTIME,
            action: self.action.clone(),
            detail: format!(
                "`{}` {how} ({status}); stderr: {}",
                self.program,
                if tail.is_empty() { "(empty)" } else { &tail }
            ),
        }
    }

    fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        let start = tail.len().saturating_sub(STDERR_TAIL);
        String::from_utf8_lossy(&tail[start..]).trim().to_owned()
    }

    /// Closes stdin and waits up to `grace` for the child to exit, then kills it.
    async fn shut_down(mut self, grace: Duration) {
        drop(self.stdin.take());
        let exited = !grace.is_zero()
            && matches!(
                tokio::time::timeout(grace, self.child.wait()).await,
                Ok(Ok(_))
            );
        if !exited {
            let _ = self.child.kill().await;
        }
        if let Some(task) = self.stderr_task.take() {
            task.abort();
        }
    }
}

fn clip(line: &str) -> String {
    const MAX: usize = 300;
    if line.len() <= MAX {
        line.to_owned()
    } else {
        let mut end = MAX;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &line[..end])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const THREAD: &str = "5ee8fe45-121f-45e4-af6b-8ae4a14c4c3d";

    fn ids(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| (*s).to_owned()).collect()
    }

    /// A fake app-server written in POSIX sh: it appends every line it reads to `$LOG` and
    /// answers with the canned lines of `script` (one `read` per expected client line).
    fn fake(script: &str, log: &std::path::Path) -> CodexSettings {
        CodexSettings {
            program: PathBuf::from("sh"),
            args: vec!["-c".to_owned(), script.to_owned()],
            env: vec![("LOG".to_owned(), log.display().to_string())],
        }
    }

    const HANDSHAKE: &str = r#"
        r() { IFS= read -r l || exit 0; printf '%s\n' "$l" >> "$LOG"; }
        r; echo '{"id":0,"result":{"userAgent":"fake/0.155.0","codexHome":"/x","platformFamily":"unix","platformOs":"linux"}}'
        r
    "#;

    fn thread(turns: &[&str]) -> String {
        let turns: Vec<Value> = turns
            .iter()
            .map(|t| json!({ "id": t, "items": [] }))
            .collect();
        json!({ "thread": { "id": THREAD, "turns": turns } }).to_string()
    }

    fn sent(log: &std::path::Path) -> Vec<Value> {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn turn_arithmetic() {
        assert_eq!(turns_to_drop(3, 1).unwrap(), 2);
        assert_eq!(turns_to_drop(3, 3).unwrap(), 0);
        assert_eq!(turns_to_drop(0, 0).unwrap(), 0);
        let err = turns_to_drop(2, 3).unwrap_err();
        assert_eq!(err.kind(), "not_verified");
        assert!(verify(&ids(&["a", "b", "c"]), 1, &ids(&["a"])).is_ok());
        assert!(verify(&ids(&["a", "b"]), 0, &[]).is_ok());
        assert_eq!(
            verify(&ids(&["a", "b", "c"]), 1, &ids(&["a", "b", "c"]))
                .unwrap_err()
                .kind(),
            "not_verified"
        );
        // Same count, other turns: not the recovery point either.
        assert_eq!(
            verify(&ids(&["a", "b"]), 1, &ids(&["x"]))
                .unwrap_err()
                .kind(),
            "not_verified"
        );
    }

    #[test]
    fn errors_map_to_the_most_precise_failure() {
        let e = |code: i64, message: &str| RpcError {
            code,
            message: message.to_owned(),
        };
        for unknown in [
            format!("no rollout found for thread id {THREAD}"),
            format!("thread not found: {THREAD}"),
            format!("thread not loaded: {THREAD}"),
        ] {
            assert_eq!(
                classify(e(-32600, &unknown), "x", THREAD),
                RestoreFailure::UnknownSession {
                    runtime: "codex",
                    id: THREAD.to_owned()
                }
            );
        }
        assert_eq!(
            classify(
                e(-32600, "Cannot rollback while a turn is in progress."),
                "x",
                THREAD
            )
            .kind(),
            "busy"
        );
        assert_eq!(
            classify(e(-32001, "Server overloaded; retry later."), "x", THREAD).kind(),
            "busy"
        );
        let refused = classify(
            e(
                -32600,
                "Invalid request: unknown variant `thread/rollback`, expected one of ...",
            ),
            "thread/rollback",
            THREAD,
        );
        assert_eq!(
            refused,
            RestoreFailure::Refused {
                runtime: "codex",
                action: "thread/rollback".to_owned(),
                message: "Invalid request: unknown variant `thread/rollback`, expected one of ..."
                    .to_owned()
            }
        );
        assert_eq!(
            classify(
                e(-32600, "paginated threads do not support thread/rollback"),
                "x",
                THREAD
            )
            .kind(),
            "error"
        );
    }

    /// A `thread/resume` answer (id 1) for a thread of history `mode`.
    fn resumed(mode: &str) -> String {
        json!({ "id": 1, "result": { "thread": { "id": THREAD, "historyMode": mode, "turns": [] } } })
            .to_string()
    }

    /// A `thread/turns/list` answer.
    fn page(id: u64, turns: &[&str], next: Option<&str>) -> String {
        let data: Vec<Value> = turns
            .iter()
            .map(|t| json!({ "id": t, "items": [], "itemsView": "notLoaded" }))
            .collect();
        json!({ "id": id, "result": { "data": data, "nextCursor": next, "backwardsCursor": null } })
            .to_string()
    }

    /// A `thread/read` (or rollback) answer.
    fn answer(id: u64, turns: &[&str]) -> String {
        format!(r#"{{"id":{id},"result":{}}}"#, thread(turns))
    }

    fn methods_sent(log: &std::path::Path) -> Vec<String> {
        sent(log)
            .iter()
            .map(|m| m["method"].as_str().unwrap_or("(answer)").to_owned())
            .collect()
    }

    #[tokio::test]
    async fn rolls_back_a_legacy_thread_and_verifies_over_stdio() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let resumed = resumed("legacy");
        let read = answer(2, &["turn-1", "turn-2", "turn-3"]);
        let rolled = answer(3, &["turn-1"]);
        let read_back = answer(4, &["turn-1"]);
        let script = format!(
            r#"{HANDSHAKE}
            r; echo '{{"method":"thread/started","params":{{}}}}'; echo '{{"id":"srv-1","method":"item/commandExecution/requestApproval","params":{{}}}}'; echo '{resumed}'
            r
            r; echo '{read}'
            r; echo '{{"method":"deprecationNotice","params":{{"summary":"thread/rollback is deprecated"}}}}'; echo '{{"id":99,"result":{{}}}}'; echo '{rolled}'
            r; echo '{read_back}'
            r
            "#
        );
        let restored = restore(&fake(&script, &log), Duration::from_secs(10), THREAD, 1)
            .await
            .unwrap();
        let Restored::Verified { detail } = restored else {
            panic!("not verified: {restored:?}")
        };
        assert!(
            detail.contains("rolled back 2 turns of 3 turns"),
            "{detail}"
        );
        let sent = sent(&log);
        assert_eq!(
            methods_sent(&log),
            [
                "initialize",
                "initialized",
                "thread/resume",
                "(answer)",
                "thread/read",
                "thread/rollback",
                "thread/read"
            ]
        );
        assert!(sent[0]["params"].get("capabilities").is_none());
        assert!(sent[0].get("jsonrpc").is_none());
        assert_eq!(
            sent[2]["params"],
            json!({ "threadId": THREAD, "excludeTurns": true })
        );
        assert_eq!(sent[3]["id"], "srv-1");
        assert!(sent[3]["error"].is_object());
        assert_eq!(
            sent[4]["params"],
            json!({ "threadId": THREAD, "includeTurns": true })
        );
        assert_eq!(
            sent[5]["params"],
            json!({ "threadId": THREAD, "numTurns": 2 })
        );
        assert_eq!(sent[6]["params"], sent[4]["params"]);
    }

    #[tokio::test]
    async fn a_thread_without_a_history_mode_is_treated_as_legacy() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let resumed = answer(1, &["turn-1", "turn-2"]);
        let read = answer(2, &["turn-1", "turn-2"]);
        let rolled = answer(3, &[]);
        let read_back = answer(4, &[]);
        let script = format!(
            "{HANDSHAKE}\n r; echo '{resumed}'\n r; echo '{read}'\n r; echo '{rolled}'\n r; echo '{read_back}'\n r\n"
        );
        restore(&fake(&script, &log), Duration::from_secs(10), THREAD, 0)
            .await
            .unwrap();
        assert_eq!(
            sent(&log)[4]["params"],
            json!({ "threadId": THREAD, "numTurns": 2 })
        );
    }

    /// A paginated thread: its turns are paged with `thread/turns/list` (never the deprecated
    /// full read), `thread/revert` drops turn number `turnCount` and every later one, and the
    /// read-back pages again.
    #[tokio::test]
    async fn reverts_a_paginated_thread_paging_through_its_turns() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let resumed = resumed("paginated");
        let first = page(2, &["turn-1", "turn-2"], Some("c1"));
        let second = page(3, &["turn-3"], None);
        let reverted = json!({ "id": 4, "result": { "thread": { "id": THREAD, "turns": [] }, "turnsBackwardsCursor": "b", "itemsBackwardsCursor": "i" } }).to_string();
        let status = |s: &str| {
            json!({ "method": "thread/status/changed", "params": { "threadId": THREAD, "status": { "type": s } } })
                .to_string()
        };
        let (unloaded, idle) = (status("notLoaded"), status("idle"));
        let note = json!({ "method": "thread/reverted", "params": { "threadId": THREAD } });
        let back = page(5, &["turn-1"], None);
        let script = format!(
            "{HANDSHAKE}\n r; echo '{resumed}'\n r; echo '{first}'\n r; echo '{second}'\n r; echo '{unloaded}'; echo '{idle}'; echo '{reverted}'; echo '{note}'\n r; echo '{back}'\n r\n"
        );
        let restored = restore(&fake(&script, &log), Duration::from_secs(10), THREAD, 1)
            .await
            .unwrap();
        let Restored::Verified { detail } = restored else {
            panic!("not verified: {restored:?}")
        };
        assert!(detail.contains("reverted before turn turn-2"), "{detail}");
        assert_eq!(
            methods_sent(&log),
            [
                "initialize",
                "initialized",
                "thread/resume",
                "thread/turns/list",
                "thread/turns/list",
                "thread/revert",
                "thread/turns/list"
            ]
        );
        let sent = sent(&log);
        assert_eq!(
            sent[3]["params"],
            json!({ "threadId": THREAD, "sortDirection": "asc", "itemsView": "notLoaded", "limit": 100 })
        );
        assert_eq!(sent[4]["params"]["cursor"], "c1");
        assert_eq!(
            sent[5]["params"],
            json!({ "threadId": THREAD, "beforeTurnId": "turn-2" })
        );
        assert!(sent[6]["params"].get("cursor").is_none());
    }

    #[tokio::test]
    async fn turn_count_zero_reverts_before_the_first_turn() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let resumed = resumed("paginated");
        let listed = page(2, &["turn-1", "turn-2"], None);
        let reverted = r#"{"id":3,"result":{"thread":{"id":"x","turns":[]}}}"#;
        let back = page(4, &[], None);
        let script = format!(
            "{HANDSHAKE}\n r; echo '{resumed}'\n r; echo '{listed}'\n r; echo '{reverted}'\n r; echo '{back}'\n r\n"
        );
        restore(&fake(&script, &log), Duration::from_secs(10), THREAD, 0)
            .await
            .unwrap();
        assert_eq!(sent(&log)[4]["params"]["beforeTurnId"], "turn-1");
    }

    #[tokio::test]
    async fn nothing_is_dropped_when_the_thread_is_already_there() {
        for mode in ["legacy", "paginated"] {
            let dir = tempfile::tempdir().unwrap();
            let log = dir.path().join("log");
            let resumed = resumed(mode);
            let (read, read_back) = if mode == "legacy" {
                (
                    answer(2, &["turn-1", "turn-2"]),
                    answer(3, &["turn-1", "turn-2"]),
                )
            } else {
                (
                    page(2, &["turn-1", "turn-2"], None),
                    page(3, &["turn-1", "turn-2"], None),
                )
            };
            let script = format!(
                "{HANDSHAKE}\n r; echo '{resumed}'\n r; echo '{read}'\n r; echo '{read_back}'\n r\n"
            );
            let restored = restore(&fake(&script, &log), Duration::from_secs(10), THREAD, 2)
                .await
                .unwrap();
            assert!(matches!(restored, Restored::Verified { .. }), "{mode}");
            assert_dropped_nothing(&log, mode);
        }
    }

    /// No rollback or revert reached the fake app-server.
    fn assert_dropped_nothing(log: &std::path::Path, mode: &str) {
        let methods = methods_sent(log);
        assert!(
            !methods
                .iter()
                .any(|m| m == "thread/rollback" || m == "thread/revert"),
            "{mode}: {methods:?}"
        );
    }

    #[tokio::test]
    async fn too_few_turns_is_not_verified_and_drops_nothing() {
        for mode in ["legacy", "paginated"] {
            let dir = tempfile::tempdir().unwrap();
            let log = dir.path().join("log");
            let resumed = resumed(mode);
            let read = if mode == "legacy" {
                answer(2, &["turn-1"])
            } else {
                page(2, &["turn-1"], None)
            };
            let script = format!("{HANDSHAKE}\n r; echo '{resumed}'\n r; echo '{read}'\n r\n");
            let err = restore(&fake(&script, &log), Duration::from_secs(10), THREAD, 2)
                .await
                .unwrap_err();
            assert_eq!(err.kind(), "not_verified", "{mode}: {err}");
            assert_dropped_nothing(&log, mode);
        }
    }

    #[tokio::test]
    async fn a_restore_without_effect_is_caught_by_the_read_back() {
        for mode in ["legacy", "paginated"] {
            let dir = tempfile::tempdir().unwrap();
            let log = dir.path().join("log");
            let resumed = resumed(mode);
            let all = ["turn-1", "turn-2", "turn-3"];
            let (read, acted, read_back) = if mode == "legacy" {
                (answer(2, &all), answer(3, &all), answer(4, &all))
            } else {
                (
                    page(2, &all, None),
                    r#"{"id":3,"result":{"thread":{"id":"x","turns":[]}}}"#.to_owned(),
                    page(4, &all, None),
                )
            };
            let script = format!(
                "{HANDSHAKE}\n r; echo '{resumed}'\n r; echo '{read}'\n r; echo '{acted}'\n r; echo '{read_back}'\n r\n"
            );
            let err = restore(&fake(&script, &log), Duration::from_secs(10), THREAD, 0)
                .await
                .unwrap_err();
            match err {
                RestoreFailure::NotVerified {
                    expected, found, ..
                } => {
                    assert!(expected.starts_with("0 turns"), "{mode}: {expected}");
                    assert!(found.starts_with("3 turns"), "{mode}: {found}");
                }
                other => panic!("{mode}: expected not verified, got {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_cursor_that_does_not_advance_is_a_protocol_breach() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let resumed = resumed("paginated");
        let first = page(2, &["turn-1"], Some("same"));
        let again = page(3, &["turn-1"], Some("same"));
        let script = format!(
            "{HANDSHAKE}\n r; echo '{resumed}'\n r; echo '{first}'\n r; echo '{again}'\n r\n"
        );
        let err = restore(&fake(&script, &log), Duration::from_secs(10), THREAD, 0)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "unreachable", "{err}");
        assert!(!methods_sent(&log).iter().any(|m| m == "thread/revert"));
    }

    /// A restore whose mutating call (rollback on a legacy thread, revert on a paginated one)
    /// answers `error`.
    async fn failing_call(mode: &str, error: &str) -> RestoreFailure {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let resumed = resumed(mode);
        let read = if mode == "legacy" {
            answer(2, &["turn-1", "turn-2"])
        } else {
            page(2, &["turn-1", "turn-2"], None)
        };
        let script = format!(
            "{HANDSHAKE}\n r; echo '{resumed}'\n r; echo '{read}'\n r; echo '{{\"method\":\"deprecationNotice\",\"params\":{{}}}}'; echo '{{\"id\":3,\"error\":{error}}}'\n r\n"
        );
        restore(&fake(&script, &log), Duration::from_secs(10), THREAD, 1)
            .await
            .unwrap_err()
    }

    #[tokio::test]
    async fn rpc_errors_become_busy_unknown_or_refused() {
        let busy = failing_call(
            "legacy",
            r#"{"code":-32600,"message":"Cannot rollback while a turn is in progress."}"#,
        )
        .await;
        assert_eq!(
            busy,
            RestoreFailure::Busy {
                runtime: "codex",
                message: "Cannot rollback while a turn is in progress.".to_owned()
            }
        );
        let busy = failing_call(
            "paginated",
            r#"{"code":-32600,"message":"Cannot revert while a turn is in progress."}"#,
        )
        .await;
        assert_eq!(busy.kind(), "busy");
        let unknown = failing_call(
            "paginated",
            &format!(r#"{{"code":-32600,"message":"thread not found: {THREAD}"}}"#),
        )
        .await;
        assert_eq!(unknown.kind(), "unknown_session");
        // A legacy thread on a release without rollback (0.156 and later).
        let refused = failing_call(
            "legacy",
            r#"{"code":-32600,"message":"Invalid request: unknown variant `thread/rollback`, expected one of `initialize`"}"#,
        )
        .await;
        match refused {
            RestoreFailure::Refused {
                action, message, ..
            } => {
                assert!(action.starts_with("thread/rollback"), "{action}");
                assert!(
                    message.contains("unknown variant `thread/rollback`"),
                    "{message}"
                );
            }
            other => panic!("expected refused, got {other:?}"),
        }
        let refused = failing_call(
            "paginated",
            r#"{"code":-32600,"message":"turn not found: turn-2"}"#,
        )
        .await;
        match refused {
            RestoreFailure::Refused { action, .. } => {
                assert_eq!(
                    action,
                    format!("thread/revert {THREAD} beforeTurnId=turn-2")
                );
            }
            other => panic!("expected refused, got {other:?}"),
        }
    }

    /// Another app-server process holds the thread: refused at `thread/resume`, before any
    /// read or change.
    #[tokio::test]
    async fn a_thread_another_writer_holds_is_refused_before_anything_changes() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let script = format!(
            "{HANDSHAKE}\n r; echo '{{\"id\":1,\"error\":{{\"code\":-32600,\"message\":\"thread {THREAD} already has an active writer\"}}}}'\n r\n"
        );
        let err = restore(&fake(&script, &log), Duration::from_secs(10), THREAD, 0)
            .await
            .unwrap_err();
        match err {
            RestoreFailure::Refused {
                action, message, ..
            } => {
                assert_eq!(action, format!("thread/resume {THREAD}"));
                assert!(
                    message.contains("already has an active writer"),
                    "{message}"
                );
            }
            other => panic!("expected refused, got {other:?}"),
        }
        assert_eq!(
            methods_sent(&log),
            ["initialize", "initialized", "thread/resume"]
        );
    }

    #[tokio::test]
    async fn an_unknown_thread_on_resume_is_an_unknown_session() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let script = format!(
            "{HANDSHAKE}\n r; echo '{{\"id\":1,\"error\":{{\"code\":-32600,\"message\":\"no rollout found for thread id {THREAD}\"}}}}'\n r\n"
        );
        let err = restore(&fake(&script, &log), Duration::from_secs(10), THREAD, 0)
            .await
            .unwrap_err();
        assert_eq!(
            err,
            RestoreFailure::UnknownSession {
                runtime: "codex",
                id: THREAD.to_owned()
            }
        );
    }

    #[tokio::test]
    async fn a_crash_reports_the_exit_status_and_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let resumed = resumed("paginated");
        let listed = page(2, &["turn-1", "turn-2"], None);
        let script = format!(
            "{HANDSHAKE}\n r; echo '{resumed}'\n r; echo '{listed}'\n r; echo 'boom: rollout corrupted' >&2; exit 134\n"
        );
        let err = restore(&fake(&script, &log), Duration::from_secs(10), THREAD, 1)
            .await
            .unwrap_err();
        match err {
            RestoreFailure::Crashed { action, detail, .. } => {
                assert!(action.starts_with("thread/revert"), "{action}");
                assert!(detail.contains("134"), "{detail}");
                assert!(detail.contains("boom: rollout corrupted"), "{detail}");
            }
            other => panic!("expected crashed, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_hang_times_out_and_the_child_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let pid_file = dir.path().join("pid");
        let script = format!(
            "{HANDSHAKE}\n r; echo $$ > '{}'; exec sleep 30\n",
            pid_file.display()
        );
        let started = std::time::Instant::now();
        let err = restore(&fake(&script, &log), Duration::from_millis(700), THREAD, 0)
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        match err {
            RestoreFailure::Timeout {
                action, timeout_ms, ..
            } => {
                assert_eq!(action, format!("thread/resume {THREAD}"));
                assert_eq!(timeout_ms, 700);
            }
            other => panic!("expected timeout, got {other:?}"),
        }
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let proc_dir = PathBuf::from("/proc").join(pid.trim());
        assert!(!proc_dir.exists(), "the hung app-server was not reaped");
    }

    #[tokio::test]
    async fn protocol_breaches_and_missing_programs_are_unreachable() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let script = "r() { IFS= read -r l || exit 0; }; r; echo 'Welcome to codex!'; r";
        let err = restore(&fake(script, &log), Duration::from_secs(10), THREAD, 0)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "unreachable", "{err}");
        let missing = CodexSettings {
            program: dir.path().join("no-such-codex"),
            args: vec!["app-server".to_owned()],
            env: vec![],
        };
        let err = restore(&missing, Duration::from_secs(10), THREAD, 0)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "unreachable", "{err}");
    }

    fn note(method: &str, params: Value) -> Value {
        json!({ "method": method, "params": params })
    }

    fn agent_item(thread: &str, turn: &str, text: &str) -> Value {
        note(
            "item/completed",
            json!({ "threadId": thread, "turnId": turn, "item": { "type": "agentMessage", "id": "i", "text": text } }),
        )
    }

    fn completed(thread: &str, turn: &str, status: &str) -> Value {
        note(
            "turn/completed",
            json!({ "threadId": thread, "turn": { "id": turn, "status": status, "items": [] } }),
        )
    }

    #[test]
    fn the_answer_is_the_turns_agent_messages() {
        let mut turn = TurnAnswer::new(THREAD, "turn-2");
        let user = note(
            "item/completed",
            json!({ "threadId": THREAD, "turnId": "turn-2", "item": { "type": "userMessage", "id": "u", "content": [] } }),
        );
        for n in [
            user,
            agent_item(THREAD, "turn-1", "an older turn"),
            agent_item("other-thread", "turn-2", "another thread"),
            agent_item(THREAD, "turn-2", "first"),
            note("item/agentMessage/delta", json!({ "delta": "x" })),
            agent_item(THREAD, "turn-2", "second"),
            completed(THREAD, "turn-1", "completed"),
        ] {
            assert_eq!(turn.observe(&n), None, "{n}");
        }
        assert_eq!(
            turn.observe(&completed(THREAD, "turn-2", "completed")),
            Some(Ok("first\n\nsecond".to_owned()))
        );

        // A turn without an agent message answers with no text.
        let mut silent = TurnAnswer::new(THREAD, "t");
        assert_eq!(
            silent.observe(&completed(THREAD, "t", "completed")),
            Some(Ok(String::new()))
        );

        // A failed or interrupted turn fails the delivery, naming the error.
        for status in ["failed", "interrupted"] {
            let mut turn = TurnAnswer::new(THREAD, "t");
            turn.observe(&note(
                "error",
                json!({ "threadId": THREAD, "turnId": "t", "error": { "message": "model overloaded" }, "willRetry": false }),
            ));
            let err = turn
                .observe(&completed(THREAD, "t", status))
                .unwrap()
                .unwrap_err();
            assert_eq!(err.kind(), "error", "{err}");
            assert!(err.to_string().contains(status), "{err}");
            assert!(err.to_string().contains("model overloaded"), "{err}");
        }
        let mut odd = TurnAnswer::new(THREAD, "t");
        let err = odd
            .observe(&completed(THREAD, "t", "inProgress"))
            .unwrap()
            .unwrap_err();
        assert_eq!(err.kind(), "unreachable", "{err}");
        assert_eq!(
            turns_ref(THREAD, 3),
            json!({ "threadId": THREAD, "turnCount": 3 })
        );
    }

    type Points = Arc<Mutex<Vec<PointToCommit>>>;

    /// A commit callback that appends the point to the fake's `$LOG` too, so the log shows
    /// where the commit happened relative to the lines the fake read.
    fn logging_commit(
        points: &Points,
        log: &std::path::Path,
    ) -> impl FnOnce(PointToCommit) -> std::future::Ready<Result<(), String>> {
        let points = Arc::clone(points);
        let log = log.to_path_buf();
        move |point| {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .unwrap();
            std::io::Write::write_all(
                &mut file,
                format!("{}\n", json!({ "commit": point.recovery_ref })).as_bytes(),
            )
            .unwrap();
            points.lock().unwrap().push(point);
            std::future::ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_delivery_commits_the_point_before_the_turn_starts() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let resumed = resumed("paginated");
        let listed = page(2, &["turn-1", "turn-2"], None);
        let turn = r#"{"id":3,"result":{"turn":{"id":"turn-3","status":"inProgress","items":[],"startedAt":null}}}"#;
        let item = agent_item(THREAD, "turn-3", "Mock reply to: hello").to_string();
        let done = completed(THREAD, "turn-3", "completed").to_string();
        let script = format!(
            "{HANDSHAKE}\n r; echo '{resumed}'\n r; echo '{listed}'\n r; echo '{turn}'; echo '{item}'; echo '{done}'\n r\n"
        );
        let points = Points::default();
        let answer = deliver(
            &fake(&script, &log),
            Duration::from_secs(10),
            Some(THREAD),
            "hello",
            logging_commit(&points, &log),
        )
        .await
        .unwrap();
        assert_eq!(answer, "Mock reply to: hello");
        let points = points.lock().unwrap().clone();
        assert_eq!(
            points,
            [PointToCommit {
                recovery_ref: json!({ "threadId": THREAD, "turnCount": 2 }),
                new_session: None,
            }]
        );
        let sent = sent(&log);
        let steps: Vec<&str> = sent
            .iter()
            .map(|m| m["method"].as_str().unwrap_or("(commit)"))
            .collect();
        assert_eq!(
            steps,
            [
                "initialize",
                "initialized",
                "thread/resume",
                "thread/turns/list",
                "(commit)",
                "turn/start"
            ]
        );
        assert_eq!(
            sent[2]["params"],
            json!({ "threadId": THREAD, "excludeTurns": true })
        );
        assert_eq!(
            sent[5]["params"],
            json!({ "threadId": THREAD, "input": [{ "type": "text", "text": "hello" }] })
        );
    }

    #[tokio::test]
    async fn a_first_delivery_starts_a_default_thread_at_zero_turns() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let started = format!(r#"{{"id":1,"result":{}}}"#, thread(&[]));
        let turn = r#"{"id":2,"result":{"turn":{"id":"turn-1","status":"inProgress","items":[]}}}"#;
        let done = completed(THREAD, "turn-1", "completed").to_string();
        let script = format!(
            "{HANDSHAKE}\n r; echo '{started}'; echo '{{\"method\":\"thread/started\",\"params\":{{}}}}'\n r; echo '{turn}'; echo '{done}'\n r\n"
        );
        let points = Points::default();
        let answer = deliver(
            &fake(&script, &log),
            Duration::from_secs(10),
            None,
            "hi [no reply]",
            logging_commit(&points, &log),
        )
        .await
        .unwrap();
        assert_eq!(answer, "");
        assert_eq!(
            points.lock().unwrap().clone(),
            [PointToCommit {
                recovery_ref: json!({ "threadId": THREAD, "turnCount": 0 }),
                new_session: Some(THREAD.to_owned()),
            }]
        );
        let sent = sent(&log);
        assert_eq!(sent[2]["method"], "thread/start");
        // No `historyMode`: the release's default (paginated), which current releases revert.
        assert_eq!(sent[2]["params"], json!({}));
        assert!(sent[3].get("commit").is_some());
        assert_eq!(sent[4]["method"], "turn/start");
    }

    #[tokio::test]
    async fn delivery_failures_send_no_input_or_fail_after_the_point() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let resumed = resumed("paginated");
        let listed = page(2, &["turn-1"], None);
        let resumed = format!("{resumed}'\n r; echo '{listed}");
        // The commit fails: no turn is started.
        let script = format!("{HANDSHAKE}\n r; echo '{resumed}'\n r\n");
        let err = deliver(
            &fake(&script, &log),
            Duration::from_secs(10),
            Some(THREAD),
            "hello",
            |_| async { Err("database down".to_owned()) },
        )
        .await
        .unwrap_err();
        assert_eq!(err, DeliveryError::Commit("database down".to_owned()));
        assert!(sent(&log).iter().all(|m| m["method"] != "turn/start"));

        // An unknown thread: nothing committed.
        let _ = std::fs::remove_file(&log);
        let script = format!(
            "{HANDSHAKE}\n r; echo '{{\"id\":1,\"error\":{{\"code\":-32600,\"message\":\"no rollout found for thread id {THREAD}\"}}}}'\n r\n"
        );
        let points = Points::default();
        let err = deliver(
            &fake(&script, &log),
            Duration::from_secs(10),
            Some(THREAD),
            "hello",
            logging_commit(&points, &log),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&err, DeliveryError::Runtime(f) if f.kind() == "unknown_session"),
            "{err:?}"
        );
        assert!(points.lock().unwrap().is_empty());

        // The turn fails, and the app-server crashes mid-turn: both after the point.
        let turn = r#"{"id":3,"result":{"turn":{"id":"turn-2","status":"inProgress","items":[]}}}"#;
        let failed = completed(THREAD, "turn-2", "failed").to_string();
        for (tail, kind) in [
            (format!("echo '{turn}'; echo '{failed}'\n r"), "error"),
            (format!("echo '{turn}'; echo boom >&2; exit 134"), "crash"),
            (format!("echo '{turn}'; exec sleep 30"), "timeout"),
        ] {
            let _ = std::fs::remove_file(&log);
            let script = format!("{HANDSHAKE}\n r; echo '{resumed}'\n r; {tail}\n");
            let points = Points::default();
            let err = deliver(
                &fake(&script, &log),
                Duration::from_millis(800),
                Some(THREAD),
                "hello",
                logging_commit(&points, &log),
            )
            .await
            .unwrap_err();
            assert!(
                matches!(&err, DeliveryError::Runtime(f) if f.kind() == kind),
                "{kind}: {err:?}"
            );
            assert_eq!(points.lock().unwrap().len(), 1, "{kind}");
        }

        // A stored thread id that is not a UUID starts nothing.
        let err = deliver(
            &fake("echo started > \"$LOG\"", &dir.path().join("none")),
            Duration::from_secs(10),
            Some("thr_1"),
            "hello",
            |_| async { Ok(()) },
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&err, DeliveryError::Runtime(f) if f.kind() == "bad_ref"),
            "{err:?}"
        );
        assert!(!dir.path().join("none").exists());
    }

    /// Two deliveries against the mock app-server, when it is built: a new (paginated) thread at
    /// zero turns, then the same thread resumed at one turn; each answer quotes the input; then
    /// the thread is restored (by revert), and a legacy thread of 0.155 is restored by rollback.
    #[tokio::test]
    async fn delivers_against_the_mock_app_server() {
        let Some(program) = crate::runtimes::test_support::mock_or_skip("mock-codex", "MOCK_CODEX")
        else {
            return;
        };
        let home = tempfile::tempdir().unwrap();
        let settings = CodexSettings {
            program,
            args: vec!["app-server".to_owned()],
            env: vec![(
                "CODEX_HOME".to_owned(),
                home.path().to_string_lossy().into_owned(),
            )],
        };
        let points = Points::default();
        let first = deliver(
            &settings,
            Duration::from_secs(20),
            None,
            "first input",
            crate::runtimes::test_support::recorder(&points),
        )
        .await
        .unwrap();
        assert!(first.contains("first input"), "{first}");
        let thread = {
            let points = points.lock().unwrap();
            assert_eq!(points[0].recovery_ref["turnCount"], 0);
            points[0].new_session.clone().expect("a new thread")
        };
        assert_eq!(points.lock().unwrap()[0].recovery_ref["threadId"], thread);
        let second = deliver(
            &settings,
            Duration::from_secs(20),
            Some(&thread),
            "second input",
            crate::runtimes::test_support::recorder(&points),
        )
        .await
        .unwrap();
        assert!(second.contains("second input"), "{second}");
        let points = points.lock().unwrap().clone();
        assert_eq!(
            points[1],
            PointToCommit {
                recovery_ref: turns_ref(&thread, 1),
                new_session: None,
            }
        );
        // The thread the delivery started is restored by revert.
        let restored = restore(&settings, Duration::from_secs(20), &thread, 1)
            .await
            .unwrap();
        let Restored::Verified { detail } = restored else {
            panic!("not verified: {restored:?}")
        };
        assert!(detail.contains("paginated history): reverted"), "{detail}");

        // Codex 0.155: a legacy thread is rolled back, a paginated one reverted.
        let mut old = settings.clone();
        old.env
            .push(("REWIND_MOCK_CODEX_VERSION".to_owned(), "0.155.1".to_owned()));
        for (mode, how) in [("legacy", "rolled back"), ("paginated", "reverted")] {
            let id = thread_with_three_turns(&old, mode).await;
            let restored = restore(&old, Duration::from_secs(20), &id, 1)
                .await
                .unwrap();
            let Restored::Verified { detail } = restored else {
                panic!("{mode}: not verified: {restored:?}")
            };
            assert!(detail.contains(how), "{mode}: {detail}");
        }
    }

    /// Starts a thread of history `mode` on the app-server of `settings` and runs three turns
    /// in it, as an older daemon would have; returns its id.
    async fn thread_with_three_turns(settings: &CodexSettings, mode: &str) -> String {
        let mut server = AppServer::spawn(settings).unwrap();
        server
            .call(
                "initialize",
                json!({ "clientInfo": { "name": "test", "version": "1" }, "capabilities": { "experimentalApi": true } }),
                "initialize",
                "",
            )
            .await
            .unwrap();
        server.notify("initialized").await.unwrap();
        let started = server
            .call(
                "thread/start",
                json!({ "historyMode": mode }),
                "thread/start",
                "",
            )
            .await
            .unwrap();
        let id = started["thread"]["id"].as_str().unwrap().to_owned();
        for text in ["one", "two", "three"] {
            run_turn(&mut server, &id, text).await.unwrap();
        }
        server.shut_down(EXIT_GRACE).await;
        id
    }

    #[tokio::test]
    async fn a_thread_id_that_is_not_a_uuid_is_a_bad_ref_and_starts_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let err = restore(
            &fake("echo started > \"$LOG\"", &log),
            Duration::from_secs(10),
            "thr_1",
            0,
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind(), "bad_ref", "{err}");
        assert!(!log.exists());
    }
}
