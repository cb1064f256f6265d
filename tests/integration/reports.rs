//! The run's reports, end to end: one run of the real binary with `--report-dir` on a small
//! feature of its own (a scenario that passes, one that fails, one that fails as an
//! expectations file says), then every report read the way its consumers read it: the JUnit XML
//! with an XML parser, `results.json` against `schemas/results.schema.json`, `rules.html` in a
//! headless Chromium, the Markdown by its structure; and the usage errors of the report paths.
//!
//! The browser check needs Debian's Chromium (`apt-get install -y chromium`, or the path in
//! `REWIND_CHROMIUM`); without it the check says on stderr that it did not run, and fails only
//! under `CI=true`.

use crate::common::harness_env;

use crate::common::optional_tool;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::common::finished;
use finished::Finished;

use quick_xml::events::Event;
use rewind_conformance::catalog::{Catalog, Pending, Untestable};

const BIN: &str = env!("CARGO_BIN_EXE_rewind-conformance");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// How long the harness run may take.
const RUN_LIMIT: Duration = Duration::from_secs(300);
/// How long one Chromium call may take.
const BROWSER_LIMIT: Duration = Duration::from_secs(90);

/// The scenario that passes; its rules must show `pass`.
const PASSING: &str = "alice rewinds her own trailing messages";
/// The scenario that fails (its name needs escaping in every format).
const FAILING: &str = "an agent's rewind <completes> & \"fails\"";
/// The scenario the expectations file lists as a known failure.
const KNOWN: &str = "a known failure";

const FEATURE: &str = r#"Feature: reports self-test
  Three scenarios: one passes, one fails, one fails as the expectations file says.

  @rule:apply.tombstone-suffix @rule:sem.tombstone-target-and-suffix
  Scenario: alice rewinds her own trailing messages
    Given the conversation "dm-two-humans"
    When human "alice" rewinds to before message "h-m4"
    Then the rewind completes
    And messages "h-m4, h-service, h-app, h-m5, h-m6" are rewound tombstones

  @rule:init.human-only
  Scenario: an agent's rewind <completes> & "fails"
    Given the conversation "dm-one-agent"
    When agent "agent-codex" rewinds to before message "msg-dm-1"
    Then the rewind completes

  @rule:init.own-human-target
  Scenario: a known failure
    Given the conversation "dm-two-humans"
    When human "bob" rewinds to before message "h-m4"
    Then the rewind completes
"#;

/// Runs `program args` from the crate root, killing its process group after `limit`.
fn run_command(program: &str, args: &[&str], limit: Duration) -> Finished {
    use std::os::unix::process::CommandExt as _;
    let logs = tempfile::tempdir().expect("a log directory");
    let out = std::fs::File::create(logs.path().join("out")).expect("stdout file");
    let err = std::fs::File::create(logs.path().join("err")).expect("stderr file");
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(ROOT)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    harness_env::clean(&mut command);
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{program}`: {e}"));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        if started.elapsed() > limit {
            let pid = libc::pid_t::try_from(child.id()).expect("a pid");
            // SAFETY: `kill` only sends signals to the process group this test started.
            unsafe {
                libc::kill(-pid, libc::SIGINT);
            }
            std::thread::sleep(Duration::from_secs(10));
            // SAFETY: as above.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let read = |name: &str| std::fs::read_to_string(logs.path().join(name)).unwrap_or_default();
    let finished = Finished {
        code: status.and_then(|s| s.code()),
        stdout: read("out"),
        stderr: read("err"),
    };
    assert!(
        status.is_some(),
        "`{program} {}` did not finish within {} s: {}",
        args.join(" "),
        limit.as_secs(),
        finished.describe()
    );
    finished
}

/// The one harness run all report checks read. Its inputs and reports stay in
/// `<target>/tmp/reports-test/` for a look after the test (the next run starts afresh).
struct Reports {
    /// The feature file the run ran.
    feature: PathBuf,
    /// The `--report-dir`.
    dir: PathBuf,
    finished: Finished,
}

impl Reports {
    fn read(&self, name: &str) -> String {
        let path = self.dir.join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "the run wrote no `{}`: {e}\n{}",
                path.display(),
                self.finished.describe()
            )
        })
    }

    /// The line of the scenario named `name` in the feature.
    fn line(&self, name: &str) -> usize {
        let text = std::fs::read_to_string(&self.feature).expect("the feature");
        text.lines()
            .position(|l| l.trim() == format!("Scenario: {name}"))
            .map(|n| n + 1)
            .unwrap_or_else(|| panic!("no scenario `{name}`"))
    }

    /// Whether `reported` names the run's feature file (the run names it relative to where it
    /// started, or absolute).
    fn is_feature(&self, reported: &str) -> bool {
        Path::new(ROOT).join(reported).canonicalize().ok() == self.feature.canonicalize().ok()
    }
}

fn reports() -> &'static Reports {
    static REPORTS: OnceLock<Reports> = OnceLock::new();
    REPORTS.get_or_init(|| {
        let inputs = Path::new(env!("CARGO_TARGET_TMPDIR")).join("reports-test");
        match std::fs::remove_dir_all(&inputs) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("cannot clear `{}`: {e}", inputs.display()),
        }
        let features = inputs.join("features");
        std::fs::create_dir_all(&features).expect("features dir");
        let feature = features.join("reports.feature");
        std::fs::write(&feature, FEATURE).expect("the feature");
        let expectations = inputs.join("expectations.yaml");
        std::fs::write(
            &expectations,
            format!(
                "expected_failures:\n  - scenario: \"reports.feature: {KNOWN}\"\n    reason: \
                 \"a deliberate failure of the reports test\"\n"
            ),
        )
        .expect("the expectations");
        // The shipped suite leaves no rule pending: the run gets a pending list of its own.
        std::fs::write(pending_path(), PENDING).expect("the pending list");
        // A directory that does not exist yet, two levels down: the run makes it.
        let dir = inputs.join("out/reports");
        let finished = run_command(
            BIN,
            &[
                "run",
                "--features",
                features.to_str().expect("UTF-8"),
                "--expectations",
                expectations.to_str().expect("UTF-8"),
                "--pending",
                pending_path().to_str().expect("UTF-8"),
                "--tags",
                "@rule:apply.tombstone-suffix or @rule:init.human-only or \
                 @rule:init.own-human-target",
                "--report-dir",
                dir.to_str().expect("UTF-8"),
            ],
            RUN_LIMIT,
        );
        assert_eq!(
            finished.code,
            Some(1),
            "one scenario fails: exit 1; {}",
            finished.describe()
        );
        assert!(
            !finished.stderr.contains("panicked"),
            "{}",
            finished.describe()
        );
        Reports {
            feature,
            dir,
            finished,
        }
    })
}

fn catalog() -> Catalog {
    Catalog::load(&Path::new(ROOT).join("features/rules.yaml")).expect("the catalog loads")
}

/// The first rule `features/untestable.yaml` lists.
fn an_untestable_rule() -> String {
    let list = Untestable::load(&Path::new(ROOT).join("features/untestable.yaml"))
        .expect("the untestable list loads");
    list.rules.first().expect("an untestable rule").id.clone()
}

/// The run's pending list: two rules its features do not check, each with what it waits for
/// (reports escape nothing in the first words of the reason).
const PENDING: &str =
    "version: 1\npending:\n  - id: realtime.client-recovery-order\n    waits_for: \
    a browser the reports test does not start (it checks how pending rules are reported)\n  - id: \
    realtime.notice-recovery-via-refetch\n    waits_for: the same browser\n";

/// Where the run's pending list is written.
fn pending_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("reports-test/pending.yaml")
}

/// Every rule the run's pending list names (none has a scenario in the run's features).
fn pending_rules() -> Pending {
    Pending::load(&pending_path()).expect("the pending list loads")
}

/// The first rule the run's pending list names: its id and what it waits for.
fn a_pending_rule() -> (String, String) {
    let list = pending_rules();
    let rule = list.rules.first().expect("a pending rule");
    (rule.id.clone(), rule.waits_for.clone())
}

/// The start of `text` that no report escapes (up to 40 characters): to find it in any format.
fn plain_start(text: &str) -> String {
    text.chars()
        .take_while(|c| !"\\`*_[]<>|#~!&\"'".contains(*c))
        .take(40)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// JUnit XML
// ---------------------------------------------------------------------------------------------

/// One element of a parsed XML document: its name, attributes, text and children.
#[derive(Debug, Default, Clone)]
struct Element {
    name: String,
    attrs: Vec<(String, String)>,
    text: String,
    children: Vec<Element>,
}

impl Element {
    fn attr(&self, name: &str) -> &str {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("<{}> has no `{name}`: {self:?}", self.name))
    }

    fn children_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> {
        self.children.iter().filter(move |c| c.name == name)
    }

    fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }
}

/// Parses `xml` into a tree with quick-xml; panics on anything not well-formed.
fn parse_xml(xml: &str) -> Element {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut stack = vec![Element::default()];
    let element = |e: &quick_xml::events::BytesStart| Element {
        name: String::from_utf8_lossy(e.name().as_ref()).into_owned(),
        attrs: e
            .attributes()
            .map(|a| {
                let a = a.expect("a well-formed attribute");
                (
                    String::from_utf8_lossy(a.key.as_ref()).into_owned(),
                    a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                        .expect("a valid attribute value")
                        .into_owned(),
                )
            })
            .collect(),
        ..Element::default()
    };
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => stack.push(element(&e)),
            Ok(Event::Empty(e)) => {
                let done = element(&e);
                stack.last_mut().expect("a parent").children.push(done);
            }
            Ok(Event::End(_)) => {
                let done = stack.pop().expect("an open element");
                stack.last_mut().expect("a parent").children.push(done);
            }
            Ok(Event::Text(t)) => {
                let text = t.xml10_content().expect("UTF-8 text");
                stack.last_mut().expect("an element").text.push_str(&text);
            }
            Ok(Event::GeneralRef(r)) => {
                let resolved = match r.resolve_char_ref().expect("a valid character reference") {
                    Some(c) => c.to_string(),
                    None => {
                        let name = r.decode().expect("UTF-8").into_owned();
                        quick_xml::escape::resolve_predefined_entity(&name)
                            .unwrap_or_else(|| panic!("unknown entity `&{name};`"))
                            .to_owned()
                    }
                };
                stack
                    .last_mut()
                    .expect("an element")
                    .text
                    .push_str(&resolved);
            }
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!(
                "the JUnit report is not well-formed XML at byte {}: {e}\n{xml}",
                reader.error_position()
            ),
        }
    }
    assert_eq!(stack.len(), 1, "unclosed elements in\n{xml}");
    let mut root = stack.pop().expect("the document");
    assert_eq!(root.children.len(), 1, "one root element:\n{xml}");
    root.children.pop().expect("the root")
}

#[test]
fn junit_has_one_testcase_per_scenario_with_rules_failures_and_times() {
    let r = reports();
    let xml = r.read("junit.xml");
    let root = parse_xml(&xml);
    assert_eq!(root.name, "testsuites");
    assert_eq!(root.attr("tests"), "3", "{xml}");
    assert_eq!(root.attr("failures"), "1", "{xml}");
    assert_eq!(root.attr("errors"), "0", "{xml}");
    assert_eq!(root.attr("skipped"), "1", "{xml}");
    let suites: Vec<&Element> = root.children_named("testsuite").collect();
    assert_eq!(suites.len(), 1, "{xml}");
    let suite = suites[0];
    let feature = suite.attr("name");
    assert!(
        r.is_feature(feature),
        "the suite is the feature file: {xml}"
    );
    assert_eq!(suite.attr("tests"), "3");
    assert_eq!(suite.attr("failures"), "1");
    assert_eq!(suite.attr("skipped"), "1");
    let cases: Vec<&Element> = suite.children_named("testcase").collect();
    assert_eq!(cases.len(), 3, "{xml}");
    let case = |name: &str| {
        let wanted = format!("{name} (line {})", r.line(name));
        *cases
            .iter()
            .find(|c| c.attr("name") == wanted)
            .unwrap_or_else(|| panic!("no test case `{wanted}` in\n{xml}"))
    };
    for c in &cases {
        assert_eq!(c.attr("classname"), feature);
        let time: f64 = c.attr("time").parse().expect("a time in seconds");
        assert!(time > 0.0, "a scenario that ran took time: {c:?}");
    }
    let rules = |c: &Element| -> Vec<String> {
        c.child("properties")
            .map(|p| {
                p.children_named("property")
                    .filter(|p| p.attr("name") == "rule")
                    .map(|p| p.attr("value").to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let passing = case(PASSING);
    assert_eq!(
        rules(passing),
        ["apply.tombstone-suffix", "sem.tombstone-target-and-suffix"]
    );
    assert!(passing.child("failure").is_none() && passing.child("skipped").is_none());
    let failing = case(FAILING);
    assert_eq!(rules(failing), ["init.human-only"]);
    let failure = failing
        .child("failure")
        .unwrap_or_else(|| panic!("the failing scenario has a <failure>: {xml}"));
    assert_eq!(failure.attr("type"), "failed");
    assert!(
        failure.attr("message").contains("the rewind completes"),
        "{failure:?}"
    );
    assert!(
        failure
            .text
            .contains("expected the rewind to complete, but the rewind was refused"),
        "the failure text says expected and actual: {failure:?}"
    );
    let known = case(KNOWN);
    let skipped = known
        .child("skipped")
        .unwrap_or_else(|| panic!("the expected failure is <skipped>: {xml}"));
    assert!(
        skipped
            .attr("message")
            .contains("a deliberate failure of the reports test"),
        "{skipped:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// results.json
// ---------------------------------------------------------------------------------------------

#[test]
fn results_json_fits_its_schema_and_carries_durations_and_rule_statuses() {
    let r = reports();
    let text = r.read("results.json");
    let results: serde_json::Value = serde_json::from_str(&text).expect("results.json is JSON");
    let schema_text = std::fs::read_to_string(Path::new(ROOT).join("schemas/results.schema.json"))
        .expect("schemas/results.schema.json is committed");
    let schema: serde_json::Value = serde_json::from_str(&schema_text).expect("the schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let problems: Vec<String> = validator
        .iter_errors(&results)
        .map(|e| format!("at `{}`: {e}", e.instance_path()))
        .collect();
    assert!(
        problems.is_empty(),
        "results.json does not fit the schema:\n{}",
        problems.join("\n")
    );
    assert_eq!(results["version"], 2);
    assert_eq!(results["summary"]["outcome"], "failed");
    let scenarios = results["scenarios"].as_array().expect("scenarios");
    assert_eq!(scenarios.len(), 3);
    let scenario = |name: &str| {
        scenarios
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no scenario `{name}` in {text}"))
    };
    for s in scenarios {
        assert!(
            s["durationMs"].as_u64().is_some_and(|ms| ms > 0),
            "every scenario that ran has its wall time: {s}"
        );
    }
    assert_eq!(scenario(PASSING)["verdict"], "passed");
    assert_eq!(scenario(FAILING)["verdict"], "failed");
    assert_eq!(
        scenario(FAILING)["rules"],
        serde_json::json!(["init.human-only"])
    );
    assert_eq!(scenario(KNOWN)["verdict"], "expected_failure");
    let rules = results["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), catalog().rules().len(), "one record per rule");
    let status = |id: &str| {
        rules
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no rule `{id}`"))["status"]
            .as_str()
            .expect("a status")
            .to_owned()
    };
    assert_eq!(status("apply.tombstone-suffix"), "pass");
    assert_eq!(status("init.human-only"), "fail");
    assert_eq!(status("init.own-human-target"), "expected_fail");
    assert_eq!(status(&an_untestable_rule()), "untestable");
    // A rule `features/pending.yaml` lists is pending, with what it waits for.
    let (pending, waits_for) = a_pending_rule();
    assert_eq!(status(&pending), "pending");
    let record = rules
        .iter()
        .find(|r| r["id"] == pending.as_str())
        .expect("the pending rule");
    assert_eq!(record["waitsFor"], waits_for.as_str(), "{record}");
    assert_eq!(
        results["summary"]["rules"]["pending"],
        pending_rules().rules.len(),
        "every listed rule is pending"
    );
    // The run's features check no other rule.
    assert_eq!(status("sem.runtime-restore-first"), "uncovered");
    // `compare` reads it.
    let path = r.dir.join("results.json");
    let path = path.to_str().expect("UTF-8");
    let same = run_command(BIN, &["compare", path, path], Duration::from_secs(30));
    assert_eq!(same.code, Some(0), "{}", same.describe());
    assert!(
        same.stdout.contains("every outcome is the same"),
        "{}",
        same.describe()
    );
}

// ---------------------------------------------------------------------------------------------
// Markdown
// ---------------------------------------------------------------------------------------------

#[test]
fn markdown_summary_puts_counts_and_failures_first_and_folds_the_matrix() {
    let r = reports();
    let md = r.read("summary.md");
    assert!(
        md.starts_with("## ❌ Rewind conformance of `reference`: FAILED"),
        "{md}"
    );
    let at = |needle: &str| {
        md.find(needle)
            .unwrap_or_else(|| panic!("the summary has no `{needle}`:\n{md}"))
    };
    let counts = at("| passed | failed |");
    let failures = at("### Failures (1)");
    let failing = at(&format!("/reports.feature:{}`** ", r.line(FAILING)));
    let matrix = at("<details><summary>Rule matrix: ");
    assert!(
        counts < failures && failures < failing && failing < matrix,
        "{md}"
    );
    assert!(md.contains("| 1 | 1 | 0 | 0 | 0 | 1 | 0 |"), "{md}");
    assert!(md.contains("<br>rules: `init.human-only`"), "{md}");
    assert!(
        md.contains("expected the rewind to complete, but the rewind was refused"),
        "{md}"
    );
    assert!(md.contains("| `init.human-only` | 3 | **fail** |"), "{md}");
    let (pending, waits_for) = a_pending_rule();
    let section = catalog()
        .rules()
        .iter()
        .find(|rule| rule.id == pending)
        .expect("the pending rule is in the catalog")
        .section
        .clone();
    let row = format!(
        "| `{pending}` | {section} | pending | waits for {}",
        plain_start(&waits_for)
    );
    assert!(md.contains(&row), "no `{row}` in\n{md}");
    assert!(md.trim_end().ends_with("</details>"), "{md}");
    for (name, title) in [
        ("fault-matrix.md", "# Runtime restore fault matrix"),
        ("compat-matrix.md", "# Runtime compatibility"),
    ] {
        assert!(r.read(name).starts_with(title), "{name}");
    }
}

// ---------------------------------------------------------------------------------------------
// The rule matrix page, in a real browser
// ---------------------------------------------------------------------------------------------

/// Chromium, or `None` (after saying so on stderr) when there is none and `CI` is not `true`.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("REWIND_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if path.is_file() {
        return Some(path);
    }
    optional_tool::missing(
        "the browser check of rules.html",
        "Chromium",
        &format!(
            "there is none at `{}`; install it with `apt-get install -y chromium` (Debian; \
             `.ci/run` does) or point REWIND_CHROMIUM at another Chromium",
            path.display()
        ),
    );
    None
}

/// Runs headless Chromium on `url` with `extra` options, in a fresh profile directory.
fn headless(chromium: &Path, extra: &[&str], url: &str) -> Finished {
    let profile = tempfile::Builder::new()
        .prefix("reports-chromium-")
        .tempdir()
        .expect("a profile directory");
    let user_data = format!("--user-data-dir={}", profile.path().display());
    let mut args = vec![
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        &user_data,
    ];
    args.extend_from_slice(extra);
    args.push(url);
    let finished = run_command(chromium.to_str().expect("UTF-8"), &args, BROWSER_LIMIT);
    assert_eq!(
        finished.code,
        Some(0),
        "chromium {args:?} failed: {}",
        finished.describe()
    );
    finished
}

/// The value of attribute `name` in the start tag `tag`.
fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let end = start + tag[start..].find('"')?;
    Some(&tag[start..end])
}

#[test]
fn rules_html_shows_every_rule_with_its_status_in_a_browser() {
    let r = reports();
    let page = r.dir.join("rules.html");
    let html = r.read("rules.html");
    // Self-contained: nothing is loaded from anywhere.
    for needle in [" src=", "<link", "@import", "url("] {
        assert!(
            !html.contains(needle),
            "rules.html loads something: `{needle}`"
        );
    }
    let Some(chromium) = chromium() else { return };
    let url = format!("file://{}", page.display());
    let dom = headless(&chromium, &["--dump-dom"], &url).stdout;
    assert!(
        dom.contains("data-ready=\"yes\""),
        "the page's script ran to its end:\n{dom}"
    );
    let catalog = catalog();
    let total = catalog.rules().len();
    assert!(
        dom.contains(&format!("<span id=\"shown\">{total}</span>")),
        "the script counted {total} rules shown:\n{dom}"
    );
    assert!(dom.contains("<table id=\"rules\">"), "{dom}");
    let rows: Vec<(String, String)> = dom
        .match_indices("<tr ")
        .map(|(at, _)| &dom[at..at + dom[at..].find('>').expect("a closed start tag")])
        .filter(|tag| attribute(tag, "class").is_some_and(|c| c.split(' ').any(|w| w == "rule")))
        .map(|tag| {
            (
                attribute(tag, "data-rule").expect("data-rule").to_owned(),
                attribute(tag, "data-status")
                    .expect("data-status")
                    .to_owned(),
            )
        })
        .collect();
    assert_eq!(rows.len(), total, "one row per catalog rule");
    let ids: Vec<&str> = rows.iter().map(|(id, _)| id.as_str()).collect();
    for rule in catalog.rules() {
        assert!(ids.contains(&rule.id.as_str()), "no row for `{}`", rule.id);
    }
    let status = |id: &str| {
        rows.iter()
            .find(|(r, _)| r == id)
            .map(|(_, s)| s.as_str())
            .unwrap_or_else(|| panic!("no row `{id}`"))
    };
    assert_eq!(status("apply.tombstone-suffix"), "pass");
    assert_eq!(status("init.human-only"), "fail");
    assert_eq!(status("init.own-human-target"), "expected_fail");
    assert_eq!(status(&an_untestable_rule()), "untestable");
    assert_eq!(status("sem.runtime-restore-first"), "uncovered");
    // The pending rule, with what it waits for in its row.
    let (pending, waits_for) = a_pending_rule();
    assert_eq!(status(&pending), "pending");
    let row = &dom[dom
        .find(&format!("data-rule=\"{pending}\""))
        .expect("the pending row")..];
    let row = &row[..row.find("</tr>").expect("the row's end")];
    let reason = format!(
        "<span class=\"reason\">waits for {}",
        plain_start(&waits_for)
    );
    assert!(row.contains(&reason), "no `{reason}` in\n{row}");
    // The failing scenario's name, escaped, in the failing rule's row.
    assert!(
        dom.contains("an agent's rewind &lt;completes&gt; &amp; \"fails\""),
        "{dom}"
    );
    // The filter from the address: only the failing rule is shown.
    let filtered = headless(&chromium, &["--dump-dom"], &format!("{url}#status=fail")).stdout;
    assert!(
        filtered.contains("<span id=\"shown\">1</span>"),
        "#status=fail shows the one failing rule:\n{filtered}"
    );
    let listed = pending_rules().rules.len();
    let filtered = headless(&chromium, &["--dump-dom"], &format!("{url}#status=pending")).stdout;
    assert!(
        filtered.contains(&format!("<span id=\"shown\">{listed}</span>")),
        "#status=pending shows the {listed} pending rules:\n{filtered}"
    );
    // A screenshot of the page is far from blank: much larger than one of an empty page.
    let shots = tempfile::tempdir().expect("a directory for screenshots");
    let shot = |name: &str, url: &str| {
        let path = shots.path().join(name);
        let option = format!("--screenshot={}", path.display());
        headless(&chromium, &[&option, "--window-size=1280,1600"], url);
        let png = std::fs::read(&path).unwrap_or_else(|e| panic!("no screenshot: {e}"));
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
        let width = u32::from_be_bytes(png[16..20].try_into().expect("4 bytes"));
        let height = u32::from_be_bytes(png[20..24].try_into().expect("4 bytes"));
        assert_eq!((width, height), (1280, 1600), "the window's size");
        png.len()
    };
    let blank = shot("blank.png", "about:blank");
    let page = shot("page.png", &url);
    assert!(
        page > blank * 5,
        "the page's screenshot ({page} bytes) is not much larger than a blank one ({blank} \
         bytes): it did not render"
    );
}

// ---------------------------------------------------------------------------------------------
// Report paths are checked before PostgreSQL starts
// ---------------------------------------------------------------------------------------------

/// Runs the harness with `args` and expects exit 2 within seconds, its stderr holding
/// `needles`.
fn refused(args: &[&str], needles: &[&str]) {
    let started = Instant::now();
    let finished = run_command(BIN, args, Duration::from_secs(60));
    assert_eq!(finished.code, Some(2), "{}", finished.describe());
    for needle in needles {
        assert!(
            finished.stderr.contains(needle),
            "stderr does not say `{needle}`: {}",
            finished.describe()
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "refused before PostgreSQL starts: {}",
        finished.describe()
    );
}

#[test]
fn exit_2_for_a_report_dir_that_is_a_file() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let file = tmp.path().join("file");
    std::fs::write(&file, "a regular file").expect("a file");
    let file = file.to_str().expect("UTF-8");
    refused(
        &[
            "run",
            "--name",
            "^an agent cannot initiate a rewind$",
            "--report-dir",
            file,
        ],
        &[&format!(
            "`--report-dir {file}` cannot be written: `{file}` is not a directory"
        )],
    );
    assert_eq!(
        std::fs::read_to_string(file).expect("still there"),
        "a regular file"
    );
}

#[test]
fn exit_2_for_a_report_of_the_dir_that_is_a_directory() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let taken = tmp.path().join("rules.html");
    std::fs::create_dir(&taken).expect("a directory where the page goes");
    let dir = tmp.path().to_str().expect("UTF-8");
    refused(
        &[
            "run",
            "--name",
            "^an agent cannot initiate a rewind$",
            "--report-dir",
            dir,
        ],
        &[&format!(
            "`--report-dir {dir}` cannot be written: `{}` is a directory",
            taken.display()
        )],
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("readable")
        .map(|e| e.expect("an entry").file_name())
        .collect();
    assert_eq!(left, ["rules.html"], "the check leaves no file behind");
}

#[test]
fn exit_2_for_html_and_markdown_paths_inside_a_file() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let file = tmp.path().join("file");
    std::fs::write(&file, "x").expect("a file");
    for flag in ["--html", "--markdown"] {
        let path = file.join("report");
        let path = path.to_str().expect("UTF-8");
        refused(
            &[
                "run",
                "--name",
                "^an agent cannot initiate a rewind$",
                flag,
                path,
            ],
            &[
                &format!("`{flag} {path}` cannot be written"),
                &format!("`{}` is not a directory", file.display()),
            ],
        );
    }
}
