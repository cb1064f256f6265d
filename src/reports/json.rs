//! The JSON results file of a run (`--json FILE`, `results.json` under `--report-dir`): the
//! run's [`RunData`] as the records of [`crate::results`] (format version 2).

use std::collections::BTreeMap;

use anyhow::Context as _;

use super::{Outcome, RuleStatus, RunData};
use crate::results::{
    Results, RuleResult, RuleScenarioResult, ScenarioResult, Summary, FORMAT, VERSION,
};

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The results file of `data` (version 2).
pub fn render(data: &RunData) -> anyhow::Result<String> {
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
    let mut verdicts: BTreeMap<String, usize> = Outcome::ALL
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
        selection: data.selection.clone(),
        shard: data.shard.clone(),
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
        faults: data.faults.counts(),
        problems: data.problems.clone(),
    };
    let text = serde_json::to_string_pretty(&results).context("serialising the results")?;
    Ok(text + "\n")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::tests::{with_sample, SAMPLE_WAITS_FOR};
    use super::*;
    use crate::results::{compare_files, SCHEMA};

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
        let text = with_sample(render).expect("the sample renders");
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
        assert_eq!(value["rules"][pending]["waitsFor"], SAMPLE_WAITS_FOR);
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
        let text = with_sample(render).expect("the sample renders");
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
        assert!(compare_files(&v1, &v2, false).expect("both read").same);
        assert!(compare_files(&v2, &v2, false).expect("both read").same);
        let v3 = dir.path().join("v3.json");
        std::fs::write(&v3, text.replace("\"version\": 2", "\"version\": 3")).expect("written");
        let err = compare_files(&v1, &v3, false).expect_err("version 3 is unknown");
        assert!(err.to_string().contains("version 3"), "{err}");
        let missing = dir.path().join("missing.json");
        let err = compare_files(&missing, &v2, false).expect_err("no such file");
        assert!(err.to_string().contains("missing.json"), "{err}");
    }
}
