//! Steps about what a rewind leaves behind for the messages that come after it: no notice when
//! it did not complete (spec 6.4, 8), and global seqs above every one used before it (spec 6.2).

use anyhow::{anyhow, ensure, Context as _};
use cucumber::then;
use rewind_conformance::sut::RewindResponse;

use super::scrub::message_rows;
use crate::suite::world::RewindWorld;

/// The client message id prefix of a rewind notice (spec 8: `rewind-notice:<operationID>`).
const NOTICE_PREFIX: &str = "rewind-notice:";

/// `Then no rewind notice was posted`: the last rewind did not complete (it ended `failed` or
/// `repair_required`), so nothing announces that the conversation was rolled back: no new
/// `scope_messages` row with a `rewind-notice:` client message id nor any new `system` message,
/// and no published event names a rewind notice. The notice follows a successful rewind only
/// (spec 8, "成功后还必须 ... 追加一条 ... system message").
#[then("no rewind notice was posted")]
async fn no_notice(world: &mut RewindWorld) -> anyhow::Result<()> {
    if let RewindResponse::Completed { operation_id, .. } = world.last_response()? {
        anyhow::bail!(
            "the rewind completed (operation `{operation_id}`): this step checks a rewind that did \
             not"
        );
    }
    let before: Vec<String> = message_rows(world.before_snapshot()?)
        .iter()
        .filter_map(|r| r.get("id").and_then(|v| v.as_str()).map(str::to_owned))
        .collect();
    let rows: Vec<(String, String, String, Option<String>, String)> = sqlx::query_as(
        "SELECT id, scope_id, author_kind, client_message_id, content FROM scope_messages \
         WHERE author_kind = 'system' OR client_message_id LIKE 'rewind-notice:%' ORDER BY id",
    )
    .fetch_all(world.pool()?)
    .await
    .context("reading scope_messages")?;
    let new: Vec<String> = rows
        .iter()
        .filter(|(id, ..)| !before.contains(id))
        .map(|(id, scope, kind, client, content)| {
            format!(
                "`{id}` in `{scope}` ({kind}, client id {}): {content:?}",
                client.as_deref().unwrap_or("none")
            )
        })
        .collect();
    ensure!(
        new.is_empty(),
        "the rewind did not complete, yet a notice was posted: {}",
        new.join("; ")
    );
    let announced: Vec<String> = world
        .events
        .iter()
        .filter(|e| e.payload.to_string().contains(NOTICE_PREFIX))
        .map(|e| format!("{} -> {}: {}", e.name, e.scope_id, e.payload))
        .collect();
    ensure!(
        announced.is_empty(),
        "the rewind did not complete, yet a rewind notice was announced: {}",
        announced.join("; ")
    );
    Ok(())
}

/// The highest global seq the workspace of `workspace_id` had used before the last `When`: over
/// every message row (rewound ones included) and every scope's `latest_global_seq` high-water.
fn used_before(world: &RewindWorld, workspace_id: &str) -> anyhow::Result<i64> {
    let before = world.before_snapshot()?;
    let in_workspace = |r: &&serde_json::Value| {
        r.get("workspace_id").and_then(|v| v.as_str()) == Some(workspace_id)
    };
    let messages = message_rows(before)
        .iter()
        .filter(in_workspace)
        .filter_map(|r| r.get("global_seq").and_then(|v| v.as_i64()))
        .max()
        .unwrap_or(0);
    let scopes = before
        .tables
        .get("scopes")
        .into_iter()
        .flatten()
        .filter_map(|r| serde_json::from_str::<serde_json::Value>(r).ok())
        .filter(|r| in_workspace(&r))
        .filter_map(|r| r.get("latest_global_seq").and_then(|v| v.as_i64()))
        .max()
        .unwrap_or(0);
    Ok(messages.max(scopes))
}

/// `message_id`'s global seq is above every one its workspace used before the rewind, and no
/// other message of the workspace has it.
async fn global_seq_above_used(
    world: &RewindWorld,
    what: &str,
    message_id: &str,
) -> anyhow::Result<()> {
    let (workspace_id, global_seq): (String, i64) =
        sqlx::query_as("SELECT workspace_id, global_seq FROM scope_messages WHERE id = $1")
            .bind(message_id)
            .fetch_optional(world.pool()?)
            .await
            .context("reading scope_messages")?
            .ok_or_else(|| anyhow!("{what} `{message_id}` is not in scope_messages"))?;
    let high_water = used_before(world, &workspace_id)?;
    let sharing: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM scope_messages WHERE workspace_id = $1 AND global_seq = $2 AND id <> $3 \
         ORDER BY id",
    )
    .bind(&workspace_id)
    .bind(global_seq)
    .bind(message_id)
    .fetch_all(world.pool()?)
    .await
    .context("reading scope_messages")?;
    ensure!(
        sharing.is_empty(),
        "{what} `{message_id}` got global_seq {global_seq}, which messages {sharing:?} already \
         hold: a global seq is never reused"
    );
    ensure!(
        global_seq > high_water,
        "{what} `{message_id}` got global_seq {global_seq}, not above {high_water}, the highest \
         global_seq workspace `{workspace_id}` had used before the rewind (the rewound suffix's \
         global seqs stay used: the high-water mark is physical)"
    );
    Ok(())
}

/// `Then the rewind notice's global_seq is above every global_seq the workspace used before the
/// rewind` (spec 6.2: the high-water marks keep the suffix's maximum, so no new message reuses a
/// rewound global seq; the notice is a new message, spec 8).
#[then(
    "the rewind notice's global_seq is above every global_seq the workspace used before the rewind"
)]
async fn notice_global_seq(world: &mut RewindWorld) -> anyhow::Result<()> {
    let operation = match world.last_response()? {
        RewindResponse::Completed { operation_id, .. } => operation_id.clone(),
        other => return Err(anyhow!("the rewind did not complete: {other:?}")),
    };
    let client_id = format!("{NOTICE_PREFIX}{operation}");
    let id: Option<String> =
        sqlx::query_scalar("SELECT id FROM scope_messages WHERE client_message_id = $1")
            .bind(&client_id)
            .fetch_optional(world.pool()?)
            .await
            .context("reading scope_messages")?;
    let id = id.ok_or_else(|| anyhow!("the rewind posted no notice `{client_id}`"))?;
    global_seq_above_used(world, "the rewind notice", &id).await
}

/// `Then the new message's global_seq is above every global_seq the workspace used before the
/// rewind`: the last message sent in live mode (spec 6.2).
#[then(
    "the new message's global_seq is above every global_seq the workspace used before the rewind"
)]
async fn sent_global_seq(world: &mut RewindWorld) -> anyhow::Result<()> {
    let id = world
        .sent
        .as_ref()
        .map(|s| s.message_id.clone())
        .ok_or_else(|| anyhow!("no message was sent in this scenario"))?;
    global_seq_above_used(world, "the new message", &id).await
}
