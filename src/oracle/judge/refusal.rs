//! Judging a refusal: the database is unchanged, except for at most one operation row that
//! records the refusal (register `refusal-records-operation`).

use rewind_driver_protocol::RewindRequest;

use super::collector::{keys, row_place, Collector};
use super::report::Place;
use crate::oracle::predict::Refusal;
use crate::oracle::readings as r;
use crate::oracle::state::State;

/// Checks every table after a refusal allowed as `refusal`: nothing changed, but one
/// `rewind_operations` row of the request's target on its scope with one of the refusal's
/// statuses may have been added, and the session pointers of the agents a failed restore ran
/// for may have moved. `operation_id` is what the answer named.
pub(crate) fn database(
    c: &mut Collector,
    before: &State,
    after: &State,
    request: &RewindRequest,
    refusal: &Refusal,
    operation_id: Option<&str>,
) {
    for (name, table) in &before.tables {
        let now = after.table(name);
        if name == "rewind_operations" {
            continue;
        }
        for key in keys(table, now) {
            let skip: &[&str] =
                if name == "agents" && refusal.session_pointers_may_change.contains(key.as_str()) {
                    &["runtime_session_id"]
                } else {
                    &[]
                };
            c.unchanged(name, key, table.get(key), now.get(key), skip);
        }
    }
    extra_tables(c, before, after);
    let was = before.table("rewind_operations");
    let now = after.table("rewind_operations");
    let mut added = Vec::new();
    for key in keys(was, now) {
        match (was.get(key), now.get(key)) {
            (None, Some(row)) => added.push(row),
            (b, a) => c.unchanged("rewind_operations", key, b, a, &[]),
        }
    }
    let statuses: Vec<&str> = refusal
        .operation_statuses
        .iter()
        .map(String::as_str)
        .collect();
    for (index, row) in added.iter().enumerate() {
        let key = &row.key;
        if index > 0 {
            c.wrong(
                row_place("rewind_operations", key, None),
                "at most one operation recording the refusal",
                format!("another new row {}", row.text()),
            );
            continue;
        }
        let status = row.str("status").unwrap_or_default();
        if !statuses.contains(&status) {
            c.cell(
                "rewind_operations",
                key,
                "status",
                statuses
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(" or "),
                format!("`{status}`"),
            );
        }
        for (column, want) in [
            ("target_message_id", request.target_message_id.as_str()),
            ("thread_id", request.scope_id.as_str()),
        ] {
            let got = row.str(column).unwrap_or_default();
            if got != want {
                c.cell(
                    "rewind_operations",
                    key,
                    column,
                    format!("`{want}`"),
                    format!("`{got}`"),
                );
            }
        }
    }
    c.observe(
        r::REFUSAL_RECORDS_OPERATION,
        &[if added.is_empty() {
            "no-operation"
        } else {
            "failed-operation"
        }],
    );
    if let Some(id) = operation_id {
        if added.iter().any(|row| row.key == id) {
            c.observe(r::REFUSAL_OPERATION_ID, &["own-failed-record"]);
        } else if was.get(id).is_some() {
            c.observe(r::REFUSAL_OPERATION_ID, &["existing-operation"]);
        } else {
            c.wrong(
                Place::Answer {
                    field: "operationId".to_owned(),
                },
                "the id of the operation that recorded the refusal, or of an existing one",
                format!("`{id}`, which names no operation"),
            );
        }
    }
}

/// Tables the spec schema does not define must be exactly as they were.
pub(crate) fn extra_tables(c: &mut Collector, before: &State, after: &State) {
    let names: std::collections::BTreeSet<&String> = before
        .extra_tables
        .keys()
        .chain(after.extra_tables.keys())
        .collect();
    for name in names {
        let was = before.extra_tables.get(name);
        let now = after.extra_tables.get(name);
        if was != now {
            let show = |rows: Option<&Vec<String>>| match rows {
                None => "no table".to_owned(),
                Some(rows) => format!("{} rows: {}", rows.len(), rows.join(", ")),
            };
            c.wrong(
                Place::Table {
                    table: name.clone(),
                },
                format!("the table unchanged ({})", show(was)),
                show(now),
            );
        }
    }
}
