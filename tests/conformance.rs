//! `cargo test --test conformance [-- <run options>]`: the whole Gherkin suite against the
//! reference implementation on the embedded PostgreSQL (or whatever `REWIND_DATABASE_URL` /
//! the forwarded options say).
//!
//! The suite's World and steps live in the `rewind-conformance` binary (cucumber gathers steps at
//! link time, reliably only inside one crate), so this entry point runs that binary's `run`
//! command from the package root and forwards its own arguments, e.g.
//! `cargo test --test conformance -- --tags @rule:init.human-only`.
//!
//! A plain `cargo test` does not run this target (`test = false`): the same whole-suite run is a
//! test of the `integration` binary there (`conformance::`), where it runs beside the other
//! integration tests instead of before them.

use std::process::ExitCode;

#[path = "integration/common/suite_run.rs"]
mod suite_run;

fn main() -> ExitCode {
    let forwarded: Vec<String> = std::env::args()
        .skip(1)
        // libtest-style flags cargo may pass to every test binary; not ours.
        .filter(|a| {
            !matches!(
                a.as_str(),
                "--nocapture" | "--quiet" | "-q" | "--show-output"
            )
        })
        .collect();
    match suite_run::run_suite(&forwarded) {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => {
            eprintln!("conformance suite failed ({status})");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("cannot start the rewind-conformance binary: {e}");
            ExitCode::FAILURE
        }
    }
}
