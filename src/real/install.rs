//! The real runtimes' releases, installed from the npm registry into a cache directory outside
//! the source tree, once per version, and reused by every later run.
//!
//! The cache is `$REWIND_REAL_RUNTIMES_DIR`, else `rewind-conformance/real-runtimes` in the user's
//! cache directory (`$XDG_CACHE_HOME`, else `~/.cache`). Each release gets its own npm prefix
//! (`<cache>/<name>-<version>/`), made with `npm install --prefix <dir> --no-audit --no-fund` in
//! a scratch directory that is renamed into place only once the runtime's program answers
//! `--version`, so an interrupted install is never taken for a finished one.
//!
//! The pinned releases ([`PINNED`]) are data: the README and the compatibility matrix show them,
//! and a run may replace them ([`Release::parse_override`], `--runtime-release`), including with
//! `latest`, whatever the registry offers today ([`Release::resolve_latest`]).

use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

/// The variable that moves the cache.
pub const CACHE_ENV: &str = "REWIND_REAL_RUNTIMES_DIR";

/// A release of a real runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// The runtime: `codex`, `claude-code` or `opencode` (also the cache directory's stem).
    pub name: &'static str,
    /// The npm package.
    pub package: &'static str,
    /// Its version.
    pub version: Cow<'static, str>,
    /// Where the program lands inside the npm prefix.
    program: Program,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Program {
    /// The native binary Codex's npm package ships per platform (an optional dependency
    /// `@openai/codex-<platform>`), under `vendor/<target triple>/bin/codex`; the package's own
    /// `bin/codex.js` would only add a Node launcher in between.
    CodexNative,
    /// The first of these paths (relative to the prefix) that is a file.
    Paths(&'static [&'static str]),
}

/// Where Claude Code's program lands: the native binary of the platform package (an optional
/// dependency), which the package's postinstall also links to `bin/claude.exe`; the platform
/// binary is preferred, so that an npm that skips install scripts still yields a working program.
const CLAUDE_PROGRAM: Program = Program::Paths(&[
    "node_modules/@anthropic-ai/claude-code-linux-x64/claude",
    "node_modules/@anthropic-ai/claude-code-linux-arm64/claude",
    "node_modules/@anthropic-ai/claude-code/bin/claude.exe",
]);

const OPENCODE_PROGRAM: Program = Program::Paths(&["node_modules/opencode-linux-x64/bin/opencode"]);

const fn codex(version: &'static str) -> Release {
    Release {
        name: "codex",
        package: "@openai/codex",
        version: Cow::Borrowed(version),
        program: Program::CodexNative,
    }
}

const fn claude(version: &'static str) -> Release {
    Release {
        name: "claude-code",
        package: "@anthropic-ai/claude-code",
        version: Cow::Borrowed(version),
        program: CLAUDE_PROGRAM,
    }
}

const fn opencode(version: &'static str) -> Release {
    Release {
        name: "opencode",
        package: "opencode-linux-x64",
        version: Cow::Borrowed(version),
        program: OPENCODE_PROGRAM,
    }
}

/// Codex 0.155.1: the last release line with `thread/rollback` (legacy-history threads only).
pub const CODEX_0155: Release = codex("0.155.1");

/// Codex 0.171.0: `thread/rollback` is gone, `thread/revert` restores.
pub const CODEX_0171: Release = codex("0.171.0");

/// Claude Code 2.1.197.
pub const CLAUDE_2197: Release = claude("2.1.197");

/// Claude Code 2.1.332: writes `prompt_snapshot` attachment records into the transcript.
pub const CLAUDE_2332: Release = claude("2.1.332");

/// OpenCode 1.18.33, the Linux x64 native package.
pub const OPENCODE: Release = opencode("1.18.33");

/// OpenCode 1.18.34, the newest release on 2026-12-04.
pub const OPENCODE_11834: Release = opencode("1.18.34");

/// Every pinned release: what the tier checks and what `--runtimes real` may start.
pub const ALL: [Release; 6] = [
    CODEX_0155,
    CODEX_0171,
    CLAUDE_2197,
    CLAUDE_2332,
    OPENCODE,
    OPENCODE_11834,
];

/// The release of each runtime a `--runtimes real` run starts unless told otherwise: the newest
/// pinned one (codex, claude-code, opencode).
pub const PINNED: [Release; 3] = [CODEX_0171, CLAUDE_2332, OPENCODE_11834];

/// The runtime names a release override may name, with the aliases accepted for them.
const RUNTIME_NAMES: [(&str, &str); 4] = [
    ("codex", "codex"),
    ("claude", "claude-code"),
    ("claude-code", "claude-code"),
    ("opencode", "opencode"),
];

/// An install or a release could not be had.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// `npm` is missing or failed.
    #[error("installing {spec}: {detail}")]
    Npm {
        /// `package@version`.
        spec: String,
        /// What went wrong.
        detail: String,
    },
    /// A file operation on the cache failed.
    #[error("{action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A release override that names no runtime or no version.
    #[error("{0}")]
    BadOverride(String),
}

/// The cache directory.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(CACHE_ENV) {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("rewind-conformance").join("real-runtimes")
}

/// One install at a time in this process (the cache is shared).
static INSTALLING: Mutex<()> = Mutex::new(());

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.name, self.version)
    }
}

impl Release {
    /// `package@version`.
    pub fn spec(&self) -> String {
        format!("{}@{}", self.package, self.version)
    }

    /// The same runtime at another version.
    pub fn at(&self, version: impl Into<String>) -> Release {
        Release {
            version: Cow::Owned(version.into()),
            ..self.clone()
        }
    }

    /// The pinned release of runtime `name` (`codex`, `claude` or `claude-code`, `opencode`).
    pub fn pinned(name: &str) -> Option<Release> {
        let canonical = RUNTIME_NAMES.iter().find(|(n, _)| *n == name)?.1;
        PINNED.iter().find(|r| r.name == canonical).cloned()
    }

    /// Reads one `--runtime-release` value: `latest` (every runtime at its newest release),
    /// `RUNTIME=VERSION` or `RUNTIME=latest`. Returns the runtime's canonical name and the
    /// version (`latest` kept as is, for [`Release::resolve_latest`]).
    pub fn parse_override(value: &str) -> Result<Vec<(&'static str, String)>, InstallError> {
        let value = value.trim();
        if value == "latest" {
            return Ok(["codex", "claude-code", "opencode"]
                .into_iter()
                .map(|n| (n, "latest".to_owned()))
                .collect());
        }
        let Some((runtime, version)) = value.split_once('=') else {
            return Err(InstallError::BadOverride(format!(
                "--runtime-release `{value}`: expected `latest` or RUNTIME=VERSION (RUNTIME one of \
                 codex, claude, opencode)"
            )));
        };
        let canonical = RUNTIME_NAMES
            .iter()
            .find(|(n, _)| *n == runtime.trim())
            .map(|(_, c)| *c)
            .ok_or_else(|| {
                InstallError::BadOverride(format!(
                    "--runtime-release `{value}`: `{runtime}` is not a runtime (codex, claude, \
                     opencode)"
                ))
            })?;
        let version = version.trim();
        let plausible = version == "latest"
            || (!version.is_empty()
                && version
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+')));
        if !plausible {
            return Err(InstallError::BadOverride(format!(
                "--runtime-release `{value}`: `{version}` is not a version"
            )));
        }
        Ok(vec![(canonical, version.to_owned())])
    }

    /// The releases some `--runtime-release` values ask for, one per runtime they name (a later
    /// value for a runtime replaces an earlier one), each a version of the runtime's pinned
    /// release (`latest` kept as is, for [`Release::resolve_latest`]).
    pub fn overrides(values: &[String]) -> Result<Vec<Release>, InstallError> {
        let mut releases: Vec<Release> = Vec::new();
        for value in values {
            for (runtime, version) in Release::parse_override(value)? {
                let pinned = Release::pinned(runtime).ok_or_else(|| {
                    InstallError::BadOverride(format!("no pinned release of {runtime}"))
                })?;
                releases.retain(|r| r.name != pinned.name);
                releases.push(pinned.at(version));
            }
        }
        Ok(releases)
    }

    /// This release with a `latest` version replaced by the newest version the npm registry
    /// offers today (`npm view <package> version`); any other version is returned unchanged.
    pub fn resolve_latest(&self) -> Result<Release, InstallError> {
        if self.version != "latest" {
            return Ok(self.clone());
        }
        let output = Command::new("npm")
            .args(["view", self.package, "version"])
            .output()
            .map_err(|e| InstallError::Npm {
                spec: format!("{}@latest", self.package),
                detail: format!("`npm` could not be started ({e}); install Node.js and npm"),
            })?;
        let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        if !output.status.success() || version.is_empty() {
            return Err(InstallError::Npm {
                spec: format!("{}@latest", self.package),
                detail: format!(
                    "`npm view {} version` failed ({}; is the registry reachable?): {}",
                    self.package,
                    output.status,
                    String::from_utf8_lossy(&output.stderr).trim()
                ),
            });
        }
        Ok(self.at(version))
    }

    fn prefix(&self) -> PathBuf {
        cache_dir().join(format!("{}-{}", self.name, self.version))
    }

    fn program_in(&self, prefix: &Path) -> Option<PathBuf> {
        match self.program {
            Program::Paths(paths) => paths.iter().map(|p| prefix.join(p)).find(|p| p.is_file()),
            Program::CodexNative => {
                let scope = prefix.join("node_modules/@openai");
                for platform in std::fs::read_dir(scope).ok()?.flatten() {
                    let vendor = platform.path().join("vendor");
                    for triple in std::fs::read_dir(vendor).into_iter().flatten().flatten() {
                        let bin = triple.path().join("bin/codex");
                        if bin.is_file() {
                            return Some(bin);
                        }
                    }
                }
                None
            }
        }
    }

    /// The release's program when the cache already holds it.
    pub fn cached_program(&self) -> Option<PathBuf> {
        self.program_in(&self.prefix())
    }

    /// The release's program, installed first when the cache does not hold it yet (the only
    /// step that needs the network: the npm registry).
    pub fn program(&self) -> Result<PathBuf, InstallError> {
        let _guard = INSTALLING.lock().unwrap_or_else(|p| p.into_inner());
        let prefix = self.prefix();
        if let Some(program) = self.program_in(&prefix) {
            return Ok(program);
        }
        self.install(&prefix)?;
        self.program_in(&prefix).ok_or_else(|| InstallError::Npm {
            spec: self.spec(),
            detail: format!(
                "installed into {}, but its program is missing",
                prefix.display()
            ),
        })
    }

    fn install(&self, prefix: &Path) -> Result<(), InstallError> {
        let cache = cache_dir();
        std::fs::create_dir_all(&cache).map_err(|source| InstallError::Io {
            action: format!("creating the runtime cache {}", cache.display()),
            source,
        })?;
        let scratch = cache.join(format!(
            ".{}-{}.partial-{}",
            self.name,
            self.version,
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&scratch);
        let started = Instant::now();
        eprintln!(
            "installing {} from the npm registry into {}",
            self.spec(),
            prefix.display()
        );
        let npm_error = |detail: String| InstallError::Npm {
            spec: self.spec(),
            detail,
        };
        let output = Command::new("npm")
            .arg("install")
            .arg("--prefix")
            .arg(&scratch)
            .args(["--no-audit", "--no-fund", "--no-save", "--loglevel=error"])
            .arg(self.spec())
            .output()
            .map_err(|e| {
                npm_error(format!(
                    "`npm` could not be started ({e}); install Node.js and npm"
                ))
            })?;
        if !output.status.success() {
            let _ = std::fs::remove_dir_all(&scratch);
            return Err(npm_error(format!(
                "the npm registry install failed ({}; is the registry reachable?):\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )));
        }
        let Some(program) = self.program_in(&scratch) else {
            let _ = std::fs::remove_dir_all(&scratch);
            return Err(npm_error(
                "installed, but no program was found in it (a platform without a native \
                 package?)"
                    .to_owned(),
            ));
        };
        match Command::new(&program).arg("--version").output() {
            Ok(out) if out.status.success() => {}
            other => {
                let _ = std::fs::remove_dir_all(&scratch);
                return Err(npm_error(format!(
                    "`{} --version` failed after the install: {other:?}",
                    program.display()
                )));
            }
        }
        if std::fs::rename(&scratch, prefix).is_err() {
            // Another process finished the same install first: keep its copy.
            let _ = std::fs::remove_dir_all(&scratch);
        }
        eprintln!(
            "installed {} in {:.1} s ({} MB on disk)",
            self.spec(),
            started.elapsed().as_secs_f64(),
            dir_size(prefix) / 1_000_000
        );
        Ok(())
    }
}

/// The bytes of the files under `dir`, each hard-linked file counted once.
fn dir_size(dir: &Path) -> u64 {
    fn walk(dir: &Path, seen: &mut std::collections::HashSet<u64>) -> u64 {
        use std::os::unix::fs::MetadataExt as _;
        let mut total = 0;
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() => total += walk(&entry.path(), seen),
                Ok(t) if t.is_file() => {
                    if let Ok(m) = entry.metadata() {
                        if seen.insert(m.ino()) {
                            total += m.len();
                        }
                    }
                }
                _ => {}
            }
        }
        total
    }
    walk(dir, &mut std::collections::HashSet::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_name_a_runtime_and_a_version() {
        assert_eq!(
            Release::parse_override("claude=2.1.197").unwrap(),
            vec![("claude-code", "2.1.197".to_owned())]
        );
        assert_eq!(Release::parse_override("latest").unwrap().len(), 3);
        assert_eq!(
            Release::parse_override("opencode=latest").unwrap(),
            vec![("opencode", "latest".to_owned())]
        );
        for bad in ["gemini=1.0", "codex", "codex=", "codex=1.0;rm"] {
            let e = Release::parse_override(bad).unwrap_err().to_string();
            assert!(e.contains(bad.split('=').next().unwrap()), "{e}");
        }
        assert_eq!(Release::pinned("claude").unwrap().name, "claude-code");
    }
}
