//! The `rewind-conformance` command: see `rewind-conformance --help`.

mod cli;
mod suite;

fn main() -> std::process::ExitCode {
    cli::main()
}
