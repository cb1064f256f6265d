//! The real-runtime tier (`cargo test --features real-runtimes --test real_runtimes`).
//!
//! Pinned releases of the real runtimes (Codex 0.155.1 and 0.171.0, Claude Code 2.1.197 and
//! 2.1.332, OpenCode 1.18.33 and 1.18.34) are installed from the npm registry into a cache
//! ([`install`]) and run offline against fake model APIs on loopback ([`fake_models`]), with
//! every home and config directory in a temp directory. The newest pinned release of each
//! runtime is its *current* release (the tests named `*_current*`); the older ones (Codex
//! 0.155.1, Claude Code 2.1.197, OpenCode 1.18.33) have tests of their own. Two kinds of tests:
//!
//! - differential tests drive the mock and the real runtime through the same calls, normalise
//!   ids, times, paths and free text, and fail with a diff where they answer differently
//!   ([`compare`]);
//! - reference tests run the reference implementation's `deliver` and `restore` against the real
//!   runtimes (and against the mocks, for contrast).
//!
//! Environment:
//!
//! - `REWIND_REAL_RUNTIMES_DIR` overrides the runtime cache (default
//!   `~/.cache/rewind-conformance/real-runtimes`, shared with `run --runtimes real`);
//! - `REWIND_REAL_RELEASES=latest` runs the current-release tests (differential and reference)
//!   on the newest release of each runtime the npm registry offers today (`npm view`, then
//!   installed into the cache like the pinned ones) instead of the pinned one. The mocks of
//!   those differential tests still imitate the pinned release, so a failure says where the
//!   newest release stopped answering like it: it names the release (and the pinned one) and
//!   every call that differs. The older releases' tests are the same either way; `pinned`, the
//!   default, checks the pinned releases only;
//! - `REWIND_REAL_DUMP=1` prints the Claude transcripts of the differential test.
//!
//! Only the install (and under `latest` the look-up of the newest releases) needs the network
//! (the npm registry); the runtimes run with HOME, XDG and their config directories in temp
//! directories and are configured to reach nothing but the fake models on loopback (nothing
//! isolates them from the network).

mod claude;
mod codex;
mod compare;
mod install;
mod opencode;
mod reference;

pub use rewind_conformance::real::fake_model as fake_models;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The mock program `name` (`codex`, `claude`, `opencode`): the harness binary, which is the
/// mock runtime when started under that name, linked under it in the test's scratch directory.
pub fn mock_program(name: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("real-runtimes-mock-bin");
        std::fs::create_dir_all(&dir).expect("mock bin dir");
        let exe = Path::new(env!("CARGO_BIN_EXE_rewind-conformance"));
        for program in ["codex", "claude", "opencode"] {
            // A fresh link renamed over the old one: other test processes may use it meanwhile.
            let fresh = dir.join(format!("{program}.{}", std::process::id()));
            let _ = std::fs::remove_file(&fresh);
            std::os::unix::fs::symlink(exe, &fresh).expect("linking a mock program");
            std::fs::rename(&fresh, dir.join(program)).expect("placing a mock program");
        }
        dir
    });
    dir.join(name)
}

/// A temp directory for one side of a test.
pub fn tempdir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("rewind-{prefix}-"))
        .tempdir()
        .expect("temp dir")
}

/// HOME and the XDG directories inside `root`, plus `extra`.
pub fn isolated_env(root: &Path, extra: &[(&str, &Path)]) -> Vec<(String, String)> {
    rewind_conformance::real::isolated_env(root, extra).unwrap_or_else(|e| panic!("{e}"))
}
