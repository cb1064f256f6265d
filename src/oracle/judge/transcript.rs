//! The transcript and its summaries: `scope_messages` (tombstones, the notice, reply
//! summaries), `scopes`, `workspaces` and `agents` (sections 6.1 to 6.3 and 8).

use serde_json::{Map, Value};

use super::collector::{keys, row_place, show, Collector};
use super::completion::Ctx;
use crate::oracle::readings as r;
use crate::oracle::spec;
use crate::oracle::state::{Author, Lifecycle, Message, State};
use crate::oracle::text::{instant, latest};

const MESSAGES: &str = "scope_messages";

/// The rewind notice: the new message with client id `rewind-notice:<operation>`, or else the
/// only new message whose client id is a rewind notice's.
pub(crate) fn find_notice<'a>(
    c: &mut Collector,
    before: &State,
    after: &'a State,
    operation_id: Option<&str>,
) -> Option<&'a Message> {
    let new: Vec<&Message> = after
        .messages
        .values()
        .filter(|m| before.message(&m.id).is_none())
        .collect();
    let wanted = operation_id.map(spec::notice_client_id);
    let by_id = new
        .iter()
        .find(|m| m.client_message_id.is_some() && m.client_message_id == wanted);
    let notice = by_id.copied().or_else(|| {
        let notices: Vec<&&Message> = new
            .iter()
            .filter(|m| {
                m.client_message_id
                    .as_deref()
                    .is_some_and(|id| id.starts_with(spec::NOTICE_PREFIX))
            })
            .collect();
        (notices.len() == 1).then(|| *notices[0])
    });
    match notice {
        None => c.wrong(
            row_place(MESSAGES, "(new)", None),
            format!(
                "one new `system` message with client id `{}` (the rewind notice)",
                wanted.unwrap_or_else(|| "rewind-notice:<operation>".to_owned())
            ),
            "none",
        ),
        Some(n) if by_id.is_none() => c.cell(
            MESSAGES,
            &n.id,
            "client_message_id",
            format!(
                "`{}`",
                wanted.unwrap_or_else(|| "rewind-notice:<operation>".to_owned())
            ),
            format!("`{}`", n.client_message_id.clone().unwrap_or_default()),
        ),
        Some(_) => {}
    }
    notice
}

/// Checks `scope_messages`, `scopes`, `workspaces` and `agents`.
pub(crate) fn check(c: &mut Collector, ctx: &Ctx) {
    messages(c, ctx);
    scopes(c, ctx);
    workspaces(c, ctx);
    agents(c, ctx);
}

fn messages(c: &mut Collector, ctx: &Ctx) {
    let (was, now) = (ctx.before.table(MESSAGES), ctx.after.table(MESSAGES));
    for key in keys(was, now) {
        let (before, after) = (was.get(key), now.get(key));
        let (Some(before), Some(after)) = (before, after) else {
            match (before, after) {
                (Some(_), None) => c.wrong(
                    row_place(MESSAGES, key, None),
                    "the row kept (a rewind never deletes a message)",
                    "no row",
                ),
                (None, Some(_)) if ctx.notice.is_some_and(|n| &n.id == key) => notice(c, ctx),
                (b, a) => c.unchanged(MESSAGES, key, b, a, &[]),
            }
            continue;
        };
        let mut expected = before.columns.clone();
        let mut skip = vec![];
        if ctx.rewound.contains(key) {
            expected.insert("content".into(), Value::String(String::new()));
            skip.push("metadata");
            tombstone_metadata(c, key, after.get("metadata"));
        }
        if ctx.cascade_parents.contains(key) {
            expected.insert("reply_count".into(), Value::from(0));
            expected.insert("last_reply_at".into(), Value::Null);
        }
        if ctx
            .effect
            .thread_parent
            .as_ref()
            .is_some_and(|p| &p.message_id == key)
        {
            skip.extend(["reply_count", "last_reply_at"]);
            reply_summary(c, ctx, key, &after.columns);
        }
        c.same_columns(MESSAGES, key, &expected, &after.columns, &skip);
    }
}

/// A tombstone's metadata holds only `messageRecall.status = "rewound"` and an RFC 3339
/// `rewoundAt`, inside `messageRecall` or beside it (register `tombstone-rewound-at`).
fn tombstone_metadata(c: &mut Collector, key: &str, metadata: Option<&Value>) {
    let reading = tombstone_reading(metadata);
    match reading {
        Some(reading) => c.observe(r::TOMBSTONE_REWOUND_AT, &[reading]),
        None => c.cell(
            MESSAGES,
            key,
            "metadata",
            "only `messageRecall.status = \"rewound\"` and an rfc 3339 `rewoundAt` (inside \
             `messageRecall` or beside it)",
            show(metadata),
        ),
    }
}

/// Which reading of `tombstone-rewound-at` a tombstone's metadata follows, if it is a proper
/// tombstone's.
pub(crate) fn tombstone_reading(metadata: Option<&Value>) -> Option<&'static str> {
    let top = metadata?.as_object()?;
    let recall = top.get("messageRecall")?.as_object()?;
    let time = |v: Option<&Value>| v.and_then(Value::as_str).and_then(instant).is_some();
    if recall.get("status").and_then(Value::as_str) != Some("rewound") {
        return None;
    }
    match (top.len(), recall.len()) {
        (1, 2) if time(recall.get("rewoundAt")) => Some("inside-message-recall"),
        (2, 1) if time(top.get("rewoundAt")) => Some("beside-message-recall"),
        _ => None,
    }
}

/// The parent message of a rewound reply thread counts the thread's surviving messages, with
/// or without the rewind notices (register `notice-in-reply-summary`).
fn reply_summary(c: &mut Collector, ctx: &Ctx, key: &str, after: &Map<String, Value>) {
    let replies: Vec<&Message> = ctx
        .after
        .threads_of(key)
        .into_iter()
        .filter(|s| !s.archived)
        .flat_map(|s| ctx.after.visible_messages(&s.id))
        .collect();
    let is_notice = |m: &Message| {
        m.client_message_id
            .as_deref()
            .is_some_and(|id| id.starts_with(spec::NOTICE_PREFIX))
    };
    let count = after.get("reply_count").and_then(Value::as_i64);
    let last = after.get("last_reply_at");
    let last_at = last.and_then(Value::as_str).and_then(instant);
    let mut fits = Vec::new();
    for (reading, with_notices) in [("notice-not-a-reply", false), ("notice-is-a-reply", true)] {
        let counted: Vec<&Message> = replies
            .iter()
            .copied()
            .filter(|m| with_notices || !is_notice(m))
            .collect();
        let want_at = latest(counted.iter().filter_map(|m| m.created_at.as_deref()));
        let at_ok = match last {
            Some(Value::Null) | None => want_at.is_none(),
            Some(_) => want_at.is_some() && last_at == want_at,
        };
        if count == Some(counted.len() as i64) && at_ok {
            fits.push(reading);
        }
    }
    if fits.is_empty() {
        let count_without = replies.iter().filter(|m| !is_notice(m)).count();
        c.cell(
            MESSAGES,
            key,
            "reply_count",
            format!(
                "the thread's surviving messages: {count_without} without the notice or {} with \
                 it, and `last_reply_at` the last one's time",
                replies.len()
            ),
            format!("{} at {}", show(after.get("reply_count")), show(last)),
        );
    } else {
        c.observe(r::NOTICE_IN_REPLY_SUMMARY, &fits);
    }
}

/// The notice: a new hot `system` message in the primary scope, above the physical high-water
/// marks, saying something and quoting no rewound content.
fn notice(c: &mut Collector, ctx: &Ctx) {
    let Some(n) = ctx.notice else { return };
    let primary = &ctx.effect.primary;
    let mut cells: Vec<(&str, String, String)> = Vec::new();
    if n.scope_id != primary.scope_id {
        cells.push((
            "scope_id",
            format!("`{}`", primary.scope_id),
            format!("`{}`", n.scope_id),
        ));
    }
    if n.workspace_id != primary.workspace_id {
        cells.push((
            "workspace_id",
            format!("`{}`", primary.workspace_id),
            format!("`{}`", n.workspace_id),
        ));
    }
    if n.author != Author::System {
        let kind = ctx
            .after
            .table(MESSAGES)
            .get(&n.id)
            .and_then(|row| row.get("author_kind"));
        cells.push(("author_kind", "`system`".into(), show(kind)));
    }
    if n.content.trim().is_empty() {
        cells.push((
            "content",
            "a notice telling humans what happened".into(),
            "`''`".into(),
        ));
    }
    if let Some(quoted) = ctx.text.quoted_in(&n.content) {
        cells.push((
            "content",
            "no content of a rewound message".into(),
            format!("`{quoted}`"),
        ));
    }
    if let Some(quoted) = ctx.text.quoted_in(&n.metadata.to_string()) {
        cells.push((
            "metadata",
            "no content of a rewound message".into(),
            format!("`{quoted}`"),
        ));
    }
    if n.lifecycle() != Lifecycle::Live {
        cells.push((
            "metadata",
            "a visible message".into(),
            format!("`{}`", n.metadata),
        ));
    }
    if !n.is_hot() {
        cells.push((
            "storage_tier",
            "`hot`".into(),
            format!("`{}`", n.storage_tier),
        ));
    }
    let scope_high = ctx
        .before
        .scope(&primary.scope_id)
        .map(|s| s.latest_seq)
        .into_iter()
        .chain(ctx.before.scope_messages(&primary.scope_id).map(|m| m.seq))
        .max()
        .unwrap_or(0);
    if n.seq <= scope_high {
        cells.push((
            "seq",
            format!("above the scope's old high-water mark {scope_high}"),
            n.seq.to_string(),
        ));
    }
    let global_high = ctx
        .before
        .workspace_global_seq
        .get(&primary.workspace_id)
        .copied()
        .into_iter()
        .chain(
            ctx.before
                .messages
                .values()
                .filter(|m| m.workspace_id == primary.workspace_id)
                .map(|m| m.global_seq),
        )
        .max()
        .unwrap_or(0);
    if n.global_seq <= global_high {
        cells.push((
            "global_seq",
            format!("above every global seq the workspace used, {global_high}"),
            n.global_seq.to_string(),
        ));
    }
    if n.reply_count != 0 || n.last_reply_at.is_some() {
        cells.push((
            "reply_count",
            "no replies".into(),
            format!("{} at {:?}", n.reply_count, n.last_reply_at),
        ));
    }
    for (column, expected, actual) in cells {
        c.cell(MESSAGES, &n.id, column, expected, actual);
    }
}

fn scopes(c: &mut Collector, ctx: &Ctx) {
    let (was, now) = (ctx.before.table("scopes"), ctx.after.table("scopes"));
    for key in keys(was, now) {
        let (Some(before), Some(after)) = (was.get(key), now.get(key)) else {
            c.unchanged("scopes", key, was.get(key), now.get(key), &[]);
            continue;
        };
        if !ctx.scopes.contains(key) {
            c.same_columns("scopes", key, &before.columns, &after.columns, &[]);
            continue;
        }
        let primary = *key == ctx.effect.primary.scope_id;
        let mut expected = before.columns.clone();
        let mut visible: Vec<&Message> = ctx.survivors(key).collect();
        if primary {
            if let Some(n) = ctx.notice {
                expected.insert("latest_seq".into(), Value::from(n.seq));
                expected.insert("latest_global_seq".into(), Value::from(n.global_seq));
                visible.push(n);
            }
        } else if before.get("archived_at").is_some_and(Value::is_null) {
            // A cascaded thread is archived (section 6.3): any time will do.
            match after.get("archived_at") {
                Some(v) if v.as_str().and_then(instant).is_some() => {
                    expected.insert("archived_at".into(), v.clone());
                }
                other => c.cell(
                    "scopes",
                    key,
                    "archived_at",
                    "a time: the cascaded thread is archived",
                    show(other),
                ),
            }
        }
        expected.insert("visible_message_count".into(), Value::from(visible.len()));
        let last = latest(visible.iter().filter_map(|m| m.created_at.as_deref()));
        for column in ["latest_message_at", "visible_last_message_at"] {
            let got = after.get(column);
            let same = match (got, last) {
                (Some(Value::Null), None) => true,
                (Some(Value::String(s)), Some(want)) => instant(s) == Some(want),
                _ => false,
            };
            if same {
                if let Some(v) = got {
                    expected.insert(column.into(), v.clone());
                }
            } else {
                c.cell(
                    "scopes",
                    key,
                    column,
                    match last {
                        Some(t) => {
                            format!("the last surviving message's time `{}`", t.to_rfc3339())
                        }
                        None => "`null`: no message of the scope is visible".to_owned(),
                    },
                    show(got),
                );
                expected.insert(column.into(), got.cloned().unwrap_or(Value::Null));
            }
        }
        c.same_columns("scopes", key, &expected, &after.columns, &[]);
    }
}

fn workspaces(c: &mut Collector, ctx: &Ctx) {
    let (was, now) = (
        ctx.before.table("workspaces"),
        ctx.after.table("workspaces"),
    );
    for key in keys(was, now) {
        let (Some(before), Some(after)) = (was.get(key), now.get(key)) else {
            c.unchanged("workspaces", key, was.get(key), now.get(key), &[]);
            continue;
        };
        let mut expected = before.columns.clone();
        if *key == ctx.effect.primary.workspace_id {
            if let Some(n) = ctx.notice {
                expected.insert("latest_global_seq".into(), Value::from(n.global_seq));
            }
        }
        c.same_columns("workspaces", key, &expected, &after.columns, &[]);
    }
}

/// Agents are as they were, but a restore may have replaced a related agent's session pointer
/// (oracle entry `restore-session-pointer`).
fn agents(c: &mut Collector, ctx: &Ctx) {
    let (was, now) = (ctx.before.table("agents"), ctx.after.table("agents"));
    for key in keys(was, now) {
        let related = ctx.effect.related_agents.contains(key.as_str());
        let skip: &[&str] = if related {
            &["runtime_session_id"]
        } else {
            &[]
        };
        c.unchanged("agents", key, was.get(key), now.get(key), skip);
        if let (true, Some(b), Some(a)) = (related, was.get(key), now.get(key)) {
            let kept = b.get("runtime_session_id") == a.get("runtime_session_id");
            c.observe(
                r::RESTORE_SESSION_POINTER,
                &[if kept { "kept" } else { "replaced" }],
            );
        }
    }
}
