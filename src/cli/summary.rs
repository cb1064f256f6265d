//! What a run prints at its end: the verdicts by feature with the failures, the readings
//! taken, the refusal codes answered, the isolation and leak-scan times, the compatibility,
//! fault and outcome matrices, the rules exercised, the report files, the counts; and what
//! `--keep-databases` kept.

use std::time::Duration;

use rewind_conformance::postgres::PostgresChoice;

use crate::suite::SuiteReport;

use super::args::RunArgs;
use super::lifecycle::RunStats;
use super::report_files::report_targets;

/// What `--keep-databases` kept (each database with a URL that reaches it, the password left
/// out), and how to reach and remove the server when the harness started it.
pub(super) fn print_kept(kept: &[(String, String)], server: &[String]) {
    println!("kept {} databases (the template first):", kept.len());
    for (name, url) in kept {
        println!("  {name:<28} {url}");
    }
    for line in server {
        println!("  {line}");
    }
    if server.is_empty() {
        println!("  no later run removes them: drop them yourself (`DROP DATABASE \"<name>\"`)");
    } else {
        println!("  no later run removes them");
    }
}

pub(super) fn print_summary(
    args: &RunArgs,
    choice: &PostgresChoice,
    provision_time: Duration,
    report: &SuiteReport,
    stats: &RunStats,
) {
    println!();
    println!(
        "conformance of `{}` on {} PostgreSQL (ready in {} ms)",
        stats.sut,
        choice.label(),
        provision_time.as_millis()
    );
    println!("  declared: {}", stats.profile);
    for (path, feature) in &report.record.features {
        let passed = feature
            .scenarios
            .iter()
            .filter(|s| {
                matches!(
                    s.verdict,
                    crate::suite::Verdict::Passed | crate::suite::Verdict::ExpectedFailure
                )
            })
            .count();
        let total = feature.scenarios.len();
        println!(
            "  {:<48} {passed:>3}/{total:<3} {}",
            path,
            if passed == total { "ok" } else { "FAILED" }
        );
        for scenario in feature
            .scenarios
            .iter()
            .filter(|s| s.verdict != crate::suite::Verdict::Passed)
            .filter(|s| s.verdict != crate::suite::Verdict::ExpectedFailure)
        {
            println!(
                "      {}:{} {}{} -- {}",
                path,
                scenario.line,
                scenario.name,
                if scenario.verdict == crate::suite::Verdict::ProtocolViolation {
                    " [PROTOCOL VIOLATION]"
                } else {
                    ""
                },
                scenario.failure.as_deref().unwrap_or("failed")
            );
        }
    }
    for error in &report.record.parse_errors {
        println!("  parse error: {error}");
    }
    let readings = report.reading_counts();
    if !readings.is_empty() {
        println!("  readings taken where the spec leaves a choice (features/ambiguities.yaml):");
        for (ambiguity, counts) in &readings {
            let taken: Vec<String> = counts
                .iter()
                .map(|(reading, n)| format!("{reading} ({n})"))
                .collect();
            println!("    {ambiguity:<30} {}", taken.join(", "));
        }
    }
    if !report.refusal_codes.is_empty() {
        println!("  refusal codes answered:");
        for (message, code) in &report.refusal_codes {
            println!("    {code:<30} {message}");
        }
    }
    if !report.code_conflicts.is_empty() {
        println!(
            "  refusal codes disagree between scenarios (a finding of the run, which fails it; \
             no scenario's verdict changes: declare `errorCodes` in the capability profile to \
             have each scenario check its own codes):"
        );
        for conflict in &report.code_conflicts {
            println!("    {conflict}");
        }
    }
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v.get(v.len() / 2).map(|d| d.as_secs_f64() * 1000.0)
    };
    let times = &stats.isolation;
    let of = |pick: fn(&crate::suite::isolation::IsolationTimes) -> Duration| {
        crate::suite::isolation::median_and_p90(times.iter().map(pick).collect())
    };
    if let (Some(total), Some(wait), Some(prepare), Some(attach), Some(clone)) = (
        of(|t| t.total),
        of(|t| t.wait),
        of(|t| t.prepare),
        of(|t| t.attach),
        of(|t| t.clone),
    ) {
        let waited = times
            .iter()
            .filter(|t| t.wait >= Duration::from_millis(1))
            .count();
        println!(
            "  scenario isolation over {} scenarios, from its start to its database seeded and \
             the implementation attached: median {:.1} ms, p90 {:.1} ms (medians: waiting for \
             the database {:.1} ms, {waited} waited 1 ms or more; connecting, runtimes{} {:.1} \
             ms; attaching {:.1} ms; each database copied in {:.1} ms, made ahead){}",
            times.len(),
            total.0,
            total.1,
            wait.0,
            if stats.primed.is_some() {
                ""
            } else {
                ", seeding"
            },
            prepare.0,
            attach.0,
            clone.0,
            match stats.primed {
                Some(primed) => format!(
                    "; the first scenarios' fixtures seeded and their databases made in {:.0} \
                     ms before they started",
                    primed.as_secs_f64() * 1000.0
                ),
                None => String::new(),
            },
        );
    }
    let scans = median(stats.scans.clone());
    if let Some(scan) = scans {
        let leaking = report
            .record
            .features
            .values()
            .flat_map(|f| &f.scenarios)
            .filter(|s| {
                s.failure
                    .as_deref()
                    .is_some_and(|f| f.starts_with(crate::suite::LEAK_PREFIX))
            })
            .count();
        println!(
            "  leak scan after {} scenarios with a completed rewind: median {scan:.1} ms, {leaking} \
             with rewound text left behind",
            stats.scans.len()
        );
    }
    let mut exercised = std::collections::BTreeSet::new();
    let mut failing = std::collections::BTreeSet::new();
    for scenario in report.record.features.values().flat_map(|f| &f.scenarios) {
        for rule in scenario.tags.iter().filter_map(|t| t.strip_prefix("rule:")) {
            exercised.insert(rule);
            if scenario.verdict != crate::suite::Verdict::Passed {
                failing.insert(rule);
            }
        }
    }
    if !stats.compat.is_empty() {
        println!(
            "  runtime compatibility (what each release, imitated or real, answered the \
             implementation, planted faults left out; - = no such call):"
        );
        for line in stats.compat.markdown().lines() {
            println!("    {line}");
        }
    }
    if !stats.faults.is_empty() {
        println!("  runtime restore fault matrix (runtime x fault kind; - = not run):");
        for line in stats.faults.markdown().lines() {
            println!("    {line}");
        }
    }
    for (kind, matrix) in &stats.matrices {
        println!("  {}; - = not run:", kind.title());
        for line in matrix.markdown().lines() {
            println!("    {line}");
        }
    }
    println!(
        "  rules exercised: {} ({} with a failing scenario)",
        exercised.len(),
        failing.len()
    );
    for target in report_targets(args) {
        println!("  {}: {}", target.kind.what(), target.path.display());
    }
    let counts = report.counts();
    if !report.not_applicable.is_empty() {
        let mut reasons: std::collections::BTreeMap<&str, usize> = Default::default();
        for n in &report.not_applicable {
            *reasons.entry(n.reason.as_str()).or_default() += 1;
        }
        for (reason, n) in reasons {
            println!("  not applicable: {n} scenarios ({reason})");
        }
    }
    if counts.violations > 0 {
        println!(
            "  protocol violations: {} scenarios got answers outside driver protocol v{} \
             (see `protocol/driver-v1.openapi.json`)",
            counts.violations,
            rewind_driver_protocol::VERSION
        );
    }
    if counts.expected_failures + counts.unexpected_passes > 0 {
        println!(
            "  expectations: {} expected failures, {} unexpected passes",
            counts.expected_failures, counts.unexpected_passes
        );
    }
    println!(
        "conformance: {} passed, {} failed, {} skipped{}",
        counts.passed,
        counts.failed + counts.violations + counts.unexpected_passes,
        counts.skipped,
        match report.code_conflicts.len() {
            0 => String::new(),
            n => format!("; {n} refusal code conflicts between scenarios"),
        }
    );
}
