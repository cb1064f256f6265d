//! What `initdb` writes, kept between runs: every embedded cluster starts from a copy of it.
//!
//! `initdb` costs about a second of CPU (it bootstraps the catalogs and runs their SQL), and a
//! test run starts dozens of clusters; a copy of its output costs a tenth of that. The output
//! depends only on the binaries and the options, so a copy is as good as a new `initdb`: each
//! entry is named for the `postgres` and `initdb` binaries (their path, size and modification
//! time), the account they run as and the options. An entry lives under the first writable of
//! `$XDG_CACHE_HOME/rewind-conformance/`, `~/.cache/rewind-conformance/` and the temporary
//! directory's, in `initdb/<name>/data`, and counts only once `initdb/<name>/complete` exists:
//! it is written beside its place and moved there in one rename, so runs at once share the cache
//! safely and an interrupted copy is never used. Removing the directory is always safe; the next
//! run writes it again. A cluster that does not start from an entry is made again with `initdb`,
//! and the entry is removed.

use std::io;
use std::path::{Path, PathBuf};

use crate::bundled::{cache_bases, Fnv1a};

/// The directory of the entries under a cache base.
const DIR: &str = "initdb";

/// The file that marks a whole entry.
const COMPLETE: &str = "complete";

/// The prefix of an entry still being written (`.partial-<name>-<pid>-<nanos>`).
const PARTIAL: &str = ".partial-";

/// The name of the entry for clusters that `bindir`'s `initdb` makes with `options`, run as
/// `account`; `None` when the binaries cannot be examined (then nothing is cached).
pub(super) fn entry_name(bindir: &Path, account: Option<&str>, options: &[&str]) -> Option<String> {
    let mut hash = Fnv1a::new();
    hash.eat(bindir.as_os_str().as_encoded_bytes());
    for program in ["postgres", "initdb"] {
        let meta = std::fs::metadata(bindir.join(program)).ok()?;
        let modified = meta
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        hash.eat(&[0]);
        hash.eat(program.as_bytes());
        hash.eat(&meta.len().to_le_bytes());
        hash.eat(&modified.as_nanos().to_le_bytes());
    }
    hash.eat(&[0]);
    hash.eat(account.unwrap_or("").as_bytes());
    for option in options {
        hash.eat(&[0]);
        hash.eat(option.as_bytes());
    }
    Some(format!("{:016x}", hash.value()))
}

/// Copies entry `name`'s data directory to `data`, which must not exist yet; returns the entry
/// when there was a whole one to copy. A copy that fails half-way is removed.
pub(super) fn restore(name: &str, data: &Path) -> Option<PathBuf> {
    restore_from(&cache_bases(), name, data)
}

fn restore_from(bases: &[PathBuf], name: &str, data: &Path) -> Option<PathBuf> {
    let entry = bases
        .iter()
        .map(|base| base.join(DIR).join(name))
        .find(|entry| entry.join(COMPLETE).is_file())?;
    match copy_tree(&entry.join("data"), data) {
        Ok(()) => Some(entry),
        Err(error) => {
            tracing::warn!(entry = %entry.display(), %error, "could not copy a cached initdb");
            let _ = std::fs::remove_dir_all(data);
            None
        }
    }
}

/// Keeps a copy of `data`, `initdb`'s output before the cluster's first start, as entry `name`
/// in the first cache base that takes it. A failure only costs the next run an `initdb`.
pub(super) fn store(name: &str, data: &Path) {
    store_in(&cache_bases(), name, data);
}

fn store_in(bases: &[PathBuf], name: &str, data: &Path) {
    for base in bases {
        let dir = base.join(DIR);
        if std::fs::create_dir_all(&dir).is_err() {
            continue;
        }
        remove_abandoned(&dir);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let partial = dir.join(format!("{PARTIAL}{name}-{}-{nanos}", std::process::id()));
        let written = std::fs::create_dir(&partial)
            .and_then(|()| copy_tree(data, &partial.join("data")))
            .and_then(|()| std::fs::write(partial.join(COMPLETE), name));
        let kept = written.and_then(|()| std::fs::rename(&partial, dir.join(name)));
        if kept.is_err() {
            // Another run kept the same entry first, or this base cannot hold it.
            let _ = std::fs::remove_dir_all(&partial);
        }
        if dir.join(name).join(COMPLETE).is_file() {
            return;
        }
    }
}

/// Removes `entry`, whose copy did not start as a cluster.
pub(super) fn forget(entry: &Path) {
    tracing::warn!(entry = %entry.display(), "a cluster did not start from a cached initdb; removing it");
    let _ = std::fs::remove_dir_all(entry);
}

/// Removes the partial entries of runs that are gone (interrupted while they copied).
fn remove_abandoned(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(PARTIAL) else {
            continue;
        };
        let pid = rest.split('-').nth(1).and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Copies directory `from` to `to` (which must not exist), files and directories with their
/// permissions. A data directory holds nothing else; anything else is an error.
fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::create_dir(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        } else {
            return Err(io::Error::other(format!(
                "{} is neither a file nor a directory",
                entry.path().display()
            )));
        }
    }
    std::fs::set_permissions(to, std::fs::metadata(from)?.permissions())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_differ_by_binaries_account_and_options() {
        let bin = tempfile::tempdir().unwrap();
        for program in ["postgres", "initdb"] {
            std::fs::write(bin.path().join(program), program).unwrap();
        }
        let name = |account, options: &[&str]| entry_name(bin.path(), account, options).unwrap();
        let first = name(None, &["-E", "UTF8"]);
        assert_eq!(
            first,
            name(None, &["-E", "UTF8"]),
            "the same inputs name one entry"
        );
        assert_ne!(first, name(Some("postgres"), &["-E", "UTF8"]));
        assert_ne!(first, name(None, &["-E", "SQL_ASCII"]));
        assert_ne!(first, name(None, &["-EUTF8"]));
        std::fs::write(bin.path().join("postgres"), "a newer postgres").unwrap();
        assert_ne!(
            first,
            name(None, &["-E", "UTF8"]),
            "a new binary names a new entry"
        );
        std::fs::remove_file(bin.path().join("initdb")).unwrap();
        assert_eq!(entry_name(bin.path(), None, &[]), None);
    }

    #[test]
    fn copies_keep_permissions_and_only_whole_entries_are_restored() {
        use std::os::unix::fs::PermissionsExt as _;
        let cache = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let data = work.path().join("data");
        std::fs::create_dir_all(data.join("base/1")).unwrap();
        std::fs::write(data.join("PG_VERSION"), "15\n").unwrap();
        std::fs::write(data.join("base/1/1259"), [7u8; 64]).unwrap();
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(
            data.join("PG_VERSION"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        let bases = [cache.path().join("rewind-conformance")];
        let name = "0123456789abcdef";
        assert_eq!(restore_from(&bases, name, &work.path().join("none")), None);
        // A partial entry of a run that is gone is not used, and the next store removes it.
        let abandoned = bases[0].join("initdb/.partial-0123456789abcdef-999999999-1");
        std::fs::create_dir_all(abandoned.join("data")).unwrap();
        assert_eq!(restore_from(&bases, name, &work.path().join("none")), None);
        store_in(&bases, name, &data);
        assert!(!abandoned.exists(), "an abandoned partial entry stays");
        let copy = work.path().join("copy");
        let entry = restore_from(&bases, name, &copy).expect("a stored entry is restored");
        assert_eq!(std::fs::read(copy.join("base/1/1259")).unwrap(), [7u8; 64]);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&copy), 0o700);
        assert_eq!(mode(&copy.join("PG_VERSION")), 0o600);
        // An entry without its mark is not whole.
        std::fs::remove_file(entry.join(COMPLETE)).unwrap();
        assert_eq!(restore_from(&bases, name, &work.path().join("again")), None);
        forget(&entry);
        assert!(!entry.exists());
    }
}
