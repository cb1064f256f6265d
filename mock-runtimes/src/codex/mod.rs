//! A mock Codex app-server: `codex app-server` speaking JSON-RPC 2.0 without the `"jsonrpc"`
//! field, one JSON object per line on stdin/stdout, camelCase fields, as `openai/codex`'s
//! `codex-rs/app-server` does. A daemon written against the real app-server drives it unchanged.
//!
//! # Protocol versions
//! `REWIND_MOCK_CODEX_VERSION` picks the release imitated (default [`DEFAULT_VERSION`], the
//! current release):
//! - `< 0.156.0` imitates Codex **0.155.x**: `thread/rollback` is served, but only on threads
//!   started with `historyMode: "legacy"` (an experimental field: the connection must have
//!   initialized with `capabilities.experimentalApi: true`); default threads are paginated and
//!   refuse it (`-32600 "paginated threads do not support thread/rollback"`). Every
//!   `thread/rollback` call is preceded by a `deprecationNotice` notification (except for the
//!   client named `codex-tui`, as in the real server). Releases older than 0.155 (where every
//!   thread accepted rollback) are not imitated: they behave like 0.155.
//! - `>= 0.156.0` imitates Codex **0.156 and later** (observed: 0.171.0): `thread/rollback` is
//!   gone from the request enum, so it fails like any unknown method: `-32600 "Invalid
//!   request: unknown variant `thread/rollback`, expected one of ..."`, legacy threads
//!   included (a legacy thread cannot be restored at all there). `thread/read` answers
//!   `{thread, readState}` and turns notify `thread/readState/changed` (not seen on 0.155; the
//!   release that brought them is not known, the mock ties them to this generation).
//!
//! In both: threads start paginated unless `historyMode: "legacy"` is asked for;
//! `thread/revert {threadId, beforeTurnId}` works on paginated threads only;
//! `thread/turns/list` and `thread/unsubscribe` are served; a full-history read of a paginated
//! thread (`thread/read {includeTurns: true}`, or `thread/resume` without `excludeTurns: true`)
//! is preceded by a `deprecationNotice` ("Full-history hydration is deprecated for paginated
//! threads; ..."), and answers normally.
//!
//! Threads the harness seeds ([`seed_thread`]) get the mode the imitated release's users hold
//! ([`seed_history_mode`]): `legacy` under 0.155 (threads a rollback-based daemon started),
//! `paginated` from 0.156 on.
//!
//! # Methods
//! `initialize` (then `"Already initialized"`; any other request before it: `"Not initialized"`),
//! notification `initialized`, `thread/start` (+ `thread/started`), `thread/resume {threadId,
//! excludeTurns?}` (turns filled unless excluded; also `turnsBackwardsCursor`,
//! `itemsBackwardsCursor`, both null for a legacy thread; `serviceTier` null, except `"default"`
//! from 0.156 on for a thread that was ever reverted), `thread/unsubscribe {threadId}` (`{status:
//! "unsubscribed"}`, or `"notLoaded"`; the process stays the thread's writer), `turn/start`
//! (answers the turn `inProgress` with `startedAt: null`, then notifications `warning` (the real
//! one about the unknown model's metadata), `thread/status/changed(active)`, `turn/started`,
//! `item/started`+`item/completed` for the user message, `item/started`, `item/agentMessage/delta`
//! per word, `item/completed`, `thread/tokenUsage/updated`, `account/rateLimits/updated` (every
//! limit null), `thread/readState/changed` (0.156 on), `thread/status/changed(idle)`,
//! `turn/completed` (the turn in the `summary` view: its items the `agentMessage` alone, no user
//! message); the agent's reply is [`crate::reply_to`] of the text items joined with `\n`, no model;
//! an empty reply completes the turn without any `agentMessage` item. A `turn/start` while a turn
//! runs is accepted: it answers the running turn, still `inProgress`, and its text joins that
//! turn's input, so the reply answers both), `thread/read {threadId, includeTurns}`,
//! `thread/turns/list {threadId, cursor?, limit?, sortDirection? ("asc" | "desc", default desc),
//! itemsView? ("notLoaded" | "summary" | "full", default summary)}` (`{data, nextCursor,
//! backwardsCursor}`; `nextCursor` is null on the last page; cursors are opaque strings),
//! `thread/rollback {threadId, numTurns}` (drops from the end, saturating at zero turns; records a
//! `thread_rolled_back` history event; notifies `thread/tokenUsage/updated` before it answers),
//! `thread/revert {threadId, beforeTurnId}` (a running turn is interrupted first: `turn/completed`
//! with status `interrupted`, and it never completes; then notifies `thread/status/changed`
//! `notLoaded` then `idle` before it answers, drops that turn and every later one; `{thread (turns
//! empty), turnsBackwardsCursor, itemsBackwardsCursor}` then `thread/reverted {threadId}`).
//!
//! Error texts taken from the real sources: an unknown method or bad params is `-32600 "Invalid
//! request: <serde error>"` (the real server deserializes its request enum; it never answers
//! -32601/-32602 for these), `"numTurns must be >= 1"` (the app-server checks this before the
//! core's `num_turns must be >= 1`), `"invalid thread id: <uuid error>"` (a bad character reads
//! ``invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found
//! `c` at N``, N counted from 1, as the real server's `uuid` release words it), `"Cannot rollback
//! while a turn is in progress."`, `"thread/revert only supports paginated threads"`. Unknown
//! threads, per method: `thread/resume` `"no rollout found for thread id <id>"`, `thread/read` and
//! `thread/turns/list` `"thread not loaded: <id>"`, and methods that need a thread loaded in this
//! process (`thread/rollback`, `thread/revert`, `turn/start`) `"thread not found: <id>"`, all
//! -32600. A line that is not JSON is logged on stderr and dropped without an answer.
//!
//! # State
//! `$CODEX_HOME` is required (the mock refuses to start without it). Threads persist under
//! `mock_dir($CODEX_HOME)/threads/<threadId>.json` ([`ThreadState`]), rewritten atomically
//! before every answer, so a later process resumes them. Thread ids are UUIDs, as in Codex.
//! Every call is journaled to `journal_path($CODEX_HOME)` (a `process/start` entry with argv
//! first), and faults are read from `faults_path($CODEX_HOME)` on every call, matched by
//! `threadId` and method name.
//!
//! # Delivery witness
//! With [`crate::witness::WITNESS_ENV`] set in the process environment, every `turn/start` that
//! passed its fault handling and validation (thread loaded here) is announced to the witness before
//! the turn is recorded (or, when a turn runs, before its input joins that turn): `target` the
//! thread id, `input` the text, `before` `{"threadId", "turnIds": [the thread's turn ids, oldest
//! first]}`. The answer's number is journaled as the call's `witness`. A failed witness call
//! answers `-32603 "delivery witness failed: ..."`, journaled as `error`, and no turn is recorded.
//!
//! # Faults (on any request carrying a `threadId`)
//! - `error`: `-32603` internal error (`failed to start rollback: injected fault`, `failed to
//!   read thread: injected fault`, ...).
//! - `hang`: no answer; with `hang_ms` the normal answer after that delay (the server answers
//!   nothing else meanwhile).
//! - `no_effect`: the normal success answer, nothing changed (a rollback returns the thread with
//!   all its turns; a revert or turn start is acknowledged and not recorded).
//! - `unknown_session`: the real unknown-thread error of that method (above).
//! - `busy`: `thread/rollback` answers `-32600 "Cannot rollback while a turn is in progress."`;
//!   `thread/revert` and `turn/start` a similar refusal (wording inferred: the real server refuses
//!   neither while a turn runs, see above; the fault stands for a refusal not seen there);
//!   `thread/read` and `thread/resume` answer normally with the thread's status `active`.
//! - `crash`: the call is journaled, then the process exits with status 134 without answering.
//!
//! On `turn/start` (the delivering call): `error` answers `-32603 "turn/start failed: injected
//! fault"` and records no turn; `busy` refuses with `-32600 "Cannot start a turn while a turn is
//! in progress."`; `hang`, `crash`, `no_effect` and `unknown_session` as above. A faulted call
//! never reaches the delivery witness (with `hang_ms`, or `no_effect`, the turn is then run or
//! acknowledged without one).
//!
//! # Left out, or inferred
//! Left out: models, tools, approvals and server-to-client requests, sandboxing, the rollout JSONL
//! format (the mock keeps a reduced history; a revert does not write a second rollout file),
//! `thread/items/list` and `initialTurnsPage` (always null), every other method of the real server
//! (they fail as unknown variants, and the "expected one of" list names only the methods served
//! here), config files, authentication, and the real server's concurrent request processing
//! (requests are handled one at a time, in order). Seen on the real 0.155.1 and 0.171.0: `turn not
//! found: <id>` for an unknown `beforeTurnId`, the order of the revert's notifications, the
//! `summary` view of `turn/completed`, null cursors when resuming a legacy thread, the malformed-id
//! wording, a busy thread's second `turn/start` answering the running turn and its revert
//! interrupting it, `thread/tokenUsage/updated` after a rollback (0.155.1); on 0.171.0 the first
//! turn as `readState.firstUnread` of `thread/read` and `serviceTier: "default"` when resuming a
//! reverted thread. Left out: the real server keeps no rollout for a thread without turns (its
//! `thread/resume` answers `no rollout found for thread id <id>`, even in the same process); the
//! mock resumes such a thread. Inferred rather than read in the sources or seen: the wording of the
//! planted revert/turn-start busy refusals, the content of the rollback's
//! `thread/tokenUsage/updated` (the remaining turns' counts, `turnId` the last of them), whether a
//! running turn's steered input is answered in its reply (the real turns seen were interrupted),
//! that a revert refused with `turn not found` still interrupts a running turn (the real server
//! unloads the thread first), the releases between 0.155.1 and 0.171.0 (the 0.171 behaviours are
//! tied to the releases without rollback), the default page size of `thread/turns/list` (25;
//! `limit: 0` answers an empty page, and a cursor that is not one `invalid cursor: <cursor>`, as
//! seen), the content of the cursors, and the exact field sets of threads, turns and items (the
//! real ones carry more optional fields). A turn runs instantly unless `REWIND_MOCK_CODEX_TURN_MS`
//! delays its completion (then a rollback during it is refused as busy for real); a turn left
//! running by a dead process reads `interrupted`.

mod server;
mod state;

use std::path::PathBuf;
use std::process::ExitCode;

pub use server::Version;
pub use state::{
    read_thread, save_thread, seed_history_mode, seed_thread, set_history_mode, thread_path,
    threads_dir, HistoryEvent, HistoryMode, SeedThread, SeedTurn, ThreadState, TurnRecord,
    TurnStatus,
};

/// The Codex release imitated when `REWIND_MOCK_CODEX_VERSION` is unset.
pub const DEFAULT_VERSION: &str = "0.171.0";

/// The environment variable selecting the imitated Codex release.
pub const VERSION_ENV: &str = "REWIND_MOCK_CODEX_VERSION";

/// The environment variable delaying every turn's completion by this many milliseconds.
pub const TURN_MS_ENV: &str = "REWIND_MOCK_CODEX_TURN_MS";

/// The agent reply the mock gives to `input`: [`crate::reply_to`].
pub fn canned_reply(input: &str) -> String {
    crate::reply_to(input)
}

/// Runs the mock as a program: `codex app-server [--listen stdio://] [-c key=value]...`, or
/// `codex --version`. Exit status 1 when `$CODEX_HOME` or the version setting is unusable, 2 on
/// a bad command line.
pub fn main(args: Vec<String>) -> ExitCode {
    let version_text = std::env::var(VERSION_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_VERSION.to_owned());
    let version = match Version::parse(&version_text) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("mock codex: {VERSION_ENV}: {e}");
            return ExitCode::FAILURE;
        }
    };
    match args.first().map(String::as_str) {
        Some("--version") | Some("-V") => {
            println!("codex-cli {version}");
            return ExitCode::SUCCESS;
        }
        Some("app-server") => {}
        Some(other) => {
            eprintln!(
                "error: the mock codex runtime only serves `codex app-server` (got `{other}`)"
            );
            return ExitCode::from(2);
        }
        None => {
            eprintln!("error: the mock codex runtime only serves `codex app-server`");
            return ExitCode::from(2);
        }
    }
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        let listen = match arg.as_str() {
            "--listen" => match rest.next() {
                Some(value) => Some(value.as_str()),
                None => {
                    eprintln!(
                        "error: a value is required for '--listen <URL>' but none was supplied"
                    );
                    return ExitCode::from(2);
                }
            },
            a if a.starts_with("--listen=") => Some(&a["--listen=".len()..]),
            "-c" | "--config" => {
                if rest.next().is_none() {
                    eprintln!(
                        "error: a value is required for '--config <key=value>' but none was supplied"
                    );
                    return ExitCode::from(2);
                }
                None
            }
            a if a.starts_with("--config=") => None,
            other => {
                eprintln!("error: unexpected argument '{other}' found");
                return ExitCode::from(2);
            }
        };
        if let Some(url) = listen {
            if url != "stdio://" {
                eprintln!(
                    "error: the mock codex app-server only listens on stdio:// (got `{url}`)"
                );
                return ExitCode::from(2);
            }
        }
    }
    let home = match std::env::var_os("CODEX_HOME") {
        Some(home) if !home.is_empty() => PathBuf::from(home),
        _ => {
            eprintln!(
                "mock codex: CODEX_HOME is not set; the mock keeps its threads, journal and \
                 faults there and refuses to start without it"
            );
            return ExitCode::FAILURE;
        }
    };
    if !home.is_dir() {
        eprintln!(
            "mock codex: CODEX_HOME `{}` is not a directory",
            home.display()
        );
        return ExitCode::FAILURE;
    }
    let turn_ms = match std::env::var(TURN_MS_ENV) {
        Err(_) => 0,
        Ok(v) if v.trim().is_empty() => 0,
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(ms) => ms,
            Err(_) => {
                eprintln!("mock codex: {TURN_MS_ENV} must be a number of milliseconds, got `{v}`");
                return ExitCode::FAILURE;
            }
        },
    };
    server::serve(server::Config {
        home,
        version,
        turn_ms,
        argv: std::env::args().collect(),
        witness: crate::witness::witness_url(),
    })
}
