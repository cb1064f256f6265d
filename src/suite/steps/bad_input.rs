//! Bad input over the contract: every field of every request the driver protocol carries gets
//! values no client should send (unknown ids, ids of another scope or kind, empty and very long
//! strings, injection-shaped strings, a NUL, numbers out of range). Each must be answered by a
//! refusal, a read answer or a clear rejection (a client-error `DriverError`), never by a
//! failure of the implementation (a 5xx, a crash, a hang), and must leave the database as it
//! was. Free text (a message's content, a search query) is data: injection-shaped text is
//! stored or searched as it is.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, ensure, Context as _};
use cucumber::{then, when};
use rewind_conformance::sut::{
    Actor, ConversationApi, DeliverRequest, PruneRequest, ReadRequest, ReadSurface, RewindRequest,
    RewindResponse, SendMessage, SutError, SyncRequest,
};

use crate::suite::world::RewindWorld;

/// One call of the driver protocol.
#[derive(Debug, Clone)]
enum Call {
    Rewind(RewindRequest),
    Send(SendMessage),
    Deliver(DeliverRequest),
    Prune(PruneRequest),
    ReadState { scope_id: String, user_id: String },
    Sync(SyncRequest),
    Read(ReadRequest),
}

/// What a field is: an id (bad values must be turned away) or free text (data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Id,
    Text,
}

/// The bad strings every field gets; `elsewhere` is a real id of the same kind that does not
/// belong here (a message or scope of another conversation).
fn bad_strings(elsewhere: Option<&str>) -> Vec<(&'static str, String)> {
    let mut values = vec![
        ("empty", String::new()),
        ("10,000 characters", "x".repeat(10_000)),
        ("unknown", "no-such-id-3f9c".to_owned()),
        ("SQL injection", "' OR '1'='1".to_owned()),
        (
            "SQL statement",
            "'; DROP TABLE scope_messages; --".to_owned(),
        ),
        ("NUL character", "nul\u{0}byte".to_owned()),
        ("format string", "%s%s%n%x".to_owned()),
        ("path traversal", "../../../etc/passwd".to_owned()),
        ("bidirectional text", "\u{202e}dm\u{202c} 🙂".to_owned()),
        ("JSON", "{\"id\": \"x\"}".to_owned()),
    ];
    if let Some(id) = elsewhere {
        values.push(("an id of another conversation", id.to_owned()));
    }
    values
}

/// The bad numbers a numeric field gets.
const BAD_NUMBERS: [(&str, i64); 4] = [
    ("negative", -1),
    ("zero", 0),
    ("the largest", i64::MAX),
    ("the smallest", i64::MIN),
];

/// Every variant of `base` with one field bad: (field, what the value is, kind, call).
fn variants(base: &Call, elsewhere: &Elsewhere) -> Vec<(&'static str, String, Kind, Call)> {
    let mut out = Vec::new();
    let mut strings =
        |field: &'static str, kind: Kind, other: Option<&str>, set: &dyn Fn(&mut Call, String)| {
            for (label, value) in bad_strings(other) {
                let mut call = base.clone();
                set(&mut call, value);
                out.push((field, label.to_owned(), kind, call));
            }
        };
    let actor_id = |call: &mut Call, value: String| match call {
        Call::Rewind(r) => r.actor = Actor::Human(value),
        Call::Send(m) => m.actor = Actor::Human(value),
        Call::Read(r) => r.reader = Actor::Human(value),
        _ => {}
    };
    match base {
        Call::Rewind(_) => {
            strings("actor.id", Kind::Id, None, &actor_id);
            strings("scopeId", Kind::Id, Some(&elsewhere.scope), &|c, v| {
                if let Call::Rewind(r) = c {
                    r.scope_id = v;
                }
            });
            strings(
                "targetMessageId",
                Kind::Id,
                Some(&elsewhere.message),
                &|c, v| {
                    if let Call::Rewind(r) = c {
                        r.target_message_id = v;
                    }
                },
            );
        }
        Call::Send(_) => {
            strings("actor.id", Kind::Id, None, &actor_id);
            strings("scopeId", Kind::Id, None, &|c, v| {
                if let Call::Send(m) = c {
                    m.scope_id = v;
                }
            });
            strings("content", Kind::Text, None, &|c, v| {
                if let Call::Send(m) = c {
                    m.content = v;
                }
            });
            strings("mentions", Kind::Text, None, &|c, v| {
                if let Call::Send(m) = c {
                    m.mentions = vec![v];
                }
            });
        }
        Call::Deliver(_) => strings("messageId", Kind::Id, None, &|c, v| {
            if let Call::Deliver(d) = c {
                d.message_id = v;
            }
        }),
        Call::Prune(_) => strings("agentId", Kind::Id, None, &|c, v| {
            if let Call::Prune(p) = c {
                p.agent_id = v;
            }
        }),
        Call::ReadState { .. } => {
            strings("scopeId", Kind::Id, Some(&elsewhere.scope), &|c, v| {
                if let Call::ReadState { scope_id, .. } = c {
                    *scope_id = v;
                }
            });
            strings("userId", Kind::Id, None, &|c, v| {
                if let Call::ReadState { user_id, .. } = c {
                    *user_id = v;
                }
            });
        }
        Call::Sync(_) => {
            strings("userId", Kind::Id, None, &|c, v| {
                if let Call::Sync(s) = c {
                    s.user_id = v;
                }
            });
            strings("scopeId", Kind::Id, Some(&elsewhere.scope), &|c, v| {
                if let Call::Sync(s) = c {
                    s.scope_id = v;
                }
            });
        }
        Call::Read(_) => {
            strings("reader.id", Kind::Id, None, &actor_id);
            strings("scopeId", Kind::Id, Some(&elsewhere.scope), &|c, v| {
                if let Call::Read(r) = c {
                    r.scope_id = v;
                }
            });
            strings("messageId", Kind::Id, Some(&elsewhere.message), &|c, v| {
                if let Call::Read(r) = c {
                    r.message_id = Some(v);
                }
            });
            strings("cursor", Kind::Id, None, &|c, v| {
                if let Call::Read(r) = c {
                    r.cursor = Some(v);
                }
            });
            strings("query", Kind::Text, None, &|c, v| {
                if let Call::Read(r) = c {
                    r.query = Some(v);
                }
            });
        }
    }
    let numbers: &[(&'static str, SetNumber)] = match base {
        Call::Sync(_) => &[
            ("afterSeq", |c, n| {
                if let Call::Sync(s) = c {
                    s.after_seq = n;
                }
            }),
            ("limit", |c, n| {
                if let Call::Sync(s) = c {
                    s.limit = n;
                }
            }),
        ],
        Call::Read(_) => &[("limit", |c, n| {
            if let Call::Read(r) = c {
                r.limit = Some(n);
            }
        })],
        _ => &[],
    };
    for (field, set) in numbers {
        for (label, value) in BAD_NUMBERS {
            let mut call = base.clone();
            set(&mut call, value);
            out.push((field, label.to_owned(), Kind::Id, call));
        }
    }
    out
}

/// Sets a numeric field of a call.
type SetNumber = fn(&mut Call, i64);

/// Real ids that do not belong to the request: a scope and a message of another conversation.
struct Elsewhere {
    scope: String,
    message: String,
}

/// What a call answered: `Ok(description)` for an answer within the contract, or the failure.
enum Answered {
    /// A refusal, a rejection or an answer the request may get.
    Fine { accepted: bool },
    /// A failure: a 5xx, a crash, a hang, an answer outside the protocol, a completed rewind.
    Wrong(String),
}

async fn call(api: &Arc<dyn ConversationApi>, call: &Call) -> Answered {
    let limit = Duration::from_secs(20);
    let answer = tokio::time::timeout(limit, async {
        match call {
            Call::Rewind(r) => api.rewind(r).await.map(|a| match a {
                RewindResponse::Completed { .. } => Some("the rewind completed".to_owned()),
                RewindResponse::Refused { .. } => None,
            }),
            Call::Send(m) => api.send_message(m).await.map(|_| None),
            Call::Deliver(d) => api.deliver(d).await.map(|_| None),
            Call::Prune(p) => api.prune_recovery_points(p).await.map(|_| None),
            Call::ReadState { scope_id, user_id } => {
                api.read_state(scope_id, user_id).await.map(|_| None)
            }
            Call::Sync(s) => api.sync_messages(s).await.map(|_| None),
            Call::Read(r) => api.read(r).await.map(|_| None),
        }
    })
    .await;
    match answer {
        Err(_) => Answered::Wrong(format!("no answer within {}s", limit.as_secs())),
        Ok(Ok(Some(wrong))) => Answered::Wrong(wrong),
        Ok(Ok(None)) => Answered::Fine { accepted: true },
        Ok(Err(SutError::Rejected { .. })) => Answered::Fine { accepted: false },
        Ok(Err(e)) => Answered::Wrong(e.to_string()),
    }
}

/// Whether an accepted call of `call` may change the database (a message was sent).
fn writes(call: &Call) -> bool {
    matches!(call, Call::Send(_))
}

/// The base request a step names, resolved against the scenario's conversation.
async fn base_call(world: &RewindWorld, what: &str, args: &[String]) -> anyhow::Result<Call> {
    let arg = |i: usize| {
        args.get(i)
            .cloned()
            .ok_or_else(|| anyhow!("the step names too few ids"))
    };
    Ok(match what {
        "rewind" => {
            let target = world.resolve(&arg(1)?);
            let scope_id: String =
                sqlx::query_scalar("SELECT scope_id FROM scope_messages WHERE id = $1")
                    .bind(&target)
                    .fetch_one(world.pool()?)
                    .await
                    .context("reading the target's scope")?;
            Call::Rewind(RewindRequest {
                actor: Actor::Human(arg(0)?),
                scope_id,
                target_message_id: target,
            })
        }
        "send" => Call::Send(SendMessage {
            actor: Actor::Human(arg(0)?),
            scope_id: arg(1)?,
            content: "a plain message".to_owned(),
            mentions: Vec::new(),
        }),
        "delivery" => Call::Deliver(DeliverRequest {
            message_id: arg(0)?,
        }),
        "pruning" => Call::Prune(PruneRequest { agent_id: arg(0)? }),
        "read state" => Call::ReadState {
            user_id: arg(0)?,
            scope_id: arg(1)?,
        },
        "sync" => Call::Sync(SyncRequest {
            user_id: arg(0)?,
            scope_id: arg(1)?,
            after_seq: 0,
            limit: 50,
        }),
        "read" => Call::Read(ReadRequest {
            surface: ReadSurface::Search,
            reader: Actor::Human(arg(0)?),
            scope_id: arg(1)?,
            message_id: None,
            attachment_id: None,
            query: Some("plain".to_owned()),
            cursor: None,
            limit: Some(20),
        }),
        other => anyhow::bail!("unknown request `{other}`"),
    })
}

/// A scope and a message the request does not name.
async fn elsewhere(world: &RewindWorld, base: &Call) -> anyhow::Result<Elsewhere> {
    let scope = match base {
        Call::Rewind(r) => r.scope_id.clone(),
        Call::Send(m) => m.scope_id.clone(),
        Call::ReadState { scope_id, .. } => scope_id.clone(),
        Call::Sync(s) => s.scope_id.clone(),
        Call::Read(r) => r.scope_id.clone(),
        Call::Deliver(_) | Call::Prune(_) => String::new(),
    };
    let row: Option<(String, String)> = sqlx::query_as(
        "SELECT scope_id, id FROM scope_messages WHERE scope_id <> $1 ORDER BY scope_id, seq \
         LIMIT 1",
    )
    .bind(&scope)
    .fetch_optional(world.pool()?)
    .await
    .context("reading another conversation")?;
    let (scope, message) = row.unwrap_or_default();
    Ok(Elsewhere { scope, message })
}

/// `When every field of the rewind of human "alice" to before message "n-4" gets bad values`,
/// and for the other requests: `the send of human "alice" in scope "s"`, `the delivery of
/// message "m"`, `the pruning of agent "a"`, `the read state of human "h" in scope "s"`, `the
/// sync of human "h" in scope "s"`, `the read of human "h" in scope "s"` (a search). Every
/// variant is sent once; what each answered is checked by the step after.
#[when(
    regex = r#"^every field of the (rewind|send|delivery|pruning|read state|sync|read) of (?:human |message |agent )?"([^"]+)"(?: (?:to before message|in scope) "([^"]+)")? gets bad values$"#
)]
async fn send_bad_values(
    world: &mut RewindWorld,
    what: String,
    first: String,
    second: String,
) -> anyhow::Result<()> {
    let args: Vec<String> = [first, second]
        .into_iter()
        .filter(|a| !a.is_empty())
        .collect();
    let base = base_call(world, &what, &args).await?;
    let elsewhere = elsewhere(world, &base).await?;
    let api = Arc::clone(&world.attached()?.api);
    let mut problems = Vec::new();
    let mut sent = 0;
    for (field, label, kind, variant) in variants(&base, &elsewhere) {
        let before = world.snapshot().await?;
        let answered = call(&api, &variant).await;
        sent += 1;
        let after = world.snapshot().await?;
        let accepted = match answered {
            Answered::Wrong(why) => {
                problems.push(format!("`{field}` = {label}: {why}"));
                continue;
            }
            Answered::Fine { accepted } => accepted,
        };
        if kind == Kind::Text && accepted && writes(&variant) {
            if let Call::Send(m) = &variant {
                // Stored as sent: the text is data, not a statement.
                let stored: Option<String> = sqlx::query_scalar(
                    "SELECT content FROM scope_messages WHERE scope_id = $1 \
                     ORDER BY seq DESC LIMIT 1",
                )
                .bind(&m.scope_id)
                .fetch_optional(world.pool()?)
                .await
                .context("reading the sent message")?;
                if field == "content" && stored.as_deref() != Some(m.content.as_str()) {
                    problems.push(format!(
                        "`{field}` = {label}: the message was accepted but stored as {:?}",
                        stored.map(|s| s.chars().take(80).collect::<String>())
                    ));
                }
            }
            continue;
        }
        let mut was = before.clone();
        let mut now = after.clone();
        if matches!(variant, Call::Rewind(_)) {
            // A refusal may be recorded as a `failed` operation (register
            // `refusal-records-operation`); nothing else may change.
            let ops = |s: &rewind_conformance::inspect::DbSnapshot| -> Vec<String> {
                s.tables
                    .get("rewind_operations")
                    .cloned()
                    .unwrap_or_default()
            };
            let added: Vec<String> = ops(&after)
                .into_iter()
                .filter(|r| !ops(&before).contains(r))
                .collect();
            if added.iter().any(|r| !r.contains("\"status\": \"failed\"")) {
                problems.push(format!(
                    "`{field}` = {label}: the refusal recorded an operation that is not `failed`"
                ));
            }
            was.tables.remove("rewind_operations");
            now.tables.remove("rewind_operations");
        }
        let diff = was.diff(&now);
        if !diff.is_empty() {
            problems.push(format!(
                "`{field}` = {label}: the database changed:\n{}",
                diff.lines().take(12).collect::<Vec<_>>().join("\n")
            ));
        }
    }
    world.bad_input = Some((what, sent, problems));
    Ok(())
}

/// `Then every bad request was turned away cleanly, the database unchanged`.
#[then("every bad request was turned away cleanly, the database unchanged")]
async fn turned_away(world: &mut RewindWorld) -> anyhow::Result<()> {
    let (what, sent, problems) = world
        .bad_input
        .clone()
        .ok_or_else(|| anyhow!("no bad request was sent in this scenario"))?;
    ensure!(sent > 0, "no variant of the {what} request was sent");
    ensure!(
        problems.is_empty(),
        "{} of {sent} bad {what} requests were not turned away cleanly (a refusal or a \
         client-error `DriverError`, the database unchanged):\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
    Ok(())
}
