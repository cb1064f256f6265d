//! [`TemplateDatabase`]: the spec schema migrated once, cloned per scenario.
//!
//! `CREATE DATABASE ... TEMPLATE` copies a small migrated database in a few milliseconds, so
//! every scenario gets a database of its own and scenarios run concurrently. Every database a run
//! creates carries the run's prefix; dropping them all is the run's last step.
//!
//! A scenario that starts from a fixture can clone a template that already holds it
//! ([`TemplateDatabase::derive`]: seeded once per run, `rewind_<key>_f<n>`), so that seeding
//! is not on the scenario's path at all.
//!
//! A run that is killed cannot drop them. So every database a run makes is named
//! `rewind_<key>_template`, `rewind_<key>_f<n>` or `rewind_<key>_s<n>` (the key in 8 hex
//! digits) and commented
//! `rewind-conformance run <key>`, and the run holds the session advisory lock
//! ([`LOCK_CLASS`], key) for as long as it lives: when a run starts, it drops the databases so
//! named whose key no session holds any more (the databases of dead runs), unless their comment
//! says otherwise (a clone killed before its comment has none). Databases kept with
//! `--keep-databases` are commented `... (kept)` and stay.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, PgPool};
use tokio::sync::{mpsc, Mutex, RwLock};
use tokio::task::JoinHandle;

use super::ProvisionError;

/// The first key of the advisory locks runs hold (`pg_advisory_lock(LOCK_CLASS, key)`).
pub const LOCK_CLASS: i32 = 0x5257_4e44;

/// The comment every database of a run carries, followed by the run's key.
const COMMENT_PREFIX: &str = "rewind-conformance run ";

/// The `application_name` of the sessions a run creates databases with, followed by its key.
const SESSION_PREFIX: &str = "rewind-conformance ";

/// What follows a run's prefix (`rewind_<key>`) in the names of its databases, as a regex.
const NAME_SUFFIX: &str = "_(template|s[0-9]+|f[0-9]+)$";

/// What follows the key in the comment of a database kept on purpose.
const KEPT_SUFFIX: &str = " (kept)";

/// The templates of the runs of this process that have not dropped their databases yet, for
/// the signal handlers ([`drop_all_live`]).
static LIVE: std::sync::Mutex<Vec<TemplateDatabase>> = std::sync::Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<TemplateDatabase>> {
    LIVE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Drops the databases of every run of this process not finished yet, each within `limit`; for
/// the signal handlers. Returns the number of runs whose databases could not all be dropped.
pub async fn drop_all_live(limit: Duration) -> usize {
    let templates = std::mem::take(&mut *live());
    let mut failed = 0;
    for template in templates {
        match tokio::time::timeout(limit, template.drop_all()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                eprintln!("  {e}");
                failed += 1;
            }
            Err(_) => failed += 1,
        }
    }
    failed
}

/// What writes a fixture into a new database, on the connection it is given; returns what
/// went wrong in words.
pub trait Seed:
    for<'c> FnOnce(&'c mut sqlx::PgConnection) -> futures::future::BoxFuture<'c, Result<(), String>>
{
}

impl<F> Seed for F where
    F: for<'c> FnOnce(
        &'c mut sqlx::PgConnection,
    ) -> futures::future::BoxFuture<'c, Result<(), String>>
{
}

/// One database of one scenario.
#[derive(Debug, Clone)]
pub struct ScenarioDatabase {
    /// The database name.
    pub name: String,
    /// A URL that reaches it with the admin credentials.
    pub url: String,
    /// How long cloning it took.
    pub clone_time: Duration,
}

impl ScenarioDatabase {
    /// Opens a small pool on this database, with one connection open.
    pub async fn pool(&self, max_connections: u32) -> Result<PgPool, sqlx::Error> {
        Self::pool_options(max_connections)
            .connect_with(self.harness_options()?)
            .await
    }

    /// A small pool on this database that connects only when a connection is first asked for.
    pub fn lazy_pool(&self, max_connections: u32) -> Result<PgPool, sqlx::Error> {
        Ok(Self::pool_options(max_connections).connect_lazy_with(self.harness_options()?))
    }

    fn harness_options(&self) -> Result<PgConnectOptions, sqlx::Error> {
        let options: PgConnectOptions = self.url.parse()?;
        Ok(options.application_name(crate::inspect::HARNESS_SESSION))
    }

    fn pool_options(max_connections: u32) -> PgPoolOptions {
        PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(30))
    }
}

/// The migrated template of a run, and the clones made from it.
#[derive(Debug, Clone)]
pub struct TemplateDatabase {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    admin: PgPool,
    admin_url: url::Url,
    /// The run's key: the second key of its advisory lock, in its databases' comment.
    key: i32,
    /// The session holding the run's advisory lock.
    lock_session: Mutex<Option<sqlx::PgConnection>>,
    /// Databases of dead runs dropped when this one started.
    reaped: Vec<String>,
    prefix: String,
    template: String,
    counter: AtomicU64,
    // `STRATEGY FILE_COPY` (PostgreSQL 15+) copies a small template's files instead of
    // WAL-logging every block.
    file_copy: bool,
    // Copies run side by side (each `CREATE DATABASE` takes a share lock on its template,
    // and none connects to it); dropping or keeping the run's databases waits for those under
    // way, so that none appears after the listing.
    clone_lock: RwLock<()>,
    // Databases cloned ahead of demand by [`TemplateDatabase::start_prefetch`].
    prefetched: Mutex<Option<mpsc::Receiver<Result<ScenarioDatabase, ProvisionError>>>>,
    prefetcher: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl TemplateDatabase {
    /// Creates a run-unique template database on the server at `admin_url` and applies
    /// `migrator` to it.
    pub async fn create(admin_url: &str, migrator: &Migrator) -> Result<Self, ProvisionError> {
        let shown = redact(admin_url);
        let parsed = url::Url::parse(admin_url).map_err(|e| ProvisionError::Database {
            url: shown.clone(),
            action: "parsing the URL".to_owned(),
            source: sqlx::Error::Configuration(Box::new(e)),
        })?;
        let db_err = |action: &str, source| ProvisionError::Database {
            url: shown.clone(),
            action: action.to_owned(),
            source,
        };
        // One direct connection first: a refused or misaddressed server fails at once with the
        // driver's own reason instead of a pool time-out.
        let probe = tokio::time::timeout(
            Duration::from_secs(20),
            <sqlx::PgConnection as sqlx::Connection>::connect(admin_url),
        )
        .await
        .map_err(|_| db_err("connecting", sqlx::Error::PoolTimedOut))?
        .map_err(|e| db_err("connecting", e))?;
        let _ = sqlx::Connection::close(probe).await;
        // A positive, non-zero key: shown the same by pg_locks (as an oid) and in names.
        let key = i32::try_from(uuid::Uuid::new_v4().as_u128() as u32 >> 1).unwrap_or(1) | 1;
        let mut lock_session = <sqlx::PgConnection as sqlx::Connection>::connect(admin_url)
            .await
            .map_err(|e| db_err("connecting", e))?;
        sqlx::query("SELECT pg_advisory_lock($1, $2)")
            .bind(LOCK_CLASS)
            .bind(key)
            .execute(&mut lock_session)
            .await
            .map_err(|e| db_err("taking the run's advisory lock", e))?;
        // The sessions that create databases say whose they are, so that the run reaping them
        // after a SIGKILL can end a `CREATE DATABASE` still under way; named only once the lock
        // is held, so no other run takes them for a dead run's.
        let options = admin_url
            .parse::<PgConnectOptions>()
            .map_err(|e| db_err("parsing the URL", e))?
            .application_name(&format!("{SESSION_PREFIX}{key}"));
        let admin = PgPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await
            .map_err(|e| db_err("connecting", e))?;
        let version: i32 = sqlx::query_scalar("SELECT current_setting('server_version_num')::int")
            .fetch_one(&admin)
            .await
            .map_err(|e| db_err("reading the server version", e))?;
        let reaped = reap_stale_databases(&admin)
            .await
            .map_err(|e| db_err("dropping the databases of killed runs", e))?;
        let prefix = format!("rewind_{key:08x}");
        let template = format!("{prefix}_template");
        sqlx::query(AssertSqlSafe(format!("CREATE DATABASE \"{template}\"")))
            .execute(&admin)
            .await
            .map_err(|e| db_err("creating the template database", e))?;
        comment(&admin, &template, key, false)
            .await
            .map_err(|e| db_err("commenting the template database", e))?;
        let this = TemplateDatabase {
            inner: Arc::new(Inner {
                admin,
                admin_url: parsed,
                key,
                lock_session: Mutex::new(Some(lock_session)),
                reaped,
                prefix,
                template: template.clone(),
                counter: AtomicU64::new(0),
                file_copy: version >= 150_000,
                clone_lock: RwLock::new(()),
                prefetched: Mutex::new(None),
                prefetcher: std::sync::Mutex::new(None),
            }),
        };
        live().push(this.clone());
        let template_url = this.url_of(&template);
        {
            let pool = PgPoolOptions::new()
                .max_connections(1)
                .connect(&template_url)
                .await
                .map_err(|e| db_err("connecting to the template database", e))?;
            migrator
                .run(&pool)
                .await
                .map_err(|source| ProvisionError::Migrate {
                    database: template.clone(),
                    source,
                })?;
            pool.close().await;
        }
        Ok(this)
    }

    /// Runs `sql` (several statements allowed) on the template, before any clone is made:
    /// harness instrumentation every scenario database then inherits.
    pub async fn instrument(&self, sql: &str) -> Result<(), ProvisionError> {
        let template_url = self.url_of(&self.inner.template);
        let db_err = |action: &str, source| ProvisionError::Database {
            url: redact(&template_url),
            action: action.to_owned(),
            source,
        };
        let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&template_url)
            .await
            .map_err(|e| db_err("connecting to the template database", e))?;
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
            .execute(&mut conn)
            .await
            .map_err(|e| db_err("instrumenting the template database", e))?;
        let _ = sqlx::Connection::close(conn).await;
        Ok(())
    }

    /// The databases of killed runs this run dropped when it started.
    pub fn reaped(&self) -> &[String] {
        &self.inner.reaped
    }

    /// The run's template database name.
    pub fn template_name(&self) -> &str {
        &self.inner.template
    }

    /// A URL that reaches `database` with the admin credentials.
    pub fn url_of(&self, database: &str) -> String {
        let mut url = self.inner.admin_url.clone();
        url.set_path(&format!("/{database}"));
        url.to_string()
    }

    /// Keeps up to `depth` clones ready in the background, so that a scenario takes a database
    /// that is already there instead of waiting for `CREATE DATABASE`.
    pub async fn start_prefetch(&self, depth: usize) {
        let (tx, rx) = mpsc::channel(depth.max(1));
        *self.inner.prefetched.lock().await = Some(rx);
        let this = self.clone();
        let task = tokio::spawn(async move {
            loop {
                let next = this.clone_now().await;
                let failed = next.is_err();
                if let Err(unsent) = tx.send(next).await {
                    // Nobody will take it any more: do not leave it behind.
                    if let Ok(db) = unsent.0 {
                        let _ = this.drop_database(&db.name).await;
                    }
                    break;
                }
                if failed {
                    break;
                }
            }
        });
        if let Ok(mut slot) = self.inner.prefetcher.lock() {
            *slot = Some(task);
        }
    }

    /// A fresh clone of the template for one scenario (a prefetched one when available).
    pub async fn clone_for_scenario(&self) -> Result<ScenarioDatabase, ProvisionError> {
        let mut prefetched = self.inner.prefetched.lock().await;
        if let Some(rx) = prefetched.as_mut() {
            if let Some(next) = rx.recv().await {
                return next;
            }
        }
        drop(prefetched);
        self.clone_now().await
    }

    async fn clone_now(&self) -> Result<ScenarioDatabase, ProvisionError> {
        self.clone_of(&self.inner.template).await
    }

    /// A fresh clone of `template` (the run's template or one [`TemplateDatabase::derive`]
    /// made) for one scenario, made now.
    pub async fn clone_of(&self, template: &str) -> Result<ScenarioDatabase, ProvisionError> {
        let n = self.inner.counter.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}_s{n}", self.inner.prefix);
        self.copy(template, &name).await
    }

    /// Makes a template of this run's own from the run's template and `seed`, which runs on a
    /// connection to it: clones of it then start with what `seed` wrote. Returns its name.
    pub async fn derive(&self, seed: impl Seed) -> Result<String, ProvisionError> {
        let n = self.inner.counter.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}_f{n}", self.inner.prefix);
        self.seeded_copy(&name, seed).await.map(|db| db.name)
    }

    /// A fresh clone of the run's template for one scenario, with what `seed` writes on a
    /// connection to it (for a fixture only one scenario starts from: a template of its own
    /// would cost a second copy).
    pub async fn clone_seeded(&self, seed: impl Seed) -> Result<ScenarioDatabase, ProvisionError> {
        let n = self.inner.counter.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}_s{n}", self.inner.prefix);
        self.seeded_copy(&name, seed).await
    }

    async fn seeded_copy(
        &self,
        name: &str,
        seed: impl Seed,
    ) -> Result<ScenarioDatabase, ProvisionError> {
        let started = Instant::now();
        let mut copied = self.copy(&self.inner.template, name).await?;
        let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&copied.url)
            .await
            .map_err(|source| ProvisionError::Database {
                url: redact(&copied.url),
                action: format!("connecting to `{name}`"),
                source,
            })?;
        let seeded = seed(&mut conn).await;
        // No session may stay on a template that is cloned.
        let _ = sqlx::Connection::close(conn).await;
        seeded.map_err(|detail| ProvisionError::Seed {
            database: name.to_owned(),
            detail,
        })?;
        copied.clone_time = started.elapsed();
        Ok(copied)
    }

    /// `CREATE DATABASE name TEMPLATE template`, commented as this run's.
    async fn copy(&self, template: &str, name: &str) -> Result<ScenarioDatabase, ProvisionError> {
        let _guard = self.inner.clone_lock.read().await;
        let started = Instant::now();
        {
            let strategy = if self.inner.file_copy {
                " STRATEGY FILE_COPY"
            } else {
                ""
            };
            sqlx::query(AssertSqlSafe(format!(
                "CREATE DATABASE \"{name}\" TEMPLATE \"{template}\"{strategy}"
            )))
            .execute(&self.inner.admin)
            .await
            .map_err(|source| ProvisionError::Database {
                url: redact(self.inner.admin_url.as_str()),
                action: format!("cloning `{template}` into `{name}`"),
                source,
            })?;
            comment(&self.inner.admin, name, self.inner.key, false)
                .await
                .map_err(|source| ProvisionError::Database {
                    url: redact(self.inner.admin_url.as_str()),
                    action: format!("commenting `{name}`"),
                    source,
                })?;
        }
        Ok(ScenarioDatabase {
            url: self.url_of(name),
            name: name.to_owned(),
            clone_time: started.elapsed(),
        })
    }

    /// Drops a scenario's database, ending any session still connected to it.
    pub async fn drop_database(&self, name: &str) -> Result<(), ProvisionError> {
        sqlx::query(AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
        )))
        .execute(&self.inner.admin)
        .await
        .map_err(|source| ProvisionError::Database {
            url: redact(self.inner.admin_url.as_str()),
            action: format!("dropping `{name}`"),
            source,
        })?;
        Ok(())
    }

    /// Stops prefetching and drops the clones no scenario took.
    pub async fn release_prefetched(&self) -> Result<(), ProvisionError> {
        let Some(mut rx) = self.inner.prefetched.lock().await.take() else {
            return Ok(());
        };
        // Closing the channel makes the prefetcher stop after the clone it is making; waiting
        // for it means no database appears after this returns.
        rx.close();
        let task = self.inner.prefetcher.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            let _ = task.await;
        }
        while let Some(next) = rx.recv().await {
            if let Ok(db) = next {
                self.drop_database(&db.name).await?;
            }
        }
        Ok(())
    }

    /// Drops every database of this run, the template included (stops prefetching first).
    pub async fn drop_all(&self) -> Result<(), ProvisionError> {
        self.release_prefetched().await?;
        // Wait for a clone in flight to finish before listing.
        let _guard = self.inner.clone_lock.write().await;
        for name in self.names().await? {
            self.drop_database(&name).await?;
        }
        self.finish().await;
        Ok(())
    }

    /// Keeps every database of this run (`--keep-databases`): drops only the clones made ahead
    /// that no scenario took, marks the rest kept so that no later run reaps them, and returns
    /// their names, the template first.
    pub async fn keep_all(&self) -> Result<Vec<String>, ProvisionError> {
        self.release_prefetched().await?;
        let _guard = self.inner.clone_lock.write().await;
        let mut names = self.names().await?;
        for name in &names {
            comment(&self.inner.admin, name, self.inner.key, true)
                .await
                .map_err(|source| ProvisionError::Database {
                    url: redact(self.inner.admin_url.as_str()),
                    action: format!("marking `{name}` kept"),
                    source,
                })?;
        }
        self.finish().await;
        names.sort_by_key(|n| (!n.ends_with("_template"), n.len(), n.clone()));
        Ok(names)
    }

    /// The names of this run's databases.
    async fn names(&self) -> Result<Vec<String>, ProvisionError> {
        sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname ~ $1")
            .bind(format!("^{}{NAME_SUFFIX}", self.inner.prefix))
            .fetch_all(&self.inner.admin)
            .await
            .map_err(|source| ProvisionError::Database {
                url: redact(self.inner.admin_url.as_str()),
                action: "listing the run's databases".to_owned(),
                source,
            })
    }

    /// The run is over: no signal handler is to drop its databases, and its lock goes.
    async fn finish(&self) {
        live().retain(|t| !Arc::ptr_eq(&t.inner, &self.inner));
        if let Some(session) = self.inner.lock_session.lock().await.take() {
            let _ = sqlx::Connection::close(session).await;
        }
    }
}

/// Marks `database` as a database of the run `key` (kept on purpose when `kept`).
async fn comment(admin: &PgPool, database: &str, key: i32, kept: bool) -> Result<(), sqlx::Error> {
    let text = format!(
        "{COMMENT_PREFIX}{key}{}",
        if kept { KEPT_SUFFIX } else { "" }
    );
    sqlx::query(AssertSqlSafe(format!(
        "COMMENT ON DATABASE \"{database}\" IS '{text}'"
    )))
    .execute(admin)
    .await
    .map(|_| ())
}

/// Drops the databases of runs that died: those named by a run key no session holds the
/// advisory lock of, unless their comment is not this run's plain mark (kept databases, or a
/// database someone else commented). Returns the names dropped.
async fn reap_stale_databases(admin: &PgPool) -> Result<Vec<String>, sqlx::Error> {
    let held = |held: &[i64], key: i64| held.contains(&key);
    let locks = "SELECT objid::int8 FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 \
                 AND classid::int8 = $1";
    // A killed run's session may still be running its last `CREATE DATABASE`, which would
    // commit after the listing below: end such sessions and wait until they are gone. The
    // sessions are listed before the locks: a run names its sessions only once it holds its
    // lock, so a run starting between the two readings is not taken for a dead one.
    let sessions: Vec<(i32, String)> = sqlx::query_as(
        "SELECT pid, application_name FROM pg_stat_activity WHERE application_name LIKE $1 || '%'",
    )
    .bind(SESSION_PREFIX)
    .fetch_all(admin)
    .await?;
    let live: Vec<i64> = sqlx::query_scalar(locks)
        .bind(i64::from(LOCK_CLASS))
        .fetch_all(admin)
        .await?;
    let orphans: Vec<i32> = sessions
        .into_iter()
        .filter(|(_, name)| {
            name.strip_prefix(SESSION_PREFIX)
                .and_then(|key| key.parse::<i64>().ok())
                .is_some_and(|key| !held(&live, key))
        })
        .map(|(pid, _)| pid)
        .collect();
    if !orphans.is_empty() {
        // Another role's sessions may not be ours to end: then their databases stay too.
        if let Err(e) =
            sqlx::query("SELECT pg_terminate_backend(pid) FROM unnest($1::int4[]) AS pid")
                .bind(&orphans)
                .execute(admin)
                .await
        {
            tracing::warn!("cannot end the sessions of a killed run: {e}");
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let left: i64 =
                sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)")
                    .bind(&orphans)
                    .fetch_one(admin)
                    .await?;
            if left == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let named: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT datname, shobj_description(oid, 'pg_database') FROM pg_database \
         WHERE datname ~ $1",
    )
    .bind(format!("^rewind_[0-9a-f]{{8}}{NAME_SUFFIX}"))
    .fetch_all(admin)
    .await?;
    if named.is_empty() {
        return Ok(Vec::new());
    }
    // Read again: a run that started meanwhile holds its lock before it makes a database.
    let live: Vec<i64> = sqlx::query_scalar(locks)
        .bind(i64::from(LOCK_CLASS))
        .fetch_all(admin)
        .await?;
    let mut dropped = Vec::new();
    for (name, comment) in named {
        let Some(key) = name
            .get("rewind_".len().."rewind_".len() + 8)
            .and_then(|hex| i64::from_str_radix(hex, 16).ok())
        else {
            continue;
        };
        let ours = comment
            .as_deref()
            .is_none_or(|text| text == format!("{COMMENT_PREFIX}{key}"));
        if !ours || held(&live, key) {
            continue;
        }
        tracing::info!(database = %name, "dropping a database a killed run left");
        // A database of another role's killed run may not be ours to drop: leave it to them.
        match sqlx::query(AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
        )))
        .execute(admin)
        .await
        {
            Ok(_) => dropped.push(name),
            Err(e) => eprintln!(
                "warning: `{name}` was left by a killed run that this role cannot drop ({}); \
                 its owner's next run drops it",
                e.as_database_error()
                    .map(|d| d.message().to_owned())
                    .unwrap_or_else(|| e.to_string())
            ),
        }
    }
    Ok(dropped)
}

/// The URL with its password replaced, for messages.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some("***"));
            }
            parsed.to_string()
        }
        Err(_) => "<unparsable URL>".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn redacts_passwords() {
        assert_eq!(
            redact("postgres://u:secret@localhost:5432/db"),
            "postgres://u:***@localhost:5432/db"
        );
        assert_eq!(redact("not a url"), "<unparsable URL>");
    }
}
