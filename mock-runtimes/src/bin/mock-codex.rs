//! The mock codex runtime as a standalone program (see `rewind_mock_runtimes::codex`).

fn main() -> std::process::ExitCode {
    rewind_mock_runtimes::codex::main(std::env::args().skip(1).collect())
}
