//! When steps: the operations a scenario performs.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use cucumber::when;
use rewind_conformance::sut::{Actor, RewindRequest, SendMessage};

use crate::suite::world::RewindWorld;

async fn scope_of(world: &RewindWorld, message_id: &str) -> anyhow::Result<String> {
    sqlx::query_scalar::<_, String>("SELECT scope_id FROM scope_messages WHERE id = $1")
        .bind(message_id)
        .fetch_optional(world.pool()?)
        .await
        .context("looking up the message's scope")?
        .ok_or_else(|| anyhow!("message `{message_id}` is not in the scenario's conversation"))
}

/// How long a rewind may take before the harness calls it hung: a little longer than one call
/// may take (`--request-timeout`, 30 s by default), so that a server's time-out is reported by
/// the call that timed out.
pub(super) fn rewind_timeout() -> Duration {
    let request = crate::suite::world::context()
        .map(|c| Duration::from_millis(c.limits.request_timeout_ms))
        .unwrap_or(Duration::from_secs(30));
    request + Duration::from_secs(5)
}

/// Remembers the database and the statement-log position before an operation.
pub(super) async fn mark_before(world: &mut RewindWorld) -> anyhow::Result<()> {
    world.before = Some(world.snapshot().await?);
    let mut conn = world
        .pool()?
        .acquire()
        .await
        .context("acquiring a connection")?;
    world.log_mark = Some(
        rewind_conformance::inspect::log_position(&mut conn)
            .await
            .context("reading the statement log")?,
    );
    Ok(())
}

pub(super) async fn rewind(world: &mut RewindWorld, request: RewindRequest) -> anyhow::Result<()> {
    // A rewind racing a started one keeps the snapshot taken before the first.
    if world.started.is_none() {
        mark_before(world).await?;
    }
    #[cfg(feature = "browser")]
    super::client::before_rewind(world).await?;
    let api = Arc::clone(&world.attached()?.api);
    let limit = rewind_timeout();
    let response = tokio::time::timeout(limit, api.rewind(&request))
        .await
        .map_err(|_| {
            anyhow!(
                "the rewind did not answer within {}s (is it waiting on another operation \
                 instead of refusing?)",
                limit.as_secs()
            )
        })??;
    #[cfg(feature = "browser")]
    super::client::after_rewind(
        world,
        matches!(
            response,
            rewind_conformance::sut::RewindResponse::Completed { .. }
        ),
    );
    world.record_answer(request, response);
    world.collect_events().await?;
    world.events_mark = Some(world.events.len());
    world.reads_mark = Some(world.reads.len());
    Ok(())
}

/// `When human "alice" starts rewinding to before message "n-4"`: in the background, so that a
/// scenario can act while it runs (typically while it waits on a lock the harness holds).
#[when(regex = r#"^(human|agent) "([^"]+)" starts rewinding to before message "([^"]+)"$"#)]
async fn starts_rewinding(
    world: &mut RewindWorld,
    kind: String,
    who: String,
    message: String,
) -> anyhow::Result<()> {
    let request = request_in_own_scope(world, actor(&kind, who)?, message).await?;
    mark_before(world).await?;
    let api = Arc::clone(&world.attached()?.api);
    let background = request.clone();
    let task = tokio::spawn(async move { api.rewind(&background).await });
    world.started = Some((request, task));
    Ok(())
}

/// Awaits the rewind started in the background; its answer becomes the scenario's last answer.
#[when("the started rewind finishes")]
async fn started_finishes(world: &mut RewindWorld) -> anyhow::Result<()> {
    finish_started(world).await
}

/// See [`started_finishes`].
pub(super) async fn finish_started(world: &mut RewindWorld) -> anyhow::Result<()> {
    let (request, task) = world
        .started
        .take()
        .ok_or_else(|| anyhow!("no rewind was started in the background"))?;
    let limit = rewind_timeout();
    let response = tokio::time::timeout(limit, task)
        .await
        .map_err(|_| {
            anyhow!(
                "the started rewind did not finish within {}s",
                limit.as_secs()
            )
        })?
        .context("the started rewind panicked")??;
    world.record_answer(request, response);
    world.collect_events().await?;
    world.events_mark = Some(world.events.len());
    world.reads_mark = Some(world.reads.len());
    Ok(())
}

/// A rewind of `message`'s own scope by `actor`.
pub(super) async fn request_in_own_scope(
    world: &RewindWorld,
    actor: Actor,
    message: String,
) -> anyhow::Result<RewindRequest> {
    let message = world.resolve(&message);
    Ok(RewindRequest {
        actor,
        scope_id: scope_of(world, &message).await?,
        target_message_id: message,
    })
}

pub(crate) fn actor(kind: &str, id: String) -> anyhow::Result<Actor> {
    match kind {
        "human" => Ok(Actor::Human(id)),
        "agent" => Ok(Actor::Agent(id)),
        other => Err(anyhow!(
            "unknown actor kind `{other}` (expected `human` or `agent`)"
        )),
    }
}

/// `When human "alice" rewinds to before message "msg-3"`: the scope is the message's own.
#[when(regex = r#"^(human|agent) "([^"]+)" rewinds to before message "([^"]+)"$"#)]
async fn rewinds_to_before(
    world: &mut RewindWorld,
    kind: String,
    who: String,
    message: String,
) -> anyhow::Result<()> {
    let request = request_in_own_scope(world, actor(&kind, who)?, message).await?;
    rewind(world, request).await
}

/// `When human "alice" rewinds scope "dm-1" to before message "msg-3"`: an explicit scope.
#[when(regex = r#"^(human|agent) "([^"]+)" rewinds scope "([^"]+)" to before message "([^"]+)"$"#)]
async fn rewinds_scope_to_before(
    world: &mut RewindWorld,
    kind: String,
    who: String,
    scope_id: String,
    message: String,
) -> anyhow::Result<()> {
    let request = RewindRequest {
        actor: actor(&kind, who)?,
        scope_id,
        target_message_id: world.resolve(&message),
    };
    rewind(world, request).await
}

/// `When the system rewinds scope "dm-1" to before message "msg-3"`: an explicit scope.
#[when(expr = "the system rewinds scope {string} to before message {string}")]
async fn system_rewinds_scope(
    world: &mut RewindWorld,
    scope_id: String,
    message: String,
) -> anyhow::Result<()> {
    let request = RewindRequest {
        actor: Actor::System,
        scope_id,
        target_message_id: world.resolve(&message),
    };
    rewind(world, request).await
}

/// `When the system rewinds to before message "msg-3"`.
#[when(expr = "the system rewinds to before message {string}")]
async fn system_rewinds(world: &mut RewindWorld, message: String) -> anyhow::Result<()> {
    let request = request_in_own_scope(world, Actor::System, message).await?;
    rewind(world, request).await
}

/// `When human "alice" sends "hello" in scope "dm-1"`: a live message; with `as "<name>"`, later
/// steps can name it (e.g. rewind to before it).
/// With `mentioning "cody, ode"`, a channel message reaches those agents.
#[when(
    regex = r#"^(human|agent) "([^"]+)" sends "([^"]*)" in scope "([^"]+)"(?: mentioning "([^"]+)")?(?: as "([^"]+)")?$"#
)]
async fn sends(
    world: &mut RewindWorld,
    kind: String,
    who: String,
    content: String,
    scope_id: String,
    mentions: String,
    name: String,
) -> anyhow::Result<()> {
    let message = SendMessage {
        actor: actor(&kind, who)?,
        scope_id,
        content,
        mentions: super::id_list(&mentions),
    };
    let sent = world.attached()?.api.send_message(&message).await?;
    if !name.is_empty() {
        world.name_message(&name, &sent.message_id)?;
    }
    world.sent = Some(sent);
    world.collect_events().await
}
