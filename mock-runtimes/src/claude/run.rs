//! One run of the mock CLI: validate the command line, load the session, answer the stdin
//! prompts, persist the transcript, journal the call (see the module docs of `claude`).

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::args::{self, Options};
use super::transcript::{
    append_lines, content_text, empty_usage, find_transcript, projects_dir, transcript_path,
    EntryContext, Transcript, DEFAULT_MODEL,
};
use crate::faults::{FaultKind, FaultPlan, FaultRule};
use crate::journal::{Journal, JournalEntry};
use crate::witness::{ask_blocking, witness_url, WitnessRequest};

const RUNTIME: &str = "claude";

/// How a run ends early: the process exit code after the error was reported.
struct Exit(u8);

/// Runs the CLI with `args` against the config dir `config_dir`.
pub fn run(config_dir: PathBuf, args: Vec<String>) -> ExitCode {
    let journal = Journal::new(crate::journal_path(&config_dir));
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let opts = match args::parse(&args) {
        Ok(o) => o,
        Err(message) => {
            journal.record(&JournalEntry::new(RUNTIME, "process/start").request(json!(args)));
            let mut entry = JournalEntry::new(RUNTIME, "claude")
                .request(json!({"argv": args, "cwd": cwd.to_string_lossy(), "stdin": []}));
            entry.outcome = "error".into();
            entry.detail = Some(message.clone());
            journal.record(&entry);
            eprintln!("{message}");
            return ExitCode::from(1);
        }
    };
    let mut run = Run::new(config_dir, cwd, args, opts, journal);
    let mut start = JournalEntry::new(RUNTIME, "process/start").request(json!(run.argv));
    if let Some(target) = &run.target {
        start = start.target(target.clone());
    }
    run.journal.record(&start);
    match run.execute() {
        Ok(()) => ExitCode::SUCCESS,
        Err(Exit(code)) => ExitCode::from(code),
    }
}

/// The journal's `call`, the call name fault rules match, and the `target` of a run started
/// with `args`, as this mock journals it (`claude` and no target when the arguments do not
/// parse): for a journaling proxy in front of
/// the real CLI.
pub(crate) fn call_of(args: &[String]) -> (&'static str, &'static str, Option<String>) {
    match args::parse(args) {
        Ok(opts) => {
            let mode = Mode::of(&opts);
            (mode.call(), mode.fault_call(), target_of(mode, &opts))
        }
        Err(_) => ("claude", "new", None),
    }
}

/// What the delivery witness is told about a run of the CLI started with `args` in `cwd`, read
/// from the transcripts as they are before the run: the session the prompt goes to, and the
/// state before it (`{"sessionId", "fresh", "leafUuid", "chain"}`, the shape this mock
/// announces). For a journaling proxy in front of the real CLI; `None` when the arguments do
/// not parse, or the session a resume names cannot be loaded (the CLI then fails by itself).
pub(crate) fn witness_before(
    config_dir: &Path,
    cwd: &Path,
    args: &[String],
) -> Option<(String, Value)> {
    let opts = args::parse(args).ok()?;
    let resumed = match &opts.resume {
        Some(value) => {
            let value = value.as_deref().filter(|v| !v.is_empty())?;
            let id = session_of_resume_value(value).to_owned();
            let path = if value.ends_with(".jsonl") {
                Some(PathBuf::from(value))
            } else {
                find_transcript(config_dir, cwd, value)
            };
            Some((id, path?))
        }
        None => None,
    };
    let Some((id, path)) = resumed else {
        // A new session: the id it is given (`--session-id`), else one the CLI picks.
        let id = opts.session_id.clone().unwrap_or_default();
        return Some((
            id.clone(),
            json!({"sessionId": id, "fresh": true, "leafUuid": null, "chain": []}),
        ));
    };
    let transcript = Transcript::load(&path).ok().flatten()?;
    let current = transcript
        .resume_leaf()
        .and_then(|leaf| transcript.chain_to(&leaf))
        .unwrap_or_default();
    let entries = match &opts.resume_session_at {
        Some(at) => {
            let i = current
                .iter()
                .position(|e| e.get("uuid").and_then(Value::as_str) == Some(at.as_str()))?;
            current[..=i].to_vec()
        }
        None => current,
    };
    let chain: Vec<&str> = entries
        .iter()
        .filter(|e| {
            matches!(
                e.get("type").and_then(Value::as_str),
                Some("user" | "assistant")
            )
        })
        .filter_map(|e| e.get("uuid").and_then(Value::as_str))
        .collect();
    let leaf = entries
        .last()
        .and_then(|e| e.get("uuid").and_then(Value::as_str));
    Some((
        id.clone(),
        json!({"sessionId": id, "fresh": leaf.is_none(), "leafUuid": leaf, "chain": chain}),
    ))
}

/// The session a run in `mode` addresses: the one it resumes, else the one it creates by id.
fn target_of(mode: Mode, opts: &Options) -> Option<String> {
    match mode {
        Mode::Version | Mode::Help => None,
        _ => opts
            .resume_id()
            .map(|r| session_of_resume_value(r).to_owned())
            .or_else(|| opts.session_id.clone()),
    }
}

/// What the run does to a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Version,
    Help,
    RewindFiles,
    ResumeAt,
    Fork,
    Resume,
    Continue,
    NewWithId,
    New,
}

impl Mode {
    fn of(o: &Options) -> Mode {
        if o.version {
            Mode::Version
        } else if o.help {
            Mode::Help
        } else if o.rewind_files.is_some() {
            Mode::RewindFiles
        } else if o.resume_session_at.is_some() {
            Mode::ResumeAt
        } else if o.fork_session && (o.resume.is_some() || o.continue_session) {
            Mode::Fork
        } else if o.resume.is_some() {
            Mode::Resume
        } else if o.continue_session {
            Mode::Continue
        } else if o.session_id.is_some() {
            Mode::NewWithId
        } else {
            Mode::New
        }
    }

    /// The journal's `call`.
    fn call(self) -> &'static str {
        match self {
            Mode::Version => "claude --version",
            Mode::Help => "claude --help",
            Mode::RewindFiles => "claude --rewind-files",
            Mode::ResumeAt => "claude --resume-session-at",
            Mode::Fork => "claude --fork-session",
            Mode::Resume => "claude --resume",
            Mode::Continue => "claude --continue",
            Mode::NewWithId => "claude --session-id",
            Mode::New => "claude --print",
        }
    }

    /// The call name fault rules match.
    fn fault_call(self) -> &'static str {
        match self {
            Mode::RewindFiles => "rewind-files",
            Mode::ResumeAt => "resume-at",
            Mode::Fork | Mode::Resume | Mode::Continue => "resume",
            _ => "new",
        }
    }
}

/// The session a run resumed.
struct Loaded {
    id: String,
    path: PathBuf,
    /// The live chain entries up to the resume point.
    entries: Vec<Value>,
}

struct Run {
    config_dir: PathBuf,
    cwd: PathBuf,
    argv: Vec<String>,
    opts: Options,
    journal: Journal,
    mode: Mode,
    target: Option<String>,
    /// The session id the process starts with (`--session-id`, else random), before a
    /// resume switches to the resumed one.
    process_session: String,
    stdin_log: Vec<Value>,
    started: Instant,
    /// Set by a `no_effect` fault or `--no-session-persistence`: nothing is written.
    no_writes: bool,
    fault: Option<FaultRule>,
    recorded: bool,
    /// The delivery witness URL ([`crate::witness::WITNESS_ENV`]), when set.
    witness_url: Option<String>,
    /// The numbers the witness answered, one per prompt, in order.
    witnesses: Vec<u64>,
}

impl Run {
    fn new(
        config_dir: PathBuf,
        cwd: PathBuf,
        argv: Vec<String>,
        opts: Options,
        journal: Journal,
    ) -> Run {
        let mode = Mode::of(&opts);
        let process_session = opts
            .session_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let target = target_of(mode, &opts);
        let no_writes = opts.no_persistence;
        Run {
            config_dir,
            cwd,
            argv,
            opts,
            journal,
            mode,
            target,
            process_session,
            stdin_log: Vec::new(),
            started: Instant::now(),
            no_writes,
            fault: None,
            recorded: false,
            witness_url: witness_url(),
            witnesses: Vec::new(),
        }
    }

    /// Journals the run's call (once).
    fn record(&mut self, outcome: &str, detail: Option<String>) {
        if self.recorded {
            return;
        }
        self.recorded = true;
        let mut entry = JournalEntry::new(RUNTIME, self.mode.call()).request(json!({
            "argv": self.argv,
            "cwd": self.cwd.to_string_lossy(),
            "stdin": self.stdin_log,
        }));
        if let Some(target) = &self.target {
            entry = entry.target(target.clone());
        }
        entry.outcome = outcome.to_owned();
        entry.detail = match (detail, self.witnesses.len()) {
            (Some(detail), n) if n > 1 => Some(format!(
                "{detail}; delivery witnesses {:?} (the first is journaled as `witness`)",
                self.witnesses
            )),
            (detail, _) => detail,
        };
        entry.witness = self.witnesses.first().copied();
        self.journal.record(&entry);
    }

    /// The outcome of a failure: the fault that caused it, else `error`.
    fn failure_outcome(&self) -> String {
        match self.fault.as_ref().map(|f| f.kind) {
            Some(kind @ (FaultKind::Error | FaultKind::UnknownSession | FaultKind::Busy)) => {
                kind.outcome()
            }
            _ => "error".to_owned(),
        }
    }

    /// An error the CLI reports on stderr before it starts (exit 1).
    fn fail_stderr(&mut self, message: &str) -> Exit {
        let outcome = self.failure_outcome();
        self.record(&outcome, Some(message.to_owned()));
        eprintln!("{message}");
        Exit(1)
    }

    /// A load error: on stderr, and with stream-json output also a `result` line naming the
    /// session addressed (exit 1), as Claude Code 2.1.197 answers.
    fn fail_load(&mut self, message: &str) -> Exit {
        let outcome = self.failure_outcome();
        self.record(&outcome, Some(message.to_owned()));
        eprintln!("{message}");
        if self.opts.output_format == "stream-json" {
            let session = self
                .opts
                .resume
                .clone()
                .flatten()
                .filter(|v| !v.is_empty())
                .map(|v| session_of_resume_value(&v).to_owned())
                .unwrap_or_else(|| self.process_session.clone());
            emit(&json!({
                "type": "result",
                "subtype": "error_during_execution",
                "duration_ms": 0,
                "duration_api_ms": 0,
                "is_error": true,
                "num_turns": 0,
                "stop_reason": null,
                "session_id": session,
                "total_cost_usd": 0,
                "usage": empty_usage(),
                "modelUsage": {},
                "permission_denials": [],
                "uuid": uuid::Uuid::new_v4().to_string(),
                "errors": [message],
            }));
        }
        Exit(1)
    }

    fn execute(&mut self) -> Result<(), Exit> {
        match self.mode {
            Mode::Version => {
                emit_text(&format!("{} (Claude Code)", super::transcript::version()));
                self.record("ok", None);
                return Ok(());
            }
            Mode::Help => {
                emit_text(args::help().trim_end());
                self.record("ok", None);
                return Ok(());
            }
            _ => {}
        }
        self.validate_command_line()?;
        self.apply_early_fault()?;
        let loaded = self.load()?;
        if self.mode == Mode::RewindFiles {
            return self.rewind_files(loaded.as_ref());
        }
        let prompt = self.text_input(loaded.is_some())?;
        if self.opts.output_format == "stream-json" && !self.opts.verbose {
            return Err(self.fail_stderr(
                "Error: When using --print, --output-format=stream-json requires --verbose",
            ));
        }
        self.converse(loaded, prompt)
    }

    /// The checks the CLI makes on its options before it starts.
    fn validate_command_line(&mut self) -> Result<(), Exit> {
        let o = self.opts.clone();
        if let Some(id) = &o.session_id {
            if (o.continue_session || o.resume.is_some()) && !o.fork_session {
                return Err(self.fail_stderr("Error: --session-id can only be used with --continue or --resume if --fork-session is also specified."));
            }
            if uuid::Uuid::parse_str(id).is_err() {
                return Err(self.fail_stderr("Error: Invalid session ID. Must be a valid UUID."));
            }
            let same_as_source = o.fork_session && o.resume_id() == Some(id.as_str());
            if !same_as_source && transcript_path(&self.config_dir, &self.cwd, id).exists() {
                return Err(self.fail_stderr(&format!("Error: Session ID {id} is already in use.")));
            }
        }
        if o.input_format == "stream-json" && o.output_format != "stream-json" {
            return Err(self.fail_stderr(
                "Error: --input-format=stream-json requires output-format=stream-json.",
            ));
        }
        let bypass =
            o.skip_permissions || o.permission_mode.as_deref() == Some("bypassPermissions");
        // SAFETY: geteuid has no preconditions and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        if bypass && root && std::env::var("IS_SANDBOX").ok().as_deref() != Some("1") {
            return Err(self.fail_stderr("--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"));
        }
        let resuming = o.resume.is_some() || o.continue_session;
        if o.resume_session_at.is_some() && !resuming {
            return Err(self.fail_stderr("Error: --resume-session-at requires --resume"));
        }
        if o.rewind_files.is_some() && !resuming {
            return Err(self.fail_stderr("Error: --rewind-files requires --resume"));
        }
        if o.rewind_files.is_some() && o.prompt.is_some() {
            return Err(self.fail_stderr(
                "Error: --rewind-files is a standalone operation and cannot be used with a prompt",
            ));
        }
        Ok(())
    }

    /// Reads the fault plan and answers the faults that strike before the session loads.
    fn apply_early_fault(&mut self) -> Result<(), Exit> {
        let plan = match FaultPlan::load(&crate::faults_path(&self.config_dir)) {
            Ok(p) => p,
            Err(message) => {
                return Err(self.fail_stderr(&format!("mock claude: {message}")));
            }
        };
        let Some(target) = self.target.clone() else {
            return Ok(());
        };
        let Some(rule) = plan.find(&target, self.mode.fault_call()).cloned() else {
            return Ok(());
        };
        let kind = rule.kind;
        self.fault = Some(rule.clone());
        let new = self.mode.fault_call() == "new";
        match kind {
            FaultKind::Error => {
                let message = if new {
                    "API Error: 500 {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal server error (mock fault)\"}}".to_owned()
                } else {
                    "Failed to resume session: mock fault: injected error".to_owned()
                };
                Err(self.fail_load(&message))
            }
            FaultKind::UnknownSession => {
                Err(self.fail_load(&format!("No conversation found with session ID: {target}")))
            }
            FaultKind::Busy => {
                let message = if new {
                    format!("Error: Session ID {target} is already in use.")
                } else {
                    format!("Error: Session {target} is currently running as a background agent (bg). Use `claude agents` to find and attach to it, or add --fork-session to branch off a copy.")
                };
                Err(self.fail_stderr(&message))
            }
            FaultKind::Hang => {
                match rule.hang_ms {
                    Some(ms) => std::thread::sleep(Duration::from_millis(ms)),
                    None => {
                        // Journaled now, so the harness sees the call while it is held; once the
                        // fault is lifted the run goes ahead as if none had been planted, and
                        // journals its own outcome too.
                        self.record(
                            &kind.outcome(),
                            Some("held until the fault is lifted".into()),
                        );
                        let plan = crate::faults_path(&self.config_dir);
                        FaultPlan::wait_while_held(&plan, &target, self.mode.fault_call());
                        self.recorded = false;
                        self.fault = None;
                    }
                }
                Ok(())
            }
            FaultKind::NoEffect => {
                self.no_writes = true;
                Ok(())
            }
            FaultKind::Crash => Ok(()),
        }
    }

    /// Loads the resumed session (`--resume`, `--continue`), cut at `--resume-session-at`.
    fn load(&mut self) -> Result<Option<Loaded>, Exit> {
        let o = self.opts.clone();
        let (id, path) = match &o.resume {
            Some(value) => {
                let Some(value) = value.as_deref().filter(|v| !v.is_empty()) else {
                    return Err(self.fail_load("Error: --resume requires a valid session ID or session title when used with --print. Usage: claude -p --resume <session-id>"));
                };
                let id = session_of_resume_value(value).to_owned();
                let path = if value.ends_with(".jsonl") {
                    let p = PathBuf::from(value);
                    p.is_file().then_some(p)
                } else if uuid::Uuid::parse_str(value).is_err() {
                    return Err(self.fail_load(&format!(
                        "Error: --resume requires a valid session ID or session title when used with --print. Usage: claude -p --resume <session-id>. Session IDs must be in UUID format (e.g., 550e8400-e29b-41d4-a716-446655440000). Provided value \"{value}\" is not a valid UUID"
                    )));
                } else {
                    find_transcript(&self.config_dir, &self.cwd, value)
                };
                (id, path)
            }
            None if o.continue_session => match self.most_recent_session() {
                Some((id, path)) => (id, Some(path)),
                None => return Ok(None),
            },
            None => return Ok(None),
        };
        if o.continue_session && o.resume.is_none() {
            self.target = Some(id.clone());
        }
        let transcript = match &path {
            Some(p) => Transcript::load(p).ok().flatten(),
            None => None,
        };
        let (Some(path), Some(transcript)) = (path, transcript) else {
            return Err(self.fail_load(&format!("No conversation found with session ID: {id}")));
        };
        if !transcript.has_conversation() {
            return Err(self.fail_load(&format!("No conversation found with session ID: {id}")));
        }
        // The current branch: the chain to the leaf the real CLI picks for a plain resume
        // (`Transcript::resume_leaf`). `--resume-session-at` continues from an entry of it; an
        // entry of another branch is not found, as an unknown uuid is not (Claude Code 2.1.197).
        let current = transcript
            .resume_leaf()
            .and_then(|leaf| transcript.chain_to(&leaf))
            .unwrap_or_default();
        let entries = match &o.resume_session_at {
            Some(at) => match current
                .iter()
                .position(|e| e.get("uuid").and_then(Value::as_str) == Some(at.as_str()))
            {
                Some(i) => current[..=i].to_vec(),
                None => {
                    return Err(
                        self.fail_load(&format!("No message found with message.uuid of: {at}"))
                    )
                }
            },
            None => current,
        };
        Ok(Some(Loaded { id, path, entries }))
    }

    /// The newest transcript with a conversation in the project of the working directory.
    fn most_recent_session(&self) -> Option<(String, PathBuf)> {
        let dir = transcript_path(&self.config_dir, &self.cwd, "x")
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| projects_dir(&self.config_dir));
        let mut best: Option<(std::time::SystemTime, String, PathBuf)> = None;
        for entry in std::fs::read_dir(dir).ok()?.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
                continue;
            }
            let Some(id) = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else {
                continue;
            };
            let has = Transcript::load(&path)
                .ok()
                .flatten()
                .is_some_and(|t| t.has_conversation());
            let modified = entry.metadata().and_then(|m| m.modified()).ok();
            if let (true, Some(modified)) = (has, modified) {
                if best.as_ref().is_none_or(|(m, _, _)| modified > *m) {
                    best = Some((modified, id, path));
                }
            }
        }
        best.map(|(_, id, path)| (id, path))
    }

    /// `--rewind-files`: validated, nothing restored (the mock keeps no file history).
    fn rewind_files(&mut self, loaded: Option<&Loaded>) -> Result<(), Exit> {
        let target = self.opts.rewind_files.clone().unwrap_or_default();
        let is_user_message = loaded.is_some_and(|l| {
            l.entries.iter().any(|e| {
                e.get("uuid").and_then(Value::as_str) == Some(target.as_str())
                    && e.get("type").and_then(Value::as_str) == Some("user")
            })
        });
        if !is_user_message {
            return Err(self.fail_stderr(&format!("Error: --rewind-files requires a user message UUID, but {target} is not a user message in this session")));
        }
        if self.fault.as_ref().map(|f| f.kind) == Some(FaultKind::Crash) {
            self.crash();
        }
        let session = loaded.map(|l| l.id.clone()).unwrap_or_default();
        if self.opts.output_format == "stream-json" {
            emit(&self.result(&session, 0, &format!("Files rewound to {target}"), false));
        }
        let outcome = self.success_outcome();
        self.record(
            &outcome,
            Some(format!("files rewound to {target} (nothing to restore)")),
        );
        Ok(())
    }

    fn success_outcome(&self) -> String {
        match &self.fault {
            Some(rule) => rule.kind.outcome(),
            None => "ok".to_owned(),
        }
    }

    /// With text input: the prompt (the argument, else all of stdin).
    fn text_input(&mut self, resuming: bool) -> Result<Option<String>, Exit> {
        if self.opts.input_format == "stream-json" {
            // A positional prompt is ignored with stream-json input.
            return Ok(None);
        }
        let prompt = match &self.opts.prompt {
            Some(p) => Some(p.clone()),
            None => {
                let mut text = String::new();
                let _ = std::io::stdin().read_to_string(&mut text);
                Some(text.trim_end_matches('\n').to_owned()).filter(|t| !t.trim().is_empty())
            }
        };
        if prompt.is_none() && !resuming {
            return Err(self.fail_stderr("Error: Input must be provided either through stdin or as a prompt argument when using --print"));
        }
        Ok(prompt)
    }

    fn model(&self) -> String {
        self.opts
            .model
            .clone()
            .unwrap_or_else(|| DEFAULT_MODEL.to_owned())
    }

    fn permission_mode(&self) -> String {
        match &self.opts.permission_mode {
            Some(m) => m.clone(),
            None if self.opts.skip_permissions => "bypassPermissions".to_owned(),
            None => "default".to_owned(),
        }
    }

    fn result(&self, session: &str, turns: u32, text: &str, had_turn: bool) -> Value {
        json!({
            "type": "result",
            "subtype": "success",
            "is_error": false,
            "duration_ms": self.started.elapsed().as_millis() as u64,
            "duration_api_ms": 0,
            "num_turns": turns,
            "result": text,
            "stop_reason": if had_turn { json!("end_turn") } else { Value::Null },
            "session_id": session,
            "total_cost_usd": 0,
            "usage": empty_usage(),
            "modelUsage": {},
            "permission_denials": [],
            "uuid": uuid::Uuid::new_v4().to_string(),
        })
    }

    /// The crash fault: the process dies mid-run, with no result line.
    fn crash(&mut self) -> ! {
        let outcome = FaultKind::Crash.outcome();
        self.record(&outcome, Some("process aborted mid-run".into()));
        let _ = std::io::stdout().flush();
        eprintln!("mock claude: injected crash (abort)");
        std::process::exit(134);
    }

    /// Prints `system/init`, answers every prompt, persists the transcript.
    fn converse(
        &mut self,
        loaded: Option<Loaded>,
        text_prompt: Option<String>,
    ) -> Result<(), Exit> {
        let fork = self.opts.fork_session && loaded.is_some();
        let (session, path) = match &loaded {
            Some(l) if !fork => (l.id.clone(), l.path.clone()),
            _ => (
                self.process_session.clone(),
                transcript_path(&self.config_dir, &self.cwd, &self.process_session),
            ),
        };
        let ctx = EntryContext {
            session_id: session.clone(),
            cwd: self.cwd.to_string_lossy().into_owned(),
            model: self.model(),
        };
        let stream = self.opts.output_format == "stream-json";
        // The real CLI announces itself with the first prompt: a stream-json run whose stdin
        // ends without one prints nothing at all.
        let init = stream.then(|| {
            json!({
                "type": "system",
                "subtype": "init",
                "cwd": ctx.cwd,
                "session_id": session,
                "tools": [],
                "mcp_servers": [],
                "model": ctx.model,
                "permissionMode": self.permission_mode(),
                "slash_commands": [],
                "apiKeySource": "none",
                "claude_code_version": super::transcript::version(),
                "output_style": "default",
                "agents": [],
                "skills": [],
                "plugins": [],
                "uuid": uuid::Uuid::new_v4().to_string(),
            })
        });
        let lazy_init =
            init.is_some() && text_prompt.is_none() && self.opts.input_format == "stream-json";
        if self.fault.as_ref().map(|f| f.kind) == Some(FaultKind::Crash) {
            if let Some(init) = &init {
                emit(init);
            }
            self.crash();
        }
        let mut init = if lazy_init {
            init
        } else {
            if let Some(init) = &init {
                emit(init);
            }
            None
        };
        let mut conversation = Conversation {
            ctx,
            path,
            witness_target: loaded
                .as_ref()
                .map(|l| l.id.clone())
                .unwrap_or_else(|| session.clone()),
            chain: loaded
                .as_ref()
                .map(|l| {
                    l.entries
                        .iter()
                        .filter(|e| {
                            matches!(
                                e.get("type").and_then(Value::as_str),
                                Some("user") | Some("assistant")
                            )
                        })
                        .filter_map(|e| e.get("uuid").and_then(Value::as_str))
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            leaf: loaded
                .as_ref()
                .and_then(|l| l.entries.last())
                .and_then(|e| e.get("uuid").and_then(Value::as_str))
                .map(str::to_owned),
            pending_fork: if fork {
                loaded.as_ref().map(|l| l.entries.clone())
            } else {
                None
            },
            has_snapshot: loaded.as_ref().is_some_and(|l| {
                l.entries.iter().any(|e| {
                    e.pointer("/attachment/type").and_then(Value::as_str) == Some("prompt_snapshot")
                })
            }),
            turns: 0,
        };
        if let Some(prompt) = text_prompt {
            self.stdin_log.push(json!(prompt));
            self.turn(&mut conversation, json!(prompt), None)?;
        } else if self.opts.input_format == "stream-json" {
            let stdin = std::io::stdin();
            let mut lines = stdin.lock();
            loop {
                let mut raw = Vec::new();
                match lines.read_until(b'\n', &mut raw) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) => {
                        return Err(self.fail_stderr(&format!("Error reading stdin: {e}")));
                    }
                }
                let line = String::from_utf8_lossy(&raw).trim().to_owned();
                if line.is_empty() {
                    continue;
                }
                if let Some((content, uuid)) = self.stdin_message(&line)? {
                    if let Some(init) = init.take() {
                        emit(&init);
                    }
                    self.turn(&mut conversation, content, uuid)?;
                }
            }
        }
        if conversation.turns == 0 && !lazy_init {
            // A prompt-less run that is not stream-json in and out answers an empty result.
            let result = self.result(&session, 0, "", false);
            self.finish_output(&result, "");
        }
        let outcome = self.success_outcome();
        let detail = format!(
            "session {session}: {} turn(s){}",
            conversation.turns,
            if self.no_writes {
                ", nothing written"
            } else {
                ""
            }
        );
        self.record(&outcome, Some(detail));
        Ok(())
    }

    /// Prints the final answer of a non-streaming run (stream-json prints as it goes).
    fn finish_output(&self, result: &Value, text: &str) {
        match self.opts.output_format.as_str() {
            "stream-json" => emit(result),
            "json" => emit(result),
            _ => emit_text(text),
        }
    }

    /// Parses one stdin line: `Some((content, uuid))` for a user message.
    fn stdin_message(&mut self, line: &str) -> Result<Option<(Value, Option<String>)>, Exit> {
        let message: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(_) if super::transcript::at_least("2.1.332") => {
                // 2.1.332 no longer quotes the line.
                return Err(self.fail_stderr(&format!(
                    "Error parsing streaming input line (type=unknown, {} chars): SyntaxError",
                    line.chars().count()
                )));
            }
            Err(_) => {
                return Err(self.fail_stderr(&format!(
                    "Error parsing streaming input line: {line}: SyntaxError: JSON Parse error: {}",
                    js_parse_error(line)
                )));
            }
        };
        let kind = message.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "keep_alive" | "control_response" | "update_environment_variables" => Ok(None),
            "control_request" => {
                self.stdin_log.push(message.clone());
                let Some(request) = message.get("request") else {
                    return Err(self.fail_stderr("Error: Missing request on control_request"));
                };
                let id = message.get("request_id").cloned().unwrap_or(Value::Null);
                let subtype = request.get("subtype").and_then(Value::as_str).unwrap_or("");
                let response = match subtype {
                    "initialize" => json!({
                        "subtype": "success",
                        "request_id": id,
                        "response": {
                            "commands": [],
                            "output_style": "default",
                            "available_output_styles": ["default"],
                            "models": [],
                            "account": {},
                        },
                    }),
                    "interrupt"
                    | "set_permission_mode"
                    | "set_model"
                    | "set_max_thinking_tokens"
                    | "mcp_status" => {
                        json!({"subtype": "success", "request_id": id, "response": {}})
                    }
                    other => json!({
                        "subtype": "error",
                        "request_id": id,
                        "error": format!("Unsupported control request subtype: {other}"),
                    }),
                };
                emit(&json!({"type": "control_response", "response": response}));
                Ok(None)
            }
            "assistant" | "system" => {
                self.stdin_log.push(message);
                Ok(None)
            }
            "user" => {
                self.stdin_log.push(message.clone());
                let Some(inner) = message.get("message").filter(|m| m.is_object()) else {
                    return Err(self.fail_stderr(&format!(
                        "Error parsing streaming input line: {line}: TypeError: Cannot read properties of undefined (reading 'role')"
                    )));
                };
                let role = inner
                    .get("role")
                    .and_then(Value::as_str)
                    .unwrap_or("undefined");
                if role != "user" {
                    return Err(self.fail_stderr(&format!(
                        "Error: Expected message role 'user', got '{role}'"
                    )));
                }
                let content = inner.get("content").cloned().unwrap_or(json!(""));
                let uuid = message
                    .get("uuid")
                    .and_then(Value::as_str)
                    .filter(|u| !u.is_empty())
                    .map(str::to_owned);
                Ok(Some((content, uuid)))
            }
            other => Err(self.fail_stderr(&format!(
                "Error: Expected message type 'user' or 'control', got '{other}'"
            ))),
        }
    }

    /// One prompt: persist the user entry, answer, persist the reply and the leaf marker.
    fn turn(
        &mut self,
        c: &mut Conversation,
        content: Value,
        uuid: Option<String>,
    ) -> Result<(), Exit> {
        let prompt = content_text(&content);
        self.witness(c, &prompt)?;
        let mut before = Vec::new();
        if let Some(inherited) = c.pending_fork.take() {
            before.push(c.ctx.mode_record());
            for mut entry in inherited {
                entry["sessionId"] = json!(c.ctx.session_id);
                before.push(entry);
            }
        }
        let user = uuid.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        before.push(c.ctx.queue_operation("enqueue", Some(&prompt)));
        before.push(c.ctx.queue_operation("dequeue", None));
        before.push(c.ctx.user_entry(&user, c.leaf.as_deref(), content.clone()));
        // As the real CLI: the session's first turn carries its context attachments after the
        // user entry, on the chain between it and the answer; later turns carry none.
        let mut parent = user.clone();
        if c.chain.is_empty() {
            for kind in ["agent_listing_delta", "skill_listing"] {
                let attachment = uuid::Uuid::new_v4().to_string();
                before.push(c.ctx.attachment_entry(&attachment, Some(&parent), kind));
                parent = attachment;
            }
        }
        self.persist(&c.path, &before)?;
        if self.opts.replay_user_messages && self.opts.output_format == "stream-json" {
            emit(&json!({
                "type": "user",
                "message": {"role": "user", "content": content},
                "parent_tool_use_id": null,
                "session_id": c.ctx.session_id,
                "uuid": user,
                "isReplay": true,
            }));
        }
        let reply = crate::reply_to(&prompt);
        let assistant = uuid::Uuid::new_v4().to_string();
        let entry = c.ctx.assistant_entry(&assistant, Some(&parent), &reply);
        let mut after = vec![entry.clone()];
        // Claude Code 2.1.332 records the prompt in use after the answer when the chain holds no
        // snapshot yet (a new session, a branch off an earlier entry): a chain entry, and the
        // leaf the next prompt continues from.
        let mut leaf = assistant.clone();
        if super::transcript::writes_prompt_snapshots() && !c.has_snapshot {
            let snapshot = uuid::Uuid::new_v4().to_string();
            after.push(c.ctx.prompt_snapshot_entry(&snapshot, &assistant));
            c.has_snapshot = true;
            leaf = snapshot;
        }
        after.push(c.ctx.last_prompt(&prompt, &leaf));
        if c.chain.len() == 2 {
            // The real CLI records the permission mode once, after the session's second turn.
            after.push(c.ctx.mode_record());
        }
        self.persist(&c.path, &after)?;
        c.leaf = Some(leaf);
        c.chain.push(user.clone());
        c.chain.push(assistant.clone());
        // Later prompts of the run go to the session this one wrote to (a fork's new one).
        c.witness_target = c.ctx.session_id.clone();
        c.turns += 1;
        let result = self.result(&c.ctx.session_id, c.turns, &reply, true);
        if self.opts.output_format == "stream-json" {
            // The stream line's message has no stop reason yet (it is streamed).
            let mut streamed = entry["message"].clone();
            streamed["stop_reason"] = Value::Null;
            emit(&json!({
                "type": "assistant",
                "message": streamed,
                "parent_tool_use_id": null,
                "session_id": c.ctx.session_id,
                "uuid": assistant,
            }));
            emit(&result);
        } else if self.opts.input_format != "stream-json" {
            self.finish_output(&result, &reply);
        }
        Ok(())
    }

    /// Announces a prompt to the delivery witness, when one is configured and no fault rule
    /// matched the run; a failed witness call fails the run before anything is written.
    fn witness(&mut self, c: &Conversation, prompt: &str) -> Result<(), Exit> {
        let Some(url) = self.witness_url.clone() else {
            return Ok(());
        };
        if self.fault.is_some() {
            return Ok(());
        }
        let request = WitnessRequest {
            runtime: RUNTIME.to_owned(),
            target: c.witness_target.clone(),
            input: prompt.to_owned(),
            before: json!({
                "sessionId": c.witness_target,
                "fresh": c.leaf.is_none(),
                "leafUuid": c.leaf,
                "chain": c.chain,
            }),
        };
        match ask_blocking(&url, &request) {
            Ok(answer) => {
                self.witnesses.push(answer.witness);
                Ok(())
            }
            Err(e) => Err(self.fail_stderr(&e.to_string())),
        }
    }

    fn persist(&mut self, path: &Path, lines: &[Value]) -> Result<(), Exit> {
        if self.no_writes {
            return Ok(());
        }
        append_lines(path, lines).map_err(|e| {
            self.fail_stderr(&format!(
                "Error: cannot write transcript {}: {e}",
                path.display()
            ))
        })
    }
}

/// The conversation a run is extending.
struct Conversation {
    ctx: EntryContext,
    path: PathBuf,
    /// The entry the next prompt chains from.
    leaf: Option<String>,
    /// The user and assistant uuids of the live chain from the root to `leaf`.
    chain: Vec<String>,
    /// The session the delivery witness is told the next prompt goes to (for a fork's first
    /// prompt: the source session).
    witness_target: String,
    /// A fork's inherited chain, written with its first turn.
    pending_fork: Option<Vec<Value>>,
    /// Whether the chain to `leaf` holds a `prompt_snapshot` attachment.
    has_snapshot: bool,
    turns: u32,
}

/// The session id a `--resume` value names (a transcript path names its file's).
fn session_of_resume_value(value: &str) -> &str {
    if value.ends_with(".jsonl") {
        Path::new(value)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or(value)
    } else {
        value
    }
}

/// Writes one JSON line to stdout, flushed (a closed stdout is ignored).
/// The JavaScript engine's account of why `line` is not JSON (the real CLI runs on Bun, whose
/// `JSON.parse` says `Unexpected identifier "not"` for a bare word, `Unexpected token` otherwise).
fn js_parse_error(line: &str) -> String {
    let word: String = line
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
        .collect();
    match word.chars().next() {
        Some(c) if c.is_alphabetic() || c == '_' || c == '$' => {
            format!("Unexpected identifier \"{word}\"")
        }
        _ => "Unexpected token".to_owned(),
    }
}

fn emit(value: &Value) {
    emit_text(&value.to_string());
}

fn emit_text(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}
