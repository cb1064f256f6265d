//! The command line: argument structs, the `run` and `coverage` commands, exit codes.
//!
//! Exit codes (one place, documented in the README):
//! - 0: every selected scenario passed (or the coverage gate passed);
//! - 1: conformance failures (a scenario failed or a step matched nothing; coverage gaps under
//!   `--strict`);
//! - 2: bad usage (unknown flag, bad value);
//! - 3: the harness itself could not run (no PostgreSQL, unreadable catalog or fixtures, an
//!   implementation URL nothing answers on);
//! - 4: protocol violations: the implementation's server answered outside driver protocol v1
//!   (another version, a body that is not JSON or off the schema), whatever else failed.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use rewind_conformance::catalog::{scan_features, Catalog, Coverage, Register, Untestable};
use rewind_conformance::expectations::Expectations;
use rewind_conformance::fixtures::load_fixture_dir;
use rewind_conformance::postgres::{
    stop_all_embedded, PostgresChoice, PostgresServer, TemplateDatabase,
};
use rewind_conformance::profile::CapabilityProfile;
use rewind_conformance::sut::http::HttpSut;
use rewind_conformance::sut::reference::ReferenceSut;
use rewind_conformance::sut::{Limits, SutError, SystemUnderTest};

use crate::suite::applicability::Applicability;
use crate::suite::fault_matrix::FaultMatrix;
use crate::suite::world::RunContext;
use crate::suite::{run_suite, SuiteOptions, SuiteReport};

const EXIT_FAILURES: u8 = 1;
const EXIT_HARNESS: u8 = 3;
const EXIT_PROTOCOL: u8 = 4;

/// How a command ended, when it ran to the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Passed,
    Failed,
    ProtocolViolation,
}

/// Conformance harness for the conversation Rewind operation.
#[derive(Debug, Parser)]
#[command(name = "rewind-conformance", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the Gherkin suite against an implementation.
    Run(Box<RunArgs>),
    /// Check that every scenario tag names a catalog rule and report uncovered rules.
    Coverage(CoverageArgs),
    /// Compare two `--json` results scenario by scenario (exit 1 when any outcome differs).
    Compare(CompareArgs),
    /// Check in seconds that a server speaks the driver protocol: handshake, attach, one
    /// trivial rewind, its events, detach.
    Smoke(SmokeArgs),
}

#[derive(Debug, clap::Args)]
struct SmokeArgs {
    /// The server's base URL (`http://127.0.0.1:8080`), or `reference`.
    #[arg(long, env = "REWIND_SUT_URL", value_parser = parse_sut)]
    sut: SutTarget,
    /// Use the PostgreSQL server at this URL instead of an embedded one.
    #[arg(long, env = "REWIND_DATABASE_URL")]
    database_url: Option<String>,
    /// How long the harness waits for one call, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    request_timeout: u64,
}

#[derive(Debug, clap::Args)]
struct CompareArgs {
    /// The first results file (e.g. the in-process run).
    expected: PathBuf,
    /// The second results file (e.g. the same suite over HTTP).
    actual: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PostgresWay {
    /// An ephemeral cluster from the local PostgreSQL binaries.
    Embedded,
    /// A testcontainers container (build with `--features containers`).
    Container,
    /// The server of `--database-url`.
    Url,
}

/// Which implementation a run drives.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SutTarget {
    /// The reference implementation, linked in process.
    Reference,
    /// A server speaking driver protocol v1 at this base URL.
    Http(String),
}

impl SutTarget {
    /// How reports name it.
    fn label(&self) -> &str {
        match self {
            SutTarget::Http(url) => url,
            SutTarget::Reference => "reference",
        }
    }

    /// The implementation; the reference stands in for a deployment with exactly `runtimes`
    /// (`None`: all it knows).
    fn make(
        &self,
        runtimes: Option<Vec<String>>,
        request_timeout: Duration,
    ) -> anyhow::Result<Arc<dyn SystemUnderTest>> {
        Ok(match self {
            SutTarget::Reference => Arc::new(ReferenceSut::new(runtimes)),
            SutTarget::Http(url) => Arc::new(HttpSut::new(url, request_timeout)?),
        })
    }
}

fn parse_sut(text: &str) -> Result<SutTarget, String> {
    if text == "reference" {
        return Ok(SutTarget::Reference);
    }
    if text.starts_with("http://") || text.starts_with("https://") {
        return Ok(SutTarget::Http(text.to_owned()));
    }
    Err(format!(
        "`{text}` is neither `reference` nor a server URL (e.g. `http://127.0.0.1:8080`)"
    ))
}

#[derive(Debug, clap::Args)]
struct Paths {
    /// A `*.feature` file, or a directory of them.
    #[arg(long, default_value = "features")]
    features: PathBuf,
    /// The rule catalog.
    #[arg(long, default_value = "features/rules.yaml")]
    catalog: PathBuf,
    /// Rules no black-box scenario can check, with reasons.
    #[arg(long, default_value = "features/untestable.yaml")]
    untestable: PathBuf,
    /// The ambiguity register: what the spec leaves open and which readings the steps accept.
    #[arg(long, default_value = "features/ambiguities.yaml")]
    ambiguities: PathBuf,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    #[command(flatten)]
    paths: Paths,
    /// Directory of YAML fixtures.
    #[arg(long, default_value = "fixtures")]
    fixtures: PathBuf,
    /// Use the PostgreSQL server at this URL (each run creates and drops its own databases).
    #[arg(long, env = "REWIND_DATABASE_URL")]
    database_url: Option<String>,
    /// How to get PostgreSQL; `--database-url` implies `url`.
    #[arg(long, value_enum)]
    postgres: Option<PostgresWay>,
    /// The implementation under test: `reference` (linked in process) or the base URL of a
    /// server speaking driver protocol v1 (`http://127.0.0.1:8080`).
    #[arg(long, env = "REWIND_SUT_URL", default_value = "reference", value_parser = parse_sut)]
    sut: SutTarget,
    /// How long the harness waits for one call to the implementation's server, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    request_timeout: u64,
    /// How long the implementation may spend on one agent's native restore, in milliseconds
    /// (handed to it at attach; a planted hang fault never answers, so this limit ends it).
    #[arg(long, value_name = "MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(100..=600_000))]
    restore_timeout_ms: u64,
    /// The implementation's capability profile (YAML: `runtimes`, `surfaces`); default: the
    /// harness's cargo features (all of them unless built with `--no-default-features`).
    #[arg(long, env = "REWIND_PROFILE", value_name = "FILE")]
    profile: Option<PathBuf>,
    /// Known failures of the implementation (YAML `expected_failures`, each with a reason): they
    /// do not fail the run, but a listed scenario that passes does.
    #[arg(long, env = "REWIND_EXPECTATIONS", value_name = "FILE")]
    expectations: Option<PathBuf>,
    /// Write every scenario's outcome here as JSON (see `compare`).
    #[arg(long, env = "REWIND_JSON", value_name = "FILE")]
    json: Option<PathBuf>,
    /// Only scenarios matching this tag expression (e.g. `@rule:init.human-only`).
    #[arg(short = 't', long)]
    tags: Option<String>,
    /// Only scenarios whose name matches this regex.
    #[arg(short = 'n', long)]
    name: Option<String>,
    /// Scenarios run at once, each on its own database.
    #[arg(short = 'c', long, default_value_t = 8)]
    concurrency: usize,
    /// Write a JUnit XML report here.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Write the runtime restore fault matrix (runtime x fault kind) here, as Markdown.
    #[arg(long, value_name = "FILE")]
    fault_matrix: Option<PathBuf>,
    /// Write the runtime compatibility matrix (runtime x release x strategy step: what each
    /// runtime answered the implementation) here, as Markdown.
    #[arg(long, value_name = "FILE")]
    compat_matrix: Option<PathBuf>,
    /// Stop at the first failing scenario.
    #[arg(long)]
    fail_fast: bool,
    /// Keep every scenario database after the run (for debugging).
    #[arg(long)]
    keep_databases: bool,
}

#[derive(Debug, clap::Args)]
struct CoverageArgs {
    #[command(flatten)]
    paths: Paths,
    /// Fail when any rule has no scenario.
    #[arg(long)]
    strict: bool,
}

/// Parses the command line, runs the command and maps the result to an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Coverage(args) => coverage(&args).map(passed_if),
        Command::Compare(args) => {
            crate::results::compare_files(&args.expected, &args.actual).map(passed_if)
        }
        Command::Smoke(args) => match tokio::runtime::Runtime::new() {
            Ok(runtime) => runtime.block_on(smoke(args)),
            Err(e) => Err(anyhow::Error::new(e).context("starting the async runtime")),
        },
        Command::Run(args) => match tokio::runtime::Runtime::new() {
            Ok(runtime) => runtime.block_on(run(*args)),
            Err(e) => Err(anyhow::Error::new(e).context("starting the async runtime")),
        },
    };
    match result {
        Ok(Outcome::Passed) => ExitCode::SUCCESS,
        Ok(Outcome::Failed) => ExitCode::from(EXIT_FAILURES),
        Ok(Outcome::ProtocolViolation) => ExitCode::from(EXIT_PROTOCOL),
        Err(e) if e.downcast_ref::<HandshakeRefused>().is_some() => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_PROTOCOL)
        }
        Err(e) => {
            let mut shown = e.to_string();
            eprintln!("error: {shown}");
            // Library errors already quote their source; print only causes not yet said.
            for cause in e.chain().skip(1) {
                let text = cause.to_string();
                if !shown.contains(&text) {
                    eprintln!("  caused by: {text}");
                    shown = text;
                }
            }
            ExitCode::from(EXIT_HARNESS)
        }
    }
}

fn passed_if(ok: bool) -> Outcome {
    if ok {
        Outcome::Passed
    } else {
        Outcome::Failed
    }
}

/// The implementation's server does not speak driver protocol v1 (reported in one line).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct HandshakeRefused(String);

/// Makes the implementation of `target` and checks, before anything else starts, that it can
/// be driven.
async fn connect_sut(
    target: &SutTarget,
    profile: &CapabilityProfile,
    request_timeout: Duration,
) -> anyhow::Result<Arc<dyn SystemUnderTest>> {
    // Every runtime declared: the reference runs unnarrowed, so its own capability map (which
    // refuses strategy names and unknown runtimes) is what the scenarios exercise.
    let declares_all = rewind_conformance::profile::RUNTIMES
        .iter()
        .all(|r| profile.runtimes.contains(*r));
    let sut = target.make(
        (!declares_all).then(|| profile.runtimes.iter().cloned().collect()),
        request_timeout,
    )?;
    match sut.handshake().await {
        Ok(implementation) => {
            tracing::info!(
                "driving `{}` {}",
                implementation.name,
                implementation.version.unwrap_or_default()
            );
            Ok(sut)
        }
        Err(SutError::Protocol { detail, call, .. }) => Err(HandshakeRefused(format!(
            "the implementation at `{}` is refused: {detail} (`{call}`)",
            target.label()
        ))
        .into()),
        Err(e) => Err(anyhow::Error::new(e).context(format!(
            "cannot reach the implementation at `{}` (is its server running?)",
            target.label()
        ))),
    }
}

async fn smoke(args: SmokeArgs) -> anyhow::Result<Outcome> {
    let timeout = Duration::from_secs(args.request_timeout);
    let sut = args.sut.make(None, timeout)?;
    let choice = match args.database_url {
        Some(url) => PostgresChoice::Url(url),
        None => PostgresChoice::Embedded,
    };
    let limits = Limits {
        restore_timeout_ms: 5000,
        request_timeout_ms: args.request_timeout * 1000,
    };
    Ok(
        match crate::smoke::smoke(sut.as_ref(), &choice, limits).await? {
            crate::smoke::SmokeOutcome::Passed => {
                println!("smoke: the server speaks the protocol; run the suite with `run --sut`");
                Outcome::Passed
            }
            crate::smoke::SmokeOutcome::Failed => Outcome::Failed,
            crate::smoke::SmokeOutcome::ProtocolViolation => Outcome::ProtocolViolation,
        },
    )
}

fn coverage(args: &CoverageArgs) -> anyhow::Result<bool> {
    let catalog = Catalog::load(&args.paths.catalog)?;
    let scan = scan_features(&args.paths.features)
        .with_context(|| format!("reading features in `{}`", args.paths.features.display()))?;
    let untestable = Untestable::load(&args.paths.untestable)?;
    let register = Register::load(&args.paths.ambiguities)?;
    let coverage = Coverage::compute(&catalog, &scan);
    let mut failures = coverage.hard_failures();
    failures.extend(register.check(&scan, features_dir(&args.paths.features)));
    for failure in &failures {
        println!("error: {failure}");
    }
    let uncovered: Vec<&str> = coverage
        .uncovered()
        .into_iter()
        .filter(|id| !untestable.contains(id))
        .collect();
    println!(
        "{} rules, {} scenarios; {} rules covered, {} listed untestable, {} without a scenario",
        catalog.rules().len(),
        coverage.scenarios,
        catalog.rules().len() - coverage.uncovered().len(),
        untestable.rules.len(),
        uncovered.len()
    );
    for id in &uncovered {
        println!("  uncovered: {id}");
    }
    for message in &coverage.unasserted_messages {
        println!("  error message never asserted verbatim: \"{message}\"");
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
    let strict_gaps =
        args.strict && (!uncovered.is_empty() || !coverage.unasserted_messages.is_empty());
    Ok(failures.is_empty() && !strict_gaps)
}

/// The directory the register's scenario names are relative to.
fn features_dir(features: &std::path::Path) -> &std::path::Path {
    if features.is_file() {
        features.parent().unwrap_or(features)
    } else {
        features
    }
}

fn postgres_choice(args: &RunArgs) -> anyhow::Result<PostgresChoice> {
    match (args.postgres, &args.database_url) {
        (Some(PostgresWay::Embedded), _) => Ok(PostgresChoice::Embedded),
        (Some(PostgresWay::Container), _) => Ok(PostgresChoice::Container),
        (Some(PostgresWay::Url) | None, Some(url)) => Ok(PostgresChoice::Url(url.clone())),
        (None, None) => Ok(PostgresChoice::Embedded),
        (Some(PostgresWay::Url), None) => anyhow::bail!(
            "`--postgres url` needs a URL; {}",
            rewind_conformance::postgres::HOW_TO_PROVIDE
        ),
    }
}

async fn run(args: RunArgs) -> anyhow::Result<Outcome> {
    let catalog = Catalog::load(&args.paths.catalog)?;
    // Unparsable features are bad input: say where, before any PostgreSQL is started.
    let scan = scan_features(&args.paths.features).with_context(|| {
        format!(
            "reading feature files in `{}` (pass `--features DIR|FILE`)",
            args.paths.features.display()
        )
    })?;
    if !scan.parse_errors.is_empty() {
        anyhow::bail!(
            "feature files do not parse:\n  {}",
            scan.parse_errors.join("\n  ")
        );
    }
    let register = Register::load(&args.paths.ambiguities)?;
    let problems = register.check(&scan, features_dir(&args.paths.features));
    if !problems.is_empty() {
        anyhow::bail!(
            "the ambiguity tags and the register disagree:\n  {}",
            problems.join("\n  ")
        );
    }
    let fixtures = load_fixture_dir(&args.fixtures)?;
    let profile = match &args.profile {
        Some(path) => CapabilityProfile::load(path)?,
        None => CapabilityProfile::compiled(),
    };
    profile.check_error_codes(&catalog)?;
    let expectations = match &args.expectations {
        Some(path) => Expectations::load(path)?,
        None => Expectations::default(),
    };
    let choice = postgres_choice(&args)?;
    // The handshake comes first: a server that is not there, or speaks another protocol, is
    // told in one line before PostgreSQL starts.
    let sut = connect_sut(
        &args.sut,
        &profile,
        Duration::from_secs(args.request_timeout),
    )
    .await?;
    // Ctrl-C: stop what was started (embedded clusters here; containers via the watchdog).
    tokio::spawn(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("interrupted: stopping PostgreSQL and the mock runtimes");
            stop_all_embedded();
            rewind_conformance::mocks::stop_all_mocks();
            std::process::exit(130);
        }
    });
    let started = Instant::now();
    let server = PostgresServer::provision(&choice).await?;
    let provision_time = started.elapsed();
    let outcome = run_on_server(&args, &server, sut, profile, catalog, register, fixtures).await;
    server.shutdown().await;
    let (mut report, stats) = outcome?;
    let stale = report.apply_expectations(&expectations, &stats.parsed);
    for entry in &stale {
        eprintln!(
            "error: {}: expected failure `{}: {}` names no scenario of the features (remove or \
             correct it)",
            entry.at, entry.feature, entry.scenario
        );
    }
    if let Some(path) = &args.fault_matrix {
        write_fault_matrix(path, &stats.faults)?;
    }
    if let Some(path) = &args.compat_matrix {
        write_markdown(
            path,
            "runtime compatibility matrix",
            &format!(
                "# Runtime compatibility\n\n\
                 What each runtime release the mocks imitated answered the implementation at each \
                 step of its recovery strategy (`works (n)` calls, or `refused (n): <the runtime's \
                 error>`; planted faults left out; `-`: no such call).\n\n{}",
                stats.compat.markdown()
            ),
        )?;
    }
    if let Some(path) = &args.json {
        crate::results::write(path, &stats.sut, &report, stats.compat.rows())?;
    }
    print_summary(&args, &choice, provision_time, &report, &stats);
    Ok(if report.counts().violations > 0 {
        Outcome::ProtocolViolation
    } else if report.fails() || !stale.is_empty() {
        Outcome::Failed
    } else {
        Outcome::Passed
    })
}

fn write_fault_matrix(path: &std::path::Path, matrix: &FaultMatrix) -> anyhow::Result<()> {
    let text = format!(
        "# Runtime restore fault matrix\n\n\
         Each cell: whether every scenario that planted this fault in this runtime's restore \
         passed (`-`: no scenario ran).\n\n{}",
        matrix.markdown()
    );
    write_markdown(path, "fault matrix", &text)
}

/// Writes a Markdown report, making its directory.
fn write_markdown(path: &std::path::Path, what: &str, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating `{}`", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing the {what} `{}`", path.display()))
}

struct RunStats {
    isolation: Vec<(Duration, Duration)>,
    faults: FaultMatrix,
    compat: crate::suite::compat::CompatMatrix,
    sut: String,
    profile: String,
    parsed: Vec<(String, String)>,
}

async fn run_on_server(
    args: &RunArgs,
    server: &PostgresServer,
    sut: Arc<dyn SystemUnderTest>,
    profile: CapabilityProfile,
    catalog: Catalog,
    register: Register,
    fixtures: std::collections::BTreeMap<String, rewind_conformance::fixtures::Fixture>,
) -> anyhow::Result<(SuiteReport, RunStats)> {
    let template =
        TemplateDatabase::create(server.admin_url(), &rewind_reference::MIGRATOR).await?;
    template
        .instrument(rewind_conformance::inspect::STATEMENT_LOG_SQL)
        .await?;
    template.start_prefetch(args.concurrency.max(1)).await;
    let exe = std::env::current_exe().context("finding this program (the mock runtimes)")?;
    let programs = rewind_conformance::mocks::MockPrograms::link(&exe)?;
    let unsupported = catalog
        .get("err.agent-unsupported")
        .and_then(|rule| rule.message.clone())
        .context("the catalog has no message for rule `err.agent-unsupported`")?;
    let applicability = Arc::new(Applicability::new(
        profile,
        Arc::new(fixtures.clone()),
        unsupported,
    ));
    let context = Arc::new(RunContext {
        applicability: Arc::clone(&applicability),
        programs,
        template: template.clone(),
        sut: Arc::clone(&sut),
        fixtures,
        catalog,
        keep_databases: args.keep_databases,
        isolation_times: Mutex::new(Vec::new()),
        fault_results: Mutex::new(Vec::new()),
        compat: Mutex::new(Default::default()),
        limits: Limits {
            restore_timeout_ms: args.restore_timeout_ms,
            request_timeout_ms: args.request_timeout * 1000,
        },
        violations: Mutex::new(Default::default()),
        register,
        readings: Mutex::new(Default::default()),
        codes: Mutex::new(Default::default()),
    });
    let options = SuiteOptions {
        features: args.paths.features.clone(),
        tags: args.tags.clone(),
        name: args.name.clone(),
        concurrency: args.concurrency,
        junit: args.junit.clone(),
        fail_fast: args.fail_fast,
    };
    let report = run_suite(&options, Arc::clone(&context))
        .await
        .map(|mut report| {
            if let Ok(violations) = context.violations.lock() {
                report.mark_violations(&violations);
            }
            if let Ok(readings) = context.readings.lock() {
                report.mark_readings(&readings);
            }
            report
        });
    context.programs.remove();
    let cleanup = if args.keep_databases {
        template.release_prefetched().await
    } else {
        template.drop_all().await
    };
    if let Err(e) = cleanup {
        tracing::warn!("{e}");
    }
    let isolation = context
        .isolation_times
        .lock()
        .map(|t| t.clone())
        .unwrap_or_default();
    let faults = context
        .fault_results
        .lock()
        .map(|t| t.clone())
        .unwrap_or_default();
    Ok((
        report?,
        RunStats {
            isolation,
            faults: FaultMatrix::from_results(&faults),
            compat: context.compat.lock().map(|m| m.clone()).unwrap_or_default(),
            sut: sut.name().to_owned(),
            profile: applicability.profile().describe(),
            parsed: applicability.parsed(),
        },
    ))
}

fn print_summary(
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
        println!("  refusal codes answered (consistent within the run):");
        for (message, code) in &report.refusal_codes {
            println!("    {code:<30} {message}");
        }
    }
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v.get(v.len() / 2).map(|d| d.as_secs_f64() * 1000.0)
    };
    let clones = median(stats.isolation.iter().map(|t| t.0).collect());
    let waits = median(stats.isolation.iter().map(|t| t.1).collect());
    if let (Some(clone), Some(wait)) = (clones, waits) {
        println!(
            "  scenario isolation over {} scenarios: median clone {clone:.1} ms (made ahead), \
             median wait + seed {wait:.1} ms",
            stats.isolation.len()
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
            "  runtime compatibility (what each imitated release answered the implementation, \
             planted faults left out; - = no such call):"
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
    println!(
        "  rules exercised: {} ({} with a failing scenario)",
        exercised.len(),
        failing.len()
    );
    if let Some(path) = &args.fault_matrix {
        println!("  fault matrix: {}", path.display());
    }
    if let Some(path) = &args.compat_matrix {
        println!("  compatibility matrix: {}", path.display());
    }
    if let Some(junit) = &args.junit {
        println!("  JUnit report: {}", junit.display());
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
        "conformance: {} passed, {} failed, {} skipped",
        counts.passed,
        counts.failed + counts.violations + counts.unexpected_passes,
        counts.skipped
    );
}
