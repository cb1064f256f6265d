//! The mock Claude Code CLI driven as a process, the way a daemon drives the real one: real
//! flags, stream-json on stdin and stdout, transcripts and journal read back from files.
//!
//! The tests imitate Claude Code 2.1.197 unless they say otherwise ([`Env::release`]); what
//! 2.1.332 does differently has tests of its own at the end.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use rewind_mock_runtimes::claude::{
    live_chain, live_leaf, project_slug, seed_session, transcript_path, ChainEntry, SeedEntry,
    SeedSession, VERSION_ENV,
};
use rewind_mock_runtimes::faults::{FaultKind, FaultPlan, FaultRule};
use rewind_mock_runtimes::journal::{read_journal, JournalEntry};
use rewind_mock_runtimes::witness::WITNESS_ENV;
use serde_json::{json, Value};

mod support;
use support::{unreachable_url, WitnessServer, FIRST_WITNESS};

const SESSION: &str = "5e55a000-0000-4000-8000-000000000001";
const U1: &str = "00000000-0000-4000-8000-0000000000a1";
const A1: &str = "00000000-0000-4000-8000-0000000000b1";
const U2: &str = "00000000-0000-4000-8000-0000000000a2";
const A2: &str = "00000000-0000-4000-8000-0000000000b2";

/// A config dir, a working directory and the release imitated.
struct Env {
    config: tempfile::TempDir,
    cwd: tempfile::TempDir,
    release: &'static str,
}

impl Env {
    fn new() -> Env {
        Env::release("2.1.197")
    }

    /// An environment whose runs imitate `release`.
    fn release(release: &'static str) -> Env {
        Env {
            config: tempfile::tempdir().unwrap(),
            cwd: tempfile::tempdir().unwrap(),
            release,
        }
    }

    fn config(&self) -> &Path {
        self.config.path()
    }

    fn cwd(&self) -> &Path {
        self.cwd.path()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mock-claude"));
        cmd.args(args)
            .current_dir(self.cwd())
            .env("CLAUDE_CONFIG_DIR", self.config())
            .env(VERSION_ENV, self.release)
            .env_remove("IS_SANDBOX")
            .env_remove(WITNESS_ENV)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Runs the CLI with `stdin` written then closed.
    fn run(&self, args: &[&str], stdin: &[String]) -> Output {
        self.run_witnessed(args, stdin, None)
    }

    /// [`run`](Self::run) with the delivery witness at `witness` (when given).
    fn run_witnessed(&self, args: &[&str], stdin: &[String], witness: Option<&str>) -> Output {
        let mut command = self.command(args);
        if let Some(url) = witness {
            command.env(WITNESS_ENV, url);
        }
        let mut child = command.stdin(Stdio::piped()).spawn().unwrap();
        let mut input = child.stdin.take().unwrap();
        for line in stdin {
            // A run that fails early closes its stdin: the exit status and stderr tell why.
            if writeln!(input, "{line}").is_err() {
                break;
            }
        }
        drop(input);
        child.wait_with_output().unwrap()
    }

    /// Seeds the session `u1 a1 u2 a2`.
    fn seed(&self) {
        let entries = [
            (U1, "user", "one"),
            (A1, "assistant", "reply one"),
            (U2, "user", "two"),
            (A2, "assistant", "reply two"),
        ]
        .iter()
        .map(|(uuid, role, text)| SeedEntry {
            uuid: uuid.to_string(),
            role: role.to_string(),
            text: text.to_string(),
        })
        .collect();
        seed_session(
            self.config(),
            &SeedSession {
                session_id: SESSION.into(),
                cwd: self.cwd().to_path_buf(),
                entries,
            },
        )
        .unwrap();
    }

    fn chain(&self, session: &str) -> Vec<ChainEntry> {
        live_chain(self.config(), self.cwd(), session)
            .unwrap()
            .expect("a transcript")
    }

    fn uuids(&self, session: &str) -> Vec<String> {
        self.chain(session).into_iter().map(|e| e.uuid).collect()
    }

    fn transcript(&self, session: &str) -> PathBuf {
        transcript_path(self.config(), self.cwd(), session)
    }

    fn journal(&self) -> Vec<JournalEntry> {
        read_journal(&rewind_mock_runtimes::journal_path(self.config())).unwrap()
    }

    fn fault(&self, call: &str, kind: FaultKind, hang_ms: Option<u64>) {
        FaultPlan {
            rules: vec![FaultRule {
                target: SESSION.into(),
                call: Some(call.into()),
                kind,
                hang_ms,
            }],
        }
        .save(&rewind_mock_runtimes::faults_path(self.config()))
        .unwrap();
    }
}

const STREAM: [&str; 3] = [
    "--output-format=stream-json",
    "--input-format=stream-json",
    "--verbose",
];

fn user(text: &str, uuid: Option<&str>) -> String {
    let mut message = json!({
        "type": "user",
        "message": {"role": "user", "content": [{"type": "text", "text": text}]},
        "parent_tool_use_id": null,
        "session_id": "",
    });
    if let Some(uuid) = uuid {
        message["uuid"] = json!(uuid);
    }
    message.to_string()
}

fn stdout_lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn of_type<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == kind).collect()
}

/// The reference's restore command line.
fn restore_args(session: &str, boundary: &str) -> Vec<String> {
    let mut args: Vec<String> = STREAM.iter().map(|s| s.to_string()).collect();
    args.push(format!("--resume={session}"));
    args.push(format!("--resume-session-at={boundary}"));
    args
}

fn restore(env: &Env, session: &str, boundary: &str) -> Output {
    let args = restore_args(session, boundary);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    env.command(&args).stdin(Stdio::null()).output().unwrap()
}

fn strs(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_new_session_answers_in_stream_json_and_keeps_a_chained_transcript() {
    let env = Env::new();
    let given = "00000000-0000-4000-8000-00000000c0de";
    let mut args = STREAM.to_vec();
    let session_arg = format!("--session-id={SESSION}");
    args.push(&session_arg);
    args.extend(["--model", "claude-test", "--permission-mode=acceptEdits"]);
    let out = env.run(&args, &[user("hello", Some(given)), user("again", None)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = stdout_lines(&out);
    assert_eq!(lines[0]["type"], "system");
    assert_eq!(lines[0]["subtype"], "init");
    assert_eq!(lines[0]["session_id"], SESSION);
    assert_eq!(lines[0]["model"], "claude-test");
    assert_eq!(lines[0]["permissionMode"], "acceptEdits");
    let assistants = of_type(&lines, "assistant");
    let results = of_type(&lines, "result");
    assert_eq!(assistants.len(), 2);
    assert_eq!(results.len(), 2);
    assert!(assistants
        .iter()
        .all(|a| a["uuid"].is_string() && a["session_id"] == SESSION));
    // The streamed message has no stop reason yet, as on the real CLI.
    assert!(assistants
        .iter()
        .all(|a| a["message"]["stop_reason"].is_null()));
    assert_eq!(results[1]["subtype"], "success");
    assert_eq!(results[1]["is_error"], false);
    assert_eq!(results[1]["num_turns"], 2);
    assert_eq!(results[1]["session_id"], SESSION);
    assert_eq!(lines.last().unwrap()["type"], "result");

    let path = env.transcript(SESSION);
    let slug = project_slug(&std::fs::canonicalize(env.cwd()).unwrap());
    assert!(
        path.ends_with(format!("{slug}/{SESSION}.jsonl")),
        "{}",
        path.display()
    );
    assert!(!slug.contains('/') && !slug.contains('.') && !slug.contains('_'));
    let chain = env.chain(SESSION);
    let roles: Vec<_> = chain.iter().map(|e| e.role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(chain[0].uuid, given, "a uuid given on stdin is kept");
    assert_eq!(chain[0].text, "hello");
    assert_eq!(chain[1].uuid, assistants[0]["uuid"]);
    assert_eq!(
        chain[2].parent_uuid.as_deref(),
        Some(chain[1].uuid.as_str())
    );

    // The raw transcript: chain entries with the real fields, and a leaf marker.
    let text = std::fs::read_to_string(&path).unwrap();
    let raw: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let entry = raw.iter().find(|l| l["uuid"] == given).unwrap();
    for field in [
        "parentUuid",
        "sessionId",
        "type",
        "timestamp",
        "message",
        "cwd",
    ] {
        assert!(
            entry.get(field).is_some(),
            "user entry lacks {field}: {entry}"
        );
    }
    // As the real CLI: the first turn's attachments follow its user entry, on the chain to
    // the answer; the second turn has none, and a `mode` record follows it.
    assert_eq!(entry["parentUuid"], Value::Null);
    let kinds: Vec<&str> = raw
        .iter()
        .filter(|l| l["type"] == "attachment")
        .map(|l| l["attachment"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["agent_listing_delta", "skill_listing"]);
    let first_attachment = raw.iter().find(|l| l["type"] == "attachment").unwrap();
    assert_eq!(first_attachment["parentUuid"], given);
    let answer = raw.iter().find(|l| l["uuid"] == chain[1].uuid).unwrap();
    let parent = answer["parentUuid"].as_str().unwrap();
    let attachment = raw.iter().find(|l| l["uuid"] == parent).unwrap();
    assert_eq!(
        attachment["type"], "attachment",
        "the first answer's parent is the last attachment"
    );
    assert_eq!(
        chain[3].parent_uuid.as_deref(),
        Some(chain[2].uuid.as_str())
    );
    assert_eq!(
        raw.iter().filter(|l| l["type"] == "mode").count(),
        1,
        "one mode record after the second turn"
    );
    assert_eq!(raw.last().unwrap()["type"], "mode");
    let marker = raw
        .iter()
        .rev()
        .find(|l| l["type"] == "last-prompt")
        .unwrap();
    assert_eq!(marker["leafUuid"], chain[3].uuid);

    // The journal: process/start with the argv, then the run with argv and stdin.
    let journal = env.journal();
    assert_eq!(journal[0].call, "process/start");
    assert_eq!(journal[0].request, json!(args));
    assert_eq!(journal[1].call, "claude --session-id");
    assert_eq!(journal[1].target.as_deref(), Some(SESSION));
    assert_eq!(journal[1].outcome, "ok");
    assert_eq!(journal[1].request["argv"], json!(args));
    assert_eq!(journal[1].request["stdin"].as_array().unwrap().len(), 2);
    assert_eq!(journal[1].request["stdin"][0]["uuid"], given);

    // The session id is now in use.
    let again = env.run(&args, &[user("x", None)]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains(&format!("Session ID {SESSION} is already in use.")),
        "{}",
        stderr(&again)
    );
    assert_eq!(env.journal().last().unwrap().outcome, "error");
}

#[test]
fn text_and_json_print_modes_answer_a_positional_prompt() {
    let env = Env::new();
    let out = env.run(&["-p", "--output-format", "json", "hi there"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["type"], "result");
    let session = lines[0]["session_id"].as_str().unwrap().to_owned();
    assert_eq!(env.chain(&session).len(), 2);
    let out = env.run(&["-p"], &["from stdin".to_owned()]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("from stdin"));
    let out = env.run(&["-p"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("Input must be provided"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["-p", "--output-format=stream-json", "x"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--output-format=stream-json requires --verbose"));
    let out = env.run(&["--input-format=stream-json"], &[]);
    assert!(stderr(&out).contains("--input-format=stream-json requires output-format=stream-json."));
    let out = env.run(&["--version"], &[]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("(Claude Code)"));
}

#[test]
fn a_plain_resume_continues_the_chain_in_the_same_file() {
    let env = Env::new();
    env.seed();
    let mut args = STREAM.to_vec();
    args.push("--resume");
    args.push(SESSION);
    let out = env.run(&args, &[user("three", None)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = stdout_lines(&out);
    assert_eq!(lines[0]["session_id"], SESSION);
    let chain = env.chain(SESSION);
    assert_eq!(chain.len(), 6);
    assert_eq!(chain[4].parent_uuid.as_deref(), Some(A2));
    assert_eq!(chain[4].text, "three");
    let files = std::fs::read_dir(env.transcript(SESSION).parent().unwrap())
        .unwrap()
        .count();
    assert_eq!(files, 1);
    let journal = env.journal();
    assert_eq!(journal.last().unwrap().call, "claude --resume");
    assert_eq!(journal.last().unwrap().target.as_deref(), Some(SESSION));
}

#[test]
fn a_restore_without_prompt_validates_the_boundary_and_changes_nothing() {
    let env = Env::new();
    env.seed();
    let before = std::fs::read_to_string(env.transcript(SESSION)).unwrap();
    // As the real CLI 2.1.197: exit 0, nothing at all on stdout or stderr, nothing written.
    let out = restore(&env, SESSION, A1);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(stderr(&out), "");
    let after = std::fs::read_to_string(env.transcript(SESSION)).unwrap();
    assert_eq!(after, before, "a restore without a prompt writes nothing");
    assert_eq!(env.uuids(SESSION), [U1, A1, U2, A2]);

    let journal = env.journal();
    let call = journal.last().unwrap();
    assert_eq!(call.call, "claude --resume-session-at");
    assert_eq!(call.target.as_deref(), Some(SESSION));
    assert_eq!(call.outcome, "ok");
    assert!(!call.request["argv"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a.as_str().unwrap().contains("rewind-files")));

    // So a later plain resume continues from the old leaf: the rewind is lost.
    let mut args = STREAM.to_vec();
    let resume = format!("--resume={SESSION}");
    args.push(&resume);
    let out = env.run(&args, &[user("after the restore", None)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let chain = env.chain(SESSION);
    assert_eq!(chain.len(), 6);
    assert_eq!(chain[4].parent_uuid.as_deref(), Some(A2));

    // The boundary is still validated: an unknown uuid fails as before.
    let unknown = "00000000-0000-4000-8000-0000000000ff";
    let out = restore(&env, SESSION, unknown);
    assert_eq!(out.status.code(), Some(1));
    let lines = stdout_lines(&out);
    assert_eq!(
        lines[0]["errors"][0],
        format!("No message found with message.uuid of: {unknown}")
    );
}

#[test]
fn the_boundary_takes_effect_with_the_next_prompt_and_later_resumes_follow_it() {
    let env = Env::new();
    env.seed();
    let args = restore_args(SESSION, A1);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = env.run(&args, &[user("instead of two", None)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout_lines(&out)[0]["subtype"], "init");
    let chain = env.chain(SESSION);
    assert_eq!(chain.len(), 4);
    assert_eq!(&env.uuids(SESSION)[..2], [U1, A1]);
    assert_eq!(chain[2].parent_uuid.as_deref(), Some(A1));
    assert_eq!(chain[2].text, "instead of two");

    // As the real CLI 2.1.197 (answered with distinct message ids): a later PLAIN resume
    // follows the newer branch (the newest leaf in the file); naming a leaf picks that one.
    let mut resume_args = STREAM.to_vec();
    let resume = format!("--resume={SESSION}");
    resume_args.push(&resume);
    let out = env.run(&resume_args, &[user("plain", None)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plain = env.chain(SESSION);
    assert_eq!(plain.len(), 6, "{plain:?}");
    assert_eq!(
        plain[4].parent_uuid.as_deref(),
        Some(chain[3].uuid.as_str()),
        "{plain:?}"
    );
    assert_eq!(plain[4].text, "plain");
    let at = format!("--resume-session-at={}", chain[3].uuid);
    let named = with(&STREAM, &[resume.as_str(), at.as_str()]);
    let out = env.run(&refs(&named), &[user("named", None)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let kept = env.chain(SESSION);
    assert_eq!(kept.len(), 6);
    assert_eq!(kept[4].parent_uuid.as_deref(), Some(chain[3].uuid.as_str()));
    assert_eq!(kept[4].text, "named");
    // Both branches stay in the file, but only an entry of the current branch (the one a plain
    // resume follows) can be named: the old branch's A2 is not found, as on the real CLI.
    let out = restore(&env, SESSION, A2);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("No message found with message.uuid of: {A2}")),
        "{}",
        stderr(&out)
    );
    let file = std::fs::read_to_string(env.transcript(SESSION)).unwrap();
    assert!(file.contains(A2), "the old branch stays on disk");
    let out = restore(&env, SESSION, A1);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_fork_copies_the_chain_into_a_new_session_and_leaves_the_source_alone() {
    let env = Env::new();
    env.seed();
    let source = std::fs::read(env.transcript(SESSION)).unwrap();
    let mut args = STREAM.to_vec();
    let resume = format!("--resume={SESSION}");
    args.extend([resume.as_str(), "--fork-session"]);
    let out = env.run(&args, &[user("forked", None)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = stdout_lines(&out);
    let forked = lines[0]["session_id"].as_str().unwrap().to_owned();
    assert_ne!(forked, SESSION);
    assert_eq!(of_type(&lines, "result")[0]["session_id"], forked.as_str());
    assert_eq!(std::fs::read(env.transcript(SESSION)).unwrap(), source);
    let uuids = env.uuids(&forked);
    assert_eq!(&uuids[..4], [U1, A1, U2, A2]);
    assert_eq!(uuids.len(), 6);
    let text = std::fs::read_to_string(env.transcript(&forked)).unwrap();
    assert!(text.lines().next().unwrap().contains("\"mode\""));
    assert!(!text.contains(&format!("\"sessionId\":\"{SESSION}\"")));
    assert_eq!(env.journal().last().unwrap().call, "claude --fork-session");

    // A mid-conversation fork with a chosen id.
    let chosen = "f0f0f0f0-0000-4000-8000-000000000002";
    let mut args = STREAM.to_vec();
    let at = format!("--resume-session-at={A1}");
    let id = format!("--session-id={chosen}");
    args.extend([resume.as_str(), at.as_str(), "--fork-session", id.as_str()]);
    let out = env.run(&args, &[user("branch", None)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout_lines(&out)[0]["session_id"], chosen);
    let chain = env.chain(chosen);
    assert_eq!(chain.len(), 4);
    assert_eq!(chain[1].uuid, A1);
    assert_eq!(chain[2].parent_uuid.as_deref(), Some(A1));
    assert_eq!(std::fs::read(env.transcript(SESSION)).unwrap(), source);
}

#[test]
fn the_real_errors_have_the_real_form() {
    let env = Env::new();
    env.seed();
    let unchanged = std::fs::read(env.transcript(SESSION)).unwrap();

    // --resume-session-at without --resume.
    let mut args = STREAM.to_vec();
    let at = format!("--resume-session-at={A1}");
    args.push(&at);
    let out = env.run(&args, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("Error: --resume-session-at requires --resume"));
    assert!(out.stdout.is_empty());

    // An unknown uuid: an error result, no init.
    let missing = "00000000-0000-4000-8000-0000000000ff";
    let out = restore(&env, SESSION, missing);
    assert_eq!(out.status.code(), Some(1));
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["type"], "result");
    assert_eq!(lines[0]["subtype"], "error_during_execution");
    assert_eq!(lines[0]["is_error"], true);
    assert_eq!(
        lines[0]["errors"],
        json!([format!("No message found with message.uuid of: {missing}")])
    );
    // As Claude Code 2.1.197: the message on stderr too, the result naming the session resumed.
    assert_eq!(
        stderr(&out).trim(),
        format!("No message found with message.uuid of: {missing}")
    );
    assert_eq!(lines[0]["session_id"], SESSION);

    // An unknown session.
    let nobody = "00000000-0000-4000-8000-00000000dead";
    let out = restore(&env, nobody, A1);
    assert_eq!(out.status.code(), Some(1));
    let lines = stdout_lines(&out);
    assert_eq!(
        lines[0]["errors"],
        json!([format!("No conversation found with session ID: {nobody}")])
    );
    assert_eq!(lines[0]["session_id"], nobody);
    let out = env.run(&["-p", "--resume", nobody, "x"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains(&format!("No conversation found with session ID: {nobody}")));

    // A --resume value that is not a UUID.
    let out = restore(&env, "not-a-uuid", A1);
    assert_eq!(out.status.code(), Some(1));
    let error = stdout_lines(&out)[0]["errors"][0]
        .as_str()
        .unwrap()
        .to_owned();
    // The real 2.1.197 wording (the CLI also resumes by session title).
    assert!(
        error.starts_with(
            "Error: --resume requires a valid session ID or session title when used with --print."
        ),
        "{error}"
    );

    // --session-id rules.
    let out = env.run(&["-p", "--session-id", "nope", "x"], &[]);
    assert!(stderr(&out).contains("Error: Invalid session ID. Must be a valid UUID."));
    let out = env.run(&["-p", "--resume", SESSION, "--session-id", U1, "x"], &[]);
    assert!(stderr(&out).contains("--session-id can only be used with --continue or --resume if --fork-session is also specified."));

    // An unknown option, a missing value.
    let out = env.run(&["--frobnicate", "-p", "x"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out).trim(), "error: unknown option '--frobnicate'");
    let out = env.run(&["-p", "--resume-session-at"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("argument missing"));

    // A stdin line that is not JSON, a message of the wrong role.
    let mut args = STREAM.to_vec();
    let resume = format!("--resume={SESSION}");
    args.push(&resume);
    let out = env.run(&args, &["{not json".to_owned()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).starts_with("Error parsing streaming input line: {not json"));
    assert!(
        out.stdout.is_empty(),
        "no system/init before the first prompt"
    );
    // The real CLI's JSON parser (Bun's) words it.
    let out = env.run(&args, &["not json".to_owned()]);
    assert_eq!(
        stderr(&out).trim(),
        "Error parsing streaming input line: not json: SyntaxError: JSON Parse error: Unexpected identifier \"not\""
    );
    let bad_role = json!({"type": "user", "message": {"role": "assistant", "content": "x"}});
    let out = env.run(&args, &[bad_role.to_string()]);
    assert!(stderr(&out).contains("Expected message role 'user', got 'assistant'"));
    let bad_type = json!({"type": "nonsense"});
    let out = env.run(&args, &[bad_type.to_string()]);
    assert!(stderr(&out).contains("Expected message type 'user' or 'control', got 'nonsense'"));

    // A control request is answered; keep-alives are ignored.
    let control = json!({"type": "control_request", "request_id": "r1", "request": {"subtype": "initialize"}});
    let out = env.run(
        &args,
        &[
            control.to_string(),
            json!({"type": "keep_alive"}).to_string(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = stdout_lines(&out);
    let response = of_type(&lines, "control_response");
    assert_eq!(response[0]["response"]["request_id"], "r1");
    assert_eq!(response[0]["response"]["subtype"], "success");

    assert_eq!(std::fs::read(env.transcript(SESSION)).unwrap(), unchanged);
    assert!(env
        .journal()
        .iter()
        .filter(|e| e.call != "process/start")
        .any(|e| e.outcome == "error"));
}

#[test]
fn permission_bypass_as_root_needs_is_sandbox() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let env = Env::new();
    let out = env.run(&["-p", "--dangerously-skip-permissions", "x"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("cannot be used with root/sudo privileges"));
    let out = env
        .command(&["-p", "--dangerously-skip-permissions", "x"])
        .env("IS_SANDBOX", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn rewind_files_is_accepted_and_journaled() {
    let env = Env::new();
    env.seed();
    let mut args = STREAM.to_vec();
    let resume = format!("--resume={SESSION}");
    let rewind = format!("--rewind-files={U2}");
    args.extend([resume.as_str(), rewind.as_str()]);
    let out = env.run(&args, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let entry = env.journal().pop().unwrap();
    assert_eq!(entry.call, "claude --rewind-files");
    assert_eq!(env.uuids(SESSION), [U1, A1, U2, A2]);
    let rewind = format!("--rewind-files={A1}");
    let out = env.run(&["-p", resume.as_str(), rewind.as_str()], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("is not a user message in this session"));
    let out = env.run(&["-p", rewind.as_str()], &[]);
    assert!(stderr(&out).contains("Error: --rewind-files requires --resume"));
}

fn last_call(env: &Env) -> JournalEntry {
    env.journal()
        .into_iter()
        .rev()
        .find(|e| e.call != "process/start")
        .unwrap()
}

/// Waits until the journal holds more than `before` calls (other than process starts) and the
/// last of them is a hang: the run under way has reached its fault.
fn until_held(env: &Env, before: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if calls(env) > before && last_call(env).outcome == "fault:hang" {
            return;
        }
        assert!(Instant::now() < deadline, "the run never reached its hang");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn calls(env: &Env) -> usize {
    env.journal()
        .iter()
        .filter(|e| e.call != "process/start")
        .count()
}

#[test]
fn restore_faults_answer_as_the_real_cli_fails() {
    let env = Env::new();
    env.seed();
    let chain = env.uuids(SESSION);

    env.fault("resume-at", FaultKind::Error, None);
    let out = restore(&env, SESSION, A1);
    assert_eq!(out.status.code(), Some(1));
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["is_error"], true);
    assert_eq!(lines[0]["subtype"], "error_during_execution");
    assert_eq!(last_call(&env).outcome, "fault:error");
    assert_eq!(env.uuids(SESSION), chain);

    env.fault("resume-at", FaultKind::UnknownSession, None);
    let out = restore(&env, SESSION, A1);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout_lines(&out)[0]["errors"][0],
        format!("No conversation found with session ID: {SESSION}")
    );
    assert_eq!(last_call(&env).outcome, "fault:unknown_session");

    env.fault("resume-at", FaultKind::Busy, None);
    let out = restore(&env, SESSION, A1);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(stderr(&out).contains(&format!(
        "Session {SESSION} is currently running as a background agent"
    )));
    assert_eq!(last_call(&env).outcome, "fault:busy");

    env.fault("resume-at", FaultKind::NoEffect, None);
    let out = restore(&env, SESSION, A1);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty(), "a prompt-less run prints nothing");
    assert_eq!(env.uuids(SESSION), chain, "no_effect changes nothing");
    assert_eq!(last_call(&env).outcome, "fault:no_effect");

    env.fault("resume-at", FaultKind::Crash, None);
    let out = restore(&env, SESSION, A1);
    assert_eq!(out.status.code(), Some(134));
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["subtype"], "init");
    assert_eq!(env.uuids(SESSION), chain);
    assert_eq!(last_call(&env).outcome, "fault:crash");

    env.fault("resume-at", FaultKind::Hang, Some(400));
    let started = Instant::now();
    let out = restore(&env, SESSION, A1);
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        env.uuids(SESSION),
        chain,
        "a prompt-less run changes nothing"
    );
    assert_eq!(last_call(&env).outcome, "fault:hang");

    env.fault("resume-at", FaultKind::Hang, None);
    let args = restore_args(SESSION, U1);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let before = calls(&env);
    let mut child = env.command(&args).stdin(Stdio::null()).spawn().unwrap();
    until_held(&env, before);
    std::thread::sleep(Duration::from_millis(100));
    assert!(child.try_wait().unwrap().is_none(), "a hang never answers");
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.stdout.is_empty());
    assert_eq!(last_call(&env).outcome, "fault:hang");
    assert_eq!(env.uuids(SESSION), chain);

    // A held run goes ahead once the fault is lifted, and journals its own outcome too.
    let before = calls(&env);
    let mut child = env.command(&args).stdin(Stdio::null()).spawn().unwrap();
    until_held(&env, before);
    std::thread::sleep(Duration::from_millis(100));
    assert!(child.try_wait().unwrap().is_none(), "a planted hang holds");
    assert_eq!(last_call(&env).outcome, "fault:hang");
    FaultPlan::default()
        .save(&rewind_mock_runtimes::faults_path(env.config()))
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(last_call(&env).outcome, "ok");

    // A fault for another call does not fire on the restore.
    env.fault("resume", FaultKind::Error, None);
    let out = restore(&env, SESSION, U1);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(env.uuids(SESSION), chain);
    assert_eq!(last_call(&env).outcome, "ok");
}

#[test]
fn prompt_faults_match_resume_and_new() {
    let env = Env::new();
    env.seed();
    env.fault("resume", FaultKind::NoEffect, None);
    let mut args = STREAM.to_vec();
    let resume = format!("--resume={SESSION}");
    args.push(&resume);
    let out = env.run(&args, &[user("lost", None)]);
    assert!(out.status.success());
    assert_eq!(of_type(&stdout_lines(&out), "assistant").len(), 1);
    assert_eq!(env.uuids(SESSION).len(), 4);
    assert_eq!(last_call(&env).outcome, "fault:no_effect");

    let fresh = "aaaaaaaa-0000-4000-8000-000000000003";
    FaultPlan {
        rules: vec![FaultRule {
            target: fresh.into(),
            call: Some("new".into()),
            kind: FaultKind::Busy,
            hang_ms: None,
        }],
    }
    .save(&rewind_mock_runtimes::faults_path(env.config()))
    .unwrap();
    let mut args = STREAM.to_vec();
    let id = format!("--session-id={fresh}");
    args.push(&id);
    let out = env.run(&args, &[user("x", None)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains(&format!("Session ID {fresh} is already in use.")));
    assert_eq!(last_call(&env).outcome, "fault:busy");
    assert!(live_chain(env.config(), env.cwd(), fresh)
        .unwrap()
        .is_none());
}

#[test]
fn every_process_start_is_journaled_even_for_a_bad_command_line() {
    let env = Env::new();
    let _ = env.run(&["--nope"], &[]);
    let _ = env.run(&["-p", "--session-id", SESSION, "hello"], &[]);
    let journal = env.journal();
    let starts: Vec<_> = journal
        .iter()
        .filter(|e| e.call == "process/start")
        .collect();
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[0].request, json!(strs(&["--nope"])));
    assert_eq!(starts[1].target.as_deref(), Some(SESSION));
    assert!(journal.iter().all(|e| e.runtime == "claude"));
    assert!(journal
        .iter()
        .any(|e| e.call == "claude" && e.outcome == "error"));
    assert!(live_chain(
        env.config(),
        env.cwd(),
        "00000000-0000-4000-8000-000000000000"
    )
    .unwrap()
    .is_none());
}

// ---- live delivery: replies, the delivery witness, faults on prompt runs ----

fn with(base: &[&str], extra: &[&str]) -> Vec<String> {
    base.iter().chain(extra).map(|s| s.to_string()).collect()
}

fn refs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// A witness whose hook reports the live chain of the request's target at that moment.
fn chain_witness(env: &Env) -> WitnessServer {
    let config = env.config().to_path_buf();
    let cwd = env.cwd().to_path_buf();
    WitnessServer::start_with(support::Answer::Witness, move |request| {
        match live_chain(&config, &cwd, &request.target).unwrap() {
            Some(chain) => json!(chain.into_iter().map(|e| e.uuid).collect::<Vec<_>>()),
            None => Value::Null,
        }
    })
}

#[test]
fn replies_are_verbatim_and_an_empty_reply_still_writes_both_entries() {
    let env = Env::new();
    let long = "y".repeat(450);
    let id = format!("--session-id={SESSION}");
    let args = with(&STREAM, &[id.as_str()]);
    let out = env.run(&refs(&args), &[user(&long, None)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = stdout_lines(&out);
    let expected = format!("Mock reply to: {long}");
    assert_eq!(of_type(&lines, "result")[0]["result"], expected.as_str());
    assert_eq!(
        of_type(&lines, "assistant")[0]["message"]["content"][0]["text"],
        expected.as_str()
    );

    let resume = format!("--resume={SESSION}");
    let args = with(&STREAM, &[resume.as_str()]);
    let out = env.run(&refs(&args), &[user("stay silent [no reply]", None)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = stdout_lines(&out);
    let result = of_type(&lines, "result")[0];
    assert_eq!(result["result"], "");
    assert_eq!(result["subtype"], "success");
    assert_eq!(
        of_type(&lines, "assistant")[0]["message"]["content"][0]["text"],
        ""
    );
    let chain = env.chain(SESSION);
    assert_eq!(chain.len(), 4);
    assert_eq!(chain[2].role, "user");
    assert_eq!(chain[2].text, "stay silent [no reply]");
    assert_eq!(chain[3].role, "assistant");
    assert_eq!(chain[3].text, "");
    assert_eq!(
        chain[3].parent_uuid.as_deref(),
        Some(chain[2].uuid.as_str())
    );
}

#[test]
fn the_witness_sees_each_prompt_before_it_is_written() {
    let env = Env::new();
    let witness = chain_witness(&env);
    let id = format!("--session-id={SESSION}");
    let args = with(&STREAM, &[id.as_str()]);
    let out = env.run_witnessed(&refs(&args), &[user("one", Some(U1))], Some(witness.url()));
    assert!(out.status.success(), "{}", stderr(&out));
    let turn1 = env.uuids(SESSION);
    assert_eq!(turn1.len(), 2);

    let resume = format!("--resume={SESSION}");
    let args = with(&STREAM, &[resume.as_str()]);
    let out = env.run_witnessed(&refs(&args), &[user("two", None)], Some(witness.url()));
    assert!(out.status.success(), "{}", stderr(&out));

    let seen = witness.seen();
    assert_eq!(seen.len(), 2, "one request per prompt");
    let first = &seen[0].request;
    assert_eq!(first.runtime, "claude");
    assert_eq!(first.target, SESSION);
    assert_eq!(first.input, "one");
    assert_eq!(
        first.before,
        json!({ "sessionId": SESSION, "fresh": true, "leafUuid": null, "chain": [] })
    );
    assert_eq!(
        seen[0].hook,
        Value::Null,
        "no transcript while the witness looked"
    );
    let second = &seen[1].request;
    assert_eq!(second.input, "two");
    assert_eq!(
        second.before,
        json!({ "sessionId": SESSION, "fresh": false, "leafUuid": turn1[1], "chain": turn1 })
    );
    assert_eq!(seen[1].hook, json!(turn1), "turn 2 not written yet");

    let runs: Vec<Option<u64>> = env
        .journal()
        .iter()
        .filter(|e| e.call != "process/start")
        .map(|e| e.witness)
        .collect();
    assert_eq!(runs, [Some(FIRST_WITNESS), Some(FIRST_WITNESS + 1)]);

    // Two prompts in one run: two requests, the second chained on the first's reply.
    let out = env.run_witnessed(
        &refs(&args),
        &[user("three", None), user("four", None)],
        Some(witness.url()),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let seen = witness.seen();
    assert_eq!(seen.len(), 4);
    let chain = env.uuids(SESSION);
    assert_eq!(seen[2].request.before["chain"], json!(chain[..4]));
    assert_eq!(seen[3].request.before["leafUuid"], chain[5].as_str());
    assert_eq!(seen[3].request.before["chain"], json!(chain[..6]));
    assert_eq!(last_call(&env).witness, Some(FIRST_WITNESS + 2));

    // A run without a prompt delivers nothing.
    let out = env.run_witnessed(&refs(&args), &[], Some(witness.url()));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(witness.requests().len(), 4);
    assert_eq!(last_call(&env).witness, None);
}

#[test]
fn after_a_resume_at_the_witness_sees_the_boundary_as_the_leaf() {
    let env = Env::new();
    env.seed();
    let witness = chain_witness(&env);
    let args = restore_args(SESSION, U2);
    let out = env.run_witnessed(&refs(&args), &[user("instead", None)], Some(witness.url()));
    assert!(out.status.success(), "{}", stderr(&out));
    let seen = witness.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].request.before,
        json!({ "sessionId": SESSION, "fresh": false, "leafUuid": U2, "chain": [U1, A1, U2] })
    );
    assert_eq!(seen[0].hook, json!([U1, A1, U2, A2]), "nothing written yet");
    let chain = env.chain(SESSION);
    assert_eq!(chain[3].parent_uuid.as_deref(), Some(U2));

    // A prompt-less restore moves nothing and delivers nothing: the next plain resume
    // continues from the newest leaf in the file, the end of the branch made above.
    let out = restore(&env, SESSION, A1);
    assert!(out.status.success(), "{}", stderr(&out));
    let live: Vec<String> = chain.iter().map(|e| e.uuid.clone()).collect();
    assert_eq!(live.len(), 5, "{live:?}");
    let resume = format!("--resume={SESSION}");
    let args = with(&STREAM, &[resume.as_str()]);
    let out = env.run_witnessed(&refs(&args), &[user("later", None)], Some(witness.url()));
    assert!(out.status.success(), "{}", stderr(&out));
    let seen = witness.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[1].request.before["leafUuid"],
        live.last().unwrap().as_str()
    );
    assert_eq!(seen[1].request.before["chain"], json!(live));

    // A fork is announced on its source session.
    let args = with(&STREAM, &[resume.as_str(), "--fork-session"]);
    let out = env.run_witnessed(&refs(&args), &[user("forked", None)], Some(witness.url()));
    assert!(out.status.success(), "{}", stderr(&out));
    let forked = stdout_lines(&out)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(forked, SESSION);
    // A plain resume (and a fork of it) continues from the newest leaf in the file: now the
    // answer to "later", which went on from the answer to "instead".
    let live: Vec<String> = env.chain(SESSION).iter().map(|e| e.uuid.clone()).collect();
    assert_eq!(live.len(), 7, "{live:?}");
    let fork = &witness.seen()[2].request;
    assert_eq!(fork.target, SESSION);
    assert_eq!(fork.before["sessionId"], SESSION);
    assert_eq!(fork.before["fresh"], false);
    assert_eq!(fork.before["leafUuid"], live.last().unwrap().as_str());
    assert_eq!(fork.before["chain"], json!(live));
    assert_eq!(env.uuids(&forked)[..live.len()], live[..]);
}

#[test]
fn an_unreachable_witness_fails_the_run_and_writes_nothing() {
    let env = Env::new();
    env.seed();
    let before = std::fs::read(env.transcript(SESSION)).unwrap();
    let url = unreachable_url();
    let resume = format!("--resume={SESSION}");
    let args = with(&STREAM, &[resume.as_str()]);
    let out = env.run_witnessed(&refs(&args), &[user("lost", None)], Some(&url));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("delivery witness failed: "),
        "{}",
        stderr(&out)
    );
    assert!(of_type(&stdout_lines(&out), "assistant").is_empty());
    assert_eq!(std::fs::read(env.transcript(SESSION)).unwrap(), before);
    let call = last_call(&env);
    assert_eq!(call.call, "claude --resume");
    assert_eq!(call.outcome, "error");
    assert_eq!(call.witness, None);
    assert!(call
        .detail
        .as_deref()
        .unwrap()
        .starts_with("delivery witness failed: "));

    // A new session gets no transcript at all.
    let fresh = "aaaaaaaa-0000-4000-8000-000000000004";
    let id = format!("--session-id={fresh}");
    let args = with(&STREAM, &[id.as_str()]);
    let out = env.run_witnessed(&refs(&args), &[user("lost", None)], Some(&url));
    assert_eq!(out.status.code(), Some(1));
    assert!(!env.transcript(fresh).exists());
    assert_eq!(last_call(&env).outcome, "error");
}

#[test]
fn a_faulted_prompt_run_never_reaches_the_witness_and_writes_nothing() {
    let env = Env::new();
    env.seed();
    let witness = WitnessServer::start();
    let before = std::fs::read(env.transcript(SESSION)).unwrap();
    let resume = format!("--resume={SESSION}");
    let plain = with(&STREAM, &[resume.as_str()]);
    let at = restore_args(SESSION, A1);
    let run = |args: &[String]| {
        env.run_witnessed(&refs(args), &[user("faulted", None)], Some(witness.url()))
    };

    for (call, args) in [("resume", &plain), ("resume-at", &at)] {
        env.fault(call, FaultKind::Error, None);
        let out = run(args);
        assert_eq!(out.status.code(), Some(1));
        let lines = stdout_lines(&out);
        assert_eq!(lines.len(), 1, "only the error result");
        assert_eq!(lines[0]["type"], "result");
        assert_eq!(lines[0]["is_error"], true);
        assert_eq!(last_call(&env).outcome, "fault:error");

        env.fault(call, FaultKind::Busy, None);
        assert_eq!(run(args).status.code(), Some(1));
        env.fault(call, FaultKind::Crash, None);
        assert_eq!(run(args).status.code(), Some(134));
        env.fault(call, FaultKind::NoEffect, None);
        assert!(run(args).status.success());
        assert_eq!(std::fs::read(env.transcript(SESSION)).unwrap(), before);
    }

    let fresh = "aaaaaaaa-0000-4000-8000-000000000005";
    FaultPlan {
        rules: vec![FaultRule {
            target: fresh.into(),
            call: Some("new".into()),
            kind: FaultKind::Error,
            hang_ms: None,
        }],
    }
    .save(&rewind_mock_runtimes::faults_path(env.config()))
    .unwrap();
    let id = format!("--session-id={fresh}");
    let out = run(&with(&STREAM, &[id.as_str()]));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout_lines(&out)[0]["is_error"], true);
    assert!(!env.transcript(fresh).exists());
    assert!(witness.requests().is_empty(), "{:?}", witness.requests());
    assert!(env.journal().iter().all(|e| e.witness.is_none()));

    // Without a fault the same run is witnessed and written.
    FaultPlan::default()
        .save(&rewind_mock_runtimes::faults_path(env.config()))
        .unwrap();
    assert!(run(&plain).status.success());
    assert_eq!(witness.requests().len(), 1);
    assert_eq!(env.uuids(SESSION).len(), 6);
}

// ---- Claude Code 2.1.332 ----

/// The lines of a transcript.
fn lines_of(env: &Env, session: &str) -> Vec<Value> {
    std::fs::read_to_string(env.transcript(session))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn is_snapshot(line: &Value) -> bool {
    line.pointer("/attachment/type").and_then(Value::as_str) == Some("prompt_snapshot")
}

#[test]
fn release_2332_records_a_prompt_snapshot_after_an_answer_whose_chain_has_none() {
    let env = Env::release("2.1.332");
    let new = format!("--session-id={SESSION}");
    let out = env.run(
        &refs(&with(&STREAM, &[new.as_str()])),
        &[user("first", None)],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout_lines(&out)[0]["claude_code_version"], "2.1.332");
    let lines = lines_of(&env, SESSION);
    let snapshots: Vec<&Value> = lines.iter().filter(|l| is_snapshot(l)).collect();
    assert_eq!(snapshots.len(), 1, "{lines:#?}");
    let chain = env.chain(SESSION);
    let answer = &chain[1];
    assert_eq!(snapshots[0]["parentUuid"], answer.uuid.as_str());
    let snapshot = snapshots[0]["uuid"].as_str().unwrap().to_owned();
    let leaf = live_leaf(env.config(), env.cwd(), SESSION).unwrap();
    assert_eq!(
        leaf.as_deref(),
        Some(snapshot.as_str()),
        "the snapshot is the leaf"
    );

    // A plain resume chains from the snapshot and writes no other.
    let resume = format!("--resume={SESSION}");
    let out = env.run(
        &refs(&with(&STREAM, &[resume.as_str()])),
        &[user("second", None)],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = lines_of(&env, SESSION);
    assert_eq!(lines.iter().filter(|l| is_snapshot(l)).count(), 1);
    let second = lines
        .iter()
        .find(|l| {
            l["type"] == "user" && l.pointer("/message/content/0/text") == Some(&json!("second"))
        })
        .expect("the second prompt");
    assert_eq!(second["parentUuid"], snapshot.as_str());

    // A branch off the first answer has no snapshot on its chain: it gets one; naming the
    // snapshot itself as the boundary works like any entry of the chain.
    let at = format!("--resume-session-at={}", answer.uuid);
    let out = env.run(
        &refs(&with(&STREAM, &[resume.as_str(), at.as_str()])),
        &[user("branch", None)],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        lines_of(&env, SESSION)
            .iter()
            .filter(|l| is_snapshot(l))
            .count(),
        2
    );
    let branch_leaf = live_leaf(env.config(), env.cwd(), SESSION)
        .unwrap()
        .unwrap();
    let out = restore(&env, SESSION, &branch_leaf);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn release_2332_no_longer_quotes_a_stdin_line_that_is_not_json() {
    let env = Env::release("2.1.332");
    let new = format!("--session-id={SESSION}");
    let out = env.run(
        &refs(&with(&STREAM, &[new.as_str()])),
        &["not json".to_owned()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim(),
        "Error parsing streaming input line (type=unknown, 8 chars): SyntaxError"
    );
}
