//! Given steps: a scenario's starting conversation.

use std::time::Instant;

use anyhow::{anyhow, Context as _};
use cucumber::given;
use rewind_conformance::fixtures::seed_fixture;
use rewind_conformance::mocks::MockRuntimes;

use crate::suite::isolation::{
    IsolationTimes, Ready, HOLD_POOL_SIZE, STEP_POOL_SIZE, WITNESS_POOL_SIZE,
};
use crate::suite::world::{context, Attached, RewindWorld};

/// Takes a database of its own that holds the fixture (made ahead, or cloned and seeded now)
/// and attaches the implementation.
#[given(expr = "the conversation {string}")]
async fn the_conversation(world: &mut RewindWorld, name: String) -> anyhow::Result<()> {
    if world.attached.is_some() {
        return Err(anyhow!(
            "the scenario already has a conversation (`{}`); use one fixture per scenario",
            world.fixture.as_deref().unwrap_or("?")
        ));
    }
    let ctx = context()?;
    let fixture = ctx.fixtures.get(&name).ok_or_else(|| {
        let known: Vec<&str> = ctx.fixtures.keys().map(String::as_str).collect();
        anyhow!(
            "fixture `{name}` not found (known fixtures: {})",
            known.join(", ")
        )
    })?;
    let started = Instant::now();
    // Without real runtimes the fixture is in the database before the scenario asks for it.
    let ahead = ctx
        .isolation
        .as_ref()
        .filter(|_| ctx.programs.real().is_none());
    let (ready, wait) = match ahead {
        Some(isolation) => isolation.database_for(&name).await?,
        None => (
            Ready {
                db: ctx.template.clone_for_scenario().await?,
                pool: None,
                mocks: None,
            },
            started.elapsed(),
        ),
    };
    let db = ready.db;
    let pool = match ready.pool {
        Some(pool) => pool,
        None => db
            .pool(STEP_POOL_SIZE)
            .await
            .with_context(|| format!("connecting to scenario database `{}`", db.name))?,
    };
    let lazy_pool = |size| {
        db.lazy_pool(size)
            .with_context(|| format!("a pool on scenario database `{}`", db.name))
    };
    let hold = lazy_pool(HOLD_POOL_SIZE)?;
    // The runtimes first: real ones choose their own ids, which the database must hold.
    let mut mocks = match ready.mocks {
        Some(mocks) => mocks,
        None => MockRuntimes::start(&ctx.programs, fixture, Some(lazy_pool(WITNESS_POOL_SIZE)?))
            .await
            .map_err(|e| anyhow!("starting the runtimes of fixture `{name}`: {e}"))?,
    };
    if ahead.is_none() {
        let mut conn = pool.acquire().await.context("acquiring a connection")?;
        seed_fixture(&mut conn, &mocks.fixture_for_database(fixture))
            .await
            .with_context(|| format!("seeding fixture `{name}`"))?;
    }
    let prepared = started.elapsed();
    // Real runtimes run the releases chosen for the run (`--runtime-release`).
    let profile = ctx.applicability.profile();
    if let (Some(release), false) = (&profile.codex_release, mocks.is_real()) {
        // The release the implementation declared; a scenario that names one switches again.
        mocks
            .use_codex_version(release)
            .with_context(|| format!("making the codex mock imitate release {release}"))?;
    }
    if let (Some(release), false) = (&profile.claude_release, mocks.is_real()) {
        mocks
            .use_claude_version(release)
            .with_context(|| format!("making the claude mock imitate release {release}"))?;
    }
    let request = ctx.attach_request(&db, mocks.endpoints(), world.holds_restore);
    let violations = crate::suite::world::Violations::default();
    // The mocks belong to the world from here on, so that a failed attach still stops them.
    world.mocks = Some(mocks);
    let api = match violations.watch(ctx.sut.attach(&request).await) {
        Ok(api) => api,
        Err(e) => {
            world.violations = violations;
            world.pending_db = Some((db, pool));
            return Err(e.into());
        }
    };
    if let Ok(mut times) = ctx.isolation_times.lock() {
        let total = started.elapsed();
        times.push(IsolationTimes {
            clone: db.clone_time,
            wait,
            prepare: prepared - wait,
            attach: total - prepared,
            total,
        });
    }
    world.violations = violations.clone();
    world.attached = Some(Attached {
        db,
        pool,
        hold,
        api,
        violations,
    });
    world.fixture = Some(name);
    Ok(())
}
