//! A scenario's verdict does not depend on which other scenarios ran: the same implementation
//! run on a whole feature, on each of its scenarios alone, filtered by tag, rule and name, and
//! in 4 shards gives every scenario the same verdict, expectations file included.
//!
//! The implementation is the reference in its alternative variant, which words the refusal of
//! a non-human initiator (unworded by the spec, register entry `unworded-refusals`) with a
//! section 9 message under a code of its own. That must cost nothing: no scenario fails for it,
//! whichever scenarios run beside it. A capability profile declares one refusal code the
//! variant does not answer, so that some scenarios fail, in every selection alike; an
//! expectations file names one of them, which is then an expected failure in every selection.

use crate::common::harness_env;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_rewind-conformance");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const FEATURE: &str = "features/initiation.feature";
/// The scenario the declared code makes fail, which the expectations file names.
const EXPECTED: &str = "a later message of another human blocks the rewind";

struct Setup {
    dir: tempfile::TempDir,
    /// One PostgreSQL server for every run (each run makes and drops databases of its own on
    /// it, under its own key), and the runtime that started it.
    server: Option<rewind_conformance::postgres::PostgresServer>,
    runtime: tokio::runtime::Runtime,
    url: String,
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            self.runtime.block_on(server.shutdown());
        }
    }
}

/// How many runs of the harness go at once.
const RUNS_AT_ONCE: usize = 4;

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(
            dir.path().join("profile.yaml"),
            "runtimes: [codex, claude, opencode, builtin]\n\
             surfaces: []\n\
             errorCodes:\n  err.other-human-message: other_human_message\n",
        )
        .expect("profile written");
        std::fs::write(
            dir.path().join("expectations.yaml"),
            format!(
                "expected_failures:\n  - scenario: \"{FEATURE}: {EXPECTED}\"\n    reason: the \
                 variant's code is not the declared one\n"
            ),
        )
        .expect("expectations written");
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        let server = runtime
            .block_on(rewind_conformance::postgres::PostgresServer::provision(
                &rewind_conformance::postgres::PostgresChoice::Embedded,
            ))
            .expect("an embedded PostgreSQL");
        Setup {
            dir,
            url: server.admin_url().to_owned(),
            server: Some(server),
            runtime,
        }
    }

    /// [`Setup::verdicts`] of every `(label, selection)`, [`RUNS_AT_ONCE`] runs at a time.
    fn all_verdicts(&self, runs: &[(String, Vec<String>)]) -> Vec<BTreeMap<String, String>> {
        let mut out = Vec::new();
        for chunk in runs.chunks(RUNS_AT_ONCE) {
            let done: Vec<_> = std::thread::scope(|scope| {
                let handles: Vec<_> = chunk
                    .iter()
                    .map(|(label, selection)| {
                        scope.spawn(move || {
                            let selection: Vec<&str> =
                                selection.iter().map(String::as_str).collect();
                            self.verdicts(label, &selection)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                    .collect()
            });
            out.extend(done);
        }
        out
    }

    fn path(&self, name: &str) -> String {
        self.dir
            .path()
            .join(name)
            .to_str()
            .expect("utf-8")
            .to_owned()
    }

    /// Runs the harness on the feature with `selection`; the verdict of each scenario run,
    /// by `feature:line`.
    fn verdicts(&self, label: &str, selection: &[&str]) -> BTreeMap<String, String> {
        let json = self.path(&format!("{label}.json"));
        let (profile, expectations) = (self.path("profile.yaml"), self.path("expectations.yaml"));
        let mut args = vec![
            "run",
            "--features",
            FEATURE,
            "--profile",
            &profile,
            "--expectations",
            &expectations,
            "--json",
            &json,
            "--database-url",
            &self.url,
        ];
        args.extend_from_slice(selection);
        let out = harness(&args);
        let code = out.status.code();
        assert!(
            matches!(code, Some(0 | 1)),
            "{label}: `{}` exited {code:?}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let results: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).expect("results")).expect("json");
        results["scenarios"]
            .as_array()
            .expect("scenarios")
            .iter()
            .map(|s| {
                (
                    format!("{}:{}", s["feature"].as_str().unwrap_or(""), s["line"]),
                    s["verdict"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    }
}

/// The harness, from the crate root, with none of the environment the harness reads, on the
/// reference's alternative variant.
fn harness(args: &[&str]) -> Output {
    let mut command = Command::new(BIN);
    command.current_dir(ROOT).args(args);
    harness_env::clean(&mut command);
    command.env("REWIND_REFERENCE_VARIANT", "alternative");
    command.output().expect("the harness runs")
}

/// Every verdict of `part` is the full run's.
fn same_as_full(full: &BTreeMap<String, String>, part: &BTreeMap<String, String>, label: &str) {
    assert!(!part.is_empty(), "{label} ran no scenario");
    for (scenario, verdict) in part {
        assert_eq!(
            full.get(scenario),
            Some(verdict),
            "{label}: {scenario} got `{verdict}`, the full run gave it {:?}",
            full.get(scenario)
        );
    }
}

#[test]
fn every_scenario_gets_the_same_verdict_alone_filtered_sharded_and_in_the_full_run() {
    let setup = Setup::new();
    let full = setup.verdicts("full", &[]);
    assert!(full.len() >= 10, "{full:?}");
    let count = |v: &str| full.values().filter(|x| *x == v).count();
    // The unworded refusal's reused message costs nothing; the declared code fails its
    // scenarios, one of them as the expectations file says.
    assert!(count("expected_failure") == 1, "{full:?}");
    assert!(count("passed") >= 8, "{full:?}");
    assert_eq!(
        count("passed") + count("failed") + count("expected_failure"),
        full.len(),
        "{full:?}"
    );

    let owned =
        |label: String, args: &[&str]| (label, args.iter().map(|a| (*a).to_owned()).collect());
    let shards: Vec<(String, Vec<String>)> = (1..=4)
        .map(|index| {
            owned(
                format!("shard-{index}"),
                &["--shard", &format!("{index}/4")],
            )
        })
        .collect();
    let mut sharded = BTreeMap::new();
    for ((label, _), part) in shards.iter().zip(setup.all_verdicts(&shards)) {
        same_as_full(&full, &part, label);
        sharded.extend(part);
    }
    assert_eq!(sharded, full, "the 4 shards together are the full run");

    let filtered: Vec<(String, Vec<String>)> = [
        ("tags", &["--tags", "@rule:init.human-only"][..]),
        ("rule", &["--rule", "init.own-human-target"][..]),
        ("name", &["--name", "another human"][..]),
        (
            "tags-or",
            &[
                "--tags",
                "@rule:err.other-human-message or @rule:init.human-only",
            ][..],
        ),
    ]
    .into_iter()
    .map(|(label, args)| owned(label.to_owned(), args))
    .collect();
    for ((label, _), part) in filtered.iter().zip(setup.all_verdicts(&filtered)) {
        same_as_full(&full, &part, label);
    }

    // Each scenario alone (the lines of an outline's examples share its name; run by line).
    let text = std::fs::read_to_string(Path::new(ROOT).join(FEATURE)).expect("feature");
    let names: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Scenario: "))
        .map(|n| format!("^{}$", regex_escape(n)))
        .collect();
    assert!(names.len() >= 8, "{names:?}");
    let alone: Vec<(String, Vec<String>)> = names
        .iter()
        .enumerate()
        .map(|(i, name)| owned(format!("alone-{i}"), &["--name", name]))
        .collect();
    for ((_, args), part) in alone.iter().zip(setup.all_verdicts(&alone)) {
        let name = &args[1];
        assert_eq!(part.len(), 1, "`--name {name}` selects one scenario");
        same_as_full(&full, &part, &format!("alone {name}"));
    }
}

/// `text` as a regex that matches it literally.
fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}
