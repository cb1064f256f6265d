//! `protocol/IMPLEMENTING.md`, the implementer's guide, quotes the ambiguity register
//! (`features/ambiguities.yaml`) in an appendix generated from it (`src/register_doc.rs`), so
//! that the guide alone tells an implementer which readings of an open point pass. A register
//! entry added, changed or removed without regenerating the guide fails here; so does a link
//! from the guide's prose to an entry the register does not have.
//!
//! `REWIND_BLESS=1 cargo test --test guide` rewrites the generated block instead of failing.

use crate::common::first_difference;

use std::path::{Path, PathBuf};

use rewind_conformance::catalog::Register;
use rewind_conformance::register_doc::{self, BEGIN, END};

const REGENERATE: &str = "REWIND_BLESS=1 cargo test --test guide";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn guide_path() -> PathBuf {
    root().join("protocol/IMPLEMENTING.md")
}

fn register() -> Register {
    Register::load(&root().join("features/ambiguities.yaml"))
        .unwrap_or_else(|e| panic!("the ambiguity register does not load: {e}"))
}

fn guide() -> String {
    std::fs::read_to_string(guide_path())
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", guide_path().display()))
}

fn bless() -> bool {
    std::env::var("REWIND_BLESS").as_deref() == Ok("1")
}

#[test]
fn the_guide_quotes_the_register_as_generated() {
    let generated = register_doc::markdown(&register());
    let document = guide();
    let committed = register_doc::block(&document).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; the register appendix belongs between `{BEGIN}` and `{END}`",
            guide_path().display()
        )
    });
    if committed == generated {
        return;
    }
    if bless() {
        let updated = register_doc::splice(&document, &generated).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(guide_path(), updated)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", guide_path().display()));
        return;
    }
    let first_difference = first_difference::first_difference(committed, &generated);
    panic!(
        "protocol/IMPLEMENTING.md quotes a stale ambiguity register: features/ambiguities.yaml \
         changed since the appendix between `{BEGIN}` and `{END}` was generated. Regenerate it \
         with\n\n    {REGENERATE}\n\nreview the diff and commit it.\n{first_difference}"
    );
}

/// Every `#amb-<id>` link of the guide names an entry of the register.
#[test]
fn the_guide_links_only_to_register_entries_that_exist() {
    let register = register();
    let document = guide();
    let mut dangling = Vec::new();
    let mut linked = 0;
    for (at, _) in document.match_indices("(#amb-") {
        let rest = &document[at + "(#amb-".len()..];
        let id = &rest[..rest.find(')').unwrap_or(rest.len())];
        linked += 1;
        if register.get(id).is_none() {
            dangling.push(id.to_owned());
        }
    }
    assert!(linked > 0, "the guide links to no register entry");
    assert!(
        dangling.is_empty(),
        "protocol/IMPLEMENTING.md links to register entries that do not exist: {dangling:?}"
    );
}

/// The guide states what is judged itself: it never sends the reader to the harness's source,
/// or to the register file, to find out (the reference server may be linked as an example).
#[test]
fn the_guide_does_not_send_readers_to_the_sources() {
    let document = guide();
    let prose = match document.find(BEGIN) {
        Some(at) => &document[..at],
        None => document.as_str(),
    };
    let offending: Vec<&str> = prose
        .lines()
        .filter(|line| {
            line.contains("](../src/")
                || line.contains("](../features/ambiguities.yaml)")
                || line.contains("`src/sut/")
        })
        .collect();
    assert!(
        offending.is_empty(),
        "protocol/IMPLEMENTING.md points readers at sources instead of stating the rule:\n{}",
        offending.join("\n")
    );
}
