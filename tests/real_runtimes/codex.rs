//! Codex app-server: the mock and the real app-server (0.155.1, and the current release: 0.171.0,
//! or the newest under `REWIND_REAL_RELEASES=latest`) driven through the same JSON-RPC calls,
//! every call the reference makes plus the ones its restore strategies depend on, and their
//! answers compared.

use std::path::PathBuf;
use std::time::Duration;

pub use rewind_conformance::real::codex::AppServer;
use serde_json::{json, Value};

use crate::compare::{Comparison, Normaliser};
use crate::fake_models::{Api, FakeModel};
use crate::install::{self, Checked, Release};
use crate::{isolated_env, tempdir};

/// How long a slow turn takes (the busy cases).
const SLOW: Duration = Duration::from_secs(3);

/// The notifications the mock imitates; the real server sends others too (listed, not compared).
const IMITATED: &[&str] = &[
    "thread/started",
    "thread/status/changed",
    "turn/started",
    "item/started",
    "item/completed",
    "item/agentMessage/delta",
    "thread/tokenUsage/updated",
    "turn/completed",
    "deprecationNotice",
    "thread/reverted",
];

/// Where one side's app-servers run: program, homes and environment.
pub struct CodexEnv {
    pub program: PathBuf,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub root: tempfile::TempDir,
    /// The fake model (real side only), kept alive.
    pub model: Option<FakeModel>,
}

impl CodexEnv {
    /// The real `release` against a fresh fake Responses API.
    pub async fn real(release: Release) -> CodexEnv {
        let program = release.program().unwrap_or_else(|e| panic!("{e}"));
        let model = FakeModel::start(Api::Responses).await;
        let root = tempdir("real-codex");
        let home = root.path().join("codex-home");
        std::fs::create_dir_all(&home).expect("codex home");
        std::fs::write(
            home.join("config.toml"),
            rewind_conformance::real::codex::config(&model.base_v1()),
        )
        .expect("config.toml");
        let env = isolated_env(root.path(), &[("CODEX_HOME", &home)]);
        let cwd = root.path().join("work");
        std::fs::create_dir_all(&cwd).expect("work dir");
        CodexEnv {
            program,
            env,
            cwd,
            root,
            model: Some(model),
        }
    }

    /// The mock imitating `version`.
    pub fn mock(version: &str) -> CodexEnv {
        let root = tempdir("mock-codex");
        let home = root.path().join("codex-home");
        std::fs::create_dir_all(&home).expect("codex home");
        let mut env = isolated_env(root.path(), &[("CODEX_HOME", &home)]);
        env.push(("REWIND_MOCK_CODEX_VERSION".into(), version.into()));
        let cwd = root.path().join("work");
        std::fs::create_dir_all(&cwd).expect("work dir");
        CodexEnv {
            program: crate::mock_program("codex"),
            env,
            cwd,
            root,
            model: None,
        }
    }

    /// A new app-server process.
    pub async fn spawn(&self) -> AppServer {
        AppServer::spawn(&self.program, &self.env, &self.cwd)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A new app-server process whose turns take [`SLOW`]: the fake model answers late (real),
    /// or `REWIND_MOCK_CODEX_TURN_MS` delays the turn's completion (mock).
    pub async fn spawn_slow(&self) -> AppServer {
        let mut env = self.env.clone();
        match &self.model {
            Some(model) => model.set_delay(SLOW),
            None => env.push((
                "REWIND_MOCK_CODEX_TURN_MS".into(),
                SLOW.as_millis().to_string(),
            )),
        }
        AppServer::spawn(&self.program, &env, &self.cwd)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The settings the reference takes.
    pub fn settings(&self) -> rewind_reference::runtimes::CodexSettings {
        rewind_reference::runtimes::CodexSettings {
            program: self.program.clone(),
            args: vec!["app-server".into()],
            env: self.env.clone(),
        }
    }

    pub fn normaliser(&self) -> Normaliser {
        Normaliser::new(&[(self.root.path(), "<tmp>")])
    }
}

/// What one side answered, step by step.
#[derive(Default)]
struct Transcript {
    steps: Vec<(String, Value)>,
}

impl Transcript {
    fn answer(&mut self, label: &str, answer: &Result<Value, Value>) {
        let v = match answer {
            Ok(result) => json!({ "result": result }),
            Err(error) => json!({ "error": trim_error(error) }),
        };
        self.steps.push((label.to_owned(), v));
    }

    fn value(&mut self, label: &str, v: &Value) {
        self.steps.push((label.to_owned(), v.clone()));
    }

    /// The imitated notifications' names in order (deltas collapsed), and the others' names.
    fn notes(&mut self, label: &str, notes: Vec<Value>) {
        let mut imitated: Vec<String> = Vec::new();
        let mut params = Vec::new();
        for n in &notes {
            let method = n["method"].as_str().unwrap_or_default().to_owned();
            if !IMITATED.contains(&method.as_str()) {
                eprintln!("codex {label}: the mock does not imitate notification {method}");
                continue;
            }
            if method == "item/agentMessage/delta"
                && imitated.last().map(String::as_str) == Some("item/agentMessage/delta")
            {
                continue;
            }
            if matches!(
                method.as_str(),
                "thread/reverted" | "turn/completed" | "deprecationNotice"
            ) {
                params.push(json!({"method": method, "params": n["params"].clone()}));
            }
            imitated.push(method);
        }
        let v = json!({ "methods": imitated, "params": params });
        self.steps.push((label.to_owned(), v));
    }
}

/// An error with the "expected one of ..." list of method names cut (the mock names only the
/// methods it serves).
fn trim_error(error: &Value) -> Value {
    let mut e = error.clone();
    if let Some(message) = e.get("message").and_then(Value::as_str) {
        if let Some(at) = message.find(", expected one of") {
            e["message"] = Value::String(format!("{}, expected one of <methods>", &message[..at]));
        }
    }
    e
}

fn thread_id(answer: &Result<Value, Value>) -> String {
    answer
        .as_ref()
        .ok()
        .and_then(|r| r.pointer("/thread/id"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no thread id in {answer:?}"))
        .to_owned()
}

fn turn_id(done: &Value) -> String {
    done.pointer("/params/turn/id")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no turn id in {done}"))
        .to_owned()
}

/// The whole call sequence on one side: the handshake, a paginated and a legacy-history thread
/// with two turns each, read/resume/turns list, rollback and revert, unknown and malformed
/// thread ids, a second app-server process while the first holds the threads, a new process
/// after it exited, and a busy thread (slow turns) on the holder's own connection.
async fn sequence(env: &CodexEnv) -> Vec<(String, Value)> {
    let mut t = Transcript::default();
    let mut a = env.spawn().await;

    // Before and during the handshake.
    let early = a.request("thread/start", json!({})).await;
    t.answer("thread/start before initialize", &early);
    let init = a.handshake().await;
    t.answer("initialize", &init);
    let again = a
        .request(
            "initialize",
            json!({"clientInfo": {"name": "x", "version": "1"}}),
        )
        .await;
    t.answer("second initialize", &again);
    a.take_notes();

    // A default (paginated) thread with two turns.
    let started = a.request("thread/start", json!({})).await;
    t.answer("thread/start (paginated)", &started);
    let paged = thread_id(&started);
    let notes = a.take_notes();
    t.notes("thread/start notifications", notes);
    let (ok, done1) = a.turn(&paged, "first question").await;
    t.answer("turn/start 1", &ok);
    let notes = a.take_notes();
    t.notes("turn 1 notifications", notes);
    let (ok, done2) = a.turn(&paged, "second question").await;
    t.answer("turn/start 2", &ok);
    a.take_notes();
    t.value("turn/completed 2", &done2);
    let read = a
        .request(
            "thread/read",
            json!({"threadId": paged, "includeTurns": true}),
        )
        .await;
    t.answer("thread/read (2 turns)", &read);
    let resumed = a.request("thread/resume", json!({"threadId": paged})).await;
    t.answer("thread/resume (loaded here)", &resumed);
    a.take_notes();
    let listed = a
        .request("thread/turns/list", json!({"threadId": paged}))
        .await;
    t.answer("thread/turns/list", &listed);
    let rollback = a
        .request("thread/rollback", json!({"threadId": paged, "numTurns": 1}))
        .await;
    t.answer("thread/rollback on a paginated thread", &rollback);
    a.take_notes();
    let bad_turn = a
        .request(
            "thread/revert",
            json!({"threadId": paged, "beforeTurnId": "turn-that-does-not-exist"}),
        )
        .await;
    t.answer("thread/revert unknown turn", &bad_turn);
    a.take_notes();
    let revert = a
        .request(
            "thread/revert",
            json!({"threadId": paged, "beforeTurnId": turn_id(&done2)}),
        )
        .await;
    t.answer("thread/revert before turn 2", &revert);
    // The notification may follow the answer.
    if revert.is_ok() {
        a.wait_for("thread/reverted")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let notes = a.take_notes();
    t.notes("thread/revert notifications", notes);
    let read = a
        .request(
            "thread/read",
            json!({"threadId": paged, "includeTurns": true}),
        )
        .await;
    t.answer("thread/read after revert", &read);
    a.take_notes();

    // A legacy-history thread: the reference's delivery thread, and rollback's.
    let legacy = a
        .request("thread/start", json!({"historyMode": "legacy"}))
        .await;
    t.answer("thread/start (legacy)", &legacy);
    let legacy = thread_id(&legacy);
    let (one, _) = a.turn(&legacy, "one").await;
    one.expect("turn one of the legacy thread");
    let (_, done_b) = a.turn(&legacy, "two").await;
    a.take_notes();
    let zero = a
        .request(
            "thread/rollback",
            json!({"threadId": legacy, "numTurns": 0}),
        )
        .await;
    t.answer("thread/rollback numTurns 0", &zero);
    let rolled = a
        .request(
            "thread/rollback",
            json!({"threadId": legacy, "numTurns": 1}),
        )
        .await;
    t.answer("thread/rollback 1 (legacy)", &rolled);
    let notes = a.take_notes();
    t.notes("thread/rollback notifications", notes);
    let read = a
        .request(
            "thread/read",
            json!({"threadId": legacy, "includeTurns": true}),
        )
        .await;
    t.answer("thread/read legacy after rollback", &read);
    let revert_legacy = a
        .request(
            "thread/revert",
            json!({"threadId": legacy, "beforeTurnId": turn_id(&done_b)}),
        )
        .await;
    t.answer("thread/revert on a legacy thread", &revert_legacy);
    a.take_notes();

    // Unknown and malformed threads.
    let unknown = uuid::Uuid::new_v4().to_string();
    for (method, params) in [
        ("thread/resume", json!({"threadId": unknown})),
        (
            "thread/read",
            json!({"threadId": unknown, "includeTurns": true}),
        ),
        (
            "thread/rollback",
            json!({"threadId": unknown, "numTurns": 1}),
        ),
        (
            "thread/revert",
            json!({"threadId": unknown, "beforeTurnId": "t"}),
        ),
        (
            "turn/start",
            json!({"threadId": unknown, "input": [{"type": "text", "text": "x", "text_elements": []}]}),
        ),
        (
            "thread/read",
            json!({"threadId": "not-a-uuid", "includeTurns": true}),
        ),
    ] {
        let answer = a.request(method, params.clone()).await;
        let label = if params["threadId"] == "not-a-uuid" {
            format!("{method} malformed thread id")
        } else {
            format!("{method} unknown thread")
        };
        t.answer(&label, &answer);
        a.take_notes();
    }

    // A second writer: another app-server process while `a` holds both threads.
    let mut b = env.spawn().await;
    b.handshake().await.expect("initialize b");
    let second = b
        .request("thread/resume", json!({"threadId": legacy}))
        .await;
    t.answer("second process thread/resume (held)", &second);
    let second = b
        .request(
            "thread/rollback",
            json!({"threadId": legacy, "numTurns": 1}),
        )
        .await;
    t.answer("second process thread/rollback (held)", &second);
    let second = b
        .request(
            "thread/revert",
            json!({"threadId": paged, "beforeTurnId": turn_id(&done1)}),
        )
        .await;
    t.answer("second process thread/revert (held)", &second);
    b.shutdown().await;
    a.shutdown().await;

    // After the holder exited, a new process resumes what it wrote.
    let mut c = env.spawn().await;
    c.handshake().await.expect("initialize c");
    let resumed = c
        .request("thread/resume", json!({"threadId": legacy}))
        .await;
    t.answer("new process thread/resume legacy", &resumed);
    let resumed = c.request("thread/resume", json!({"threadId": paged})).await;
    t.answer("new process thread/resume paginated", &resumed);
    c.shutdown().await;

    // A thread that never ran a turn, resumed by a new process once its starter exited.
    let mut e = env.spawn().await;
    e.handshake().await.expect("initialize e");
    let empty = e.request("thread/start", json!({})).await;
    let empty = thread_id(&empty);
    e.shutdown().await;
    let mut f = env.spawn().await;
    f.handshake().await.expect("initialize f");
    let resumed = f.request("thread/resume", json!({"threadId": empty})).await;
    t.answer(
        "new process thread/resume of a thread that never ran a turn",
        &resumed,
    );
    f.shutdown().await;

    // A thread whose only turn was reverted has a rollout: a new process resumes it.
    let mut h = env.spawn().await;
    h.handshake().await.expect("initialize h");
    let once = h.request("thread/start", json!({})).await;
    let once = thread_id(&once);
    let (_, done) = h.turn(&once, "the only turn").await;
    let reverted = h
        .request(
            "thread/revert",
            json!({"threadId": once, "beforeTurnId": turn_id(&done)}),
        )
        .await;
    t.answer("thread/revert of the only turn", &reverted);
    h.shutdown().await;
    let mut i = env.spawn().await;
    i.handshake().await.expect("initialize i");
    let resumed = i.request("thread/resume", json!({"threadId": once})).await;
    t.answer(
        "new process thread/resume of a thread whose only turn was reverted",
        &resumed,
    );
    i.shutdown().await;

    // After thread/unsubscribe the connection hears no more of the thread's turns.
    let mut g = env.spawn().await;
    g.handshake().await.expect("initialize g");
    g.request("thread/resume", json!({"threadId": legacy}))
        .await
        .expect("resume legacy");
    let unsubscribed = g
        .request("thread/unsubscribe", json!({"threadId": legacy}))
        .await;
    t.answer("thread/unsubscribe", &unsubscribed);
    g.take_notes();
    let after = g
        .request(
            "turn/start",
            json!({"threadId": legacy, "input": [{"type": "text", "text": "unheard", "text_elements": []}]}),
        )
        .await;
    t.answer("turn/start after thread/unsubscribe", &after);
    g.drain(Duration::from_secs(3)).await;
    let notes = g.take_notes();
    t.notes("notifications after thread/unsubscribe", notes);
    g.shutdown().await;

    // Busy: a turn still running on the holder's own connection.
    let mut d = env.spawn_slow().await;
    d.handshake().await.expect("initialize d");
    d.request("thread/resume", json!({"threadId": legacy}))
        .await
        .expect("resume legacy");
    d.request("thread/resume", json!({"threadId": paged}))
        .await
        .expect("resume paginated");
    let slow = d
        .request(
            "turn/start",
            json!({"threadId": legacy, "input": [{"type": "text", "text": "slow one", "text_elements": []}]}),
        )
        .await;
    t.answer("turn/start (slow, legacy)", &slow);
    let busy = d
        .request(
            "thread/rollback",
            json!({"threadId": legacy, "numTurns": 1}),
        )
        .await;
    t.answer("thread/rollback while a turn runs", &busy);
    let slow_paged = d
        .request(
            "turn/start",
            json!({"threadId": paged, "input": [{"type": "text", "text": "slow two", "text_elements": []}]}),
        )
        .await;
    t.answer("turn/start (slow, paginated)", &slow_paged);
    let second_turn = d
        .request(
            "turn/start",
            json!({"threadId": paged, "input": [{"type": "text", "text": "meanwhile", "text_elements": []}]}),
        )
        .await;
    t.answer("turn/start while a turn runs", &second_turn);
    let busy = d
        .request(
            "thread/revert",
            json!({"threadId": paged, "beforeTurnId": turn_id(&done1)}),
        )
        .await;
    t.answer("thread/revert while a turn runs", &busy);
    d.wait_until(|n| {
        n["method"] == "turn/completed" && n.pointer("/params/threadId") == Some(&json!(legacy))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    // How the paginated thread's turns ended (the revert and the second turn/start above).
    d.drain(SLOW + Duration::from_secs(2)).await;
    let ends: Vec<Value> = d
        .take_notes()
        .into_iter()
        .filter(|n| {
            n["method"] == "turn/completed" && n.pointer("/params/threadId") == Some(&json!(paged))
        })
        .map(|n| json!({"turn": n.pointer("/params/turn/id"), "status": n.pointer("/params/turn/status")}))
        .collect();
    t.value(
        "turn/completed of the paginated thread's busy turns",
        &json!(ends),
    );
    let read = d
        .request(
            "thread/read",
            json!({"threadId": paged, "includeTurns": true}),
        )
        .await;
    t.answer("thread/read paginated after the busy turns", &read);
    if let Some(model) = &env.model {
        model.set_delay(Duration::ZERO);
    }
    d.shutdown().await;
    t.steps
}

/// The real release of `checked` and the mock imitating its pinned release, through the same
/// sequence.
async fn differential(checked: Checked) {
    let _naming = checked.naming_failures("codex differential");
    let real = CodexEnv::real(checked.real.clone()).await;
    let mock = CodexEnv::mock(&checked.pinned.version);
    let real_steps = sequence(&real).await;
    let mock_steps = sequence(&mock).await;
    let mut cmp = Comparison::new(mock.normaliser(), real.normaliser());
    cmp.steps(mock_steps, real_steps);
    cmp.assert_same(&checked.label());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_0155_mock_matches_real() {
    differential(Checked::pinned(install::CODEX_0155)).await;
}

/// Codex 0.171.0, or the newest release under `REWIND_REAL_RELEASES=latest`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_current_mock_matches_real() {
    differential(Checked::current(install::CODEX_0171)).await;
}
