//! [`Coverage`]: which rules the Gherkin features check, and what is wrong with the tags.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use cucumber::gherkin::{self, GherkinEnv};

use super::ambiguities::AMBIGUITY_TAG_PREFIX;
use super::{Catalog, RuleKind};

/// Tag prefix that links a scenario to a catalog rule.
pub const RULE_TAG_PREFIX: &str = "rule:";

/// One `@rule:<id>` tag, where it was written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RuleTag {
    /// The rule id after the prefix.
    pub id: String,
    /// The feature file.
    pub file: PathBuf,
    /// Line of the tagged feature, rule or scenario.
    pub line: usize,
    /// Column of the tagged feature, rule or scenario.
    pub column: usize,
    /// The scenario (or feature) name.
    pub scenario: String,
}

/// Every feature file's rule tags and raw text.
#[derive(Debug, Clone, Default)]
pub struct FeatureScan {
    /// Every `@rule:` tag found; a feature-level tag counts for each of its scenarios.
    pub tags: Vec<RuleTag>,
    /// Every `@ambiguity:` tag found (the id after the prefix), placed like `tags`.
    pub ambiguity_tags: Vec<RuleTag>,
    /// Every feature file read.
    pub files: Vec<PathBuf>,
    /// Number of scenarios (outline examples count once).
    pub scenarios: usize,
    /// Concatenated text of all feature files.
    pub text: String,
    /// Files that failed to parse, with the parser's message.
    pub parse_errors: Vec<String>,
    /// Every `Then` step (an `And` or `But` after one included) of every scenario, backgrounds
    /// included, once per outline example with its placeholders filled in.
    pub assertions: Vec<StepUse>,
    /// Every fixture a `Given the conversation "<name>"` step names (backgrounds and outline
    /// examples included), once per scenario, step and name.
    pub fixture_uses: Vec<FixtureUse>,
}

/// One step as it runs: the text of a step with an example row's values in place of its
/// placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepUse {
    /// The step's text after its keyword.
    pub text: String,
    /// The cells of its data table, and its doc string, if any.
    pub arguments: Vec<String>,
    /// The feature file.
    pub file: PathBuf,
    /// Line of the step.
    pub line: usize,
    /// Column of the step.
    pub column: usize,
}

/// A fixture named by a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixtureUse {
    /// The fixture's name (its file stem).
    pub name: String,
    /// The feature file.
    pub file: PathBuf,
    /// Line of the step naming it.
    pub line: usize,
    /// Column of the step naming it.
    pub column: usize,
    /// The scenario's name as written.
    pub scenario: String,
}

/// The step that names a scenario's fixture.
const FIXTURE_STEP: &str = "the conversation ";

/// The fixture a step names, if it is `the conversation "<name>"`.
fn fixture_named(step: &str) -> Option<&str> {
    let quoted = step.trim().strip_prefix(FIXTURE_STEP)?.trim();
    quoted.strip_prefix('"')?.strip_suffix('"')
}

/// `text` with every `<placeholder>` of `values` replaced.
fn expand(text: &str, values: &[(String, String)]) -> String {
    values.iter().fold(text.to_owned(), |text, (key, value)| {
        text.replace(&format!("<{key}>"), value)
    })
}

/// Records, for one scenario, each step as it runs for each example row.
fn record_steps(
    scan: &mut FeatureScan,
    file: &Path,
    scenario: &gherkin::Scenario,
    steps: &[&gherkin::Step],
) {
    let mut rows: Vec<Vec<(String, String)>> = Vec::new();
    for examples in &scenario.examples {
        let Some((header, body)) = examples.table.as_ref().and_then(|t| t.rows.split_first())
        else {
            continue;
        };
        for row in body {
            rows.push(header.iter().cloned().zip(row.iter().cloned()).collect());
        }
    }
    if scenario.examples.is_empty() {
        rows.push(Vec::new());
    }
    for values in &rows {
        for step in steps {
            let text = expand(&step.value, values);
            let (line, column) = (step.position.line, step.position.col);
            if let Some(name) = fixture_named(&text) {
                let known = scan.fixture_uses.iter().any(|u| {
                    u.name == name
                        && u.file == file
                        && u.line == line
                        && u.scenario == scenario.name
                });
                if !known {
                    scan.fixture_uses.push(FixtureUse {
                        name: name.to_owned(),
                        file: file.to_path_buf(),
                        line,
                        column,
                        scenario: scenario.name.clone(),
                    });
                }
            }
            if step.ty == gherkin::StepType::Then {
                let mut arguments: Vec<String> = step
                    .table
                    .iter()
                    .flat_map(|t| t.rows.iter().flatten())
                    .map(|cell| expand(cell, values))
                    .collect();
                arguments.extend(step.docstring.iter().map(|d| expand(d, values)));
                scan.assertions.push(StepUse {
                    text,
                    arguments,
                    file: file.to_path_buf(),
                    line,
                    column,
                });
            }
        }
    }
}

/// Reads `path`: one `*.feature` file, or every one under a directory (recursively).
pub fn scan_features(path: &Path) -> std::io::Result<FeatureScan> {
    let mut files = Vec::new();
    if path.is_file() {
        files.push(path.to_path_buf());
    } else {
        collect_features(path, &mut files)?;
    }
    files.sort();
    let mut scan = FeatureScan::default();
    for file in files {
        let text = std::fs::read_to_string(&file)?;
        scan.files.push(file.clone());
        scan.text.push_str(&text);
        scan.text.push('\n');
        let feature = match gherkin::Feature::parse(&text, GherkinEnv::default()) {
            Ok(feature) => feature,
            Err(e) => {
                scan.parse_errors.push(format!("{}: {e}", file.display()));
                continue;
            }
        };
        let mut add = |tags: &[String], line: usize, column: usize, scenario: &str| {
            for tag in tags {
                let (list, id) = if let Some(id) = tag.strip_prefix(RULE_TAG_PREFIX) {
                    (&mut scan.tags, id)
                } else if let Some(id) = tag.strip_prefix(AMBIGUITY_TAG_PREFIX) {
                    (&mut scan.ambiguity_tags, id)
                } else {
                    continue;
                };
                list.push(RuleTag {
                    id: id.to_owned(),
                    file: file.clone(),
                    line,
                    column,
                    scenario: scenario.to_owned(),
                });
            }
        };
        let scenarios = feature.scenarios.iter().map(|s| (None, s)).chain(
            feature
                .rules
                .iter()
                .flat_map(|r| r.scenarios.iter().map(move |s| (Some(r), s))),
        );
        let mut runs: Vec<(&gherkin::Scenario, Vec<&gherkin::Step>)> = Vec::new();
        for (rule, scenario) in scenarios {
            scan.scenarios += 1;
            let line = scenario.position.line;
            let column = scenario.position.col;
            add(&feature.tags, line, column, &scenario.name);
            if let Some(rule) = rule {
                add(&rule.tags, line, column, &scenario.name);
            }
            add(&scenario.tags, line, column, &scenario.name);
            for examples in &scenario.examples {
                add(&examples.tags, line, column, &scenario.name);
            }
            let steps: Vec<&gherkin::Step> = feature
                .background
                .iter()
                .chain(rule.and_then(|r| r.background.as_ref()))
                .flat_map(|b| b.steps.iter())
                .chain(scenario.steps.iter())
                .collect();
            runs.push((scenario, steps));
        }
        for (scenario, steps) in runs {
            record_steps(&mut scan, &file, scenario, &steps);
        }
    }
    Ok(scan)
}

fn collect_features(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_features(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "feature") {
            out.push(path);
        }
    }
    Ok(())
}

/// The coverage of a catalog by a set of features.
#[derive(Debug, Clone)]
pub struct Coverage {
    /// Scenarios per rule id (every catalog rule is a key).
    pub scenarios_by_rule: BTreeMap<String, BTreeSet<String>>,
    /// Tags naming no catalog rule.
    pub unknown_tags: Vec<RuleTag>,
    /// Error rules whose verbatim message no `Then` step asserts (quoted in the step, or a
    /// whole cell of its table), outline placeholders filled in.
    pub unasserted_messages: Vec<String>,
    /// The ids of the rules of `unasserted_messages`, in the same order.
    pub unasserted_rules: Vec<String>,
    /// Feature files that failed to parse.
    pub parse_errors: Vec<String>,
    /// Number of scenarios scanned.
    pub scenarios: usize,
}

impl Coverage {
    /// Computes coverage of `catalog` by `scan`.
    pub fn compute(catalog: &Catalog, scan: &FeatureScan) -> Self {
        let mut scenarios_by_rule: BTreeMap<String, BTreeSet<String>> = catalog
            .rules()
            .iter()
            .map(|r| (r.id.clone(), BTreeSet::new()))
            .collect();
        let mut unknown_tags = Vec::new();
        for tag in &scan.tags {
            match scenarios_by_rule.get_mut(&tag.id) {
                Some(set) => {
                    set.insert(format!("{}:{}", tag.file.display(), tag.line));
                }
                None => unknown_tags.push(tag.clone()),
            }
        }
        let asserted = |message: &str| {
            let quoted = format!("\"{message}\"");
            scan.assertions.iter().any(|step| {
                step.text.contains(&quoted) || step.arguments.iter().any(|a| a.trim() == message)
            })
        };
        let (unasserted_rules, unasserted_messages) = catalog
            .rules()
            .iter()
            .filter(|r| r.kind == RuleKind::Error)
            .filter_map(|r| Some((r.id.clone(), r.message.clone()?)))
            .filter(|(_, m)| !asserted(m))
            .unzip();
        Coverage {
            scenarios_by_rule,
            unknown_tags,
            unasserted_messages,
            unasserted_rules,
            parse_errors: scan.parse_errors.clone(),
            scenarios: scan.scenarios,
        }
    }

    /// Rule ids no scenario checks yet.
    pub fn uncovered(&self) -> Vec<&str> {
        self.scenarios_by_rule
            .iter()
            .filter(|(_, s)| s.is_empty())
            .map(|(id, _)| id.as_str())
            .collect()
    }

    /// Problems that fail the gate now: unknown tags and unparsable features.
    pub fn hard_failures(&self) -> Vec<String> {
        let mut out: Vec<String> = self.parse_errors.clone();
        out.extend(self.unknown_tags.iter().map(|t| {
            format!(
                "{}:{}:{}: tag `@rule:{}` names no rule of the catalog (scenario `{}`)",
                t.file.display(),
                t.line,
                t.column,
                t.id,
                t.scenario
            )
        }));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_tags_are_located_and_coverage_counted() {
        let catalog = Catalog::parse(
            Path::new("rules.yaml"),
            "version: 1\nrules:\n  - id: a.one\n    section: \"3\"\n    sources: [rewind.md]\n    kind: rule\n    side: server\n    text: x\n  - id: a.two\n    section: \"3\"\n    sources: [rewind.md]\n    kind: rule\n    side: server\n    text: y\n",
        )
        .expect("catalog");
        let dir = std::env::temp_dir().join(format!("rc-cov-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(
            dir.join("x.feature"),
            "Feature: f\n\n  @rule:a.one\n  Scenario: s1\n    Given x\n\n  @rule:a.nope\n  Scenario: s2\n    Given y\n",
        )
        .expect("write");
        let scan = scan_features(&dir).expect("scan");
        let coverage = Coverage::compute(&catalog, &scan);
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(coverage.scenarios, 2);
        assert_eq!(coverage.uncovered(), vec!["a.two"]);
        let failures = coverage.hard_failures();
        assert_eq!(failures.len(), 1);
        assert!(failures[0].contains("x.feature:8:3"), "{}", failures[0]);
        assert!(failures[0].contains("a.nope"));
    }

    #[test]
    fn steps_are_recorded_as_they_run() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(
            dir.path().join("x.feature"),
            "Feature: f\n\n  Background:\n    Given the conversation \"from-background\"\n\n  Scenario: plain\n    When x\n    Then the rewind is refused with \"plain message\"\n    And a table:\n      | cell message |\n\n  Rule: r\n    Background:\n      Given y\n\n    Scenario Outline: outlined\n      Given the conversation \"<fixture>\"\n      When z \"not asserted\"\n      Then the rewind is refused with \"<message>\"\n\n      Examples:\n        | fixture | message |\n        | fx-a    | first   |\n        | fx-b    | second  |\n",
        )
        .expect("write");
        let scan = scan_features(dir.path()).expect("scan");
        let mut fixtures: Vec<(&str, usize)> = scan
            .fixture_uses
            .iter()
            .map(|u| (u.name.as_str(), u.line))
            .collect();
        fixtures.sort();
        assert_eq!(
            fixtures,
            [
                ("from-background", 4),
                ("from-background", 4),
                ("fx-a", 17),
                ("fx-b", 17)
            ],
            "the background counts for each scenario, an outline once per value"
        );
        let asserted: Vec<&str> = scan.assertions.iter().map(|a| a.text.as_str()).collect();
        assert_eq!(
            asserted,
            [
                "the rewind is refused with \"plain message\"",
                "a table:",
                "the rewind is refused with \"first\"",
                "the rewind is refused with \"second\""
            ],
            "Then steps (an And after one included), placeholders filled in"
        );
        assert_eq!(scan.assertions[1].arguments, ["cell message"]);
    }
}
