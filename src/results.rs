//! The results file (`run --json FILE`, format `rewind-conformance-results` version 2, schema
//! `schemas/results.schema.json`): one record per scenario (its rules, verdict, wall time in
//! `durationMs`, failure, protocol violations and readings) and one per catalog rule (its
//! status and scenarios); and [`compare_files`], which proves two runs (e.g. in process and
//! over HTTP) ended the same way, scenario for scenario. `compare` reads versions 1 and 2.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::reports::RunData;

/// The format name written into every results file.
const FORMAT: &str = "rewind-conformance-results";
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
    /// What failed the run outside every scenario (version 2).
    #[serde(default)]
    pub problems: Vec<String>,
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

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The results file of `data` (version 2).
pub fn render(data: &RunData) -> anyhow::Result<String> {
    use crate::reports::{Outcome, RuleStatus};
    let scenarios = data
        .scenarios
        .iter()
        .map(|s| ScenarioResult {
            feature: s.feature.clone(),
            line: s.line,
            name: s.name.clone(),
            tags: s.tags.clone(),
            rules: s.rules().map(str::to_owned).collect(),
            verdict: s.outcome.as_str().to_owned(),
            duration_ms: Some(millis(s.duration)),
            failure: s.failure.clone(),
            protocol_violations: s.violations.clone(),
            readings: s.readings.clone(),
        })
        .collect();
    let rules = data
        .rules
        .rows
        .iter()
        .map(|row| RuleResult {
            id: row.rule.id.clone(),
            section: row.rule.section.clone(),
            kind: row.rule.kind.clone(),
            text: row.rule.text.clone(),
            status: row.status.as_str().to_owned(),
            reason: row.rule.untestable.clone(),
            waits_for: match row.status {
                RuleStatus::Pending => row.rule.pending.clone(),
                _ => None,
            },
            scenarios: row
                .scenarios
                .iter()
                .map(|s| RuleScenarioResult {
                    feature: s.feature.clone(),
                    line: s.line,
                    name: s.name.clone(),
                    verdict: s.outcome.as_str().to_owned(),
                })
                .collect(),
        })
        .collect();
    let mut verdicts: BTreeMap<String, usize> = [
        Outcome::Passed,
        Outcome::Failed,
        Outcome::Skipped,
        Outcome::ProtocolViolation,
        Outcome::ExpectedFailure,
        Outcome::UnexpectedPass,
        Outcome::NotApplicable,
    ]
    .iter()
    .map(|o| (o.as_str().to_owned(), 0))
    .collect();
    for s in &data.scenarios {
        *verdicts.entry(s.outcome.as_str().to_owned()).or_default() += 1;
    }
    let rule_counts = data
        .rules
        .counts()
        .into_iter()
        .map(|(status, n): (RuleStatus, usize)| (status.as_str().to_owned(), n))
        .collect();
    let results = Results {
        format: FORMAT.to_owned(),
        version: VERSION,
        sut: data.sut.to_owned(),
        profile: Some(data.profile.to_owned()),
        started_at: Some(
            data.started_at
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        ),
        duration_ms: Some(millis(data.duration)),
        summary: Some(Summary {
            outcome: data.outcome().as_str().to_owned(),
            scenarios: data.scenarios.len(),
            verdicts,
            rules: rule_counts,
        }),
        scenarios,
        rules,
        refusal_codes: data.refusal_codes.clone(),
        compatibility: data.compat.rows(),
        problems: data.problems.clone(),
    };
    let text = serde_json::to_string_pretty(&results).context("serialising the results")?;
    Ok(text + "\n")
}

fn read(path: &Path) -> anyhow::Result<Results> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the results file `{}`", path.display()))?;
    let results: Results = serde_json::from_str(&text).with_context(|| {
        format!(
            "`{}` is not a results file (written by `run --json`; version {VERSION} is \
             described by `{SCHEMA}`)",
            path.display()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> jsonschema::Validator {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(SCHEMA);
        let text = std::fs::read_to_string(&path).expect("the schema is committed");
        let schema: serde_json::Value = serde_json::from_str(&text).expect("the schema is JSON");
        jsonschema::validator_for(&schema).expect("the schema compiles")
    }

    fn problems(value: &serde_json::Value) -> Vec<String> {
        schema()
            .iter_errors(value)
            .map(|e| format!("at `{}`: {e}", e.instance_path()))
            .collect()
    }

    #[test]
    fn version_2_fits_its_schema() {
        let text = crate::reports::tests::with_sample(render).expect("the sample renders");
        let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let found = problems(&value);
        assert!(found.is_empty(), "{found:#?}\n{text}");
        assert_eq!(value["version"], 2);
        let leak = &value["scenarios"][1];
        assert_eq!(leak["verdict"], "failed");
        assert_eq!(leak["durationMs"], 90);
        assert_eq!(leak["rules"], serde_json::json!(["apply.a", "apply.b"]));
        let violation = &value["scenarios"][3];
        assert_eq!(
            violation["protocolViolations"].as_array().map(Vec::len),
            Some(2)
        );
        assert_eq!(value["rules"].as_array().map(Vec::len), Some(9));
        assert_eq!(value["summary"]["rules"]["fail"], 3);
        assert_eq!(value["summary"]["rules"]["pending"], 1);
        let rule_at = |id: &str| {
            value["rules"]
                .as_array()
                .expect("rules")
                .iter()
                .position(|r| r["id"] == id)
                .unwrap_or_else(|| panic!("no rule `{id}`"))
        };
        let (pending, uncovered) = (rule_at("scope.p"), rule_at("scope.v"));
        assert_eq!(value["rules"][pending]["status"], "pending");
        assert_eq!(
            value["rules"][pending]["waitsFor"],
            crate::reports::tests::SAMPLE_WAITS_FOR
        );
        assert!(value["rules"][pending].get("reason").is_none());
        assert!(value["rules"][uncovered].get("waitsFor").is_none());
        // `waitsFor` goes with `pending`, and only with it.
        let mut bare = value.clone();
        bare["rules"][pending]
            .as_object_mut()
            .expect("a rule")
            .remove("waitsFor");
        assert!(!problems(&bare).is_empty());
        let mut stray = value.clone();
        stray["rules"][uncovered]["waitsFor"] = serde_json::json!("work");
        assert!(!problems(&stray).is_empty());
        assert_eq!(value["summary"]["outcome"], "protocol_violation");
        // The schema is strict: a field it does not know, or a wrong verdict, is refused.
        let mut extra = value.clone();
        extra["scenarios"][0]["duration"] = serde_json::json!(1);
        assert!(!problems(&extra).is_empty());
        let mut wrong = value.clone();
        wrong["scenarios"][0]["verdict"] = serde_json::json!("ok");
        assert!(!problems(&wrong).is_empty());
    }

    #[test]
    fn compare_reads_versions_1_and_2() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let v2 = dir.path().join("v2.json");
        let text = crate::reports::tests::with_sample(render).expect("the sample renders");
        std::fs::write(&v2, &text).expect("written");
        // Version 1: what the harness wrote before, the same outcomes.
        let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let scenarios: Vec<serde_json::Value> = value["scenarios"]
            .as_array()
            .expect("scenarios")
            .iter()
            .map(|s| {
                serde_json::json!({
                    "feature": s["feature"], "line": s["line"], "name": s["name"],
                    "tags": s["tags"], "verdict": s["verdict"], "failure": s["failure"],
                })
            })
            .collect();
        let v1 = dir.path().join("v1.json");
        std::fs::write(
            &v1,
            serde_json::json!({
                "format": FORMAT, "version": 1, "sut": "old", "scenarios": scenarios,
                "refusalCodes": {}
            })
            .to_string(),
        )
        .expect("written");
        assert!(compare_files(&v1, &v2).expect("both read"));
        assert!(compare_files(&v2, &v2).expect("both read"));
        let v3 = dir.path().join("v3.json");
        std::fs::write(&v3, text.replace("\"version\": 2", "\"version\": 3")).expect("written");
        let err = compare_files(&v1, &v3).expect_err("version 3 is unknown");
        assert!(err.to_string().contains("version 3"), "{err}");
        let missing = dir.path().join("missing.json");
        let err = compare_files(&missing, &v2).expect_err("no such file");
        assert!(err.to_string().contains("missing.json"), "{err}");
    }
}
