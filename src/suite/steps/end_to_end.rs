//! End-to-end steps, for real runtimes (`@real-runtimes` scenarios): a runtime process that
//! loads its sessions again from disk, and what the runtime sent its model.

use anyhow::{anyhow, ensure};
use cucumber::{given, then};
use rewind_conformance::mocks::MockRuntime;

use super::id_list;
use crate::suite::world::RewindWorld;

/// `Given the opencode server is restarted`: a new server process on the same data, so every
/// session is detached (on disk only) until something loads it again; the implementation is
/// attached again to the new server.
#[given("the opencode server is restarted")]
async fn restart_opencode(world: &mut RewindWorld) -> anyhow::Result<()> {
    world
        .mocks
        .as_mut()
        .ok_or_else(|| anyhow!("no runtimes yet"))?
        .restart_opencode()
        .await?;
    super::runtime::reattach(world).await
}

/// `Given no runtime process holds the session of agent "cody"`: the agent's session is on disk
/// only (detached). Processes of the agent's runtime still ending are waited for, up to 10 s.
#[given(expr = "no runtime process holds the session of agent {string}")]
async fn detached(world: &mut RewindWorld, agent: String) -> anyhow::Result<()> {
    let runtime = super::runtime::fixture_runtime(world, &agent)?;
    let mock = MockRuntime::for_runtime(&runtime)
        .ok_or_else(|| anyhow!("agent `{agent}` runs on `{runtime}`, which has no runtime here"))?;
    ensure!(
        mock != MockRuntime::OpenCode,
        "an OpenCode session is held by its server: restart the server to detach it"
    );
    let started = std::time::Instant::now();
    loop {
        let alive = world.mocks()?.runtime_processes(mock).await?;
        if alive.is_empty() {
            return Ok(());
        }
        ensure!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{runtime} processes {alive:?} of this scenario still run 10 s after the last \
             delivery: the session of `{agent}` is not detached"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// `Given one codex app-server stays running and holds every thread it loads`: a live
/// session. From now on every `codex` program the implementation starts attaches to one real
/// app-server the harness keeps running (as a daemon's long-lived app-server), so a thread a
/// delivery loaded is still held in memory when the restore comes.
#[given("one codex app-server stays running and holds every thread it loads")]
async fn live_codex(world: &mut RewindWorld) -> anyhow::Result<()> {
    world
        .mocks
        .as_mut()
        .ok_or_else(|| anyhow!("no runtimes yet"))?
        .start_live_codex()
        .await?;
    Ok(())
}

/// `Then the live codex app-server served every codex call and still runs`: each `codex`
/// program the implementation started attached to the live app-server (none started one of its
/// own), and the app-server did not end: the session stayed live through the rewind.
#[then("the live codex app-server served every codex call and still runs")]
async fn live_codex_served(world: &mut RewindWorld) -> anyhow::Result<()> {
    let mocks = world
        .mocks
        .as_mut()
        .ok_or_else(|| anyhow!("no runtimes yet"))?;
    ensure!(
        mocks.live_codex_running() == Some(true),
        "the live codex app-server is not running any more"
    );
    let starts: Vec<_> = mocks
        .journal(MockRuntime::Codex)?
        .into_iter()
        .filter(|e| e.call == "process/start")
        .collect();
    ensure!(
        !starts.is_empty(),
        "the implementation started no codex program"
    );
    let own: Vec<String> = starts
        .iter()
        .filter(|e| e.detail.as_deref() != Some(rewind_mock_runtimes::proxy::LIVE_DETAIL))
        .map(|e| format!("pid {} {}", e.pid, e.request))
        .collect();
    ensure!(
        own.is_empty(),
        "codex programs started an app-server of their own instead of the live one: {own:?}"
    );
    Ok(())
}

/// The content a named message had when it was delivered.
fn delivered_content(world: &RewindWorld, name: &str) -> anyhow::Result<String> {
    world
        .deliveries
        .iter()
        .rev()
        .find(|d| d.name == name)
        .map(|d| d.content.clone())
        .ok_or_else(|| anyhow!("message `{name}` was never delivered in this scenario"))
}

/// `Then the model behind agent "cody" was sent "m4" after the turn of "m1" and nothing of
/// "m2, m3"`: among the requests the agent's runtime sent its model whose newest user turn is
/// the message's content, the fullest (a title or summary request on the side holds less) holds
/// the earlier message and an answer after it, and no turn of the rewound ones.
#[then(
    regex = r#"^the model behind agent "([^"]+)" was sent "([^"]+)" after the turn of "([^"]+)" and nothing of "([^"]+)"$"#
)]
async fn model_input(
    world: &mut RewindWorld,
    agent: String,
    sent: String,
    kept: String,
    gone: String,
) -> anyhow::Result<()> {
    let runtime = super::runtime::fixture_runtime(world, &agent)?;
    let mock = MockRuntime::for_runtime(&runtime)
        .ok_or_else(|| anyhow!("agent `{agent}` runs on `{runtime}`, which calls no model here"))?;
    let sent_text = delivered_content(world, &sent)?;
    let kept_text = delivered_content(world, &kept)?;
    let gone_texts: Vec<(String, String)> = id_list(&gone)
        .into_iter()
        .map(|name| delivered_content(world, &name).map(|c| (name, c)))
        .collect::<anyhow::Result<_>>()?;
    let inputs = world.mocks()?.model_inputs(mock).await?;
    let newest_user_is = |request: &Vec<rewind_conformance::real::fake_model::Turn>| {
        request
            .iter()
            .rev()
            .find(|t| t.role == "user")
            .is_some_and(|t| t.text.contains(&sent_text))
    };
    let seen = inputs
        .iter()
        .filter(|r| newest_user_is(r))
        .max_by_key(|r| r.len())
        .ok_or_else(|| {
            anyhow!(
                "the {runtime} model never received `{sent}` ({sent_text:?}); it received {} \
                 request(s): {inputs:#?}",
                inputs.len()
            )
        })?;
    let at = seen
        .iter()
        .position(|t| t.role == "user" && t.text.contains(&kept_text))
        .ok_or_else(|| {
            anyhow!(
                "the {runtime} model's input for `{sent}` lost the turn of `{kept}`, from before \
                 the rewind's boundary: {seen:#?}"
            )
        })?;
    ensure!(
        seen[at + 1..].iter().any(|t| t.role == "assistant"),
        "the {runtime} model's input for `{sent}` holds `{kept}` but not the answer to it: \
         {seen:#?}"
    );
    for (name, text) in &gone_texts {
        ensure!(
            !seen.iter().any(|t| t.text.contains(text.as_str())),
            "the rewound `{name}` still reached the {runtime} model with `{sent}`: {seen:#?}"
        );
    }
    Ok(())
}
