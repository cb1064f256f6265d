//! [`RewindWorld`]: the state of one scenario, and [`RunContext`], what all scenarios share.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use rewind_conformance::catalog::Catalog;
use rewind_conformance::fixtures::Fixture;
use rewind_conformance::inspect::DbSnapshot;
use rewind_conformance::mocks::{MockPrograms, MockRuntime, MockRuntimes};
use rewind_conformance::postgres::{ScenarioDatabase, TemplateDatabase};
use rewind_conformance::sut::{
    AttachRequest, ConversationApi, DatabaseTarget, Limits, RealtimeEvent, RewindRequest,
    RewindResponse, RuntimeEndpoints, SentMessage, SutError, SystemUnderTest,
};
use sqlx::PgPool;

pub use crate::suite::fault_matrix::FaultCell;
use crate::suite::readings::{CodeTable, Readings, RunCodes};
pub use crate::suite::violations::Violations;
use rewind_conformance::catalog::{Policy, Register};

/// What every scenario of a run shares: the template, the implementation, fixtures, catalog.
pub struct RunContext {
    /// The mock runtime programs.
    pub programs: Arc<MockPrograms>,
    /// The migrated template to clone per scenario.
    pub template: TemplateDatabase,
    /// The implementation under test.
    pub sut: Arc<dyn SystemUnderTest>,
    /// Fixtures by name.
    pub fixtures: Arc<BTreeMap<String, Fixture>>,
    /// The rule catalog (to map error messages to codes).
    pub catalog: Catalog,
    /// Keep scenario databases after the run (for debugging).
    pub keep_databases: bool,
    /// The fixture templates and the scenario databases made ahead (none on real runtimes,
    /// whose scenarios seed their own).
    pub isolation: Option<crate::suite::isolation::Isolation>,
    /// Per scenario: what its isolation cost.
    pub isolation_times: Mutex<Vec<crate::suite::isolation::IsolationTimes>>,
    /// Per fault scenario: the runtime and fault it planted, and whether it passed.
    pub fault_results: Mutex<Vec<(FaultCell, bool)>>,
    /// Per scenario that contributes to another matrix (storms, database faults): its cells,
    /// and whether it passed.
    pub matrix_results: Mutex<Vec<(crate::suite::matrix::Cell, bool)>>,
    /// What every runtime release answered the implementation's calls, over the run.
    pub compat: Mutex<crate::suite::compat::CompatMatrix>,
    /// The time budgets handed to the implementation at every attach.
    pub limits: Limits,
    /// What the declared capability profile does to scenarios.
    pub applicability: Arc<crate::suite::applicability::Applicability>,
    /// Per scenario (feature path, line): the protocol violations it met.
    pub violations: Mutex<BTreeMap<(String, usize), Vec<String>>>,
    /// The ambiguity register: the readings steps may accept.
    pub register: Register,
    /// Per scenario (feature path, line): the readings it took.
    pub readings: Mutex<Readings>,
    /// The refusal codes the scenarios accepted, compared across scenarios once the run ends.
    pub codes: Mutex<RunCodes>,
    /// Where the spec lets a rewound message's text stay (the leak scan's allow-list).
    pub leak_allow: rewind_conformance::leak_scan::AllowList,
    /// Per scenario (feature path, line): what the leak scan found after its rewind.
    pub leaks: Mutex<BTreeMap<(String, usize), Vec<String>>>,
    /// How long each leak scan took.
    pub scan_times: Mutex<Vec<Duration>>,
    /// The browser client tier's setup, when the `browser-client` surface is declared.
    #[cfg(feature = "browser")]
    pub browser: Option<Arc<rewind_conformance::browser::ClientSetup>>,
}

impl RunContext {
    /// What the implementation is told when it is attached to `db` and these runtimes. A
    /// scenario that holds a restore on purpose (`holds_restore`) gives each restore at least
    /// [`HELD_RESTORE_LIMIT_MS`], so that an implementation keeping to its limit outlasts the hold.
    pub fn attach_request(
        &self,
        db: &ScenarioDatabase,
        runtimes: RuntimeEndpoints,
        holds_restore: bool,
    ) -> AttachRequest {
        let mut limits = self.limits;
        if holds_restore {
            limits.restore_timeout_ms = limits.restore_timeout_ms.max(HELD_RESTORE_LIMIT_MS);
        }
        AttachRequest {
            database: DatabaseTarget {
                url: db.url.clone(),
                name: db.name.clone(),
            },
            runtimes,
            limits,
        }
    }
}

/// The restore limit of a scenario that holds a restore while other rewinds race: longer than
/// the longest hold the harness waits out (10 s, and a quarter second more per racing rewind,
/// 18 s for 32).
pub const HELD_RESTORE_LIMIT_MS: u64 = 25_000;

static CONTEXT: RwLock<Option<Arc<RunContext>>> = RwLock::new(None);

/// Installs the context of the run about to start (runs of one process follow each other: the
/// fuzzer runs its generated cases, then each shrunk case, each on a template of its own).
pub fn install(context: Arc<RunContext>) {
    *CONTEXT.write().unwrap_or_else(|p| p.into_inner()) = Some(context);
}

/// The run's context.
pub fn context() -> anyhow::Result<Arc<RunContext>> {
    CONTEXT
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .ok_or_else(|| anyhow!("the run context is not installed"))
}

/// One scenario's database, harness pool and implementation handle.
pub struct Attached {
    /// The scenario's database.
    pub db: ScenarioDatabase,
    /// The steps' connection, for seeding and inspection
    /// ([`STEP_POOL_SIZE`](crate::suite::isolation::STEP_POOL_SIZE)).
    pub pool: PgPool,
    /// Connections held while the implementation works
    /// ([`HOLD_POOL_SIZE`](crate::suite::isolation::HOLD_POOL_SIZE)).
    pub hold: PgPool,
    /// The implementation, attached to `db`.
    pub api: Arc<dyn ConversationApi>,
    /// The protocol violations its calls met.
    pub violations: Violations,
}

/// The state of one scenario.
#[derive(Default, cucumber::World)]
pub struct RewindWorld {
    /// Set by the first `Given the conversation ...` step.
    pub attached: Option<Attached>,
    /// The scenario's page in the browser, if it opened one.
    #[cfg(feature = "browser")]
    pub browser: crate::suite::steps::client::BrowserState,
    /// The scenario's mock runtimes (set with `attached`).
    pub mocks: Option<MockRuntimes>,
    /// The last message-sync page read.
    pub sync_page: Option<rewind_conformance::sut::SyncPage>,
    /// The protocol violations the scenario's calls met (attach included).
    pub violations: Violations,
    /// A database whose implementation could not be attached, to drop at teardown.
    pub pending_db: Option<(ScenarioDatabase, PgPool)>,
    /// The fault matrix cell this scenario exercises, if it planted a restore fault.
    pub fault_cell: Option<FaultCell>,
    /// The cells of the other matrices (storms, database faults) this scenario exercises.
    pub cells: Vec<crate::suite::matrix::Cell>,
    /// The fixture the scenario started from.
    pub fixture: Option<String>,
    /// The database as it was just before the last `When`.
    pub before: Option<DbSnapshot>,
    /// The last rewind request and its answer.
    pub last: Option<(RewindRequest, RewindResponse)>,
    /// The statement-log position just before the last `When`.
    pub log_mark: Option<i64>,
    /// Every realtime event the implementation published during the scenario.
    pub events: Vec<RealtimeEvent>,
    /// How many of `events` had been collected when the last rewind had answered: the later
    /// ones were published after it (the leak scan reads them).
    pub events_mark: Option<usize>,
    /// Every read the scenario made through a read surface: what it asked, what came back.
    pub reads: Vec<(
        rewind_conformance::sut::ReadRequest,
        rewind_conformance::sut::ReadAnswer,
    )>,
    /// How many of `reads` had been made when the last rewind had answered: the later ones
    /// happened after it (the leak scan reads them).
    pub reads_mark: Option<usize>,
    /// The last message sent in live mode.
    pub sent: Option<SentMessage>,
    /// A transaction the harness holds open (row locks) to stage a race.
    pub held: Option<sqlx::Transaction<'static, sqlx::Postgres>>,
    /// The scenario's name and tags (without `@`), set before its first step.
    pub scenario: String,
    /// See `scenario`.
    pub tags: Vec<String>,
    /// The readings of the ambiguity register this scenario's steps accepted.
    pub readings: BTreeMap<String, String>,
    /// The refusal codes this scenario's implementation answered, checked against each other.
    pub codes: Mutex<CodeTable>,
    /// Whether the scenario holds a restore on purpose (`... runtime holds the restore of ...`):
    /// it then attaches with [`HELD_RESTORE_LIMIT_MS`].
    pub holds_restore: bool,
    /// On real runtimes, after `agent ... answers its next delivery only after ... ms`: how many
    /// requests the slowed model had received by then (a request beyond them is the delivery
    /// the runtime is working on).
    pub slowed_model_baseline: Option<usize>,
    /// Names given to messages that appeared during the scenario (a live message, a rewind
    /// notice), so later steps can name them like fixture messages.
    pub aliases: BTreeMap<String, String>,
    /// Every delivery request of the scenario, in order.
    pub deliveries: Vec<DeliveryRecord>,
    /// Runtime states noted by agent: the session and its effective ids.
    pub noted: BTreeMap<String, (String, Vec<String>)>,
    /// Runtime processes the harness keeps running for the scenario (e.g. a codex app-server
    /// holding an agent's thread); killed when the scenario ends.
    pub runtime_holders: Vec<RuntimeHolder>,
    /// Deliveries started in the background (a send first, for some), not yet awaited.
    pub started_deliveries: Vec<StartedDelivery>,
    /// A rewind started in the background, not yet awaited.
    pub started: Option<(
        RewindRequest,
        tokio::task::JoinHandle<Result<RewindResponse, SutError>>,
    )>,
    /// Rewinds racing in the background (a storm, or a rewind that waits behind another), in
    /// the order they were started.
    pub racing: Vec<Racing>,
    /// The bad requests a scenario sent: the request, how many variants, what went wrong.
    pub bad_input: Option<(String, usize, Vec<String>)>,
    /// The rewind a database fault struck, and what it answered.
    pub db_fault: Option<crate::suite::steps::DatabaseFault>,
    /// Every rewind answer of the scenario, in the order the answers were taken.
    pub answers: Vec<(RewindRequest, RewindResponse)>,
}

/// A rewind running in the background alongside others.
pub struct Racing {
    /// What was asked.
    pub request: RewindRequest,
    /// The call, until its answer is taken.
    pub task: Option<tokio::task::JoinHandle<Result<RewindResponse, SutError>>>,
    /// The answer, once taken (an error is the call's failure, as text).
    pub answer: Option<Result<RewindResponse, String>>,
}

impl Racing {
    /// Starts `request` on `api` in the background.
    pub fn start(api: Arc<dyn ConversationApi>, request: RewindRequest) -> Racing {
        let background = request.clone();
        Racing {
            request,
            task: Some(tokio::spawn(async move { api.rewind(&background).await })),
            answer: None,
        }
    }

    /// Takes the answer if the call has finished; true once the answer is in.
    pub async fn poll(&mut self) -> bool {
        if self.task.as_ref().is_some_and(|t| t.is_finished()) {
            if let Some(task) = self.task.take() {
                self.answer = Some(match task.await {
                    Ok(Ok(response)) => Ok(response),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(e) => Err(format!("the call panicked: {e}")),
                });
            }
        }
        self.answer.is_some()
    }
}

/// One delivery request a scenario made and what it led to.
#[derive(Debug, Clone)]
pub struct DeliveryRecord {
    /// The name the scenario gave the message.
    pub name: String,
    /// Its id.
    pub message_id: String,
    /// Its content when it was delivered (a rewind empties it later).
    pub content: String,
    /// What the implementation answered.
    pub report: rewind_conformance::sut::DeliveryReport,
    /// How many inputs the delivery witness had seen before the request, and after it: the
    /// inputs in between are the ones this request delivered.
    pub witnessed_before: usize,
    /// See `witnessed_before`.
    pub witnessed_after: usize,
}

/// A runtime process the harness holds open (killed on drop).
pub struct RuntimeHolder {
    /// The process.
    pub child: tokio::process::Child,
    /// Its stdin and stdout, kept open: closing stdin would end an app-server, and a closed
    /// stdout would make it write into a closed pipe.
    pub _pipes: (
        tokio::process::ChildStdin,
        tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    ),
}

/// A delivery started in the background.
pub struct StartedDelivery {
    /// The message's name.
    pub name: String,
    /// Its content.
    pub content: String,
    /// How many inputs the delivery witness had seen when it started.
    pub witnessed_before: usize,
    /// The task: the message id and the delivery report.
    pub task: tokio::task::JoinHandle<
        Result<(String, rewind_conformance::sut::DeliveryReport), SutError>,
    >,
}

impl std::fmt::Debug for RewindWorld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RewindWorld")
            .field("database", &self.attached.as_ref().map(|a| &a.db.name))
            .field("fixture", &self.fixture)
            .field("last", &self.last)
            .finish()
    }
}

impl RewindWorld {
    /// The attached scenario, or an error telling the author to start from a fixture.
    pub fn attached(&self) -> anyhow::Result<&Attached> {
        self.attached.as_ref().ok_or_else(|| {
            anyhow!("no conversation yet (start the scenario with `Given the conversation \"<fixture>\"`)")
        })
    }

    /// The scenario's mock runtimes.
    pub fn mocks(&self) -> anyhow::Result<&MockRuntimes> {
        self.mocks.as_ref().ok_or_else(|| {
            anyhow!("no mock runtimes yet (start the scenario with `Given the conversation \"<fixture>\"`)")
        })
    }

    /// The steps' connection to the scenario database. Nothing taken from it may be held
    /// while the implementation works: use [`RewindWorld::hold_pool`] for that.
    pub fn pool(&self) -> anyhow::Result<&PgPool> {
        Ok(&self.attached()?.pool)
    }

    /// Connections to the scenario database that a step holds while the implementation works.
    pub fn hold_pool(&self) -> anyhow::Result<&PgPool> {
        Ok(&self.attached()?.hold)
    }

    /// The database as it was just before the last `When`.
    pub fn before_snapshot(&self) -> anyhow::Result<&DbSnapshot> {
        self.before
            .as_ref()
            .ok_or_else(|| anyhow!("no snapshot was taken (this step follows a `When`)"))
    }

    /// Records a rewind's answer: it becomes the last answer, and joins the scenario's answers.
    pub fn record_answer(&mut self, request: RewindRequest, response: RewindResponse) {
        self.answers.push((request.clone(), response.clone()));
        self.last = Some((request, response));
    }

    /// The last rewind's answer.
    pub fn last_response(&self) -> anyhow::Result<&RewindResponse> {
        self.last
            .as_ref()
            .map(|(_, r)| r)
            .ok_or_else(|| anyhow!("no rewind was attempted in this scenario"))
    }

    /// Records that the implementation took `reading` of register entry `ambiguity`. Fails when
    /// the register does not accept that reading, when a tagged entry's tag is missing from the
    /// scenario, or when the scenario already took another reading of it.
    pub fn take_reading(&mut self, ambiguity: &str, reading: &str) -> anyhow::Result<()> {
        let ctx = context()?;
        let entry = ctx.register.get(ambiguity).ok_or_else(|| {
            anyhow!(
                "a step took ambiguity `{ambiguity}`, which {} does not list",
                ctx.register.path().display()
            )
        })?;
        if !entry.accepts(reading) {
            let accepted: Vec<&str> = match entry.policy {
                Policy::AcceptEveryReading => {
                    entry.readings.iter().map(|r| r.id.as_str()).collect()
                }
                Policy::OneReading => entry.chosen.iter().map(String::as_str).collect(),
            };
            anyhow::bail!(
                "the implementation took reading `{reading}` of ambiguity `{ambiguity}`, but the \
                 register accepts only {accepted:?}: {}",
                entry.reason
            );
        }
        let tag = format!("ambiguity:{ambiguity}");
        if !entry.scenarios.is_empty() && !self.tags.contains(&tag) {
            anyhow::bail!(
                "this step decides ambiguity `{ambiguity}`, but the scenario is not tagged \
                 `@{tag}` (tag it and list it in {})",
                ctx.register.path().display()
            );
        }
        match self.readings.get(ambiguity) {
            Some(taken) if taken != reading => anyhow::bail!(
                "the implementation took reading `{taken}` of ambiguity `{ambiguity}` earlier in \
                 this scenario, and now `{reading}`: one implementation, one reading"
            ),
            _ => {
                self.readings
                    .insert(ambiguity.to_owned(), reading.to_owned());
            }
        }
        Ok(())
    }

    /// The message id a step's `name` stands for: a name given during the scenario, or the name
    /// itself (a fixture message id).
    pub fn resolve(&self, name: &str) -> String {
        self.aliases
            .get(name)
            .cloned()
            .unwrap_or_else(|| name.to_owned())
    }

    /// Gives `id` the name `name` for the rest of the scenario.
    pub fn name_message(&mut self, name: &str, id: &str) -> anyhow::Result<()> {
        if let Some(other) = self.aliases.get(name).filter(|o| o.as_str() != id) {
            anyhow::bail!(
                "the name `{name}` already stands for message `{other}` in this scenario"
            );
        }
        self.aliases.insert(name.to_owned(), id.to_owned());
        Ok(())
    }

    /// Collects the events the implementation published since the last collection.
    pub async fn collect_events(&mut self) -> anyhow::Result<()> {
        let events = self.attached()?.api.take_events().await?;
        #[cfg(feature = "browser")]
        let from = self.events.len();
        self.events.extend(events);
        #[cfg(feature = "browser")]
        crate::suite::steps::client::forward_events(self, from);
        Ok(())
    }

    /// The leak scan, after a scenario in which messages were rewound: every text column of the
    /// database (outside the allow-list), the rewind answers and the realtime payloads published
    /// after the last rewind must be free of the canaries of every rewound message. `None` when
    /// no message was rewound (nothing to scan); else the findings and how long the scan took.
    pub async fn leak_scan(&self) -> Option<(Vec<String>, Duration)> {
        let started = std::time::Instant::now();
        let result = self.leak_scan_inner().await;
        let findings = match result {
            Ok(None) => return None,
            Ok(Some(findings)) => findings,
            Err(e) => vec![format!("the leak scan could not run: {e:#}")],
        };
        Some((findings, started.elapsed()))
    }

    async fn leak_scan_inner(&self) -> anyhow::Result<Option<Vec<String>>> {
        use rewind_conformance::leak_scan::{canaries_in, scan, scan_payloads};
        let Ok(pool) = self.pool() else {
            return Ok(None);
        };
        let ctx = context()?;
        let mut conn = pool.acquire().await.context("acquiring a connection")?;
        let rewound: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM scope_messages WHERE metadata #>> '{messageRecall,status}' = 'rewound'",
        )
        .fetch_all(&mut *conn)
        .await
        .context("reading the rewound messages")?;
        if rewound.is_empty() {
            return Ok(None);
        }
        // What each message said before it was rewound: the fixture, the live messages the
        // scenario sent, the database just before the last rewind.
        let mut said: Vec<(String, String)> = Vec::new();
        if let Some(fixture) = self.fixture.as_ref().and_then(|f| ctx.fixtures.get(f)) {
            said.extend(
                fixture
                    .messages()
                    .map(|m| (m.id.clone(), m.content.clone())),
            );
        }
        said.extend(
            self.deliveries
                .iter()
                .map(|d| (d.message_id.clone(), d.content.clone())),
        );
        if let Some(before) = &self.before {
            for row in before.tables.get("scope_messages").into_iter().flatten() {
                if let Ok(row) = serde_json::from_str::<serde_json::Value>(row) {
                    if let (Some(id), Some(content)) = (
                        row.get("id").and_then(|v| v.as_str()),
                        row.get("content").and_then(|v| v.as_str()),
                    ) {
                        said.push((id.to_owned(), content.to_owned()));
                    }
                }
            }
        }
        let canaries: std::collections::BTreeSet<String> = said
            .iter()
            .filter(|(id, _)| rewound.contains(id))
            .flat_map(|(_, content)| canaries_in(content))
            .collect();
        if canaries.is_empty() {
            return Ok(None);
        }
        let mut findings: Vec<String> = scan(&mut conn, &canaries, &ctx.leak_allow)
            .await
            .context("scanning the database")?
            .iter()
            .map(ToString::to_string)
            .collect();
        let mut seen: Vec<(String, String)> = Vec::new();
        if let Some((_, response)) = &self.last {
            seen.push((
                "the rewind's answer".to_owned(),
                serde_json::to_string(response).unwrap_or_default(),
            ));
        }
        let after = self.events_mark.unwrap_or(self.events.len());
        for (i, event) in self.events.iter().enumerate() {
            if i >= after || event.name == "conversation:rewound" {
                seen.push((
                    format!("the realtime `{}` on `{}`", event.name, event.scope_id),
                    event.payload.to_string(),
                ));
            }
        }
        for (request, answer) in self
            .reads
            .iter()
            .skip(self.reads_mark.unwrap_or(usize::MAX))
        {
            seen.push((
                format!(
                    "the `{}` read of scope `{}`",
                    request.surface.name(),
                    request.scope_id
                ),
                serde_json::to_string(answer).unwrap_or_default(),
            ));
        }
        findings.extend(scan_payloads(&seen, &canaries));
        Ok(Some(findings))
    }

    /// Captures the whole database.
    pub async fn snapshot(&self) -> anyhow::Result<DbSnapshot> {
        let mut conn = self
            .pool()?
            .acquire()
            .await
            .context("acquiring a connection")?;
        DbSnapshot::capture(&mut conn)
            .await
            .context("capturing the database")
    }

    /// What each mock runtime answered the implementation in this scenario, by strategy step
    /// (see [`crate::suite::compat`]); nothing without mocks.
    pub fn compat_observations(&self) -> Vec<crate::suite::compat::Observation> {
        let Some(mocks) = self.mocks.as_ref() else {
            return Vec::new();
        };
        MockRuntime::ALL
            .iter()
            .filter_map(|&runtime| {
                let journal = mocks.journal(runtime).ok()?;
                Some(crate::suite::compat::observe(
                    runtime.program(),
                    &mocks.release(runtime),
                    &journal,
                ))
            })
            .flatten()
            .collect()
    }

    /// Releases the scenario's database (dropped unless the run keeps databases).
    pub async fn teardown(&mut self) {
        // Release a staged race first, so nothing waits on the harness's locks.
        if let Some(held) = self.held.take() {
            let _ = held.rollback().await;
        }
        if let Some(mocks) = &self.mocks {
            mocks.lift_all_faults();
        }
        for started in std::mem::take(&mut self.started_deliveries) {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(30), started.task).await;
        }
        if let Some((_, task)) = self.started.take() {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(30), task).await;
        }
        for racing in std::mem::take(&mut self.racing) {
            if let Some(task) = racing.task {
                let _ = tokio::time::timeout(std::time::Duration::from_secs(30), task).await;
            }
        }
        for mut holder in std::mem::take(&mut self.runtime_holders) {
            let _ = holder.child.kill().await;
        }
        if let Some(mut mocks) = self.mocks.take() {
            mocks.stop().await;
        }
        let (db, pool) = match (self.attached.take(), self.pending_db.take()) {
            (Some(attached), _) => {
                if let Err(e) = attached.api.detach().await {
                    tracing::warn!("detaching from `{}`: {e}", attached.db.name);
                }
                attached.hold.close().await;
                (attached.db, attached.pool)
            }
            (None, Some(pending)) => pending,
            (None, None) => return,
        };
        pool.close().await;
        if let Ok(ctx) = context() {
            if !ctx.keep_databases {
                if let Err(e) = ctx.template.drop_database(&db.name).await {
                    tracing::warn!("{e}");
                }
            }
        }
    }
}
