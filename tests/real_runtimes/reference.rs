//! The reference implementation's runtime clients (`rewind_reference::runtimes::{deliver,
//! restore}`) against the real runtimes, and against the mocks for contrast: deliver two
//! messages, restore to the recovery point committed before the second, check the runtime's own
//! read-back, then deliver a third message and check that it continues from the point. On a
//! real runtime the check goes as far as the model: what the runtime sent the fake model API
//! for the third message holds the first turn and nothing of the rewound second one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rewind_reference::capabilities::strategy;
use rewind_reference::recovery::RestoreTarget;
use rewind_reference::runtimes::{
    self, ClaudeSettings, CodexSettings, OpenCodeSettings, PointToCommit, RuntimeSettings,
};
use serde_json::{json, Value};

use crate::claude::{conversation, ClaudeEnv};
use crate::codex::CodexEnv;
use crate::fake_models::{FakeModel, Turn};
use crate::install::{self, Checked, Release};
use crate::opencode::OpenCodeEnv;

/// What a real runtime sent the model for the third message, after the restore to before the
/// second: the first turn and its answer are there, nothing of the rewound second turn is. The
/// request checked is the fullest one whose newest user turn is the third message (a title or
/// summary request the runtime makes on the side holds less). Nothing to check on a mock.
async fn model_input_after_restore(model: Option<&FakeModel>, what: &str) {
    let Some(model) = model else { return };
    let inputs = model.inputs().await;
    let newest_user = |c: &Vec<Turn>| {
        c.iter()
            .rev()
            .find(|t| t.role == "user")
            .is_some_and(|t| t.text.contains("third message"))
    };
    let seen = inputs
        .iter()
        .filter(|c| newest_user(c))
        .max_by_key(|c| c.len())
        .unwrap_or_else(|| {
            panic!("{what}: the model never received the third message; it received {inputs:#?}")
        });
    let has = |role: &str, text: &str| seen.iter().any(|t| t.role == role && t.text.contains(text));
    assert!(
        has("user", "first message") && has("assistant", "Mock reply to: first message"),
        "{what}: the model's input for the third message lost the turn before the boundary: \
         {seen:#?}"
    );
    assert!(
        !seen.iter().any(|t| t.text.contains("second message")),
        "{what}: the rewound turn still reached the model with the third message: {seen:#?}"
    );
}

/// The reference's time limit for one runtime call.
const TIMEOUT: Duration = Duration::from_secs(60);

fn settings(
    codex: Option<CodexSettings>,
    claude: Option<ClaudeSettings>,
    opencode: Option<OpenCodeSettings>,
) -> RuntimeSettings {
    RuntimeSettings {
        codex: codex.unwrap_or(CodexSettings {
            program: "/nonexistent/codex".into(),
            args: vec!["app-server".into()],
            env: Vec::new(),
        }),
        claude: claude.unwrap_or(ClaudeSettings {
            program: "/nonexistent/claude".into(),
            env: Vec::new(),
            cwd: ".".into(),
        }),
        opencode: opencode.unwrap_or(OpenCodeSettings {
            base_url: "http://127.0.0.1:9".into(),
        }),
        timeout: TIMEOUT,
    }
}

/// Delivers `input`, returning the answer and the point committed before it.
async fn deliver(
    settings: &RuntimeSettings,
    runtime: &str,
    session: Option<&str>,
    input: &str,
) -> (String, PointToCommit) {
    let points: Arc<Mutex<Vec<PointToCommit>>> = Arc::default();
    let log = Arc::clone(&points);
    let answer = runtimes::deliver(settings, runtime, session, input, move |point| {
        log.lock().expect("points").push(point);
        std::future::ready(Ok(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{runtime}: delivering {input:?} failed: {e}"));
    let point = points
        .lock()
        .expect("points")
        .pop()
        .unwrap_or_else(|| panic!("{runtime}: no point was committed for {input:?}"));
    (answer, point)
}

fn target(runtime: &str, strategy: &str, recovery_ref: Value) -> RestoreTarget {
    RestoreTarget {
        agent_id: "agent-1".into(),
        runtime: runtime.into(),
        strategy: strategy.into(),
        message_id: "message-2".into(),
        recovery_ref,
    }
}

/// The user texts of a Codex thread, read back through a fresh app-server (`thread/resume`).
async fn codex_user_texts(env: &CodexEnv, thread: &str) -> Vec<String> {
    let mut server = env.spawn().await;
    server.handshake().await.expect("initialize");
    let resumed = server
        .request("thread/resume", json!({"threadId": thread}))
        .await
        .unwrap_or_else(|e| panic!("thread/resume {thread}: {e}"));
    server.shutdown().await;
    resumed
        .pointer("/thread/turns")
        .and_then(Value::as_array)
        .map(|turns| {
            turns
                .iter()
                .flat_map(|t| t["items"].as_array().cloned().unwrap_or_default())
                .filter(|i| i["type"] == "userMessage")
                .filter_map(|i| {
                    i.pointer("/content/0/text")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn codex(env: CodexEnv, what: &str) {
    let s = settings(Some(env.settings()), None, None);
    let (answer, first) = deliver(&s, "codex", None, "first message").await;
    assert_eq!(answer, "Mock reply to: first message", "{what}");
    let thread = first
        .new_session
        .clone()
        .unwrap_or_else(|| panic!("{what}: the first delivery made no thread"));
    let (_, second) = deliver(&s, "codex", Some(&thread), "second message").await;
    assert_eq!(
        second.recovery_ref,
        json!({"threadId": thread, "turnCount": 1}),
        "{what}: the point before the second message"
    );
    let restored = runtimes::restore(
        &s,
        &target(
            "codex",
            strategy::CODEX_APP_SERVER_TURNS,
            second.recovery_ref,
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("{what}: restore failed: {e} ({})", e.kind()));
    eprintln!("{what}: restored: {restored:?}");
    assert_eq!(
        codex_user_texts(&env, &thread).await,
        ["first message"],
        "{what}: the thread after the restore"
    );
    deliver(&s, "codex", Some(&thread), "third message").await;
    assert_eq!(
        codex_user_texts(&env, &thread).await,
        ["first message", "third message"],
        "{what}: the thread after the next delivery"
    );
    model_input_after_restore(env.model.as_ref(), what).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_restores_real_codex_0155() {
    codex(
        CodexEnv::real(install::CODEX_0155).await,
        "real codex 0.155.1",
    )
    .await;
}

/// Codex 0.171.0, or the newest release under `REWIND_REAL_RELEASES=latest`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_restores_real_codex_current() {
    let checked = Checked::current(install::CODEX_0171);
    let _naming = checked.naming_failures("the reference on codex");
    codex(
        CodexEnv::real(checked.real.clone()).await,
        &format!("real {}", checked.label()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_restores_mock_codex() {
    for release in [install::CODEX_0155, install::CODEX_0171] {
        let Release { version, .. } = release;
        codex(CodexEnv::mock(&version), &format!("mock codex {version}")).await;
    }
}

/// The live chain of a Claude session as `(type, text)` pairs.
fn claude_chain(env: &ClaudeEnv, session: &str) -> Vec<(String, String)> {
    conversation(&env.transcript(session))["liveChain"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or_default().to_owned(),
                e["text"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn chain(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(t, x)| ((*t).to_owned(), (*x).to_owned()))
        .collect()
}

async fn claude(env: ClaudeEnv, what: &str) {
    let s = settings(None, Some(env.settings()), None);
    let (answer, first) = deliver(&s, "claude", None, "first message").await;
    assert_eq!(answer, "Mock reply to: first message", "{what}");
    let session = first
        .new_session
        .clone()
        .unwrap_or_else(|| panic!("{what}: the first delivery made no session"));
    let (_, second) = deliver(&s, "claude", Some(&session), "second message").await;
    let restored = runtimes::restore(
        &s,
        &target(
            "claude",
            strategy::CLAUDE_SESSION_RESUME_AT,
            second.recovery_ref,
        ),
    )
    .await;
    eprintln!("{what}: restore answered {restored:?}");
    let restore_error = restored.err().map(|e| format!("{e} ({})", e.kind()));
    deliver(&s, "claude", Some(&session), "third message").await;
    model_input_after_restore(env.model.as_ref(), what).await;
    let after = claude_chain(&env, &session);
    let expected = chain(&[
        ("user", "first message"),
        ("assistant", "Mock reply to: first message"),
        ("user", "third message"),
        ("assistant", "Mock reply to: third message"),
    ]);
    assert!(
        restore_error.is_none() && after == expected,
        "{what}: restore error: {restore_error:?}; live chain after the next delivery: \
         {after:#?}, expected {expected:#?}"
    );
    // A later delivery keeps following the restored conversation.
    deliver(&s, "claude", Some(&session), "fourth message").await;
    let later = claude_chain(&env, &session);
    assert_eq!(
        later.get(..4),
        Some(&expected[..]),
        "{what}: the live chain after one more delivery: {later:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_restores_real_claude() {
    claude(
        ClaudeEnv::real(install::CLAUDE_2197).await,
        "real claude 2.1.197",
    )
    .await;
}

/// Claude Code 2.1.332, or the newest release under `REWIND_REAL_RELEASES=latest`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_restores_real_claude_current() {
    let checked = Checked::current(install::CLAUDE_2332);
    let _naming = checked.naming_failures("the reference on claude");
    claude(
        ClaudeEnv::real(checked.real.clone()).await,
        &format!("real {}", checked.label()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_restores_mock_claude_2332() {
    let mut env = ClaudeEnv::mock();
    env.env.push((
        rewind_mock_runtimes::claude::VERSION_ENV.into(),
        install::CLAUDE_2332.version.into(),
    ));
    claude(env, "mock claude 2.1.332").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_restores_mock_claude() {
    claude(ClaudeEnv::mock(), "mock claude").await;
}

/// The texts of an OpenCode session's messages, in order.
async fn opencode_texts(env: &OpenCodeEnv, session: &str) -> Vec<String> {
    let listed = env
        .call("GET", &format!("/session/{session}/message"), None)
        .await;
    listed["body"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|m| {
            m["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .filter(|p| p["type"] == "text")
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("")
        })
        .collect()
}

async fn opencode(env: OpenCodeEnv, what: &str) {
    let s = settings(None, None, Some(env.settings()));
    let (answer, first) = deliver(&s, "opencode", None, "first message").await;
    assert_eq!(answer, "Mock reply to: first message", "{what}");
    let session = first
        .new_session
        .clone()
        .unwrap_or_else(|| panic!("{what}: the first delivery made no session"));
    let (_, second) = deliver(&s, "opencode", Some(&session), "second message").await;
    let message = second.recovery_ref["messageId"].clone();
    let restored = runtimes::restore(
        &s,
        &target(
            "opencode",
            strategy::OPENCODE_SESSION_REVERT,
            second.recovery_ref,
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("{what}: restore failed: {e} ({})", e.kind()));
    eprintln!("{what}: restored: {restored:?}");
    let read = env.call("GET", &format!("/session/{session}"), None).await;
    assert_eq!(
        read["body"]["revert"]["messageID"], message,
        "{what}: the session after the restore: {read}"
    );
    deliver(&s, "opencode", Some(&session), "third message").await;
    assert_eq!(
        opencode_texts(&env, &session).await,
        [
            "first message",
            "Mock reply to: first message",
            "third message",
            "Mock reply to: third message"
        ],
        "{what}: the messages after the next delivery"
    );
    model_input_after_restore(env.model.as_ref(), what).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_restores_real_opencode() {
    opencode(
        OpenCodeEnv::real(install::OPENCODE).await,
        "real opencode 1.18.33",
    )
    .await;
}

/// OpenCode 1.18.34, or the newest release under `REWIND_REAL_RELEASES=latest`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_restores_real_opencode_current() {
    let checked = Checked::current(install::OPENCODE_11834);
    let _naming = checked.naming_failures("the reference on opencode");
    opencode(
        OpenCodeEnv::real(checked.real.clone()).await,
        &format!("real {}", checked.label()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_restores_mock_opencode() {
    opencode(OpenCodeEnv::mock().await, "mock opencode").await;
}
