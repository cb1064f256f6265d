//! The results file (`run --json FILE`): one record per scenario, and [`compare_files`], which
//! proves two runs (e.g. in process and over HTTP) ended the same way, scenario for scenario.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::suite::SuiteReport;

/// The format name written into every results file.
const FORMAT: &str = "rewind-conformance-results";

/// A whole results file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Results {
    /// Always `rewind-conformance-results`.
    pub format: String,
    /// The format version (1).
    pub version: u32,
    /// The implementation that was run.
    pub sut: String,
    /// Every scenario that ran.
    pub scenarios: Vec<ScenarioResult>,
    /// Section 9 message to the code the implementation gave it (codes are the
    /// implementation's; the run only checks they are consistent).
    #[serde(default)]
    pub refusal_codes: BTreeMap<String, String>,
    /// What each runtime release the mocks imitated answered the implementation, by strategy
    /// step (works, or refused with the runtime's error; see `suite::compat`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compatibility: Vec<crate::suite::compat::Row>,
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
    /// `passed`, `failed`, `skipped`, `protocol_violation` or `not_applicable`.
    pub verdict: String,
    /// The first failure, if any.
    pub failure: Option<String>,
    /// The readings of the ambiguity register the implementation took here (ambiguity id to
    /// reading id, see `features/ambiguities.yaml`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub readings: BTreeMap<String, String>,
}

/// Writes `report` to `path`, with the run's runtime compatibility rows.
pub fn write(
    path: &Path,
    sut: &str,
    report: &SuiteReport,
    compatibility: Vec<crate::suite::compat::Row>,
) -> anyhow::Result<()> {
    let mut scenarios: Vec<ScenarioResult> = report
        .record
        .features
        .iter()
        .flat_map(|(feature, record)| {
            record.scenarios.iter().map(move |s| ScenarioResult {
                feature: feature.clone(),
                line: s.line,
                name: s.name.clone(),
                tags: s.tags.clone(),
                verdict: s.verdict.as_str().to_owned(),
                failure: s.failure.clone(),
                readings: s.readings.clone(),
            })
        })
        .chain(report.not_applicable.iter().map(|n| ScenarioResult {
            feature: n.feature.clone(),
            line: n.line,
            name: n.name.clone(),
            tags: Vec::new(),
            verdict: "not_applicable".to_owned(),
            failure: Some(n.reason.clone()),
            readings: BTreeMap::new(),
        }))
        .collect();
    scenarios.sort_by(|a, b| (&a.feature, a.line).cmp(&(&b.feature, b.line)));
    let results = Results {
        format: FORMAT.to_owned(),
        version: 1,
        sut: sut.to_owned(),
        scenarios,
        refusal_codes: report.refusal_codes.clone(),
        compatibility,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating `{}`", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(&results).context("serialising the results")?;
    std::fs::write(path, text + "\n")
        .with_context(|| format!("writing the results file `{}`", path.display()))
}

fn read(path: &Path) -> anyhow::Result<Results> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the results file `{}`", path.display()))?;
    let results: Results = serde_json::from_str(&text).with_context(|| {
        format!(
            "`{}` is not a results file (written by `run --json`)",
            path.display()
        )
    })?;
    anyhow::ensure!(
        results.format == FORMAT && results.version == 1,
        "`{}` is a `{}` file of version {}, not a {FORMAT} file of version 1",
        path.display(),
        results.format,
        results.version
    );
    Ok(results)
}

/// Compares two results files scenario by scenario; prints every difference. True when both
/// ran the same scenarios with the same verdicts.
pub fn compare_files(expected: &Path, actual: &Path) -> anyhow::Result<bool> {
    let (a, b) = (read(expected)?, read(actual)?);
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
    let (ta, tb) = (taken(&a), taken(&b));
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
        passed(&a),
        b.scenarios.len(),
        b.sut,
        passed(&b),
        if differences == 0 {
            "every outcome is the same".to_owned()
        } else {
            format!("{differences} differ")
        }
    );
    Ok(differences == 0)
}
