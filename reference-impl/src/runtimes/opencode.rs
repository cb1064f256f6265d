//! OpenCode restore (`opencode_session_revert`): the daemon's side of the OpenCode server's
//! HTTP API. The restore is `POST /session/{id}/revert {messageID}` with the user message bound
//! to the prompt delivery; OpenCode's revert is two-phase (the session records `revert` and the
//! next prompt deletes the reverted messages), so the verification reads the pending revert back
//! through `GET /session/{id}` and checks that the message is listed as a user message by
//! `GET /session/{id}/message`.
//!
//! Before reverting, `GET /config` must show the context-only configuration (`"snapshot":
//! false`): AgentTeam-managed OpenCode must not revert files, and with snapshots on a revert
//! would. Every call is bounded by the restore timeout, and each failure is mapped to the most
//! precise [`RestoreFailure`]: 404 `NotFoundError` -> unknown session; `SessionBusyError` (409),
//! or the older 400 `UnknownError` "Session <id> is busy" -> busy; any other error answer ->
//! refused with the server's `data.message`; connection refused -> unreachable; connection
//! reset or closed before the answer -> crashed; no answer in time -> timeout.

use std::time::Duration;

use reqwest::{Client, Method, Url};
use serde_json::{json, Value};

use super::{OpenCodeSettings, RestoreFailure, Restored};
use crate::capabilities::strategy;

const RUNTIME: &str = "opencode";

/// Reverts the session to before `message_id` and verifies it.
pub async fn restore(
    settings: &OpenCodeSettings,
    timeout: Duration,
    session_id: &str,
    message_id: &str,
) -> Result<Restored, RestoreFailure> {
    check_ids(session_id, message_id)?;
    let api = Api::new(settings, timeout)?;

    let config = api
        .call(
            Method::GET,
            &["config"],
            None,
            None,
            "reading its configuration (GET /config)",
        )
        .await?;
    check_context_only(&config)?;

    let revert_action = format!("reverting session {session_id} to before message {message_id}");
    api.call(
        Method::POST,
        &["session", session_id, "revert"],
        Some(json!({ "messageID": message_id })),
        Some(session_id),
        &revert_action,
    )
    .await?;

    let session = api
        .call(
            Method::GET,
            &["session", session_id],
            None,
            Some(session_id),
            "reading the session back (GET /session/{id})",
        )
        .await?;
    verify_revert(&session, session_id, message_id)?;

    let messages = api
        .call(
            Method::GET,
            &["session", session_id, "message"],
            None,
            Some(session_id),
            "listing the session's messages (GET /session/{id}/message)",
        )
        .await?;
    let (listed, pending) = verify_listed(&messages, message_id)?;
    Ok(Restored::Verified {
        detail: format!(
            "session {session_id}: revert.messageID = {message_id}; {listed} messages listed, \
             {pending} from the revert point on are deleted by the next prompt"
        ),
    })
}

/// The ids must have OpenCode's prefixes, or the ref cannot name a session and message.
fn check_ids(session_id: &str, message_id: &str) -> Result<(), RestoreFailure> {
    let bad = |key: &str, prefix: &str, value: &str| RestoreFailure::BadRef {
        strategy: strategy::OPENCODE_SESSION_REVERT.to_owned(),
        detail: format!("`{key}` must be an OpenCode id starting with `{prefix}`, found `{value}`"),
    };
    if !session_id.starts_with("ses") {
        return Err(bad("sessionId", "ses", session_id));
    }
    if !message_id.starts_with("msg") {
        return Err(bad("messageId", "msg", message_id));
    }
    Ok(())
}

/// AgentTeam-managed OpenCode must be context-only: `snapshot` is `false`.
fn check_context_only(config: &Value) -> Result<(), RestoreFailure> {
    let Value::Object(config) = config else {
        return Err(RestoreFailure::Unreachable {
            runtime: RUNTIME,
            detail: format!(
                "GET /config answered a non-object: {}",
                excerpt(&config.to_string())
            ),
        });
    };
    match config.get("snapshot") {
        Some(Value::Bool(false)) => Ok(()),
        other => Err(RestoreFailure::Refused {
            runtime: RUNTIME,
            action: "checking the context-only configuration".to_owned(),
            message: format!(
                "opencode is not in the context-only configuration (snapshot is {}): \
                 AgentTeam-managed OpenCode must run with \"snapshot\": false so that a revert \
                 restores the conversation only, never files",
                match other {
                    None => "unset, so on by default".to_owned(),
                    Some(value) => value.to_string(),
                }
            ),
        }),
    }
}

/// `GET /session/{id}` must show the pending revert at `message_id`, for the whole message.
fn verify_revert(
    session: &Value,
    session_id: &str,
    message_id: &str,
) -> Result<(), RestoreFailure> {
    let expected = format!("session {session_id} with revert.messageID = {message_id}");
    let not_verified = |found: String| RestoreFailure::NotVerified {
        runtime: RUNTIME,
        expected: expected.clone(),
        found,
    };
    if let Some(id) = session.get("id").and_then(Value::as_str) {
        if id != session_id {
            return Err(not_verified(format!("session {id}")));
        }
    }
    let revert = match session.get("revert") {
        None | Some(Value::Null) => return Err(not_verified("no pending revert".to_owned())),
        Some(revert) => revert,
    };
    match revert.get("messageID").and_then(Value::as_str) {
        Some(found) if found == message_id => {}
        Some(found) => return Err(not_verified(format!("revert.messageID = {found}"))),
        None => {
            return Err(not_verified(format!(
                "a revert without messageID: {revert}"
            )))
        }
    }
    if let Some(part) = revert.get("partID").filter(|p| !p.is_null()) {
        return Err(not_verified(format!(
            "a revert of the message's parts from {part} on only"
        )));
    }
    Ok(())
}

/// `GET /session/{id}/message` must list `message_id` as a user message. Returns how many
/// messages are listed and how many of them are at or after it.
fn verify_listed(messages: &Value, message_id: &str) -> Result<(usize, usize), RestoreFailure> {
    let Some(list) = messages.as_array() else {
        return Err(RestoreFailure::Unreachable {
            runtime: RUNTIME,
            detail: format!(
                "GET /session/{{id}}/message answered a non-array: {}",
                excerpt(&messages.to_string())
            ),
        });
    };
    let expected = format!("user message {message_id} listed by GET /session/{{id}}/message");
    let position = list
        .iter()
        .position(|m| m.pointer("/info/id").and_then(Value::as_str) == Some(message_id));
    let Some(index) = position else {
        return Err(RestoreFailure::NotVerified {
            runtime: RUNTIME,
            expected,
            found: format!("{} messages, none with that id", list.len()),
        });
    };
    match list[index].pointer("/info/role").and_then(Value::as_str) {
        Some("user") => Ok((list.len(), list.len() - index)),
        role => Err(RestoreFailure::NotVerified {
            runtime: RUNTIME,
            expected,
            found: format!(
                "message {message_id} with role {}",
                role.unwrap_or("(none)")
            ),
        }),
    }
}

/// An error answer mapped to a failure. `session_id` is set when the call addressed a session
/// (then a 404 `NotFoundError` means the session does not exist).
fn classify_error(
    action: &str,
    session_id: Option<&str>,
    status: u16,
    body: &str,
) -> RestoreFailure {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let field = |pointer: &str| {
        parsed
            .as_ref()
            .and_then(|v| v.pointer(pointer))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let name = field("/name").or_else(|| field("/_tag"));
    let message = field("/data/message").or_else(|| field("/message"));
    let is_busy = name.as_deref() == Some("SessionBusyError")
        || message
            .as_deref()
            .is_some_and(|m| m.starts_with("Session is busy") || m.ends_with(" is busy"));
    if is_busy {
        return RestoreFailure::Busy {
            runtime: RUNTIME,
            message: message.unwrap_or_else(|| format!("{status} SessionBusyError")),
        };
    }
    if let (404, Some(id), Some("NotFoundError")) = (status, session_id, name.as_deref()) {
        return RestoreFailure::UnknownSession {
            runtime: RUNTIME,
            id: id.to_owned(),
        };
    }
    let text = message.unwrap_or_else(|| {
        let raw = body.trim();
        if raw.is_empty() {
            "(empty body)".to_owned()
        } else {
            excerpt(raw)
        }
    });
    RestoreFailure::Refused {
        runtime: RUNTIME,
        action: action.to_owned(),
        message: match name {
            Some(name) => format!("HTTP {status} {name}: {text}"),
            None => format!("HTTP {status}: {text}"),
        },
    }
}

/// A transport failure mapped to a failure.
fn classify_transport(error: &reqwest::Error, action: &str, timeout: Duration) -> RestoreFailure {
    let mut detail = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        detail.push_str(": ");
        detail.push_str(&cause.to_string());
        source = cause.source();
    }
    if error.is_timeout() {
        RestoreFailure::Timeout {
            runtime: RUNTIME,
            action: action.to_owned(),
            timeout_ms: timeout.as_millis(),
        }
    } else if error.is_connect() {
        RestoreFailure::Unreachable {
            runtime: RUNTIME,
            detail,
        }
    } else {
        RestoreFailure::Crashed {
            runtime: RUNTIME,
            action: action.to_owned(),
            detail,
        }
    }
}

fn excerpt(text: &str) -> String {
    const LIMIT: usize = 300;
    match text.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The OpenCode server, as the daemon calls it.
struct Api {
    client: Client,
    base: Url,
    timeout: Duration,
}

impl Api {
    fn new(settings: &OpenCodeSettings, timeout: Duration) -> Result<Api, RestoreFailure> {
        let base = Url::parse(&settings.base_url).map_err(|e| RestoreFailure::Unreachable {
            runtime: RUNTIME,
            detail: format!("bad base URL `{}`: {e}", settings.base_url),
        })?;
        if base.cannot_be_a_base() {
            return Err(RestoreFailure::Unreachable {
                runtime: RUNTIME,
                detail: format!("bad base URL `{}`", settings.base_url),
            });
        }
        // A fresh connection per call: a kept-alive connection to a server that restarted
        // would fail as if the new one had crashed.
        let client = Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(0)
            .connect_timeout(timeout)
            .build()
            .map_err(|e| RestoreFailure::Unreachable {
                runtime: RUNTIME,
                detail: format!("cannot build an HTTP client: {e}"),
            })?;
        Ok(Api {
            client,
            base,
            timeout,
        })
    }

    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    /// One call: the JSON of a 2xx answer, or the mapped failure.
    async fn call(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<Value>,
        session_id: Option<&str>,
        action: &str,
    ) -> Result<Value, RestoreFailure> {
        let mut request = self
            .client
            .request(method, self.url(segments))
            .header("accept", "application/json");
        if let Some(body) = body {
            request = request.json(&body);
        }
        let exchange = async {
            let response = request.send().await?;
            let status = response.status();
            let text = response.text().await?;
            Ok::<_, reqwest::Error>((status, text))
        };
        let (status, text) = match tokio::time::timeout(self.timeout, exchange).await {
            Err(_) => {
                return Err(RestoreFailure::Timeout {
                    runtime: RUNTIME,
                    action: action.to_owned(),
                    timeout_ms: self.timeout.as_millis(),
                })
            }
            Ok(Err(e)) => return Err(classify_transport(&e, action, self.timeout)),
            Ok(Ok(answer)) => answer,
        };
        if !status.is_success() {
            return Err(classify_error(action, session_id, status.as_u16(), &text));
        }
        serde_json::from_str(&text).map_err(|e| RestoreFailure::Unreachable {
            runtime: RUNTIME,
            detail: format!(
                "answered {action} with HTTP {} and a body that is not JSON ({e}): {}",
                status.as_u16(),
                excerpt(&text)
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn ids_need_opencode_prefixes() {
        assert!(check_ids("ses_1", "msg_1").is_ok());
        assert_eq!(check_ids("s1", "msg_1").unwrap_err().kind(), "bad_ref");
        assert_eq!(check_ids("ses_1", "prt_1").unwrap_err().kind(), "bad_ref");
    }

    #[test]
    fn only_the_context_only_configuration_is_accepted() {
        assert!(check_context_only(&json!({ "snapshot": false })).is_ok());
        for config in [
            json!({}),
            json!({ "snapshot": true }),
            json!({ "snapshot": "no" }),
        ] {
            let err = check_context_only(&config).unwrap_err();
            assert_eq!(err.kind(), "error", "{config}");
            assert!(
                err.to_string()
                    .contains("not in the context-only configuration"),
                "{err}"
            );
        }
        assert_eq!(
            check_context_only(&json!([])).unwrap_err().kind(),
            "unreachable"
        );
    }

    #[test]
    fn error_answers_map_to_the_most_precise_failure() {
        let not_found = r#"{"name":"NotFoundError","data":{"message":"Session not found: ses_x"}}"#;
        let err = classify_error("reverting", Some("ses_x"), 404, not_found);
        assert_eq!(
            err,
            RestoreFailure::UnknownSession {
                runtime: RUNTIME,
                id: "ses_x".into()
            }
        );
        // Not about a session: a plain refusal.
        assert_eq!(
            classify_error("config", None, 404, not_found).kind(),
            "error"
        );

        let busy =
            r#"{"_tag":"SessionBusyError","sessionID":"ses_x","message":"Session is busy: ses_x"}"#;
        let err = classify_error("reverting", Some("ses_x"), 409, busy);
        assert_eq!(
            err,
            RestoreFailure::Busy {
                runtime: RUNTIME,
                message: "Session is busy: ses_x".into()
            }
        );
        let legacy = r#"{"name":"UnknownError","data":{"message":"Session ses_x is busy"}}"#;
        assert_eq!(
            classify_error("reverting", Some("ses_x"), 400, legacy).kind(),
            "busy"
        );

        let bad = r#"{"name":"BadRequest","data":{"message":"Missing key\n  at [\"messageID\"]","kind":"Payload"}}"#;
        let err = classify_error("reverting", Some("ses_x"), 400, bad);
        assert_eq!(err.kind(), "error");
        assert!(
            err.to_string().contains("HTTP 400 BadRequest: Missing key"),
            "{err}"
        );

        let unknown = r#"{"name":"UnknownError","data":{"message":"injected error"}}"#;
        let err = classify_error("reverting", Some("ses_x"), 500, unknown);
        assert!(
            err.to_string()
                .contains("HTTP 500 UnknownError: injected error"),
            "{err}"
        );

        let err = classify_error("reverting", Some("ses_x"), 502, "<html>bad gateway</html>");
        assert!(
            err.to_string()
                .contains("HTTP 502: <html>bad gateway</html>"),
            "{err}"
        );
        let err = classify_error("reverting", Some("ses_x"), 500, "");
        assert!(err.to_string().contains("(empty body)"), "{err}");
    }

    #[test]
    fn the_read_back_must_show_the_revert_at_the_message() {
        let ok = json!({ "id": "ses_1", "revert": { "messageID": "msg_2" } });
        assert!(verify_revert(&ok, "ses_1", "msg_2").is_ok());
        let with_snapshot = json!({ "id": "ses_1", "revert": { "messageID": "msg_2", "snapshot": "abc", "diff": "" } });
        assert!(verify_revert(&with_snapshot, "ses_1", "msg_2").is_ok());
        for (session, found) in [
            (json!({ "id": "ses_1" }), "no pending revert"),
            (
                json!({ "id": "ses_1", "revert": null }),
                "no pending revert",
            ),
            (
                json!({ "id": "ses_1", "revert": { "messageID": "msg_1" } }),
                "revert.messageID = msg_1",
            ),
            (json!({ "id": "ses_1", "revert": {} }), "without messageID"),
            (
                json!({ "id": "ses_1", "revert": { "messageID": "msg_2", "partID": "prt_9" } }),
                "prt_9",
            ),
            (
                json!({ "id": "ses_9", "revert": { "messageID": "msg_2" } }),
                "session ses_9",
            ),
        ] {
            let err = verify_revert(&session, "ses_1", "msg_2").unwrap_err();
            assert_eq!(err.kind(), "not_verified", "{session}");
            assert!(err.to_string().contains(found), "{session}: {err}");
        }
    }

    #[test]
    fn the_message_must_be_listed_as_a_user_message() {
        let list = json!([
            { "info": { "id": "msg_1", "role": "user" }, "parts": [] },
            { "info": { "id": "msg_2", "role": "assistant" }, "parts": [] },
            { "info": { "id": "msg_3", "role": "user" }, "parts": [] },
            { "info": { "id": "msg_4", "role": "assistant" }, "parts": [] },
        ]);
        assert_eq!(verify_listed(&list, "msg_3").unwrap(), (4, 2));
        assert_eq!(verify_listed(&list, "msg_1").unwrap(), (4, 4));
        let err = verify_listed(&list, "msg_2").unwrap_err();
        assert!(err.to_string().contains("role assistant"), "{err}");
        let err = verify_listed(&list, "msg_9").unwrap_err();
        assert!(
            err.to_string().contains("4 messages, none with that id"),
            "{err}"
        );
        assert_eq!(
            verify_listed(&json!({}), "msg_1").unwrap_err().kind(),
            "unreachable"
        );
    }

    #[test]
    fn urls_keep_the_base_path_and_encode_segments() {
        let api = Api::new(
            &OpenCodeSettings {
                base_url: "http://127.0.0.1:4096/".into(),
            },
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(
            api.url(&["session", "ses_1", "revert"]).as_str(),
            "http://127.0.0.1:4096/session/ses_1/revert"
        );
        assert_eq!(
            api.url(&["session", "ses_a/b"]).as_str(),
            "http://127.0.0.1:4096/session/ses_a%2Fb"
        );
        assert!(Api::new(
            &OpenCodeSettings {
                base_url: "not a url".into()
            },
            Duration::from_secs(1)
        )
        .is_err());
    }

    /// What a scripted connection does.
    #[derive(Clone, Copy)]
    enum Script {
        /// Answer by route.
        Answer,
        /// Close the connection without answering.
        Close,
        /// Read the request and never answer.
        Hold,
    }

    /// A one-thread HTTP server answering each request by `route(method, path, body)`.
    fn scripted(
        script: fn(&str, &str) -> Script,
        route: fn(&str, &str, &str) -> (u16, String),
    ) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let Some((method, path, body, stream)) = read_request(stream) else {
                    continue;
                };
                match script(&method, &path) {
                    Script::Close => drop(stream),
                    Script::Hold => held.push(stream),
                    Script::Answer => {
                        let (status, body) = route(&method, &path, &body);
                        let mut stream = stream;
                        let _ = write!(
                            stream,
                            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                    }
                }
            }
        });
        base
    }

    fn read_request(stream: TcpStream) -> Option<(String, String, String, TcpStream)> {
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let mut words = line.split_whitespace();
        let (method, path) = (words.next()?.to_owned(), words.next()?.to_owned());
        let mut length = 0;
        loop {
            let mut header = String::new();
            reader.read_line(&mut header).ok()?;
            if header.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).ok()?;
        Some((
            method,
            path,
            String::from_utf8_lossy(&body).into_owned(),
            reader.into_inner(),
        ))
    }

    fn answer_all(_: &str, _: &str) -> Script {
        Script::Answer
    }

    fn healthy_server(method: &str, path: &str, body: &str) -> (u16, String) {
        match (method, path) {
            ("GET", "/config") => (200, r#"{"snapshot":false}"#.into()),
            ("POST", "/session/ses_1/revert") => {
                assert_eq!(serde_json::from_str::<Value>(body).unwrap(), json!({ "messageID": "msg_3" }));
                (200, r#"{"id":"ses_1","revert":{"messageID":"msg_3"}}"#.into())
            }
            ("GET", "/session/ses_1") => (200, r#"{"id":"ses_1","revert":{"messageID":"msg_3"}}"#.into()),
            ("GET", "/session/ses_1/message") => (
                200,
                r#"[{"info":{"id":"msg_1","role":"user"},"parts":[]},{"info":{"id":"msg_2","role":"assistant"},"parts":[]},{"info":{"id":"msg_3","role":"user"},"parts":[]}]"#.into(),
            ),
            _ => (404, r#"{"name":"NotFoundError","data":{"message":"no route"}}"#.into()),
        }
    }

    fn no_effect_server(method: &str, path: &str, _: &str) -> (u16, String) {
        match (method, path) {
            ("POST", "/session/ses_1/revert") | ("GET", "/session/ses_1") => {
                (200, r#"{"id":"ses_1"}"#.into())
            }
            _ => healthy_server(method, path, ""),
        }
    }

    fn snapshot_server(method: &str, path: &str, _: &str) -> (u16, String) {
        match (method, path) {
            ("GET", "/config") => (
                200,
                r#"{"$schema":"https://opencode.ai/config.json"}"#.into(),
            ),
            _ => panic!("no call may follow a refused configuration: {method} {path}"),
        }
    }

    fn settings(base_url: String) -> OpenCodeSettings {
        OpenCodeSettings { base_url }
    }

    const TIMEOUT: Duration = Duration::from_millis(500);

    #[tokio::test]
    async fn a_revert_that_reads_back_is_verified() {
        let base = scripted(answer_all, healthy_server);
        let restored = restore(&settings(base), TIMEOUT, "ses_1", "msg_3")
            .await
            .unwrap();
        let Restored::Verified { detail } = restored else {
            panic!("{restored:?}")
        };
        assert!(
            detail.contains("3 messages listed, 1 from the revert point on"),
            "{detail}"
        );
    }

    #[tokio::test]
    async fn a_revert_without_effect_is_not_verified() {
        let base = scripted(answer_all, no_effect_server);
        let err = restore(&settings(base), TIMEOUT, "ses_1", "msg_3")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "not_verified", "{err}");
    }

    #[tokio::test]
    async fn snapshots_on_refuse_before_reverting() {
        let base = scripted(answer_all, snapshot_server);
        let err = restore(&settings(base), TIMEOUT, "ses_1", "msg_3")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "error", "{err}");
        assert!(err.to_string().contains("unset, so on by default"), "{err}");
    }

    #[tokio::test]
    async fn transport_failures_are_told_apart() {
        // Nothing listens: unreachable.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let err = restore(
            &settings(format!("http://127.0.0.1:{port}")),
            TIMEOUT,
            "ses_1",
            "msg_3",
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind(), "unreachable", "{err}");

        // The connection closes during the revert: crashed.
        fn close_on_revert(_: &str, path: &str) -> Script {
            if path.ends_with("/revert") {
                Script::Close
            } else {
                Script::Answer
            }
        }
        let base = scripted(close_on_revert, healthy_server);
        let err = restore(&settings(base), TIMEOUT, "ses_1", "msg_3")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "crash", "{err}");
        assert!(err.to_string().contains("reverting session ses_1"), "{err}");

        // No answer to the revert: timeout.
        fn hold_revert(_: &str, path: &str) -> Script {
            if path.ends_with("/revert") {
                Script::Hold
            } else {
                Script::Answer
            }
        }
        let base = scripted(hold_revert, healthy_server);
        let started = std::time::Instant::now();
        let err = restore(
            &settings(base),
            Duration::from_millis(300),
            "ses_1",
            "msg_3",
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind(), "timeout", "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn error_answers_of_the_revert_are_mapped() {
        fn unknown_session(method: &str, path: &str, _: &str) -> (u16, String) {
            if path.ends_with("/revert") {
                (
                    404,
                    r#"{"name":"NotFoundError","data":{"message":"Session not found: ses_1"}}"#
                        .into(),
                )
            } else {
                healthy_server(method, path, "")
            }
        }
        let base = scripted(answer_all, unknown_session);
        let err = restore(&settings(base), TIMEOUT, "ses_1", "msg_3")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "unknown_session", "{err}");

        fn busy(method: &str, path: &str, _: &str) -> (u16, String) {
            if path.ends_with("/revert") {
                (409, r#"{"_tag":"SessionBusyError","sessionID":"ses_1","message":"Session is busy: ses_1"}"#.into())
            } else {
                healthy_server(method, path, "")
            }
        }
        let base = scripted(answer_all, busy);
        let err = restore(&settings(base), TIMEOUT, "ses_1", "msg_3")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "busy", "{err}");

        fn not_json(method: &str, path: &str, _: &str) -> (u16, String) {
            if path.ends_with("/revert") {
                (200, "ok".into())
            } else {
                healthy_server(method, path, "")
            }
        }
        let base = scripted(answer_all, not_json);
        let err = restore(&settings(base), TIMEOUT, "ses_1", "msg_3")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "unreachable", "{err}");
    }
}
