//! Seeded sessions kept for the rest of a run, so that each fixture's sessions go through the
//! real runtimes once per scenario directory instead of once per scenario.
//!
//! Seeding drives every turn of a fixture's sessions through the real programs: seconds of CPU
//! per scenario, and the same fixture seeds the same sessions every time. The runtimes write
//! absolute paths into their state (working directories, homes), so a copy is only a faithful
//! seed at the path it was made at. The cache therefore hands out *slots*: scenario directories
//! under fixed paths, each leased to one scenario at a time. The first scenario of a fixture in a
//! slot seeds through the real runtimes and its state (every runtime's home and working
//! directory, with no runtime process running) is copied aside; a later scenario of that fixture
//! leased the same slot gets the copy back, byte for byte and at the same paths, with the ids the
//! runtimes chose then. Its fake models, configuration files and OpenCode server are its own, as
//! before.
//!
//! A slot is emptied when it is leased: every process whose environment names the slot's home
//! (what the last scenario or the implementation left running) is killed first. Only runtimes on
//! this machine are cached; a second host seeds every scenario.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::host::RuntimeHost;
use super::{RealError, SeededSession};
use crate::leftovers::{OWNER_FILE, PIDS_DIR};

/// Set to `1` to seed every scenario's sessions through the real runtimes again.
pub const RESEED_ENV: &str = "REWIND_REAL_RESEED";

/// The run's slots and the state seeded in them.
#[derive(Debug)]
pub struct SeedCache {
    /// Called with every directory the cache makes, for the run to remove when interrupted.
    on_new_dir: fn(&Path),
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Where the copies are kept, once made.
    copies: Option<PathBuf>,
    /// Every slot made, leased or not.
    slots: Vec<PathBuf>,
    /// The slots no scenario holds.
    free: Vec<PathBuf>,
    /// (slot, what was seeded) → the copy and the ids the runtimes chose.
    seeded: BTreeMap<(PathBuf, String), (PathBuf, Vec<SeededSession>)>,
}

/// One scenario's hold on a slot, given back when dropped.
#[derive(Debug)]
pub struct Lease {
    cache: Arc<SeedCache>,
    root: PathBuf,
}

impl Lease {
    /// The slot: the scenario's directory.
    pub fn path(&self) -> &Path {
        &self.root
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let root = self.root.clone();
        self.cache.with(|s| s.free.push(root));
    }
}

fn io(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> RealError {
    super::io(action)
}

/// A new directory `rewind-mocks-<pid>-<kind>-…` under the temporary directory, claimed for this
/// process (so that a later run reaps it when this one is killed).
fn claimed_dir(kind: &str) -> Result<PathBuf, RealError> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("rewind-mocks-{}-{kind}-", std::process::id()))
        .tempdir()
        .map_err(io(format!("creating the {kind} directory")))?
        .keep();
    crate::leftovers::claim(&dir).map_err(io(format!("claiming {}", dir.display())))?;
    Ok(dir)
}

/// The entries of `dir` that are state, not the ownership records.
fn state_entries(dir: &Path) -> Result<Vec<PathBuf>, RealError> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(format!("listing {}", dir.display())))? {
        let entry = entry.map_err(io(format!("listing {}", dir.display())))?;
        let name = entry.file_name();
        if name != OWNER_FILE && name != PIDS_DIR {
            entries.push(entry.path());
        }
    }
    entries.sort();
    Ok(entries)
}

/// Copies `entries` into `into` with `cp -a` (modes, times and links kept).
async fn copy_into(entries: &[PathBuf], into: &Path) -> Result<(), RealError> {
    if entries.is_empty() {
        return Ok(());
    }
    let output = tokio::process::Command::new("cp")
        .arg("-a")
        .arg("--")
        .args(entries)
        .arg(into)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(io("running cp"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(RealError::runtime(
            "harness",
            format!(
                "copying seeded state into {}: {}",
                into.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        ))
    }
}

/// The `HOME=...` entry of the environment every runtime process of the scenario in `root` has.
fn home_variable(root: &Path) -> String {
    format!("HOME={}", root.join("home").display())
}

/// The processes whose environment names `root`'s home, waited for up to `patience`.
async fn processes_left(root: &Path, patience: Duration) -> Result<Vec<u32>, RealError> {
    let variable = home_variable(root);
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        let pids = RuntimeHost::Local.processes_with(&variable).await?;
        if pids.is_empty() || tokio::time::Instant::now() >= deadline {
            return Ok(pids);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl SeedCache {
    /// An empty cache; `on_new_dir` hears of every directory it makes.
    pub fn new(on_new_dir: fn(&Path)) -> Arc<SeedCache> {
        Arc::new(SeedCache {
            on_new_dir,
            state: Mutex::new(State::default()),
        })
    }

    /// Whether this run caches seeded sessions for runtimes on `host`.
    pub fn wanted(host: &RuntimeHost) -> bool {
        matches!(host, RuntimeHost::Local)
            && std::env::var(RESEED_ENV).map_or(true, |v| v.is_empty() || v == "0")
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        match self.state.lock() {
            Ok(mut s) => f(&mut s),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// A free slot, emptied: every process left with its home is killed and its state removed.
    pub async fn lease(self: &Arc<Self>) -> Result<Lease, RealError> {
        let root = match self.with(|s| s.free.pop()) {
            Some(root) => root,
            None => {
                let root = claimed_dir("slot")?;
                (self.on_new_dir)(&root);
                self.with(|s| s.slots.push(root.clone()));
                root
            }
        };
        // From here on the slot is the lease's, and goes back to the free list if emptying fails.
        let lease = Lease {
            cache: Arc::clone(self),
            root,
        };
        // The servers the last scenario recorded, then their records (they are gone).
        crate::leftovers::kill_recorded(&lease.root);
        match std::fs::remove_dir_all(lease.root.join(PIDS_DIR)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io(format!(
                    "removing {}",
                    lease.root.join(PIDS_DIR).display()
                ))(e))
            }
            _ => {}
        }
        for pid in processes_left(&lease.root, Duration::ZERO).await? {
            crate::leftovers::kill(pid);
        }
        let left = processes_left(&lease.root, Duration::from_secs(10)).await?;
        if !left.is_empty() {
            return Err(RealError::runtime(
                "harness",
                format!(
                    "processes {left:?} of an earlier scenario in {} outlived SIGKILL",
                    lease.root.display()
                ),
            ));
        }
        for entry in state_entries(&lease.root)? {
            let removed = if entry.is_dir() && !entry.is_symlink() {
                std::fs::remove_dir_all(&entry)
            } else {
                std::fs::remove_file(&entry)
            };
            removed.map_err(io(format!("removing {}", entry.display())))?;
        }
        Ok(lease)
    }

    /// When `key`'s sessions were seeded in `lease`'s slot before: copies them back into the
    /// (empty) slot and returns the ids the runtimes chose.
    pub async fn restore(
        &self,
        lease: &Lease,
        key: &str,
    ) -> Result<Option<Vec<SeededSession>>, RealError> {
        let Some((copy, sessions)) =
            self.with(|s| s.seeded.get(&(lease.root.clone(), key.to_owned())).cloned())
        else {
            return Ok(None);
        };
        copy_into(&state_entries(&copy)?, &lease.root).await?;
        Ok(Some(sessions))
    }

    /// Keeps a copy of `lease`'s slot as `key`'s seeded sessions, once no process of the slot
    /// runs any more (the caller stopped its servers). Returns whether a copy was kept: a
    /// process that does not exit within seconds leaves the slot uncached.
    pub async fn keep(
        &self,
        lease: &Lease,
        key: &str,
        sessions: Vec<SeededSession>,
    ) -> Result<bool, RealError> {
        self.keep_within(lease, key, sessions, Duration::from_secs(5))
            .await
    }

    async fn keep_within(
        &self,
        lease: &Lease,
        key: &str,
        sessions: Vec<SeededSession>,
        patience: Duration,
    ) -> Result<bool, RealError> {
        if !processes_left(&lease.root, patience).await?.is_empty() {
            return Ok(false);
        }
        let copies = match self.with(|s| s.copies.clone()) {
            Some(dir) => dir,
            None => {
                let dir = claimed_dir("seeds")?;
                (self.on_new_dir)(&dir);
                self.with(|s| s.copies = Some(dir.clone()));
                dir
            }
        };
        let copy = tempfile::Builder::new()
            .prefix("seeded-")
            .tempdir_in(&copies)
            .map_err(io(format!("creating a directory in {}", copies.display())))?
            .keep();
        copy_into(&state_entries(&lease.root)?, &copy).await?;
        self.with(|s| {
            s.seeded
                .insert((lease.root.clone(), key.to_owned()), (copy, sessions))
        });
        Ok(true)
    }

    /// Every directory the cache made (to remove when the run ends).
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.with(|s| s.slots.iter().cloned().chain(s.copies.clone()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeded(id: &str) -> Vec<SeededSession> {
        vec![SeededSession {
            session_id: id.to_owned(),
            ids: vec![format!("{id}-1")],
        }]
    }

    #[tokio::test]
    async fn a_slot_gets_back_what_was_seeded_in_it_and_nothing_a_scenario_left() {
        let cache = SeedCache::new(|_| {});
        let first = cache.lease().await.unwrap();
        let root = first.path().to_path_buf();
        assert!(root.join(OWNER_FILE).is_file(), "a slot is claimed");
        std::fs::create_dir_all(root.join("codex-home/sessions")).unwrap();
        std::fs::write(root.join("codex-home/sessions/t.jsonl"), "seeded").unwrap();
        assert!(cache.keep(&first, "fixture a", seeded("t")).await.unwrap());
        // The scenario changes the state after the copy was made.
        std::fs::write(root.join("codex-home/sessions/t.jsonl"), "rolled back").unwrap();
        std::fs::write(root.join("left-behind"), "").unwrap();
        let mut exited = std::process::Command::new("true").spawn().unwrap();
        crate::leftovers::record_process(&root, exited.id()).unwrap();
        exited.wait().unwrap();
        drop(first);

        let second = cache.lease().await.unwrap();
        assert_eq!(second.path(), root, "the free slot is handed out again");
        assert!(
            state_entries(&root).unwrap().is_empty(),
            "a leased slot is empty"
        );
        assert!(!root.join(PIDS_DIR).exists(), "and lists no process");
        assert_eq!(cache.restore(&second, "fixture b").await.unwrap(), None);
        assert_eq!(
            cache.restore(&second, "fixture a").await.unwrap(),
            Some(seeded("t"))
        );
        assert_eq!(
            std::fs::read_to_string(root.join("codex-home/sessions/t.jsonl")).unwrap(),
            "seeded"
        );
        assert!(!root.join("left-behind").exists());

        // A slot in use is not handed out twice.
        let third = cache.lease().await.unwrap();
        assert_ne!(third.path(), root);
        drop((second, third));
        for dir in cache.dirs() {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    #[tokio::test]
    async fn leasing_a_slot_kills_what_runs_with_its_home_and_keep_waits_for_none() {
        let cache = SeedCache::new(|_| {});
        let lease = cache.lease().await.unwrap();
        let root = lease.path().to_path_buf();
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .env("HOME", root.join("home"))
            .spawn()
            .unwrap();
        // `spawn` may return while the child is still inside `execve`, before its new
        // environment can be read from `/proc`: wait until it can.
        let variable = home_variable(&root);
        let environ = format!("/proc/{}/environ", child.id());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !std::fs::read(&environ)
            .unwrap_or_default()
            .split(|b| *b == 0)
            .any(|v| v == variable.as_bytes())
        {
            assert!(std::time::Instant::now() < deadline, "the child never ran");
            std::thread::sleep(Duration::from_millis(5));
        }
        let kept = cache.keep_within(&lease, "fixture", seeded("s"), Duration::from_millis(300));
        assert!(!kept.await.unwrap(), "no copy while a runtime process runs");
        drop(lease);
        let again = cache.lease().await.unwrap();
        assert_eq!(again.path(), root);
        let status = child.wait().unwrap();
        assert!(
            !status.success(),
            "the leftover process was killed: {status}"
        );
        assert_eq!(cache.restore(&again, "fixture").await.unwrap(), None);
        drop(again);
        for dir in cache.dirs() {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }
}
