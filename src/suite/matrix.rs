//! [`OutcomeMatrix`]: which scenarios of a kind passed, by two coordinates (a runtime and a
//! fault it planted, a storm and its size, a database fault and the phase it struck), printed
//! in the run summary. A scenario contributes a [`Cell`]; a cell passes when every scenario
//! that contributed to it passed.

use std::collections::BTreeMap;

/// The matrices scenarios contribute to besides the runtime restore fault matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MatrixKind {
    /// Rewinds started at once: the storm's shape by how many rewinds raced.
    Storm,
    /// The implementation's database session failed: the phase by the fault.
    DatabaseFault,
}

impl MatrixKind {
    /// Every kind, in the order the summary prints them.
    pub const ALL: [MatrixKind; 2] = [MatrixKind::Storm, MatrixKind::DatabaseFault];

    /// The summary's heading for the matrix.
    pub fn title(self) -> &'static str {
        match self {
            MatrixKind::Storm => "rewind storm matrix (storm x rewinds started at once)",
            MatrixKind::DatabaseFault => {
                "database fault matrix (phase of the rewind x fault of its database session)"
            }
        }
    }

    /// The matrix, empty, with its rows and columns in their printing order.
    pub fn empty(self) -> OutcomeMatrix {
        match self {
            MatrixKind::Storm => OutcomeMatrix::new("storm", &STORMS, &[]),
            MatrixKind::DatabaseFault => OutcomeMatrix::new("phase", &PHASES, &DB_FAULTS),
        }
    }
}

/// The storm shapes, in printing order.
pub const STORMS: [&str; 4] = [
    "one scope",
    "a channel and its reply threads",
    "with live sends and deliveries",
    "a live send into the held scope",
];

/// The phases of a rewind a database fault can strike, in order.
pub const PHASES: [&str; 6] = [
    "while planning",
    "after the operation is recorded",
    "during the runtime restore",
    "inside apply, before the tombstones",
    "inside apply, after the tombstones",
    "at commit",
];

/// The database faults, in printing order.
pub const DB_FAULTS: [&str; 2] = ["backend terminated", "statement timeout"];

/// One scenario's contribution to a matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// The matrix.
    pub kind: MatrixKind,
    /// The row (a storm shape, a phase).
    pub row: String,
    /// The column (a storm size, a fault).
    pub column: String,
}

/// Results by row and column: (passed, total).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutcomeMatrix {
    corner: String,
    rows: Vec<String>,
    columns: Vec<String>,
    cells: BTreeMap<(String, String), (usize, usize)>,
}

impl OutcomeMatrix {
    /// An empty matrix whose rows and columns start with these (others are added as they
    /// come); `corner` heads the row names.
    pub fn new(corner: &str, rows: &[&str], columns: &[&str]) -> OutcomeMatrix {
        OutcomeMatrix {
            corner: corner.to_owned(),
            rows: rows.iter().map(|r| (*r).to_owned()).collect(),
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
            cells: BTreeMap::new(),
        }
    }

    /// Counts one scenario in cell (`row`, `column`).
    pub fn add(&mut self, row: &str, column: &str, passed: bool) {
        self.add_counts(row, column, usize::from(passed), 1);
    }

    /// Counts `total` scenarios in cell (`row`, `column`), `passed` of which passed.
    pub fn add_counts(&mut self, row: &str, column: &str, passed: usize, total: usize) {
        if !self.rows.iter().any(|r| r == row) {
            self.rows.push(row.to_owned());
        }
        if !self.columns.iter().any(|c| c == column) {
            self.columns.push(column.to_owned());
            // Numeric columns (storm sizes) read best in order.
            if self.columns.iter().all(|c| c.parse::<u64>().is_ok()) {
                self.columns
                    .sort_by_key(|c| c.parse::<u64>().unwrap_or_default());
            }
        }
        let entry = self
            .cells
            .entry((row.to_owned(), column.to_owned()))
            .or_default();
        entry.0 += passed;
        entry.1 += total;
    }

    /// Every cell a scenario contributed to, rows and columns in printing order: (row, column,
    /// passed, total).
    pub fn cells(&self) -> Vec<(&str, &str, usize, usize)> {
        self.rows
            .iter()
            .flat_map(|row| self.columns.iter().map(move |column| (row, column)))
            .filter_map(|(row, column)| {
                self.cells
                    .get(&(row.clone(), column.clone()))
                    .map(|(passed, total)| (row.as_str(), column.as_str(), *passed, *total))
            })
            .collect()
    }

    /// Whether no scenario contributed.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    fn cell(&self, row: &str, column: &str) -> &'static str {
        match self.cells.get(&(row.to_owned(), column.to_owned())) {
            None => "-",
            Some((passed, total)) if passed == total => "pass",
            Some(_) => "FAIL",
        }
    }

    /// The matrix as a Markdown table (`-` = not run).
    pub fn markdown(&self) -> String {
        let mut out = format!("| {} | {} |\n", self.corner, self.columns.join(" | "));
        out.push_str(&format!("|---|{}\n", "---|".repeat(self.columns.len())));
        for row in &self.rows {
            let cells: Vec<&str> = self.columns.iter().map(|c| self.cell(row, c)).collect();
            out.push_str(&format!("| {row} | {} |\n", cells.join(" | ")));
        }
        out
    }
}

/// Builds every matrix of [`MatrixKind::ALL`] from the scenarios' cells and verdicts; the ones no
/// scenario contributed to are left out.
pub fn from_results(results: &[(Cell, bool)]) -> Vec<(MatrixKind, OutcomeMatrix)> {
    MatrixKind::ALL
        .iter()
        .filter_map(|&kind| {
            let mut matrix = kind.empty();
            for (cell, passed) in results.iter().filter(|(c, _)| c.kind == kind) {
                matrix.add(&cell.row, &cell.column, *passed);
            }
            (!matrix.is_empty()).then_some((kind, matrix))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_pass_fail_or_did_not_run() {
        let cell = |row: &str, column: &str| Cell {
            kind: MatrixKind::Storm,
            row: row.into(),
            column: column.into(),
        };
        let matrices = from_results(&[
            (cell("one scope", "32"), true),
            (cell("one scope", "2"), true),
            (cell("one scope", "2"), false),
            (cell("a new shape", "8"), true),
        ]);
        assert_eq!(matrices.len(), 1, "no database fault ran");
        let md = matrices[0].1.markdown();
        assert!(md.starts_with("| storm | 2 | 8 | 32 |\n"), "{md}");
        assert!(md.contains("| one scope | FAIL | - | pass |"), "{md}");
        assert!(
            md.contains("| with live sends and deliveries | - | - | - |"),
            "{md}"
        );
        assert!(md.contains("| a new shape | - | pass | - |"), "{md}");
    }

    #[test]
    fn database_faults_list_every_phase_and_fault() {
        let md = MatrixKind::DatabaseFault.empty().markdown();
        assert!(
            md.starts_with("| phase | backend terminated | statement timeout |"),
            "{md}"
        );
        assert_eq!(md.lines().count(), 2 + PHASES.len());
    }
}
