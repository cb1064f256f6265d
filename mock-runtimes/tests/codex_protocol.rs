//! Drives the `mock-codex` binary as `codex app-server` over stdio, the way a daemon does.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use rewind_mock_runtimes::codex::{self, HistoryMode, SeedThread, SeedTurn};
use rewind_mock_runtimes::faults::{FaultKind, FaultPlan, FaultRule};
use rewind_mock_runtimes::journal::{read_journal, JournalEntry};
use rewind_mock_runtimes::witness::WITNESS_ENV;
use serde_json::{json, Value};

mod support;
use support::{unreachable_url, Answer, WitnessServer, FIRST_WITNESS};

const BIN: &str = env!("CARGO_BIN_EXE_mock-codex");
const WAIT: Duration = Duration::from_secs(10);
const THREAD: &str = "5ee8fe45-121f-45e4-af6b-8ae4a14c4c3d";

struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    next_id: u64,
}

impl Server {
    fn start(home: &Path) -> Server {
        Server::start_with(home, &[])
    }

    /// A server imitating Codex 0.155.1, the last release with `thread/rollback`.
    fn v155(home: &Path) -> Server {
        Server::start_with(home, &[(codex::VERSION_ENV, "0.155.1")])
    }

    fn start_with(home: &Path, env: &[(&str, &str)]) -> Server {
        let mut command = Command::new(BIN);
        command
            .arg("app-server")
            .env("CODEX_HOME", home)
            .env_remove(codex::VERSION_ENV)
            .env_remove(codex::TURN_MS_ENV)
            .env_remove(WITNESS_ENV)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("spawn mock-codex");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("server wrote a non-JSON line {line:?}: {e}"));
                assert!(value.get("jsonrpc").is_none(), "no jsonrpc field: {line}");
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        Server {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            next_id: 0,
        }
    }

    fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn send_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let message = if params.is_null() {
            json!({ "id": id, "method": method })
        } else {
            json!({ "id": id, "method": method, "params": params })
        };
        self.send_line(&message.to_string());
        id
    }

    fn notify(&mut self, method: &str) {
        self.send_line(&json!({ "method": method }).to_string());
    }

    fn recv(&self, timeout: Duration) -> Result<Value, RecvTimeoutError> {
        self.lines.recv_timeout(timeout)
    }

    /// Waits for the answer to `id`, returning it and the notifications received before it.
    fn wait(&self, id: u64, timeout: Duration) -> Option<(Value, Vec<Value>)> {
        let deadline = Instant::now() + timeout;
        let mut before = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv(left) {
                Ok(message) if message.get("id") == Some(&json!(id)) => {
                    return Some((message, before))
                }
                Ok(message) => before.push(message),
                Err(_) => return None,
            }
        }
    }

    fn call(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        let id = self.send_request(method, params);
        self.wait(id, WAIT)
            .unwrap_or_else(|| panic!("no answer to {method}"))
    }

    fn ok(&mut self, method: &str, params: Value) -> Value {
        let (answer, _) = self.call(method, params);
        answer
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{method} failed: {answer}"))
    }

    fn err(&mut self, method: &str, params: Value) -> (i64, String) {
        let (answer, _) = self.call(method, params);
        let error = answer
            .get("error")
            .unwrap_or_else(|| panic!("{method} should fail: {answer}"));
        (
            error["code"].as_i64().unwrap(),
            error["message"].as_str().unwrap().to_owned(),
        )
    }

    fn handshake(&mut self, experimental: bool) -> Value {
        let result = self.ok(
            "initialize",
            json!({
                "clientInfo": { "name": "rewind-test", "version": "1.0.0" },
                "capabilities": { "experimentalApi": experimental },
            }),
        );
        self.notify("initialized");
        result
    }

    /// Notifications until (and including) `method`.
    fn until(&self, method: &str) -> Vec<Value> {
        let deadline = Instant::now() + WAIT;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self
                .recv(left)
                .unwrap_or_else(|_| panic!("no {method}; saw {seen:?}"));
            let done = message["method"] == method;
            seen.push(message);
            if done {
                return seen;
            }
        }
    }

    fn close(mut self) -> ExitStatus {
        drop(self.stdin.take());
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("mock-codex did not exit after stdin closed");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Seeds a legacy-history thread (as a 0.155 daemon would have started it).
fn seed(home: &Path, turns: usize) {
    seed_in(home, turns, Some(HistoryMode::Legacy));
}

fn seed_in(home: &Path, turns: usize, history_mode: Option<HistoryMode>) {
    codex::seed_thread(
        home,
        &SeedThread {
            thread_id: THREAD.into(),
            turns: (1..=turns)
                .map(|i| SeedTurn {
                    id: format!("turn-{i}"),
                    input: format!("question {i}"),
                    output: format!("answer {i}"),
                })
                .collect(),
            history_mode,
        },
    )
    .unwrap();
}

fn turn_ids(thread: &Value) -> Vec<String> {
    thread["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect()
}

fn set_faults(home: &Path, rules: Vec<FaultRule>) {
    FaultPlan { rules }
        .save(&rewind_mock_runtimes::faults_path(home))
        .unwrap();
}

fn rule(call: &str, kind: FaultKind, hang_ms: Option<u64>) -> FaultRule {
    FaultRule {
        target: THREAD.into(),
        call: Some(call.into()),
        kind,
        hang_ms,
    }
}

fn methods(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m["method"].as_str().unwrap_or("(response)").to_owned())
        .collect()
}

#[test]
fn handshake_errors() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path());
    assert_eq!(
        server.err("thread/start", json!({})),
        (-32600, "Not initialized".to_owned())
    );
    // Like the real server, a request is decoded before the initialization check.
    let (code, message) = server.err("thread/read", json!({}));
    assert_eq!(code, -32600);
    assert_eq!(message, "Invalid request: missing field `threadId`");
    let result = server.handshake(false);
    assert_eq!(result["codexHome"], home.path().display().to_string());
    assert!(result["userAgent"]
        .as_str()
        .unwrap()
        .contains(codex::DEFAULT_VERSION));
    assert!(result["platformOs"].is_string() && result["platformFamily"].is_string());
    assert_eq!(
        server.err(
            "initialize",
            json!({ "clientInfo": { "name": "again", "version": "1" } })
        ),
        (-32600, "Already initialized".to_owned())
    );
    assert_eq!(
        server.err("thread/start", json!({ "historyMode": "legacy" })),
        (
            -32600,
            "thread/start.historyMode requires experimentalApi capability".to_owned()
        )
    );
    let started = server.ok("thread/start", json!({}));
    assert_eq!(started["thread"]["historyMode"], "paginated");
    assert!(server.close().success());
}

#[test]
fn initialize_refuses_a_client_name_that_is_not_a_header_value() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path());
    let (code, message) = server.err(
        "initialize",
        json!({ "clientInfo": { "name": "bad\nname", "version": "1" } }),
    );
    assert_eq!(code, -32600);
    assert!(message.starts_with("Invalid clientInfo.name:"), "{message}");
    server.handshake(true);
}

#[test]
fn start_and_turn_follow_the_real_notification_order() {
    for version in ["0.155.1", codex::DEFAULT_VERSION] {
        notification_order(version);
    }
}

/// The order seen on the real release: 0.155 has no `thread/readState/changed`.
fn notification_order(version: &str) {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start_with(home.path(), &[(codex::VERSION_ENV, version)]);
    server.handshake(true);
    let (answer, _) = server.call("thread/start", json!({ "historyMode": "legacy" }));
    let thread = &answer["result"]["thread"];
    let thread_id = thread["id"].as_str().unwrap().to_owned();
    uuid::Uuid::parse_str(&thread_id).expect("thread ids are UUIDs");
    assert_eq!(thread["turns"], json!([]));
    assert_eq!(thread["status"]["type"], "idle");
    for key in ["model", "modelProvider", "cwd", "approvalPolicy", "sandbox"] {
        assert!(
            answer["result"].get(key).is_some(),
            "thread/start lacks {key}"
        );
    }
    let started = server.until("thread/started");
    assert_eq!(
        started.len(),
        1,
        "thread/started comes right after the answer"
    );
    assert_eq!(started[0]["params"]["thread"]["id"], thread_id.as_str());

    let turn = server.ok(
        "turn/start",
        json!({ "threadId": thread_id, "input": [{ "type": "text", "text": "hello there", "text_elements": [] }] }),
    );
    assert_eq!(turn["turn"]["status"], "inProgress");
    assert_eq!(turn["turn"]["startedAt"], Value::Null, "as the real answer");
    let turn_id = turn["turn"]["id"].as_str().unwrap().to_owned();
    let notes = server.until("turn/completed");
    let mut names = methods(&notes);
    let deltas: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "item/agentMessage/delta")
        .collect();
    assert!(deltas.len() >= 2, "the reply streams in several deltas");
    names.dedup();
    let mut want = vec![
        "warning",
        "thread/status/changed",
        "turn/started",
        "item/started",
        "item/completed",
        "item/started",
        "item/agentMessage/delta",
        "item/completed",
        "thread/tokenUsage/updated",
        "account/rateLimits/updated",
        "thread/readState/changed",
        "thread/status/changed",
        "turn/completed",
    ];
    if version.starts_with("0.155") {
        want.retain(|m| *m != "thread/readState/changed");
    }
    assert_eq!(names, want, "{version}");
    assert_eq!(notes[0]["params"]["threadId"], thread_id.as_str());
    assert!(notes[0]["params"]["message"].is_string());
    assert_eq!(notes[1]["params"]["status"]["type"], "active");
    assert_eq!(notes[3]["params"]["item"]["type"], "userMessage");
    assert_eq!(
        notes
            .iter()
            .find(|n| n["method"] == "turn/started")
            .unwrap()["params"]["turn"]["id"],
        turn_id.as_str()
    );
    let limits = notes
        .iter()
        .find(|n| n["method"] == "account/rateLimits/updated")
        .unwrap();
    assert_eq!(limits["params"]["rateLimits"]["primary"], Value::Null);
    if let Some(read) = notes
        .iter()
        .find(|n| n["method"] == "thread/readState/changed")
    {
        assert_eq!(read["params"]["threadId"], thread_id.as_str());
        assert!(read["params"]["readState"]["revision"].is_string());
    }
    let text: String = deltas
        .iter()
        .map(|d| d["params"]["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, rewind_mock_runtimes::reply_to("hello there"));
    assert_eq!(text, "Mock reply to: hello there");
    let last_item = notes
        .iter()
        .rev()
        .find(|n| n["method"] == "item/completed")
        .unwrap();
    assert_eq!(last_item["method"], "item/completed");
    assert_eq!(last_item["params"]["item"]["type"], "agentMessage");
    assert_eq!(last_item["params"]["item"]["text"], text.as_str());
    assert_eq!(notes[notes.len() - 2]["params"]["status"]["type"], "idle");
    let completed = &notes[notes.len() - 1]["params"];
    assert_eq!(completed["threadId"], thread_id.as_str());
    assert_eq!(completed["turn"]["id"], turn_id.as_str());
    assert_eq!(completed["turn"]["status"], "completed");

    let state = codex::read_thread(home.path(), &thread_id)
        .unwrap()
        .unwrap();
    assert_eq!(state.turn_ids(), vec![turn_id]);
    assert_eq!(state.turns[0].output, text);
}

#[test]
fn read_shows_turns_only_when_asked_and_refuses_unknown_threads() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path(), 2);
    let mut server = Server::start(home.path());
    server.handshake(true);
    let read = server.ok(
        "thread/read",
        json!({ "threadId": THREAD, "includeTurns": true }),
    );
    assert_eq!(turn_ids(&read["thread"]), ["turn-1", "turn-2"]);
    assert_eq!(read["thread"]["status"]["type"], "notLoaded");
    let items = &read["thread"]["turns"][1]["items"];
    assert_eq!(items[0]["type"], "userMessage");
    assert_eq!(items[0]["content"][0]["text"], "question 2");
    assert_eq!(items[1]["type"], "agentMessage");
    assert_eq!(items[1]["text"], "answer 2");
    assert_eq!(read["thread"]["turns"][1]["status"], "completed");
    let bare = server.ok("thread/read", json!({ "threadId": THREAD }));
    assert_eq!(bare["thread"]["turns"], json!([]));
    let missing = "04cd6ae5-fcb9-4c6a-b6da-92b711162dc1";
    assert_eq!(
        server.err(
            "thread/read",
            json!({ "threadId": missing, "includeTurns": true })
        ),
        (-32600, format!("thread not loaded: {missing}"))
    );
    let (code, message) = server.err("thread/read", json!({ "threadId": "thr_1" }));
    assert_eq!(code, -32600);
    assert!(message.starts_with("invalid thread id: "), "{message}");
    assert_eq!(
        server.err("thread/resume", json!({ "threadId": missing })),
        (-32600, format!("no rollout found for thread id {missing}"))
    );
    let resumed = server.ok("thread/resume", json!({ "threadId": THREAD }));
    assert_eq!(turn_ids(&resumed["thread"]), ["turn-1", "turn-2"]);
    assert_eq!(resumed["thread"]["status"]["type"], "idle");
}

#[test]
fn rollback_drops_turns_from_the_end_and_persists() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path(), 3);
    let mut server = Server::v155(home.path());
    server.handshake(true);
    // Not loaded in this process yet.
    assert_eq!(
        server.err(
            "thread/rollback",
            json!({ "threadId": THREAD, "numTurns": 1 })
        ),
        (-32600, format!("thread not found: {THREAD}"))
    );
    let resumed = server.ok("thread/resume", json!({ "threadId": THREAD }));
    assert_eq!(turn_ids(&resumed["thread"]), ["turn-1", "turn-2", "turn-3"]);

    let (answer, before) = server.call(
        "thread/rollback",
        json!({ "threadId": THREAD, "numTurns": 0 }),
    );
    assert_eq!(answer["error"]["message"], "numTurns must be >= 1");
    assert_eq!(methods(&before), ["deprecationNotice"]);

    let (answer, before) = server.call(
        "thread/rollback",
        json!({ "threadId": THREAD, "numTurns": 2 }),
    );
    // Seen on 0.155.1: the recounted token usage is notified before the answer.
    assert_eq!(
        methods(&before),
        ["deprecationNotice", "thread/tokenUsage/updated"]
    );
    assert_eq!(
        before[0]["params"]["summary"],
        "thread/rollback is deprecated and will be removed soon"
    );
    assert_eq!(before[1]["params"]["threadId"], THREAD);
    assert_eq!(before[1]["params"]["turnId"], "turn-1");
    assert!(before[1]["params"]["tokenUsage"]["total"]["totalTokens"].is_u64());
    assert_eq!(turn_ids(&answer["result"]["thread"]), ["turn-1"]);

    let state = codex::read_thread(home.path(), THREAD).unwrap().unwrap();
    assert_eq!(state.turn_ids(), ["turn-1"]);
    assert!(state.rolled_back());
    assert!(state.history.iter().any(|e| matches!(
        e,
        codex::HistoryEvent::ThreadRolledBack { num_turns: 2, dropped, .. } if dropped == &["turn-2", "turn-3"]
    )));
    assert!(server.close().success());

    // A later app-server process resumes the rolled-back thread.
    let mut server = Server::v155(home.path());
    server.handshake(true);
    let resumed = server.ok("thread/resume", json!({ "threadId": THREAD }));
    assert_eq!(turn_ids(&resumed["thread"]), ["turn-1"]);
    // More turns than the thread holds: everything goes.
    let rolled = server.ok(
        "thread/rollback",
        json!({ "threadId": THREAD, "numTurns": 5 }),
    );
    assert_eq!(rolled["thread"]["turns"], json!([]));
    assert_eq!(
        codex::read_thread(home.path(), THREAD)
            .unwrap()
            .unwrap()
            .rollback_count(),
        2
    );
}

#[test]
fn rollback_is_refused_on_paginated_threads_and_during_a_turn() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start_with(
        home.path(),
        &[(codex::TURN_MS_ENV, "600"), (codex::VERSION_ENV, "0.155.1")],
    );
    server.handshake(true);
    let paginated = server.ok("thread/start", json!({}));
    let paginated_id = paginated["thread"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        server.err(
            "thread/rollback",
            json!({ "threadId": paginated_id, "numTurns": 1 })
        ),
        (
            -32600,
            "paginated threads do not support thread/rollback".to_owned()
        )
    );

    let legacy = server.ok("thread/start", json!({ "historyMode": "legacy" }));
    let legacy_id = legacy["thread"]["id"].as_str().unwrap().to_owned();
    server.until("thread/started");
    server.ok(
        "turn/start",
        json!({ "threadId": legacy_id, "input": [{ "type": "text", "text": "slow" }] }),
    );
    server.until("turn/started");
    let read = server.ok(
        "thread/read",
        json!({ "threadId": legacy_id, "includeTurns": true }),
    );
    assert_eq!(read["thread"]["status"]["type"], "active");
    assert_eq!(read["thread"]["turns"][0]["status"], "inProgress");
    assert_eq!(
        server.err(
            "thread/rollback",
            json!({ "threadId": legacy_id, "numTurns": 1 })
        ),
        (
            -32600,
            "Cannot rollback while a turn is in progress.".to_owned()
        )
    );
    server.until("turn/completed");
    let rolled = server.ok(
        "thread/rollback",
        json!({ "threadId": legacy_id, "numTurns": 1 }),
    );
    assert_eq!(rolled["thread"]["turns"], json!([]));
}

#[test]
fn a_turn_left_running_by_a_dead_process_reads_interrupted() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start_with(home.path(), &[(codex::TURN_MS_ENV, "60000")]);
    server.handshake(true);
    let legacy = server.ok("thread/start", json!({ "historyMode": "legacy" }));
    let id = legacy["thread"]["id"].as_str().unwrap().to_owned();
    server.ok(
        "turn/start",
        json!({ "threadId": id, "input": [{ "type": "text", "text": "never ends" }] }),
    );
    server.until("turn/started");
    server.kill();
    let mut server = Server::v155(home.path());
    server.handshake(true);
    let resumed = server.ok("thread/resume", json!({ "threadId": id }));
    assert_eq!(resumed["thread"]["turns"][0]["status"], "interrupted");
    // Interrupted turns are turns: a rollback can drop them.
    let rolled = server.ok("thread/rollback", json!({ "threadId": id, "numTurns": 1 }));
    assert_eq!(rolled["thread"]["turns"], json!([]));
}

#[test]
fn revert_works_on_paginated_threads_only() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path(), 2);
    let mut server = Server::start(home.path());
    server.handshake(true);
    server.ok("thread/resume", json!({ "threadId": THREAD }));
    assert_eq!(
        server.err(
            "thread/revert",
            json!({ "threadId": THREAD, "beforeTurnId": "turn-1" })
        ),
        (
            -32600,
            "thread/revert only supports paginated threads".to_owned()
        )
    );

    let started = server.ok("thread/start", json!({}));
    let id = started["thread"]["id"].as_str().unwrap().to_owned();
    let mut turns = Vec::new();
    for text in ["one", "two", "three"] {
        let turn = server.ok(
            "turn/start",
            json!({ "threadId": id, "input": [{ "type": "text", "text": text }] }),
        );
        turns.push(turn["turn"]["id"].as_str().unwrap().to_owned());
        server.until("turn/completed");
    }
    assert_eq!(
        server.err(
            "thread/revert",
            json!({ "threadId": id, "beforeTurnId": "nope" })
        ),
        (-32600, "turn not found: nope".to_owned())
    );
    let reverted = server.ok(
        "thread/revert",
        json!({ "threadId": id, "beforeTurnId": turns[1] }),
    );
    assert_eq!(reverted["thread"]["turns"], json!([]));
    assert!(reverted["turnsBackwardsCursor"].is_string());
    assert!(reverted.get("itemsBackwardsCursor").is_some());
    let notes = server.until("thread/reverted");
    assert_eq!(notes.last().unwrap()["params"]["threadId"], id.as_str());
    let read = server.ok(
        "thread/read",
        json!({ "threadId": id, "includeTurns": true }),
    );
    assert_eq!(turn_ids(&read["thread"]), [turns[0].clone()]);
    let state = codex::read_thread(home.path(), &id).unwrap().unwrap();
    assert!(state.reverted());
    assert!(!state.rolled_back());
}

/// Seen on the real 0.155.1 and 0.171.0: a revert answers after `thread/status/changed`
/// `notLoaded` then `idle`, and `thread/reverted` follows the answer; an unknown turn is
/// refused after the same two notifications.
#[test]
fn revert_notifies_the_reload_before_it_answers() {
    for version in ["0.155.1", codex::DEFAULT_VERSION] {
        let home = tempfile::tempdir().unwrap();
        seed_in(home.path(), 3, Some(HistoryMode::Paginated));
        let mut server = Server::start_with(home.path(), &[(codex::VERSION_ENV, version)]);
        server.handshake(false);
        server.ok(
            "thread/resume",
            json!({ "threadId": THREAD, "excludeTurns": true }),
        );
        let (answer, before) = server.call(
            "thread/revert",
            json!({ "threadId": THREAD, "beforeTurnId": "turn-2" }),
        );
        assert!(answer.get("result").is_some(), "{version}: {answer}");
        let statuses: Vec<&Value> = before
            .iter()
            .filter(|n| n["method"] == "thread/status/changed")
            .map(|n| &n["params"]["status"]["type"])
            .collect();
        assert_eq!(statuses, [&json!("notLoaded"), &json!("idle")], "{version}");
        assert!(before.iter().all(|n| n["method"] != "thread/reverted"));
        let after = server.until("thread/reverted");
        assert_eq!(after.len(), 1, "{version}: {after:?}");
        assert_eq!(persisted_turns(home.path(), THREAD), ["turn-1"]);
        let (answer, before) = server.call(
            "thread/revert",
            json!({ "threadId": THREAD, "beforeTurnId": "turn-9" }),
        );
        assert_eq!(answer["error"]["message"], "turn not found: turn-9");
        assert_eq!(methods(&before).len(), 2, "{version}: {before:?}");
    }
}

/// `thread/turns/list` (served by 0.155.1 and 0.171.0, on both history modes): newest first by
/// default, `sortDirection: "asc"` oldest first, `limit` pages, `nextCursor` continues and is
/// null on the last page, `backwardsCursor` anchors the page's first turn; an unknown thread,
/// a bad cursor and `limit: 0` answer as the real ones did.
#[test]
fn turns_list_pages_through_the_turns() {
    for (version, mode) in [
        ("0.155.1", HistoryMode::Legacy),
        ("0.155.1", HistoryMode::Paginated),
        (codex::DEFAULT_VERSION, HistoryMode::Paginated),
    ] {
        let home = tempfile::tempdir().unwrap();
        seed_in(home.path(), 5, Some(mode));
        let mut server = Server::start_with(home.path(), &[(codex::VERSION_ENV, version)]);
        server.handshake(false);
        let newest_first = server.ok("thread/turns/list", json!({ "threadId": THREAD }));
        let ids = |page: &Value| -> Vec<String> {
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(
            ids(&newest_first),
            ["turn-5", "turn-4", "turn-3", "turn-2", "turn-1"]
        );
        assert_eq!(newest_first["nextCursor"], Value::Null);
        assert!(newest_first["backwardsCursor"].is_string());
        assert_eq!(newest_first["data"][0]["itemsView"], "summary");
        let mut seen = Vec::new();
        let mut cursor = Value::Null;
        let mut pages = 0;
        loop {
            let mut params = json!({
                "threadId": THREAD, "limit": 2, "sortDirection": "asc", "itemsView": "notLoaded",
            });
            if !cursor.is_null() {
                params["cursor"] = cursor.clone();
            }
            let page = server.ok("thread/turns/list", params);
            assert_eq!(page["data"][0]["items"], json!([]));
            assert_eq!(page["data"][0]["itemsView"], "notLoaded");
            seen.extend(ids(&page));
            pages += 1;
            cursor = page["nextCursor"].clone();
            if cursor.is_null() {
                break;
            }
            assert!(cursor.is_string(), "{version}: {page}");
        }
        assert_eq!(pages, 3);
        assert_eq!(seen, ["turn-1", "turn-2", "turn-3", "turn-4", "turn-5"]);
        // No history-hydration notice for a paged read.
        let (_, before) = server.call(
            "thread/turns/list",
            json!({ "threadId": THREAD, "limit": 1 }),
        );
        assert!(before.is_empty(), "{before:?}");
        let (code, message) = server.err(
            "thread/turns/list",
            json!({ "threadId": "04cd6ae5-fcb9-4c6a-b6da-92b711162dc1" }),
        );
        assert_eq!(code, -32600);
        assert_eq!(
            message,
            "thread not loaded: 04cd6ae5-fcb9-4c6a-b6da-92b711162dc1"
        );
        assert_eq!(
            server.err(
                "thread/turns/list",
                json!({ "threadId": THREAD, "cursor": "garbage" })
            ),
            (-32600, "invalid cursor: garbage".to_owned())
        );
        let empty = server.ok(
            "thread/turns/list",
            json!({ "threadId": THREAD, "limit": 0 }),
        );
        assert_eq!(
            empty,
            json!({ "data": [], "nextCursor": null, "backwardsCursor": null })
        );
    }
}

/// The current release (the default): threads start paginated, a full-history read of a
/// paginated thread is preceded by a `deprecationNotice` (the paged read and a legacy thread's
/// read are not), `thread/read` carries `readState`, `thread/unsubscribe` answers
/// `unsubscribed`, and a legacy thread can be neither rolled back nor reverted.
#[test]
fn the_current_release_serves_paginated_history() {
    let home = tempfile::tempdir().unwrap();
    seed_in(home.path(), 2, None);
    assert_eq!(
        codex::read_thread(home.path(), THREAD)
            .unwrap()
            .unwrap()
            .history_mode,
        HistoryMode::Paginated,
        "a seed takes the default release's mode"
    );
    let mut server = Server::start(home.path());
    server.handshake(true);
    let started = server.ok("thread/start", json!({}));
    assert_eq!(started["thread"]["historyMode"], "paginated");
    server.until("thread/started");

    let (answer, before) = server.call(
        "thread/read",
        json!({ "threadId": THREAD, "includeTurns": true }),
    );
    assert_eq!(methods(&before), ["deprecationNotice"]);
    assert!(before[0]["params"]["summary"]
        .as_str()
        .unwrap()
        .starts_with(
            "Full-history hydration is deprecated for paginated threads; omit `includeTurns`"
        ));
    assert_eq!(turn_ids(&answer["result"]["thread"]), ["turn-1", "turn-2"]);
    assert!(answer["result"]["readState"].is_object(), "{answer}");
    let (_, before) = server.call("thread/read", json!({ "threadId": THREAD }));
    assert!(before.is_empty(), "{before:?}");

    let (answer, before) = server.call("thread/resume", json!({ "threadId": THREAD }));
    assert_eq!(methods(&before), ["deprecationNotice"]);
    assert!(before[0]["params"]["summary"]
        .as_str()
        .unwrap()
        .contains("use `excludeTurns: true`"));
    assert_eq!(turn_ids(&answer["result"]["thread"]), ["turn-1", "turn-2"]);
    let (answer, before) = server.call(
        "thread/resume",
        json!({ "threadId": THREAD, "excludeTurns": true }),
    );
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(answer["result"]["thread"]["turns"], json!([]));
    assert_eq!(answer["result"]["thread"]["historyMode"], "paginated");
    assert_eq!(
        server.ok("thread/unsubscribe", json!({ "threadId": THREAD })),
        json!({ "status": "unsubscribed" })
    );

    // A legacy thread (started by 0.155) cannot be restored by this release.
    let legacy = tempfile::tempdir().unwrap();
    seed_in(legacy.path(), 2, Some(HistoryMode::Legacy));
    let mut server = Server::start(legacy.path());
    server.handshake(true);
    let (answer, before) = server.call("thread/resume", json!({ "threadId": THREAD }));
    assert!(
        before.is_empty(),
        "no notice for a legacy thread: {before:?}"
    );
    assert_eq!(answer["result"]["thread"]["historyMode"], "legacy");
    let (_, message) = server.err(
        "thread/rollback",
        json!({ "threadId": THREAD, "numTurns": 1 }),
    );
    assert!(
        message.contains("unknown variant `thread/rollback`"),
        "{message}"
    );
    assert_eq!(
        server.err(
            "thread/revert",
            json!({ "threadId": THREAD, "beforeTurnId": "turn-2" })
        ),
        (
            -32600,
            "thread/revert only supports paginated threads".to_owned()
        )
    );
    assert_eq!(persisted_turns(legacy.path(), THREAD), ["turn-1", "turn-2"]);
}

/// 0.155.1: `thread/read` answers `{thread}` without `readState`, and a paginated thread is
/// reverted there too (rollback refuses it).
#[test]
fn release_0_155_reverts_paginated_threads_and_reads_without_read_state() {
    let home = tempfile::tempdir().unwrap();
    seed_in(home.path(), 3, None);
    codex::set_history_mode(home.path(), THREAD, codex::seed_history_mode("0.155.1")).unwrap();
    let mut server = Server::v155(home.path());
    server.handshake(true);
    server.ok("thread/resume", json!({ "threadId": THREAD }));
    let read = server.ok("thread/read", json!({ "threadId": THREAD }));
    assert!(read.get("readState").is_none(), "{read}");
    assert_eq!(read["thread"]["historyMode"], "legacy");
    let started = server.ok("thread/start", json!({}));
    let id = started["thread"]["id"].as_str().unwrap().to_owned();
    let turn = server.ok(
        "turn/start",
        json!({ "threadId": id, "input": [{ "type": "text", "text": "one" }] }),
    );
    server.until("turn/completed");
    let first = turn["turn"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        server.err("thread/rollback", json!({ "threadId": id, "numTurns": 1 })),
        (
            -32600,
            "paginated threads do not support thread/rollback".to_owned()
        )
    );
    server.ok(
        "thread/revert",
        json!({ "threadId": id, "beforeTurnId": first }),
    );
    assert!(persisted_turns(home.path(), &id).is_empty());
}

#[test]
fn version_0_156_has_no_rollback() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path(), 2);
    let mut server = Server::start_with(home.path(), &[(codex::VERSION_ENV, "0.156.0")]);
    let init = server.handshake(true);
    assert!(init["userAgent"].as_str().unwrap().contains("0.156.0"));
    server.ok("thread/resume", json!({ "threadId": THREAD }));
    let (answer, before) = server.call(
        "thread/rollback",
        json!({ "threadId": THREAD, "numTurns": 1 }),
    );
    assert!(before.is_empty(), "no deprecation notice: {before:?}");
    assert_eq!(answer["error"]["code"], -32600);
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("Invalid request: unknown variant `thread/rollback`, expected one of "),
        "{message}"
    );
    assert!(message.contains("`thread/revert`"), "{message}");
    assert_eq!(
        codex::read_thread(home.path(), THREAD)
            .unwrap()
            .unwrap()
            .turn_ids(),
        ["turn-1", "turn-2"]
    );
    // thread/revert is the replacement, on paginated threads.
    let started = server.ok("thread/start", json!({}));
    let id = started["thread"]["id"].as_str().unwrap().to_owned();
    let turn = server.ok(
        "turn/start",
        json!({ "threadId": id, "input": [{ "type": "text", "text": "x" }] }),
    );
    server.until("turn/completed");
    let reverted = server.ok(
        "thread/revert",
        json!({ "threadId": id, "beforeTurnId": turn["turn"]["id"] }),
    );
    assert_eq!(reverted["thread"]["turns"], json!([]));
    assert!(reverted["turnsBackwardsCursor"].is_null());
}

#[test]
fn unknown_methods_bad_params_and_bad_lines() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path());
    server.handshake(true);
    let (code, message) = server.err("thread/fly", json!({}));
    assert_eq!(code, -32600);
    assert!(
        message.contains("`thread/turns/list`") && message.contains("`thread/unsubscribe`"),
        "{message}"
    );
    assert!(
        message.starts_with(
            "Invalid request: unknown variant `thread/fly`, expected one of `initialize`"
        ),
        "{message}"
    );
    assert_eq!(
        server.err("thread/revert", json!({ "beforeTurnId": "t" })),
        (
            -32600,
            "Invalid request: missing field `threadId`".to_owned()
        )
    );
    let (_, message) = server.err(
        "thread/turns/list",
        json!({ "threadId": THREAD, "limit": "two" }),
    );
    assert!(
        message.starts_with("Invalid request: invalid type: string \"two\""),
        "{message}"
    );
    assert_eq!(
        server.err("thread/resume", Value::Null),
        (-32600, "Invalid request: missing field `params`".to_owned())
    );
    let (_, message) = server.err(
        "turn/start",
        json!({ "threadId": THREAD, "input": [{ "type": "hologram" }] }),
    );
    assert!(message.contains("unknown variant `hologram`"), "{message}");
    // A line that is not JSON (or not an object) is dropped without an answer.
    server.send_line("this is not json");
    server.send_line("[1, 2]");
    server.send_line("{\"id\": null, \"method\": \"thread/start\"}");
    let started = server.ok("thread/start", json!({}));
    assert!(started["thread"]["id"].is_string());
    assert!(server.close().success());
    let journal = read_journal(&rewind_mock_runtimes::journal_path(home.path())).unwrap();
    assert_eq!(
        journal.iter().filter(|e| e.call == "(unparseable)").count(),
        3
    );
}

#[test]
fn fault_error_answers_an_internal_error() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path(), 2);
    set_faults(
        home.path(),
        vec![rule("thread/rollback", FaultKind::Error, None)],
    );
    let mut server = Server::v155(home.path());
    server.handshake(true);
    server.ok("thread/resume", json!({ "threadId": THREAD }));
    let (answer, before) = server.call(
        "thread/rollback",
        json!({ "threadId": THREAD, "numTurns": 1 }),
    );
    assert_eq!(methods(&before), ["deprecationNotice"]);
    assert_eq!(answer["error"]["code"], -32603);
    assert_eq!(
        answer["error"]["message"],
        "failed to start rollback: injected fault"
    );
    assert_eq!(
        codex::read_thread(home.path(), THREAD)
            .unwrap()
            .unwrap()
            .turn_ids(),
        ["turn-1", "turn-2"]
    );
    // Other calls on the thread are untouched by a rule naming another call.
    server.ok(
        "thread/read",
        json!({ "threadId": THREAD, "includeTurns": true }),
    );
}

#[test]
fn fault_hang_with_hang_ms_answers_late() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path(), 2);
    set_faults(
        home.path(),
        vec![rule("thread/rollback", FaultKind::Hang, Some(400))],
    );
    let mut server = Server::v155(home.path());
    server.handshake(true);
    server.ok("thread/resume", json!({ "threadId": THREAD }));
    let started = Instant::now();
    let rolled = server.ok(
        "thread/rollback",
        json!({ "threadId": THREAD, "numTurns": 1 }),
    );
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_eq!(turn_ids(&rolled["thread"]), ["turn-1"]);
}

#[test]
fn fault_hang_without_hang_ms_holds_until_lifted() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path(), 2);
    set_faults(
        home.path(),
        vec![rule("thread/rollback", FaultKind::Hang, None)],
    );
    let mut server = Server::v155(home.path());
    server.handshake(true);
    server.ok("thread/resume", json!({ "threadId": THREAD }));
    let id = server.send_request(
        "thread/rollback",
        json!({ "threadId": THREAD, "numTurns": 1 }),
    );
    assert!(
        server.wait(id, Duration::from_millis(500)).is_none(),
        "a hung call must not answer"
    );
    let journal = read_journal(&rewind_mock_runtimes::journal_path(home.path())).unwrap();
    let hung = journal
        .iter()
        .find(|e| e.call == "thread/rollback")
        .unwrap();
    assert_eq!(hung.outcome, "fault:hang");
    // The connection keeps serving other calls while one is held.
    server.ok(
        "thread/read",
        json!({ "threadId": THREAD, "includeTurns": true }),
    );
    assert_eq!(
        codex::read_thread(home.path(), THREAD)
            .unwrap()
            .unwrap()
            .turn_ids(),
        ["turn-1", "turn-2"]
    );
    // Lifted: the held call goes ahead and answers.
    set_faults(home.path(), vec![]);
    let (answer, _) = server
        .wait(id, Duration::from_secs(5))
        .expect("a lifted hang answers");
    assert!(answer.get("result").is_some(), "{answer}");
    server.kill();
    assert_eq!(
        codex::read_thread(home.path(), THREAD)
            .unwrap()
            .unwrap()
            .turn_ids(),
        ["turn-1"]
    );
}

#[test]
fn fault_no_effect_reports_success_and_changes_nothing() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path(), 3);
    set_faults(
        home.path(),
        vec![rule("thread/rollback", FaultKind::NoEffect, None)],
    );
    let mut server = Server::v155(home.path());
    server.handshake(true);
    server.ok("thread/resume", json!({ "threadId": THREAD }));
    let rolled = server.ok(
        "thread/rollback",
        json!({ "threadId": THREAD, "numTurns": 2 }),
    );
    assert_eq!(turn_ids(&rolled["thread"]), ["turn-1", "turn-2", "turn-3"]);
    let read = server.ok(
        "thread/read",
        json!({ "threadId": THREAD, "includeTurns": true }),
    );
    assert_eq!(turn_ids(&read["thread"]), ["turn-1", "turn-2", "turn-3"]);
    let state = codex::read_thread(home.path(), THREAD).unwrap().unwrap();
    assert!(!state.rolled_back());
}

#[test]
fn fault_unknown_session_answers_like_a_missing_thread() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path(), 2);
    set_faults(
        home.path(),
        vec![FaultRule {
            target: THREAD.into(),
            call: None,
            kind: FaultKind::UnknownSession,
            hang_ms: None,
        }],
    );
    let mut server = Server::v155(home.path());
    server.handshake(true);
    assert_eq!(
        server.err("thread/resume", json!({ "threadId": THREAD })),
        (-32600, format!("no rollout found for thread id {THREAD}"))
    );
    assert_eq!(
        server.err(
            "thread/read",
            json!({ "threadId": THREAD, "includeTurns": true })
        ),
        (-32600, format!("thread not loaded: {THREAD}"))
    );
    assert_eq!(
        server.err(
            "thread/rollback",
            json!({ "threadId": THREAD, "numTurns": 1 })
        ),
        (-32600, format!("thread not found: {THREAD}"))
    );
}

#[test]
fn fault_busy_refuses_the_rollback_and_reads_active() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path(), 2);
    set_faults(
        home.path(),
        vec![FaultRule {
            target: THREAD.into(),
            call: None,
            kind: FaultKind::Busy,
            hang_ms: None,
        }],
    );
    let mut server = Server::v155(home.path());
    server.handshake(true);
    let resumed = server.ok("thread/resume", json!({ "threadId": THREAD }));
    assert_eq!(resumed["thread"]["status"]["type"], "active");
    assert_eq!(
        server.err(
            "thread/rollback",
            json!({ "threadId": THREAD, "numTurns": 1 })
        ),
        (
            -32600,
            "Cannot rollback while a turn is in progress.".to_owned()
        )
    );
    let read = server.ok(
        "thread/read",
        json!({ "threadId": THREAD, "includeTurns": true }),
    );
    assert_eq!(read["thread"]["status"]["type"], "active");
    assert_eq!(turn_ids(&read["thread"]), ["turn-1", "turn-2"]);
}

#[test]
fn fault_crash_exits_mid_call_without_an_answer() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path(), 2);
    set_faults(
        home.path(),
        vec![rule("thread/rollback", FaultKind::Crash, None)],
    );
    let mut server = Server::v155(home.path());
    server.handshake(true);
    server.ok("thread/resume", json!({ "threadId": THREAD }));
    let id = server.send_request(
        "thread/rollback",
        json!({ "threadId": THREAD, "numTurns": 1 }),
    );
    let mut seen = Vec::new();
    loop {
        match server.recv(WAIT) {
            Ok(message) => {
                assert_ne!(
                    message.get("id"),
                    Some(&json!(id)),
                    "a crash answers nothing"
                );
                seen.push(message);
            }
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => panic!("the mock did not exit"),
        }
    }
    let status = server.close();
    assert_eq!(status.code(), Some(134));
    let journal = read_journal(&rewind_mock_runtimes::journal_path(home.path())).unwrap();
    assert_eq!(journal.last().unwrap().call, "thread/rollback");
    assert_eq!(journal.last().unwrap().outcome, "fault:crash");
    assert_eq!(
        codex::read_thread(home.path(), THREAD)
            .unwrap()
            .unwrap()
            .turn_ids(),
        ["turn-1", "turn-2"]
    );
}

#[test]
fn faults_are_reread_on_every_call() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path(), 3);
    let mut server = Server::v155(home.path());
    server.handshake(true);
    server.ok("thread/resume", json!({ "threadId": THREAD }));
    set_faults(
        home.path(),
        vec![rule("thread/rollback", FaultKind::Busy, None)],
    );
    let (_, message) = server.err(
        "thread/rollback",
        json!({ "threadId": THREAD, "numTurns": 1 }),
    );
    assert_eq!(message, "Cannot rollback while a turn is in progress.");
    set_faults(home.path(), vec![]);
    let rolled = server.ok(
        "thread/rollback",
        json!({ "threadId": THREAD, "numTurns": 1 }),
    );
    assert_eq!(turn_ids(&rolled["thread"]), ["turn-1", "turn-2"]);
    // A broken plan is loud, not ignored.
    std::fs::write(rewind_mock_runtimes::faults_path(home.path()), "{ broken").unwrap();
    let (code, message) = server.err("thread/read", json!({ "threadId": THREAD }));
    assert_eq!(code, -32603);
    assert!(message.contains("not a fault plan"), "{message}");
}

#[test]
fn journal_records_the_process_and_every_call() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path(), 2);
    set_faults(
        home.path(),
        vec![rule("thread/read", FaultKind::NoEffect, None)],
    );
    let mut server = Server::v155(home.path());
    server.handshake(true);
    server.ok("thread/resume", json!({ "threadId": THREAD }));
    server.ok(
        "thread/rollback",
        json!({ "threadId": THREAD, "numTurns": 1 }),
    );
    server.ok(
        "thread/read",
        json!({ "threadId": THREAD, "includeTurns": true }),
    );
    server.err(
        "thread/rollback",
        json!({ "threadId": THREAD, "numTurns": 0 }),
    );
    assert!(server.close().success());
    let journal = read_journal(&rewind_mock_runtimes::journal_path(home.path())).unwrap();
    let calls: Vec<&str> = journal.iter().map(|e| e.call.as_str()).collect();
    assert_eq!(
        calls,
        [
            "process/start",
            "initialize",
            "initialized",
            "thread/resume",
            "thread/rollback",
            "thread/read",
            "thread/rollback",
        ]
    );
    let start = &journal[0];
    assert_eq!(start.runtime, "codex");
    let argv = start.request.as_array().unwrap();
    assert_eq!(argv.last().unwrap(), "app-server");
    assert!(journal.iter().all(|e| e.pid == start.pid));
    assert_eq!(journal[3].target.as_deref(), Some(THREAD));
    assert_eq!(
        journal[4].request,
        json!({ "threadId": THREAD, "numTurns": 1 })
    );
    assert_eq!(journal[4].outcome, "ok");
    assert_eq!(journal[5].outcome, "fault:no_effect");
    assert_eq!(journal[6].outcome, "error");
    assert_eq!(journal[6].detail.as_deref(), Some("numTurns must be >= 1"));
}

#[test]
fn the_process_refuses_to_start_without_a_usable_home_or_command_line() {
    let run = |args: &[&str], home: Option<&Path>, env: &[(&str, &str)]| {
        let mut command = Command::new(BIN);
        command
            .args(args)
            .env_remove("CODEX_HOME")
            .env_remove(codex::VERSION_ENV)
            .stdin(Stdio::null());
        if let Some(home) = home {
            command.env("CODEX_HOME", home);
        }
        for (k, v) in env {
            command.env(k, v);
        }
        command.output().unwrap()
    };
    let out = run(&["app-server"], None, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CODEX_HOME"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let out = run(&["app-server"], Some(&file), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a directory"));
    let out = run(&["exec", "hi"], Some(dir.path()), &[]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["app-server", "--bogus"], Some(dir.path()), &[]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(
        &["app-server", "--listen", "stdio://"],
        Some(dir.path()),
        &[(codex::VERSION_ENV, "latest")],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains(codex::VERSION_ENV));
    let out = run(
        &["app-server", "--listen", "stdio://"],
        Some(dir.path()),
        &[],
    );
    assert!(out.status.success(), "stdin closed at once: a clean exit");
    let out = run(&["--version"], None, &[]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("codex-cli {}", codex::DEFAULT_VERSION)
    );
}

// ---- live delivery: replies, the delivery witness, faults on turn/start ----

fn text_input(text: &str) -> Value {
    json!([{ "type": "text", "text": text, "text_elements": [] }])
}

/// Starts a turn and waits for its completion; returns the turn id and the notifications.
fn run_turn(server: &mut Server, thread_id: &str, input: Value) -> (String, Vec<Value>) {
    let turn = server.ok(
        "turn/start",
        json!({ "threadId": thread_id, "input": input }),
    );
    let notes = server.until("turn/completed");
    (turn["turn"]["id"].as_str().unwrap().to_owned(), notes)
}

fn journal_calls(home: &Path, call: &str) -> Vec<JournalEntry> {
    read_journal(&rewind_mock_runtimes::journal_path(home))
        .unwrap()
        .into_iter()
        .filter(|e| e.call == call)
        .collect()
}

fn persisted_turns(home: &Path, thread_id: &str) -> Vec<String> {
    codex::read_thread(home, thread_id)
        .unwrap()
        .map(|t| t.turn_ids())
        .unwrap_or_default()
}

#[test]
fn reply_to_is_verbatim_and_empty_with_the_marker() {
    let long = "x".repeat(500);
    assert_eq!(
        rewind_mock_runtimes::reply_to(&long),
        format!("Mock reply to: {long}")
    );
    assert_eq!(
        rewind_mock_runtimes::reply_to("a\nb"),
        "Mock reply to: a\nb"
    );
    assert_eq!(
        rewind_mock_runtimes::reply_to(&format!(
            "please {}",
            rewind_mock_runtimes::NO_REPLY_MARKER
        )),
        ""
    );
    assert_eq!(rewind_mock_runtimes::NO_REPLY_MARKER, "[no reply]");
    assert_eq!(
        codex::canned_reply("x"),
        rewind_mock_runtimes::reply_to("x")
    );
}

#[test]
fn several_text_items_are_one_input_and_an_empty_reply_has_no_agent_message() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path());
    server.handshake(false);
    let thread = server.ok("thread/start", json!({}));
    let thread_id = thread["thread"]["id"].as_str().unwrap().to_owned();
    server.until("thread/started");

    let input = json!([
        { "type": "text", "text": "first line", "text_elements": [] },
        { "type": "image", "url": "http://example.invalid/x.png" },
        { "type": "text", "text": "second line", "text_elements": [] },
    ]);
    let (_, notes) = run_turn(&mut server, &thread_id, input);
    let agent = notes
        .iter()
        .find(|n| n["method"] == "item/completed" && n["params"]["item"]["type"] == "agentMessage")
        .expect("an agent message");
    assert_eq!(
        agent["params"]["item"]["text"],
        "Mock reply to: first line\nsecond line"
    );

    let (silent, notes) = run_turn(&mut server, &thread_id, text_input("be quiet [no reply]"));
    assert!(
        !notes
            .iter()
            .any(|n| n["params"]["item"]["type"] == "agentMessage"
                || n["method"] == "item/agentMessage/delta"),
        "no agent message item for an empty reply: {notes:?}"
    );
    let names = methods(&notes);
    assert_eq!(
        names,
        [
            "warning",
            "thread/status/changed",
            "turn/started",
            "item/started",
            "item/completed",
            "thread/tokenUsage/updated",
            "account/rateLimits/updated",
            "thread/readState/changed",
            "thread/status/changed",
            "turn/completed",
        ]
    );
    let completed = &notes.last().unwrap()["params"]["turn"];
    assert_eq!(completed["id"], silent.as_str());
    assert_eq!(completed["status"], "completed");
    let read = server.ok(
        "thread/read",
        json!({ "threadId": thread_id, "includeTurns": true }),
    );
    let items = read["thread"]["turns"][1]["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "only the user message: {items:?}");
    assert_eq!(items[0]["type"], "userMessage");
    assert_eq!(read["thread"]["turns"][1]["status"], "completed");
    let state = codex::read_thread(home.path(), &thread_id)
        .unwrap()
        .unwrap();
    assert_eq!(state.turns[0].input, "first line\nsecond line");
    assert_eq!(state.turns[1].output, "");
}

#[test]
fn the_witness_sees_each_turn_start_before_the_turn_is_recorded() {
    let home = tempfile::tempdir().unwrap();
    let home_path = home.path().to_path_buf();
    // At the moment of each request, what the mock has persisted for the thread.
    let witness = WitnessServer::start_with(Answer::Witness, move |request| {
        json!(persisted_turns(&home_path, &request.target))
    });
    let mut server = Server::start_with(home.path(), &[(WITNESS_ENV, witness.url())]);
    server.handshake(false);
    let thread = server.ok("thread/start", json!({}));
    let thread_id = thread["thread"]["id"].as_str().unwrap().to_owned();
    server.until("thread/started");
    assert!(
        witness.requests().is_empty(),
        "thread/start delivers nothing"
    );

    let mut turns = Vec::new();
    for text in ["one", "two", "three"] {
        let (id, _) = run_turn(&mut server, &thread_id, text_input(text));
        turns.push(id);
    }
    let seen = witness.seen();
    assert_eq!(seen.len(), 3, "exactly one request per turn/start");
    for (index, s) in seen.iter().enumerate() {
        assert_eq!(s.request.runtime, "codex");
        assert_eq!(s.request.target, thread_id);
        assert_eq!(s.request.before["threadId"], thread_id.as_str());
        assert_eq!(s.request.before["turnIds"], json!(turns[..index]));
        // Not yet recorded while the witness looked.
        assert_eq!(s.hook, json!(turns[..index]));
    }
    assert_eq!(seen[0].request.input, "one");
    assert_eq!(seen[2].request.input, "three");
    assert_eq!(
        seen[2].request.before,
        json!({ "threadId": thread_id, "turnIds": [turns[0], turns[1]] })
    );

    // Reads, resumes and rollbacks are not deliveries.
    server.ok(
        "thread/read",
        json!({ "threadId": thread_id, "includeTurns": true }),
    );
    server.ok("thread/resume", json!({ "threadId": thread_id }));
    assert_eq!(witness.requests().len(), 3);

    let starts = journal_calls(home.path(), "turn/start");
    let numbers: Vec<Option<u64>> = starts.iter().map(|e| e.witness).collect();
    assert_eq!(
        numbers,
        [
            Some(FIRST_WITNESS),
            Some(FIRST_WITNESS + 1),
            Some(FIRST_WITNESS + 2)
        ]
    );
    assert!(
        read_journal(&rewind_mock_runtimes::journal_path(home.path()))
            .unwrap()
            .iter()
            .filter(|e| e.call != "turn/start")
            .all(|e| e.witness.is_none())
    );
    assert_eq!(persisted_turns(home.path(), &thread_id), turns);
}

#[test]
fn a_failing_witness_fails_the_turn_start_and_records_nothing() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path(), 2);
    let broken = WitnessServer::start_with(Answer::ServerError, |_| Value::Null);
    let garbled = WitnessServer::start_with(Answer::BadJson, |_| Value::Null);
    for (url, why) in [
        (unreachable_url(), "cannot reach"),
        (broken.url().to_owned(), "500"),
        (garbled.url().to_owned(), "not {\"witness\": <number>}"),
    ] {
        let mut server = Server::start_with(home.path(), &[(WITNESS_ENV, url.as_str())]);
        server.handshake(true);
        server.ok("thread/resume", json!({ "threadId": THREAD }));
        let (answer, notes) = server.call(
            "turn/start",
            json!({ "threadId": THREAD, "input": text_input("lost") }),
        );
        assert_eq!(answer["error"]["code"], -32603, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("delivery witness failed: ") && message.contains(why),
            "{message}"
        );
        assert!(notes.is_empty(), "no turn notifications: {notes:?}");
        assert!(
            server.recv(Duration::from_millis(200)).is_err(),
            "nothing follows the error"
        );
        let read = server.ok(
            "thread/read",
            json!({ "threadId": THREAD, "includeTurns": true }),
        );
        assert_eq!(read["thread"]["status"]["type"], "idle");
        assert_eq!(turn_ids(&read["thread"]), ["turn-1", "turn-2"]);
        assert!(server.close().success());
        assert_eq!(persisted_turns(home.path(), THREAD), ["turn-1", "turn-2"]);
        let last = journal_calls(home.path(), "turn/start").pop().unwrap();
        assert_eq!(last.outcome, "error");
        assert_eq!(last.witness, None);
        assert!(
            last.detail
                .as_deref()
                .unwrap()
                .starts_with("delivery witness failed: "),
            "{last:?}"
        );
    }
    assert_eq!(broken.requests().len(), 1);
    assert_eq!(garbled.requests().len(), 1);
}

#[test]
fn a_faulted_turn_start_never_reaches_the_witness_and_records_no_turn() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path(), 2);
    let witness = WitnessServer::start();
    let start = |home: &Path| {
        let mut server = Server::start_with(home, &[(WITNESS_ENV, witness.url())]);
        server.handshake(true);
        server.ok("thread/resume", json!({ "threadId": THREAD }));
        server
    };
    let params = json!({ "threadId": THREAD, "input": text_input("faulted") });

    set_faults(
        home.path(),
        vec![rule("turn/start", FaultKind::Error, None)],
    );
    let mut server = start(home.path());
    let (answer, _) = server.call("turn/start", params.clone());
    assert_eq!(answer["error"]["code"], -32603);
    assert_eq!(
        answer["error"]["message"],
        "turn/start failed: injected fault"
    );
    set_faults(home.path(), vec![rule("turn/start", FaultKind::Busy, None)]);
    assert_eq!(
        server.err("turn/start", params.clone()),
        (
            -32600,
            "Cannot start a turn while a turn is in progress.".to_owned()
        )
    );
    set_faults(
        home.path(),
        vec![rule("turn/start", FaultKind::UnknownSession, None)],
    );
    assert_eq!(
        server.err("turn/start", params.clone()),
        (-32600, format!("thread not found: {THREAD}"))
    );
    set_faults(
        home.path(),
        vec![rule("turn/start", FaultKind::NoEffect, None)],
    );
    let acknowledged = server.ok("turn/start", params.clone());
    assert_eq!(acknowledged["turn"]["status"], "inProgress");
    set_faults(home.path(), vec![rule("turn/start", FaultKind::Hang, None)]);
    let id = server.send_request("turn/start", params.clone());
    assert!(
        server.wait(id, Duration::from_millis(400)).is_none(),
        "a hang never answers"
    );
    server.kill();
    assert_eq!(persisted_turns(home.path(), THREAD), ["turn-1", "turn-2"]);

    set_faults(
        home.path(),
        vec![rule("turn/start", FaultKind::Crash, None)],
    );
    let mut server = start(home.path());
    server.send_request("turn/start", params.clone());
    while server.recv(WAIT).is_ok() {}
    assert_eq!(server.close().code(), Some(134));
    assert_eq!(persisted_turns(home.path(), THREAD), ["turn-1", "turn-2"]);

    assert!(witness.requests().is_empty(), "{:?}", witness.requests());
    let outcomes: Vec<String> = journal_calls(home.path(), "turn/start")
        .into_iter()
        .map(|e| {
            assert_eq!(e.witness, None);
            e.outcome
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            "fault:error",
            "fault:busy",
            "fault:unknown_session",
            "fault:no_effect",
            "fault:hang",
            "fault:crash"
        ]
    );

    // Without the fault the same call is delivered, witnessed and recorded.
    set_faults(home.path(), vec![]);
    let mut server = start(home.path());
    let (turn, _) = run_turn(&mut server, THREAD, text_input("delivered"));
    assert_eq!(
        persisted_turns(home.path(), THREAD),
        ["turn-1", "turn-2", turn.as_str()]
    );
    let requests = witness.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].before["turnIds"], json!(["turn-1", "turn-2"]));
}

#[test]
fn a_thread_started_by_one_process_is_resumed_by_another_with_its_turns() {
    let home = tempfile::tempdir().unwrap();
    let mut first = Server::start(home.path());
    first.handshake(false);
    let thread = first.ok("thread/start", json!({}));
    let thread_id = thread["thread"]["id"].as_str().unwrap().to_owned();
    first.until("thread/started");
    let (one, _) = run_turn(&mut first, &thread_id, text_input("one"));
    let (two, _) = run_turn(&mut first, &thread_id, text_input("two"));
    assert!(first.close().success());

    let witness = WitnessServer::start();
    let mut second = Server::start_with(home.path(), &[(WITNESS_ENV, witness.url())]);
    second.handshake(false);
    // Not loaded in this process until resumed.
    assert_eq!(
        second.err(
            "turn/start",
            json!({ "threadId": thread_id, "input": text_input("x") })
        ),
        (-32600, format!("thread not found: {thread_id}"))
    );
    let resumed = second.ok("thread/resume", json!({ "threadId": thread_id }));
    assert_eq!(turn_ids(&resumed["thread"]), [one.as_str(), two.as_str()]);
    let turns = resumed["thread"]["turns"].as_array().unwrap();
    assert_eq!(turns[1]["status"], "completed");
    assert_eq!(turns[1]["items"][0]["content"][0]["text"], "two");
    assert_eq!(turns[1]["items"][1]["text"], "Mock reply to: two");
    let (three, _) = run_turn(&mut second, &thread_id, text_input("three"));
    assert_eq!(
        witness.requests()[0].before,
        json!({ "threadId": thread_id, "turnIds": [one, two] })
    );
    assert!(second.close().success());
    assert_eq!(persisted_turns(home.path(), &thread_id), [one, two, three]);
}

/// Observed on the real app-server: one process at a time may load a thread. While another
/// process holds it (idle, or after `thread/unsubscribe`), `thread/resume` is refused with
/// "already has an active writer" and `thread/rollback` answers "thread not found"; the thread
/// is untouched. A holder that exits, or is killed, leaves no lock.
#[test]
fn one_writer_per_thread_until_the_holder_exits_or_is_killed() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path(), 2);
    let mut holder = Server::v155(home.path());
    holder.handshake(true);
    holder.ok("thread/resume", json!({ "threadId": THREAD }));
    let _ = holder.call("thread/unsubscribe", json!({ "threadId": THREAD }));

    let mut other = Server::v155(home.path());
    other.handshake(true);
    let (code, message) = other.err("thread/resume", json!({ "threadId": THREAD }));
    assert_eq!(code, -32600);
    assert_eq!(
        message,
        format!("thread {THREAD} already has an active writer")
    );
    let (_, message) = other.err(
        "thread/rollback",
        json!({ "threadId": THREAD, "numTurns": 1 }),
    );
    assert_eq!(message, format!("thread not found: {THREAD}"));

    // The holder exits: the next process writes.
    assert!(holder.close().success());
    let resumed = other.ok("thread/resume", json!({ "threadId": THREAD }));
    assert_eq!(
        turn_ids(&resumed["thread"]).len(),
        2,
        "the thread was untouched"
    );

    // That one is killed: no lock is left behind.
    other.kill();
    let mut third = Server::v155(home.path());
    third.handshake(true);
    let rolled = {
        third.ok("thread/resume", json!({ "threadId": THREAD }));
        third.ok(
            "thread/rollback",
            json!({ "threadId": THREAD, "numTurns": 1 }),
        )
    };
    assert_eq!(turn_ids(&rolled["thread"]).len(), 1);
}

/// Seen on 0.155.1 and 0.171.0: `turn/completed` shows the turn in the `summary` view, its
/// items the agent's reply alone (with the optional fields null); a full read shows both items.
#[test]
fn turn_completed_shows_the_reply_in_the_summary_view() {
    for version in ["0.155.1", codex::DEFAULT_VERSION] {
        let home = tempfile::tempdir().unwrap();
        let mut server = Server::start_with(home.path(), &[(codex::VERSION_ENV, version)]);
        server.handshake(true);
        let started = server.ok("thread/start", json!({}));
        let id = started["thread"]["id"].as_str().unwrap().to_owned();
        let (turn_id, notes) = run_turn(&mut server, &id, text_input("first question"));
        let completed = &notes.last().unwrap()["params"]["turn"];
        assert_eq!(completed["id"], turn_id.as_str(), "{version}");
        assert_eq!(completed["itemsView"], "summary", "{version}");
        let items = completed["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{version}: {items:?}");
        assert_eq!(items[0]["type"], "agentMessage");
        assert_eq!(items[0]["text"], "Mock reply to: first question");
        assert!(items[0]["id"].is_string());
        for key in ["phase", "memoryCitation", "questions", "delivery"] {
            assert_eq!(items[0].get(key), Some(&Value::Null), "{version}: {key}");
        }
        // The turn as it started has no items loaded.
        let started = notes
            .iter()
            .find(|n| n["method"] == "turn/started")
            .unwrap();
        assert_eq!(started["params"]["turn"]["itemsView"], "notLoaded");
        assert_eq!(started["params"]["turn"]["items"], json!([]));
        // A reply-less turn completes with no items.
        let marker = rewind_mock_runtimes::NO_REPLY_MARKER;
        let (_, notes) = run_turn(&mut server, &id, text_input(&format!("quiet {marker}")));
        let completed = &notes.last().unwrap()["params"]["turn"];
        assert_eq!(completed["itemsView"], "summary");
        assert_eq!(completed["items"], json!([]));
        // A full read still shows the user message and the reply.
        let read = server.ok(
            "thread/read",
            json!({ "threadId": id, "includeTurns": true }),
        );
        let first = &read["thread"]["turns"][0];
        assert_eq!(first["itemsView"], "full");
        assert_eq!(first["items"][0]["type"], "userMessage");
        assert_eq!(first["items"][1]["type"], "agentMessage");
        assert_eq!(first["items"][1]["delivery"], Value::Null);
    }
}

/// Seen on 0.155.1 and 0.171.0: a thread id that is not a UUID is refused with the real
/// `uuid` wording, the bad character's position counted from 1.
#[test]
fn a_malformed_thread_id_is_refused_with_the_real_wording() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path());
    server.handshake(true);
    let expected = |c: char, at: usize| {
        format!(
            "invalid thread id: invalid character: expected an optional prefix of `urn:uuid:` \
             followed by [0-9a-fA-F-], found `{c}` at {at}"
        )
    };
    assert_eq!(
        server.err(
            "thread/read",
            json!({ "threadId": "not-a-uuid", "includeTurns": true })
        ),
        (-32600, expected('n', 1))
    );
    assert_eq!(
        server.err("thread/resume", json!({ "threadId": "0123-xyz" })),
        (-32600, expected('x', 6))
    );
    assert_eq!(
        server.err(
            "turn/start",
            json!({ "threadId": "not-a-uuid", "input": [{ "type": "text", "text": "x" }] })
        ),
        (-32600, expected('n', 1))
    );
}

/// Seen on 0.155.1 and 0.171.0: `thread/resume` of a legacy thread answers both backwards
/// cursors null; a paginated thread's are strings.
#[test]
fn resuming_a_legacy_thread_answers_null_cursors() {
    for version in ["0.155.1", codex::DEFAULT_VERSION] {
        let home = tempfile::tempdir().unwrap();
        seed_in(home.path(), 2, Some(HistoryMode::Legacy));
        let mut server = Server::start_with(home.path(), &[(codex::VERSION_ENV, version)]);
        server.handshake(true);
        let resumed = server.ok("thread/resume", json!({ "threadId": THREAD }));
        assert_eq!(turn_ids(&resumed["thread"]), ["turn-1", "turn-2"]);
        assert_eq!(resumed["turnsBackwardsCursor"], Value::Null, "{version}");
        assert_eq!(resumed["itemsBackwardsCursor"], Value::Null, "{version}");
        assert_eq!(resumed["initialTurnsPage"], Value::Null);

        let paginated = tempfile::tempdir().unwrap();
        seed_in(paginated.path(), 2, Some(HistoryMode::Paginated));
        let mut server = Server::start_with(paginated.path(), &[(codex::VERSION_ENV, version)]);
        server.handshake(true);
        let resumed = server.ok("thread/resume", json!({ "threadId": THREAD }));
        assert!(resumed["turnsBackwardsCursor"].is_string(), "{version}");
        assert!(resumed["itemsBackwardsCursor"].is_string(), "{version}");
    }
}

/// Seen on 0.171.0: `thread/read` names the thread's first turn as the first unread one (null
/// without turns), and once a thread was reverted `thread/resume` answers `serviceTier:
/// "default"` (null before; 0.155.1 answers null either way).
#[test]
fn read_state_names_the_first_turn_and_reverted_threads_resume_with_the_default_tier() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start(home.path());
    server.handshake(true);
    let started = server.ok("thread/start", json!({}));
    let id = started["thread"]["id"].as_str().unwrap().to_owned();
    let read = server.ok("thread/read", json!({ "threadId": id }));
    assert_eq!(read["readState"]["firstUnread"], Value::Null);
    assert!(read["readState"]["revision"].is_string());
    let (first, _) = run_turn(&mut server, &id, text_input("one"));
    let (second, _) = run_turn(&mut server, &id, text_input("two"));
    let read = server.ok(
        "thread/read",
        json!({ "threadId": id, "includeTurns": true }),
    );
    assert_eq!(
        read["readState"]["firstUnread"],
        json!({ "type": "turn", "turnId": first })
    );
    let resumed = server.ok("thread/resume", json!({ "threadId": id }));
    assert_eq!(resumed["serviceTier"], Value::Null);
    server.ok(
        "thread/revert",
        json!({ "threadId": id, "beforeTurnId": second }),
    );
    let read = server.ok("thread/read", json!({ "threadId": id }));
    assert_eq!(
        read["readState"]["firstUnread"],
        json!({ "type": "turn", "turnId": first })
    );
    let resumed = server.ok("thread/resume", json!({ "threadId": id }));
    assert_eq!(resumed["serviceTier"], "default");
    assert!(server.close().success());
    let mut server = Server::start(home.path());
    server.handshake(true);
    let resumed = server.ok("thread/resume", json!({ "threadId": id }));
    assert_eq!(resumed["serviceTier"], "default", "a new process too");
    assert!(server.close().success());

    let mut server = Server::v155(home.path());
    server.handshake(true);
    let resumed = server.ok("thread/resume", json!({ "threadId": id }));
    assert_eq!(resumed["serviceTier"], Value::Null, "0.155");
}

/// Seen on 0.155.1 and 0.171.0 (same connection, a turn still running): a second `turn/start`
/// is accepted and answers the running turn, and `thread/revert` interrupts the turn
/// (`turn/completed` `interrupted`) and reverts, leaving the thread idle; the interrupted turn
/// never completes. (A rollback meanwhile stays refused on 0.155: see
/// `rollback_is_refused_on_paginated_threads_and_during_a_turn`.)
///
/// The two releases run side by side: each waits out its interrupted turn's time.
#[test]
fn a_busy_thread_takes_a_second_turn_start_and_a_revert_interrupts_the_turn() {
    std::thread::scope(|scope| {
        for version in ["0.155.1", codex::DEFAULT_VERSION] {
            scope.spawn(move || busy_thread_on(version));
        }
    });
}

fn busy_thread_on(version: &str) {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start_with(
        home.path(),
        &[(codex::VERSION_ENV, version), (codex::TURN_MS_ENV, "700")],
    );
    server.handshake(true);
    let started = server.ok("thread/start", json!({}));
    let id = started["thread"]["id"].as_str().unwrap().to_owned();
    server.until("thread/started");
    let slow = server.ok(
        "turn/start",
        json!({ "threadId": id, "input": [{ "type": "text", "text": "slow" }] }),
    );
    let slow_id = slow["turn"]["id"].as_str().unwrap().to_owned();
    server.until("turn/started");
    let again = server.ok(
        "turn/start",
        json!({ "threadId": id, "input": [{ "type": "text", "text": "meanwhile" }] }),
    );
    assert_eq!(again["turn"]["id"], slow_id.as_str(), "{version}");
    assert_eq!(again["turn"]["status"], "inProgress");
    assert_eq!(again["turn"]["startedAt"], Value::Null);
    assert_eq!(again["turn"]["items"], json!([]));
    assert_eq!(again["turn"]["itemsView"], "notLoaded");
    assert_eq!(persisted_turns(home.path(), &id), [slow_id.as_str()]);

    let (answer, before) = server.call(
        "thread/revert",
        json!({ "threadId": id, "beforeTurnId": slow_id }),
    );
    let result = &answer["result"];
    assert_eq!(
        result["thread"]["status"]["type"], "idle",
        "{version}: {answer}"
    );
    assert_eq!(result["thread"]["turns"], json!([]));
    assert_eq!(result["turnsBackwardsCursor"], Value::Null);
    let ends: Vec<&Value> = before
        .iter()
        .filter(|n| n["method"] == "turn/completed")
        .collect();
    assert_eq!(ends.len(), 1, "{before:?}");
    assert_eq!(ends[0]["params"]["turn"]["id"], slow_id.as_str());
    assert_eq!(ends[0]["params"]["turn"]["status"], "interrupted");
    // The interrupted turn sends nothing more once its time (700 ms from its start) is up.
    std::thread::sleep(Duration::from_millis(1000));
    let mut late = Vec::new();
    while let Ok(message) = server.recv(Duration::from_millis(100)) {
        late.push(message);
    }
    assert!(
        !late
            .iter()
            .any(|n| n["method"] == "turn/completed" || n["method"] == "item/agentMessage/delta"),
        "{late:?}"
    );
    let read = server.ok(
        "thread/read",
        json!({ "threadId": id, "includeTurns": true }),
    );
    assert_eq!(read["thread"]["status"]["type"], "idle");
    assert_eq!(read["thread"]["turns"], json!([]));
    let state = codex::read_thread(home.path(), &id).unwrap().unwrap();
    assert!(state.turns.is_empty());
    assert!(state.history.iter().any(|e| matches!(
        e,
        codex::HistoryEvent::TurnCompleted { turn_id, status: codex::TurnStatus::Interrupted, .. } if turn_id == &slow_id
    )));

    // The thread takes turns again.
    let (_, notes) = run_turn(&mut server, &id, text_input("after"));
    assert_eq!(
        notes.last().unwrap()["params"]["turn"]["status"],
        "completed"
    );
}

/// The input of a `turn/start` taken into a running turn is answered by that turn's reply.
#[test]
fn input_taken_into_a_running_turn_is_answered_with_it() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Server::start_with(home.path(), &[(codex::TURN_MS_ENV, "800")]);
    server.handshake(true);
    let started = server.ok("thread/start", json!({}));
    let id = started["thread"]["id"].as_str().unwrap().to_owned();
    let slow = server.ok(
        "turn/start",
        json!({ "threadId": id, "input": [{ "type": "text", "text": "slow" }] }),
    );
    let slow_id = slow["turn"]["id"].as_str().unwrap().to_owned();
    let again = server.ok(
        "turn/start",
        json!({ "threadId": id, "input": [{ "type": "text", "text": "meanwhile" }] }),
    );
    assert_eq!(again["turn"]["id"], slow_id.as_str());
    let notes = server.until("turn/completed");
    let completed = &notes.last().unwrap()["params"]["turn"];
    assert_eq!(completed["id"], slow_id.as_str());
    assert_eq!(completed["status"], "completed");
    let reply = rewind_mock_runtimes::reply_to("slow\nmeanwhile");
    assert_eq!(completed["items"][0]["text"], reply.as_str());
    let state = codex::read_thread(home.path(), &id).unwrap().unwrap();
    assert_eq!(state.turn_ids(), [slow_id]);
    assert_eq!(state.turns[0].input, "slow\nmeanwhile");
    assert_eq!(state.turns[0].output, reply);
}

/// Planted `busy` faults keep refusing, unlike a thread that really runs a turn.
#[test]
fn planted_busy_faults_still_refuse_revert_and_turn_start() {
    let home = tempfile::tempdir().unwrap();
    seed_in(home.path(), 2, Some(HistoryMode::Paginated));
    let mut server = Server::start(home.path());
    server.handshake(true);
    server.ok("thread/resume", json!({ "threadId": THREAD }));
    set_faults(
        home.path(),
        vec![
            rule("thread/revert", FaultKind::Busy, None),
            rule("turn/start", FaultKind::Busy, None),
        ],
    );
    assert_eq!(
        server.err(
            "thread/revert",
            json!({ "threadId": THREAD, "beforeTurnId": "turn-2" })
        ),
        (
            -32600,
            "Cannot revert while a turn is in progress.".to_owned()
        )
    );
    assert_eq!(
        server.err(
            "turn/start",
            json!({ "threadId": THREAD, "input": [{ "type": "text", "text": "x" }] })
        ),
        (
            -32600,
            "Cannot start a turn while a turn is in progress.".to_owned()
        )
    );
    assert_eq!(persisted_turns(home.path(), THREAD), ["turn-1", "turn-2"]);
}
