//! Read-surface steps: one read through any surface of the driver protocol's `read` (spec 1 and
//! 6.1.1), and what it must show.
//!
//! Every check of a read answer also holds the answer to the transcript: each message shown must
//! be a readable `scope_messages` row of its scope and seq, showing that row's content (a stale
//! projection's text is not the message's), and nothing in the answer, a record's `messageId`
//! included, may name a rewound message.

use std::collections::BTreeSet;

use anyhow::{anyhow, bail, ensure, Context as _};
use cucumber::{then, when};
use rewind_conformance::sut::{ReadAnswer, ReadRejection, ReadRequest, ReadSurface};
use serde_json::Value;

use super::id_list;
use super::when::actor;
use crate::suite::world::RewindWorld;

/// `When human "bob" reads the history of scope "dm-ab"`, `... reads the reactions of scope
/// "dm-ab" for message "d-4"`, `... reads the search of scope "dm-ab" for "friday"`; also `for
/// attachment "att-1"`, `for cursor "..."` and `from the last read's cursor` (the `nextCursor` the
/// previous read handed out), each optionally paged `, 2 at a time`.
#[when(
    regex = r#"^(human|agent) "([^"]+)" reads the ([a-z-]+) of scope "([^"]+)"\s*((?:for (?:message|attachment|cursor) "[^"]*"|for "[^"]+"|from the last read's cursor)?)((?:, \d+ at a time)?)$"#
)]
async fn reads(
    world: &mut RewindWorld,
    kind: String,
    who: String,
    surface: String,
    scope: String,
    argument: String,
    page: String,
) -> anyhow::Result<()> {
    let surface = ReadSurface::from_name(&surface).ok_or_else(|| {
        anyhow!(
            "`{surface}` is not a read surface (known: {})",
            ReadSurface::ALL.map(|s| s.name()).join(", ")
        )
    })?;
    let mut request = ReadRequest {
        surface,
        reader: actor(&kind, who)?,
        scope_id: scope,
        message_id: None,
        attachment_id: None,
        query: None,
        cursor: None,
        limit: page
            .trim_start_matches(", ")
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok()),
    };
    if argument == "from the last read's cursor" {
        let (_, answer) = last_read(world)?;
        let ReadAnswer::Found {
            next_cursor: Some(cursor),
            ..
        } = answer
        else {
            bail!(
                "the last read handed out no cursor to resume from: {}",
                describe(answer)
            );
        };
        request.cursor = Some(cursor.clone());
    } else if let Some(rest) = argument.strip_prefix("for ") {
        let (what, value) = match rest.split_once(' ') {
            Some((what, value)) if value.starts_with('"') => (what, value),
            _ => ("query", rest),
        };
        let value = value.trim_matches('"').to_owned();
        match what {
            "message" => request.message_id = Some(world.resolve(&value)),
            "attachment" => request.attachment_id = Some(value),
            "cursor" => request.cursor = Some(value),
            _ => request.query = Some(value),
        }
    }
    let answer = world.attached()?.api.read(&request).await?;
    world.reads.push((request, answer));
    Ok(())
}

/// The last read and its answer.
fn last_read(world: &RewindWorld) -> anyhow::Result<&(ReadRequest, ReadAnswer)> {
    world.reads.last().ok_or_else(|| {
        anyhow!("no read was made (use `When human ... reads the ... of scope ...`)")
    })
}

/// A message as the database holds it: scope, seq, content, lifecycle status.
struct Stored {
    scope_id: String,
    seq: i64,
    content: String,
    status: Option<String>,
    notice: bool,
}

async fn stored(world: &RewindWorld, id: &str) -> anyhow::Result<Option<Stored>> {
    let row: Option<(String, i64, String, Option<String>, bool)> = sqlx::query_as(
        "SELECT scope_id, seq, content, metadata #>> '{messageRecall,status}', \
                coalesce(client_message_id LIKE 'rewind-notice:%', false) OR metadata ? 'rewindNotice' \
         FROM scope_messages WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(world.pool()?)
    .await
    .context("reading a shown message")?;
    Ok(row.map(|(scope_id, seq, content, status, notice)| Stored {
        scope_id,
        seq,
        content,
        status,
        notice,
    }))
}

/// Every `messageId` value anywhere in `value`.
fn message_ids_in(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                if key == "messageId" {
                    if let Some(id) = v.as_str() {
                        out.insert(id.to_owned());
                    }
                }
                message_ids_in(v, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| message_ids_in(v, out)),
        _ => {}
    }
}

/// The messages a found answer shows, each checked against the transcript. Returns the ids
/// shown, in order, and which of them are recalled placeholders and rewind notices.
async fn checked_messages(
    world: &RewindWorld,
) -> anyhow::Result<(Vec<String>, BTreeSet<String>, BTreeSet<String>)> {
    let (request, answer) = last_read(world)?;
    let what = format!(
        "the `{}` read of scope `{}`",
        request.surface.name(),
        request.scope_id
    );
    let (messages, records) = match answer {
        ReadAnswer::Found {
            messages, records, ..
        } => (messages, records),
        other => bail!("{what} answered {}, expected messages", describe(other)),
    };
    let mut ids = Vec::new();
    let mut recalled = BTreeSet::new();
    let mut notices = BTreeSet::new();
    for m in messages {
        let row = stored(world, &m.id)
            .await?
            .ok_or_else(|| anyhow!("{what} shows message `{}`, which does not exist", m.id))?;
        ensure!(
            row.status.as_deref() != Some("rewound"),
            "{what} shows the rewound message `{}`: a rewound message does not exist for any \
             read surface (spec 1, 6.1.1)",
            m.id
        );
        ensure!(
            m.scope_id == row.scope_id && m.seq == row.seq,
            "{what} shows `{}` in scope `{}` at seq {}, but it is in `{}` at seq {}",
            m.id,
            m.scope_id,
            m.seq,
            row.scope_id,
            row.seq
        );
        let is_recalled = row.status.as_deref() == Some("recalled");
        ensure!(
            m.recalled == is_recalled,
            "{what} shows `{}` with recalled = {}, but its status is {:?}",
            m.id,
            m.recalled,
            row.status
        );
        ensure!(
            is_recalled || m.content == row.content,
            "{what} shows `{}` with content {:?}, but the transcript row says {:?}: the \
             transcript row is the authority, not a projection",
            m.id,
            m.content,
            row.content
        );
        if is_recalled {
            recalled.insert(m.id.clone());
        }
        if row.notice {
            notices.insert(m.id.clone());
        }
        ids.push(m.id.clone());
    }
    let mut named = BTreeSet::new();
    for record in records {
        message_ids_in(record, &mut named);
    }
    for id in &named {
        if let Some(row) = stored(world, id).await? {
            ensure!(
                row.status.as_deref() != Some("rewound"),
                "a record of {what} names the rewound message `{id}`: a stale reference must \
                 not bring it back (spec 6.1.1)"
            );
        }
    }
    Ok((ids, recalled, notices))
}

fn describe(answer: &ReadAnswer) -> String {
    match answer {
        ReadAnswer::Found { messages, .. } => format!(
            "messages {:?}",
            messages.iter().map(|m| m.id.as_str()).collect::<Vec<_>>()
        ),
        ReadAnswer::NotFound { message } => format!("not found ({message})"),
        ReadAnswer::Rejected { reason, message } => format!("rejected: {reason:?} ({message})"),
    }
}

/// `Then the read shows messages "d-1, d-2"`, optionally `and the rewind notice` (it must be
/// there) or `and maybe the rewind notice` (where the spec does not say whether the surface
/// shows it). Recalled placeholders must be listed where the surface shows transcript rows
/// (history, by id) and are ignored elsewhere, where a placeholder may or may not be shown.
#[then(
    regex = r#"^the read shows messages "([^"]*)"( and the rewind notice| and maybe the rewind notice)?$"#
)]
async fn shows(world: &mut RewindWorld, ids: String, notice: String) -> anyhow::Result<()> {
    let (shown, recalled, notices) = checked_messages(world).await?;
    let (request, _) = last_read(world)?;
    let surface = request.surface;
    let what = format!(
        "the `{}` read of scope `{}`",
        surface.name(),
        request.scope_id
    );
    let transcript = matches!(surface, ReadSurface::History | ReadSurface::Message);
    let want: Vec<String> = id_list(&ids).iter().map(|i| world.resolve(i)).collect();
    let mut got: Vec<String> = shown
        .iter()
        .filter(|id| !notices.contains(*id))
        .filter(|id| transcript || !recalled.contains(*id) || want.contains(id))
        .cloned()
        .collect();
    let mut expected = want.clone();
    if !transcript {
        got.sort();
        expected.sort();
    }
    ensure!(
        got == expected,
        "{what} shows {got:?}, expected {expected:?} (everything shown: {shown:?})"
    );
    match notice.trim() {
        "and the rewind notice" => ensure!(
            notices.len() == 1,
            "{what} shows {} rewind notices, expected the one: {shown:?}",
            notices.len()
        ),
        "and maybe the rewind notice" => ensure!(
            notices.len() <= 1,
            "{what} shows {} rewind notices: {shown:?}",
            notices.len()
        ),
        _ => ensure!(
            notices.is_empty(),
            "{what} shows a rewind notice where none was expected: {shown:?}"
        ),
    }
    if !transcript && !recalled.is_empty() {
        world.take_reading("recalled-on-feed-surfaces", "placeholder-shown")?;
    } else if surface == ReadSurface::DiagnosticsPreview {
        let scope = last_read(world)?.0.scope_id.clone();
        let recent_recalled: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM (SELECT metadata FROM scope_messages WHERE scope_id = $1 \
               AND coalesce(metadata #>> '{messageRecall,status}', '') <> 'rewound' \
             ORDER BY seq DESC LIMIT 20) m \
             WHERE m.metadata #>> '{messageRecall,status}' = 'recalled'",
        )
        .bind(&scope)
        .fetch_one(world.pool()?)
        .await
        .context("counting recalled messages")?;
        if recent_recalled > 0 {
            world.take_reading("recalled-on-feed-surfaces", "placeholder-omitted")?;
        }
    }
    if notice.trim() == "and maybe the rewind notice" {
        let reading = if notices.is_empty() {
            "not-shown"
        } else {
            "shown"
        };
        world.take_reading("notice-on-feed-surfaces", reading)?;
    }
    Ok(())
}

/// `Then the read shows messages "d-3" and the rewind notice, or rejects the stale cursor`: a
/// paged read given a cursor from before a rewind either resumes (showing exactly that) or
/// refuses the cursor as stale (ambiguity `stale-cursor-after-rewind`).
#[then(
    regex = r#"^the read shows messages "([^"]*)"( and the rewind notice)?, or rejects the stale cursor$"#
)]
async fn shows_or_rejects_cursor(
    world: &mut RewindWorld,
    ids: String,
    notice: String,
) -> anyhow::Result<()> {
    if let (
        _,
        ReadAnswer::Rejected {
            reason: ReadRejection::BadCursor,
            message,
        },
    ) = last_read(world)?
    {
        ensure!(
            !message.trim().is_empty(),
            "the rejection carries no message for people"
        );
        return world.take_reading("stale-cursor-after-rewind", "reject");
    }
    shows(world, ids, notice).await?;
    world.take_reading("stale-cursor-after-rewind", "resume")
}

/// `Then the read shows the visible tail of scope "dm-ab"`: exactly one message, the newest
/// readable one of the scope (a rewind notice after a rewind).
#[then(regex = r#"^the read shows the visible tail of scope "([^"]+)"$"#)]
async fn shows_tail(world: &mut RewindWorld, scope: String) -> anyhow::Result<()> {
    let (shown, _, _) = checked_messages(world).await?;
    let tail: Option<String> = sqlx::query_scalar(
        "SELECT id FROM scope_messages WHERE scope_id = $1 \
           AND coalesce(metadata #>> '{messageRecall,status}', '') <> 'rewound' \
         ORDER BY seq DESC LIMIT 1",
    )
    .bind(&scope)
    .fetch_optional(world.pool()?)
    .await
    .context("reading the visible tail")?;
    let want: Vec<String> = tail.into_iter().collect();
    ensure!(
        shown == want,
        "the read shows {shown:?}, expected the visible tail of `{scope}`: {want:?}"
    );
    Ok(())
}

/// `Then the read finds nothing`: the message or attachment read does not exist for the reader,
/// answered as `not_found`.
#[then("the read finds nothing")]
async fn finds_nothing(world: &mut RewindWorld) -> anyhow::Result<()> {
    let (request, answer) = last_read(world)?;
    match answer {
        ReadAnswer::NotFound { message } => {
            ensure!(
                !message.trim().is_empty(),
                "the `not_found` answer carries no message for people"
            );
            Ok(())
        }
        other => bail!(
            "the `{}` read of scope `{}` answered {}, expected not found: a rewound message is \
             treated as non-existent (spec 1)",
            request.surface.name(),
            request.scope_id,
            describe(other)
        ),
    }
}

/// `Then the read is rejected as not_member`: a bad read is refused with its reason and a
/// message for people.
#[then(regex = r#"^the read is rejected as (unknown_scope|not_member|bad_cursor|bad_request)$"#)]
async fn rejected(world: &mut RewindWorld, reason: String) -> anyhow::Result<()> {
    let want: ReadRejection = serde_json::from_value(Value::String(reason.clone()))
        .with_context(|| format!("`{reason}` is not a rejection reason"))?;
    let (_, answer) = last_read(world)?;
    match answer {
        ReadAnswer::Rejected { reason, message } if *reason == want => {
            ensure!(
                !message.trim().is_empty(),
                "the rejection carries no message for people"
            );
            Ok(())
        }
        other => bail!(
            "the read answered {}, expected rejected as {want:?}",
            describe(other)
        ),
    }
}

/// `When every projection row that named a rewound message comes back`: each row of a table
/// that names a message (`message_id`, `source_message_id`, `last_message_id`) and named a
/// now-rewound message just before the last rewind is written back as it was, its text with the
/// rewound canaries neutralised: a projection rebuilt late, a replayed stream, old evidence
/// (spec 6.1.1). None of them is an authority, so no surface may show the message again. The
/// tables come from the catalog, so a projection added to the schema comes back too.
#[when("every projection row that named a rewound message comes back")]
async fn projections_come_back(world: &mut RewindWorld) -> anyhow::Result<()> {
    use rewind_conformance::leak_scan::canaries_in;
    let pool = world.pool()?.clone();
    let before = world
        .before
        .as_ref()
        .ok_or_else(|| anyhow!("no snapshot before a rewind: rewind first"))?;
    let rewound: BTreeSet<String> = sqlx::query_scalar(
        "SELECT id FROM scope_messages WHERE metadata #>> '{messageRecall,status}' = 'rewound'",
    )
    .fetch_all(&pool)
    .await
    .context("reading the rewound messages")?
    .into_iter()
    .collect();
    ensure!(
        !rewound.is_empty(),
        "nothing is rewound, so nothing can come back"
    );
    // Tables that name a message, with their insertable columns and primary key.
    let tables: Vec<(String, Vec<String>, Vec<String>)> = sqlx::query_as(
        "SELECT c.relname::text, \
                array_agg(a.attname::text ORDER BY a.attnum) \
                    FILTER (WHERE a.attgenerated = ''), \
                coalesce((SELECT array_agg(k.attname::text ORDER BY k.attnum) \
                          FROM pg_index i JOIN pg_attribute k \
                            ON k.attrelid = i.indrelid AND k.attnum = ANY(i.indkey) \
                          WHERE i.indrelid = c.oid AND i.indisprimary), '{}') \
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped \
         WHERE n.nspname = 'public' AND c.relkind = 'r' \
           AND c.relname NOT IN ('scope_messages', 'scopes', 'message_recovery_points', \
                                 'rewind_operations') \
         GROUP BY c.oid, c.relname \
         HAVING bool_or(a.attname IN ('message_id', 'source_message_id', 'last_message_id'))",
    )
    .fetch_all(&pool)
    .await
    .context("listing the tables that name a message")?;
    let canaries: BTreeSet<String> = before
        .tables
        .get("scope_messages")
        .into_iter()
        .flatten()
        .filter_map(|row| serde_json::from_str::<Value>(row).ok())
        .filter(|row| {
            row.get("id")
                .and_then(Value::as_str)
                .is_some_and(|id| rewound.contains(id))
        })
        .flat_map(|row| canaries_in(row.get("content").and_then(Value::as_str).unwrap_or("")))
        .collect();
    let mut tx = pool.begin().await.context("opening a transaction")?;
    let mut planted = 0;
    for (table, columns, key) in &tables {
        for row in before.tables.get(table).into_iter().flatten() {
            let mut text = row.clone();
            for canary in &canaries {
                text = text.replace(canary.as_str(), "STALE");
            }
            let value: Value = serde_json::from_str(&text)
                .with_context(|| format!("a snapshot row of `{table}` is not JSON"))?;
            let names_rewound = ["message_id", "source_message_id", "last_message_id"]
                .iter()
                .any(|c| {
                    value
                        .get(*c)
                        .and_then(Value::as_str)
                        .is_some_and(|id| rewound.contains(id))
                });
            if !names_rewound {
                continue;
            }
            let cols = columns
                .iter()
                .map(|c| format!("\"{c}\""))
                .collect::<Vec<_>>()
                .join(", ");
            if !key.is_empty() {
                let keys = key
                    .iter()
                    .map(|c| format!("t.\"{c}\" = r.\"{c}\""))
                    .collect::<Vec<_>>();
                let delete = format!(
                    "DELETE FROM \"{table}\" t USING jsonb_populate_record(NULL::\"{table}\", $1) r \
                     WHERE {}",
                    keys.join(" AND ")
                );
                sqlx::query(sqlx::AssertSqlSafe(delete))
                    .bind(&value)
                    .execute(&mut *tx)
                    .await
                    .with_context(|| format!("clearing the way for a stale row of `{table}`"))?;
            }
            let insert = format!(
                "INSERT INTO \"{table}\" ({cols}) OVERRIDING SYSTEM VALUE \
                 SELECT {cols} FROM jsonb_populate_record(NULL::\"{table}\", $1) \
                 ON CONFLICT DO NOTHING"
            );
            sqlx::query(sqlx::AssertSqlSafe(insert))
                .bind(&value)
                .execute(&mut *tx)
                .await
                .with_context(|| format!("writing a stale row of `{table}` back: {text}"))?;
            planted += 1;
        }
    }
    tx.commit().await.context("committing the stale rows")?;
    ensure!(
        planted > 0,
        "no projection row named a rewound message before the rewind: the fixture gives this \
         step nothing to bring back"
    );
    Ok(())
}
