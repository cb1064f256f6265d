//! [`Isolation`]: every scenario's own database, already holding its fixture when the scenario
//! asks for it.
//!
//! Each fixture a run needs is seeded once, into a template of its own
//! ([`TemplateDatabase::derive`]); a scenario's database is a copy of that template. A task
//! makes the copies ahead, in the order the scenarios will ask for them (the run's plan: the
//! fixture of each selected scenario, in the order cucumber starts them), at most
//! [`Isolation::new`]'s `ahead` further than the scenarios have got. A scenario whose copy is not
//! ready (it started out of the plan's order, or the plan did not foresee it) makes its own.
//!
//! With real runtimes the database must hold the ids the runtimes chose for the scenario, so a
//! fixture cannot be seeded ahead: such a run clones the bare template and seeds per scenario.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use rewind_conformance::fixtures::{seed_fixture, Fixture};
use rewind_conformance::mocks::{MockPrograms, MockRuntimes};
use rewind_conformance::postgres::{ProvisionError, ScenarioDatabase, TemplateDatabase};
use sqlx::PgPool;
use tokio::sync::{Notify, OnceCell};
use tokio::task::JoinHandle;

/// The fixture templates of a run and the copies made ahead of its scenarios.
pub struct Isolation {
    shared: Arc<Shared>,
    makers: Mutex<Vec<JoinHandle<()>>>,
}

/// How many copies are made side by side (`CREATE DATABASE` spends much of its time waiting
/// for its checkpoints, which two copies share).
const MAKERS: usize = 2;

struct Shared {
    template: TemplateDatabase,
    programs: Arc<MockPrograms>,
    fixtures: Arc<BTreeMap<String, Fixture>>,
    /// Per fixture: the name of its template, once seeded.
    seeded: HashMap<String, OnceCell<String>>,
    /// Per fixture: how many scenarios of the plan start from it.
    uses: HashMap<String, usize>,
    state: Mutex<State>,
    /// Wakes the maker (a copy was taken, or the run is over) and the scenarios waiting for a
    /// copy being made.
    changed: Notify,
    ahead: usize,
}

#[derive(Default)]
struct State {
    /// The fixture of every scenario the run expects, in order.
    plan: Vec<String>,
    /// How many entries of the plan the maker has started.
    made: usize,
    /// How many copies scenarios have asked for.
    taken: usize,
    /// Copies made and not taken yet, per fixture.
    ready: HashMap<String, VecDeque<Ready>>,
    /// The fixtures of the copies being made.
    making: Vec<String>,
    stopping: bool,
}

/// A scenario database made ahead, with the steps' pool already connected to it and the
/// fixture's mock runtimes started on it.
pub struct Ready {
    /// The database.
    pub db: ScenarioDatabase,
    /// The steps' pool ([`STEP_POOL_SIZE`]), its connection open (`None` when connecting
    /// failed: the scenario connects itself and reports the failure).
    pub pool: Option<PgPool>,
    /// The fixture's mock runtimes, witnessing deliveries against the database (`None` when
    /// they could not start: the scenario starts them itself and reports the failure).
    pub mocks: Option<MockRuntimes>,
}

/// The harness's connections to a scenario's database.
///
/// The steps read and write through one connection, in step order. A second connection is a
/// new PostgreSQL backend whose catalog caches start cold (its first snapshot of a fixture costs
/// about six times a warm one), and a pool allowed more than one opens it whenever a query
/// follows another at once, since a connection handed back is checked before it is idle again.
pub const STEP_POOL_SIZE: u32 = 1;

/// Connections a step holds while the implementation works (a transaction keeping row locks,
/// a session that terminates a backend), opened when first asked for. They never come from
/// the steps' pool, so that nothing the implementation waits for waits for a step's query.
pub const HOLD_POOL_SIZE: u32 = 2;

/// The delivery witness's connection (the mock runtimes call it while the implementation
/// works), opened when first asked for, for the same reason.
pub const WITNESS_POOL_SIZE: u32 = 1;

/// What one scenario's isolation cost.
#[derive(Debug, Clone, Copy, Default)]
pub struct IsolationTimes {
    /// How long its database took to copy (possibly ahead of the scenario).
    pub clone: Duration,
    /// How long the scenario waited for its database (zero when it was made ahead).
    pub wait: Duration,
    /// Connecting to it, starting the runtimes, seeding (when not seeded ahead).
    pub prepare: Duration,
    /// Attaching the implementation.
    pub attach: Duration,
    /// From the scenario's start to its database seeded and the implementation attached.
    pub total: Duration,
}

impl Isolation {
    /// Isolation for the scenarios of `plan` (their fixtures, in order), copies made at most
    /// `ahead` scenarios in advance.
    pub fn new(
        template: TemplateDatabase,
        programs: Arc<MockPrograms>,
        fixtures: Arc<BTreeMap<String, Fixture>>,
        plan: Vec<String>,
        ahead: usize,
    ) -> Self {
        let mut uses = HashMap::new();
        for name in &plan {
            *uses.entry(name.clone()).or_insert(0) += 1;
        }
        let seeded = fixtures
            .keys()
            .map(|name| (name.clone(), OnceCell::new()))
            .collect();
        let shared = Arc::new(Shared {
            template,
            programs,
            fixtures,
            seeded,
            uses,
            state: Mutex::new(State {
                plan,
                ..State::default()
            }),
            changed: Notify::new(),
            ahead: ahead.max(1),
        });
        let makers = (0..MAKERS)
            .map(|_| tokio::spawn(make_ahead(Arc::clone(&shared))))
            .collect();
        Isolation {
            shared,
            makers: Mutex::new(makers),
        }
    }

    /// A database holding fixture `name` for one scenario, and how long the scenario waited
    /// for it.
    pub async fn database_for(&self, name: &str) -> Result<(Ready, Duration), ProvisionError> {
        let started = Instant::now();
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            // What the scenario does: take a copy made ahead, make its own, or wait for one
            // being made.
            let taken = {
                let mut state = self.shared.lock();
                if let Some(ready) = state.ready.get_mut(name).and_then(VecDeque::pop_front) {
                    state.taken += 1;
                    Some(Some(ready))
                } else if !state.making.iter().any(|m| m == name) {
                    // Not coming soon: make it here, in place of the plan's next copy of this
                    // fixture (so the plan stays in step with the scenarios).
                    state.taken += 1;
                    let made = state.made;
                    if let Some(at) = state.plan[made..].iter().position(|f| f == name) {
                        state.plan.remove(made + at);
                    }
                    Some(None)
                } else {
                    None
                }
            };
            match taken {
                Some(Some(ready)) => {
                    self.shared.changed.notify_waiters();
                    return Ok((ready, started.elapsed()));
                }
                Some(None) => {
                    self.shared.changed.notify_waiters();
                    let ready = Ready {
                        db: self.shared.copy_of(name).await?,
                        pool: None,
                        mocks: None,
                    };
                    return Ok((ready, started.elapsed()));
                }
                None => {}
            }
            changed.await;
        }
    }

    /// Waits until the copies of the plan's first `count` scenarios are made (those that
    /// start together, before the makers are ahead); returns how long that took.
    pub async fn prime(&self, count: usize) -> Duration {
        let started = Instant::now();
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let state = self.shared.lock();
                let wanted = count.min(state.plan.len());
                let ready: usize = state.ready.values().map(VecDeque::len).sum();
                let finished = state.made >= wanted && state.making.is_empty();
                if ready >= wanted || finished || state.stopping {
                    return started.elapsed();
                }
            }
            changed.await;
        }
    }

    /// Stops making copies ahead (after the one under way, so that none appears later) and
    /// the runtimes of those no scenario took; their databases stay, for the run's cleanup to
    /// drop with the rest.
    pub async fn stop(&self) {
        self.shared.lock().stopping = true;
        self.shared.changed.notify_waiters();
        let makers = self
            .makers
            .lock()
            .map(|mut m| std::mem::take(&mut *m))
            .unwrap_or_default();
        for maker in makers {
            let _ = maker.await;
        }
        let left: Vec<Ready> = std::mem::take(&mut self.shared.lock().ready)
            .into_values()
            .flatten()
            .collect();
        for ready in left {
            if let Some(mut mocks) = ready.mocks {
                mocks.stop().await;
            }
            if let Some(pool) = ready.pool {
                pool.close().await;
            }
        }
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Readies a copy of fixture `name` for its scenario: the first connection to a new
    /// database is the slow one (its catalog caches are built), and the mock runtimes write
    /// the fixture's sessions into their homes; both happen here, off the scenario's path.
    async fn prepare(&self, name: &str, db: ScenarioDatabase) -> Ready {
        let pool = db.pool(STEP_POOL_SIZE).await.ok();
        let witness = db.lazy_pool(WITNESS_POOL_SIZE).ok();
        let mocks = match (&pool, witness, self.fixtures.get(name)) {
            (Some(_), Some(witness), Some(fixture)) => {
                MockRuntimes::start(&self.programs, fixture, Some(witness))
                    .await
                    .ok()
            }
            _ => None,
        };
        Ready { db, pool, mocks }
    }

    /// A new copy of fixture `name`'s template (seeding the template first if no scenario
    /// has yet).
    async fn copy_of(&self, name: &str) -> Result<ScenarioDatabase, ProvisionError> {
        let cell = self.seeded.get(name).ok_or_else(|| ProvisionError::Seed {
            database: self.template.template_name().to_owned(),
            detail: format!("no fixture `{name}`"),
        })?;
        let seed = || seeder(Arc::clone(&self.fixtures), name.to_owned());
        // A fixture one scenario starts from is seeded straight into that scenario's database.
        if self.uses.get(name).copied().unwrap_or(0) <= 1 && cell.get().is_none() {
            return self.template.clone_seeded(seed()).await;
        }
        let template = cell
            .get_or_try_init(|| self.template.derive(seed()))
            .await?;
        self.template.clone_of(template).await
    }
}

/// Writes fixture `name` on the connection it is given.
fn seeder(
    fixtures: Arc<BTreeMap<String, Fixture>>,
    name: String,
) -> impl for<'c> FnOnce(&'c mut sqlx::PgConnection) -> BoxFuture<'c, Result<(), String>> {
    move |conn| {
        Box::pin(async move {
            let fixture = fixtures
                .get(&name)
                .ok_or_else(|| format!("no fixture `{name}`"))?;
            seed_fixture(conn, fixture)
                .await
                .map_err(|e| format!("fixture `{name}`: {e}"))
        })
    }
}

/// The maker: copies the plan's fixtures in order, staying at most `ahead` scenarios in front.
async fn make_ahead(shared: Arc<Shared>) {
    loop {
        let changed = shared.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let next = {
            let mut state = shared.lock();
            if state.stopping || state.made >= state.plan.len() {
                return;
            }
            if state.made < state.taken + shared.ahead {
                let name = state.plan[state.made].clone();
                state.made += 1;
                state.making.push(name.clone());
                Some(name)
            } else {
                None
            }
        };
        let Some(name) = next else {
            changed.await;
            continue;
        };
        let made = match shared.copy_of(&name).await {
            Ok(db) => Ok(shared.prepare(&name, db).await),
            Err(e) => Err(e),
        };
        {
            let mut state = shared.lock();
            if let Some(at) = state.making.iter().position(|m| *m == name) {
                state.making.remove(at);
            }
            match made {
                Ok(db) => state.ready.entry(name).or_default().push_back(db),
                Err(e) => {
                    // The scenario that needs it makes its own, and reports the error if it
                    // recurs.
                    tracing::warn!("making a database ahead: {e}");
                }
            }
        }
        shared.changed.notify_waiters();
    }
}

/// The median and the 90th percentile of `values`, in milliseconds.
pub fn median_and_p90(mut values: Vec<Duration>) -> Option<(f64, f64)> {
    if values.is_empty() {
        return None;
    }
    values.sort();
    let at = |q: f64| {
        let index = ((values.len() - 1) as f64 * q).round() as usize;
        values[index].as_secs_f64() * 1000.0
    };
    Some((at(0.5), at(0.9)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_and_the_90th_percentile_are_read_off_the_sorted_values() {
        let ms = |v: &[u64]| v.iter().map(|m| Duration::from_millis(*m)).collect();
        assert_eq!(median_and_p90(Vec::new()), None);
        assert_eq!(median_and_p90(ms(&[7])), Some((7.0, 7.0)));
        let values: Vec<u64> = (1..=11).rev().collect();
        assert_eq!(median_and_p90(ms(&values)), Some((6.0, 10.0)));
    }
}
