//! The `merge` command: the results files of the shards of one split run, checked and merged
//! (see [`crate::merge`]), written as the reports of one run, with a summary on stdout and the
//! exit code the whole run would have had.

use crate::reports::{Kind, RunOutcome};

use super::args::MergeArgs;
use super::report_files::check_targets;
use super::{usage, Outcome};

pub(super) fn merge(args: &MergeArgs) -> anyhow::Result<Outcome> {
    let targets = crate::reports::targets(
        &[
            (Kind::Junit, args.junit.as_ref()),
            (Kind::Json, args.json.as_ref()),
            (Kind::Markdown, args.markdown.as_ref()),
            (Kind::Html, args.html.as_ref()),
            (Kind::FaultMatrix, args.fault_matrix.as_ref()),
            (Kind::CompatMatrix, args.compat_matrix.as_ref()),
        ],
        args.report_dir.as_deref(),
    );
    check_targets(args.report_dir.as_deref(), &targets)?;
    // A report written over a shard's file would replace the very record it came from.
    let same = |a: &std::path::Path, b: &std::path::Path| match (a.canonicalize(), b.canonicalize())
    {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    for target in &targets {
        if let Some(shard) = args.shards.iter().find(|s| same(s, &target.path)) {
            return Err(usage(format!(
                "`{}` would write the merged {} over the shard `{}`: write the merged reports \
                 somewhere else",
                target.option,
                target.kind.what(),
                shard.display()
            )));
        }
    }
    let (files, merged) = crate::merge::read_and_merge(&args.shards)?;
    let data = merged.run_data();
    // A report that cannot be written fails the merge, after the summary is printed.
    let written = crate::reports::write_all(&targets, &data);

    let tally = data.tally();
    println!(
        "merged {} shard{} of one run of `{}` ({} scenarios; declared: {})",
        files.len(),
        if files.len() == 1 { "" } else { "s" },
        data.sut,
        tally.total,
        data.profile
    );
    let mut order: Vec<&crate::merge::ShardFile> = files.iter().collect();
    order.sort_by_key(|f| f.results.shard.as_ref().map(|s| s.index));
    for file in &order {
        println!("  {}", crate::merge::describe(file));
    }
    for failure in data.failures() {
        println!(
            "      {} {} [{}] -- {}",
            failure.location(),
            failure.name,
            failure.outcome.label(),
            crate::reports::first_lines(failure.failure.as_deref().unwrap_or("failed"), 1, 200)
        );
    }
    for problem in &data.problems {
        println!(
            "  run problem: {}",
            crate::reports::first_lines(problem, 1, 300)
        );
    }
    let times: Vec<u64> = files
        .iter()
        .map(|f| f.results.duration_ms.unwrap_or(0))
        .collect();
    println!(
        "  wall time: the slowest shard {:.1} s, the shards together {:.1} s, from the first \
         start to the last end {:.1} s",
        times.iter().max().copied().unwrap_or(0) as f64 / 1000.0,
        times.iter().sum::<u64>() as f64 / 1000.0,
        data.duration.as_secs_f64()
    );
    println!("  rules: {}", data.rules.describe_counts());
    for target in &targets {
        println!("  {}: {}", target.kind.what(), target.path.display());
    }
    println!(
        "conformance: {} passed, {} failed, {} skipped{}",
        tally.passed,
        tally.failed + tally.violations + tally.unexpected_passes,
        tally.skipped,
        match tally.not_applicable {
            0 => String::new(),
            n => format!(" ({n} not applicable)"),
        }
    );
    written?;
    Ok(match data.outcome() {
        RunOutcome::ProtocolViolation => Outcome::ProtocolViolation,
        RunOutcome::Failed => Outcome::Failed,
        RunOutcome::Passed if merged.a_shard_failed => {
            println!("a shard's own results say it did not pass: the merged run fails too");
            Outcome::Failed
        }
        RunOutcome::Passed => Outcome::Passed,
    })
}
