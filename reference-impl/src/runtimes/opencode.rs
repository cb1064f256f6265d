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
//!
//! Live delivery ([`deliver`]) prompts the agent's session (made with `POST /session` when it has
//! none) with a user message id chosen up front ([`next_message_id`]), so that the recovery
//! point committed before the prompt names exactly the message the prompt creates.

use std::future::Future;
use std::time::Duration;

use reqwest::{Client, Method, Url};
use serde_json::{json, Value};

use super::{DeliveryError, OpenCodeSettings, PointToCommit, RestoreFailure, Restored};
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

    // A point whose prompt never reached the session (the delivery failed after the point was
    // committed): nothing at or after it exists, so the session already is where the point
    // says; reverting to an id the session does not hold would change nothing anyway.
    let before = api
        .call(
            Method::GET,
            &["session", session_id, "message"],
            None,
            Some(session_id),
            "listing the session's messages (GET /session/{id}/message)",
        )
        .await?;
    let held = message_ids(&before)?;
    if held.iter().all(|id| id.as_str() < message_id) {
        return Ok(Restored::Verified {
            detail: format!(
                "session {session_id}: no message at or after {message_id} ({} listed); the \
                 prompt it guards never reached the session, nothing to revert",
                held.len()
            ),
        });
    }

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

/// Delivers `input` as one prompt of the agent's OpenCode session `session` (`None`: a new
/// one, made with `POST /session {}`).
///
/// The user message id is chosen up front ([`next_message_id`]: after every message of the
/// session, listed with `GET /session/{id}/message`), so the recovery point names the exact
/// message the prompt creates; `commit` gets `{sessionId, messageId}` (and the new session id);
/// only after it returned `Ok` is `POST /session/{id}/message {messageID, parts: [{type:
/// "text", text}]}` sent. The answer is the text parts of the assistant message it returns,
/// joined by newlines; an assistant message with an `error` fails the delivery. Every call is
/// bounded by `timeout`.
pub async fn deliver<F, Fut>(
    settings: &OpenCodeSettings,
    timeout: Duration,
    session: Option<&str>,
    input: &str,
    commit: F,
) -> Result<String, DeliveryError>
where
    F: FnOnce(PointToCommit) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    if let Some(id) = session {
        if !id.starts_with("ses") {
            return Err(RestoreFailure::BadRef {
                strategy: strategy::OPENCODE_SESSION_REVERT.to_owned(),
                detail: format!(
                    "the agent's session `{id}` is not an OpenCode session id (`ses...`)"
                ),
            }
            .into());
        }
    }
    let api = Api::new(settings, timeout)?;
    let (session_id, created) = match session {
        Some(id) => (id.to_owned(), false),
        None => {
            let made = api
                .call(
                    Method::POST,
                    &["session"],
                    Some(json!({})),
                    None,
                    "creating a session (POST /session)",
                )
                .await?;
            let id = made
                .get("id")
                .and_then(Value::as_str)
                .filter(|id| id.starts_with("ses"))
                .ok_or_else(|| RestoreFailure::Unreachable {
                    runtime: RUNTIME,
                    detail: format!(
                        "POST /session answered without a session id: {}",
                        excerpt(&made.to_string())
                    ),
                })?;
            (id.to_owned(), true)
        }
    };
    let existing = if created {
        Vec::new()
    } else {
        let listed = api
            .call(
                Method::GET,
                &["session", &session_id, "message"],
                None,
                Some(&session_id),
                "listing the session's messages (GET /session/{id}/message)",
            )
            .await?;
        message_ids(&listed)?
    };
    let message_id = next_message_id(
        existing.iter().map(String::as_str),
        chrono::Utc::now().timestamp_millis(),
    );
    let point = PointToCommit {
        recovery_ref: json!({ "sessionId": session_id, "messageId": message_id }),
        new_session: created.then(|| session_id.clone()),
    };
    commit(point).await.map_err(DeliveryError::Commit)?;
    let answer = api
        .call(
            Method::POST,
            &["session", &session_id, "message"],
            Some(json!({
                "messageID": message_id,
                "parts": [{ "type": "text", "text": input }],
            })),
            Some(&session_id),
            &format!("prompting session {session_id} with message {message_id}"),
        )
        .await?;
    Ok(prompt_answer(&answer, &message_id)?)
}

/// The ids of a `GET /session/{id}/message` answer.
fn message_ids(listed: &Value) -> Result<Vec<String>, RestoreFailure> {
    let Some(list) = listed.as_array() else {
        return Err(RestoreFailure::Unreachable {
            runtime: RUNTIME,
            detail: format!(
                "GET /session/{{id}}/message answered a non-array: {}",
                excerpt(&listed.to_string())
            ),
        });
    };
    Ok(list
        .iter()
        .filter_map(|m| m.pointer("/info/id").and_then(Value::as_str))
        .map(str::to_owned)
        .collect())
}

/// The characters of OpenCode's random id suffix, in ascending byte order.
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

fn random_base62(len: usize) -> String {
    let mut out = String::with_capacity(len);
    while out.len() < len {
        for byte in uuid::Uuid::new_v4().into_bytes() {
            // 248 = 62 * 4: rejection sampling keeps the characters uniform.
            if byte < 248 && out.len() < len {
                out.push(BASE62[(byte % 62) as usize] as char);
            }
        }
    }
    out
}

/// `head` (base62 characters) plus one, same length; `None` when it overflows or is not base62.
fn increment_base62(head: &str) -> Option<String> {
    let mut digits: Vec<usize> = head
        .bytes()
        .map(|b| BASE62.iter().position(|c| *c == b))
        .collect::<Option<_>>()?;
    for digit in digits.iter_mut().rev() {
        if *digit + 1 < BASE62.len() {
            *digit += 1;
            return Some(digits.iter().map(|d| BASE62[*d] as char).collect());
        }
        *digit = 0;
    }
    None
}

/// A user message id for a prompt sent at `now_ms` that sorts after every id in `existing`.
///
/// OpenCode ids are `msg_` and 26 characters: 12 hex digits of the low 48 bits of
/// `milliseconds << 12 | counter`, then 14 random base62 characters, so later ids compare
/// greater. The id is made the same way with counter 0, so an id the server makes from the same
/// millisecond on (the assistant message answering the prompt) still sorts after it. When an
/// existing id sorts at or after that (a clock behind the session's ids), the id is the first
/// 12 characters of the greatest existing id plus one, then random characters.
pub fn next_message_id<'a>(existing: impl IntoIterator<Item = &'a str>, now_ms: i64) -> String {
    let time = (u64::try_from(now_ms).unwrap_or(0) << 12) & 0xffff_ffff_ffff;
    let candidate = format!("msg_{time:012x}{}", random_base62(14));
    let Some(greatest) = existing.into_iter().max() else {
        return candidate;
    };
    if candidate.as_str() > greatest {
        return candidate;
    }
    let body = greatest.strip_prefix("msg_").unwrap_or("");
    match body.get(..12).and_then(increment_base62) {
        Some(head) if body.len() == 26 => format!("msg_{head}{}", random_base62(14)),
        // Not an id of this shape: anything it prefixes sorts after it.
        _ => format!("{greatest}0"),
    }
}

/// The answer text of the assistant message a prompt returned (`{info, parts}`).
fn prompt_answer(answer: &Value, message_id: &str) -> Result<String, RestoreFailure> {
    let info = answer.get("info").unwrap_or(&Value::Null);
    let role = info.get("role").and_then(Value::as_str);
    if role != Some("assistant") {
        return Err(RestoreFailure::Unreachable {
            runtime: RUNTIME,
            detail: format!(
                "answered the prompt with a message of role {}, not an assistant message: {}",
                role.unwrap_or("(none)"),
                excerpt(&answer.to_string())
            ),
        });
    }
    if let Some(parent) = info.get("parentID").and_then(Value::as_str) {
        if parent != message_id {
            return Err(RestoreFailure::Unreachable {
                runtime: RUNTIME,
                detail: format!(
                    "answered message {message_id} with an assistant message whose parentID is \
                     {parent}"
                ),
            });
        }
    }
    if let Some(error) = info.get("error").filter(|e| !e.is_null()) {
        let name = error.get("name").and_then(Value::as_str).unwrap_or("error");
        let message = error
            .pointer("/data/message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| excerpt(&error.to_string()));
        return Err(RestoreFailure::Refused {
            runtime: RUNTIME,
            action: format!("answering message {message_id}"),
            message: format!("{name}: {message}"),
        });
    }
    let parts = answer
        .get("parts")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    Ok(parts
        .iter()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("\n"))
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
    fn message_ids_sort_after_every_existing_one() {
        // 2026-01-01T00:00:00Z.
        let now = 1_767_225_600_000_i64;
        let fresh = next_message_id(std::iter::empty(), now);
        assert!(fresh.starts_with("msg_"), "{fresh}");
        assert_eq!(fresh.len(), 30, "{fresh}");
        // Counter 0: any id the server makes from this millisecond on sorts after it.
        let time = ((now as u64) << 12) & 0xffff_ffff_ffff;
        assert_eq!(&fresh[4..16], format!("{time:012x}"));
        let server_next = format!("msg_{:012x}00000000000000", time + 1);
        assert!(fresh < server_next, "{fresh} >= {server_next}");

        let older = format!("msg_{:012x}AbCdEfGhIjKlMn", time - 4096);
        assert_eq!(&next_message_id([older.as_str()], now)[..16], &fresh[..16]);

        // Ids at or after the clock: one above the greatest, whatever its shape.
        for existing in [
            vec![format!("msg_{:012x}zzzzzzzzzzzzzz", time), older.clone()],
            vec!["msg_ffffffffffff00000000000000".to_owned()],
            vec!["msg_zzzzzzzzzzzzzzzzzzzzzzzzzz".to_owned()],
            vec!["msg_zz".to_owned(), "msg_01".to_owned()],
            vec!["msg_01JZ9R000000052KMK8H5CDDZ3".to_owned()],
        ] {
            let refs: Vec<&str> = existing.iter().map(String::as_str).collect();
            // Whether the clock is ahead of them or far behind.
            for clock in [now, 0] {
                let id = next_message_id(refs.iter().copied(), clock);
                assert!(id.starts_with("msg"), "{id}");
                for e in &refs {
                    assert!(id.as_str() > *e, "{id} <= {e}");
                }
            }
        }
        assert_eq!(
            next_message_id(["msg_01JZ9R000000052KMK8H5CDDZ3"], 0)[..16],
            *"msg_01JZ9R000001"
        );
        assert_eq!(increment_base62("0z"), Some("10".to_owned()));
        assert_eq!(increment_base62("09"), Some("0A".to_owned()));
        assert_eq!(increment_base62("Zz"), Some("a0".to_owned()));
        assert_eq!(increment_base62("zz"), None);
        assert_eq!(increment_base62("a-"), None);
    }

    #[test]
    fn the_answer_is_the_assistant_messages_text() {
        let answer = json!({
            "info": { "id": "msg_2", "role": "assistant", "parentID": "msg_1", "finish": "stop" },
            "parts": [
                { "type": "step-start" },
                { "type": "text", "text": "Mock reply to: hi" },
                { "type": "reasoning", "text": "thinking" },
                { "type": "text", "text": "more" },
                { "type": "step-finish" },
            ],
        });
        assert_eq!(
            prompt_answer(&answer, "msg_1").unwrap(),
            "Mock reply to: hi\nmore"
        );
        let silent = json!({ "info": { "role": "assistant", "parentID": "msg_1" }, "parts": [{ "type": "step-start" }] });
        assert_eq!(prompt_answer(&silent, "msg_1").unwrap(), "");
        let failed = json!({
            "info": { "role": "assistant", "parentID": "msg_1", "error": { "name": "APIError", "data": { "message": "overloaded" } } },
            "parts": [],
        });
        let err = prompt_answer(&failed, "msg_1").unwrap_err();
        assert_eq!(err.kind(), "error");
        assert!(err.to_string().contains("APIError: overloaded"), "{err}");
        let elsewhere = prompt_answer(&answer, "msg_9").unwrap_err();
        assert_eq!(elsewhere.kind(), "unreachable", "{elsewhere}");
        let user = json!({ "info": { "role": "user", "id": "msg_1" }, "parts": [] });
        assert_eq!(
            prompt_answer(&user, "msg_1").unwrap_err().kind(),
            "unreachable"
        );
        assert_eq!(
            message_ids(&json!([{ "info": { "id": "msg_1" } }, { "info": {} }])).unwrap(),
            ["msg_1"]
        );
        assert_eq!(message_ids(&json!({})).unwrap_err().kind(), "unreachable");
    }

    fn prompting_server(method: &str, path: &str, body: &str) -> (u16, String) {
        match (method, path) {
            ("POST", "/session") => (200, r#"{"id":"ses_new","title":"t"}"#.into()),
            ("GET", "/session/ses_1/message") => (
                200,
                r#"[{"info":{"id":"msg_00000000000100000000000000","role":"user"},"parts":[]},{"info":{"id":"msg_00000000000200000000000000","role":"assistant"},"parts":[]}]"#.into(),
            ),
            ("POST", "/session/ses_1/message") | ("POST", "/session/ses_new/message") => {
                let body: Value = serde_json::from_str(body).unwrap();
                let id = body["messageID"].as_str().unwrap();
                assert_eq!(body["parts"], json!([{ "type": "text", "text": "hello" }]));
                (
                    200,
                    json!({
                        "info": { "id": "msg_zzzzzzzzzzzzzzzzzzzzzzzzzz", "role": "assistant", "parentID": id },
                        "parts": [{ "type": "text", "text": "Mock reply to: hello" }],
                    })
                    .to_string(),
                )
            }
            _ => (404, r#"{"name":"NotFoundError","data":{"message":"no route"}}"#.into()),
        }
    }

    #[tokio::test]
    async fn a_delivery_names_the_prompts_message_before_sending_it() {
        let base = scripted(answer_all, prompting_server);
        let points = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let answer = deliver(
            &settings(base.clone()),
            TIMEOUT,
            Some("ses_1"),
            "hello",
            crate::runtimes::test_support::recorder(&points),
        )
        .await
        .unwrap();
        assert_eq!(answer, "Mock reply to: hello");
        let point = points.lock().unwrap()[0].clone();
        assert_eq!(point.new_session, None);
        assert_eq!(point.recovery_ref["sessionId"], "ses_1");
        let message = point.recovery_ref["messageId"].as_str().unwrap().to_owned();
        assert!(
            message.as_str() > "msg_00000000000200000000000000",
            "{message}"
        );

        // Without a session: one is made, and the point names it.
        let answer = deliver(
            &settings(base.clone()),
            TIMEOUT,
            None,
            "hello",
            crate::runtimes::test_support::recorder(&points),
        )
        .await
        .unwrap();
        assert_eq!(answer, "Mock reply to: hello");
        let point = points.lock().unwrap()[1].clone();
        assert_eq!(point.new_session.as_deref(), Some("ses_new"));
        assert_eq!(point.recovery_ref["sessionId"], "ses_new");

        // A commit that fails sends no prompt (the scripted server would panic on "nothing").
        let err = deliver(
            &settings(base.clone()),
            TIMEOUT,
            Some("ses_1"),
            "nothing",
            |_| async { Err("no database".to_owned()) },
        )
        .await
        .unwrap_err();
        assert_eq!(err, DeliveryError::Commit("no database".to_owned()));

        // A session pointer that is not an OpenCode id.
        let err = deliver(&settings(base), TIMEOUT, Some("s1"), "hello", |_| async {
            Ok(())
        })
        .await
        .unwrap_err();
        assert!(
            matches!(&err, DeliveryError::Runtime(f) if f.kind() == "bad_ref"),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_prompt_that_fails_fails_the_delivery_after_the_point() {
        fn hold_prompt(method: &str, path: &str) -> Script {
            if method == "POST" && path.ends_with("/message") {
                Script::Hold
            } else {
                Script::Answer
            }
        }
        let base = scripted(hold_prompt, prompting_server);
        let points = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let err = deliver(
            &settings(base),
            Duration::from_millis(300),
            Some("ses_1"),
            "hello",
            crate::runtimes::test_support::recorder(&points),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&err, DeliveryError::Runtime(f) if f.kind() == "timeout"),
            "{err:?}"
        );
        assert_eq!(points.lock().unwrap().len(), 1);

        fn unknown(method: &str, path: &str, _: &str) -> (u16, String) {
            let _ = (method, path);
            (
                404,
                r#"{"name":"NotFoundError","data":{"message":"Session not found: ses_1"}}"#.into(),
            )
        }
        let base = scripted(answer_all, unknown);
        let points = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let err = deliver(
            &settings(base),
            TIMEOUT,
            Some("ses_1"),
            "hello",
            crate::runtimes::test_support::recorder(&points),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&err, DeliveryError::Runtime(f) if f.kind() == "unknown_session"),
            "{err:?}"
        );
        assert!(points.lock().unwrap().is_empty());
    }

    /// Deliveries against the mock server, when it is built: a new session, then a second
    /// prompt whose message sorts after the first exchange; the point of the second restores.
    #[tokio::test]
    async fn delivers_against_the_mock_server() {
        let Some(program) =
            crate::runtimes::test_support::mock_or_skip("mock-opencode", "MOCK_OPENCODE")
        else {
            return;
        };
        let data = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let mut child = tokio::process::Command::new(program)
            .args(["serve", "--port", "0", "--hostname", "127.0.0.1"])
            .current_dir(cwd.path())
            .env("XDG_DATA_HOME", data.path())
            .env("OPENCODE_CONFIG_CONTENT", r#"{"snapshot": false}"#)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(
            child.stdout.take().unwrap(),
        ));
        let base = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(url) = line.trim().strip_prefix("opencode server listening on ") {
                    return url.trim().trim_end_matches('/').to_owned();
                }
            }
            panic!("mock-opencode closed stdout before listening")
        })
        .await
        .unwrap();
        let settings = settings(base);
        let timeout = Duration::from_secs(10);
        let points = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let first = deliver(
            &settings,
            timeout,
            None,
            "first input",
            crate::runtimes::test_support::recorder(&points),
        )
        .await
        .unwrap();
        assert!(first.contains("first input"), "{first}");
        let session = points.lock().unwrap()[0].new_session.clone().unwrap();
        let second = deliver(
            &settings,
            timeout,
            Some(&session),
            "second input",
            crate::runtimes::test_support::recorder(&points),
        )
        .await
        .unwrap();
        assert!(second.contains("second input"), "{second}");
        let points = points.lock().unwrap().clone();
        let api = Api::new(&settings, timeout).unwrap();
        let listed = api
            .call(
                Method::GET,
                &["session", &session, "message"],
                None,
                None,
                "list",
            )
            .await
            .unwrap();
        let ids = message_ids(&listed).unwrap();
        let messages: Vec<String> = points
            .iter()
            .map(|p| p.recovery_ref["messageId"].as_str().unwrap().to_owned())
            .collect();
        // Each prompt created exactly the message its point names, answered after it.
        assert_eq!(ids.len(), 4, "{listed}");
        assert_eq!(ids[0], messages[0]);
        assert_eq!(ids[2], messages[1]);
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, ids, "message ids must ascend");
        let restored = restore(&settings, timeout, &session, &messages[1])
            .await
            .unwrap();
        assert!(
            matches!(restored, Restored::Verified { .. }),
            "{restored:?}"
        );
        let _ = child.kill().await;
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
