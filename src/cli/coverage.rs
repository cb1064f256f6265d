//! The `coverage` command: the coverage gate over the catalog, the features, the untestable
//! and pending lists, the ambiguity register, the leak scan's allow-list and the fixtures.

use anyhow::Context as _;
use rewind_conformance::catalog::{
    scan_features, Catalog, Coverage, Pending, Register, Untestable,
};

use super::args::{features_dir, CoverageArgs};

pub(super) fn coverage(args: &CoverageArgs) -> anyhow::Result<bool> {
    use rewind_conformance::catalog::{fixture_files, Gate};
    let catalog = Catalog::load(&args.paths.catalog)?;
    let scan = scan_features(&args.paths.features)
        .with_context(|| format!("reading features in `{}`", args.paths.features.display()))?;
    let untestable = Untestable::load(&args.paths.untestable)?;
    let pending = Pending::load(&args.paths.pending)?;
    let register = Register::load(&args.paths.ambiguities)?;
    let rule_ids: std::collections::BTreeSet<String> =
        catalog.rules().iter().map(|r| r.id.clone()).collect();
    let allow = rewind_conformance::leak_scan::AllowList::load(&args.paths.leak_allow, &rule_ids)?;
    let fixtures = fixture_files(&args.paths.fixtures).with_context(|| {
        format!(
            "reading the fixtures directory `{}` (pass `--fixtures DIR`)",
            args.paths.fixtures.display()
        )
    })?;
    let coverage = Coverage::compute(&catalog, &scan);
    let gate = Gate::check(
        &catalog,
        &scan,
        &untestable,
        &pending,
        &fixtures,
        &args.paths.fixtures,
    );
    let mut failures = gate.errors.clone();
    failures.extend(register.check(&scan, features_dir(&args.paths.features)));
    for failure in &failures {
        println!("error: {failure}");
    }
    println!(
        "{} rules, {} scenarios; {} rules covered, {} listed untestable, {} pending, {} without a scenario",
        catalog.rules().len(),
        coverage.scenarios,
        gate.covered,
        gate.untestable,
        gate.pending,
        gate.unaccounted.len()
    );
    // The holes themselves are the positioned `warning:` / `error:` lines at the end.
    for rule in pending
        .rules
        .iter()
        .filter(|r| catalog.get(&r.id).is_some())
    {
        println!(
            "  pending: {} (waits for {})",
            rule.id,
            rule.waits_for.trim_end_matches('.')
        );
    }
    println!(
        "{} ambiguities registered ({} tagged on scenarios, {} step-wide, {} not observable yet)",
        register.entries().len(),
        register
            .entries()
            .iter()
            .filter(|e| !e.scenarios.is_empty())
            .count(),
        register
            .entries()
            .iter()
            .filter(|e| !e.steps.is_empty())
            .count(),
        register
            .entries()
            .iter()
            .filter(|e| e.untested.is_some())
            .count()
    );
    println!(
        "{} leak-scan allowances ({})",
        allow.entries.len(),
        allow
            .entries
            .iter()
            .map(|e| format!("{}.{}", e.table, e.column))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let grade = if args.strict { "error" } else { "warning" };
    for gap in &gate.gaps {
        println!("{grade}: {gap}");
    }
    if args.strict {
        let problems = failures.len() + gate.gaps.len();
        if problems == 0 {
            println!("coverage --strict: passed (every rule has a scenario, is untestable or pending; every message is asserted; every fixture is used)");
        } else {
            println!(
                "coverage --strict: failed: {problems} problem{}",
                if problems == 1 { "" } else { "s" }
            );
        }
    } else if !gate.gaps.is_empty() {
        println!(
            "{} hole{} in the suite (`coverage --strict` fails on {})",
            gate.gaps.len(),
            if gate.gaps.len() == 1 { "" } else { "s" },
            if gate.gaps.len() == 1 { "it" } else { "them" }
        );
    }
    Ok(failures.is_empty() && (!args.strict || gate.gaps.is_empty()))
}
