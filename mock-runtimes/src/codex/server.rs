//! The app-server loop: JSON-RPC 2.0 without the `"jsonrpc"` field, one JSON object per line on
//! stdin and stdout. See the module docs of [`super`] for what is imitated and what is not.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use super::state::{
    read_thread, save_thread, thread_path, unix_now, HistoryEvent, HistoryMode, ThreadState,
    TurnRecord, TurnStatus,
};
use crate::faults::{FaultKind, FaultPlan, FaultRule};
use crate::journal::{now_rfc3339, Journal, JournalEntry};
use crate::witness::{ask_blocking, WitnessRequest};

const RUNTIME: &str = "codex";
const INVALID_REQUEST: i64 = -32600;
const INTERNAL_ERROR: i64 = -32603;
/// The client name the real app-server exempts from the rollback deprecation notice.
const CODEX_TUI_CLIENT_NAME: &str = "codex-tui";
const THREAD_ROLLBACK_DEPRECATION_SUMMARY: &str =
    "thread/rollback is deprecated and will be removed soon";
/// The notice before a `thread/read {includeTurns: true}` of a paginated thread.
const READ_HYDRATION_DEPRECATION_SUMMARY: &str = "Full-history hydration is deprecated for \
    paginated threads; omit `includeTurns` or set it to `false`, then page with \
    `thread/turns/list` and `thread/items/list`.";
/// The notice before a `thread/resume` (without `excludeTurns`) of a paginated thread.
const RESUME_HYDRATION_DEPRECATION_SUMMARY: &str = "Full-history hydration is deprecated for \
    paginated threads; use `excludeTurns: true`, then page with `thread/turns/list` and \
    `thread/items/list`.";
/// The page size of `thread/turns/list` without a `limit` (inferred).
const DEFAULT_TURNS_PAGE: usize = 25;
const MODEL: &str = "mock-model";
const MODEL_PROVIDER: &str = "mock";

/// A Codex release number (`major.minor.patch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u64, pub u64, pub u64);

impl Version {
    /// The first release without `thread/rollback`.
    pub const ROLLBACK_REMOVED: Version = Version(0, 156, 0);

    /// Parses `0.155.0` (a leading `v` and a `-suffix` are tolerated).
    pub fn parse(text: &str) -> Result<Version, String> {
        let trimmed = text.trim();
        let core = trimmed.strip_prefix('v').unwrap_or(trimmed);
        let core = core.split(['-', '+']).next().unwrap_or(core);
        let parts: Vec<&str> = core.split('.').collect();
        let bad = || format!("`{text}` is not a Codex version like 0.155.0");
        if parts.len() != 3 {
            return Err(bad());
        }
        let mut numbers = [0u64; 3];
        for (slot, part) in numbers.iter_mut().zip(&parts) {
            *slot = part.parse().map_err(|_| bad())?;
        }
        Ok(Version(numbers[0], numbers[1], numbers[2]))
    }

    /// Whether this release still serves `thread/rollback`.
    pub fn has_rollback(self) -> bool {
        self < Version::ROLLBACK_REMOVED
    }

    /// Whether this release reports read state (`readState` in `thread/read`, the
    /// `thread/readState/changed` notification). Seen on 0.171 and not on 0.155; the release
    /// that introduced it is not known, so the mock ties it to the releases without rollback.
    pub fn has_read_state(self) -> bool {
        !self.has_rollback()
    }

    /// Whether `thread/resume` of a thread that was ever reverted answers `serviceTier:
    /// "default"` (instead of null): seen on 0.171.0 (a new process or the same one, also after
    /// later turns) and not on 0.155.1; the mock ties it to the releases without rollback.
    pub fn reverted_threads_report_service_tier(self) -> bool {
        !self.has_rollback()
    }

    /// The history mode of a thread this release's users would hold: `legacy` while
    /// `thread/rollback` exists (threads a rollback-based daemon started), `paginated` after.
    pub fn seed_history_mode(self) -> HistoryMode {
        if self.has_rollback() {
            HistoryMode::Legacy
        } else {
            HistoryMode::Paginated
        }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// What the server was started with.
pub(super) struct Config {
    pub home: PathBuf,
    pub version: Version,
    pub turn_ms: u64,
    pub argv: Vec<String>,
    /// The delivery witness URL ([`crate::witness::WITNESS_ENV`]), when set.
    pub witness: Option<String>,
}

#[derive(Debug)]
struct RpcError {
    code: i64,
    message: String,
}

impl RpcError {
    fn invalid(message: impl Into<String>) -> Self {
        RpcError {
            code: INVALID_REQUEST,
            message: message.into(),
        }
    }

    fn internal(message: impl Into<String>) -> Self {
        RpcError {
            code: INTERNAL_ERROR,
            message: message.into(),
        }
    }
}

#[derive(Default)]
struct Session {
    initialized: bool,
    experimental: bool,
    client_name: String,
    /// Threads loaded in this process (`thread/start`, `thread/resume`).
    loaded: HashSet<String>,
    /// Thread id -> the turn running in it.
    active: HashMap<String, String>,
}

struct Shared {
    cfg: Config,
    journal: Journal,
    out: Mutex<std::io::Stdout>,
    session: Mutex<Session>,
    /// Threads this connection unsubscribed from (`thread/unsubscribe`, until a
    /// `thread/resume`): it hears only their status changes, as on the real server.
    unsubscribed: Mutex<HashSet<String>>,
}

impl Shared {
    fn session(&self) -> MutexGuard<'_, Session> {
        self.session.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn send(&self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        // A closed stdout means the client went away; the read loop ends on its own.
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }

    fn notify(&self, method: &str, params: Value) {
        if method != "thread/status/changed" {
            if let Some(thread) = params.get("threadId").and_then(Value::as_str) {
                let unsubscribed = self.unsubscribed.lock().unwrap_or_else(|e| e.into_inner());
                if unsubscribed.contains(thread) {
                    return;
                }
            }
        }
        self.send(&json!({ "method": method, "params": params }));
    }

    fn subscribe(&self, thread: &str, listening: bool) {
        let mut unsubscribed = self.unsubscribed.lock().unwrap_or_else(|e| e.into_inner());
        if listening {
            unsubscribed.remove(thread);
        } else {
            unsubscribed.insert(thread.to_owned());
        }
    }
}

/// A journal entry that is written exactly once.
struct Call {
    entry: JournalEntry,
    recorded: bool,
}

impl Call {
    fn record(&mut self, journal: &Journal) {
        if !self.recorded {
            journal.record(&self.entry);
            self.recorded = true;
        }
    }

    fn fault(&mut self, kind: FaultKind, detail: impl Into<String>) {
        self.entry.outcome = kind.outcome();
        self.entry.detail = Some(detail.into());
    }
}

/// What a handler produced.
struct Handled {
    reply: Reply,
    /// Notifications sent right after the response.
    after: Vec<Value>,
    /// A turn to run once the response is out.
    turn: Option<PendingTurn>,
}

enum Reply {
    Result(Value),
    Error(RpcError),
    /// No answer while an injected hang without `hang_ms` stays planted; once it is lifted the
    /// call is handled again from the start, on a thread of its own, while the connection goes
    /// on serving other calls.
    Held,
}

impl From<Result<Value, RpcError>> for Handled {
    fn from(result: Result<Value, RpcError>) -> Self {
        Handled {
            reply: match result {
                Ok(v) => Reply::Result(v),
                Err(e) => Reply::Error(e),
            },
            after: Vec::new(),
            turn: None,
        }
    }
}

struct PendingTurn {
    thread_id: String,
    turn: TurnRecord,
}

/// How an injected fault bends a handler that still runs.
#[derive(Default, Clone, Copy)]
struct Bend {
    /// Answer success but change nothing.
    no_effect: bool,
    /// Report the thread as running a turn.
    busy: bool,
    /// A fault rule matched the call: it never reaches the delivery witness.
    faulted: bool,
}

// ---- params (the real ones carry many more optional fields; unknown fields are ignored) ----

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InitializeParams {
    client_info: ClientInfo,
    #[serde(default)]
    capabilities: Option<Capabilities>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClientInfo {
    name: String,
    #[serde(default)]
    #[allow(dead_code)]
    title: Option<String>,
    version: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Capabilities {
    #[serde(default)]
    experimental_api: bool,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ThreadStartParams {
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    history_mode: Option<HistoryMode>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadIdParams {
    thread_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadResumeParams {
    thread_id: String,
    #[serde(default)]
    exclude_turns: bool,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
enum SortDirection {
    Asc,
    #[default]
    Desc,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
enum ItemsView {
    NotLoaded,
    #[default]
    Summary,
    Full,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadTurnsListParams {
    thread_id: String,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    limit: Option<u32>,
    #[serde(default)]
    sort_direction: Option<SortDirection>,
    #[serde(default)]
    items_view: Option<ItemsView>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadReadParams {
    thread_id: String,
    #[serde(default)]
    include_turns: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadRollbackParams {
    thread_id: String,
    num_turns: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadRevertParams {
    thread_id: String,
    before_turn_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TurnStartParams {
    thread_id: String,
    input: Vec<UserInput>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
#[allow(dead_code)]
enum UserInput {
    Text {
        text: String,
        #[serde(default)]
        text_elements: Vec<Value>,
    },
    Image {
        url: String,
    },
    LocalImage {
        path: String,
    },
    Skill {
        name: String,
        path: String,
    },
    Mention {
        name: String,
        path: String,
    },
}

enum Request {
    Initialize(InitializeParams),
    ThreadStart(ThreadStartParams),
    ThreadResume(ThreadResumeParams),
    ThreadRead(ThreadReadParams),
    ThreadTurnsList(ThreadTurnsListParams),
    ThreadUnsubscribe(ThreadIdParams),
    ThreadRollback(ThreadRollbackParams),
    ThreadRevert(ThreadRevertParams),
    TurnStart(TurnStartParams),
}

impl Request {
    fn thread_id(&self) -> Option<&str> {
        match self {
            Request::Initialize(_) | Request::ThreadStart(_) => None,
            Request::ThreadResume(p) => Some(&p.thread_id),
            Request::ThreadRead(p) => Some(&p.thread_id),
            Request::ThreadTurnsList(p) => Some(&p.thread_id),
            Request::ThreadUnsubscribe(p) => Some(&p.thread_id),
            Request::ThreadRollback(p) => Some(&p.thread_id),
            Request::ThreadRevert(p) => Some(&p.thread_id),
            Request::TurnStart(p) => Some(&p.thread_id),
        }
    }
}

/// The methods this mock serves, in the order the "unknown variant" error lists them.
const METHODS: [&str; 9] = [
    "initialize",
    "thread/start",
    "thread/resume",
    "thread/unsubscribe",
    "thread/read",
    "thread/turns/list",
    "thread/rollback",
    "thread/revert",
    "turn/start",
];

fn params<T: DeserializeOwned>(params: Option<Value>) -> Result<T, RpcError> {
    let Some(params) = params else {
        return Err(RpcError::invalid("Invalid request: missing field `params`"));
    };
    serde_json::from_value(params).map_err(|e| RpcError::invalid(format!("Invalid request: {e}")))
}

/// Decodes a request the way the real server deserializes its `ClientRequest` enum: an unknown
/// method is an unknown variant, bad params a serde error, both `-32600 "Invalid request: ..."`.
fn decode(version: Version, method: &str, raw: Option<Value>) -> Result<Request, RpcError> {
    let served = |m: &str| m != "thread/rollback" || version.has_rollback();
    if !METHODS.iter().any(|m| *m == method && served(m)) {
        let expected = METHODS
            .iter()
            .filter(|m| served(m))
            .map(|m| format!("`{m}`"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(RpcError::invalid(format!(
            "Invalid request: unknown variant `{method}`, expected one of {expected}"
        )));
    }
    Ok(match method {
        "initialize" => Request::Initialize(params(raw)?),
        "thread/start" => Request::ThreadStart(match raw {
            None | Some(Value::Null) => ThreadStartParams::default(),
            some => params(some)?,
        }),
        "thread/resume" => Request::ThreadResume(params(raw)?),
        "thread/read" => Request::ThreadRead(params(raw)?),
        "thread/turns/list" => Request::ThreadTurnsList(params(raw)?),
        "thread/unsubscribe" => Request::ThreadUnsubscribe(params(raw)?),
        "thread/rollback" => Request::ThreadRollback(params(raw)?),
        "thread/revert" => Request::ThreadRevert(params(raw)?),
        _ => Request::TurnStart(params(raw)?),
    })
}

/// Runs the server until stdin closes.
pub(super) fn serve(cfg: Config) -> ExitCode {
    let journal = Journal::new(crate::journal_path(&cfg.home));
    let mut start = JournalEntry::new(RUNTIME, "process/start").request(json!(cfg.argv));
    start.detail = Some(format!(
        "mock codex app-server {} (thread/rollback {})",
        cfg.version,
        if cfg.version.has_rollback() {
            "served"
        } else {
            "removed"
        }
    ));
    journal.record(&start);
    let shared = Arc::new(Shared {
        cfg,
        journal,
        out: Mutex::new(std::io::stdout()),
        session: Mutex::new(Session::default()),
        unsubscribed: Mutex::default(),
    });
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match input.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => handle_line(&shared, &buf),
            Err(e) => {
                eprintln!("mock codex app-server: cannot read stdin: {e}");
                break;
            }
        }
    }
    release_writers(&shared);
    ExitCode::SUCCESS
}

/// Where the process writing thread `id` is recorded. As on the real app-server, one process at
/// a time may load a thread: another one's `thread/resume` is refused while the holder lives
/// (idle, or after `thread/unsubscribe`), and a holder that exits or is killed leaves no lock.
fn writer_path(shared: &Shared, id: &str) -> PathBuf {
    crate::mock_dir(&shared.cfg.home)
        .join("writers")
        .join(format!("{id}.pid"))
}

/// Whether process `pid` still runs (a zombie, exited but not reaped yet, does not).
fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| !matches!(state, 'Z' | 'X')),
        Err(_) => false,
    }
}

/// Takes the writer lock of thread `id` for this process, or answers the real refusal when
/// another live process holds it.
fn take_writer(shared: &Shared, id: &str) -> Result<(), RpcError> {
    let path = writer_path(shared, id);
    let me = std::process::id();
    let failed = |e: std::io::Error| RpcError::internal(format!("failed to lock thread {id}: {e}"));
    for _ in 0..3 {
        match std::fs::read_to_string(&path) {
            Ok(text) => match text.trim().parse::<u32>() {
                Ok(pid) if pid == me => return Ok(()),
                Ok(pid) if process_alive(pid) => {
                    return Err(RpcError::invalid(format!(
                        "thread {id} already has an active writer"
                    )))
                }
                // A holder that is gone, or a torn file: the lock is free.
                _ => {
                    let _ = std::fs::remove_file(&path);
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(failed(e)),
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(failed)?;
        }
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut file) => {
                return file.write_all(me.to_string().as_bytes()).map_err(failed);
            }
            // Another process took it in between: look again.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(failed(e)),
        }
    }
    Err(RpcError::invalid(format!(
        "thread {id} already has an active writer"
    )))
}

/// Gives up the writer locks this process holds (at exit).
fn release_writers(shared: &Shared) {
    let me = std::process::id().to_string();
    let loaded: Vec<String> = shared.session().loaded.iter().cloned().collect();
    for id in loaded {
        let path = writer_path(shared, &id);
        if std::fs::read_to_string(&path).is_ok_and(|t| t.trim() == me) {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn handle_line(shared: &Arc<Shared>, line: &[u8]) {
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    let unparseable = |why: String| {
        // The real server logs and drops a line it cannot decode; it does not answer.
        eprintln!("mock codex app-server: failed to deserialize JSON-RPC message: {why}");
        let mut entry = JournalEntry::new(RUNTIME, "(unparseable)")
            .request(Value::String(text.chars().take(2000).collect()));
        entry.outcome = "error".into();
        entry.detail = Some(why);
        shared.journal.record(&entry);
    };
    let message: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return unparseable(e.to_string()),
    };
    let Some(object) = message.as_object() else {
        return unparseable("not a JSON object".into());
    };
    let id = object.get("id").cloned();
    let id_ok = matches!(id, None | Some(Value::Number(_)) | Some(Value::String(_)));
    if !id_ok {
        return unparseable("`id` must be a number or a string".into());
    }
    let params = object.get("params").cloned();
    match (object.get("method").and_then(Value::as_str), id) {
        (Some(method), Some(id)) => handle_request(shared, id, method, params),
        (Some(method), None) => {
            // `initialized` and any other client notification: logged, nothing else.
            shared
                .journal
                .record(&JournalEntry::new(RUNTIME, method).request(params.unwrap_or(Value::Null)));
        }
        (None, _) => {
            // A response or error from the client (the mock never sends server requests).
            shared
                .journal
                .record(&JournalEntry::new(RUNTIME, "(client response)").request(message));
        }
    }
}

fn handle_request(shared: &Arc<Shared>, id: Value, method: &str, raw: Option<Value>) {
    let target = raw
        .as_ref()
        .and_then(|p| p.get("threadId"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut entry = JournalEntry::new(RUNTIME, method).request(raw.clone().unwrap_or(Value::Null));
    if let Some(target) = target {
        entry = entry.target(target);
    }
    let mut call = Call {
        entry,
        recorded: false,
    };
    let again = raw.clone();
    let handled = match decode(shared.cfg.version, method, raw) {
        Ok(request) => dispatch(shared, request, &mut call),
        Err(e) => Handled::from(Err(e)),
    };
    match handled.reply {
        Reply::Result(result) => {
            call.record(&shared.journal);
            shared.send(&json!({ "id": id, "result": result }));
        }
        Reply::Error(error) => {
            if call.entry.outcome == "ok" {
                call.entry.outcome = "error".into();
            }
            if call.entry.detail.is_none() {
                call.entry.detail = Some(error.message.clone());
            }
            call.record(&shared.journal);
            shared.send(&json!({
                "id": id,
                "error": { "code": error.code, "message": error.message },
            }));
        }
        Reply::Held => {
            call.record(&shared.journal);
            let target = call.entry.target.clone().unwrap_or_default();
            let (shared, method) = (Arc::clone(shared), method.to_owned());
            std::thread::spawn(move || {
                let plan = crate::faults_path(&shared.cfg.home);
                FaultPlan::wait_while_held(&plan, &target, &method);
                handle_request(&shared, id, &method, again);
            });
        }
    }
    for notification in handled.after {
        shared.send(&notification);
    }
    if let Some(turn) = handled.turn {
        start_turn(shared, turn);
    }
}

fn dispatch(shared: &Arc<Shared>, request: Request, call: &mut Call) -> Handled {
    if let Request::Initialize(p) = request {
        return initialize(shared, p).into();
    }
    let client_name = {
        let session = shared.session();
        if !session.initialized {
            return Handled::from(Err(RpcError::invalid("Not initialized")));
        }
        if let Request::ThreadStart(p) = &request {
            if p.history_mode.is_some() && !session.experimental {
                return Handled::from(Err(RpcError::invalid(
                    "thread/start.historyMode requires experimentalApi capability",
                )));
            }
        }
        session.client_name.clone()
    };
    let method = call.entry.call.clone();
    if matches!(request, Request::ThreadRollback(_)) && client_name != CODEX_TUI_CLIENT_NAME {
        shared.notify(
            "deprecationNotice",
            json!({ "summary": THREAD_ROLLBACK_DEPRECATION_SUMMARY, "details": null }),
        );
    }
    let mut bend = Bend::default();
    if let Some(target) = request.thread_id().map(str::to_owned) {
        let rule = match FaultPlan::load(&crate::faults_path(&shared.cfg.home)) {
            Ok(plan) => plan.find(&target, &method).cloned(),
            Err(e) => {
                eprintln!("mock codex app-server: {e}");
                return Handled::from(Err(RpcError::internal(format!("mock fault plan: {e}"))));
            }
        };
        if let Some(rule) = rule {
            match apply_fault(shared, &rule, &method, &target, call) {
                Effect::Bend(b) => bend = Bend { faulted: true, ..b },
                Effect::Answer(handled) => return handled,
            }
        }
    }
    match request {
        Request::Initialize(_) => unreachable_initialize(),
        Request::ThreadStart(p) => thread_start(shared, p),
        Request::ThreadResume(p) => thread_resume(shared, &p, bend),
        Request::ThreadRead(p) => thread_read(shared, &p, bend),
        Request::ThreadTurnsList(p) => thread_turns_list(shared, &p, bend).into(),
        Request::ThreadUnsubscribe(p) => thread_unsubscribe(shared, &p.thread_id).into(),
        Request::ThreadRollback(p) => thread_rollback(shared, &p, bend).into(),
        Request::ThreadRevert(p) => thread_revert(shared, &p, bend),
        Request::TurnStart(p) => turn_start(shared, p, bend, call),
    }
}

fn unreachable_initialize() -> Handled {
    Handled::from(Err(RpcError::internal("initialize dispatched twice")))
}

/// What an injected fault does to a call that reaches its handler.
enum Effect {
    /// The fault is the whole answer.
    Answer(Handled),
    /// The normal handler runs, bent.
    Bend(Bend),
}

/// Applies an injected fault.
fn apply_fault(
    shared: &Arc<Shared>,
    rule: &FaultRule,
    method: &str,
    target: &str,
    call: &mut Call,
) -> Effect {
    let kind = rule.kind;
    match kind {
        FaultKind::Crash => {
            call.fault(
                kind,
                "injected crash: the process exits (134) without answering",
            );
            call.record(&shared.journal);
            eprintln!("mock codex app-server: injected crash during {method} on thread {target}");
            let _ = std::io::stderr().flush();
            std::process::exit(134);
        }
        FaultKind::Hang => match rule.hang_ms {
            None => {
                call.fault(kind, "injected hang: held until the fault is lifted");
                Effect::Answer(Handled {
                    reply: Reply::Held,
                    after: Vec::new(),
                    turn: None,
                })
            }
            Some(ms) => {
                call.fault(kind, format!("injected hang: answered after {ms} ms"));
                call.record(&shared.journal);
                std::thread::sleep(Duration::from_millis(ms));
                Effect::Bend(Bend::default())
            }
        },
        FaultKind::Error => {
            let message = match method {
                "thread/rollback" => "failed to start rollback: injected fault".to_owned(),
                "thread/read" => "failed to read thread: injected fault".to_owned(),
                "thread/resume" => "failed to load rollout: injected fault".to_owned(),
                other => format!("{other} failed: injected fault"),
            };
            call.fault(kind, message.clone());
            Effect::Answer(Handled::from(Err(RpcError::internal(message))))
        }
        FaultKind::UnknownSession => {
            let error = unknown_thread(method, target);
            call.fault(kind, error.message.clone());
            Effect::Answer(Handled::from(Err(error)))
        }
        FaultKind::Busy => {
            let refusal = match method {
                "thread/rollback" => Some("Cannot rollback while a turn is in progress."),
                "thread/revert" => Some("Cannot revert while a turn is in progress."),
                "turn/start" => Some("Cannot start a turn while a turn is in progress."),
                _ => None,
            };
            match refusal {
                Some(message) => {
                    call.fault(kind, message);
                    Effect::Answer(Handled::from(Err(RpcError::invalid(message))))
                }
                None => {
                    call.fault(kind, "injected busy: the thread is reported active");
                    Effect::Bend(Bend {
                        busy: true,
                        ..Bend::default()
                    })
                }
            }
        }
        FaultKind::NoEffect => {
            call.fault(
                kind,
                "injected no_effect: success reported, nothing changed",
            );
            Effect::Bend(Bend {
                no_effect: true,
                ..Bend::default()
            })
        }
    }
}

/// The real answer for a thread the server does not have, per method.
fn unknown_thread(method: &str, thread_id: &str) -> RpcError {
    RpcError::invalid(match method {
        "thread/resume" => format!("no rollout found for thread id {thread_id}"),
        "thread/read" | "thread/turns/list" => format!("thread not loaded: {thread_id}"),
        _ => format!("thread not found: {thread_id}"),
    })
}

fn parse_thread_id(thread_id: &str) -> Result<String, RpcError> {
    uuid::Uuid::parse_str(thread_id)
        .map(|id| id.hyphenated().to_string())
        .map_err(|e| RpcError::invalid(format!("invalid thread id: {}", uuid_error(&e))))
}

/// A UUID parse error worded as the real app-server's `uuid` release words it: a bad
/// character is "expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found
/// `c` at N" with N counted from 1 (seen on 0.155.1 and 0.171.0). Other parse errors keep the
/// wording of the mock's `uuid` release (not compared with the real one).
fn uuid_error(error: &uuid::Error) -> String {
    let text = error.to_string();
    let parsed = text
        .strip_prefix("invalid character: found `")
        .and_then(|rest| rest.rsplit_once("` at "))
        .and_then(|(found, at)| Some((found, at.parse::<usize>().ok()?)));
    match parsed {
        Some((found, at)) => format!(
            "invalid character: expected an optional prefix of `urn:uuid:` followed by \
             [0-9a-fA-F-], found `{found}` at {}",
            at + 1
        ),
        None => text,
    }
}

fn is_valid_header_value(value: &str) -> bool {
    value
        .bytes()
        .all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

fn initialize(shared: &Arc<Shared>, p: InitializeParams) -> Result<Value, RpcError> {
    let mut session = shared.session();
    if session.initialized {
        return Err(RpcError::invalid("Already initialized"));
    }
    let name = p.client_info.name;
    if !is_valid_header_value(&name) {
        return Err(RpcError::invalid(format!(
            "Invalid clientInfo.name: '{name}'. Must be a valid HTTP header value."
        )));
    }
    session.initialized = true;
    session.experimental = p.capabilities.unwrap_or_default().experimental_api;
    session.client_name = name.clone();
    Ok(json!({
        "userAgent": format!(
            "{name}/{} ({}; {}) mock ({name}; {})",
            shared.cfg.version,
            std::env::consts::OS,
            std::env::consts::ARCH,
            p.client_info.version
        ),
        "codexHome": shared.cfg.home.display().to_string(),
        "platformFamily": std::env::consts::FAMILY,
        "platformOs": std::env::consts::OS,
    }))
}

// ---- views ----

/// The `warning` the real server sends at every turn of a model it has no metadata for, as
/// the mock's model is.
fn model_warning() -> String {
    format!(
        "Model metadata for `{MODEL}` not found. Defaulting to fallback metadata; this can \
         degrade performance and cause issues."
    )
}

/// The rate limits of an account without any (every limit null).
fn rate_limits() -> Value {
    json!({
        "limitId": "codex",
        "limitName": null,
        "normalModelSlug": null,
        "primary": null,
        "secondary": null,
        "credits": null,
        "individualLimit": null,
        "spendControlReached": null,
        "planType": null,
        "rateLimitReachedType": null,
    })
}

fn thread_status(session: &Session, thread_id: &str, busy: bool) -> Value {
    if busy || session.active.contains_key(thread_id) {
        json!({ "type": "active", "activeFlags": [] })
    } else if session.loaded.contains(thread_id) {
        json!({ "type": "idle" })
    } else {
        json!({ "type": "notLoaded" })
    }
}

fn user_item(turn: &TurnRecord) -> Value {
    json!({
        "type": "userMessage",
        "id": turn.user_item_id(),
        "content": [{ "type": "text", "text": turn.input, "text_elements": [] }],
    })
}

fn agent_item(turn: &TurnRecord, text: &str) -> Value {
    json!({
        "type": "agentMessage",
        "id": turn.agent_item_id(),
        "text": text,
        "phase": null,
        "memoryCitation": null,
        "questions": null,
        "delivery": null,
    })
}

/// A finished turn as `turn/completed` shows it: the `summary` view, whose items are the
/// agent's reply only (no user message), as the real server sends it.
fn turn_summary_json(turn: &TurnRecord) -> Value {
    let mut shown = turn_json(turn, false, false);
    let items: Vec<Value> = if turn.output.is_empty() {
        Vec::new()
    } else {
        vec![agent_item(turn, &turn.output)]
    };
    shown["items"] = json!(items);
    shown["itemsView"] = json!("summary");
    shown
}

/// A turn as the app-server shows it. A turn left `inProgress` by a process that is gone is
/// shown `interrupted`, as the real server does for stale turns.
fn turn_json(turn: &TurnRecord, running: bool, with_items: bool) -> Value {
    let status = match turn.status {
        TurnStatus::InProgress if !running => TurnStatus::Interrupted,
        other => other,
    };
    let items = if with_items {
        let mut items = vec![user_item(turn)];
        // A turn without a reply (running, or answered with nothing) has no agent message.
        if !turn.output.is_empty() {
            items.push(agent_item(turn, &turn.output));
        }
        items
    } else {
        Vec::new()
    };
    json!({
        "id": turn.id,
        "items": items,
        "itemsView": if with_items { "full" } else { "notLoaded" },
        "status": status.as_str(),
        "error": null,
        "startedAt": turn.started_at,
        "completedAt": turn.completed_at,
        "durationMs": turn.completed_at.map(|c| (c - turn.started_at) * 1000),
    })
}

fn thread_json(
    shared: &Shared,
    session: &Session,
    state: &ThreadState,
    include_turns: bool,
    busy: bool,
) -> Value {
    let running = session.active.get(&state.thread_id);
    let turns: Vec<Value> = if include_turns {
        state
            .turns
            .iter()
            .map(|t| turn_json(t, running == Some(&t.id), true))
            .collect()
    } else {
        Vec::new()
    };
    json!({
        "id": state.thread_id,
        "sessionId": state.thread_id,
        "forkedFromId": null,
        "preview": state.preview(),
        "ephemeral": false,
        "modelProvider": MODEL_PROVIDER,
        "createdAt": state.created_at,
        "updatedAt": state.updated_at,
        "status": thread_status(session, &state.thread_id, busy),
        "path": thread_path(&shared.cfg.home, &state.thread_id).map(|p| p.display().to_string()),
        "cwd": state.cwd,
        "cliVersion": state.cli_version,
        "source": "vscode",
        "threadSource": null,
        "agentNickname": null,
        "agentRole": null,
        "gitInfo": null,
        "name": null,
        "historyMode": state.history_mode,
        "turns": turns,
    })
}

/// `thread/start` and `thread/resume` answer with the thread and its settings.
fn thread_settings_response(thread: Value, cwd: &str) -> Value {
    json!({
        "thread": thread,
        "model": MODEL,
        "modelProvider": MODEL_PROVIDER,
        "serviceTier": null,
        "cwd": cwd,
        "instructionSources": [],
        "approvalPolicy": "never",
        "approvalsReviewer": "user",
        "sandbox": { "type": "dangerFullAccess" },
        "reasoningEffort": null,
    })
}

fn load(shared: &Shared, thread_id: &str) -> Result<Option<ThreadState>, RpcError> {
    read_thread(&shared.cfg.home, thread_id)
        .map_err(|e| RpcError::internal(format!("failed to read thread: {e}")))
}

fn save(shared: &Shared, state: &ThreadState) -> Result<(), RpcError> {
    save_thread(&shared.cfg.home, state)
        .map_err(|e| RpcError::internal(format!("failed to persist thread: {e}")))
}

/// The thread loaded in this process, or the real "thread not found" refusal.
fn loaded_thread(
    shared: &Shared,
    session: &Session,
    raw_id: &str,
) -> Result<ThreadState, RpcError> {
    let id = parse_thread_id(raw_id)?;
    if !session.loaded.contains(&id) {
        return Err(unknown_thread("", &id));
    }
    load(shared, &id)?.ok_or_else(|| unknown_thread("", &id))
}

// ---- handlers ----

fn thread_start(shared: &Arc<Shared>, p: ThreadStartParams) -> Handled {
    let mut session = shared.session();
    let id = uuid::Uuid::now_v7().hyphenated().to_string();
    let cwd = p.cwd.unwrap_or_else(|| {
        std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|_| "/".to_owned())
    });
    let state = ThreadState::new(
        &id,
        p.history_mode.unwrap_or(HistoryMode::Paginated),
        &cwd,
        &shared.cfg.version.to_string(),
    );
    if let Err(e) = take_writer(shared, &id).and_then(|()| save(shared, &state)) {
        return Handled::from(Err(e));
    }
    session.loaded.insert(id.clone());
    let thread = thread_json(shared, &session, &state, false, false);
    Handled {
        reply: Reply::Result(thread_settings_response(thread.clone(), &cwd)),
        after: vec![json!({ "method": "thread/started", "params": { "thread": thread } })],
        turn: None,
    }
}

fn thread_resume(shared: &Arc<Shared>, p: &ThreadResumeParams, bend: Bend) -> Handled {
    let result = thread_resume_inner(shared, p, bend);
    Handled::from(result)
}

fn thread_resume_inner(
    shared: &Arc<Shared>,
    p: &ThreadResumeParams,
    bend: Bend,
) -> Result<Value, RpcError> {
    let mut session = shared.session();
    let id = parse_thread_id(&p.thread_id)?;
    let Some(mut state) = load(shared, &id)? else {
        return Err(unknown_thread("thread/resume", &id));
    };
    // A thread that never ran a turn has no rollout on disk yet: only the process that started
    // it knows it (seen on 0.155.1 and 0.171.0). One whose turns were all rolled back or
    // reverted has one, and one the harness seeded stands for a thread that had one.
    let never_ran = state.history.iter().all(|e| match e {
        HistoryEvent::ThreadStarted { seeded, .. } => !seeded,
        HistoryEvent::TurnStarted { .. } => false,
        _ => true,
    });
    if state.turns.is_empty() && never_ran && !session.loaded.contains(&id) {
        return Err(unknown_thread("thread/resume", &id));
    }
    take_writer(shared, &id)?;
    if !bend.no_effect {
        // A turn left running by a process that is gone is interrupted for good.
        if !session.active.contains_key(&id)
            && state
                .turns
                .iter()
                .any(|t| t.status == TurnStatus::InProgress)
        {
            for turn in &mut state.turns {
                if turn.status == TurnStatus::InProgress {
                    turn.status = TurnStatus::Interrupted;
                    state.history.push(HistoryEvent::TurnCompleted {
                        turn_id: turn.id.clone(),
                        status: TurnStatus::Interrupted,
                        at: now_rfc3339(),
                    });
                }
            }
            save(shared, &state)?;
        }
        session.loaded.insert(id.clone());
        shared.subscribe(&id, true);
    }
    let with_turns = !p.exclude_turns;
    if with_turns && state.history_mode == HistoryMode::Paginated {
        deprecation(shared, RESUME_HYDRATION_DEPRECATION_SUMMARY);
    }
    let thread = thread_json(shared, &session, &state, with_turns, bend.busy);
    let mut response = thread_settings_response(thread, &state.cwd);
    if state.reverted() && shared.cfg.version.reverted_threads_report_service_tier() {
        response["serviceTier"] = json!("default");
    }
    // The paged view of the newest turns, as `thread/turns/list` would start it; a legacy
    // thread has no paged history, and both cursors are null (seen on 0.155.1 and 0.171.0).
    let cursor = state
        .turns
        .first()
        .filter(|_| state.history_mode == HistoryMode::Paginated)
        .map(|t| turns_cursor(&t.id, true));
    response["initialTurnsPage"] = Value::Null;
    response["turnsBackwardsCursor"] = json!(cursor);
    response["itemsBackwardsCursor"] = json!(cursor);
    Ok(response)
}

fn thread_read(shared: &Arc<Shared>, p: &ThreadReadParams, bend: Bend) -> Handled {
    let result = (|| {
        let session = shared.session();
        let id = parse_thread_id(&p.thread_id)?;
        let Some(state) = load(shared, &id)? else {
            return Err(unknown_thread("thread/read", &id));
        };
        if p.include_turns && state.history_mode == HistoryMode::Paginated {
            deprecation(shared, READ_HYDRATION_DEPRECATION_SUMMARY);
        }
        let thread = thread_json(shared, &session, &state, p.include_turns, bend.busy);
        Ok(if shared.cfg.version.has_read_state() {
            json!({ "thread": thread, "readState": read_state(state.turns.first()) })
        } else {
            json!({ "thread": thread })
        })
    })();
    Handled::from(result)
}

/// A `deprecationNotice` notification (sent before the answer of the call it concerns).
fn deprecation(shared: &Shared, summary: &str) {
    shared.notify(
        "deprecationNotice",
        json!({ "summary": summary, "details": null }),
    );
}

/// A read state: no client marks anything read, so the thread's first turn is the first unread
/// one (`null` without turns), in `thread/readState/changed` and in `thread/read` alike, as seen
/// on the real 0.171.0.
fn read_state(first_unread: Option<&TurnRecord>) -> Value {
    json!({
        "firstUnread": first_unread.map(|t| json!({ "type": "turn", "turnId": t.id })),
        "revision": uuid::Uuid::new_v4().hyphenated().to_string(),
    })
}

/// An opaque `thread/turns/list` cursor: continue after (or, with `include_anchor`, at) a turn.
fn turns_cursor(turn_id: &str, include_anchor: bool) -> String {
    json!({ "turnId": turn_id, "includeAnchor": include_anchor }).to_string()
}

/// `thread/turns/list`: one page of the thread's turns, newest first unless `sortDirection` is
/// `asc`. `nextCursor` continues after the page's last turn (null at the end);
/// `backwardsCursor` anchors on its first turn, for the opposite direction.
fn thread_turns_list(
    shared: &Arc<Shared>,
    p: &ThreadTurnsListParams,
    bend: Bend,
) -> Result<Value, RpcError> {
    let session = shared.session();
    let id = parse_thread_id(&p.thread_id)?;
    let Some(state) = load(shared, &id)? else {
        return Err(unknown_thread("thread/turns/list", &id));
    };
    let direction = p.sort_direction.unwrap_or_default();
    let mut ordered: Vec<&TurnRecord> = state.turns.iter().collect();
    if direction == SortDirection::Desc {
        ordered.reverse();
    }
    let start = match &p.cursor {
        None => 0,
        Some(cursor) => {
            let bad = || RpcError::invalid(format!("invalid cursor: {cursor}"));
            let parsed: Value = serde_json::from_str(cursor).map_err(|_| bad())?;
            let anchor = parsed["turnId"].as_str().ok_or_else(bad)?;
            let include = parsed["includeAnchor"].as_bool().unwrap_or(false);
            let at = ordered
                .iter()
                .position(|t| t.id == anchor)
                .ok_or_else(|| RpcError::invalid(format!("turn not found: {anchor}")))?;
            if include {
                at
            } else {
                at + 1
            }
        }
    };
    let limit = p.limit.map_or(DEFAULT_TURNS_PAGE, |n| n as usize);
    let page: Vec<&TurnRecord> = ordered.iter().skip(start).take(limit).copied().collect();
    let running = session.active.get(&state.thread_id);
    let view = p.items_view.unwrap_or_default();
    let data: Vec<Value> = page
        .iter()
        .map(|t| {
            let mut turn = turn_json(
                t,
                running == Some(&t.id) || bend.busy,
                view != ItemsView::NotLoaded,
            );
            if view == ItemsView::Summary {
                turn["itemsView"] = json!("summary");
            }
            turn
        })
        .collect();
    let more = start + page.len() < ordered.len();
    Ok(json!({
        "data": data,
        "nextCursor": page.last().filter(|_| more).map(|t| turns_cursor(&t.id, false)),
        "backwardsCursor": page.first().map(|t| turns_cursor(&t.id, true)),
    }))
}

/// `thread/unsubscribe`: the connection stops listening to the thread: of its later turns it
/// hears only the status changes. The process keeps it loaded (and stays its writer), as the
/// real server does.
fn thread_unsubscribe(shared: &Arc<Shared>, raw_id: &str) -> Result<Value, RpcError> {
    let session = shared.session();
    let id = parse_thread_id(raw_id)?;
    if !session.loaded.contains(&id) {
        return Ok(json!({ "status": "notLoaded" }));
    }
    shared.subscribe(&id, false);
    Ok(json!({ "status": "unsubscribed" }))
}

fn thread_rollback(
    shared: &Arc<Shared>,
    p: &ThreadRollbackParams,
    bend: Bend,
) -> Result<Value, RpcError> {
    if p.num_turns == 0 {
        return Err(RpcError::invalid("numTurns must be >= 1"));
    }
    let session = shared.session();
    let mut state = loaded_thread(shared, &session, &p.thread_id)?;
    if state.history_mode == HistoryMode::Paginated {
        return Err(RpcError::invalid(
            "paginated threads do not support thread/rollback",
        ));
    }
    if session.active.contains_key(&state.thread_id) {
        return Err(RpcError::invalid(
            "Cannot rollback while a turn is in progress.",
        ));
    }
    if !bend.no_effect {
        let keep = state.turns.len().saturating_sub(p.num_turns as usize);
        let dropped: Vec<String> = state.turns.drain(keep..).map(|t| t.id).collect();
        state.history.push(HistoryEvent::ThreadRolledBack {
            num_turns: p.num_turns,
            dropped,
            at: now_rfc3339(),
        });
        state.updated_at = unix_now();
        save(shared, &state)?;
    }
    // The real server recounts the thread's token usage after a rollback and notifies it
    // before it answers (seen on 0.155.1).
    shared.notify("thread/tokenUsage/updated", rollback_token_usage(&state));
    Ok(json!({ "thread": thread_json(shared, &session, &state, true, false) }))
}

/// A turn's (mock) token counts: a token per word, plus one, on each side.
fn turn_tokens(input: &str, reply: &str) -> (u64, u64) {
    let words = |s: &str| s.split_whitespace().count() as u64;
    (words(input) + 1, words(reply) + 1)
}

/// A `tokenUsage` breakdown of these counts.
fn token_breakdown(input_tokens: u64, output_tokens: u64) -> Value {
    json!({
        "totalTokens": input_tokens + output_tokens,
        "inputTokens": input_tokens,
        "cachedInputTokens": 0,
        "outputTokens": output_tokens,
        "reasoningOutputTokens": 0,
    })
}

/// The `thread/tokenUsage/updated` params after a rollback: the total of the turns left, the
/// last of them as `last` and `turnId` (what the real server puts there is not known).
fn rollback_token_usage(state: &ThreadState) -> Value {
    let (input, output) = state.turns.iter().fold((0, 0), |(i, o), t| {
        let (ti, to) = turn_tokens(&t.input, &t.output);
        (i + ti, o + to)
    });
    let last = state
        .turns
        .last()
        .map(|t| turn_tokens(&t.input, &t.output))
        .unwrap_or((0, 0));
    json!({
        "threadId": state.thread_id,
        "turnId": state.turns.last().map(|t| t.id.clone()),
        "tokenUsage": {
            "total": token_breakdown(input, output),
            "last": token_breakdown(last.0, last.1),
            "modelContextWindow": null,
        },
    })
}

fn thread_revert(shared: &Arc<Shared>, p: &ThreadRevertParams, bend: Bend) -> Handled {
    let result = (|| {
        let mut session = shared.session();
        let mut state = loaded_thread(shared, &session, &p.thread_id)?;
        if state.history_mode != HistoryMode::Paginated {
            return Err(RpcError::invalid(
                "thread/revert only supports paginated threads",
            ));
        }
        // A turn still running is not a refusal: the real server interrupts it (`turn/completed`
        // with status `interrupted`) and reverts (seen on 0.155.1 and 0.171.0).
        if !bend.no_effect {
            interrupt_running_turn(shared, &mut session, &mut state)?;
        }
        // The real server unloads the thread and loads the reverted one before it answers
        // (also when the turn is then not found).
        for status in ["notLoaded", "idle"] {
            shared.notify(
                "thread/status/changed",
                json!({ "threadId": state.thread_id, "status": { "type": status } }),
            );
        }
        let Some(index) = state.turns.iter().position(|t| t.id == p.before_turn_id) else {
            return Err(RpcError::invalid(format!(
                "turn not found: {}",
                p.before_turn_id
            )));
        };
        if !bend.no_effect {
            let dropped: Vec<String> = state.turns.drain(index..).map(|t| t.id).collect();
            state.history.push(HistoryEvent::ThreadReverted {
                before_turn_id: p.before_turn_id.clone(),
                dropped,
                at: now_rfc3339(),
            });
            state.updated_at = unix_now();
            save(shared, &state)?;
        }
        let cursor = state.turns.last().map(|t| format!("turn:{}", t.id));
        Ok((
            json!({
                "thread": thread_json(shared, &session, &state, false, false),
                "turnsBackwardsCursor": cursor,
                "itemsBackwardsCursor": cursor.as_ref().map(|c| format!("item:{c}")),
            }),
            state.thread_id.clone(),
        ))
    })();
    match result {
        Ok((response, thread_id)) => Handled {
            reply: Reply::Result(response),
            after: vec![
                json!({ "method": "thread/reverted", "params": { "threadId": thread_id } }),
            ],
            turn: None,
        },
        Err(e) => Handled::from(Err(e)),
    }
}

/// Interrupts the turn running in `state`'s thread, if any: persisted `interrupted`, and
/// `turn/completed` notified with that status. Its pending completion then does nothing.
fn interrupt_running_turn(
    shared: &Shared,
    session: &mut Session,
    state: &mut ThreadState,
) -> Result<(), RpcError> {
    let Some(running) = session.active.remove(&state.thread_id) else {
        return Ok(());
    };
    let Some(turn) = state.turns.iter_mut().find(|t| t.id == running) else {
        return Ok(());
    };
    turn.status = TurnStatus::Interrupted;
    turn.completed_at = Some(unix_now());
    let shown = turn_summary_json(turn);
    state.history.push(HistoryEvent::TurnCompleted {
        turn_id: running,
        status: TurnStatus::Interrupted,
        at: now_rfc3339(),
    });
    state.updated_at = unix_now();
    save(shared, state)?;
    shared.notify(
        "turn/completed",
        json!({ "threadId": state.thread_id, "turn": shown }),
    );
    Ok(())
}

fn turn_start(shared: &Arc<Shared>, p: TurnStartParams, bend: Bend, call: &mut Call) -> Handled {
    let result = (|| {
        let mut session = shared.session();
        let mut state = loaded_thread(shared, &session, &p.thread_id)?;
        let running = session.active.get(&state.thread_id).cloned();
        let input = p
            .input
            .iter()
            .filter_map(|i| match i {
                UserInput::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        // The delivery witness sees the thread as it is before this turn; a faulted call never
        // reaches it, and a failed witness call changes nothing.
        if let (Some(url), false) = (&shared.cfg.witness, bend.faulted) {
            let request = WitnessRequest {
                runtime: RUNTIME.to_owned(),
                target: state.thread_id.clone(),
                input: input.clone(),
                before: json!({ "threadId": state.thread_id, "turnIds": state.turn_ids() }),
            };
            let answer =
                ask_blocking(url, &request).map_err(|e| RpcError::internal(e.to_string()))?;
            call.entry.witness = Some(answer.witness);
        }
        // A turn already runs (on this connection): the real server takes the input into it
        // and answers that turn, still `inProgress` (seen on 0.155.1 and 0.171.0). The mock
        // adds the text to the running turn's input, which its reply then answers too.
        if let Some(running) = running {
            let Some(index) = state.turns.iter().position(|t| t.id == running) else {
                return Err(RpcError::internal(format!(
                    "the running turn {running} is not in the thread"
                )));
            };
            call.entry.detail = Some(format!("input taken into the running turn {running}"));
            if !bend.no_effect {
                let turn = &mut state.turns[index];
                if !input.is_empty() {
                    if !turn.input.is_empty() {
                        turn.input.push('\n');
                    }
                    turn.input.push_str(&input);
                }
                state.updated_at = unix_now();
                save(shared, &state)?;
            }
            let mut shown = turn_json(&state.turns[index], true, false);
            shown["startedAt"] = Value::Null;
            return Ok((json!({ "turn": shown }), None));
        }
        let turn = TurnRecord {
            id: uuid::Uuid::now_v7().hyphenated().to_string(),
            input,
            output: String::new(),
            status: TurnStatus::InProgress,
            started_at: unix_now(),
            completed_at: None,
        };
        let mut shown = turn_json(&turn, true, false);
        // The real answer leaves the start time out; `turn/started` carries it.
        shown["startedAt"] = Value::Null;
        let response = json!({ "turn": shown });
        if bend.no_effect {
            return Ok((response, None));
        }
        state.turns.push(turn.clone());
        state.history.push(HistoryEvent::TurnStarted {
            turn_id: turn.id.clone(),
            at: now_rfc3339(),
        });
        state.updated_at = unix_now();
        save(shared, &state)?;
        session
            .active
            .insert(state.thread_id.clone(), turn.id.clone());
        Ok((
            response,
            Some(PendingTurn {
                thread_id: state.thread_id.clone(),
                turn,
            }),
        ))
    })();
    match result {
        Ok((response, turn)) => Handled {
            reply: Reply::Result(response),
            after: Vec::new(),
            turn,
        },
        Err(e) => Handled::from(Err(e)),
    }
}

// ---- turns ----

fn start_turn(shared: &Arc<Shared>, pending: PendingTurn) {
    let thread_id = pending.thread_id.clone();
    let turn = &pending.turn;
    shared.notify(
        "warning",
        json!({ "threadId": thread_id, "message": model_warning() }),
    );
    shared.notify(
        "thread/status/changed",
        json!({ "threadId": thread_id, "status": { "type": "active", "activeFlags": [] } }),
    );
    shared.notify(
        "turn/started",
        json!({ "threadId": thread_id, "turn": turn_json(turn, true, false) }),
    );
    let now_ms = chrono::Utc::now().timestamp_millis();
    shared.notify(
        "item/started",
        json!({ "item": user_item(turn), "threadId": thread_id, "turnId": turn.id, "startedAtMs": now_ms }),
    );
    shared.notify(
        "item/completed",
        json!({ "item": user_item(turn), "threadId": thread_id, "turnId": turn.id, "completedAtMs": now_ms }),
    );
    if shared.cfg.turn_ms == 0 {
        finish_turn(shared, pending);
    } else {
        let shared = Arc::clone(shared);
        let delay = Duration::from_millis(shared.cfg.turn_ms);
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            finish_turn(&shared, pending);
        });
    }
}

/// Ends a turn: the agent's reply, the turn persisted `completed`, then the closing
/// notifications. Nothing at all when the turn is no longer running (a revert interrupted it
/// meanwhile). The session stays locked throughout, so no request slips in between.
fn finish_turn(shared: &Arc<Shared>, pending: PendingTurn) {
    let PendingTurn { thread_id, turn } = pending;
    let mut session = shared.session();
    if session.active.get(&thread_id) != Some(&turn.id) {
        return;
    }
    let mut state = match read_thread(&shared.cfg.home, &thread_id) {
        Ok(state) => state,
        Err(e) => {
            eprintln!("mock codex app-server: cannot read thread {thread_id}: {e}");
            None
        }
    };
    // The stored turn holds any input taken into it while it ran.
    let mut turn = state
        .as_ref()
        .and_then(|s| s.turns.iter().find(|t| t.id == turn.id))
        .cloned()
        .unwrap_or(turn);
    let reply = crate::reply_to(&turn.input);
    // An empty reply: the turn completes without an agent message item.
    if !reply.is_empty() {
        shared.notify(
            "item/started",
            json!({
                "item": agent_item(&turn, ""),
                "threadId": thread_id,
                "turnId": turn.id,
                "startedAtMs": chrono::Utc::now().timestamp_millis(),
            }),
        );
    }
    let mut rest = reply.as_str();
    while !rest.is_empty() {
        let cut = rest
            .char_indices()
            .skip(1)
            .find(|(_, c)| c.is_whitespace())
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        let (delta, tail) = rest.split_at(cut);
        shared.notify(
            "item/agentMessage/delta",
            json!({ "threadId": thread_id, "turnId": turn.id, "itemId": turn.agent_item_id(), "delta": delta }),
        );
        rest = tail;
    }
    if !reply.is_empty() {
        shared.notify(
            "item/completed",
            json!({
                "item": agent_item(&turn, &reply),
                "threadId": thread_id,
                "turnId": turn.id,
                "completedAtMs": chrono::Utc::now().timestamp_millis(),
            }),
        );
    }
    turn.output = reply.clone();
    turn.status = TurnStatus::Completed;
    turn.completed_at = Some(unix_now());
    if let Some(state) = state.as_mut() {
        if let Some(stored) = state.turns.iter_mut().find(|t| t.id == turn.id) {
            *stored = turn.clone();
        }
        state.history.push(HistoryEvent::TurnCompleted {
            turn_id: turn.id.clone(),
            status: TurnStatus::Completed,
            at: now_rfc3339(),
        });
        state.updated_at = unix_now();
        if let Err(e) = save_thread(&shared.cfg.home, state) {
            eprintln!(
                "mock codex app-server: cannot persist turn {}: {e}",
                turn.id
            );
        }
    }
    session.active.remove(&thread_id);
    let (input_tokens, output_tokens) = turn_tokens(&turn.input, &reply);
    let usage = token_breakdown(input_tokens, output_tokens);
    shared.notify(
        "thread/tokenUsage/updated",
        json!({
            "threadId": thread_id,
            "turnId": turn.id,
            "tokenUsage": { "total": usage, "last": usage, "modelContextWindow": null },
        }),
    );
    shared.notify(
        "account/rateLimits/updated",
        json!({ "rateLimits": rate_limits() }),
    );
    if shared.cfg.version.has_read_state() {
        let first = state.as_ref().and_then(|s| s.turns.first());
        shared.notify(
            "thread/readState/changed",
            json!({ "threadId": thread_id, "readState": read_state(first) }),
        );
    }
    shared.notify(
        "thread/status/changed",
        json!({ "threadId": thread_id, "status": { "type": "idle" } }),
    );
    shared.notify(
        "turn/completed",
        json!({ "threadId": thread_id, "turn": turn_summary_json(&turn) }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_order() {
        assert_eq!(Version::parse("0.155.0").unwrap(), Version(0, 155, 0));
        assert_eq!(
            Version::parse("v0.156.2-alpha.1").unwrap(),
            Version(0, 156, 2)
        );
        assert!(Version::parse("0.155").is_err());
        assert!(Version::parse("new").is_err());
        assert!(Version(0, 155, 9).has_rollback());
        assert!(!Version(0, 156, 0).has_rollback());
        assert!(!Version(1, 0, 0).has_rollback());
    }

    #[test]
    fn unknown_methods_and_bad_params_are_invalid_requests() {
        let e = decode(Version(0, 155, 0), "thread/nope", None)
            .err()
            .unwrap();
        assert_eq!(e.code, INVALID_REQUEST);
        assert!(e.message.starts_with(
            "Invalid request: unknown variant `thread/nope`, expected one of `initialize`"
        ));
        let e = decode(
            Version(0, 156, 0),
            "thread/rollback",
            Some(json!({"threadId": "x", "numTurns": 1})),
        )
        .err()
        .unwrap();
        assert!(
            e.message.contains("unknown variant `thread/rollback`"),
            "{}",
            e.message
        );
        assert!(!e.message.contains("`thread/rollback`, `"), "{}", e.message);
        let e = decode(
            Version(0, 155, 0),
            "thread/rollback",
            Some(json!({"threadId": "x"})),
        )
        .err()
        .unwrap();
        assert_eq!(e.message, "Invalid request: missing field `numTurns`");
        let e = decode(
            Version(0, 155, 0),
            "thread/rollback",
            Some(json!({"threadId": "x", "numTurns": -1})),
        )
        .err()
        .unwrap();
        assert!(e.message.contains("expected u32"), "{}", e.message);
        assert!(decode(Version(0, 155, 0), "thread/start", None).is_ok());
    }

    #[test]
    fn stale_running_turns_show_as_interrupted() {
        let turn = TurnRecord {
            id: "t".into(),
            input: "hi".into(),
            output: String::new(),
            status: TurnStatus::InProgress,
            started_at: 1,
            completed_at: None,
        };
        assert_eq!(turn_json(&turn, false, true)["status"], "interrupted");
        assert_eq!(turn_json(&turn, true, true)["status"], "inProgress");
    }
}
