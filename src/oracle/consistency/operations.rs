//! Operations and what they tombstoned: statuses, the accounting of tombstones, contiguous
//! suffixes, cascades and notices.

use std::collections::{BTreeMap, BTreeSet};

use super::{Facts, Violation};
use crate::oracle::judge::Place;
use crate::oracle::spec;
use crate::oracle::state::{Author, Operation};

const STATUSES: [&str; 4] = ["preparing", "completed", "failed", "repair_required"];

fn row(table: &str, key: &str, column: Option<&str>) -> Place {
    Place::Row {
        table: table.to_owned(),
        key: key.to_owned(),
        column: column.map(str::to_owned),
    }
}

pub(super) fn check(f: &Facts, out: &mut Vec<Violation>) {
    let state = f.state;
    for op in state.operations.values() {
        if op.status == "preparing" {
            f.violation(
                out,
                row("rewind_operations", &op.id, Some("status")),
                "left `preparing`: every rewind ends `completed`, `failed` or `repair_required`",
            );
        } else if !STATUSES.contains(&op.status.as_str()) {
            f.violation(
                out,
                row("rewind_operations", &op.id, Some("status")),
                format!("`{}` is not a status of section 6.4", op.status),
            );
        }
    }
    let completed: Vec<Operation> = state
        .operations
        .values()
        .filter(|o| o.status == "completed")
        .map(|o| with_derived_ids(f, o))
        .collect();
    let mut listed_by: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for op in &completed {
        for id in &op.rewound_message_ids {
            listed_by.entry(id).or_default().push(&op.id);
            if !state.message(id).is_some_and(|m| m.is_rewound()) {
                f.violation(
                    out,
                    row("rewind_operations", &op.id, Some("rewound_message_ids")),
                    format!("lists `{id}`, which is not a rewound tombstone"),
                );
            }
        }
    }
    let derived: BTreeSet<&str> = completed
        .iter()
        .filter(|o| {
            state
                .operations
                .get(&o.id)
                .is_some_and(|stored| stored.rewound_message_ids.is_empty())
        })
        .map(|o| o.id.as_str())
        .collect();
    let completed: Vec<&Operation> = completed.iter().collect();
    for id in &f.new_tombstones {
        let listers = listed_by.get(id.as_str()).cloned().unwrap_or_default();
        // Ranges derived for operations that recorded no ids may overlap (a later rewind
        // further back covers an earlier one's tombstones): one of them is enough.
        let explicit = listers.iter().filter(|o| !derived.contains(*o)).count();
        match (explicit, listers.len()) {
            (1, _) | (0, 1..) => {}
            (0, 0) if hangs_off_completed(f, id, &completed) => {}
            (0, _) => f.violation(
                out,
                row("scope_messages", id, None),
                "a tombstone that no completed rewind operation lists",
            ),
            (n, _) => f.violation(
                out,
                row("scope_messages", id, None),
                format!("a tombstone listed by {n} completed operations"),
            ),
        }
    }
    for op in completed
        .iter()
        .filter(|o| !f.old_completed.contains(&o.id))
    {
        suffix_of(f, op, out);
    }
    for id in &f.new_tombstones {
        for thread in state.live_threads_of(id) {
            f.violation(
                out,
                row("scopes", &thread.id, Some("archived_at")),
                format!("a live reply thread under the tombstone `{id}`: it should have cascaded"),
            );
        }
    }
    if let Some(start) = f.start {
        for scope in state.scopes.values().filter(|s| s.archived) {
            if start.scope(&scope.id).is_some_and(|s| s.archived) {
                continue;
            }
            let cascaded = scope.parent_message_id.as_deref().is_some_and(|parent| {
                completed
                    .iter()
                    .any(|o| o.rewound_message_ids.iter().any(|id| id == parent))
            });
            if !cascaded {
                f.violation(
                    out,
                    row("scopes", &scope.id, Some("archived_at")),
                    "archived, but not as the cascade of a completed rewind",
                );
            }
        }
    }
}

/// The operation with the ids it tombstoned: those it recorded, or, when it recorded none
/// (oracle entry `operation-rewound-ids`, reading `not-recorded`), the tombstones of its scope
/// from its target up to its notice and of the archived reply threads of the last of them.
fn with_derived_ids(f: &Facts, op: &Operation) -> Operation {
    let mut op = op.clone();
    if !op.rewound_message_ids.is_empty() {
        return op;
    }
    let state = f.state;
    let Some(from) = state.message(&op.target_message_id).map(|m| m.seq) else {
        return op;
    };
    let client_id = spec::notice_client_id(&op.id);
    let to = state
        .messages
        .values()
        .find(|m| m.scope_id == op.thread_id && m.client_message_id.as_deref() == Some(&client_id))
        .map_or(i64::MAX, |n| n.seq);
    let primary: Vec<&crate::oracle::state::Message> = state
        .scope_messages(&op.thread_id)
        .filter(|m| m.seq >= from && m.seq < to && m.is_rewound())
        .collect();
    op.rewound_message_ids = primary.iter().map(|m| m.id.clone()).collect();
    if let Some(tail) = primary.iter().max_by_key(|m| m.seq) {
        for thread in state
            .scopes
            .values()
            .filter(|s| s.archived && s.parent_message_id.as_deref() == Some(tail.id.as_str()))
        {
            op.rewound_message_ids.extend(
                state
                    .scope_messages(&thread.id)
                    .filter(|m| m.is_rewound())
                    .map(|m| m.id.clone()),
            );
        }
    }
    op
}

/// Whether tombstone `id` lies in an archived reply thread whose parent a completed operation
/// lists (an operation that lists its primary boundary only).
fn hangs_off_completed(f: &Facts, id: &str, completed: &[&Operation]) -> bool {
    let Some(message) = f.state.message(id) else {
        return false;
    };
    let Some(scope) = f.state.scope(&message.scope_id) else {
        return false;
    };
    scope.archived
        && scope.parent_message_id.as_deref().is_some_and(|parent| {
            completed
                .iter()
                .any(|o| o.rewound_message_ids.iter().any(|i| i == parent))
        })
}

/// The checks of one operation completed since the start.
fn suffix_of(f: &Facts, op: &Operation, out: &mut Vec<Violation>) {
    let state = f.state;
    let place = |column: &str| row("rewind_operations", &op.id, Some(column));
    let in_scope: Vec<_> = op
        .rewound_message_ids
        .iter()
        .filter_map(|id| state.message(id))
        .filter(|m| m.scope_id == op.thread_id)
        .collect();
    let Some(target) = state.message(&op.target_message_id) else {
        f.violation(out, place("target_message_id"), "names no message");
        return;
    };
    let from = target.seq;
    let to = in_scope.iter().map(|m| m.seq).max().unwrap_or(from);
    if !op.rewound_message_ids.contains(&op.target_message_id) {
        f.violation(
            out,
            place("rewound_message_ids"),
            format!("does not list its target `{}`", op.target_message_id),
        );
    }
    if let Some(below) = in_scope.iter().find(|m| m.seq < from) {
        f.violation(
            out,
            place("rewound_message_ids"),
            format!("lists `{}`, which comes before the target", below.id),
        );
    }
    for m in state.scope_messages(&op.thread_id) {
        if m.seq >= from && m.seq <= to && !m.is_rewound() {
            f.violation(
                out,
                row("scope_messages", &m.id, Some("metadata")),
                format!(
                    "visible inside the suffix of completed operation `{}` (seq {from} to {to})",
                    op.id
                ),
            );
        }
    }
    let tail = in_scope
        .iter()
        .max_by_key(|m| m.seq)
        .map(|m| m.id.clone())
        .unwrap_or_default();
    let mut cascades: BTreeSet<String> = BTreeSet::new();
    for id in &op.rewound_message_ids {
        let Some(m) = state.message(id) else { continue };
        if m.scope_id == op.thread_id {
            continue;
        }
        let parent = state
            .scope(&m.scope_id)
            .and_then(|s| s.parent_message_id.clone());
        if parent.as_deref() == Some(tail.as_str()) {
            cascades.insert(m.scope_id.clone());
        } else {
            f.violation(
                out,
                place("rewound_message_ids"),
                format!(
                    "lists `{id}`, outside scope `{}` and the reply threads of its last message",
                    op.thread_id
                ),
            );
        }
    }
    for thread in &cascades {
        if state.scope(thread).is_some_and(|s| !s.archived) {
            f.violation(
                out,
                row("scopes", thread, Some("archived_at")),
                format!(
                    "a thread cascaded by completed operation `{}` is not archived",
                    op.id
                ),
            );
        }
        for m in state.visible_messages(thread) {
            f.violation(
                out,
                row("scope_messages", &m.id, Some("metadata")),
                format!(
                    "visible in thread `{thread}`, cascaded by completed operation `{}`",
                    op.id
                ),
            );
        }
    }
    let client_id = spec::notice_client_id(&op.id);
    let notice = state
        .messages
        .values()
        .find(|m| m.client_message_id.as_deref() == Some(client_id.as_str()));
    match notice {
        None => f.violation(
            out,
            place("id"),
            format!("completed without its notice `{client_id}`"),
        ),
        Some(n) if n.scope_id != op.thread_id || n.author != Author::System || n.seq <= to => f
            .violation(
                out,
                row("scope_messages", &n.id, None),
                format!(
                    "the notice of `{}` must be a `system` message of `{}` above seq {to}",
                    op.id, op.thread_id
                ),
            ),
        Some(_) => {}
    }
}
