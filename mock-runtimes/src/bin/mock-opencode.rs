//! The mock opencode runtime as a standalone program (see `rewind_mock_runtimes::opencode`).

fn main() -> std::process::ExitCode {
    rewind_mock_runtimes::opencode::main(std::env::args().skip(1).collect())
}
