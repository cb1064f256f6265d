//! The coverage gate: every `@rule:` tag names a catalog rule, every feature parses, and the
//! rules still without a scenario are listed (a failure for the sections listed in
//! `GATED_SECTIONS`).

use std::path::Path;

use rewind_conformance::catalog::{scan_features, Catalog, Coverage};

/// Sections whose every rule must already have a scenario.
const GATED_SECTIONS: &[&str] = &["3"];

/// Rules of gated sections that have no scenario yet, each with what it waits for. The gate
/// fails when a listed rule gains a scenario, so the list cannot go stale.
const PENDING: &[(&str, &str)] = &[(
    "init.agent-capability",
    "needs the mock runtimes and runtime recovery",
)];

fn coverage() -> (Catalog, Coverage) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let catalog = Catalog::load(&root.join("features/rules.yaml")).expect("catalog loads");
    let scan = scan_features(&root.join("features")).expect("features readable");
    let coverage = Coverage::compute(&catalog, &scan);
    (catalog, coverage)
}

#[test]
fn every_rule_tag_names_a_catalog_rule() {
    let (_, coverage) = coverage();
    let failures = coverage.hard_failures();
    assert!(
        failures.is_empty(),
        "coverage gate:\n{}",
        failures.join("\n")
    );
}

#[test]
fn gated_sections_are_fully_covered() {
    let (catalog, coverage) = coverage();
    let missing: Vec<String> = coverage
        .uncovered()
        .into_iter()
        .filter_map(|id| catalog.get(id))
        .filter(|r| GATED_SECTIONS.contains(&r.section.as_str()))
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

#[test]
fn report_uncovered_rules() {
    let (catalog, coverage) = coverage();
    let uncovered = coverage.uncovered();
    println!(
        "{} of {} rules have a scenario; {} scenarios scanned",
        catalog.rules().len() - uncovered.len(),
        catalog.rules().len(),
        coverage.scenarios
    );
    for id in uncovered {
        println!("uncovered: {id}");
    }
}
