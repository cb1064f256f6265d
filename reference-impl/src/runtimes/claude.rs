//! Claude restore (`claude_session_resume_at`), in two steps, because the CLI applies
//! `--resume-session-at` only together with a prompt (Claude Code 2.1.197: a run without one
//! exits 0, prints nothing and changes nothing).
//!
//! 1. At the rewind, the daemon runs the Claude Code CLI once, headless, as
//!
//!    ```text
//!    claude --output-format=stream-json --input-format=stream-json --verbose
//!           --resume=<sessionId> --resume-session-at=<boundaryUuid>
//!    ```
//!
//!    in the agent's working directory with its environment, stdin closed at once, bounded by
//!    the restore timeout. The CLI loads the session and validates the boundary (an unknown
//!    one fails). The transcript the CLI keeps
//!    (`<CLAUDE_CONFIG_DIR, else $HOME/.claude>/projects/<slug of cwd>/<sessionId>.jsonl`) is
//!    then read back: the boundary must be on the live chain, walked back through
//!    `parentUuid` from the live leaf (the newest `last-prompt.leafUuid`, else the newest
//!    chain entry). A chain that already ends there is restored ([`Restored::Verified`]);
//!    otherwise the boundary is recorded as the session's pending boundary, daemon state kept
//!    in `<config dir>/rewind-boundaries/<sessionId>` ([`Restored::Bound`]).
//! 2. The session's next delivery ([`deliver`]) resumes with `--resume=<sessionId>
//!    --resume-session-at=<boundaryUuid>` and the prompt, commits the boundary as that
//!    message's recovery point, and after the run verifies that the live chain now runs from
//!    the boundary straight into the user message the run wrote; only then is the pending
//!    boundary forgotten. A run that fails or does not pass the check fails the delivery and
//!    leaves the boundary pending, so the next delivery tries again.
//!
//! `--rewind-files` is never passed: the spec restores the conversation only, not the agent's
//! files. `--fork-session` is not passed either: the agent keeps its session id.
//!
//! The `system/init` session id is not compared with the session: some CLI releases announce
//! a per-run id there on resume, and the transcript read-back is the proof that counts.
//!
//! Failure mapping:
//! - no exit within the timeout: the process is killed, [`RestoreFailure::Timeout`];
//! - `No conversation found with session ID` (result `errors` or stderr):
//!   [`RestoreFailure::UnknownSession`];
//! - `is currently running as ...` / `is already in use`: [`RestoreFailure::Busy`];
//! - `No message found with message.uuid of: <uuid>`: [`RestoreFailure::Refused`]. The CLI
//!   refused the boundary (it is not on the session's live chain); this is not a success
//!   that failed its read-back, so it is not `NotVerified`;
//! - any other error result, or exit 1 with an `Error:` line on stderr: `Refused` with the
//!   CLI's own message;
//! - killed by a signal, or exit without a result line otherwise (the validation run's silent exit 0 is
//!   its success): [`RestoreFailure::Crashed`]
//!   with the exit status and the tail of stderr;
//! - the program cannot be started: [`RestoreFailure::Unreachable`];
//! - a transcript that is missing or whose live chain does not hold the boundary, and a
//!   delivery whose turn does not continue from a bound boundary:
//!   [`RestoreFailure::NotVerified`].
//!
//! Live delivery ([`deliver`]) runs the CLI once per input, with one stream-json user message on
//! stdin: `--resume=<id> --resume-session-at=<leaf>` when the agent's transcript has a live chain
//! (the point is that leaf: the chain's current leaf, or the pending boundary), else
//! `--session-id=<new uuid>` (the point is that session's zero boundary). The leaf is always
//! named: which branch the real CLI's plain `--resume` follows after a `--resume-session-at`
//! branch is its own choice (the newest with real APIs, the first with one that repeats message
//! ids). Every resumed run is checked to continue from its leaf. Its run is judged by the
//! same rules; the answer is the `result` line's text.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use super::{ClaudeSettings, DeliveryError, PointToCommit, RestoreFailure, Restored};

const RUNTIME: &str = "claude";

/// How many bytes of stderr a failure quotes.
const STDERR_TAIL: usize = 2000;

/// Validates `boundary_uuid` on the session and binds it to the session's next delivery.
///
/// The CLI runs once without a prompt (`--resume=<id> --resume-session-at=<uuid>`, stdin
/// closed), which loads the session and checks the boundary and changes nothing; the
/// transcript is then read back: the boundary must be on its live chain. A live chain that
/// already ends at the boundary needs nothing more ([`Restored::Verified`]); otherwise the
/// boundary is recorded as the session's pending boundary ([`Restored::Bound`]) and the next
/// [`deliver`] applies and verifies it.
pub async fn restore(
    settings: &ClaudeSettings,
    timeout: Duration,
    session_id: &str,
    boundary_uuid: &str,
) -> Result<Restored, RestoreFailure> {
    let action = format!("resuming session {session_id} at {boundary_uuid}");
    let args = restore_args(session_id, boundary_uuid);
    let (lines, stderr, exit) = run_cli(settings, &args, None, timeout, &action).await?;
    judge_validation(&lines, &stderr, exit, session_id, &action)?;

    let path = transcript_file(settings, session_id);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RestoreFailure::NotVerified {
                runtime: RUNTIME,
                expected: format!("a live chain holding {boundary_uuid}"),
                found: format!("no transcript at {}", path.display()),
            })
        }
        Err(e) => {
            return Err(RestoreFailure::Unreachable {
                runtime: RUNTIME,
                detail: format!("cannot read transcript {}: {e}", path.display()),
            })
        }
    };
    let chain = LiveChain::of(&text);
    if chain.ends_at(boundary_uuid) {
        clear_pending(settings, session_id)?;
        return Ok(Restored::Verified {
            detail: format!(
                "live chain of session {session_id} ends at {boundary_uuid} ({} messages) in {}",
                chain.messages.len(),
                path.display()
            ),
        });
    }
    let Some(at) = chain.position(boundary_uuid) else {
        return Err(RestoreFailure::NotVerified {
            runtime: RUNTIME,
            expected: format!("a live chain holding {boundary_uuid}"),
            found: chain.describe(),
        });
    };
    write_pending(settings, session_id, boundary_uuid)?;
    Ok(Restored::Bound {
        detail: format!(
            "boundary {boundary_uuid} is entry {} of {} on the live chain of session \
             {session_id}; the next delivery resumes there",
            at + 1,
            chain.entries.len()
        ),
    })
}

/// How a delivery addresses the agent's Claude session.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SessionPlan {
    /// The agent's session has a transcript with a live chain: `--resume=<id>
    /// --resume-session-at=<boundary>`, and the recovery point is that boundary: the chain's
    /// current leaf, or the boundary a rewind bound to this delivery (`bound`).
    Resume {
        session_id: String,
        boundary: String,
        bound: bool,
    },
    /// No usable session (none, a zero-boundary restore cleared it, or its transcript is gone
    /// or holds no conversation): `--session-id=<new uuid>`, and the recovery point is the zero
    /// boundary of that new session.
    New { session_id: String },
}

impl SessionPlan {
    fn session_id(&self) -> &str {
        match self {
            SessionPlan::Resume { session_id, .. } | SessionPlan::New { session_id } => session_id,
        }
    }

    /// The `claude_session_resume_at` ref: `{sessionId, boundaryUuid}`, the boundary `null`
    /// for a new session.
    fn recovery_ref(&self) -> Value {
        match self {
            SessionPlan::Resume {
                session_id,
                boundary,
                ..
            } => serde_json::json!({ "sessionId": session_id, "boundaryUuid": boundary }),
            SessionPlan::New { session_id } => {
                serde_json::json!({ "sessionId": session_id, "boundaryUuid": null })
            }
        }
    }

    /// The CLI arguments of the delivery run (never `--rewind-files`). A resumed session is
    /// always resumed AT the leaf the daemon means (the live leaf, or the bound boundary): which
    /// branch the CLI's plain `--resume` follows after a `--resume-session-at` branch is the
    /// CLI's choice (Claude Code 2.1.197 picks the newest leaf), so it is never left to it.
    fn args(&self) -> Vec<String> {
        match self {
            SessionPlan::Resume {
                session_id,
                boundary,
                ..
            } => restore_args(session_id, boundary),
            SessionPlan::New { session_id } => stream_args(format!("--session-id={session_id}")),
        }
    }
}

/// The live chain's current leaf, the entry a new turn continues from (the newest
/// `last-prompt.leafUuid`, else the newest chain entry); `None` for a transcript whose live
/// chain holds no user or assistant message (the CLI cannot resume it).
fn current_leaf(transcript: &str) -> Option<String> {
    let chain = LiveChain::of(transcript);
    if chain.messages.is_empty() {
        None
    } else {
        chain.leaf
    }
}

/// Plans the delivery's session from the agent's `session` pointer and its transcript.
fn plan_session(
    settings: &ClaudeSettings,
    session: Option<&str>,
) -> Result<SessionPlan, RestoreFailure> {
    let fresh = || SessionPlan::New {
        session_id: uuid::Uuid::new_v4().to_string(),
    };
    let Some(session_id) = session else {
        return Ok(fresh());
    };
    let path = transcript_file(settings, session_id);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(fresh()),
        Err(e) => {
            return Err(RestoreFailure::Unreachable {
                runtime: RUNTIME,
                detail: format!("cannot read transcript {}: {e}", path.display()),
            })
        }
    };
    if let Some(boundary) = read_pending(settings, session_id)? {
        let chain = LiveChain::of(&text);
        if chain.position(&boundary).is_none() {
            return Err(RestoreFailure::NotVerified {
                runtime: RUNTIME,
                expected: format!(
                    "the boundary {boundary} a rewind bound to this delivery on the live chain"
                ),
                found: chain.describe(),
            });
        }
        return Ok(SessionPlan::Resume {
            session_id: session_id.to_owned(),
            boundary,
            bound: true,
        });
    }
    Ok(match current_leaf(&text) {
        Some(boundary) => SessionPlan::Resume {
            session_id: session_id.to_owned(),
            boundary,
            bound: false,
        },
        None => fresh(),
    })
}

/// One stream-json user message carrying `text`.
fn user_line(text: &str) -> String {
    let mut line = serde_json::json!({
        "type": "user",
        "message": { "role": "user", "content": [{ "type": "text", "text": text }] },
    })
    .to_string();
    line.push('\n');
    line
}

/// The answer of a successful run: the last `result` line's `result` text, else the text of
/// its assistant messages.
fn answer_text(stdout: &[String]) -> String {
    let lines: Vec<Value> = stdout
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    let result = lines
        .iter()
        .rev()
        .find(|v| v.get("type").and_then(Value::as_str) == Some("result"))
        .and_then(|r| r.get("result"))
        .and_then(Value::as_str);
    if let Some(text) = result {
        return text.to_owned();
    }
    lines
        .iter()
        .filter(|v| v.get("type").and_then(Value::as_str) == Some("assistant"))
        .filter_map(|v| v.pointer("/message/content"))
        .flat_map(|content| match content {
            Value::String(text) => vec![text.clone()],
            Value::Array(blocks) => blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        })
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Delivers `input` to the agent's Claude session `session` (`None`: a new one).
///
/// The session is planned first (the live chain's current leaf of an existing
/// transcript, else a new session at the zero boundary); `commit` gets its
/// `{sessionId, boundaryUuid}` ref (and the new session id); only after it returned `Ok` does
/// the CLI run, as `claude --output-format=stream-json --input-format=stream-json --verbose`
/// plus `--resume=<id> --resume-session-at=<leaf>` or `--session-id=<new>`, in the agent's
/// working directory with its
/// environment, one stream-json user message on stdin, stdin then closed, bounded by
/// `timeout`. The run is judged like a restore run (an error result, a non-zero exit, no
/// result line fail it); the answer is the `result` line's text.
pub async fn deliver<F, Fut>(
    settings: &ClaudeSettings,
    timeout: Duration,
    session: Option<&str>,
    input: &str,
    commit: F,
) -> Result<String, DeliveryError>
where
    F: FnOnce(PointToCommit) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let plan = plan_session(settings, session)?;
    let point = PointToCommit {
        recovery_ref: plan.recovery_ref(),
        new_session: match &plan {
            SessionPlan::New { session_id } => Some(session_id.clone()),
            SessionPlan::Resume { .. } => None,
        },
    };
    commit(point).await.map_err(DeliveryError::Commit)?;

    let session_id = plan.session_id();
    let action = match &plan {
        SessionPlan::Resume { .. } => format!("delivering a prompt to session {session_id}"),
        SessionPlan::New { .. } => format!("delivering a prompt to new session {session_id}"),
    };
    let line = user_line(input);
    let known = match &plan {
        SessionPlan::Resume { .. } => Some(transcript_uuids(settings, session_id)?),
        SessionPlan::New { .. } => None,
    };
    let (lines, stderr, exit) =
        run_cli(settings, &plan.args(), Some(&line), timeout, &action).await?;
    judge_run(&lines, &stderr, exit, session_id, &action)?;
    if let (
        SessionPlan::Resume {
            boundary, bound, ..
        },
        Some(known),
    ) = (&plan, known)
    {
        verify_continues_from(settings, session_id, boundary, &known)?;
        if *bound {
            clear_pending(settings, session_id)?;
        }
    }
    Ok(answer_text(&lines))
}

/// Every entry uuid of the session's transcript (the entries a new run cannot have written).
fn transcript_uuids(
    settings: &ClaudeSettings,
    session_id: &str,
) -> Result<HashSet<String>, RestoreFailure> {
    let text = read_transcript(settings, session_id)?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v.get("uuid").and_then(Value::as_str).map(str::to_owned))
        .collect())
}

fn read_transcript(settings: &ClaudeSettings, session_id: &str) -> Result<String, RestoreFailure> {
    let path = transcript_file(settings, session_id);
    std::fs::read_to_string(&path).map_err(|e| RestoreFailure::Unreachable {
        runtime: RUNTIME,
        detail: format!("cannot read transcript {}: {e}", path.display()),
    })
}

/// The check of a bound boundary, after the delivery that applied it: the session's live
/// chain now runs through `boundary` straight into a user message this run wrote (one of no
/// `known` uuid) and on to its answer.
fn verify_continues_from(
    settings: &ClaudeSettings,
    session_id: &str,
    boundary: &str,
    known: &HashSet<String>,
) -> Result<(), RestoreFailure> {
    let chain = LiveChain::of(&read_transcript(settings, session_id)?);
    let next = chain
        .position(boundary)
        .and_then(|at| chain.message_after(at));
    match next {
        Some(message)
            if message.kind == "user"
                && !known.contains(&message.uuid)
                && chain.messages.last() != Some(message) =>
        {
            Ok(())
        }
        _ => Err(RestoreFailure::NotVerified {
            runtime: RUNTIME,
            expected: format!("a new turn continuing from the boundary {boundary}"),
            found: chain.describe(),
        }),
    }
}

/// The file where the daemon keeps the boundary a restore bound to `session_id`'s next
/// delivery: `<config dir>/rewind-boundaries/<sessionId>` (daemon state beside the CLI's own;
/// the CLI never reads it).
fn pending_file(settings: &ClaudeSettings, session_id: &str) -> PathBuf {
    config_dir(settings)
        .join("rewind-boundaries")
        .join(session_id)
}

fn pending_error(path: &Path, e: std::io::Error) -> RestoreFailure {
    RestoreFailure::Unreachable {
        runtime: RUNTIME,
        detail: format!("cannot keep the pending boundary {}: {e}", path.display()),
    }
}

/// The boundary bound to the session's next delivery, if a restore left one.
fn read_pending(
    settings: &ClaudeSettings,
    session_id: &str,
) -> Result<Option<String>, RestoreFailure> {
    let path = pending_file(settings, session_id);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some(text.trim().to_owned()).filter(|b| !b.is_empty())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(pending_error(&path, e)),
    }
}

/// Records `boundary` as the session's pending boundary (written whole, then renamed).
fn write_pending(
    settings: &ClaudeSettings,
    session_id: &str,
    boundary: &str,
) -> Result<(), RestoreFailure> {
    let path = pending_file(settings, session_id);
    let partial = path.with_extension("partial");
    let write = || -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&partial, format!("{boundary}\n"))?;
        std::fs::rename(&partial, &path)
    };
    write().map_err(|e| pending_error(&path, e))
}

/// Forgets the session's pending boundary (none is fine).
fn clear_pending(settings: &ClaudeSettings, session_id: &str) -> Result<(), RestoreFailure> {
    let path = pending_file(settings, session_id);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(pending_error(&path, e)),
    }
}

/// Runs the CLI once with `args` in the agent's working directory and environment, `input`
/// written on stdin (then closed; no input: stdin is `/dev/null`), bounded by `timeout`;
/// answers its stdout lines, its stderr and how it exited.
async fn run_cli(
    settings: &ClaudeSettings,
    args: &[String],
    input: Option<&str>,
    timeout: Duration,
    action: &str,
) -> Result<(Vec<String>, String, ExitInfo), RestoreFailure> {
    let mut command = Command::new(&settings.program);
    command
        .args(args)
        .current_dir(&settings.cwd)
        .envs(settings.env.iter().map(|(k, v)| (k, v)))
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().map_err(|e| RestoreFailure::Unreachable {
        runtime: RUNTIME,
        detail: format!("cannot start {}: {e}", settings.program.display()),
    })?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let finished = tokio::time::timeout(timeout, async {
        let write = async {
            if let (Some(mut stdin), Some(input)) = (stdin, input) {
                // A CLI that exits before reading its input is judged by its exit below.
                let _ = stdin.write_all(input.as_bytes()).await;
                let _ = stdin.flush().await;
            }
        };
        let ((), lines, err) = tokio::join!(write, read_lines(stdout), read_all(stderr));
        let status = child.wait().await;
        (lines, err, status)
    })
    .await;
    let (lines, stderr, status) = match finished {
        Ok(done) => done,
        Err(_) => {
            let _ = child.kill().await;
            return Err(RestoreFailure::Timeout {
                runtime: RUNTIME,
                action: action.to_owned(),
                timeout_ms: timeout.as_millis(),
            });
        }
    };
    let status = status.map_err(|e| RestoreFailure::Crashed {
        runtime: RUNTIME,
        action: action.to_owned(),
        detail: format!("cannot wait for the process: {e}"),
    })?;
    Ok((lines, stderr, ExitInfo::of(&status)))
}

/// The CLI arguments of a restore.
fn restore_args(session_id: &str, boundary_uuid: &str) -> Vec<String> {
    let mut args = stream_args(format!("--resume={session_id}"));
    args.push(format!("--resume-session-at={boundary_uuid}"));
    args
}

/// The stream-json command line addressing a session with `session` (never `--rewind-files`).
fn stream_args(session: String) -> Vec<String> {
    vec![
        "--output-format=stream-json".to_owned(),
        "--input-format=stream-json".to_owned(),
        "--verbose".to_owned(),
        session,
    ]
}

/// Judges the prompt-less validation run of a restore: the CLI exits 0 without printing
/// anything (the real CLI 2.1.197) or with a success result (other releases); anything else is
/// judged like any run.
fn judge_validation(
    stdout: &[String],
    stderr: &str,
    exit: ExitInfo,
    session_id: &str,
    action: &str,
) -> Result<(), RestoreFailure> {
    let silent = stdout.iter().all(|l| l.trim().is_empty()) && stderr.trim().is_empty();
    if silent && exit.code == Some(0) {
        return Ok(());
    }
    judge_run(stdout, stderr, exit, session_id, action)
}

async fn read_lines<R: AsyncRead + Unpin>(stream: Option<R>) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(stream) = stream {
        let mut reader = BufReader::new(stream);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => lines.push(String::from_utf8_lossy(&buf).trim_end().to_owned()),
            }
        }
    }
    lines
}

async fn read_all<R: AsyncRead + Unpin>(stream: Option<R>) -> String {
    let mut buf = Vec::new();
    if let Some(mut stream) = stream {
        let _ = stream.read_to_end(&mut buf).await;
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// How the process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ExitInfo {
    code: Option<i32>,
    signal: Option<i32>,
}

impl ExitInfo {
    fn of(status: &std::process::ExitStatus) -> ExitInfo {
        #[cfg(unix)]
        let signal = std::os::unix::process::ExitStatusExt::signal(status);
        #[cfg(not(unix))]
        let signal = None;
        ExitInfo {
            code: status.code(),
            signal,
        }
    }

    fn describe(self) -> String {
        match (self.code, self.signal) {
            (Some(code), _) => format!("exit status {code}"),
            (None, Some(signal)) => format!("killed by signal {signal}"),
            (None, None) => "unknown exit status".to_owned(),
        }
    }
}

/// The end of `text`, at most [`STDERR_TAIL`] bytes, on a character boundary.
fn tail(text: &str) -> String {
    let text = text.trim();
    if text.len() <= STDERR_TAIL {
        return text.to_owned();
    }
    let mut start = text.len() - STDERR_TAIL;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

/// Judges the CLI run from its stdout lines, stderr and exit: `Ok` when it reported success.
fn judge_run(
    stdout: &[String],
    stderr: &str,
    exit: ExitInfo,
    session_id: &str,
    action: &str,
) -> Result<(), RestoreFailure> {
    let result = stdout
        .iter()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get("type").and_then(Value::as_str) == Some("result"));
    let result_failed = result.as_ref().is_some_and(|r| {
        r.get("is_error").and_then(Value::as_bool) == Some(true)
            || r.get("subtype").and_then(Value::as_str) != Some("success")
    });
    if result.is_some() && !result_failed && exit.code == Some(0) {
        return Ok(());
    }
    let mut messages: Vec<String> = Vec::new();
    if let Some(r) = &result {
        if let Some(errors) = r.get("errors").and_then(Value::as_array) {
            messages.extend(errors.iter().filter_map(Value::as_str).map(str::to_owned));
        }
        if let Some(text) = r.get("result").and_then(Value::as_str) {
            if result_failed && !text.is_empty() {
                messages.push(text.to_owned());
            }
        }
    }
    let stderr_tail = tail(stderr);
    if !stderr_tail.is_empty() {
        messages.push(stderr_tail.clone());
    }
    let all = messages.join("\n");
    if all.contains("No conversation found") {
        return Err(RestoreFailure::UnknownSession {
            runtime: RUNTIME,
            id: session_id.to_owned(),
        });
    }
    if let Some(line) = all
        .lines()
        .find(|l| l.contains("is currently running as") || l.contains("is already in use"))
    {
        return Err(RestoreFailure::Busy {
            runtime: RUNTIME,
            message: line.trim().to_owned(),
        });
    }
    if result_failed {
        let message = if messages.is_empty() {
            format!(
                "error result (subtype {}), {}",
                result
                    .as_ref()
                    .and_then(|r| r.get("subtype"))
                    .and_then(Value::as_str)
                    .unwrap_or("?"),
                exit.describe()
            )
        } else {
            all
        };
        return Err(RestoreFailure::Refused {
            runtime: RUNTIME,
            action: action.to_owned(),
            message,
        });
    }
    let own_error_exit = exit.code == Some(1)
        && stderr_tail
            .lines()
            .any(|l| l.trim_start().to_ascii_lowercase().starts_with("error"));
    if result.is_none() && own_error_exit {
        return Err(RestoreFailure::Refused {
            runtime: RUNTIME,
            action: action.to_owned(),
            message: stderr_tail,
        });
    }
    let what = if result.is_none() {
        "no result line"
    } else {
        "a success result"
    };
    Err(RestoreFailure::Crashed {
        runtime: RUNTIME,
        action: action.to_owned(),
        detail: format!(
            "{what}, {}; stderr: {}",
            exit.describe(),
            if stderr_tail.is_empty() {
                "(empty)"
            } else {
                &stderr_tail
            }
        ),
    })
}

/// The directory name the CLI derives from a working directory: every character that is not
/// an ASCII letter or digit becomes `-` (two for a character outside the BMP: the CLI
/// replaces UTF-16 code units).
pub(crate) fn project_slug(cwd: &Path) -> String {
    cwd.to_string_lossy()
        .chars()
        .flat_map(|c| {
            let n = if c.is_ascii_alphanumeric() {
                1
            } else {
                c.len_utf16()
            };
            std::iter::repeat_n(if c.is_ascii_alphanumeric() { c } else { '-' }, n)
        })
        .collect()
}

fn env_value(settings: &ClaudeSettings, key: &str) -> Option<String> {
    settings
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var(key).ok())
        .filter(|v| !v.is_empty())
}

/// The CLI's config dir as the child sees it: `CLAUDE_CONFIG_DIR`, else `$HOME/.claude`
/// (settings first, then the inherited environment).
fn config_dir(settings: &ClaudeSettings) -> PathBuf {
    match env_value(settings, "CLAUDE_CONFIG_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env_value(settings, "HOME").unwrap_or_default()).join(".claude"),
    }
}

/// The transcript of `session_id`: in the project of the (resolved) working directory, else
/// the same file name in another project directory (the CLI finds a session from any project
/// and writes it back where it found it).
fn transcript_file(settings: &ClaudeSettings, session_id: &str) -> PathBuf {
    let projects = config_dir(settings).join("projects");
    let cwd = std::fs::canonicalize(&settings.cwd).unwrap_or_else(|_| settings.cwd.clone());
    let name = format!("{session_id}.jsonl");
    let own = projects.join(project_slug(&cwd)).join(&name);
    if own.is_file() {
        return own;
    }
    let mut others: Vec<PathBuf> = std::fs::read_dir(&projects)
        .map(|dir| dir.flatten().map(|e| e.path().join(&name)).collect())
        .unwrap_or_default();
    others.sort();
    others.into_iter().find(|p| p.is_file()).unwrap_or(own)
}

/// One entry of the live chain: its uuid and its type (`user`, `assistant`, `attachment`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Message {
    uuid: String,
    kind: String,
}

/// The live conversation of a transcript.
#[derive(Debug, Clone, Default)]
struct LiveChain {
    /// The uuid the walk started from.
    leaf: Option<String>,
    /// Every chain entry from the root to the leaf, oldest first, whatever its type (user and
    /// assistant messages, and the attachments a release writes between them, such as the
    /// `prompt_snapshot` Claude Code 2.1.332 records after an answer): a boundary or a leaf
    /// may be any of them.
    entries: Vec<Message>,
    /// The user and assistant messages among `entries`, oldest first.
    messages: Vec<Message>,
}

impl LiveChain {
    /// Reads a transcript's text: lines that are not JSON objects are skipped; chain entries
    /// carry `uuid` and a `parentUuid` key; the leaf is the newest `last-prompt.leafUuid` that
    /// names an entry, else the newest entry.
    fn of(text: &str) -> LiveChain {
        let lines: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(Value::is_object)
            .collect();
        let uuid_of = |v: &Value| v.get("uuid").and_then(Value::as_str).map(str::to_owned);
        let entries: Vec<&Value> = lines
            .iter()
            .filter(|v| uuid_of(v).is_some() && v.get("parentUuid").is_some())
            .collect();
        let by_uuid: HashMap<String, &Value> = entries
            .iter()
            .filter_map(|v| uuid_of(v).map(|u| (u, *v)))
            .collect();
        let marked = lines
            .iter()
            .rev()
            .filter(|v| v.get("type").and_then(Value::as_str) == Some("last-prompt"))
            .find_map(|v| v.get("leafUuid").and_then(Value::as_str))
            .filter(|leaf| by_uuid.contains_key(*leaf))
            .map(str::to_owned);
        let leaf = marked.or_else(|| entries.last().and_then(|v| uuid_of(v)));
        let mut entries = Vec::new();
        let mut seen = HashSet::new();
        let mut next = leaf.clone();
        while let Some(uuid) = next {
            if !seen.insert(uuid.clone()) {
                break;
            }
            let Some(entry) = by_uuid.get(&uuid) else {
                break;
            };
            let kind = entry.get("type").and_then(Value::as_str).unwrap_or("");
            entries.push(Message {
                uuid: uuid.clone(),
                kind: kind.to_owned(),
            });
            next = entry
                .get("parentUuid")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        entries.reverse();
        let messages = entries
            .iter()
            .filter(|m| m.kind == "user" || m.kind == "assistant")
            .cloned()
            .collect();
        LiveChain {
            leaf,
            entries,
            messages,
        }
    }

    /// Where `uuid` is among the live chain's entries (of any type).
    fn position(&self, uuid: &str) -> Option<usize> {
        self.entries.iter().position(|m| m.uuid == uuid)
    }

    /// The first user or assistant message after entry `at` of the live chain.
    fn message_after(&self, at: usize) -> Option<&Message> {
        self.entries
            .get(at + 1..)?
            .iter()
            .find(|m| m.kind == "user" || m.kind == "assistant")
    }

    /// The live conversation, for failure messages.
    fn describe(&self) -> String {
        match self.messages.last() {
            Some(last) => format!(
                "live chain ending at {} ({} messages)",
                last.uuid,
                self.messages.len()
            ),
            None => "an empty live chain".to_owned(),
        }
    }

    /// Whether the live conversation ends at `boundary`: its last message is the boundary,
    /// or the walk starts at it (a boundary that is not a user or assistant entry).
    fn ends_at(&self, boundary: &str) -> bool {
        self.messages.last().map(|m| m.uuid.as_str()) == Some(boundary)
            || self.leaf.as_deref() == Some(boundary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slug_replaces_every_non_alphanumeric_character() {
        assert_eq!(
            project_slug(Path::new("/home/a.b/my_proj-2")),
            "-home-a-b-my-proj-2"
        );
        assert_eq!(project_slug(Path::new("/x/é😀")), "-x----");
    }

    fn entry(kind: &str, uuid: &str, parent: Option<&str>) -> String {
        serde_json::json!({"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s"})
            .to_string()
    }

    fn marker(leaf: &str) -> String {
        serde_json::json!({"type": "last-prompt", "lastPrompt": "p", "leafUuid": leaf}).to_string()
    }

    #[test]
    fn the_chain_is_walked_from_the_newest_leaf_marker_through_attachments() {
        let text = [
            r#"{"type":"queue-operation","operation":"enqueue"}"#.to_owned(),
            entry("user", "u1", None),
            entry("assistant", "a1", Some("u1")),
            marker("a1"),
            entry("attachment", "x2", Some("a1")),
            entry("user", "u2", Some("x2")),
            entry("assistant", "a2", Some("u2")),
            marker("a2"),
            "not json".to_owned(),
        ]
        .join("\n");
        let chain = LiveChain::of(&text);
        let uuids: Vec<_> = chain.messages.iter().map(|m| m.uuid.as_str()).collect();
        assert_eq!(uuids, ["u1", "a1", "u2", "a2"]);
        assert!(chain.ends_at("a2"));
        assert!(!chain.ends_at("a1"));
        assert_eq!(chain.messages[2].kind, "user");
        // An attachment on the chain (a 2.1.332 `prompt_snapshot`) is a boundary like any
        // entry: found, and followed by the next message.
        let at = chain
            .position("x2")
            .expect("the attachment is on the chain");
        assert_eq!(chain.message_after(at).map(|m| m.uuid.as_str()), Some("u2"));

        let rewound = format!("{text}\n{}", marker("a1"));
        assert!(LiveChain::of(&rewound).ends_at("a1"));

        // A later turn from the boundary leaves the rewound turn off the chain.
        let continued = format!(
            "{rewound}\n{}\n{}\n{}",
            entry("user", "u3", Some("a1")),
            entry("assistant", "a3", Some("u3")),
            marker("a3")
        );
        let chain = LiveChain::of(&continued);
        let uuids: Vec<_> = chain.messages.iter().map(|m| m.uuid.as_str()).collect();
        assert_eq!(uuids, ["u1", "a1", "u3", "a3"]);

        // Without markers the newest entry is the leaf; an unknown marker is ignored.
        let plain = [
            entry("user", "u1", None),
            entry("assistant", "a1", Some("u1")),
            marker("nowhere"),
        ]
        .join("\n");
        assert!(LiveChain::of(&plain).ends_at("a1"));
        assert!(LiveChain::of("").messages.is_empty());
    }

    fn exit(code: Option<i32>, signal: Option<i32>) -> ExitInfo {
        ExitInfo { code, signal }
    }

    fn error_result(message: &str) -> String {
        serde_json::json!({
            "type": "result", "subtype": "error_during_execution", "is_error": true,
            "session_id": "other", "errors": [message],
        })
        .to_string()
    }

    #[test]
    fn runs_are_judged_by_result_exit_and_stderr() {
        let init = r#"{"type":"system","subtype":"init","session_id":"s"}"#.to_owned();
        let ok = r#"{"type":"result","subtype":"success","is_error":false,"session_id":"s"}"#;
        let judge = |out: &[String], err: &str, e: ExitInfo| judge_run(out, err, e, "s", "act");
        assert!(judge(&[init.clone(), ok.to_owned()], "", exit(Some(0), None)).is_ok());

        let unknown = judge(
            &[error_result("No conversation found with session ID: s")],
            "",
            exit(Some(1), None),
        );
        assert_eq!(unknown.unwrap_err().kind(), "unknown_session");

        let missing = judge(
            &[error_result("No message found with message.uuid of: b")],
            "",
            exit(Some(1), None),
        )
        .unwrap_err();
        assert_eq!(missing.kind(), "error");
        assert!(
            missing.to_string().contains("No message found"),
            "{missing}"
        );

        let busy = judge(
            &[],
            "Error: Session s is currently running as a background agent (bg). Use ...",
            exit(Some(1), None),
        );
        assert_eq!(busy.unwrap_err().kind(), "busy");

        let refused = judge(
            &[],
            "Error: --resume-session-at requires --resume\n",
            exit(Some(1), None),
        );
        assert_eq!(refused.unwrap_err().kind(), "error");

        let crashed = judge(
            std::slice::from_ref(&init),
            "abort\n",
            exit(Some(134), None),
        )
        .unwrap_err();
        assert_eq!(crashed.kind(), "crash");
        assert!(crashed.to_string().contains("exit status 134"), "{crashed}");
        assert!(crashed.to_string().contains("abort"), "{crashed}");

        let killed = judge(std::slice::from_ref(&init), "", exit(None, Some(9))).unwrap_err();
        assert!(killed.to_string().contains("signal 9"), "{killed}");

        let silent = judge(&[init], "", exit(Some(0), None)).unwrap_err();
        assert_eq!(silent.kind(), "crash");
        assert!(tail(&"x".repeat(5000)).len() <= STDERR_TAIL + 4);
    }

    /// The mock CLI of the workspace (`$MOCK_CLAUDE`, else the `mock-claude` binary next to
    /// this test's directory), when it was built.
    fn mock_cli() -> Option<PathBuf> {
        if let Some(path) = std::env::var_os("MOCK_CLAUDE") {
            return Some(PathBuf::from(path));
        }
        let exe = std::env::current_exe().ok()?;
        let candidate = exe.parent()?.parent()?.join("mock-claude");
        candidate.is_file().then_some(candidate)
    }

    /// Drives the real protocol against the mock CLI, when it is built (the reference does not
    /// depend on the mock crate: the transcript and the fault plan are written as files).
    #[tokio::test]
    async fn restores_against_the_cli_and_maps_its_failures() {
        let Some(program) = mock_cli() else {
            // `cargo test` of the workspace builds it; CI must never skip this test.
            assert!(
                std::env::var_os("CI").is_none(),
                "mock-claude is not built (build the workspace or set MOCK_CLAUDE)"
            );
            eprintln!("mock-claude is not built: skipping the process test");
            return;
        };
        let config = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let session = "5e55a000-0000-4000-8000-000000000009";
        let (u1, a1, u2, a2) = (
            "00000000-0000-4000-8000-0000000000a1",
            "00000000-0000-4000-8000-0000000000b1",
            "00000000-0000-4000-8000-0000000000a2",
            "00000000-0000-4000-8000-0000000000b2",
        );
        let resolved = std::fs::canonicalize(cwd.path()).unwrap();
        let dir = config.path().join("projects").join(project_slug(&resolved));
        std::fs::create_dir_all(&dir).unwrap();
        let message = |kind: &str, uuid: &str, parent: Option<&str>| {
            serde_json::json!({
                "type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": session,
                "cwd": resolved, "timestamp": "2026-01-01T00:00:00.000Z",
                "message": {"role": kind, "content": [{"type": "text", "text": uuid}]},
            })
            .to_string()
        };
        let transcript = [
            message("user", u1, None),
            message("assistant", a1, Some(u1)),
            message("user", u2, Some(a1)),
            message("assistant", a2, Some(u2)),
            marker(a2),
        ]
        .join("\n");
        let path = dir.join(format!("{session}.jsonl"));
        let settings = ClaudeSettings {
            program,
            env: vec![(
                "CLAUDE_CONFIG_DIR".to_owned(),
                config.path().to_string_lossy().into_owned(),
            )],
            cwd: cwd.path().to_path_buf(),
        };
        let faults = config.path().join("mock").join("faults.json");
        let set_fault = |kind: Option<&str>| {
            std::fs::create_dir_all(faults.parent().unwrap()).unwrap();
            let rules = match kind {
                Some(kind) => {
                    serde_json::json!([{"target": session, "call": "resume-at", "kind": kind}])
                }
                None => serde_json::json!([]),
            };
            std::fs::write(&faults, serde_json::json!({"rules": rules}).to_string()).unwrap();
        };
        let timeout = Duration::from_secs(20);
        let kind_of = |r: Result<Restored, RestoreFailure>| match r {
            Ok(Restored::Bound { .. }) => "bound".to_owned(),
            Ok(_) => "verified".to_owned(),
            Err(e) => e.kind().to_owned(),
        };

        // The CLI validates the boundary and changes nothing: the restore binds it to the
        // session's next delivery.
        std::fs::write(&path, format!("{transcript}\n")).unwrap();
        let restored = restore(&settings, timeout, session, a1).await.unwrap();
        assert!(matches!(restored, Restored::Bound { .. }), "{restored:?}");
        let chain = LiveChain::of(&std::fs::read_to_string(&path).unwrap());
        assert!(chain.ends_at(a2), "the transcript is unchanged");
        assert_eq!(
            read_pending(&settings, session).unwrap().as_deref(),
            Some(a1)
        );
        // A restore to the live leaf itself needs nothing more, and forgets what was pending.
        assert_eq!(
            kind_of(restore(&settings, timeout, session, a2).await),
            "verified"
        );
        assert_eq!(read_pending(&settings, session).unwrap(), None);

        std::fs::write(&path, format!("{transcript}\n")).unwrap();
        let missing = "00000000-0000-4000-8000-0000000000ff";
        let refused = restore(&settings, timeout, session, missing)
            .await
            .unwrap_err();
        assert_eq!(refused.kind(), "error");
        assert!(
            refused.to_string().contains("No message found"),
            "{refused}"
        );
        let nobody = "00000000-0000-4000-8000-00000000dead";
        assert_eq!(
            kind_of(restore(&settings, timeout, nobody, a1).await),
            "unknown_session"
        );

        for (fault, expected) in [
            ("error", "error"),
            ("unknown_session", "unknown_session"),
            ("busy", "busy"),
            // Without a prompt the CLI changes nothing anyway: the next delivery's check is
            // where a run without effect is caught.
            ("no_effect", "bound"),
            ("crash", "crash"),
        ] {
            set_fault(Some(fault));
            let got = kind_of(restore(&settings, timeout, session, a1).await);
            assert_eq!(got, expected, "fault {fault}");
        }
        set_fault(Some("hang"));
        let started = std::time::Instant::now();
        let hung = restore(&settings, Duration::from_millis(300), session, a1).await;
        assert_eq!(kind_of(hung), "timeout");
        assert!(started.elapsed() < Duration::from_secs(5));
        set_fault(None);
        assert_eq!(
            kind_of(restore(&settings, timeout, session, u2).await),
            "bound"
        );

        let unreachable = ClaudeSettings {
            program: cwd.path().join("no-such-claude"),
            ..settings.clone()
        };
        assert_eq!(
            kind_of(restore(&unreachable, timeout, session, a1).await),
            "unreachable"
        );
    }

    #[test]
    fn a_delivery_resumes_at_the_live_leaf_or_starts_at_the_zero_boundary() {
        let config = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let settings = ClaudeSettings {
            program: PathBuf::from("claude"),
            env: vec![(
                "CLAUDE_CONFIG_DIR".to_owned(),
                config.path().to_string_lossy().into_owned(),
            )],
            cwd: cwd.path().to_path_buf(),
        };
        let resolved = std::fs::canonicalize(cwd.path()).unwrap();
        let dir = config.path().join("projects").join(project_slug(&resolved));
        std::fs::create_dir_all(&dir).unwrap();
        let session = "5e55a000-0000-4000-8000-000000000001";
        let transcript = [
            entry("user", "u1", None),
            entry("assistant", "a1", Some("u1")),
            entry("user", "u2", Some("a1")),
            entry("assistant", "a2", Some("u2")),
            marker("a2"),
            // A restore moved the live leaf back.
            marker("a1"),
        ]
        .join("\n");
        std::fs::write(dir.join(format!("{session}.jsonl")), &transcript).unwrap();

        let plan = plan_session(&settings, Some(session)).unwrap();
        assert_eq!(
            plan,
            SessionPlan::Resume {
                session_id: session.to_owned(),
                boundary: "a1".to_owned(),
                bound: false,
            }
        );
        assert_eq!(
            plan.recovery_ref(),
            serde_json::json!({"sessionId": session, "boundaryUuid": "a1"})
        );
        assert_eq!(
            plan.args(),
            [
                "--output-format=stream-json",
                "--input-format=stream-json",
                "--verbose",
                &format!("--resume={session}"),
                "--resume-session-at=a1",
            ]
        );

        // No session, a transcript that is gone, or one without a conversation: a new session.
        let empty = "5e55a000-0000-4000-8000-000000000002";
        std::fs::write(
            dir.join(format!("{empty}.jsonl")),
            r#"{"type":"queue-operation","operation":"enqueue"}"#,
        )
        .unwrap();
        for pointer in [
            None,
            Some("5e55a000-0000-4000-8000-00000000dead"),
            Some(empty),
        ] {
            let plan = plan_session(&settings, pointer).unwrap();
            let SessionPlan::New { session_id } = &plan else {
                panic!("{pointer:?}: {plan:?}")
            };
            assert!(uuid::Uuid::parse_str(session_id).is_ok());
            assert_ne!(Some(session_id.as_str()), pointer);
            assert_eq!(
                plan.recovery_ref(),
                serde_json::json!({"sessionId": session_id, "boundaryUuid": null})
            );
            assert_eq!(plan.args()[3], format!("--session-id={session_id}"));
        }
        for plan in [
            plan_session(&settings, None).unwrap(),
            plan_session(&settings, Some(session)).unwrap(),
        ] {
            assert!(!plan
                .args()
                .iter()
                .any(|a| a.contains("rewind-files") || a.contains("fork")));
        }
    }

    #[test]
    fn the_input_is_one_stream_json_user_message_and_the_answer_the_result_text() {
        let line = user_line("hello \"you\"\nthere");
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        assert_eq!(
            serde_json::from_str::<Value>(&line).unwrap(),
            serde_json::json!({
                "type": "user",
                "message": {"role": "user", "content": [{"type": "text", "text": "hello \"you\"\nthere"}]},
            })
        );
        let init = r#"{"type":"system","subtype":"init","session_id":"s"}"#.to_owned();
        let assistant = serde_json::json!({
            "type": "assistant",
            "message": {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm"},
                {"type": "text", "text": "Mock reply to: hi"},
            ]},
        })
        .to_string();
        let result = |text: Option<&str>| {
            let mut r =
                serde_json::json!({"type": "result", "subtype": "success", "is_error": false});
            if let Some(text) = text {
                r["result"] = serde_json::json!(text);
            }
            r.to_string()
        };
        let run = |r: String| vec![init.clone(), assistant.clone(), r];
        assert_eq!(answer_text(&run(result(Some("final")))), "final");
        assert_eq!(answer_text(&run(result(Some("")))), "");
        assert_eq!(answer_text(&run(result(None))), "Mock reply to: hi");
    }

    /// Deliveries against the mock CLI, when it is built: a new session at the zero boundary,
    /// then a resume at the live leaf; a failed run fails after the point was committed.
    #[tokio::test]
    async fn delivers_against_the_cli() {
        let Some(program) = mock_cli() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "mock-claude is not built (build the workspace or set MOCK_CLAUDE)"
            );
            eprintln!("mock-claude is not built: skipping the process test");
            return;
        };
        let config = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let settings = ClaudeSettings {
            program,
            env: vec![(
                "CLAUDE_CONFIG_DIR".to_owned(),
                config.path().to_string_lossy().into_owned(),
            )],
            cwd: cwd.path().to_path_buf(),
        };
        let timeout = Duration::from_secs(20);
        let points = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let recorder = || crate::runtimes::test_support::recorder(&points);

        let first = deliver(&settings, timeout, None, "first input", recorder())
            .await
            .unwrap();
        assert!(first.contains("first input"), "{first}");
        let session = points.lock().unwrap()[0]
            .new_session
            .clone()
            .expect("a new session");
        assert_eq!(
            points.lock().unwrap()[0].recovery_ref,
            serde_json::json!({"sessionId": session, "boundaryUuid": null})
        );
        let path = transcript_file(&settings, &session);
        let leaf = current_leaf(&std::fs::read_to_string(&path).unwrap()).expect("a leaf");

        let second = deliver(
            &settings,
            timeout,
            Some(&session),
            "second input",
            recorder(),
        )
        .await
        .unwrap();
        assert!(second.contains("second input"), "{second}");
        assert_eq!(
            points.lock().unwrap()[1],
            PointToCommit {
                recovery_ref: serde_json::json!({"sessionId": session, "boundaryUuid": leaf}),
                new_session: None,
            }
        );
        // The second turn continues from the first one's leaf.
        let chain = LiveChain::of(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(chain.messages.len(), 4, "{:?}", chain.messages);
        assert!(chain.entries.iter().any(|m| m.uuid == leaf));
        // The point restores: bound to the next delivery, which continues from it.
        let restored = restore(&settings, timeout, &session, &leaf).await.unwrap();
        assert!(matches!(restored, Restored::Bound { .. }), "{restored:?}");
        let faults = config.path().join("mock").join("faults.json");
        std::fs::create_dir_all(faults.parent().unwrap()).unwrap();
        // A run that answers but writes nothing does not pass the delivery's check, and the
        // boundary stays bound.
        std::fs::write(
            &faults,
            serde_json::json!({"rules": [{"target": session, "call": "resume-at", "kind": "no_effect"}]})
                .to_string(),
        )
        .unwrap();
        let err = deliver(&settings, timeout, Some(&session), "lost", recorder())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, DeliveryError::Runtime(f) if f.kind() == "not_verified"),
            "{err:?}"
        );
        assert_eq!(
            read_pending(&settings, &session).unwrap(),
            Some(leaf.clone())
        );
        std::fs::write(&faults, r#"{"rules": []}"#).unwrap();
        let rewound = deliver(&settings, timeout, Some(&session), "instead", recorder())
            .await
            .unwrap();
        assert!(rewound.contains("instead"), "{rewound}");
        let committed = points.lock().unwrap()[3].recovery_ref.clone();
        assert_eq!(
            committed,
            serde_json::json!({"sessionId": session, "boundaryUuid": leaf})
        );
        let chain = LiveChain::of(&std::fs::read_to_string(&path).unwrap());
        // The first turn's leaf: its answer (2.1.197), or the snapshot after it (2.1.332).
        let at = chain.position(&leaf).expect("the leaf is on the chain");
        let answer = chain.entries[..=at]
            .iter()
            .rev()
            .find(|m| m.kind == "assistant")
            .expect("an answer at or before the leaf");
        let at = chain.messages.iter().position(|m| m.uuid == answer.uuid);
        assert_eq!(at, Some(1), "{:?}", chain.messages);
        assert_eq!(chain.messages.len(), 4, "the second turn left the chain");
        assert_eq!(read_pending(&settings, &session).unwrap(), None);

        // A failed run: the point was committed, the delivery fails.
        std::fs::write(
            &faults,
            serde_json::json!({"rules": [{"target": session, "call": "resume-at", "kind": "error"}]})
                .to_string(),
        )
        .unwrap();
        let err = deliver(
            &settings,
            timeout,
            Some(&session),
            "third input",
            recorder(),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&err, DeliveryError::Runtime(f) if f.kind() == "error"),
            "{err:?}"
        );
        assert_eq!(points.lock().unwrap().len(), 5);

        // A commit that fails runs no CLI.
        std::fs::write(&faults, r#"{"rules": []}"#).unwrap();
        let before = std::fs::read_to_string(&path).unwrap();
        let err = deliver(&settings, timeout, Some(&session), "fourth", |_| async {
            Err("no database".to_owned())
        })
        .await
        .unwrap_err();
        assert_eq!(err, DeliveryError::Commit("no database".to_owned()));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
    }

    #[test]
    fn the_arguments_never_include_rewind_files() {
        let args = restore_args("s", "b");
        assert!(args.contains(&"--resume=s".to_owned()));
        assert!(args.contains(&"--resume-session-at=b".to_owned()));
        assert!(!args
            .iter()
            .any(|a| a.contains("rewind-files") || a.contains("fork")));
    }
}
