//! One scenario's real runtimes: the fake models, the homes, the sessions seeded from the
//! fixture, a real OpenCode server behind its journaling proxy, and the map between the ids the
//! fixture names and the ids the real runtimes chose.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::claude::ClaudeHome;
use super::codex::CodexHome;
use super::fake_model::{Api, FakeModel};
use super::host::RuntimeHost;
use super::install::Release;
use super::opencode::{JournalingProxy, LazyServer, OpenCodeHome, PidSink};
use super::{RealError, SeedTurn, PROXY_TARGET_ENV};

/// The real programs of a run, one release per runtime, installed before the first scenario.
#[derive(Debug, Clone)]
pub struct RealPrograms {
    /// Codex: the release and its program.
    pub codex: (Release, PathBuf),
    /// Claude Code.
    pub claude: (Release, PathBuf),
    /// OpenCode (also `builtin`).
    pub opencode: (Release, PathBuf),
    /// Where they run.
    pub host: RuntimeHost,
}

impl RealPrograms {
    /// Installs (or finds in the cache) `releases`: one per runtime, any runtime left out at its
    /// pinned release; a `latest` version is resolved against the registry first.
    pub fn resolve(releases: &[Release]) -> Result<RealPrograms, RealError> {
        let pick = |name: &str| -> Result<(Release, PathBuf), RealError> {
            let release = releases
                .iter()
                .find(|r| r.name == name)
                .cloned()
                .or_else(|| Release::pinned(name))
                .ok_or_else(|| RealError::runtime("codex", format!("no release of {name}")))?
                .resolve_latest()?;
            let program = release.program()?;
            Ok((release, program))
        };
        Ok(RealPrograms {
            codex: pick("codex")?,
            claude: pick("claude-code")?,
            opencode: pick("opencode")?,
            host: RuntimeHost::Local,
        })
    }

    /// The same programs run on `host`, which must hold each of them at the same path.
    pub async fn on_host(mut self, host: RuntimeHost) -> Result<RealPrograms, RealError> {
        for (release, program) in [&self.codex, &self.claude, &self.opencode] {
            if !host.has_program(program).await? {
                return Err(RealError::runtime(
                    "runtime host",
                    format!(
                        "{} has no {release} at {} (ci/runtime-host.sh start copies the installed \
                         releases onto a container)",
                        host.describe(),
                        program.display()
                    ),
                ));
            }
        }
        self.host = host;
        Ok(self)
    }

    /// `codex 0.171.0, claude-code 2.1.332, opencode 1.18.34`, and the host when it is a second
    /// one.
    pub fn describe(&self) -> String {
        let on = match &self.host {
            RuntimeHost::Local => String::new(),
            host => format!(" on {}", host.describe()),
        };
        format!(
            "{}, {}, {}{on}",
            self.codex.0, self.claude.0, self.opencode.0
        )
    }
}

/// A session to seed: the fixture's description of one agent's runtime session.
#[derive(Debug, Clone)]
pub struct SessionSeed {
    /// The agent.
    pub agent: String,
    /// `codex`, `claude` or `opencode` (builtin agents are OpenCode sessions).
    pub runtime: &'static str,
    /// The thread or session id the fixture names.
    pub session_id: String,
    /// The entry ids the fixture names: one per turn (codex), or a user and an assistant one per
    /// turn (claude, opencode).
    pub ids: Vec<String>,
    /// The turns.
    pub turns: Vec<SeedTurn>,
}

/// Where a scenario's runtimes keep their state (the mock runtimes' layout).
#[derive(Debug, Clone)]
pub struct Layout {
    /// `CODEX_HOME`.
    pub codex_home: PathBuf,
    /// `CLAUDE_CONFIG_DIR`.
    pub claude_config: PathBuf,
    /// The working directory of the claude sessions.
    pub claude_cwd: PathBuf,
    /// `XDG_DATA_HOME` (OpenCode's home is `opencode` inside).
    pub xdg_data: PathBuf,
    /// The OpenCode server's working directory.
    pub opencode_cwd: PathBuf,
    /// The scenario's root, for HOME and the other XDG directories.
    pub root: PathBuf,
}

/// One scenario's real runtimes.
#[derive(Debug)]
pub struct RealScenario {
    programs: RealPrograms,
    codex: CodexHome,
    claude: ClaudeHome,
    opencode: Option<(Arc<LazyServer>, JournalingProxy)>,
    /// Told the process id of every OpenCode server started for the scenario.
    opencode_pids: Option<PidSink>,
    /// The live codex app-server, once a scenario keeps one running.
    live_codex: Option<super::live_codex::LiveCodex>,
    /// Fixture id → real id, for every seeded session and entry.
    to_real: BTreeMap<String, String>,
    /// Real id → fixture id.
    to_fixture: BTreeMap<String, String>,
    /// Agent → the ids its session was seeded with (fixture ids may repeat across sessions).
    seeded: BTreeMap<String, super::SeededSession>,
    layout: Layout,
    env: Vec<(String, String)>,
    witness: Option<String>,
    /// Kept alive for the scenario.
    _models: [FakeModel; 3],
}

impl Drop for RealScenario {
    fn drop(&mut self) {
        // The servers first, so that nothing writes while their state is removed.
        if let Some((server, proxy)) = self.opencode.take() {
            drop(proxy);
            server.kill_now();
        }
        drop(self.live_codex.take());
        self.programs.host.forget_dir(&self.layout.root);
    }
}

/// How long starting one fake model may take.
const START_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long seeding one session may take (its turns one after another, each a real turn).
const SEED_LIMIT: std::time::Duration = std::time::Duration::from_secs(180);

/// How long one read-back of a runtime's state may take.
const READ_LIMIT: std::time::Duration = std::time::Duration::from_secs(90);

/// `work`, or an error naming `what` when it takes longer than `limit`: no wait on a real
/// runtime is unbounded.
async fn bounded<T>(
    limit: std::time::Duration,
    what: &str,
    work: impl std::future::Future<Output = Result<T, RealError>>,
) -> Result<T, RealError> {
    tokio::time::timeout(limit, work).await.unwrap_or_else(|_| {
        Err(RealError::Runtime {
            runtime: "harness",
            detail: format!("{what} did not finish within {} s", limit.as_secs()),
        })
    })
}

/// Which fake model a runtime talks to.
fn model_index(runtime: &str) -> usize {
    match runtime {
        "codex" => 0,
        "claude" => 1,
        _ => 2,
    }
}

async fn base_env(host: &RuntimeHost, layout: &Layout) -> Result<Vec<(String, String)>, RealError> {
    let mut env = Vec::new();
    let mut dirs = vec![
        layout.codex_home.clone(),
        layout.claude_config.clone(),
        layout.claude_cwd.clone(),
        layout.opencode_cwd.clone(),
    ];
    for (key, dir) in [
        ("HOME", layout.root.join("home")),
        ("XDG_CONFIG_HOME", layout.root.join("xdg-config")),
        ("XDG_DATA_HOME", layout.xdg_data.clone()),
        ("XDG_STATE_HOME", layout.root.join("xdg-state")),
        ("XDG_CACHE_HOME", layout.root.join("xdg-cache")),
    ] {
        env.push((key.to_owned(), dir.display().to_string()));
        dirs.push(dir);
    }
    let dirs: Vec<&std::path::Path> = dirs.iter().map(PathBuf::as_path).collect();
    host.make_dirs(&dirs).await?;
    Ok(env)
}

impl RealScenario {
    /// Starts the fake models, writes the runtimes' configuration into `layout`, seeds
    /// `sessions` through the real runtimes and, when `opencode` is asked for, starts a real
    /// OpenCode server (context-only unless `snapshot`) behind a journaling proxy.
    pub async fn start(
        programs: &RealPrograms,
        layout: &Layout,
        sessions: &[SessionSeed],
        opencode: bool,
        witness: Option<String>,
    ) -> Result<RealScenario, RealError> {
        Self::start_seeded(programs, layout, sessions, opencode, witness, None).await
    }

    /// [`RealScenario::start`], or with `seeded`, when `layout` already holds the state an
    /// earlier seeding of `sessions` at these same paths left (see [`super::seeds`]): the ids
    /// that seeding got, one per session, stand for it and no turn is run again.
    pub async fn start_seeded(
        programs: &RealPrograms,
        layout: &Layout,
        sessions: &[SessionSeed],
        opencode: bool,
        witness: Option<String>,
        seeded: Option<&[super::SeededSession]>,
    ) -> Result<RealScenario, RealError> {
        let host = programs.host.clone();
        let model_address = host.model_address();
        let responses = bounded(START_LIMIT, "starting the fake Responses API", async {
            FakeModel::start_on(Api::Responses, model_address)
                .await
                .map_err(super::io("starting the fake Responses API"))
        })
        .await?;
        let messages = bounded(START_LIMIT, "starting the fake Messages API", async {
            FakeModel::start_on(Api::Messages, model_address)
                .await
                .map_err(super::io("starting the fake Messages API"))
        })
        .await?;
        let chat = bounded(
            START_LIMIT,
            "starting the fake Chat Completions API",
            async {
                FakeModel::start_on(Api::ChatCompletions, model_address)
                    .await
                    .map_err(super::io("starting the fake Chat Completions API"))
            },
        )
        .await?;
        for seed in sessions {
            let model = match seed.runtime {
                "codex" => &responses,
                "claude" => &messages,
                _ => &chat,
            };
            for turn in &seed.turns {
                model.script(&turn.input, turn.output.as_deref().unwrap_or_default());
            }
        }
        let env = base_env(&host, layout).await?;
        let config = layout.codex_home.join("config.toml");
        host.write_file(&config, &super::codex::config(&responses.base_v1()))
            .await?;
        let codex = CodexHome {
            program: programs.codex.1.clone(),
            env: env
                .iter()
                .cloned()
                .chain([(
                    "CODEX_HOME".to_owned(),
                    layout.codex_home.display().to_string(),
                )])
                .collect(),
            cwd: layout.root.join("home"),
            host: host.clone(),
        };
        let claude = ClaudeHome {
            program: programs.claude.1.clone(),
            env: env
                .iter()
                .cloned()
                .chain([(
                    "CLAUDE_CONFIG_DIR".to_owned(),
                    layout.claude_config.display().to_string(),
                )])
                .chain(super::claude::model_env(&messages.base()))
                .collect(),
            cwd: layout.claude_cwd.clone(),
            config_dir: layout.claude_config.clone(),
            host: host.clone(),
        };
        let mut scenario = RealScenario {
            programs: programs.clone(),
            codex,
            claude,
            opencode: None,
            opencode_pids: None,
            live_codex: None,
            to_real: BTreeMap::new(),
            to_fixture: BTreeMap::new(),
            seeded: BTreeMap::new(),
            layout: layout.clone(),
            env: env.clone(),
            witness,
            _models: [responses, messages, chat],
        };
        if opencode {
            scenario.start_opencode(false).await?;
        }
        match seeded {
            Some(seeded) => {
                if seeded.len() != sessions.len() {
                    return Err(RealError::runtime(
                        "harness",
                        format!(
                            "{} sessions to seed, {} kept from an earlier seeding",
                            sessions.len(),
                            seeded.len()
                        ),
                    ));
                }
                for (seed, session) in sessions.iter().zip(seeded) {
                    scenario.record(seed, session.clone())?;
                }
            }
            None => scenario.seed_all(sessions).await?,
        }
        // On a second host the claude transcripts are copied to the implementation's side, where
        // the driver protocol says they are; every later run's proxy copies them again.
        if let Some(prefix) = host.exec_prefix() {
            let dir = layout.claude_config.clone();
            tokio::task::spawn_blocking(move || {
                rewind_mock_runtimes::proxy::fetch_transcripts(&prefix, &dir)
            })
            .await
            .map_err(|e| RealError::runtime("claude", format!("copying the transcripts: {e}")))?
            .map_err(super::io(
                "copying the claude transcripts from the runtime host",
            ))?;
        }
        Ok(scenario)
    }

    /// (Re)starts the OpenCode server, with file snapshots on or off, behind a new proxy: the
    /// proxy listens now, the server starts when first called ([`LazyServer`]), or now on a
    /// second host.
    pub async fn start_opencode(&mut self, snapshot: bool) -> Result<(), RealError> {
        let layout = self.layout.clone();
        self.stop_opencode().await;
        let model_url = self._models[2].base_v1();
        let host = self.programs.host.clone();
        let config = layout.opencode_cwd.join("opencode.json");
        host.write_file(&config, &super::opencode::config(&model_url, snapshot))
            .await?;
        let home = OpenCodeHome {
            program: self.programs.opencode.1.clone(),
            env: self
                .env
                .iter()
                .cloned()
                .chain(
                    super::opencode::QUIET_ENV
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
                )
                .collect(),
            cwd: layout.opencode_cwd.clone(),
        };
        let remote = host.is_remote();
        let server = LazyServer::new(host, home);
        if let Some(sink) = &self.opencode_pids {
            server.on_start(sink.clone()).await;
        }
        // On a second host a start goes through the container engine and takes seconds more:
        // one that waited for the first call would spend them inside the implementation's call
        // (a delivery's request limit is 30 s), so there the server starts now.
        if remote {
            server.endpoint().await?;
        }
        let proxy = JournalingProxy::start(
            Arc::clone(&server),
            &layout.xdg_data.join("opencode"),
            self.witness.clone(),
        )
        .await?;
        self.opencode = Some((server, proxy));
        Ok(())
    }

    /// Stops the OpenCode server, if one runs.
    pub async fn stop_opencode(&mut self) {
        if let Some((server, _proxy)) = self.opencode.take() {
            server.stop().await;
        }
    }

    /// The ids each of `sessions` was seeded with (in their order), as
    /// [`RealScenario::start_seeded`] takes them back.
    pub fn seeded_sessions(&self, sessions: &[SessionSeed]) -> Vec<super::SeededSession> {
        sessions
            .iter()
            .filter_map(|seed| self.seeded.get(&seed.agent).cloned())
            .collect()
    }

    /// Keeps one codex app-server running for the rest of the scenario: every `codex` program
    /// the implementation starts from now on attaches to it, so the threads it loads stay
    /// loaded (a live session) across calls.
    pub async fn start_live_codex(&mut self) -> Result<(), RealError> {
        if self.live_codex.is_none() {
            let live =
                super::live_codex::LiveCodex::start(&self.codex, &self.live_socket()).await?;
            self.live_codex = Some(live);
        }
        Ok(())
    }

    /// Whether a live codex app-server runs, and it is still alive.
    pub fn live_codex_running(&mut self) -> Option<bool> {
        self.live_codex.as_mut().map(|l| l.is_running())
    }

    /// Where the live app-server's relay listens (the proxies attach while it exists).
    fn live_socket(&self) -> PathBuf {
        self.layout.root.join("codex-live.sock")
    }

    /// The real OpenCode server's process id, while one runs (it starts when first called).
    pub async fn opencode_pid(&self) -> Option<u32> {
        match &self.opencode {
            Some((server, _)) => server.pid().await,
            None => None,
        }
    }

    /// Calls `sink` with the process id of every OpenCode server started for the scenario from
    /// now on, and of the one running now.
    pub async fn on_opencode_start(&mut self, sink: PidSink) {
        if let Some((server, _)) = &self.opencode {
            server.on_start(sink.clone()).await;
        }
        self.opencode_pids = Some(sink);
    }

    /// Seeds `sessions` through the real runtimes and records the ids they chose. The three
    /// runtimes at once, each one's sessions one after another: the runtimes wait on processes
    /// and on the fake models far more than they compute, but two processes of one runtime
    /// starting on one home at the same moment can race on its state (Codex 0.155 exits at
    /// `initialize` when another app-server is creating the same home).
    async fn seed_all(&mut self, sessions: &[SessionSeed]) -> Result<(), RealError> {
        let by_runtime = |runtime: &'static str| {
            let scenario = &*self;
            async move {
                let mut done = Vec::new();
                for seed in sessions.iter().filter(|s| s.runtime == runtime) {
                    let what = format!(
                        "seeding the {runtime} session of agent `{}` ({} turns)",
                        seed.agent,
                        seed.turns.len()
                    );
                    done.push((seed, bounded(SEED_LIMIT, &what, scenario.seed(seed)).await));
                }
                done
            }
        };
        let (codex, claude, opencode) = tokio::join!(
            by_runtime("codex"),
            by_runtime("claude"),
            by_runtime("opencode")
        );
        for (seed, result) in codex.into_iter().chain(claude).chain(opencode) {
            self.record(seed, result?)?;
        }
        Ok(())
    }

    async fn seed(&self, seed: &SessionSeed) -> Result<super::SeededSession, RealError> {
        Ok(match seed.runtime {
            "codex" => {
                let version = self.programs.codex.0.version.clone();
                super::codex::seed_thread(&self.codex, &version, &seed.turns).await?
            }
            "claude" => {
                super::claude::seed_session(&self.claude, &seed.session_id, &seed.turns).await?
            }
            _ => {
                let (server, _) = self.opencode.as_ref().ok_or_else(|| {
                    RealError::runtime("opencode", "no server was started for the sessions")
                })?;
                super::opencode::seed_session(&server.endpoint().await?, &seed.turns).await?
            }
        })
    }

    /// Records the ids a seeded session got.
    fn record(
        &mut self,
        seed: &SessionSeed,
        seeded: super::SeededSession,
    ) -> Result<(), RealError> {
        if seeded.ids.len() != seed.ids.len() {
            return Err(RealError::runtime(
                seed.runtime,
                format!(
                    "agent `{}`: the fixture names {} entries, the runtime made {}",
                    seed.agent,
                    seed.ids.len(),
                    seeded.ids.len()
                ),
            ));
        }
        self.seeded.insert(seed.agent.clone(), seeded.clone());
        let pairs = std::iter::once((seed.session_id.clone(), seeded.session_id))
            .chain(seed.ids.iter().cloned().zip(seeded.ids));
        for (fixture, real) in pairs {
            self.to_fixture.insert(real.clone(), fixture.clone());
            self.to_real.insert(fixture, real);
        }
        Ok(())
    }

    /// The real id of a fixture id (the same id when it is not a seeded one).
    pub fn real_id(&self, fixture_id: &str) -> String {
        self.to_real
            .get(fixture_id)
            .cloned()
            .unwrap_or_else(|| fixture_id.to_owned())
    }

    /// `text` with every real id replaced by the fixture's (ids the runtimes made during the
    /// scenario stay as they are).
    pub fn to_fixture_text(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (real, fixture) in &self.to_fixture {
            if real != fixture && out.contains(real.as_str()) {
                out = out.replace(real.as_str(), fixture);
            }
        }
        out
    }

    /// `value` with every string run through [`RealScenario::to_fixture_text`].
    pub fn to_fixture_value(&self, value: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match value {
            Value::String(s) => Value::String(self.to_fixture_text(s)),
            Value::Array(a) => Value::Array(a.iter().map(|v| self.to_fixture_value(v)).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| (k.clone(), self.to_fixture_value(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// `value` with every string that is a seeded fixture id replaced by the real id.
    pub fn to_real_value(&self, value: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match value {
            Value::String(s) => Value::String(self.real_id(s)),
            Value::Array(a) => Value::Array(a.iter().map(|v| self.to_real_value(v)).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| (k.clone(), self.to_real_value(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// The environment of `codex` programs handed to the implementation: the real app-server's,
    /// plus the proxy's target.
    pub fn codex_env(&self) -> Vec<(String, String)> {
        let mut env = self.codex.env.clone();
        env.extend(self.programs.host.proxy_env(&self.codex.env));
        env.push((
            rewind_mock_runtimes::proxy::ATTACH_ENV.to_owned(),
            self.live_socket().display().to_string(),
        ));
        env.push((
            PROXY_TARGET_ENV.to_owned(),
            self.programs.codex.1.display().to_string(),
        ));
        env
    }

    /// The environment of `claude` programs handed to the implementation.
    pub fn claude_env(&self) -> Vec<(String, String)> {
        let mut env = self.claude.env.clone();
        env.extend(self.programs.host.proxy_env(&self.claude.env));
        env.push((
            PROXY_TARGET_ENV.to_owned(),
            self.programs.claude.1.display().to_string(),
        ));
        env
    }

    /// The journaling proxy's URL in front of the OpenCode server, when one runs.
    pub fn opencode_url(&self) -> Option<String> {
        self.opencode.as_ref().map(|(_, p)| p.url().to_owned())
    }

    /// The turn ids of codex thread `thread` (a real id), read back through the real runtime.
    pub async fn codex_turns(&self, thread: &str) -> Result<Option<Vec<String>>, RealError> {
        let what = format!("reading codex thread {thread} back");
        bounded(
            READ_LIMIT,
            &what,
            super::codex::turn_ids(
                &self.codex,
                thread,
                self.live_codex.as_ref().map(|l| l.socket()),
            ),
        )
        .await
    }

    /// The messages of OpenCode session `session` (a real id) and its pending revert.
    pub async fn opencode_session(
        &self,
        session: &str,
    ) -> Result<Option<(Vec<String>, Option<String>)>, RealError> {
        match &self.opencode {
            Some((server, _)) => {
                let server = server.endpoint().await?;
                let what = format!("reading opencode session {session} back");
                bounded(READ_LIMIT, &what, super::opencode::view(&server, session)).await
            }
            None => Ok(None),
        }
    }

    /// Every request the model behind `runtime` (`codex`, `claude`, `opencode`) received so far:
    /// what the runtime sent it, in order.
    pub async fn model_inputs(&self, runtime: &str) -> Vec<Vec<super::fake_model::Turn>> {
        self._models[model_index(runtime)].inputs().await
    }

    /// Makes the model behind `runtime` answer every later request `ms` late; returns how many
    /// requests it had received so far.
    pub async fn slow_model(&self, runtime: &str, ms: u64) -> usize {
        let model = &self._models[model_index(runtime)];
        model.set_delay(std::time::Duration::from_millis(ms));
        model.received().await
    }

    /// How many requests the model behind `runtime` received so far.
    pub async fn model_requests(&self, runtime: &str) -> usize {
        self._models[model_index(runtime)].received().await
    }

    /// The releases this scenario runs.
    pub fn programs(&self) -> &RealPrograms {
        &self.programs
    }

    /// The live conversation and the live leaf of claude session `session` (a real id), read
    /// back where the CLI runs.
    pub async fn claude_session(
        &self,
        session: &str,
    ) -> Result<Option<super::claude::LiveState>, RealError> {
        let what = format!("reading claude session {session} back");
        bounded(READ_LIMIT, &what, self.claude.live_state(session)).await
    }

    /// The processes on the runtimes' host whose environment holds `variable` (`KEY=VALUE`).
    pub async fn processes_with(&self, variable: &str) -> Result<Vec<u32>, RealError> {
        self.programs.host.processes_with(variable).await
    }
}
