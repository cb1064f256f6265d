//! A mock of the Claude Code CLI (`claude`), one process per call, speaking stream-json and
//! keeping its transcripts where the real CLI does, so that a driver written against the
//! real CLI (the Agent SDK's way of starting it, or a daemon's) works unchanged.
//!
//! # What it imitates
//! - The command line: `-p/--print`, `--output-format text|json|stream-json`, `--input-format
//!   text|stream-json`, `--verbose`, `--session-id`, `-r/--resume`, `-c/--continue`,
//!   `--resume-session-at`, `--fork-session`, `--rewind-files`, `--model`, `--permission-mode`,
//!   `--dangerously-skip-permissions`, `--replay-user-messages`, `--no-session-persistence`,
//!   and the other options a driver passes (tools, MCP, system prompt, settings, ...), accepted
//!   and ignored; in both `--flag value` and `--flag=value` forms (see `args`). An unknown
//!   option is commander's `error: unknown option '--x'` on stderr, exit 1.
//! - The real validations and their wording: `Error: --resume-session-at requires --resume`,
//!   `Error: --rewind-files requires --resume`, `Error: Session ID <id> is already in use.`
//!   (a transcript of that id exists in the project), `Error: Invalid session ID. Must be a
//!   valid UUID.`, `Error: --session-id can only be used with --continue or --resume if
//!   --fork-session is also specified.`, `Error: --input-format=stream-json requires
//!   output-format=stream-json.`, `Error: When using --print, --output-format=stream-json
//!   requires --verbose`, the root check on permission bypass (needs `IS_SANDBOX=1`), all on
//!   stderr with exit 1. Load errors are, with stream-json output, a `result` line
//!   (`subtype: "error_during_execution"`, `is_error: true`, `errors: [message]`, the session
//!   id of the fresh process) and otherwise the message on stderr, exit 1, with no
//!   `system/init` before them: `No conversation found with session ID: <id>` (no transcript,
//!   or one without a conversation) and `No message found with message.uuid of: <uuid>` (no
//!   entry of the current branch, the one a plain resume follows, has that uuid; an entry of
//!   another branch is not found either, as on the real CLI).
//!   A stdin line that is not JSON: `Error parsing streaming input line: <line>: <error>` on
//!   stderr, exit 1.
//! - stdout with stream-json: `system/init` (`session_id`, `cwd`, `model`, `permissionMode`,
//!   `claude_code_version`, ...), printed with the first prompt (a stream-json run whose stdin
//!   ends without a user message prints nothing at all and exits 0, as the real CLI does),
//!   then per stdin user message an `assistant` message (the reply
//!   is [`crate::reply_to`] of the message's text, no model is called; an empty reply is an
//!   assistant message with an empty text block and a `result` of `""`) and a `result` line
//!   (`subtype: "success"`, `is_error`, `session_id`, `num_turns`, `result`, `usage`, ...);
//!   `control_request`s get a `control_response`; `keep_alive` and `control_response` lines
//!   are ignored.
//! - A RESTORE WITHOUT A PROMPT DOES NOTHING, as on the real CLI 2.1.197: `--resume=<id>
//!   --resume-session-at=<uuid>` with no user message on stdin validates the session and the
//!   uuid (the load errors below), then exits 0 with no output and writes nothing, so a later
//!   plain `--resume` continues from the old leaf. The boundary takes effect only together
//!   with a prompt: that run's user entry gets `parentUuid = <uuid>`.
//! - WHERE A PLAIN `--resume` CONTINUES, as on the real CLI 2.1.197 answered by a model API
//!   that gives every answer an id of its own: from the newest chain entry in the file that has
//!   no child. So after a `--resume-session-at` branch a plain resume follows the newer
//!   branch. (An API that repeats one message id makes the real CLI go back to the first branch;
//!   no real API does that.) A client that names its leaf with `--resume-session-at` on every
//!   run does not depend on it either way.
//! - Transcripts in `$CLAUDE_CONFIG_DIR` (default `$HOME/.claude`) `/projects/<slug>/<id>.jsonl`
//!   (see [`project_slug`]), laid out as the real CLI writes them: per prompt the
//!   `queue-operation` records, the `user` entry (a `uuid` given on the stdin message is kept)
//!   whose parent is the live leaf, on a session's first turn two `attachment` chain entries
//!   after it (`agent_listing_delta`, `skill_listing`), the `assistant` entry, then
//!   `last-prompt {lastPrompt, leafUuid}`; a `mode` record follows the second turn. A resumed
//!   session is found in the project of the working directory first, then in any other
//!   project, and written back to the file it was found in. Without `--fork-session` the new
//!   turn is appended to the same file with its chain starting at the resume point (the
//!   `--resume-session-at` entry, else the leaf a plain resume picks, above), so the rewound
//!   turns stay on disk on another branch. With
//!   `--fork-session` the run gets a new session id (`--session-id`, else a random one),
//!   announced in `system/init`, and on its first turn a new file with a `mode` record and the
//!   live chain up to the resume point copied (same uuids, new `sessionId`); the source file
//!   is untouched.
//! - The journal ([`crate::journal_path`] of the config dir): `process/start` (request: argv),
//!   then one entry for the run, `call` naming its mode (`claude --rewind-files`,
//!   `claude --resume-session-at`, `claude --fork-session`, `claude --resume`,
//!   `claude --continue`, `claude --session-id`, `claude --print`; `claude --version`, and
//!   `claude` for a command line that does not parse), `target` the session addressed (the
//!   resumed one, else the new one), request `{argv, cwd, stdin}` with every stdin message.
//!
//! # Delivery witness
//! With [`crate::witness::WITNESS_ENV`] set in the process environment, every prompt of a run
//! (a stream-json user message or the text prompt; any mode: new session, `--resume`,
//! `--resume-session-at`, `--fork-session`) is announced to the witness after the command line,
//! the fault plan, the session load and the stdin line were checked, and before anything is
//! written: `target` the session addressed (for a fork's first prompt the source session; later
//! prompts of a run go to the session the run writes), `input` the message text, `before`
//! `{"sessionId", "fresh": true when the session has no conversation yet, "leafUuid": the chain
//! entry the new turn attaches to (the user entry's parent: the `--resume-session-at` uuid
//! when given, else the leaf a plain resume picks; null when fresh), "chain":
//! [user/assistant uuids of the live chain from the root to that leaf]}`. The first answer's
//! number is journaled as the run's `witness` (more prompts in one run: all numbers in the
//! detail). A failed witness call: `delivery witness failed: ...` on stderr, exit 1, the call
//! journaled as `error`, that prompt not written. A run a fault rule matched never reaches the
//! witness.
//!
//! # Inferred, not observed
//! - A prompt-less run that is not stream-json in and out prints a success `result` with
//!   `num_turns: 0` (with the text input and no prompt at all, `-p` fails as the CLI does).
//! - Every run is a print-mode run (the mock has no interactive mode): a command line without
//!   `-p` behaves as with it.
//! - `--rewind-files <uuid>` validates like the CLI (requires `--resume`, no prompt, the uuid
//!   must be a user message of the live chain), restores nothing (the mock keeps no file
//!   history), prints a success `result` (stream-json) and exits 0. It is journaled, so the
//!   harness can prove a client never passed it.
//! - The wording of `--resume` without a usable id, and of the busy refusal, follows public
//!   reports of the real CLI rather than an observed run.
//!
//! # Left out
//! Tools, permissions prompts, MCP, hooks, streaming partial messages, compaction, sidechains,
//! file-history snapshots, `--continue` across projects, long-path slug hashing, any model
//! call, and interactive mode.
//!
//! # Faults
//! Read from [`crate::faults_path`] of the config dir on every run, matched by the session
//! addressed (as `target`) and the call `resume-at` (a run with `--resume-session-at`),
//! `rewind-files`, `resume` (`--resume`/`--continue`, forks included) or `new` (a new session:
//! `--session-id`, or none given). A prompt run is therefore faulted as `new`, `resume` or
//! `resume-at`, by its mode; the fault strikes before stdin is read, so nothing of the run is
//! written. The run's journal entry gets the outcome `fault:<kind>`.
//! - `error`: the load-error form (`Failed to resume session: mock fault: injected error`;
//!   for `new`, `API Error: 500 ...`), exit 1.
//! - `hang`: nothing is printed for `hang_ms`, then the run goes on normally; without
//!   `hang_ms` it never answers (the journal entry is written before it waits).
//! - `no_effect`: everything is answered as a success, but no transcript is written.
//! - `unknown_session`: `No conversation found with session ID: <id>`, exit 1.
//! - `busy`: on stderr `Error: Session <id> is currently running as a background agent (bg).
//!   Use `claude agents` to find and attach to it, or add --fork-session to branch off a
//!   copy.` (for `new`: `Error: Session ID <id> is already in use.`), exit 1.
//! - `crash`: `system/init` is printed, then the process exits with 134, no result line, no
//!   transcript change.

mod args;
mod run;
pub(crate) use run::{call_of, witness_before};
mod transcript;

pub use transcript::{
    at_least, live_chain, live_leaf, live_state_of, project_slug, seed_session, transcript_path,
    version, ChainEntry, SeedEntry, SeedSession, VERSION, VERSIONS,
};

use std::path::PathBuf;
use std::process::ExitCode;

/// The environment variable selecting the imitated Claude Code release.
pub const VERSION_ENV: &str = "REWIND_MOCK_CLAUDE_VERSION";

/// The CLI's configuration directory: `$CLAUDE_CONFIG_DIR`, else `$HOME/.claude`.
pub fn config_dir() -> PathBuf {
    match std::env::var_os("CLAUDE_CONFIG_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
            .join(".claude"),
    }
}

/// Runs the mock as the `claude` program; `args` exclude the program name.
pub fn main(args: Vec<String>) -> ExitCode {
    run::run(config_dir(), args)
}
