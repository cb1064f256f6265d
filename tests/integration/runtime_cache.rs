//! `runtimes`: which real-runtime releases the cache holds, read from the cache the variable
//! names (an empty one, then one where a release's program is in place), and its usage errors.
//! Installing needs the npm registry: `.ci/run` does it (`runtimes --install --all`) before the
//! real-runtime tier.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_rewind-conformance");

fn runtimes(cache: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("runtimes")
        .args(args)
        .env("REWIND_REAL_RUNTIMES_DIR", cache)
        .output()
        .expect("the harness runs")
}

/// The lines of stdout that name a release, as (`package@version`, what follows).
fn listed(out: &Output) -> Vec<(String, String)> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains('@') && !l.starts_with("runtime cache"))
        .filter_map(|l| {
            let (spec, rest) = l.split_once("  ")?;
            Some((spec.trim().to_owned(), rest.trim().to_owned()))
        })
        .collect()
}

#[test]
fn runtimes_lists_the_releases_a_run_starts_and_which_the_cache_holds() {
    let cache = tempfile::tempdir().expect("a temporary directory");
    let out = runtimes(cache.path(), &[]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("runtime cache: {}", cache.path().display())),
        "{stdout}"
    );
    let specs = |out: &Output| -> Vec<String> { listed(out).into_iter().map(|(s, _)| s).collect() };
    assert_eq!(
        specs(&out),
        [
            "@openai/codex@0.171.0",
            "@anthropic-ai/claude-code@2.1.332",
            "opencode-linux-x64@1.18.34"
        ],
        "{stdout}"
    );
    assert!(
        listed(&out)
            .iter()
            .all(|(_, state)| state == "not installed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("3 not installed: `rewind-conformance runtimes --install`"),
        "{stdout}"
    );

    // `--all`: the older pinned releases the tier checks too.
    let all = runtimes(cache.path(), &["--all"]);
    assert_eq!(
        specs(&all),
        [
            "@openai/codex@0.155.1",
            "@openai/codex@0.171.0",
            "@anthropic-ai/claude-code@2.1.197",
            "@anthropic-ai/claude-code@2.1.332",
            "opencode-linux-x64@1.18.33",
            "opencode-linux-x64@1.18.34"
        ],
        "{}",
        String::from_utf8_lossy(&all.stdout)
    );

    // A release whose program is in place is listed with it; an override replaces the pinned
    // release of its runtime.
    let program = cache
        .path()
        .join("opencode-1.18.33/node_modules/opencode-linux-x64/bin/opencode");
    std::fs::create_dir_all(program.parent().unwrap()).unwrap();
    std::fs::write(&program, "").unwrap();
    let out = runtimes(cache.path(), &["--runtime-release", "opencode=1.18.33"]);
    let rows = listed(&out);
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(
        rows.contains(&(
            "opencode-linux-x64@1.18.33".to_owned(),
            program.display().to_string()
        )),
        "{rows:?}"
    );
    assert!(
        !rows.iter().any(|(spec, _)| spec.ends_with("@1.18.34")),
        "{rows:?}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("2 not installed"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn runtimes_refuses_an_override_that_names_no_runtime_or_no_version() {
    let cache = tempfile::tempdir().expect("a temporary directory");
    for (value, needle) in [
        ("gemini=1.0", "`gemini` is not a runtime"),
        ("codex", "expected `latest` or RUNTIME=VERSION"),
        ("codex=1 2", "is not a version"),
    ] {
        let out = runtimes(cache.path(), &["--runtime-release", value]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{value}: {stderr}");
        assert!(stderr.contains(needle), "{value}: {stderr}");
        assert!(
            std::fs::read_dir(cache.path()).unwrap().next().is_none(),
            "{value}: the cache was written"
        );
    }
}
