//! `--list`, `--rule` and `--shard I/N`: the N shards of a selection hold every scenario exactly
//! once (checked on the whole shipped suite, for several N), and a sharded run executes exactly
//! the scenarios its shard lists; `merge` makes the shards' results into the reports the whole
//! run writes (checked on a small selection run whole and in two shards), which fit the schema
//! and balance the next split, and refuses files that are not the shards of one run, saying
//! what is wrong in which file.

use crate::common::harness_env;

use crate::common::first_difference;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const BIN: &str = env!("CARGO_BIN_EXE_rewind-conformance");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The harness, from the crate root, with none of the environment the harness reads.
fn harness(args: &[&str]) -> Output {
    let mut command = Command::new(BIN);
    command.current_dir(ROOT).args(args);
    harness_env::clean(&mut command);
    command.output().expect("the harness runs")
}

/// The `feature:line` of every scenario `--list` prints.
fn listed(args: &[&str]) -> Vec<String> {
    let mut all = vec!["run", "--list"];
    all.extend_from_slice(args);
    let out = harness(&all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "`{}` failed: {}{}",
        all.join(" "),
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().next().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn the_shards_of_the_whole_suite_hold_every_scenario_exactly_once() {
    let all = listed(&[]);
    assert!(
        all.len() > 100,
        "the shipped suite lists {} scenarios",
        all.len()
    );
    let unique: BTreeSet<&String> = all.iter().collect();
    assert_eq!(unique.len(), all.len(), "a scenario is listed twice");
    for count in [2, 4, 7] {
        let mut seen: Vec<String> = Vec::new();
        let mut sizes = Vec::new();
        for index in 1..=count {
            let shard = listed(&["--shard", &format!("{index}/{count}")]);
            sizes.push(shard.len());
            seen.extend(shard);
        }
        let union: BTreeSet<&String> = seen.iter().collect();
        assert_eq!(
            seen.len(),
            all.len(),
            "{count} shards hold {sizes:?} scenarios"
        );
        assert_eq!(union, unique, "{count} shards do not partition the suite");
        let (min, max) = (sizes.iter().min(), sizes.iter().max());
        assert!(
            max.zip(min).is_some_and(|(max, min)| max - min <= 1),
            "without durations the shards differ by at most one scenario: {sizes:?}"
        );
    }
    // The same split, asked twice.
    assert_eq!(listed(&["--shard", "3/4"]), listed(&["--shard", "3/4"]));
}

#[test]
fn rule_filters_and_bad_shards_are_checked_before_anything_starts() {
    let by_rule = listed(&["--rule", "surface.history-authority"]);
    let by_tag = listed(&["--tags", "@rule:surface.history-authority"]);
    assert!(!by_rule.is_empty());
    assert_eq!(by_rule, by_tag);
    let both = listed(&[
        "--rule",
        "surface.history-authority",
        "--rule",
        "guard.receive-invisible",
    ]);
    assert!(both.len() > by_rule.len());

    for (args, needle) in [
        (
            vec!["run", "--list", "--rule", "no.such-rule"],
            "names no rule",
        ),
        (vec!["run", "--list", "--shard", "5/4"], "is not a shard"),
        (vec!["run", "--list", "--shard", "0/4"], "is not a shard"),
        (
            vec!["run", "--list", "--tags", "@bad-read", "--shard", "9/9"],
            "holds no scenario",
        ),
        (vec!["run", "--list", "--durations", "x.json"], "--shard"),
        (
            vec!["run", "--list", "--runtime-release", "claude=2.1.197"],
            "add `--runtimes real`",
        ),
        (
            vec![
                "run",
                "--list",
                "--runtimes",
                "real",
                "--runtime-release",
                "gemini=1.0",
            ],
            "`gemini` is not a runtime",
        ),
        (
            vec![
                "run",
                "--list",
                "--runtimes",
                "real",
                "--runtime-release",
                "codex",
            ],
            "expected `latest` or RUNTIME=VERSION",
        ),
        (
            vec!["run", "--list", "--runtime-host", "docker:box"],
            "`--runtime-host` says where real runtimes run: add `--runtimes real`",
        ),
        (
            vec![
                "run",
                "--list",
                "--runtimes",
                "real",
                "--runtime-host",
                "ssh:box",
            ],
            "`ssh:box` is not a runtime host",
        ),
    ] {
        let out = harness(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "`{}`: {stderr}", args.join(" "));
        assert!(stderr.contains(needle), "`{}`: {stderr}", args.join(" "));
    }
}

/// The selection the runs below split: six outline examples, a second or two each run.
const TAGS: &str = "@bad-read";

/// The runs the merge checks read: the selection run whole and in two shards, every run with
/// `--report-dir` and with an expectations file that lists a scenario of the second shard as a
/// known failure (it passes: an unexpected pass fails the whole run and the second shard, and
/// the first shard must not call it stale).
struct SplitRun {
    dir: tempfile::TempDir,
    /// What each shard lists (`feature:line`).
    listed: [Vec<String>; 2],
    /// The expected failure's `feature:line`.
    expected_failure: String,
    whole: Output,
    shards: [Output; 2],
}

impl SplitRun {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn arg(&self, name: &str) -> String {
        self.path(name).to_str().expect("UTF-8 path").to_owned()
    }

    fn json(&self, name: &str) -> serde_json::Value {
        let path = self.path(name);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("no `{}`: {e}", path.display()));
        serde_json::from_str(&text).expect("JSON")
    }
}

fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn split_run() -> &'static SplitRun {
    static RUN: OnceLock<SplitRun> = OnceLock::new();
    RUN.get_or_init(|| {
        let listed = [1, 2].map(|i| listed(&["--tags", TAGS, "--shard", &format!("{i}/2")]));
        // The first scenario of the second shard, by name: the example row's case names it
        // (`a bad read is answered, not failed: <case>`).
        let line: usize = listed[1][0]
            .rsplit(':')
            .next()
            .and_then(|l| l.parse().ok())
            .expect("feature:line");
        let text = std::fs::read_to_string(format!("{ROOT}/features/read-surfaces.feature"))
            .expect("the feature");
        let row = text.lines().nth(line - 1).expect("the row");
        let case = row.split('|').nth(1).expect("a case cell").trim();
        let dir = tempfile::tempdir().expect("temp dir");
        let expectations = dir.path().join("expectations.yaml");
        std::fs::write(
            &expectations,
            format!(
                "expected_failures:\n  - scenario: \"features/read-surfaces.feature: a bad read \
                 is answered, not failed: {case}\"\n    reason: listed to fail, but it passes\n"
            ),
        )
        .expect("written");
        let run = |report_dir: &str, shard: Option<&str>| {
            let report_dir = dir.path().join(report_dir);
            let mut args = vec![
                "run",
                "--tags",
                TAGS,
                "--expectations",
                expectations.to_str().expect("UTF-8 path"),
                "--report-dir",
                report_dir.to_str().expect("UTF-8 path"),
            ];
            if let Some(shard) = shard {
                args.extend(["--shard", shard]);
            }
            harness(&args)
        };
        let whole = run("whole", None);
        let shards = [run("shard-1", Some("1/2")), run("shard-2", Some("2/2"))];
        SplitRun {
            expected_failure: listed[1][0].clone(),
            listed,
            dir,
            whole,
            shards,
        }
    })
}

/// `feature:line` of every scenario record of a results file.
fn ran(results: &serde_json::Value) -> Vec<String> {
    results["scenarios"]
        .as_array()
        .expect("scenarios")
        .iter()
        .map(|s| format!("{}:{}", s["feature"].as_str().unwrap_or(""), s["line"]))
        .collect()
}

#[test]
fn a_sharded_run_executes_exactly_the_scenarios_its_shard_lists() {
    let r = split_run();
    let mut executed: Vec<String> = Vec::new();
    for (i, out) in r.shards.iter().enumerate() {
        // The second shard holds the unexpected pass; the first does not call its expectation
        // stale (another shard runs that scenario).
        let code = if i == 1 { 1 } else { 0 };
        assert_eq!(
            out.status.code(),
            Some(code),
            "shard {}/2: {}",
            i + 1,
            describe(out)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains("names no scenario"), "{}", describe(out));
        let ran = ran(&r.json(&format!("shard-{}/results.json", i + 1)));
        let (ran_set, listed_set): (BTreeSet<_>, BTreeSet<_>) =
            (ran.iter().collect(), r.listed[i].iter().collect());
        assert_eq!(
            ran_set,
            listed_set,
            "shard {}/2 ran other scenarios than it lists",
            i + 1
        );
        executed.extend(ran);
    }
    let all = listed(&["--tags", TAGS]);
    let (executed, all): (BTreeSet<_>, BTreeSet<_>) =
        (executed.iter().collect(), all.iter().collect());
    assert_eq!(
        executed, all,
        "the two shards together ran the whole selection"
    );
}

/// `text` with the numbers that differ from run to run (wall times, start times) masked.
fn without_times(text: &str) -> String {
    let times = regex::Regex::new(
        r#"(?: time="[0-9.]+"| timestamp="[^"]*"| in [0-9.]+ s|\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2})?)"#,
    )
    .expect("regex");
    times.replace_all(text, "<time>").into_owned()
}

/// A results file without its start and wall times.
fn results_without_times(mut value: serde_json::Value) -> serde_json::Value {
    let object = value.as_object_mut().expect("an object");
    object.remove("startedAt");
    object.remove("durationMs");
    for s in value["scenarios"].as_array_mut().expect("scenarios") {
        s.as_object_mut().expect("a scenario").remove("durationMs");
    }
    value
}

fn schema_problems(value: &serde_json::Value) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(ROOT).join("schemas/results.schema.json"))
        .expect("the schema");
    let schema: serde_json::Value = serde_json::from_str(&text).expect("the schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    validator
        .iter_errors(value)
        .map(|e| format!("at `{}`: {e}", e.instance_path()))
        .collect()
}

#[test]
fn merged_shards_write_the_reports_of_the_whole_run() {
    let r = split_run();
    assert_eq!(r.whole.status.code(), Some(1), "{}", describe(&r.whole));
    let merged = harness(&[
        "merge",
        &r.arg("shard-2/results.json"),
        &r.arg("shard-1/results.json"),
        "--report-dir",
        &r.arg("merged"),
    ]);
    // A shard failed: so does the merge, as the whole run did.
    assert_eq!(merged.status.code(), Some(1), "{}", describe(&merged));
    let stdout = String::from_utf8_lossy(&merged.stdout);
    assert!(
        stdout.contains(&r.expected_failure) && stdout.contains("unexpected pass"),
        "the merge names the failure: {}",
        describe(&merged)
    );
    for name in ["whole", "shard-1", "shard-2", "merged"] {
        let results = r.json(&format!("{name}/results.json"));
        let problems = schema_problems(&results);
        assert!(
            problems.is_empty(),
            "{name}/results.json does not fit the schema:\n{}",
            problems.join("\n")
        );
        assert_eq!(
            results.get("shard").is_some(),
            name.starts_with("shard"),
            "only a shard's results say which shard: {name}"
        );
    }
    assert_eq!(
        results_without_times(r.json("merged/results.json")),
        results_without_times(r.json("whole/results.json")),
        "merged and whole results.json differ"
    );
    for name in [
        "junit.xml",
        "summary.md",
        "rules.html",
        "fault-matrix.md",
        "compat-matrix.md",
    ] {
        let read = |dir: &str| {
            std::fs::read_to_string(r.path(dir).join(name))
                .unwrap_or_else(|e| panic!("no {dir}/{name}: {e}"))
        };
        let (merged, whole) = (
            without_times(&read("merged")),
            without_times(&read("whole")),
        );
        assert!(
            merged == whole,
            "merged and whole {name} differ:\n{}",
            first_difference::first_difference(&whole, &merged)
        );
    }
    // The merged results balance the next split.
    let next = harness(&[
        "run",
        "--list",
        "--tags",
        TAGS,
        "--shard",
        "1/2",
        "--durations",
        &r.arg("merged/results.json"),
    ]);
    assert!(next.status.success(), "{}", describe(&next));
    assert!(
        String::from_utf8_lossy(&next.stderr).contains("recorded work per shard"),
        "{}",
        describe(&next)
    );
}

/// Runs `merge` on `files` (names under the split run's directory), expecting `code` and every
/// one of `needles` on stderr.
fn merge_refused(r: &SplitRun, files: &[&str], extra: &[&str], code: i32, needles: &[&str]) {
    let mut args = vec!["merge".to_owned()];
    args.extend(files.iter().map(|f| r.arg(f)));
    args.extend(extra.iter().map(|e| (*e).to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = harness(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(code),
        "merge {files:?}: {}",
        describe(&out)
    );
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "merge {files:?} does not say `{needle}`: {}",
            describe(&out)
        );
    }
    assert!(!stderr.contains("panicked"), "{}", describe(&out));
}

#[test]
fn merge_says_what_keeps_files_from_being_the_shards_of_one_run_and_where() {
    let r = split_run();
    let (one, two) = ("shard-1/results.json", "shard-2/results.json");
    // A copy of shard 2 changed by `change`, written as `name`.
    let changed = |name: &str, change: &dyn Fn(&mut serde_json::Value)| {
        let mut value = r.json(two);
        change(&mut value);
        std::fs::write(
            r.path(name),
            serde_json::to_string_pretty(&value).expect("JSON"),
        )
        .expect("written");
    };
    merge_refused(r, &[one], &[], 3, &["shard 2/2 is missing", one]);
    merge_refused(r, &[one, one, two], &[], 3, &["shard 1/2 is given 2 times"]);
    merge_refused(
        r,
        &[one, "whole/results.json"],
        &[],
        3,
        &["whole/results.json` is not the results of a shard"],
    );
    std::fs::write(r.path("bad.json"), "{\n  \"format\": \"x\",,\n}\n").expect("written");
    merge_refused(r, &[one, "bad.json"], &[], 3, &["bad.json:2:17: not JSON"]);
    std::fs::write(r.path("typed.json"), "{\"format\": 1}").expect("written");
    merge_refused(
        r,
        &[one, "typed.json"],
        &[],
        3,
        &["typed.json:1:12: not a results file: invalid type: integer `1`"],
    );
    changed("three.json", &|v| v["shard"]["count"] = 3.into());
    merge_refused(
        r,
        &[one, "three.json"],
        &[],
        3,
        &["three.json` (shard 2/3) and", "splits into 3 and 2 shards"],
    );
    changed("suite.json", &|v| {
        v["selection"]["suite"] = "0123456789abcdef".into()
    });
    merge_refused(r, &[one, "suite.json"], &[], 3, &["ran another suite"]);
    changed("tags.json", &|v| v["selection"]["tags"] = "@other".into());
    merge_refused(
        r,
        &[one, "tags.json"],
        &[],
        3,
        &[
            "selected with --tags `@other`, `",
            "with --tags `@bad-read`",
        ],
    );
    changed("split.json", &|v| {
        v["shard"]["split"] = "0123456789abcdef".into();
        v["shard"]["balancedBy"] = "durations".into();
    });
    merge_refused(
        r,
        &[one, "split.json"],
        &[],
        3,
        &["split the selection otherwise", "same `--durations` file"],
    );
    changed("sut.json", &|v| v["sut"] = "another".into());
    merge_refused(r, &[one, "sut.json"], &[], 3, &["ran `another`"]);
    // A scenario of the first shard in the second too, and one the second shard lost.
    let first_scenario = r.json(one)["scenarios"][0].clone();
    changed("twice.json", &|v| {
        let list = v["scenarios"].as_array_mut().expect("scenarios");
        list.push(first_scenario.clone());
        v["shard"]["scenarios"] = list.len().into();
    });
    merge_refused(
        r,
        &[one, "twice.json"],
        &[],
        3,
        &[&format!(
            "`{}:{}` ",
            first_scenario["feature"].as_str().expect("a feature"),
            first_scenario["line"]
        )],
    );
    changed("short.json", &|v| {
        v["scenarios"].as_array_mut().expect("scenarios").pop();
    });
    merge_refused(
        r,
        &[one, "short.json"],
        &[],
        3,
        &["short.json` (shard 2/2) holds 2 scenarios where its split gave it 3"],
    );
    // The merged reports never go over a shard's file (usage: exit 2).
    merge_refused(
        r,
        &[one, two],
        &["--report-dir", &r.arg("shard-1")],
        2,
        &["over the shard"],
    );
}
