//! Fake model APIs on loopback (wiremock): the OpenAI Responses API for Codex, the Anthropic
//! Messages API for Claude Code, and Chat Completions for OpenCode's `@ai-sdk/openai-compatible`
//! provider. Every request is answered, streaming when asked, with the text the mocks answer
//! without a model ([`rewind_mock_runtimes::reply_to`] of the last user text), so replies can be
//! compared as they are. A delay ([`FakeModel::set_delay`]) keeps a turn running for the busy
//! cases.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Which API a fake model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST /v1/responses` (Codex, `wire_api = "responses"`).
    Responses,
    /// `POST /v1/messages` (Claude Code, `ANTHROPIC_BASE_URL`).
    Messages,
    /// `POST /v1/chat/completions` (OpenCode).
    ChatCompletions,
}

/// A running fake model API.
pub struct FakeModel {
    server: MockServer,
    delay_ms: Arc<AtomicU64>,
}

impl FakeModel {
    /// Starts a dedicated server speaking `api`.
    pub async fn start(api: Api) -> FakeModel {
        let server = MockServer::builder().start().await;
        let delay_ms = Arc::new(AtomicU64::new(0));
        let route = match api {
            Api::Responses => r"/responses$",
            Api::Messages => r"/messages$",
            Api::ChatCompletions => r"/chat/completions$",
        };
        Mock::given(method("POST"))
            .and(path_regex(route))
            .respond_with(Answer {
                api,
                delay_ms: Arc::clone(&delay_ms),
            })
            .mount(&server)
            .await;
        FakeModel { server, delay_ms }
    }

    /// The base URL with `/v1` (what every client is configured with).
    pub fn base_v1(&self) -> String {
        format!("{}/v1", self.server.uri())
    }

    /// The base URL without a path (Anthropic clients add `/v1` themselves).
    pub fn base(&self) -> String {
        self.server.uri()
    }

    /// Delays every later answer by `delay` (zero: answer at once).
    pub fn set_delay(&self, delay: Duration) {
        self.delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }
}

struct Answer {
    api: Api,
    delay_ms: Arc<AtomicU64>,
}

impl Respond for Answer {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let prompt = last_user_text(self.api, &body);
        let reply = rewind_mock_runtimes::reply_to(&prompt);
        let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
        let template = match (self.api, stream) {
            (Api::Responses, _) => sse(responses_events(&reply)),
            (Api::Messages, true) => sse(messages_events(&reply)),
            (Api::Messages, false) => ResponseTemplate::new(200).set_body_json(message(&reply)),
            (Api::ChatCompletions, true) => sse(chat_events(&reply)),
            (Api::ChatCompletions, false) => {
                ResponseTemplate::new(200).set_body_json(chat_completion(&reply))
            }
        };
        let delay = self.delay_ms.load(Ordering::SeqCst);
        template.set_delay(Duration::from_millis(delay))
    }
}

/// The text of the newest user message of a request (the runtimes add their own context as
/// earlier messages or earlier blocks; the prompt is the last text).
fn last_user_text(api: Api, body: &Value) -> String {
    let messages = match api {
        Api::Responses => body.get("input"),
        Api::Messages | Api::ChatCompletions => body.get("messages"),
    };
    let Some(messages) = messages.and_then(Value::as_array) else {
        return String::new();
    };
    let Some(user) = messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
    else {
        return String::new();
    };
    match user.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .rfind(|t| !t.trim_start().starts_with('<'))
            .unwrap_or_default()
            .to_owned(),
        _ => String::new(),
    }
}

fn sse(events: Vec<(Option<&'static str>, Value)>) -> ResponseTemplate {
    let mut body = String::new();
    for (event, data) in events {
        if let Some(event) = event {
            body.push_str(&format!("event: {event}\n"));
        }
        // A null is the end marker of a Chat Completions stream.
        let data = match data {
            Value::Null => "[DONE]".to_owned(),
            other => other.to_string(),
        };
        body.push_str(&format!("data: {data}\n\n"));
    }
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .insert_header("cache-control", "no-cache")
        .set_body_raw(body, "text/event-stream")
}

/// The reply in word-sized pieces, as a model streams it.
fn pieces(reply: &str) -> Vec<String> {
    reply.split_inclusive(' ').map(str::to_owned).collect()
}

fn responses_events(reply: &str) -> Vec<(Option<&'static str>, Value)> {
    let item = json!({
        "type": "message",
        "id": "msg_fake_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": reply, "annotations": []}]
    });
    let mut events = vec![(
        Some("response.created"),
        json!({"type": "response.created", "response": {"id": "resp_fake_1", "status": "in_progress"}}),
    )];
    if !reply.is_empty() {
        events.push((
            Some("response.output_item.added"),
            json!({"type": "response.output_item.added", "output_index": 0,
                   "item": {"type": "message", "id": "msg_fake_1", "role": "assistant",
                            "status": "in_progress", "content": []}}),
        ));
        for piece in pieces(reply) {
            events.push((
                Some("response.output_text.delta"),
                json!({"type": "response.output_text.delta", "item_id": "msg_fake_1",
                       "output_index": 0, "content_index": 0, "delta": piece}),
            ));
        }
        events.push((
            Some("response.output_item.done"),
            json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        ));
    }
    events.push((
        Some("response.completed"),
        json!({"type": "response.completed", "response": {
            "id": "resp_fake_1", "status": "completed",
            "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": 15}}}),
    ));
    events
}

fn usage() -> Value {
    json!({"input_tokens": 10, "output_tokens": 5,
           "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0})
}

fn message(reply: &str) -> Value {
    json!({
        "id": "msg_fake_1", "type": "message", "role": "assistant", "model": "claude-fake",
        "content": [{"type": "text", "text": reply}],
        "stop_reason": "end_turn", "stop_sequence": null, "usage": usage()
    })
}

fn messages_events(reply: &str) -> Vec<(Option<&'static str>, Value)> {
    let mut start = message("");
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    let mut events = vec![
        (
            Some("message_start"),
            json!({"type": "message_start", "message": start}),
        ),
        (
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
        ),
    ];
    for piece in pieces(reply) {
        events.push((
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": piece}}),
        ));
    }
    events.push((
        Some("content_block_stop"),
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push((
        Some("message_delta"),
        json!({"type": "message_delta",
               "delta": {"stop_reason": "end_turn", "stop_sequence": null},
               "usage": {"output_tokens": 5}}),
    ));
    events.push((Some("message_stop"), json!({"type": "message_stop"})));
    events
}

fn chat_chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    })
}

fn chat_events(reply: &str) -> Vec<(Option<&'static str>, Value)> {
    let mut events = vec![(
        None,
        chat_chunk(json!({"role": "assistant", "content": ""}), None),
    )];
    for piece in pieces(reply) {
        events.push((None, chat_chunk(json!({"content": piece}), None)));
    }
    let mut last = chat_chunk(json!({}), Some("stop"));
    last["usage"] = json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15});
    events.push((None, last));
    events.push((None, Value::Null));
    events
}

fn chat_completion(reply: &str) -> Value {
    json!({
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
}
