//! The environment variables the harness reads, which must not leak into a test's run of the
//! binary from the environment `cargo test` runs in.

use std::process::Command;

/// Every variable the harness reads for a run's options.
pub const HARNESS_ENV: [&str; 9] = [
    "REWIND_DATABASE_URL",
    "REWIND_SUT_URL",
    "REWIND_PROFILE",
    "REWIND_EXPECTATIONS",
    "REWIND_JSON",
    "REWIND_DURATIONS",
    "REWIND_SUITE",
    "REWIND_REFERENCE_VARIANT",
    "REWIND_CLIENT_MODULE",
];

/// Removes [`HARNESS_ENV`] from `command`'s environment.
pub fn clean(command: &mut Command) -> &mut Command {
    for name in HARNESS_ENV {
        command.env_remove(name);
    }
    command
}
