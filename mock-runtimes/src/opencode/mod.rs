//! The mock OpenCode server: `opencode serve --port P --hostname H`, an HTTP + JSON server
//! speaking the session routes a daemon uses to restore a conversation, with the shapes, ids
//! and error bodies of the real runtime (`sst/opencode`, now `anomalyco/opencode`, HttpApi
//! server) and of what was observed running `opencode-linux-x64` against a fake model.
//!
//! # What it serves
//! - `GET /global/health` -> `{"healthy":true,"version":...}`.
//! - `GET /config` -> the merged configuration: `OPENCODE_CONFIG` (a file), then
//!   `opencode.json` in the working directory, then `OPENCODE_CONFIG_CONTENT` (inline JSON),
//!   later ones winning, objects merged deeply. `"snapshot": false` is the context-only
//!   configuration AgentTeam forces; absent means snapshots on, the real default.
//! - `POST /session`, `GET /session`, `GET /session/{id}`.
//! - `GET /session/{id}/message` -> `[{info, parts}]` in creation order.
//! - `POST /session/{id}/message {messageID?, parts, model?, agent?, noReply?}` -> the
//!   assistant message `{info:{role:"assistant", parentID:<user message id>, finish:"stop",
//!   ...}, parts:[step-start, text, step-finish]}` whose text is [`crate::reply_to`] of the
//!   prompt's text parts joined with `\n` (no model is called; an empty reply has no `text`
//!   part, only `step-start` and `step-finish`). A pending revert is applied first: the
//!   reverted user message and everything after it are deleted and `revert` is cleared.
//! - `POST /session/{id}/revert {messageID, partID?}` -> the session with `revert` set; nothing
//!   is deleted yet (two-phase). An assistant message id anchors on its user message; an
//!   unknown (well-formed) id answers 200 with the session unchanged. With snapshots on,
//!   `revert` also carries `snapshot` and `diff`, and step parts carry `snapshot`.
//! - `POST /session/{id}/unrevert` -> the session without `revert` (a no-op when none).
//!
//! Errors: 404 `{"name":"NotFoundError","data":{"message":"Session not found: <id>"}}`; 400
//! `{"name":"BadRequest","data":{"message":...,"kind":"Payload"}}` for payload validation
//! (`Missing key\n  at ["messageID"]`, `Expected a string starting with "msg", got "x"\n  at
//! ["messageID"]`); 500 `{"name":"UnknownError","data":{"message":"Unexpected server error. Check server logs for details."}}` for a session id
//! without the `ses` prefix and for a body that is not JSON; 409 `{"_tag":"SessionBusyError","sessionID":...,"message":"Session
//! is busy: <id>"}` for a busy session (`mapBusy` of the HttpApi session handlers; releases
//! before the HttpApi answered 400 `UnknownError` "Session `<id>` is busy").
//!
//! # State, journal, faults
//! The runtime home is `$XDG_DATA_HOME/opencode` (default `$HOME/.local/share/opencode`).
//! Sessions are JSON files under [`crate::mock_dir`] (`mock/sessions/<id>.json`), read from
//! disk on every call and written through on every change, so [`seed_sessions`] and [`read_session`] work from
//! another process. Every call is journaled to [`crate::journal_path`] (call = route template,
//! target = session id, request = body), and a `process/start` entry (request = argv) is written
//! when the process starts. Faults from [`crate::faults_path`] are re-read on every call and
//! matched by session id (or `*`, which also covers `create`, whose session does not exist yet)
//! and route name: `create`, `get`, `messages`, `message` (prompt), `revert`, `unrevert`.
//! `error` -> 500 `UnknownError`; `hang` -> no answer for `hang_ms` (then a normal answer) or
//! ever; `no_effect` -> the normal success answer with nothing stored (revert/unrevert return
//! the session unchanged, a prompt's reply is not kept, a created session is not stored);
//! `unknown_session` -> the real 404; `busy` -> the 409 above; `crash` -> journal, then exit
//! with status 134 without answering. On the prompt route `message` (the delivering call),
//! `error`, `busy`, `unknown_session`, `crash` and a `hang` without `hang_ms` store no message
//! and leave a pending revert uncleaned.
//!
//! # Delivery witness
//! With [`crate::witness::WITNESS_ENV`] set in the server process's environment, every `POST
//! /session/{id}/message` that passed its fault handling and validation (payload, session
//! found) is announced to the witness before anything is changed, under the state lock:
//! `target` the session id, `input` the text parts joined with `\n`, `before` `{"sessionId",
//! "messageId": the user message id this prompt creates (the body's `messageID`, else the one
//! the server makes), "messageIds": [the session's message ids in order, without those the
//! pending revert is about to delete]}`. The answer's number is journaled as the call's
//! `witness`. A failed witness call answers 500 `UnknownError` `delivery witness failed: ...`,
//! journaled as `error`, and nothing is stored (nor the revert cleaned up). A call a fault rule
//! matched never reaches the witness.
//!
//! # What is left out or inferred
//! No model, tools, permissions, files, events (`/event` SSE), sharing, forking, compaction,
//! summaries, title generation, `prompt_async`, message paging (`limit`/`before` are ignored)
//! or workspace routing; the project is always `global`; JSONC config files and the global
//! config are not read; with snapshots on the `snapshot` hash is made up and `diff` is empty,
//! and no file is ever reverted. Sessions are never busy on their own (turns are instant): busy
//! comes only from a fault. The exact text of validation messages beyond the two observed
//! ones, the 500 message for a non-`ses` id, and the answer to a non-JSON body are inferred.

mod ids;
mod process;
mod server;
mod state;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::journal::{Journal, JournalEntry};

pub use ids::IdKind;
pub use process::{stderr_log_path, ServerProcess, LISTENING_PREFIX, START_TIMEOUT};
pub use state::{
    read_session, runtime_home, seed_sessions, Revert, SeedMessage, SeedSession, SessionInfo,
    SessionState, SessionTime, StoredMessage, VERSION,
};

/// The runtime id in journal entries.
pub const RUNTIME: &str = "opencode";

/// The real server's default port.
pub const DEFAULT_PORT: u16 = 4096;

/// A new ascending id of `kind` (`ses_`, `msg_`, `prt_` + 26 characters), as the server makes.
pub fn new_id(kind: IdKind) -> String {
    ids::ascending(kind)
}

/// The journal of the mock whose `XDG_DATA_HOME` is `data_home`.
pub fn journal_file(data_home: &Path) -> PathBuf {
    crate::journal_path(&runtime_home(data_home))
}

/// The fault plan of the mock whose `XDG_DATA_HOME` is `data_home`.
pub fn faults_file(data_home: &Path) -> PathBuf {
    crate::faults_path(&runtime_home(data_home))
}

/// The runtime home from the environment: `$XDG_DATA_HOME/opencode`, else
/// `$HOME/.local/share/opencode`.
pub fn runtime_home_from_env() -> PathBuf {
    let data_home = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/share"))
        })
        .unwrap_or_else(|| PathBuf::from(".local/share"));
    runtime_home(&data_home)
}

#[derive(Debug, PartialEq, Eq)]
enum Command {
    Serve { port: u16, hostname: String },
    Version,
}

fn parse_args(args: &[String]) -> Result<Command, String> {
    let mut iter = args.iter();
    match iter.next().map(String::as_str) {
        Some("serve") => {}
        Some("--version") | Some("-v") => return Ok(Command::Version),
        Some(other) => {
            return Err(format!(
                "unknown command `{other}`: the mock opencode runtime only runs `serve`"
            ))
        }
        None => return Err("the mock opencode runtime only runs `serve`".to_owned()),
    }
    let mut port = DEFAULT_PORT;
    let mut hostname = "127.0.0.1".to_owned();
    while let Some(arg) = iter.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => iter
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("Not enough arguments following: {name}")),
            }
        };
        match flag {
            "--port" => {
                let text = value("port")?;
                port = text
                    .parse()
                    .map_err(|_| format!("Invalid value for --port: `{text}`"))?;
            }
            "--hostname" => hostname = value("hostname")?,
            // Accepted and ignored, as they change nothing the mock does.
            "--log-level" | "--cors" | "--mdns-domain" => {
                value(&flag[2..])?;
            }
            "--print-logs" | "--mdns" => {}
            other => return Err(format!("Unknown argument: {other}")),
        }
    }
    Ok(Command::Serve { port, hostname })
}

/// Deep-merges `overlay` into `base` (objects merge, anything else replaces).
fn merge(base: &mut Value, overlay: Value) {
    match (base, overlay) {
        (Value::Object(base), Value::Object(overlay)) => {
            for (key, value) in overlay {
                match base.get_mut(&key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, overlay) => *base = overlay,
    }
}

fn parse_config(text: &str, origin: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(format!("ConfigInvalidError: {origin}: not a JSON object")),
        Err(e) => Err(format!("ConfigJsonError: {origin}: {e}")),
    }
}

/// The merged configuration for a server started in `cwd`.
fn load_config(cwd: &Path) -> Result<Value, String> {
    let mut config = json!({});
    if let Some(path) = std::env::var_os("OPENCODE_CONFIG").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("ConfigJsonError: {}: {e}", path.display()))?;
        merge(
            &mut config,
            parse_config(&text, &path.display().to_string())?,
        );
    }
    let project = cwd.join("opencode.json");
    match std::fs::read_to_string(&project) {
        Ok(text) => merge(
            &mut config,
            parse_config(&text, &project.display().to_string())?,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("ConfigJsonError: {}: {e}", project.display())),
    }
    if let Ok(text) = std::env::var("OPENCODE_CONFIG_CONTENT") {
        if !text.trim().is_empty() {
            merge(&mut config, parse_config(&text, "OPENCODE_CONFIG_CONTENT")?);
        }
    }
    Ok(config)
}

fn config_model(config: &Value) -> state::Model {
    config
        .get("model")
        .and_then(Value::as_str)
        .and_then(|m| m.split_once('/'))
        .map(|(provider, model)| state::Model {
            provider_id: provider.to_owned(),
            model_id: model.to_owned(),
        })
        .unwrap_or_default()
}

/// Runs the mock as a program (`args` exclude the program name). Exit status 1 on bad
/// arguments, a broken configuration or a port that cannot be bound; 134 on an injected crash.
pub fn main(args: Vec<String>) -> ExitCode {
    let home = runtime_home_from_env();
    let journal = Journal::new(crate::journal_path(&home));
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let mut start = JournalEntry::new(RUNTIME, "process/start").request(json!(args));
    start.detail = Some(format!("cwd {}", cwd.display()));
    let command = parse_args(&args);
    if let Err(e) = &command {
        start.outcome = "error".to_owned();
        start.detail = Some(e.clone());
    }
    journal.record(&start);
    let (port, hostname) = match command {
        Ok(Command::Version) => {
            println!("{}", state::VERSION);
            return ExitCode::SUCCESS;
        }
        Ok(Command::Serve { port, hostname }) => (port, hostname),
        Err(e) => {
            eprintln!("opencode: {e}");
            eprintln!("usage: opencode serve [--port P] [--hostname H]");
            return ExitCode::FAILURE;
        }
    };
    let config = match load_config(&cwd) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("opencode: {e}");
            return ExitCode::FAILURE;
        }
    };
    crate::exit_with_parent();
    let app = Arc::new(server::App {
        snapshots: config.get("snapshot") != Some(&Value::Bool(false)),
        model: config_model(&config),
        config,
        home,
        journal,
        directory: cwd.display().to_string(),
        lock: tokio::sync::Mutex::new(()),
        witness: crate::witness::witness_url(),
        running: std::sync::Mutex::new(std::collections::BTreeMap::new()),
    });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("opencode: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(serve(app, port, hostname))
}

async fn serve(app: Arc<server::App>, port: u16, hostname: String) -> ExitCode {
    let listener = match tokio::net::TcpListener::bind((hostname.as_str(), port)).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("opencode: cannot listen on {hostname}:{port}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(port);
    {
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{LISTENING_PREFIX}http://{hostname}:{port}");
        let _ = stdout.flush();
    }
    match axum::serve(listener, server::router(app)).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("opencode: server stopped: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn serve_flags_parse_like_the_real_cli() {
        assert_eq!(
            parse_args(&args(&["serve", "--port", "0", "--hostname", "127.0.0.1"])),
            Ok(Command::Serve {
                port: 0,
                hostname: "127.0.0.1".into()
            })
        );
        assert_eq!(
            parse_args(&args(&["serve", "--port=5000", "--print-logs"])),
            Ok(Command::Serve {
                port: 5000,
                hostname: "127.0.0.1".into()
            })
        );
        assert_eq!(
            parse_args(&args(&["serve"])),
            Ok(Command::Serve {
                port: 4096,
                hostname: "127.0.0.1".into()
            })
        );
        assert_eq!(parse_args(&args(&["--version"])), Ok(Command::Version));
        assert!(parse_args(&args(&["serve", "--port", "x"])).is_err());
        assert!(parse_args(&args(&["serve", "--port"])).is_err());
        assert!(parse_args(&args(&["serve", "--bogus"])).is_err());
        assert!(parse_args(&args(&["run"])).is_err());
        assert!(parse_args(&args(&[])).is_err());
    }

    #[test]
    fn config_merges_deeply_and_later_wins() {
        let mut base = json!({ "snapshot": true, "provider": { "a": { "x": 1 } } });
        merge(
            &mut base,
            json!({ "snapshot": false, "provider": { "a": { "y": 2 } } }),
        );
        assert_eq!(
            base,
            json!({ "snapshot": false, "provider": { "a": { "x": 1, "y": 2 } } })
        );
        assert!(parse_config("[1]", "x").is_err());
        assert!(parse_config("{", "x")
            .unwrap_err()
            .starts_with("ConfigJsonError"));
        assert_eq!(config_model(&json!({ "model": "p/m" })).model_id, "m");
        assert_eq!(config_model(&json!({})), state::Model::default());
    }
}
