//! The suite built into the binary: `features/` (the Gherkin features, the rule catalog, the
//! ambiguity register, the leak allow-list, the pending and untestable lists), `fixtures/` and
//! `schemas/`, as they were in the checkout the binary was built from. The checked-out files
//! stay the source; a build picks up every change (`build.rs`).
//!
//! A run needs them as files (feature and fixture errors name a file, a line and a column), so
//! the first run of a build unpacks them into a cache directory named for their content
//! ([`unpacked`]): under `$XDG_CACHE_HOME/rewind-conformance/`, else
//! `~/.cache/rewind-conformance/`, else the temporary directory's, the first that can be written. Later runs check the copy against the built-in bytes and use
//! it; a copy that differs (edited by hand, half written) is replaced. Runs at once share it
//! safely: a copy is written beside its final place and moved there in one rename.
//!
//! The scenarios' paths are shown relative to the suite's root ([`shown_path`]), as
//! `features/apply.feature`, wherever the suite came from.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use include_dir::{include_dir, Dir, DirEntry};

static FEATURES: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/features");
static FIXTURES: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/fixtures");
static SCHEMAS: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/schemas");

/// The built-in directories, by their name under the suite's root.
const DIRS: [(&str, &Dir<'static>); 3] = [
    ("features", &FEATURES),
    ("fixtures", &FIXTURES),
    ("schemas", &SCHEMAS),
];

/// Every built-in file: its path under the suite's root and its bytes, in a fixed order.
pub fn files() -> Vec<(PathBuf, &'static [u8])> {
    fn walk(dir: &'static Dir<'static>, under: &Path, out: &mut Vec<(PathBuf, &'static [u8])>) {
        for entry in dir.entries() {
            match entry {
                DirEntry::Dir(d) => walk(d, under, out),
                DirEntry::File(f) => out.push((under.join(f.path()), f.contents())),
            }
        }
    }
    let mut out = Vec::new();
    for (name, dir) in DIRS {
        walk(dir, Path::new(name), &mut out);
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A fingerprint of the built-in files (paths and bytes; 64-bit FNV-1a, stable across builds
/// and platforms), which names the unpacked copy.
pub fn fingerprint() -> u64 {
    let mut hash = Fnv1a::new();
    for (path, bytes) in files() {
        hash.eat(path.to_string_lossy().as_bytes());
        hash.eat(&[0]);
        hash.eat(&(bytes.len() as u64).to_le_bytes());
        hash.eat(bytes);
    }
    hash.value()
}

/// 64-bit FNV-1a: a hash that names cached files, the same in every build and on every platform
/// (unlike `std`'s hashers).
pub(crate) struct Fnv1a(u64);

impl Fnv1a {
    pub(crate) fn new() -> Fnv1a {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }

    pub(crate) fn eat(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub(crate) fn value(&self) -> u64 {
        self.0
    }
}

/// Writes the built-in suite into `dir` (created if missing): `features/`, `fixtures/`,
/// `schemas/`. Refuses to overwrite a file that is already there.
pub fn write_to(dir: &Path) -> io::Result<usize> {
    let files = files();
    for (path, _) in &files {
        let target = dir.join(path);
        if target.exists() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} already exists", target.display()),
            ));
        }
    }
    for (path, bytes) in &files {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, bytes)?;
    }
    Ok(files.len())
}

/// Whether `dir` holds exactly the built-in files (extra files are ignored).
fn holds_the_suite(dir: &Path) -> bool {
    files()
        .iter()
        .all(|(path, bytes)| std::fs::read(dir.join(path)).is_ok_and(|on_disk| on_disk == *bytes))
}

/// Where cached copies may be kept, in the order tried: the built-in suite unpacked, and
/// `initdb`'s output for the embedded clusters.
pub(crate) fn cache_bases() -> Vec<PathBuf> {
    let from_env = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    [
        from_env("XDG_CACHE_HOME"),
        from_env("HOME").map(|home| home.join(".cache")),
        Some(std::env::temp_dir()),
    ]
    .into_iter()
    .flatten()
    .map(|base| base.join("rewind-conformance"))
    .collect()
}

/// The directory the built-in suite is unpacked in (once per process), under the first of
/// [`cache_bases`] where that works; see the module docs.
pub fn unpacked() -> io::Result<&'static Path> {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    if let Some(root) = ROOT.get() {
        return Ok(root);
    }
    let mut failures = Vec::new();
    for base in cache_bases() {
        match unpack_into(&base) {
            Ok(root) => return Ok(ROOT.get_or_init(|| root)),
            Err(e) => failures.push(e.to_string()),
        }
    }
    Err(io::Error::other(format!(
        "cannot unpack the built-in suite anywhere (set XDG_CACHE_HOME to a writable directory, \
         or pass --suite DIR):\n  {}",
        failures.join("\n  ")
    )))
}

/// Unpacks the built-in suite under `base`, or reuses the copy there; returns its root.
fn unpack_into(base: &Path) -> io::Result<PathBuf> {
    let name = format!("suite-{}-{:016x}", env!("CARGO_PKG_VERSION"), fingerprint());
    let root = base.join(&name);
    if holds_the_suite(&root) {
        return Ok(root);
    }
    let context = |what: &str, path: &Path, e: io::Error| {
        io::Error::new(e.kind(), format!("cannot {what} {}: {e}", path.display()))
    };
    std::fs::create_dir_all(base).map_err(|e| context("create", base, e))?;
    let staging = base.join(format!(".{name}.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    write_to(&staging).map_err(|e| context("write", &staging, e))?;
    if root.exists() {
        // A copy that differs from the built-in bytes: replace it.
        let _ = std::fs::remove_dir_all(&root);
    }
    let moved = std::fs::rename(&staging, &root);
    let _ = std::fs::remove_dir_all(&staging);
    // Another run may have moved its own (identical) copy there first.
    if holds_the_suite(&root) {
        return Ok(root);
    }
    Err(match moved {
        Err(e) => context("move the unpacked suite to", &root, e),
        Ok(()) => io::Error::other(format!(
            "the built-in suite unpacked into {} does not read back as written",
            root.display()
        )),
    })
}

/// The root the run's suite was taken from, when it is not the working directory (the
/// unpacked built-in suite, or `--suite DIR`): scenario paths are shown relative to it.
static SHOWN_ROOT: OnceLock<PathBuf> = OnceLock::new();

/// Shows the run's paths under `root` relative to it (set once, by the command line).
pub fn show_paths_relative_to(root: &Path) {
    let _ = SHOWN_ROOT.set(root.to_path_buf());
}

/// `path` as the run shows it: relative to the suite's root when it lies under it
/// (`features/apply.feature`), otherwise as given.
pub fn shown_path(path: &Path) -> Option<PathBuf> {
    let root = SHOWN_ROOT.get()?;
    path.strip_prefix(root).ok().map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_suite_is_the_checked_out_one() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let files = files();
        assert!(files
            .iter()
            .any(|(p, _)| p == Path::new("features/rules.yaml")));
        assert!(files.iter().any(|(p, _)| p.starts_with("fixtures")));
        assert!(
            holds_the_suite(here),
            "a checked-out file differs from the built-in one"
        );
    }

    #[test]
    fn unpacking_writes_once_reuses_and_repairs_the_copy() {
        let base = tempfile::tempdir().expect("temp dir");
        let root = unpack_into(base.path()).expect("unpacked");
        assert!(holds_the_suite(&root));
        let again = unpack_into(base.path()).expect("reused");
        assert_eq!(root, again);
        let rules = root.join("features/rules.yaml");
        std::fs::write(&rules, "edited by hand").expect("edit");
        let repaired = unpack_into(base.path()).expect("repaired");
        assert_eq!(repaired, root);
        assert!(holds_the_suite(&repaired), "the edited copy was replaced");
        let names: Vec<_> = std::fs::read_dir(base.path())
            .expect("listing")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names.len(), 1, "no staging directory is left: {names:?}");
    }

    #[test]
    fn writing_refuses_to_overwrite() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(write_to(dir.path()).expect("written") > 20);
        let err = write_to(dir.path()).expect_err("second write");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
    }

    #[test]
    fn the_fingerprint_follows_the_content() {
        assert_eq!(fingerprint(), fingerprint());
        assert_ne!(fingerprint(), 0xcbf2_9ce4_8422_2325);
    }
}
