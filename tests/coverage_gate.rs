//! The coverage gate: every `@rule:` tag names a catalog rule, every feature parses, and every
//! server-side rule of the gated sections has a scenario, is listed untestable (with a reason,
//! `features/untestable.yaml`), or waits in `PENDING` for the capability that will cover it.

use std::path::Path;

use rewind_conformance::catalog::{scan_features, Catalog, Coverage, RuleSide, Untestable};

/// Sections whose every server-side rule must be accounted for.
const GATED_SECTIONS: &[&str] = &[
    "2", "2.1", "3", "4", "6", "6.1", "6.2", "6.3", "6.4", "7", "8", "9", "10",
];

/// Rules of gated sections that have no scenario yet, each with what it waits for. The gate
/// fails when a listed rule gains a scenario, so the list cannot go stale.
const PENDING: &[(&str, &str)] = &[];

fn load() -> (Catalog, Coverage, Untestable) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let catalog = Catalog::load(&root.join("features/rules.yaml")).expect("catalog loads");
    let untestable =
        Untestable::load(&root.join("features/untestable.yaml")).expect("untestable list loads");
    let scan = scan_features(&root.join("features")).expect("features readable");
    let coverage = Coverage::compute(&catalog, &scan);
    (catalog, coverage, untestable)
}

#[test]
fn every_rule_tag_names_a_catalog_rule() {
    let (_, coverage, _) = load();
    let failures = coverage.hard_failures();
    assert!(
        failures.is_empty(),
        "coverage gate:\n{}",
        failures.join("\n")
    );
}

#[test]
fn untestable_rules_are_known_and_have_no_scenario() {
    let (catalog, coverage, untestable) = load();
    let uncovered = coverage.uncovered();
    for rule in &untestable.rules {
        assert!(
            catalog.get(&rule.id).is_some(),
            "untestable `{}` is not in the catalog",
            rule.id
        );
        assert!(
            uncovered.contains(&rule.id.as_str()),
            "`{}` is listed untestable but has a scenario: remove it from features/untestable.yaml",
            rule.id
        );
    }
}

#[test]
fn gated_sections_are_fully_accounted_for() {
    let (catalog, coverage, untestable) = load();
    let missing: Vec<String> = coverage
        .uncovered()
        .into_iter()
        .filter_map(|id| catalog.get(id))
        .filter(|r| GATED_SECTIONS.contains(&r.section.as_str()) && r.side == RuleSide::Server)
        .filter(|r| !untestable.contains(&r.id))
        .filter(|r| !PENDING.iter().any(|(id, _)| *id == r.id))
        .map(|r| format!("{} (section {}): {}", r.id, r.section, r.text))
        .collect();
    assert!(
        missing.is_empty(),
        "rules without a scenario:\n{}",
        missing.join("\n")
    );
    let uncovered = coverage.uncovered();
    for (id, reason) in PENDING {
        assert!(
            catalog.get(id).is_some(),
            "pending rule `{id}` is not in the catalog"
        );
        assert!(
            uncovered.contains(id),
            "`{id}` now has a scenario: remove it from PENDING (it was waiting: {reason})"
        );
    }
}

/// Runtime recovery (section 5) is gated on every side: the mock runtimes make the daemon's
/// restore observable, so each of its rules needs a scenario or a reason it cannot have one.
#[test]
fn runtime_recovery_is_fully_accounted_for() {
    let (catalog, coverage, untestable) = load();
    let missing: Vec<String> = coverage
        .uncovered()
        .into_iter()
        .filter_map(|id| catalog.get(id))
        .filter(|r| r.section == "5" || (r.side == RuleSide::Runtime && r.section != "inventory"))
        .filter(|r| !untestable.contains(&r.id))
        .map(|r| format!("{} (section {}): {}", r.id, r.section, r.text))
        .collect();
    assert!(
        missing.is_empty(),
        "runtime recovery rules without a scenario:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_error_message_is_asserted_verbatim() {
    let (_, coverage, _) = load();
    assert!(
        coverage.unasserted_messages.is_empty(),
        "error messages no scenario asserts verbatim:\n{}",
        coverage.unasserted_messages.join("\n")
    );
}

#[test]
fn report_uncovered_rules() {
    let (catalog, coverage, untestable) = load();
    let uncovered = coverage.uncovered();
    println!(
        "{} of {} rules have a scenario, {} are listed untestable; {} scenarios scanned",
        catalog.rules().len() - uncovered.len(),
        catalog.rules().len(),
        untestable.rules.len(),
        coverage.scenarios
    );
    for id in uncovered.iter().filter(|id| !untestable.contains(id)) {
        println!("uncovered: {id}");
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
