//! `rewind-conformance compare` on small results files written here: the runtime compatibility
//! of two runs side by side (the table, `--compat-matrix`), what is a divergence and what is
//! not (call counts, a step one run did not exercise), the exit codes, `--compat-only`, and
//! files without compatibility rows, which compare as they always did.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::finished;
use finished::Finished;

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rewind-conformance");

/// A scenario record with this name and verdict.
fn scenario(name: &str, verdict: &str) -> Value {
    json!({
        "feature": "features/runtime-recovery.feature",
        "line": 10,
        "name": name,
        "tags": [],
        "verdict": verdict,
        "failure": null,
    })
}

/// A results file of version 2 with these scenarios and compatibility rows.
fn results(scenarios: Vec<Value>, compatibility: Value) -> Value {
    json!({
        "format": "rewind-conformance-results",
        "version": 2,
        "sut": "reference",
        "scenarios": scenarios,
        "compatibility": compatibility,
    })
}

/// One compatibility row.
fn row(runtime: &str, release: &str, steps: Value) -> Value {
    json!({ "runtime": runtime, "release": release, "steps": steps })
}

/// The run on the pinned releases.
fn pinned() -> Value {
    results(
        vec![scenario("codex restores", "passed")],
        json!([
            row(
                "codex",
                "0.171.0 (real)",
                json!({
                    "start": { "works": 3 },
                    "restore": { "works": 1 },
                    "verify": { "works": 2 },
                })
            ),
            row(
                "opencode",
                "1.18.34 (real)",
                json!({
                    "deliver": { "works": 2 },
                    "restore": { "works": 0, "refused": { "409 SessionBusyError": 1 } },
                })
            ),
        ]),
    )
}

/// The same compatibility as [`pinned`] on newer releases: other call counts, a step the
/// pinned run did not exercise, a runtime it did not start.
fn latest_alike() -> Value {
    results(
        vec![scenario("codex restores", "passed")],
        json!([
            row(
                "codex",
                "0.172.0 (real)",
                json!({
                    "start": { "works": 5 },
                    "restore": { "works": 1 },
                    "verify": { "works": 4 },
                    "continue": { "works": 1 },
                })
            ),
            row(
                "opencode",
                "1.18.35 (real)",
                json!({
                    "deliver": { "works": 3 },
                    "restore": { "works": 0, "refused": { "409 SessionBusyError": 2 } },
                })
            ),
            row(
                "claude",
                "2.1.333 (real)",
                json!({ "deliver": { "works": 1 } })
            ),
        ]),
    )
}

/// [`pinned`] where the newer Codex refuses the restore and OpenCode refuses another way.
fn latest_diverging() -> Value {
    results(
        vec![scenario("codex restores", "passed")],
        json!([
            row(
                "codex",
                "0.172.0 (real)",
                json!({
                    "start": { "works": 3 },
                    "restore": {
                        "works": 0,
                        "refused": { "Invalid request: unknown variant `thread/revert`": 1 }
                    },
                })
            ),
            row(
                "opencode",
                "1.18.35 (real)",
                json!({
                    "deliver": { "works": 2 },
                    "restore": { "works": 0, "refused": { "423 SessionLockedError": 1 } },
                })
            ),
        ]),
    )
}

struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            dir: tempfile::Builder::new()
                .prefix("compare-")
                .tempdir()
                .expect("a temporary directory"),
        }
    }

    /// Writes `value` as `name` in the scratch directory.
    fn file(&self, name: &str, value: &Value) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, serde_json::to_string_pretty(value).expect("JSON"))
            .expect("writing a results file");
        path
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Runs `compare` with `args` in `dir` (so that the files are named as written there).
fn compare(dir: &Path, args: &[&str]) -> Finished {
    let out = Command::new(BIN)
        .current_dir(dir)
        .arg("compare")
        .args(args)
        .output()
        .expect("running the harness");
    Finished {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn the_table_sets_both_runs_side_by_side_and_counts_alone_are_no_divergence() {
    let scratch = Scratch::new();
    scratch.file("pinned.json", &pinned());
    scratch.file("latest.json", &latest_alike());
    let done = compare(
        scratch.path(),
        &[
            "pinned.json",
            "latest.json",
            "--compat-matrix",
            "out/compat.md",
        ],
    );
    assert_eq!(done.code, Some(0), "{}", done.describe());
    let table = "\
| runtime | step | `pinned.json` | `latest.json` | same? |
|---|---|---|---|---|
| claude | deliver | - | 2.1.333 (real): works (1) | not exercised in `pinned.json` |
| codex | start | 0.171.0 (real): works (3) | 0.172.0 (real): works (5) | yes |
| codex | restore | 0.171.0 (real): works (1) | 0.172.0 (real): works (1) | yes |
| codex | verify | 0.171.0 (real): works (2) | 0.172.0 (real): works (4) | yes |
| codex | continue | - | 0.172.0 (real): works (1) | not exercised in `pinned.json` |
| opencode | deliver | 1.18.34 (real): works (2) | 1.18.35 (real): works (3) | yes |
| opencode | restore | 1.18.34 (real): refused (1): 409 SessionBusyError | 1.18.35 (real): refused (2): 409 SessionBusyError | yes |
";
    assert!(done.stdout.contains(table), "{}", done.describe());
    assert!(
        done.stdout.contains("every outcome is the same"),
        "{}",
        done.describe()
    );
    assert!(
        done.stdout
            .contains("7 runtime steps side by side, none diverges (2 exercised in one run only)"),
        "{}",
        done.describe()
    );
    assert!(!done.stdout.contains("diverges:"), "{}", done.describe());
    let written = std::fs::read_to_string(scratch.path().join("out/compat.md"))
        .expect("--compat-matrix wrote its file");
    assert!(
        written
            .starts_with("# Runtime compatibility side by side: `pinned.json` and `latest.json`\n"),
        "{written}"
    );
    assert!(written.contains(table), "{written}");
    assert!(
        written.trim_end().ends_with("No runtime step diverges."),
        "{written}"
    );
}

#[test]
fn a_step_that_works_in_one_run_only_or_is_refused_otherwise_diverges_and_fails() {
    let scratch = Scratch::new();
    scratch.file("pinned.json", &pinned());
    scratch.file("latest.json", &latest_diverging());
    let done = compare(
        scratch.path(),
        &["pinned.json", "latest.json", "--compat-matrix", "compat.md"],
    );
    assert_eq!(done.code, Some(1), "{}", done.describe());
    let codex = "codex restore: 0.171.0 (real) in `pinned.json`: works; 0.172.0 (real) in \
                 `latest.json`: refused: Invalid request: unknown variant `thread/revert`";
    let opencode = "opencode restore: 1.18.34 (real) in `pinned.json`: refused: 409 \
                    SessionBusyError; 1.18.35 (real) in `latest.json`: refused: 423 \
                    SessionLockedError";
    for divergence in [codex, opencode] {
        assert!(
            done.stdout
                .contains(&format!("runtime step diverges: {divergence}\n")),
            "no `{divergence}` in {}",
            done.describe()
        );
    }
    assert!(
        done.stdout.contains(
            "| codex | restore | 0.171.0 (real): works (1) | 0.172.0 (real): refused (1): \
             Invalid request: unknown variant `thread/revert` | **no: diverges** |"
        ),
        "{}",
        done.describe()
    );
    // Same outcome, other counts: not a divergence.
    assert!(
        done.stdout.contains(
            "| codex | start | 0.171.0 (real): works (3) | 0.172.0 (real): works (3) | yes |"
        ),
        "{}",
        done.describe()
    );
    assert!(
        done.stdout
            .contains("5 runtime steps side by side, 2 diverge (1 exercised in one run only)"),
        "{}",
        done.describe()
    );
    // The scenarios are the same: the exit code is the compatibility's alone.
    assert!(
        done.stdout.contains("every outcome is the same"),
        "{}",
        done.describe()
    );
    let written = std::fs::read_to_string(scratch.path().join("compat.md")).expect("compat.md");
    assert!(
        written.contains(&format!(
            "**2 runtime steps diverge:**\n\n- {codex}\n- {opencode}\n"
        )),
        "{written}"
    );
}

#[test]
fn compat_only_leaves_the_verdicts_out() {
    let scratch = Scratch::new();
    scratch.file("pinned.json", &pinned());
    let mut latest = latest_alike();
    latest["scenarios"] = json!([scenario("codex restores", "failed")]);
    scratch.file("latest.json", &latest);
    let all = compare(scratch.path(), &["pinned.json", "latest.json"]);
    assert_eq!(all.code, Some(1), "{}", all.describe());
    assert!(all.stdout.contains("1 differ"), "{}", all.describe());
    let only = compare(
        scratch.path(),
        &["pinned.json", "latest.json", "--compat-only"],
    );
    assert_eq!(only.code, Some(0), "{}", only.describe());
    assert!(
        !only.stdout.contains("scenarios of"),
        "--compat-only compares no scenario: {}",
        only.describe()
    );
    assert!(only.stdout.contains("none diverges"), "{}", only.describe());
    scratch.file("diverging.json", &latest_diverging());
    let diverging = compare(
        scratch.path(),
        &["pinned.json", "diverging.json", "--compat-only"],
    );
    assert_eq!(diverging.code, Some(1), "{}", diverging.describe());
}

#[test]
fn files_without_compatibility_rows_compare_as_before() {
    let scratch = Scratch::new();
    let plain = results(vec![scenario("codex restores", "passed")], json!([]));
    scratch.file("a.json", &plain);
    scratch.file("b.json", &plain);
    scratch.file("pinned.json", &pinned());
    let same = compare(scratch.path(), &["a.json", "b.json"]);
    assert_eq!(same.code, Some(0), "{}", same.describe());
    assert_eq!(
        same.stdout,
        "compared 1 scenarios of `reference` (1 passed) with 1 of `reference` (1 passed): every \
         outcome is the same\n",
        "{}",
        same.describe()
    );
    // One file with rows, one without: said, not counted.
    let one = compare(scratch.path(), &["pinned.json", "b.json"]);
    assert_eq!(one.code, Some(0), "{}", one.describe());
    assert!(
        one.stdout
            .contains("`b.json` carries no compatibility rows: nothing to set side by side."),
        "{}",
        one.describe()
    );
    // --compat-only has nothing to compare then.
    let only = compare(scratch.path(), &["pinned.json", "b.json", "--compat-only"]);
    assert_eq!(only.code, Some(3), "{}", only.describe());
    assert!(
        only.stderr
            .contains("`b.json` carries no compatibility rows"),
        "{}",
        only.describe()
    );
    // An output that cannot be written is a usage error.
    let blocked = compare(
        scratch.path(),
        &[
            "pinned.json",
            "pinned.json",
            "--compat-matrix",
            "a.json/compat.md",
        ],
    );
    assert_eq!(blocked.code, Some(2), "{}", blocked.describe());
    assert!(
        blocked
            .stderr
            .contains("`--compat-matrix a.json/compat.md` cannot be written"),
        "{}",
        blocked.describe()
    );
}
