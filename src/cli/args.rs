//! The arguments of each command (clap's structs), their value parsers and the checks of what
//! they ask for that need no file: the PostgreSQL to use, the filters, the concurrency.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::ValueEnum;
use rewind_conformance::postgres::PostgresChoice;
use rewind_conformance::sut::http::HttpSut;
use rewind_conformance::sut::reference::ReferenceSut;
use rewind_conformance::sut::SystemUnderTest;

use super::usage;

#[derive(Debug, clap::Args)]
pub(super) struct SmokeArgs {
    /// The server's base URL (`http://127.0.0.1:8080`), or `reference`.
    #[arg(long, env = "REWIND_SUT_URL", value_parser = parse_sut)]
    pub(super) sut: SutTarget,
    /// Use the PostgreSQL server at this URL instead of an embedded one.
    #[arg(long, env = "REWIND_DATABASE_URL")]
    pub(super) database_url: Option<String>,
    /// How long the harness waits for one call, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub(super) request_timeout: u64,
}

#[derive(Debug, clap::Args)]
pub(super) struct CompareArgs {
    /// The first results file (e.g. the in-process run, or the run on the pinned runtime
    /// releases).
    pub(super) expected: PathBuf,
    /// The second results file (e.g. the same suite over HTTP, or the run on the newest
    /// releases).
    pub(super) actual: PathBuf,
    /// Also write the two runs' runtime compatibility side by side, with every divergence, as
    /// Markdown to FILE (when a file carries no compatibility rows, a line that says so).
    #[arg(long, value_name = "FILE")]
    pub(super) compat_matrix: Option<PathBuf>,
    /// Compare only the runtime compatibility: scenario verdicts are not compared, and exit 1
    /// means a runtime step diverges. Both files must carry compatibility rows.
    #[arg(long)]
    pub(super) compat_only: bool,
}

#[derive(Debug, clap::Args)]
pub(super) struct MergeArgs {
    /// The results files of the shards of one split run (each shard's `--json` file, or the
    /// `results.json` of its `--report-dir`), in any order: every shard once.
    #[arg(required = true, value_name = "SHARD.json")]
    pub(super) shards: Vec<PathBuf>,
    /// Write the merged run's JUnit XML report here.
    #[arg(long, value_name = "FILE")]
    pub(super) junit: Option<PathBuf>,
    /// Write the merged run's results file here (a `--durations` file for the next split run).
    #[arg(long, value_name = "FILE")]
    pub(super) json: Option<PathBuf>,
    /// Write the merged run's Markdown summary here.
    #[arg(long, value_name = "FILE")]
    pub(super) markdown: Option<PathBuf>,
    /// Write the merged run's rule matrix page here.
    #[arg(long, value_name = "FILE")]
    pub(super) html: Option<PathBuf>,
    /// Write the merged run's runtime restore fault matrix here.
    #[arg(long, value_name = "FILE")]
    pub(super) fault_matrix: Option<PathBuf>,
    /// Write the merged run's runtime compatibility matrix here.
    #[arg(long, value_name = "FILE")]
    pub(super) compat_matrix: Option<PathBuf>,
    /// Write every report of the merged run into this directory, as `run --report-dir` does:
    /// `junit.xml`, `results.json`, `summary.md`, `rules.html`, `fault-matrix.md`,
    /// `compat-matrix.md`.
    #[arg(long, value_name = "DIR")]
    pub(super) report_dir: Option<PathBuf>,
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
pub(super) enum SutTarget {
    /// The reference implementation, linked in process.
    Reference,
    /// A server speaking driver protocol v1 at this base URL.
    Http(String),
}

impl SutTarget {
    /// How reports name it.
    pub(super) fn label(&self) -> &str {
        match self {
            SutTarget::Http(url) => url,
            SutTarget::Reference => "reference",
        }
    }

    /// The implementation; the reference stands in for a deployment with exactly `runtimes`
    /// (`None`: all it knows).
    pub(super) fn make(
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

/// Where the suite's files come from. Every path defaults to its place in the suite built into
/// the binary (unpacked on first use, see `rewind_conformance::bundled`), or, with `--suite DIR`,
/// in that directory; each flag overrides one path.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Paths {
    /// A suite directory laid out as the repository (`features/` with `rules.yaml`,
    /// `ambiguities.yaml`, ...; `fixtures/`): every path below defaults to its place in it
    /// instead of the suite built into this binary.
    #[arg(long, env = "REWIND_SUITE", value_name = "DIR")]
    suite: Option<PathBuf>,
    /// A `*.feature` file, or a directory of them [default: the suite's `features/`].
    #[arg(long = "features", value_name = "PATH")]
    features_flag: Option<PathBuf>,
    /// The rule catalog [default: the suite's `features/rules.yaml`].
    #[arg(long = "catalog", value_name = "FILE")]
    catalog_flag: Option<PathBuf>,
    /// Rules no black-box scenario can check, with reasons [default: the suite's
    /// `features/untestable.yaml`].
    #[arg(long = "untestable", value_name = "FILE")]
    untestable_flag: Option<PathBuf>,
    /// Rules that wait for a piece of harness work, each naming it (`waits_for`) [default: the
    /// suite's `features/pending.yaml`].
    #[arg(long = "pending", value_name = "FILE")]
    pending_flag: Option<PathBuf>,
    /// The ambiguity register: what the spec leaves open and which readings the steps accept
    /// [default: the suite's `features/ambiguities.yaml`].
    #[arg(long = "ambiguities", value_name = "FILE")]
    ambiguities_flag: Option<PathBuf>,
    /// The leak scan's allow-list: the columns where the spec lets a rewound message's text
    /// stay, each with the rule that allows it [default: the suite's `features/leak-allow.yaml`].
    #[arg(long = "leak-allow", value_name = "FILE")]
    leak_allow_flag: Option<PathBuf>,
    /// Directory of YAML fixtures [default: the suite's `fixtures/`].
    #[arg(long = "fixtures", value_name = "DIR")]
    fixtures_flag: Option<PathBuf>,
    /// The paths in use, once [`Paths::resolve`] has run.
    #[arg(skip)]
    pub(crate) features: PathBuf,
    /// See `features`.
    #[arg(skip)]
    pub(super) catalog: PathBuf,
    /// See `features`.
    #[arg(skip)]
    pub(super) untestable: PathBuf,
    /// See `features`.
    #[arg(skip)]
    pub(super) pending: PathBuf,
    /// See `features`.
    #[arg(skip)]
    pub(super) ambiguities: PathBuf,
    /// See `features`.
    #[arg(skip)]
    pub(super) leak_allow: PathBuf,
    /// See `features`.
    #[arg(skip)]
    pub(crate) fixtures: PathBuf,
}

impl Paths {
    /// Fills in the paths in use: each flag given, else its place in `--suite DIR`, else in the
    /// built-in suite (unpacked now). Scenario paths are then shown relative to the suite's root.
    pub(super) fn resolve(&mut self) -> anyhow::Result<()> {
        let root: PathBuf = match &self.suite {
            Some(dir) => {
                if !dir.join("features").is_dir() {
                    return Err(super::usage(format!(
                        "--suite {}: there is no `features` directory in it (a suite directory \
                         is laid out as the repository: `features/`, `fixtures/`)",
                        dir.display()
                    )));
                }
                // `--suite .` names the paths as the defaults always did: `features/...`.
                if dir.components().all(|c| c == std::path::Component::CurDir) {
                    PathBuf::new()
                } else {
                    dir.clone()
                }
            }
            None if self.all_given() => PathBuf::new(),
            None => rewind_conformance::bundled::unpacked()?.to_path_buf(),
        };
        if !root.as_os_str().is_empty() {
            rewind_conformance::bundled::show_paths_relative_to(&root);
        }
        let pick = |flag: &Option<PathBuf>, default: &str| {
            flag.clone().unwrap_or_else(|| root.join(default))
        };
        self.features = pick(&self.features_flag, "features");
        self.catalog = pick(&self.catalog_flag, "features/rules.yaml");
        self.untestable = pick(&self.untestable_flag, "features/untestable.yaml");
        self.pending = pick(&self.pending_flag, "features/pending.yaml");
        self.ambiguities = pick(&self.ambiguities_flag, "features/ambiguities.yaml");
        self.leak_allow = pick(&self.leak_allow_flag, "features/leak-allow.yaml");
        self.fixtures = pick(&self.fixtures_flag, "fixtures");
        Ok(())
    }

    /// Whether every path was given by its own flag (then no suite is needed).
    fn all_given(&self) -> bool {
        [
            &self.features_flag,
            &self.catalog_flag,
            &self.untestable_flag,
            &self.pending_flag,
            &self.ambiguities_flag,
            &self.leak_allow_flag,
            &self.fixtures_flag,
        ]
        .iter()
        .all(|f| f.is_some())
    }
}

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) paths: Paths,
    /// Use the PostgreSQL server at this URL (each run creates and drops its own databases).
    #[arg(long, env = "REWIND_DATABASE_URL")]
    database_url: Option<String>,
    /// How to get PostgreSQL; `--database-url` implies `url`.
    #[arg(long, value_enum)]
    postgres: Option<PostgresWay>,
    /// The implementation under test: `reference` (linked in process) or the base URL of a
    /// server speaking driver protocol v1 (`http://127.0.0.1:8080`).
    #[arg(long, env = "REWIND_SUT_URL", default_value = "reference", value_parser = parse_sut)]
    pub(super) sut: SutTarget,
    /// How long the harness waits for one call to the implementation's server, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub(super) request_timeout: u64,
    /// How long the implementation may spend on one agent's native restore, in milliseconds
    /// (handed to it at attach; a planted hang fault never answers, so this limit ends it).
    /// Default: 5000 on the mocks, 30000 on real runtimes (a real turn with its side requests,
    /// several scenarios at once on a small machine).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub(super) restore_timeout_ms: Option<u64>,
    /// The implementation's capability profile (YAML: `runtimes`, `surfaces`); default: the
    /// harness's cargo features (all of them unless built with `--no-default-features`).
    #[arg(long, env = "REWIND_PROFILE", value_name = "FILE")]
    pub(super) profile: Option<PathBuf>,
    /// Known failures of the implementation (YAML `expected_failures`, each with a reason): they
    /// do not fail the run, but a listed scenario that passes does.
    #[arg(long, env = "REWIND_EXPECTATIONS", value_name = "FILE")]
    pub(super) expectations: Option<PathBuf>,
    /// Write every scenario's outcome here as JSON (see `compare`).
    #[arg(long, env = "REWIND_JSON", value_name = "FILE")]
    pub(super) json: Option<PathBuf>,
    /// Only scenarios matching this tag expression (e.g. `@rule:init.human-only`).
    #[arg(short = 't', long)]
    pub(super) tags: Option<String>,
    /// Only scenarios whose name matches this regex.
    #[arg(short = 'n', long)]
    pub(super) name: Option<String>,
    /// Scenarios run at once, each on its own database: from 1 to 4 per CPU (at least 8, at
    /// most 32; each scenario holds up to 8 PostgreSQL connections).
    #[arg(short = 'c', long, default_value_t = 8, value_parser = parse_concurrency, allow_hyphen_values = true)]
    pub(super) concurrency: usize,
    /// Write a JUnit XML report here (one test case per scenario, from the final verdicts:
    /// leak-scan failures and protocol violations included).
    #[arg(long, value_name = "FILE")]
    pub(super) junit: Option<PathBuf>,
    /// Write the runtime restore fault matrix (runtime x fault kind) here, as Markdown.
    #[arg(long, value_name = "FILE")]
    pub(super) fault_matrix: Option<PathBuf>,
    /// Write the runtime compatibility matrix (runtime x release x strategy step: what each
    /// runtime answered the implementation) here, as Markdown.
    #[arg(long, value_name = "FILE")]
    pub(super) compat_matrix: Option<PathBuf>,
    /// Write a Markdown summary here (counts, failures first, the rule matrix folded): for a
    /// CI job summary or a pull-request comment.
    #[arg(long, value_name = "FILE")]
    pub(super) markdown: Option<PathBuf>,
    /// Write the rule-by-rule matrix here as a self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    pub(super) html: Option<PathBuf>,
    /// Write every report into this directory: `junit.xml`, `results.json`, `summary.md`,
    /// `rules.html`, `fault-matrix.md`, `compat-matrix.md`.
    #[arg(long, value_name = "DIR")]
    pub(super) report_dir: Option<PathBuf>,
    /// Stop at the first failing scenario.
    #[arg(long)]
    pub(super) fail_fast: bool,
    /// Only scenarios tagged with this catalog rule id (`--rule init.human-only`); repeat it for
    /// several (a scenario of any of them is run). Combines with `--tags` and `--name`.
    #[arg(long = "rule", value_name = "RULE_ID")]
    pub(super) rules: Vec<String>,
    /// Print the scenarios the filters (and `--shard`) select, with their rules, and exit
    /// without starting PostgreSQL or the implementation.
    #[arg(long)]
    pub(super) list: bool,
    /// Run one shard of the selection: `I/N` is the I-th of N (1-based). The N shards of one
    /// selection hold every scenario exactly once, the same on every machine.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    pub(super) shard: Option<crate::suite::shard::ShardSpec>,
    /// A previous run's results file (`--json`, or `results.json` of `--report-dir`): its
    /// scenario durations balance the shards by time instead of by count.
    #[arg(
        long,
        env = "REWIND_DURATIONS",
        value_name = "FILE",
        requires = "shard"
    )]
    pub(super) durations: Option<PathBuf>,
    /// The agent runtimes the implementation is handed: `mock` (the harness's mock runtimes,
    /// with faults and the delivery witness) or `real` (real Codex, Claude Code and OpenCode
    /// releases from the npm registry, cached, run offline against fake model APIs, behind
    /// journaling proxies). Scenarios that need a mock's fault plan or witness are reported not
    /// applicable under `real`, each with the reason.
    #[arg(long, env = "REWIND_RUNTIMES", value_enum, default_value_t = RuntimeKind::Mock)]
    pub(super) runtimes: RuntimeKind,
    /// Under `--runtimes real`, the release to run instead of the pinned one: `RUNTIME=VERSION`
    /// (`claude=2.1.197`), `RUNTIME=latest`, or `latest` for every runtime at the newest
    /// release the npm registry offers today. Repeatable.
    #[arg(long = "runtime-release", value_name = "RUNTIME=VERSION|latest")]
    pub(super) runtime_releases: Vec<String>,
    /// Under `--runtimes real`, where the runtimes run: `local` (this machine), or
    /// `docker:NAME`, a running container used as a second host (its own network and
    /// filesystem, reached through `docker exec` and over its network; `ci/runtime-host.sh
    /// start` makes one holding the installed releases).
    #[arg(
        long = "runtime-host",
        env = "REWIND_RUNTIME_HOST",
        value_name = "local|docker:NAME",
        default_value = "local"
    )]
    pub(super) runtime_host: String,
    /// The browser client under test in the client scenarios (`features/client.feature`, run
    /// when the `browser-client` surface is declared): an ES module file, or an `http(s)://`
    /// URL the page imports; it implements `protocol/CLIENT.md`. Default: the reference client.
    #[arg(
        long = "client-module",
        env = "REWIND_CLIENT_MODULE",
        value_name = "PATH|URL"
    )]
    pub(super) client_module: Option<String>,
    /// Keep every scenario database after the run, for debugging, and print their names and how
    /// to connect (the embedded PostgreSQL or the container is left running).
    #[arg(long)]
    pub(super) keep_databases: bool,
}

/// Which agent runtimes a run hands the implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum RuntimeKind {
    /// The harness's mock runtimes.
    Mock,
    /// Real releases of the runtimes.
    Real,
}

#[derive(Debug, clap::Args)]
pub(super) struct CoverageArgs {
    /// The suite (its fixtures must each be used by a scenario).
    #[command(flatten)]
    pub(super) paths: Paths,
    /// Fail on every hole (exit 1): a rule with no scenario that neither the untestable nor the
    /// pending list accounts for, a section 9 message no step asserts verbatim, a fixture no
    /// scenario uses. Without it they are warnings.
    #[arg(long)]
    pub(super) strict: bool,
}

/// The most scenarios a run may have at once on this machine: 4 per CPU, at least 8 (the
/// default) and at most 32. Each scenario holds up to 8 PostgreSQL connections (the embedded
/// server allows 300) and its own mock runtime processes; beyond the bound scenarios queue for
/// CPU inside the timed implementation calls.
fn max_concurrency() -> usize {
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

/// The directory the register's scenario names are relative to.
pub(super) fn features_dir(features: &std::path::Path) -> &std::path::Path {
    if features.is_file() {
        features.parent().unwrap_or(features)
    } else {
        features
    }
}

pub(super) fn postgres_choice(args: &RunArgs) -> anyhow::Result<PostgresChoice> {
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

/// Checks the real-runtime options before anything starts: every `--runtime-release` names a
/// runtime and a version, and asks for real runtimes (usage errors, exit 2). The profile's
/// `realRuntimes` is read later; the command line alone must say `--runtimes real` here.
pub(super) fn check_runtime_releases(args: &RunArgs) -> anyhow::Result<()> {
    for value in &args.runtime_releases {
        rewind_conformance::real::install::Release::parse_override(value)
            .map_err(|e| usage(e.to_string()))?;
    }
    if !args.runtime_releases.is_empty() && args.runtimes != RuntimeKind::Real {
        return Err(usage(
            "`--runtime-release` chooses the releases of real runtimes: add `--runtimes real`",
        ));
    }
    let host = rewind_conformance::real::host::RuntimeHost::parse(&args.runtime_host)
        .map_err(|e| usage(format!("--runtime-host: {e}")))?;
    if host.is_some() && args.runtimes != RuntimeKind::Real {
        return Err(usage(
            "`--runtime-host` says where real runtimes run: add `--runtimes real`",
        ));
    }
    Ok(())
}

/// The run's filters, parsed.
pub(super) struct Filters {
    pub(super) tags: Option<cucumber::gherkin::tagexpr::TagOperation>,
    pub(super) name: Option<regex::Regex>,
}

/// `--shard I/N`.
fn parse_shard(text: &str) -> Result<crate::suite::shard::ShardSpec, String> {
    text.parse()
}

/// The tag expression the run filters by: `--tags`, and any of the `--rule` ids.
pub(super) fn effective_tags(args: &RunArgs) -> Option<String> {
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

pub(super) fn parse_filters(args: &RunArgs) -> anyhow::Result<Filters> {
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
