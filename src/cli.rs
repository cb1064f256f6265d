//! The command line: argument structs, the `run` and `coverage` commands, exit codes.
//!
//! Exit codes (one place, documented in the README):
//! - 0: every selected scenario passed (or the coverage gate passed);
//! - 1: conformance failures (a scenario failed or a step matched nothing; coverage gaps under
//!   `--strict`);
//! - 2: bad usage (unknown flag, bad value, a tag expression or name regex that does not parse
//!   or selects no scenario, an output path that cannot be written, `--concurrency` out of
//!   bounds);
//! - 3: the harness itself could not run (no PostgreSQL, an unreadable or invalid catalog,
//!   feature, fixture, profile or expectations file, a scenario tagged with a rule id the
//!   catalog lacks or naming a fixture that does not exist, an implementation URL nothing
//!   answers on);
//! - 4: protocol violations: the implementation's server answered outside driver protocol v1
//!   (another version, a body that is not JSON or off the schema), whatever else failed;
//! - 128 + the signal's number when SIGHUP (129), SIGINT (130) or SIGTERM (143) ended the run,
//!   after it stopped everything it had started.
//!
//! Everything that can be checked is checked before PostgreSQL starts.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use rewind_conformance::catalog::{
    scan_features, Catalog, Coverage, Pending, Register, Untestable,
};
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
const EXIT_USAGE: u8 = 2;
const EXIT_HARNESS: u8 = 3;
const EXIT_PROTOCOL: u8 = 4;

/// How a command ended, when it ran to the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
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
    /// The coverage gate: check the rule tags and the untestable and pending lists, and report
    /// the holes (rules without a scenario, unasserted error messages, unused fixtures).
    Coverage(CoverageArgs),
    /// Compare two `--json` results scenario by scenario (exit 1 when any outcome differs).
    Compare(CompareArgs),
    /// Check in seconds that a server speaks the driver protocol: handshake, attach, one
    /// trivial rewind, its events, detach.
    Smoke(SmokeArgs),
    /// Print the step library's reference (Markdown, generated from the step definitions;
    /// the committed copy is `docs/STEPS.md`).
    Steps,
    /// Generate conversations, rewind each once and judge every outcome with the spec model;
    /// shrink and save each failing case as a fixture and a scenario `run` re-runs.
    Fuzz(Box<crate::fuzzing::FuzzArgs>),
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

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Paths {
    /// A `*.feature` file, or a directory of them.
    #[arg(long, default_value = "features")]
    pub(crate) features: PathBuf,
    /// The rule catalog.
    #[arg(long, default_value = "features/rules.yaml")]
    catalog: PathBuf,
    /// Rules no black-box scenario can check, with reasons.
    #[arg(long, default_value = "features/untestable.yaml")]
    untestable: PathBuf,
    /// Rules that wait for a piece of harness work, each naming it (`waits_for`).
    #[arg(long, default_value = "features/pending.yaml")]
    pending: PathBuf,
    /// The ambiguity register: what the spec leaves open and which readings the steps accept.
    #[arg(long, default_value = "features/ambiguities.yaml")]
    ambiguities: PathBuf,
    /// The leak scan's allow-list: the columns where the spec lets a rewound message's text
    /// stay, each with the rule that allows it.
    #[arg(long, default_value = "features/leak-allow.yaml")]
    leak_allow: PathBuf,
}

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) paths: Paths,
    /// Directory of YAML fixtures.
    #[arg(long, default_value = "fixtures")]
    pub(crate) fixtures: PathBuf,
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
    /// Scenarios run at once, each on its own database: from 1 to 4 per CPU (at least 8, at
    /// most 32; each scenario holds up to 8 PostgreSQL connections).
    #[arg(short = 'c', long, default_value_t = 8, value_parser = parse_concurrency, allow_hyphen_values = true)]
    concurrency: usize,
    /// Write a JUnit XML report here (one test case per scenario, from the final verdicts:
    /// leak-scan failures and protocol violations included).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Write the runtime restore fault matrix (runtime x fault kind) here, as Markdown.
    #[arg(long, value_name = "FILE")]
    fault_matrix: Option<PathBuf>,
    /// Write the runtime compatibility matrix (runtime x release x strategy step: what each
    /// runtime answered the implementation) here, as Markdown.
    #[arg(long, value_name = "FILE")]
    compat_matrix: Option<PathBuf>,
    /// Write a Markdown summary here (counts, failures first, the rule matrix folded): for a
    /// CI job summary or a pull-request comment.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Write the rule-by-rule matrix here as a self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Write every report into this directory: `junit.xml`, `results.json`, `summary.md`,
    /// `rules.html`, `fault-matrix.md`, `compat-matrix.md`.
    #[arg(long, value_name = "DIR")]
    report_dir: Option<PathBuf>,
    /// Stop at the first failing scenario.
    #[arg(long)]
    fail_fast: bool,
    /// Only scenarios tagged with this catalog rule id (`--rule init.human-only`); repeat it for
    /// several (a scenario of any of them is run). Combines with `--tags` and `--name`.
    #[arg(long = "rule", value_name = "RULE_ID")]
    rules: Vec<String>,
    /// Print the scenarios the filters (and `--shard`) select, with their rules, and exit
    /// without starting PostgreSQL or the implementation.
    #[arg(long)]
    list: bool,
    /// Run one shard of the selection: `I/N` is the I-th of N (1-based). The N shards of one
    /// selection hold every scenario exactly once, the same on every machine.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    shard: Option<crate::suite::shard::ShardSpec>,
    /// A previous run's results file (`--json`, or `results.json` of `--report-dir`): its
    /// scenario durations balance the shards by time instead of by count.
    #[arg(
        long,
        env = "REWIND_DURATIONS",
        value_name = "FILE",
        requires = "shard"
    )]
    durations: Option<PathBuf>,
    /// Keep every scenario database after the run, for debugging, and print their names and how
    /// to connect (the embedded PostgreSQL or the container is left running).
    #[arg(long)]
    keep_databases: bool,
}

#[derive(Debug, clap::Args)]
struct CoverageArgs {
    #[command(flatten)]
    paths: Paths,
    /// Directory of YAML fixtures: each must be used by a scenario.
    #[arg(long, default_value = "fixtures")]
    fixtures: PathBuf,
    /// Fail on every hole (exit 1): a rule with no scenario that neither the untestable nor the
    /// pending list accounts for, a section 9 message no step asserts verbatim, a fixture no
    /// scenario uses. Without it they are warnings.
    #[arg(long)]
    strict: bool,
}

/// Parses the command line, runs the command and maps the result to an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // sqlx warns about every connection a database fault scenario breaks (the
                // in-process reference's pool sees them); the scenario reports what matters.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,sqlx=error")),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Coverage(args) => coverage(&args).map(passed_if),
        Command::Compare(args) => {
            crate::results::compare_files(&args.expected, &args.actual).map(passed_if)
        }
        Command::Steps => crate::step_reference::markdown()
            .map_err(anyhow::Error::msg)
            .map(|text| {
                print!("{text}");
                Outcome::Passed
            }),
        Command::Smoke(args) => match tokio::runtime::Runtime::new() {
            Ok(runtime) => runtime.block_on(smoke(args)),
            Err(e) => Err(anyhow::Error::new(e).context("starting the async runtime")),
        },
        Command::Run(args) => match tokio::runtime::Runtime::new() {
            Ok(runtime) => runtime.block_on(run(*args)),
            Err(e) => Err(anyhow::Error::new(e).context("starting the async runtime")),
        },
        Command::Fuzz(args) => match tokio::runtime::Runtime::new() {
            Ok(runtime) => runtime.block_on(crate::fuzzing::fuzz(*args)),
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
        Err(e) if e.downcast_ref::<UsageError>().is_some() => {
            eprintln!("error: {e}");
            eprintln!("\nFor more information, try '--help'.");
            ExitCode::from(EXIT_USAGE)
        }
        Err(e) => {
            let mut shown = e.to_string();
            eprintln!("error: {shown}");
            // Library errors already quote their source; print only causes not yet said.
            for cause in e.chain().skip(1) {
                // A server error in the harness's words, without sqlx's `at line N` (a line
                // of PostgreSQL's C source that reads like one of the user's input).
                let text = match cause.downcast_ref::<sqlx::Error>() {
                    Some(error) => {
                        rewind_conformance::postgres::ProvisionError::describe_driver_error(error)
                    }
                    None => cause.to_string(),
                };
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

/// The command line asks for something that cannot be (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct UsageError(String);

fn usage(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}

/// The most scenarios a run may have at once on this machine: 4 per CPU, at least 8 (the
/// default) and at most 32. Each scenario holds up to 8 PostgreSQL connections (the embedded
/// server allows 300) and its own mock runtime processes; beyond the bound scenarios queue for
/// CPU inside the timed implementation calls.
pub fn max_concurrency() -> usize {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    (cpus * 4).clamp(8, 32)
}

fn parse_concurrency(text: &str) -> Result<usize, String> {
    let max = max_concurrency();
    let n: i64 = text.trim().parse().map_err(|_| {
        format!("`{text}` is not a whole number; give a number of scenarios from 1 to {max}")
    })?;
    if n < 1 {
        return Err(format!(
            "{n} would run no scenario; give at least 1 (at most {max} on this machine)"
        ));
    }
    match usize::try_from(n) {
        Ok(n) if n <= max => Ok(n),
        _ => Err(format!(
            "{n} is more than this machine's limit of {max} scenarios at a time (4 per CPU, at \
             least 8, at most 32: each scenario holds up to 8 PostgreSQL connections, and more \
             would only queue inside the timed calls); give at most {max}"
        )),
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
    install_signal_handlers(&choice);
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
    let fixtures = fixture_files(&args.fixtures).with_context(|| {
        format!(
            "reading the fixtures directory `{}` (pass `--fixtures DIR`)",
            args.fixtures.display()
        )
    })?;
    let coverage = Coverage::compute(&catalog, &scan);
    let gate = Gate::check(
        &catalog,
        &scan,
        &untestable,
        &pending,
        &fixtures,
        &args.fixtures,
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
        (Some(PostgresWay::Url), None) => Err(usage(
            "`--postgres url` needs a server URL: add `--database-url postgres://USER@HOST:PORT/DB` \
             (or set `REWIND_DATABASE_URL`), or drop `--postgres url` to use the embedded default",
        )),
    }
}

/// SIGINT, SIGTERM and SIGHUP stop the run: the mock runtimes, the databases the run made on a
/// given server (`drop_databases`), the embedded PostgreSQL (an `initdb` under way included)
/// and the temporary directories go, then the process exits with 128 + the signal's number. A
/// container is removed by testcontainers' watchdog, which handles SIGINT and SIGTERM itself;
/// SIGHUP is passed on to it as SIGTERM.
fn install_signal_handlers(choice: &PostgresChoice) {
    use tokio::signal::unix::{signal, SignalKind};
    let drop_databases = matches!(choice, PostgresChoice::Url(_));
    let container = matches!(choice, PostgresChoice::Container);
    for (kind, number, name) in [
        (SignalKind::interrupt(), libc::SIGINT, "SIGINT"),
        (SignalKind::terminate(), libc::SIGTERM, "SIGTERM"),
        (SignalKind::hangup(), libc::SIGHUP, "SIGHUP"),
    ] {
        let mut stream = match signal(kind) {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!("cannot handle {name}: {e}");
                continue;
            }
        };
        tokio::spawn(async move {
            if stream.recv().await.is_none()
                || crate::suite::INTERRUPTED.swap(true, std::sync::atomic::Ordering::SeqCst)
            {
                return;
            }
            // A closed terminal (SIGHUP) makes stderr fail: never let that stop the clean-up.
            let say = |text: &str| {
                use std::io::Write as _;
                let _ = writeln!(std::io::stderr(), "{text}");
            };
            say(&format!(
                "\ninterrupted by {name}: stopping the mock runtimes{}, and PostgreSQL",
                if drop_databases {
                    ", dropping this run's databases"
                } else {
                    ""
                }
            ));
            rewind_conformance::mocks::stop_all_mocks();
            if drop_databases {
                let failed =
                    rewind_conformance::postgres::drop_all_live(Duration::from_secs(10)).await;
                if failed > 0 {
                    say("  some databases could not be dropped now: the next run drops them");
                }
            }
            stop_all_embedded();
            // Anything a scenario started while the databases were being dropped.
            rewind_conformance::mocks::stop_all_mocks();
            if container {
                if number == libc::SIGHUP {
                    // SAFETY: `raise` has no memory effects; the watchdog handles SIGTERM.
                    unsafe {
                        libc::raise(libc::SIGTERM);
                    }
                }
                // The watchdog removes the container and exits; wait for it, within reason.
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            std::process::exit(128 + number);
        });
    }
}

/// The run's filters, parsed.
struct Filters {
    tags: Option<cucumber::gherkin::tagexpr::TagOperation>,
    name: Option<regex::Regex>,
}

/// `--shard I/N`.
fn parse_shard(text: &str) -> Result<crate::suite::shard::ShardSpec, String> {
    text.parse()
}

/// The tag expression the run filters by: `--tags`, and any of the `--rule` ids.
fn effective_tags(args: &RunArgs) -> Option<String> {
    let rules = (!args.rules.is_empty()).then(|| {
        args.rules
            .iter()
            .map(|r| format!("@rule:{}", r.trim_start_matches("@rule:")))
            .collect::<Vec<_>>()
            .join(" or ")
    });
    match (&args.tags, rules) {
        (Some(tags), Some(rules)) => Some(format!("({tags}) and ({rules})")),
        (Some(tags), None) => Some(tags.clone()),
        (None, rules) => rules,
    }
}

fn parse_filters(args: &RunArgs) -> anyhow::Result<Filters> {
    let tags = match &effective_tags(args) {
        Some(text) => Some(text.parse().map_err(|e| {
            usage(format!(
                "`--tags {text}` is not a tag expression: {e} (e.g. `@rule:init.human-only`, \
                 `@rule:a or @rule:b`, `not @slow`)"
            ))
        })?),
        None => None,
    };
    let name = match &args.name {
        Some(text) => Some(regex::Regex::new(text).map_err(|e| {
            usage(format!(
                "`--name {text}` is not a regular expression:\n  {}",
                e.to_string().trim().replace('\n', "\n  ")
            ))
        })?),
        None => None,
    };
    Ok(Filters { tags, name })
}

/// The report files of the run: each single-report option, then every report of
/// `--report-dir`.
fn report_targets(args: &RunArgs) -> Vec<crate::reports::Target> {
    use crate::reports::Kind;
    crate::reports::targets(
        &[
            (Kind::Junit, args.junit.as_ref()),
            (Kind::Json, args.json.as_ref()),
            (Kind::Markdown, args.markdown.as_ref()),
            (Kind::Html, args.html.as_ref()),
            (Kind::FaultMatrix, args.fault_matrix.as_ref()),
            (Kind::CompatMatrix, args.compat_matrix.as_ref()),
        ],
        args.report_dir.as_deref(),
    )
}

/// Checks that each report path of the run can be written, without leaving a file behind.
fn check_output_paths(args: &RunArgs) -> anyhow::Result<()> {
    if let Some(dir) = &args.report_dir {
        if dir.exists() && !dir.is_dir() {
            return Err(usage(format!(
                "`--report-dir {0}` cannot be written: `{0}` is not a directory; choose a \
                 writable path",
                dir.display()
            )));
        }
    }
    for target in report_targets(args) {
        let path = &target.path;
        let fail = |why: String| {
            usage(format!(
                "`{}` cannot be written: {why}; choose a writable path",
                target.option
            ))
        };
        if path.is_dir() {
            return Err(fail(if target.option.starts_with("--report-dir") {
                format!("`{}` is a directory", path.display())
            } else {
                "it is a directory".to_owned()
            }));
        }
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        // The directory is made at the end anyway; here only its nearest existing ancestor has
        // to take a new entry.
        let mut existing = dir;
        while !existing.exists() {
            match existing.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => existing = parent,
                _ => {
                    existing = std::path::Path::new(".");
                    break;
                }
            }
        }
        if !existing.is_dir() {
            return Err(fail(format!("`{}` is not a directory", existing.display())));
        }
        let probe = if path.exists() {
            std::fs::OpenOptions::new()
                .append(true)
                .open(path)
                .map(|_| ())
        } else if existing == dir {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .and_then(|_| std::fs::remove_file(path))
        } else {
            tempfile::tempfile_in(existing).map(|_| ())
        };
        if let Err(e) = probe {
            return Err(fail(e.to_string()));
        }
    }
    Ok(())
}

/// The scenarios this run executes when it is one shard of a split run (`None`: every selected
/// one), and how many scenarios it will finish.
fn shard_of_selection(
    args: &RunArgs,
    selected: &[crate::suite::selection::Selected],
) -> anyhow::Result<(
    Option<std::collections::HashSet<crate::suite::shard::Key>>,
    usize,
)> {
    use crate::suite::shard::{assign, load_durations, Key};
    let keys: Vec<Key> = selected
        .iter()
        .flat_map(|s| {
            let feature = crate::suite::applicability::relative_to_cwd(&s.path)
                .display()
                .to_string();
            s.units.iter().map(move |u| Key {
                feature: feature.clone(),
                line: u.line,
            })
        })
        .collect();
    let Some(spec) = args.shard else {
        return Ok((None, keys.len()));
    };
    let durations = args.durations.as_deref().map(load_durations).transpose()?;
    let shard_of = assign(&keys, spec.count, durations.as_ref());
    let mine: std::collections::HashSet<Key> = keys
        .iter()
        .zip(&shard_of)
        .filter(|(_, shard)| **shard + 1 == spec.index)
        .map(|(k, _)| k.clone())
        .collect();
    if mine.is_empty() {
        return Err(usage(format!(
            "shard {spec} holds no scenario: the filters select {} scenario{}, fewer than {} \
             shards (use fewer shards)",
            keys.len(),
            if keys.len() == 1 { "" } else { "s" },
            spec.count
        )));
    }
    let count = mine.len();
    let loads = crate::suite::shard::loads(&keys, &shard_of, spec.count, durations.as_ref());
    let balance = match &durations {
        Some(_) => {
            let secs: Vec<String> = loads
                .values()
                .map(|(_, ms)| format!("{:.0}s", ms / 1000.0))
                .collect();
            format!("recorded work per shard {}", secs.join(" / "))
        }
        None => "no durations: balanced by count".to_owned(),
    };
    eprintln!(
        "shard {spec}: {count} of {} scenarios ({balance})",
        keys.len()
    );
    Ok((Some(mine), count))
}

/// `--list`: the selected scenarios (one line each, with their rules), then the rules they
/// check, on stdout.
fn print_list(
    args: &RunArgs,
    selected: &[crate::suite::selection::Selected],
    only: Option<&std::collections::HashSet<crate::suite::shard::Key>>,
    catalog: &Catalog,
) {
    let mut rules = std::collections::BTreeSet::new();
    let mut count = 0;
    for s in selected {
        let feature = crate::suite::applicability::relative_to_cwd(&s.path)
            .display()
            .to_string();
        for unit in &s.units {
            let key = crate::suite::shard::Key {
                feature: feature.clone(),
                line: unit.line,
            };
            if only.is_some_and(|o| !o.contains(&key)) {
                continue;
            }
            let ids: Vec<&str> = unit
                .tags
                .iter()
                .filter_map(|t| t.strip_prefix("rule:"))
                .collect();
            rules.extend(ids.iter().map(|r| (*r).to_owned()));
            println!(
                "{feature}:{} {}  [{}]",
                unit.line,
                unit.name,
                ids.join(", ")
            );
            count += 1;
        }
    }
    let shard = args
        .shard
        .map(|s| format!(" in shard {s}"))
        .unwrap_or_default();
    println!(
        "\n{count} scenario{}{shard}, checking {} rule{}:",
        if count == 1 { "" } else { "s" },
        rules.len(),
        if rules.len() == 1 { "" } else { "s" }
    );
    for id in &rules {
        let text = catalog
            .rules()
            .iter()
            .find(|r| &r.id == id)
            .map(|r| r.text.as_str())
            .unwrap_or("");
        println!("  {id}  {text}");
    }
}

async fn run(args: RunArgs) -> anyhow::Result<Outcome> {
    // Usage first (exit 2), then the input files (exit 3), all before PostgreSQL starts.
    let choice = postgres_choice(&args)?;
    install_signal_handlers(&choice);
    let filters = parse_filters(&args)?;
    check_output_paths(&args)?;
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
    if scan.files.is_empty() {
        anyhow::bail!(
            "`{}` holds no `*.feature` file: there is nothing to run (pass `--features DIR|FILE`)",
            args.paths.features.display()
        );
    }
    let unknown = Coverage::compute(&catalog, &scan).unknown_tags;
    if !unknown.is_empty() {
        let lines: Vec<String> = unknown
            .iter()
            .map(|tag| {
                format!(
                    "{}:{}:{}: scenario `{}` is tagged `@rule:{}`, which the catalog does not \
                     define",
                    tag.file.display(),
                    tag.line,
                    tag.column,
                    tag.scenario,
                    tag.id
                )
            })
            .collect();
        anyhow::bail!(
            "{} rule tag{} no rule of `{}` (a typo, or a rule to add to the catalog; \
             `coverage` lists the rules):\n  {}",
            lines.len(),
            if lines.len() == 1 { " names" } else { "s name" },
            args.paths.catalog.display(),
            lines.join("\n  ")
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
    let rule_ids: std::collections::BTreeSet<String> =
        catalog.rules().iter().map(|r| r.id.clone()).collect();
    let leak_allow = load_leak_allow(&args, &catalog)?;
    // The reports that show the rule matrix read the untestable and pending lists too.
    let report_targets = report_targets(&args);
    let rule_index = if report_targets.iter().any(|t| t.kind.needs_rules()) {
        let untestable = Untestable::load(&args.paths.untestable)?;
        let pending = Pending::load(&args.paths.pending)?;
        crate::reports::RuleIndex::new(&catalog, &untestable, &pending, &scan)
    } else {
        crate::reports::RuleIndex::default()
    };
    let unknown_rules: Vec<&String> = args
        .rules
        .iter()
        .filter(|r| !rule_ids.contains(r.trim_start_matches("@rule:")))
        .collect();
    if !unknown_rules.is_empty() {
        return Err(usage(format!(
            "`--rule {}` names no rule of `{}` (`coverage` lists the rules)",
            unknown_rules
                .iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join("`, `--rule "),
            args.paths.catalog.display()
        )));
    }
    let selected =
        crate::suite::selection::select(&scan.files, filters.tags.as_ref(), filters.name.as_ref())?;
    if selected.is_empty() {
        let mut filter = Vec::new();
        if let Some(tags) = &args.tags {
            filter.push(format!("--tags `{tags}`"));
        }
        if let Some(name) = &args.name {
            filter.push(format!("--name `{name}`"));
        }
        return Err(usage(format!(
            "{} select{} none of the {} scenarios and outlines in `{}`: a run that tests nothing cannot pass \
             (rule tags look like `@rule:init.human-only`; `coverage` lists the rules)",
            filter.join(" and "),
            if filter.len() == 1 { "s" } else { "" },
            scan.scenarios,
            args.paths.features.display()
        )));
    }
    let fixture_dir = args.fixtures.display().to_string();
    let missing: Vec<String> = selected
        .iter()
        .flat_map(|s| {
            let fixture_dir = &fixture_dir;
            s.fixtures
                .iter()
                .filter(|(name, _)| !fixtures.contains_key(name))
                .map(move |(name, line)| {
                    format!(
                        "{}: scenario `{}` names fixture `{name}`, which `{}` does not hold",
                        crate::suite::selection::at(&s.path, *line),
                        s.name,
                        fixture_dir
                    )
                })
        })
        .collect();
    if !missing.is_empty() {
        anyhow::bail!(
            "{} (known fixtures: {}; a fixture is `<name>.yaml` in `--fixtures DIR`)",
            missing.join("\n  "),
            fixtures.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    let (only, expected) = shard_of_selection(&args, &selected)?;
    if args.list {
        print_list(&args, &selected, only.as_ref(), &catalog);
        return Ok(Outcome::Passed);
    }
    let profile = load_profile(&args, &catalog)?;
    let expectations = match &args.expectations {
        Some(path) => Expectations::load(path)?,
        None => Expectations::default(),
    };
    reap_leftovers();
    // The handshake comes first: a server that is not there, or speaks another protocol, is
    // told in one line before PostgreSQL starts.
    let sut = connect_sut(
        &args.sut,
        &profile,
        Duration::from_secs(args.request_timeout),
    )
    .await?;
    let started = Instant::now();
    let server = PostgresServer::provision(&choice).await?;
    let provision_time = started.elapsed();
    let (started_at, suite_started) = (chrono::Utc::now(), Instant::now());
    let outcome = run_on_server(
        &args,
        &server,
        sut,
        profile,
        (catalog, register, leak_allow),
        fixtures,
        (only, expected),
    )
    .await;
    let suite_time = suite_started.elapsed();
    let kept_server = if args.keep_databases && outcome.is_ok() {
        server.keep()
    } else {
        server.shutdown().await;
        Vec::new()
    };
    let (mut report, stats) = outcome?;
    let stale = report.apply_expectations(&expectations, &stats.parsed);
    for entry in &stale {
        eprintln!(
            "error: {}: expected failure `{}: {}` names no scenario of the features (remove or \
             correct it)",
            entry.at, entry.feature, entry.scenario
        );
    }
    // Every report from the final verdicts (leak scan, protocol violations, expectations).
    let problems: Vec<String> = stale
        .iter()
        .map(|entry| {
            format!(
                "{}: expected failure `{}: {}` names no scenario of the features",
                entry.at, entry.feature, entry.scenario
            )
        })
        .collect();
    let data = crate::reports::RunData::new(
        &stats.sut,
        &stats.profile,
        started_at,
        suite_time,
        &report,
        &rule_index,
        (&stats.faults, &stats.compat),
        problems,
    );
    // A report that cannot be written fails the run, after the summary is printed.
    let written = crate::reports::write_all(&report_targets, &data);
    print_summary(&args, &choice, provision_time, &report, &stats);
    if args.keep_databases {
        print_kept(&stats.kept, &kept_server);
    }
    written?;
    Ok(if report.counts().violations > 0 {
        Outcome::ProtocolViolation
    } else if report.fails() || !stale.is_empty() {
        Outcome::Failed
    } else {
        Outcome::Passed
    })
}

/// What `--keep-databases` kept (each database with a URL that reaches it, the password left
/// out), and how to reach and remove the server when the harness started it.
fn print_kept(kept: &[(String, String)], server: &[String]) {
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

pub(crate) struct RunStats {
    isolation: Vec<(Duration, Duration)>,
    faults: FaultMatrix,
    /// The storm and database fault matrices that scenarios contributed to.
    matrices: Vec<(
        crate::suite::matrix::MatrixKind,
        crate::suite::matrix::OutcomeMatrix,
    )>,
    compat: crate::suite::compat::CompatMatrix,
    sut: String,
    profile: String,
    parsed: Vec<(String, String)>,
    /// The databases `--keep-databases` kept, with their URLs.
    kept: Vec<(String, String)>,
    /// How long each leak scan took.
    scans: Vec<Duration>,
}

/// The leak scan's allow-list, checked against the catalog's rules.
fn load_leak_allow(
    args: &RunArgs,
    catalog: &Catalog,
) -> anyhow::Result<rewind_conformance::leak_scan::AllowList> {
    let rule_ids: std::collections::BTreeSet<String> =
        catalog.rules().iter().map(|r| r.id.clone()).collect();
    Ok(rewind_conformance::leak_scan::AllowList::load(
        &args.paths.leak_allow,
        &rule_ids,
    )?)
}

/// The capability profile `--profile` names, or the one of the harness's cargo features; its
/// declared codes checked against the catalog.
fn load_profile(args: &RunArgs, catalog: &Catalog) -> anyhow::Result<CapabilityProfile> {
    let profile = match &args.profile {
        Some(path) => CapabilityProfile::load(path)?,
        None => CapabilityProfile::compiled(),
    };
    profile.check_error_codes(catalog)?;
    Ok(profile)
}

/// Removes what killed runs left here (clusters, mock servers, directories) and says so; the
/// databases they left on a given server go when the template is made.
fn reap_leftovers() {
    let reaped = rewind_conformance::postgres::reap_leftovers();
    if !reaped.dirs.is_empty() {
        eprintln!(
            "removed {} director{} that killed runs left: {}",
            reaped.dirs.len(),
            if reaped.dirs.len() == 1 { "y" } else { "ies" },
            reaped
                .dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}

/// What a suite run reads besides its features and fixtures: the rule catalog, the ambiguity
/// register and the leak scan's allow-list.
pub(crate) type SuiteInputs = (Catalog, Register, rewind_conformance::leak_scan::AllowList);

/// What [`prepare`] readies for runs that bring their own features and fixtures.
pub(crate) struct Prepared {
    /// The implementation, after its handshake.
    pub(crate) sut: Arc<dyn SystemUnderTest>,
    /// Its capability profile.
    pub(crate) profile: CapabilityProfile,
    /// The catalog, register and allow-list.
    pub(crate) inputs: SuiteInputs,
}

/// Readies runs of generated features: checks the usage and the input files (before
/// PostgreSQL starts), reaps what killed runs left, shakes hands with the implementation and
/// provisions PostgreSQL. The caller shuts the server down.
pub(crate) async fn prepare(args: &RunArgs) -> anyhow::Result<(Prepared, PostgresServer)> {
    let choice = postgres_choice(args)?;
    install_signal_handlers(&choice);
    let catalog = Catalog::load(&args.paths.catalog)?;
    let register = Register::load(&args.paths.ambiguities)?;
    let leak_allow = load_leak_allow(args, &catalog)?;
    let profile = load_profile(args, &catalog)?;
    reap_leftovers();
    let sut = connect_sut(
        &args.sut,
        &profile,
        Duration::from_secs(args.request_timeout),
    )
    .await?;
    let server = PostgresServer::provision(&choice).await?;
    Ok((
        Prepared {
            sut,
            profile,
            inputs: (catalog, register, leak_allow),
        },
        server,
    ))
}

pub(crate) async fn run_on_server(
    args: &RunArgs,
    server: &PostgresServer,
    sut: Arc<dyn SystemUnderTest>,
    profile: CapabilityProfile,
    (catalog, register, leak_allow): SuiteInputs,
    fixtures: std::collections::BTreeMap<String, rewind_conformance::fixtures::Fixture>,
    (only, expected): (
        Option<std::collections::HashSet<crate::suite::shard::Key>>,
        usize,
    ),
) -> anyhow::Result<(SuiteReport, RunStats)> {
    let template =
        TemplateDatabase::create(server.admin_url(), &rewind_reference::MIGRATOR).await?;
    if !template.reaped().is_empty() {
        eprintln!(
            "dropped {} database{} that killed runs left: {}",
            template.reaped().len(),
            if template.reaped().len() == 1 {
                ""
            } else {
                "s"
            },
            template.reaped().join(", ")
        );
    }
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
        matrix_results: Mutex::new(Vec::new()),
        compat: Mutex::new(Default::default()),
        limits: Limits {
            restore_timeout_ms: args.restore_timeout_ms,
            request_timeout_ms: args.request_timeout * 1000,
        },
        violations: Mutex::new(Default::default()),
        register,
        readings: Mutex::new(Default::default()),
        codes: Mutex::new(Default::default()),
        leak_allow,
        leaks: Mutex::new(Default::default()),
        scan_times: Mutex::new(Vec::new()),
    });
    let options = SuiteOptions {
        features: args.paths.features.clone(),
        tags: effective_tags(args),
        name: args.name.clone(),
        concurrency: args.concurrency,
        fail_fast: args.fail_fast,
        only: only.map(Arc::new),
        expected,
    };
    let report = run_suite(&options, Arc::clone(&context))
        .await
        .map(|mut report| {
            if let Ok(leaks) = context.leaks.lock() {
                report.mark_leaks(&leaks);
            }
            if let Ok(violations) = context.violations.lock() {
                report.mark_violations(&violations);
            }
            if let Ok(readings) = context.readings.lock() {
                report.mark_readings(&readings);
            }
            report
        });
    context.programs.remove();
    let mut kept = Vec::new();
    if args.keep_databases {
        match template.keep_all().await {
            Ok(names) => {
                kept = names
                    .into_iter()
                    .map(|name| {
                        let url = rewind_conformance::postgres::redact(&template.url_of(&name));
                        (name, url)
                    })
                    .collect();
            }
            Err(e) => eprintln!("error: keeping the databases: {e}"),
        }
    } else if let Err(e) = template.drop_all().await {
        eprintln!("error: dropping the run's databases: {e} (the next run drops them)");
    }
    let isolation = context
        .isolation_times
        .lock()
        .map(|t| t.clone())
        .unwrap_or_default();
    let scans = context
        .scan_times
        .lock()
        .map(|t| t.clone())
        .unwrap_or_default();
    let faults = context
        .fault_results
        .lock()
        .map(|t| t.clone())
        .unwrap_or_default();
    let cells = context
        .matrix_results
        .lock()
        .map(|t| t.clone())
        .unwrap_or_default();
    Ok((
        report?,
        RunStats {
            isolation,
            faults: FaultMatrix::from_results(&faults),
            matrices: crate::suite::matrix::from_results(&cells),
            compat: context.compat.lock().map(|m| m.clone()).unwrap_or_default(),
            sut: sut.name().to_owned(),
            profile: applicability.profile().describe(),
            parsed: applicability.parsed(),
            kept,
            scans,
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
        "conformance: {} passed, {} failed, {} skipped",
        counts.passed,
        counts.failed + counts.violations + counts.unexpected_passes,
        counts.skipped
    );
}
