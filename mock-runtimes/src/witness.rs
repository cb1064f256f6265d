//! The delivery witness: a way for the harness to prove, without clocks, what was committed in
//! a database at the moment a runtime received a delivering input.
//!
//! When [`WITNESS_ENV`] is set in a mock's process environment (for opencode: the server
//! process's), the mock announces each DELIVERING input before it acts on it: after its fault
//! handling and request validation, but before it changes any state, it POSTs a
//! [`WitnessRequest`] as JSON to that URL and waits (at most [`WITNESS_TIMEOUT`]) for a
//! [`WitnessAnswer`]. The harness's witness server inspects the database while the mock waits
//! and answers with a number it can later match; the mock records that number as
//! [`JournalEntry::witness`](crate::journal::JournalEntry::witness) of the call.
//!
//! Delivering inputs:
//! - codex: `turn/start` (`target`: the thread id; `before`: `{"threadId", "turnIds": [the
//!   thread's turn ids before this turn, oldest first]}`);
//! - claude: every prompt of a run (a stream-json user message, or the text prompt), in any
//!   mode: new session, `--resume`, `--resume-session-at`, `--fork-session` (`target`: the
//!   session addressed, for a fork the source session; `before`: `{"sessionId", "fresh": true
//!   when the session has no transcript yet, "leafUuid": the uuid the new user entry will name
//!   as its chain parent (null when fresh), "chain": [the user/assistant uuids of the live
//!   chain from the root to that leaf]}`);
//! - opencode: `POST /session/{id}/message` (`target`: the session id; `before`:
//!   `{"sessionId", "messageId": the user message id this prompt creates, "messageIds": [the
//!   session's messages in order, without those a pending revert is about to clean up]}`).
//!
//! `input` is the full text the turn received (text items or parts joined with `\n`). A call
//! a fault rule matched never reaches the witness. A witness that cannot be reached, answers
//! with a non-2xx status or a body that is not a [`WitnessAnswer`], or does not answer within
//! [`WITNESS_TIMEOUT`], fails the call the way the runtime reports failures, with a message
//! starting `delivery witness failed: `, and nothing is changed.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The environment variable naming the witness URL (`http://127.0.0.1:<port>/...`).
pub const WITNESS_ENV: &str = "REWIND_MOCK_WITNESS_URL";

/// How long a mock waits for the witness's answer.
pub const WITNESS_TIMEOUT: Duration = Duration::from_secs(30);

/// What a mock POSTs to the witness before it acts on a delivering input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WitnessRequest {
    /// `codex`, `claude` or `opencode`.
    pub runtime: String,
    /// The thread (codex) or session (claude, opencode) the input goes to.
    pub target: String,
    /// The full text of the input.
    pub input: String,
    /// The runtime's native state right before the input (shapes in the module docs).
    pub before: serde_json::Value,
}

/// The witness's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WitnessAnswer {
    /// A number the harness chose; the mock journals it with the call.
    pub witness: u64,
}

/// A witness call that failed. Displays as `delivery witness failed: <why>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("delivery witness failed: {0}")]
pub struct WitnessError(pub String);

/// The witness URL from the process environment (`None` when unset or blank).
pub fn witness_url() -> Option<String> {
    std::env::var(WITNESS_ENV)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// POSTs `request` to `url` and waits for the answer (at most [`WITNESS_TIMEOUT`]).
pub async fn ask(url: &str, request: &WitnessRequest) -> Result<WitnessAnswer, WitnessError> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(WITNESS_TIMEOUT)
        .build()
        .map_err(|e| WitnessError(format!("cannot build an HTTP client: {e}")))?;
    let response = client
        .post(url)
        .json(request)
        .send()
        .await
        .map_err(|e| WitnessError(describe(url, &e)))?;
    let status = response.status();
    let body = response
        .text()
        .await
        .map_err(|e| WitnessError(describe(url, &e)))?;
    if !status.is_success() {
        let excerpt: String = body.chars().take(300).collect();
        return Err(WitnessError(format!("{url} answered {status}: {excerpt}")));
    }
    serde_json::from_str::<WitnessAnswer>(&body).map_err(|e| {
        let excerpt: String = body.chars().take(300).collect();
        WitnessError(format!(
            "{url} answered a body that is not {{\"witness\": <number>}}: {e}: {excerpt}"
        ))
    })
}

/// [`ask`] from synchronous code (the codex and claude mocks): runs it on a small
/// current-thread runtime. Must not be called from inside an async runtime.
pub fn ask_blocking(url: &str, request: &WitnessRequest) -> Result<WitnessAnswer, WitnessError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| WitnessError(format!("cannot start an async runtime: {e}")))?;
    runtime.block_on(ask(url, request))
}

fn describe(url: &str, error: &reqwest::Error) -> String {
    let what = if error.is_timeout() {
        format!(
            "no answer from {url} within {} s",
            WITNESS_TIMEOUT.as_secs()
        )
    } else if error.is_connect() {
        format!("cannot reach {url}")
    } else {
        format!("request to {url} failed")
    };
    // The source chain says why (connection refused, ...).
    let mut text = format!("{what}: {error}");
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_answers_are_camel_case_json() {
        let request = WitnessRequest {
            runtime: "codex".into(),
            target: "t".into(),
            input: "hi".into(),
            before: serde_json::json!({"threadId": "t", "turnIds": []}),
        };
        assert_eq!(
            serde_json::to_value(&request).unwrap(),
            serde_json::json!({
                "runtime": "codex",
                "target": "t",
                "input": "hi",
                "before": {"threadId": "t", "turnIds": []},
            })
        );
        let answer: WitnessAnswer = serde_json::from_str(r#"{"witness": 7}"#).unwrap();
        assert_eq!(answer.witness, 7);
        assert_eq!(
            WitnessError("x".into()).to_string(),
            "delivery witness failed: x"
        );
    }

    #[test]
    fn an_unreachable_witness_fails_quickly() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/witness", listener.local_addr().unwrap());
        drop(listener);
        let request = WitnessRequest {
            runtime: "claude".into(),
            target: "s".into(),
            input: String::new(),
            before: serde_json::Value::Null,
        };
        let err = ask_blocking(&url, &request).unwrap_err();
        assert!(
            err.to_string().starts_with("delivery witness failed: "),
            "{err}"
        );
    }
}
