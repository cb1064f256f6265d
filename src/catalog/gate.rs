//! [`Gate`]: the coverage gate's verdict over the catalog, the features, the untestable and
//! pending lists and the shipped fixtures.
//!
//! Two grades of problem:
//! - **errors** fail `coverage` always: a feature that does not parse, a `@rule:` tag naming no
//!   rule, a list entry naming no rule, listed twice, listed although it has a scenario, or
//!   listed both untestable and pending, a scenario naming a fixture that does not exist;
//! - **gaps** (holes in the suite) fail `coverage --strict` and are warnings otherwise: a rule
//!   with no scenario that neither list accounts for, a section 9 message no `Then` step asserts
//!   verbatim, a shipped fixture no scenario uses.
//!
//! Every line names where the problem is (`file:line:column` where there is one) and the rule
//! or fixture it is about.

use std::path::{Path, PathBuf};

use super::{Catalog, Coverage, FeatureScan, Pending, Untestable};

/// The file extensions read as fixtures (as the fixture loader does).
const FIXTURE_EXTENSIONS: [&str; 2] = ["yaml", "yml"];

/// A shipped fixture: its name (the file stem) and its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixtureFile {
    /// The name scenarios use.
    pub name: String,
    /// The file.
    pub path: PathBuf,
}

/// The fixtures of `dir` (every `*.yaml` / `*.yml` file, not recursively), in name order.
pub fn fixture_files(dir: &Path) -> std::io::Result<Vec<FixtureFile>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let is_fixture = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| FIXTURE_EXTENSIONS.contains(&e));
        if !is_fixture || !path.is_file() {
            continue;
        }
        if let Some(name) = path.file_stem().and_then(|s| s.to_str()) {
            out.push(FixtureFile {
                name: name.to_owned(),
                path: path.clone(),
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The gate's verdict.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    /// Problems that fail the gate in every mode, one positioned line each.
    pub errors: Vec<String>,
    /// Holes in the suite, one positioned line each: they fail `--strict`.
    pub gaps: Vec<String>,
    /// Rules with at least one scenario.
    pub covered: usize,
    /// Rules without a scenario listed untestable.
    pub untestable: usize,
    /// Rules without a scenario listed pending.
    pub pending: usize,
    /// Rules without a scenario that no list accounts for.
    pub unaccounted: Vec<String>,
    /// Shipped fixtures no scenario uses.
    pub unused_fixtures: Vec<String>,
}

impl Gate {
    /// Checks everything; `fixtures_dir` names the fixtures' directory in messages.
    pub fn check(
        catalog: &Catalog,
        scan: &FeatureScan,
        untestable: &Untestable,
        pending: &Pending,
        fixtures: &[FixtureFile],
        fixtures_dir: &Path,
    ) -> Gate {
        let coverage = Coverage::compute(catalog, scan);
        let mut gate = Gate {
            errors: coverage.hard_failures(),
            ..Gate::default()
        };
        gate.errors.extend(untestable.check(catalog, &coverage));
        gate.errors
            .extend(pending.check(catalog, &coverage, untestable));
        for used in &scan.fixture_uses {
            if !fixtures.iter().any(|f| f.name == used.name) {
                gate.errors.push(format!(
                    "{}:{}:{}: scenario `{}` names fixture `{}`, which `{}` does not hold",
                    used.file.display(),
                    used.line,
                    used.column,
                    used.scenario,
                    used.name,
                    fixtures_dir.display()
                ));
            }
        }

        let uncovered = coverage.uncovered();
        gate.covered = catalog.rules().len() - uncovered.len();
        for id in uncovered {
            if untestable.contains(id) {
                gate.untestable += 1;
            } else if pending.contains(id) {
                gate.pending += 1;
            } else {
                gate.unaccounted.push(id.to_owned());
                let section = catalog.get(id).map_or("?", |r| r.section.as_str());
                gate.gaps.push(format!(
                    "{}: rule `{id}` (section {section}) has no scenario, and neither `{}` (with \
                     the reason no scenario can check it) nor `{}` (with the work it waits for) \
                     lists it",
                    catalog.at(id, false),
                    untestable.path.display(),
                    pending.path.display()
                ));
            }
        }
        for (id, message) in coverage
            .unasserted_rules
            .iter()
            .zip(&coverage.unasserted_messages)
        {
            gate.gaps.push(format!(
                "{}: rule `{id}`: no scenario step asserts its message verbatim (e.g. `Then the \
                 rewind is refused with \"{message}\"`)",
                catalog.at(id, true)
            ));
        }
        for fixture in fixtures {
            if !scan.fixture_uses.iter().any(|u| u.name == fixture.name) {
                gate.unused_fixtures.push(fixture.name.clone());
                gate.gaps.push(format!(
                    "{}: fixture `{}` is used by no scenario (no `Given the conversation \"{}\"`, \
                     written out or as an outline's Examples value)",
                    fixture.path.display(),
                    fixture.name,
                    fixture.name
                ));
            }
        }
        gate
    }
}
