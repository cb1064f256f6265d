//! Runs the Gherkin suite: the `rewind-conformance` binary's `run` command from the package root,
//! with `args` after it and this process's environment (so `REWIND_DATABASE_URL`, `REWIND_JSON`,
//! `REWIND_SUT_URL` and the other `REWIND_*` run options apply), its output going where this
//! process's goes. Shared by `tests/conformance.rs` and the integration test that runs the suite
//! inside `cargo test`.

use std::process::{Command, ExitStatus, Stdio};

/// The suite's exit status, or why it did not start.
pub fn run_suite(args: &[String]) -> std::io::Result<ExitStatus> {
    Command::new(env!("CARGO_BIN_EXE_rewind-conformance"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("run")
        .args(args)
        .stdin(Stdio::null())
        .status()
}
