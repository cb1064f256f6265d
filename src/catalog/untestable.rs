//! [`Untestable`]: catalog rules no black-box scenario can check, each with its reason
//! (`features/untestable.yaml`).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::listed::{self, Listed};
use super::{Catalog, CatalogError, Coverage};

/// One rule that is accounted for without a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UntestableRule {
    /// The catalog rule id.
    pub id: String,
    /// Why no black-box scenario can check it.
    pub reason: String,
    /// 1-based line of the id in the list.
    pub line: u64,
    /// 1-based column of the id in the list.
    pub column: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UntestableFile {
    version: u32,
    untestable: Vec<UntestableDoc>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UntestableDoc {
    id: Spanned<String>,
    reason: Spanned<String>,
}

/// The list of untestable rules.
#[derive(Debug, Clone, Default)]
pub struct Untestable {
    /// Where the list was read from (empty for a default list).
    pub path: PathBuf,
    /// The rules, in file order.
    pub rules: Vec<UntestableRule>,
}

impl Untestable {
    /// Loads `path`; a missing file is an empty list. A malformed file, an entry without a
    /// `reason` or with an empty one is an error naming its line and column.
    pub fn load(path: &Path) -> Result<Self, CatalogError> {
        let entries = listed::load(path, "untestable", |file: UntestableFile| {
            let pairs = file
                .untestable
                .into_iter()
                .map(|e| (e.id, e.reason))
                .collect();
            (file.version, pairs)
        })?;
        Ok(Untestable {
            path: path.to_path_buf(),
            rules: entries
                .into_iter()
                .map(|e| UntestableRule {
                    id: e.id,
                    reason: e.note,
                    line: e.line,
                    column: e.column,
                })
                .collect(),
        })
    }

    /// Whether `id` is listed.
    pub fn contains(&self, id: &str) -> bool {
        self.rules.iter().any(|r| r.id == id)
    }

    /// Entries naming no catalog rule, listed twice, or with a scenario: one positioned line
    /// each.
    pub fn check(&self, catalog: &Catalog, coverage: &Coverage) -> Vec<String> {
        let entries: Vec<Listed> = self
            .rules
            .iter()
            .map(|r| Listed {
                id: r.id.clone(),
                note: r.reason.clone(),
                line: r.line,
                column: r.column,
            })
            .collect();
        listed::check(&self.path, "untestable", &entries, catalog, coverage)
    }
}
