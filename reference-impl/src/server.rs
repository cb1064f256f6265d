//! The reference server: [`app`] serves driver protocol v1 over the reference implementation,
//! [`serve`] binds it to an address.
//!
//! Every answer, errors included, is a body of the protocol document: a spec refusal is a 200
//! `RewindResponse`, anything else that goes wrong is a `DriverError` with a 4xx/5xx status.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use rewind_driver_protocol as wire;
use serde::de::DeserializeOwned;

use crate::driver::{ReferenceDriver, Session};

/// What the server shares between requests: the deployment and the open sessions.
#[derive(Debug, Default)]
pub struct ServerState {
    driver: ReferenceDriver,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    next_session: AtomicU64,
}

impl ServerState {
    /// A server for this deployment of the reference.
    pub fn new(driver: ReferenceDriver) -> Arc<Self> {
        Arc::new(ServerState {
            driver,
            ..ServerState::default()
        })
    }

    fn session(&self, id: &str) -> Result<Arc<Session>, ApiError> {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
            .ok_or_else(|| unknown_session(id))
    }
}

/// A non-2xx answer.
#[derive(Debug)]
pub struct ApiError(StatusCode, wire::DriverError);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(self.1)).into_response()
    }
}

fn unknown_session(id: &str) -> ApiError {
    ApiError(
        StatusCode::NOT_FOUND,
        wire::DriverError::new("unknown_session", format!("no open session `{id}`")),
    )
}

fn failed(error: wire::DriverError) -> ApiError {
    let status = match error.error.code.as_str() {
        "bad_request" => StatusCode::BAD_REQUEST,
        "database_unreachable" => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    ApiError(status, error)
}

/// Parses a JSON body into a wire type; a body that does not fit is a `bad_request`.
fn body<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError(
            StatusCode::BAD_REQUEST,
            wire::DriverError::new("bad_request", format!("the request body does not fit: {e}")),
        )
    })
}

/// The router of protocol v1.
pub fn app(state: Arc<ServerState>) -> Router {
    Router::new()
        .route(wire::HANDSHAKE_PATH, get(handshake))
        .route("/v1/sessions", post(attach))
        .route("/v1/sessions/{session}", delete(detach))
        .route("/v1/sessions/{session}/rewind", post(rewind))
        .route("/v1/sessions/{session}/messages", post(send_message))
        .route("/v1/sessions/{session}/deliveries", post(deliver))
        .route(
            "/v1/sessions/{session}/recovery-points/prune",
            post(prune_recovery_points),
        )
        .route("/v1/sessions/{session}/read-state", get(read_state))
        .route("/v1/sessions/{session}/sync", post(sync_messages))
        .route("/v1/sessions/{session}/read", post(read))
        .route("/v1/sessions/{session}/events/take", post(take_events))
        .fallback(|| async {
            ApiError(
                StatusCode::NOT_FOUND,
                wire::DriverError::new("not_found", "driver protocol v1 has no such endpoint"),
            )
        })
        .with_state(state)
}

async fn handshake(State(state): State<Arc<ServerState>>) -> Json<wire::Handshake> {
    Json(wire::Handshake {
        protocol: wire::PROTOCOL.to_owned(),
        version: wire::VERSION,
        implementation: state.driver.implementation(),
    })
}

async fn attach(
    State(state): State<Arc<ServerState>>,
    bytes: Bytes,
) -> Result<(StatusCode, Json<wire::Session>), ApiError> {
    let request: wire::AttachRequest = body(&bytes)?;
    let session = state.driver.attach(&request).await.map_err(failed)?;
    let id = format!(
        "s-{}",
        state.next_session.fetch_add(1, Ordering::Relaxed) + 1
    );
    state
        .sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id.clone(), Arc::new(session));
    tracing::debug!(session = id, database = request.database.name, "attached");
    Ok((StatusCode::CREATED, Json(wire::Session { session_id: id })))
}

async fn detach(
    State(state): State<Arc<ServerState>>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let session = state
        .sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&id)
        .ok_or_else(|| unknown_session(&id))?;
    session.detach().await;
    Ok(StatusCode::NO_CONTENT)
}

async fn rewind(
    State(state): State<Arc<ServerState>>,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Json<wire::RewindResponse>, ApiError> {
    let session = state.session(&id)?;
    let request: wire::RewindRequest = body(&bytes)?;
    session.rewind(&request).await.map(Json).map_err(failed)
}

async fn send_message(
    State(state): State<Arc<ServerState>>,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<(StatusCode, Json<wire::SentMessage>), ApiError> {
    let session = state.session(&id)?;
    let message: wire::SendMessage = body(&bytes)?;
    let sent = session.send_message(&message).await.map_err(failed)?;
    Ok((StatusCode::CREATED, Json(sent)))
}

async fn deliver(
    State(state): State<Arc<ServerState>>,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Json<wire::DeliveryReport>, ApiError> {
    let session = state.session(&id)?;
    let request: wire::DeliverRequest = body(&bytes)?;
    session.deliver(&request).await.map(Json).map_err(failed)
}

async fn prune_recovery_points(
    State(state): State<Arc<ServerState>>,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Json<wire::PrunedPoints>, ApiError> {
    let session = state.session(&id)?;
    let request: wire::PruneRequest = body(&bytes)?;
    session
        .prune_recovery_points(&request)
        .await
        .map(Json)
        .map_err(failed)
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReadStateQuery {
    scope_id: String,
    user_id: String,
}

async fn read_state(
    State(state): State<Arc<ServerState>>,
    Path(id): Path<String>,
    query: Result<Query<ReadStateQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<wire::ReadStateAnswer>, ApiError> {
    let session = state.session(&id)?;
    let Query(query) = query.map_err(|e| {
        ApiError(
            StatusCode::BAD_REQUEST,
            wire::DriverError::new(
                "bad_request",
                format!("read-state needs `scopeId` and `userId`: {e}"),
            ),
        )
    })?;
    session
        .read_state(&query.scope_id, &query.user_id)
        .await
        .map(Json)
        .map_err(failed)
}

async fn sync_messages(
    State(state): State<Arc<ServerState>>,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Json<wire::SyncPage>, ApiError> {
    let session = state.session(&id)?;
    let request: wire::SyncRequest = body(&bytes)?;
    session
        .sync_messages(&request)
        .await
        .map(Json)
        .map_err(failed)
}

async fn read(
    State(state): State<Arc<ServerState>>,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Json<wire::ReadAnswer>, ApiError> {
    let session = state.session(&id)?;
    let request: wire::ReadRequest = body(&bytes)?;
    session.read(&request).await.map(Json).map_err(failed)
}

async fn take_events(
    State(state): State<Arc<ServerState>>,
    Path(id): Path<String>,
) -> Result<Json<wire::EventBatch>, ApiError> {
    Ok(Json(state.session(&id)?.take_events()))
}

/// Serves `app` on `addr` until `shutdown` resolves; `on_ready` gets the bound address (the
/// port is chosen by the system when `addr` has port 0).
pub async fn serve(
    addr: SocketAddr,
    state: Arc<ServerState>,
    on_ready: impl FnOnce(SocketAddr),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    on_ready(listener.local_addr()?);
    axum::serve(listener, app(state))
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt as _;

    async fn call(method: &str, uri: &str, body: &str) -> (StatusCode, serde_json::Value) {
        let response = app(ServerState::new(ReferenceDriver::default()))
            .oneshot(
                Request::builder()
                    .method(method)
                    .uri(uri)
                    .header("content-type", "application/json")
                    .body(Body::from(body.to_owned()))
                    .expect("a request"),
            )
            .await
            .expect("an answer");
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("a body");
        let value = if bytes.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_slice(&bytes).expect("JSON")
        };
        (status, value)
    }

    fn contract() -> &'static wire::schema::Contract {
        wire::schema::Contract::get().expect("the protocol document")
    }

    #[tokio::test]
    async fn the_handshake_names_the_protocol_and_version() {
        let (status, body) = call("GET", "/rewind-driver", "").await;
        assert_eq!(status, StatusCode::OK);
        contract().validate("Handshake", &body).expect("on schema");
        assert_eq!(body["version"], 1);
    }

    #[tokio::test]
    async fn an_unknown_session_is_a_driver_error() {
        let (status, body) = call(
            "POST",
            "/v1/sessions/s-404/rewind",
            r#"{"actor":{"kind":"system"},"scopeId":"a","targetMessageId":"b"}"#,
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        contract()
            .validate("DriverError", &body)
            .expect("on schema");
        assert_eq!(body["error"]["code"], "unknown_session");
    }

    #[tokio::test]
    async fn deliveries_are_served_per_session() {
        let (status, body) = call(
            "POST",
            "/v1/sessions/s-404/deliveries",
            r#"{"messageId":"m-1"}"#,
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        contract()
            .validate("DriverError", &body)
            .expect("on schema");
        assert_eq!(body["error"]["code"], "unknown_session");
    }

    #[tokio::test]
    async fn a_body_that_does_not_fit_is_a_bad_request() {
        let (status, body) = call("POST", "/v1/sessions", r#"{"database": 1}"#).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        contract()
            .validate("DriverError", &body)
            .expect("on schema");
        assert_eq!(body["error"]["code"], "bad_request");
    }

    #[tokio::test]
    async fn an_unreachable_database_is_reported_as_such() {
        let request = serde_json::json!({
            "database": {"url": "postgres://nobody@127.0.0.1:1/none", "name": "none"},
            "runtimes": {
                "codexProgram": "codex", "codexArgs": ["app-server"], "codexEnv": {},
                "claudeProgram": "claude", "claudeEnv": {}, "claudeCwd": ".",
                "opencodeUrl": "http://127.0.0.1:1"
            },
            "limits": {"restoreTimeoutMs": 1000, "requestTimeoutMs": 1000}
        });
        let (status, body) = call("POST", "/v1/sessions", &request.to_string()).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["error"]["code"], "database_unreachable");
    }

    #[tokio::test]
    async fn an_unknown_endpoint_answers_with_a_driver_error() {
        let (status, body) = call("GET", "/v2/sessions", "").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        contract()
            .validate("DriverError", &body)
            .expect("on schema");
    }
}
