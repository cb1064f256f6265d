//! `--list`, `--rule` and `--shard I/N`: the N shards of a selection hold every scenario exactly
//! once (checked on the whole shipped suite, for several N), and a sharded run executes exactly
//! the scenarios its shard lists.

#[path = "common/harness_env.rs"]
mod harness_env;

use std::collections::BTreeSet;
use std::process::{Command, Output};

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

#[test]
fn a_sharded_run_executes_exactly_the_scenarios_its_shard_lists() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut executed: Vec<String> = Vec::new();
    for index in 1..=2 {
        let shard = format!("{index}/2");
        let listed = listed(&["--tags", "@bad-read", "--shard", &shard]);
        let json = dir.path().join(format!("shard-{index}.json"));
        let json = json.to_str().expect("utf-8 path");
        let out = harness(&[
            "run",
            "--tags",
            "@bad-read",
            "--shard",
            &shard,
            "--json",
            json,
        ]);
        assert!(
            out.status.success(),
            "shard {shard}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let results: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(json).expect("results")).expect("json");
        let ran: Vec<String> = results["scenarios"]
            .as_array()
            .expect("scenarios")
            .iter()
            .map(|s| format!("{}:{}", s["feature"].as_str().unwrap_or(""), s["line"]))
            .collect();
        let (ran_set, listed_set): (BTreeSet<_>, BTreeSet<_>) =
            (ran.iter().collect(), listed.iter().collect());
        assert_eq!(
            ran_set, listed_set,
            "shard {shard} ran other scenarios than it lists"
        );
        executed.extend(ran);
    }
    let all = listed(&["--tags", "@bad-read"]);
    let (executed, all): (BTreeSet<_>, BTreeSet<_>) =
        (executed.iter().collect(), all.iter().collect());
    assert_eq!(
        executed, all,
        "the two shards together ran the whole selection"
    );
}

#[test]
fn an_expected_failure_run_by_another_shard_is_not_stale_in_this_one() {
    // The first shard's scenarios, and one of the second shard's by name.
    let second = listed(&["--tags", "@bad-read", "--shard", "2/2"]);
    let line: usize = second[0]
        .rsplit(':')
        .next()
        .and_then(|l| l.parse().ok())
        .expect("feature:line");
    let text = std::fs::read_to_string(format!("{ROOT}/features/read-surfaces.feature"))
        .expect("the feature");
    // The example row's case names the scenario: `a bad read is answered, not failed: <case>`.
    let row = text.lines().nth(line - 1).expect("the row");
    let case = row.split('|').nth(1).expect("a case cell").trim();
    let dir = tempfile::tempdir().expect("temp dir");
    let expectations = dir.path().join("expectations.yaml");
    std::fs::write(
        &expectations,
        format!(
            "expected_failures:\n  - scenario: \"features/read-surfaces.feature: a bad read is \
             answered, not failed: {case}\"\n    reason: run by the other shard\n"
        ),
    )
    .expect("written");
    let out = harness(&[
        "run",
        "--tags",
        "@bad-read",
        "--shard",
        "1/2",
        "--expectations",
        expectations.to_str().expect("utf-8 path"),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "shard 1/2 complained about shard 2/2's expected failure: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("names no scenario"), "{stdout}");
}
