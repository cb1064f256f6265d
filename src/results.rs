//! The results file (`run --json FILE`, format `rewind-conformance-results` version 2, schema
//! `schemas/results.schema.json`): its records, one per scenario (its rules, verdict, wall time
//! in `durationMs`, failure, protocol violations and readings) and one per catalog rule (its
//! status and scenarios); and [`compare_files`], which proves two runs (e.g. in process and
//! over HTTP) ended the same way, scenario for scenario, and sets their runtime compatibility
//! side by side (e.g. the pinned runtime releases and the newest ones). `compare` reads
//! versions 1 and 2.
//!
//! These records are the file's data model: the run's JSON report fills them and writes them.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// The format name written into every results file.
pub const FORMAT: &str = "rewind-conformance-results";
/// The version this harness writes.
pub const VERSION: u32 = 2;
/// Where the schema of [`VERSION`] is published, relative to the repository root.
pub const SCHEMA: &str = "schemas/results.schema.json";

/// A whole results file. Fields of version 2 default when a version 1 file is read.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Results {
    /// Always `rewind-conformance-results`.
    pub format: String,
    /// The format version (2; `compare` also reads 1).
    pub version: u32,
    /// The implementation that was run.
    pub sut: String,
    /// What the implementation declared (its capability profile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// When the run started (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// The run's wall time in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// What the run selected, from which suite (the shards of one split run select alike).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<Selection>,
    /// Which shard of a split run this is (absent for a whole run, a merged one included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardRecord>,
    /// The counts and the run's outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    /// Every scenario, run or left out by the profile, by feature file and line.
    pub scenarios: Vec<ScenarioResult>,
    /// Every catalog rule with its status in this run (version 2).
    #[serde(default)]
    pub rules: Vec<RuleResult>,
    /// Section 9 message to the code the implementation gave it (codes are the
    /// implementation's; the run only checks they are consistent).
    #[serde(default)]
    pub refusal_codes: BTreeMap<String, String>,
    /// What each runtime release the mocks imitated answered the implementation, by strategy
    /// step (works, or refused with the runtime's error; see `suite::compat`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compatibility: Vec<crate::suite::compat::Row>,
    /// The runtime restore fault matrix: each (runtime, fault) cell a scenario planted, with how
    /// many scenarios planted it and how many of them passed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<crate::suite::fault_matrix::FaultCount>,
    /// What failed the run outside every scenario (version 2).
    #[serde(default)]
    pub problems: Vec<String>,
}

/// What a run selected and judged by: two shards of one split run carry equal records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Selection {
    /// A digest of the suite's files the run read (the features, the catalog, the untestable,
    /// pending, ambiguity and leak lists, the fixtures).
    pub suite: String,
    /// The tag expression the run filtered by (`--tags`, with the `--rule` ids).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<String>,
    /// The `--name` regex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// How many scenarios the filters select (every outline example counted; every shard
    /// together).
    pub scenarios: usize,
    /// A digest of their places (feature file and line).
    pub digest: String,
    /// A digest of the expectations file, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expectations: Option<String>,
}

/// Which shard of a split run (`run --shard I/N`) a results file is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShardRecord {
    /// I, from 1.
    pub index: usize,
    /// N.
    pub count: usize,
    /// How many scenarios of the selection the split gave this shard.
    pub scenarios: usize,
    /// `durations` (`--durations FILE` balanced the split by time) or `count`.
    pub balanced_by: String,
    /// A digest of the whole split (every scenario of the selection with its shard): the
    /// shards of one run made the same split.
    pub split: String,
}

/// The counts of a run and how it ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Summary {
    /// `passed` (exit 0), `failed` (exit 1) or `protocol_violation` (exit 4).
    pub outcome: String,
    /// Every scenario, left out ones included.
    pub scenarios: usize,
    /// Scenarios by verdict (every verdict present, zeros included).
    pub verdicts: BTreeMap<String, usize>,
    /// Catalog rules by status (every status present, zeros included).
    pub rules: BTreeMap<String, usize>,
}

/// One scenario's outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScenarioResult {
    /// The feature file.
    pub feature: String,
    /// The scenario's line (an outline example's own row).
    pub line: usize,
    /// The scenario name, placeholders filled.
    pub name: String,
    /// Its tags, without `@`.
    pub tags: Vec<String>,
    /// The catalog rules it checks (its `@rule:` tags; version 2).
    #[serde(default)]
    pub rules: Vec<String>,
    /// `passed`, `failed`, `skipped`, `protocol_violation`, `expected_failure`,
    /// `unexpected_pass` or `not_applicable`.
    pub verdict: String,
    /// Its wall time in milliseconds (0 for a scenario that did not run; version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The first failure, if any (for a scenario left out: why).
    pub failure: Option<String>,
    /// Every protocol violation it met (version 2).
    #[serde(default)]
    pub protocol_violations: Vec<String>,
    /// The readings of the ambiguity register the implementation took here (ambiguity id to
    /// reading id, see `features/ambiguities.yaml`).
    #[serde(default)]
    pub readings: BTreeMap<String, String>,
}

/// One catalog rule's status in the run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleResult {
    /// The rule id.
    pub id: String,
    /// The spec section.
    pub section: String,
    /// `rule`, `error` or `invariant`.
    pub kind: String,
    /// The one-line paraphrase.
    pub text: String,
    /// `pass`, `fail`, `expected_fail`, `not_applicable`, `not_run`, `untestable`, `pending`
    /// or `uncovered`.
    pub status: String,
    /// Why no black-box scenario can check it (untestable rules only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The piece of harness work its scenario waits for (`features/pending.yaml`; pending rules
    /// only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits_for: Option<String>,
    /// The scenarios of the run that check it.
    pub scenarios: Vec<RuleScenarioResult>,
}

/// A scenario as a rule's record names it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleScenarioResult {
    /// The feature file.
    pub feature: String,
    /// The scenario's line.
    pub line: usize,
    /// The scenario's name.
    pub name: String,
    /// Its verdict.
    pub verdict: String,
}

/// Reads a results file (version 1 or 2). A file that is not one is an error that says where:
/// `FILE:LINE:COLUMN: what is wrong`.
pub fn read(path: &Path) -> anyhow::Result<Results> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the results file `{}`", path.display()))?;
    let results: Results = serde_json::from_str(&text).map_err(|e| {
        let full = e.to_string();
        let position = format!(" at line {} column {}", e.line(), e.column());
        let what = full.strip_suffix(&position).unwrap_or(&full);
        let not_json = matches!(
            e.classify(),
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof
        );
        anyhow::anyhow!(
            "{}:{}:{}: {}: {what} (a results file is written by `run --json` or \
             `--report-dir`; version {VERSION} is described by `{SCHEMA}`)",
            path.display(),
            e.line(),
            e.column(),
            if not_json {
                "not JSON"
            } else {
                "not a results file"
            }
        )
    })?;
    anyhow::ensure!(
        results.format == FORMAT && (1..=VERSION).contains(&results.version),
        "`{}` is a `{}` file of version {}, not a {FORMAT} file of version 1 or {VERSION}",
        path.display(),
        results.format,
        results.version
    );
    Ok(results)
}

/// How a `compare` ended.
#[derive(Debug)]
pub struct Compared {
    /// No verdict differs and no runtime step diverges.
    pub same: bool,
    /// The compatibility of the two runs side by side, as Markdown (`--compat-matrix`); when
    /// the files do not both carry compatibility rows, a line that says so.
    pub compat_markdown: String,
}

/// Compares two results files: scenario by scenario (unless `compat_only`), printing every
/// difference, then their compatibility rows side by side when both carry some, printing the
/// table and every divergence ([`crate::suite::compat::SideBySide`]). `compat_only` needs both
/// files to carry compatibility rows.
pub fn compare_files(
    expected: &Path,
    actual: &Path,
    compat_only: bool,
) -> anyhow::Result<Compared> {
    let (a, b) = (read(expected)?, read(actual)?);
    let names = (expected.display().to_string(), actual.display().to_string());
    let lacking: Vec<&str> = [(&names.0, &a), (&names.1, &b)]
        .into_iter()
        .filter(|(_, r)| r.compatibility.is_empty())
        .map(|(name, _)| name.as_str())
        .collect();
    if compat_only {
        anyhow::ensure!(
            lacking.is_empty(),
            "`compare --compat-only`: {} carr{} no compatibility rows (a run records them when \
             its scenarios call mock or real runtimes), so there is nothing to compare",
            lacking
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(" and "),
            if lacking.len() == 1 { "ies" } else { "y" }
        );
    }
    let same_scenarios = compat_only || compare_scenarios(&a, &b);
    if lacking.is_empty() {
        let side = crate::suite::compat::SideBySide::new(
            (&names.0, &a.compatibility),
            (&names.1, &b.compatibility),
        );
        let divergences = side.divergences();
        println!("\n{}", side.table());
        for d in &divergences {
            println!("runtime step diverges: {}", side.describe(d));
        }
        println!(
            "compared the compatibility of `{}` with `{}`: {} runtime steps side by side, {}{}",
            names.0,
            names.1,
            side.steps.len(),
            match divergences.len() {
                0 => "none diverges".to_owned(),
                1 => "1 diverges".to_owned(),
                n => format!("{n} diverge"),
            },
            match side.one_sided() {
                0 => String::new(),
                n => format!(" ({n} exercised in one run only)"),
            }
        );
        return Ok(Compared {
            same: same_scenarios && divergences.is_empty(),
            compat_markdown: side.markdown(),
        });
    }
    let note = if lacking.len() == 2 {
        format!(
            "Neither `{}` nor `{}` carries compatibility rows: nothing to set side by side.",
            names.0, names.1
        )
    } else {
        format!(
            "`{}` carries no compatibility rows: nothing to set side by side.",
            lacking[0]
        )
    };
    // Files without compatibility rows compare as they always did; one carrying rows the other
    // lacks is said, not counted.
    if lacking.len() == 1 {
        println!("{note}");
    }
    Ok(Compared {
        same: same_scenarios,
        compat_markdown: format!("# Runtime compatibility side by side\n\n{note}\n"),
    })
}

/// Compares two runs scenario by scenario; prints every difference. True when both ran the
/// same scenarios with the same verdicts.
fn compare_scenarios(a: &Results, b: &Results) -> bool {
    let key = |s: &ScenarioResult| (s.feature.clone(), s.line, s.name.clone());
    let left: BTreeMap<_, _> = a.scenarios.iter().map(|s| (key(s), s)).collect();
    let right: BTreeMap<_, _> = b.scenarios.iter().map(|s| (key(s), s)).collect();
    let mut differences = 0;
    for (k, l) in &left {
        match right.get(k) {
            None => {
                differences += 1;
                println!(
                    "only in `{}` ({}): {}:{} {}",
                    a.sut, l.verdict, k.0, k.1, k.2
                );
            }
            Some(r) if r.verdict != l.verdict => {
                differences += 1;
                println!(
                    "{}:{} {}: `{}` {}, `{}` {}{}",
                    k.0,
                    k.1,
                    k.2,
                    a.sut,
                    l.verdict,
                    b.sut,
                    r.verdict,
                    r.failure
                        .as_deref()
                        .or(l.failure.as_deref())
                        .map(|f| format!(" -- {f}"))
                        .unwrap_or_default()
                );
            }
            Some(_) => {}
        }
    }
    for (k, r) in &right {
        if !left.contains_key(k) {
            differences += 1;
            println!(
                "only in `{}` ({}): {}:{} {}",
                b.sut, r.verdict, k.0, k.1, k.2
            );
        }
    }
    // Readings are the implementations' own choices where the spec leaves one: shown, never
    // counted as a difference.
    let taken = |r: &Results| {
        let mut out: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
        for s in &r.scenarios {
            for (ambiguity, reading) in &s.readings {
                out.entry(ambiguity.clone())
                    .or_default()
                    .insert(reading.clone());
            }
        }
        out
    };
    let (ta, tb) = (taken(a), taken(b));
    for ambiguity in ta
        .keys()
        .chain(tb.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let (ra, rb) = (ta.get(ambiguity), tb.get(ambiguity));
        if ra != rb {
            let list = |r: Option<&std::collections::BTreeSet<String>>| {
                r.map(|set| set.iter().cloned().collect::<Vec<_>>().join(", "))
                    .unwrap_or_else(|| "-".to_owned())
            };
            println!(
                "reading of `{ambiguity}`: `{}` took {}, `{}` took {}",
                a.sut,
                list(ra),
                b.sut,
                list(rb)
            );
        }
    }
    let passed = |r: &Results| r.scenarios.iter().filter(|s| s.verdict == "passed").count();
    println!(
        "compared {} scenarios of `{}` ({} passed) with {} of `{}` ({} passed): {}",
        a.scenarios.len(),
        a.sut,
        passed(a),
        b.scenarios.len(),
        b.sut,
        passed(b),
        if differences == 0 {
            "every outcome is the same".to_owned()
        } else {
            format!("{differences} differ")
        }
    );
    differences == 0
}

/// Writes `text` to `path`, making its directory first (`compare --compat-matrix`).
pub fn write_report(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)
}
