//! Steps that stage races with row locks the harness holds: the implementation's apply
//! transaction must lock the scope (spec 7), so holding that lock parks a rewind between its
//! plan and its apply, and lets the scenario change the conversation in between.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use cucumber::{given, then, when};

use crate::suite::world::RewindWorld;

/// Locks the scope's row in a transaction the harness keeps open. `FOR NO KEY UPDATE` is what an
/// `UPDATE` of the row takes: it blocks the apply's lock and updates, not the foreign-key checks
/// of rows that merely reference the scope (such as a new `rewind_operations` row).
#[given(expr = "the harness holds the row lock of scope {string}")]
async fn hold_scope_lock(world: &mut RewindWorld, scope: String) -> anyhow::Result<()> {
    let mut tx = world
        .pool()?
        .begin()
        .await
        .context("beginning the harness transaction")?;
    let found: Option<String> =
        sqlx::query_scalar("SELECT id FROM scopes WHERE id = $1 FOR NO KEY UPDATE")
            .bind(&scope)
            .fetch_optional(&mut *tx)
            .await
            .context("locking the scope row")?;
    found.ok_or_else(|| anyhow!("scope `{scope}` does not exist"))?;
    world.held = Some(tx);
    Ok(())
}

/// Some session of the scenario database is waiting on a lock (the parked rewind).
#[then("the started rewind waits on a lock")]
async fn waits_on_lock(world: &mut RewindWorld) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(world.pool()?)
        .await
        .context("reading pg_stat_activity")?;
        if waiting > 0 {
            return Ok(());
        }
        if let Some((_, task)) = &world.started {
            if task.is_finished() {
                bail!(
                    "the rewind finished without waiting for the scope's row lock \
                     (its apply transaction must lock the scope's stats/read-state rows)"
                );
            }
        }
        if Instant::now() > deadline {
            bail!("no session waited on a lock within 15s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Appends a message to the scope, as another writer would.
#[when(expr = "the harness appends a message by human {string} to scope {string}")]
async fn harness_appends(
    world: &mut RewindWorld,
    human: String,
    scope: String,
) -> anyhow::Result<()> {
    let id = format!("late-{}", uuid::Uuid::new_v4().simple());
    let query = sqlx::query(
        "WITH g AS (UPDATE workspaces w SET latest_global_seq = w.latest_global_seq + 1 \
                    FROM scopes s WHERE s.id = $2 AND w.id = s.workspace_id \
                    RETURNING w.id AS workspace_id, w.latest_global_seq), \
              s AS (UPDATE scopes SET latest_seq = latest_seq + 1, \
                    latest_global_seq = greatest(latest_global_seq, (SELECT latest_global_seq FROM g)), \
                    visible_message_count = visible_message_count + 1 \
                    WHERE id = $2 RETURNING latest_seq) \
         INSERT INTO scope_messages (id, workspace_id, scope_id, seq, global_seq, author_kind, \
                                     author_user_id, content) \
         SELECT $1, g.workspace_id, $2, s.latest_seq, g.latest_global_seq, 'human', $3, \
                'a late message CANARY-late-' || $1 FROM g, s",
    )
    .bind(&id)
    .bind(&scope)
    .bind(&human);
    // Inside the harness's transaction when it holds one (committed on release), else at once.
    match world.held.as_mut() {
        Some(tx) => query.execute(&mut **tx).await,
        None => query.execute(world.pool()?).await,
    }
    .context("appending the late message")?;
    Ok(())
}

/// Commits the harness's transaction, releasing its locks.
#[when("the harness releases its locks")]
async fn release(world: &mut RewindWorld) -> anyhow::Result<()> {
    let tx = world
        .held
        .take()
        .ok_or_else(|| anyhow!("the harness holds no transaction"))?;
    tx.commit()
        .await
        .context("committing the harness transaction")?;
    Ok(())
}
