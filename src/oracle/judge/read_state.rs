//! Read state (sections 6.1, 6.2 and 10): membership cursors and sync-dirty frontiers.

use serde_json::Value;

use super::collector::{keys, row_place, show, Collector};
use super::completion::Ctx;
use crate::oracle::readings as r;

const CURSORS: [(&str, bool); 3] = [
    ("last_read_seq", false),
    ("last_read_global_seq", true),
    ("owner_context_dismissed_through_global_seq", true),
];

/// Checks `scope_memberships`, `scope_sync_dirty` and `member_scope_sync_dirty`.
pub(crate) fn check(c: &mut Collector, ctx: &Ctx) {
    memberships(c, ctx);
    for table in ["scope_sync_dirty", "member_scope_sync_dirty"] {
        sync_dirty(c, ctx, table);
    }
}

/// Memberships stay (section 10); in a tombstone scope every cursor is clamped to the visible
/// tail before the notice, lower ones kept (register `cursor-clamp-and-notice`, one reading:
/// `clamp-before-notice`).
fn memberships(c: &mut Collector, ctx: &Ctx) {
    let table = "scope_memberships";
    let (was, now) = (ctx.before.table(table), ctx.after.table(table));
    for key in keys(was, now) {
        let (Some(before), Some(after)) = (was.get(key), now.get(key)) else {
            c.unchanged(table, key, was.get(key), now.get(key), &[]);
            continue;
        };
        let mut expected = before.columns.clone();
        let scope = before.str("scope_id").unwrap_or_default();
        if ctx.scopes.contains(scope) {
            let (seq, gseq) = ctx.tail(scope);
            for (column, global) in CURSORS {
                let tail = if global { gseq } else { seq };
                if let Some(old) = before.get(column).and_then(Value::as_i64) {
                    if old > tail {
                        c.observe(r::CURSOR_CLAMP_AND_NOTICE, &["clamp-before-notice"]);
                    }
                    expected.insert(column.into(), Value::from(old.min(tail)));
                }
            }
        }
        c.same_columns(table, key, &expected, &after.columns, &[]);
    }
}

/// Sync-dirty message frontiers of a tombstone scope are clamped to its visible tail, lower
/// ones kept; in the primary scope they may instead all move to the notice's seq (register
/// `notice-marks-sync-dirty`), and rows may be created for it. Activity frontiers stay, but a
/// thread's parent scope may announce the recomputed summary by raising them (register
/// `parent-refresh-after-thread-rewind`). `updated_at` is not compared.
fn sync_dirty(c: &mut Collector, ctx: &Ctx, table: &str) {
    let (was, now) = (ctx.before.table(table), ctx.after.table(table));
    let primary = ctx.effect.primary.scope_id.as_str();
    let parent = ctx
        .effect
        .thread_parent
        .as_ref()
        .map(|p| p.scope_id.as_str());
    let notice_seq = ctx.notice.map(|n| n.seq);
    for key in keys(was, now) {
        let (before, after) = (was.get(key), now.get(key));
        let Some(after) = after else {
            c.unchanged(table, key, before, None, &[]);
            continue;
        };
        let scope = after.str("scope_id").unwrap_or_default();
        let frontier = after.get("latest_message_seq").and_then(Value::as_i64);
        let Some(before) = before else {
            if scope == primary && notice_seq.is_some() && frontier == notice_seq {
                c.observe(r::NOTICE_MARKS_SYNC_DIRTY, &["notice-dirty"]);
            } else {
                c.wrong(
                    row_place(table, key, None),
                    "no new row (or, marking the notice dirty, one at the notice's seq)",
                    format!("new row {}", after.text()),
                );
            }
            continue;
        };
        let mut expected = before.columns.clone();
        let mut skip = vec!["updated_at"];
        let old = before.get("latest_message_seq").and_then(Value::as_i64);
        if ctx.scopes.contains(scope) {
            let clamped = old.map(|o| o.min(ctx.tail(scope).0));
            if scope == primary && notice_seq.is_some() && frontier == notice_seq {
                c.observe(r::NOTICE_MARKS_SYNC_DIRTY, &["notice-dirty"]);
                skip.push("latest_message_seq");
            } else {
                if scope == primary && frontier == clamped {
                    c.observe(r::NOTICE_MARKS_SYNC_DIRTY, &["notice-not-dirty"]);
                }
                if let Some(v) = clamped {
                    expected.insert("latest_message_seq".into(), Value::from(v));
                }
            }
        }
        if Some(scope) == parent {
            let old_activity = before.get("latest_activity_seq").and_then(Value::as_i64);
            let new_activity = after.get("latest_activity_seq").and_then(Value::as_i64);
            match (old_activity, new_activity) {
                (Some(o), Some(n)) if n > o => {
                    c.observe(r::PARENT_REFRESH, &["activity-marked"]);
                    skip.push("latest_activity_seq");
                }
                (Some(o), Some(n)) if n == o => c.observe(r::PARENT_REFRESH, &["untouched"]),
                _ => {}
            }
        }
        let shown = expected.get("latest_message_seq").cloned();
        if !skip.contains(&"latest_message_seq")
            && ctx.scopes.contains(scope)
            && after.get("latest_message_seq") != shown.as_ref()
        {
            let tail = ctx.tail(scope).0;
            c.cell(
                table,
                key,
                "latest_message_seq",
                match notice_seq.filter(|_| scope == primary) {
                    Some(n) => format!(
                        "{} (clamped to the visible tail {tail}) or the notice's seq {n}",
                        show(shown.as_ref())
                    ),
                    None => format!(
                        "{} (clamped to the visible tail {tail})",
                        show(shown.as_ref())
                    ),
                },
                show(after.get("latest_message_seq")),
            );
            skip.push("latest_message_seq");
        }
        c.same_columns(table, key, &expected, &after.columns, &skip);
    }
}
