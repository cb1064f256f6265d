//! The pinned releases, installed (`rewind_conformance::real::install`): the CI script's first
//! step, and a test of its own; and which release the tier checks as each runtime's current one
//! ([`Checked`], `REWIND_REAL_RELEASES`).

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Mutex;

pub use rewind_conformance::real::install::*;

/// The variable that picks the release the tier checks as each runtime's current one: `pinned`
/// (the default: the newest pinned release, [`PINNED`]) or `latest` (the newest release the npm
/// registry offers today). The older pinned releases are checked either way.
pub const RELEASES_ENV: &str = "REWIND_REAL_RELEASES";

/// Whether `REWIND_REAL_RELEASES` asks for the newest releases.
fn latest_wanted() -> bool {
    match std::env::var(RELEASES_ENV) {
        Err(std::env::VarError::NotPresent) => false,
        Ok(value) => match value.trim() {
            "" | "pinned" => false,
            "latest" => true,
            other => panic!("{RELEASES_ENV}={other}: expected `pinned` (the default) or `latest`"),
        },
        Err(e) => panic!("{RELEASES_ENV}: {e}"),
    }
}

/// The newest release of `pinned`'s runtime on the npm registry, asked once per runtime and
/// test process (`npm view`, the one network call besides installs).
fn newest(pinned: &Release) -> Release {
    static NEWEST: Mutex<BTreeMap<&'static str, Release>> = Mutex::new(BTreeMap::new());
    let mut known = NEWEST.lock().unwrap_or_else(|p| p.into_inner());
    known
        .entry(pinned.name)
        .or_insert_with(|| {
            pinned.at("latest").resolve_latest().unwrap_or_else(|e| {
                panic!(
                    "{RELEASES_ENV}=latest: the newest {} release: {e}",
                    pinned.name
                )
            })
        })
        .clone()
}

/// A real release a test checks, and the pinned release it stands for: the mock of a
/// differential test imitates the pinned one (the newest release the mocks know).
#[derive(Debug, Clone)]
pub struct Checked {
    /// The real release the test runs.
    pub real: Release,
    /// The pinned release: the same as `real`, unless `REWIND_REAL_RELEASES=latest` chose it.
    pub pinned: Release,
    latest: bool,
}

impl Checked {
    /// An older pinned release, checked as it is whatever `REWIND_REAL_RELEASES` says.
    pub fn pinned(release: Release) -> Checked {
        Checked {
            real: release.clone(),
            pinned: release,
            latest: false,
        }
    }

    /// The current release of `pinned`'s runtime: `pinned` itself, or under
    /// `REWIND_REAL_RELEASES=latest` the newest release the npm registry offers today.
    pub fn current(pinned: Release) -> Checked {
        if latest_wanted() {
            Checked {
                real: newest(&pinned),
                pinned,
                latest: true,
            }
        } else {
            Checked::pinned(pinned)
        }
    }

    /// How failures name the release: `codex 0.171.0`, or under `REWIND_REAL_RELEASES=latest`
    /// `codex 0.172.0 (the newest release; pinned: 0.171.0)`.
    pub fn label(&self) -> String {
        if !self.latest {
            self.real.to_string()
        } else if self.real.version == self.pinned.version {
            format!("{} (the newest release, also the pinned one)", self.real)
        } else {
            format!(
                "{} (the newest release; pinned: {})",
                self.real, self.pinned.version
            )
        }
    }

    /// A guard that, should the test fail before it is dropped (a call that panics on the real
    /// runtime, not only a difference the comparison reports), says on which release.
    pub fn naming_failures(&self, test: &str) -> NamesFailures {
        NamesFailures(format!("{test}: this failure is on {}", self.label()))
    }
}

/// See [`Checked::naming_failures`].
pub struct NamesFailures(String);

impl Drop for NamesFailures {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.0);
        }
    }
}

/// Installs every pinned release (the CI script's first step, and a test of its own), and
/// under `REWIND_REAL_RELEASES=latest` the newest releases the tier checks.
#[test]
fn every_pinned_release_is_installed() {
    let mut releases: Vec<Release> = ALL.to_vec();
    for pinned in PINNED {
        let current = Checked::current(pinned).real;
        if !releases.contains(&current) {
            releases.push(current);
        }
    }
    for release in releases {
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
