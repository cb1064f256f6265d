//! The gateway: the server the browser client talks to, and the network between them.
//!
//! It serves the page, the client module and the browser API of `protocol/CLIENT.md` (HTTP
//! reads and message sync, and a websocket for realtime), answering every call from the
//! implementation under test through its driver session ([`ConversationApi`]): whatever server
//! implementation is attached, in process or over the driver protocol, is what the browser sees.
//! The realtime events the implementation publishes are handed to it by the steps
//! ([`Gateway::publish`]) and go out as websocket frames.
//!
//! Every answer is computed when its request arrives; the [`Network`] rule of its kind then
//! decides what happens in transit: it passes, is held until the scenario releases it (in any
//! order), is dropped, or (a websocket frame) is delivered twice. So a scenario stages "a
//! `syncMessages` page from before the rewind arrives after `conversation:rewound`" by holding
//! the page across the rewind.
//!
//! Message-sync cursors are opaque tokens that stand for a position among the visible messages
//! (the browser's dirty index), not a seq: an old cursor kept across a rewind points past the
//! new visible tail and skips what follows it, which is what spec 8 requires a client to avoid.
//! Every token records the epoch it was issued in; the steps start a new epoch at each rewind,
//! so a token from before it is recognised wherever it turns up (a request, the storage).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot, Notify};

use crate::sut::{
    Actor, ConversationApi, ReadAnswer, ReadRequest, ReadSurface, RealtimeEvent, SyncRequest,
    SyncedMessage,
};

/// What a piece of traffic is, as the network rules and the journal name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// `POST /api/sync/gap`.
    SyncGap,
    /// `POST /api/sync/messages`.
    SyncMessages,
    /// `GET /api/scopes/{scope}/conversation`.
    Conversation,
    /// `GET /api/scopes/{scope}/summary`.
    Summary,
    /// `GET /api/scopes/{scope}/unread`.
    Unread,
    /// `GET /api/scopes/{scope}/search`.
    Search,
    /// `GET /api/scopes/{scope}/share-cards`.
    ShareCards,
    /// `GET /api/scopes/{scope}/tasks`.
    Tasks,
    /// A websocket `sync:resume` request (page to gateway).
    Resume,
    /// A websocket `sync:resume:response` frame (gateway to page).
    ResumeResponse,
    /// A websocket `conversation:rewound` frame.
    Rewound,
    /// A websocket `message.created` frame.
    MessageCreated,
}

impl Kind {
    /// Every kind, for parsing step text.
    pub const ALL: [Kind; 12] = [
        Kind::SyncGap,
        Kind::SyncMessages,
        Kind::Conversation,
        Kind::Summary,
        Kind::Unread,
        Kind::Search,
        Kind::ShareCards,
        Kind::Tasks,
        Kind::Resume,
        Kind::ResumeResponse,
        Kind::Rewound,
        Kind::MessageCreated,
    ];

    /// The name steps and reports use (`syncGap`, `sync:resume:response`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Kind::SyncGap => "syncGap",
            Kind::SyncMessages => "syncMessages",
            Kind::Conversation => "conversation",
            Kind::Summary => "summary",
            Kind::Unread => "unread",
            Kind::Search => "search",
            Kind::ShareCards => "share-cards",
            Kind::Tasks => "tasks",
            Kind::Resume => "sync:resume",
            Kind::ResumeResponse => "sync:resume:response",
            Kind::Rewound => "conversation:rewound",
            Kind::MessageCreated => "message.created",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> anyhow::Result<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "unknown traffic kind `{name}` (known: {})",
                    Kind::ALL.map(Kind::name).join(", ")
                )
            })
    }

    /// The surfaces section 8 says a client refetches after a rewind.
    pub const REFETCHED: [Kind; 6] = [
        Kind::Conversation,
        Kind::Summary,
        Kind::Unread,
        Kind::Search,
        Kind::ShareCards,
        Kind::Tasks,
    ];
}

/// What the network does to traffic of one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// Delivered at once.
    #[default]
    Pass,
    /// Kept until the scenario releases it.
    Hold,
    /// The next one is held, then the rule is `Pass` again.
    HoldNext,
    /// Never delivered: an HTTP answer becomes a `504`, a frame is not sent.
    Drop,
    /// A frame is delivered twice (an HTTP answer once: HTTP cannot repeat one).
    Duplicate,
}

/// What happened to one piece of traffic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Answered or sent.
    Delivered,
    /// Held by the network (until released).
    Held,
    /// Dropped by the network.
    Dropped,
    /// Sent twice.
    Duplicated,
    /// The gateway could not answer (the implementation failed); the text says why.
    Failed(String),
    /// The request is still being answered.
    InFlight,
}

/// One entry of the journal: a request from the page or a frame to it.
#[derive(Debug, Clone, Serialize)]
pub struct Exchange {
    /// Its position in the journal (0 first).
    pub n: usize,
    /// What it is.
    pub kind: Kind,
    /// When it arrived or was sent, since the gateway started.
    pub at_ms: u64,
    /// The cursor a sync request carried (`None`: none).
    pub cursor: Option<String>,
    /// The epoch that cursor was issued in (`None`: no cursor, or one the gateway never issued).
    pub cursor_epoch: Option<u32>,
    /// The epoch the exchange happened in.
    pub epoch: u32,
    /// The message ids a sync answer or frame carried.
    pub message_ids: Vec<String>,
    /// The cursor a sync answer carried, and whether it said `hasMore`.
    pub answer_cursor: Option<String>,
    /// See `answer_cursor`.
    pub has_more: bool,
    /// A websocket frame's text (for frames the gateway sends).
    pub frame: Option<String>,
    /// What the network did.
    pub outcome: Outcome,
    /// When it was delivered (for held traffic: released), since the gateway started.
    pub delivered_ms: Option<u64>,
}

/// Traffic the network holds.
struct Held {
    n: usize,
    kind: Kind,
    release: Release,
}

enum Release {
    /// An HTTP answer the network holds whose body is still being computed: the request is held
    /// from the moment it arrives, so a scenario that releases everything it holds releases it
    /// too, however long the implementation takes to answer.
    Computing {
        /// Released before its answer was ready: delivered as soon as it is.
        released: bool,
    },
    /// An HTTP answer waiting in its handler.
    Http(oneshot::Sender<bool>),
    /// A websocket frame, sent when released.
    Frame(String),
}

/// The network rules and what they hold.
#[derive(Default)]
struct Network {
    rules: BTreeMap<Kind, Rule>,
    held: Vec<Held>,
}

impl Network {
    /// Takes exchange `n`'s place among the held while its answer was computed: `Some(true)`
    /// when the scenario released it meanwhile.
    fn take_computing(&mut self, n: usize) -> Option<bool> {
        let i = self
            .held
            .iter()
            .position(|h| h.n == n && matches!(h.release, Release::Computing { .. }))?;
        match self.held.remove(i).release {
            Release::Computing { released } => Some(released),
            _ => None,
        }
    }
}

/// Where the client module comes from.
#[derive(Debug, Clone)]
pub enum ClientModule {
    /// Served by the gateway at `/client.js`.
    Served(Arc<str>),
    /// Imported by the page from this URL.
    Url(String),
}

/// What one gateway serves: one reader's view of one scope.
pub struct GatewayConfig {
    /// The implementation's driver session.
    pub api: Arc<dyn ConversationApi>,
    /// The scope the page shows.
    pub scope_id: String,
    /// The human reading it.
    pub user_id: String,
    /// The client under test.
    pub module: ClientModule,
}

struct Shared {
    api: Arc<dyn ConversationApi>,
    scope_id: String,
    user_id: String,
    module: ClientModule,
    started: Instant,
    state: Mutex<GatewayState>,
    changed: Notify,
}

#[derive(Default)]
struct GatewayState {
    epoch: u32,
    /// When each epoch after the first started, since the gateway started.
    epoch_started_ms: Vec<u64>,
    page_limit: usize,
    cursors: HashMap<String, (usize, u32)>,
    issued: usize,
    journal: Vec<Exchange>,
    network: Network,
    sockets: Vec<mpsc::UnboundedSender<String>>,
}

/// A running gateway; stopped when dropped.
pub struct Gateway {
    address: SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The default page size of message sync.
const DEFAULT_PAGE_LIMIT: usize = 100;

impl Gateway {
    /// Starts a gateway on a free loopback port.
    pub async fn start(config: GatewayConfig) -> anyhow::Result<Gateway> {
        let shared = Arc::new(Shared {
            api: config.api,
            scope_id: config.scope_id,
            user_id: config.user_id,
            module: config.module,
            started: Instant::now(),
            state: Mutex::new(GatewayState {
                page_limit: DEFAULT_PAGE_LIMIT,
                ..GatewayState::default()
            }),
            changed: Notify::new(),
        });
        let app = Router::new()
            .route("/", get(page))
            .route("/client.js", get(module))
            .route("/api/config", get(config_route))
            .route("/api/sync/gap", post(sync_gap))
            .route("/api/sync/messages", post(sync_messages))
            .route("/api/scopes/{scope}/{surface}", get(surface))
            .route("/api/ws", get(websocket))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let address = listener.local_addr()?;
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Gateway {
            address,
            shared,
            server,
        })
    }

    /// The page's URL.
    pub fn url(&self) -> String {
        format!("http://{}/", self.address)
    }

    /// Sets the rule for traffic of `kind`.
    pub fn set_rule(&self, kind: Kind, rule: Rule) {
        self.shared.lock().network.rules.insert(kind, rule);
    }

    /// Sets the most messages one sync page holds.
    pub fn set_page_limit(&self, limit: usize) {
        self.shared.lock().page_limit = limit.max(1);
    }

    /// Starts a new epoch (the steps do at each rewind): cursors issued before it are old.
    pub fn next_epoch(&self) -> u32 {
        let now = self.shared.elapsed_ms();
        let mut state = self.shared.lock();
        state.epoch += 1;
        state.epoch_started_ms.push(now);
        state.epoch
    }

    /// When the current epoch started (0 for the first), in ms since the gateway started.
    pub fn epoch_started_ms(&self) -> u64 {
        self.shared
            .lock()
            .epoch_started_ms
            .last()
            .copied()
            .unwrap_or(0)
    }

    /// The current epoch.
    pub fn epoch(&self) -> u32 {
        self.shared.lock().epoch
    }

    /// Every cursor the gateway issued before epoch `epoch`.
    pub fn cursors_before(&self, epoch: u32) -> Vec<String> {
        self.shared
            .lock()
            .cursors
            .iter()
            .filter(|(_, c)| c.1 < epoch)
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// The journal so far.
    pub fn journal(&self) -> Vec<Exchange> {
        self.shared.lock().journal.clone()
    }

    /// How much traffic the network holds, by kind.
    pub fn held(&self) -> Vec<(usize, Kind)> {
        let state = self.shared.lock();
        state
            .network
            .held
            .iter()
            .filter(|h| !matches!(h.release, Release::Computing { released: true }))
            .map(|h| (h.n, h.kind))
            .collect()
    }

    /// Releases (delivers) the held traffic `numbers`, in that order.
    pub fn release(&self, numbers: &[usize]) -> anyhow::Result<()> {
        for n in numbers {
            let held = {
                let mut state = self.shared.lock();
                let Some(i) = state.network.held.iter().position(|h| {
                    h.n == *n && !matches!(h.release, Release::Computing { released: true })
                }) else {
                    anyhow::bail!("the network holds no exchange #{n}");
                };
                if let Release::Computing { released } = &mut state.network.held[i].release {
                    // Its handler delivers it once its answer is ready.
                    *released = true;
                    continue;
                }
                let held = state.network.held.remove(i);
                let now = self.shared.elapsed_ms();
                if let Some(e) = state.journal.get_mut(*n) {
                    e.outcome = Outcome::Delivered;
                    e.delivered_ms = Some(now);
                }
                if let Release::Frame(text) = &held.release {
                    for socket in &state.sockets {
                        let _ = socket.send(text.clone());
                    }
                }
                held
            };
            if let Release::Http(sender) = held.release {
                let _ = sender.send(true);
            }
        }
        self.shared.changed.notify_waiters();
        Ok(())
    }

    /// Sends the events of this gateway's scope (published to it, or naming it) to the page as
    /// websocket frames, through the network.
    pub fn publish(&self, events: &[RealtimeEvent]) {
        for event in events {
            let kind = match event.name.as_str() {
                "conversation:rewound" => Kind::Rewound,
                "message.created" => Kind::MessageCreated,
                _ => continue,
            };
            let names_scope = event.scope_id == self.shared.scope_id
                || ["scopeId", "rewindScopeId"].iter().any(|k| {
                    event.payload.get(k).and_then(Value::as_str) == Some(&self.shared.scope_id)
                });
            if !names_scope {
                continue;
            }
            // The page's client reads the scope from the payload: the gateway names it the
            // way the browser API does, and keeps the implementation's payload beside it.
            let mut payload = event.payload.clone();
            if let Some(object) = payload.as_object_mut() {
                object
                    .entry("scopeId")
                    .or_insert_with(|| Value::String(event.scope_id.clone()));
            }
            let frame = json!({"type": event.name, "payload": payload}).to_string();
            let ids = message_ids_in(&event.payload);
            self.shared.send_frame(kind, frame, ids);
        }
    }

    /// Waits until the page has been quiet for `quiet`: no request in flight and nothing new in
    /// the journal (held traffic does not count as in flight); gives up after `limit`.
    pub async fn settle(&self, quiet: Duration, limit: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            let (len, busy) = {
                let state = self.shared.lock();
                let busy = state.journal.iter().any(|e| e.outcome == Outcome::InFlight);
                (state.journal.len(), busy)
            };
            let now = Instant::now();
            if now >= deadline {
                anyhow::bail!(
                    "the page did not settle within {} ms: it kept the network busy ({} exchanges)",
                    limit.as_millis(),
                    len
                );
            }
            let wait = quiet.min(deadline - now);
            let changed = self.shared.changed.notified();
            if tokio::time::timeout(wait, changed).await.is_err() {
                let state = self.shared.lock();
                if !busy && state.journal.len() == len {
                    return Ok(());
                }
            }
        }
    }

    /// Waits until the journal holds an exchange matching `pred` from position `from` on.
    pub async fn wait_for(
        &self,
        from: usize,
        what: &str,
        limit: Duration,
        pred: impl Fn(&Exchange) -> bool,
    ) -> anyhow::Result<Exchange> {
        let deadline = Instant::now() + limit;
        loop {
            let changed = self.shared.changed.notified();
            if let Some(e) = self
                .shared
                .lock()
                .journal
                .iter()
                .skip(from)
                .find(|e| pred(e))
            {
                return Ok(e.clone());
            }
            let now = Instant::now();
            if now >= deadline {
                anyhow::bail!(
                    "the page made no {what} within {} ms; the journal since #{from}:\n{}",
                    limit.as_millis(),
                    describe(&self.journal()[from.min(self.journal().len())..])
                );
            }
            let _ = tokio::time::timeout(deadline - now, changed).await;
        }
    }
}

/// The journal, one exchange a line, for failure messages.
pub fn describe(exchanges: &[Exchange]) -> String {
    let mut out = String::new();
    for e in exchanges {
        out.push_str(&format!(
            "  #{} {:>6} ms epoch {} {}{}{}{} -> {:?}\n",
            e.n,
            e.at_ms,
            e.epoch,
            e.kind.name(),
            e.cursor
                .as_ref()
                .map(|c| format!(
                    " cursor {c} (epoch {})",
                    e.cursor_epoch.map_or("?".to_owned(), |x| x.to_string())
                ))
                .unwrap_or_default(),
            if e.message_ids.is_empty() {
                String::new()
            } else {
                format!(" messages [{}]", e.message_ids.join(", "))
            },
            if e.has_more { " hasMore" } else { "" },
            e.outcome
        ));
    }
    out
}

/// The message id an event payload names (`messageId`; a frame's whole text is journaled too).
fn message_ids_in(payload: &Value) -> Vec<String> {
    let mut ids = Vec::new();
    if let Some(id) = payload.get("messageId").and_then(Value::as_str) {
        ids.push(id.to_owned());
    }
    ids
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, GatewayState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn elapsed_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Journals a new exchange; returns its number and the rule for its kind.
    fn record(&self, kind: Kind, cursor: Option<String>) -> (usize, Rule) {
        let at_ms = self.elapsed_ms();
        let mut state = self.lock();
        let n = state.journal.len();
        let cursor_epoch = cursor
            .as_ref()
            .and_then(|c| state.cursors.get(c).map(|x| x.1));
        let epoch = state.epoch;
        state.journal.push(Exchange {
            n,
            kind,
            at_ms,
            cursor,
            cursor_epoch,
            epoch,
            message_ids: Vec::new(),
            answer_cursor: None,
            has_more: false,
            frame: None,
            outcome: Outcome::InFlight,
            delivered_ms: None,
        });
        let mut rule = state.network.rules.get(&kind).copied().unwrap_or_default();
        if rule == Rule::HoldNext {
            state.network.rules.insert(kind, Rule::Pass);
            rule = Rule::Hold;
        }
        if rule == Rule::Hold {
            state.network.held.push(Held {
                n,
                kind,
                release: Release::Computing { released: false },
            });
        }
        drop(state);
        self.changed.notify_waiters();
        (n, rule)
    }

    fn finish(&self, n: usize, outcome: Outcome) {
        let now = self.elapsed_ms();
        let mut state = self.lock();
        if let Some(e) = state.journal.get_mut(n) {
            if matches!(outcome, Outcome::Delivered | Outcome::Duplicated) {
                e.delivered_ms = Some(now);
            }
            e.outcome = outcome;
        }
        drop(state);
        self.changed.notify_waiters();
    }

    /// Sends one frame of `kind` to the page through the network.
    fn send_frame(&self, kind: Kind, frame: String, message_ids: Vec<String>) -> usize {
        let (n, rule) = self.record(kind, None);
        let mut state = self.lock();
        if let Some(e) = state.journal.get_mut(n) {
            e.message_ids = message_ids;
            e.frame = Some(frame.clone());
        }
        state.sockets.retain(|socket| !socket.is_closed());
        let outcome = match rule {
            Rule::Pass | Rule::Duplicate if state.sockets.is_empty() => {
                Outcome::Failed("no websocket is open".to_owned())
            }
            Rule::Pass | Rule::Duplicate => {
                let times = if rule == Rule::Duplicate { 2 } else { 1 };
                for socket in &state.sockets {
                    for _ in 0..times {
                        let _ = socket.send(frame.clone());
                    }
                }
                if rule == Rule::Duplicate {
                    Outcome::Duplicated
                } else {
                    Outcome::Delivered
                }
            }
            Rule::Drop => Outcome::Dropped,
            Rule::Hold | Rule::HoldNext => match state.network.take_computing(n) {
                Some(true) => {
                    for socket in &state.sockets {
                        let _ = socket.send(frame.clone());
                    }
                    Outcome::Delivered
                }
                _ => {
                    state.network.held.push(Held {
                        n,
                        kind,
                        release: Release::Frame(frame),
                    });
                    Outcome::Held
                }
            },
        };
        drop(state);
        self.finish(n, outcome);
        n
    }

    /// A new opaque cursor for visible position `position`, issued in the current epoch.
    fn issue_cursor(&self, position: usize) -> String {
        let mut state = self.lock();
        state.issued += 1;
        let token = format!("cur-{:08x}-{}", rand_word(state.issued), state.issued);
        let epoch = state.epoch;
        state.cursors.insert(token.clone(), (position, epoch));
        token
    }

    /// The visible position `cursor` stands for (0: none, or one the gateway never issued).
    fn position(&self, cursor: Option<&str>) -> Result<usize, String> {
        match cursor {
            None => Ok(0),
            Some(token) => self
                .lock()
                .cursors
                .get(token)
                .map(|c| c.0)
                .ok_or_else(|| format!("unknown cursor `{token}`")),
        }
    }

    /// One sync page after `cursor`: the visible messages, through the implementation's message
    /// sync, from the cursor's position on.
    async fn page(&self, cursor: Option<&str>) -> Result<SyncAnswer, String> {
        let position = self.position(cursor)?;
        let mut visible: Vec<SyncedMessage> = Vec::new();
        let mut after = 0;
        loop {
            let page = self
                .api
                .sync_messages(&SyncRequest {
                    user_id: self.user_id.clone(),
                    scope_id: self.scope_id.clone(),
                    after_seq: after,
                    limit: 200,
                })
                .await
                .map_err(|e| format!("message sync failed: {e}"))?;
            let Some(last) = page.messages.last() else {
                break;
            };
            after = last.seq;
            let more = page.has_more;
            visible.extend(page.messages);
            if !more {
                break;
            }
        }
        let limit = self.lock().page_limit;
        let start = position.min(visible.len());
        let end = (start + limit).min(visible.len());
        let messages: Vec<WireMessage> = visible[start..end]
            .iter()
            .map(|m| WireMessage {
                id: m.id.clone(),
                seq: m.seq,
                content: m.content.clone(),
            })
            .collect();
        // A cursor past the visible tail stays where it is: a position is all the server knows.
        Ok(SyncAnswer {
            cursor: self.issue_cursor(end.max(position)),
            has_more: end < visible.len(),
            messages,
        })
    }

    /// Every message `surface` shows the reader (all pages of a paged surface).
    async fn read(
        &self,
        surface: ReadSurface,
        query: Option<String>,
    ) -> Result<Vec<WireMessage>, String> {
        let mut messages = Vec::new();
        let mut cursor = None;
        for _ in 0..100 {
            let answer = self
                .api
                .read(&ReadRequest {
                    surface,
                    reader: Actor::Human(self.user_id.clone()),
                    scope_id: self.scope_id.clone(),
                    message_id: None,
                    attachment_id: None,
                    query: query.clone(),
                    cursor: cursor.take(),
                    limit: None,
                })
                .await
                .map_err(|e| format!("reading {} failed: {e}", surface.name()))?;
            match answer {
                ReadAnswer::Found {
                    messages: found,
                    next_cursor,
                    ..
                } => {
                    messages.extend(found.into_iter().map(|m| WireMessage {
                        id: m.id,
                        seq: m.seq,
                        content: m.content,
                    }));
                    match next_cursor {
                        Some(next) if surface == ReadSurface::History => cursor = Some(next),
                        _ => return Ok(messages),
                    }
                }
                other => return Err(format!("{} answered {other:?}", surface.name())),
            }
        }
        Ok(messages)
    }

    /// Answers an HTTP request of `kind` through the network: `answer` is computed now, then
    /// delivered, held, or dropped.
    async fn answer(
        &self,
        (n, rule): (usize, Rule),
        kind: Kind,
        answer: Result<Value, String>,
        ids: Vec<String>,
        page: Option<(String, bool)>,
    ) -> Response {
        {
            let mut state = self.lock();
            if let Some(e) = state.journal.get_mut(n) {
                e.message_ids = ids;
                if let Some((c, more)) = page {
                    e.answer_cursor = Some(c);
                    e.has_more = more;
                }
            }
        }
        let body = match answer {
            Ok(body) => body,
            Err(why) => {
                self.lock().network.take_computing(n);
                self.finish(n, Outcome::Failed(why.clone()));
                return (StatusCode::BAD_GATEWAY, why).into_response();
            }
        };
        match rule {
            Rule::Pass | Rule::Duplicate => {
                self.finish(n, Outcome::Delivered);
                Json(body).into_response()
            }
            Rule::Drop => {
                self.finish(n, Outcome::Dropped);
                (
                    StatusCode::GATEWAY_TIMEOUT,
                    "dropped by the harness's network",
                )
                    .into_response()
            }
            Rule::Hold | Rule::HoldNext => {
                let (sender, receiver) = oneshot::channel();
                let released = {
                    let mut state = self.lock();
                    let released = state.network.take_computing(n) == Some(true);
                    if !released {
                        state.network.held.push(Held {
                            n,
                            kind,
                            release: Release::Http(sender),
                        });
                    }
                    released
                };
                if released {
                    self.finish(n, Outcome::Delivered);
                    return Json(body).into_response();
                }
                self.finish(n, Outcome::Held);
                match receiver.await {
                    Ok(true) => Json(body).into_response(),
                    _ => (
                        StatusCode::GATEWAY_TIMEOUT,
                        "dropped by the harness's network",
                    )
                        .into_response(),
                }
            }
        }
    }
}

/// A pseudo-random word for cursor tokens (they only need to look opaque).
fn rand_word(n: usize) -> u32 {
    let mut x = (n as u32).wrapping_mul(0x9E37_79B9) ^ 0x5bd1_e995;
    x ^= x >> 15;
    x.wrapping_mul(0x2c1b_3c6d)
}

#[derive(Debug, Clone, Serialize)]
struct WireMessage {
    id: String,
    seq: i64,
    content: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct SyncAnswer {
    messages: Vec<WireMessage>,
    cursor: String,
    has_more: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SyncBody {
    scope_id: String,
    #[serde(default)]
    cursor: Option<String>,
}

async fn page() -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        include_str!("../../client/index.html"),
    )
        .into_response()
}

async fn module(State(shared): State<Arc<Shared>>) -> Response {
    match &shared.module {
        ClientModule::Served(text) => (
            [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
            text.to_string(),
        )
            .into_response(),
        ClientModule::Url(_) => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn config_route(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1")
        .to_owned();
    let module = match &shared.module {
        ClientModule::Served(_) => "/client.js".to_owned(),
        ClientModule::Url(url) => url.clone(),
    };
    Json(json!({
        "scopeId": shared.scope_id,
        "userId": shared.user_id,
        "api": "/api",
        "ws": format!("ws://{host}/api/ws"),
        "module": module,
    }))
    .into_response()
}

async fn sync_gap(State(shared): State<Arc<Shared>>, Json(body): Json<SyncBody>) -> Response {
    sync(shared, Kind::SyncGap, body).await
}

async fn sync_messages(State(shared): State<Arc<Shared>>, Json(body): Json<SyncBody>) -> Response {
    sync(shared, Kind::SyncMessages, body).await
}

async fn sync(shared: Arc<Shared>, kind: Kind, body: SyncBody) -> Response {
    if body.scope_id != shared.scope_id {
        return (
            StatusCode::NOT_FOUND,
            format!("this page shows scope `{}` only", shared.scope_id),
        )
            .into_response();
    }
    // Journaled as it arrives: the order of the journal is the order of the requests.
    let recorded = shared.record(kind, body.cursor.clone());
    let answer = shared.page(body.cursor.as_deref()).await;
    let (ids, page) = match &answer {
        Ok(a) => (
            a.messages.iter().map(|m| m.id.clone()).collect(),
            Some((a.cursor.clone(), a.has_more)),
        ),
        Err(_) => (Vec::new(), None),
    };
    let body = answer.map(|a| serde_json::to_value(a).unwrap_or(Value::Null));
    shared.answer(recorded, kind, body, ids, page).await
}

#[derive(Debug, Deserialize)]
struct SearchQuery {
    #[serde(default)]
    q: Option<String>,
}

async fn surface(
    State(shared): State<Arc<Shared>>,
    Path((scope, surface)): Path<(String, String)>,
    Query(query): Query<SearchQuery>,
) -> Response {
    if scope != shared.scope_id {
        return (
            StatusCode::NOT_FOUND,
            format!("this page shows scope `{}` only", shared.scope_id),
        )
            .into_response();
    }
    let kind = match surface.as_str() {
        "conversation" => Kind::Conversation,
        "summary" => Kind::Summary,
        "unread" => Kind::Unread,
        "search" => Kind::Search,
        "share-cards" => Kind::ShareCards,
        "tasks" => Kind::Tasks,
        other => return (StatusCode::NOT_FOUND, format!("no surface `{other}`")).into_response(),
    };
    // Journaled as it arrives: the order of the journal is the order of the requests.
    let recorded = shared.record(kind, None);
    let answer = match kind {
        Kind::Conversation => shared
            .read(ReadSurface::History, None)
            .await
            .map(|m| json!({"messages": m})),
        Kind::Summary => shared
            .read(ReadSurface::ConversationIndex, None)
            .await
            .map(|m| json!({"lastMessage": m.last()})),
        Kind::Unread => shared
            .api
            .read_state(&shared.scope_id, &shared.user_id)
            .await
            .map_err(|e| format!("the read state failed: {e}"))
            .and_then(|s| s.ok_or_else(|| "the reader is not a member".to_owned()))
            .map(|s| json!({"unreadCount": s.unread_count})),
        Kind::Search => shared
            .read(ReadSurface::Search, Some(query.q.unwrap_or_default()))
            .await
            .map(|m| json!({"messages": m})),
        Kind::ShareCards => shared
            .read(ReadSurface::ShareCards, None)
            .await
            .map(|m| json!({"messages": m})),
        // The driver protocol has no task surface: the route answers an empty list, and the
        // scenarios check only that the client asks for it again after a rewind.
        _ => Ok(json!({"tasks": []})),
    };
    let ids = answer
        .as_ref()
        .map(|v| {
            v.get("messages")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .chain(v.get("lastMessage"))
                .filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    shared.answer(recorded, kind, answer, ids, None).await
}

async fn websocket(State(shared): State<Arc<Shared>>, upgrade: WebSocketUpgrade) -> Response {
    upgrade.on_upgrade(move |socket| serve_socket(shared, socket))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResumeFrame {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    request_id: Value,
    #[serde(default)]
    cursor: Option<String>,
}

async fn serve_socket(shared: Arc<Shared>, mut socket: WebSocket) {
    let (sender, mut outbound) = mpsc::unbounded_channel::<String>();
    shared.lock().sockets.push(sender);
    loop {
        tokio::select! {
            frame = outbound.recv() => {
                let Some(text) = frame else { break };
                if socket.send(Message::Text(text.into())).await.is_err() {
                    break;
                }
            }
            incoming = socket.recv() => {
                let Some(Ok(message)) = incoming else { break };
                let Message::Text(text) = message else { continue };
                let Ok(frame) = serde_json::from_str::<ResumeFrame>(text.as_str()) else { continue };
                if frame.kind != "sync:resume" {
                    continue;
                }
                let (n, _) = shared.record(Kind::Resume, frame.cursor.clone());
                let answer = shared.page(frame.cursor.as_deref()).await;
                shared.finish(n, Outcome::Delivered);
                let (reply, ids) = match answer {
                    Ok(a) => {
                        let ids = a.messages.iter().map(|m| m.id.clone()).collect::<Vec<_>>();
                        (json!({
                            "type": "sync:resume:response",
                            "requestId": frame.request_id,
                            "messages": a.messages,
                            "cursor": a.cursor,
                            "hasMore": a.has_more,
                        }), (ids, a.cursor, a.has_more))
                    }
                    Err(why) => (json!({
                        "type": "sync:resume:response",
                        "requestId": frame.request_id,
                        "error": why,
                    }), (Vec::new(), String::new(), false)),
                };
                let m = shared.send_frame(Kind::ResumeResponse, reply.to_string(), ids.0);
                let mut state = shared.lock();
                if let Some(e) = state.journal.get_mut(m) {
                    e.answer_cursor = Some(ids.1).filter(|c| !c.is_empty());
                    e.has_more = ids.2;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_parses_from_its_name_and_an_unknown_one_lists_the_known() {
        for kind in Kind::ALL {
            assert_eq!(Kind::parse(kind.name()).expect("known"), kind);
        }
        let err = Kind::parse("syncgap")
            .expect_err("names are exact")
            .to_string();
        assert!(
            err.contains("`syncgap`") && err.contains("syncGap, syncMessages"),
            "{err}"
        );
    }

    /// Answers the unread count only when the test lets it; every other call fails.
    struct SlowReadState(Arc<Notify>);

    fn unused() -> crate::sut::SutError {
        crate::sut::SutError::Internal {
            sut: "test".to_owned(),
            detail: "not used by this test".to_owned(),
        }
    }

    #[async_trait::async_trait]
    impl ConversationApi for SlowReadState {
        async fn rewind(
            &self,
            _: &crate::sut::RewindRequest,
        ) -> Result<crate::sut::RewindResponse, crate::sut::SutError> {
            Err(unused())
        }
        async fn send_message(
            &self,
            _: &crate::sut::SendMessage,
        ) -> Result<crate::sut::SentMessage, crate::sut::SutError> {
            Err(unused())
        }
        async fn deliver(
            &self,
            _: &crate::sut::DeliverRequest,
        ) -> Result<crate::sut::DeliveryReport, crate::sut::SutError> {
            Err(unused())
        }
        async fn prune_recovery_points(
            &self,
            _: &crate::sut::PruneRequest,
        ) -> Result<Vec<String>, crate::sut::SutError> {
            Err(unused())
        }
        async fn read_state(
            &self,
            _: &str,
            _: &str,
        ) -> Result<Option<crate::sut::ReadState>, crate::sut::SutError> {
            self.0.notified().await;
            Ok(Some(crate::sut::ReadState {
                last_read_seq: 3,
                visible_tail_seq: 5,
                unread_count: 2,
            }))
        }
        async fn sync_messages(
            &self,
            _: &SyncRequest,
        ) -> Result<crate::sut::SyncPage, crate::sut::SutError> {
            Err(unused())
        }
        async fn read(&self, _: &ReadRequest) -> Result<ReadAnswer, crate::sut::SutError> {
            Err(unused())
        }
        async fn take_events(&self) -> Result<Vec<RealtimeEvent>, crate::sut::SutError> {
            Ok(Vec::new())
        }
        async fn detach(&self) -> Result<(), crate::sut::SutError> {
            Ok(())
        }
    }

    /// A request that arrives while its kind is held is held from that moment, not from when
    /// its answer is ready: releasing everything the network holds while the implementation is
    /// still answering releases it too (a scenario failed on a loaded machine before this).
    #[tokio::test]
    async fn a_held_request_still_being_answered_is_held_and_can_be_released() {
        let answer_now = Arc::new(Notify::new());
        let gateway = Gateway::start(GatewayConfig {
            api: Arc::new(SlowReadState(answer_now.clone())),
            scope_id: "ch-a".to_owned(),
            user_id: "bob".to_owned(),
            module: ClientModule::Url("http://127.0.0.1:9/client.js".to_owned()),
        })
        .await
        .expect("gateway");
        gateway.set_rule(Kind::Unread, Rule::Hold);
        let url = format!("{}api/scopes/ch-a/unread", gateway.url());
        let request = tokio::spawn(async move { reqwest::get(url).await?.text().await });
        let held = gateway
            .wait_for(0, "unread request", Duration::from_secs(10), |e| {
                e.kind == Kind::Unread
            })
            .await
            .expect("the request arrives");
        assert_eq!(held.outcome, Outcome::InFlight, "its answer is not ready");
        assert_eq!(gateway.held(), vec![(held.n, Kind::Unread)]);
        gateway
            .release(&[held.n])
            .expect("released while computing");
        assert!(gateway.held().is_empty(), "released traffic is not held");
        assert!(
            gateway.release(&[held.n]).is_err(),
            "released twice: the second release holds nothing"
        );
        answer_now.notify_one();
        let body = tokio::time::timeout(Duration::from_secs(10), request)
            .await
            .expect("delivered once its answer is ready")
            .expect("task")
            .expect("answer");
        assert!(body.contains("\"unreadCount\":2"), "{body}");
        assert_eq!(gateway.journal()[held.n].outcome, Outcome::Delivered);
    }

    #[test]
    fn cursor_token_words_are_distinct() {
        let words: std::collections::BTreeSet<u32> = (1..1000).map(rand_word).collect();
        assert_eq!(words.len(), 999, "distinct tokens for distinct issues");
    }
}
