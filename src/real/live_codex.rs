//! A live Codex session: one real `codex app-server` the harness keeps running for a scenario,
//! holding every thread it loaded across calls, as a daemon's long-lived app-server does. The
//! `codex` programs handed to the implementation attach to it (the journaling proxy with
//! [`rewind_mock_runtimes::proxy::ATTACH_ENV`]) instead of starting their own, so a restore
//! meets a thread the running process holds in memory.
//!
//! The app-server speaks to one client on its stdio; this relay lets many connections share
//! it, one after another or at once, over a Unix socket:
//!
//! - `initialize` is answered from the app-server's own answer to the relay's handshake, and
//!   `initialized` is not passed on (the app-server takes one handshake per process);
//! - every other request goes to the app-server under an id of the relay's own, and its answer
//!   goes back to the connection that asked, under the connection's id;
//! - notifications and the app-server's own requests (approvals) go to the newest connection,
//!   and a connection's answer to them goes back as it is;
//! - a connection that ends leaves the app-server and its threads as they are.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixListener;
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::codex::CodexHome;
use super::RealError;

/// How long the app-server may take to answer the relay's handshake.
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(60);

/// The relay's id of its own handshake.
const HANDSHAKE_ID: &str = "rewind-live-initialize";

/// A running live app-server and its relay; both end when it is dropped.
#[derive(Debug)]
pub struct LiveCodex {
    socket: PathBuf,
    child: Child,
    tasks: Vec<JoinHandle<()>>,
}

/// Where answers and notifications go.
#[derive(Default)]
struct Routes {
    /// The relay's request id → the connection and the id it used.
    pending: HashMap<String, (u64, Value)>,
    /// Open connections, by number.
    connections: std::collections::BTreeMap<u64, mpsc::UnboundedSender<String>>,
    next_request: u64,
}

impl Drop for LiveCodex {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

fn failure(detail: impl Into<String>) -> RealError {
    RealError::runtime("codex", detail)
}

async fn send(stdin: &tokio::sync::Mutex<ChildStdin>, message: &Value) -> std::io::Result<()> {
    let mut line = message.to_string();
    line.push('\n');
    let mut stdin = stdin.lock().await;
    stdin.write_all(line.as_bytes()).await?;
    stdin.flush().await
}

impl LiveCodex {
    /// Starts `codex app-server` of `home`, does its handshake, and relays connections on
    /// `socket`.
    pub async fn start(home: &CodexHome, socket: &Path) -> Result<LiveCodex, RealError> {
        let mut child = home
            .host
            .command(&home.program, &["app-server"], &home.env, &home.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(super::io(format!("starting {}", home.program.display())))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| failure("the live app-server has no stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| failure("the live app-server has no stdout"))?;
        let stdin = Arc::new(tokio::sync::Mutex::new(stdin));
        let mut lines = BufReader::new(stdout).lines();
        let handshake = json!({"id": HANDSHAKE_ID, "method": "initialize", "params": {
            "clientInfo": {"name": "rewind-conformance-live", "version": env!("CARGO_PKG_VERSION")},
            "capabilities": {"experimentalApi": true}}});
        send(&stdin, &handshake)
            .await
            .map_err(super::io("writing to the live app-server"))?;
        let initialized = tokio::time::timeout(HANDSHAKE_LIMIT, async {
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if message.get("id") == Some(&json!(HANDSHAKE_ID)) {
                    return Some(message);
                }
            }
            None
        })
        .await
        .map_err(|_| failure("the live app-server did not answer `initialize` in time"))?
        .ok_or_else(|| failure("the live app-server ended before answering `initialize`"))?;
        let result = initialized.get("result").cloned().ok_or_else(|| {
            failure(format!(
                "the live app-server refused `initialize`: {initialized}"
            ))
        })?;
        send(&stdin, &json!({"method": "initialized"}))
            .await
            .map_err(super::io("writing to the live app-server"))?;

        let _ = std::fs::remove_file(socket);
        let listener = UnixListener::bind(socket)
            .map_err(super::io(format!("listening on {}", socket.display())))?;
        let routes: Arc<Mutex<Routes>> = Arc::default();
        let from_server = {
            let routes = Arc::clone(&routes);
            tokio::spawn(async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    let Ok(mut message) = serde_json::from_str::<Value>(&line) else {
                        continue;
                    };
                    let routes = &mut *routes.lock().unwrap_or_else(|p| p.into_inner());
                    let is_answer = message.get("method").is_none();
                    let relay_id = message.get("id").and_then(Value::as_str).map(str::to_owned);
                    let to = match (is_answer, relay_id) {
                        (true, Some(id)) => match routes.pending.remove(&id) {
                            Some((connection, original)) => {
                                message["id"] = original;
                                Some(connection)
                            }
                            None => None,
                        },
                        (true, None) => None,
                        // Notifications and the app-server's own requests: the newest connection.
                        (false, _) => routes.connections.keys().next_back().copied(),
                    };
                    if let Some(sender) = to.and_then(|c| routes.connections.get(&c)) {
                        let _ = sender.send(message.to_string());
                    }
                }
            })
        };
        let accept = {
            let routes = Arc::clone(&routes);
            let stdin = Arc::clone(&stdin);
            tokio::spawn(async move {
                let mut number = 0u64;
                while let Ok((stream, _)) = listener.accept().await {
                    number += 1;
                    let connection = number;
                    let (read, mut write) = stream.into_split();
                    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
                    routes
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .connections
                        .insert(connection, tx.clone());
                    tokio::spawn(async move {
                        while let Some(line) = rx.recv().await {
                            if write
                                .write_all(format!("{line}\n").as_bytes())
                                .await
                                .is_err()
                            {
                                break;
                            }
                        }
                        let _ = write.shutdown().await;
                    });
                    let routes = Arc::clone(&routes);
                    let stdin = Arc::clone(&stdin);
                    let result = result.clone();
                    tokio::spawn(async move {
                        let mut lines = BufReader::new(read).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            let Ok(mut message) = serde_json::from_str::<Value>(&line) else {
                                continue;
                            };
                            let method = message.get("method").and_then(Value::as_str);
                            let id = message.get("id").cloned();
                            match (method, id) {
                                (Some("initialize"), Some(id)) => {
                                    let _ =
                                        tx.send(json!({"id": id, "result": result}).to_string());
                                    continue;
                                }
                                (Some("initialized"), None) => continue,
                                (Some(_), Some(id)) => {
                                    let routes =
                                        &mut *routes.lock().unwrap_or_else(|p| p.into_inner());
                                    routes.next_request += 1;
                                    let relay_id =
                                        format!("rewind-live-{connection}-{}", routes.next_request);
                                    routes.pending.insert(relay_id.clone(), (connection, id));
                                    message["id"] = json!(relay_id);
                                }
                                _ => {}
                            }
                            if send(&stdin, &message).await.is_err() {
                                break;
                            }
                        }
                        let routes = &mut *routes.lock().unwrap_or_else(|p| p.into_inner());
                        routes.connections.remove(&connection);
                        routes.pending.retain(|_, (c, _)| *c != connection);
                    });
                }
            })
        };
        Ok(LiveCodex {
            socket: socket.to_path_buf(),
            child,
            tasks: vec![from_server, accept],
        })
    }

    /// The socket the relay listens on.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Whether the app-server still runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}
