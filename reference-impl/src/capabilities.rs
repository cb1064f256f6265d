//! The runtime capability map (spec 5): runtime ids and recovery strategy names are separate
//! constants, and a strategy name is never accepted as a runtime.

/// Runtime ids: what `agents.runtime` holds and what a daemon delivers to.
pub mod runtime {
    /// OpenAI Codex, driven through `codex app-server`.
    pub const CODEX: &str = "codex";
    /// Claude Code, driven through its CLI.
    pub const CLAUDE: &str = "claude";
    /// OpenCode, driven through `opencode serve`.
    pub const OPENCODE: &str = "opencode";
    /// The built-in runtime, an alias of OpenCode's capability.
    pub const BUILTIN: &str = "builtin";
}

/// Recovery strategy names: how a runtime is restored, never a runtime id.
pub mod strategy {
    /// Codex app-server `thread/rollback` to `{threadId, turnCount}`.
    pub const CODEX_APP_SERVER_TURNS: &str = "codex_app_server_turns";
    /// Claude CLI `--resume <session> --resume-session-at <uuid>`.
    pub const CLAUDE_SESSION_RESUME_AT: &str = "claude_session_resume_at";
    /// OpenCode `POST /session/:id/revert`.
    pub const OPENCODE_SESSION_REVERT: &str = "opencode_session_revert";
}

/// What the map says about one runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    /// The runtime id.
    pub runtime: &'static str,
    /// Its recovery strategy.
    pub strategy: &'static str,
    /// Whether the strategy needs a recovery point (all current ones do).
    pub needs_recovery_point: bool,
}

/// Every rewind-capable runtime. A runtime appears here only with a restore strategy.
pub const CAPABILITIES: [Capability; 4] = [
    Capability {
        runtime: runtime::CODEX,
        strategy: strategy::CODEX_APP_SERVER_TURNS,
        needs_recovery_point: true,
    },
    Capability {
        runtime: runtime::CLAUDE,
        strategy: strategy::CLAUDE_SESSION_RESUME_AT,
        needs_recovery_point: true,
    },
    Capability {
        runtime: runtime::OPENCODE,
        strategy: strategy::OPENCODE_SESSION_REVERT,
        needs_recovery_point: true,
    },
    Capability {
        runtime: runtime::BUILTIN,
        strategy: strategy::OPENCODE_SESSION_REVERT,
        needs_recovery_point: true,
    },
];

/// The capability of runtime `id`; `None` for an unsupported runtime and for a strategy name.
pub fn for_runtime(id: &str) -> Option<Capability> {
    CAPABILITIES.iter().copied().find(|c| c.runtime == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies_are_not_runtimes() {
        for name in [
            strategy::CODEX_APP_SERVER_TURNS,
            strategy::CLAUDE_SESSION_RESUME_AT,
            strategy::OPENCODE_SESSION_REVERT,
        ] {
            assert_eq!(
                for_runtime(name),
                None,
                "`{name}` must not pass as a runtime"
            );
        }
    }

    #[test]
    fn every_supported_runtime_has_a_strategy() {
        for c in CAPABILITIES {
            assert!(
                !c.strategy.is_empty(),
                "`{}` has no restore strategy",
                c.runtime
            );
            assert_ne!(c.strategy, c.runtime);
        }
    }

    #[test]
    fn builtin_follows_opencode() {
        assert_eq!(
            for_runtime(runtime::BUILTIN).map(|c| c.strategy),
            for_runtime(runtime::OPENCODE).map(|c| c.strategy)
        );
        assert_eq!(for_runtime("gemini"), None);
    }
}
