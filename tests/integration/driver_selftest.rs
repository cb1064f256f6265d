//! Self-tests of the harness's HTTP driver adapter: the real `rewind-conformance` binary is run
//! against fake driver servers that misbehave in one way each, and every run must end with exactly
//! the right outcome.
//!
//! What these tests prove, for each kind of bad server:
//! - a refusal is judged by its message and code: a fake that refuses every rewind passes exactly
//!   the scenarios of `features/initiation.feature` whose expectations such a refusal meets, and
//!   fails the others as conformance failures (exit 1), with the expected and actual message;
//! - an answer outside driver protocol v1 (not JSON, off the schema, a non-JSON error page) makes
//!   every scenario that received it a `protocol_violation` that quotes the body (exit 4);
//! - a failure outside the contract (a well-formed 500, a hang past `--request-timeout`, a closed
//!   connection, a cut-off body) fails the scenario with a message naming the call (exit 1), and
//!   the run goes on: it neither hangs nor panics;
//! - a server that dies mid-run fails the remaining scenarios quickly and clearly;
//! - a handshake with another protocol version, a non-driver server, or a URL nothing listens on
//!   stops the run before PostgreSQL starts, in one clear line, with exit 4, 4 and 3.
//!
//! Each run starts its own throwaway PostgreSQL (a few seconds), so the runs of one test go in
//! parallel, and every run is killed after [`RUN_LIMIT`] so that a hung harness fails the test
//! instead of hanging it. Expected verdicts are computed from the feature text (see [`predict`]),
//! so that they follow the feature file as it changes; a step the prediction does not know stops
//! the test with a message saying so rather than guessing.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// How long one harness run may take before the test kills it and fails.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// The feature every run drives: refusal scenarios only, one rewind each.
const FEATURE: &str = "features/initiation.feature";

/// The session id every fake hands out.
const SESSION: &str = "s-1";

/// The rewind endpoint of that session, where the faults go.
const REWIND_PATH: &str = "/v1/sessions/s-1/rewind";

/// The rewind call as the harness names it in its messages.
const REWIND_CALL: &str = "POST /v1/sessions/s-1/rewind";

/// The message the catalog fixes for a system, service or app target
/// (`err.system-message-target` in `features/rules.yaml`).
const SYSTEM_TARGET_MESSAGE: &str = "system messages cannot be rewound";

/// The catalog's code for [`SYSTEM_TARGET_MESSAGE`] (the harness checks that a refusal with a
/// catalog message carries the catalog's code), read from `features/rules.yaml`.
fn system_target_code() -> &'static str {
    static CODE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CODE.get_or_init(|| {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("features/rules.yaml");
        let catalog = rewind_conformance::catalog::Catalog::load(&file)
            .unwrap_or_else(|e| panic!("the rule catalog loads: {e}"));
        let rule = catalog
            .error_by_message(SYSTEM_TARGET_MESSAGE)
            .unwrap_or_else(|| panic!("the catalog words `{SYSTEM_TARGET_MESSAGE}`"));
        rule.code
            .clone()
            .unwrap_or_else(|| panic!("rule `{}` fixes a code", rule.id))
    })
}

// ---------------------------------------------------------------------------------------------
// Running the harness
// ---------------------------------------------------------------------------------------------

/// One scenario of a results file.
#[derive(Debug, Clone)]
struct Outcome {
    name: String,
    verdict: String,
    failure: Option<String>,
}

/// How one harness run ended.
#[derive(Debug)]
struct Run {
    /// What the run was, for messages.
    label: String,
    code: i32,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    /// The `--json` results by scenario line; `None` when the run wrote no results file.
    scenarios: Option<BTreeMap<usize, Outcome>>,
}

impl Run {
    /// The results, or a failure saying the run wrote none.
    fn scenarios(&self) -> &BTreeMap<usize, Outcome> {
        self.scenarios
            .as_ref()
            .unwrap_or_else(|| panic!("{}: the run wrote no results file\n{}", self.label, self))
    }

    /// Fails unless the run exited with `code`.
    fn assert_exit(&self, code: i32) {
        assert_eq!(
            self.code, code,
            "{}: expected exit code {code}, got {}\n{}",
            self.label, self.code, self
        );
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "--- run `{}`: exit {} after {:.1} s",
            self.label,
            self.code,
            self.elapsed.as_secs_f64()
        )?;
        writeln!(f, "--- stdout:\n{}", self.stdout)?;
        write!(f, "--- stderr:\n{}", self.stderr)
    }
}

/// Runs `rewind-conformance run` on [`FEATURE`] against the driver server at `sut`.
async fn run_harness(label: &str, sut: &str, concurrency: usize) -> Run {
    let dir = tempfile::tempdir().expect("a temporary directory for the results file");
    let results = dir.path().join("out.json");
    let concurrency = concurrency.to_string();
    let args = [
        "run",
        "--sut",
        sut,
        "--features",
        FEATURE,
        "--json",
        results
            .to_str()
            .expect("the temporary directory path is UTF-8"),
        "--request-timeout",
        "2",
        "--concurrency",
        &concurrency,
    ];
    let (code, stdout, stderr, elapsed) = run_binary(label, &args).await;
    let scenarios = std::fs::read_to_string(&results)
        .ok()
        .map(|text| parse_results(label, &text));
    // A panic in a task of the harness is printed without changing the exit code: look for it.
    assert!(
        !stderr.contains("panicked at"),
        "{label}: the harness panicked\n--- stdout:\n{stdout}\n--- stderr:\n{stderr}"
    );
    Run {
        label: label.to_owned(),
        code,
        stdout,
        stderr,
        elapsed,
        scenarios,
    }
}

/// Runs the harness binary with `args` from the crate root, killing it after [`RUN_LIMIT`].
/// Returns the exit code, stdout, stderr and the wall time.
async fn run_binary(label: &str, args: &[&str]) -> (i32, String, String, Duration) {
    let started = Instant::now();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_rewind-conformance"));
    // The run depends on its arguments only (no database URL, profile or expectations from the
    // environment), uses its own embedded PostgreSQL, and prints only what it says itself.
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("REWIND_") {
            command.env_remove(name);
        }
    }
    let child = command
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the harness binary starts");
    let pid = child.id();
    let mut waiting = tokio::spawn(child.wait_with_output());
    let output = match tokio::time::timeout(RUN_LIMIT, &mut waiting).await {
        Ok(joined) => joined
            .expect("the task waiting for the harness does not panic")
            .expect("the harness's output can be read"),
        Err(_) => {
            // Interrupt it the way Ctrl-C would, so that it stops its PostgreSQL, and show
            // what it printed; dropping the task kills it if it does not stop by itself.
            if let Some(pid) = pid.and_then(|p| libc::pid_t::try_from(p).ok()) {
                // SAFETY: `kill` only sends a signal to the process this test started.
                unsafe {
                    libc::kill(pid, libc::SIGINT);
                }
            }
            let output = tokio::time::timeout(Duration::from_secs(15), &mut waiting).await;
            waiting.abort();
            let shown = match output {
                Ok(Ok(Ok(output))) => format!(
                    "--- stdout:\n{}\n--- stderr:\n{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                ),
                _ => "(it did not stop on SIGINT either; killed)".to_owned(),
            };
            panic!(
                "{label}: the harness run did not finish within {} s (a hung run)\n{shown}",
                RUN_LIMIT.as_secs()
            );
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let code = output.status.code().unwrap_or_else(|| {
        panic!(
            "{label}: the harness was ended by a signal ({}), not an exit code\n--- stdout:\n\
             {stdout}\n--- stderr:\n{stderr}",
            output.status
        )
    });
    (code, stdout, stderr, started.elapsed())
}

/// Reads a `--json` results file into outcomes by line (every scenario must be of [`FEATURE`]).
fn parse_results(label: &str, text: &str) -> BTreeMap<usize, Outcome> {
    let results: Value = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("{label}: the results file is not JSON ({e}):\n{text}"));
    let scenarios = results["scenarios"]
        .as_array()
        .unwrap_or_else(|| panic!("{label}: the results file has no `scenarios`:\n{text}"));
    let mut out = BTreeMap::new();
    for scenario in scenarios {
        assert_eq!(
            scenario["feature"].as_str(),
            Some(FEATURE),
            "{label}: a scenario of another feature ran: {scenario}"
        );
        let line = scenario["line"]
            .as_u64()
            .and_then(|l| usize::try_from(l).ok())
            .unwrap_or_else(|| panic!("{label}: a scenario without a line: {scenario}"));
        let outcome = Outcome {
            name: scenario["name"].as_str().unwrap_or_default().to_owned(),
            verdict: scenario["verdict"].as_str().unwrap_or_default().to_owned(),
            failure: scenario["failure"].as_str().map(str::to_owned),
        };
        assert!(
            out.insert(line, outcome).is_none(),
            "{label}: two scenarios at line {line}"
        );
    }
    out
}

// ---------------------------------------------------------------------------------------------
// What the feature file expects
// ---------------------------------------------------------------------------------------------

/// The kind of a step, `And`/`But` resolved to the keyword before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Given,
    When,
    Then,
}

/// One scenario as the harness runs it: an outline example is its own scenario, at the line of
/// its example row, with its placeholders filled.
#[derive(Debug, Clone)]
struct Scenario {
    line: usize,
    name: String,
    steps: Vec<(Kind, String)>,
}

/// The scenarios of [`FEATURE`].
fn feature_scenarios() -> Vec<Scenario> {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(FEATURE);
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("reading `{FEATURE}` for the expected verdicts: {e}"));
    let scenarios = parse_feature(&text);
    assert!(!scenarios.is_empty(), "`{FEATURE}` has no scenario");
    scenarios
}

/// A small Gherkin reader: enough for scenarios, outlines with examples, and a background. Data
/// tables and doc strings of steps are skipped (no step predicted here uses one).
fn parse_feature(text: &str) -> Vec<Scenario> {
    struct Open {
        line: usize,
        name: String,
        steps: Vec<(Kind, String)>,
        outline: bool,
        background: bool,
    }
    fn close(open: Option<Open>, background: &mut Vec<(Kind, String)>, out: &mut Vec<Scenario>) {
        match open {
            Some(o) if o.background => *background = o.steps,
            Some(o) if !o.outline => out.push(Scenario {
                line: o.line,
                name: o.name,
                steps: background.iter().cloned().chain(o.steps).collect(),
            }),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut background = Vec::new();
    let mut open: Option<Open> = None;
    let mut header: Option<Vec<String>> = None;
    let mut in_examples = false;
    let mut in_doc_string = false;
    let mut last_kind = Kind::Given;
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let number = index + 1;
        if line.starts_with("\"\"\"") || line.starts_with("```") {
            in_doc_string = !in_doc_string;
            continue;
        }
        if in_doc_string || line.is_empty() || line.starts_with('#') || line.starts_with('@') {
            continue;
        }
        let keyword = |prefixes: &[&str]| {
            prefixes
                .iter()
                .find_map(|p| line.strip_prefix(p))
                .map(|rest| rest.trim().to_owned())
        };
        if let Some(name) = keyword(&["Scenario Outline:", "Scenario Template:"]) {
            close(open.take(), &mut background, &mut out);
            open = Some(Open {
                line: number,
                name,
                steps: Vec::new(),
                outline: true,
                background: false,
            });
            (header, in_examples) = (None, false);
        } else if let Some(name) = keyword(&["Scenario:", "Example:"]) {
            close(open.take(), &mut background, &mut out);
            open = Some(Open {
                line: number,
                name,
                steps: Vec::new(),
                outline: false,
                background: false,
            });
            in_examples = false;
        } else if keyword(&["Background:"]).is_some() {
            close(open.take(), &mut background, &mut out);
            open = Some(Open {
                line: number,
                name: String::new(),
                steps: Vec::new(),
                outline: false,
                background: true,
            });
            in_examples = false;
        } else if keyword(&["Examples:", "Scenarios:"]).is_some() {
            (header, in_examples) = (None, true);
        } else if keyword(&["Feature:", "Rule:"]).is_some() {
            close(open.take(), &mut background, &mut out);
            in_examples = false;
        } else if line.starts_with('|') {
            let cells: Vec<String> = line
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect();
            let (true, Some(outline)) = (in_examples, open.as_ref()) else {
                continue; // A step's data table.
            };
            let Some(names) = &header else {
                header = Some(cells);
                continue;
            };
            let fill = |template: &str| {
                names
                    .iter()
                    .zip(&cells)
                    .fold(template.to_owned(), |text, (name, value)| {
                        text.replace(&format!("<{name}>"), value)
                    })
            };
            out.push(Scenario {
                line: number,
                name: fill(&outline.name),
                steps: background
                    .iter()
                    .cloned()
                    .chain(outline.steps.iter().map(|(kind, step)| (*kind, fill(step))))
                    .collect(),
            });
        } else if let Some(open) = open.as_mut() {
            let step = [
                ("Given ", Some(Kind::Given)),
                ("When ", Some(Kind::When)),
                ("Then ", Some(Kind::Then)),
                ("And ", None),
                ("But ", None),
                ("* ", None),
            ]
            .into_iter()
            .find_map(|(prefix, kind)| line.strip_prefix(prefix).map(|rest| (kind, rest)));
            if let Some((kind, rest)) = step {
                last_kind = kind.unwrap_or(last_kind);
                open.steps.push((last_kind, rest.trim().to_owned()));
            }
        }
    }
    close(open, &mut background, &mut out);
    out
}

/// Whether a `When` step asks for one rewind and waits for its answer.
fn is_rewind(step: &str) -> bool {
    step.contains(" rewinds ") && step.contains("to before message ")
}

/// Whether `scenario` passes against a fake that answers every rewind with a refusal carrying
/// `message` (and the catalog's code for it) and never touches the database.
///
/// The steps of [`FEATURE`] are known here one by one: seeding a fixture and asking for a rewind
/// always work against such a fake, `the rewind is refused` always holds, `the database is
/// unchanged` holds because the fake touches nothing, `no rewind operation is recorded` holds
/// because no fixture seeds a `rewind_operations` row, and `the rewind is refused with "X"` holds
/// exactly when `X` is `message`. Any other step stops the test: its outcome must be thought
/// about, not guessed.
fn predict(scenario: &Scenario, message: &str) -> bool {
    let mut passes = true;
    for (kind, step) in &scenario.steps {
        let holds = match (kind, step.as_str()) {
            (Kind::Given, s) if s.starts_with("the conversation \"") => true,
            (Kind::When, s) if is_rewind(s) => true,
            (
                Kind::Then,
                "the rewind is refused"
                | "the database is unchanged"
                | "no rewind operation is recorded but a failed one",
            ) => true,
            (Kind::Then, s) if s.starts_with("the rewind is refused with \"") => {
                s.strip_prefix("the rewind is refused with \"")
                    .and_then(|rest| rest.strip_suffix('"'))
                    == Some(message)
            }
            _ => panic!(
                "{FEATURE}:{} `{}`: the self-test does not know what the step `{step}` does \
                 against a fake that refuses every rewind; teach `predict` about it",
                scenario.line, scenario.name
            ),
        };
        passes &= holds;
    }
    passes
}

/// The scenarios that ask for exactly one rewind (so a rewind fault reaches each of them once).
/// Every scenario of [`FEATURE`] must be one: the fault cases rely on it.
fn rewind_scenarios() -> Vec<Scenario> {
    let scenarios = feature_scenarios();
    for scenario in &scenarios {
        let rewinds = scenario
            .steps
            .iter()
            .filter(|(kind, step)| *kind == Kind::When && is_rewind(step))
            .count();
        assert_eq!(
            rewinds, 1,
            "{FEATURE}:{} `{}` asks for {rewinds} rewinds; the fault cases expect exactly one \
             per scenario",
            scenario.line, scenario.name
        );
    }
    scenarios
}

/// Checks that the run judged exactly the scenarios of `expected` (by line), each with its
/// verdict; lists every difference.
fn assert_verdicts(
    run: &Run,
    scenarios: &[Scenario],
    expected: impl Fn(&Scenario) -> &'static str,
) {
    let actual = run.scenarios();
    let mut problems = Vec::new();
    for scenario in scenarios {
        let want = expected(scenario);
        match actual.get(&scenario.line) {
            None => problems.push(format!(
                "line {} `{}`: expected {want}, but it did not run",
                scenario.line, scenario.name
            )),
            Some(got) if got.verdict != want || got.name != scenario.name => {
                problems.push(format!(
                    "line {} `{}`: expected {want}, got {} `{}` ({})",
                    scenario.line,
                    scenario.name,
                    got.verdict,
                    got.name,
                    got.failure.as_deref().unwrap_or("no failure")
                ))
            }
            Some(_) => {}
        }
    }
    for (line, got) in actual {
        if !scenarios.iter().any(|s| s.line == *line) {
            problems.push(format!(
                "line {line} `{}` ran ({}) but is not a scenario of the feature",
                got.name, got.verdict
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{}: verdicts differ from the expected ones:\n  {}\n{}",
        run.label,
        problems.join("\n  "),
        run
    );
}

/// Checks that the failure of every scenario contains each of `needles`.
fn assert_failures_contain(run: &Run, needles: &[&str]) {
    for (line, outcome) in run.scenarios() {
        let failure = outcome.failure.as_deref().unwrap_or_default();
        for needle in needles {
            assert!(
                failure.contains(needle),
                "{}: the failure of line {line} `{}` does not contain `{needle}`:\n{failure}",
                run.label,
                outcome.name
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Fake driver servers
// ---------------------------------------------------------------------------------------------

/// The handshake body of a driver server speaking `version`.
fn handshake(version: u32) -> Value {
    json!({"protocol": "rewind-driver", "version": version, "implementation": {"name": "fake"}})
}

/// A refusal of a rewind with `code` and `message`.
fn refusal(code: &str, message: &str) -> String {
    json!({"outcome": "refused", "code": code, "message": message}).to_string()
}

/// A 200 answer with `body` as JSON, byte for byte.
fn json_body(status: u16, body: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(body.to_owned(), "application/json")
}

/// A wiremock driver server that answers the handshake, attach, detach and event calls
/// correctly and every rewind with `rewind`.
async fn wiremock_driver(rewind: ResponseTemplate) -> MockServer {
    wiremock_driver_detaching(rewind, ResponseTemplate::new(204)).await
}

/// [`wiremock_driver`] with `detach` as the answer to every detach.
async fn wiremock_driver_detaching(
    rewind: ResponseTemplate,
    detach: ResponseTemplate,
) -> MockServer {
    let server = MockServer::builder().start().await;
    Mock::given(method("GET"))
        .and(path("/rewind-driver"))
        .respond_with(ResponseTemplate::new(200).set_body_json(handshake(1)))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/sessions"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"sessionId": SESSION})))
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path(format!("/v1/sessions/{SESSION}")))
        .respond_with(detach)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("/v1/sessions/{SESSION}/events/take")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"events": []})))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(REWIND_PATH))
        .respond_with(rewind)
        .mount(&server)
        .await;
    server
}

/// How many requests `server` received for `verb` `route`.
async fn count_calls(server: &MockServer, verb: &str, route: &str) -> usize {
    server
        .received_requests()
        .await
        .expect("wiremock records requests")
        .iter()
        .filter(|r| r.method.as_str() == verb && r.url.path() == route)
        .count()
}

/// Checks that the fake got one rewind per scenario and that every attached session was
/// detached again, whatever the rewind answered.
async fn assert_calls(label: &str, server: &MockServer, scenarios: usize) {
    let rewinds = count_calls(server, "POST", REWIND_PATH).await;
    let attaches = count_calls(server, "POST", "/v1/sessions").await;
    let detaches = count_calls(server, "DELETE", &format!("/v1/sessions/{SESSION}")).await;
    assert_eq!(
        (rewinds, attaches, detaches),
        (scenarios, scenarios, scenarios),
        "{label}: expected one rewind, attach and detach per scenario ({scenarios}), got \
         {rewinds} rewinds, {attaches} attaches and {detaches} detaches"
    );
}

/// What a [`RawDriver`] does with a rewind call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RawRewind {
    /// Answers the refusal of [`SYSTEM_TARGET_MESSAGE`].
    Refuse,
    /// Reads the request, then closes the connection without a byte of answer.
    Close,
    /// Sends a status line, headers announcing a body, part of the body, then closes.
    CutOff,
    /// Goes away: stops listening, then closes the connection without answering.
    Die,
}

/// A driver server on a raw socket, for faults an HTTP server library cannot produce: it answers
/// one request per connection (`Connection: close`) and can stop listening at any moment.
struct RawDriver {
    addr: SocketAddr,
    listener: Arc<Mutex<Option<TcpListener>>>,
    rewinds: Arc<AtomicUsize>,
}

impl RawDriver {
    /// Starts a server whose `n`-th rewind call (from 1) is handled as `on_rewind(n)` says.
    fn start(on_rewind: impl Fn(usize) -> RawRewind + Send + Sync + 'static) -> RawDriver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
        let addr = listener.local_addr().expect("the bound port's address");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let listener = Arc::new(Mutex::new(Some(listener)));
        let rewinds = Arc::new(AtomicUsize::new(0));
        let on_rewind: Arc<dyn Fn(usize) -> RawRewind + Send + Sync> = Arc::new(on_rewind);
        let (accepting, counter) = (Arc::clone(&listener), Arc::clone(&rewinds));
        std::thread::spawn(move || loop {
            let accepted = {
                let guard = accepting.lock().unwrap_or_else(|p| p.into_inner());
                let Some(listener) = guard.as_ref() else {
                    return; // The server died.
                };
                listener.accept()
            };
            match accepted {
                Ok((stream, _)) => {
                    let (listener, counter, on_rewind) = (
                        Arc::clone(&accepting),
                        Arc::clone(&counter),
                        Arc::clone(&on_rewind),
                    );
                    std::thread::spawn(move || {
                        serve_raw(stream, &listener, &counter, on_rewind.as_ref())
                    });
                }
                // Nothing to accept yet (or a passing error): look again shortly.
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        });
        RawDriver {
            addr,
            listener,
            rewinds,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many rewind calls arrived.
    fn rewinds(&self) -> usize {
        self.rewinds.load(Ordering::SeqCst)
    }
}

impl Drop for RawDriver {
    fn drop(&mut self) {
        self.listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }
}

/// Reads one HTTP request from `stream`: its method, path and (discarded) body.
fn read_request(stream: &mut TcpStream) -> Option<(String, String)> {
    let mut data = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let n = stream.read(&mut chunk).ok().filter(|n| *n > 0)?;
        data.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let length = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    while data.len() < head_end + length {
        let n = stream.read(&mut chunk).ok().filter(|n| *n > 0)?;
        data.extend_from_slice(&chunk[..n]);
    }
    let mut request_line = head.lines().next()?.split_whitespace();
    let verb = request_line.next()?.to_owned();
    let target = request_line.next()?;
    let route = target.split('?').next().unwrap_or(target).to_owned();
    Some((verb, route))
}

/// Serves one connection of a [`RawDriver`].
fn serve_raw(
    mut stream: TcpStream,
    listener: &Mutex<Option<TcpListener>>,
    rewinds: &AtomicUsize,
    on_rewind: &(dyn Fn(usize) -> RawRewind + Send + Sync),
) {
    // The listener is non-blocking; this connection is served with plain blocking reads.
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Some((verb, route)) = read_request(&mut stream) else {
        return;
    };
    let answer = |stream: &mut TcpStream, status: &str, body: &str| {
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n",
            body.len()
        );
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(body.as_bytes());
        let _ = stream.flush();
    };
    let session = format!("/v1/sessions/{SESSION}");
    match (verb.as_str(), route.as_str()) {
        ("GET", "/rewind-driver") => answer(&mut stream, "200 OK", &handshake(1).to_string()),
        ("POST", "/v1/sessions") => answer(
            &mut stream,
            "201 Created",
            &json!({"sessionId": SESSION}).to_string(),
        ),
        ("DELETE", r) if r == session => answer(&mut stream, "204 No Content", ""),
        ("POST", r) if r == format!("{session}/events/take") => {
            answer(&mut stream, "200 OK", r#"{"events":[]}"#)
        }
        ("POST", REWIND_PATH) => {
            let n = rewinds.fetch_add(1, Ordering::SeqCst) + 1;
            match on_rewind(n) {
                RawRewind::Refuse => answer(
                    &mut stream,
                    "200 OK",
                    &refusal(system_target_code(), SYSTEM_TARGET_MESSAGE),
                ),
                RawRewind::Close => {}
                RawRewind::CutOff => {
                    let _ = stream.write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                          content-length: 200\r\nconnection: close\r\n\r\n{\"outcome\":",
                    );
                    let _ = stream.flush();
                }
                RawRewind::Die => {
                    listener.lock().unwrap_or_else(|p| p.into_inner()).take();
                }
            }
        }
        _ => answer(
            &mut stream,
            "404 Not Found",
            &json!({"error": {"code": "not_found", "message": "no such route in the fake"}})
                .to_string(),
        ),
    }
    let _ = stream.shutdown(Shutdown::Both);
}

/// Runs `cases` at once (each starts its own PostgreSQL) and reports every failure, not only
/// the first.
async fn all_of(cases: Vec<(&'static str, tokio::task::JoinHandle<()>)>) {
    let mut failures = Vec::new();
    for (name, case) in cases {
        if let Err(e) = case.await {
            let text = e
                .try_into_panic()
                .ok()
                .and_then(|p| {
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                })
                .unwrap_or_else(|| "cancelled".to_owned());
            failures.push(format!("=== case `{name}` failed:\n{text}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

// ---------------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------------

/// A fake refusing every rewind with `message` (and the catalog code of system targets):
/// exactly the predicted scenarios pass, the others are conformance failures, exit 1.
async fn refusing_fake(label: &'static str, message: &'static str) -> (Run, Vec<Scenario>) {
    let scenarios = rewind_scenarios();
    let server = wiremock_driver(json_body(200, &refusal(system_target_code(), message))).await;
    let run = run_harness(label, &server.uri(), 4).await;
    run.assert_exit(1);
    assert_verdicts(&run, &scenarios, |s| {
        if predict(s, message) {
            "passed"
        } else {
            "failed"
        }
    });
    assert_calls(label, &server, scenarios.len()).await;
    (run, scenarios)
}

/// The examples of the outline "a <kind> message cannot be the target".
const OUTLINE_EXAMPLES: [&str; 3] = [
    "a system message cannot be the target",
    "a service message cannot be the target",
    "a app message cannot be the target",
];

async fn right_refusal() {
    let (_, scenarios) = refusing_fake("refuses every rewind", SYSTEM_TARGET_MESSAGE).await;
    // The prediction itself is checked against what the feature says by hand: the three
    // examples of the outline "a <kind> message cannot be the target" pass on their message,
    // and so do the scenarios that accept any refusal; the scenarios expecting another message
    // fail.
    let passing: Vec<&str> = scenarios
        .iter()
        .filter(|s| predict(s, SYSTEM_TARGET_MESSAGE))
        .map(|s| s.name.as_str())
        .collect();
    for name in OUTLINE_EXAMPLES.into_iter().chain([
        "an agent cannot initiate a rewind",
        "the system cannot initiate a rewind",
        "an already rewound message cannot be the target",
        "the target must belong to the scope being rewound",
    ]) {
        assert!(
            passing.contains(&name),
            "`{name}` should be predicted to pass against a refusal with \
             `{SYSTEM_TARGET_MESSAGE}`; predicted to pass: {passing:?}"
        );
    }
    assert!(
        passing.len() < scenarios.len(),
        "some scenario expects another refusal message, so not all can pass"
    );
}

async fn wrong_refusal_message() {
    let wrong = "system message cannot be rewound";
    let (run, scenarios) = refusing_fake("refuses with a wrong message", wrong).await;
    // The three examples of the outline now fail, and their failure shows both messages.
    let examples: Vec<&Scenario> = scenarios
        .iter()
        .filter(|s| OUTLINE_EXAMPLES.contains(&s.name.as_str()))
        .collect();
    assert_eq!(
        examples.len(),
        3,
        "the outline `a <kind> message cannot be the target` has three examples in `{FEATURE}`"
    );
    for example in examples {
        let outcome = &run.scenarios()[&example.line];
        let failure = outcome.failure.as_deref().unwrap_or_default();
        for needle in [
            "wrong refusal message",
            &format!("-{SYSTEM_TARGET_MESSAGE}"),
            &format!("+{wrong}"),
        ] {
            assert!(
                failure.contains(needle),
                "line {} `{}`: the failure does not show `{needle}`:\n{failure}",
                example.line,
                example.name
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_judged_by_message_and_code() {
    all_of(vec![
        ("right message", tokio::spawn(right_refusal())),
        ("wrong message", tokio::spawn(wrong_refusal_message())),
    ])
    .await;
}

/// A fake answering every rewind with `answer`, outside the protocol: every scenario is a
/// protocol violation of the rewind call that quotes `quoted`, exit 4.
async fn violating_fake(label: &'static str, answer: ResponseTemplate, quoted: &'static str) {
    let server = wiremock_driver(answer).await;
    violations_of(label, server, REWIND_CALL, quoted).await;
}

/// A fake that refuses every rewind correctly but answers every detach (the end of each
/// scenario) with `answer`, outside the protocol: every scenario is still a protocol violation,
/// of the detach call, exit 4.
async fn violating_detach(label: &'static str, answer: ResponseTemplate, quoted: &'static str) {
    let rewind = json_body(200, &refusal(system_target_code(), SYSTEM_TARGET_MESSAGE));
    let server = wiremock_driver_detaching(rewind, answer).await;
    violations_of(label, server, "DELETE /v1/sessions/s-1", quoted).await;
}

/// Runs the harness against `server`, whose answers to `call` are outside the protocol: every
/// scenario is a protocol violation of `call` that quotes `quoted`, exit 4.
async fn violations_of(label: &str, server: MockServer, call: &str, quoted: &str) {
    let scenarios = rewind_scenarios();
    let run = run_harness(label, &server.uri(), 4).await;
    run.assert_exit(4);
    assert_verdicts(&run, &scenarios, |_| "protocol_violation");
    assert_failures_contain(&run, &["protocol violation", call, quoted]);
    assert!(
        run.stdout.contains("protocol violations:"),
        "{label}: the summary does not count the protocol violations\n{run}"
    );
    assert_calls(label, &server, scenarios.len()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_outside_the_protocol_are_violations() {
    const MALFORMED: &str = r#"{"outcome": "refused", "#;
    const MESSAGE_NOT_TEXT: &str = r#"{"outcome":"refused","code":"x","message":5}"#;
    const UNKNOWN_OUTCOME: &str = r#"{"outcome":"postponed","code":"x","message":"later"}"#;
    const ERROR_PAGE: &str = "<html><body>Internal Server Error</body></html>";
    all_of(vec![
        (
            "malformed JSON",
            tokio::spawn(violating_fake(
                "malformed JSON",
                json_body(200, MALFORMED),
                MALFORMED,
            )),
        ),
        (
            "message is a number",
            tokio::spawn(violating_fake(
                "message is a number",
                json_body(200, MESSAGE_NOT_TEXT),
                MESSAGE_NOT_TEXT,
            )),
        ),
        (
            "unknown outcome",
            tokio::spawn(violating_fake(
                "unknown outcome",
                json_body(200, UNKNOWN_OUTCOME),
                UNKNOWN_OUTCOME,
            )),
        ),
        (
            "detach answers an HTML page",
            tokio::spawn(violating_detach(
                "detach answers an HTML page",
                ResponseTemplate::new(500).set_body_raw(ERROR_PAGE, "text/html"),
                ERROR_PAGE,
            )),
        ),
        (
            "500 with an HTML page",
            tokio::spawn(violating_fake(
                "500 with an HTML page",
                ResponseTemplate::new(500).set_body_raw(ERROR_PAGE, "text/html"),
                ERROR_PAGE,
            )),
        ),
    ])
    .await;
}

/// A run where every rewind fails outside the contract: every scenario is a conformance
/// failure whose message contains `needles`, exit 1.
fn assert_all_failed(run: &Run, scenarios: &[Scenario], needles: &[&str]) {
    run.assert_exit(1);
    assert_verdicts(run, scenarios, |_| "failed");
    assert_failures_contain(run, needles);
    assert!(
        !run.stdout.contains("PROTOCOL VIOLATION"),
        "{}: a failure outside the contract was reported as a protocol violation\n{run}",
        run.label
    );
}

async fn internal_error() {
    let label = "500 with a driver error";
    let scenarios = rewind_scenarios();
    let server = wiremock_driver(json_body(
        500,
        r#"{"error":{"code":"internal","message":"boom"}}"#,
    ))
    .await;
    let run = run_harness(label, &server.uri(), 4).await;
    assert_all_failed(
        &run,
        &scenarios,
        &[
            &format!("`{REWIND_CALL}` answered 500"),
            "boom",
            "`internal`",
        ],
    );
    assert_calls(label, &server, scenarios.len()).await;
}

async fn hung_rewind() {
    let label = "rewind hangs";
    let scenarios = rewind_scenarios();
    let server = wiremock_driver(
        json_body(200, &refusal(system_target_code(), SYSTEM_TARGET_MESSAGE))
            .set_delay(Duration::from_secs(60)),
    )
    .await;
    let run = run_harness(label, &server.uri(), 8).await;
    assert_all_failed(
        &run,
        &scenarios,
        &[
            &format!("`{REWIND_CALL}` got no answer"),
            "no answer within 2 s",
        ],
    );
    // Every scenario waited 2 s for its rewind, eight at a time: the run must not wait for the
    // 60 s answers, nor stop after the first time-out.
    assert!(
        run.elapsed < Duration::from_secs(60),
        "{label}: the run took {:.1} s; it waited for hung answers\n{run}",
        run.elapsed.as_secs_f64()
    );
    assert_calls(label, &server, scenarios.len()).await;
}

async fn raw_fault(label: &'static str, fault: RawRewind, needles: &'static [&'static str]) {
    let scenarios = rewind_scenarios();
    let server = RawDriver::start(move |_| fault);
    let run = run_harness(label, &server.url(), 4).await;
    let call = format!("`{REWIND_CALL}` got no answer");
    let mut all: Vec<&str> = vec![&call];
    all.extend_from_slice(needles);
    assert_all_failed(&run, &scenarios, &all);
    assert_eq!(
        server.rewinds(),
        scenarios.len(),
        "{label}: expected one rewind call per scenario\n{run}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_outside_the_contract_fail_the_scenario() {
    all_of(vec![
        ("500 with a driver error", tokio::spawn(internal_error())),
        ("hang", tokio::spawn(hung_rewind())),
        (
            "closed connection",
            tokio::spawn(raw_fault(
                "closed connection",
                RawRewind::Close,
                &["the connection failed before a complete answer"],
            )),
        ),
        (
            "cut-off body",
            tokio::spawn(raw_fault(
                "cut-off body",
                RawRewind::CutOff,
                &["the connection failed before a complete answer"],
            )),
        ),
    ])
    .await;
}

/// The server answers `ANSWERED` rewinds, then goes away on the next: one scenario at a time,
/// so that the outcome is exact whatever order the scenarios run in. Exactly `ANSWERED`
/// scenarios are judged on their refusal, one fails on its rewind, and the rest fail at once on
/// their attach; the run ends quickly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_mid_run_fails_the_rest_quickly() {
    const ANSWERED: usize = 4;
    let label = "server dies";
    let scenarios = rewind_scenarios();
    assert!(
        scenarios.len() > ANSWERED + 1,
        "`{FEATURE}` needs more than {} scenarios for this case",
        ANSWERED + 1
    );
    let server = RawDriver::start(|n| {
        if n <= ANSWERED {
            RawRewind::Refuse
        } else {
            RawRewind::Die
        }
    });
    let run = run_harness(label, &server.url(), 1).await;
    run.assert_exit(1);
    assert_eq!(
        server.rewinds(),
        ANSWERED + 1,
        "{label}: the rewind calls that reached the server\n{run}"
    );
    let died_on_rewind = format!("`{REWIND_CALL}` got no answer");
    let refused_attach = "`POST /v1/sessions` got no answer";
    let (mut judged, mut on_rewind, mut on_attach, mut problems) = (0, 0, 0, Vec::new());
    for scenario in &scenarios {
        let Some(outcome) = run.scenarios().get(&scenario.line) else {
            problems.push(format!("line {} did not run", scenario.line));
            continue;
        };
        let failure = outcome.failure.as_deref().unwrap_or_default();
        if outcome.verdict == "failed" && failure.contains(&died_on_rewind) {
            on_rewind += 1;
        } else if outcome.verdict == "failed" && failure.contains(refused_attach) {
            on_attach += 1;
        } else {
            judged += 1;
            let want = if predict(scenario, SYSTEM_TARGET_MESSAGE) {
                "passed"
            } else {
                "failed"
            };
            if outcome.verdict != want {
                problems.push(format!(
                    "line {} `{}`: expected {want} on its refusal, got {} ({failure})",
                    scenario.line, scenario.name, outcome.verdict
                ));
            }
        }
    }
    assert!(
        problems.is_empty() && run.scenarios().len() == scenarios.len(),
        "{label}:\n  {}\n{run}",
        problems.join("\n  ")
    );
    assert_eq!(
        (judged, on_rewind, on_attach),
        (ANSWERED, 1, scenarios.len() - ANSWERED - 1),
        "{label}: scenarios judged on a refusal, failed on the rewind, failed on the attach\n{run}"
    );
    assert!(
        run.elapsed < Duration::from_secs(60),
        "{label}: the run took {:.1} s after its server died\n{run}",
        run.elapsed.as_secs_f64()
    );
}

/// A handshake problem ends the run before PostgreSQL starts, with `code` and one line on
/// stderr containing every one of `needles`.
fn assert_refused_early(run: &Run, code: i32, needles: &[&str]) {
    run.assert_exit(code);
    assert!(
        run.scenarios.is_none() && !run.stdout.contains("conformance of"),
        "{}: the run went on after a failed handshake\n{run}",
        run.label
    );
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let first = lines.first().copied().unwrap_or_default();
    for needle in needles {
        assert!(
            first.contains(needle),
            "{}: the first stderr line does not contain `{needle}`\n{run}",
            run.label
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_problems_stop_the_run_before_it_starts() {
    // Another protocol version: one line saying both versions, exit 4.
    let v2 = MockServer::builder().start().await;
    Mock::given(method("GET"))
        .and(path("/rewind-driver"))
        .respond_with(ResponseTemplate::new(200).set_body_json(handshake(2)))
        .mount(&v2)
        .await;
    let run = run_harness("version 2", &v2.uri(), 4).await;
    assert_refused_early(
        &run,
        4,
        &[
            &v2.uri(),
            "the server speaks driver protocol version 2; this harness speaks version 1",
        ],
    );
    assert_eq!(
        run.stderr.lines().filter(|l| !l.trim().is_empty()).count(),
        1,
        "a version mismatch is told in exactly one line\n{run}"
    );

    // A server that is not a driver (404 everywhere): exit 4.
    let other = MockServer::builder().start().await;
    let run = run_harness("not a driver", &other.uri(), 4).await;
    assert_refused_early(
        &run,
        4,
        &[&other.uri(), "404", "this is not a rewind driver server"],
    );

    // Nothing listens: a harness error naming the URL, exit 3.
    let free = TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
    let url = format!(
        "http://{}",
        free.local_addr().expect("the bound port's address")
    );
    drop(free);
    let run = run_harness("nothing listens", &url, 4).await;
    assert_refused_early(&run, 3, &[&url, "cannot reach the implementation"]);
    assert!(
        run.stderr.contains("cannot connect"),
        "nothing listens: stderr does not say the connection was refused\n{run}"
    );
}
