//! The rule matrix: every catalog rule (`features/rules.yaml`) with the scenarios of this run
//! that check it and a status.

use std::collections::{BTreeMap, BTreeSet};

use rewind_conformance::catalog::{Catalog, FeatureScan, Pending, RuleKind, Untestable};

use super::{Outcome, ScenarioEntry};

/// A rule's status in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuleStatus {
    /// A scenario of it failed the run (failed, undefined step, protocol violation, unexpected
    /// pass).
    Fail,
    /// A scenario of it failed as the expectations file says, and none failed otherwise.
    ExpectedFail,
    /// Every scenario of it that ran passed.
    Pass,
    /// Its scenarios were all left out by the capability profile.
    NotApplicable,
    /// It has scenarios, but the run's filters (or its shard) selected none of them.
    NotRun,
    /// No black-box scenario can check it (`features/untestable.yaml`).
    Untestable,
    /// No scenario checks it yet: it waits for a piece of harness work
    /// (`features/pending.yaml`).
    Pending,
    /// No scenario checks it.
    Uncovered,
}

impl RuleStatus {
    /// Every status, worst first.
    pub const ALL: [RuleStatus; 8] = [
        RuleStatus::Fail,
        RuleStatus::ExpectedFail,
        RuleStatus::Pass,
        RuleStatus::NotApplicable,
        RuleStatus::NotRun,
        RuleStatus::Untestable,
        RuleStatus::Pending,
        RuleStatus::Uncovered,
    ];

    /// The name in the JSON results and the page's `data-status`.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleStatus::Fail => "fail",
            RuleStatus::ExpectedFail => "expected_fail",
            RuleStatus::Pass => "pass",
            RuleStatus::NotApplicable => "not_applicable",
            RuleStatus::NotRun => "not_run",
            RuleStatus::Untestable => "untestable",
            RuleStatus::Pending => "pending",
            RuleStatus::Uncovered => "uncovered",
        }
    }

    /// The name for people.
    pub fn label(self) -> &'static str {
        match self {
            RuleStatus::Fail => "fail",
            RuleStatus::ExpectedFail => "expected fail",
            RuleStatus::Pass => "pass",
            RuleStatus::NotApplicable => "not applicable",
            RuleStatus::NotRun => "not run",
            RuleStatus::Untestable => "untestable",
            RuleStatus::Pending => "pending",
            RuleStatus::Uncovered => "uncovered",
        }
    }
}

/// One catalog rule, with what the run needs to know of it beyond the scenarios.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedRule {
    /// The rule id.
    pub id: String,
    /// The spec section (`"6.1.1"`, `"inventory"`).
    pub section: String,
    /// `rule`, `error` or `invariant`.
    pub kind: String,
    /// The one-line paraphrase.
    pub text: String,
    /// Why no black-box scenario can check it, when `features/untestable.yaml` lists it.
    pub untestable: Option<String>,
    /// The piece of harness work its scenario waits for, when `features/pending.yaml` lists it.
    pub pending: Option<String>,
    /// Whether any scenario of the features (selected or not) is tagged with it.
    pub has_scenario: bool,
}

/// The catalog as the reports need it, in catalog order.
#[derive(Debug, Clone, Default)]
pub struct RuleIndex {
    rules: Vec<IndexedRule>,
}

impl RuleIndex {
    /// The catalog's rules, with the untestable and pending lists and every scenario's rule
    /// tags.
    pub fn new(
        catalog: &Catalog,
        untestable: &Untestable,
        pending: &Pending,
        scan: &FeatureScan,
    ) -> Self {
        let tagged: BTreeSet<&str> = scan.tags.iter().map(|t| t.id.as_str()).collect();
        let reasons: BTreeMap<&str, &str> = untestable
            .rules
            .iter()
            .map(|r| (r.id.as_str(), r.reason.as_str()))
            .collect();
        let waits_for: BTreeMap<&str, &str> = pending
            .rules
            .iter()
            .map(|r| (r.id.as_str(), r.waits_for.as_str()))
            .collect();
        Self::from_rules(
            catalog
                .rules()
                .iter()
                .map(|rule| IndexedRule {
                    id: rule.id.clone(),
                    section: rule.section.clone(),
                    kind: match rule.kind {
                        RuleKind::Rule => "rule",
                        RuleKind::Error => "error",
                        RuleKind::Invariant => "invariant",
                    }
                    .to_owned(),
                    text: rule.text.clone(),
                    untestable: reasons.get(rule.id.as_str()).map(|r| (*r).to_owned()),
                    pending: waits_for.get(rule.id.as_str()).map(|w| (*w).to_owned()),
                    has_scenario: tagged.contains(rule.id.as_str()),
                })
                .collect(),
        )
    }

    /// An index of these rules.
    pub fn from_rules(rules: Vec<IndexedRule>) -> Self {
        RuleIndex { rules }
    }
}

/// One scenario of a rule, as the matrix lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleScenario {
    /// The feature file.
    pub feature: String,
    /// The scenario's line.
    pub line: usize,
    /// The scenario's name.
    pub name: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Its first failure (or why it was left out).
    pub failure: Option<String>,
}

/// One row of the matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRow {
    /// The catalog entry.
    pub rule: IndexedRule,
    /// Its status in this run.
    pub status: RuleStatus,
    /// The scenarios of this run tagged with it.
    pub scenarios: Vec<RuleScenario>,
}

/// Every catalog rule with its status, in catalog order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleMatrix {
    /// The rows.
    pub rows: Vec<RuleRow>,
}

impl RuleMatrix {
    /// The status of each rule of `index` given the run's `scenarios`.
    pub fn build(index: &RuleIndex, scenarios: &[ScenarioEntry]) -> Self {
        let mut by_rule: BTreeMap<&str, Vec<&ScenarioEntry>> = BTreeMap::new();
        for scenario in scenarios {
            for rule in scenario.rules() {
                by_rule.entry(rule).or_default().push(scenario);
            }
        }
        let rows = index
            .rules
            .iter()
            .map(|rule| {
                let mine = by_rule.get(rule.id.as_str()).cloned().unwrap_or_default();
                let any = |f: fn(Outcome) -> bool| mine.iter().any(|s| f(s.outcome));
                let status = if any(Outcome::fails) {
                    RuleStatus::Fail
                } else if any(|o| o == Outcome::ExpectedFailure) {
                    RuleStatus::ExpectedFail
                } else if any(|o| o == Outcome::Passed) {
                    RuleStatus::Pass
                } else if !mine.is_empty() {
                    RuleStatus::NotApplicable
                } else if rule.untestable.is_some() {
                    RuleStatus::Untestable
                } else if rule.has_scenario {
                    RuleStatus::NotRun
                } else if rule.pending.is_some() {
                    RuleStatus::Pending
                } else {
                    RuleStatus::Uncovered
                };
                RuleRow {
                    rule: rule.clone(),
                    status,
                    scenarios: mine
                        .iter()
                        .map(|s| RuleScenario {
                            feature: s.feature.clone(),
                            line: s.line,
                            name: s.name.clone(),
                            outcome: s.outcome,
                            failure: s.failure.clone(),
                        })
                        .collect(),
                }
            })
            .collect();
        RuleMatrix { rows }
    }

    /// How many rules have each status (every status present, zeros included).
    pub fn counts(&self) -> BTreeMap<RuleStatus, usize> {
        let mut out: BTreeMap<RuleStatus, usize> =
            RuleStatus::ALL.iter().map(|s| (*s, 0)).collect();
        for row in &self.rows {
            *out.entry(row.status).or_default() += 1;
        }
        out
    }

    /// `12 pass, 1 fail, ...`: the statuses that occur, worst first.
    pub fn describe_counts(&self) -> String {
        self.counts()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(status, n)| format!("{n} {}", status.label()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The rows grouped by spec section, sections in natural order (`2` < `2.1` < `10` <
    /// `inventory`), rows in catalog order within each.
    pub fn by_section(&self) -> Vec<(&str, Vec<&RuleRow>)> {
        let mut groups: BTreeMap<SectionKey, (&str, Vec<&RuleRow>)> = BTreeMap::new();
        for row in &self.rows {
            groups
                .entry(SectionKey::of(&row.rule.section))
                .or_insert_with(|| (row.rule.section.as_str(), Vec::new()))
                .1
                .push(row);
        }
        groups.into_values().collect()
    }
}

/// Orders sections naturally: numbered ones by their numbers, then the others by name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum SectionKey {
    Numbered(Vec<u64>),
    Named(String),
}

impl SectionKey {
    fn of(section: &str) -> Self {
        let numbers: Option<Vec<u64>> = section.split('.').map(|p| p.parse().ok()).collect();
        match numbers {
            Some(numbers) => SectionKey::Numbered(numbers),
            None => SectionKey::Named(section.to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::with_sample;
    use super::*;

    #[test]
    fn every_status_is_derived() {
        with_sample(|data| {
            let status: BTreeMap<&str, RuleStatus> = data
                .rules
                .rows
                .iter()
                .map(|r| (r.rule.id.as_str(), r.status))
                .collect();
            // apply.a: one pass, one leak failure.
            assert_eq!(status["apply.a"], RuleStatus::Fail);
            // apply.b: the same leak failure and an expected failure.
            assert_eq!(status["apply.b"], RuleStatus::Fail);
            assert_eq!(status["apply.c"], RuleStatus::NotRun);
            assert_eq!(status["err.x"], RuleStatus::Fail);
            assert_eq!(status["read.c"], RuleStatus::NotApplicable);
            assert_eq!(status["scope.u"], RuleStatus::Untestable);
            assert_eq!(status["scope.v"], RuleStatus::Uncovered);
            assert_eq!(status["scope.p"], RuleStatus::Pending);
            assert_eq!(data.rules.rows.len(), 9);
        });
    }

    #[test]
    fn an_expected_failure_alone_is_expected_fail_and_a_pass_alone_is_pass() {
        let scenario = |outcome| ScenarioEntry {
            feature: "f.feature".to_owned(),
            line: 1,
            name: "s".to_owned(),
            tags: vec!["rule:a.b".to_owned()],
            outcome,
            failure: None,
            violations: Vec::new(),
            readings: BTreeMap::new(),
            duration: std::time::Duration::ZERO,
        };
        let index = RuleIndex::from_rules(vec![IndexedRule {
            id: "a.b".to_owned(),
            section: "3".to_owned(),
            kind: "rule".to_owned(),
            text: "t".to_owned(),
            untestable: None,
            pending: None,
            has_scenario: true,
        }]);
        let status = |outcomes: &[Outcome]| {
            let list: Vec<ScenarioEntry> = outcomes.iter().map(|o| scenario(*o)).collect();
            RuleMatrix::build(&index, &list).rows[0].status
        };
        assert_eq!(
            status(&[Outcome::Passed, Outcome::ExpectedFailure]),
            RuleStatus::ExpectedFail
        );
        assert_eq!(
            status(&[Outcome::Passed, Outcome::NotApplicable]),
            RuleStatus::Pass
        );
        assert_eq!(status(&[Outcome::UnexpectedPass]), RuleStatus::Fail);
        assert_eq!(status(&[Outcome::Skipped]), RuleStatus::Fail);
        assert_eq!(status(&[]), RuleStatus::NotRun);
    }

    #[test]
    fn a_pending_rule_is_pending_only_while_it_has_no_scenario() {
        let rule = |id: &str, has_scenario: bool| IndexedRule {
            id: id.to_owned(),
            section: "8".to_owned(),
            kind: "rule".to_owned(),
            text: "t".to_owned(),
            untestable: None,
            pending: Some("a client model".to_owned()),
            has_scenario,
        };
        let ran = ScenarioEntry {
            feature: "f.feature".to_owned(),
            line: 1,
            name: "s".to_owned(),
            tags: vec!["rule:p.ran".to_owned()],
            outcome: Outcome::Passed,
            failure: None,
            violations: Vec::new(),
            readings: BTreeMap::new(),
            duration: std::time::Duration::ZERO,
        };
        let index = RuleIndex::from_rules(vec![
            rule("p.none", false),
            rule("p.filtered", true),
            rule("p.ran", true),
        ]);
        let statuses: Vec<RuleStatus> = RuleMatrix::build(&index, &[ran])
            .rows
            .iter()
            .map(|r| r.status)
            .collect();
        assert_eq!(
            statuses,
            [RuleStatus::Pending, RuleStatus::NotRun, RuleStatus::Pass]
        );
    }

    #[test]
    fn the_index_reads_what_the_pending_list_waits_for() {
        use rewind_conformance::catalog::PendingRule;
        let catalog = Catalog::parse(
            std::path::Path::new("rules.yaml"),
            "version: 1\nrules:\n  - id: a.pending\n    section: \"8\"\n    sources: [rewind.md]\n    \
             kind: rule\n    side: client\n    text: t\n",
        )
        .expect("the catalog parses");
        let pending = Pending {
            path: "pending.yaml".into(),
            rules: vec![PendingRule {
                id: "a.pending".to_owned(),
                waits_for: "a client model".to_owned(),
                line: 3,
                column: 9,
            }],
        };
        let index = RuleIndex::new(
            &catalog,
            &Untestable::default(),
            &pending,
            &FeatureScan::default(),
        );
        let matrix = RuleMatrix::build(&index, &[]);
        assert_eq!(matrix.rows[0].status, RuleStatus::Pending);
        assert_eq!(
            matrix.rows[0].rule.pending.as_deref(),
            Some("a client model")
        );
        assert_eq!(matrix.counts()[&RuleStatus::Pending], 1);
    }

    #[test]
    fn sections_sort_naturally() {
        with_sample(|data| {
            let order: Vec<&str> = data.rules.by_section().iter().map(|(s, _)| *s).collect();
            assert_eq!(order, ["1", "2", "2.1", "6", "6.1", "9"]);
            let mut keys = ["10", "inventory", "2", "6.1.1", "6.1"].map(SectionKey::of);
            keys.sort();
            assert_eq!(
                keys,
                ["2", "6.1", "6.1.1", "10", "inventory"].map(SectionKey::of)
            );
        });
    }
}
