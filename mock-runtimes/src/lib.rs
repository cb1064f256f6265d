//! Mock agent runtimes for the rewind conformance harness: a Codex app-server
//! ([`codex`], JSON-RPC over stdio), a Claude Code CLI ([`claude`], a process per call with
//! stream-json) and an OpenCode server ([`opencode`], HTTP). Each speaks its real runtime's
//! protocol closely enough that a daemon written against the real runtime works unchanged.
//!
//! Every mock keeps its state under the directory the real runtime uses (`$CODEX_HOME`,
//! `$CLAUDE_CONFIG_DIR`, `$XDG_DATA_HOME/opencode`), appends every call it receives to a
//! [`journal`] there, and answers with the [`faults`] the harness planted for a thread or
//! session. Every turn is answered with [`reply_to`], and when [`witness::WITNESS_ENV`] is set
//! every delivering input is first announced to the harness's delivery [`witness`]. The harness
//! seeds state before a scenario and reads it back afterwards through the functions each module
//! exports.

pub mod claude;
pub mod codex;
pub mod faults;
pub mod journal;
pub mod opencode;
pub mod proxy;
pub mod witness;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The agent runtimes named by the spec, as they appear in fixtures and capability profiles.
pub const RUNTIME_IDS: [&str; 4] = ["codex", "claude", "opencode", "builtin"];

/// The marker that makes a mock give an empty reply: an input containing it gets no text back.
pub const NO_REPLY_MARKER: &str = "[no reply]";

/// The deterministic reply every mock gives to a turn whose full input text is `input`:
/// `Mock reply to: <input>` verbatim (never truncated), or an empty string when `input`
/// contains [`NO_REPLY_MARKER`]. No model is called. What an empty reply looks like is the
/// runtime's own: codex completes the turn without an `agentMessage` item, claude writes an
/// assistant entry with an empty text and a `result` of `""`, opencode an assistant message
/// without a `text` part.
pub fn reply_to(input: &str) -> String {
    if input.contains(NO_REPLY_MARKER) {
        String::new()
    } else {
        format!("Mock reply to: {input}")
    }
}

/// The directory, inside a runtime's home, where a mock keeps its journal, fault plan and any
/// state the real runtime would keep in a database.
pub fn mock_dir(runtime_home: &Path) -> PathBuf {
    runtime_home.join("mock")
}

/// The journal of the mock whose home is `runtime_home`.
pub fn journal_path(runtime_home: &Path) -> PathBuf {
    mock_dir(runtime_home).join("journal.jsonl")
}

/// The fault plan of the mock whose home is `runtime_home`.
pub fn faults_path(runtime_home: &Path) -> PathBuf {
    mock_dir(runtime_home).join("faults.json")
}

/// Environment variable: the process id of the mock's parent. A mock started with it leaves
/// (exit status 0) once that parent is gone, so a killed harness leaves no mock server behind.
pub const EXIT_WITH_PARENT_ENV: &str = "REWIND_MOCK_EXIT_WITH_PARENT";

/// With [`EXIT_WITH_PARENT_ENV`] set, watches (twice a second, on a thread of its own) that
/// this process's parent is still the process it names, and exits when it is not.
pub fn exit_with_parent() {
    let Some(parent) = std::env::var(EXIT_WITH_PARENT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
    else {
        return;
    };
    let watch = move || loop {
        if std::os::unix::process::parent_id() != parent {
            std::process::exit(0);
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    if let Err(e) = std::thread::Builder::new()
        .name("parent-watch".to_owned())
        .spawn(watch)
    {
        eprintln!("cannot watch the parent process: {e}");
    }
}

/// Runs the mock named by a program name (`codex`, `claude`, `opencode`, or a path or
/// `mock-` name ending in one of them), as a multi-call binary does with `argv[0]`. `args` are
/// the arguments after the program name. `None` when the name is not a mock's.
pub fn run_as(program: &str, args: Vec<String>) -> Option<ExitCode> {
    let name = Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(program);
    let name = name.strip_prefix("mock-").unwrap_or(name);
    if matches!(name, "codex" | "claude") {
        if let Some(code) = proxy::run_if_asked(name, &args) {
            return Some(code);
        }
    }
    match name {
        "codex" => Some(codex::main(args)),
        "claude" => Some(claude::main(args)),
        "opencode" => Some(opencode::main(args)),
        _ => None,
    }
}
