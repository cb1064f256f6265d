//! The completed operation's row and the answer (sections 6.4 and 8).

use std::collections::BTreeSet;

use rewind_driver_protocol::RewindResponse;

use super::collector::{keys, row_place, Collector};
use super::report::Place;
use crate::oracle::predict::Effect;
use crate::oracle::readings as r;
use crate::oracle::state::State;
use crate::oracle::text::SuffixText;

fn answer_place(field: &str) -> Place {
    Place::Answer {
        field: field.to_owned(),
    }
}

/// Checks `rewind_operations` and the answer; returns the id of the completed operation (the
/// answer's, else the one new row's).
///
/// Existing rows stay as they were (`updated_at` aside). Exactly one row is new: the answer's
/// operation, `completed`, on the primary scope (`thread_id`), with the request's target and
/// initiator, listing the rewound ids (oracle entry `operation-rewound-ids`), quoting none of
/// their content. What else its `plan`, error columns and times hold is not the spec's
/// business. The answer is `completed`, names that
/// operation, lists no id or the rewound ids (register `api-rewound-ids`) and quotes no
/// rewound content.
pub(crate) fn check(
    c: &mut Collector,
    before: &State,
    after: &State,
    answer: &RewindResponse,
    effect: &Effect,
    rewound: &BTreeSet<String>,
) -> Option<String> {
    let primary: BTreeSet<String> = effect.primary.message_ids.iter().cloned().collect();
    let was = before.table("rewind_operations");
    let now = after.table("rewind_operations");
    let mut added = Vec::new();
    for key in keys(was, now) {
        match (was.get(key), now.get(key)) {
            (None, Some(_)) => added.push(key.clone()),
            (b, a) => c.unchanged("rewind_operations", key, b, a, &["updated_at"]),
        }
    }
    let RewindResponse::Completed {
        operation_id,
        status,
        rewound_message_ids,
    } = answer
    else {
        c.wrong(answer_place("outcome"), "`completed`", "`refused`");
        return added.first().cloned();
    };
    if status != "completed" {
        c.wrong(answer_place("status"), "`completed`", format!("`{status}`"));
    }
    let listed: BTreeSet<String> = rewound_message_ids.iter().cloned().collect();
    let mut fits = Vec::new();
    if listed.is_empty() {
        fits.push("omitted");
    }
    if &listed == rewound {
        fits.push("every-rewound-message");
    }
    if listed == primary {
        fits.push("primary-boundary");
    }
    if fits.is_empty() || listed.len() != rewound_message_ids.len() {
        c.wrong(
            answer_place("rewoundMessageIds"),
            format!("nothing, or once each the rewound ids {}", ids(rewound)),
            ids_list(rewound_message_ids),
        );
    } else {
        c.observe(r::API_REWOUND_IDS, &fits);
    }
    let text = SuffixText::of(before, rewound);
    let json = serde_json::to_string(answer).unwrap_or_default();
    if let Some(quoted) = text.quoted_in(&json) {
        c.wrong(
            answer_place("outcome"),
            "no content of a rewound message",
            format!("`{quoted}` in {json}"),
        );
    }
    let id = if added.contains(operation_id) {
        operation_id.clone()
    } else {
        c.wrong(
            answer_place("operationId"),
            "the id of the operation the rewind recorded",
            format!(
                "`{operation_id}`, while the new operations are {}",
                ids_list(&added)
            ),
        );
        match added.first() {
            Some(first) => first.clone(),
            None => return None,
        }
    };
    for extra in added.iter().filter(|k| **k != id) {
        c.wrong(
            row_place("rewind_operations", extra, None),
            "one new operation, the completed one",
            format!(
                "another new row {}",
                now.get(extra).map(|r| r.text()).unwrap_or_default()
            ),
        );
    }
    let Some(op) = after.operations.get(&id) else {
        return Some(id);
    };
    if let Some(quoted) = now.get(&id).and_then(|row| text.quoted_in(&row.text())) {
        c.wrong(
            row_place("rewind_operations", &id, None),
            "no content of a rewound message (in its plan, its error or anywhere)",
            format!(
                "`{quoted}` in {}",
                now.get(&id).map(|r| r.text()).unwrap_or_default()
            ),
        );
    }
    let expect = [
        ("status", "completed", op.status.as_str()),
        (
            "thread_id",
            effect.primary.scope_id.as_str(),
            op.thread_id.as_str(),
        ),
        (
            "target_message_id",
            effect.primary.target_message_id.as_str(),
            op.target_message_id.as_str(),
        ),
        (
            "initiator_user_id",
            effect.initiator_user_id.as_str(),
            op.initiator_user_id.as_str(),
        ),
        (
            "workspace_id",
            effect.primary.workspace_id.as_str(),
            op.workspace_id.as_str(),
        ),
    ];
    for (column, want, got) in expect {
        if want != got {
            c.cell(
                "rewind_operations",
                &id,
                column,
                format!("`{want}`"),
                format!("`{got}`"),
            );
        }
    }
    let listed: BTreeSet<String> = op.rewound_message_ids.iter().cloned().collect();
    let mut fits = Vec::new();
    if listed.is_empty() {
        fits.push("not-recorded");
    }
    if &listed == rewound {
        fits.push("every-rewound-message");
    }
    if listed == primary {
        fits.push("primary-boundary");
    }
    if fits.is_empty() || listed.len() != op.rewound_message_ids.len() {
        c.cell(
            "rewind_operations",
            &id,
            "rewound_message_ids",
            format!("once each the rewound ids {}", ids(rewound)),
            ids_list(&op.rewound_message_ids),
        );
    } else {
        c.observe(r::OPERATION_REWOUND_IDS, &fits);
    }
    Some(id)
}

fn ids(set: &BTreeSet<String>) -> String {
    ids_list(&set.iter().cloned().collect::<Vec<_>>())
}

fn ids_list(list: &[String]) -> String {
    if list.is_empty() {
        return "none".to_owned();
    }
    list.iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
