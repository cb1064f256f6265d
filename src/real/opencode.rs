//! OpenCode under `--runtimes real`: a real server against the fake Chat Completions API
//! ([`Server`]), started for a scenario when something first calls it ([`LazyServer`]), the
//! seeding and read-back of its sessions, and the journaling HTTP proxy the implementation
//! reaches it through ([`JournalingProxy`]), which journals every call as the mock server
//! journals it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use futures::TryStreamExt as _;
use rewind_mock_runtimes::faults::{FaultKind, FaultPlan};
use rewind_mock_runtimes::journal::{Journal, JournalEntry};
use rewind_mock_runtimes::witness::WitnessRequest;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::Child;

use super::{RealError, SeedTurn, SeededSession};

/// How long the server may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long one call may take (a prompt runs a whole turn).
const CALL_TIMEOUT: Duration = Duration::from_secs(90);

/// The `opencode.json` of a working directory whose model is the fake Chat Completions API at
/// `model_url` (`.../v1`); `snapshot` as asked (AgentTeam's OpenCode is context-only: false).
pub fn config(model_url: &str, snapshot: bool) -> String {
    json!({
        "$schema": "https://opencode.ai/config.json",
        "snapshot": snapshot,
        "autoupdate": false,
        "share": "disabled",
        "model": "fake/fake-model",
        "small_model": "fake/fake-model",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": model_url, "apiKey": "fake"},
                "models": {"fake-model": {"name": "Fake model"}}
            }
        }
    })
    .to_string()
}

/// The variables that keep the server offline.
pub const QUIET_ENV: [(&str, &str); 5] = [
    ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
    ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
    ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"),
    ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
    ("OPENCODE_DISABLE_SHARE", "1"),
];

/// A running real OpenCode server; killed when dropped.
#[derive(Debug)]
pub struct Server {
    child: Child,
    stdin: Option<tokio::process::ChildStdin>,
    /// Whether it runs on a second host.
    remote: bool,
    endpoint: Endpoint,
}

/// Where a running server answers, and the client that calls it (cheap to clone).
#[derive(Debug, Clone)]
pub struct Endpoint {
    base_url: String,
    http: reqwest::Client,
}

fn failure(detail: impl Into<String>) -> RealError {
    RealError::runtime("opencode", detail)
}

impl Server {
    /// Starts `program serve` on a free loopback port with exactly `env` (and `PATH`) in `cwd`,
    /// and waits until it listens.
    pub async fn start(
        program: &Path,
        env: &[(String, String)],
        cwd: &Path,
    ) -> Result<Server, RealError> {
        Server::start_on(&super::host::RuntimeHost::Local, program, env, cwd).await
    }

    /// [`Server::start`] on `host`: a second host's server listens on the host's address.
    pub async fn start_on(
        host: &super::host::RuntimeHost,
        program: &Path,
        env: &[(String, String)],
        cwd: &Path,
    ) -> Result<Server, RealError> {
        // A server that ends before it listens (seen once under load, several starting at once)
        // is started again, twice at most; the last failure is reported with its stderr.
        let mut last = None;
        for _ in 0..3 {
            match Server::start_once(host, program, env, cwd).await {
                Ok(server) => return Ok(server),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| failure("the server did not start")))
    }

    async fn start_once(
        host: &super::host::RuntimeHost,
        program: &Path,
        env: &[(String, String)],
        cwd: &Path,
    ) -> Result<Server, RealError> {
        // `serve --port 0` listens on 4096: a free port is chosen here.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(super::io("finding a free port"))?
            .port()
            .to_string();
        let (listen, reach) = host.server_addresses();
        let mut child = host
            .server_command(
                program,
                &["serve", "--port", &port, "--hostname", &listen],
                env,
                cwd,
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(super::io(format!("starting {}", program.display())))?;
        // Kept open for as long as the server runs: on a second host, closing it stops the server.
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| failure("the server has no stdout"))?;
        // Its stderr is kept (the end of it) to say why a start failed, and drained after.
        let errors: std::sync::Arc<std::sync::Mutex<String>> = std::sync::Arc::default();
        if let Some(stderr) = child.stderr.take() {
            let kept = std::sync::Arc::clone(&errors);
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let mut text = kept.lock().unwrap_or_else(|p| p.into_inner());
                    if text.len() < 4000 {
                        text.push_str(&line);
                        text.push('\n');
                    }
                }
            });
        }
        let said = || {
            let text = errors.lock().unwrap_or_else(|p| p.into_inner()).clone();
            match text.trim() {
                "" => String::new(),
                t => format!("; it said: {t}"),
            }
        };
        let mut lines = BufReader::new(stdout).lines();
        let listening = tokio::time::timeout(START_TIMEOUT, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(at) = line.find("listening on ") {
                    return Some(line[at + "listening on ".len()..].trim().to_owned());
                }
            }
            None
        })
        .await;
        let base_url = match listening {
            Ok(Some(url)) => url.trim_end_matches('/').replacen(
                &format!("//{listen}:"),
                &format!("//{reach}:"),
                1,
            ),
            Ok(None) => {
                // Give stderr a moment to be read.
                tokio::time::sleep(Duration::from_millis(200)).await;
                return Err(failure(format!(
                    "the server closed stdout before listening{}",
                    said()
                )));
            }
            Err(_) => {
                return Err(failure(format!(
                    "the server printed no listening line in time{}",
                    said()
                )))
            }
        };
        // Keep draining stdout so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .build()
            .map_err(|e| failure(format!("an HTTP client: {e}")))?;
        Ok(Server {
            child,
            stdin,
            remote: host.is_remote(),
            endpoint: Endpoint { base_url, http },
        })
    }

    /// Where the server answers, and how to call it.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The server's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Stops the server, and waits until it ended.
    pub async fn stop(mut self) {
        // On a second host, closing its stdin stops it there; here it ends with the kill.
        if self.remote {
            drop(self.stdin.take());
            if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
                .await
                .is_ok()
            {
                return;
            }
        }
        let _ = self.child.kill().await;
    }
}

impl Endpoint {
    /// The server's base URL.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// One call straight to the server (not journaled); the parsed body of a 2xx answer.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, RealError> {
        let url = format!("{}{}", self.base_url, path);
        let request = match method {
            "GET" => self.http.get(url),
            _ => self.http.post(url).json(&body.unwrap_or_else(|| json!({}))),
        };
        let response = request
            .send()
            .await
            .map_err(|e| failure(format!("{method} {path}: {e}")))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(failure(format!("{method} {path}: {status}: {text}")));
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }
}

/// Called with the process id of every server a [`LazyServer`] starts.
#[derive(Clone)]
pub struct PidSink(Arc<dyn Fn(u32) + Send + Sync>);

impl PidSink {
    /// A sink calling `f`.
    pub fn new(f: impl Fn(u32) + Send + Sync + 'static) -> PidSink {
        PidSink(Arc::new(f))
    }

    fn tell(&self, pid: u32) {
        (self.0)(pid)
    }
}

impl std::fmt::Debug for PidSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PidSink")
    }
}

/// A scenario's real OpenCode server, started when something first calls it: the
/// implementation through the [`JournalingProxy`], or the harness seeding or reading a session.
///
/// A scenario whose fixture has OpenCode agents gets a server, but many never call it (every
/// scenario whose rewind is refused before a runtime is reached): starting one costs about two
/// CPU-seconds, most of such a scenario's cost. Whoever calls first waits for the start; a start
/// that fails (after [`Server::start_on`]'s own retries) fails every later call with the same
/// reason.
pub struct LazyServer {
    host: super::host::RuntimeHost,
    home: OpenCodeHome,
    state: tokio::sync::Mutex<Lazy>,
    on_start: std::sync::Mutex<Option<PidSink>>,
}

enum Lazy {
    NotStarted,
    Running(Box<Server>),
    Failed(String),
    Stopped,
}

impl std::fmt::Debug for LazyServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyServer")
            .field("host", &self.host)
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

impl LazyServer {
    /// A server of `home` on `host`, not started yet.
    pub fn new(host: super::host::RuntimeHost, home: OpenCodeHome) -> Arc<LazyServer> {
        Arc::new(LazyServer {
            host,
            home,
            state: tokio::sync::Mutex::new(Lazy::NotStarted),
            on_start: std::sync::Mutex::new(None),
        })
    }

    /// Calls `sink` with the process id of the server this starts (and of the one running now,
    /// if any).
    pub async fn on_start(&self, sink: PidSink) {
        let state = self.state.lock().await;
        if let Lazy::Running(server) = &*state {
            if let Some(pid) = server.pid() {
                sink.tell(pid);
            }
        }
        *self.on_start.lock().unwrap_or_else(|p| p.into_inner()) = Some(sink);
    }

    /// Where the server answers, starting it first when it has not started yet.
    pub async fn endpoint(&self) -> Result<Endpoint, RealError> {
        let mut state = self.state.lock().await;
        match &*state {
            Lazy::Running(server) => return Ok(server.endpoint.clone()),
            Lazy::Failed(reason) => return Err(failure(reason.clone())),
            Lazy::Stopped => return Err(failure("the scenario's server was stopped")),
            Lazy::NotStarted => {}
        }
        let home = &self.home;
        match Server::start_on(&self.host, &home.program, &home.env, &home.cwd).await {
            Ok(server) => {
                let sink = self
                    .on_start
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                if let (Some(sink), Some(pid)) = (sink, server.pid()) {
                    sink.tell(pid);
                }
                let endpoint = server.endpoint.clone();
                *state = Lazy::Running(Box::new(server));
                Ok(endpoint)
            }
            Err(e) => {
                *state = Lazy::Failed(format!("starting the server: {e}"));
                Err(e)
            }
        }
    }

    /// The running server's process id; `None` before it started or after it stopped.
    pub async fn pid(&self) -> Option<u32> {
        match &*self.state.lock().await {
            Lazy::Running(server) => server.pid(),
            _ => None,
        }
    }

    /// Kills the server now if it runs and no call is starting it (for `Drop`, which cannot
    /// wait); nothing starts it again.
    pub fn kill_now(&self) {
        if let Ok(mut state) = self.state.try_lock() {
            // Dropping a running server kills it.
            drop(std::mem::replace(&mut *state, Lazy::Stopped));
        }
    }

    /// Stops the server if it runs, and waits until it ended; nothing starts it again.
    pub async fn stop(&self) {
        let state = std::mem::replace(&mut *self.state.lock().await, Lazy::Stopped);
        if let Lazy::Running(server) = state {
            (*server).stop().await;
        }
    }
}

/// Creates a session and prompts it with `turns`, the fake model answering each with its
/// scripted output. Returns the session id and its message ids, a user and an assistant one per
/// turn, in order.
pub async fn seed_session(
    server: &Endpoint,
    turns: &[SeedTurn],
) -> Result<SeededSession, RealError> {
    let created = server.call("POST", "/session", Some(json!({}))).await?;
    let session = created
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| failure(format!("POST /session answered {created}")))?
        .to_owned();
    for turn in turns {
        server
            .call(
                "POST",
                &format!("/session/{session}/message"),
                Some(json!({"parts": [{"type": "text", "text": turn.input}]})),
            )
            .await?;
    }
    let (ids, roles) = messages(server, &session).await?;
    let expected: Vec<&str> = turns.iter().flat_map(|_| ["user", "assistant"]).collect();
    if roles != expected {
        return Err(failure(format!(
            "seeding session {session}: it holds {roles:?}, not one user and one assistant \
             message per turn"
        )));
    }
    Ok(SeededSession {
        session_id: session,
        ids,
    })
}

/// The message ids and roles of `session`, in order.
async fn messages(
    server: &Endpoint,
    session: &str,
) -> Result<(Vec<String>, Vec<String>), RealError> {
    let listed = server
        .call("GET", &format!("/session/{session}/message"), None)
        .await?;
    let mut ids = Vec::new();
    let mut roles = Vec::new();
    for m in listed.as_array().into_iter().flatten() {
        if let (Some(id), Some(role)) = (
            m.pointer("/info/id").and_then(Value::as_str),
            m.pointer("/info/role").and_then(Value::as_str),
        ) {
            ids.push(id.to_owned());
            roles.push(role.to_owned());
        }
    }
    Ok((ids, roles))
}

/// What `session` holds now: its message ids in order and the message a pending revert points
/// at; `None` when the server does not know the session.
pub async fn view(
    server: &Endpoint,
    session: &str,
) -> Result<Option<(Vec<String>, Option<String>)>, RealError> {
    let Ok(info) = server
        .call("GET", &format!("/session/{session}"), None)
        .await
    else {
        return Ok(None);
    };
    let reverted = info
        .pointer("/revert/messageID")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let (ids, _) = messages(server, session).await?;
    Ok(Some((ids, reverted)))
}

/// The route template the mock journals a call under (`POST /session/{id}/revert`), and the
/// session it addressed.
fn template(method: &str, path: &str) -> (String, Option<String>) {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        ["session", id] => (format!("{method} /session/{{id}}"), Some((*id).to_owned())),
        ["session", id, rest @ ..] => (
            format!("{method} /session/{{id}}/{}", rest.join("/")),
            Some((*id).to_owned()),
        ),
        _ => (format!("{method} {path}"), None),
    }
}

#[derive(Clone)]
struct Proxy {
    /// The server every call is forwarded to, started by the first call that needs it.
    upstream: Arc<LazyServer>,
    journal: Journal,
    /// The fault plan the harness plants for this runtime.
    faults: PathBuf,
    /// The delivery witness every prompt is announced to first, when the scenario has one.
    witness: Option<String>,
    http: reqwest::Client,
}

/// The route name fault rules match (`revert`, `message`, ...), as the mock server names them.
fn route<'a>(method: &str, path: &'a str) -> &'a str {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method, segments.as_slice()) {
        ("GET", ["session", _, "message"]) => "messages",
        (_, ["session", _, last]) => last,
        ("GET", ["session", _]) => "get",
        ("POST", ["session"]) => "create",
        ("GET", ["session"]) => "list",
        ("GET", ["config"]) => "config",
        ("GET", ["global", "health"]) => "health",
        _ => "other",
    }
}

/// An HTTP proxy on loopback in front of a real server: every call is forwarded unchanged (a
/// streaming answer streams) and journaled in the mock's form.
#[derive(Debug)]
pub struct JournalingProxy {
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for JournalingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl JournalingProxy {
    /// Listens on a free loopback port, forwarding to `upstream` (started by the first call
    /// forwarded) and journaling into the journal of the OpenCode home `home`.
    /// With `witness`, every prompt (`POST /session/{id}/message`) is announced to the delivery
    /// witness before the server sees it, as the mock server announces it.
    pub async fn start(
        upstream: Arc<LazyServer>,
        home: &Path,
        witness: Option<String>,
    ) -> Result<JournalingProxy, RealError> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(super::io("binding the opencode proxy"))?;
        let addr = listener
            .local_addr()
            .map_err(super::io("binding the opencode proxy"))?;
        let state = Proxy {
            upstream,
            journal: Journal::new(rewind_mock_runtimes::journal_path(home)),
            faults: rewind_mock_runtimes::faults_path(home),
            witness,
            http: reqwest::Client::builder()
                .build()
                .map_err(|e| failure(format!("an HTTP client: {e}")))?,
        };
        let app = axum::Router::new().fallback(forward).with_state(state);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(JournalingProxy {
            url: format!("http://{addr}"),
            task,
        })
    }

    /// The proxy's base URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// The messages of `session` a prompt arriving now continues from: every message, less those a
/// pending revert is about to clean up (the reverted one and everything after it).
async fn live_messages(proxy: &Proxy, session: &str) -> Vec<String> {
    let Ok(server) = proxy.upstream.endpoint().await else {
        return Vec::new();
    };
    let get = |path: String| {
        let http = proxy.http.clone();
        let url = format!("{}{path}", server.base_url());
        async move {
            let answer = http.get(url).send().await.ok()?;
            answer.json::<Value>().await.ok()
        }
    };
    let reverted = get(format!("/session/{session}")).await.and_then(|info| {
        info.pointer("/revert/messageID")
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let listed = get(format!("/session/{session}/message"))
        .await
        .unwrap_or(Value::Null);
    listed
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m.pointer("/info/id").and_then(Value::as_str))
        .take_while(|id| Some(*id) != reverted.as_deref())
        .map(str::to_owned)
        .collect()
}

async fn forward(State(proxy): State<Proxy>, request: Request) -> Response {
    let method = request.method().clone();
    let uri = request.uri().clone();
    let headers = request.headers().clone();
    let body = axum::body::to_bytes(request.into_body(), 64 * 1024 * 1024)
        .await
        .unwrap_or_default();
    let (call, target) = template(method.as_str(), uri.path());
    let mut entry = JournalEntry::new("opencode", call).request(
        serde_json::from_slice(&body).unwrap_or(if body.is_empty() {
            Value::Null
        } else {
            Value::String(String::from_utf8_lossy(&body).into_owned())
        }),
    );
    entry.target = target.clone();
    let call = route(method.as_str(), uri.path()).to_owned();
    let rule = FaultPlan::load(&proxy.faults).ok().and_then(|plan| {
        plan.find(target.as_deref().unwrap_or("*"), &call)
            .or_else(|| plan.find("*", &call))
            .cloned()
    });
    let mut faulted = false;
    if let Some(rule) = rule {
        faulted = true;
        entry.outcome = rule.kind.outcome();
        match rule.kind {
            FaultKind::Hang => {
                entry.detail = Some(match rule.hang_ms {
                    Some(ms) => format!("injected hang: answering after {ms} ms"),
                    None => "injected hang: held until the fault is lifted".to_owned(),
                });
                proxy.journal.record(&entry);
                match rule.hang_ms {
                    Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                    None => {
                        let plan = proxy.faults.clone();
                        let target = target.clone().unwrap_or_else(|| "*".to_owned());
                        let call = call.clone();
                        let _ = tokio::task::spawn_blocking(move || {
                            FaultPlan::wait_while_held(&plan, &target, &call)
                        })
                        .await;
                    }
                }
            }
            kind => {
                entry.detail = Some(format!("injected {} by the journaling proxy", kind.label()));
                proxy.journal.record(&entry);
                return Response::builder()
                    .status(500)
                    .header("content-type", "application/json")
                    .body(Body::from(
                        json!({"name": "UnknownError",
                               "data": {"message": "Unexpected server error. Check server logs for details."}})
                        .to_string(),
                    ))
                    .unwrap_or_else(|_| Response::new(Body::empty()));
            }
        }
    }
    if let (Some(url), "message", true, Some(session)) = (
        &proxy.witness,
        call.as_str(),
        method == axum::http::Method::POST,
        target.as_deref(),
    ) {
        let request = WitnessRequest {
            runtime: "opencode".to_owned(),
            target: session.to_owned(),
            input: entry
                .request
                .get("parts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            before: json!({
                "sessionId": session,
                "messageId": entry.request.get("messageID"),
                "messageIds": live_messages(&proxy, session).await,
            }),
        };
        match rewind_mock_runtimes::witness::ask(url, &request).await {
            Ok(answer) => entry.witness = Some(answer.witness),
            Err(e) => {
                entry.outcome = "error".to_owned();
                entry.detail = Some(e.to_string());
                proxy.journal.record(&entry);
                return Response::builder()
                    .status(500)
                    .header("content-type", "application/json")
                    .body(Body::from(
                        json!({"name": "UnknownError", "data": {"message": e.to_string()}})
                            .to_string(),
                    ))
                    .unwrap_or_else(|_| Response::new(Body::empty()));
            }
        }
    }
    let server = match proxy.upstream.endpoint().await {
        Ok(server) => server,
        Err(e) => {
            entry.outcome = "error".to_owned();
            entry.detail = Some(format!("the harness could not start the real server: {e}"));
            proxy.journal.record(&entry);
            return Response::builder()
                .status(502)
                .body(Body::from(format!(
                    "the harness could not start the real opencode server: {e}"
                )))
                .unwrap_or_else(|_| Response::new(Body::empty()));
        }
    };
    let url = format!(
        "{}{}",
        server.base_url(),
        uri.path_and_query().map(|p| p.as_str()).unwrap_or("/")
    );
    let mut upstream = proxy.http.request(method, url).body(body);
    for (name, value) in &headers {
        if name != axum::http::header::HOST && name != axum::http::header::CONTENT_LENGTH {
            upstream = upstream.header(name, value);
        }
    }
    match upstream.send().await {
        Ok(answer) => {
            let status = answer.status();
            if !status.is_success() {
                entry.outcome = "error".to_owned();
                entry.detail = Some(format!("HTTP {}", status.as_u16()));
            }
            if !faulted {
                proxy.journal.record(&entry);
            }
            let mut response = Response::builder().status(status);
            for (name, value) in answer.headers() {
                if name != axum::http::header::CONTENT_LENGTH
                    && name != axum::http::header::TRANSFER_ENCODING
                {
                    response = response.header(name, value);
                }
            }
            let stream = answer.bytes_stream().map_err(std::io::Error::other);
            response
                .body(Body::from_stream(stream))
                .unwrap_or_else(|_| Response::new(Body::empty()))
        }
        Err(e) => {
            entry.outcome = "error".to_owned();
            entry.detail = Some(e.to_string());
            proxy.journal.record(&entry);
            Response::builder()
                .status(502)
                .body(Body::from(format!(
                    "the opencode server did not answer: {e}"
                )))
                .unwrap_or_else(|_| Response::new(Body::empty()))
        }
    }
}

/// Where a scenario's real OpenCode runs: the program, its environment and working directory.
#[derive(Debug, Clone)]
pub struct OpenCodeHome {
    /// The real program.
    pub program: PathBuf,
    /// HOME, XDG and [`QUIET_ENV`].
    pub env: Vec<(String, String)>,
    /// The working directory (holding `opencode.json`).
    pub cwd: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::template;
    use super::{JournalingProxy, LazyServer, OpenCodeHome, PidSink};
    use crate::real::host::RuntimeHost;
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::Path;
    use std::sync::{Arc, Mutex};

    /// A stand-in for `opencode serve`: appends a line to `$MARK` each time it starts, then
    /// says where it listens (`listens`) or ends at once.
    fn stand_in(dir: &Path, listens: bool) -> OpenCodeHome {
        let program = dir.join("opencode");
        let body = if listens {
            "echo \"opencode server listening on http://127.0.0.1:$3\"\nexec sleep 600\n"
        } else {
            "exit 3\n"
        };
        std::fs::write(
            &program,
            format!("#!/bin/sh\necho started >> \"$MARK\"\n{body}"),
        )
        .expect("stand-in written");
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755))
            .expect("stand-in executable");
        OpenCodeHome {
            program,
            env: vec![("MARK".to_owned(), dir.join("starts").display().to_string())],
            cwd: dir.to_path_buf(),
        }
    }

    fn starts(dir: &Path) -> usize {
        std::fs::read_to_string(dir.join("starts"))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }

    #[tokio::test]
    async fn the_server_starts_at_the_first_call_once_and_not_again_after_it_stopped() {
        let dir = tempfile::tempdir().expect("temp dir");
        let server = LazyServer::new(RuntimeHost::Local, stand_in(dir.path(), true));
        let told = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&told);
        server
            .on_start(PidSink::new(move |pid| sink.lock().unwrap().push(pid)))
            .await;
        let proxy = JournalingProxy::start(Arc::clone(&server), dir.path(), None)
            .await
            .expect("proxy listens");
        assert!(proxy.url().starts_with("http://127.0.0.1:"));
        assert_eq!(starts(dir.path()), 0, "started before anything called it");
        assert_eq!(server.pid().await, None);

        let (first, second) = tokio::join!(server.endpoint(), server.endpoint());
        let (first, second) = (first.expect("started"), second.expect("started"));
        assert_eq!(first.base_url(), second.base_url());
        assert_eq!(starts(dir.path()), 1, "two calls at once start one server");
        let pid = server.pid().await.expect("a running server has a pid");
        assert_eq!(*told.lock().unwrap(), vec![pid]);

        server.stop().await;
        assert_eq!(server.pid().await, None);
        let after = server
            .endpoint()
            .await
            .expect_err("a stopped server is not started again");
        assert!(after.to_string().contains("stopped"), "{after}");
        assert_eq!(starts(dir.path()), 1);
    }

    #[tokio::test]
    async fn a_start_that_failed_fails_every_later_call_without_starting_again() {
        let dir = tempfile::tempdir().expect("temp dir");
        let server = LazyServer::new(RuntimeHost::Local, stand_in(dir.path(), false));
        let first = server
            .endpoint()
            .await
            .expect_err("the stand-in never listens");
        let tries = starts(dir.path());
        assert!(tries >= 1, "the server was not started");
        let again = server.endpoint().await.expect_err("still failed");
        assert_eq!(starts(dir.path()), tries, "a failed start was tried again");
        assert!(again.to_string().contains("starting the server"), "{again}");
        assert!(!first.to_string().is_empty());
    }

    #[test]
    fn calls_are_journaled_under_the_mock_servers_route_templates() {
        assert_eq!(
            template("POST", "/session/ses_1/revert"),
            (
                "POST /session/{id}/revert".to_owned(),
                Some("ses_1".to_owned())
            )
        );
        assert_eq!(
            template("GET", "/session/ses_1"),
            ("GET /session/{id}".to_owned(), Some("ses_1".to_owned()))
        );
        assert_eq!(template("GET", "/config"), ("GET /config".to_owned(), None));
        assert_eq!(super::route("GET", "/session/ses_1/message"), "messages");
        assert_eq!(super::route("POST", "/session/ses_1/message"), "message");
        assert_eq!(super::route("POST", "/session/ses_1/revert"), "revert");
    }
}
