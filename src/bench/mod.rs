//! Rewind benchmarks: the reference implementation's rewind against a set-based lower bound
//! ([`bound::BOUND_SQL`]), on generated conversations ([`data`]).
//!
//! For each suffix length N, one scope of `99 + N` messages is rewound from seq 100 on, alone
//! in its database ("single scope") and, with `workspace`, inside a workspace of other scopes of
//! similar shape. Every rewind (and every bound) runs in a transaction that is rolled back, and
//! the touched tables are vacuumed before the next one, so each iteration starts from the same
//! rows; the commit is not measured. Used by `cargo bench` (`benches/rewind.rs`) and by
//! `rewind-conformance bench`.

pub mod bound;
pub mod data;

use std::time::{Duration, Instant};

use rewind_reference::{apply, lifecycle, plan, recovery, Variant};
use sqlx::{Connection, PgConnection};

use crate::postgres::{PostgresChoice, PostgresServer, TemplateDatabase};

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Suffix lengths.
    pub sizes: Vec<i64>,
    /// Timed iterations per measurement (after untimed warm-up runs, see [`WARM_UP_RUNS`]); the
    /// median is reported.
    pub iterations: u32,
    /// Also measure inside a workspace of `workspace_scopes` other scopes.
    pub workspace: bool,
    /// Other scopes in the workspace case.
    pub workspace_scopes: i64,
    /// Messages per other scope.
    pub workspace_scope_len: i64,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            sizes: vec![100, 1_000, 10_000, 100_000],
            iterations: 3,
            workspace: true,
            workspace_scopes: 1_000,
            workspace_scope_len: 300,
        }
    }
}

/// Medians of one case.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timing {
    /// Reference: plan, guards, recovery validation and the `preparing` row.
    pub plan: Duration,
    /// Reference: the apply transaction's statements.
    pub apply: Duration,
    /// Reference: plan + apply (median of the sums).
    pub total: Duration,
    /// The lower bound.
    pub bound: Duration,
}

impl Timing {
    /// Reference total / bound.
    pub fn ratio(&self) -> f64 {
        per(self.total, self.bound)
    }

    /// Reference apply alone / bound: the same row changes, without the guards' reads.
    pub fn apply_ratio(&self) -> f64 {
        per(self.apply, self.bound)
    }
}

fn per(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

/// One suffix length.
#[derive(Debug, Clone)]
pub struct Row {
    /// Suffix length.
    pub n: i64,
    /// The scope alone in its database.
    pub single: Timing,
    /// The same scope inside the workspace of other scopes.
    pub workspace: Option<Timing>,
}

/// A whole benchmark run.
#[derive(Debug, Clone)]
pub struct Report {
    /// Where it ran (Markdown lines).
    pub machine: Vec<String>,
    /// What ran.
    pub options: BenchOptions,
    /// One row per N.
    pub rows: Vec<Row>,
    /// Data generation, all databases.
    pub setup: Duration,
    /// The whole run.
    pub wall: Duration,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The tables a rewind writes, vacuumed between iterations.
const TOUCHED: &str = "scope_messages, scope_activity_events, scope_fanout_outbox, \
    scope_share_cards, scope_message_reactions, scope_message_pins, scope_message_top_notices, \
    scope_message_search_docs, scope_message_sources, attachments, im_stream_events, \
    im_conversation_index, message_recovery_points, scopes, scope_memberships, scope_sync_dirty, \
    member_scope_sync_dirty, rewind_operations";

/// The id of the scope of suffix length `n` and its target message.
pub fn target_of(n: i64) -> (String, String) {
    let scope = format!("bench-n{n}-0");
    let target = format!("{scope}-m{}", data::PREFIX + 1);
    (scope, target)
}

/// Runs the benchmark on a server obtained the way `choice` says; `progress` hears each step.
pub async fn run(
    choice: &PostgresChoice,
    options: &BenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Report, BoxError> {
    let started = Instant::now();
    let server = PostgresServer::provision(choice).await?;
    let result = run_on(server.admin_url(), options, progress, started).await;
    server.shutdown().await;
    result
}

async fn run_on(
    admin_url: &str,
    options: &BenchOptions,
    progress: &mut dyn FnMut(&str),
    started: Instant,
) -> Result<Report, BoxError> {
    let template = TemplateDatabase::create(admin_url, &rewind_reference::MIGRATOR).await?;
    let result = measure_all(&template, options, progress, started).await;
    template.drop_all().await?;
    result
}

async fn measure_all(
    template: &TemplateDatabase,
    options: &BenchOptions,
    progress: &mut dyn FnMut(&str),
    started: Instant,
) -> Result<Report, BoxError> {
    let mut setup = Duration::ZERO;
    let mut rows = Vec::new();
    let mut machine = Vec::new();
    for &n in &options.sizes {
        let db = template.clone_of(template.template_name()).await?;
        let mut conn = PgConnection::connect(&db.url).await?;
        if machine.is_empty() {
            machine = machine_lines(&mut conn).await?;
        }
        let generated = Instant::now();
        data::base(&mut conn).await?;
        data::scopes(&mut conn, &format!("bench-n{n}-"), 1, data::PREFIX + n, 0).await?;
        sqlx::raw_sql("VACUUM ANALYZE").execute(&mut conn).await?;
        setup += generated.elapsed();
        progress(&format!("single scope, N = {n}: measuring"));
        let single = measure(&mut conn, n, options.iterations).await?;
        progress(&format!(
            "single scope, N = {n}: reference {} ms, bound {} ms",
            ms(single.total),
            ms(single.bound)
        ));
        conn.close().await?;
        template.drop_database(&db.name).await?;
        rows.push(Row {
            n,
            single,
            workspace: None,
        });
    }
    if options.workspace {
        let db = template.clone_of(template.template_name()).await?;
        let mut conn = PgConnection::connect(&db.url).await?;
        let generated = Instant::now();
        progress(&format!(
            "workspace: generating {} scopes of {} messages",
            options.workspace_scopes, options.workspace_scope_len
        ));
        data::base(&mut conn).await?;
        // In slices, so that each transaction stays of moderate size.
        let slice = 100.min(options.workspace_scopes.max(1));
        let mut done = 0;
        while done < options.workspace_scopes {
            let count = slice.min(options.workspace_scopes - done);
            data::scopes(
                &mut conn,
                &format!("other-{done}-"),
                count,
                options.workspace_scope_len,
                done * options.workspace_scope_len,
            )
            .await?;
            done += count;
        }
        // The rewound scopes come last in the workspace's global order.
        let mut offset = options.workspace_scopes * options.workspace_scope_len;
        for &n in &options.sizes {
            data::scopes(
                &mut conn,
                &format!("bench-n{n}-"),
                1,
                data::PREFIX + n,
                offset,
            )
            .await?;
            offset += data::PREFIX + n;
        }
        sqlx::raw_sql("VACUUM ANALYZE").execute(&mut conn).await?;
        setup += generated.elapsed();
        progress(&format!(
            "workspace generated in {:.1} s",
            generated.elapsed().as_secs_f64()
        ));
        for row in &mut rows {
            let timing = measure(&mut conn, row.n, options.iterations).await?;
            progress(&format!(
                "workspace, N = {}: reference {} ms, bound {} ms",
                row.n,
                ms(timing.total),
                ms(timing.bound)
            ));
            row.workspace = Some(timing);
        }
        conn.close().await?;
        template.drop_database(&db.name).await?;
    }
    Ok(Report {
        machine,
        options: options.clone(),
        rows,
        setup,
        wall: started.elapsed(),
    })
}

/// Untimed warm-up runs (reference and bound) before the timed ones: until the connection's
/// statements reach the plans a long-lived connection uses, or the time runs out.
///
/// PostgreSQL plans a prepared statement's first five executions for their parameters and only
/// then settles on a plan it keeps (often a generic one, planned once), so a connection that
/// has served five rewinds plans less per rewind than a new one: at N = 100, where planning is
/// a large part of the time, the first executions would measure a connection's start rather
/// than a rewind. Above [`WARM_UP_TIME`], where a rewind is long and planning negligible, one
/// warm-up run is enough.
const WARM_UP_RUNS: u32 = 5;
/// See [`WARM_UP_RUNS`].
const WARM_UP_TIME: Duration = Duration::from_secs(2);

/// Warm-up runs ([`WARM_UP_RUNS`]), then `iterations` timed runs of the reference and of the
/// bound, alternating.
async fn measure(conn: &mut PgConnection, n: i64, iterations: u32) -> Result<Timing, BoxError> {
    let (scope, target) = target_of(n);
    let warming = Instant::now();
    for _ in 0..WARM_UP_RUNS {
        alternate(conn, &scope, &target, n).await?;
        if warming.elapsed() >= WARM_UP_TIME {
            break;
        }
    }
    let mut plans = Vec::new();
    let mut applies = Vec::new();
    let mut totals = Vec::new();
    let mut bounds = Vec::new();
    for _ in 0..iterations {
        let ((p, a), b) = alternate(conn, &scope, &target, n).await?;
        plans.push(p);
        applies.push(a);
        totals.push(p + a);
        bounds.push(b);
    }
    Ok(Timing {
        plan: median(plans),
        apply: median(applies),
        total: median(totals),
        bound: median(bounds),
    })
}

/// One rolled-back rewind by the reference, then one by the bound, each followed by a vacuum:
/// ((plan, apply), bound).
async fn alternate(
    conn: &mut PgConnection,
    scope: &str,
    target: &str,
    n: i64,
) -> Result<((Duration, Duration), Duration), BoxError> {
    let reference = reference_once(conn, scope, target, n, false).await?;
    vacuum(conn).await?;
    let bound = bound_once(conn, scope, target, n, false).await?;
    vacuum(conn).await?;
    Ok((reference, bound))
}

async fn vacuum(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("VACUUM {TOUCHED}")))
        .execute(conn)
        .await?;
    Ok(())
}

/// The reference's rewind of `scope` from `target` (recommended variant) in one transaction,
/// rolled back unless `commit`: (plan time, apply time). The plan is what the rewinder does
/// before restoring runtimes (suffix, guards, related agents, recovery validation, the
/// `preparing` row); the runtime restore itself is not part of it.
pub async fn reference_once(
    conn: &mut PgConnection,
    scope: &str,
    target: &str,
    expected: i64,
    commit: bool,
) -> Result<(Duration, Duration), BoxError> {
    let mut tx = conn.begin().await?;
    let started = Instant::now();
    let plan = plan::prepare(
        &mut tx,
        data::INITIATOR,
        scope,
        target,
        Variant::Recommended,
    )
    .await?;
    recovery::validate_related_agents(&mut tx, &plan.boundary, &plan.related_agent_ids, None)
        .await?;
    let operation = lifecycle::begin(&mut tx, &plan).await?;
    let planned = started.elapsed();
    let started = Instant::now();
    let applied = apply::apply_in(&mut tx, &plan, &operation, Variant::Recommended).await?;
    let applied_in = started.elapsed();
    if applied.rewound_message_ids.len() as i64 != expected {
        return Err(format!(
            "the reference rewound {} messages, not {expected}",
            applied.rewound_message_ids.len()
        )
        .into());
    }
    if commit {
        tx.commit().await?;
    } else {
        tx.rollback().await?;
    }
    Ok((planned, applied_in))
}

/// The lower bound on the same rewind, rolled back unless `commit`.
pub async fn bound_once(
    conn: &mut PgConnection,
    scope: &str,
    target: &str,
    expected: i64,
    commit: bool,
) -> Result<Duration, BoxError> {
    let mut tx = conn.begin().await?;
    let started = Instant::now();
    let count: i64 = sqlx::query_scalar(bound::BOUND_SQL)
        .bind(scope)
        .bind(target)
        .bind(data::INITIATOR)
        .bind(uuid::Uuid::now_v7().to_string())
        .fetch_one(&mut *tx)
        .await?;
    let took = started.elapsed();
    if count != expected {
        return Err(format!("the bound rewound {count} messages, not {expected}").into());
    }
    if commit {
        tx.commit().await?;
    } else {
        tx.rollback().await?;
    }
    Ok(took)
}

/// Every table a rewind writes, as sorted JSON lines, without generated ids, timestamps, the
/// tombstone's `rewoundAt` and the operation's id and plan: two databases on which the same
/// rewind was made by different code print the same text.
pub async fn dump(conn: &mut PgConnection) -> Result<String, sqlx::Error> {
    let mut out = String::new();
    let tables: [(&str, &str); 18] = [
        (
            "scope_messages",
            "to_jsonb(t) #- '{metadata,messageRecall,rewoundAt}'",
        ),
        ("scope_activity_events", "to_jsonb(t) - 'id'"),
        ("scope_fanout_outbox", "to_jsonb(t) - 'id'"),
        ("scope_share_cards", "to_jsonb(t)"),
        ("scope_message_reactions", "to_jsonb(t)"),
        ("scope_message_pins", "to_jsonb(t)"),
        ("scope_message_top_notices", "to_jsonb(t)"),
        ("scope_message_search_docs", "to_jsonb(t) - 'body_tsv'"),
        ("scope_message_sources", "to_jsonb(t)"),
        ("attachments", "to_jsonb(t)"),
        ("im_stream_events", "to_jsonb(t) - 'id'"),
        ("im_conversation_index", "to_jsonb(t) - 'updated_at'"),
        ("message_recovery_points", "to_jsonb(t)"),
        ("scopes", "to_jsonb(t)"),
        ("scope_memberships", "to_jsonb(t) - 'id'"),
        ("scope_sync_dirty", "to_jsonb(t) - 'updated_at'"),
        ("member_scope_sync_dirty", "to_jsonb(t) - 'updated_at'"),
        (
            "rewind_operations",
            "to_jsonb(t) - '{id,plan,created_at,updated_at,completed_at}'::text[]",
        ),
    ];
    for (table, row) in tables {
        let lines: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT string_agg(r, E'\\n' ORDER BY r) FROM \
             (SELECT ({row})::text AS r FROM {table} t) x"
        )))
        .fetch_one(&mut *conn)
        .await?;
        out.push_str(&format!("## {table}\n{}\n", lines.unwrap_or_default()));
    }
    Ok(out)
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values.get(values.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms >= 100.0 {
        format!("{ms:.0}")
    } else {
        format!("{ms:.1}")
    }
}

async fn machine_lines(conn: &mut PgConnection) -> Result<Vec<String>, sqlx::Error> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| format!("{:.1} GiB", kb as f64 / 1024.0 / 1024.0))
        .unwrap_or_else(|| "unknown".to_owned());
    let version: String = sqlx::query_scalar("SHOW server_version")
        .fetch_one(conn)
        .await?;
    Ok(vec![
        format!("- CPU: {cpu}, {cores} cores available"),
        format!("- Memory: {memory}"),
        format!("- PostgreSQL: {version}"),
        format!(
            "- Date: {}",
            chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
        ),
    ])
}

/// The report as Markdown: the machine, then one table row per N.
pub fn markdown(report: &Report) -> String {
    let o = &report.options;
    let mut out = String::from("### Rewind benchmark\n\n");
    for line in &report.machine {
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(&format!(
        "- Iterations: {} timed (median) after {} warm-up runs, or as many as {} s allow (at least \
         one); data generation {:.1} s, whole run {:.1} s\n",
        o.iterations,
        WARM_UP_RUNS,
        WARM_UP_TIME.as_secs(),
        report.setup.as_secs_f64(),
        report.wall.as_secs_f64()
    ));
    if o.workspace {
        out.push_str(&format!(
            "- Workspace case: the same scope among {} other scopes of {} messages each\n",
            o.workspace_scopes, o.workspace_scope_len
        ));
    }
    out.push_str("\nTimes in ms.\n\n");
    if o.workspace {
        out.push_str(
            "| N | plan | apply | reference | bound | ref/bound | apply/bound | workspace: reference | \
             workspace: bound | workspace: ref/bound | workspace/single | bound: workspace/single |\n\
             |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
    } else {
        out.push_str(
            "| N | plan | apply | reference | bound | ref/bound | apply/bound |\n\
             |---:|---:|---:|---:|---:|---:|---:|\n",
        );
    }
    for row in &report.rows {
        let s = &row.single;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.2} | {:.2} |",
            row.n,
            ms(s.plan),
            ms(s.apply),
            ms(s.total),
            ms(s.bound),
            s.ratio(),
            s.apply_ratio()
        ));
        if let Some(w) = &row.workspace {
            out.push_str(&format!(
                " {} | {} | {:.2} | {:.2} | {:.2} |",
                ms(w.total),
                ms(w.bound),
                w.ratio(),
                per(w.total, s.total),
                per(w.bound, s.bound)
            ));
        }
        out.push('\n');
    }
    let at = |n: i64| report.rows.iter().find(|r| r.n == n).map(|r| r.single);
    if let (Some(big), Some(small)) = (at(100_000), at(10_000)) {
        out.push_str(&format!(
            "\nLinearity: reference time(100000) / time(10000) = {:.1} (bound: {:.1})\n",
            per(big.total, small.total),
            per(big.bound, small.bound)
        ));
    }
    out
}
