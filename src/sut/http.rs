//! [`HttpSut`]: drives any implementation that serves driver protocol v1 over HTTP.
//!
//! Every answer is checked against the protocol document before it is believed: a body that is
//! not JSON, does not match its schema, or comes with a status that is neither success nor error
//! is a [`SutError::Protocol`] violation, reported with the offending body. A server that does
//! not answer (refused, closed, or slower than the request time-out) is a
//! [`SutError::Transport`] failure naming the call. A well-formed driver error (4xx/5xx with a
//! `DriverError` body) means the implementation failed outside the contract:
//! [`SutError::Internal`] (a 5xx), or a rejected request ([`SutError::Rejected`], a 4xx).

use std::time::Duration;

use async_trait::async_trait;
use reqwest::{Method, StatusCode};
use rewind_driver_protocol as wire;
use rewind_driver_protocol::schema::Contract;
use serde::de::DeserializeOwned;

use super::{
    AttachRequest, ConversationApi, DeliverRequest, DeliveryReport, PruneRequest, ReadAnswer,
    ReadRequest, ReadState, RealtimeEvent, RewindRequest, RewindResponse, SendMessage, SentMessage,
    SutError, SyncPage, SyncRequest, SystemUnderTest,
};

/// How much of an offending body a report quotes.
const BODY_QUOTE: usize = 2000;

/// A server speaking driver protocol v1 at a base URL.
#[derive(Debug, Clone)]
pub struct HttpSut {
    base: url::Url,
    client: reqwest::Client,
    timeout: Duration,
    name: std::sync::Arc<std::sync::OnceLock<String>>,
}

/// A base URL that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error(
    "`{url}` is not a usable implementation URL: {reason} (expected e.g. `http://127.0.0.1:8080`)"
)]
pub struct BadUrl {
    url: String,
    reason: String,
}

impl HttpSut {
    /// A client for the server at `base` (e.g. `http://127.0.0.1:8080`); every call waits at
    /// most `timeout` for its answer.
    pub fn new(base: &str, timeout: Duration) -> Result<Self, BadUrl> {
        let bad = |reason: String| BadUrl {
            url: base.to_owned(),
            reason,
        };
        let mut url = url::Url::parse(base).map_err(|e| bad(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad(format!("scheme `{}` is not http", url.scheme())));
        }
        if url.host().is_none() {
            return Err(bad("no host".to_owned()));
        }
        // Paths are joined below the base: make sure it ends with a slash.
        if !url.path().ends_with('/') {
            let path = format!("{}/", url.path());
            url.set_path(&path);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| bad(e.to_string()))?;
        Ok(HttpSut {
            base: url,
            client,
            timeout,
            name: Default::default(),
        })
    }

    /// The base URL.
    pub fn base(&self) -> &url::Url {
        &self.base
    }

    fn url(&self, path: &str) -> Result<url::Url, SutError> {
        self.base
            .join(path.trim_start_matches('/'))
            .map_err(|e| SutError::Transport {
                call: path.to_owned(),
                detail: format!("cannot build the URL: {e}"),
            })
    }

    /// Sends one call and reads its whole answer; no answer at all is a transport failure.
    async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Result<Answer, SutError> {
        let call = format!("{method} {path}");
        let mut request = self
            .client
            .request(method, self.url(path)?)
            .timeout(self.timeout)
            .header(reqwest::header::ACCEPT, "application/json");
        if !query.is_empty() {
            request = request.query(query);
        }
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| transport(&call, &e, self.timeout))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| transport(&call, &e, self.timeout))?;
        Ok(Answer {
            call,
            status,
            text: String::from_utf8_lossy(&bytes).into_owned(),
        })
    }

    /// One call whose success answer is a body of schema `component`.
    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<Vec<u8>>,
        component: &str,
    ) -> Result<T, SutError> {
        let answer = self.send(method, path, query, body).await?;
        if !answer.status.is_success() {
            return Err(answer.failure(&self.display_name()));
        }
        answer.body(component)
    }

    fn display_name(&self) -> String {
        self.name
            .get()
            .cloned()
            .unwrap_or_else(|| self.base.to_string())
    }
}

/// A whole answer, as received.
struct Answer {
    call: String,
    status: StatusCode,
    text: String,
}

impl Answer {
    fn violation(&self, detail: String) -> SutError {
        violation(&self.call, detail, &self.text)
    }

    fn json(&self) -> Result<serde_json::Value, SutError> {
        serde_json::from_str(&self.text)
            .map_err(|e| self.violation(format!("the {} answer is not JSON ({e})", self.status)))
    }

    /// The body, checked against schema `component` and read as `T`.
    fn body<T: DeserializeOwned>(&self, component: &str) -> Result<T, SutError> {
        let value = self.json()?;
        let contract = Contract::get().map_err(|e| self.violation(e))?;
        contract
            .validate(component, &value)
            .map_err(|e| self.violation(format!("the answer {e}")))?;
        serde_json::from_value(value)
            .map_err(|e| self.violation(format!("the answer does not fit `{component}`: {e}")))
    }

    /// What a non-success answer means: a driver error (4xx/5xx with a `DriverError` body) is
    /// a failure outside the contract; anything else is a protocol violation.
    fn failure(&self, sut: &str) -> SutError {
        let status = self.status;
        if !status.is_client_error() && !status.is_server_error() {
            return self.violation(format!("status {status} is not an answer of this endpoint"));
        }
        match self.body::<wire::DriverError>("DriverError") {
            Ok(error) => {
                let detail = format!(
                    "`{}` answered {status}: {} (code `{}`)",
                    self.call, error.error.message, error.error.code
                );
                let sut = sut.to_owned();
                if status.is_client_error() {
                    SutError::Rejected { sut, detail }
                } else {
                    SutError::Internal { sut, detail }
                }
            }
            Err(SutError::Protocol { detail, body, call }) => SutError::Protocol {
                detail: format!("a {status} answer must carry a `DriverError` body; {detail}"),
                body,
                call,
            },
            Err(other) => other,
        }
    }
}

/// A wire type as a request body.
fn json_body<T: serde::Serialize>(value: &T) -> Option<Vec<u8>> {
    // Wire types always serialise (string keys only, no fallible impls).
    Some(serde_json::to_vec(value).unwrap_or_default())
}

fn quote(text: &str) -> String {
    if text.is_empty() {
        return "(empty)".to_owned();
    }
    if text.len() <= BODY_QUOTE {
        return text.to_owned();
    }
    let mut end = BODY_QUOTE;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes in all)", &text[..end], text.len())
}

fn violation(call: &str, detail: String, body: &str) -> SutError {
    SutError::Protocol {
        call: call.to_owned(),
        detail,
        body: quote(body),
    }
}

fn transport(call: &str, error: &reqwest::Error, timeout: Duration) -> SutError {
    let detail = if error.is_timeout() {
        format!(
            "no answer within {} s (a hung server, or a call slower than `--request-timeout`)",
            timeout.as_secs_f64()
        )
    } else if error.is_connect() {
        format!("cannot connect ({})", root_cause(error))
    } else {
        format!(
            "the connection failed before a complete answer ({})",
            root_cause(error)
        )
    };
    SutError::Transport {
        call: call.to_owned(),
        detail,
    }
}

fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

#[async_trait]
impl SystemUnderTest for HttpSut {
    fn name(&self) -> &str {
        self.name.get().map(String::as_str).unwrap_or("http")
    }

    async fn handshake(&self) -> Result<wire::Implementation, SutError> {
        let path = wire::HANDSHAKE_PATH;
        let answer = self.send(Method::GET, path, &[], None).await?;
        if !answer.status.is_success() {
            return Err(answer.violation(format!(
                "answered {}: this is not a rewind driver server (every driver server answers \
                 `GET {path}`)",
                answer.status
            )));
        }
        let value = answer.json()?;
        // Name and version first, so that another version is refused with one clear line even
        // when its handshake has other fields.
        let protocol = value.get("protocol").and_then(|p| p.as_str());
        if protocol != Some(wire::PROTOCOL) {
            return Err(answer.violation(format!(
                "the server speaks `{}`, not `{}`",
                protocol.unwrap_or("?"),
                wire::PROTOCOL
            )));
        }
        let version = value.get("version").and_then(|v| v.as_u64());
        if version != Some(u64::from(wire::VERSION)) {
            return Err(answer.violation(format!(
                "the server speaks driver protocol version {}; this harness speaks version {}",
                version.map_or_else(|| "?".to_owned(), |v| v.to_string()),
                wire::VERSION
            )));
        }
        let handshake: wire::Handshake = answer.body("Handshake")?;
        let _ = self.name.set(handshake.implementation.name.clone());
        Ok(handshake.implementation)
    }

    async fn attach(&self, request: &AttachRequest) -> Result<Box<dyn ConversationApi>, SutError> {
        let session: wire::Session = self
            .call(
                Method::POST,
                "/v1/sessions",
                &[],
                json_body(request),
                "Session",
            )
            .await?;
        Ok(Box::new(HttpApi {
            sut: self.clone(),
            prefix: format!("/v1/sessions/{}", session.session_id),
        }))
    }
}

/// One scenario's session on the server.
struct HttpApi {
    sut: HttpSut,
    prefix: String,
}

impl HttpApi {
    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: Option<Vec<u8>>,
        component: &str,
    ) -> Result<T, SutError> {
        let path = format!("{}{path}", self.prefix);
        self.sut
            .call(Method::POST, &path, &[], body, component)
            .await
    }
}

#[async_trait]
impl ConversationApi for HttpApi {
    async fn rewind(&self, request: &RewindRequest) -> Result<RewindResponse, SutError> {
        self.post("/rewind", json_body(request), "RewindResponse")
            .await
    }

    async fn send_message(&self, message: &SendMessage) -> Result<SentMessage, SutError> {
        self.post("/messages", json_body(message), "SentMessage")
            .await
    }

    async fn deliver(&self, request: &DeliverRequest) -> Result<DeliveryReport, SutError> {
        self.post("/deliveries", json_body(request), "DeliveryReport")
            .await
    }

    async fn prune_recovery_points(&self, request: &PruneRequest) -> Result<Vec<String>, SutError> {
        let pruned: wire::PrunedPoints = self
            .post("/recovery-points/prune", json_body(request), "PrunedPoints")
            .await?;
        Ok(pruned.pruned_ids)
    }

    async fn read_state(
        &self,
        scope_id: &str,
        user_id: &str,
    ) -> Result<Option<ReadState>, SutError> {
        let path = format!("{}/read-state", self.prefix);
        let answer: wire::ReadStateAnswer = self
            .sut
            .call(
                Method::GET,
                &path,
                &[("scopeId", scope_id), ("userId", user_id)],
                None,
                "ReadStateAnswer",
            )
            .await?;
        Ok(answer.read_state)
    }

    async fn sync_messages(&self, request: &SyncRequest) -> Result<SyncPage, SutError> {
        self.post("/sync", json_body(request), "SyncPage").await
    }

    async fn read(&self, request: &ReadRequest) -> Result<ReadAnswer, SutError> {
        self.post("/read", json_body(request), "ReadAnswer").await
    }

    async fn take_events(&self) -> Result<Vec<RealtimeEvent>, SutError> {
        let batch: wire::EventBatch = self.post("/events/take", None, "EventBatch").await?;
        Ok(batch.events)
    }

    async fn detach(&self) -> Result<(), SutError> {
        let answer = self
            .sut
            .send(Method::DELETE, &self.prefix, &[], None)
            .await?;
        if answer.status.is_success() {
            Ok(())
        } else {
            Err(answer.failure(&self.sut.display_name()))
        }
    }
}
