//! The mock runtimes of one scenario: a home directory per runtime, seeded from the fixture's
//! `runtime_sessions`, a running OpenCode server when an agent needs one, fault plans, and the
//! journals the steps read back.
//!
//! The mock programs are this binary itself: [`MockPrograms::link`] makes `codex`, `claude` and
//! `opencode` links to it, and `main` dispatches on the name it was started under. An
//! implementation under test spawns them as it would spawn the real runtimes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rewind_mock_runtimes::faults::{FaultKind, FaultPlan, FaultRule};
use rewind_mock_runtimes::journal::{read_journal, JournalEntry};
use rewind_mock_runtimes::witness::WITNESS_ENV;
use rewind_mock_runtimes::{claude, codex, opencode};
use serde::Deserialize;

use crate::fixtures::Fixture;
use crate::real::scenario::{Layout, RealPrograms, RealScenario, SessionSeed};
use crate::real::seeds::{Lease, SeedCache};
use crate::real::SeedTurn;
use crate::sut::RuntimeEndpoints;
use crate::witness::{DeliveryWitness, Witnessed};

impl Drop for MockPrograms {
    fn drop(&mut self) {
        self.remove();
    }
}

/// A mock runtime process family. `builtin` agents are served by [`MockRuntime::OpenCode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MockRuntime {
    /// The Codex app-server.
    Codex,
    /// The Claude Code CLI.
    Claude,
    /// The OpenCode server (also `builtin`).
    OpenCode,
}

impl MockRuntime {
    /// Every mock.
    pub const ALL: [MockRuntime; 3] = [
        MockRuntime::Codex,
        MockRuntime::Claude,
        MockRuntime::OpenCode,
    ];

    /// The mock serving agents of runtime id `runtime` (`builtin` follows OpenCode).
    pub fn for_runtime(runtime: &str) -> Option<MockRuntime> {
        match runtime {
            "codex" => Some(MockRuntime::Codex),
            "claude" => Some(MockRuntime::Claude),
            "opencode" | "builtin" => Some(MockRuntime::OpenCode),
            _ => None,
        }
    }

    /// The program name.
    pub fn program(self) -> &'static str {
        match self {
            MockRuntime::Codex => "codex",
            MockRuntime::Claude => "claude",
            MockRuntime::OpenCode => "opencode",
        }
    }

    /// The call name of this runtime's native restore, as fault plans and journals name it
    /// (codex: the first of [`MockRuntime::restore_calls`]).
    pub fn restore_call(self) -> &'static str {
        self.restore_calls()[0]
    }

    /// Every call that can be this runtime's native restore: codex restores a legacy thread with
    /// `thread/rollback` (releases before 0.156) and a paginated one with `thread/revert`.
    pub fn restore_calls(self) -> &'static [&'static str] {
        match self {
            MockRuntime::Codex => &["thread/rollback", "thread/revert"],
            MockRuntime::Claude => &["resume-at"],
            MockRuntime::OpenCode => &["revert"],
        }
    }
}

/// Something about the mock runtimes went wrong.
#[derive(Debug, thiserror::Error)]
pub enum MockError {
    /// A fixture's `runtime_sessions` entry does not describe a session of its agent's runtime.
    #[error("{fixture}: runtime_sessions.{agent}: {detail}")]
    Session {
        /// The fixture file.
        fixture: String,
        /// The agent.
        agent: String,
        /// What is wrong.
        detail: String,
    },
    /// A file or process operation failed.
    #[error("{action}: {source}")]
    Io {
        /// What the harness was doing.
        action: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A journal could not be read.
    #[error(transparent)]
    Journal(#[from] rewind_mock_runtimes::journal::JournalError),
    /// A fault plan could not be read.
    #[error("{0}")]
    Faults(String),
    /// A release the mock does not imitate, or a mock's feature a real runtime does not have.
    #[error("{0}")]
    Unsupported(String),
    /// A real runtime failed (`--runtimes real`).
    #[error("real runtime: {0}")]
    Real(String),
}

/// What the mocks of this process hold outside it: directories and OpenCode server processes,
/// so that an interrupted run can release them ([`stop_all_mocks`]).
#[derive(Debug, Default)]
struct Live {
    dirs: Vec<PathBuf>,
    pids: Vec<u32>,
    /// Directories a stop already removed: removed again by every later stop, since a server
    /// that was still starting may have written into one after it went.
    removed: Vec<PathBuf>,
}

static LIVE: Mutex<Live> = Mutex::new(Live {
    dirs: Vec::new(),
    pids: Vec::new(),
    removed: Vec::new(),
});

fn live<T>(f: impl FnOnce(&mut Live) -> T) -> T {
    match LIVE.lock() {
        Ok(mut l) => f(&mut l),
        Err(poisoned) => f(&mut poisoned.into_inner()),
    }
}

/// Set by [`stop_all_mocks`]: no mock starts after it (a scenario still running while an
/// interrupted run drops its databases must not make new directories).
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Refuses to start anything once the run is stopping; `dir`, just made, is removed.
fn refuse_when_stopping(dir: &Path) -> Result<(), MockError> {
    if STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
        live(|l| l.dirs.retain(|d| d != dir));
        let _ = std::fs::remove_dir_all(dir);
        return Err(MockError::Io {
            action: "starting mock runtimes".to_owned(),
            source: std::io::Error::other("the run is being interrupted"),
        });
    }
    Ok(())
}

/// Kills every OpenCode server and removes every mock directory this process still holds, and
/// refuses every later start. For an interrupted run, which exits without running destructors;
/// safe to call again.
pub fn stop_all_mocks() {
    STOPPING.store(true, std::sync::atomic::Ordering::SeqCst);
    let (dirs, pids) = live(|l| {
        let taken = std::mem::take(&mut l.dirs);
        l.removed.extend(taken);
        (l.removed.clone(), std::mem::take(&mut l.pids))
    });
    for pid in pids {
        crate::leftovers::kill(pid);
    }
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn io(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> MockError {
    let action = action.into();
    move |source| MockError::Io { action, source }
}

/// The mock programs of a run: links named like the real runtimes to a multi-call binary, in a
/// temporary directory removed by [`MockPrograms::remove`] or on drop.
#[derive(Debug)]
pub struct MockPrograms {
    bin: PathBuf,
    /// Under `--runtimes real`: the real releases the programs stand in front of, as journaling
    /// proxies, and every scenario's sessions are seeded through.
    real: Option<RealPrograms>,
    /// Under real runtimes on this machine: the sessions seeded so far, per fixture.
    seeds: Option<Arc<SeedCache>>,
}

impl MockPrograms {
    /// Links `codex`, `claude` and `opencode` to `exe` in a new temporary directory.
    pub fn link(exe: &Path) -> Result<MockPrograms, MockError> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("rewind-mock-bin-{}-", std::process::id()))
            .tempdir()
            .map_err(io("creating the mock program directory"))?;
        crate::leftovers::claim(dir.path()).map_err(io("claiming the mock program directory"))?;
        for runtime in MockRuntime::ALL {
            let link = dir.path().join(runtime.program());
            std::os::unix::fs::symlink(exe, &link).map_err(io(format!(
                "linking {} to {}",
                link.display(),
                exe.display()
            )))?;
        }
        let bin = dir.keep();
        live(|l| l.dirs.push(bin.clone()));
        refuse_when_stopping(&bin)?;
        Ok(MockPrograms {
            bin,
            real: None,
            seeds: None,
        })
    }

    /// Runs every scenario on the real releases `real` instead of the mocks.
    /// Each fixture's sessions are seeded through them once per scenario directory
    /// ([`SeedCache`]) when they run on this machine, unless `REWIND_REAL_RESEED=1`.
    pub fn with_real(mut self, real: RealPrograms) -> MockPrograms {
        if SeedCache::wanted(&real.host) {
            self.seeds = Some(SeedCache::new(|dir| {
                live(|l| l.dirs.push(dir.to_path_buf()))
            }));
        }
        self.real = Some(real);
        self
    }

    /// The real releases of a `--runtimes real` run.
    pub fn real(&self) -> Option<&RealPrograms> {
        self.real.as_ref()
    }

    /// Removes the links and their directory (the run context outlives `main`'s scope, so the
    /// run removes them explicitly when it ends).
    pub fn remove(&self) {
        let seeded = self.seeds.as_ref().map(|s| s.dirs()).unwrap_or_default();
        for dir in std::iter::once(&self.bin).chain(&seeded) {
            crate::leftovers::kill_recorded(dir);
            live(|l| l.dirs.retain(|d| d != dir));
            if let Err(e) = std::fs::remove_dir_all(dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!("removing {}: {e}", dir.display());
                }
            }
        }
    }

    /// The path of one mock program.
    pub fn program(&self, runtime: MockRuntime) -> PathBuf {
        self.bin.join(runtime.program())
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CodexSession {
    thread_id: String,
    #[serde(default)]
    turns: Vec<CodexTurn>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CodexTurn {
    id: String,
    input_message: String,
    /// Absent for a turn the agent has not answered.
    #[serde(default)]
    output_message: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaudeSession {
    session_id: String,
    #[serde(default)]
    transcript: Vec<ClaudeEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaudeEntry {
    uuid: String,
    #[serde(rename = "type")]
    role: Role,
    message: String,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Role {
    User,
    Assistant,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenCodeSession {
    session_id: String,
    #[serde(default)]
    messages: Vec<OpenCodeMessage>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenCodeMessage {
    id: String,
    role: Role,
    message: String,
}

/// A fixture's `runtime_sessions` as seeding reads them: each agent's runtime, the texts of the
/// messages the sessions name, and errors that name the fixture and the agent.
struct FixtureSessions<'f> {
    fixture: &'f Fixture,
    content: BTreeMap<&'f str, &'f str>,
}

impl<'f> FixtureSessions<'f> {
    fn of(fixture: &'f Fixture) -> Self {
        FixtureSessions {
            fixture,
            content: fixture
                .scopes
                .iter()
                .flat_map(|s| s.messages.iter())
                .map(|m| (m.id.as_str(), m.content.as_str()))
                .collect(),
        }
    }

    fn bad(&self, agent: &str, detail: String) -> MockError {
        MockError::Session {
            fixture: self.fixture.path.display().to_string(),
            agent: agent.to_owned(),
            detail,
        }
    }

    /// The runtime family serving `agent`'s session.
    fn runtime(&self, agent: &str) -> Result<MockRuntime, MockError> {
        let found = self
            .fixture
            .agents
            .iter()
            .find(|a| a.id == agent)
            .ok_or_else(|| self.bad(agent, "no such agent".to_owned()))?;
        MockRuntime::for_runtime(&found.runtime).ok_or_else(|| {
            self.bad(
                agent,
                format!(
                    "agent runtime `{}` has no runtime here (codex, claude, opencode, builtin)",
                    found.runtime
                ),
            )
        })
    }

    /// The text of `message`, which `agent`'s session names.
    fn text(&self, agent: &str, message: &str) -> Result<String, MockError> {
        self.content
            .get(message)
            .map(|text| (*text).to_owned())
            .ok_or_else(|| self.bad(agent, format!("message `{message}` is not in the fixture")))
    }
}

/// The mock runtimes of one scenario. Dropping it kills its OpenCode server and removes its
/// directories.
#[derive(Debug)]
pub struct MockRuntimes {
    codex_program: PathBuf,
    claude_program: PathBuf,
    opencode_program: PathBuf,
    opencode: Option<opencode::ServerProcess>,
    /// Thread or session id of each seeded agent.
    sessions: BTreeMap<String, (MockRuntime, String)>,
    /// The ids each agent's session was seeded with: codex turn ids, claude transcript uuids,
    /// opencode message ids.
    seeded: BTreeMap<String, Vec<String>>,
    /// The Codex release the app-server imitates (`None`: the mock's default).
    codex_version: Option<String>,
    /// The Claude Code release the CLI imitates (`None`: the mock's default).
    claude_version: Option<String>,
    /// The delivery witness the mocks call, when the scenario has a database to witness.
    witness: Option<DeliveryWitness>,
    /// Under `--runtimes real`: the real runtimes standing in for the mocks.
    real: Option<RealScenario>,
    /// Last, so that it goes after every server that writes into it.
    root: Root,
}

/// Where a scenario's runtimes keep their state.
#[derive(Debug)]
enum Root {
    /// A directory of its own, removed with it.
    Own(tempfile::TempDir),
    /// Under real runtimes on this machine: a slot of the run's [`SeedCache`].
    Slot(Lease),
}

impl Root {
    fn path(&self) -> &Path {
        match self {
            Root::Own(dir) => dir.path(),
            Root::Slot(lease) => lease.path(),
        }
    }
}

/// What a mock's state says about one agent's session now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionView {
    /// Codex: the thread's turn ids; claude: the live chain's uuids (walked back from the live
    /// leaf, listed oldest first); opencode: the session's message ids.
    pub ids: Vec<String>,
    /// OpenCode: the message a pending revert points at.
    pub reverted_at: Option<String>,
    /// Claude: the live leaf entry, of any type (an answer, or a release's attachment after
    /// it), which a new turn continues from.
    pub leaf: Option<String>,
}

impl MockRuntimes {
    /// Seeds `fixture`'s runtime sessions into throwaway runtime homes and starts nothing: the
    /// check [`MockRuntimes::start`] makes of them (every entry a session of its agent's
    /// runtime, naming messages of the fixture, with ids the runtime accepts), without the
    /// mock programs. For fixtures made elsewhere, such as generated ones.
    pub fn check_sessions(fixture: &Fixture) -> Result<(), MockError> {
        let root = tempfile::Builder::new()
            .prefix(&format!("rewind-mock-check-{}-", std::process::id()))
            .tempdir_in(crate::leftovers::scratch_place())
            .map_err(io("creating the mock check directory"))?;
        crate::leftovers::claim(root.path()).map_err(io("claiming the mock check directory"))?;
        let mut mocks = MockRuntimes {
            root: Root::Own(root),
            codex_program: PathBuf::new(),
            claude_program: PathBuf::new(),
            opencode_program: PathBuf::new(),
            opencode: None,
            sessions: BTreeMap::new(),
            seeded: BTreeMap::new(),
            codex_version: None,
            claude_version: None,
            witness: None,
            real: None,
        };
        mocks.make_homes()?;
        mocks.seed(fixture)
    }

    /// Every runtime's home and working directory.
    fn state_dirs(&self) -> [PathBuf; 5] {
        [
            self.home(MockRuntime::Codex),
            self.home(MockRuntime::Claude),
            self.home(MockRuntime::OpenCode),
            self.claude_cwd(),
            self.opencode_cwd(),
        ]
    }

    /// Creates every runtime's home and working directory.
    fn make_homes(&self) -> Result<(), MockError> {
        for dir in self.state_dirs() {
            std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        }
        Ok(())
    }

    /// Whether an agent of `fixture` runs on OpenCode (builtin included), so a server is needed.
    fn needs_opencode(fixture: &Fixture) -> bool {
        fixture
            .agents
            .iter()
            .any(|a| MockRuntime::for_runtime(&a.runtime) == Some(MockRuntime::OpenCode))
    }

    /// Seeds the fixture's runtime sessions into fresh runtime homes and starts an OpenCode
    /// server when an agent of the fixture runs on OpenCode or builtin. The OpenCode server
    /// runs in the context-only configuration (`"snapshot": false`).
    ///
    /// With `witness_db`, every delivering input a mock receives is witnessed against that
    /// database ([`DeliveryWitness`]).
    pub async fn start(
        programs: &MockPrograms,
        fixture: &Fixture,
        witness_db: Option<sqlx::PgPool>,
    ) -> Result<MockRuntimes, MockError> {
        let root = match &programs.seeds {
            Some(cache) => Root::Slot(
                cache
                    .lease()
                    .await
                    .map_err(|e| MockError::Real(e.to_string()))?,
            ),
            None => {
                let root = tempfile::Builder::new()
                    .prefix(&format!("rewind-mocks-{}-", std::process::id()))
                    .tempdir_in(crate::leftovers::scratch_place())
                    .map_err(io("creating the mock runtime directory"))?;
                crate::leftovers::claim(root.path())
                    .map_err(io("claiming the mock runtime directory"))?;
                live(|l| l.dirs.push(root.path().to_path_buf()));
                Root::Own(root)
            }
        };
        refuse_when_stopping(root.path())?;
        let mut mocks = MockRuntimes {
            root,
            codex_program: programs.program(MockRuntime::Codex),
            claude_program: programs.program(MockRuntime::Claude),
            opencode_program: programs.program(MockRuntime::OpenCode),
            opencode: None,
            sessions: BTreeMap::new(),
            seeded: BTreeMap::new(),
            codex_version: None,
            claude_version: None,
            real: None,
            witness: match witness_db {
                Some(pool) => Some(
                    DeliveryWitness::start(pool)
                        .await
                        .map_err(io("starting the delivery witness"))?,
                ),
                None => None,
            },
        };
        mocks.make_homes()?;
        let needs_opencode = Self::needs_opencode(fixture);
        if let Some(real) = programs.real() {
            let seeds = mocks.real_seeds(fixture)?;
            let witness = mocks.witness.as_ref().map(|w| w.url().to_owned());
            let mut scenario = mocks
                .start_real(
                    real,
                    programs.seeds.as_deref(),
                    &seeds,
                    needs_opencode,
                    witness,
                )
                .await
                .map_err(|e| MockError::Real(e.to_string()))?;
            // The OpenCode server starts when first called: its process is recorded then.
            let root = mocks.root.path().to_path_buf();
            scenario
                .on_opencode_start(crate::real::opencode::PidSink::new(move |pid| {
                    live(|l| l.pids.push(pid));
                    if let Err(e) = crate::leftovers::record_process(&root, pid) {
                        tracing::warn!("recording the real opencode server {pid}: {e}");
                    }
                }))
                .await;
            mocks.real = Some(scenario);
            return Ok(mocks);
        }
        mocks.write_opencode_config(true)?;
        mocks.seed(fixture)?;
        if needs_opencode {
            mocks.start_opencode().await?;
        }
        Ok(mocks)
    }

    /// The real runtimes of the scenario, with `seeds` seeded: copied back from `cache` when this
    /// slot seeded the same sessions before, else through the runtimes (and then copied aside,
    /// with no runtime process running, for the slot's next scenario of the fixture).
    async fn start_real(
        &self,
        real: &RealPrograms,
        cache: Option<&SeedCache>,
        seeds: &[SessionSeed],
        needs_opencode: bool,
        witness: Option<String>,
    ) -> Result<RealScenario, crate::real::RealError> {
        let layout = self.layout();
        let (Some(cache), Root::Slot(lease)) = (cache, &self.root) else {
            return RealScenario::start(real, &layout, seeds, needs_opencode, witness).await;
        };
        let key = format!("opencode server: {needs_opencode}; sessions: {seeds:?}");
        let kept = cache.restore(lease, &key).await?;
        let mut scenario = RealScenario::start_seeded(
            real,
            &layout,
            seeds,
            needs_opencode,
            witness,
            kept.as_deref(),
        )
        .await?;
        if kept.is_none() {
            scenario.stop_opencode().await;
            cache
                .keep(lease, &key, scenario.seeded_sessions(seeds))
                .await?;
            if needs_opencode {
                scenario.start_opencode(false).await?;
            }
        }
        Ok(scenario)
    }

    /// Puts the mock runtimes back as [`MockRuntimes::start`] seeded them from `fixture`: the
    /// OpenCode server stops, every home and working directory (journals included) is written
    /// anew, and a new server starts when the fixture needs one, on a new port, so the
    /// implementation must be attached again with [`MockRuntimes::endpoints`]. The chosen
    /// releases and the delivery witness stay. Mocks only: real runtimes are refused.
    pub async fn reseed(&mut self, fixture: &Fixture) -> Result<(), MockError> {
        if self.real.is_some() {
            return Err(MockError::Real(
                "real runtimes cannot be seeded again in place".to_owned(),
            ));
        }
        if let Some(pid) = self.opencode.as_ref().and_then(|s| s.pid()) {
            crate::leftovers::forget_process(self.root.path(), pid);
        }
        self.stop().await;
        for dir in self.state_dirs() {
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(format!("removing {}", dir.display()))(e)),
            }
        }
        self.sessions.clear();
        self.seeded.clear();
        self.make_homes()?;
        self.write_opencode_config(true)?;
        self.seed(fixture)?;
        if Self::needs_opencode(fixture) {
            self.start_opencode().await?;
        }
        Ok(())
    }

    /// Where this scenario's runtimes keep their state, for the real runtimes.
    fn layout(&self) -> Layout {
        Layout {
            codex_home: self.home(MockRuntime::Codex),
            claude_config: self.home(MockRuntime::Claude),
            claude_cwd: self.claude_cwd(),
            xdg_data: self.opencode_data_home(),
            opencode_cwd: self.opencode_cwd(),
            root: self.root.path().to_path_buf(),
        }
    }

    /// The fixture's runtime sessions as the real runtimes seed them: turns of a user input and
    /// the answer to it. Records each agent's session and entry ids as the fixture names them.
    fn real_seeds(&mut self, fixture: &Fixture) -> Result<Vec<SessionSeed>, MockError> {
        let sessions = FixtureSessions::of(fixture);
        let mut seeds = Vec::new();
        for (agent_id, state) in &fixture.runtime_sessions {
            let runtime = sessions.runtime(agent_id)?;
            let bad = |detail: String| sessions.bad(agent_id, detail);
            let text = |message: &str| sessions.text(agent_id, message);
            // Claude and OpenCode sessions list user and assistant entries: each user entry
            // opens a turn, the assistant entry after it answers it.
            let pair = |entries: Vec<(String, Role, String)>| -> Result<Vec<SeedTurn>, MockError> {
                let mut turns: Vec<SeedTurn> = Vec::new();
                for (id, role, message) in entries {
                    match role {
                        Role::User => turns.push(SeedTurn {
                            input: text(&message)?,
                            output: None,
                        }),
                        Role::Assistant => match turns.last_mut() {
                            Some(turn) if turn.output.is_none() => {
                                turn.output = Some(text(&message)?)
                            }
                            _ => {
                                return Err(bad(format!(
                                    "entry `{id}`: a real runtime seeds an answer only right \
                                     after the input it answers"
                                )))
                            }
                        },
                    }
                }
                if turns.iter().any(|t| t.output.is_none()) {
                    return Err(bad(
                        "a real runtime answers every input: each user entry needs the \
                         assistant entry after it"
                            .to_owned(),
                    ));
                }
                Ok(turns)
            };
            let (program, session_id, ids, turns) = match runtime {
                MockRuntime::Codex => {
                    let session: CodexSession = serde_json::from_value(state.clone())
                        .map_err(|e| bad(format!("not a codex thread: {e}")))?;
                    let mut turns = Vec::new();
                    for turn in &session.turns {
                        let output = turn.output_message.as_deref().ok_or_else(|| {
                            bad(format!(
                                "turn `{}`: a real runtime answers every turn",
                                turn.id
                            ))
                        })?;
                        turns.push(SeedTurn {
                            input: text(&turn.input_message)?,
                            output: Some(text(output)?),
                        });
                    }
                    let ids: Vec<String> = session.turns.iter().map(|t| t.id.clone()).collect();
                    ("codex", session.thread_id, ids, turns)
                }
                MockRuntime::Claude => {
                    let session: ClaudeSession = serde_json::from_value(state.clone())
                        .map_err(|e| bad(format!("not a claude session: {e}")))?;
                    let ids = session.transcript.iter().map(|e| e.uuid.clone()).collect();
                    let entries = session
                        .transcript
                        .into_iter()
                        .map(|e| (e.uuid, e.role, e.message))
                        .collect();
                    ("claude", session.session_id, ids, pair(entries)?)
                }
                MockRuntime::OpenCode => {
                    let session: OpenCodeSession = serde_json::from_value(state.clone())
                        .map_err(|e| bad(format!("not an opencode session: {e}")))?;
                    let ids = session.messages.iter().map(|m| m.id.clone()).collect();
                    let entries = session
                        .messages
                        .into_iter()
                        .map(|m| (m.id, m.role, m.message))
                        .collect();
                    ("opencode", session.session_id, ids, pair(entries)?)
                }
            };
            self.seeded.insert(agent_id.clone(), ids.clone());
            self.sessions
                .insert(agent_id.clone(), (runtime, session_id.clone()));
            seeds.push(SessionSeed {
                agent: agent_id.clone(),
                runtime: program,
                session_id,
                ids,
                turns,
            });
        }
        Ok(seeds)
    }

    /// The fixture as the database must hold it: under `--runtimes real`, every agent session
    /// and recovery-point coordinate the fixture names is replaced by the id the real runtime
    /// chose for it; otherwise the fixture itself.
    pub fn fixture_for_database<'a>(&self, fixture: &'a Fixture) -> std::borrow::Cow<'a, Fixture> {
        let Some(real) = &self.real else {
            return std::borrow::Cow::Borrowed(fixture);
        };
        let mut translated = fixture.clone();
        for agent in &mut translated.agents {
            if let Some(session) = &agent.session {
                agent.session = Some(real.real_id(session));
            }
        }
        for point in &mut translated.recovery_points {
            point.recovery_ref = real.to_real_value(&point.recovery_ref);
        }
        std::borrow::Cow::Owned(translated)
    }

    /// What the runtime sent its model in every request so far (real runtimes only: a mock
    /// calls no model).
    pub async fn model_inputs(
        &self,
        runtime: MockRuntime,
    ) -> Result<Vec<Vec<crate::real::fake_model::Turn>>, MockError> {
        match &self.real {
            Some(real) => Ok(real.model_inputs(runtime.program()).await),
            None => Err(MockError::Unsupported(
                "a mock runtime calls no model: what a runtime sends its model is seen on real \
                 runtimes (--runtimes real)"
                    .to_owned(),
            )),
        }
    }

    /// Makes the model behind `runtime` answer every later request `ms` late (real runtimes
    /// only: a mock's turn is slowed by a fault instead). Returns how many requests the model had
    /// received so far.
    pub async fn slow_model(&self, runtime: MockRuntime, ms: u64) -> Result<usize, MockError> {
        match &self.real {
            Some(real) => Ok(real.slow_model(runtime.program(), ms).await),
            None => Err(MockError::Unsupported(
                "a mock runtime calls no model: slow its turn with a fault".to_owned(),
            )),
        }
    }

    /// How many requests the model behind `runtime` received so far (real runtimes only).
    pub async fn model_requests(&self, runtime: MockRuntime) -> Result<usize, MockError> {
        match &self.real {
            Some(real) => Ok(real.model_requests(runtime.program()).await),
            None => Err(MockError::Unsupported(
                "a mock runtime calls no model".to_owned(),
            )),
        }
    }

    /// Restarts the real OpenCode server (snapshots on or off) on the same data, keeping the
    /// record of the processes an interrupted run must stop.
    async fn restart_real_opencode(&mut self, snapshot: bool) -> Result<(), MockError> {
        let Some(real) = self.real.as_mut() else {
            return Ok(());
        };
        let old = real.opencode_pid().await;
        // The new server is recorded when it starts (see `start`).
        real.start_opencode(snapshot)
            .await
            .map_err(|e| MockError::Real(e.to_string()))?;
        if let Some(old) = old {
            live(|l| l.pids.retain(|p| *p != old));
            crate::leftovers::forget_process(self.root.path(), old);
        }
        Ok(())
    }

    /// Restarts the OpenCode server on the same data: every session it held is loaded again
    /// from disk by a new process (a detached session).
    pub async fn restart_opencode(&mut self) -> Result<(), MockError> {
        if self.real.is_some() {
            return self.restart_real_opencode(false).await;
        }
        self.start_opencode().await
    }

    /// The processes of this scenario's `runtime` (codex or claude, the programs handed to the
    /// implementation, mock or proxy and real alike) alive now: every process whose environment
    /// names this scenario's home of that runtime, here and, when the real runtimes run on a
    /// second host, there (as `host:PID`).
    pub async fn runtime_processes(&self, runtime: MockRuntime) -> Result<Vec<String>, MockError> {
        let (key, home) = match runtime {
            MockRuntime::Codex => ("CODEX_HOME", self.home(runtime)),
            MockRuntime::Claude => ("CLAUDE_CONFIG_DIR", self.home(runtime)),
            MockRuntime::OpenCode => ("XDG_DATA_HOME", self.opencode_data_home()),
        };
        let wanted = format!("{key}={}", home.display());
        let failed = |e: crate::real::RealError| MockError::Real(e.to_string());
        let mut pids: Vec<String> = crate::real::host::RuntimeHost::Local
            .processes_with(&wanted)
            .await
            .map_err(failed)?
            .into_iter()
            .map(|p| p.to_string())
            .collect();
        if let Some(real) = self.real.as_ref().filter(|r| r.programs().host.is_remote()) {
            pids.extend(
                real.processes_with(&wanted)
                    .await
                    .map_err(failed)?
                    .into_iter()
                    .map(|p| format!("host:{p}")),
            );
        }
        Ok(pids)
    }

    /// Keeps one real codex app-server running for the rest of the scenario, which every codex
    /// program the implementation starts from now on attaches to (a live session).
    pub async fn start_live_codex(&mut self) -> Result<(), MockError> {
        self.not_on_mock("a live codex app-server")?;
        match self.real.as_mut() {
            Some(real) => real
                .start_live_codex()
                .await
                .map_err(|e| MockError::Real(e.to_string())),
            None => Ok(()),
        }
    }

    /// Whether the live codex app-server still runs (`None`: none was started).
    pub fn live_codex_running(&mut self) -> Option<bool> {
        self.real.as_mut().and_then(|r| r.live_codex_running())
    }

    /// Whether the scenario runs on real runtimes.
    pub fn is_real(&self) -> bool {
        self.real.is_some()
    }

    /// The error for a real runtime's feature the mocks do not have.
    fn not_on_mock(&self, what: &str) -> Result<(), MockError> {
        match &self.real {
            Some(_) => Ok(()),
            None => Err(MockError::Unsupported(format!(
                "{what} is a feature of the real runtimes (`--runtimes real`)"
            ))),
        }
    }

    /// The error for a mock's feature a real runtime does not have.
    fn not_on_real(&self, what: &str) -> Result<(), MockError> {
        match &self.real {
            Some(_) => Err(MockError::Unsupported(format!(
                "{what} is a feature of the mock runtimes; the real runtimes of this run \
                 ({}) cannot do it",
                self.real
                    .as_ref()
                    .map(|r| r.programs().describe())
                    .unwrap_or_default()
            ))),
            None => Ok(()),
        }
    }

    fn seed(&mut self, fixture: &Fixture) -> Result<(), MockError> {
        let sessions = FixtureSessions::of(fixture);
        let mut opencode_sessions = Vec::new();
        for (agent_id, state) in &fixture.runtime_sessions {
            let runtime = sessions.runtime(agent_id)?;
            let bad = |detail: String| sessions.bad(agent_id, detail);
            let text = |message: &str| sessions.text(agent_id, message);
            match runtime {
                MockRuntime::Codex => {
                    let session: CodexSession = serde_json::from_value(state.clone())
                        .map_err(|e| bad(format!("not a codex thread: {e}")))?;
                    let mut turns = Vec::new();
                    for turn in &session.turns {
                        turns.push(codex::SeedTurn {
                            id: turn.id.clone(),
                            input: text(&turn.input_message)?,
                            output: match &turn.output_message {
                                Some(message) => text(message)?,
                                None => String::new(),
                            },
                        });
                    }
                    // The mode the imitated release's users hold (legacy under 0.155).
                    let thread = codex::SeedThread {
                        thread_id: session.thread_id.clone(),
                        turns,
                        history_mode: Some(codex::seed_history_mode(
                            self.codex_version
                                .as_deref()
                                .unwrap_or(codex::DEFAULT_VERSION),
                        )),
                    };
                    codex::seed_thread(&self.home(MockRuntime::Codex), &thread)
                        .map_err(io(format!("seeding codex thread {}", session.thread_id)))?;
                    self.seeded.insert(
                        agent_id.clone(),
                        session.turns.iter().map(|t| t.id.clone()).collect(),
                    );
                    self.sessions
                        .insert(agent_id.clone(), (runtime, session.thread_id));
                }
                MockRuntime::Claude => {
                    let session: ClaudeSession = serde_json::from_value(state.clone())
                        .map_err(|e| bad(format!("not a claude session: {e}")))?;
                    let mut entries = Vec::new();
                    for entry in &session.transcript {
                        entries.push(claude::SeedEntry {
                            uuid: entry.uuid.clone(),
                            role: entry.role.as_str().to_owned(),
                            text: text(&entry.message)?,
                        });
                    }
                    let seed = claude::SeedSession {
                        session_id: session.session_id.clone(),
                        cwd: self.claude_cwd(),
                        entries,
                    };
                    claude::seed_session(&self.home(MockRuntime::Claude), &seed)
                        .map_err(io(format!("seeding claude session {}", session.session_id)))?;
                    self.seeded.insert(
                        agent_id.clone(),
                        session.transcript.iter().map(|e| e.uuid.clone()).collect(),
                    );
                    self.sessions
                        .insert(agent_id.clone(), (runtime, session.session_id));
                }
                MockRuntime::OpenCode => {
                    let session: OpenCodeSession = serde_json::from_value(state.clone())
                        .map_err(|e| bad(format!("not an opencode session: {e}")))?;
                    let mut messages = Vec::new();
                    for message in &session.messages {
                        messages.push(opencode::SeedMessage {
                            id: message.id.clone(),
                            role: message.role.as_str().to_owned(),
                            text: text(&message.message)?,
                        });
                    }
                    self.seeded.insert(
                        agent_id.clone(),
                        session.messages.iter().map(|m| m.id.clone()).collect(),
                    );
                    opencode_sessions.push(opencode::SeedSession {
                        session_id: session.session_id.clone(),
                        messages,
                    });
                    self.sessions
                        .insert(agent_id.clone(), (runtime, session.session_id));
                }
            }
        }
        if !opencode_sessions.is_empty() {
            opencode::seed_sessions(&self.opencode_data_home(), &opencode_sessions)
                .map_err(io("seeding opencode sessions"))?;
        }
        Ok(())
    }

    async fn start_opencode(&mut self) -> Result<(), MockError> {
        if let Some(old) = self.opencode.take() {
            let pid = old.pid();
            live(|l| l.pids.retain(|p| Some(*p) != pid));
            if let Some(pid) = pid {
                crate::leftovers::forget_process(self.root.path(), pid);
            }
            if let Err(e) = old.stop().await {
                tracing::warn!("stopping the mock opencode server: {e}");
            }
        }
        // The server leaves with its parent, should the harness be killed.
        let env: Vec<(String, String)> = self
            .witness_env()
            .chain(std::iter::once((
                rewind_mock_runtimes::EXIT_WITH_PARENT_ENV.to_owned(),
                std::process::id().to_string(),
            )))
            .collect();
        let server = opencode::ServerProcess::start_with_env(
            &self.opencode_program,
            &[],
            &self.opencode_data_home(),
            &self.opencode_cwd(),
            &env,
        )
        .await
        .map_err(io("starting the mock opencode server"))?;
        let pid = server.pid();
        live(|l| l.pids.extend(pid));
        if STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
            stop_all_mocks();
        }
        if let Some(pid) = pid {
            crate::leftovers::record_process(self.root.path(), pid)
                .map_err(io("recording the mock opencode server"))?;
        }
        self.opencode = Some(server);
        Ok(())
    }

    fn write_opencode_config(&self, context_only: bool) -> Result<(), MockError> {
        let path = self.opencode_cwd().join("opencode.json");
        let config = serde_json::json!({
            "$schema": "https://opencode.ai/config.json",
            "snapshot": !context_only,
        });
        std::fs::write(&path, format!("{config:#}\n"))
            .map_err(io(format!("writing {}", path.display())))
    }

    /// Restarts the OpenCode server with snapshots on: the configuration AgentTeam must not
    /// restore through, since a revert would then also roll back files.
    pub async fn use_opencode_with_snapshots(&mut self) -> Result<(), MockError> {
        if self.real.is_some() {
            return self.restart_real_opencode(true).await;
        }
        self.write_opencode_config(false)?;
        self.start_opencode().await
    }

    /// Makes the Codex app-server imitate another release (e.g. `0.155.1`, the last one with
    /// `thread/rollback`). Takes effect for implementations attached afterwards; the threads
    /// seeded so far take the history mode that release's users hold
    /// ([`codex::seed_history_mode`]: legacy under 0.155, paginated from 0.156 on).
    pub fn use_codex_version(&mut self, version: &str) -> Result<(), MockError> {
        if let Some(real) = &self.real {
            // The run's own release is the one it runs; another cannot be had mid-scenario.
            if real.programs().codex.0.version == version {
                return Ok(());
            }
        }
        self.not_on_real("switching the codex release within a scenario")?;
        self.codex_version = Some(version.to_owned());
        let mode = codex::seed_history_mode(version);
        let home = self.home(MockRuntime::Codex);
        for (runtime, thread_id) in self.sessions.values() {
            if *runtime == MockRuntime::Codex {
                codex::set_history_mode(&home, thread_id, mode).map_err(io(format!(
                    "switching codex thread {thread_id} to {mode:?}"
                )))?;
            }
        }
        Ok(())
    }

    /// Makes the Claude mock imitate Claude Code `version` (one of
    /// `rewind_mock_runtimes::claude::VERSIONS`) in the programs handed over from now on.
    pub fn use_claude_version(&mut self, version: &str) -> Result<(), MockError> {
        self.not_on_real("switching the claude release within a scenario")?;
        if !claude::VERSIONS.contains(&version) {
            return Err(MockError::Unsupported(format!(
                "the claude mock imitates {}, not {version}",
                claude::VERSIONS.join(" and ")
            )));
        }
        self.claude_version = Some(version.to_owned());
        Ok(())
    }

    /// The home directory of one mock (`CODEX_HOME`, `CLAUDE_CONFIG_DIR`, the OpenCode data
    /// directory inside `XDG_DATA_HOME`).
    pub fn home(&self, runtime: MockRuntime) -> PathBuf {
        match runtime {
            MockRuntime::Codex => self.root.path().join("codex-home"),
            MockRuntime::Claude => self.root.path().join("claude-config"),
            MockRuntime::OpenCode => self.root.path().join("xdg-data").join("opencode"),
        }
    }

    /// `XDG_DATA_HOME` of the OpenCode server (its home is the `opencode` directory inside).
    fn opencode_data_home(&self) -> PathBuf {
        self.root.path().join("xdg-data")
    }

    /// The working directory the claude sessions were started in.
    pub fn claude_cwd(&self) -> PathBuf {
        self.root.path().join("claude-work")
    }

    fn opencode_cwd(&self) -> PathBuf {
        self.root.path().join("opencode-work")
    }

    /// The thread or session id seeded for `agent_id`.
    pub fn session_of(&self, agent_id: &str) -> Option<(MockRuntime, &str)> {
        self.sessions
            .get(agent_id)
            .map(|(runtime, id)| (*runtime, id.as_str()))
    }

    /// The ids `agent_id`'s session was seeded with (see [`SessionView::ids`]).
    pub fn seeded_ids(&self, agent_id: &str) -> Option<&[String]> {
        self.seeded.get(agent_id).map(Vec::as_slice)
    }

    /// Reads `agent_id`'s session back from its mock's state; `None` when the agent has no
    /// seeded session or the runtime no longer has it.
    pub async fn view(&self, agent_id: &str) -> Result<Option<SessionView>, MockError> {
        let Some((runtime, id)) = self.session_of(agent_id) else {
            return Ok(None);
        };
        self.view_session(runtime, id).await
    }

    /// Reads session `id` of `runtime` back from its mock's state (a session made during the
    /// scenario as well as a seeded one); `None` when the runtime does not have it.
    pub async fn view_session(
        &self,
        runtime: MockRuntime,
        id: &str,
    ) -> Result<Option<SessionView>, MockError> {
        let home = self.home(runtime);
        let action = || format!("reading {} session {id}", runtime.program());
        if let Some(real) = &self.real {
            return self.view_real(real, runtime, id).await;
        }
        Ok(match runtime {
            MockRuntime::Codex => {
                codex::read_thread(&home, id)
                    .map_err(io(action()))?
                    .map(|thread| SessionView {
                        ids: thread.turn_ids(),
                        reverted_at: None,
                        leaf: None,
                    })
            }
            MockRuntime::Claude => {
                let cwd = self.claude_cwd();
                let leaf = claude::live_leaf(&home, &cwd, id).map_err(io(action()))?;
                claude::live_chain(&home, &cwd, id)
                    .map_err(io(action()))?
                    .map(|chain| SessionView {
                        ids: chain.into_iter().map(|e| e.uuid).collect(),
                        reverted_at: None,
                        leaf,
                    })
            }
            MockRuntime::OpenCode => opencode::read_session(&self.opencode_data_home(), id)
                .map_err(io(action()))?
                .map(|session| SessionView {
                    ids: session
                        .message_ids()
                        .into_iter()
                        .map(str::to_owned)
                        .collect(),
                    reverted_at: session.revert_message_id().map(str::to_owned),
                    leaf: None,
                }),
        })
    }

    /// How the implementation reaches these mocks.
    pub fn endpoints(&self) -> RuntimeEndpoints {
        if let Some(real) = &self.real {
            return RuntimeEndpoints {
                codex_program: self.codex_program.clone(),
                codex_args: vec!["app-server".to_owned()],
                codex_env: real
                    .codex_env()
                    .into_iter()
                    .chain(self.witness_env())
                    .collect(),
                claude_program: self.claude_program.clone(),
                claude_env: real
                    .claude_env()
                    .into_iter()
                    .chain(self.witness_env())
                    .collect(),
                claude_cwd: self.claude_cwd(),
                opencode_url: real
                    .opencode_url()
                    .unwrap_or_else(|| "http://127.0.0.1:9".to_owned()),
            };
        }
        RuntimeEndpoints {
            codex_program: self.codex_program.clone(),
            codex_args: vec!["app-server".to_owned()],
            codex_env: std::iter::once((
                "CODEX_HOME".to_owned(),
                self.home(MockRuntime::Codex).display().to_string(),
            ))
            .chain(
                self.codex_version
                    .iter()
                    .map(|v| (codex::VERSION_ENV.to_owned(), v.clone())),
            )
            .chain(self.witness_env())
            .collect(),
            claude_program: self.claude_program.clone(),
            claude_env: std::iter::once((
                "CLAUDE_CONFIG_DIR".to_owned(),
                self.home(MockRuntime::Claude).display().to_string(),
            ))
            .chain(
                self.claude_version
                    .iter()
                    .map(|v| (claude::VERSION_ENV.to_owned(), v.clone())),
            )
            .chain(self.witness_env())
            .collect(),
            claude_cwd: self.claude_cwd(),
            opencode_url: self
                .opencode
                .as_ref()
                .map(|s| s.base_url().to_owned())
                // No OpenCode agent in the fixture: a closed port, so a stray call fails fast.
                .unwrap_or_else(|| "http://127.0.0.1:9".to_owned()),
        }
    }

    /// The runtime's own id for a thread, session or entry the fixture names: the same id on the
    /// mocks, the id the real runtime chose under `--runtimes real`.
    pub fn native_id(&self, fixture_id: &str) -> String {
        match &self.real {
            Some(real) => real.real_id(fixture_id),
            None => fixture_id.to_owned(),
        }
    }

    /// [`MockRuntimes::view_session`] on the real runtimes: ids translated both ways.
    async fn view_real(
        &self,
        real: &RealScenario,
        runtime: MockRuntime,
        id: &str,
    ) -> Result<Option<SessionView>, MockError> {
        let real_id = real.real_id(id);
        let back = |ids: Vec<String>| -> Vec<String> {
            ids.iter().map(|i| real.to_fixture_text(i)).collect()
        };
        let failed = |e: crate::real::RealError| MockError::Real(e.to_string());
        Ok(match runtime {
            MockRuntime::Codex => real
                .codex_turns(&real_id)
                .await
                .map_err(failed)?
                .map(|ids| SessionView {
                    ids: back(ids),
                    reverted_at: None,
                    leaf: None,
                }),
            MockRuntime::Claude => {
                real.claude_session(&real_id)
                    .await
                    .map_err(failed)?
                    .map(|(chain, leaf)| SessionView {
                        ids: back(chain.into_iter().map(|e| e.uuid).collect()),
                        reverted_at: None,
                        leaf: leaf.map(|l| real.to_fixture_text(&l)),
                    })
            }
            MockRuntime::OpenCode => {
                real.opencode_session(&real_id)
                    .await
                    .map_err(failed)?
                    .map(|(ids, reverted)| SessionView {
                        ids: back(ids),
                        reverted_at: reverted.map(|r| real.to_fixture_text(&r)),
                        leaf: None,
                    })
            }
        })
    }

    /// Adds a fault to one mock's plan: every `call` (default: each of its restore calls) on
    /// `target` answers with `kind`.
    pub fn add_fault(
        &self,
        runtime: MockRuntime,
        target: &str,
        call: Option<&str>,
        kind: FaultKind,
        hang_ms: Option<u64>,
    ) -> Result<(), MockError> {
        let proxied = matches!(kind, FaultKind::Error | FaultKind::Hang)
            || (kind == FaultKind::Crash && runtime != MockRuntime::OpenCode);
        if !proxied {
            self.not_on_real(&format!(
                "a `{}` fault (only the runtime itself could answer it so)",
                kind.label()
            ))?;
        }
        // A real runtime's proxy sees the ids the runtime chose.
        let target = self.native_id(target);
        let target = target.as_str();
        let path = rewind_mock_runtimes::faults_path(&self.home(runtime));
        let mut plan = FaultPlan::load(&path).map_err(MockError::Faults)?;
        let calls = match call {
            Some(call) => vec![call],
            None => runtime.restore_calls().to_vec(),
        };
        for call in calls {
            plan.rules.push(FaultRule {
                target: target.to_owned(),
                call: Some(call.to_owned()),
                kind,
                hang_ms,
            });
        }
        plan.save(&path)
            .map_err(io(format!("writing {}", path.display())))
    }

    /// The release `runtime`'s mock imitates in this scenario (`0.171.0`), or the real release it
    /// runs (`0.171.0 (real)`).
    pub fn release(&self, runtime: MockRuntime) -> String {
        if let Some(real) = &self.real {
            let programs = real.programs();
            let version = match runtime {
                MockRuntime::Codex => &programs.codex.0.version,
                MockRuntime::Claude => &programs.claude.0.version,
                MockRuntime::OpenCode => &programs.opencode.0.version,
            };
            return format!("{version} (real)");
        }
        match runtime {
            MockRuntime::Codex => self
                .codex_version
                .clone()
                .unwrap_or_else(|| codex::DEFAULT_VERSION.to_owned()),
            MockRuntime::Claude => self
                .claude_version
                .clone()
                .unwrap_or_else(|| claude::VERSION.to_owned()),
            MockRuntime::OpenCode => rewind_mock_runtimes::opencode::VERSION.to_owned(),
        }
    }

    /// Lifts every fault planted on `target`.
    pub fn clear_faults(&self, runtime: MockRuntime, target: &str) -> Result<(), MockError> {
        let target = self.native_id(target);
        let target = target.as_str();
        let path = rewind_mock_runtimes::faults_path(&self.home(runtime));
        let mut plan = FaultPlan::load(&path).map_err(MockError::Faults)?;
        plan.rules.retain(|rule| rule.target != target);
        plan.save(&path)
            .map_err(io(format!("writing {}", path.display())))
    }

    /// Lifts every fault planted on every mock (a held call goes ahead), so that a scenario
    /// that ends while a call is held does not leave it waiting.
    pub fn lift_all_faults(&self) {
        for runtime in MockRuntime::ALL {
            let path = rewind_mock_runtimes::faults_path(&self.home(runtime));
            // Written beside the plan and renamed over it, without creating a directory: an
            // interrupted run may be removing this one right now, and must find it gone.
            let tmp = path.with_extension("json.lifted");
            if std::fs::write(&tmp, b"{\"rules\": []}").is_ok() {
                let _ = std::fs::rename(&tmp, &path);
            }
        }
    }

    /// The variable that points a mock at the delivery witness, when there is one.
    fn witness_env(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.witness
            .iter()
            .map(|w| (WITNESS_ENV.to_owned(), w.url().to_owned()))
    }

    /// Every delivering input the mocks received so far, with the recovery points committed
    /// at that moment (empty without a witness).
    pub fn witnessed(&self) -> Vec<Witnessed> {
        self.witness
            .as_ref()
            .map(DeliveryWitness::records)
            .unwrap_or_default()
    }

    /// Everything one mock was asked so far.
    pub fn journal(&self, runtime: MockRuntime) -> Result<Vec<JournalEntry>, MockError> {
        let entries = read_journal(&rewind_mock_runtimes::journal_path(&self.home(runtime)))?;
        let Some(real) = &self.real else {
            return Ok(entries);
        };
        // The proxies journal the real ids; the steps speak the fixture's.
        Ok(entries
            .into_iter()
            .map(|mut e| {
                e.target = e.target.map(|t| real.to_fixture_text(&t));
                e.request = real.to_fixture_value(&e.request);
                e.detail = e.detail.map(|d| real.to_fixture_text(&d));
                e
            })
            .collect())
    }

    /// Stops the OpenCode server (the directories go when `self` is dropped).
    pub async fn stop(&mut self) {
        if let Some(server) = self.opencode.take() {
            let pid = server.pid();
            live(|l| l.pids.retain(|p| Some(*p) != pid));
            if let Err(e) = server.stop().await {
                tracing::warn!("stopping the mock opencode server: {e}");
            }
        }
    }
}

impl Drop for MockRuntimes {
    fn drop(&mut self) {
        // A slot stays the run's until the run ends.
        let own = match &self.root {
            Root::Own(dir) => Some(dir.path().to_path_buf()),
            Root::Slot(_) => None,
        };
        let pid = self.opencode.as_ref().and_then(|s| s.pid());
        live(|l| {
            l.dirs.retain(|d| Some(d) != own.as_ref());
            if let Some(pid) = pid {
                l.pids.retain(|p| *p != pid);
            }
        });
    }
}
