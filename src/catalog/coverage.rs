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
    /// Concatenated text of all feature files, for verbatim-message checks.
    pub text: String,
    /// Files that failed to parse, with the parser's message.
    pub parse_errors: Vec<String>,
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
        let scenarios = feature
            .scenarios
            .iter()
            .map(|s| (Vec::<String>::new(), s))
            .chain(
                feature
                    .rules
                    .iter()
                    .flat_map(|r| r.scenarios.iter().map(move |s| (r.tags.clone(), s))),
            );
        for (rule_tags, scenario) in scenarios {
            scan.scenarios += 1;
            let line = scenario.position.line;
            let column = scenario.position.col;
            add(&feature.tags, line, column, &scenario.name);
            add(&rule_tags, line, column, &scenario.name);
            add(&scenario.tags, line, column, &scenario.name);
            for examples in &scenario.examples {
                add(&examples.tags, line, column, &scenario.name);
            }
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
    /// Error rules whose verbatim message appears in no feature.
    pub unasserted_messages: Vec<String>,
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
        let unasserted_messages = catalog
            .rules()
            .iter()
            .filter(|r| r.kind == RuleKind::Error)
            .filter_map(|r| r.message.as_deref())
            .filter(|m| !scan.text.contains(&format!("\"{m}\"")))
            .map(str::to_owned)
            .collect();
        Coverage {
            scenarios_by_rule,
            unknown_tags,
            unasserted_messages,
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
}
