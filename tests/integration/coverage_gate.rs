//! The coverage gate (`rewind-conformance coverage --strict`), on the project and on small
//! made-up projects.
//!
//! On the project: every feature parses, every `@rule:` tag names a catalog rule, every rule has
//! a scenario, is listed untestable (with the reason no scenario can check it,
//! `features/untestable.yaml`) or pending (with the work it waits for, `features/pending.yaml`),
//! every section 9 message is asserted verbatim by a `Then` step, and every shipped fixture is
//! used by a scenario.
//!
//! On made-up projects in temporary directories: each kind of hole fails `--strict` (and only
//! warns without it), each mistake in the lists fails always, with a line saying what and where.

use std::path::Path;
use std::process::Command;

use rewind_conformance::catalog::{
    fixture_files, scan_features, Catalog, Coverage, Gate, Pending, Untestable,
};

const BIN: &str = env!("CARGO_BIN_EXE_rewind-conformance");

struct Project {
    catalog: Catalog,
    coverage: Coverage,
    untestable: Untestable,
    pending: Pending,
    gate: Gate,
}

fn load() -> Project {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let catalog = Catalog::load(&root.join("features/rules.yaml")).expect("catalog loads");
    let untestable =
        Untestable::load(&root.join("features/untestable.yaml")).expect("untestable list loads");
    let pending = Pending::load(&root.join("features/pending.yaml")).expect("pending list loads");
    let scan = scan_features(&root.join("features")).expect("features readable");
    let coverage = Coverage::compute(&catalog, &scan);
    let fixtures = fixture_files(&root.join("fixtures")).expect("fixtures readable");
    let gate = Gate::check(
        &catalog,
        &scan,
        &untestable,
        &pending,
        &fixtures,
        &root.join("fixtures"),
    );
    Project {
        catalog,
        coverage,
        untestable,
        pending,
        gate,
    }
}

#[test]
fn every_rule_tag_names_a_catalog_rule() {
    let project = load();
    let failures = project.coverage.hard_failures();
    assert!(
        failures.is_empty(),
        "coverage gate:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_untestable_and_pending_lists_name_catalog_rules_without_a_scenario() {
    let project = load();
    let mut problems = project
        .untestable
        .check(&project.catalog, &project.coverage);
    problems.extend(project.pending.check(
        &project.catalog,
        &project.coverage,
        &project.untestable,
    ));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_rule_has_a_scenario_or_is_untestable_or_pending() {
    let project = load();
    let missing: Vec<String> = project
        .gate
        .unaccounted
        .iter()
        .filter_map(|id| project.catalog.get(id))
        .map(|r| format!("{} (section {}): {}", r.id, r.section, r.text))
        .collect();
    assert!(
        missing.is_empty(),
        "rules without a scenario (write one, or list the rule in features/untestable.yaml with \
         the reason no scenario can check it, or in features/pending.yaml with the work it waits \
         for):\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_error_message_is_asserted_verbatim() {
    let project = load();
    assert!(
        project.coverage.unasserted_messages.is_empty(),
        "error messages no scenario asserts verbatim:\n{}",
        project.coverage.unasserted_messages.join("\n")
    );
}

#[test]
fn every_shipped_fixture_is_used_by_a_scenario() {
    let project = load();
    assert!(
        project.gate.unused_fixtures.is_empty(),
        "fixtures no scenario uses: {}",
        project.gate.unused_fixtures.join(", ")
    );
}

#[test]
fn the_strict_gate_passes_on_the_project() {
    let out = coverage(Path::new(env!("CARGO_MANIFEST_DIR")), &["--strict"]);
    assert_eq!(out.code, 0, "{}", out.text);
    assert!(
        out.text.contains("coverage --strict: passed"),
        "{}",
        out.text
    );
}

#[test]
fn report_uncovered_rules() {
    let project = load();
    println!(
        "{} of {} rules have a scenario, {} are listed untestable, {} pending; {} scenarios scanned",
        project.gate.covered,
        project.catalog.rules().len(),
        project.gate.untestable,
        project.gate.pending,
        project.coverage.scenarios
    );
    for id in &project.gate.unaccounted {
        println!("uncovered: {id}");
    }
}

// ---------------------------------------------------------------------------------------------
// Made-up projects: each kind of hole and each list mistake
// ---------------------------------------------------------------------------------------------

/// A catalog of three rules and one error.
const RULES: &str = "\
version: 1
rules:
  - id: a.covered
    section: \"3\"
    sources: [rewind.md]
    kind: rule
    side: server
    text: covered by the scenario
  - id: a.untestable
    section: \"3\"
    sources: [rewind.md]
    kind: rule
    side: server
    text: a property of source code
  - id: a.pending
    section: \"8\"
    sources: [rewind.md]
    kind: rule
    side: client
    text: needs a client model
  - id: err.refused
    section: \"9\"
    sources: [rewind.md]
    kind: error
    side: server
    text: refused
    message: \"x is refused\"
    code: refused
";

/// One outline: its fixture and its refusal message come from the Examples table.
const FEATURE: &str = "\
Feature: f

  @rule:a.covered @rule:err.refused
  Scenario Outline: s1 <fixture>
    Given the conversation \"<fixture>\"
    When human \"alice\" rewinds to before message \"m-1\"
    Then the rewind is refused with \"<message>\"

    Examples:
      | fixture | message      |
      | fx-one  | x is refused |
";

const UNTESTABLE: &str =
    "version: 1\nuntestable:\n  - id: a.untestable\n    reason: a property of source code\n";

const PENDING: &str = "version: 1\npending:\n  - id: a.pending\n    waits_for: a client model of the browser (client work)\n";

/// Writes the made-up project into a fresh directory, with `changes` (path, text; an empty text
/// removes the file) applied.
fn made_up(changes: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut files: Vec<(&str, &str)> = vec![
        ("features/rules.yaml", RULES),
        ("features/x.feature", FEATURE),
        ("features/untestable.yaml", UNTESTABLE),
        ("features/pending.yaml", PENDING),
        ("features/ambiguities.yaml", "version: 1\nambiguities: []\n"),
        ("features/leak-allow.yaml", "version: 1\nallowed: []\n"),
        (
            "fixtures/fx-one.yaml",
            "description: never loaded by the gate\n",
        ),
    ];
    for (path, text) in changes {
        files.retain(|(p, _)| p != path);
        if !text.is_empty() {
            files.push((path, text));
        }
    }
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    dir
}

struct Output {
    code: i32,
    text: String,
}

/// Runs `coverage` in `dir` on the made-up project there (`--suite .`: every default path then
/// names one of its files).
fn coverage(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(BIN)
        .args(["coverage", "--suite", "."])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the binary runs");
    Output {
        code: out.status.code().unwrap_or(-1),
        text: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// `--strict` fails with `expected` (each a line's fragment) among its `error:` lines; without
/// `--strict` the same lines are warnings and the gate passes.
fn a_hole(changes: &[(&str, &str)], expected: &[&str]) {
    let dir = made_up(changes);
    let strict = coverage(dir.path(), &["--strict"]);
    assert_eq!(strict.code, 1, "--strict must fail:\n{}", strict.text);
    for fragment in expected {
        assert!(
            strict
                .text
                .lines()
                .any(|l| l.starts_with("error: ") && l.contains(fragment)),
            "no `error:` line with `{fragment}`:\n{}",
            strict.text
        );
    }
    assert!(
        strict.text.contains("coverage --strict: failed"),
        "{}",
        strict.text
    );
    let lenient = coverage(dir.path(), &[]);
    assert_eq!(
        lenient.code, 0,
        "a hole only warns without --strict:\n{}",
        lenient.text
    );
    for fragment in expected {
        assert!(
            lenient
                .text
                .lines()
                .any(|l| l.starts_with("warning: ") && l.contains(fragment)),
            "no `warning:` line with `{fragment}`:\n{}",
            lenient.text
        );
    }
}

/// `coverage` fails with or without `--strict`, with `expected` among its `error:` lines.
fn a_mistake(changes: &[(&str, &str)], expected: &[&str]) {
    let dir = made_up(changes);
    for args in [&["--strict"][..], &[][..]] {
        let out = coverage(dir.path(), args);
        assert_eq!(out.code, 1, "coverage {args:?} must fail:\n{}", out.text);
        for fragment in expected {
            assert!(
                out.text
                    .lines()
                    .any(|l| l.starts_with("error: ") && l.contains(fragment)),
                "no `error:` line with `{fragment}`:\n{}",
                out.text
            );
        }
    }
}

#[test]
fn the_made_up_project_passes() {
    let dir = made_up(&[]);
    let out = coverage(dir.path(), &["--strict"]);
    assert_eq!(out.code, 0, "{}", out.text);
    assert!(
        out.text.contains(
            "4 rules, 1 scenarios; 2 rules covered, 1 listed untestable, 1 pending, 0 without a scenario"
        ),
        "{}",
        out.text
    );
    assert!(
        out.text
            .contains("  pending: a.pending (waits for a client model"),
        "{}",
        out.text
    );
}

#[test]
fn a_rule_neither_covered_nor_listed_is_a_hole() {
    a_hole(
        &[("features/pending.yaml", "version: 1\npending: []\n")],
        &["features/rules.yaml:15:9: rule `a.pending` (section 8) has no scenario"],
    );
}

#[test]
fn a_message_no_then_step_asserts_is_a_hole() {
    // Quoted in a Given step and in a comment: neither asserts it.
    let feature = FEATURE
        .replace(
            "Then the rewind is refused with \"<message>\"",
            "# Then the rewind is refused with \"x is refused\"\n    Then the rewind is refused",
        )
        .replace(
            "When human \"alice\" rewinds to before message \"m-1\"",
            "When human \"alice\" rewinds to before message \"x is refused\"",
        );
    a_hole(
        &[("features/x.feature", &feature)],
        &["features/rules.yaml:27:14: rule `err.refused`: no scenario step asserts its message verbatim"],
    );
}

#[test]
fn a_message_only_in_an_unused_placeholder_column_is_a_hole() {
    // The Examples table holds the message, but no step uses the column.
    let feature = FEATURE.replace(
        "Then the rewind is refused with \"<message>\"",
        "Then the rewind is refused with \"<fixture>\"",
    );
    a_hole(
        &[("features/x.feature", &feature)],
        &["rule `err.refused`: no scenario step asserts its message verbatim"],
    );
}

#[test]
fn a_fixture_no_scenario_uses_is_a_hole() {
    a_hole(
        &[("fixtures/fx-two.yaml", "description: x\n")],
        &["fixtures/fx-two.yaml: fixture `fx-two` is used by no scenario"],
    );
}

#[test]
fn an_unknown_rule_tag_is_a_mistake() {
    let feature = FEATURE.replace("@rule:a.covered", "@rule:a.covered @rule:a.nope");
    a_mistake(
        &[("features/x.feature", &feature)],
        &["features/x.feature:4:3: tag `@rule:a.nope` names no rule of the catalog"],
    );
}

#[test]
fn a_scenario_naming_a_missing_fixture_is_a_mistake() {
    a_mistake(
        &[
            ("fixtures/fx-one.yaml", ""),
            ("fixtures/README.md", "no fixture here"),
        ],
        &["features/x.feature:5:5: scenario `s1 <fixture>` names fixture `fx-one`, which `fixtures` does not hold"],
    );
}

#[test]
fn pending_entries_must_name_catalog_rules_without_a_scenario() {
    let pending = "\
version: 1
pending:
  - id: a.pending
    waits_for: a client model
  - id: a.nope
    waits_for: something
  - id: a.pending
    waits_for: the same again
  - id: a.covered
    waits_for: already has a scenario
  - id: a.untestable
    waits_for: listed untestable too
";
    a_mistake(
        &[("features/pending.yaml", pending)],
        &[
            "features/pending.yaml:5:9: pending rule `a.nope` is not in the catalog",
            "features/pending.yaml:7:9: rule `a.pending` is listed twice (first at line 3)",
            "features/pending.yaml:9:9: rule `a.covered` is listed pending but has a scenario (features/x.feature:4)",
            "features/pending.yaml:11:9: rule `a.untestable` is listed pending and untestable (`features/untestable.yaml:3:9`)",
        ],
    );
}

#[test]
fn untestable_entries_must_name_catalog_rules_without_a_scenario() {
    let untestable = "\
version: 1
untestable:
  - id: a.untestable
    reason: source code
  - id: a.covered
    reason: has a scenario all the same
  - id: a.gone
    reason: not in the catalog
";
    a_mistake(
        &[("features/untestable.yaml", untestable)],
        &[
            "features/untestable.yaml:5:9: rule `a.covered` is listed untestable but has a scenario",
            "features/untestable.yaml:7:9: untestable rule `a.gone` is not in the catalog",
        ],
    );
}

#[test]
fn a_pending_rule_without_what_it_waits_for_is_refused_with_its_position() {
    for (pending, fragment) in [
        (
            "version: 1\npending:\n  - id: a.pending\n",
            "features/pending.yaml:3:",
        ),
        (
            "version: 1\npending:\n  - id: a.pending\n    waits_for: \"  \"\n",
            "features/pending.yaml:4:16: pending rule `a.pending` needs a sentence here",
        ),
        (
            "version: 1\npending:\n  - id: a.pending\n    reason: wrong key\n",
            "features/pending.yaml:4:",
        ),
    ] {
        let dir = made_up(&[("features/pending.yaml", pending)]);
        let out = coverage(dir.path(), &["--strict"]);
        assert_eq!(out.code, 3, "an invalid list is bad input:\n{}", out.text);
        assert!(
            out.text
                .lines()
                .any(|l| l.starts_with("error: ") && l.contains(fragment)),
            "no `error:` line with `{fragment}`:\n{}",
            out.text
        );
        assert!(!out.text.contains("panicked"), "{}", out.text);
    }
}

#[test]
fn every_ambiguity_tag_and_register_entry_agree() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let register =
        rewind_conformance::catalog::Register::load(&root.join("features/ambiguities.yaml"))
            .expect("the ambiguity register loads");
    let scan = scan_features(&root.join("features")).expect("features readable");
    let problems = register.check(&scan, &root.join("features"));
    assert!(
        problems.is_empty(),
        "ambiguity register:\n{}",
        problems.join("\n")
    );
}

/// Every `take_reading("<ambiguity>", "<reading>")` a step makes names a register entry and one
/// of its readings, and every step-wide entry's step text is a step the suite defines: the
/// register cannot drift from the steps that apply it.
#[test]
fn the_steps_and_the_register_name_the_same_readings() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let register =
        rewind_conformance::catalog::Register::load(&root.join("features/ambiguities.yaml"))
            .expect("the ambiguity register loads");
    let mut sources = String::new();
    for entry in std::fs::read_dir(root.join("src/suite/steps")).expect("steps dir") {
        let path = entry.expect("entry").path();
        sources.push_str(&std::fs::read_to_string(&path).expect("step source"));
    }
    let call =
        regex::Regex::new(r#"take_reading\(\s*"([a-z0-9-]+)",\s*(?:"([a-z0-9-]+)"|([a-z_]+))"#)
            .expect("regex");
    let quoted = regex::Regex::new(r#""([a-z0-9-]+)""#).expect("regex");
    let mut problems = Vec::new();
    for found in call.captures_iter(&sources) {
        let id = &found[1];
        let Some(entry) = register.get(id) else {
            problems.push(format!(
                "a step takes ambiguity `{id}`, which the register lacks"
            ));
            continue;
        };
        let readings: Vec<String> = match found.get(2) {
            Some(reading) => vec![reading.as_str().to_owned()],
            // A variable: every quoted kebab literal near the call must be a reading.
            None => Vec::new(),
        };
        for reading in readings {
            if !entry.readings.iter().any(|r| r.id == reading) {
                problems.push(format!(
                    "a step takes reading `{reading}` of `{id}`, which it lacks"
                ));
            }
        }
    }
    // Readings chosen through a variable are string literals returned nearby; check that every
    // reading id the register lists for a recorded entry appears somewhere in the steps.
    let recorded: std::collections::BTreeSet<&str> = call
        .captures_iter(&sources)
        .map(|c| c.get(1).map(|m| m.as_str()).unwrap_or_default())
        .collect();
    let literals: std::collections::BTreeSet<&str> = quoted
        .captures_iter(&sources)
        .map(|c| c.get(1).map(|m| m.as_str()).unwrap_or_default())
        .collect();
    for entry in register.entries() {
        if recorded.contains(entry.id.as_str()) {
            for reading in &entry.readings {
                if !literals.contains(reading.id.as_str()) {
                    problems.push(format!(
                        "reading `{}` of `{}` is never recorded by a step",
                        reading.id, entry.id
                    ));
                }
            }
        }
        for step in &entry.steps {
            if !sources.contains(&format!("\"{step}\"")) && !sources.contains(step.as_str()) {
                problems.push(format!(
                    "ambiguity `{}` applies to step `{step}`, which no step defines",
                    entry.id
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
