//! [`CapabilityProfile`]: which agent runtimes and optional read surfaces an implementation
//! declares it supports.
//!
//! There is one source of truth per run: the profile file given with `--profile`
//! (`REWIND_PROFILE`), or else the harness's cargo features, one per runtime and surface
//! ([`CapabilityProfile::compiled`]); `cargo test --no-default-features --features claude,...`
//! and a profile file listing the same names mean the same thing.
//!
//! What a declaration changes: a scenario whose rewind reaches an agent of an undeclared runtime
//! is not skipped; it checks that the implementation refuses that rewind as unsupported. A
//! scenario that reads through an undeclared surface is reported as not applicable.
//!
//! ```yaml
//! # profile.yaml
//! runtimes: [claude, opencode]
//! surfaces: [read-state, message-sync]
//! # Optional: the machine code of each section 9 refusal (catalog error rule id -> code).
//! # Declared codes are required, in every scenario; without a declaration any codes pass
//! # that are consistent (one code per error, distinct errors distinct codes): within each
//! # scenario, and across the run as a finding of the run that changes no scenario's verdict.
//! errorCodes:
//!   err.other-human-message: OTHER_HUMAN
//! # Optional: the Codex release the Codex mock imitates (default: the current one the mock
//! # knows, 0.171.0). An implementation that restores only with `thread/rollback` declares a
//! # release that still has it, 0.155.1; scenarios that name a release keep theirs.
//! codexRelease: 0.155.1
//! # Optional: the Claude Code release the Claude mock imitates (default: the current one,
//! # 2.1.332; 2.1.197 is the other it knows).
//! claudeRelease: 2.1.197
//! # Optional: run the scenarios on real runtime releases instead of the mocks, as
//! # `--runtimes real` does (default: false).
//! realRuntimes: false
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use rewind_driver_protocol::ReadSurface;
use serde::Deserialize;
use serde_saphyr::Spanned;

/// Every runtime id the spec names (spec section 5), each also a cargo feature.
pub const RUNTIMES: [&str; 4] = ["codex", "claude", "opencode", "builtin"];

/// The optional surfaces other than the read surfaces: the member read state (cursor, visible
/// tail, unread count), message sync, the recovery point GC, live delivery to agent runtimes,
/// and a browser client (the client scenarios of section 8, `protocol/CLIENT.md`).
const OTHER_SURFACES: [&str; 5] = [
    "read-state",
    "message-sync",
    "recovery-point-gc",
    "delivery",
    "browser-client",
];

/// The read surfaces: the names on the wire of the driver protocol's `ReadSurface`.
pub const READ_SURFACES: [&str; ReadSurface::ALL.len()] = {
    let mut names = [""; ReadSurface::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = ReadSurface::ALL[i].name();
        i += 1;
    }
    names
};

/// Every optional surface, each also a cargo feature: [`OTHER_SURFACES`], then
/// [`READ_SURFACES`].
pub const SURFACES: [&str; OTHER_SURFACES.len() + READ_SURFACES.len()] = {
    let mut names = [""; OTHER_SURFACES.len() + READ_SURFACES.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = if i < OTHER_SURFACES.len() {
            OTHER_SURFACES[i]
        } else {
            READ_SURFACES[i - OTHER_SURFACES.len()]
        };
        i += 1;
    }
    names
};

/// What an implementation declares it supports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapabilityProfile {
    /// Runtime ids it can restore (a subset of [`RUNTIMES`]).
    pub runtimes: BTreeSet<String>,
    /// Optional surfaces it serves (a subset of [`SURFACES`]).
    pub surfaces: BTreeSet<String>,
    /// Declared refusal codes: catalog error rule id (`err.*`) to the implementation's code.
    pub error_codes: BTreeMap<String, String>,
    /// The Codex release the Codex mock imitates in every scenario that names none (`None`: the
    /// mock's default, the current release).
    pub codex_release: Option<String>,
    /// The Claude Code release the Claude mock imitates (`None`: the mock's default, the
    /// current release).
    pub claude_release: Option<String>,
    /// Run the scenarios on real runtime releases instead of the mocks (`realRuntimes: true`,
    /// the same as `--runtimes real`).
    pub real_runtimes: bool,
    /// Where the declaration came from, for reports.
    pub source: ProfileSource,
}

/// Where a profile came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileSource {
    /// The harness's cargo features.
    CargoFeatures,
    /// A profile file.
    File(PathBuf),
}

impl fmt::Display for ProfileSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileSource::CargoFeatures => write!(f, "the cargo features"),
            ProfileSource::File(path) => write!(f, "`{}`", path.display()),
        }
    }
}

/// A profile file that cannot be used.
pub type ProfileError = crate::input_file::InputFileError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
struct ProfileDoc {
    runtimes: Vec<Spanned<String>>,
    surfaces: Vec<Spanned<String>>,
    #[serde(default)]
    error_codes: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    codex_release: Option<Spanned<String>>,
    #[serde(default)]
    claude_release: Option<Spanned<String>>,
    #[serde(default)]
    real_runtimes: bool,
}

/// Every runtime and surface with whether the cargo feature that declares it is on (the
/// feature is named like it, but for `browser-client`, declared by `browser`).
const COMPILED: [(&str, bool); 24] = [
    ("codex", cfg!(feature = "codex")),
    ("claude", cfg!(feature = "claude")),
    ("opencode", cfg!(feature = "opencode")),
    ("builtin", cfg!(feature = "builtin")),
    ("read-state", cfg!(feature = "read-state")),
    ("message-sync", cfg!(feature = "message-sync")),
    ("recovery-point-gc", cfg!(feature = "recovery-point-gc")),
    ("delivery", cfg!(feature = "delivery")),
    ("browser-client", cfg!(feature = "browser")),
    ("history", cfg!(feature = "history")),
    ("message", cfg!(feature = "message")),
    ("search", cfg!(feature = "search")),
    ("receive", cfg!(feature = "receive")),
    ("root-context", cfg!(feature = "root-context")),
    ("source-context", cfg!(feature = "source-context")),
    ("share-cards", cfg!(feature = "share-cards")),
    ("pins", cfg!(feature = "pins")),
    ("reactions", cfg!(feature = "reactions")),
    ("attachment", cfg!(feature = "attachment")),
    ("attachment-download", cfg!(feature = "attachment-download")),
    ("diagnostics", cfg!(feature = "diagnostics")),
    ("diagnostics-preview", cfg!(feature = "diagnostics-preview")),
    ("stream", cfg!(feature = "stream")),
    ("conversation-index", cfg!(feature = "conversation-index")),
];

impl CapabilityProfile {
    /// The profile the harness was built with: one cargo feature per runtime and surface
    /// (all on by default).
    pub fn compiled() -> Self {
        let on = COMPILED;
        let pick = |names: &[&str]| {
            on.iter()
                .filter(|(name, enabled)| *enabled && names.contains(name))
                .map(|(name, _)| (*name).to_owned())
                .collect()
        };
        CapabilityProfile {
            runtimes: pick(&RUNTIMES),
            surfaces: pick(&SURFACES),
            error_codes: BTreeMap::new(),
            codex_release: None,
            claude_release: None,
            real_runtimes: false,
            source: ProfileSource::CargoFeatures,
        }
    }

    /// Everything: every runtime and every surface.
    pub fn everything() -> Self {
        CapabilityProfile {
            runtimes: RUNTIMES.iter().map(|r| (*r).to_owned()).collect(),
            surfaces: SURFACES.iter().map(|s| (*s).to_owned()).collect(),
            error_codes: BTreeMap::new(),
            codex_release: None,
            claude_release: None,
            real_runtimes: false,
            source: ProfileSource::CargoFeatures,
        }
    }

    /// Reads a profile file.
    pub fn load(path: &Path) -> Result<Self, ProfileError> {
        Self::parse(path, &crate::input_file::read("capability profile", path)?)
    }

    /// Parses profile text; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ProfileError> {
        let doc: ProfileDoc = crate::input_file::parse_yaml(path, text)?;
        let names = |items: Vec<Spanned<String>>, known: &[&str], what: &str| {
            let mut out = BTreeSet::new();
            for item in items {
                if !known.contains(&item.value.as_str()) {
                    return Err(ProfileError::at(
                        path,
                        item.referenced,
                        format!(
                            "unknown {what} `{}` (known {what}s: {})",
                            item.value,
                            known.join(", ")
                        ),
                    ));
                }
                out.insert(item.value);
            }
            Ok(out)
        };
        let mut error_codes = BTreeMap::new();
        let mut by_code: BTreeMap<String, String> = BTreeMap::new();
        for (rule, code) in doc.error_codes {
            let at = |detail: String| ProfileError::at(path, code.referenced, detail);
            if !rule.starts_with("err.") {
                return Err(at(format!(
                    "errorCodes: `{rule}` is not an error rule id (they start with `err.`)"
                )));
            }
            if code.value.trim().is_empty() {
                return Err(at(format!("errorCodes: the code of `{rule}` is empty")));
            }
            if let Some(other) = by_code.insert(code.value.clone(), rule.clone()) {
                return Err(at(format!(
                    "errorCodes: `{rule}` and `{other}` both declare code `{}`; distinct errors \
                     need distinct codes",
                    code.value
                )));
            }
            error_codes.insert(rule, code.value);
        }
        let codex_release = match doc.codex_release {
            None => None,
            Some(release) => {
                rewind_mock_runtimes::codex::Version::parse(release.value.trim()).map_err(|e| {
                    ProfileError::at(path, release.referenced, format!("codexRelease: {e}"))
                })?;
                Some(release.value.trim().to_owned())
            }
        };
        let claude_release = match doc.claude_release {
            None => None,
            Some(release) => {
                let known = rewind_mock_runtimes::claude::VERSIONS;
                let wanted = release.value.trim();
                if !known.contains(&wanted) {
                    return Err(ProfileError::at(
                        path,
                        release.referenced,
                        format!(
                            "claudeRelease: `{wanted}` is not a Claude Code release the mock \
                             imitates ({})",
                            known.join(", ")
                        ),
                    ));
                }
                Some(wanted.to_owned())
            }
        };
        Ok(CapabilityProfile {
            runtimes: names(doc.runtimes, &RUNTIMES, "runtime")?,
            surfaces: names(doc.surfaces, &SURFACES, "surface")?,
            error_codes,
            codex_release,
            claude_release,
            real_runtimes: doc.real_runtimes,
            source: ProfileSource::File(path.to_path_buf()),
        })
    }

    /// Checks the declared codes name error rules of `catalog`.
    pub fn check_error_codes(&self, catalog: &crate::catalog::Catalog) -> anyhow::Result<()> {
        for rule in self.error_codes.keys() {
            let known = catalog
                .get(rule)
                .is_some_and(|r| r.kind == crate::catalog::RuleKind::Error);
            anyhow::ensure!(
                known,
                "{}: errorCodes: `{rule}` is not an error rule of the catalog",
                self.source
            );
        }
        Ok(())
    }

    /// A one-line description for reports.
    pub fn describe(&self) -> String {
        let list = |set: &BTreeSet<String>| {
            if set.is_empty() {
                "none".to_owned()
            } else {
                set.iter().cloned().collect::<Vec<_>>().join(", ")
            }
        };
        let release = self
            .codex_release
            .iter()
            .map(|r| format!("; codex release {r}"))
            .chain(
                self.claude_release
                    .iter()
                    .map(|r| format!("; claude release {r}")),
            )
            .collect::<String>();
        format!(
            "runtimes {}; surfaces {}{release} (from {})",
            list(&self.runtimes),
            list(&self.surfaces),
            self.source
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<CapabilityProfile, ProfileError> {
        CapabilityProfile::parse(Path::new("profile.yaml"), text)
    }

    #[test]
    fn a_profile_may_name_the_codex_release_and_a_bad_one_is_located() {
        let p = parse("runtimes: [codex]\nsurfaces: []\ncodexRelease: 0.155.1\n").expect("valid");
        assert_eq!(p.codex_release.as_deref(), Some("0.155.1"));
        assert!(
            p.describe().contains("codex release 0.155.1"),
            "{}",
            p.describe()
        );
        assert_eq!(
            parse("runtimes: []\nsurfaces: []\n").unwrap().codex_release,
            None
        );
        let p = parse("runtimes: [claude]\nsurfaces: []\nclaudeRelease: 2.1.197\n").expect("valid");
        assert_eq!(p.claude_release.as_deref(), Some("2.1.197"));
        let err = parse("runtimes: [claude]\nsurfaces: []\nclaudeRelease: 9.9.9\n")
            .expect_err("unknown claude release")
            .to_string();
        assert!(
            err.contains("claudeRelease: `9.9.9` is not a Claude Code release"),
            "{err}"
        );
        let err = parse("runtimes: [codex]\nsurfaces: []\ncodexRelease: latest\n")
            .expect_err("not a version")
            .to_string();
        assert!(err.contains("profile.yaml:3:"), "{err}");
        assert!(
            err.contains("codexRelease: `latest` is not a Codex version"),
            "{err}"
        );
    }

    #[test]
    fn a_profile_lists_runtimes_and_surfaces() {
        let p = parse("runtimes: [claude, opencode]\nsurfaces: [read-state]\n").expect("valid");
        assert_eq!(
            p.runtimes.into_iter().collect::<Vec<_>>(),
            ["claude", "opencode"]
        );
        assert_eq!(p.surfaces.into_iter().collect::<Vec<_>>(), ["read-state"]);
    }

    #[test]
    fn an_unknown_runtime_is_named_with_its_position() {
        let err = parse("runtimes: [claude, gemini]\nsurfaces: []\n").expect_err("gemini");
        let text = err.to_string();
        assert!(text.starts_with("profile.yaml:1:"), "{text}");
        assert!(text.contains("unknown runtime `gemini`"), "{text}");
        assert!(text.contains("codex, claude, opencode, builtin"), "{text}");
    }

    #[test]
    fn unknown_and_missing_keys_are_errors() {
        let err = parse("runtimes: []\nsurfaces: []\nruntime: [codex]\n").expect_err("typo");
        assert!(err.to_string().contains("unknown key `runtime`"), "{err}");
        let err = parse("runtimes: [codex]\n").expect_err("missing");
        assert!(err.to_string().contains("missing key `surfaces`"), "{err}");
    }

    #[test]
    fn declared_error_codes_are_checked_for_shape_and_clashes() {
        let p = parse("runtimes: []\nsurfaces: []\nerrorCodes:\n  err.a: A\n").expect("valid");
        assert_eq!(p.error_codes.get("err.a").map(String::as_str), Some("A"));
        let err = parse("runtimes: []\nsurfaces: []\nerrorCodes:\n  err.a: A\n  err.b: A\n")
            .expect_err("clash");
        assert!(err.to_string().starts_with("profile.yaml:5:"), "{err}");
        let err = parse("runtimes: []\nsurfaces: []\nerrorCodes:\n  other: A\n").expect_err("id");
        assert!(err.to_string().contains("not an error rule id"), "{err}");
    }

    #[test]
    fn the_read_surfaces_are_the_protocols() {
        let wire: Vec<&str> = rewind_driver_protocol::ReadSurface::ALL
            .iter()
            .map(|s| s.name())
            .collect();
        assert_eq!(READ_SURFACES.as_slice(), wire.as_slice());
        assert!(READ_SURFACES.iter().all(|s| SURFACES.contains(s)));
    }

    #[test]
    fn every_runtime_and_surface_has_a_cargo_feature_of_its_own() {
        // So declaring a deployment by cargo features or by a profile file makes one profile.
        let mut named: Vec<&str> = COMPILED.iter().map(|(name, _)| *name).collect();
        named.sort_unstable();
        let mut known: Vec<&str> = RUNTIMES.iter().chain(SURFACES.iter()).copied().collect();
        known.sort_unstable();
        assert_eq!(named, known);
        let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
            .expect("the harness's Cargo.toml");
        for name in named {
            let feature = if name == "browser-client" {
                "browser"
            } else {
                name
            };
            assert!(
                manifest
                    .lines()
                    .any(|l| l.starts_with(&format!("{feature} = "))),
                "no cargo feature `{feature}` declares `{name}`"
            );
        }
    }

    #[test]
    fn the_default_features_declare_everything_but_a_browser_client() {
        // `cargo test` builds with the default features.
        if cfg!(all(
            feature = "codex",
            feature = "claude",
            feature = "opencode",
            feature = "builtin",
            feature = "read-state",
            feature = "message-sync",
            feature = "recovery-point-gc",
            feature = "delivery",
            feature = "read-surfaces"
        )) {
            let compiled = CapabilityProfile::compiled();
            let mut all = CapabilityProfile::everything();
            // A browser client is the one surface the defaults leave out: the tier needs
            // Chromium and chromedriver, so it is built only with the `browser` feature.
            if !cfg!(feature = "browser") {
                all.surfaces.remove("browser-client");
            }
            assert_eq!(compiled.runtimes, all.runtimes);
            assert_eq!(compiled.surfaces, all.surfaces);
        }
    }
}
