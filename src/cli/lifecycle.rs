//! A run from start to exit code: the checks of its inputs (before PostgreSQL starts), the
//! signal handlers, the handshake with the implementation, PostgreSQL's provisioning, the
//! suite on its databases, the reports and the teardown; and the same start-up for `smoke` and
//! `fuzz`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rewind_conformance::catalog::{
    scan_features, Catalog, Coverage, Pending, Register, Untestable,
};
use rewind_conformance::expectations::Expectations;
use rewind_conformance::fixtures::load_fixture_dir;
use rewind_conformance::postgres::{
    stop_all_embedded, PostgresChoice, PostgresServer, TemplateDatabase,
};
use rewind_conformance::profile::CapabilityProfile;
use rewind_conformance::sut::{Limits, SutError, SystemUnderTest};

use crate::suite::applicability::Applicability;
use crate::suite::fault_matrix::FaultMatrix;
use crate::suite::world::RunContext;
use crate::suite::{run_suite, SuiteOptions, SuiteReport};

use super::args::{
    effective_tags, features_dir, parse_filters, postgres_choice, RunArgs, SmokeArgs, SutTarget,
};
use super::report_files::{check_output_paths, report_targets};
use super::selection::{print_list, shard_of_selection};
use super::summary::{print_kept, print_summary};
use super::{usage, HandshakeRefused, Outcome};

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

pub(super) async fn smoke(args: SmokeArgs) -> anyhow::Result<Outcome> {
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

pub(super) async fn run(args: RunArgs) -> anyhow::Result<Outcome> {
    // Usage first (exit 2), then the input files (exit 3), all before PostgreSQL starts.
    let choice = postgres_choice(&args)?;
    super::args::check_runtime_releases(&args)?;
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
    let fixtures = load_fixture_dir(&args.paths.fixtures)?;
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
    let fixture_dir = args.paths.fixtures.display().to_string();
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
    let split = shard_of_selection(&args, &selected)?;
    if args.list {
        print_list(&args, &selected, split.only.as_ref(), &catalog);
        return Ok(Outcome::Passed);
    }
    let profile = load_profile(&args, &catalog)?;
    let expectations = match &args.expectations {
        Some(path) => Expectations::load(path)?,
        None => Expectations::default(),
    };
    let selection = crate::results::Selection {
        suite: suite_digest(&args.paths, &scan.files, &fixtures),
        tags: effective_tags(&args),
        name: args.name.clone(),
        scenarios: split.selected,
        digest: split.digest.clone(),
        expectations: args.expectations.as_ref().map(|path| {
            crate::suite::shard::Digest::default()
                .eat(&std::fs::read(path).unwrap_or_default())
                .hex()
        }),
    };
    let (only, expected, shard) = (split.only, split.expected, split.shard);
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
        .chain(
            report
                .code_conflicts
                .iter()
                .map(|c| format!("refusal codes disagree between scenarios: {c}")),
        )
        .collect();
    let mut data = crate::reports::RunData::new(
        &stats.sut,
        &stats.profile,
        started_at,
        suite_time,
        &report,
        &rule_index,
        (&stats.faults, &stats.compat),
        problems,
    );
    data.selection = Some(selection);
    data.shard = shard;
    // A report that cannot be written fails the run, after the summary is printed.
    let written = crate::reports::write_all(&report_targets, &data);
    print_summary(&args, &choice, provision_time, &report, &stats);
    if args.keep_databases {
        print_kept(&stats.kept, &kept_server);
    }
    written?;
    Ok(if report.counts().violations > 0 {
        Outcome::ProtocolViolation
    } else if report.fails() || !stale.is_empty() || !report.code_conflicts.is_empty() {
        Outcome::Failed
    } else {
        Outcome::Passed
    })
}

/// A digest of the suite's files a run reads: the feature files (by their place in the features
/// directory), the catalog, the untestable, pending, ambiguity and leak lists, the fixtures (by
/// name). Runs of the same suite from different places or machines get the same digest.
fn suite_digest(
    paths: &super::args::Paths,
    feature_files: &[std::path::PathBuf],
    fixtures: &std::collections::BTreeMap<String, rewind_conformance::fixtures::Fixture>,
) -> String {
    let mut digest = crate::suite::shard::Digest::default();
    let read = |path: &std::path::Path| std::fs::read(path).unwrap_or_default();
    let root = features_dir(&paths.features);
    let mut files: Vec<(String, &std::path::PathBuf)> = feature_files
        .iter()
        .map(|f| (f.strip_prefix(root).unwrap_or(f).display().to_string(), f))
        .collect();
    files.sort();
    for (name, path) in files {
        digest.eat(name.as_bytes()).eat(&read(path));
    }
    for path in [
        &paths.catalog,
        &paths.untestable,
        &paths.pending,
        &paths.ambiguities,
        &paths.leak_allow,
    ] {
        digest.eat(&read(path));
    }
    for (name, fixture) in fixtures {
        digest.eat(name.as_bytes()).eat(&read(&fixture.path));
    }
    digest.hex()
}

/// What a suite run gathered besides its report: for the summary and the report files.
pub(crate) struct RunStats {
    pub(super) isolation: Vec<crate::suite::isolation::IsolationTimes>,
    /// How long the run waited for the databases of its first scenarios before starting them
    /// (`None`: the fixtures were not seeded ahead, as on real runtimes).
    pub(super) primed: Option<Duration>,
    pub(super) faults: FaultMatrix,
    /// The storm and database fault matrices that scenarios contributed to.
    pub(super) matrices: Vec<(
        crate::suite::matrix::MatrixKind,
        crate::suite::matrix::OutcomeMatrix,
    )>,
    pub(super) compat: crate::suite::compat::CompatMatrix,
    pub(super) sut: String,
    pub(super) profile: String,
    parsed: Vec<(String, String)>,
    /// The databases `--keep-databases` kept, with their URLs.
    kept: Vec<(String, String)>,
    /// How long each leak scan took.
    pub(super) scans: Vec<Duration>,
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
    let exe = std::env::current_exe().context("finding this program (the mock runtimes)")?;
    let mut programs = rewind_conformance::mocks::MockPrograms::link(&exe)?;
    if args.runtimes == super::args::RuntimeKind::Real || profile.real_runtimes {
        let host = rewind_conformance::real::host::RuntimeHost::connect(&args.runtime_host)
            .await
            .context("reaching the runtime host")?;
        let real = real_programs(&args.runtime_releases)
            .await?
            .on_host(host)
            .await
            .context("checking the runtime host")?;
        eprintln!("real runtimes: {}", real.describe());
        programs = programs.with_real(real);
    }
    let unsupported = catalog
        .get("err.agent-unsupported")
        .and_then(|rule| rule.message.clone())
        .context("the catalog has no message for rule `err.agent-unsupported`")?;
    let fixtures = Arc::new(fixtures);
    let mut applicability = Applicability::new(profile, Arc::clone(&fixtures), unsupported);
    if let Some(real) = programs.real() {
        applicability = applicability.with_real_runtimes(
            [
                ("codex", real.codex.0.version.to_string()),
                ("claude", real.claude.0.version.to_string()),
                ("opencode", real.opencode.0.version.to_string()),
            ]
            .into_iter()
            .collect(),
        );
    }
    let applicability = Arc::new(applicability);
    #[cfg(not(feature = "browser"))]
    if args.client_module.is_some() || applicability.declares("browser-client") {
        anyhow::bail!(
            "{} the browser client scenarios, which this harness was built without: build it \
             with `--features browser` (they need Chromium and chromedriver: `apt-get install -y \
             chromium chromium-driver` on Debian)",
            if args.client_module.is_some() {
                "`--client-module` names the client of"
            } else {
                "the profile declares the `browser-client` surface, which asks for"
            }
        );
    }
    let context_programs_real = programs.real().is_some();
    let programs = Arc::new(programs);
    // Real runtimes choose the ids the database must hold: their scenarios seed their own.
    let isolation = if context_programs_real {
        template.start_prefetch(args.concurrency.max(1)).await;
        None
    } else {
        let plan = fixture_plan(args, &applicability, only.as_ref())?;
        Some(crate::suite::isolation::Isolation::new(
            template.clone(),
            Arc::clone(&programs),
            Arc::clone(&fixtures),
            plan,
            AHEAD_PER_SLOT * args.concurrency.max(1),
        ))
    };
    let context = Arc::new(RunContext {
        applicability: Arc::clone(&applicability),
        programs,
        template: template.clone(),
        sut: Arc::clone(&sut),
        fixtures,
        catalog,
        keep_databases: args.keep_databases,
        isolation,
        isolation_times: Mutex::new(Vec::new()),
        fault_results: Mutex::new(Vec::new()),
        matrix_results: Mutex::new(Vec::new()),
        compat: Mutex::new(Default::default()),
        limits: Limits {
            restore_timeout_ms: args.restore_timeout_ms.unwrap_or(if context_programs_real {
                REAL_RESTORE_TIMEOUT_MS
            } else {
                5000
            }),
            request_timeout_ms: args.request_timeout * 1000,
        },
        violations: Mutex::new(Default::default()),
        register,
        readings: Mutex::new(Default::default()),
        codes: Mutex::new(Default::default()),
        leak_allow,
        leaks: Mutex::new(Default::default()),
        scan_times: Mutex::new(Vec::new()),
        #[cfg(feature = "browser")]
        browser: browser_setup(args, &applicability).await?,
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
    // The scenarios that start together find their databases made.
    let primed = match &context.isolation {
        Some(isolation) => Some(isolation.prime(args.concurrency.max(1)).await),
        None => None,
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
    if let Some(isolation) = &context.isolation {
        isolation.stop().await;
    }
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
    // What the scenarios gathered (a poisoned lock gives nothing rather than a panic).
    fn gathered<T: Clone>(lock: &std::sync::Mutex<Vec<T>>) -> Vec<T> {
        lock.lock().map(|t| t.clone()).unwrap_or_default()
    }
    let isolation = gathered(&context.isolation_times);
    let scans = gathered(&context.scan_times);
    let faults = gathered(&context.fault_results);
    let cells = gathered(&context.matrix_results);
    Ok((
        report?,
        RunStats {
            isolation,
            primed,
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

/// The fixture of every scenario the run will start, in order: those the filters select, the
/// shard holds and the profile lets run.
fn fixture_plan(
    args: &RunArgs,
    applicability: &Applicability,
    only: Option<&std::collections::HashSet<crate::suite::shard::Key>>,
) -> anyhow::Result<Vec<String>> {
    let scan = rewind_conformance::catalog::scan_features(&args.paths.features)
        .with_context(|| format!("reading `{}`", args.paths.features.display()))?;
    let tags = effective_tags(args)
        .map(|t| t.parse::<cucumber::gherkin::tagexpr::TagOperation>())
        .transpose()
        .map_err(|e| anyhow::anyhow!("bad tag expression: {e}"))?;
    let name = args.name.as_deref().map(regex::Regex::new).transpose()?;
    let selected = crate::suite::selection::select_running(
        &scan.files,
        tags.as_ref(),
        name.as_ref(),
        &|steps, tags| applicability.runs(steps, tags),
    )?;
    Ok(crate::suite::selection::fixture_plan(&selected, only))
}

/// How many scenario databases are made ahead per scenario the run may have under way.
const AHEAD_PER_SLOT: usize = 2;

/// The restore limit handed to the implementation on real runtimes, unless one is given.
const REAL_RESTORE_TIMEOUT_MS: u64 = 30_000;

/// The real releases of a `--runtimes real` run: the pinned ones, each replaced by a
/// `--runtime-release` that names its runtime; installed (once, into the cache) before the first
/// scenario.
async fn real_programs(
    overrides: &[String],
) -> anyhow::Result<rewind_conformance::real::scenario::RealPrograms> {
    let releases = rewind_conformance::real::install::Release::overrides(overrides)?;
    tokio::task::spawn_blocking(move || {
        rewind_conformance::real::scenario::RealPrograms::resolve(&releases)
    })
    .await
    .context("installing the real runtimes")?
    .context("installing the real runtimes")
}

/// The browser tier's setup when the profile declares the `browser-client` surface: Chromium and
/// chromedriver are found (or the run stops, saying how to install them), and screenshots go
/// under `<report-dir>/client`.
#[cfg(feature = "browser")]
async fn browser_setup(
    args: &super::args::RunArgs,
    applicability: &Applicability,
) -> anyhow::Result<Option<Arc<rewind_conformance::browser::ClientSetup>>> {
    if !applicability.declares("browser-client") {
        if args.client_module.is_some() {
            anyhow::bail!(
                "`--client-module` names the browser client of the client scenarios, but the \
                 profile does not declare the `browser-client` surface"
            );
        }
        return Ok(None);
    }
    let artifacts = args.report_dir.as_ref().map(|dir| dir.join("client"));
    let setup =
        rewind_conformance::browser::ClientSetup::new(args.client_module.as_deref(), artifacts)
            .context("setting up the browser client scenarios")?;
    let (chromium, chromedriver) = setup.programs.versions().await?;
    eprintln!(
        "browser client: {}, in {chromium} driven by {chromedriver}",
        setup.module_origin
    );
    Ok(Some(Arc::new(setup)))
}
