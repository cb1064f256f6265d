//! The HTTP side of the mock OpenCode server: routes, payload checks, errors, faults and the
//! journal.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path as RoutePath, State};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Map, Value};

use super::ids::{self, IdKind};
use super::state::{self, Model, SessionState, StoredMessage};
use super::RUNTIME;
use crate::faults::{FaultKind, FaultPlan};
use crate::journal::{Journal, JournalEntry};
use crate::witness::{ask, WitnessRequest};

/// Everything a request handler needs.
pub(crate) struct App {
    /// The runtime home (`$XDG_DATA_HOME/opencode`).
    pub home: PathBuf,
    /// The call journal.
    pub journal: Journal,
    /// The merged configuration, as `GET /config` returns it.
    pub config: Value,
    /// Snapshots on (`snapshot` is not `false`).
    pub snapshots: bool,
    /// The directory new sessions work in (the server's cwd).
    pub directory: String,
    /// The model replies are attributed to (`model` of the config, else `mock/mock-model`).
    pub model: Model,
    /// Serialises read-modify-write of session files inside this process (held across the
    /// delivery witness call of a prompt, so the state the witness is told about stays true).
    pub lock: tokio::sync::Mutex<()>,
    /// The delivery witness URL ([`crate::witness::WITNESS_ENV`] of the server process).
    pub witness: Option<String>,
    /// The prompts running now, by session. As observed on the real server, a session with a
    /// running prompt answers `revert` and `unrevert` with 409 `SessionBusyError`.
    pub running: std::sync::Mutex<std::collections::BTreeMap<String, usize>>,
}

impl App {
    /// Whether a prompt of session `id` is running.
    fn is_busy(&self, id: &str) -> bool {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .is_some_and(|n| *n > 0)
    }
}

/// A prompt of one session, running from its arrival until it has been answered (a slow model,
/// here a `hang_ms` fault, included).
struct RunningPrompt {
    app: Shared,
    session: String,
}

impl RunningPrompt {
    fn start(app: &Shared, session: &str) -> RunningPrompt {
        *app.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(session.to_owned())
            .or_default() += 1;
        RunningPrompt {
            app: Arc::clone(app),
            session: session.to_owned(),
        }
    }
}

impl Drop for RunningPrompt {
    fn drop(&mut self) {
        let mut running = self.app.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = running.get_mut(&self.session) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                running.remove(&self.session);
            }
        }
    }
}

type Shared = Arc<App>;

/// The router of the mock server.
pub(crate) fn router(app: Shared) -> Router {
    Router::new()
        .route("/global/health", get(health))
        .route("/config", get(config))
        .route("/session", post(create_session).get(list_sessions))
        .route("/session/{id}", get(get_session))
        .route("/session/{id}/message", get(list_messages).post(prompt))
        .route("/session/{id}/revert", post(revert))
        .route("/session/{id}/unrevert", post(unrevert))
        .fallback(unknown_route)
        .method_not_allowed_fallback(unknown_route)
        .with_state(app)
}

/// An error answer in one of the real runtime's shapes.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    body: Value,
}

impl ApiError {
    /// 404 `NotFoundError`, as for a `ses_...` id that names no session.
    pub fn session_not_found(id: &str) -> Self {
        ApiError {
            status: StatusCode::NOT_FOUND,
            body: json!({ "name": "NotFoundError", "data": { "message": format!("Session not found: {id}") } }),
        }
    }

    /// 400 `BadRequest` from payload validation.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            body: json!({ "name": "BadRequest", "data": { "message": message.into(), "kind": "Payload" } }),
        }
    }

    /// 500 `UnknownError`.
    pub fn unknown(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            body: json!({ "name": "UnknownError", "data": { "message": message.into() } }),
        }
    }

    /// 409 `SessionBusyError`, the typed error the session routes declare for a busy session.
    pub fn busy(id: &str) -> Self {
        ApiError {
            status: StatusCode::CONFLICT,
            body: json!({
                "_tag": "SessionBusyError",
                "sessionID": id,
                "message": format!("Session is busy: {id}"),
            }),
        }
    }

    fn message(&self) -> String {
        self.body
            .pointer("/data/message")
            .or_else(|| self.body.get("message"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}

/// What OpenCode 1.18.33 says in a 500 `UnknownError` it raised inside a handler.
const UNEXPECTED: &str = "Unexpected server error. Check server logs for details.";

/// A request body as received.
enum Body {
    Empty,
    Json(Value),
    Invalid { raw: String },
}

impl Body {
    fn parse(bytes: &Bytes) -> Body {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Body::Empty;
        }
        match serde_json::from_slice(bytes) {
            Ok(value) => Body::Json(value),
            Err(_) => Body::Invalid {
                raw: String::from_utf8_lossy(bytes).into_owned(),
            },
        }
    }

    /// What the journal records.
    fn journal_value(&self) -> Value {
        match self {
            Body::Empty => Value::Null,
            Body::Json(v) => v.clone(),
            Body::Invalid { raw, .. } => Value::String(raw.clone()),
        }
    }

    /// The payload as an object; an empty body decodes as `{}`.
    fn object(&self) -> Result<Map<String, Value>, ApiError> {
        match self {
            Body::Empty => Ok(Map::new()),
            Body::Json(Value::Object(map)) => Ok(map.clone()),
            Body::Json(other) => Err(ApiError::bad_request(format!(
                "Expected object, got {other}"
            ))),
            // As the real server: a body that is not JSON is no validation error but a 500.
            Body::Invalid { .. } => Err(ApiError::unknown(UNEXPECTED)),
        }
    }
}

fn at(path: &str) -> String {
    format!("\n  at {path}")
}

/// An id field checked like the real schema: a string starting with `prefix`.
fn id_field(
    map: &Map<String, Value>,
    key: &str,
    prefix: &str,
    required: bool,
) -> Result<Option<String>, ApiError> {
    let path = format!("[\"{key}\"]");
    match map.get(key) {
        None if required => Err(ApiError::bad_request(format!("Missing key{}", at(&path)))),
        None => Ok(None),
        Some(Value::String(s)) if s.starts_with(prefix) => Ok(Some(s.clone())),
        Some(Value::String(s)) => Err(ApiError::bad_request(format!(
            "Expected a string starting with \"{prefix}\", got {}{}",
            Value::String(s.clone()),
            at(&path)
        ))),
        Some(other) => Err(ApiError::bad_request(format!(
            "Expected string, got {other}{}",
            at(&path)
        ))),
    }
}

fn optional_string(map: &Map<String, Value>, key: &str) -> Result<Option<String>, ApiError> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(ApiError::bad_request(format!(
            "Expected string, got {other}{}",
            at(&format!("[\"{key}\"]"))
        ))),
    }
}

/// `parts` of a prompt: an array of objects with a `type`; text parts need a string `text`.
fn prompt_parts(map: &Map<String, Value>) -> Result<Vec<Value>, ApiError> {
    let parts = match map.get("parts") {
        None => {
            return Err(ApiError::bad_request(format!(
                "Missing key{}",
                at("[\"parts\"]")
            )))
        }
        Some(Value::Array(parts)) => parts,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Expected array, got {other}{}",
                at("[\"parts\"]")
            )))
        }
    };
    let mut out = Vec::with_capacity(parts.len());
    for (index, part) in parts.iter().enumerate() {
        let path = format!("[\"parts\"][{index}]");
        let Value::Object(fields) = part else {
            return Err(ApiError::bad_request(format!(
                "Expected object, got {part}{}",
                at(&path)
            )));
        };
        match fields.get("type") {
            Some(Value::String(t)) if t == "text" => match fields.get("text") {
                Some(Value::String(_)) => {}
                None => {
                    return Err(ApiError::bad_request(format!(
                        "Missing key{}",
                        at(&format!("{path}[\"text\"]"))
                    )))
                }
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "Expected string, got {other}{}",
                        at(&format!("{path}[\"text\"]"))
                    )))
                }
            },
            Some(Value::String(_)) => {}
            None => {
                return Err(ApiError::bad_request(format!(
                    "Missing key{}",
                    at(&format!("{path}[\"type\"]"))
                )))
            }
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "Expected string, got {other}{}",
                    at(&format!("{path}[\"type\"]"))
                )))
            }
        }
        if let Some(id) = fields.get("id") {
            if !id.as_str().is_some_and(|s| s.starts_with("prt")) {
                return Err(ApiError::bad_request(format!(
                    "Expected a string starting with \"prt\", got {id}{}",
                    at(&format!("{path}[\"id\"]"))
                )));
            }
        }
        out.push(part.clone());
    }
    Ok(out)
}

/// `model` of a prompt: `{providerID, modelID}`.
fn prompt_model(map: &Map<String, Value>, default: &Model) -> Result<Model, ApiError> {
    match map.get("model") {
        None => Ok(default.clone()),
        Some(Value::Object(m)) => {
            let field = |key: &str| match m.get(key) {
                Some(Value::String(s)) => Ok(s.clone()),
                None => Err(ApiError::bad_request(format!(
                    "Missing key{}",
                    at(&format!("[\"model\"][\"{key}\"]"))
                ))),
                Some(other) => Err(ApiError::bad_request(format!(
                    "Expected string, got {other}{}",
                    at(&format!("[\"model\"][\"{key}\"]"))
                ))),
            };
            Ok(Model {
                provider_id: field("providerID")?,
                model_id: field("modelID")?,
            })
        }
        Some(other) => Err(ApiError::bad_request(format!(
            "Expected object, got {other}{}",
            at("[\"model\"]")
        ))),
    }
}

/// The session `id`, or the real 404.
fn load_session(app: &App, id: &str) -> Result<SessionState, ApiError> {
    match state::load(&app.home, id) {
        Ok(Some(state)) => Ok(state),
        Ok(None) => Err(ApiError::session_not_found(id)),
        Err(e) => Err(ApiError::unknown(e.to_string())),
    }
}

fn save_session(app: &App, state: &SessionState) -> Result<(), ApiError> {
    state::save(&app.home, state)
        .map_err(|e| ApiError::unknown(format!("cannot store session {}: {e}", state.id())))
}

fn info_json(state: &SessionState) -> Value {
    serde_json::to_value(&state.info).unwrap_or(Value::Null)
}

fn message_json(message: &StoredMessage) -> Value {
    json!({ "info": message.info, "parts": message.parts })
}

/// What a call is, for the journal and the fault plan.
struct Call {
    /// The route template, e.g. `POST /session/{id}/revert`.
    template: &'static str,
    /// The route name fault rules match (`revert`, `message`, ...).
    route: &'static str,
    /// The session addressed, if any.
    target: Option<String>,
    /// The body (or nothing) as received.
    request: Value,
}

/// A call that passed the session id check and the fault plan.
struct Admitted {
    /// Its journal entry (outcome already set when a fault matched).
    entry: JournalEntry,
    /// `false` for a no-effect fault: answer as on success, persist nothing.
    effect: bool,
    /// The entry was already journaled (a hang that answers late).
    journaled: bool,
    /// A fault rule matched: the call never reaches the delivery witness.
    faulted: bool,
}

/// Runs one call: journal, session id check, faults, then `op` under the state lock. `op`
/// receives `effect = false` for a no-effect fault: it must answer as on success but persist
/// nothing.
async fn serve_call<F>(app: Shared, call: Call, op: F) -> Response
where
    F: FnOnce(&App, bool) -> Result<Value, ApiError> + Send,
{
    let route = call.route;
    let admitted = match admit(&app, call).await {
        Ok(admitted) => admitted,
        Err(response) => return response,
    };
    let Admitted {
        mut entry,
        effect,
        journaled,
        ..
    } = admitted;
    let result = {
        let _guard = app.lock.lock().await;
        op(&app, effect)
    };
    if route == "create" && entry.target.is_none() {
        if let Ok(id) = result.as_ref().map(|v| v.get("id").and_then(Value::as_str)) {
            entry.target = id.map(str::to_owned);
        }
    }
    if journaled {
        return respond(result);
    }
    finish(&app, entry, result)
}

/// The first half of every call: the journal entry, the session id check and the fault plan.
/// `Err` is the whole answer (already journaled).
async fn admit(app: &App, call: Call) -> Result<Admitted, Response> {
    let mut entry = JournalEntry::new(RUNTIME, call.template).request(call.request);
    if let Some(target) = &call.target {
        entry = entry.target(target.clone());
    }
    if let Some(target) = &call.target {
        if !target.starts_with(IdKind::Session.prefix()) {
            // Observed: an id without the `ses` prefix fails inside the server (500), not in
            // payload validation, and the server hides why.
            let error = ApiError::unknown(UNEXPECTED);
            return Err(finish(app, entry, Err(error)));
        }
    }
    let plan = match FaultPlan::load(&crate::faults_path(&app.home)) {
        Ok(plan) => plan,
        Err(e) => return Err(finish(app, entry, Err(ApiError::unknown(e)))),
    };
    let target = call.target.as_deref().unwrap_or("*");
    let rule = plan
        .find(target, call.route)
        .or_else(|| plan.find("*", call.route))
        .cloned();
    let mut effect = true;
    let mut journaled = false;
    let mut faulted = rule.is_some();
    if let Some(rule) = rule {
        entry.outcome = rule.kind.outcome();
        match rule.kind {
            FaultKind::Crash => {
                entry.detail =
                    Some("injected crash: exiting with status 134 before answering".into());
                app.journal.record(&entry);
                std::process::exit(134);
            }
            FaultKind::Hang => {
                entry.detail = Some(match rule.hang_ms {
                    Some(ms) => format!("injected hang: answering after {ms} ms"),
                    None => "injected hang: held until the fault is lifted".to_owned(),
                });
                app.journal.record(&entry);
                journaled = true;
                match rule.hang_ms {
                    Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                    None => {
                        let path = crate::faults_path(&app.home);
                        while FaultPlan::held(&path, target, call.route)
                            || FaultPlan::held(&path, "*", call.route)
                        {
                            tokio::time::sleep(crate::faults::HOLD_POLL).await;
                        }
                        // Lifted: the call goes ahead as if no fault had been planted, and
                        // journals its own outcome.
                        entry.outcome = "ok".to_owned();
                        entry.detail = Some("held until the fault was lifted".to_owned());
                        journaled = false;
                        faulted = false;
                    }
                }
            }
            FaultKind::Error => {
                let error = ApiError::unknown(format!(
                    "injected error: {} failed for {target}",
                    call.route
                ));
                return Err(finish(app, entry, Err(error)));
            }
            FaultKind::UnknownSession => {
                return Err(finish(app, entry, Err(ApiError::session_not_found(target))));
            }
            FaultKind::Busy => return Err(finish(app, entry, Err(ApiError::busy(target)))),
            FaultKind::NoEffect => {
                effect = false;
                entry.detail = Some("injected no-effect: answered success, changed nothing".into());
            }
        }
    }
    Ok(Admitted {
        entry,
        effect,
        journaled,
        faulted,
    })
}

fn finish(app: &App, mut entry: JournalEntry, result: Result<Value, ApiError>) -> Response {
    if let Err(error) = &result {
        if entry.outcome == "ok" {
            entry.outcome = "error".to_owned();
        }
        let message = error.message();
        entry.detail = Some(match entry.detail.take() {
            Some(detail) => format!("{detail}; {} {message}", error.status.as_u16()),
            None => format!("{} {message}", error.status.as_u16()),
        });
    }
    app.journal.record(&entry);
    respond(result)
}

fn respond(result: Result<Value, ApiError>) -> Response {
    match result {
        Ok(value) => (StatusCode::OK, Json(value)).into_response(),
        Err(error) => error.into_response(),
    }
}

fn plain_call(template: &'static str, route: &'static str, target: Option<String>) -> Call {
    Call {
        template,
        route,
        target,
        request: Value::Null,
    }
}

async fn health(State(app): State<Shared>) -> Response {
    let call = plain_call("GET /global/health", "health", None);
    serve_call(app, call, |_, _| {
        Ok(json!({ "healthy": true, "version": state::VERSION }))
    })
    .await
}

async fn config(State(app): State<Shared>) -> Response {
    let call = plain_call("GET /config", "config", None);
    serve_call(app, call, |app, _| Ok(app.config.clone())).await
}

async fn list_sessions(State(app): State<Shared>) -> Response {
    let call = plain_call("GET /session", "list", None);
    serve_call(app, call, |app, _| {
        let sessions = state::list(&app.home).map_err(|e| ApiError::unknown(e.to_string()))?;
        Ok(Value::Array(sessions.iter().map(info_json).collect()))
    })
    .await
}

async fn create_session(State(app): State<Shared>, bytes: Bytes) -> Response {
    let body = Body::parse(&bytes);
    let call = Call {
        template: "POST /session",
        route: "create",
        target: None,
        request: body.journal_value(),
    };
    serve_call(app, call, move |app, effect| {
        let map = body.object()?;
        let title = optional_string(&map, "title")?;
        let parent = id_field(&map, "parentID", IdKind::Session.prefix(), false)?;
        let id = ids::ascending(IdKind::Session);
        let state = SessionState::new(&id, &app.directory, title.as_deref(), parent.as_deref());
        if effect {
            save_session(app, &state)?;
        }
        Ok(info_json(&state))
    })
    .await
}

async fn get_session(State(app): State<Shared>, RoutePath(id): RoutePath<String>) -> Response {
    let call = plain_call("GET /session/{id}", "get", Some(id.clone()));
    serve_call(app, call, move |app, _| {
        Ok(info_json(&load_session(app, &id)?))
    })
    .await
}

async fn list_messages(State(app): State<Shared>, RoutePath(id): RoutePath<String>) -> Response {
    let call = plain_call("GET /session/{id}/message", "messages", Some(id.clone()));
    serve_call(app, call, move |app, _| {
        let state = load_session(app, &id)?;
        Ok(Value::Array(
            state.messages.iter().map(message_json).collect(),
        ))
    })
    .await
}

async fn prompt(
    State(app): State<Shared>,
    RoutePath(id): RoutePath<String>,
    bytes: Bytes,
) -> Response {
    let body = Body::parse(&bytes);
    let call = Call {
        template: "POST /session/{id}/message",
        route: "message",
        target: Some(id.clone()),
        request: body.journal_value(),
    };
    let _running = RunningPrompt::start(&app, &id);
    let Admitted {
        mut entry,
        effect,
        journaled,
        faulted,
    } = match admit(&app, call).await {
        Ok(admitted) => admitted,
        Err(response) => return response,
    };
    let result = {
        let _guard = app.lock.lock().await;
        match prepare_prompt(&app, &id, &body) {
            Err(e) => Err(e),
            Ok(prepared) => {
                // The delivery witness sees the session as it is before this prompt; a
                // faulted call never reaches it, and a failed witness call changes nothing.
                let witnessed = match (&app.witness, faulted) {
                    (Some(url), false) => {
                        let request = prepared.witness_request(&id);
                        match ask(url, &request).await {
                            Ok(answer) => {
                                entry.witness = Some(answer.witness);
                                Ok(())
                            }
                            Err(e) => Err(ApiError::unknown(e.to_string())),
                        }
                    }
                    _ => Ok(()),
                };
                witnessed.and_then(|()| apply_prompt(&app, &id, prepared, effect))
            }
        }
    };
    if journaled {
        return respond(result);
    }
    finish(&app, entry, result)
}

/// A validated prompt, not applied yet.
struct PreparedPrompt {
    state: SessionState,
    user_id: String,
    parts: Vec<Value>,
    model: Model,
    agent: String,
    no_reply: bool,
}

impl PreparedPrompt {
    /// What the delivery witness is told: the user message this prompt creates and the
    /// messages that are effective before it (without those a pending revert cleans up).
    fn witness_request(&self, session_id: &str) -> WitnessRequest {
        let mut effective = self.state.clone();
        effective.cleanup_revert();
        let text = self
            .parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n");
        WitnessRequest {
            runtime: RUNTIME.to_owned(),
            target: session_id.to_owned(),
            input: text,
            before: json!({
                "sessionId": session_id,
                "messageId": self.user_id,
                "messageIds": effective.message_ids(),
            }),
        }
    }
}

/// Validates a prompt's body and loads its session; changes nothing.
fn prepare_prompt(app: &App, id: &str, body: &Body) -> Result<PreparedPrompt, ApiError> {
    let map = body.object()?;
    let message_id = id_field(&map, "messageID", IdKind::Message.prefix(), false)?;
    let parts = prompt_parts(&map)?;
    let model = prompt_model(&map, &app.model)?;
    let agent = optional_string(&map, "agent")?.unwrap_or_else(|| "build".to_owned());
    let no_reply = map.get("noReply").and_then(Value::as_bool) == Some(true);
    let state = load_session(app, id)?;
    let user_id = message_id.unwrap_or_else(|| ids::ascending(IdKind::Message));
    Ok(PreparedPrompt {
        state,
        user_id,
        parts,
        model,
        agent,
        no_reply,
    })
}

/// Applies a prepared prompt: the pending revert's cleanup, the user message, the reply.
fn apply_prompt(
    app: &App,
    id: &str,
    prepared: PreparedPrompt,
    effect: bool,
) -> Result<Value, ApiError> {
    let PreparedPrompt {
        mut state,
        user_id,
        parts,
        model,
        agent,
        no_reply,
    } = prepared;
    // A pending revert is applied first: the reverted messages are deleted for good.
    state.cleanup_revert();
    let user = state::user_message(id, &user_id, parts, &model, &agent);
    let prompt_text = user.text();
    match state.messages.iter().position(|m| m.id() == user_id) {
        Some(index) => state.messages[index] = user.clone(),
        None => state.messages.push(user.clone()),
    }
    let answer = if no_reply {
        user
    } else {
        let snapshot = app.snapshots.then(ids::snapshot_hash);
        let assistant = state::assistant_message(
            id,
            &ids::ascending(IdKind::Message),
            &user_id,
            &crate::reply_to(&prompt_text),
            &model,
            &app.directory,
            snapshot.as_deref(),
        );
        state.messages.push(assistant.clone());
        assistant
    };
    state.touch();
    if effect {
        save_session(app, &state)?;
    }
    Ok(message_json(&answer))
}

async fn revert(
    State(app): State<Shared>,
    RoutePath(id): RoutePath<String>,
    bytes: Bytes,
) -> Response {
    let body = Body::parse(&bytes);
    let call = Call {
        template: "POST /session/{id}/revert",
        route: "revert",
        target: Some(id.clone()),
        request: body.journal_value(),
    };
    serve_call(app, call, move |app, effect| {
        let map = body.object()?;
        let message_id =
            id_field(&map, "messageID", IdKind::Message.prefix(), true)?.unwrap_or_default();
        let part_id = id_field(&map, "partID", IdKind::Part.prefix(), false)?;
        let mut state = load_session(app, &id)?;
        if app.is_busy(&id) {
            return Err(ApiError::busy(&id));
        }
        if !effect {
            return Ok(info_json(&state));
        }
        if state.apply_revert(&message_id, part_id.as_deref(), app.snapshots) {
            save_session(app, &state)?;
        }
        Ok(info_json(&state))
    })
    .await
}

async fn unrevert(
    State(app): State<Shared>,
    RoutePath(id): RoutePath<String>,
    bytes: Bytes,
) -> Response {
    let body = Body::parse(&bytes);
    let call = Call {
        template: "POST /session/{id}/unrevert",
        route: "unrevert",
        target: Some(id.clone()),
        request: body.journal_value(),
    };
    serve_call(app, call, move |app, effect| {
        let mut state = load_session(app, &id)?;
        if app.is_busy(&id) {
            return Err(ApiError::busy(&id));
        }
        if effect && state.unrevert() {
            save_session(app, &state)?;
        }
        Ok(info_json(&state))
    })
    .await
}

async fn unknown_route(State(app): State<Shared>, method: Method, uri: Uri) -> Response {
    let mut entry = JournalEntry::new(RUNTIME, format!("{method} {}", uri.path()));
    entry.outcome = "error".to_owned();
    entry.detail = Some("404 no such route in the mock".to_owned());
    app.journal.record(&entry);
    (
        StatusCode::NOT_FOUND,
        Json(json!({ "name": "NotFoundError", "data": { "message": format!("Not found: {method} {}", uri.path()) } })),
    )
        .into_response()
}
