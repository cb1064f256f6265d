//! The mock OpenCode server spoken to over HTTP, as a daemon would: routes, shapes, the
//! two-phase revert, the error bodies of the real runtime, every fault kind, persistence and
//! the journal.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rewind_mock_runtimes::faults::{FaultKind, FaultPlan, FaultRule};
use rewind_mock_runtimes::journal::{read_journal, JournalEntry};
use rewind_mock_runtimes::opencode::{
    faults_file, journal_file, read_session, seed_sessions, SeedMessage, SeedSession, ServerProcess,
};
use rewind_mock_runtimes::witness::WITNESS_ENV;
use serde_json::{json, Value};

mod support;
use support::{unreachable_url, Answer, WitnessServer, FIRST_WITNESS};

const PROGRAM: &str = env!("CARGO_BIN_EXE_mock-opencode");

struct Mock {
    _dir: tempfile::TempDir,
    data_home: PathBuf,
    cwd: PathBuf,
    server: ServerProcess,
    http: reqwest::Client,
}

/// Writes `opencode.json` (when given) in a fresh working directory and starts the server.
async fn start(config: Option<Value>) -> Mock {
    start_with_env(config, &[]).await
}

/// The context-only server with the delivery witness at `url`.
async fn start_witnessed(url: &str) -> Mock {
    start_with_env(
        Some(json!({ "snapshot": false })),
        &[(WITNESS_ENV.to_owned(), url.to_owned())],
    )
    .await
}

/// [`start`] with extra environment variables for the server process.
async fn start_with_env(config: Option<Value>, env: &[(String, String)]) -> Mock {
    let dir = tempfile::tempdir().unwrap();
    let data_home = dir.path().join("data");
    let cwd = dir.path().join("project");
    std::fs::create_dir_all(&cwd).unwrap();
    if let Some(config) = config {
        std::fs::write(cwd.join("opencode.json"), config.to_string()).unwrap();
    }
    let server = ServerProcess::start_with_env(Path::new(PROGRAM), &[], &data_home, &cwd, env)
        .await
        .unwrap();
    Mock {
        _dir: dir,
        data_home,
        cwd,
        server,
        http: reqwest::Client::new(),
    }
}

/// The context-only configuration AgentTeam forces.
async fn start_context_only() -> Mock {
    start(Some(json!({ "snapshot": false }))).await
}

async fn answer(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

impl Mock {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.base_url())
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        answer(self.http.get(self.url(path)).send().await.unwrap()).await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        answer(
            self.http
                .post(self.url(path))
                .json(&body)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    async fn post_raw(&self, path: &str, body: &'static str) -> (u16, Value) {
        let request = self
            .http
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body);
        answer(request.send().await.unwrap()).await
    }

    async fn create(&self) -> String {
        let (status, session) = self.post("/session", json!({})).await;
        assert_eq!(status, 200, "{session}");
        session["id"].as_str().unwrap().to_owned()
    }

    /// Prompts `text` (with the user message id `message_id` when given); returns the
    /// assistant message.
    async fn prompt(&self, session: &str, message_id: Option<&str>, text: &str) -> Value {
        let mut body = json!({ "parts": [{ "type": "text", "text": text }] });
        if let Some(id) = message_id {
            body["messageID"] = json!(id);
        }
        let (status, reply) = self
            .post(&format!("/session/{session}/message"), body)
            .await;
        assert_eq!(status, 200, "{reply}");
        reply
    }

    async fn messages(&self, session: &str) -> Vec<Value> {
        let (status, list) = self.get(&format!("/session/{session}/message")).await;
        assert_eq!(status, 200, "{list}");
        list.as_array().unwrap().clone()
    }

    async fn message_ids(&self, session: &str) -> Vec<String> {
        ids(&self.messages(session).await)
    }

    async fn session(&self, session: &str) -> Value {
        let (status, info) = self.get(&format!("/session/{session}")).await;
        assert_eq!(status, 200, "{info}");
        info
    }

    async fn revert(&self, session: &str, message_id: &str) -> (u16, Value) {
        self.post(
            &format!("/session/{session}/revert"),
            json!({ "messageID": message_id }),
        )
        .await
    }

    /// A session with two exchanges: returns (session, [user1, assistant1, user2, assistant2]).
    async fn conversation(&self) -> (String, Vec<String>) {
        let session = self.create().await;
        self.prompt(&session, None, "first").await;
        self.prompt(&session, None, "second").await;
        let ids = self.message_ids(&session).await;
        assert_eq!(ids.len(), 4);
        (session, ids)
    }

    fn journal(&self) -> Vec<JournalEntry> {
        read_journal(&journal_file(&self.data_home)).unwrap()
    }

    fn set_faults(&self, rules: Vec<FaultRule>) {
        FaultPlan { rules }
            .save(&faults_file(&self.data_home))
            .unwrap();
    }
}

fn ids(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m["info"]["id"].as_str().unwrap().to_owned())
        .collect()
}

fn rule(target: &str, call: &str, kind: FaultKind, hang_ms: Option<u64>) -> FaultRule {
    FaultRule {
        target: target.to_owned(),
        call: Some(call.to_owned()),
        kind,
        hang_ms,
    }
}

fn is_id(value: &Value, prefix: &str) -> bool {
    value
        .as_str()
        .is_some_and(|s| s.starts_with(prefix) && s.len() == prefix.len() + 26)
}

#[tokio::test]
async fn health_config_and_the_start_are_answered_and_journaled() {
    let mock = start_context_only().await;
    assert!(mock.server.base_url().starts_with("http://127.0.0.1:"));
    let (status, health) = mock.get("/global/health").await;
    assert_eq!(status, 200);
    assert_eq!(health["healthy"], json!(true));
    assert!(health["version"].is_string());
    let (status, config) = mock.get("/config").await;
    assert_eq!(status, 200);
    assert_eq!(config["snapshot"], json!(false));

    let journal = mock.journal();
    let start = &journal[0];
    assert_eq!(start.call, "process/start");
    assert_eq!(start.runtime, "opencode");
    assert_eq!(
        start.request,
        json!(["serve", "--port", "0", "--hostname", "127.0.0.1"])
    );
    assert_eq!(Some(start.pid), mock.server.pid());
    let calls: Vec<&str> = journal.iter().map(|e| e.call.as_str()).collect();
    assert_eq!(
        calls,
        ["process/start", "GET /global/health", "GET /config"]
    );
    assert!(journal.iter().all(|e| e.outcome == "ok"));
    assert!(mock.cwd.exists());
}

#[tokio::test]
async fn snapshots_are_on_by_default_and_show_in_revert() {
    let mock = start(None).await;
    let (_, config) = mock.get("/config").await;
    assert!(config.get("snapshot").is_none(), "{config}");
    let (session, ids) = mock.conversation().await;
    let messages = mock.messages(&session).await;
    let step = &messages[1]["parts"][0];
    assert_eq!(step["type"], json!("step-start"));
    assert!(step["snapshot"].is_string(), "{step}");
    let (status, info) = mock.revert(&session, &ids[2]).await;
    assert_eq!(status, 200);
    assert_eq!(info["revert"]["messageID"], json!(ids[2]));
    assert!(info["revert"]["snapshot"].is_string(), "{info}");
    assert!(info["revert"]["diff"].is_string(), "{info}");
}

#[tokio::test]
async fn the_configuration_can_come_from_opencode_config() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("custom.json");
    std::fs::write(&file, r#"{"snapshot": false, "model": "fake/model-1"}"#).unwrap();
    let server = ServerProcess::start_with_env(
        Path::new(PROGRAM),
        &[],
        &dir.path().join("data"),
        dir.path(),
        &[("OPENCODE_CONFIG".to_owned(), file.display().to_string())],
    )
    .await
    .unwrap();
    let http = reqwest::Client::new();
    let config: Value = http
        .get(format!("{}/config", server.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(config["snapshot"], json!(false));
    assert_eq!(config["model"], json!("fake/model-1"));
    server.stop().await.unwrap();
}

#[tokio::test]
async fn sessions_are_created_prompted_and_listed_with_the_real_shapes() {
    let mock = start_context_only().await;
    let (status, session) = mock.post("/session", json!({ "title": "t" })).await;
    assert_eq!(status, 200);
    assert!(is_id(&session["id"], "ses_"), "{session}");
    for key in ["slug", "projectID", "directory", "version"] {
        assert!(session[key].is_string(), "{key}: {session}");
    }
    assert_eq!(session["title"], json!("t"));
    assert!(session["time"]["created"].is_i64());
    assert!(
        session.get("revert").is_none(),
        "revert absent, not null: {session}"
    );
    let id = session["id"].as_str().unwrap();
    // An empty body creates a session too.
    let (status, other) = answer(mock.http.post(mock.url("/session")).send().await.unwrap()).await;
    assert_eq!(status, 200, "{other}");
    assert_ne!(other["id"], session["id"]);

    let chosen =
        rewind_mock_runtimes::opencode::new_id(rewind_mock_runtimes::opencode::IdKind::Message);
    let reply = mock.prompt(id, Some(&chosen), "hello").await;
    let info = &reply["info"];
    assert_eq!(info["role"], json!("assistant"));
    assert_eq!(info["parentID"], json!(chosen));
    assert_eq!(info["sessionID"], json!(id));
    assert_eq!(info["finish"], json!("stop"));
    assert!(is_id(&info["id"], "msg_"));
    let types: Vec<&str> = reply["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["step-start", "text", "step-finish"]);
    assert!(reply["parts"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| is_id(&p["id"], "prt_")));
    assert!(reply["parts"][1]["text"]
        .as_str()
        .unwrap()
        .contains("hello"));

    let second = mock.prompt(id, None, "again").await;
    let user2 = second["info"]["parentID"].as_str().unwrap().to_owned();
    assert!(is_id(&json!(user2), "msg_"));

    let messages = mock.messages(id).await;
    let listed = ids(&messages);
    assert_eq!(
        listed,
        [
            chosen.clone(),
            reply["info"]["id"].as_str().unwrap().to_owned(),
            user2.clone(),
            second["info"]["id"].as_str().unwrap().to_owned()
        ]
    );
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(listed, sorted, "ids ascend in creation order");
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["info"]["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(messages[0]["parts"][0]["text"], json!("hello"));
    assert_eq!(messages[0]["parts"][0]["messageID"], json!(chosen));

    // The session list has both sessions.
    let (status, all) = mock.get("/session").await;
    assert_eq!(status, 200);
    assert_eq!(all.as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn revert_is_two_phase_and_the_next_prompt_deletes() {
    let mock = start_context_only().await;
    let (session, ids) = mock.conversation().await;
    let (status, info) = mock.revert(&session, &ids[2]).await;
    assert_eq!(status, 200, "{info}");
    assert_eq!(info["id"], json!(session));
    assert_eq!(
        info["revert"],
        json!({ "messageID": ids[2] }),
        "no snapshot fields: {info}"
    );
    // Nothing is deleted yet.
    assert_eq!(mock.message_ids(&session).await, ids);
    assert_eq!(
        mock.session(&session).await["revert"]["messageID"],
        json!(ids[2])
    );
    let stored = read_session(&mock.data_home, &session).unwrap().unwrap();
    assert_eq!(stored.revert_message_id(), Some(ids[2].as_str()));
    assert_eq!(stored.message_ids(), ids);

    // The next prompt deletes the reverted message and everything after it, then clears revert.
    let reply = mock.prompt(&session, None, "instead").await;
    let now = mock.message_ids(&session).await;
    assert_eq!(now.len(), 4);
    assert_eq!(now[..2], ids[..2]);
    assert!(!now.contains(&ids[2]) && !now.contains(&ids[3]));
    assert_eq!(now[3], reply["info"]["id"].as_str().unwrap());
    assert!(mock.session(&session).await.get("revert").is_none());
    let stored = read_session(&mock.data_home, &session).unwrap().unwrap();
    assert_eq!(stored.revert_message_id(), None);
    assert_eq!(stored.message_ids(), now);
}

#[tokio::test]
async fn revert_to_the_first_message_empties_the_session_on_the_next_prompt() {
    let mock = start_context_only().await;
    let (session, ids) = mock.conversation().await;
    let (status, _) = mock.revert(&session, &ids[0]).await;
    assert_eq!(status, 200);
    mock.prompt(&session, None, "fresh").await;
    let now = mock.message_ids(&session).await;
    assert_eq!(now.len(), 2);
    assert!(ids.iter().all(|id| !now.contains(id)));
}

#[tokio::test]
async fn unrevert_drops_the_pending_revert() {
    let mock = start_context_only().await;
    let (session, ids) = mock.conversation().await;
    mock.revert(&session, &ids[2]).await;
    let (status, info) = mock
        .post(&format!("/session/{session}/unrevert"), json!({}))
        .await;
    assert_eq!(status, 200, "{info}");
    assert!(info.get("revert").is_none(), "{info}");
    mock.prompt(&session, None, "third").await;
    let now = mock.message_ids(&session).await;
    assert_eq!(now.len(), 6, "nothing deleted after unrevert");
    assert_eq!(now[..4], ids[..]);
    // Without a pending revert it is a no-op.
    let (status, info) = answer(
        mock.http
            .post(mock.url(&format!("/session/{session}/unrevert")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    assert!(info.get("revert").is_none());
}

#[tokio::test]
async fn an_assistant_id_anchors_on_its_user_message() {
    let mock = start_context_only().await;
    let (session, ids) = mock.conversation().await;
    let (status, info) = mock.revert(&session, &ids[3]).await;
    assert_eq!(status, 200);
    assert_eq!(info["revert"]["messageID"], json!(ids[2]));
    let (_, info) = mock.revert(&session, &ids[1]).await;
    assert_eq!(info["revert"]["messageID"], json!(ids[0]));
}

#[tokio::test]
async fn an_unknown_message_id_leaves_the_session_unchanged() {
    let mock = start_context_only().await;
    let (session, ids) = mock.conversation().await;
    let before = mock.session(&session).await;
    let (status, info) = mock
        .revert(&session, "msg_ffffffffffffZZZZZZZZZZZZZZ")
        .await;
    assert_eq!(status, 200, "{info}");
    assert_eq!(info, before);
    assert!(info.get("revert").is_none());
    assert_eq!(mock.message_ids(&session).await, ids);
}

#[tokio::test]
async fn errors_have_the_real_bodies() {
    let mock = start_context_only().await;
    let (session, ids) = mock.conversation().await;
    let missing = "ses_000000000000AAAAAAAAAAAAAA";

    for path in [
        format!("/session/{missing}"),
        format!("/session/{missing}/message"),
    ] {
        let (status, body) = mock.get(&path).await;
        assert_eq!(status, 404, "{path}");
        assert_eq!(
            body,
            json!({ "name": "NotFoundError", "data": { "message": format!("Session not found: {missing}") } })
        );
    }
    let (status, body) = mock.revert(missing, &ids[0]).await;
    assert_eq!(
        (status, body["name"].clone()),
        (404, json!("NotFoundError"))
    );
    let (status, body) = mock
        .post(
            &format!("/session/{missing}/message"),
            json!({ "parts": [{ "type": "text", "text": "x" }] }),
        )
        .await;
    assert_eq!(
        (status, body["name"].clone()),
        (404, json!("NotFoundError"))
    );
    let (status, _) = mock
        .post(&format!("/session/{missing}/unrevert"), json!({}))
        .await;
    assert_eq!(status, 404);

    let (status, body) = mock.revert(&session, "nope").await;
    assert_eq!(status, 400);
    assert_eq!(body["name"], json!("BadRequest"));
    assert_eq!(body["data"]["kind"], json!("Payload"));
    assert!(
        body["data"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Expected a string starting with \"msg\", got \"nope\""),
        "{body}"
    );

    let (status, body) = mock
        .post(&format!("/session/{session}/revert"), json!({}))
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        json!({ "name": "BadRequest", "data": { "message": "Missing key\n  at [\"messageID\"]", "kind": "Payload" } })
    );

    let (status, body) = mock
        .post(
            &format!("/session/{session}/message"),
            json!({ "messageID": "bad", "parts": [{ "type": "text", "text": "x" }] }),
        )
        .await;
    assert_eq!(status, 400);
    assert!(body["data"]["message"]
        .as_str()
        .unwrap()
        .starts_with("Expected a string starting with \"msg\", got"));
    let (status, body) = mock
        .post(&format!("/session/{session}/message"), json!({}))
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        body["data"]["message"],
        json!("Missing key\n  at [\"parts\"]")
    );

    let (status, body) = mock
        .post_raw(&format!("/session/{session}/revert"), "{not json")
        .await;
    // A body that is not JSON: the real server answers 500 `UnknownError` (1.18.33).
    assert_eq!(status, 500);
    assert_eq!(body["name"], json!("UnknownError"));

    let (status, body) = mock.get("/session/not-a-session").await;
    assert_eq!(status, 500);
    assert_eq!(body["name"], json!("UnknownError"));
    assert_eq!(
        body["data"]["message"],
        json!("Unexpected server error. Check server logs for details.")
    );
    let (status, body) = mock.revert("abc", &ids[0]).await;
    assert_eq!((status, body["name"].clone()), (500, json!("UnknownError")));

    // Nothing changed, and every error was journaled as one.
    assert_eq!(mock.message_ids(&session).await, ids);
    assert!(mock.session(&session).await.get("revert").is_none());
    let errors = mock
        .journal()
        .into_iter()
        .filter(|e| e.outcome == "error")
        .count();
    assert_eq!(errors, 12);

    let (status, _) = mock.get("/no/such/route").await;
    assert_eq!(status, 404);
    let (status, _) = answer(mock.http.delete(mock.url("/config")).send().await.unwrap()).await;
    assert_eq!(status, 404);
    let journal = mock.journal();
    assert_eq!(journal[journal.len() - 2].call, "GET /no/such/route");
    assert_eq!(journal[journal.len() - 1].call, "DELETE /config");
}

#[tokio::test]
async fn fault_error_unknown_session_and_busy_answer_as_the_real_runtime() {
    let mock = start_context_only().await;
    let (session, ids) = mock.conversation().await;

    mock.set_faults(vec![rule(&session, "revert", FaultKind::Error, None)]);
    let (status, body) = mock.revert(&session, &ids[2]).await;
    assert_eq!(status, 500);
    assert_eq!(body["name"], json!("UnknownError"));

    mock.set_faults(vec![rule(
        &session,
        "revert",
        FaultKind::UnknownSession,
        None,
    )]);
    let (status, body) = mock.revert(&session, &ids[2]).await;
    assert_eq!(status, 404);
    assert_eq!(
        body,
        json!({ "name": "NotFoundError", "data": { "message": format!("Session not found: {session}") } })
    );

    mock.set_faults(vec![rule(&session, "revert", FaultKind::Busy, None)]);
    let (status, body) = mock.revert(&session, &ids[2]).await;
    assert_eq!(status, 409);
    assert_eq!(
        body,
        json!({ "_tag": "SessionBusyError", "sessionID": session, "message": format!("Session is busy: {session}") })
    );

    // None of them changed anything; other routes of the session were unaffected.
    assert_eq!(mock.message_ids(&session).await, ids);
    assert!(mock.session(&session).await.get("revert").is_none());
    let outcomes: Vec<String> = mock
        .journal()
        .into_iter()
        .filter(|e| e.call == "POST /session/{id}/revert")
        .map(|e| e.outcome)
        .collect();
    assert_eq!(
        outcomes,
        ["fault:error", "fault:unknown_session", "fault:busy"]
    );

    // Faults on the other routes, and the `*` target for creation.
    mock.set_faults(vec![
        rule(&session, "message", FaultKind::Busy, None),
        rule(&session, "get", FaultKind::UnknownSession, None),
        rule(&session, "messages", FaultKind::Error, None),
        rule("*", "create", FaultKind::Error, None),
        rule(&session, "unrevert", FaultKind::Busy, None),
    ]);
    let (status, _) = mock
        .post(
            &format!("/session/{session}/message"),
            json!({ "parts": [{ "type": "text", "text": "x" }] }),
        )
        .await;
    assert_eq!(status, 409);
    assert_eq!(mock.get(&format!("/session/{session}")).await.0, 404);
    assert_eq!(
        mock.get(&format!("/session/{session}/message")).await.0,
        500
    );
    assert_eq!(mock.post("/session", json!({})).await.0, 500);
    assert_eq!(
        mock.post(&format!("/session/{session}/unrevert"), json!({}))
            .await
            .0,
        409
    );
    // Removing the faults restores normal answers at once.
    mock.set_faults(vec![]);
    assert_eq!(mock.message_ids(&session).await, ids);
}

#[tokio::test]
async fn fault_no_effect_answers_success_and_changes_nothing() {
    let mock = start_context_only().await;
    let (session, ids) = mock.conversation().await;
    mock.set_faults(vec![rule(&session, "revert", FaultKind::NoEffect, None)]);
    let (status, info) = mock.revert(&session, &ids[2]).await;
    assert_eq!(status, 200, "{info}");
    assert_eq!(info["id"], json!(session));
    assert!(info.get("revert").is_none(), "{info}");
    assert!(mock.session(&session).await.get("revert").is_none());
    assert_eq!(
        read_session(&mock.data_home, &session)
            .unwrap()
            .unwrap()
            .revert_message_id(),
        None
    );
    let reverts: Vec<JournalEntry> = mock
        .journal()
        .into_iter()
        .filter(|e| e.call == "POST /session/{id}/revert")
        .collect();
    assert_eq!(reverts.len(), 1);
    assert_eq!(reverts[0].outcome, "fault:no_effect");

    // A no-effect prompt answers but stores nothing; a no-effect creation is not stored.
    mock.set_faults(vec![
        rule(&session, "message", FaultKind::NoEffect, None),
        rule("*", "create", FaultKind::NoEffect, None),
    ]);
    let reply = mock.prompt(&session, None, "lost").await;
    assert_eq!(reply["info"]["role"], json!("assistant"));
    assert_eq!(mock.message_ids(&session).await, ids);
    let (status, ghost) = mock.post("/session", json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(
        mock.get(&format!("/session/{}", ghost["id"].as_str().unwrap()))
            .await
            .0,
        404
    );
}

#[tokio::test]
async fn fault_hang_delays_or_never_answers() {
    let mock = start_context_only().await;
    let (session, ids) = mock.conversation().await;
    mock.set_faults(vec![rule(&session, "revert", FaultKind::Hang, Some(400))]);
    let started = Instant::now();
    let (status, info) = mock.revert(&session, &ids[2]).await;
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_eq!(status, 200);
    assert_eq!(
        info["revert"]["messageID"],
        json!(ids[2]),
        "answered normally after the hang"
    );
    let hung: Vec<JournalEntry> = mock
        .journal()
        .into_iter()
        .filter(|e| e.call == "POST /session/{id}/revert")
        .collect();
    assert_eq!(hung.len(), 1, "one entry per call");
    assert_eq!(hung[0].outcome, "fault:hang");

    mock.set_faults(vec![rule(&session, "unrevert", FaultKind::Hang, None)]);
    let result = mock
        .http
        .post(mock.url(&format!("/session/{session}/unrevert")))
        .timeout(Duration::from_millis(300))
        .send()
        .await;
    assert!(result.unwrap_err().is_timeout());
    // The server still answers everything else, and the revert is still pending.
    assert_eq!(
        mock.session(&session).await["revert"]["messageID"],
        json!(ids[2])
    );
    assert_eq!(mock.journal().last().unwrap().outcome, "ok");
    assert!(mock
        .journal()
        .iter()
        .any(|e| e.call == "POST /session/{id}/unrevert" && e.outcome == "fault:hang"));

    // A held call goes ahead once the fault is lifted.
    let held = tokio::spawn(
        mock.http
            .post(mock.url(&format!("/session/{session}/unrevert")))
            .send(),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!held.is_finished(), "a planted hang holds the call");
    mock.set_faults(vec![]);
    let answer = tokio::time::timeout(Duration::from_secs(5), held)
        .await
        .expect("a lifted hang answers")
        .unwrap()
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert!(mock
        .session(&session)
        .await
        .get("revert")
        .is_none_or(|r| r.is_null()));
    assert!(mock
        .journal()
        .iter()
        .any(|e| e.call == "POST /session/{id}/unrevert"
            && e.outcome == "ok"
            && e.detail.as_deref() == Some("held until the fault was lifted")));
}

#[tokio::test]
async fn fault_crash_exits_without_answering_and_keeps_the_state() {
    let mut mock = start_context_only().await;
    let (session, ids) = mock.conversation().await;
    mock.revert(&session, &ids[2]).await;
    mock.set_faults(vec![rule(&session, "unrevert", FaultKind::Crash, None)]);
    let result = mock
        .http
        .post(mock.url(&format!("/session/{session}/unrevert")))
        .send()
        .await;
    let error = result.unwrap_err();
    assert!(!error.is_timeout() && !error.is_connect(), "{error:?}");
    let status = mock
        .server
        .wait_exit(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the server exits");
    assert_eq!(status.code(), Some(134));
    let last = mock.journal().pop().unwrap();
    assert_eq!(last.call, "POST /session/{id}/unrevert");
    assert_eq!(last.outcome, "fault:crash");
    assert_eq!(last.target.as_deref(), Some(session.as_str()));
    // Acknowledged state survived the crash, and a new server serves it.
    let stored = read_session(&mock.data_home, &session).unwrap().unwrap();
    assert_eq!(stored.revert_message_id(), Some(ids[2].as_str()));
    mock.set_faults(vec![]);
    let restarted = ServerProcess::start(Path::new(PROGRAM), &[], &mock.data_home, &mock.cwd)
        .await
        .unwrap();
    let info: Value = mock
        .http
        .get(format!("{}/session/{session}", restarted.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(info["revert"]["messageID"], json!(ids[2]));
    restarted.stop().await.unwrap();
    let starts = mock
        .journal()
        .iter()
        .filter(|e| e.call == "process/start")
        .count();
    assert_eq!(starts, 2);
}

#[tokio::test]
async fn seeded_sessions_are_served_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let data_home = dir.path().join("data");
    let seed = SeedSession {
        session_id: "ses_seeded0000000000000000000".into(),
        messages: vec![
            SeedMessage {
                id: "msg_000000000001aaaaaaaaaaaaaa".into(),
                role: "user".into(),
                text: "one".into(),
            },
            SeedMessage {
                id: "msg_000000000002aaaaaaaaaaaaaa".into(),
                role: "assistant".into(),
                text: "r1".into(),
            },
            SeedMessage {
                id: "msg_000000000003aaaaaaaaaaaaaa".into(),
                role: "user".into(),
                text: "two".into(),
            },
            SeedMessage {
                id: "msg_000000000004aaaaaaaaaaaaaa".into(),
                role: "assistant".into(),
                text: "r2".into(),
            },
        ],
    };
    seed_sessions(&data_home, std::slice::from_ref(&seed)).unwrap();
    let server = ServerProcess::start(Path::new(PROGRAM), &[], &data_home, dir.path())
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let base = server.base_url().to_owned();
    let list: Vec<Value> = http
        .get(format!("{base}/session/{}/message", seed.session_id))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = ids(&list);
    let expected: Vec<String> = seed.messages.iter().map(|m| m.id.clone()).collect();
    assert_eq!(listed, expected);
    assert_eq!(list[3]["info"]["parentID"], json!(seed.messages[2].id));
    assert_eq!(list[2]["parts"][0]["text"], json!("two"));

    let info: Value = http
        .post(format!("{base}/session/{}/revert", seed.session_id))
        .json(&json!({ "messageID": seed.messages[2].id }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(info["revert"]["messageID"], json!(seed.messages[2].id));
    let stored = read_session(&data_home, &seed.session_id).unwrap().unwrap();
    assert_eq!(
        stored.revert_message_id(),
        Some(seed.messages[2].id.as_str())
    );
    assert_eq!(stored.message_ids(), expected);
    assert!(read_session(&data_home, "ses_absent").unwrap().is_none());
    server.stop().await.unwrap();

    // Seeding between runs replaces the session.
    seed_sessions(
        &data_home,
        &[SeedSession {
            session_id: seed.session_id.clone(),
            messages: vec![],
        }],
    )
    .unwrap();
    let stored = read_session(&data_home, &seed.session_id).unwrap().unwrap();
    assert!(stored.message_ids().is_empty());
    assert_eq!(stored.revert_message_id(), None);
}

#[tokio::test]
async fn the_journal_records_every_call_with_target_and_body() {
    let mock = start_context_only().await;
    let session = mock.create().await;
    let reply = mock.prompt(&session, None, "hi").await;
    let user = reply["info"]["parentID"].as_str().unwrap().to_owned();
    mock.revert(&session, &user).await;
    mock.get(&format!("/session/{session}")).await;
    mock.get(&format!("/session/{session}/message")).await;
    mock.post(&format!("/session/{session}/unrevert"), json!({}))
        .await;

    let journal = mock.journal();
    let calls: Vec<(&str, Option<&str>, &str)> = journal
        .iter()
        .map(|e| (e.call.as_str(), e.target.as_deref(), e.outcome.as_str()))
        .collect();
    let s = Some(session.as_str());
    assert_eq!(
        calls,
        [
            ("process/start", None, "ok"),
            ("POST /session", s, "ok"),
            ("POST /session/{id}/message", s, "ok"),
            ("POST /session/{id}/revert", s, "ok"),
            ("GET /session/{id}", s, "ok"),
            ("GET /session/{id}/message", s, "ok"),
            ("POST /session/{id}/unrevert", s, "ok"),
        ]
    );
    assert_eq!(
        journal[2].request,
        json!({ "parts": [{ "type": "text", "text": "hi" }] })
    );
    assert_eq!(journal[3].request, json!({ "messageID": user }));
    assert_eq!(journal[4].request, Value::Null);
    assert!(journal.iter().all(|e| e.runtime == "opencode"));
}

#[tokio::test]
async fn bad_arguments_and_configurations_fail_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(PROGRAM)
        .args(["serve", "--port", "notaport"])
        .env("XDG_DATA_HOME", dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--port"));
    let journal = read_journal(&journal_file(dir.path())).unwrap();
    assert_eq!(journal[0].call, "process/start");
    assert_eq!(journal[0].outcome, "error");

    std::fs::write(dir.path().join("opencode.json"), "{ broken").unwrap();
    let err = ServerProcess::start(Path::new(PROGRAM), &[], dir.path(), dir.path())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("ConfigJsonError"), "{err}");
}

// ---- live delivery: replies, the delivery witness, faults on prompts ----

fn part_types(message: &Value) -> Vec<String> {
    message["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["type"].as_str().unwrap().to_owned())
        .collect()
}

fn prompt_calls(mock: &Mock) -> Vec<JournalEntry> {
    mock.journal()
        .into_iter()
        .filter(|e| e.call == "POST /session/{id}/message")
        .collect()
}

#[tokio::test]
async fn text_parts_are_one_input_and_an_empty_reply_has_no_text_part() {
    let mock = start_context_only().await;
    let session = mock.create().await;
    let (status, reply) = mock
        .post(
            &format!("/session/{session}/message"),
            json!({ "parts": [
                { "type": "text", "text": "first" },
                { "type": "file", "mime": "text/plain", "url": "file:///x" },
                { "type": "text", "text": "second" },
            ] }),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(part_types(&reply), ["step-start", "text", "step-finish"]);
    assert_eq!(reply["parts"][1]["text"], "Mock reply to: first\nsecond");

    let long = "z".repeat(400);
    let reply = mock.prompt(&session, None, &long).await;
    assert_eq!(reply["parts"][1]["text"], format!("Mock reply to: {long}"));

    let silent = mock.prompt(&session, None, "[no reply] please").await;
    assert_eq!(silent["info"]["role"], "assistant");
    assert_eq!(silent["info"]["finish"], "stop");
    assert_eq!(part_types(&silent), ["step-start", "step-finish"]);
    let messages = mock.messages(&session).await;
    assert_eq!(messages.len(), 6);
    assert_eq!(messages[5]["info"]["id"], silent["info"]["id"]);
    assert_eq!(
        messages[5]["info"]["parentID"], messages[4]["info"]["id"],
        "the user message is kept and answered"
    );
    assert_eq!(part_types(&messages[5]), ["step-start", "step-finish"]);
}

#[tokio::test]
async fn the_witness_sees_each_prompt_before_it_is_stored() {
    let data_home: std::sync::Arc<std::sync::Mutex<Option<PathBuf>>> = Default::default();
    let home = std::sync::Arc::clone(&data_home);
    // At the moment of each request, the message ids the mock has stored for the session.
    let witness = WitnessServer::start_with(Answer::Witness, move |request| {
        let home = home.lock().unwrap().clone().unwrap();
        match read_session(&home, &request.target).unwrap() {
            Some(state) => json!(state.message_ids()),
            None => Value::Null,
        }
    });
    let mock = start_witnessed(witness.url()).await;
    *data_home.lock().unwrap() = Some(mock.data_home.clone());
    let session = mock.create().await;
    assert!(witness.requests().is_empty(), "creation delivers nothing");

    let chosen =
        rewind_mock_runtimes::opencode::new_id(rewind_mock_runtimes::opencode::IdKind::Message);
    let first = mock.prompt(&session, Some(&chosen), "first").await;
    let second = mock.prompt(&session, None, "second").await;
    let ids = mock.message_ids(&session).await;
    assert_eq!(ids.len(), 4);
    assert_eq!(ids[0], chosen);
    assert_eq!(first["info"]["parentID"], json!(chosen));

    let seen = witness.seen();
    assert_eq!(seen.len(), 2, "one request per prompt");
    assert_eq!(seen[0].request.runtime, "opencode");
    assert_eq!(seen[0].request.target, session);
    assert_eq!(seen[0].request.input, "first");
    assert_eq!(
        seen[0].request.before,
        json!({ "sessionId": session, "messageId": chosen, "messageIds": [] })
    );
    assert_eq!(seen[0].hook, json!([]));
    // A generated user message id is announced before it exists.
    assert_eq!(second["info"]["parentID"], json!(ids[2]));
    assert_eq!(
        seen[1].request.before,
        json!({ "sessionId": session, "messageId": ids[2], "messageIds": ids[..2] })
    );
    assert_eq!(
        seen[1].hook,
        json!(ids[..2]),
        "not stored while the witness looked"
    );

    // After a revert, the messages the next prompt deletes are not effective any more.
    let (status, _) = mock.revert(&session, &ids[2]).await;
    assert_eq!(status, 200);
    assert_eq!(witness.requests().len(), 2, "a revert delivers nothing");
    let third = mock.prompt(&session, None, "instead").await;
    let seen = witness.seen();
    assert_eq!(seen.len(), 3);
    let user3 = third["info"]["parentID"].as_str().unwrap();
    assert_eq!(
        seen[2].request.before,
        json!({ "sessionId": session, "messageId": user3, "messageIds": ids[..2] })
    );
    assert_eq!(
        seen[2].hook,
        json!(ids),
        "the revert was not cleaned up yet"
    );
    assert_eq!(
        mock.message_ids(&session).await,
        [
            ids[0].as_str(),
            ids[1].as_str(),
            user3,
            third["info"]["id"].as_str().unwrap()
        ]
    );

    let numbers: Vec<Option<u64>> = prompt_calls(&mock).iter().map(|e| e.witness).collect();
    assert_eq!(
        numbers,
        [
            Some(FIRST_WITNESS),
            Some(FIRST_WITNESS + 1),
            Some(FIRST_WITNESS + 2)
        ]
    );
    assert!(mock
        .journal()
        .iter()
        .filter(|e| e.call != "POST /session/{id}/message")
        .all(|e| e.witness.is_none()));
}

#[tokio::test]
async fn a_failing_witness_fails_the_prompt_and_changes_nothing() {
    let broken = WitnessServer::start_with(Answer::ServerError, |_| Value::Null);
    for url in [unreachable_url(), broken.url().to_owned()] {
        let mock = start_witnessed(&url).await;
        let session = mock.create().await;
        // Seed a conversation without the witness, then revert it: the failed prompt must
        // neither store a message nor clean up the pending revert.
        seed_sessions(
            &mock.data_home,
            &[SeedSession {
                session_id: session.clone(),
                messages: vec![
                    SeedMessage {
                        id: "msg_000000000001aaaaaaaaaaaaaa".into(),
                        role: "user".into(),
                        text: "one".into(),
                    },
                    SeedMessage {
                        id: "msg_000000000002aaaaaaaaaaaaaa".into(),
                        role: "assistant".into(),
                        text: "reply".into(),
                    },
                ],
            }],
        )
        .unwrap();
        let (status, _) = mock
            .revert(&session, "msg_000000000001aaaaaaaaaaaaaa")
            .await;
        assert_eq!(status, 200);
        let before = read_session(&mock.data_home, &session).unwrap().unwrap();
        let (status, body) = mock
            .post(
                &format!("/session/{session}/message"),
                json!({ "parts": [{ "type": "text", "text": "lost" }] }),
            )
            .await;
        assert_eq!(status, 500, "{body}");
        assert_eq!(body["name"], "UnknownError");
        let message = body["data"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("delivery witness failed: "),
            "{message}"
        );
        assert_eq!(
            read_session(&mock.data_home, &session).unwrap().unwrap(),
            before
        );
        let call = prompt_calls(&mock).pop().unwrap();
        assert_eq!(call.outcome, "error");
        assert_eq!(call.witness, None);
        assert!(call.detail.unwrap().contains("delivery witness failed: "));
    }
    assert_eq!(broken.requests().len(), 1);
}

#[tokio::test]
async fn a_faulted_prompt_never_reaches_the_witness_and_stores_nothing() {
    let witness = WitnessServer::start();
    let mut mock = start_witnessed(witness.url()).await;
    let session = mock.create().await;
    mock.prompt(&session, None, "first").await;
    let ids = mock.message_ids(&session).await;
    assert_eq!(witness.requests().len(), 1);
    let body = json!({ "parts": [{ "type": "text", "text": "faulted" }] });
    let path = format!("/session/{session}/message");

    mock.set_faults(vec![rule(&session, "message", FaultKind::Error, None)]);
    let (status, answer) = mock.post(&path, body.clone()).await;
    assert_eq!(status, 500);
    assert_eq!(answer["name"], "UnknownError");
    mock.set_faults(vec![rule(&session, "message", FaultKind::Busy, None)]);
    assert_eq!(mock.post(&path, body.clone()).await.0, 409);
    mock.set_faults(vec![rule(&session, "message", FaultKind::NoEffect, None)]);
    assert_eq!(mock.post(&path, body.clone()).await.0, 200);
    mock.set_faults(vec![rule(&session, "message", FaultKind::Hang, None)]);
    let hung = mock
        .http
        .post(mock.url(&path))
        .json(&body)
        .timeout(Duration::from_millis(300))
        .send()
        .await;
    assert!(hung.unwrap_err().is_timeout());
    assert_eq!(mock.message_ids(&session).await, ids);

    mock.set_faults(vec![rule(&session, "message", FaultKind::Crash, None)]);
    assert!(mock
        .http
        .post(mock.url(&path))
        .json(&body)
        .send()
        .await
        .is_err());
    let status = mock
        .server
        .wait_exit(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the server exits");
    assert_eq!(status.code(), Some(134));
    assert_eq!(
        read_session(&mock.data_home, &session)
            .unwrap()
            .unwrap()
            .message_ids(),
        ids.iter().map(String::as_str).collect::<Vec<_>>()
    );

    assert_eq!(witness.requests().len(), 1, "no faulted call was witnessed");
    let outcomes: Vec<(String, Option<u64>)> = prompt_calls(&mock)
        .into_iter()
        .map(|e| (e.outcome, e.witness))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("ok".to_owned(), Some(FIRST_WITNESS)),
            ("fault:error".to_owned(), None),
            ("fault:busy".to_owned(), None),
            ("fault:no_effect".to_owned(), None),
            ("fault:hang".to_owned(), None),
            ("fault:crash".to_owned(), None),
        ]
    );
}

/// Observed on the real server: while a prompt of a session runs, `revert` and `unrevert` of
/// that session answer 409 `SessionBusyError`; other sessions and reads are not affected, and
/// once the prompt has been answered the session reverts again. A slow model is a `hang_ms`
/// fault on `message` here.
#[tokio::test]
async fn a_running_prompt_makes_revert_and_unrevert_busy() {
    let mock = start_context_only().await;
    let (session, ids) = mock.conversation().await;
    let other = mock.create().await;
    mock.set_faults(vec![rule(&session, "message", FaultKind::Hang, Some(700))]);
    let url = mock.url(&format!("/session/{session}/message"));
    let http = mock.http.clone();
    let running = tokio::spawn(async move {
        http.post(url)
            .json(&json!({ "parts": [{ "type": "text", "text": "a slow question" }] }))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    });
    // The prompt is running once its call is journaled.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !mock
        .journal()
        .iter()
        .any(|e| e.call == "POST /session/{id}/message" && e.outcome == "fault:hang")
    {
        assert!(Instant::now() < deadline, "the prompt never arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let busy = json!({
        "_tag": "SessionBusyError",
        "sessionID": session,
        "message": format!("Session is busy: {session}"),
    });
    assert_eq!(mock.revert(&session, &ids[2]).await, (409, busy.clone()));
    assert_eq!(
        mock.post(&format!("/session/{session}/unrevert"), json!({}))
            .await,
        (409, busy)
    );
    assert!(
        mock.session(&session).await.get("revert").is_none(),
        "nothing reverted"
    );
    assert_eq!(
        mock.get(&format!("/session/{session}/message")).await.0,
        200
    );
    mock.prompt(&other, None, "another session").await;
    assert_eq!(
        mock.revert(&other, &ids[0]).await.0,
        200,
        "other sessions are not busy"
    );

    assert_eq!(running.await.unwrap(), 200);
    let (status, info) = mock.revert(&session, &ids[2]).await;
    assert_eq!(status, 200, "{info}");
    assert_eq!(info["revert"]["messageID"], json!(ids[2]));
}
