//! Mock agent runtimes (codex app-server, claude CLI, opencode server) for the rewind
//! conformance harness.
//!
//! The mocks arrive with runtime recovery (spec section 5); this crate currently holds only the
//! runtime identifiers the harness and the fixtures share.

/// The agent runtimes named by the spec, as they appear in fixtures and capability profiles.
pub const RUNTIME_IDS: [&str; 4] = ["codex", "claude", "opencode", "builtin"];
