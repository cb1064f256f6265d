//! What `features/untestable.yaml` and `features/pending.yaml` share: a versioned list of catalog
//! rule ids, each with a sentence (why it has no scenario, or what it waits for), read with
//! positions so that every problem names its file, line and column.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde_saphyr::Spanned;

use super::{Catalog, CatalogError, Coverage};
use crate::input_file::{parse_yaml, InputFileError};

/// One listed rule, where it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The catalog rule id.
    pub id: String,
    /// The sentence that goes with it (a reason, or what the rule waits for).
    pub note: String,
    /// 1-based line of the id.
    pub line: u64,
    /// 1-based column of the id.
    pub column: u64,
}

/// Reads a list file (an absent file is an empty list): `entries` takes the parsed document
/// apart into its version and its `(id, note)` pairs.
pub(crate) fn load<Doc, F>(
    path: &Path,
    what: &'static str,
    entries: F,
) -> Result<Vec<Listed>, CatalogError>
where
    Doc: DeserializeOwned,
    F: FnOnce(Doc) -> (u32, Vec<(Spanned<String>, Spanned<String>)>),
{
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(CatalogError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let doc: Doc = parse_yaml(path, &text)?;
    let (version, raw) = entries(doc);
    if version != 1 {
        return Err(CatalogError::Invalid {
            path: path.to_path_buf(),
            id: "-".to_owned(),
            detail: format!("unsupported `version: {version}` (expected 1)"),
        });
    }
    let mut listed = Vec::with_capacity(raw.len());
    for (id, note) in raw {
        if note.value.trim().is_empty() {
            return Err(InputFileError::at(
                path,
                note.referenced,
                format!(
                    "{what} rule `{}` needs a sentence here, not an empty one",
                    id.value
                ),
            )
            .into());
        }
        listed.push(Listed {
            id: id.value,
            note: note.value,
            line: id.referenced.line(),
            column: id.referenced.column(),
        });
    }
    Ok(listed)
}

/// `path:line:column` of an entry.
pub(crate) fn at(path: &Path, entry: &Listed) -> String {
    format!("{}:{}:{}", path.display(), entry.line, entry.column)
}

/// What is wrong with a list against the catalog and the features: an id the catalog lacks, an
/// id listed twice, an id that has a scenario (the list went stale). `what` names the list's
/// entries (`untestable`, `pending`).
pub(crate) fn check(
    path: &Path,
    what: &str,
    entries: &[Listed],
    catalog: &Catalog,
    coverage: &Coverage,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen: Vec<&Listed> = Vec::new();
    for entry in entries {
        let id = entry.id.as_str();
        if let Some(first) = seen.iter().find(|e| e.id == id) {
            problems.push(format!(
                "{}: rule `{id}` is listed twice (first at line {})",
                at(path, entry),
                first.line
            ));
            continue;
        }
        seen.push(entry);
        if catalog.get(id).is_none() {
            problems.push(format!(
                "{}: {what} rule `{id}` is not in the catalog `{}`",
                at(path, entry),
                catalog.path().display()
            ));
            continue;
        }
        if let Some(scenario) = coverage
            .scenarios_by_rule
            .get(id)
            .and_then(|s| s.iter().next())
        {
            problems.push(format!(
                "{}: rule `{id}` is listed {what} but has a scenario ({scenario}): remove it from `{}`",
                at(path, entry),
                path.display()
            ));
        }
    }
    problems
}
