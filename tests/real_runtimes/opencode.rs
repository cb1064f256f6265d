//! OpenCode server: the mock and the real server (1.18.33, and the current release: 1.18.34, or
//! the newest under `REWIND_REAL_RELEASES=latest`) sent the same HTTP calls (session create, a
//! prompt with a chosen `messageID`, message list, revert, unrevert, the cleanup by the next
//! prompt, busy and unknown sessions), comparing status codes and bodies.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use rewind_mock_runtimes::faults::{FaultKind, FaultPlan, FaultRule};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::compare::{Comparison, Normaliser};
use crate::fake_models::{Api, FakeModel};
use crate::install;
use crate::{isolated_env, tempdir};

/// How long the server may take to print its listening line.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a slow prompt takes (the busy cases).
const SLOW: Duration = Duration::from_secs(4);

/// One side's running OpenCode server.
pub struct OpenCodeEnv {
    pub base_url: String,
    pub root: tempfile::TempDir,
    /// The runtime home (`$XDG_DATA_HOME/opencode`), where the mock reads its fault plan.
    pub home: PathBuf,
    child: Child,
    http: reqwest::Client,
    /// The fake model (real side only).
    pub model: Option<FakeModel>,
}

impl OpenCodeEnv {
    /// The real server against a fresh fake Chat Completions API.
    pub async fn real(release: install::Release) -> OpenCodeEnv {
        let program = release.program().unwrap_or_else(|e| panic!("{e}"));
        let model = FakeModel::start(Api::ChatCompletions).await;
        let mut env = OpenCodeEnv::start(program, tempdir("real-opencode"), &model.base_v1()).await;
        env.model = Some(model);
        env
    }

    /// The mock server.
    pub async fn mock() -> OpenCodeEnv {
        OpenCodeEnv::start(
            crate::mock_program("opencode"),
            tempdir("mock-opencode"),
            "http://127.0.0.1:9/v1",
        )
        .await
    }

    async fn start(program: PathBuf, root: tempfile::TempDir, model_url: &str) -> OpenCodeEnv {
        let cwd = root.path().join("work");
        std::fs::create_dir_all(&cwd).expect("work dir");
        std::fs::write(
            cwd.join("opencode.json"),
            rewind_conformance::real::opencode::config(model_url, false),
        )
        .expect("opencode.json");
        let mut env = isolated_env(root.path(), &[]);
        for (k, v) in [
            ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
            ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
            ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"),
            ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
            ("OPENCODE_DISABLE_SHARE", "1"),
        ] {
            env.push((k.to_owned(), v.to_owned()));
        }
        let home = root.path().join("xdg/data/opencode");
        // `serve --port 0` listens on 4096: a free port is chosen here.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut child = Command::new(&program)
            .args([
                "serve",
                "--port",
                &port.to_string(),
                "--hostname",
                "127.0.0.1",
            ])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(&cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let base_url = tokio::time::timeout(START_TIMEOUT, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(at) = line.find("listening on ") {
                    return line[at + "listening on ".len()..].trim().to_owned();
                }
            }
            panic!("{} closed stdout before listening", program.display())
        })
        .await
        .unwrap_or_else(|_| panic!("{} printed no listening line", program.display()));
        // Keep draining stdout so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        OpenCodeEnv {
            base_url: base_url.trim_end_matches('/').to_owned(),
            root,
            home,
            child,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .expect("client"),
            model: None,
        }
    }

    /// The settings the reference takes.
    pub fn settings(&self) -> rewind_reference::runtimes::OpenCodeSettings {
        rewind_reference::runtimes::OpenCodeSettings {
            base_url: self.base_url.clone(),
        }
    }

    pub fn normaliser(&self) -> Normaliser {
        Normaliser::new(&[(self.root.path(), "<tmp>")])
    }

    /// `{status, body}` of one call (`body` parsed as JSON, else the text).
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{}", self.base_url, path);
        let request = match method {
            "GET" => self.http.get(url),
            _ => self.http.post(url),
        };
        let request = match body {
            Some(b) => request
                .header("content-type", "application/json")
                .body(b.to_string()),
            None => request,
        };
        let response = request
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        json!({"status": status, "body": body})
    }

    /// Makes the model (real) or the mock's prompt route (a `hang_ms` fault on `message` for
    /// `session`) slow, or fast again.
    pub fn slow(&self, session: &str, slow: bool) {
        match &self.model {
            Some(model) => model.set_delay(if slow { SLOW } else { Duration::ZERO }),
            None => {
                let plan = FaultPlan {
                    rules: if slow {
                        vec![FaultRule {
                            target: session.to_owned(),
                            call: Some("message".to_owned()),
                            kind: FaultKind::Hang,
                            hang_ms: Some(SLOW.as_millis() as u64),
                        }]
                    } else {
                        Vec::new()
                    },
                };
                let path = rewind_mock_runtimes::faults_path(&self.home);
                std::fs::create_dir_all(path.parent().expect("dir")).expect("fault dir");
                plan.save(&path).expect("saving the fault plan");
            }
        }
    }

    /// Stops the server.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// A message id for the next prompt of a session whose messages are `existing`.
fn next_id(existing: &Value) -> String {
    let ids: Vec<String> = existing["body"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter_map(|m| m.pointer("/info/id").and_then(Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let now = chrono::Utc::now().timestamp_millis();
    rewind_reference::runtimes::opencode::next_message_id(ids.iter().map(String::as_str), now)
}

fn prompt(message_id: &str, text: &str) -> Value {
    json!({"messageID": message_id, "parts": [{"type": "text", "text": text}]})
}

/// The whole sequence on one side.
async fn sequence(env: &OpenCodeEnv) -> Vec<(String, Value)> {
    let mut steps: Vec<(String, Value)> = Vec::new();
    steps.push((
        "GET /global/health".into(),
        env.call("GET", "/global/health", None).await,
    ));
    let created = env.call("POST", "/session", Some(json!({}))).await;
    let s = created["body"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no session id in {created}"))
        .to_owned();
    steps.push(("POST /session".into(), created));
    let session = format!("/session/{s}");

    let listed = env.call("GET", &format!("{session}/message"), None).await;
    let m1 = next_id(&listed);
    let answer = env
        .call(
            "POST",
            &format!("{session}/message"),
            Some(prompt(&m1, "first question")),
        )
        .await;
    steps.push(("prompt 1 with messageID".into(), answer));
    let listed = env.call("GET", &format!("{session}/message"), None).await;
    let m2 = next_id(&listed);
    let answer = env
        .call(
            "POST",
            &format!("{session}/message"),
            Some(prompt(&m2, "second question")),
        )
        .await;
    steps.push(("prompt 2 with messageID".into(), answer));
    let listed = env.call("GET", &format!("{session}/message"), None).await;
    steps.push(("GET messages (2 prompts)".into(), listed.clone()));
    let bad = env
        .call(
            "POST",
            &format!("{session}/message"),
            Some(prompt("x", "bad id")),
        )
        .await;
    steps.push(("prompt with a bad messageID".into(), bad));

    let reverted = env
        .call(
            "POST",
            &format!("{session}/revert"),
            Some(json!({"messageID": m2})),
        )
        .await;
    steps.push(("revert to prompt 2".into(), reverted));
    steps.push((
        "GET session after revert".into(),
        env.call("GET", &session, None).await,
    ));
    steps.push((
        "GET messages after revert".into(),
        env.call("GET", &format!("{session}/message"), None).await,
    ));
    let unreverted = env
        .call("POST", &format!("{session}/unrevert"), Some(json!({})))
        .await;
    steps.push(("unrevert".into(), unreverted));
    let again = env
        .call("POST", &format!("{session}/unrevert"), Some(json!({})))
        .await;
    steps.push(("unrevert with nothing reverted".into(), again));
    env.call(
        "POST",
        &format!("{session}/revert"),
        Some(json!({"messageID": m2})),
    )
    .await;
    let listed = env.call("GET", &format!("{session}/message"), None).await;
    let m3 = next_id(&listed);
    let answer = env
        .call(
            "POST",
            &format!("{session}/message"),
            Some(prompt(&m3, "third question")),
        )
        .await;
    steps.push(("prompt after revert".into(), answer));
    steps.push((
        "GET session after the cleanup".into(),
        env.call("GET", &session, None).await,
    ));
    steps.push((
        "GET messages after the cleanup".into(),
        env.call("GET", &format!("{session}/message"), None).await,
    ));

    // Reverting to an assistant message, to an unknown id, without an id.
    let listed = env.call("GET", &format!("{session}/message"), None).await;
    let assistant = listed["body"]
        .as_array()
        .and_then(|m| {
            m.iter()
                .rfind(|m| m.pointer("/info/role") == Some(&json!("assistant")))
        })
        .and_then(|m| m.pointer("/info/id"))
        .cloned()
        .unwrap_or(Value::Null);
    let at_assistant = env
        .call(
            "POST",
            &format!("{session}/revert"),
            Some(json!({"messageID": assistant})),
        )
        .await;
    steps.push(("revert to an assistant message".into(), at_assistant));
    env.call("POST", &format!("{session}/unrevert"), Some(json!({})))
        .await;
    let unknown_msg = format!("msg_{}", "0".repeat(26));
    steps.push((
        "revert to an unknown message id".into(),
        env.call(
            "POST",
            &format!("{session}/revert"),
            Some(json!({"messageID": unknown_msg})),
        )
        .await,
    ));
    steps.push((
        "revert without messageID".into(),
        env.call("POST", &format!("{session}/revert"), Some(json!({})))
            .await,
    ));

    // Unknown sessions.
    let ghost = format!("/session/ses_{}", "Z".repeat(26));
    steps.push((
        "GET unknown session".into(),
        env.call("GET", &ghost, None).await,
    ));
    steps.push((
        "revert unknown session".into(),
        env.call(
            "POST",
            &format!("{ghost}/revert"),
            Some(json!({"messageID": m1})),
        )
        .await,
    ));
    steps.push((
        "GET messages of an unknown session".into(),
        env.call("GET", &format!("{ghost}/message"), None).await,
    ));
    steps.push((
        "GET session id without the ses prefix".into(),
        env.call("GET", "/session/not-a-session", None).await,
    ));

    // Busy: a prompt still running.
    env.slow(&s, true);
    let listed = env.call("GET", &format!("{session}/message"), None).await;
    let m4 = next_id(&listed);
    let url = format!("{}{session}/message", env.base_url);
    let body = prompt(&m4, "slow question");
    let http = env.http.clone();
    let running = tokio::spawn(async move {
        let response = http
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("slow prompt");
        response.status().as_u16()
    });
    tokio::time::sleep(Duration::from_millis(800)).await;
    steps.push((
        "revert while a prompt runs".into(),
        env.call(
            "POST",
            &format!("{session}/revert"),
            Some(json!({"messageID": m2})),
        )
        .await,
    ));
    steps.push((
        "unrevert while a prompt runs".into(),
        env.call("POST", &format!("{session}/unrevert"), Some(json!({})))
            .await,
    ));
    let status = running.await.expect("slow prompt task");
    env.slow(&s, false);
    steps.push(("the slow prompt's status".into(), json!(status)));
    steps.push((
        "GET messages at the end".into(),
        env.call("GET", &format!("{session}/message"), None).await,
    ));
    steps
}

/// The real server of `checked` and the mock answer alike.
async fn differential(checked: install::Checked) {
    let _naming = checked.naming_failures("opencode differential");
    let real = OpenCodeEnv::real(checked.real.clone()).await;
    let mock = OpenCodeEnv::mock().await;
    let real_steps = sequence(&real).await;
    let mock_steps = sequence(&mock).await;
    let mut cmp = Comparison::new(mock.normaliser(), real.normaliser());
    cmp.steps(mock_steps, real_steps);
    real.stop().await;
    mock.stop().await;
    cmp.assert_same(&checked.label());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_mock_matches_real() {
    differential(install::Checked::pinned(install::OPENCODE)).await;
}

/// OpenCode 1.18.34, or the newest release under `REWIND_REAL_RELEASES=latest`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_current_mock_matches_real() {
    differential(install::Checked::current(install::OPENCODE_11834)).await;
}
