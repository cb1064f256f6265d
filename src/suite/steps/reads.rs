//! Read-surface steps: a member's derived read state and message sync, as the implementation's
//! read API reports them.

use anyhow::{anyhow, ensure, Context as _};
use cucumber::{given, then, when};
use rewind_conformance::sut::{ReadState, SyncRequest};

use super::id_list;
use crate::suite::world::RewindWorld;

/// The implementation's read state of a member.
async fn member_read_state(
    world: &RewindWorld,
    user: &str,
    scope: &str,
) -> anyhow::Result<ReadState> {
    world
        .attached()?
        .api
        .read_state(scope, user)
        .await?
        .ok_or_else(|| anyhow!("human `{user}` is not a member of scope `{scope}`"))
}

/// Rows that still name a rewound message after its rewind, as a projection rebuilt late, a
/// replayed stream or old evidence would leave them: an unconsumed activity event, a pending
/// outbox row, a durable stream event and a search document. None of them is an authority for
/// transcript visibility (spec 6.1.1), so no read surface may bring the message back. They
/// carry the message's id and no text of it, so the leak scan has nothing to say about them.
#[given(regex = r#"^stale rows still name the rewound message "([^"]+)"$"#)]
async fn stale_rows(world: &mut RewindWorld, message: String) -> anyhow::Result<()> {
    let message = world.resolve(&message);
    let pool = world.pool()?.clone();
    let row: Option<(String, String, Option<String>)> = sqlx::query_as(
        "SELECT m.scope_id, s.workspace_id, m.metadata #>> '{messageRecall,status}' \
         FROM scope_messages m JOIN scopes s ON s.id = m.scope_id WHERE m.id = $1",
    )
    .bind(&message)
    .fetch_optional(&pool)
    .await
    .context("reading the message")?;
    let (scope, workspace, status) =
        row.ok_or_else(|| anyhow!("message `{message}` does not exist"))?;
    ensure!(
        status.as_deref() == Some("rewound"),
        "message `{message}` is not rewound (status {status:?}); plant stale rows after a rewind"
    );
    let recipient: Option<String> = sqlx::query_scalar(
        "SELECT user_id FROM scope_memberships WHERE scope_id = $1 AND user_id IS NOT NULL \
         ORDER BY user_id LIMIT 1",
    )
    .bind(&scope)
    .fetch_optional(&pool)
    .await
    .context("finding a member")?;
    let mut tx = pool.begin().await.context("opening a transaction")?;
    let payload = serde_json::json!({ "messageId": message });
    sqlx::query(
        "INSERT INTO scope_activity_events (scope_id, message_id, kind, status, payload) \
         VALUES ($1, $2, 'message.created', 'pending', $3)",
    )
    .bind(&scope)
    .bind(&message)
    .bind(&payload)
    .execute(&mut *tx)
    .await
    .context("planting an activity event")?;
    sqlx::query(
        "INSERT INTO im_stream_events (workspace_id, scope_id, message_id, event_type, \
         payload_json) VALUES ($1, $2, $3, 'message.created', $4)",
    )
    .bind(&workspace)
    .bind(&scope)
    .bind(&message)
    .bind(&payload)
    .execute(&mut *tx)
    .await
    .context("planting a stream event")?;
    sqlx::query(
        "INSERT INTO scope_message_search_docs (message_id, scope_id, body) \
         VALUES ($1, $2, 'a search document rebuilt late') ON CONFLICT (message_id) DO NOTHING",
    )
    .bind(&message)
    .bind(&scope)
    .execute(&mut *tx)
    .await
    .context("planting a search document")?;
    if let Some(user) = recipient {
        sqlx::query(
            "INSERT INTO scope_fanout_outbox (scope_id, message_id, recipient_kind, \
             recipient_id, status, payload) VALUES ($1, $2, 'human', $3, 'pending', $4)",
        )
        .bind(&scope)
        .bind(&message)
        .bind(&user)
        .bind(&payload)
        .execute(&mut *tx)
        .await
        .context("planting an outbox row")?;
    }
    tx.commit().await.context("committing the stale rows")?;
    Ok(())
}

/// `Then human "bob" has 0 unread messages in scope "ch-notes"`.
#[then(regex = r#"^human "([^"]+)" has (\d+) unread messages? in scope "([^"]+)"$"#)]
async fn unread(
    world: &mut RewindWorld,
    user: String,
    count: i64,
    scope: String,
) -> anyhow::Result<()> {
    let state = member_read_state(world, &user, &scope).await?;
    ensure!(
        state.unread_count == count,
        "human `{user}` has {} unread in `{scope}`, expected {count} (read state {state:?})",
        state.unread_count
    );
    Ok(())
}

/// The derived read cursor: at `cursor`, and never past the scope's visible tail (read from the
/// database through the lifecycle gate, not from the implementation's own answer).
#[then(
    regex = r#"^the read cursor of human "([^"]+)" in scope "([^"]+)" is (\d+), within the visible tail$"#
)]
async fn read_cursor(
    world: &mut RewindWorld,
    user: String,
    scope: String,
    cursor: i64,
) -> anyhow::Result<()> {
    let state = member_read_state(world, &user, &scope).await?;
    let tail: i64 = sqlx::query_scalar(
        "SELECT coalesce(max(seq), 0) FROM scope_messages \
         WHERE scope_id = $1 AND coalesce(metadata #>> '{messageRecall,status}', '') <> 'rewound'",
    )
    .bind(&scope)
    .fetch_one(world.pool()?)
    .await
    .context("reading the visible tail")?;
    ensure!(
        state.last_read_seq <= tail && state.visible_tail_seq == tail,
        "the read state of `{user}` in `{scope}` is {state:?}, but the visible tail is {tail}"
    );
    ensure!(
        state.last_read_seq == cursor,
        "the read cursor of `{user}` in `{scope}` is {}, expected {cursor}",
        state.last_read_seq
    );
    Ok(())
}

/// `When human "bob" syncs scope "ch-notes" after seq 0`.
#[when(regex = r#"^human "([^"]+)" syncs scope "([^"]+)" after seq (\d+)$"#)]
async fn sync(
    world: &mut RewindWorld,
    user: String,
    scope: String,
    after: i64,
) -> anyhow::Result<()> {
    let request = SyncRequest {
        user_id: user,
        scope_id: scope,
        after_seq: after,
        limit: 100,
    };
    let page = world.attached()?.api.sync_messages(&request).await?;
    world.sync_page = Some(page);
    Ok(())
}

/// The page holds exactly these messages, plus the rewind notice when named.
#[then(regex = r#"^the sync page holds messages "([^"]*)"( and the rewind notice)?$"#)]
async fn sync_holds(world: &mut RewindWorld, ids: String, notice: String) -> anyhow::Result<()> {
    let page = world
        .sync_page
        .as_ref()
        .ok_or_else(|| anyhow!("no sync page was read (use `When human ... syncs scope ...`)"))?;
    let mut want = id_list(&ids);
    if !notice.is_empty() {
        let notices: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM scope_messages WHERE client_message_id LIKE 'rewind-notice:%' ORDER BY seq",
        )
        .fetch_all(world.pool()?)
        .await
        .context("finding the rewind notice")?;
        ensure!(
            notices.len() == 1,
            "expected one rewind notice, found {notices:?}"
        );
        want.extend(notices);
    }
    let got: Vec<String> = page.messages.iter().map(|m| m.id.clone()).collect();
    ensure!(
        got == want && !page.has_more,
        "the sync page holds {got:?} (has more: {}), expected {want:?}",
        page.has_more
    );
    Ok(())
}

/// No rewound message appears in the page, not even as an empty placeholder.
#[then("the sync page holds no tombstone")]
async fn sync_no_tombstone(world: &mut RewindWorld) -> anyhow::Result<()> {
    let page = world
        .sync_page
        .as_ref()
        .ok_or_else(|| anyhow!("no sync page was read"))?;
    let rewound: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM scope_messages WHERE metadata #>> '{messageRecall,status}' = 'rewound'",
    )
    .fetch_all(world.pool()?)
    .await
    .context("reading rewound messages")?;
    ensure!(
        !rewound.is_empty(),
        "nothing is rewound, so the check proves nothing"
    );
    let leaked: Vec<&str> = page
        .messages
        .iter()
        .filter(|m| rewound.contains(&m.id))
        .map(|m| m.id.as_str())
        .collect();
    ensure!(
        leaked.is_empty(),
        "the sync page carries rewound messages: {leaked:?}"
    );
    Ok(())
}
