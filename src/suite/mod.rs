//! The Gherkin suite: [`run_suite`] runs the features against one implementation and returns a
//! [`SuiteReport`]. World and steps live in this binary (cucumber collects steps at link time,
//! which is reliable only within one crate).

pub mod applicability;
mod collector;
pub mod compat;
pub mod fault_matrix;
pub mod isolation;
pub mod matrix;
pub mod readings;
pub mod selection;
pub mod shard;
pub(crate) mod steps;
mod violations;
pub mod world;

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use cucumber::gherkin::tagexpr::TagOperation;
use cucumber::tag::Ext as _;
use cucumber::writer::Stats as _;
use cucumber::{writer, World as _, WriterExt as _};

#[cfg(test)]
pub use collector::{FeatureRecord, ScenarioRecord};
pub use collector::{RunRecord, Verdict};
use world::{RewindWorld, RunContext};

/// The exit status of a run whose stdout reader went away (128 + SIGPIPE, as a shell reports
/// a process the signal ended).
pub const EXIT_CLOSED_STDOUT: i32 = 141;

/// Stdout for cucumber's writer: when the reader has gone away (`... | head`), the run ends
/// with [`EXIT_CLOSED_STDOUT`] instead of a panic that cucumber's hook would swallow.
pub struct QuietStdout;

/// Set when a signal interrupted the run: cucumber's report of the scenarios the clean-up cuts
/// short is noise from then on, so [`QuietStdout`] drops it.
pub static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Set while a run prints no scenario (the fuzzer's runs of generated cases): the report and
/// the summary say what failed.
pub static SILENT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl std::io::Write for QuietStdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
            || SILENT.load(std::sync::atomic::Ordering::SeqCst)
        {
            return Ok(buf.len());
        }
        quiet(std::io::stdout().write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        quiet(std::io::stdout().flush())
    }
}

fn quiet<T>(result: std::io::Result<T>) -> std::io::Result<T> {
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => end_on_closed_stdout(),
        other => other,
    }
}

/// Stops what the run started (embedded clusters, mock runtimes) and exits with
/// [`EXIT_CLOSED_STDOUT`].
pub fn end_on_closed_stdout() -> ! {
    rewind_conformance::postgres::stop_all_embedded();
    rewind_conformance::mocks::stop_all_mocks();
    std::process::exit(EXIT_CLOSED_STDOUT)
}

/// How a leak scan's failure starts.
pub const LEAK_PREFIX: &str = "the leak scan found rewound text left behind";

/// What to run and where to write.
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    /// The directory of `*.feature` files.
    pub features: PathBuf,
    /// A tag expression (`@rule:init.human-only and not @slow`).
    pub tags: Option<String>,
    /// A regex on scenario names.
    pub name: Option<String>,
    /// Scenarios run at once.
    pub concurrency: usize,
    /// Stop at the first failure.
    pub fail_fast: bool,
    /// Run only these scenarios (one shard of a split run); `None`: every selected one.
    pub only: Option<Arc<std::collections::HashSet<shard::Key>>>,
    /// How many scenarios the run is expected to finish, for the progress lines (0: unknown).
    pub expected: usize,
}

/// The outcome of a suite run.
#[derive(Debug, Clone)]
pub struct SuiteReport {
    /// Per-feature records.
    pub record: RunRecord,
    /// Scenarios the capability profile left out, with the reason.
    pub not_applicable: Vec<applicability::NotApplicable>,
    /// Section 9 message to the code the implementation gave it in this run.
    pub refusal_codes: std::collections::BTreeMap<String, String>,
    /// Refusal codes that disagree between scenarios (a finding of the run, not of a scenario).
    pub code_conflicts: Vec<String>,
}

/// Scenario counts by verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Every step passed.
    pub passed: usize,
    /// A step or hook failed.
    pub failed: usize,
    /// A step matched no definition.
    pub skipped: usize,
    /// The implementation answered outside the driver protocol.
    pub violations: usize,
    /// Failed as the expectations file says.
    pub expected_failures: usize,
    /// Passed although the expectations file says they fail.
    pub unexpected_passes: usize,
}

impl SuiteReport {
    /// Scenario counts by verdict.
    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for scenario in self.record.features.values().flat_map(|f| &f.scenarios) {
            match scenario.verdict {
                Verdict::Passed => counts.passed += 1,
                Verdict::Failed => counts.failed += 1,
                Verdict::Skipped => counts.skipped += 1,
                Verdict::ProtocolViolation => counts.violations += 1,
                Verdict::ExpectedFailure => counts.expected_failures += 1,
                Verdict::UnexpectedPass => counts.unexpected_passes += 1,
            }
        }
        counts
    }

    /// Whether the run fails: a scenario failed (unexpectedly), a step matched nothing, an
    /// expected failure passed, or a feature did not parse.
    pub fn fails(&self) -> bool {
        let c = self.counts();
        c.failed + c.skipped + c.unexpected_passes + c.violations > 0
            || !self.record.parse_errors.is_empty()
    }

    /// Applies an implementation's known failures: a failed scenario it lists becomes an
    /// expected failure, a passed one an unexpected pass. Returns the entries that name no
    /// scenario of the features (`all`: every scenario parsed, before filters).
    pub fn apply_expectations<'e>(
        &mut self,
        expectations: &'e rewind_conformance::expectations::Expectations,
        all: &[(String, String)],
    ) -> Vec<&'e rewind_conformance::expectations::Expectation> {
        for (path, feature) in &mut self.record.features {
            for scenario in &mut feature.scenarios {
                let Some(entry) = expectations.find(path, &scenario.name) else {
                    continue;
                };
                match scenario.verdict {
                    Verdict::Failed => {
                        scenario.verdict = Verdict::ExpectedFailure;
                        scenario.failure = Some(format!(
                            "expected to fail ({}): {}",
                            entry.reason,
                            scenario.failure.as_deref().unwrap_or("failed")
                        ));
                    }
                    Verdict::Passed => {
                        scenario.verdict = Verdict::UnexpectedPass;
                        scenario.failure = Some(format!(
                            "passed, but {} lists it as failing ({}): remove the entry at line {}",
                            entry.at.path.display(),
                            entry.reason,
                            entry.at.line
                        ));
                    }
                    _ => {}
                }
            }
        }
        expectations
            .entries
            .iter()
            .filter(|e| !all.iter().any(|(path, name)| e.matches(path, name)))
            .collect()
    }

    /// Attaches to each scenario (by feature path and line) the readings it took.
    pub fn mark_readings(&mut self, readings: &readings::Readings) {
        for (path, feature) in &mut self.record.features {
            for scenario in &mut feature.scenarios {
                if let Some(taken) = readings.get(&(path.clone(), scenario.line)) {
                    scenario.readings = taken.clone();
                }
            }
        }
    }

    /// Per ambiguity id: how many scenarios took each reading.
    pub fn reading_counts(
        &self,
    ) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, usize>> {
        let mut out: std::collections::BTreeMap<String, std::collections::BTreeMap<String, usize>> =
            Default::default();
        for scenario in self.record.features.values().flat_map(|f| &f.scenarios) {
            for (ambiguity, reading) in &scenario.readings {
                *out.entry(ambiguity.clone())
                    .or_default()
                    .entry(reading.clone())
                    .or_default() += 1;
            }
        }
        out
    }

    /// Fails the scenarios (by feature path and line) whose leak scan found rewound text left
    /// behind; a scenario that failed already keeps its first failure.
    pub fn mark_leaks(&mut self, leaks: &std::collections::BTreeMap<(String, usize), Vec<String>>) {
        for (path, feature) in &mut self.record.features {
            for scenario in &mut feature.scenarios {
                let Some(found) = leaks.get(&(path.clone(), scenario.line)) else {
                    continue;
                };
                if found.is_empty() || scenario.verdict != Verdict::Passed {
                    continue;
                }
                scenario.verdict = Verdict::Failed;
                scenario.failure = Some(format!(
                    "{LEAK_PREFIX} (features/leak-allow.yaml lists where the spec allows it):\n  {}",
                    found.join("\n  ")
                ));
            }
        }
    }

    /// Marks the scenarios (by feature path and line) that met protocol violations.
    pub fn mark_violations(
        &mut self,
        violations: &std::collections::BTreeMap<(String, usize), Vec<String>>,
    ) {
        for (path, feature) in &mut self.record.features {
            for scenario in &mut feature.scenarios {
                if let Some(seen) = violations.get(&(path.clone(), scenario.line)) {
                    scenario.verdict = Verdict::ProtocolViolation;
                    scenario.failure = seen.first().cloned();
                    scenario.violations = seen.clone();
                }
            }
        }
    }
}

/// How often a long run says how far it got.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// Prints, every [`PROGRESS_EVERY`] until aborted, how many scenarios have finished out of
/// `expected`, the time elapsed and the failures so far, on stderr (a CI log shows it live; the
/// terminal summary stays on stdout). A run shorter than the interval prints nothing.
async fn progress_lines(record: Arc<std::sync::Mutex<collector::RunRecord>>, expected: usize) {
    let started = std::time::Instant::now();
    let mut tick = tokio::time::interval(PROGRESS_EVERY);
    tick.tick().await;
    loop {
        tick.tick().await;
        if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let (done, failed) = record
            .lock()
            .map(|r| {
                let all = r.features.values().flat_map(|f| &f.scenarios);
                let failed = all
                    .clone()
                    .filter(|s| !matches!(s.verdict, Verdict::Passed | Verdict::ExpectedFailure))
                    .count();
                (all.count(), failed)
            })
            .unwrap_or((0, 0));
        let elapsed = started.elapsed().as_secs();
        let total = if expected > 0 {
            format!("{done}/{expected}")
        } else {
            done.to_string()
        };
        eprintln!(
            "progress: {total} scenarios finished, {}m{:02}s elapsed, {failed} failed so far",
            elapsed / 60,
            elapsed % 60
        );
    }
}

/// Runs the features of `options` with `context` installed as the run's shared state.
pub async fn run_suite(
    options: &SuiteOptions,
    context: Arc<RunContext>,
) -> anyhow::Result<SuiteReport> {
    world::install(Arc::clone(&context));
    let collector = collector::Collector::default();
    let record = collector.record();

    let mut cli = cucumber::cli::Opts::<_, _, _, cucumber::cli::Empty>::default();
    if let Some(tags) = &options.tags {
        let parsed: TagOperation = tags
            .parse()
            .map_err(|e| anyhow::anyhow!("bad tag expression `{tags}`: {e}"))?;
        cli.tags_filter = Some(parsed);
    }
    if let Some(name) = &options.name {
        cli.re_filter = Some(
            regex::Regex::new(name).with_context(|| format!("bad scenario name regex `{name}`"))?,
        );
    }
    // What the filters select among the scenarios the profile left out.
    let selected = {
        let (tags, name) = (cli.tags_filter.clone(), cli.re_filter.clone());
        move |n: &applicability::NotApplicable| {
            name.as_ref().is_none_or(|re| re.is_match(&n.name))
                && tags.as_ref().is_none_or(|t| t.eval(n.tags.iter()))
        }
    };
    let mut cucumber = RewindWorld::cucumber::<&std::path::Path>()
        .with_parser(applicability::ProfileParser {
            applicability: Arc::clone(&context.applicability),
            only: options.only.clone(),
        })
        .max_concurrent_scenarios(options.concurrency.max(1))
        .before(|feature, rule, scenario, world| {
            let mut tags = feature.tags.clone();
            if let Some(rule) = rule {
                tags.extend(rule.tags.iter().cloned());
            }
            tags.extend(scenario.tags.iter().cloned());
            world.tags = tags;
            world.scenario = scenario.name.clone();
            world.holds_restore = scenario
                .steps
                .iter()
                .any(|s| s.value.contains("runtime holds the restore of agent"));
            Box::pin(async {})
        })
        .after(|feature, _, scenario, finished, world| {
            let passed = matches!(finished, cucumber::event::ScenarioFinished::StepPassed);
            let key = (collector::feature_path(feature), scenario.position.line);
            Box::pin(async move {
                if let Some(world) = world {
                    // The leak scan, before the teardown drops the database.
                    if let (Some((found, took)), Ok(ctx)) =
                        (world.leak_scan().await, world::context())
                    {
                        if let Ok(mut times) = ctx.scan_times.lock() {
                            times.push(took);
                        }
                        if let Ok(mut all) = ctx.leaks.lock() {
                            all.insert(key.clone(), found);
                        }
                    }
                    // The runtimes' answers, before the teardown removes their journals.
                    let observed = world.compat_observations();
                    if let (false, Ok(ctx)) = (observed.is_empty(), world::context()) {
                        if let Ok(mut matrix) = ctx.compat.lock() {
                            matrix.add(&observed);
                        }
                    }
                    // The page first: a failed scenario saves its DOM, screenshot and traffic.
                    #[cfg(feature = "browser")]
                    if let Some(session) = world.browser.session.take() {
                        if let Err(e) = session.finish(passed).await {
                            eprintln!("closing the browser of `{}`: {e:#}", world.scenario);
                        }
                    }
                    // Tear down first: the detach is a call too, and its violations count.
                    world.teardown().await;
                    let seen = world.violations.list();
                    if let (false, Ok(ctx)) = (seen.is_empty(), world::context()) {
                        if let Ok(mut all) = ctx.violations.lock() {
                            all.insert(key.clone(), seen);
                        }
                    }
                    let taken = std::mem::take(&mut world.readings);
                    if let (false, Ok(ctx)) = (taken.is_empty(), world::context()) {
                        if let Ok(mut all) = ctx.readings.lock() {
                            all.insert(key.clone(), taken);
                        }
                    }
                    if let (Some(cell), Ok(ctx)) = (world.fault_cell.take(), world::context()) {
                        if let Ok(mut results) = ctx.fault_results.lock() {
                            results.push((cell, passed));
                        }
                    }
                    let cells = std::mem::take(&mut world.cells);
                    if let (false, Ok(ctx)) = (cells.is_empty(), world::context()) {
                        if let Ok(mut results) = ctx.matrix_results.lock() {
                            results.extend(cells.into_iter().map(|cell| (cell, passed)));
                        }
                    }
                }
            })
        })
        .with_writer(
            writer::Basic::raw(QuietStdout, writer::Coloring::Auto, 0)
                .summarized()
                .tee::<RewindWorld, _>(collector.discard_stats_writes().discard_arbitrary_writes())
                .normalized(),
        )
        .fail_on_skipped()
        .with_cli(cli);
    if options.fail_fast {
        cucumber = cucumber.fail_fast();
    }
    let progress = tokio::spawn(progress_lines(Arc::clone(&record), options.expected));
    let writer = cucumber.run(&options.features).await;
    progress.abort();
    let _ = std::io::stdout().flush();
    // Verdicts decide (expected failures are failed steps too); cucumber's own count only
    // tells whether something failed outside every scenario.
    let outside = writer.execution_has_failed()
        && record
            .lock()
            .map(|r| {
                r.features
                    .values()
                    .flat_map(|f| &f.scenarios)
                    .all(|s| s.verdict == Verdict::Passed)
                    && r.parse_errors.is_empty()
            })
            .unwrap_or(false);
    if outside {
        anyhow::bail!("the run failed outside every scenario (a hook or the runner itself)");
    }
    let record = record
        .lock()
        .map(|r| r.clone())
        .unwrap_or_else(|p| p.into_inner().clone());
    let review = context.codes.lock().map(|c| c.review()).unwrap_or_default();
    Ok(SuiteReport {
        record,
        not_applicable: context
            .applicability
            .not_applicable()
            .into_iter()
            .filter(selected)
            .collect(),
        refusal_codes: review.spec_codes,
        code_conflicts: review.conflicts,
    })
}
