//! The report files a run asks for (`--junit`, `--json`, ..., `--report-dir`): where each goes,
//! and the check, before anything starts, that each can be written.

use super::args::RunArgs;
use super::usage;

/// The report files of the run: each single-report option, then every report of
/// `--report-dir`.
pub(super) fn report_targets(args: &RunArgs) -> Vec<crate::reports::Target> {
    use crate::reports::Kind;
    crate::reports::targets(
        &[
            (Kind::Junit, args.junit.as_ref()),
            (Kind::Json, args.json.as_ref()),
            (Kind::Markdown, args.markdown.as_ref()),
            (Kind::Html, args.html.as_ref()),
            (Kind::FaultMatrix, args.fault_matrix.as_ref()),
            (Kind::CompatMatrix, args.compat_matrix.as_ref()),
        ],
        args.report_dir.as_deref(),
    )
}

/// Checks that each report path of the run can be written, without leaving a file behind.
pub(super) fn check_output_paths(args: &RunArgs) -> anyhow::Result<()> {
    check_targets(args.report_dir.as_deref(), &report_targets(args))
}

/// Checks that each of `targets` (`report_dir`'s among them) can be written, without leaving a
/// file behind.
pub(super) fn check_targets(
    report_dir: Option<&std::path::Path>,
    targets: &[crate::reports::Target],
) -> anyhow::Result<()> {
    if let Some(dir) = report_dir {
        if dir.exists() && !dir.is_dir() {
            return Err(usage(format!(
                "`--report-dir {0}` cannot be written: `{0}` is not a directory; choose a \
                 writable path",
                dir.display()
            )));
        }
    }
    for target in targets {
        let path = &target.path;
        let fail = |why: String| {
            usage(format!(
                "`{}` cannot be written: {why}; choose a writable path",
                target.option
            ))
        };
        if path.is_dir() {
            return Err(fail(if target.option.starts_with("--report-dir") {
                format!("`{}` is a directory", path.display())
            } else {
                "it is a directory".to_owned()
            }));
        }
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        // The directory is made at the end anyway; here only its nearest existing ancestor has
        // to take a new entry.
        let mut existing = dir;
        while !existing.exists() {
            match existing.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => existing = parent,
                _ => {
                    existing = std::path::Path::new(".");
                    break;
                }
            }
        }
        if !existing.is_dir() {
            return Err(fail(format!("`{}` is not a directory", existing.display())));
        }
        let probe = if path.exists() {
            std::fs::OpenOptions::new()
                .append(true)
                .open(path)
                .map(|_| ())
        } else if existing == dir {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .and_then(|_| std::fs::remove_file(path))
        } else {
            tempfile::tempfile_in(existing).map(|_| ())
        };
        if let Err(e) = probe {
            return Err(fail(e.to_string()));
        }
    }
    Ok(())
}
