//! Checks that need a tool the README lists as optional (Chromium, actionlint): on a developer's
//! machine without it the check says on stderr that it did not run and why, and passes; under
//! `CI=true` (and so in `.ci/run`) the tool is required and the check fails.

use std::io::Write as _;

/// Whether optional tools are required here: `CI` is set to `true` (or `1`).
pub fn required() -> bool {
    matches!(
        std::env::var("CI")
            .map(|v| v.to_ascii_lowercase())
            .as_deref(),
        Ok("true" | "1")
    )
}

/// The tool `what` is missing (`why` says what was looked for and how to get it): fails the
/// check under `CI=true`, otherwise says on stderr that `check` did not run.
pub fn missing(check: &str, what: &str, why: &str) {
    if required() {
        panic!("{check} needs {what}, and CI=true requires it: {why}");
    }
    // Straight to the process's standard error: the test harness captures what a passing test
    // writes through `eprintln!` and `std::io::stderr()`, and this must be seen.
    let line = format!(
        "NOT RUN: {check}: {what} is missing ({why}); under CI=true this check fails instead\n"
    );
    match std::fs::OpenOptions::new().append(true).open("/dev/stderr") {
        Ok(mut err) => {
            let _ = err.write_all(line.as_bytes());
        }
        Err(_) => eprint!("{line}"),
    }
}
