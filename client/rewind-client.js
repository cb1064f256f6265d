// The reference browser client of the Rewind conformance suite: the executable reading of the
// client duties of spec section 8, as `reference-impl/` is for the server.
//
// It shows one conversation (its messages, summary, unread count, search results, share cards
// and tasks), keeps it current with message sync (HTTP `syncGap` / `syncMessages` and websocket
// `sync:resume`) and recovers from `conversation:rewound`:
//
//   1. advance the message-sync cursor generation and drop every outstanding websocket
//      `sync:resume` request (their responses are now stale);
//   2. clear the in-memory and the persisted opaque cursor (and the persisted message cache);
//   3. invalidate and refetch the conversation, summary, unread count, search results, share
//      cards and tasks;
//   4. bootstrap a fresh `syncGap` with the new generation, from no cursor.
//
// Every sync response is checked against the generation it was issued under before it touches
// anything: a stale one returns before it persists a cursor, merges a message or follows
// `hasMore`, and queues one fresh-generation sync (several stale responses share one).
//
// The interface the harness drives (protocol/CLIENT.md): `mount(root, config)` returns a handle
// with `search(query)`; what the client shows is read from `data-rewind-*` attributes.
//
// No dependencies, no build step: an ES module a page imports as it is.

const CURSOR_KEY = (scope) => `rewind-client:cursor:${scope}`;
const CACHE_KEY = (scope) => `rewind-client:messages:${scope}`;

export async function mount(root, config) {
  const client = new RewindClient(root, config);
  await client.start();
  return {
    search: (query) => client.search(query),
  };
}

class RewindClient {
  constructor(root, config) {
    this.root = root;
    this.scopeId = config.scopeId;
    this.api = config.api.replace(/\/$/, "");
    this.wsUrl = config.ws;
    // Message sync: the cursor generation, the opaque cursor, outstanding websocket resumes.
    this.generation = 0;
    this.cursor = localStorage.getItem(CURSOR_KEY(this.scopeId));
    this.outstanding = new Map(); // requestId -> generation it was issued under
    this.nextRequest = 1;
    this.freshQueued = false;
    // What is shown; each surface remembers the latest request, so an older answer that
    // arrives late never overwrites a newer one.
    this.messages = new Map(); // id -> {id, seq, content}
    this.summary = null;
    this.unread = null;
    this.query = null;
    this.searchHits = [];
    this.shareCards = [];
    this.tasks = [];
    this.latest = new Map(); // surface -> request number
    this.restoreCache();
  }

  async start() {
    this.renderShell();
    await this.connect();
    // The cursor the page resumes from is the one it had before the surfaces were fetched: a
    // live message merged while they load may be replaced by the conversation's answer, so the
    // first sync must not start after it.
    const from = this.cursor;
    await this.refreshAll();
    // Mounted once the surfaces are shown; message sync goes on in the background.
    this.sync(from);
  }

  // ---- realtime ------------------------------------------------------------------------

  connect() {
    return new Promise((resolve) => {
      const socket = new WebSocket(this.wsUrl);
      this.socket = socket;
      socket.addEventListener("open", () => resolve());
      socket.addEventListener("error", () => resolve());
      socket.addEventListener("message", (event) => {
        let frame;
        try {
          frame = JSON.parse(event.data);
        } catch {
          return;
        }
        this.onFrame(frame);
      });
    });
  }

  onFrame(frame) {
    const payload = frame.payload || {};
    switch (frame.type) {
      case "conversation:rewound":
        if (payload.scopeId === this.scopeId || payload.rewindScopeId === this.scopeId) {
          this.recover();
        }
        break;
      case "message.created":
        if (payload.scopeId === this.scopeId) {
          this.resume();
          this.refreshCounts();
        }
        break;
      case "sync:resume:response":
        this.onResumeResponse(frame);
        break;
      default:
        break;
    }
  }

  // The rewind recovery, in the order section 8 gives.
  async recover() {
    // 1. A new generation; every outstanding websocket resume belongs to the old one.
    this.generation += 1;
    const generation = this.generation;
    this.outstanding.clear();
    this.freshQueued = false;
    // 2. No cursor, in memory or persisted; no persisted copy of the rewound transcript.
    this.cursor = null;
    localStorage.removeItem(CURSOR_KEY(this.scopeId));
    sessionStorage.removeItem(CACHE_KEY(this.scopeId));
    // 3. Every cached surface is invalid: refetch it.
    this.messages = new Map();
    this.searchHits = [];
    this.render();
    await this.refreshAll();
    // 4. A fresh syncGap under the new generation, from no cursor: a live message a resume
    // merged during the refetch may have been replaced by the conversation's answer, and the
    // cursor that resume stored points past it.
    if (generation === this.generation) await this.sync(null);
  }

  // ---- message sync --------------------------------------------------------------------

  // HTTP syncGap from the given cursor (the current one by default), then syncMessages while
  // `hasMore`.
  async sync(from = this.cursor) {
    const generation = this.generation;
    let page = await this.post("/sync/gap", { scopeId: this.scopeId, cursor: from });
    for (;;) {
      if (!page) return;
      if (generation !== this.generation) {
        this.stale();
        return;
      }
      this.accept(page);
      if (!page.hasMore) return;
      page = await this.post("/sync/messages", { scopeId: this.scopeId, cursor: this.cursor });
    }
  }

  // A websocket resume from the current cursor (a live message was announced).
  resume() {
    if (!this.socket || this.socket.readyState !== WebSocket.OPEN) {
      this.sync();
      return;
    }
    const requestId = `r${this.nextRequest++}`;
    this.outstanding.set(requestId, this.generation);
    this.socket.send(
      JSON.stringify({ type: "sync:resume", requestId, scopeId: this.scopeId, cursor: this.cursor }),
    );
  }

  onResumeResponse(frame) {
    const generation = this.outstanding.get(frame.requestId);
    this.outstanding.delete(frame.requestId);
    if (generation === undefined || generation !== this.generation) {
      this.stale();
      return;
    }
    this.accept(frame);
    if (frame.hasMore) this.resume();
  }

  // A stale response: nothing of it is kept; one fresh-generation sync follows.
  stale() {
    if (this.freshQueued) return;
    this.freshQueued = true;
    const generation = this.generation;
    setTimeout(() => {
      if (generation !== this.generation) return;
      this.freshQueued = false;
      this.sync();
    }, 0);
  }

  // A current page: merge its messages, then persist its cursor.
  accept(page) {
    for (const message of page.messages || []) {
      this.messages.set(message.id, { id: message.id, seq: message.seq, content: message.content });
    }
    this.cursor = page.cursor ?? this.cursor;
    if (this.cursor !== null && this.cursor !== undefined) {
      localStorage.setItem(CURSOR_KEY(this.scopeId), this.cursor);
    }
    this.saveCache();
    this.render();
  }

  // ---- surfaces ------------------------------------------------------------------------

  async refreshAll() {
    await Promise.all([
      this.refresh("conversation", `/scopes/${enc(this.scopeId)}/conversation`, (body) => {
        this.messages = new Map(body.messages.map((m) => [m.id, { id: m.id, seq: m.seq, content: m.content }]));
        this.saveCache();
      }),
      this.refresh("summary", `/scopes/${enc(this.scopeId)}/summary`, (body) => {
        this.summary = body.lastMessage;
      }),
      this.refresh("unread", `/scopes/${enc(this.scopeId)}/unread`, (body) => {
        this.unread = body.unreadCount;
      }),
      this.query === null
        ? Promise.resolve()
        : this.refresh("search", this.searchPath(this.query), (body) => {
            this.searchHits = body.messages;
          }),
      this.refresh("share-cards", `/scopes/${enc(this.scopeId)}/share-cards`, (body) => {
        this.shareCards = body.messages;
      }),
      this.refresh("tasks", `/scopes/${enc(this.scopeId)}/tasks`, (body) => {
        this.tasks = body.tasks;
      }),
    ]);
    this.render();
  }

  // A new message changes the summary and the unread count.
  async refreshCounts() {
    await Promise.all([
      this.refresh("summary", `/scopes/${enc(this.scopeId)}/summary`, (body) => {
        this.summary = body.lastMessage;
      }),
      this.refresh("unread", `/scopes/${enc(this.scopeId)}/unread`, (body) => {
        this.unread = body.unreadCount;
      }),
    ]);
    this.render();
  }

  async search(query) {
    this.query = query;
    await this.refresh("search", this.searchPath(query), (body) => {
      this.searchHits = body.messages;
    });
    this.render();
  }

  searchPath(query) {
    return `/scopes/${enc(this.scopeId)}/search?q=${enc(query)}`;
  }

  // Fetches one surface; applies the answer only if no newer request of it was made since.
  async refresh(surface, path, apply) {
    const number = (this.latest.get(surface) || 0) + 1;
    this.latest.set(surface, number);
    const generation = this.generation;
    const body = await this.get(path);
    if (!body || this.latest.get(surface) !== number || generation !== this.generation) return;
    apply(body);
  }

  // ---- persistence ---------------------------------------------------------------------

  restoreCache() {
    try {
      const cached = JSON.parse(sessionStorage.getItem(CACHE_KEY(this.scopeId)) || "[]");
      for (const m of cached) this.messages.set(m.id, m);
    } catch {
      sessionStorage.removeItem(CACHE_KEY(this.scopeId));
    }
  }

  saveCache() {
    sessionStorage.setItem(CACHE_KEY(this.scopeId), JSON.stringify(this.sorted()));
  }

  sorted() {
    return [...this.messages.values()].sort((a, b) => a.seq - b.seq);
  }

  // ---- transport -----------------------------------------------------------------------

  async get(path) {
    return this.request(path, { method: "GET" });
  }

  async post(path, body) {
    return this.request(path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  }

  async request(path, init) {
    try {
      // Live data: never from the HTTP cache (which would also make a second request for the
      // same URL wait for the first).
      const response = await fetch(this.api + path, { ...init, cache: "no-store" });
      if (!response.ok) return null;
      return await response.json();
    } catch {
      return null;
    }
  }

  // ---- rendering -----------------------------------------------------------------------

  renderShell() {
    this.root.innerHTML = `
      <section class="conversation">
        <h2>Conversation <span class="unread">unread <b data-rewind-unread></b></span></h2>
        <p class="summary" data-rewind-summary></p>
        <ol data-rewind-list="messages"></ol>
      </section>
      <aside>
        <h3>Search</h3>
        <form class="search"><input name="q" type="search" placeholder="Search this conversation"></form>
        <ol data-rewind-list="search"></ol>
        <h3>Share cards</h3>
        <ol data-rewind-list="share-cards"></ol>
        <h3>Tasks</h3>
        <ol data-rewind-list="tasks"></ol>
      </aside>`;
    const form = this.root.querySelector("form.search");
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.search(form.elements.q.value);
    });
    this.render();
  }

  render() {
    const list = (name, items) => {
      const element = this.root.querySelector(`[data-rewind-list="${name}"]`);
      if (!element) return;
      element.replaceChildren(
        ...items.map((m) => {
          const item = document.createElement("li");
          item.dataset.messageId = m.id;
          item.textContent = m.content;
          return item;
        }),
      );
    };
    list("messages", this.sorted());
    list("search", this.searchHits);
    list("share-cards", this.shareCards);
    list("tasks", this.tasks.map((t) => ({ id: t.messageId || t.id, content: t.title || "" })));
    const input = this.root.querySelector("form.search input");
    if (input && this.query !== null && document.activeElement !== input) input.value = this.query;
    const unread = this.root.querySelector("[data-rewind-unread]");
    if (unread) unread.textContent = this.unread === null ? "" : String(this.unread);
    const summary = this.root.querySelector("[data-rewind-summary]");
    if (summary) {
      summary.dataset.lastMessageId = this.summary ? this.summary.id : "";
      summary.textContent = this.summary ? this.summary.content : "";
    }
  }
}

function enc(value) {
  return encodeURIComponent(value);
}
