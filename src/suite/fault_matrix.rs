//! The fault matrix: for each runtime and each fault kind, whether the scenarios that planted
//! that fault in that runtime passed.

use rewind_mock_runtimes::faults::FaultKind;
use serde::{Deserialize, Serialize};

use super::matrix::OutcomeMatrix;

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

/// One cell of the matrix as the results file records it (`faults`): how many scenarios planted
/// this fault in this runtime's restore, and how many of them passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultCount {
    /// The runtime id.
    pub runtime: String,
    /// The fault's label.
    pub fault: String,
    /// Scenarios that planted it.
    pub scenarios: usize,
    /// Those of them that passed.
    pub passed: usize,
}

/// Results by (runtime, fault).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultMatrix {
    matrix: OutcomeMatrix,
}

impl FaultMatrix {
    /// Builds the matrix from each scenario's cell and verdict.
    pub fn from_results(results: &[(FaultCell, bool)]) -> FaultMatrix {
        let faults: Vec<&str> = FaultKind::ALL.iter().map(|k| k.label()).collect();
        let mut matrix = OutcomeMatrix::new("runtime", &RUNTIMES, &faults);
        for (cell, passed) in results {
            matrix.add(&cell.runtime, &cell.fault, *passed);
        }
        FaultMatrix { matrix }
    }

    /// Builds the matrix from recorded cells (those of several runs add up).
    pub fn from_counts(counts: &[FaultCount]) -> FaultMatrix {
        let mut matrix = Self::from_results(&[]);
        for c in counts {
            matrix
                .matrix
                .add_counts(&c.runtime, &c.fault, c.passed, c.scenarios);
        }
        matrix
    }

    /// The cells some scenario contributed to, in printing order.
    pub fn counts(&self) -> Vec<FaultCount> {
        self.matrix
            .cells()
            .into_iter()
            .map(|(runtime, fault, passed, scenarios)| FaultCount {
                runtime: runtime.to_owned(),
                fault: fault.to_owned(),
                scenarios,
                passed,
            })
            .collect()
    }

    /// Whether no fault scenario ran.
    pub fn is_empty(&self) -> bool {
        self.matrix.is_empty()
    }

    /// The matrix as a Markdown table (runtimes down, fault kinds across; `-` = not run).
    pub fn markdown(&self) -> String {
        self.matrix.markdown()
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
        // Recorded and read back, twice over: the counts add up.
        let counts = matrix.counts();
        assert_eq!(counts.len(), 2);
        let doubled: Vec<FaultCount> = counts.iter().chain(&counts).cloned().collect();
        let again = FaultMatrix::from_counts(&doubled);
        assert_eq!(again.markdown(), md);
        assert_eq!(again.counts()[1].scenarios, 4);
    }
}
