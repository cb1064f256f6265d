//! [`Collector`]: gathers discrepancies and observed readings while the judge walks the
//! tables, with the row comparisons every check shares.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::report::{Discrepancy, Place};
use crate::oracle::readings::Readings;
use crate::oracle::state::Row;

/// Discrepancies and readings found so far.
#[derive(Debug, Default)]
pub(crate) struct Collector {
    pub discrepancies: Vec<Discrepancy>,
    observed: BTreeMap<String, Vec<BTreeSet<String>>>,
}

/// Ambiguities an implementation answers once per rewind: every observation must agree.
const ONE_READING_PER_REWIND: [&str; 6] = [
    crate::oracle::readings::TOMBSTONE_REWOUND_AT,
    crate::oracle::readings::FAILED_FANOUT_ROWS,
    crate::oracle::readings::NOTICE_MARKS_SYNC_DIRTY,
    crate::oracle::readings::NOTICE_IN_REPLY_SUMMARY,
    crate::oracle::readings::OPERATION_REWOUND_IDS,
    crate::oracle::readings::API_REWOUND_IDS,
];

impl Collector {
    /// Records a discrepancy at `place`.
    pub fn wrong(&mut self, place: Place, expected: impl Into<String>, actual: impl Into<String>) {
        self.discrepancies.push(Discrepancy {
            place,
            expected: expected.into(),
            actual: actual.into(),
        });
    }

    /// Records a discrepancy in `column` of a row.
    pub fn cell(
        &mut self,
        table: &str,
        key: &str,
        column: &str,
        expected: impl Into<String>,
        actual: impl Into<String>,
    ) {
        self.wrong(row_place(table, key, Some(column)), expected, actual);
    }

    /// Records that what was seen fits each of `readings` of `ambiguity`.
    pub fn observe(&mut self, ambiguity: &str, readings: &[&str]) {
        self.observed
            .entry(ambiguity.to_owned())
            .or_default()
            .push(readings.iter().map(|r| (*r).to_owned()).collect());
    }

    /// The readings observed; a rewind whose observations of a once-per-rewind ambiguity
    /// disagree gets a discrepancy.
    pub fn finish(&mut self) -> Readings {
        let mut readings = Readings::new();
        let observed = std::mem::take(&mut self.observed);
        for (ambiguity, seen) in observed {
            let kept: BTreeSet<String> = if ONE_READING_PER_REWIND.contains(&ambiguity.as_str()) {
                let mut common = seen.first().cloned().unwrap_or_default();
                for set in &seen[1..] {
                    common = common.intersection(set).cloned().collect();
                }
                if common.is_empty() {
                    let all: BTreeSet<&String> = seen.iter().flatten().collect();
                    self.wrong(
                        Place::Table {
                            table: "(every table)".to_owned(),
                        },
                        format!("one reading of `{ambiguity}` throughout the rewind"),
                        format!("rows following {}", quote_list(all)),
                    );
                    seen.into_iter().flatten().collect()
                } else {
                    common
                }
            } else {
                seen.into_iter().flatten().collect()
            };
            for reading in kept {
                readings.take(&ambiguity, &reading);
            }
        }
        readings
    }

    /// Compares `actual` with `expected` column by column, leaving out `skip`; each differing
    /// column is a discrepancy.
    pub fn same_columns(
        &mut self,
        table: &str,
        key: &str,
        expected: &Map<String, Value>,
        actual: &Map<String, Value>,
        skip: &[&str],
    ) {
        let columns: BTreeSet<&String> = expected.keys().chain(actual.keys()).collect();
        for column in columns {
            if skip.contains(&column.as_str()) {
                continue;
            }
            let want = expected.get(column.as_str());
            let got = actual.get(column.as_str());
            if want != got {
                self.cell(table, key, column, show(want), show(got));
            }
        }
    }

    /// Requires the row to be as before (both present and equal outside `skip`), or both
    /// absent.
    pub fn unchanged(
        &mut self,
        table: &str,
        key: &str,
        before: Option<&Row>,
        after: Option<&Row>,
        skip: &[&str],
    ) {
        match (before, after) {
            (Some(b), Some(a)) => self.same_columns(table, key, &b.columns, &a.columns, skip),
            (Some(b), None) => self.wrong(
                row_place(table, key, None),
                format!("the row kept as it was: {}", b.text()),
                "no row",
            ),
            (None, Some(a)) => self.wrong(
                row_place(table, key, None),
                "no row",
                format!("new row {}", a.text()),
            ),
            (None, None) => {}
        }
    }

    /// Requires the row to be gone.
    pub fn deleted(&mut self, table: &str, key: &str, after: Option<&Row>, why: &str) {
        if let Some(row) = after {
            self.wrong(
                row_place(table, key, None),
                format!("no row ({why})"),
                row.text(),
            );
        }
    }
}

/// The place of a row, or of one of its columns.
pub(crate) fn row_place(table: &str, key: &str, column: Option<&str>) -> Place {
    Place::Row {
        table: table.to_owned(),
        key: key.to_owned(),
        column: column.map(str::to_owned),
    }
}

/// A JSON value as a backticked fragment; `no column` when absent.
pub(crate) fn show(value: Option<&Value>) -> String {
    match value {
        None => "no column".to_owned(),
        Some(v) => format!("`{v}`"),
    }
}

fn quote_list<'a>(items: impl IntoIterator<Item = &'a String>) -> String {
    items
        .into_iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(" and ")
}

/// The union of the keys of two tables' rows, in order.
pub(crate) fn keys<'a>(
    before: &'a crate::oracle::state::Table,
    after: &'a crate::oracle::state::Table,
) -> BTreeSet<&'a String> {
    before.rows.keys().chain(after.rows.keys()).collect()
}
