//! Live delivery steps (spec section 5: "the daemon writes a recovery point before it may
//! deliver"): messages delivered to the agents' runtimes through the implementation, the
//! recovery points it wrote, and the runtimes' state before and after a rewind.
//!
//! The order "point committed, then input delivered" is read from the delivery witness
//! ([`rewind_conformance::witness`]): each delivering input a mock runtime receives is held until
//! the harness has read the recovery points committed at that moment, together with the
//! runtime's own account of its state just before the input. Nothing here compares clocks.

use anyhow::{anyhow, bail, ensure, Context as _};
use cucumber::{given, then, when};
use rewind_conformance::mocks::{MockRuntime, SessionView};
use rewind_conformance::sut::{DeliverRequest, DeliveryOutcome, DeliveryReport, SendMessage};
use rewind_conformance::witness::{CommittedPoint, Witnessed};
use rewind_mock_runtimes::faults::FaultKind;
use serde_json::Value;

use super::id_list;
use crate::suite::world::{DeliveryRecord, RewindWorld, StartedDelivery};

/// The nil UUID, one of the zero boundary's accepted shapes (register `claude-zero-boundary`).
const NIL_UUID: &str = "00000000-0000-0000-0000-000000000000";

/// The fault-plan call names of each mock's delivering input into an existing session (claude:
/// a plain resume, or one that names its leaf or a rewind's boundary).
fn delivery_calls(mock: MockRuntime) -> &'static [&'static str] {
    match mock {
        MockRuntime::Codex => &["turn/start"],
        MockRuntime::Claude => &["resume", "resume-at"],
        MockRuntime::OpenCode => &["message"],
    }
}

/// Plants `kind` on every delivering call of `session`.
fn fault_deliveries(
    world: &RewindWorld,
    mock: MockRuntime,
    session: &str,
    kind: FaultKind,
    hang_ms: Option<u64>,
) -> anyhow::Result<()> {
    for call in delivery_calls(mock) {
        world
            .mocks()?
            .add_fault(mock, session, Some(call), kind, hang_ms)?;
    }
    Ok(())
}

/// The mock serving the agent and the session the implementation recorded for it; `why` ends
/// the error when it has none yet.
async fn agent_session_now(
    world: &RewindWorld,
    agent: &str,
    why: &str,
) -> anyhow::Result<(MockRuntime, String)> {
    let (_, mock) = agent_runtime(world, agent)?;
    let session = current_session(world, agent)
        .await?
        .ok_or_else(|| anyhow!("agent `{agent}` has no runtime session{why}"))?;
    Ok((mock, session))
}

/// The agent's runtime id (from the fixture) and the mock that serves it.
fn agent_runtime(world: &RewindWorld, agent: &str) -> anyhow::Result<(String, MockRuntime)> {
    let runtime = super::runtime::fixture_runtime(world, agent)?;
    let mock = MockRuntime::for_runtime(&runtime)
        .ok_or_else(|| anyhow!("agent `{agent}` runs on `{runtime}`, which no mock serves"))?;
    Ok((runtime, mock))
}

/// The session the implementation recorded for the agent (`agents.runtime_session_id`).
async fn current_session(world: &RewindWorld, agent: &str) -> anyhow::Result<Option<String>> {
    sqlx::query_scalar("SELECT runtime_session_id FROM agents WHERE id = $1")
        .bind(agent)
        .fetch_one(world.pool()?)
        .await
        .with_context(|| format!("reading the session of agent `{agent}`"))
}

/// Asks the implementation to deliver `name`, and records what it answered.
async fn deliver(world: &mut RewindWorld, name: &str) -> anyhow::Result<DeliveryReport> {
    let message_id = world.resolve(name);
    let content: String = sqlx::query_scalar("SELECT content FROM scope_messages WHERE id = $1")
        .bind(&message_id)
        .fetch_optional(world.pool()?)
        .await
        .context("reading the message to deliver")?
        .ok_or_else(|| anyhow!("message `{name}` does not exist"))?;
    let witnessed_before = world.mocks()?.witnessed().len();
    let request = DeliverRequest {
        message_id: message_id.clone(),
    };
    let report = world.attached()?.api.deliver(&request).await?;
    world.deliveries.push(DeliveryRecord {
        name: name.to_owned(),
        message_id,
        content,
        report: report.clone(),
        witnessed_before,
        witnessed_after: world.mocks()?.witnessed().len(),
    });
    world.collect_events().await?;
    Ok(report)
}

/// The delivery of `record`'s message (named `name`) to `agent`, as the implementation
/// reported it.
fn delivery_to<'a>(
    record: &'a DeliveryRecord,
    name: &str,
    agent: &str,
) -> anyhow::Result<&'a rewind_conformance::sut::Delivery> {
    record
        .report
        .deliveries
        .iter()
        .find(|d| d.agent_id == agent)
        .ok_or_else(|| {
            anyhow!(
                "message `{name}` was not delivered to agent `{agent}`; the implementation \
                 reported {:?}",
                record.report.deliveries
            )
        })
}

fn record<'a>(world: &'a RewindWorld, name: &str) -> anyhow::Result<&'a DeliveryRecord> {
    let id = world.resolve(name);
    world
        .deliveries
        .iter()
        .rev()
        .find(|d| d.message_id == id)
        .ok_or_else(|| anyhow!("message `{name}` was never delivered in this scenario"))
}

/// `When message "m1" is delivered`: the implementation delivers it to every agent it reaches.
#[when(expr = "message {string} is delivered")]
async fn is_delivered(world: &mut RewindWorld, name: String) -> anyhow::Result<()> {
    deliver(world, &name).await.map(|_| ())
}

/// `Given human "alice" has said "m1, m2, m3" to agent "cody" in scope "dm-codex"`: each
/// message is sent, delivered and answered in turn (its answer is named `<name>-<agent>`).
#[given(regex = r#"^human "([^"]+)" has said "([^"]+)" to agent "([^"]+)" in scope "([^"]+)"$"#)]
async fn has_said(
    world: &mut RewindWorld,
    human: String,
    names: String,
    agent: String,
    scope: String,
) -> anyhow::Result<()> {
    for name in id_list(&names) {
        send_live(
            world,
            &human,
            &scope,
            &name,
            &format!("{agent}, {name}"),
            &[&agent],
        )
        .await?;
        deliver(world, &name).await?;
        answered(world, agent.clone(), name.clone()).await?;
    }
    Ok(())
}

/// Sends a live message with a unique canary and names it.
async fn send_live(
    world: &mut RewindWorld,
    human: &str,
    scope: &str,
    name: &str,
    text: &str,
    mentions: &[&str],
) -> anyhow::Result<()> {
    let canary = uuid::Uuid::new_v4().simple().to_string();
    let message = SendMessage {
        actor: rewind_conformance::sut::Actor::Human(human.to_owned()),
        scope_id: scope.to_owned(),
        content: format!("{text} CANARY-live-{}", &canary[..12]),
        mentions: mentions.iter().map(|m| (*m).to_owned()).collect(),
    };
    let sent = world.attached()?.api.send_message(&message).await?;
    world.name_message(name, &sent.message_id)?;
    world.sent = Some(sent);
    world.collect_events().await
}

/// The witnessed input that delivered `record`'s message to `agent`, and the agent's recovery
/// point for it among the points committed at that moment (`None`: none was).
fn witnessed_delivery(
    world: &RewindWorld,
    record: &DeliveryRecord,
    agent: &str,
) -> anyhow::Result<(Witnessed, Option<CommittedPoint>)> {
    let (_, mock) = agent_runtime(world, agent)?;
    let all = world.mocks()?.witnessed();
    let candidates: Vec<&Witnessed> = all[record.witnessed_before..record.witnessed_after]
        .iter()
        .filter(|w| {
            w.request.runtime == mock.program() && w.request.input.contains(&record.content)
        })
        .collect();
    ensure!(
        !candidates.is_empty(),
        "the {} runtime never received message `{}` (its content `{}`) while it was delivered; \
         the implementation reported {:?}",
        mock.program(),
        record.name,
        record.content,
        record.report.deliveries
    );
    let is_point = |p: &&CommittedPoint| p.message_id == record.message_id && p.agent_id == agent;
    // The agent's point, as committed by the time any of these inputs arrived.
    let point = candidates
        .iter()
        .find_map(|w| w.committed.iter().find(is_point).cloned());
    let session_of = |p: &CommittedPoint| {
        ["threadId", "sessionId"]
            .iter()
            .find_map(|k| p.recovery_ref.get(*k).and_then(Value::as_str))
            .map(str::to_owned)
    };
    let chosen = match (&point, candidates.as_slice()) {
        (_, [only]) => (*only).clone(),
        (Some(p), many) => many
            .iter()
            .find(|w| Some(w.request.target.clone()) == session_of(p))
            .map(|w| (*w).clone())
            .ok_or_else(|| {
                anyhow!(
                    "agent `{agent}`'s recovery point for `{}` names session {:?}, but the \
                     runtime received the message on {:?}",
                    record.name,
                    session_of(p),
                    many.iter().map(|w| &w.request.target).collect::<Vec<_>>()
                )
            })?,
        (None, many) => bail!(
            "the {} runtime received message `{}` {} times ({:?}) and no recovery point of agent \
             `{agent}` for it was committed at any of them",
            mock.program(),
            record.name,
            many.len(),
            many.iter().map(|w| &w.request.target).collect::<Vec<_>>()
        ),
    };
    let point = chosen.committed.iter().find(is_point).cloned();
    Ok((chosen, point))
}

/// Checks that `point` restores exactly the state the runtime reported before `witness`'s input.
fn point_matches_state(
    runtime: &str,
    witness: &Witnessed,
    point: &CommittedPoint,
    world: &mut RewindWorld,
) -> anyhow::Result<()> {
    let before = &witness.request.before;
    let target = witness.request.target.as_str();
    let reference = &point.recovery_ref;
    let field = |key: &str| reference.get(key).and_then(Value::as_str);
    ensure!(
        point.runtime == runtime,
        "recovery point `{}` records runtime `{}`, but the agent runs on `{runtime}`",
        point.id,
        point.runtime
    );
    let expected_strategy = rewind_reference::capabilities::for_runtime(runtime)
        .map(|c| c.strategy)
        .ok_or_else(|| anyhow!("`{runtime}` is not a rewind-capable runtime"))?;
    ensure!(
        point.strategy == expected_strategy,
        "recovery point `{}` has strategy `{}`, expected `{expected_strategy}` for `{runtime}`",
        point.id,
        point.strategy
    );
    match runtime {
        "codex" => {
            let turns = before
                .get("turnIds")
                .and_then(Value::as_array)
                .map(Vec::len)
                .ok_or_else(|| anyhow!("the codex witness reported no turnIds: {before}"))?;
            ensure!(
                field("threadId") == Some(target),
                "recovery point `{}` names thread {:?}, but the turn was started on `{target}`",
                point.id,
                field("threadId")
            );
            ensure!(
                reference.get("turnCount").and_then(Value::as_u64) == Some(turns as u64),
                "recovery point `{}` holds turnCount {}, but the thread had {turns} turn(s) when \
                 the delivery's turn started",
                point.id,
                reference.get("turnCount").unwrap_or(&Value::Null)
            );
        }
        "claude" => {
            ensure!(
                field("sessionId") == Some(target),
                "recovery point `{}` names session {:?}, but the prompt went to `{target}`",
                point.id,
                field("sessionId")
            );
            let fresh = before.get("fresh").and_then(Value::as_bool) == Some(true);
            let boundary = reference.get("boundaryUuid").filter(|b| !b.is_null());
            if fresh {
                let reading = match boundary {
                    None => "null-or-absent",
                    Some(b) if b.as_str() == Some(NIL_UUID) => "nil-uuid",
                    Some(b) => bail!(
                        "recovery point `{}` holds boundary {b}, but the prompt started a new \
                         session: the point before a session's first input is the zero boundary",
                        point.id
                    ),
                };
                world.take_reading("claude-zero-boundary", reading)?;
            } else {
                let leaf = before.get("leafUuid").and_then(Value::as_str);
                ensure!(
                    boundary.and_then(Value::as_str) == leaf,
                    "recovery point `{}` holds boundaryUuid {}, but the session's live leaf was \
                     {leaf:?} when the prompt arrived",
                    point.id,
                    boundary.unwrap_or(&Value::Null)
                );
            }
        }
        _ => {
            ensure!(
                field("sessionId") == Some(target),
                "recovery point `{}` names session {:?}, but the prompt went to `{target}`",
                point.id,
                field("sessionId")
            );
            let message = before.get("messageId").and_then(Value::as_str);
            ensure!(
                field("messageId") == message,
                "recovery point `{}` holds messageId {:?}, but the prompt that delivered the \
                 message created user message {message:?}",
                point.id,
                field("messageId")
            );
        }
    }
    Ok(())
}

/// `Then every delivery wrote its recovery point first, holding the runtime's state at that
/// moment`: for every delivery the implementation reported in this scenario that reached a
/// runtime, the runtime received the message once, a recovery point of (message, agent) was
/// committed when it did, and that point restores exactly the state the runtime reported
/// just before the input (codex: the thread's turns; claude: the live leaf, or the zero boundary
/// for a new session; OpenCode: the user message the prompt created).
#[then("every delivery wrote its recovery point first, holding the runtime's state at that moment")]
async fn every_point_first(world: &mut RewindWorld) -> anyhow::Result<()> {
    let records = world.deliveries.clone();
    let mut checked = 0;
    for record in &records {
        for delivery in &record.report.deliveries {
            let agent = &delivery.agent_id;
            let (runtime, mock) = agent_runtime(world, agent)?;
            if delivery.outcome == DeliveryOutcome::Failed {
                continue;
            }
            let (witness, point) = witnessed_delivery(world, record, agent)?;
            let point = point.ok_or_else(|| {
                anyhow!(
                    "the {} runtime received message `{}` for agent `{agent}` (witness #{}) \
                     while no recovery point of that message and agent was committed: the point \
                     must be written before the delivery (spec section 5)",
                    mock.program(),
                    record.name,
                    witness.number
                )
            })?;
            point_matches_state(&runtime, &witness, &point, world)?;
            checked += 1;
        }
    }
    ensure!(
        checked > 0,
        "no delivery reached a runtime in this scenario"
    );
    Ok(())
}

/// `Then agent "cody" answered "m1"`: the delivery of `m1` to the agent succeeded and its
/// answer, the mock runtime's reply to the input it received, was posted verbatim as the
/// agent's message in the same scope (named `m1-cody`).
#[then(expr = "agent {string} answered {string}")]
async fn answered(world: &mut RewindWorld, agent: String, name: String) -> anyhow::Result<()> {
    let record = record(world, &name)?.clone();
    let delivery = delivery_to(&record, &name, &agent)?;
    ensure!(
        delivery.outcome == DeliveryOutcome::Delivered,
        "the delivery of `{name}` to agent `{agent}` failed: {}",
        delivery.detail.as_deref().unwrap_or("(no detail)")
    );
    let reply_id = delivery.reply_message_id.clone().ok_or_else(|| {
        anyhow!("the delivery of `{name}` to agent `{agent}` reports no answer message")
    })?;
    let (witness, _) = witnessed_delivery(world, &record, &agent)?;
    let expected = rewind_mock_runtimes::reply_to(&witness.request.input);
    let row: Option<(String, Option<String>, String, String)> = sqlx::query_as(
        "SELECT author_kind, author_agent_id, scope_id, content FROM scope_messages WHERE id = $1",
    )
    .bind(&reply_id)
    .fetch_optional(world.pool()?)
    .await
    .context("reading the answer")?;
    let (kind, author, scope, content) =
        row.ok_or_else(|| anyhow!("answer message `{reply_id}` does not exist"))?;
    let scope_of: String = sqlx::query_scalar("SELECT scope_id FROM scope_messages WHERE id = $1")
        .bind(&record.message_id)
        .fetch_one(world.pool()?)
        .await
        .context("reading the delivered message's scope")?;
    ensure!(
        kind == "agent" && author.as_deref() == Some(agent.as_str()),
        "answer `{reply_id}` is written by {kind} {author:?}, not by agent `{agent}`"
    );
    ensure!(
        scope == scope_of,
        "answer `{reply_id}` was posted in scope `{scope}`, not in `{scope_of}` where `{name}` was"
    );
    similar_asserts::assert_eq!(
        posted: content,
        runtime_answer: expected,
        "answer `{reply_id}` is not the runtime's answer, verbatim"
    );
    world.name_message(&format!("{name}-{agent}"), &reply_id)
}

/// `Then agent "cody" took "l1" without answering`: the runtime received the message and gave
/// an answer without text (the mocks do for inputs holding `[no reply]`), so nothing was posted.
#[then(expr = "agent {string} took {string} without answering")]
async fn took_silently(world: &mut RewindWorld, agent: String, name: String) -> anyhow::Result<()> {
    let record = record(world, &name)?.clone();
    let delivery = delivery_to(&record, &name, &agent)?;
    ensure!(
        delivery.outcome == DeliveryOutcome::Delivered && delivery.reply_message_id.is_none(),
        "the runtime took `{name}` and answered without text, so the delivery is delivered \
         with no answer message; the implementation reported {delivery:?}"
    );
    let (witness, _) = witnessed_delivery(world, &record, &agent)?;
    ensure!(
        rewind_mock_runtimes::reply_to(&witness.request.input).is_empty(),
        "the input `{}` does not ask the mock for an empty answer (`{}`)",
        witness.request.input,
        rewind_mock_runtimes::NO_REPLY_MARKER
    );
    Ok(())
}

/// `Then any recovery point the failed delivery of "m2" to agent "cody" left restores the noted
/// state`: the spec does not say whether a point written for a delivery the runtime then failed
/// stays (register entry `failed-delivery-point`); when it stays it must restore the state the
/// runtime still has (codex: as many turns; claude: the live leaf; OpenCode: a message the
/// session does not hold, so reverting to it drops nothing).
#[then(
    expr = "any recovery point the failed delivery of {string} to agent {string} left restores the noted state"
)]
async fn failed_point(world: &mut RewindWorld, name: String, agent: String) -> anyhow::Result<()> {
    let message_id = world.resolve(&name);
    let (runtime, _) = agent_runtime(world, &agent)?;
    let (session, noted) = world
        .noted
        .get(&agent)
        .cloned()
        .ok_or_else(|| anyhow!("the runtime state of agent `{agent}` was not noted"))?;
    let point: Option<Value> = sqlx::query_scalar(
        "SELECT recovery_ref FROM message_recovery_points WHERE message_id = $1 AND agent_id = $2",
    )
    .bind(&message_id)
    .bind(&agent)
    .fetch_optional(world.pool()?)
    .await
    .context("reading the recovery point")?;
    let Some(reference) = point else {
        return world.take_reading("failed-delivery-point", "point-dropped");
    };
    let field = |key: &str| reference.get(key).and_then(Value::as_str);
    let session_key = if runtime == "codex" {
        "threadId"
    } else {
        "sessionId"
    };
    ensure!(
        field(session_key) == Some(session.as_str()),
        "the point left for `{name}` names {session_key} {:?}, not the agent's session `{session}`",
        field(session_key)
    );
    match runtime.as_str() {
        "codex" => ensure!(
            reference.get("turnCount").and_then(Value::as_u64) == Some(noted.len() as u64),
            "the point left for `{name}` holds turnCount {}, but the thread still has {} turn(s)",
            reference.get("turnCount").unwrap_or(&Value::Null),
            noted.len()
        ),
        "claude" => {
            // The live leaf may be the last message or an entry a release writes after it (a
            // 2.1.332 `prompt_snapshot`): either continues from the same conversation.
            let view = world
                .mocks()?
                .view_session(MockRuntime::Claude, &session)
                .await?;
            let leaf = view
                .as_ref()
                .filter(|v| v.ids == noted)
                .and_then(|v| v.leaf.clone());
            let boundary = field("boundaryUuid");
            ensure!(
                boundary.is_some()
                    && (boundary == noted.last().map(String::as_str)
                        || boundary == leaf.as_deref()),
                "the point left for `{name}` holds boundaryUuid {boundary:?}, but the live leaf \
                 is {:?} (its last message {:?})",
                leaf,
                noted.last()
            );
        }
        _ => ensure!(
            field("messageId").is_some_and(|m| !noted.iter().any(|n| n == m)),
            "the point left for `{name}` holds messageId {:?}, a message the session still \
             holds: reverting to it would drop it",
            field("messageId")
        ),
    }
    world.take_reading("failed-delivery-point", "point-kept")
}

/// `When human "alice" starts sending "..." in scope "dm-codex" as "m4", then its delivery`: in
/// the background (it may wait on a lock a rewind holds), the message is sent and then
/// delivered.
#[when(
    regex = r#"^human "([^"]+)" starts sending "([^"]*)" in scope "([^"]+)" as "([^"]+)", then its delivery$"#
)]
async fn starts_sending(
    world: &mut RewindWorld,
    human: String,
    text: String,
    scope: String,
    name: String,
) -> anyhow::Result<()> {
    let canary = uuid::Uuid::new_v4().simple().to_string();
    let content = format!("{text} CANARY-live-{}", &canary[..12]);
    let message = SendMessage {
        actor: rewind_conformance::sut::Actor::Human(human),
        scope_id: scope,
        content: content.clone(),
        mentions: Vec::new(),
    };
    let api = std::sync::Arc::clone(&world.attached()?.api);
    let witnessed_before = world.mocks()?.witnessed().len();
    let task = tokio::spawn(async move {
        let sent = api.send_message(&message).await?;
        let report = api
            .deliver(&DeliverRequest {
                message_id: sent.message_id.clone(),
            })
            .await?;
        Ok((sent.message_id, report))
    });
    world.started_deliveries.push(StartedDelivery {
        name,
        content,
        witnessed_before,
        task,
    });
    Ok(())
}

/// `When the delivery of message "m3" starts`: in the background (it may wait on a lock a
/// rewind holds).
#[when(expr = "the delivery of message {string} starts")]
async fn delivery_starts(world: &mut RewindWorld, name: String) -> anyhow::Result<()> {
    let message_id = world.resolve(&name);
    let content: String = sqlx::query_scalar("SELECT content FROM scope_messages WHERE id = $1")
        .bind(&message_id)
        .fetch_optional(world.pool()?)
        .await
        .context("reading the message to deliver")?
        .ok_or_else(|| anyhow!("message `{name}` does not exist"))?;
    let api = std::sync::Arc::clone(&world.attached()?.api);
    let witnessed_before = world.mocks()?.witnessed().len();
    let task = tokio::spawn(async move {
        let report = api
            .deliver(&DeliverRequest {
                message_id: message_id.clone(),
            })
            .await?;
        Ok((message_id, report))
    });
    world.started_deliveries.push(StartedDelivery {
        name,
        content,
        witnessed_before,
        task,
    });
    Ok(())
}

/// Awaits every delivery started in the background, in the order they were started.
#[when("the started deliveries finish")]
async fn started_deliveries_finish(world: &mut RewindWorld) -> anyhow::Result<()> {
    let started = std::mem::take(&mut world.started_deliveries);
    ensure!(
        !started.is_empty(),
        "no delivery was started in the background"
    );
    let limit = std::time::Duration::from_secs(60);
    for StartedDelivery {
        name,
        content,
        witnessed_before,
        task,
    } in started
    {
        let (message_id, report) = tokio::time::timeout(limit, task)
            .await
            .map_err(|_| {
                anyhow!(
                    "the delivery of `{name}` did not finish within {}s",
                    limit.as_secs()
                )
            })?
            .context("the started delivery panicked")??;
        world.name_message(&name, &message_id)?;
        world.deliveries.push(DeliveryRecord {
            name,
            message_id,
            content,
            report,
            witnessed_before,
            witnessed_after: world.mocks()?.witnessed().len(),
        });
    }
    world.collect_events().await
}

/// `Then the delivery of "m2" to agent "cody" failed, and nothing answered it`.
#[then(expr = "the delivery of {string} to agent {string} failed, and nothing answered it")]
async fn delivery_failed(
    world: &mut RewindWorld,
    name: String,
    agent: String,
) -> anyhow::Result<()> {
    let record = record(world, &name)?.clone();
    let delivery = delivery_to(&record, &name, &agent)?;
    ensure!(
        delivery.outcome == DeliveryOutcome::Failed && delivery.reply_message_id.is_none(),
        "the runtime failed the delivery, but the implementation reported {delivery:?}"
    );
    let later: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM scope_messages m, scope_messages d \
         WHERE d.id = $1 AND m.author_agent_id = $2 AND m.global_seq > d.global_seq",
    )
    .bind(&record.message_id)
    .bind(&agent)
    .fetch_one(world.pool()?)
    .await
    .context("looking for an answer")?;
    ensure!(
        later == 0,
        "agent `{agent}` posted {later} message(s) after `{name}`, whose delivery failed"
    );
    Ok(())
}

/// `Then message "n" was delivered to no agent`: the last delivery request for it handed it to
/// no runtime.
#[then(expr = "message {string} was delivered to no agent")]
async fn delivered_to_none(world: &mut RewindWorld, name: String) -> anyhow::Result<()> {
    let record = record(world, &name)?;
    ensure!(
        record.report.deliveries.is_empty(),
        "message `{name}` was handed to agents: {:?}",
        record.report.deliveries
    );
    let received: Vec<String> = world.mocks()?.witnessed()
        [record.witnessed_before..record.witnessed_after]
        .iter()
        .filter(|w| w.request.input.contains(&record.content))
        .map(|w| {
            format!(
                "{} {}: {}",
                w.request.runtime, w.request.target, w.request.input
            )
        })
        .collect();
    ensure!(
        received.is_empty(),
        "no delivery was reported for `{name}`, yet runtimes received it: {received:?}"
    );
    Ok(())
}

/// `Then message "p2" was not delivered to agent "ode"`: no delivery of it to that agent was
/// reported, and the agent's runtime never received it.
#[then(expr = "message {string} was not delivered to agent {string}")]
async fn not_delivered_to(
    world: &mut RewindWorld,
    name: String,
    agent: String,
) -> anyhow::Result<()> {
    let record = record(world, &name)?.clone();
    ensure!(
        record.report.deliveries.iter().all(|d| d.agent_id != agent),
        "message `{name}` does not reach agent `{agent}`, yet the implementation reported {:?}",
        record.report.deliveries
    );
    let (_, mock) = agent_runtime(world, &agent)?;
    let session = current_session(world, &agent).await?;
    let received: Vec<String> = world.mocks()?.witnessed()
        [record.witnessed_before..record.witnessed_after]
        .iter()
        .filter(|w| w.request.runtime == mock.program())
        .filter(|w| session.as_deref().is_none_or(|s| s == w.request.target))
        .filter(|w| w.request.input.contains(&record.content))
        .map(|w| format!("{}: {}", w.request.target, w.request.input))
        .collect();
    ensure!(
        received.is_empty(),
        "message `{name}` does not reach agent `{agent}`, yet its runtime received it: {received:?}"
    );
    Ok(())
}

/// `Given agent "ode" answers its next delivery only after 4000 ms`: a slow model; the
/// delivering call of the agent's current session is held that long (the runtime is busy with
/// the prompt meanwhile).
#[given(regex = r#"^agent "([^"]+)" answers its next delivery only after (\d+) ms$"#)]
async fn slow_next_delivery(world: &mut RewindWorld, agent: String, ms: u64) -> anyhow::Result<()> {
    let (mock, session) = agent_session_now(world, &agent, " yet to slow down").await?;
    if world.mocks()?.is_real() {
        // A real runtime is slowed where a slow model slows it: inside its turn, busy meanwhile.
        world.slowed_model_baseline = Some(world.mocks()?.slow_model(mock, ms).await?);
        return Ok(());
    }
    fault_deliveries(world, mock, &session, FaultKind::Hang, Some(ms))
}

/// `When the runtime of agent "ode" is working on a delivery`: waits (10 s at most) until the
/// agent's runtime journal shows a delivering call on its session that has not been answered.
#[when(expr = "the runtime of agent {string} is working on a delivery")]
async fn working_on_delivery(world: &mut RewindWorld, agent: String) -> anyhow::Result<()> {
    let (mock, session) = agent_session_now(world, &agent, "").await?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        // Only delivering calls are held (`answers its next delivery only after`); a slowed real
        // runtime is working once its model has a request it has not answered yet.
        let working = match world.slowed_model_baseline {
            Some(before) => world.mocks()?.model_requests(mock).await? > before,
            None => world.mocks()?.journal(mock)?.iter().any(|e| {
                e.target.as_deref() == Some(session.as_str())
                    && e.outcome == FaultKind::Hang.outcome()
            }),
        };
        if working {
            return Ok(());
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "the {} runtime of agent `{agent}` received no delivery within 10 s",
            mock.program()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// `Then the rewind failed its restore, leaving "m2, m2-ode, m3" as they were, or completed after
/// the running delivery to agent "ode" with them rewound`: a restore that meets a runtime busy
/// with a prompt (register `busy-runtime-restore`). Refused: a failed runtime restore, every
/// listed message still visible, and the running prompt's answer posted once it came. Completed:
/// every listed message a tombstone, no answer of the agent visible after them, and the runtime
/// as it was before the first of them was delivered.
#[then(
    regex = r#"^the rewind failed its restore, leaving "([^"]+)" as they were, or completed after the running delivery to agent "([^"]+)" with them rewound$"#
)]
async fn busy_restore(world: &mut RewindWorld, names: String, agent: String) -> anyhow::Result<()> {
    let ids: Vec<String> = id_list(&names).iter().map(|n| world.resolve(n)).collect();
    let refused = matches!(
        world.last_response()?,
        rewind_conformance::sut::RewindResponse::Refused { .. }
    );
    let rows: Vec<(String, String, Value)> = sqlx::query_as(
        "SELECT id, content, metadata FROM scope_messages WHERE id = ANY($1) ORDER BY seq",
    )
    .bind(&ids)
    .fetch_all(world.pool()?)
    .await
    .context("reading the messages")?;
    ensure!(rows.len() == ids.len(), "some of `{names}` do not exist");
    let rewound =
        |m: &Value| m.pointer("/messageRecall/status").and_then(Value::as_str) == Some("rewound");
    let later: Vec<String> = sqlx::query_scalar(
        "SELECT m.id FROM scope_messages m, scope_messages last \
         WHERE last.id = $1 AND m.scope_id = last.scope_id AND m.seq > last.seq \
           AND m.author_agent_id = $2 \
           AND coalesce(m.metadata #>> '{messageRecall,status}', '') <> 'rewound'",
    )
    .bind(ids.last())
    .bind(&agent)
    .fetch_all(world.pool()?)
    .await
    .context("looking for the running delivery's answer")?;
    if refused {
        super::runtime::refused_as_restore_failure(world).await?;
        for (id, content, metadata) in &rows {
            ensure!(
                !rewound(metadata) && !content.is_empty(),
                "the restore failed, yet message `{id}` was rewound"
            );
        }
        ensure!(
            later.len() == 1,
            "the rewind was refused, so the running delivery's answer must be posted once; agent \
             `{agent}` posted {later:?} after them"
        );
        world.take_reading("busy-runtime-restore", "refuse")
    } else {
        for (id, content, metadata) in &rows {
            ensure!(
                rewound(metadata) && content.is_empty(),
                "the rewind completed, yet message `{id}` is not a rewound tombstone"
            );
        }
        ensure!(
            later.is_empty(),
            "the rewind completed over the running delivery, yet agent `{agent}`'s answer to it is \
             visible: {later:?}"
        );
        // The runtime must not keep the running prompt: it is where it was before the target.
        let target = id_list(&names).into_iter().next().unwrap_or_default();
        as_before_delivery(world, agent, target).await?;
        world.take_reading("busy-runtime-restore", "wait-then-restore")
    }
}

/// `Given agent "cody" fails its next delivery with "error"`: a fault on the delivering call of
/// the agent's current runtime session.
#[given(regex = r#"^agent "([^"]+)" fails its next deliver(?:y|ies) with "([^"]+)"$"#)]
async fn fails_next_delivery(
    world: &mut RewindWorld,
    agent: String,
    kind: String,
) -> anyhow::Result<()> {
    let (mock, session) = agent_session_now(world, &agent, " yet to plant a fault on").await?;
    let kind = FaultKind::parse(&kind).ok_or_else(|| {
        anyhow!(
            "unknown fault `{kind}` (known: {})",
            FaultKind::ALL.map(FaultKind::label).join(", ")
        )
    })?;
    fault_deliveries(world, mock, &session, kind, None)
}

/// `Given the runtime of agent "clio" answers normally again`: the faults planted on the
/// agent's current session are lifted.
#[given(expr = "the runtime of agent {string} answers normally again")]
async fn answers_normally(world: &mut RewindWorld, agent: String) -> anyhow::Result<()> {
    let (mock, session) = agent_session_now(world, &agent, "").await?;
    world.mocks()?.clear_faults(mock, &session)?;
    Ok(())
}

/// The runtime state a session shows now, as comparable ids (effective messages for OpenCode: a
/// pending revert hides its message and everything after it).
fn effective(view: &SessionView) -> Vec<String> {
    match &view.reverted_at {
        Some(at) => view
            .ids
            .iter()
            .take_while(|id| *id != at)
            .cloned()
            .collect(),
        None => view.ids.clone(),
    }
}

/// The ids the witness reported as the runtime's state before an input.
fn before_ids(witness: &Witnessed) -> anyhow::Result<Vec<String>> {
    let key = match witness.request.runtime.as_str() {
        "codex" => "turnIds",
        "claude" => "chain",
        _ => "messageIds",
    };
    witness
        .request
        .before
        .get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .ok_or_else(|| {
            anyhow!(
                "the witness reported no `{key}`: {}",
                witness.request.before
            )
        })
}

/// `Then the runtime of agent "cody" is as it was before "m2" was delivered`: the session the
/// delivery went to shows exactly the state the runtime reported just before it (codex turns,
/// the claude live chain, OpenCode's effective messages). For a claude session that did not
/// exist before (the zero boundary), the agent no longer points at it: its next delivery starts
/// a new session.
#[then(expr = "the runtime of agent {string} is as it was before {string} was delivered")]
async fn as_before_delivery(
    world: &mut RewindWorld,
    agent: String,
    name: String,
) -> anyhow::Result<()> {
    let record = record(world, &name)?.clone();
    let (_, mock) = agent_runtime(world, &agent)?;
    let (witness, _) = witnessed_delivery(world, &record, &agent)?;
    let target = witness.request.target.clone();
    let fresh = witness.request.before.get("fresh").and_then(Value::as_bool) == Some(true);
    if mock == MockRuntime::Claude && fresh {
        let now = current_session(world, &agent).await?;
        ensure!(
            now.as_deref() != Some(target.as_str()),
            "agent `{agent}` still points at session `{target}`, which began with `{name}`: its \
             next delivery would resume the rewound context"
        );
        return Ok(());
    }
    let view = world
        .mocks()?
        .view_session(mock, &target)
        .await?
        .ok_or_else(|| {
            anyhow!(
                "the {} runtime no longer has session `{target}`",
                mock.program()
            )
        })?;
    let expected = before_ids(&witness)?;
    if mock == MockRuntime::Claude {
        // The boundary may take effect only with the next prompt (register
        // `claude-restore-evidence`): then the session is still as the last turn left it,
        // and a run validated the boundary.
        let boundary = witness
            .request
            .before
            .get("leafUuid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let journal = world.mocks()?.journal(mock)?;
        let validated = journal.iter().any(|e| {
            let argv = super::runtime::argv(e);
            e.outcome == "ok"
                && !super::runtime::carries_prompt(e)
                && super::runtime::flag_value(&argv, "--resume").as_deref() == Some(target.as_str())
                && super::runtime::flag_value(&argv, "--resume-session-at").as_deref()
                    == Some(boundary.as_str())
        });
        if let Some(reading) =
            super::runtime::claude_restore_reading(&effective(&view), &expected, validated)
        {
            return world.take_reading("claude-restore-evidence", reading);
        }
    }
    similar_asserts::assert_eq!(
        now: effective(&view),
        before_the_delivery: expected,
        "the {} session `{target}` of agent `{agent}` is not as it was before `{name}` was delivered",
        mock.program()
    );
    Ok(())
}

/// `Then agent "cody" received "m4" in the state it had before "m2"`: the runtime's state when
/// `m4` arrived equals its state when `m2` arrived (a rewind to before `m2` restored it, and the
/// next delivery continued from there).
#[then(expr = "agent {string} received {string} in the state it had before {string}")]
async fn received_in_state(
    world: &mut RewindWorld,
    agent: String,
    later: String,
    earlier: String,
) -> anyhow::Result<()> {
    let later_record = record(world, &later)?.clone();
    let earlier_record = record(world, &earlier)?.clone();
    let (later_witness, _) = witnessed_delivery(world, &later_record, &agent)?;
    let (earlier_witness, _) = witnessed_delivery(world, &earlier_record, &agent)?;
    let fresh = |w: &Witnessed| w.request.before.get("fresh").and_then(Value::as_bool);
    ensure!(
        fresh(&later_witness) == fresh(&earlier_witness),
        "`{later}` arrived in a {} session, `{earlier}` in a {} one",
        if fresh(&later_witness) == Some(true) {
            "new"
        } else {
            "continued"
        },
        if fresh(&earlier_witness) == Some(true) {
            "new"
        } else {
            "continued"
        },
    );
    similar_asserts::assert_eq!(
        when_later_arrived: before_ids(&later_witness)?,
        when_earlier_arrived: before_ids(&earlier_witness)?,
        "agent `{agent}` received `{later}` in another state than it had before `{earlier}`"
    );
    if !fresh(&earlier_witness).unwrap_or(false) {
        ensure!(
            later_witness.request.target == earlier_witness.request.target,
            "`{later}` went to session `{}`, `{earlier}` to `{}`",
            later_witness.request.target,
            earlier_witness.request.target
        );
    }
    Ok(())
}

/// `Then agent "cody" received "m5" right after its answer to "m4"`: the runtime's state when
/// `m5` arrived is its state when `m4` arrived plus the one turn `m4` made (a codex turn; a
/// claude or OpenCode prompt and its answer), in the same session: nothing a rewind left for
/// the next delivery is applied again.
#[then(expr = "agent {string} received {string} right after its answer to {string}")]
async fn received_right_after(
    world: &mut RewindWorld,
    agent: String,
    later: String,
    earlier: String,
) -> anyhow::Result<()> {
    let later_record = record(world, &later)?.clone();
    let earlier_record = record(world, &earlier)?.clone();
    let (later_witness, _) = witnessed_delivery(world, &later_record, &agent)?;
    let (earlier_witness, _) = witnessed_delivery(world, &earlier_record, &agent)?;
    let (_, mock) = agent_runtime(world, &agent)?;
    let turn = if mock == MockRuntime::Codex { 1 } else { 2 };
    let before_later = before_ids(&later_witness)?;
    let before_earlier = before_ids(&earlier_witness)?;
    ensure!(
        before_later.len() == before_earlier.len() + turn
            && before_later.starts_with(&before_earlier),
        "agent `{agent}` received `{later}` in the state {before_later:?}, but `{earlier}` arrived \
         in {before_earlier:?} and its turn adds {turn} entr{}",
        if turn == 1 { "y" } else { "ies" }
    );
    ensure!(
        later_witness.request.target == earlier_witness.request.target,
        "`{later}` went to session `{}`, `{earlier}` to `{}`",
        later_witness.request.target,
        earlier_witness.request.target
    );
    Ok(())
}

/// `When the runtime state of agent "cody" is noted`: its current session's state, for a later
/// `is as noted`.
#[when(expr = "the runtime state of agent {string} is noted")]
async fn note_state(world: &mut RewindWorld, agent: String) -> anyhow::Result<()> {
    let (mock, session) = agent_session_now(world, &agent, "").await?;
    let view = world
        .mocks()?
        .view_session(mock, &session)
        .await?
        .ok_or_else(|| anyhow!("the {} runtime has no session `{session}`", mock.program()))?;
    world.noted.insert(agent, (session, effective(&view)));
    Ok(())
}

/// `Then the runtime of agent "cody" is as noted`.
#[then(expr = "the runtime of agent {string} is as noted")]
async fn as_noted(world: &mut RewindWorld, agent: String) -> anyhow::Result<()> {
    let (_, mock) = agent_runtime(world, &agent)?;
    let (session, noted) = world
        .noted
        .get(&agent)
        .cloned()
        .ok_or_else(|| anyhow!("the runtime state of agent `{agent}` was not noted"))?;
    let view = world
        .mocks()?
        .view_session(mock, &session)
        .await?
        .ok_or_else(|| anyhow!("the {} runtime has no session `{session}`", mock.program()))?;
    similar_asserts::assert_eq!(
        now: effective(&view),
        noted: noted,
        "the {} session `{session}` of agent `{agent}` changed",
        mock.program()
    );
    Ok(())
}
