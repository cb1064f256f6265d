//! Fake model APIs on loopback (wiremock): the OpenAI Responses API for Codex, the Anthropic
//! Messages API for Claude Code, and Chat Completions for OpenCode's `@ai-sdk/openai-compatible`
//! provider. Every request is answered, streaming when asked, with the text the mocks answer
//! without a model ([`rewind_mock_runtimes::reply_to`] of the last user text), so replies can be
//! compared as they are. A delay ([`FakeModel::set_delay`]) keeps a turn running for the busy
//! cases.
//!
//! The answers look like a real API's where a runtime could tell: every answer has an id of its
//! own in the API's shape (`msg_01…`, `resp_…`, `chatcmpl-…`; a runtime may key its records by
//! it, and Claude Code's choice of branch on a plain `--resume` depends on it), the model named
//! is the model asked for, and the usage grows with the request and the reply. Every request is
//! kept ([`FakeModel::inputs`]): what the runtime sent the model, the thing a restore exists for.
//!
//! A run that seeds a real session from a fixture scripts the answers first
//! ([`FakeModel::script`]): a prompt that is a scripted input is answered with the fixture's
//! reply. A fault makes every later answer an HTTP error ([`FakeModel::set_error`]) or late
//! ([`FakeModel::set_delay`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
    api: Api,
    delay_ms: Arc<AtomicU64>,
    error_status: Arc<AtomicU16>,
    script: Arc<Mutex<BTreeMap<String, String>>>,
}

impl std::fmt::Debug for FakeModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeModel")
            .field("api", &self.api)
            .field("uri", &self.server.uri())
            .finish_non_exhaustive()
    }
}

/// One message of a request's conversation, as the model received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// `user` or `assistant` (system and tool messages are left out).
    pub role: String,
    /// Its text blocks, joined by a newline (the runtime's own context blocks, which start with
    /// `<`, left out).
    pub text: String,
}

impl FakeModel {
    /// Starts a dedicated server speaking `api` on loopback.
    pub async fn start(api: Api) -> FakeModel {
        FakeModel::start_on(api, std::net::IpAddr::from([127, 0, 0, 1]))
            .await
            .expect("a fake model API on loopback")
    }

    /// Starts a dedicated server speaking `api` on `address` (any free port).
    pub async fn start_on(api: Api, address: std::net::IpAddr) -> std::io::Result<FakeModel> {
        let listener = std::net::TcpListener::bind((address, 0))?;
        let server = MockServer::builder().listener(listener).start().await;
        let delay_ms = Arc::new(AtomicU64::new(0));
        let error_status = Arc::new(AtomicU16::new(0));
        let script: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
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
                error_status: Arc::clone(&error_status),
                script: Arc::clone(&script),
                answered: AtomicU64::new(0),
                salt: uuid::Uuid::new_v4().simple().to_string(),
            })
            .mount(&server)
            .await;
        Ok(FakeModel {
            server,
            api,
            delay_ms,
            error_status,
            script,
        })
    }

    /// Answers a prompt that is exactly `input` (its newest user text, trimmed) with `answer`
    /// from now on, instead of [`rewind_mock_runtimes::reply_to`].
    pub fn script(&self, input: &str, answer: &str) {
        self.script
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(input.trim().to_owned(), answer.to_owned());
    }

    /// Answers every later request with HTTP `status` (an overloaded or failing API), or
    /// normally again with `None`.
    pub fn set_error(&self, status: Option<u16>) {
        self.error_status
            .store(status.unwrap_or(0), Ordering::SeqCst);
    }

    /// How many requests the model received so far.
    pub async fn received(&self) -> usize {
        self.server
            .received_requests()
            .await
            .map(|r| r.len())
            .unwrap_or_default()
    }

    /// The conversation of every request received so far, in order: what the runtime sent the
    /// model (requests that are not a conversation, such as title generation, included).
    pub async fn inputs(&self) -> Vec<Vec<Turn>> {
        self.server
            .received_requests()
            .await
            .unwrap_or_default()
            .iter()
            .map(|r| {
                let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
                conversation(self.api, &body)
            })
            .collect()
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
    error_status: Arc<AtomicU16>,
    script: Arc<Mutex<BTreeMap<String, String>>>,
    /// Answers given so far: numbers each answer's id.
    answered: AtomicU64,
    /// Tells this server's ids from every other's.
    salt: String,
}

/// What one answer says besides its text: its id, the model, the usage.
struct Meta {
    id: String,
    model: String,
    input_tokens: u64,
    output_tokens: u64,
}

impl Respond for Answer {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let delay = Duration::from_millis(self.delay_ms.load(Ordering::SeqCst));
        let status = self.error_status.load(Ordering::SeqCst);
        if status != 0 {
            return ResponseTemplate::new(status)
                .set_body_json(json!({"error": {"type": "api_error",
                                               "message": "the fake model was told to fail"}}))
                .set_delay(delay);
        }
        let prompt = last_user_text(self.api, &body);
        let scripted = self
            .script
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(prompt.trim())
            .cloned();
        let reply = scripted.unwrap_or_else(|| rewind_mock_runtimes::reply_to(&prompt));
        let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
        let n = self.answered.fetch_add(1, Ordering::SeqCst) + 1;
        // Ids in each API's shape, distinct for every answer of every server.
        let unique = format!("{n:06}{}", &self.salt[..16]);
        let meta = Meta {
            id: match self.api {
                Api::Responses => format!("resp_{unique}"),
                Api::Messages => format!("msg_01{unique}"),
                Api::ChatCompletions => format!("chatcmpl-{unique}"),
            },
            model: body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("unnamed-model")
                .to_owned(),
            // About four bytes a token, as the real tokenizers count English.
            input_tokens: (request.body.len() as u64 / 4).max(1),
            output_tokens: (reply.len() as u64 / 4).max(1),
        };
        let template = match (self.api, stream) {
            (Api::Responses, _) => sse(responses_events(&reply, &meta)),
            (Api::Messages, true) => sse(messages_events(&reply, &meta)),
            (Api::Messages, false) => {
                ResponseTemplate::new(200).set_body_json(message(&reply, &meta))
            }
            (Api::ChatCompletions, true) => sse(chat_events(&reply, &meta)),
            (Api::ChatCompletions, false) => {
                ResponseTemplate::new(200).set_body_json(chat_completion(&reply, &meta))
            }
        };
        template.set_delay(delay)
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

/// The user and assistant messages of a request, in order, each with its text (see [`Turn`]).
pub fn conversation(api: Api, body: &Value) -> Vec<Turn> {
    let messages = match api {
        Api::Responses => body.get("input"),
        Api::Messages | Api::ChatCompletions => body.get("messages"),
    };
    let text_of = |content: Option<&Value>| -> String {
        match content {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(blocks)) => blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .filter(|t| !t.trim_start().starts_with('<'))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    };
    messages
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let role = m.get("role").and_then(Value::as_str)?;
            matches!(role, "user" | "assistant").then(|| Turn {
                role: role.to_owned(),
                text: text_of(m.get("content")),
            })
        })
        .filter(|t| !t.text.is_empty())
        .collect()
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

fn responses_events(reply: &str, meta: &Meta) -> Vec<(Option<&'static str>, Value)> {
    let item_id = format!("msg_{}", &meta.id["resp_".len()..]);
    let item = json!({
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": reply, "annotations": []}]
    });
    let mut events = vec![(
        Some("response.created"),
        json!({"type": "response.created",
               "response": {"id": meta.id, "status": "in_progress", "model": meta.model}}),
    )];
    if !reply.is_empty() {
        events.push((
            Some("response.output_item.added"),
            json!({"type": "response.output_item.added", "output_index": 0,
                   "item": {"type": "message", "id": item_id, "role": "assistant",
                            "status": "in_progress", "content": []}}),
        ));
        for piece in pieces(reply) {
            events.push((
                Some("response.output_text.delta"),
                json!({"type": "response.output_text.delta", "item_id": item_id,
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
            "id": meta.id, "status": "completed", "model": meta.model,
            "usage": {"input_tokens": meta.input_tokens,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": meta.output_tokens,
                      "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": meta.input_tokens + meta.output_tokens}}}),
    ));
    events
}

fn usage(meta: &Meta) -> Value {
    json!({"input_tokens": meta.input_tokens, "output_tokens": meta.output_tokens,
           "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0})
}

fn message(reply: &str, meta: &Meta) -> Value {
    json!({
        "id": meta.id, "type": "message", "role": "assistant", "model": meta.model,
        "content": [{"type": "text", "text": reply}],
        "stop_reason": "end_turn", "stop_sequence": null, "usage": usage(meta)
    })
}

fn messages_events(reply: &str, meta: &Meta) -> Vec<(Option<&'static str>, Value)> {
    let mut start = message("", meta);
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
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
               "usage": {"output_tokens": meta.output_tokens}}),
    ));
    events.push((Some("message_stop"), json!({"type": "message_stop"})));
    events
}

fn chat_chunk(meta: &Meta, delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": meta.id, "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": meta.model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    })
}

fn chat_usage(meta: &Meta) -> Value {
    json!({"prompt_tokens": meta.input_tokens, "completion_tokens": meta.output_tokens,
           "total_tokens": meta.input_tokens + meta.output_tokens})
}

fn chat_events(reply: &str, meta: &Meta) -> Vec<(Option<&'static str>, Value)> {
    let mut events = vec![(
        None,
        chat_chunk(meta, json!({"role": "assistant", "content": ""}), None),
    )];
    for piece in pieces(reply) {
        events.push((None, chat_chunk(meta, json!({"content": piece}), None)));
    }
    let mut last = chat_chunk(meta, json!({}), Some("stop"));
    last["usage"] = chat_usage(meta);
    events.push((None, last));
    events.push((None, Value::Null));
    events
}

fn chat_completion(reply: &str, meta: &Meta) -> Value {
    json!({
        "id": meta.id, "object": "chat.completion", "created": 1_700_000_000,
        "model": meta.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                     "finish_reason": "stop"}],
        "usage": chat_usage(meta)
    })
}
