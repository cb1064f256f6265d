//! The harness's integration tests, one module per area, built as one test binary: one link
//! instead of one per file, and libtest runs the areas' tests side by side instead of one binary
//! after another. `cargo test --test integration <module>::` runs one area, e.g.
//! `cargo test --test integration guide::`.
//!
//! The Gherkin suite itself is `tests/conformance.rs` (its own entry point, which forwards run
//! options); the real-runtime tier is `tests/real_runtimes` (behind the `real-runtimes` feature).

mod common;

mod bench_bound;
mod browser_tier;
mod ci_examples;
mod compare;
mod coverage_gate;
mod driver_selftest;
mod guide;
mod harness_edges;
mod oracle_reference;
mod reports;
mod selection;
mod sharding;
mod step_reference;
