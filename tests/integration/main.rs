//! The harness's integration tests, one module per area, built as one test binary: one link
//! instead of one per file, and libtest runs the areas' tests side by side instead of one binary
//! after another. `cargo test --test integration <module>::` runs one area, e.g.
//! `cargo test --test integration guide::`.
//!
//! The whole Gherkin suite is one of them (`conformance::`), so that `cargo test` runs it beside
//! the others; `tests/conformance.rs` runs the same suite on its own and forwards run options
//! (`cargo test --test conformance -- <run options>`). The real-runtime tier is
//! `tests/real_runtimes` (behind the `real-runtimes` feature).

mod common;

mod bench_bound;
mod browser_tier;
mod ci_examples;
mod compare;
mod conformance;
mod coverage_gate;
mod driver_selftest;
mod guide;
mod harness_edges;
mod oracle_reference;
mod reports;
mod runtime_cache;
mod selection;
mod sharding;
mod step_reference;
