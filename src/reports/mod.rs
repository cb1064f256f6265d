//! The reports of one run, in every format CI systems read, written from the final
//! [`SuiteReport`] (after the leak scan, the protocol-violation marking and the expectations):
//!
//! - [`junit`]: JUnit XML, one `<testcase>` per scenario (`--junit FILE`);
//! - [`json`]: the JSON results file, format version 2, with its schema in
//!   `schemas/results.schema.json` (`--json FILE`; its records are [`crate::results`]'s);
//! - [`markdown`]: a summary for a CI job summary or a pull-request comment (`--markdown FILE`);
//! - [`html`]: the rule-by-rule matrix as one self-contained page (`--html FILE`);
//! - the runtime restore fault matrix and the runtime compatibility matrix, as Markdown
//!   (`--fault-matrix FILE`, `--compat-matrix FILE`);
//!
//! and `--report-dir DIR` writes all of them at once under fixed names ([`Kind::file_name`]).

pub mod html;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod rules;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;

use crate::suite::compat::CompatMatrix;
use crate::suite::fault_matrix::FaultMatrix;
use crate::suite::{SuiteReport, Verdict};
pub use rules::{RuleIndex, RuleMatrix, RuleStatus};

/// What a report file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// JUnit XML.
    Junit,
    /// The JSON results file (version 2).
    Json,
    /// The Markdown summary.
    Markdown,
    /// The rule matrix page.
    Html,
    /// The runtime restore fault matrix (Markdown).
    FaultMatrix,
    /// The runtime compatibility matrix (Markdown).
    CompatMatrix,
}

impl Kind {
    /// Every kind, in the order `--report-dir` writes them.
    pub const ALL: [Kind; 6] = [
        Kind::Junit,
        Kind::Json,
        Kind::Markdown,
        Kind::Html,
        Kind::FaultMatrix,
        Kind::CompatMatrix,
    ];

    /// The file's name under `--report-dir`.
    pub fn file_name(self) -> &'static str {
        match self {
            Kind::Junit => "junit.xml",
            Kind::Json => "results.json",
            Kind::Markdown => "summary.md",
            Kind::Html => "rules.html",
            Kind::FaultMatrix => "fault-matrix.md",
            Kind::CompatMatrix => "compat-matrix.md",
        }
    }

    /// The option that writes this report alone.
    pub fn flag(self) -> &'static str {
        match self {
            Kind::Junit => "--junit",
            Kind::Json => "--json",
            Kind::Markdown => "--markdown",
            Kind::Html => "--html",
            Kind::FaultMatrix => "--fault-matrix",
            Kind::CompatMatrix => "--compat-matrix",
        }
    }

    /// What it is, for messages.
    pub fn what(self) -> &'static str {
        match self {
            Kind::Junit => "JUnit report",
            Kind::Json => "results file",
            Kind::Markdown => "Markdown summary",
            Kind::Html => "rule matrix page",
            Kind::FaultMatrix => "fault matrix",
            Kind::CompatMatrix => "runtime compatibility matrix",
        }
    }

    /// Whether it shows the rule matrix (which needs the catalog and the untestable and pending
    /// lists).
    pub fn needs_rules(self) -> bool {
        matches!(self, Kind::Json | Kind::Markdown | Kind::Html)
    }
}

/// One report file to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Which report.
    pub kind: Kind,
    /// Where.
    pub path: PathBuf,
    /// The option that asked for it, as typed (`--junit out.xml`, `--report-dir out`).
    pub option: String,
}

/// The files a run writes: each single-report option given, then every report under
/// `report_dir`.
pub fn targets(single: &[(Kind, Option<&PathBuf>)], report_dir: Option<&Path>) -> Vec<Target> {
    let mut out: Vec<Target> = single
        .iter()
        .filter_map(|(kind, path)| {
            path.map(|path| Target {
                kind: *kind,
                path: path.clone(),
                option: format!("{} {}", kind.flag(), path.display()),
            })
        })
        .collect();
    if let Some(dir) = report_dir {
        for kind in Kind::ALL {
            out.push(Target {
                kind,
                path: dir.join(kind.file_name()),
                option: format!("--report-dir {}", dir.display()),
            });
        }
    }
    out
}

/// How a scenario ended, as every report names it: a [`Verdict`], or left out by the
/// capability profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    /// Every step passed.
    Passed,
    /// A step or hook failed, or the leak scan found rewound text.
    Failed,
    /// A step matched no definition.
    Skipped,
    /// The implementation answered outside driver protocol v1.
    ProtocolViolation,
    /// Failed, as the expectations file says.
    ExpectedFailure,
    /// Passed although the expectations file says it fails.
    UnexpectedPass,
    /// The capability profile leaves it out.
    NotApplicable,
}

impl Outcome {
    /// Every outcome, in the order the reports count them.
    pub const ALL: [Outcome; 7] = [
        Outcome::Passed,
        Outcome::Failed,
        Outcome::Skipped,
        Outcome::ProtocolViolation,
        Outcome::ExpectedFailure,
        Outcome::UnexpectedPass,
        Outcome::NotApplicable,
    ];

    /// The name in the JSON results and the pages' classes.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::NotApplicable => "not_applicable",
            Outcome::Passed => Verdict::Passed.as_str(),
            Outcome::Failed => Verdict::Failed.as_str(),
            Outcome::Skipped => Verdict::Skipped.as_str(),
            Outcome::ProtocolViolation => Verdict::ProtocolViolation.as_str(),
            Outcome::ExpectedFailure => Verdict::ExpectedFailure.as_str(),
            Outcome::UnexpectedPass => Verdict::UnexpectedPass.as_str(),
        }
    }

    /// The name for people.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed => "failed",
            Outcome::Skipped => "undefined step",
            Outcome::ProtocolViolation => "protocol violation",
            Outcome::ExpectedFailure => "expected failure",
            Outcome::UnexpectedPass => "unexpected pass",
            Outcome::NotApplicable => "not applicable",
        }
    }

    /// Whether it fails the run.
    pub fn fails(self) -> bool {
        matches!(
            self,
            Outcome::Failed
                | Outcome::Skipped
                | Outcome::ProtocolViolation
                | Outcome::UnexpectedPass
        )
    }
}

impl From<Verdict> for Outcome {
    fn from(verdict: Verdict) -> Self {
        match verdict {
            Verdict::Passed => Outcome::Passed,
            Verdict::Failed => Outcome::Failed,
            Verdict::Skipped => Outcome::Skipped,
            Verdict::ProtocolViolation => Outcome::ProtocolViolation,
            Verdict::ExpectedFailure => Outcome::ExpectedFailure,
            Verdict::UnexpectedPass => Outcome::UnexpectedPass,
        }
    }
}

/// One scenario, run or left out, as the reports show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioEntry {
    /// The feature file (as the run names it).
    pub feature: String,
    /// The scenario's line (an outline example's own row).
    pub line: usize,
    /// The scenario name, placeholders filled.
    pub name: String,
    /// Its tags, without `@`.
    pub tags: Vec<String>,
    /// How it ended.
    pub outcome: Outcome,
    /// The first failure; for a scenario left out, why.
    pub failure: Option<String>,
    /// Every protocol violation it met.
    pub violations: Vec<String>,
    /// The ambiguity readings it took (ambiguity id to reading id).
    pub readings: BTreeMap<String, String>,
    /// Its wall time (zero when it did not run).
    pub duration: Duration,
}

impl ScenarioEntry {
    /// The catalog rules it is tagged with.
    pub fn rules(&self) -> impl Iterator<Item = &str> {
        self.tags.iter().filter_map(|t| t.strip_prefix("rule:"))
    }

    /// `features/apply.feature:12`.
    pub fn location(&self) -> String {
        format!("{}:{}", self.feature, self.line)
    }
}

/// Every scenario of `report`, run or left out by the profile, by feature file and line.
pub fn entries(report: &SuiteReport) -> Vec<ScenarioEntry> {
    let mut out: Vec<ScenarioEntry> = report
        .record
        .features
        .iter()
        .flat_map(|(feature, record)| {
            record.scenarios.iter().map(move |s| ScenarioEntry {
                feature: feature.clone(),
                line: s.line,
                name: s.name.clone(),
                tags: s.tags.clone(),
                outcome: s.verdict.into(),
                failure: s.failure.clone(),
                violations: s.violations.clone(),
                readings: s.readings.clone(),
                duration: s.duration,
            })
        })
        .chain(report.not_applicable.iter().map(|n| ScenarioEntry {
            feature: n.feature.clone(),
            line: n.line,
            name: n.name.clone(),
            tags: n.tags.clone(),
            outcome: Outcome::NotApplicable,
            failure: Some(n.reason.clone()),
            violations: Vec::new(),
            readings: BTreeMap::new(),
            duration: Duration::ZERO,
        }))
        .collect();
    out.sort_by(|a, b| (&a.feature, a.line, &a.name).cmp(&(&b.feature, b.line, &b.name)));
    out
}

/// Scenario counts by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Every scenario, left out ones included.
    pub total: usize,
    /// Passed.
    pub passed: usize,
    /// Failed.
    pub failed: usize,
    /// A step matched no definition.
    pub skipped: usize,
    /// Protocol violations.
    pub violations: usize,
    /// Expected failures.
    pub expected_failures: usize,
    /// Unexpected passes.
    pub unexpected_passes: usize,
    /// Left out by the profile.
    pub not_applicable: usize,
}

/// How the whole run ended, as its exit code says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// Exit 0.
    Passed,
    /// Exit 1.
    Failed,
    /// Exit 4.
    ProtocolViolation,
}

impl RunOutcome {
    /// The name in the JSON results.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Passed => "passed",
            RunOutcome::Failed => "failed",
            RunOutcome::ProtocolViolation => "protocol_violation",
        }
    }
}

/// Everything the reports show of one run.
#[derive(Debug)]
pub struct RunData<'a> {
    /// The implementation's name.
    pub sut: &'a str,
    /// What it declared (its capability profile, described).
    pub profile: &'a str,
    /// When the run started.
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// The run's wall time (PostgreSQL's provisioning aside).
    pub duration: Duration,
    /// Every scenario, by feature file and line.
    pub scenarios: Vec<ScenarioEntry>,
    /// Every catalog rule with its status in this run.
    pub rules: RuleMatrix,
    /// Section 9 message to the code the implementation answered.
    pub refusal_codes: &'a BTreeMap<String, String>,
    /// The runtime restore fault matrix.
    pub faults: &'a FaultMatrix,
    /// The runtime compatibility matrix.
    pub compat: &'a CompatMatrix,
    /// What failed the run outside every scenario: features that did not parse, expectations
    /// that name no scenario.
    pub problems: Vec<String>,
    /// What the run selected, from which suite (recorded in the results file).
    pub selection: Option<crate::results::Selection>,
    /// Which shard of a split run this is.
    pub shard: Option<crate::results::ShardRecord>,
}

impl<'a> RunData<'a> {
    /// The reports' view of `report`; `index` is the catalog (empty when no report shows
    /// rules).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        sut: &'a str,
        profile: &'a str,
        started_at: chrono::DateTime<chrono::Utc>,
        duration: Duration,
        report: &'a SuiteReport,
        index: &RuleIndex,
        (faults, compat): (&'a FaultMatrix, &'a CompatMatrix),
        problems: Vec<String>,
    ) -> Self {
        let scenarios = entries(report);
        let rules = RuleMatrix::build(index, &scenarios);
        let mut problems = problems;
        problems.extend(
            report
                .record
                .parse_errors
                .iter()
                .map(|e| format!("a feature does not parse: {e}")),
        );
        RunData {
            sut,
            profile,
            started_at,
            duration,
            scenarios,
            rules,
            refusal_codes: &report.refusal_codes,
            faults,
            compat,
            problems,
            selection: None,
            shard: None,
        }
    }

    /// Scenario counts by outcome.
    pub fn tally(&self) -> Tally {
        let mut t = Tally {
            total: self.scenarios.len(),
            ..Tally::default()
        };
        for s in &self.scenarios {
            match s.outcome {
                Outcome::Passed => t.passed += 1,
                Outcome::Failed => t.failed += 1,
                Outcome::Skipped => t.skipped += 1,
                Outcome::ProtocolViolation => t.violations += 1,
                Outcome::ExpectedFailure => t.expected_failures += 1,
                Outcome::UnexpectedPass => t.unexpected_passes += 1,
                Outcome::NotApplicable => t.not_applicable += 1,
            }
        }
        t
    }

    /// How the run ended (as its exit code: 4 for protocol violations, 1 for failures).
    pub fn outcome(&self) -> RunOutcome {
        let t = self.tally();
        if t.violations > 0 {
            RunOutcome::ProtocolViolation
        } else if t.failed + t.skipped + t.unexpected_passes > 0 || !self.problems.is_empty() {
            RunOutcome::Failed
        } else {
            RunOutcome::Passed
        }
    }

    /// The scenarios that fail the run, in feature and line order.
    pub fn failures(&self) -> impl Iterator<Item = &ScenarioEntry> {
        self.scenarios.iter().filter(|s| s.outcome.fails())
    }

    /// The text of one report.
    pub fn render(&self, kind: Kind) -> anyhow::Result<String> {
        Ok(match kind {
            Kind::Junit => junit::render(self),
            Kind::Json => json::render(self)?,
            Kind::Markdown => markdown::render(self),
            Kind::Html => html::render(self),
            Kind::FaultMatrix => fault_matrix_markdown(self.faults),
            Kind::CompatMatrix => compat_matrix_markdown(self.compat),
        })
    }
}

/// The fault matrix as a Markdown document.
pub fn fault_matrix_markdown(matrix: &FaultMatrix) -> String {
    format!(
        "# Runtime restore fault matrix\n\n\
         Each cell: whether every scenario that planted this fault in this runtime's restore \
         passed (`-`: no scenario ran).\n\n{}",
        matrix.markdown()
    )
}

/// The runtime compatibility matrix as a Markdown document.
pub fn compat_matrix_markdown(matrix: &CompatMatrix) -> String {
    format!(
        "# Runtime compatibility\n\n\
         What each runtime release the mocks imitated answered the implementation at each \
         step of its recovery strategy (`works (n)` calls, or `refused (n): <the runtime's \
         error>`; planted faults left out; `-`: no such call).\n\n{}",
        matrix.markdown()
    )
}

/// Writes every target, making directories; the error names the file and the option that
/// asked for it.
pub fn write_all(targets: &[Target], data: &RunData) -> anyhow::Result<()> {
    let mut rendered: BTreeMap<Kind, String> = BTreeMap::new();
    for target in targets {
        let text = match rendered.entry(target.kind) {
            std::collections::btree_map::Entry::Occupied(done) => done.into_mut(),
            std::collections::btree_map::Entry::Vacant(slot) => {
                slot.insert(data.render(target.kind)?)
            }
        };
        if let Some(dir) = target.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| {
                format!(
                    "creating `{}` for the {} (`{}`)",
                    dir.display(),
                    target.kind.what(),
                    target.option
                )
            })?;
        }
        std::fs::write(&target.path, text).with_context(|| {
            format!(
                "writing the {} `{}` (`{}`)",
                target.kind.what(),
                target.path.display(),
                target.option
            )
        })?;
    }
    Ok(())
}

/// The first `lines` lines of `text`, each cut at `width` characters, with a note of what was
/// left out.
pub fn first_lines(text: &str, lines: usize, width: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = all.iter().take(lines).map(|l| clip(l, width)).collect();
    if all.len() > lines {
        out.push(format!("... ({} more lines)", all.len() - lines));
    }
    out.join("\n")
}

/// `text` cut at `width` characters, with `...` when it was longer.
pub fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(width.saturating_sub(3)).collect();
        format!("{cut}...")
    }
}

/// A duration in seconds with millisecond precision (`1.234`).
pub fn seconds(duration: Duration) -> String {
    format!("{:.3}", duration.as_secs_f64())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::suite::{FeatureRecord, RunRecord, ScenarioRecord};

    /// A small run: a pass, a leak-scan failure, a protocol violation, an expected failure, a
    /// scenario left out; text that needs escaping everywhere.
    pub fn sample_report() -> SuiteReport {
        let scenario = |line: usize, name: &str, rules: &[&str], verdict: Verdict| {
            let mut tags: Vec<String> = rules.iter().map(|r| format!("rule:{r}")).collect();
            tags.push("slow".to_owned());
            ScenarioRecord {
                name: name.to_owned(),
                line,
                tags,
                verdict,
                failure: None,
                readings: BTreeMap::new(),
                violations: Vec::new(),
                duration: Duration::from_millis(line as u64 * 10),
            }
        };
        let mut passed = scenario(
            3,
            "the suffix is tombstoned <fast> & \"quoted\"",
            &["apply.a"],
            Verdict::Passed,
        );
        passed
            .readings
            .insert("tail-fork".to_owned(), "cascade".to_owned());
        let mut leak = scenario(
            9,
            "a leak ]]> `x` | y",
            &["apply.a", "apply.b"],
            Verdict::Failed,
        );
        leak.failure = Some(format!(
            "{} (features/leak-allow.yaml lists where the spec allows it):\n  `t`.`c` of row \
             {{\"id\":\"m<1>\"}} still holds `CANARY-\u{1}x`\n--- expected\n+++ actual\n-a\n+b",
            crate::suite::LEAK_PREFIX
        ));
        let mut violation = scenario(20, "off the schema", &["err.x"], Verdict::ProtocolViolation);
        violation.violations = vec![
            "`POST /rewind` answered a body that is not JSON: <html>".to_owned(),
            "`POST /detach` answered 500".to_owned(),
        ];
        violation.failure = violation.violations.first().cloned();
        let mut expected = scenario(30, "known bug", &["apply.b"], Verdict::ExpectedFailure);
        expected.failure = Some("expected to fail (ACME-1): step failed".to_owned());
        let mut record = RunRecord::default();
        record.features.insert(
            "features/apply.feature".to_owned(),
            FeatureRecord {
                name: "Apply".to_owned(),
                scenarios: vec![leak, passed, expected],
            },
        );
        record.features.insert(
            "features/errors.feature".to_owned(),
            FeatureRecord {
                name: "Errors".to_owned(),
                scenarios: vec![violation],
            },
        );
        SuiteReport {
            record,
            not_applicable: vec![crate::suite::applicability::NotApplicable {
                feature: "features/read.feature".to_owned(),
                line: 5,
                name: "reads history".to_owned(),
                reason: "surface `history` is not declared".to_owned(),
                tags: vec!["rule:read.c".to_owned()],
            }],
            refusal_codes: [("no".to_owned(), "E_NO".to_owned())].into(),
            code_conflicts: Vec::new(),
        }
    }

    /// What the pending rule of [`sample_index`] waits for (text that needs escaping).
    pub const SAMPLE_WAITS_FOR: &str = "a client model <of> the browser & `its` | cursor";

    /// The catalog of [`sample_report`]: one rule per status.
    pub fn sample_index() -> RuleIndex {
        let rule = |id: &str, section: &str, untestable: Option<&str>, has_scenario: bool| {
            rules::IndexedRule {
                id: id.to_owned(),
                section: section.to_owned(),
                kind: "rule".to_owned(),
                text: format!("text of {id} <b>&</b>"),
                untestable: untestable.map(str::to_owned),
                pending: None,
                has_scenario,
            }
        };
        let pending = rules::IndexedRule {
            pending: Some(SAMPLE_WAITS_FOR.to_owned()),
            ..rule("scope.p", "2", None, false)
        };
        RuleIndex::from_rules(vec![
            rule("apply.a", "6", None, true),
            rule("apply.b", "6", None, true),
            rule("apply.c", "6", None, true),
            rule("err.x", "9", None, true),
            rule("read.c", "1", None, true),
            rule("scope.u", "2", Some("internal"), false),
            pending,
            rule("scope.v", "2.1", None, false),
            rule("apply.d", "6.1", None, true),
        ])
    }

    pub fn with_sample<T>(f: impl FnOnce(&RunData) -> T) -> T {
        let report = sample_report();
        let (faults, compat) = (FaultMatrix::default(), CompatMatrix::default());
        let data = RunData::new(
            "reference",
            "every runtime",
            chrono::DateTime::from_timestamp(1_700_000_000, 0).expect("a valid time"),
            Duration::from_millis(4321),
            &report,
            &sample_index(),
            (&faults, &compat),
            vec!["expected failure `x: y` names no scenario".to_owned()],
        );
        f(&data)
    }

    #[test]
    fn scenarios_are_ordered_and_tallied() {
        with_sample(|data| {
            let order: Vec<String> = data.scenarios.iter().map(|s| s.location()).collect();
            assert_eq!(
                order,
                [
                    "features/apply.feature:3",
                    "features/apply.feature:9",
                    "features/apply.feature:30",
                    "features/errors.feature:20",
                    "features/read.feature:5"
                ]
            );
            let t = data.tally();
            assert_eq!(
                (
                    t.total,
                    t.passed,
                    t.failed,
                    t.violations,
                    t.expected_failures
                ),
                (5, 1, 1, 1, 1)
            );
            assert_eq!(t.not_applicable, 1);
            assert_eq!(data.outcome(), RunOutcome::ProtocolViolation);
            assert_eq!(data.failures().count(), 2);
        });
    }

    #[test]
    fn report_dir_names_every_report() {
        let junit = PathBuf::from("a.xml");
        let all = targets(
            &[(Kind::Junit, Some(&junit)), (Kind::Json, None)],
            Some(Path::new("out")),
        );
        assert_eq!(all.len(), 7);
        assert_eq!(all[0].option, "--junit a.xml");
        let names: Vec<String> = all[1..]
            .iter()
            .map(|t| t.path.display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "out/junit.xml",
                "out/results.json",
                "out/summary.md",
                "out/rules.html",
                "out/fault-matrix.md",
                "out/compat-matrix.md"
            ]
        );
        assert!(all[1..].iter().all(|t| t.option == "--report-dir out"));
    }

    #[test]
    fn write_all_names_the_file_it_cannot_write() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "x").expect("a file");
        let target = Target {
            kind: Kind::Markdown,
            path: blocker.join("summary.md"),
            option: "--markdown x".to_owned(),
        };
        let err = with_sample(|data| write_all(&[target], data))
            .expect_err("a file cannot be a directory");
        let text = format!("{err:#}");
        assert!(text.contains(&blocker.display().to_string()), "{text}");
        assert!(text.contains("Markdown summary"), "{text}");
    }

    #[test]
    fn clip_and_first_lines() {
        assert_eq!(clip("abcdef", 5), "ab...");
        assert_eq!(clip("abc", 5), "abc");
        assert_eq!(first_lines("a\nb\nc", 2, 10), "a\nb\n... (1 more lines)");
    }
}
