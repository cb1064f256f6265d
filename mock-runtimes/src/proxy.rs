//! Journaling proxies: the mock programs started with [`PROXY_TARGET_ENV`] set stand in front of
//! the real runtime named there instead of imitating it. Every byte goes through unchanged; every
//! call is journaled as the mock would journal it ([`crate::journal`]), so a harness reads the
//! same journal whether a scenario runs on a mock or on a real runtime.
//!
//! - `codex`: the app-server's JSON-RPC over stdio, a line at a time. A request is journaled when
//!   its answer comes back (stamped with the time it was sent), with outcome `ok` or `error` and
//!   the error's message; a notification or a client's answer to a server request when it
//!   passes.
//! - `claude`: one run. The argv is journaled at the start (`process/start`), and the run's call
//!   (`claude --resume-session-at`, ...) with the argv, the working directory and every stdin
//!   line at its end, `ok` when the CLI exited 0.
//!
//! A proxy applies the fault plan the harness planted ([`crate::faults`]) where a fault can be
//! had without the runtime's cooperation: `error` (the call is answered with an error and never
//! reaches the runtime), `hang` (the call reaches the runtime late, or once the fault is lifted)
//! and `crash` (the process ends without an answer). A call a fault matched is journaled once,
//! when it arrives, with the fault as its outcome, as the mocks do.
//!
//! With [`crate::witness::WITNESS_ENV`] set, a proxy announces every delivering input to the
//! delivery witness before the runtime sees it, with the runtime's state read from the real
//! runtime itself (codex: the thread's turns, asked of the same app-server on the proxy's own
//! request id; claude: the transcript on disk), and journals the witness's number with the
//! call, as the mocks do.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::faults::{FaultKind, FaultPlan, FaultRule};
use crate::journal::{Journal, JournalEntry};
use crate::witness::{ask_blocking, witness_url, WitnessRequest};

/// The id prefix of the requests a codex proxy sends the app-server itself.
const OWN_ID: &str = "rewind-proxy-";

/// The fault rule planted for `call` on `target` in the plan at `plan`, if any.
fn planted(plan: &Path, target: Option<&str>, call: &str) -> Option<FaultRule> {
    let loaded = FaultPlan::load(plan).ok()?;
    loaded
        .find(target.unwrap_or("*"), call)
        .or_else(|| loaded.find("*", call))
        .cloned()
}

/// Waits out a hang: `hang_ms`, or until the rule is lifted.
fn wait_out(plan: &Path, target: Option<&str>, call: &str, rule: &FaultRule) {
    match rule.hang_ms {
        Some(ms) => std::thread::sleep(std::time::Duration::from_millis(ms)),
        None => FaultPlan::wait_while_held(plan, target.unwrap_or("*"), call),
    }
}

/// What a journal entry of a faulted call says about the fault.
fn fault_detail(rule: &FaultRule) -> String {
    match (rule.kind, rule.hang_ms) {
        (FaultKind::Hang, Some(ms)) => format!("injected hang: answering after {ms} ms"),
        (FaultKind::Hang, None) => "injected hang: held until the fault is lifted".to_owned(),
        (FaultKind::Crash, _) => {
            "injected crash: exiting with status 134 before answering".to_owned()
        }
        (kind, _) => format!("injected {} by the journaling proxy", kind.label()),
    }
}

/// The variable naming the real program a mock program stands in front of.
pub const PROXY_TARGET_ENV: &str = "REWIND_REAL_PROGRAM";

/// Runs `name` (`codex` or `claude`) as a proxy when [`PROXY_TARGET_ENV`] is set.
pub fn run_if_asked(name: &str, args: &[String]) -> Option<ExitCode> {
    let real = std::env::var_os(PROXY_TARGET_ENV)?;
    let real = PathBuf::from(real);
    Some(match name {
        "codex" => codex(&real, args),
        "claude" => claude(&real, args),
        other => {
            eprintln!("{other}: no journaling proxy for this runtime");
            ExitCode::from(2)
        }
    })
}

fn home_var(var: &str) -> Option<PathBuf> {
    std::env::var_os(var).map(PathBuf::from)
}

/// The variable holding the command (a JSON array, e.g. `["docker", "exec", "-i", "box"]`) that
/// runs the real program on a second host; unset, it runs here.
pub const EXEC_ENV: &str = "REWIND_REAL_EXEC";

/// The variable naming (comma-separated) the variables of the proxy's environment the real
/// program gets on a second host; it gets nothing else (and [`HOST_PATH`]).
pub const EXEC_VARS_ENV: &str = "REWIND_REAL_ENV";

/// The `PATH` of a program on a second host.
pub const HOST_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// What precedes a program on a second host so that it runs there with exactly `env` (and
/// [`HOST_PATH`]) in `cwd`. A `cwd` the host does not have (the directory an implementation
/// happens to run in on its own machine) falls back to the `HOME` of `env`, else `/`.
pub fn remote_env(env: &[(String, String)], cwd: &Path) -> Vec<String> {
    let fallback = env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| "/".to_owned());
    let mut argv = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        r#"cd "$1" 2>/dev/null || cd "$2" || exit 125; shift 2; exec "$@""#.to_owned(),
        "sh".to_owned(),
        cwd.display().to_string(),
        fallback,
        "env".to_owned(),
        "-i".to_owned(),
        format!("PATH={HOST_PATH}"),
    ];
    argv.extend(
        env.iter()
            .filter(|(k, _)| k != "PATH")
            .map(|(k, v)| format!("{k}={v}")),
    );
    argv
}

/// The command that runs a program on the second host, when the proxy's real program is there.
fn exec_prefix() -> Option<Vec<String>> {
    let value = std::env::var(EXEC_ENV).ok()?;
    serde_json::from_str::<Vec<String>>(&value)
        .ok()
        .filter(|p| !p.is_empty())
}

/// `real args` as a command: here, or on the second host with the variables [`EXEC_VARS_ENV`]
/// names and this directory.
fn real_command(real: &Path, args: &[String]) -> Command {
    match exec_prefix() {
        None => {
            let mut command = Command::new(real);
            command.args(args).env_remove(PROXY_TARGET_ENV);
            command
        }
        Some(prefix) => {
            let keys = std::env::var(EXEC_VARS_ENV).unwrap_or_default();
            let env: Vec<(String, String)> = keys
                .split(',')
                .filter(|k| !k.is_empty())
                .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_owned(), v)))
                .collect();
            let cwd = std::env::current_dir().unwrap_or_default();
            let mut command = Command::new(&prefix[0]);
            command
                .args(&prefix[1..])
                .args(remote_env(&env, &cwd))
                .arg(real)
                .args(args);
            command
        }
    }
}

/// Copies `dir/projects` (the claude transcripts) from the second host that `prefix` runs
/// programs on into `dir` here, the same path: the transcripts stay readable where the driver
/// protocol says they are, on the implementation's machine, as the CLI left them after its last
/// run. Files are only added or replaced (the CLI never removes a transcript).
pub fn fetch_transcripts(prefix: &[String], dir: &Path) -> std::io::Result<()> {
    let Some((program, rest)) = prefix.split_first() else {
        return Ok(());
    };
    std::fs::create_dir_all(dir)?;
    let script = "test -d \"$1/projects\" || exit 0; tar -C \"$1\" -cf - projects";
    let mut copy = Command::new(program)
        .args(rest)
        .args(["sh", "-c", script, "sh"])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let archive = copy
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("the copy has no stdout"))?;
    let unpacked = Command::new("tar")
        .arg("-C")
        .arg(dir)
        .args(["-xf", "-"])
        .stdin(archive)
        .stderr(Stdio::null())
        .status()?;
    let copied = copy.wait_with_output()?;
    if !copied.status.success() {
        return Err(std::io::Error::other(format!(
            "copying {}/projects from the runtime host: {}",
            dir.display(),
            String::from_utf8_lossy(&copied.stderr).trim()
        )));
    }
    // No transcripts yet is an empty stream, which tar refuses: nothing to copy.
    let _ = unpacked;
    Ok(())
}

fn spawn(real: &Path, args: &[String], stderr: Stdio) -> std::io::Result<std::process::Child> {
    real_command(real, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
}

fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    match status.code() {
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        // Killed by a signal: 128 + signal, as a shell reports it.
        None => {
            use std::os::unix::process::ExitStatusExt as _;
            ExitCode::from(128u8.saturating_add(status.signal().unwrap_or(9) as u8))
        }
    }
}

/// A request sent to the app-server, waiting for its answer.
struct Pending {
    entry: JournalEntry,
}

fn codex(real: &Path, args: &[String]) -> ExitCode {
    let Some(home) = home_var("CODEX_HOME") else {
        eprintln!("codex proxy: CODEX_HOME is not set");
        return ExitCode::from(2);
    };
    let journal = Journal::new(crate::journal_path(&home));
    let faults = crate::faults_path(&home);
    let mut argv = vec!["codex".to_owned()];
    argv.extend(args.iter().cloned());
    let opened = Backend::open(real, args);
    let mut start = JournalEntry::new("codex", "process/start").request(json!(argv));
    if let Ok((Backend::Live(_), _, _)) = &opened {
        start.detail = Some(LIVE_DETAIL.to_owned());
    }
    journal.record(&start);
    let (mut backend, mut to_child, from_child) = match opened {
        Ok(opened) => opened,
        Err(e) => {
            eprintln!("codex proxy: starting {}: {e}", real.display());
            return ExitCode::from(2);
        }
    };
    let pending: Arc<Mutex<Vec<(Value, Pending)>>> = Arc::default();
    let (own_tx, own_rx) = std::sync::mpsc::channel::<Value>();
    let witness = witness_url();
    let mut own_requests = 0u64;
    let answers = {
        let pending = Arc::clone(&pending);
        let journal = journal.clone();
        std::thread::spawn(move || {
            let stdout = std::io::stdout();
            for line in BufReader::new(from_child).lines() {
                let Ok(line) = line else { break };
                if let Ok(message) = serde_json::from_str::<Value>(&line) {
                    let own = message
                        .get("id")
                        .and_then(Value::as_str)
                        .is_some_and(|id| id.starts_with(OWN_ID));
                    if own && message.get("method").is_none() {
                        let _ = own_tx.send(message);
                        continue;
                    }
                    let is_answer = message.get("method").is_none()
                        && (message.get("result").is_some() || message.get("error").is_some());
                    if let (true, Some(id)) = (is_answer, message.get("id")) {
                        let found = {
                            let mut list = pending.lock().unwrap_or_else(|p| p.into_inner());
                            list.iter()
                                .position(|(k, _)| k == id)
                                .map(|at| list.remove(at).1)
                        };
                        if let Some(Pending { mut entry }) = found {
                            if let Some(error) = message.get("error") {
                                entry.outcome = "error".to_owned();
                                entry.detail = error
                                    .get("message")
                                    .and_then(Value::as_str)
                                    .map(str::to_owned);
                            }
                            journal.record(&entry);
                        }
                    }
                }
                let mut out = stdout.lock();
                if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                    break;
                }
            }
        })
    };
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match serde_json::from_str::<Value>(&line) {
            Ok(message) => {
                let method = message.get("method").and_then(Value::as_str);
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                let target = params
                    .get("threadId")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                match (method, message.get("id")) {
                    (Some(method), Some(id)) => {
                        let mut entry = JournalEntry::new("codex", method).request(params);
                        entry.target = target.clone();
                        match planted(&faults, target.as_deref(), method) {
                            Some(rule) => {
                                entry.outcome = rule.kind.outcome();
                                entry.detail = Some(fault_detail(&rule));
                                journal.record(&entry);
                                match rule.kind {
                                    FaultKind::Hang => {
                                        wait_out(&faults, target.as_deref(), method, &rule)
                                    }
                                    FaultKind::Crash => {
                                        backend.kill();
                                        std::process::exit(134);
                                    }
                                    _ => {
                                        let answer = json!({"id": id, "error": {
                                            "code": -32603,
                                            "message": format!("{method} failed: injected fault")}});
                                        let stdout = std::io::stdout();
                                        let mut out = stdout.lock();
                                        let _ =
                                            writeln!(out, "{answer}").and_then(|()| out.flush());
                                        continue;
                                    }
                                }
                            }
                            None => {
                                if let (Some(url), "turn/start", Some(thread)) =
                                    (&witness, method, target.as_deref())
                                {
                                    let input = input_text(&entry.request);
                                    let turns = thread_turns(
                                        &mut *to_child,
                                        &own_rx,
                                        &mut own_requests,
                                        thread,
                                    );
                                    let request = WitnessRequest {
                                        runtime: "codex".to_owned(),
                                        target: thread.to_owned(),
                                        input,
                                        before: json!({"threadId": thread, "turnIds": turns}),
                                    };
                                    match ask_blocking(url, &request) {
                                        Ok(answer) => entry.witness = Some(answer.witness),
                                        Err(e) => {
                                            entry.outcome = "error".to_owned();
                                            entry.detail = Some(e.to_string());
                                            journal.record(&entry);
                                            let answer = json!({"id": id, "error": {
                                                "code": -32603, "message": e.to_string()}});
                                            let stdout = std::io::stdout();
                                            let mut out = stdout.lock();
                                            let _ = writeln!(out, "{answer}")
                                                .and_then(|()| out.flush());
                                            continue;
                                        }
                                    }
                                }
                                pending
                                    .lock()
                                    .unwrap_or_else(|p| p.into_inner())
                                    .push((id.clone(), Pending { entry }))
                            }
                        }
                    }
                    (Some(method), None) => {
                        let mut entry = JournalEntry::new("codex", method).request(params);
                        entry.target = target;
                        journal.record(&entry);
                    }
                    (None, _) => journal
                        .record(&JournalEntry::new("codex", "(client response)").request(message)),
                }
            }
            Err(e) => {
                let mut entry = JournalEntry::new("codex", "(unparseable)").request(json!(line));
                entry.outcome = "error".to_owned();
                entry.detail = Some(e.to_string());
                journal.record(&entry);
            }
        }
        if writeln!(to_child, "{line}")
            .and_then(|()| to_child.flush())
            .is_err()
        {
            break;
        }
    }
    drop(to_child);
    let status = backend.wait();
    let _ = answers.join();
    // Requests the server never answered (it exited first).
    for (_, Pending { mut entry }) in
        std::mem::take(&mut *pending.lock().unwrap_or_else(|p| p.into_inner()))
    {
        entry.outcome = "error".to_owned();
        entry.detail = Some("the app-server exited without answering".to_owned());
        journal.record(&entry);
    }
    match status {
        Ok(Some(status)) => exit_code(status),
        Ok(None) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("codex proxy: waiting for {}: {e}", real.display());
            ExitCode::from(2)
        }
    }
}

/// The variable naming where the harness puts the Unix socket of a live app-server it keeps
/// running (one process holding its threads across calls, as a daemon's app-server does):
/// while that socket exists, a codex proxy attaches to the app-server instead of starting one.
pub const ATTACH_ENV: &str = "REWIND_REAL_ATTACH";

/// The detail of the `process/start` entry of a proxy that attached to the live app-server.
pub const LIVE_DETAIL: &str = "attached to the live app-server";

/// What a codex proxy talks to: the real program it started, or a live app-server it attached
/// to.
enum Backend {
    Process(std::process::Child),
    Live(std::os::unix::net::UnixStream),
}

type Pipes = (
    Backend,
    Box<dyn Write + Send>,
    Box<dyn std::io::Read + Send>,
);

impl Backend {
    fn open(real: &Path, args: &[String]) -> std::io::Result<Pipes> {
        if let Some(socket) = std::env::var_os(ATTACH_ENV).filter(|s| Path::new(s).exists()) {
            let stream = std::os::unix::net::UnixStream::connect(&socket)?;
            let (to, from) = (stream.try_clone()?, stream.try_clone()?);
            return Ok((Backend::Live(stream), Box::new(to), Box::new(from)));
        }
        let mut child = spawn(real, args, Stdio::inherit())?;
        let (Some(to), Some(from)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the app-server has no stdio"));
        };
        Ok((Backend::Process(child), Box::new(to), Box::new(from)))
    }

    /// Ends the program, or drops the connection to the live app-server (which keeps running).
    fn kill(&mut self) {
        match self {
            Backend::Process(child) => {
                let _ = child.kill();
            }
            Backend::Live(stream) => {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        }
    }

    /// Waits for the program's exit (`None` for a live app-server: it is not this proxy's to
    /// end; the connection is closed for writing, so the app-server's side ends it).
    fn wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        match self {
            Backend::Process(child) => child.wait().map(Some),
            Backend::Live(stream) => {
                let _ = stream.shutdown(std::net::Shutdown::Write);
                Ok(None)
            }
        }
    }
}

/// The text of a stream-json user message (text blocks joined by newlines).
fn prompt_text(message: &Value) -> String {
    match message.pointer("/message/content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The text of a turn's input items (text items joined by newlines).
fn input_text(params: &Value) -> String {
    params
        .get("input")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| i.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Asks the app-server itself, on the proxy's own request id, for `thread`'s turn ids: paged
/// with `thread/turns/list`, else (a legacy thread) `thread/read {includeTurns: true}`. `None`
/// when neither answers.
fn thread_turns(
    to_child: &mut dyn Write,
    answers: &std::sync::mpsc::Receiver<Value>,
    counter: &mut u64,
    thread: &str,
) -> Option<Vec<String>> {
    // `Ok(result)`, `Err(error)`, or `None` when no answer came.
    let mut ask = |method: &str, params: Value| -> Option<Result<Value, Value>> {
        *counter += 1;
        let id = format!("{OWN_ID}{counter}");
        let request = json!({"id": id, "method": method, "params": params});
        writeln!(to_child, "{request}").ok()?;
        to_child.flush().ok()?;
        loop {
            let answer = answers
                .recv_timeout(std::time::Duration::from_secs(30))
                .ok()?;
            if answer.get("id").and_then(Value::as_str) == Some(id.as_str()) {
                return Some(match answer.get("error") {
                    Some(error) => Err(error.clone()),
                    None => Ok(answer.get("result").cloned().unwrap_or(Value::Null)),
                });
            }
        }
    };
    let ids = |turns: Option<&Value>| -> Option<Vec<String>> {
        Some(
            turns?
                .as_array()?
                .iter()
                .filter_map(|t| t.get("id").and_then(Value::as_str).map(str::to_owned))
                .collect(),
        )
    };
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut params = json!({"threadId": thread, "sortDirection": "asc",
                                "itemsView": "notLoaded", "limit": 100});
        if let Some(c) = &cursor {
            params["cursor"] = json!(c);
        }
        let page = match ask("thread/turns/list", params)? {
            Ok(page) => page,
            // A thread started in this process that has run no turn yet has none.
            Err(e)
                if e.get("message")
                    .and_then(Value::as_str)
                    .is_some_and(|m| m.contains("not materialized")) =>
            {
                return Some(Vec::new())
            }
            Err(_) => break,
        };
        all.extend(ids(page.get("data"))?);
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(next) if cursor.as_deref() != Some(next) => cursor = Some(next.to_owned()),
            _ => return Some(all),
        }
    }
    let read = ask(
        "thread/read",
        json!({"threadId": thread, "includeTurns": true}),
    )?
    .ok()?;
    ids(read.pointer("/thread/turns"))
}

fn claude(real: &Path, args: &[String]) -> ExitCode {
    let Some(home) = home_var("CLAUDE_CONFIG_DIR") else {
        eprintln!("claude proxy: CLAUDE_CONFIG_DIR is not set");
        return ExitCode::from(2);
    };
    let journal = Journal::new(crate::journal_path(&home));
    let (call, fault_call, target) = crate::claude::call_of(args);
    let mut start = JournalEntry::new("claude", "process/start").request(json!(args));
    start.target = target.clone();
    journal.record(&start);
    let faults = crate::faults_path(&home);
    if let Some(rule) = planted(&faults, target.as_deref(), fault_call) {
        let cwd = std::env::current_dir().unwrap_or_default();
        let mut entry = JournalEntry::new("claude", call)
            .request(json!({"argv": args, "cwd": cwd.to_string_lossy(), "stdin": []}));
        entry.target = target.clone();
        entry.outcome = rule.kind.outcome();
        entry.detail = Some(fault_detail(&rule));
        journal.record(&entry);
        match rule.kind {
            FaultKind::Hang => wait_out(&faults, target.as_deref(), fault_call, &rule),
            FaultKind::Crash => return ExitCode::from(134),
            _ => {
                let result = json!({"type": "result", "subtype": "error_during_execution",
                                    "is_error": true, "result": "injected fault",
                                    "session_id": target});
                println!("{result}");
                eprintln!("Error: injected fault");
                return ExitCode::from(1);
            }
        }
    }
    let mut child = match spawn(real, args, Stdio::piped()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("claude proxy: starting {}: {e}", real.display());
            return ExitCode::from(2);
        }
    };
    let (Some(mut to_child), Some(from_child), Some(errors)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return ExitCode::from(2);
    };
    let relay_out = std::thread::spawn(move || {
        let stdout = std::io::stdout();
        for line in BufReader::new(from_child).lines() {
            let Ok(line) = line else { break };
            let mut out = stdout.lock();
            if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                break;
            }
        }
    });
    let relay_err = std::thread::spawn(move || {
        let mut kept = String::new();
        for line in BufReader::new(errors).lines() {
            let Ok(line) = line else { break };
            eprintln!("{line}");
            kept.push_str(&line);
            kept.push('\n');
        }
        kept
    });
    let stdin_log: Arc<Mutex<Vec<Value>>> = Arc::default();
    let witnesses: Arc<Mutex<Vec<u64>>> = Arc::default();
    let witness_failed: Arc<Mutex<Option<String>>> = Arc::default();
    {
        // Stdin is relayed on its own thread: the CLI may exit before its input ends.
        let log = Arc::clone(&stdin_log);
        let numbers = Arc::clone(&witnesses);
        let failed = Arc::clone(&witness_failed);
        let url = witness_url();
        let cwd = std::env::current_dir().unwrap_or_default();
        let args = args.to_vec();
        let home = home.clone();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if line.trim().is_empty() {
                    continue;
                }
                let message: Value =
                    serde_json::from_str(&line).unwrap_or(Value::String(line.clone()));
                log.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(message.clone());
                if let (Some(url), Some("user")) =
                    (&url, message.get("type").and_then(Value::as_str))
                {
                    // Announced before the CLI sees the prompt, with the session as it is now
                    // (on a second host, as its transcripts are copied here).
                    if let Some(prefix) = exec_prefix() {
                        let _ = fetch_transcripts(&prefix, &home);
                    }
                    let (target, before) = crate::claude::witness_before(&home, &cwd, &args)
                        .unwrap_or_else(|| (String::new(), Value::Null));
                    let request = WitnessRequest {
                        runtime: "claude".to_owned(),
                        target,
                        input: prompt_text(&message),
                        before,
                    };
                    match ask_blocking(url, &request) {
                        Ok(answer) => numbers
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(answer.witness),
                        Err(e) => {
                            *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                            // The CLI never gets the prompt: stdin ends here.
                            break;
                        }
                    }
                }
                if writeln!(to_child, "{line}")
                    .and_then(|()| to_child.flush())
                    .is_err()
                {
                    break;
                }
            }
        });
    }
    let status = child.wait();
    // On a second host, what the run wrote is copied here before the proxy exits.
    if let Some(prefix) = exec_prefix() {
        if let Err(e) = fetch_transcripts(&prefix, &home) {
            eprintln!("claude proxy: {e}");
        }
    }
    let _ = relay_out.join();
    let stderr = relay_err.join().unwrap_or_default();
    let cwd = std::env::current_dir().unwrap_or_default();
    let stdin = stdin_log.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut entry = JournalEntry::new("claude", call).request(json!({
        "argv": args,
        "cwd": cwd.to_string_lossy(),
        "stdin": stdin,
    }));
    entry.target = target;
    entry.witness = witnesses
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .first()
        .copied();
    if let Some(e) = witness_failed
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    {
        entry.outcome = "error".to_owned();
        entry.detail = Some(e);
        journal.record(&entry);
        return ExitCode::from(1);
    }
    let code = match status {
        Ok(status) => {
            if !status.success() {
                entry.outcome = "error".to_owned();
                entry.detail = Some(
                    stderr
                        .lines()
                        .rfind(|l| !l.trim().is_empty())
                        .map(str::to_owned)
                        .unwrap_or_else(|| format!("exited with {status}")),
                );
            }
            exit_code(status)
        }
        Err(e) => {
            entry.outcome = "error".to_owned();
            entry.detail = Some(e.to_string());
            ExitCode::from(2)
        }
    };
    journal.record(&entry);
    code
}
