//! The fault matrix: for each runtime and each fault kind, whether the scenarios that planted
//! that fault in that runtime passed.

use std::collections::BTreeMap;

use rewind_mock_runtimes::faults::FaultKind;

/// The runtimes the matrix lists, in order.
const RUNTIMES: [&str; 4] = ["codex", "claude", "opencode", "builtin"];

/// One scenario's contribution: the runtime id, the fault label, and whether it passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultCell {
    /// The agent's runtime id (`builtin` stays `builtin`, although opencode serves it).
    pub runtime: String,
    /// The fault's label (`success-without-effect`, ...).
    pub fault: String,
}

/// Results by (runtime, fault): (passed, total).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultMatrix {
    cells: BTreeMap<(String, String), (usize, usize)>,
}

impl FaultMatrix {
    /// Builds the matrix from each scenario's cell and verdict.
    pub fn from_results(results: &[(FaultCell, bool)]) -> FaultMatrix {
        let mut cells = BTreeMap::new();
        for (cell, passed) in results {
            let entry: &mut (usize, usize) = cells
                .entry((cell.runtime.clone(), cell.fault.clone()))
                .or_default();
            entry.1 += 1;
            if *passed {
                entry.0 += 1;
            }
        }
        FaultMatrix { cells }
    }

    /// Whether no fault scenario ran.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    fn cell(&self, runtime: &str, fault: &str) -> &'static str {
        match self.cells.get(&(runtime.to_owned(), fault.to_owned())) {
            None => "-",
            Some((passed, total)) if passed == total => "pass",
            Some(_) => "FAIL",
        }
    }

    /// The matrix as a Markdown table (runtimes down, fault kinds across; `-` = not run).
    pub fn markdown(&self) -> String {
        let faults: Vec<&str> = FaultKind::ALL.iter().map(|k| k.label()).collect();
        let mut out = format!("| runtime | {} |\n", faults.join(" | "));
        out.push_str(&format!("|---|{}\n", "---|".repeat(faults.len())));
        let mut runtimes: Vec<String> = RUNTIMES.iter().map(|r| (*r).to_owned()).collect();
        for (runtime, _) in self.cells.keys() {
            if !runtimes.contains(runtime) {
                runtimes.push(runtime.clone());
            }
        }
        for runtime in runtimes {
            let row: Vec<&str> = faults.iter().map(|f| self.cell(&runtime, f)).collect();
            out.push_str(&format!("| {runtime} | {} |\n", row.join(" | ")));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_show_pass_fail_and_not_run() {
        let cell = |runtime: &str, fault: &str| FaultCell {
            runtime: runtime.into(),
            fault: fault.into(),
        };
        let matrix = FaultMatrix::from_results(&[
            (cell("codex", "error"), true),
            (cell("codex", "hang"), true),
            (cell("codex", "hang"), false),
        ]);
        let md = matrix.markdown();
        assert!(
            md.contains("| codex | pass | FAIL | - | - | - | - |"),
            "{md}"
        );
        assert!(md.contains("| builtin | - | - | - | - | - | - |"), "{md}");
        assert!(FaultMatrix::default().is_empty());
    }
}
