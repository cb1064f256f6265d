//! The whole Gherkin suite against the reference implementation, as `cargo test --test
//! conformance` runs it, with no forwarded options (the `REWIND_*` variables still apply). It is
//! a test of this binary so that a plain `cargo test` runs it beside the other integration tests
//! rather than before them: the two together keep both cores busier than one after the other.
//! Its output is the run's own, printed as it goes.

use crate::common::suite_run::run_suite;

#[test]
fn the_whole_suite_passes() {
    let status = run_suite(&[]).expect("the rewind-conformance binary starts");
    assert!(
        status.success(),
        "the conformance suite failed ({status}); its output is above"
    );
}
