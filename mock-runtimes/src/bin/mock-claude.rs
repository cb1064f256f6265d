//! The mock claude runtime as a standalone program (see `rewind_mock_runtimes::claude`); with
//! `REWIND_REAL_PROGRAM` set, a journaling proxy in front of that program instead (see
//! `rewind_mock_runtimes::proxy`).

fn main() -> std::process::ExitCode {
    rewind_mock_runtimes::run_as("claude", std::env::args().skip(1).collect())
        .unwrap_or(std::process::ExitCode::FAILURE)
}
