//! What a run leaves on the machine, and how the next run reaps it when the run was killed.
//!
//! Every temporary directory the harness makes lives directly under the temporary directory
//! (`TMPDIR`) or the memory-backed one ([`scratch_place`]), is named `rewind-<kind>-<pid>-...` and holds an [`OWNER_FILE`] that names its
//! owner: the process id and the process's start time (so a recycled process id is not taken
//! for the owner). Processes the harness starts that could outlive it (the mock OpenCode
//! servers) are listed in the directory's [`PIDS_DIR`], each with its own start time.
//!
//! A run ends by removing what it made; SIGINT, SIGTERM and SIGHUP do the same (see the
//! command line). SIGKILL cannot be caught: [`reap_stale`], called when a run starts, removes the
//! directories whose owner no longer runs and kills the processes listed in them. Databases a
//! run makes on a given server are reaped the same way by the template module, by name and by
//! an advisory lock only a live run holds.

use std::path::{Path, PathBuf};

/// The file naming a directory's owner: `<pid> <start time>`.
pub const OWNER_FILE: &str = ".rewind-owner";

/// The directory, inside an owned directory, listing processes to kill with it.
pub const PIDS_DIR: &str = ".rewind-pids";

/// Prefixes of the directories the harness makes under the temporary directory.
pub const DIR_PREFIXES: [&str; 4] = [
    "rewind-pg-",
    "rewind-mock-bin-",
    "rewind-mocks-",
    "rewind-browser-",
];

/// A process, identified so that a recycled process id does not match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessId {
    /// The process id.
    pub pid: u32,
    /// The start time in clock ticks since boot (`/proc/<pid>/stat`, field 22); `None` where
    /// it cannot be read.
    pub start: Option<u64>,
}

impl ProcessId {
    /// This process.
    pub fn current() -> Self {
        Self::of(std::process::id())
    }

    /// The process `pid` as it runs now.
    pub fn of(pid: u32) -> Self {
        ProcessId {
            pid,
            start: start_time(pid),
        }
    }

    /// Whether this very process still runs (not merely some process with its id).
    pub fn alive(&self) -> bool {
        let Ok(pid) = libc::pid_t::try_from(self.pid) else {
            return false;
        };
        // SAFETY: signal 0 only checks that the process exists; nothing is sent.
        let rc = unsafe { libc::kill(pid, 0) };
        let exists = rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !exists {
            return false;
        }
        match (self.start, start_time(self.pid)) {
            (Some(recorded), Some(now)) => recorded == now,
            // A zombie or an unreadable /proc: trust the id alone.
            _ => true,
        }
    }

    fn render(&self) -> String {
        match self.start {
            Some(start) => format!("{} {start}", self.pid),
            None => self.pid.to_string(),
        }
    }

    fn parse(text: &str) -> Option<Self> {
        let mut words = text.split_whitespace();
        let pid = words.next()?.parse().ok()?;
        let start = words.next().and_then(|w| w.parse().ok());
        Some(ProcessId { pid, start })
    }
}

/// The start time of `pid` in clock ticks since boot.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after its end.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Where the mock runtimes' homes go: the memory-backed place the embedded clusters use when
/// there is one ([`crate::postgres::memory_dir`]), else the temporary directory. A scenario's
/// mock runtimes create, write, sync and remove dozens of small files; on tmpfs that costs no
/// disk journal (a whole run takes 2-3% less CPU).
pub fn scratch_place() -> PathBuf {
    crate::postgres::memory_dir().unwrap_or_else(std::env::temp_dir)
}

/// Makes `<TMPDIR>/<prefix><pid>-<random>` owned by this process.
pub fn owned_temp_dir(prefix: &str) -> std::io::Result<PathBuf> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("{prefix}{}-", std::process::id()))
        .tempdir()?
        .keep();
    claim(&dir)?;
    Ok(dir)
}

/// Writes the [`OWNER_FILE`] of `dir`: this process owns it.
pub fn claim(dir: &Path) -> std::io::Result<()> {
    std::fs::write(dir.join(OWNER_FILE), ProcessId::current().render())
}

/// Lists `pid` in `dir`, so that whoever reaps `dir` kills it too.
pub fn record_process(dir: &Path, pid: u32) -> std::io::Result<()> {
    let pids = dir.join(PIDS_DIR);
    std::fs::create_dir_all(&pids)?;
    std::fs::write(pids.join(pid.to_string()), ProcessId::of(pid).render())
}

/// Removes `pid` from the list of `dir` (it was stopped).
pub fn forget_process(dir: &Path, pid: u32) {
    let _ = std::fs::remove_file(dir.join(PIDS_DIR).join(pid.to_string()));
}

/// Kills every process listed in `dir` that still runs.
pub fn kill_recorded(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir.join(PIDS_DIR)) else {
        return;
    };
    for entry in entries.flatten() {
        let Some(process) = std::fs::read_to_string(entry.path())
            .ok()
            .and_then(|text| ProcessId::parse(&text))
        else {
            continue;
        };
        if process.alive() {
            kill(process.pid);
        }
    }
}

/// Sends `pid` SIGKILL (nothing happens when it already exited).
pub fn kill(pid: u32) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: `kill` has no memory effects; a pid that already exited is harmless.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// The owner of a harness directory: its [`OWNER_FILE`], or, while that is not written yet,
/// the process id in its name.
pub fn owner_of(dir: &Path) -> Option<ProcessId> {
    if let Some(owner) = std::fs::read_to_string(dir.join(OWNER_FILE))
        .ok()
        .and_then(|text| ProcessId::parse(&text))
    {
        return Some(owner);
    }
    // Older clusters wrote `owner.pid`.
    if let Some(pid) = std::fs::read_to_string(dir.join("owner.pid"))
        .ok()
        .and_then(|text| text.trim().parse().ok())
    {
        return Some(ProcessId { pid, start: None });
    }
    let name = dir.file_name()?.to_string_lossy().into_owned();
    let rest = DIR_PREFIXES.iter().find_map(|p| name.strip_prefix(p))?;
    let pid = rest.split('-').next()?.parse().ok()?;
    Some(ProcessId { pid, start: None })
}

/// What [`reap_stale`] removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reaped {
    /// Directories removed.
    pub dirs: Vec<PathBuf>,
}

/// Removes the harness directories under the temporary directory (and the memory-backed one
/// embedded clusters use, [`crate::postgres::memory_dir`]) whose owner no longer runs,
/// killing the processes they list first. `stop_cluster` is given each embedded cluster's
/// directory first: it stops the server, or answers `false` to keep the cluster.
pub fn reap_stale(stop_cluster: &dyn Fn(&Path) -> bool) -> Reaped {
    let mut reaped = Reaped::default();
    let mut places = vec![std::env::temp_dir()];
    places.extend(crate::postgres::memory_dir());
    places.dedup();
    let entries = places
        .iter()
        .filter_map(|place| std::fs::read_dir(place).ok())
        .flatten();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(prefix) = DIR_PREFIXES.iter().find(|p| name.starts_with(**p)) else {
            continue;
        };
        let dir = entry.path();
        if !dir.is_dir() || owner_of(&dir).is_some_and(|owner| owner.alive()) {
            continue;
        }
        if *prefix == "rewind-pg-" && !stop_cluster(&dir) {
            continue;
        }
        tracing::info!(dir = %dir.display(), "reaping what a killed run left");
        kill_recorded(&dir);
        if std::fs::remove_dir_all(&dir).is_ok() {
            reaped.dirs.push(dir);
        }
    }
    reaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_recycled_id_is_not() {
        let me = ProcessId::current();
        assert!(me.alive());
        assert!(me.start.is_some(), "/proc gives the start time on Linux");
        let recycled = ProcessId {
            pid: me.pid,
            start: me.start.map(|s| s + 1),
        };
        assert!(!recycled.alive());
        assert_eq!(ProcessId::parse(&me.render()), Some(me));
    }

    #[test]
    fn a_dead_owners_directory_and_its_processes_are_reaped_a_live_ones_kept() {
        let mut child = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .expect("sleep runs");
        let dead = tempfile::Builder::new()
            .prefix("rewind-mocks-1-")
            .tempdir()
            .expect("temp dir")
            .keep();
        // An owner that cannot run: pid 1 with another start time.
        std::fs::write(dead.join(OWNER_FILE), format!("1 {}", u64::MAX)).expect("owner file");
        record_process(&dead, child.id()).expect("recorded");
        let live = owned_temp_dir("rewind-mocks-").expect("owned dir");
        let reaped = reap_stale(&|_| true);
        assert!(reaped.dirs.contains(&dead), "{reaped:?}");
        assert!(!dead.exists());
        assert!(live.exists(), "a directory of a running owner was reaped");
        let status = child.wait().expect("waited");
        assert!(
            !status.success(),
            "the recorded process was killed: {status}"
        );
        std::fs::remove_dir_all(live).expect("removed");
    }
}
