//! Deterministic fault injection. A fault plan is a JSON file the harness writes next to a
//! mock's state; the mock reads it on every call, so faults can be set while a server runs.
//! A rule fires for every call to its target (thread or session id) whose name matches.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// What an injected fault does to a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// The call fails the way the real runtime reports a failure (JSON-RPC error, non-zero exit
    /// with an error result, HTTP 500 `UnknownError`).
    Error,
    /// The call does not answer while the rule stays planted (or answers after `hang_ms`): the
    /// caller's timeout must fire. Lifting the rule from the plan lets a held call go ahead
    /// normally, so a scenario can hold a restore for as long as it needs and then release it.
    Hang,
    /// The call reports success but changes nothing: only a verifying read-back notices.
    NoEffect,
    /// The runtime answers as if the thread or session did not exist (detached).
    UnknownSession,
    /// The runtime refuses because a turn is in progress.
    Busy,
    /// The process dies in the middle of the call, without an answer.
    Crash,
}

impl FaultKind {
    /// Every kind, in the order the fault matrix lists them.
    pub const ALL: [FaultKind; 6] = [
        FaultKind::Error,
        FaultKind::Hang,
        FaultKind::NoEffect,
        FaultKind::UnknownSession,
        FaultKind::Busy,
        FaultKind::Crash,
    ];

    /// The name scenarios use: `error`, `hang`, `success-without-effect`, `unknown session`,
    /// `busy`, `crash`.
    pub fn label(self) -> &'static str {
        match self {
            FaultKind::Error => "error",
            FaultKind::Hang => "hang",
            FaultKind::NoEffect => "success-without-effect",
            FaultKind::UnknownSession => "unknown session",
            FaultKind::Busy => "busy",
            FaultKind::Crash => "crash",
        }
    }

    /// Parses a [`label`](Self::label) (or the serde name).
    pub fn parse(text: &str) -> Option<FaultKind> {
        let text = text.trim();
        FaultKind::ALL.into_iter().find(|k| {
            k.label() == text
                || serde_json::to_value(k)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    == Some(text.to_owned())
        })
    }

    /// How the journal records a call this fault answered: `fault:<serde name>`.
    pub fn outcome(self) -> String {
        let name = serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        format!("fault:{name}")
    }
}

/// One rule of a fault plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultRule {
    /// The thread (codex) or session (claude, opencode) id the rule applies to.
    pub target: String,
    /// The call it applies to: a JSON-RPC method (`thread/rollback`), a route name (`revert`,
    /// `message`, `unrevert`) or a CLI mode (`resume-at`). `None`: every call to the target.
    ///
    /// The calls that DELIVER an input (a user turn) are named:
    /// - codex: `turn/start` (target: the thread id);
    /// - opencode: `message` (`POST /session/{id}/message`; target: the session id);
    /// - claude: the mode of the prompt run (target: the session addressed): `new` for a new
    ///   session (`--session-id=<uuid>`, or no session flag), `resume` for `--resume` /
    ///   `--continue` (forks included, matched by the source session), `resume-at` for a run
    ///   with `--resume-session-at` (with or without a prompt).
    ///
    /// A faulted delivering call never reaches the delivery witness ([`crate::witness`]); with
    /// `error`, `busy`, `unknown_session`, `crash` or `hang` (without `hang_ms`) nothing of
    /// the input is recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// What happens.
    pub kind: FaultKind,
    /// For [`FaultKind::Hang`]: answer normally after this many milliseconds. `None`: not while
    /// the rule is planted ([`FaultPlan::held`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hang_ms: Option<u64>,
}

/// The faults set for one mock.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultPlan {
    /// The rules; the first matching one fires.
    #[serde(default)]
    pub rules: Vec<FaultRule>,
}

impl FaultPlan {
    /// Reads the plan at `path`; a missing file is an empty plan. A broken file is an error that
    /// names the file, line and column.
    pub fn load(path: &Path) -> Result<FaultPlan, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| {
                format!(
                    "{}:{}:{}: not a fault plan: {e}",
                    path.display(),
                    e.line(),
                    e.column()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FaultPlan::default()),
            Err(e) => Err(format!("cannot read fault plan {}: {e}", path.display())),
        }
    }

    /// Writes the plan to `path` (atomically: a reader never sees half a plan).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("json.tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(tmp, path)
    }

    /// The first rule for `target` and `call`.
    pub fn find(&self, target: &str, call: &str) -> Option<&FaultRule> {
        self.rules
            .iter()
            .find(|r| r.target == target && r.call.as_deref().is_none_or(|c| c == call))
    }

    /// Whether a call to `target` named `call` is held: the first matching rule is a hang
    /// without `hang_ms`. A plan that cannot be read holds nothing (the call goes ahead).
    pub fn held(path: &Path, target: &str, call: &str) -> bool {
        FaultPlan::load(path).is_ok_and(|plan| {
            plan.find(target, call)
                .is_some_and(|r| r.kind == FaultKind::Hang && r.hang_ms.is_none())
        })
    }

    /// Blocks the calling thread while a call to `target` named `call` is [`held`](Self::held),
    /// re-reading the plan every [`HOLD_POLL`].
    pub fn wait_while_held(path: &Path, target: &str, call: &str) {
        while FaultPlan::held(path, target, call) {
            std::thread::sleep(HOLD_POLL);
        }
    }
}

/// How often a held call re-reads its fault plan.
pub const HOLD_POLL: std::time::Duration = std::time::Duration::from_millis(20);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_serde_names_parse() {
        for kind in FaultKind::ALL {
            assert_eq!(FaultKind::parse(kind.label()), Some(kind));
        }
        assert_eq!(FaultKind::parse("no_effect"), Some(FaultKind::NoEffect));
        assert_eq!(
            FaultKind::parse("unknown_session"),
            Some(FaultKind::UnknownSession)
        );
        assert_eq!(FaultKind::parse("explode"), None);
        assert_eq!(FaultKind::NoEffect.outcome(), "fault:no_effect");
    }

    #[test]
    fn rules_match_target_and_call() {
        let plan = FaultPlan {
            rules: vec![
                FaultRule {
                    target: "t-1".into(),
                    call: Some("thread/rollback".into()),
                    kind: FaultKind::Busy,
                    hang_ms: None,
                },
                FaultRule {
                    target: "t-2".into(),
                    call: None,
                    kind: FaultKind::Crash,
                    hang_ms: None,
                },
            ],
        };
        assert_eq!(
            plan.find("t-1", "thread/rollback").map(|r| r.kind),
            Some(FaultKind::Busy)
        );
        assert!(plan.find("t-1", "thread/read").is_none());
        assert_eq!(
            plan.find("t-2", "anything").map(|r| r.kind),
            Some(FaultKind::Crash)
        );
    }

    #[test]
    fn plans_round_trip_and_broken_plans_say_where() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("faults.json");
        assert_eq!(FaultPlan::load(&path).unwrap(), FaultPlan::default());
        let plan = FaultPlan {
            rules: vec![FaultRule {
                target: "ses_x".into(),
                call: Some("revert".into()),
                kind: FaultKind::Hang,
                hang_ms: Some(50),
            }],
        };
        plan.save(&path).unwrap();
        assert_eq!(FaultPlan::load(&path).unwrap(), plan);
        std::fs::write(&path, "{\"rules\": [\n  {\"target\": 1}]}").unwrap();
        let err = FaultPlan::load(&path).unwrap_err();
        assert!(err.contains("faults.json:2:"), "{err}");
    }

    #[test]
    fn a_hang_without_a_time_holds_until_lifted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("faults.json");
        let rule = |hang_ms| FaultRule {
            target: "t-1".into(),
            call: Some("thread/revert".into()),
            kind: FaultKind::Hang,
            hang_ms,
        };
        FaultPlan {
            rules: vec![rule(None)],
        }
        .save(&path)
        .unwrap();
        assert!(FaultPlan::held(&path, "t-1", "thread/revert"));
        assert!(!FaultPlan::held(&path, "t-1", "thread/read"));
        assert!(!FaultPlan::held(&path, "t-2", "thread/revert"));
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || FaultPlan::wait_while_held(&path, "t-1", "thread/revert"))
        };
        std::thread::sleep(HOLD_POLL * 3);
        assert!(!waiter.is_finished(), "a planted hang must hold the call");
        FaultPlan::default().save(&path).unwrap();
        waiter.join().unwrap();
        // A hang with a time does not hold: it answers after its time.
        FaultPlan {
            rules: vec![rule(Some(5))],
        }
        .save(&path)
        .unwrap();
        assert!(!FaultPlan::held(&path, "t-1", "thread/revert"));
    }
}
