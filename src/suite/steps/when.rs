//! When steps: the operations a scenario performs.

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

async fn rewind(world: &mut RewindWorld, request: RewindRequest) -> anyhow::Result<()> {
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
    drop(conn);
    let response = world.attached()?.api.rewind(&request).await?;
    world.last = Some((request, response));
    world.collect_events().await
}

fn actor(kind: &str, id: String) -> anyhow::Result<Actor> {
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
    let scope_id = scope_of(world, &message).await?;
    let request = RewindRequest {
        actor: actor(&kind, who)?,
        scope_id,
        target_message_id: message,
    };
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
        target_message_id: message,
    };
    rewind(world, request).await
}

/// `When the system rewinds to before message "msg-3"`.
#[when(expr = "the system rewinds to before message {string}")]
async fn system_rewinds(world: &mut RewindWorld, message: String) -> anyhow::Result<()> {
    let scope_id = scope_of(world, &message).await?;
    let request = RewindRequest {
        actor: Actor::System,
        scope_id,
        target_message_id: message,
    };
    rewind(world, request).await
}

/// `When human "alice" sends "hello" in scope "dm-1"`: a live message.
#[when(regex = r#"^(human|agent) "([^"]+)" sends "([^"]*)" in scope "([^"]+)"$"#)]
async fn sends(
    world: &mut RewindWorld,
    kind: String,
    who: String,
    content: String,
    scope_id: String,
) -> anyhow::Result<()> {
    let message = SendMessage {
        actor: actor(&kind, who)?,
        scope_id,
        content,
    };
    let sent = world.attached()?.api.send_message(&message).await?;
    world.sent = Some(sent);
    world.collect_events().await
}
