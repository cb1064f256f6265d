//! The `rewind-conformance` command: see `rewind-conformance --help`.

mod cli;
mod fuzzing;
mod merge;
mod reports;
mod results;
mod smoke;
mod step_reference;
mod suite;

fn main() -> std::process::ExitCode {
    // Started under a runtime's name (`codex`, `claude`, `opencode`): be that mock runtime.
    let mut args = std::env::args();
    if let Some(program) = args.next() {
        if let Some(code) = rewind_mock_runtimes::run_as(&program, args.collect()) {
            return code;
        }
    }
    end_quietly_on_a_closed_stdout();
    cli::main()
}

/// Behaves like other Unix tools when the reader of stdout goes away (`... | head`): the run
/// ends with status 141 (128 + SIGPIPE) instead of a panic on the failed print. Cucumber's
/// writer, which runs under cucumber's own panic hook, writes through [`suite::QuietStdout`].
///
/// SIGPIPE itself stays ignored (Rust's default). The harness writes to the stdin of runtime
/// processes all the time, in process for the reference implementation; a runtime that exits
/// before reading its input must be a failed call, not a signal that ends the whole run.
fn end_quietly_on_a_closed_stdout() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            suite::end_on_closed_stdout();
        }
        default_hook(info);
    }));
}
