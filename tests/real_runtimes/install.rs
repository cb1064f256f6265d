//! The pinned releases, installed (`rewind_conformance::real::install`): the CI script's first
//! step, and a test of its own.

use std::process::Command;

pub use rewind_conformance::real::install::*;

/// Installs every pinned release (the CI script's first step, and a test of its own).
#[test]
fn every_pinned_release_is_installed() {
    for release in ALL {
        let program = release.program().unwrap_or_else(|e| panic!("{e}"));
        let out = Command::new(&program)
            .arg("--version")
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&*release.version),
            "{} --version printed {text:?}",
            release.spec()
        );
    }
}
