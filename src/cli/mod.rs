//! The command line: the parser, the dispatch to each command and the exit codes. The rest
//! lives in submodules: the arguments in [`args`], a run from start to exit code in
//! [`lifecycle`], the scenarios it executes in [`selection`], its report files in
//! [`report_files`], what it prints at the end in [`summary`], the `coverage` command in
//! [`coverage`], the `merge` command in [`merge`].
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
//!   answers on; for `merge`, results files that cannot be read or are not the shards of one
//!   split run);
//! - 4: protocol violations: the implementation's server answered outside driver protocol v1
//!   (another version, a body that is not JSON or off the schema), whatever else failed;
//! - 128 + the signal's number when SIGHUP (129), SIGINT (130) or SIGTERM (143) ended the run,
//!   after it stopped everything it had started.
//!
//! Everything that can be checked is checked before PostgreSQL starts.

mod args;
mod coverage;
mod lifecycle;
mod merge;
mod report_files;
mod selection;
mod summary;

use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

pub(crate) use args::RunArgs;
pub(crate) use lifecycle::{prepare, run_on_server, SuiteInputs};

use args::{CompareArgs, CoverageArgs, MergeArgs, SmokeArgs};

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
    Coverage(Box<CoverageArgs>),
    /// Compare two `--json` results scenario by scenario, and their runtime compatibility side by
    /// side (exit 1 when any outcome differs or a runtime step diverges).
    Compare(CompareArgs),
    /// Merge the results files of the shards of one split run (`run --shard I/N`) into the
    /// reports of one run, after checking they are that (exit 1 when a shard failed).
    Merge(MergeArgs),
    /// Check in seconds that a server speaks the driver protocol: handshake, attach, one
    /// trivial rewind, its events, detach.
    Smoke(SmokeArgs),
    /// Print the step library's reference (Markdown, generated from the step definitions;
    /// the committed copy is `docs/STEPS.md`).
    Steps,
    /// Generate conversations, rewind each once and judge every outcome with the spec model;
    /// shrink and save each failing case as a fixture and a scenario `run` re-runs.
    Fuzz(Box<crate::fuzzing::FuzzArgs>),
    /// Say which suite is built into this binary and where it is unpacked; `--extract DIR`
    /// writes a copy (to read the features, or to start a suite of one's own for `--suite`).
    Suite(SuiteArgs),
    /// Measure the reference's rewind against a set-based SQL lower bound on generated
    /// conversations, and print the table as Markdown.
    Bench(BenchArgs),
    /// List the real runtimes' releases `run --runtimes real` starts and where the cache holds
    /// them; `--install` installs the missing ones (to fill a CI cache ahead of the run).
    Runtimes(RuntimesArgs),
}

#[derive(Debug, clap::Args)]
struct RuntimesArgs {
    /// Install every listed release the cache does not hold yet, from the npm registry (needs
    /// Node.js and npm).
    #[arg(long)]
    install: bool,
    /// Every pinned release, also the older ones the real-runtime tier checks; by default only
    /// the ones `run --runtimes real` starts.
    #[arg(long)]
    all: bool,
    /// Another release of a runtime, as `run` takes it (`codex=0.171.0`, `claude=latest`,
    /// `latest`): it replaces the runtime's pinned release (with `--all`, it is listed too).
    #[arg(long = "runtime-release", value_name = "RUNTIME=VERSION|latest")]
    runtime_releases: Vec<String>,
}

/// The `runtimes` command.
fn runtimes(args: &RuntimesArgs) -> anyhow::Result<Outcome> {
    use rewind_conformance::real::install::{cache_dir, Release, ALL, PINNED};
    let mut releases: Vec<Release> = if args.all {
        ALL.to_vec()
    } else {
        PINNED.to_vec()
    };
    let overrides = Release::overrides(&args.runtime_releases).map_err(|e| usage(e.to_string()))?;
    for release in overrides {
        // `latest` asks the registry which version that is (the only step here, besides
        // `--install`, that needs the network).
        let release = release.resolve_latest()?;
        if !args.all {
            releases.retain(|r| r.name != release.name);
        }
        if !releases.contains(&release) {
            releases.push(release);
        }
    }
    println!("runtime cache: {}", cache_dir().display());
    let width = releases.iter().map(|r| r.spec().len()).max().unwrap_or(0);
    let mut missing = 0;
    for release in &releases {
        let program = if args.install {
            Some(release.program()?)
        } else {
            release.cached_program()
        };
        match program {
            Some(program) => println!("{:<width$}  {}", release.spec(), program.display()),
            None => {
                missing += 1;
                println!("{:<width$}  not installed", release.spec());
            }
        }
    }
    if missing > 0 {
        println!(
            "{missing} not installed: `rewind-conformance runtimes --install{}` installs them \
             (a run with `--runtimes real` installs what it starts before its first scenario)",
            if args.all { " --all" } else { "" }
        );
    }
    Ok(Outcome::Passed)
}

#[derive(Debug, clap::Args)]
struct BenchArgs {
    /// The suffix lengths to rewind, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "100,1000,10000,100000",
          value_parser = clap::value_parser!(i64).range(1..=10_000_000))]
    sizes: Vec<i64>,
    /// Timed iterations per measurement (after up to five untimed warm-up runs); the median is
    /// shown.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    iterations: u32,
    /// Skip the case of the same scopes inside a workspace of many other scopes.
    #[arg(long)]
    no_workspace: bool,
    /// Other scopes in the workspace case.
    #[arg(long, value_name = "COUNT", default_value_t = 1000,
          value_parser = clap::value_parser!(i64).range(1..=100_000))]
    workspace_scopes: i64,
    /// Messages per other scope in the workspace case.
    #[arg(long, value_name = "COUNT", default_value_t = 300,
          value_parser = clap::value_parser!(i64).range(1..=1_000_000))]
    workspace_scope_len: i64,
    /// Use the PostgreSQL server at this URL instead of an embedded one.
    #[arg(long, env = "REWIND_DATABASE_URL")]
    database_url: Option<String>,
}

/// The `bench` command.
async fn bench(args: BenchArgs) -> anyhow::Result<Outcome> {
    use rewind_conformance::bench;
    use rewind_conformance::postgres::PostgresChoice;
    let choice = match args.database_url {
        Some(url) => PostgresChoice::Url(url),
        None => PostgresChoice::Embedded,
    };
    let options = bench::BenchOptions {
        sizes: args.sizes,
        iterations: args.iterations,
        workspace: !args.no_workspace,
        workspace_scopes: args.workspace_scopes,
        workspace_scope_len: args.workspace_scope_len,
    };
    let report = bench::run(&choice, &options, &mut |line| eprintln!("bench: {line}"))
        .await
        .map_err(|e| anyhow::anyhow!("the benchmark failed: {e}"))?;
    print!("{}", bench::markdown(&report));
    Ok(Outcome::Passed)
}

#[derive(Debug, clap::Args)]
struct SuiteArgs {
    /// Write the built-in suite (`features/`, `fixtures/`, `schemas/`) into this directory; it
    /// must not hold any of those files yet.
    #[arg(long, value_name = "DIR")]
    extract: Option<std::path::PathBuf>,
}

/// The `suite` command.
fn suite(args: &SuiteArgs) -> anyhow::Result<Outcome> {
    use rewind_conformance::bundled;
    let files = bundled::files();
    println!(
        "built-in suite: {} files, fingerprint {:016x}",
        files.len(),
        bundled::fingerprint()
    );
    match &args.extract {
        Some(dir) => {
            let written = bundled::write_to(dir)
                .with_context(|| format!("writing the built-in suite into {}", dir.display()))?;
            println!(
                "wrote {written} files into {} (run it with `--suite {}`)",
                dir.display(),
                dir.display()
            );
        }
        None => println!("unpacked in {}", bundled::unpacked()?.display()),
    }
    Ok(Outcome::Passed)
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
        Command::Coverage(mut args) => args
            .paths
            .resolve()
            .and_then(|()| coverage::coverage(&args))
            .map(passed_if),
        Command::Compare(args) => crate::results::compare_files(
            &args.expected,
            &args.actual,
            args.compat_only,
        )
        .and_then(|compared| {
            if let Some(path) = &args.compat_matrix {
                crate::results::write_report(path, &compared.compat_markdown).map_err(|e| {
                    usage(format!(
                        "`--compat-matrix {}` cannot be written: {e}; choose a \
                                     writable path",
                        path.display()
                    ))
                })?;
            }
            Ok(passed_if(compared.same))
        }),
        Command::Merge(args) => merge::merge(&args),
        Command::Suite(args) => suite(&args),
        Command::Bench(args) => block_on(bench(args)),
        Command::Runtimes(args) => runtimes(&args),
        Command::Steps => crate::step_reference::markdown()
            .map_err(anyhow::Error::msg)
            .map(|text| {
                print!("{text}");
                Outcome::Passed
            }),
        Command::Smoke(args) => block_on(lifecycle::smoke(args)),
        Command::Run(mut args) => args
            .paths
            .resolve()
            .and_then(|()| block_on(lifecycle::run(*args))),
        Command::Fuzz(mut args) => args
            .run
            .paths
            .resolve()
            .and_then(|()| block_on(crate::fuzzing::fuzz(*args))),
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

/// Runs `command` on a fresh async runtime.
fn block_on(
    command: impl std::future::Future<Output = anyhow::Result<Outcome>>,
) -> anyhow::Result<Outcome> {
    tokio::runtime::Runtime::new()
        .map_err(|e| anyhow::Error::new(e).context("starting the async runtime"))?
        .block_on(command)
}

fn usage(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}

/// The implementation's server does not speak driver protocol v1 (reported in one line).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct HandshakeRefused(String);
