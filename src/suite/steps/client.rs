//! The browser client steps (`features/client.feature`): a page in headless Chromium showing one
//! scope to one human, through the gateway ([`rewind_conformance::browser::gateway`]) whose
//! network the scenario controls.
//!
//! The realtime events the implementation publishes reach the page as websocket frames: every
//! step that collects events (a rewind, a live message) also hands them to the gateway, and a
//! completed rewind starts a new cursor epoch first (see [`after_rewind`]).
//!
//! Every `Then` waits for the page to settle (no request in flight and nothing new for a short
//! while; traffic the network holds does not count) and compares what the page shows and keeps
//! with what the implementation shows the same human through its own read surfaces, never with
//! what the reference client happens to do.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{anyhow, bail, ensure, Context as _};
use cucumber::{given, then, when};
use regex::Regex;
use rewind_conformance::browser::gateway::{self, Exchange, GatewayConfig, Kind, Outcome, Rule};
use rewind_conformance::browser::{ClientSession, Shown};
use rewind_conformance::sut::{Actor, ReadAnswer, ReadRequest, ReadSurface, RewindResponse};

use crate::suite::world::{self, RewindWorld};

/// How long a positive observation may take to appear on the page.
const SHOW_LIMIT: Duration = Duration::from_secs(10);

/// What the scenario asked of the browser before the page opened.
#[derive(Debug, Default)]
pub struct PendingBrowser {
    /// The sync page size.
    page_limit: Option<usize>,
    /// Network rules, in order.
    rules: Vec<(Kind, Rule)>,
}

/// The browser state of a scenario.
#[derive(Default)]
pub struct BrowserState {
    /// The page, once opened.
    pub session: Option<ClientSession>,
    /// Settings for the page not yet opened.
    pending: PendingBrowser,
    /// The scope shown and its reader.
    shown: Option<(String, String)>,
    /// The search the page was asked to run.
    query: Option<String>,
}

/// Called by the rewind steps once a rewind has answered: a completed rewind starts a new
/// cursor epoch (cursors issued before it are old) before its events reach the page.
pub fn after_rewind(world: &mut RewindWorld, completed: bool) {
    if let (true, Some(session)) = (completed, world.browser.session.as_ref()) {
        session.gateway.next_epoch();
    }
}

/// Called by the rewind steps just before a rewind: the page as it was is saved.
pub async fn before_rewind(world: &mut RewindWorld) -> anyhow::Result<()> {
    match world.browser.session.as_mut() {
        Some(session) => session.save_screenshot("before-rewind").await,
        None => Ok(()),
    }
}

/// Called whenever events are collected: the page receives those of its scope.
pub fn forward_events(world: &RewindWorld, from: usize) {
    if let Some(session) = world.browser.session.as_ref() {
        session
            .gateway
            .publish(&world.events[from.min(world.events.len())..]);
    }
}

fn session(world: &RewindWorld) -> anyhow::Result<&ClientSession> {
    world.browser.session.as_ref().ok_or_else(|| {
        anyhow!("no page is open: start with `the browser shows scope ... to human ...`")
    })
}

/// The quoted names in `text` (`"a", "b" and "c"`), as traffic kinds.
fn kinds(text: &str) -> anyhow::Result<Vec<Kind>> {
    let quoted = Regex::new(r#""([^"]+)""#).expect("a valid regex");
    let kinds = quoted
        .captures_iter(text)
        .map(|c| Kind::parse(&c[1]))
        .collect::<anyhow::Result<Vec<_>>>()?;
    ensure!(!kinds.is_empty(), "no traffic kind named in `{text}`");
    Ok(kinds)
}

fn set_rules(world: &mut RewindWorld, text: &str, rule: Rule) -> anyhow::Result<()> {
    for kind in kinds(text)? {
        ensure!(
            kind != Kind::Resume,
            "the network acts on what the gateway sends: a `sync:resume` request is answered by \
             a `sync:resume:response`, which it can hold, drop or duplicate"
        );
        match world.browser.session.as_ref() {
            Some(session) => session.gateway.set_rule(kind, rule),
            None => world.browser.pending.rules.push((kind, rule)),
        }
    }
    Ok(())
}

/// `Given the browser shows scope "ch-x" to human "bob"`: opens the page.
#[given(expr = "the browser shows scope {string} to human {string}")]
async fn browser_shows(
    world: &mut RewindWorld,
    scope: String,
    human: String,
) -> anyhow::Result<()> {
    ensure!(
        world.browser.session.is_none(),
        "a page is already open in this scenario"
    );
    let context = world::context()?;
    let setup = context.browser.clone().ok_or_else(|| {
        anyhow!("the browser tier is not set up in this run (declare the `browser-client` surface)")
    })?;
    let api = std::sync::Arc::clone(&world.attached()?.api);
    let artifacts = setup
        .artifacts
        .as_ref()
        .map(|dir| dir.join(slug(&world.scenario)));
    let mut session = ClientSession::start(
        &setup,
        GatewayConfig {
            api,
            scope_id: scope.clone(),
            user_id: human.clone(),
            module: setup.module.clone(),
        },
        artifacts,
    )
    .await?;
    let pending = std::mem::take(&mut world.browser.pending);
    if let Some(limit) = pending.page_limit {
        session.gateway.set_page_limit(limit);
    }
    for (kind, rule) in pending.rules {
        session.gateway.set_rule(kind, rule);
    }
    let opened = session.open().await;
    world.browser.session = Some(session);
    world.browser.shown = Some((scope, human));
    opened
}

/// A file-name-safe form of a scenario name.
fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').chars().take(80).collect()
}

/// `Given the browser pages message sync 2 messages at a time`.
#[given(expr = "the browser pages message sync {int} messages at a time")]
async fn page_limit(world: &mut RewindWorld, limit: usize) -> anyhow::Result<()> {
    match world.browser.session.as_ref() {
        Some(session) => session.gateway.set_page_limit(limit),
        None => world.browser.pending.page_limit = Some(limit),
    }
    Ok(())
}

/// `Given the browser searched for "lantern"`: through the client's `search` hook.
#[given(expr = "the browser searched for {string}")]
async fn searched(world: &mut RewindWorld, query: String) -> anyhow::Result<()> {
    let session = session(world)?;
    let answer = session
        .browser
        .eval_async(
            "const done = arguments[arguments.length - 1];\n\
             Promise.resolve(window.__rewind.handle.search(arguments[0]))\n\
               .then(() => done(true), (e) => done(String(e)));",
            vec![serde_json::Value::String(query.clone())],
        )
        .await?;
    ensure!(
        answer == serde_json::Value::Bool(true),
        "the client's search failed: {answer}"
    );
    session.settle().await?;
    world.browser.query = Some(query);
    Ok(())
}

/// `Given the network holds every "conversation", "summary" and "unread"`; also `holds the next`
/// (one, then they pass again), `drops every` and `duplicates every` (a frame is sent twice).
#[given(regex = r#"^the network (holds every|holds the next|drops every|duplicates every) (".*)$"#)]
async fn network_rule(
    world: &mut RewindWorld,
    action: String,
    names: String,
) -> anyhow::Result<()> {
    let rule = match action.as_str() {
        "holds every" => Rule::Hold,
        "holds the next" => Rule::HoldNext,
        "drops every" => Rule::Drop,
        _ => Rule::Duplicate,
    };
    set_rules(world, &names, rule)
}

/// `When the network passes every "conversation" and "summary" again`: what it holds stays held.
#[when(regex = r#"^the network passes every (".*) again$"#)]
async fn passes_again(world: &mut RewindWorld, names: String) -> anyhow::Result<()> {
    set_rules(world, &names, Rule::Pass)
}

/// `When the network releases everything it holds [of "sync:resume:response"]`, oldest first,
/// or with `, newest first` in the reverse order (a late answer overtaken by a newer one), one
/// at a time: the page settles after each before the next is released.
#[when(regex = r#"^the network releases everything it holds(?: of "([^"]+)")?(, newest first)?$"#)]
async fn releases(
    world: &mut RewindWorld,
    kind: String,
    newest_first: String,
) -> anyhow::Result<()> {
    let session = session(world)?;
    let only = if kind.is_empty() {
        None
    } else {
        Some(Kind::parse(&kind)?)
    };
    let mut numbers: Vec<usize> = session
        .gateway
        .held()
        .into_iter()
        .filter(|(_, k)| only.is_none_or(|o| o == *k))
        .map(|(n, _)| n)
        .collect();
    if !newest_first.is_empty() {
        numbers.reverse();
    }
    // Releasing everything when nothing is held is a no-op; a kind named must be held.
    ensure!(
        only.is_none() || !numbers.is_empty(),
        "the network holds nothing of `{}`",
        only.map(Kind::name).unwrap_or_default()
    );
    // One at a time, the page settling in between: answers released together would reach it in
    // whatever order their connections deliver them.
    for (i, n) in numbers.iter().enumerate() {
        if i > 0 {
            session.settle().await?;
        }
        session.gateway.release(&[*n])?;
    }
    Ok(())
}

/// `When the browser has settled`: waits until the page has nothing in flight and has been quiet
/// for a moment (what the network holds does not count), so what it was sent has been handled.
#[when("the browser has settled")]
async fn browser_settled(world: &mut RewindWorld) -> anyhow::Result<()> {
    session(world)?.settle().await
}

/// `Then the network holds 1 "sync:resume:response"`: waits for the page to ask for it.
#[then(regex = r#"^the network holds (\d+) "([^"]+)"$"#)]
async fn holds_count(world: &mut RewindWorld, count: usize, kind: String) -> anyhow::Result<()> {
    let session = session(world)?;
    let kind = Kind::parse(&kind)?;
    let deadline = tokio::time::Instant::now() + SHOW_LIMIT;
    loop {
        let held = session
            .gateway
            .held()
            .iter()
            .filter(|(_, k)| *k == kind)
            .count();
        if held == count {
            session.settle().await?;
            let again = session
                .gateway
                .held()
                .iter()
                .filter(|(_, k)| *k == kind)
                .count();
            ensure!(
                again == count,
                "the network holds {again} `{}`, expected {count}",
                kind.name()
            );
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "the network holds {held} `{}`, expected {count}; the page's traffic:\n{}",
                kind.name(),
                gateway::describe(&session.gateway.journal())
            );
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// What the implementation shows the page's reader, through its own read surfaces.
#[derive(Debug, Default, PartialEq, Eq)]
struct Expected {
    messages: Vec<String>,
    unread: Option<String>,
    summary: Option<String>,
    search: Option<Vec<String>>,
    share_cards: Vec<String>,
}

async fn read_ids(
    world: &RewindWorld,
    surface: ReadSurface,
    query: Option<String>,
) -> anyhow::Result<Vec<String>> {
    let (scope, human) = world
        .browser
        .shown
        .clone()
        .ok_or_else(|| anyhow!("no page is open"))?;
    let api = &world.attached()?.api;
    let mut ids = Vec::new();
    let mut cursor = None;
    for _ in 0..100 {
        let answer = api
            .read(&ReadRequest {
                surface,
                reader: Actor::Human(human.clone()),
                scope_id: scope.clone(),
                message_id: None,
                attachment_id: None,
                query: query.clone(),
                cursor: cursor.take(),
                limit: None,
            })
            .await?;
        match answer {
            ReadAnswer::Found {
                messages,
                next_cursor,
                ..
            } => {
                ids.extend(messages.into_iter().map(|m| m.id));
                match next_cursor {
                    Some(next) if surface == ReadSurface::History => cursor = Some(next),
                    _ => return Ok(ids),
                }
            }
            other => bail!(
                "the implementation's `{}` answered {other:?}",
                surface.name()
            ),
        }
    }
    Ok(ids)
}

async fn expected(world: &RewindWorld) -> anyhow::Result<Expected> {
    let (scope, human) = world
        .browser
        .shown
        .clone()
        .ok_or_else(|| anyhow!("no page is open"))?;
    let state = world
        .attached()?
        .api
        .read_state(&scope, &human)
        .await?
        .ok_or_else(|| anyhow!("human `{human}` is not a member of `{scope}`"))?;
    let search = match &world.browser.query {
        Some(q) => Some(read_ids(world, ReadSurface::Search, Some(q.clone())).await?),
        None => None,
    };
    Ok(Expected {
        messages: read_ids(world, ReadSurface::History, None).await?,
        unread: Some(state.unread_count.to_string()),
        summary: read_ids(world, ReadSurface::ConversationIndex, None)
            .await?
            .last()
            .cloned(),
        search: search.map(sorted),
        share_cards: sorted(read_ids(world, ReadSurface::ShareCards, None).await?),
    })
}

/// `ids` in order: search hits and share cards are compared as sets (the conversation is
/// compared in its order).
fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

fn seen(shown: &Shown, searched: bool) -> Expected {
    let ids = |list: &[(String, String)]| list.iter().map(|m| m.0.clone()).collect::<Vec<_>>();
    Expected {
        messages: ids(&shown.messages),
        unread: shown.unread.clone(),
        summary: shown.summary.clone().filter(|s| !s.is_empty()),
        search: searched.then(|| sorted(ids(&shown.search))),
        share_cards: sorted(ids(&shown.share_cards)),
    }
}

/// `Then the browser shows what the implementation shows`: the conversation's messages in order,
/// the unread count, the summary's last message, the search results (after a search) and the
/// share cards are those the implementation's read surfaces show the same human now.
#[then("the browser shows what the implementation shows")]
async fn shows_what_implementation_shows(world: &mut RewindWorld) -> anyhow::Result<()> {
    let session = session(world)?;
    session.settle().await?;
    let want = expected(world).await?;
    let searched = world.browser.query.is_some();
    let deadline = tokio::time::Instant::now() + SHOW_LIMIT;
    loop {
        let shown = session.shown().await?;
        let got = seen(&shown, searched);
        if got == want {
            ensure!(
                shown.errors.is_empty(),
                "the page reported script errors: {:?}",
                shown.errors
            );
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "the page does not show what the implementation shows human `{}`:\n{}\nthe page's traffic:\n{}",
                world.browser.shown.as_ref().map_or("", |s| s.1.as_str()),
                similar_asserts::SimpleDiff::from_str(
                    &format!("{want:#?}"),
                    &format!("{got:#?}"),
                    "implementation",
                    "page"
                ),
                gateway::describe(&session.gateway.journal())
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if world.last.is_some() {
        if let Some(session) = world.browser.session.as_mut() {
            session.save_screenshot("after-rewind").await?;
        }
    }
    Ok(())
}

/// Post-rewind traffic (the current epoch).
fn since_rewind(world: &RewindWorld) -> anyhow::Result<(u32, Vec<Exchange>)> {
    let session = session(world)?;
    let epoch = session.gateway.epoch();
    ensure!(epoch > 0, "no rewind has completed while the page was open");
    let journal = session.gateway.journal();
    Ok((
        epoch,
        journal.into_iter().filter(|e| e.epoch == epoch).collect(),
    ))
}

/// `Then the browser refetched the conversation, summary, unread, search, share-cards and tasks
/// after the rewind`: each surface the page shows was asked for again.
#[then("the browser refetched the conversation, summary, unread, search, share-cards and tasks after the rewind")]
async fn refetched(world: &mut RewindWorld) -> anyhow::Result<()> {
    let session = session(world)?;
    let (epoch, _) = since_rewind(world)?;
    // A client may refetch a little later (a debounce): each kind gets the show limit.
    for kind in Kind::REFETCHED {
        let _ = session
            .gateway
            .wait_for(0, kind.name(), SHOW_LIMIT, |e| {
                e.epoch == epoch && e.kind == kind
            })
            .await;
    }
    session.settle().await?;
    let (_, after) = since_rewind(world)?;
    let missing: Vec<&str> = Kind::REFETCHED
        .iter()
        .filter(|k| !after.iter().any(|e| e.kind == **k))
        .map(|k| k.name())
        .collect();
    ensure!(
        missing.is_empty(),
        "after the rewind the page never asked again for: {}; its traffic since the rewind:\n{}",
        missing.join(", "),
        gateway::describe(&after)
    );
    Ok(())
}

/// `Then the browser requests its first refetch after the rewind`: waits for it.
#[then("the browser requests its first refetch after the rewind")]
async fn first_refetch(world: &mut RewindWorld) -> anyhow::Result<()> {
    let session = session(world)?;
    let epoch = session.gateway.epoch();
    session
        .gateway
        .wait_for(0, "refetch after the rewind", SHOW_LIMIT, |e| {
            e.epoch == epoch && Kind::REFETCHED.contains(&e.kind)
        })
        .await?;
    Ok(())
}

/// `Then the browser keeps no message-sync cursor from before the rewind`: none of the cursors
/// the gateway issued before the rewind is in local or session storage or IndexedDB.
#[then("the browser keeps no message-sync cursor from before the rewind")]
async fn no_old_cursor(world: &mut RewindWorld) -> anyhow::Result<()> {
    let session = session(world)?;
    let epoch = session.gateway.epoch();
    ensure!(epoch > 0, "no rewind has completed while the page was open");
    let old = session.gateway.cursors_before(epoch);
    let stored = session.storage().await?;
    let kept: Vec<String> = stored
        .texts()
        .flat_map(|text| {
            old.iter()
                .filter(move |c| text.contains(c.as_str()))
                .cloned()
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    ensure!(
        kept.is_empty(),
        "the page still keeps message-sync cursors issued before the rewind: {}; its storage: {}",
        kept.join(", "),
        serde_json::to_string(&stored).unwrap_or_default()
    );
    Ok(())
}

/// `Then the browser bootstrapped its fresh syncGap only after every refetch`.
#[then("the browser bootstrapped its fresh syncGap only after every refetch")]
async fn bootstrap_after_refetch(world: &mut RewindWorld) -> anyhow::Result<()> {
    let session = session(world)?;
    let (epoch, _) = since_rewind(world)?;
    let _ = session
        .gateway
        .wait_for(0, "syncGap", SHOW_LIMIT, |e| {
            e.epoch == epoch && e.kind == Kind::SyncGap
        })
        .await;
    session.settle().await?;
    let (_, after) = since_rewind(world)?;
    let gap = after
        .iter()
        .find(|e| e.kind == Kind::SyncGap)
        .ok_or_else(|| {
            anyhow!(
                "the page made no syncGap after the rewind:\n{}",
                gateway::describe(&after)
            )
        })?;
    let mut late = Vec::new();
    for kind in Kind::REFETCHED {
        match after.iter().find(|e| e.kind == kind) {
            Some(first) if first.n < gap.n => {}
            Some(_) => late.push(format!("{} (asked after the syncGap)", kind.name())),
            None => late.push(format!("{} (never asked)", kind.name())),
        }
    }
    ensure!(
        late.is_empty(),
        "the fresh syncGap (#{}) came before the refetch of: {}; the traffic since the rewind:\n{}",
        gap.n,
        late.join(", "),
        gateway::describe(&after)
    );
    Ok(())
}

/// The rewind notice's id, from the database (its client message id names the operation).
async fn notice_id(world: &RewindWorld) -> anyhow::Result<String> {
    let Some((_, RewindResponse::Completed { operation_id, .. })) = &world.last else {
        bail!("the rewind did not complete");
    };
    let id: Option<String> =
        sqlx::query_scalar("SELECT id FROM scope_messages WHERE client_message_id = $1")
            .bind(format!("rewind-notice:{operation_id}"))
            .fetch_optional(world.pool()?)
            .await
            .context("reading the rewind notice")?;
    id.ok_or_else(|| anyhow!("the rewind posted no notice (`rewind-notice:{operation_id}`)"))
}

/// Waits until the page shows every message of `ids`.
async fn wait_shown(world: &RewindWorld, ids: &[String], what: &str) -> anyhow::Result<()> {
    let session = session(world)?;
    session.settle().await?;
    let deadline = tokio::time::Instant::now() + SHOW_LIMIT;
    loop {
        let shown = session.shown().await?;
        let missing: Vec<&String> = ids
            .iter()
            .filter(|id| !shown.message_ids().contains(&id.as_str()))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "the page does not show {what} ({}); it shows {:?}; its traffic:\n{}",
                missing
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                shown.message_ids(),
                gateway::describe(&session.gateway.journal())
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `Then the browser shows the rewind notice`.
#[then("the browser shows the rewind notice")]
async fn shows_notice(world: &mut RewindWorld) -> anyhow::Result<()> {
    let notice = notice_id(world).await?;
    wait_shown(world, &[notice], "the rewind notice").await
}

/// `Then the browser shows the rewind notice and the message sent after the rewind`.
#[then("the browser shows the rewind notice and the message sent after the rewind")]
async fn shows_notice_and_live(world: &mut RewindWorld) -> anyhow::Result<()> {
    let notice = notice_id(world).await?;
    let live = world
        .sent
        .as_ref()
        .map(|s| s.message_id.clone())
        .ok_or_else(|| anyhow!("no message was sent after the rewind"))?;
    wait_shown(
        world,
        &[notice, live],
        "the rewind notice and the message sent after the rewind",
    )
    .await
}

/// `Then the network dropped the rewind notice's "message.created"`: the frame that carried the
/// notice (its id or `rewind-notice:<operationId>` in the payload) never reached the page.
#[then(expr = "the network dropped the rewind notice's {string}")]
async fn dropped_notice(world: &mut RewindWorld, kind: String) -> anyhow::Result<()> {
    let kind = Kind::parse(&kind)?;
    let notice = notice_id(world).await?;
    let Some((_, RewindResponse::Completed { operation_id, .. })) = &world.last else {
        bail!("the rewind did not complete");
    };
    let client_id = format!("rewind-notice:{operation_id}");
    let journal = session(world)?.gateway.journal();
    let frames: Vec<&Exchange> = journal
        .iter()
        .filter(|e| {
            e.kind == kind
                && e.frame.as_deref().is_some_and(|f| {
                    f.contains(&format!("\"{notice}\"")) || f.contains(&format!("\"{client_id}\""))
                })
        })
        .collect();
    ensure!(
        !frames.is_empty() && frames.iter().all(|e| e.outcome == Outcome::Dropped),
        "expected the notice's `{}` to be published and dropped; frames about it: {:?}",
        kind.name(),
        frames.iter().map(|e| (e.n, &e.outcome)).collect::<Vec<_>>()
    );
    Ok(())
}

/// Sync requests (HTTP or websocket) of `exchanges`.
fn sync_requests(exchanges: &[Exchange]) -> impl Iterator<Item = &Exchange> {
    exchanges
        .iter()
        .filter(|e| matches!(e.kind, Kind::SyncGap | Kind::SyncMessages | Kind::Resume))
}

/// `Then no sync request after the rewind carried a cursor from before it` (or one the gateway
/// never issued).
#[then("no sync request after the rewind carried a cursor from before it")]
async fn no_old_cursor_used(world: &mut RewindWorld) -> anyhow::Result<()> {
    session(world)?.settle().await?;
    let (epoch, after) = since_rewind(world)?;
    let bad: Vec<&Exchange> = sync_requests(&after)
        .filter(|e| e.cursor.is_some() && e.cursor_epoch.is_none_or(|c| c < epoch))
        .collect();
    ensure!(
        bad.is_empty(),
        "after the rewind the page synced from cursors issued before it (an old high-water mark \
         skips the new visible tail):\n{}",
        gateway::describe(&bad.into_iter().cloned().collect::<Vec<_>>())
    );
    Ok(())
}

/// The first answer of `kinds` from before the rewind that was delivered after it (a held one
/// the scenario released).
fn stale_answer(world: &RewindWorld, kinds: &[Kind]) -> anyhow::Result<Exchange> {
    let session = session(world)?;
    let epoch = session.gateway.epoch();
    let started = session.gateway.epoch_started_ms();
    session
        .gateway
        .journal()
        .into_iter()
        .find(|e| {
            kinds.contains(&e.kind)
                && e.epoch < epoch
                && e.delivered_ms.is_some_and(|d| d >= started)
        })
        .ok_or_else(|| {
            anyhow!(
                "no {} from before the rewind was delivered after it",
                kinds
                    .iter()
                    .map(|k| format!("`{}`", k.name()))
                    .collect::<Vec<_>>()
                    .join(" or ")
            )
        })
}

/// `Then the stale "syncMessages" page was delivered after the rewind`.
#[then(expr = "the stale {string} page was delivered after the rewind")]
async fn stale_delivered(world: &mut RewindWorld, kind: String) -> anyhow::Result<()> {
    let kind = Kind::parse(&kind)?;
    let stale = stale_answer(world, &[kind])?;
    ensure!(
        !stale.message_ids.is_empty(),
        "the stale `{}` carried no message, so it checks nothing",
        kind.name()
    );
    Ok(())
}

/// The stale sync answer the scenario released.
fn released_stale(world: &RewindWorld) -> anyhow::Result<Exchange> {
    stale_answer(
        world,
        &[Kind::SyncMessages, Kind::SyncGap, Kind::ResumeResponse],
    )
}

/// `Then the browser merged nothing of the stale page`: no message it carried that the
/// implementation no longer shows is on the page.
#[then("the browser merged nothing of the stale page")]
async fn merged_nothing(world: &mut RewindWorld) -> anyhow::Result<()> {
    let session = session(world)?;
    session.settle().await?;
    let stale = released_stale(world)?;
    let visible = read_ids(world, ReadSurface::History, None).await?;
    let shown = session.shown().await?;
    let merged: Vec<&String> = stale
        .message_ids
        .iter()
        .filter(|id| !visible.contains(id) && shown.message_ids().contains(&id.as_str()))
        .collect();
    let gone: Vec<&String> = stale
        .message_ids
        .iter()
        .filter(|id| !visible.contains(id))
        .collect();
    ensure!(
        !gone.is_empty(),
        "the stale page carried no rewound message ({:?}), so it checks nothing",
        stale.message_ids
    );
    ensure!(
        merged.is_empty(),
        "the page merged rewound messages from the stale page #{}: {merged:?}",
        stale.n
    );
    Ok(())
}

/// `Then the browser started exactly one fresh sync after the stale page arrived`: a new sync
/// (a syncGap, a websocket resume, or a syncMessages that does not continue a `hasMore` answer
/// of the current epoch), from no cursor or a cursor of the current epoch.
#[then("the browser started exactly one fresh sync after the stale page arrived")]
async fn one_fresh_sync(world: &mut RewindWorld) -> anyhow::Result<()> {
    let session = session(world)?;
    let stale = released_stale(world)?;
    let arrived = stale.delivered_ms.unwrap_or(0);
    // The queued sync may start a little later (a debounce): it gets the show limit, then the
    // page must settle, and whatever it started by then is counted.
    let _ = session
        .gateway
        .wait_for(0, "sync", SHOW_LIMIT, |e| {
            e.at_ms >= arrived
                && matches!(e.kind, Kind::SyncGap | Kind::SyncMessages | Kind::Resume)
        })
        .await;
    session.settle().await?;
    let epoch = session.gateway.epoch();
    let journal = session.gateway.journal();
    // A request that continues a `hasMore` answer of the current epoch (HTTP or websocket)
    // belongs to the sync that answer was part of.
    let continued: BTreeSet<&str> = journal
        .iter()
        .filter(|e| {
            e.epoch == epoch
                && e.has_more
                && matches!(e.outcome, Outcome::Delivered | Outcome::Duplicated)
        })
        .filter_map(|e| e.answer_cursor.as_deref())
        .collect();
    let later: Vec<Exchange> = journal
        .iter()
        .filter(|e| e.at_ms >= arrived && e.n != stale.n)
        .cloned()
        .collect();
    let starts: Vec<&Exchange> = sync_requests(&later)
        .filter(|e| e.cursor.as_deref().is_none_or(|c| !continued.contains(c)))
        .collect();
    ensure!(
        starts.len() == 1,
        "after the stale page arrived the page started {} syncs, expected exactly one fresh-generation sync; \
         its traffic since:\n{}",
        starts.len(),
        gateway::describe(&later)
    );
    let fresh = starts[0];
    ensure!(
        fresh.cursor.is_none() || fresh.cursor_epoch == Some(epoch),
        "the sync the stale page queued resumed from a cursor of before the rewind:\n{}",
        gateway::describe(std::slice::from_ref(fresh))
    );
    Ok(())
}

/// `Then the browser keeps no rewound text`: none of the canaries of the messages the rewind
/// took away is in the page's DOM, local or session storage, or IndexedDB.
#[then("the browser keeps no rewound text")]
async fn keeps_no_rewound_text(world: &mut RewindWorld) -> anyhow::Result<()> {
    let session = session(world)?;
    session.settle().await?;
    let (scope, _) = world
        .browser
        .shown
        .clone()
        .ok_or_else(|| anyhow!("no page is open"))?;
    let before = world.before_snapshot()?;
    let visible: BTreeSet<String> = read_ids(world, ReadSurface::History, None)
        .await?
        .into_iter()
        .collect();
    let gone: BTreeSet<String> = super::scrub::message_rows(before)
        .iter()
        .filter(|r| r.get("scope_id").and_then(|v| v.as_str()) == Some(scope.as_str()))
        .filter_map(|r| r.get("id").and_then(|v| v.as_str()).map(str::to_owned))
        .filter(|id| !visible.contains(id))
        .collect();
    let canaries = super::scrub::canaries_of(before, &gone);
    ensure!(
        !canaries.is_empty(),
        "no message with a canary was rewound in `{scope}`, so this checks nothing"
    );
    let dom = session.browser.dom().await?;
    let stored = session.storage().await?;
    let mut found = Vec::new();
    for canary in &canaries {
        if dom.contains(canary.as_str()) {
            found.push(format!("{canary} in the DOM"));
        }
        for text in stored.texts() {
            if text.contains(canary.as_str()) {
                found.push(format!(
                    "{canary} in storage: {}",
                    text.chars().take(120).collect::<String>()
                ));
            }
        }
    }
    ensure!(
        found.is_empty(),
        "the page keeps rewound text:\n  {}",
        found.join("\n  ")
    );
    Ok(())
}
