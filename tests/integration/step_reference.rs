//! `docs/STEPS.md` is exactly what `rewind-conformance steps` prints: the step library's
//! reference, generated from the step definitions (`src/step_reference.rs`). A step added,
//! changed or removed without regenerating the committed copy fails here.

use crate::common::first_difference;

use std::path::Path;
use std::process::Command;

const REGENERATE: &str = "cargo run -q -- steps > docs/STEPS.md";

#[test]
fn committed_step_reference_is_current() {
    let output = Command::new(env!("CARGO_BIN_EXE_rewind-conformance"))
        .arg("steps")
        .output()
        .expect("running `rewind-conformance steps`");
    assert!(
        output.status.success(),
        "`rewind-conformance steps` failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let generated = String::from_utf8(output.stdout).expect("the reference is UTF-8");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/STEPS.md");
    let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}\nGenerate it with `{REGENERATE}`.",
            path.display()
        )
    });
    if committed == generated {
        return;
    }
    let first_difference = first_difference::first_difference(&committed, &generated);
    panic!(
        "docs/STEPS.md is stale: the step definitions in src/suite/steps/ changed since it was \
         generated. Regenerate it with\n\n    {REGENERATE}\n\nand commit it.\n{first_difference}"
    );
}
