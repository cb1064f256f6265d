//! The `rewind-conformance` command: see `rewind-conformance --help`.

mod cli;
mod results;
mod smoke;
mod suite;

fn main() -> std::process::ExitCode {
    // Behave like other Unix tools when the reader of stdout goes away (`... | head`): end
    // quietly instead of panicking on a failed print.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Started under a runtime's name (`codex`, `claude`, `opencode`): be that mock runtime.
    let mut args = std::env::args();
    if let Some(program) = args.next() {
        if let Some(code) = rewind_mock_runtimes::run_as(&program, args.collect()) {
            return code;
        }
    }
    cli::main()
}
