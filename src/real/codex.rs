//! Codex under `--runtimes real`: the app-server's JSON-RPC client the harness itself uses
//! ([`AppServer`]), the configuration that points a Codex home at the fake Responses API, and
//! the seeding and read-back of threads ([`seed_thread`], [`turn_ids`]).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, Lines};
use tokio::process::Child;

use super::{RealError, SeedTurn, SeededSession};

/// How long one app-server call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The `config.toml` of a Codex home whose model is the fake Responses API at `base_url`
/// (`.../v1`): no approvals, no sandbox, no retries, no plugins.
pub fn config(base_url: &str) -> String {
    format!(
        r#"model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.fake]
name = "fake"
base_url = "{base_url}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false
"#
    )
}

/// A running `codex app-server` (real or mock) and a line-based JSON-RPC client for it.
pub struct AppServer {
    /// The process, when this client started it (none when attached to a live app-server).
    child: Option<Child>,
    stdin: Option<Box<dyn AsyncWrite + Unpin + Send>>,
    lines: Lines<BufReader<Box<dyn AsyncRead + Unpin + Send>>>,
    next_id: u64,
    /// Notifications received so far and not yet taken.
    notes: Vec<Value>,
}

fn transport(detail: impl Into<String>) -> RealError {
    RealError::runtime("codex", detail)
}

impl AppServer {
    /// Starts `program app-server` with exactly `env` (and `PATH`) in `cwd`, on this machine.
    pub async fn spawn(
        program: &Path,
        env: &[(String, String)],
        cwd: &Path,
    ) -> Result<AppServer, RealError> {
        AppServer::spawn_on(&super::host::RuntimeHost::Local, program, env, cwd).await
    }

    /// [`AppServer::spawn`] on `host`.
    pub async fn spawn_on(
        host: &super::host::RuntimeHost,
        program: &Path,
        env: &[(String, String)],
        cwd: &Path,
    ) -> Result<AppServer, RealError> {
        let mut child = host
            .command(program, &["app-server"], env, cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(super::io(format!("starting {}", program.display())))?;
        let stdin = child
            .stdin
            .take()
            .map(|s| Box::new(s) as Box<dyn AsyncWrite + Unpin + Send>);
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| transport("the app-server has no stdout"))?;
        Ok(AppServer {
            child: Some(child),
            stdin,
            lines: BufReader::new(Box::new(stdout) as Box<dyn AsyncRead + Unpin + Send>).lines(),
            next_id: 0,
            notes: Vec::new(),
        })
    }

    /// A client of the live app-server whose relay listens on `socket`
    /// ([`super::live_codex::LiveCodex`]); shutting it down leaves the app-server running.
    pub async fn attach(socket: &Path) -> Result<AppServer, RealError> {
        let stream = tokio::net::UnixStream::connect(socket)
            .await
            .map_err(super::io(format!("connecting to {}", socket.display())))?;
        let (read, write) = stream.into_split();
        Ok(AppServer {
            child: None,
            stdin: Some(Box::new(write)),
            lines: BufReader::new(Box::new(read) as Box<dyn AsyncRead + Unpin + Send>).lines(),
            next_id: 0,
            notes: Vec::new(),
        })
    }

    async fn write(&mut self, message: &Value) -> Result<(), RealError> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| transport("stdin is closed"))?;
        let mut line = message.to_string();
        line.push('\n');
        let written = tokio::time::timeout(CALL_TIMEOUT, async {
            stdin.write_all(line.as_bytes()).await?;
            stdin.flush().await
        })
        .await
        .map_err(|_| transport("the app-server read nothing of its stdin in time"))?;
        written.map_err(super::io("writing to the app-server"))
    }

    async fn next_message(&mut self) -> Result<Value, RealError> {
        loop {
            let line = tokio::time::timeout(CALL_TIMEOUT, self.lines.next_line())
                .await
                .map_err(|_| transport("the app-server did not answer in time"))?
                .map_err(super::io("reading the app-server"))?
                .ok_or_else(|| transport("the app-server closed stdout"))?;
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                return Ok(v);
            }
        }
    }

    /// Answers a server-to-client request (an approval) with a refusal.
    async fn refuse(&mut self, request_id: &Value) -> Result<(), RealError> {
        let refusal =
            json!({"id": request_id, "error": {"code": -32601, "message": "not supported"}});
        self.write(&refusal).await
    }

    /// Sends a request; `Ok(result)` or `Err(error)`, the JSON-RPC error object, or for a
    /// failed transport (the server died, did not answer in time) `{"transport": message}`.
    /// Notifications are kept.
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.try_request(method, params)
            .await
            .map_err(|e| json!({"transport": e.to_string()}))?
    }

    async fn try_request(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<Result<Value, Value>, RealError> {
        self.next_id += 1;
        let id = self.next_id;
        self.write(&json!({"id": id, "method": method, "params": params}))
            .await?;
        loop {
            let message = self.next_message().await?;
            match (message.get("id"), message.get("method")) {
                (Some(answer), None) if answer == &json!(id) => {
                    return Ok(match message.get("error") {
                        Some(error) => Err(error.clone()),
                        None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
                    });
                }
                (Some(request_id), Some(_)) => {
                    let request_id = request_id.clone();
                    self.refuse(&request_id).await?;
                }
                (None, Some(_)) => self.notes.push(message),
                _ => {}
            }
        }
    }

    /// Sends a notification.
    pub async fn notify(&mut self, method: &str) -> Result<(), RealError> {
        self.write(&json!({"method": method})).await
    }

    /// Reads notifications until one named `method` arrives (kept with the others).
    pub async fn wait_for(&mut self, method: &str) -> Result<Value, RealError> {
        self.wait_until(|n| n["method"] == method).await
    }

    /// Reads notifications until one matching `wanted` arrives (kept with the others).
    pub async fn wait_until(
        &mut self,
        wanted: impl Fn(&Value) -> bool,
    ) -> Result<Value, RealError> {
        if let Some(n) = self.notes.iter().find(|n| wanted(n)) {
            return Ok(n.clone());
        }
        loop {
            let message = self.next_message().await?;
            if let (Some(request_id), Some(_)) = (message.get("id"), message.get("method")) {
                let request_id = request_id.clone();
                self.refuse(&request_id).await?;
                continue;
            }
            if message.get("method").is_some() {
                self.notes.push(message.clone());
                if wanted(&message) {
                    return Ok(message);
                }
            }
        }
    }

    /// Reads notifications (kept) for `period`.
    pub async fn drain(&mut self, period: Duration) {
        let until = tokio::time::Instant::now() + period;
        while let Ok(Ok(Some(line))) = tokio::time::timeout_at(until, self.lines.next_line()).await
        {
            if let Ok(message) = serde_json::from_str::<Value>(&line) {
                if message.get("id").is_none() && message.get("method").is_some() {
                    self.notes.push(message);
                }
            }
        }
    }

    /// Takes the notifications received so far.
    pub fn take_notes(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.notes)
    }

    /// `initialize` (experimental API on) + `initialized`.
    pub async fn handshake(&mut self) -> Result<Value, Value> {
        let answer = self
            .request(
                "initialize",
                json!({"clientInfo": {"name": "rewind-conformance", "version": "0.1.0"},
                       "capabilities": {"experimentalApi": true}}),
            )
            .await;
        if let Err(e) = self.notify("initialized").await {
            return Err(json!({"transport": e.to_string()}));
        }
        answer
    }

    /// Closes stdin and waits for the exit (killed after 5 s).
    pub async fn shutdown(mut self) {
        self.stdin.take();
        let Some(mut child) = self.child.take() else {
            return;
        };
        if tokio::time::timeout(Duration::from_secs(5), child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
    }

    /// Runs a turn to its end: the `turn/start` answer, then `turn/completed` (`Null` when the
    /// turn did not start).
    pub async fn turn(&mut self, thread: &str, text: &str) -> (Result<Value, Value>, Value) {
        let started = self
            .request(
                "turn/start",
                json!({"threadId": thread,
                       "input": [{"type": "text", "text": text, "text_elements": []}]}),
            )
            .await;
        let Some(id) = started
            .as_ref()
            .ok()
            .and_then(|r| r.pointer("/turn/id"))
            .cloned()
        else {
            return (started, Value::Null);
        };
        let done = self
            .wait_until(|n| {
                n["method"] == "turn/completed" && n.pointer("/params/turn/id") == Some(&id)
            })
            .await
            .unwrap_or(Value::Null);
        (started, done)
    }
}

/// Where a scenario's real Codex runs: the program and the environment of every app-server.
#[derive(Debug, Clone)]
pub struct CodexHome {
    /// The real program.
    pub program: PathBuf,
    /// HOME, XDG, `CODEX_HOME`.
    pub env: Vec<(String, String)>,
    /// The working directory.
    pub cwd: PathBuf,
    /// Where it runs.
    pub host: super::host::RuntimeHost,
}

fn failed(what: &str, answer: &Result<Value, Value>) -> RealError {
    RealError::runtime("codex", format!("{what}: {answer:?}"))
}

/// Starts a thread and runs `turns` on it through one real app-server, the fake model answering
/// each with its scripted output (see [`super::fake_model::FakeModel::script`]). The thread has
/// the history mode the users of `version` hold, as the mock seeds it (legacy while the release
/// still has `thread/rollback`, paginated after). Returns the thread id and the turn ids, one per
/// turn.
pub async fn seed_thread(
    home: &CodexHome,
    version: &str,
    turns: &[SeedTurn],
) -> Result<SeededSession, RealError> {
    let params = match rewind_mock_runtimes::codex::seed_history_mode(version) {
        rewind_mock_runtimes::codex::HistoryMode::Legacy => json!({"historyMode": "legacy"}),
        rewind_mock_runtimes::codex::HistoryMode::Paginated => json!({}),
    };
    let mut server = AppServer::spawn_on(&home.host, &home.program, &home.env, &home.cwd).await?;
    let init = server.handshake().await;
    if init.is_err() {
        server.shutdown().await;
        return Err(failed("initialize", &init));
    }
    let started = server.request("thread/start", params).await;
    let Some(thread) = started
        .as_ref()
        .ok()
        .and_then(|r| r.pointer("/thread/id"))
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        server.shutdown().await;
        return Err(failed("thread/start", &started));
    };
    let mut ids = Vec::new();
    for turn in turns {
        let (answer, done) = server.turn(&thread, &turn.input).await;
        let id = done
            .pointer("/params/turn/id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let status = done.pointer("/params/turn/status").and_then(Value::as_str);
        match (id, status) {
            (Some(id), Some("completed")) => ids.push(id),
            _ => {
                server.shutdown().await;
                return Err(RealError::runtime(
                    "codex",
                    format!(
                        "seeding thread {thread}: the turn {:?} did not complete: {answer:?} \
                         {done}",
                        turn.input
                    ),
                ));
            }
        }
    }
    server.shutdown().await;
    Ok(SeededSession {
        session_id: thread,
        ids,
    })
}

/// The turn ids of `thread` now, read back through a fresh real app-server that reads the
/// thread without loading it where it can (another process may hold it): `thread/turns/list`
/// (paged), else `thread/read {includeTurns: true}` (a legacy thread), else `thread/resume`;
/// then the process exits. With `live`, the socket of a live app-server's relay, it is asked
/// instead (it holds the thread). `None` when the runtime does not know the thread.
pub async fn turn_ids(
    home: &CodexHome,
    thread: &str,
    live: Option<&Path>,
) -> Result<Option<Vec<String>>, RealError> {
    let mut server = match live {
        Some(socket) => AppServer::attach(socket).await?,
        None => AppServer::spawn_on(&home.host, &home.program, &home.env, &home.cwd).await?,
    };
    let init = server.handshake().await;
    if init.is_err() {
        server.shutdown().await;
        return Err(failed("initialize", &init));
    }
    let ids = |turns: Option<&Value>| -> Vec<String> {
        turns
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| t.get("id").and_then(Value::as_str).map(str::to_owned))
            .collect()
    };
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    let mut paged = true;
    loop {
        let mut params = json!({"threadId": thread, "sortDirection": "asc",
                                "itemsView": "notLoaded", "limit": 100});
        if let Some(c) = &cursor {
            params["cursor"] = json!(c);
        }
        match server.request("thread/turns/list", params).await {
            Ok(page) => {
                listed.extend(ids(page.get("data")));
                match page.get("nextCursor").and_then(Value::as_str) {
                    Some(next) if cursor.as_deref() != Some(next) => cursor = Some(next.to_owned()),
                    _ => break,
                }
            }
            Err(_) => {
                paged = false;
                break;
            }
        }
    }
    if paged {
        server.shutdown().await;
        return Ok(Some(listed));
    }
    let read = server
        .request(
            "thread/read",
            json!({"threadId": thread, "includeTurns": true}),
        )
        .await;
    if let Ok(r) = &read {
        server.shutdown().await;
        return Ok(Some(ids(r.pointer("/thread/turns"))));
    }
    let resumed = server
        .request("thread/resume", json!({"threadId": thread}))
        .await;
    server.shutdown().await;
    match resumed {
        Ok(r) => Ok(Some(ids(r.pointer("/thread/turns")))),
        Err(e) if e.get("transport").is_some() => Err(failed("thread/resume", &Err(e))),
        Err(_) => Ok(None),
    }
}
