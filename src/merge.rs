//! `merge`: the results files of the N shards of one split run (`run --shard I/N`, each with
//! `--json` or `--report-dir`) made into one run's, from which every report is written as the
//! whole run would have written it.
//!
//! The files are checked first: each is a shard (it records its `shard` and `selection`), all
//! ran the same suite, selection, expectations, implementation and profile, split alike (the
//! same N, the same `--durations`), every shard is there once, and every scenario of the
//! selection is in exactly one of them. Whatever is wrong is said with the file it is in.
//!
//! Merging is then a union: the scenarios, the readings and refusal codes, the problems (each
//! once), the compatibility and fault matrices (their counts added up); the rule statuses are
//! computed again from every scenario, as a whole run computes them. The run's start is the
//! earliest shard's, its wall time from there to the end of the last shard to end.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;

use crate::reports::rules::IndexedRule;
use crate::reports::{Outcome, RuleIndex, RuleMatrix, ScenarioEntry};
use crate::results::{Results, ShardRecord};
use crate::suite::compat::CompatMatrix;
use crate::suite::fault_matrix::FaultMatrix;

/// One shard's results file, read.
#[derive(Debug)]
pub struct ShardFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// What it holds.
    pub results: Results,
}

impl ShardFile {
    /// `` `a.json` (shard 1/4) ``, or the path alone when the file records no shard.
    fn named(&self) -> String {
        match &self.results.shard {
            Some(shard) => format!(
                "`{}` (shard {}/{})",
                self.path.display(),
                shard.index,
                shard.count
            ),
            None => format!("`{}`", self.path.display()),
        }
    }

    fn shard(&self) -> &ShardRecord {
        self.results
            .shard
            .as_ref()
            .unwrap_or_else(|| unreachable!("checked by `check`"))
    }
}

/// Reads every file; the first that cannot be read (or is not a results file) is the error.
pub fn read_all(paths: &[PathBuf]) -> anyhow::Result<Vec<ShardFile>> {
    paths
        .iter()
        .map(|path| {
            Ok(ShardFile {
                path: path.clone(),
                results: crate::results::read(path)?,
            })
        })
        .collect()
}

/// At most this many scenarios are named in one message (the rest are counted).
const NAMED: usize = 10;

/// Everything that keeps `files` from being the shards of one split run, each in words that
/// name the files concerned; empty when they are.
pub fn check(files: &[ShardFile]) -> Vec<String> {
    let mut problems = Vec::new();
    for file in files {
        let missing: Vec<&str> = [
            ("`shard`", file.results.shard.is_none()),
            ("`selection`", file.results.selection.is_none()),
        ]
        .into_iter()
        .filter_map(|(field, missing)| missing.then_some(field))
        .collect();
        if !missing.is_empty() {
            problems.push(format!(
                "{} is not the results of a shard: it records no {} (it was written by a run \
                 without `--shard`, by `merge`, or by a harness older than `merge`; run every \
                 shard with `run --shard I/N` of this harness)",
                file.named(),
                missing.join(" and ")
            ));
        }
    }
    if !problems.is_empty() || files.is_empty() {
        return problems;
    }
    let first = &files[0];
    let (selection, shard) = (
        first
            .results
            .selection
            .as_ref()
            .unwrap_or_else(|| unreachable!("checked above")),
        first.shard(),
    );
    for file in &files[1..] {
        let (mine, my_shard) = (
            file.results
                .selection
                .as_ref()
                .unwrap_or_else(|| unreachable!("checked above")),
            file.shard(),
        );
        let (a, b) = (first.named(), file.named());
        if my_shard.count != shard.count {
            problems.push(format!(
                "{b} and {a} are shards of splits into {} and {} shards: the shards of one run \
                 are split alike (`--shard I/N` with the same N)",
                my_shard.count, shard.count
            ));
        }
        if mine.suite != selection.suite {
            problems.push(format!(
                "{b} ran another suite than {a} (its features, rule catalog, lists or fixtures \
                 differ: another build of the harness, or another `--suite`)"
            ));
        }
        let filters = |s: &crate::results::Selection| {
            let mut parts = Vec::new();
            if let Some(tags) = &s.tags {
                parts.push(format!("--tags `{tags}`"));
            }
            if let Some(name) = &s.name {
                parts.push(format!("--name `{name}`"));
            }
            if parts.is_empty() {
                "no filter".to_owned()
            } else {
                parts.join(" ")
            }
        };
        if (&mine.tags, &mine.name) != (&selection.tags, &selection.name) {
            problems.push(format!(
                "{b} selected with {}, {a} with {}: the shards of one run select alike",
                filters(mine),
                filters(selection)
            ));
        } else if (mine.scenarios, &mine.digest) != (selection.scenarios, &selection.digest) {
            problems.push(format!(
                "{b} selected other scenarios ({}) than {a} ({}) with the same filters",
                mine.scenarios, selection.scenarios
            ));
        }
        if mine.expectations != selection.expectations {
            let said = |e: &Option<String>| {
                if e.is_some() {
                    "an expectations file"
                } else {
                    "no expectations file"
                }
            };
            let theirs = if mine.expectations.is_some() && selection.expectations.is_some() {
                "another expectations file"
            } else {
                said(&mine.expectations)
            };
            problems.push(format!(
                "{b} was judged with {theirs}, {a} with {}: give every shard the same \
                 `--expectations`",
                said(&selection.expectations)
            ));
        }
        if my_shard.count == shard.count
            && mine.digest == selection.digest
            && my_shard.split != shard.split
        {
            problems.push(format!(
                "{b} split the selection otherwise than {a} (balanced by {} and by {}): give \
                 every shard the same `--durations` file, or none",
                my_shard.balanced_by, shard.balanced_by
            ));
        }
        if file.results.sut != first.results.sut {
            problems.push(format!(
                "{b} ran `{}`, {a} ran `{}`: the shards of one run test one implementation",
                file.results.sut, first.results.sut
            ));
        }
        if file.results.profile != first.results.profile {
            problems.push(format!(
                "{b} declared {}, {a} declared {}: give every shard the same `--profile`",
                file.results.profile.as_deref().unwrap_or("nothing"),
                first.results.profile.as_deref().unwrap_or("nothing")
            ));
        }
    }
    if !problems.is_empty() {
        return problems;
    }
    // Every shard once.
    let count = shard.count;
    let mut by_index: BTreeMap<usize, Vec<&ShardFile>> = BTreeMap::new();
    for file in files {
        by_index.entry(file.shard().index).or_default().push(file);
    }
    for (index, given) in &by_index {
        if given.len() > 1 {
            problems.push(format!(
                "shard {index}/{count} is given {} times: {}",
                given.len(),
                given
                    .iter()
                    .map(|f| format!("`{}`", f.path.display()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    let absent: Vec<String> = (1..=count)
        .filter(|i| !by_index.contains_key(i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !absent.is_empty() {
        problems.push(format!(
            "shard{} {} {} missing: no file given is {} (given: {})",
            if absent.len() == 1 { "" } else { "s" },
            absent.join(", "),
            if absent.len() == 1 { "is" } else { "are" },
            if absent.len() == 1 {
                "it"
            } else {
                "one of them"
            },
            files
                .iter()
                .map(|f| { format!("{}/{count} `{}`", f.shard().index, f.path.display()) })
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // Every scenario once, and every shard whole (a shard given twice was said above).
    let mut seen: BTreeMap<(&str, usize), &ShardFile> = BTreeMap::new();
    let mut twice = Vec::new();
    for file in by_index.values().filter_map(|given| given.first()) {
        for s in &file.results.scenarios {
            match seen.get(&(s.feature.as_str(), s.line)) {
                Some(other) => twice.push(format!(
                    "`{}:{}` ({}) is in {} and in {}",
                    s.feature,
                    s.line,
                    s.name,
                    other.named(),
                    file.named()
                )),
                None => {
                    seen.insert((s.feature.as_str(), s.line), file);
                }
            }
        }
        let (held, given) = (file.results.scenarios.len(), file.shard().scenarios);
        if held != given {
            problems.push(format!(
                "{} holds {held} scenario{} where its split gave it {given}: {}",
                file.named(),
                if held == 1 { "" } else { "s" },
                if held < given {
                    "the shard's run stopped early (`--fail-fast`, or it was interrupted); run \
                     it again whole"
                } else {
                    "the file was changed after the run"
                }
            ));
        }
    }
    if !twice.is_empty() {
        let more = twice.len().saturating_sub(NAMED);
        twice.truncate(NAMED);
        let mut text = format!(
            "{} scenario{} in more than one shard:\n    {}",
            twice.len() + more,
            if twice.len() + more == 1 {
                " is"
            } else {
                "s are"
            },
            twice.join("\n    ")
        );
        if more > 0 {
            text.push_str(&format!("\n    and {more} more"));
        }
        problems.push(text);
    }
    if problems.is_empty() && seen.len() != selection.scenarios {
        problems.push(format!(
            "the shards hold {} scenarios together, but their selection has {}",
            seen.len(),
            selection.scenarios
        ));
    }
    problems
}

/// The shards of one split run as one run: everything the reports are written from.
#[derive(Debug)]
pub struct Merged {
    /// The implementation.
    pub sut: String,
    /// What it declared.
    pub profile: String,
    /// The earliest shard's start.
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// From the earliest start to the latest end.
    pub duration: Duration,
    /// Every scenario, by feature file and line.
    pub scenarios: Vec<ScenarioEntry>,
    /// The catalog, as the shards recorded it.
    pub index: RuleIndex,
    /// Section 9 message to code, from every shard.
    pub refusal_codes: BTreeMap<String, String>,
    /// The fault matrix, every shard's cells added up.
    pub faults: FaultMatrix,
    /// The compatibility matrix, every shard's calls added up.
    pub compat: CompatMatrix,
    /// Every shard's problems, each once, and refusal codes the shards disagree on.
    pub problems: Vec<String>,
    /// The selection the shards share.
    pub selection: Option<crate::results::Selection>,
    /// Whether a shard's own outcome was not `passed`.
    pub a_shard_failed: bool,
}

impl Merged {
    /// The reports' view of the merged run.
    pub fn run_data(&self) -> crate::reports::RunData<'_> {
        crate::reports::RunData {
            sut: &self.sut,
            profile: &self.profile,
            started_at: self.started_at,
            duration: self.duration,
            scenarios: self.scenarios.clone(),
            rules: RuleMatrix::build(&self.index, &self.scenarios),
            refusal_codes: &self.refusal_codes,
            faults: &self.faults,
            compat: &self.compat,
            problems: self.problems.clone(),
            selection: self.selection.clone(),
            shard: None,
        }
    }
}

fn outcome_of(verdict: &str) -> Option<Outcome> {
    Outcome::ALL.into_iter().find(|o| o.as_str() == verdict)
}

/// When `file`'s run started and ended.
fn span(
    file: &ShardFile,
) -> anyhow::Result<Option<(chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>)>> {
    let Some(start) = &file.results.started_at else {
        return Ok(None);
    };
    let start = chrono::DateTime::parse_from_rfc3339(start)
        .with_context(|| {
            format!(
                "{}: `startedAt` is `{start}`, not an RFC 3339 time",
                file.named()
            )
        })?
        .with_timezone(&chrono::Utc);
    let took = chrono::Duration::milliseconds(
        i64::try_from(file.results.duration_ms.unwrap_or(0)).unwrap_or(i64::MAX / 2),
    );
    Ok(Some((start, start + took)))
}

/// Merges files that [`check`] found to be the shards of one run.
pub fn merge(files: &[ShardFile]) -> anyhow::Result<Merged> {
    let first = files.first().context("no shard to merge")?;
    let mut scenarios = Vec::new();
    for file in files {
        for s in &file.results.scenarios {
            let outcome = outcome_of(&s.verdict).with_context(|| {
                format!(
                    "{}: scenario `{}:{}` has the verdict `{}`, which is none of `passed`, \
                     `failed`, `skipped`, `protocol_violation`, `expected_failure`, \
                     `unexpected_pass`, `not_applicable`",
                    file.named(),
                    s.feature,
                    s.line,
                    s.verdict
                )
            })?;
            scenarios.push(ScenarioEntry {
                feature: s.feature.clone(),
                line: s.line,
                name: s.name.clone(),
                tags: s.tags.clone(),
                outcome,
                failure: s.failure.clone(),
                violations: s.protocol_violations.clone(),
                readings: s.readings.clone(),
                duration: Duration::from_millis(s.duration_ms.unwrap_or(0)),
            });
        }
    }
    scenarios.sort_by(|a, b| (&a.feature, a.line, &a.name).cmp(&(&b.feature, b.line, &b.name)));

    // The catalog as the first shard recorded it (they ran one suite); whether a rule has a
    // scenario anywhere, from every shard's statuses.
    let with_scenarios = ["fail", "expected_fail", "pass", "not_applicable", "not_run"];
    let has_scenario: BTreeSet<&str> = files
        .iter()
        .flat_map(|f| &f.results.rules)
        .filter(|r| with_scenarios.contains(&r.status.as_str()))
        .map(|r| r.id.as_str())
        .collect();
    let waits_for: BTreeMap<&str, &str> = files
        .iter()
        .flat_map(|f| &f.results.rules)
        .filter_map(|r| r.waits_for.as_deref().map(|w| (r.id.as_str(), w)))
        .collect();
    let index = RuleIndex::from_rules(
        first
            .results
            .rules
            .iter()
            .map(|r| IndexedRule {
                id: r.id.clone(),
                section: r.section.clone(),
                kind: r.kind.clone(),
                text: r.text.clone(),
                untestable: r.reason.clone(),
                pending: waits_for.get(r.id.as_str()).map(|w| (*w).to_owned()),
                has_scenario: has_scenario.contains(r.id.as_str()),
            })
            .collect(),
    );

    let mut problems: Vec<String> = Vec::new();
    for problem in files.iter().flat_map(|f| &f.results.problems) {
        if !problems.contains(problem) {
            problems.push(problem.clone());
        }
    }
    // Refusal codes: one code per section 9 message and one message per code, across shards
    // (each shard checked its own scenarios).
    let mut refusal_codes: BTreeMap<String, String> = BTreeMap::new();
    let mut code_from: BTreeMap<&str, &ShardFile> = BTreeMap::new();
    for file in files {
        for (message, code) in &file.results.refusal_codes {
            match refusal_codes.get(message) {
                Some(known) if known != code => problems.push(format!(
                    "refusal codes disagree between shards: section 9 error `{message}` was \
                     answered with `{known}` in {} and with `{code}` in {}",
                    code_from
                        .get(message.as_str())
                        .map(|f| f.named())
                        .unwrap_or_default(),
                    file.named()
                )),
                Some(_) => {}
                None => {
                    refusal_codes.insert(message.clone(), code.clone());
                    code_from.insert(message, file);
                }
            }
        }
    }
    let mut by_code: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (message, code) in &refusal_codes {
        by_code.entry(code).or_default().push(message);
    }
    for (code, messages) in by_code {
        let shards: BTreeSet<usize> = messages
            .iter()
            .filter_map(|m| code_from.get(m).map(|f| f.shard().index))
            .collect();
        if messages.len() > 1 && shards.len() > 1 {
            problems.push(format!(
                "refusal codes disagree between shards: distinct section 9 errors share the \
                 code `{code}`: {}",
                messages
                    .iter()
                    .map(|m| format!(
                        "`{m}` (in {})",
                        code_from.get(m).map(|f| f.named()).unwrap_or_default()
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }

    let faults = FaultMatrix::from_counts(
        &files
            .iter()
            .flat_map(|f| f.results.faults.iter().cloned())
            .collect::<Vec<_>>(),
    );
    let mut compat = CompatMatrix::default();
    for file in files {
        compat.add_rows(&file.results.compatibility);
    }

    let mut spans = Vec::new();
    for file in files {
        spans.extend(span(file)?);
    }
    let started_at = spans
        .iter()
        .map(|(start, _)| *start)
        .min()
        .unwrap_or_else(chrono::Utc::now);
    let ended_at = spans
        .iter()
        .map(|(_, end)| *end)
        .max()
        .unwrap_or(started_at);
    Ok(Merged {
        sut: first.results.sut.clone(),
        profile: first.results.profile.clone().unwrap_or_default(),
        started_at,
        duration: (ended_at - started_at).to_std().unwrap_or_default(),
        scenarios,
        index,
        refusal_codes,
        faults,
        compat,
        problems,
        selection: first.results.selection.clone(),
        a_shard_failed: files.iter().any(|f| {
            f.results
                .summary
                .as_ref()
                .is_some_and(|s| s.outcome != "passed")
        }),
    })
}

/// Reads and checks `paths`, and merges them; the error lists every problem found.
pub fn read_and_merge(paths: &[PathBuf]) -> anyhow::Result<(Vec<ShardFile>, Merged)> {
    let files = read_all(paths)?;
    let problems = check(&files);
    if !problems.is_empty() {
        anyhow::bail!(
            "{} not the shards of one split run:\n  - {}",
            if files.len() == 1 {
                "this file is"
            } else {
                "these files are"
            },
            problems.join("\n  - ")
        );
    }
    let merged = merge(&files)?;
    Ok((files, merged))
}

/// The one-line account of a shard for the summary.
pub fn describe(file: &ShardFile) -> String {
    let shard = file.shard();
    let counted = |verdict: &str| {
        file.results
            .scenarios
            .iter()
            .filter(|s| s.verdict == verdict)
            .count()
    };
    format!(
        "shard {}/{}: {} scenarios ({} passed), {:.1} s, {} ({})",
        shard.index,
        shard.count,
        file.results.scenarios.len(),
        counted("passed"),
        file.results.duration_ms.unwrap_or(0) as f64 / 1000.0,
        file.results
            .summary
            .as_ref()
            .map(|s| s.outcome.as_str())
            .unwrap_or("no outcome"),
        file.path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{RuleResult, ScenarioResult, Selection};
    use crate::suite::fault_matrix::FaultCount;

    fn scenario(line: usize, rule: &str, verdict: &str) -> ScenarioResult {
        ScenarioResult {
            feature: "features/f.feature".to_owned(),
            line,
            name: format!("scenario {line}"),
            tags: vec![format!("rule:{rule}")],
            rules: vec![rule.to_owned()],
            verdict: verdict.to_owned(),
            duration_ms: Some(100),
            failure: (verdict == "failed").then(|| "it failed".to_owned()),
            protocol_violations: Vec::new(),
            readings: BTreeMap::new(),
        }
    }

    fn rule(id: &str, status: &str) -> RuleResult {
        RuleResult {
            id: id.to_owned(),
            section: "6".to_owned(),
            kind: "rule".to_owned(),
            text: format!("text of {id}"),
            status: status.to_owned(),
            reason: (status == "untestable").then(|| "internal".to_owned()),
            waits_for: (status == "pending").then(|| "a browser".to_owned()),
            scenarios: Vec::new(),
        }
    }

    /// Shard `index` of 2, holding `scenarios`, whose own statuses of r1 and r2 are given.
    fn shard(
        index: usize,
        scenarios: Vec<ScenarioResult>,
        statuses: [&str; 2],
        codes: &[(&str, &str)],
        fault_passed: usize,
    ) -> ShardFile {
        ShardFile {
            path: PathBuf::from(format!("shard-{index}.json")),
            results: Results {
                format: crate::results::FORMAT.to_owned(),
                version: crate::results::VERSION,
                sut: "reference".to_owned(),
                profile: Some("everything".to_owned()),
                started_at: Some(format!("2026-01-01T00:00:0{index}.000Z")),
                duration_ms: Some(1500),
                selection: Some(Selection {
                    suite: "0000000000000001".to_owned(),
                    tags: None,
                    name: None,
                    scenarios: 2,
                    digest: "0000000000000002".to_owned(),
                    expectations: None,
                }),
                shard: Some(ShardRecord {
                    index,
                    count: 2,
                    scenarios: scenarios.len(),
                    balanced_by: "count".to_owned(),
                    split: "0000000000000003".to_owned(),
                }),
                summary: None,
                scenarios,
                rules: vec![
                    rule("r1", statuses[0]),
                    rule("r2", statuses[1]),
                    rule("r3", "not_run"),
                    rule("r4", "untestable"),
                    rule("r5", "pending"),
                ],
                refusal_codes: codes
                    .iter()
                    .map(|(m, c)| ((*m).to_owned(), (*c).to_owned()))
                    .collect(),
                compatibility: Vec::new(),
                faults: vec![FaultCount {
                    runtime: "codex".to_owned(),
                    fault: "hang".to_owned(),
                    scenarios: 1,
                    passed: fault_passed,
                }],
                problems: vec!["a stale expectation".to_owned()],
            },
        }
    }

    #[test]
    fn shards_merge_into_one_run_with_statuses_codes_and_matrices_recomputed() {
        let files = [
            shard(
                2,
                vec![scenario(9, "r2", "failed")],
                ["not_run", "fail"],
                &[("m1", "C2"), ("m2", "C1")],
                0,
            ),
            shard(
                1,
                vec![scenario(3, "r1", "passed")],
                ["pass", "not_run"],
                &[("m1", "C1"), ("m3", "C2")],
                1,
            ),
        ];
        assert_eq!(check(&files), Vec::<String>::new());
        let merged = merge(&files).expect("merged");
        let data = merged.run_data();
        let lines: Vec<usize> = data.scenarios.iter().map(|s| s.line).collect();
        assert_eq!(lines, [3, 9], "in feature and line order");
        let status = |id: &str| {
            data.rules
                .rows
                .iter()
                .find(|r| r.rule.id == id)
                .map(|r| r.status.as_str())
                .unwrap_or("none")
        };
        assert_eq!(
            ["r1", "r2", "r3", "r4", "r5"].map(status),
            ["pass", "fail", "not_run", "untestable", "pending"]
        );
        assert_eq!(data.outcome(), crate::reports::RunOutcome::Failed);
        // Each problem once; the shards' codes disagree twice over.
        assert_eq!(data.problems[0], "a stale expectation");
        assert_eq!(data.problems.len(), 3, "{:#?}", data.problems);
        assert!(
            data.problems[1].contains("`m1` was answered with `C2` in `shard-2.json`")
                && data.problems[1].contains("`C1` in `shard-1.json`"),
            "{:#?}",
            data.problems
        );
        assert!(
            data.problems[2].contains("share the code `C2`: `m1` (in `shard-2.json`")
                && data.problems[2].contains("`m3` (in `shard-1.json`"),
            "{:#?}",
            data.problems
        );
        assert_eq!(
            data.faults.counts(),
            [FaultCount {
                runtime: "codex".to_owned(),
                fault: "hang".to_owned(),
                scenarios: 2,
                passed: 1
            }]
        );
        // From the first start to the last end.
        assert_eq!(data.duration, Duration::from_millis(2500));
    }

    #[test]
    fn a_shard_without_its_records_is_named() {
        let mut old = shard(
            1,
            vec![scenario(3, "r1", "passed")],
            ["pass", "not_run"],
            &[],
            1,
        );
        old.results.shard = None;
        old.results.selection = None;
        let problems = check(&[old]);
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert!(
            problems[0].contains("`shard-1.json` is not the results of a shard")
                && problems[0].contains("`shard` and `selection`"),
            "{problems:#?}"
        );
    }
}
