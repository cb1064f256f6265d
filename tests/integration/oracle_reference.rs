//! The oracle against the reference implementation on every shipped fixture.
//!
//! Whatever the reference does with a rewind request (every message as the target asked by its
//! author; one asked by another human, by an agent, by the system and in a scope it does not
//! belong to; and, after each completed rewind, a second one further back), the oracle must call
//! it an outcome the spec allows, and the database it leaves must keep the invariants of
//! `oracle::consistency`. The reference's two variants take different readings wherever the
//! register accepts several, so both must pass; a deployment without codex checks the runtime
//! guards once more. A failed runtime restore is accepted (a fixture's agent may have no
//! session the mocks know), as the register accepts it in any run with faults. Storms of
//! concurrent rewinds and sends, whose order nobody knows, must leave consistent states too.
//!
//! The reference is driven through the harness's `SystemUnderTest` contract only; the oracle
//! shares no code with it. Needs the PostgreSQL server binaries (see README, "Choosing
//! PostgreSQL").

use std::path::Path;

use futures::StreamExt as _;
use std::sync::Arc;

use rewind_conformance::fixtures::{load_fixture_dir, seed_fixture, Fixture};
use rewind_conformance::inspect::DbSnapshot;
use rewind_conformance::mocks::{MockPrograms, MockRuntime, MockRuntimes, SessionView};
use rewind_conformance::oracle::{consistency, judge, predict, Deployment, State};
use rewind_conformance::postgres::{
    PostgresChoice, PostgresServer, ScenarioDatabase, TemplateDatabase,
};
use rewind_conformance::sut::reference::ReferenceSut;
use rewind_conformance::sut::{
    Actor, AttachRequest, ConversationApi, DatabaseTarget, Limits, RewindRequest, RewindResponse,
    SendMessage, SystemUnderTest,
};
use rewind_reference::Variant;

/// The requests tried on a fixture: every message as the target, asked by its author (or the
/// first human); with `others`, also one human message asked by another human, by an agent and
/// by the system, and asked in a scope it does not belong to.
fn requests(fixture: &Fixture, others: bool) -> Vec<RewindRequest> {
    let humans: Vec<&str> = fixture.humans.iter().map(|h| h.id.as_str()).collect();
    let first = humans.first().copied().unwrap_or("nobody");
    let ask = |actor: Actor, scope: &str, target: &str| RewindRequest {
        actor,
        scope_id: scope.to_owned(),
        target_message_id: target.to_owned(),
    };
    let mut out: Vec<RewindRequest> = fixture
        .messages()
        .map(|m| {
            let author = m.author.user_id().unwrap_or(first);
            ask(Actor::Human(author.to_owned()), &m.scope, &m.id)
        })
        .collect();
    let human_message = fixture.messages().find(|m| m.author.user_id().is_some());
    if let (true, Some(m)) = (others, human_message) {
        let author = m.author.user_id().unwrap_or(first);
        if let Some(other) = humans.iter().find(|h| **h != author) {
            out.push(ask(Actor::Human((*other).to_owned()), &m.scope, &m.id));
        }
        if let Some(agent) = fixture.agents.first() {
            out.push(ask(Actor::Agent(agent.id.clone()), &m.scope, &m.id));
        }
        out.push(ask(Actor::System, &m.scope, &m.id));
        if let Some(elsewhere) = fixture.messages().find(|o| o.scope != m.scope) {
            out.push(ask(
                Actor::Human(author.to_owned()),
                &elsewhere.scope,
                &m.id,
            ));
        }
    }
    out
}

/// The earliest visible message of the initiator before the target in its scope, for a second
/// rewind after a completed one.
fn further_back(state: &State, request: &RewindRequest) -> Option<RewindRequest> {
    let Actor::Human(initiator) = &request.actor else {
        return None;
    };
    let target = state.message(&request.target_message_id)?;
    let earlier = state.visible_messages(&request.scope_id).find(|m| {
        m.seq < target.seq
            && matches!(&m.author, rewind_conformance::oracle::Author::Human(a) if a == initiator)
    })?;
    Some(RewindRequest {
        actor: request.actor.clone(),
        scope_id: request.scope_id.clone(),
        target_message_id: earlier.id.clone(),
    })
}

struct Run<'a> {
    template: &'a TemplateDatabase,
    programs: &'a MockPrograms,
    sut: ReferenceSut,
    deployment: Deployment,
    sequences: bool,
}

/// A case's database, attached to the reference with its own mock runtimes.
struct Workbench {
    db: ScenarioDatabase,
    pool: sqlx::PgPool,
    conn: sqlx::pool::PoolConnection<sqlx::Postgres>,
    mocks: MockRuntimes,
    api: Box<dyn ConversationApi>,
    /// The database as cloned from the fixture's template.
    pristine: DbSnapshot,
    /// Where its identity sequences stood then.
    sequences: Vec<(String, Option<i64>)>,
    /// How many calls the mock runtimes had journaled then.
    journaled: usize,
    /// What the mock runtimes said of each agent's session then.
    sessions: Vec<Option<SessionView>>,
}

impl Run<'_> {
    /// Makes each of `requests` on a copy of `seeded` (a template holding fixture `name`), and a
    /// second one further back when it completes, and judges each. Returns what was judged
    /// wrong.
    ///
    /// A request that leaves the database exactly as it was cloned (every row of every table the
    /// same: a refusal that wrote nothing) hands the copy, its mocks and its attachment on to the
    /// next request. So does any other outcome, once the changed tables and the identity
    /// sequences are put back, the mock runtimes (if the case called one) are seeded again, and
    /// a snapshot shows every row as cloned (a fresh database costs a clone, a drop and cold
    /// connections; this costs a few statements). When that fails the next request gets a fresh
    /// copy. Either way each request starts from the fixture's rows as seeded and the runtimes
    /// as seeded, so no verdict depends on another case.
    async fn cases(
        &self,
        name: &str,
        fixture: &Fixture,
        seeded: &str,
        requests: &[RewindRequest],
    ) -> Vec<String> {
        let mut failures = Vec::new();
        let mut bench: Option<Workbench> = None;
        for request in requests {
            let mut current = match bench.take() {
                Some(kept) => kept,
                None => self.open(fixture, seeded).await,
            };
            let (judged, now) = self.case(name, &mut current, request).await;
            failures.extend(judged);
            if now == current.pristine || self.reset(&mut current, fixture, &now).await {
                bench = Some(current);
            } else {
                self.close(current).await;
            }
        }
        if let Some(kept) = bench {
            self.close(kept).await;
        }
        failures
    }

    async fn open(&self, fixture: &Fixture, seeded: &str) -> Workbench {
        let db = self
            .template
            .clone_of(seeded)
            .await
            .expect("a scenario database");
        let pool = db.pool(2).await.expect("a pool");
        let mut conn = pool.acquire().await.expect("a connection");
        let mocks = MockRuntimes::start(self.programs, fixture, Some(pool.clone()))
            .await
            .expect("the mock runtimes");
        let api = self
            .sut
            .attach(&attach_request(&db, &mocks))
            .await
            .expect("attaching the reference");
        let (_, pristine) = state(&mut conn).await;
        let sequences = sequence_positions(&mut conn)
            .await
            .expect("the sequences' positions");
        let journaled = journaled(&mocks);
        let sessions = sessions(&mocks, fixture).await;
        Workbench {
            db,
            pool,
            conn,
            mocks,
            api,
            pristine,
            sequences,
            journaled,
            sessions,
        }
    }

    /// Puts `bench` back as it was cloned after the last case changed rows (`now`): every
    /// changed table is emptied and refilled and the identity sequences are set back; when the
    /// case called a runtime, the mock runtimes are seeded again from `fixture` and the
    /// reference is attached to them anew. True when a snapshot then shows every row as cloned;
    /// false sends the next case to a fresh copy.
    async fn reset(&self, bench: &mut Workbench, fixture: &Fixture, now: &DbSnapshot) -> bool {
        if journaled(&bench.mocks) != bench.journaled {
            let _ = bench.api.detach().await;
            if bench.mocks.reseed(fixture).await.is_err()
                || sessions(&bench.mocks, fixture).await != bench.sessions
            {
                return false;
            }
            match self
                .sut
                .attach(&attach_request(&bench.db, &bench.mocks))
                .await
            {
                Ok(api) => bench.api = api,
                Err(_) => return false,
            }
            bench.journaled = journaled(&bench.mocks);
        }
        let restored = restore(&mut bench.conn, &bench.pristine, now, &bench.sequences).await;
        if restored.is_err() {
            return false;
        }
        let (_, again) = state(&mut bench.conn).await;
        again == bench.pristine
    }

    async fn close(&self, bench: Workbench) {
        let Workbench {
            db,
            pool,
            conn,
            mut mocks,
            api,
            ..
        } = bench;
        drop(conn);
        let _ = api.detach().await;
        mocks.stop().await;
        pool.close().await;
        let _ = self.template.drop_database(&db.name).await;
    }

    /// One request on `bench`, and a second one further back when it completes. Returns what
    /// was judged wrong and the rows the last rewind left.
    async fn case(
        &self,
        name: &str,
        bench: &mut Workbench,
        request: &RewindRequest,
    ) -> (Vec<String>, DbSnapshot) {
        let mut failures = Vec::new();
        let (start, mut rows) = state(&mut bench.conn).await;
        let mut before = start.clone();
        let mut request = Some(request.clone());
        let mut first = true;
        while let Some(asked) = request.take() {
            let answer = bench.api.rewind(&asked).await.expect("the rewind call");
            let (after, after_rows) = state(&mut bench.conn).await;
            rows = after_rows;
            let prediction = predict(&before, &asked, &self.deployment);
            let verdict = judge(&before, &after, &answer, &prediction);
            if !verdict.is_ok() {
                failures.push(format!("{name}: {asked:?} answered {answer:?}: {verdict}"));
            }
            for violation in consistency(&after, Some(&start)) {
                failures.push(format!("{name}: after {asked:?}: {violation}"));
            }
            if first && self.sequences && matches!(answer, RewindResponse::Completed { .. }) {
                request = further_back(&after, &asked);
            }
            first = false;
            before = after;
        }
        (failures, rows)
    }
}

/// What the mock runtimes say of each of `fixture`'s agents' sessions (an error reads as
/// none).
async fn sessions(mocks: &MockRuntimes, fixture: &Fixture) -> Vec<Option<SessionView>> {
    let mut out = Vec::new();
    for agent in &fixture.agents {
        out.push(mocks.view(&agent.id).await.ok().flatten());
    }
    out
}

/// How many calls the mock runtimes have journaled (a journal that cannot be read counts as
/// calls, so the runtimes are seeded again).
fn journaled(mocks: &MockRuntimes) -> usize {
    [
        MockRuntime::Codex,
        MockRuntime::Claude,
        MockRuntime::OpenCode,
    ]
    .into_iter()
    .map(|runtime| mocks.journal(runtime).map_or(usize::MAX / 4, |j| j.len()))
    .sum()
}

/// The identity and serial sequences of the public schema, and the value each last gave out
/// (`None`: none yet).
async fn sequence_positions(
    conn: &mut sqlx::PgConnection,
) -> Result<Vec<(String, Option<i64>)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT format('%I.%I', schemaname, sequencename), last_value FROM pg_sequences \
         WHERE schemaname = 'public' ORDER BY 1",
    )
    .fetch_all(conn)
    .await
}

/// Writes `pristine`'s rows back into every table whose rows differ in `now`, and sets the
/// sequences back to `sequences`, in one transaction with triggers and foreign-key checks off
/// (`session_replication_role = replica`: the rows are put back as they were, not derived
/// again). Generated columns are computed anew from the rows.
async fn restore(
    conn: &mut sqlx::PgConnection,
    pristine: &DbSnapshot,
    now: &DbSnapshot,
    sequences: &[(String, Option<i64>)],
) -> Result<(), sqlx::Error> {
    use sqlx::Connection as _;
    let empty = Vec::new();
    let mut tx = conn.begin().await?;
    sqlx::query("SET LOCAL session_replication_role = replica")
        .execute(&mut *tx)
        .await?;
    let names: std::collections::BTreeSet<&String> =
        pristine.tables.keys().chain(now.tables.keys()).collect();
    for name in names {
        let rows = pristine.tables.get(name).unwrap_or(&empty);
        if now.tables.get(name).unwrap_or(&empty) == rows {
            continue;
        }
        let columns: Vec<String> = sqlx::query_scalar(
            "SELECT quote_ident(attname) FROM pg_attribute \
             WHERE attrelid = format('public.%I', $1::text)::regclass \
               AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
        )
        .bind(name)
        .fetch_all(&mut *tx)
        .await?;
        let table = format!("public.\"{}\"", name.replace('"', "\"\""));
        sqlx::query(sqlx::AssertSqlSafe(format!("DELETE FROM {table}")))
            .execute(&mut *tx)
            .await?;
        if rows.is_empty() {
            continue;
        }
        let list = columns.join(", ");
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO {table} ({list}) OVERRIDING SYSTEM VALUE \
             SELECT {list} FROM jsonb_populate_recordset(NULL::{table}, $1::jsonb)"
        )))
        .bind(format!("[{}]", rows.join(",")))
        .execute(&mut *tx)
        .await?;
    }
    for (sequence, last) in sequences {
        sqlx::query(
            "SELECT CASE WHEN $2::bigint IS NULL \
               THEN setval($1::regclass, (SELECT seqstart FROM pg_sequence WHERE seqrelid = $1::regclass), false) \
               ELSE setval($1::regclass, $2::bigint, true) END",
        )
        .bind(sequence)
        .bind(last)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await
}

/// A template of the run holding `fixture`, for the cases on it to clone.
async fn seeded_template(template: &TemplateDatabase, fixture: &Fixture) -> String {
    let fixture = fixture.clone();
    template
        .derive(move |conn| {
            Box::pin(async move {
                seed_fixture(conn, &fixture)
                    .await
                    .map_err(|e| e.to_string())
            })
        })
        .await
        .expect("the fixture's template")
}

/// How many lanes of cases run side by side (each on its own database).
const CASES_AT_ONCE: usize = 4;

/// How many of a fixture's requests one lane makes, one after another.
const REQUESTS_PER_LANE: usize = 8;

/// The database read as the spec schema, and its raw rows.
async fn state(conn: &mut sqlx::PgConnection) -> (State, DbSnapshot) {
    let snapshot = DbSnapshot::capture(conn).await.expect("a snapshot");
    let state = State::from_snapshot(&snapshot).expect("a snapshot of the spec schema");
    (state, snapshot)
}

/// One pass: the reference in `variant` restoring `runtimes` (all when `None`), on the
/// fixtures `pick` selects, with the requests of [`requests`], a second rewind after each
/// completed one when `sequences`.
struct Pass {
    variant: Variant,
    runtimes: Option<Vec<String>>,
    others: bool,
    sequences: bool,
    pick: fn(&Fixture) -> bool,
}

/// What every check runs in: the shipped fixtures, an embedded PostgreSQL with the reference's
/// migrated template, and the mock runtime programs.
struct Setting {
    fixtures: std::collections::BTreeMap<String, Fixture>,
    server: PostgresServer,
    template: TemplateDatabase,
    programs: MockPrograms,
}

impl Setting {
    async fn start() -> Setting {
        let fixtures = load_fixture_dir(Path::new("fixtures")).expect("the shipped fixtures");
        let server = PostgresServer::provision(&PostgresChoice::Embedded)
            .await
            .expect("an embedded PostgreSQL");
        let template = TemplateDatabase::create(server.admin_url(), &rewind_reference::MIGRATOR)
            .await
            .expect("the template database");
        let programs = MockPrograms::link(Path::new(env!("CARGO_BIN_EXE_rewind-conformance")))
            .expect("the mock runtime programs");
        Setting {
            fixtures,
            server,
            template,
            programs,
        }
    }

    async fn stop(self) {
        self.programs.remove();
        let _ = self.template.drop_all().await;
        self.server.shutdown().await;
    }
}

async fn check(passes: Vec<Pass>) {
    let Setting {
        fixtures,
        server,
        template,
        programs,
    } = Setting::start().await;
    let mut failures = Vec::new();
    let mut runs = 0;
    for pass in passes {
        let deployment = match &pass.runtimes {
            Some(list) => Deployment::with_runtimes(list.iter().map(String::as_str)),
            None => Deployment::every_runtime(),
        }
        .restores_may_fail(true);
        let run = Run {
            template: &template,
            programs: &programs,
            sut: ReferenceSut::with_variant(pass.runtimes.clone(), Ok(pass.variant)),
            deployment,
            sequences: pass.sequences,
        };
        let mut lanes = Vec::new();
        for (name, fixture) in fixtures.iter().filter(|(_, f)| (pass.pick)(f)) {
            let seeded = seeded_template(&template, fixture).await;
            let requests = requests(fixture, pass.others);
            runs += requests.len();
            for lane in requests.chunks(REQUESTS_PER_LANE) {
                lanes.push((name, fixture, seeded.clone(), lane.to_vec()));
            }
        }
        let run = &run;
        let judged: Vec<Vec<String>> = futures::stream::iter(lanes)
            .map(|(name, fixture, seeded, requests)| async move {
                run.cases(name, fixture, &seeded, &requests).await
            })
            .buffer_unordered(CASES_AT_ONCE)
            .collect()
            .await;
        let variant = pass.variant;
        failures.extend(
            judged
                .into_iter()
                .flatten()
                .map(|f| format!("[{variant:?}] {f}")),
        );
    }
    Setting {
        fixtures,
        server,
        template,
        programs,
    }
    .stop()
    .await;
    assert!(
        failures.is_empty(),
        "{} of {runs} rewinds judged wrong:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// What the reference is told when it is attached to `db` and these mocks.
fn attach_request(db: &ScenarioDatabase, mocks: &MockRuntimes) -> AttachRequest {
    AttachRequest {
        database: DatabaseTarget {
            url: db.url.clone(),
            name: db.name.clone(),
        },
        runtimes: mocks.endpoints(),
        limits: Limits {
            restore_timeout_ms: 5_000,
            request_timeout_ms: 30_000,
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_oracle_allows_what_the_recommended_reference_does() {
    check(vec![Pass {
        variant: Variant::Recommended,
        runtimes: None,
        others: true,
        sequences: true,
        pick: |_| true,
    }])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_oracle_allows_what_the_alternative_reference_does_and_a_narrower_deployment() {
    check(vec![
        Pass {
            variant: Variant::Alternative,
            runtimes: None,
            others: false,
            sequences: true,
            pick: |_| true,
        },
        Pass {
            variant: Variant::Recommended,
            runtimes: Some(vec!["claude".to_owned(), "opencode".to_owned()]),
            others: false,
            sequences: false,
            pick: |f| !f.agents.is_empty(),
        },
    ])
    .await;
}

/// Storms: on each fixture, every human message rewound by its author at once; then, on a fresh
/// copy, half of them at once while each author also sends a live message into the scope. Some
/// rewinds complete, others are refused as in progress, drifted or blocked by what another
/// completed first; whatever the order, the state they leave must be consistent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storms_of_rewinds_and_sends_leave_consistent_states() {
    let Setting {
        fixtures,
        server,
        template,
        programs,
    } = Setting::start().await;
    let mut failures = Vec::new();
    let mut completed = 0;
    for with_sends in [false, true] {
        for (name, fixture) in &fixtures {
            let db = template
                .clone_for_scenario()
                .await
                .expect("a scenario database");
            let pool = db.pool(4).await.expect("a pool");
            let mut conn = pool.acquire().await.expect("a connection");
            seed_fixture(&mut conn, fixture).await.expect("seeding");
            let mut mocks = MockRuntimes::start(&programs, fixture, Some(pool.clone()))
                .await
                .expect("the mock runtimes");
            let api: Arc<dyn ConversationApi> = Arc::from(
                ReferenceSut::default()
                    .attach(&attach_request(&db, &mocks))
                    .await
                    .expect("attaching the reference"),
            );
            let (start, _) = state(&mut conn).await;
            let mut calls = Vec::new();
            let human_messages = fixture
                .messages()
                .filter_map(|m| m.author.user_id().map(|author| (m, author.to_owned())));
            for (index, (message, author)) in human_messages.enumerate() {
                if with_sends && index % 2 == 1 {
                    continue;
                }
                let request = RewindRequest {
                    actor: Actor::Human(author.clone()),
                    scope_id: message.scope.clone(),
                    target_message_id: message.id.clone(),
                };
                let rewinding = api.clone();
                calls.push(tokio::spawn(async move {
                    rewinding.rewind(&request).await.map(|_| ())
                }));
                if with_sends {
                    let send = SendMessage {
                        actor: Actor::Human(author),
                        scope_id: message.scope.clone(),
                        content: format!("said live CANARY-storm-{index}"),
                        mentions: Vec::new(),
                    };
                    let sending = api.clone();
                    calls.push(tokio::spawn(async move {
                        sending.send_message(&send).await.map(|_| ())
                    }));
                }
            }
            for call in calls {
                // A send into an archived thread may be answered with an error: the protocol
                // leaves it open. The state is what is judged.
                let _ = call.await.expect("a storm call");
            }
            let (after, _) = state(&mut conn).await;
            completed += after
                .operations
                .values()
                .filter(|o| o.status == "completed")
                .count();
            failures.extend(
                consistency(&after, Some(&start))
                    .into_iter()
                    .map(|v| format!("{name} (sends: {with_sends}): {v}")),
            );
            drop(conn);
            let _ = api.detach().await;
            mocks.stop().await;
            pool.close().await;
            let _ = template.drop_database(&db.name).await;
        }
    }
    Setting {
        fixtures,
        server,
        template,
        programs,
    }
    .stop()
    .await;
    assert!(completed > 0, "no rewind of any storm completed");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
