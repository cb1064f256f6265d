//! The mock claude runtime as a standalone program (see `rewind_mock_runtimes::claude`).

fn main() -> std::process::ExitCode {
    rewind_mock_runtimes::claude::main(std::env::args().skip(1).collect())
}
