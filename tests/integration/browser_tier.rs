//! The browser client tier's options are checked before anything starts: a harness built without
//! the `browser` feature refuses `--client-module` and a profile declaring `browser-client`,
//! saying how to build it; a harness built with it refuses a client module it cannot read.

use crate::common::harness_env;

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_rewind-conformance");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn harness(args: &[&str]) -> Output {
    let mut command = Command::new(BIN);
    command.current_dir(ROOT).args(args);
    harness_env::clean(&mut command);
    command.output().expect("the harness runs")
}

fn refused(args: &[&str], says: &str) {
    let out = harness(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "`{}` was not refused",
        args.join(" ")
    );
    assert!(
        stderr.contains(says),
        "`{}` was refused without saying `{says}`:\n{stderr}",
        args.join(" ")
    );
}

#[cfg(not(feature = "browser"))]
#[test]
fn without_the_browser_feature_the_client_tier_is_refused_with_how_to_build_it() {
    refused(
        &[
            "run",
            "--tags",
            "@client",
            "--client-module",
            "client/rewind-client.js",
        ],
        "--features browser",
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let profile = dir.path().join("profile.yaml");
    std::fs::write(
        &profile,
        "runtimes: [codex]\nsurfaces: [browser-client, message-sync, read-state, history, search, share-cards, conversation-index]\n",
    )
    .expect("profile written");
    refused(
        &[
            "run",
            "--tags",
            "@client",
            "--profile",
            profile.to_str().expect("UTF-8"),
        ],
        "--features browser",
    );
}

#[cfg(feature = "browser")]
#[test]
fn a_client_module_that_cannot_be_read_is_refused_naming_it() {
    refused(
        &[
            "run",
            "--tags",
            "@client",
            "--client-module",
            "no/such/client.js",
        ],
        "no/such/client.js",
    );
}
