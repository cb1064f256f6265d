//! The journaling proxies (`rewind_mock_runtimes::proxy`), with a mock standing in for the real
//! runtime behind them: the mock binary started with `REWIND_REAL_PROGRAM` naming the same binary
//! is a proxy, and the process it starts (without the variable) is the mock. Entries the proxy
//! journals carry the proxy's pid; the mock behind it journals under its own.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use rewind_mock_runtimes::claude::{seed_session, SeedEntry, SeedSession};
use rewind_mock_runtimes::codex::{self, HistoryMode, SeedThread, SeedTurn};
use rewind_mock_runtimes::faults::{FaultKind, FaultPlan, FaultRule};
use rewind_mock_runtimes::journal::{read_journal, JournalEntry};
use rewind_mock_runtimes::proxy::PROXY_TARGET_ENV;
use rewind_mock_runtimes::witness::WITNESS_ENV;
use serde_json::{json, Value};

mod support;
use support::WitnessServer;

const CODEX: &str = env!("CARGO_BIN_EXE_mock-codex");
const CLAUDE: &str = env!("CARGO_BIN_EXE_mock-claude");
const THREAD: &str = "5ee8fe45-121f-45e4-af6b-8ae4a14c4c3d";
const SESSION: &str = "0d2c8a53-3f1e-4c59-9b0b-6f0a7f4e2a11";

/// The entries the process `pid` journaled.
fn journaled_by(home: &Path, pid: u32) -> Vec<JournalEntry> {
    read_journal(&rewind_mock_runtimes::journal_path(home))
        .expect("the journal reads")
        .into_iter()
        .filter(|e| e.pid == pid)
        .collect()
}

/// Sends `requests` (one JSON line each) to a codex proxy in front of the mock, waits for the
/// answer to the last one with an id, and returns every line it wrote plus its pid.
fn codex_session(home: &Path, env: &[(&str, &str)], requests: &[Value]) -> (Vec<Value>, u32) {
    let mut command = Command::new(CODEX);
    command
        .arg("app-server")
        .env("CODEX_HOME", home)
        .env(PROXY_TARGET_ENV, CODEX)
        .env_remove(WITNESS_ENV)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().expect("the proxy starts");
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let last = requests
        .iter()
        .rev()
        .find_map(|r| r.get("id").cloned())
        .expect("a request with an id");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let value: Value = serde_json::from_str(&line).expect("the proxy writes JSON lines");
            if tx.send(value).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    for request in requests {
        writeln!(stdin, "{request}").expect("write");
        stdin.flush().expect("flush");
        if let Some(id) = request.get("id") {
            loop {
                let line = rx
                    .recv_timeout(Duration::from_secs(10))
                    .unwrap_or_else(|_| panic!("no answer to {request}; seen {seen:?}"));
                let done = line.get("id") == Some(id) && line.get("method").is_none();
                seen.push(line);
                if done {
                    break;
                }
            }
        }
        if request.get("id") == Some(&last) {
            break;
        }
    }
    drop(stdin);
    let _ = child.wait();
    (seen, pid)
}

fn seed_thread(home: &Path) {
    codex::seed_thread(
        home,
        &SeedThread {
            thread_id: THREAD.into(),
            turns: (1..=2)
                .map(|i| SeedTurn {
                    id: format!("turn-{i}"),
                    input: format!("question {i}"),
                    output: format!("answer {i}"),
                })
                .collect(),
            history_mode: Some(HistoryMode::Paginated),
        },
    )
    .expect("seeding");
}

fn initialize() -> [Value; 2] {
    [
        json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}, "capabilities": {"experimentalApi": true}}}),
        json!({"method": "initialized"}),
    ]
}

#[test]
fn the_codex_proxy_journals_every_call_and_answers_a_planted_error_without_the_runtime() {
    let home = tempfile::tempdir().expect("temp dir");
    seed_thread(home.path());
    let plan = FaultPlan {
        rules: vec![FaultRule {
            target: THREAD.to_owned(),
            call: Some("thread/revert".to_owned()),
            kind: FaultKind::Error,
            hang_ms: None,
        }],
    };
    plan.save(&rewind_mock_runtimes::faults_path(home.path()))
        .expect("the plan saves");
    let mut requests = initialize().to_vec();
    requests.push(json!({"id": 2, "method": "thread/resume", "params": {"threadId": THREAD}}));
    requests.push(json!({"id": 3, "method": "thread/revert", "params": {"threadId": THREAD, "beforeTurnId": "turn-2"}}));
    let (seen, pid) = codex_session(home.path(), &[], &requests);
    let revert = seen.last().expect("an answer");
    assert_eq!(revert["id"], json!(3));
    assert!(
        revert["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("injected fault")),
        "{revert}"
    );
    let by_proxy = journaled_by(home.path(), pid);
    let calls: Vec<(&str, &str)> = by_proxy
        .iter()
        .map(|e| (e.call.as_str(), e.outcome.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("process/start", "ok"),
            ("initialize", "ok"),
            ("initialized", "ok"),
            ("thread/resume", "ok"),
            ("thread/revert", "fault:error"),
        ],
        "{by_proxy:#?}"
    );
    assert_eq!(by_proxy[3].target.as_deref(), Some(THREAD));
    // The runtime behind the proxy never saw the revert.
    let all = read_journal(&rewind_mock_runtimes::journal_path(home.path())).expect("reads");
    assert!(
        !all.iter()
            .any(|e| e.pid != pid && e.call == "thread/revert"),
        "{all:#?}"
    );
}

#[test]
fn the_codex_proxy_announces_a_turn_to_the_witness_with_the_threads_turns_asked_of_the_runtime() {
    let home = tempfile::tempdir().expect("temp dir");
    seed_thread(home.path());
    let witness = WitnessServer::start();
    let mut requests = initialize().to_vec();
    requests.push(json!({"id": 2, "method": "thread/resume", "params": {"threadId": THREAD}}));
    requests.push(json!({"id": 3, "method": "turn/start", "params": {"threadId": THREAD, "input": [{"type": "text", "text": "question 3", "text_elements": []}]}}));
    let (_, pid) = codex_session(home.path(), &[(WITNESS_ENV, witness.url())], &requests);
    // The proxy asks first; the mock behind it, which reads the same variable, asks after.
    let asked = witness.requests();
    let first = asked.first().expect("the witness was asked");
    assert_eq!(first.target, THREAD);
    assert_eq!(first.input, "question 3");
    assert_eq!(
        first.before,
        json!({"threadId": THREAD, "turnIds": ["turn-1", "turn-2"]})
    );
    let turn = journaled_by(home.path(), pid)
        .into_iter()
        .find(|e| e.call == "turn/start")
        .expect("the proxy journaled the turn");
    assert_eq!(turn.witness, Some(support::FIRST_WITNESS), "{turn:?}");
}

#[test]
fn the_claude_proxy_journals_the_run_and_announces_the_prompt_with_the_boundary_it_resumes_at() {
    let config = tempfile::tempdir().expect("temp dir");
    let cwd = tempfile::tempdir().expect("temp dir");
    let entries = [
        ("11111111-1111-4111-8111-111111111111", "user", "one"),
        (
            "22222222-2222-4222-8222-222222222222",
            "assistant",
            "reply one",
        ),
        ("33333333-3333-4333-8333-333333333333", "user", "two"),
        (
            "44444444-4444-4444-8444-444444444444",
            "assistant",
            "reply two",
        ),
    ]
    .iter()
    .map(|(uuid, role, text)| SeedEntry {
        uuid: (*uuid).to_owned(),
        role: (*role).to_owned(),
        text: (*text).to_owned(),
    })
    .collect();
    seed_session(
        config.path(),
        &SeedSession {
            session_id: SESSION.into(),
            cwd: cwd.path().to_path_buf(),
            entries,
        },
    )
    .expect("seeding");
    let witness = WitnessServer::start();
    let boundary = "22222222-2222-4222-8222-222222222222";
    let mut child = Command::new(CLAUDE)
        .args([
            "-p",
            "--output-format=stream-json",
            "--input-format=stream-json",
            "--verbose",
            &format!("--resume={SESSION}"),
            &format!("--resume-session-at={boundary}"),
        ])
        .env("CLAUDE_CONFIG_DIR", config.path())
        .env(PROXY_TARGET_ENV, CLAUDE)
        .env(WITNESS_ENV, witness.url())
        .env("IS_SANDBOX", "1")
        .current_dir(cwd.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the proxy starts");
    let pid = child.id();
    {
        let mut stdin = child.stdin.take().expect("stdin");
        let line = json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "three"}]}});
        writeln!(stdin, "{line}").expect("write");
    }
    let out = child.wait_with_output().expect("the run ends");
    assert!(out.status.success(), "{out:?}");
    let asked = witness.requests();
    let first = asked.first().expect("the witness was asked");
    assert_eq!(first.target, SESSION);
    assert_eq!(first.input, "three");
    assert_eq!(first.before["leafUuid"], json!(boundary));
    assert_eq!(first.before["fresh"], json!(false));
    assert_eq!(
        first.before["chain"],
        json!(["11111111-1111-4111-8111-111111111111", boundary])
    );
    let by_proxy = journaled_by(config.path(), pid);
    let run = by_proxy
        .iter()
        .find(|e| e.call == "claude --resume-session-at")
        .unwrap_or_else(|| panic!("no run journaled: {by_proxy:#?}"));
    assert_eq!(run.outcome, "ok");
    assert_eq!(run.target.as_deref(), Some(SESSION));
    assert_eq!(run.witness, Some(support::FIRST_WITNESS));
    assert_eq!(run.request["stdin"].as_array().map(Vec::len), Some(1));
}

#[test]
fn a_codex_proxy_runs_its_program_on_a_second_host_with_exactly_the_listed_variables() {
    // A stand-in for `docker exec -i NAME`: records what it was asked to run, then runs it here.
    let home = tempfile::tempdir().expect("temp dir");
    seed_thread(home.path());
    let record = home.path().join("host-argv");
    let prefix = json!([
        "sh",
        "-c",
        "printf '%s\\n' \"$@\" > \"$0\"; exec \"$@\"",
        record.display().to_string(),
    ]);
    let mut requests = initialize().to_vec();
    requests.push(json!({"id": 2, "method": "thread/resume", "params": {"threadId": THREAD}}));
    let (seen, _) = codex_session(
        home.path(),
        &[
            (rewind_mock_runtimes::proxy::EXEC_ENV, &prefix.to_string()),
            (rewind_mock_runtimes::proxy::EXEC_VARS_ENV, "CODEX_HOME"),
            ("REWIND_LEFT_BEHIND", "1"),
        ],
        &requests,
    );
    let resumed = seen.last().expect("an answer");
    assert_eq!(
        resumed["result"]["thread"]["id"],
        json!(THREAD),
        "{resumed}"
    );
    let argv = std::fs::read_to_string(&record).expect("the host was asked");
    let argv: Vec<&str> = argv.lines().collect();
    let env_at = argv.iter().position(|a| *a == "env").expect("env -i");
    assert_eq!(
        argv[env_at..],
        [
            "env",
            "-i",
            "PATH=/usr/local/bin:/usr/bin:/bin",
            &format!("CODEX_HOME={}", home.path().display()),
            CODEX,
            "app-server",
        ],
        "{argv:?}"
    );
    assert!(
        !argv.iter().any(|a| a.contains("REWIND_LEFT_BEHIND")),
        "{argv:?}"
    );
}
