//! [`Pending`]: catalog rules that have no scenario yet because the harness lacks a piece of
//! work, each naming that work (`features/pending.yaml`). Unlike an untestable rule, a pending
//! rule can be checked; the list keeps the hole visible and fails once the rule gains a
//! scenario, so it cannot go stale.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::listed::{self, Listed};
use super::{Catalog, CatalogError, Coverage, Untestable};

/// One rule waiting for a piece of work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRule {
    /// The catalog rule id.
    pub id: String,
    /// A sentence naming the issue-sized piece of work the rule's scenario waits for.
    pub waits_for: String,
    /// 1-based line of the id in the list.
    pub line: u64,
    /// 1-based column of the id in the list.
    pub column: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PendingFile {
    version: u32,
    pending: Vec<PendingDoc>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PendingDoc {
    id: Spanned<String>,
    waits_for: Spanned<String>,
}

/// The list of pending rules.
#[derive(Debug, Clone, Default)]
pub struct Pending {
    /// Where the list was read from (empty for a default list).
    pub path: PathBuf,
    /// The rules, in file order.
    pub rules: Vec<PendingRule>,
}

impl Pending {
    /// Loads `path`; a missing file is an empty list. A malformed file, an entry without
    /// `waits_for` or with an empty one is an error naming its line and column.
    pub fn load(path: &Path) -> Result<Self, CatalogError> {
        let entries = listed::load(path, "pending", |file: PendingFile| {
            let pairs = file
                .pending
                .into_iter()
                .map(|e| (e.id, e.waits_for))
                .collect();
            (file.version, pairs)
        })?;
        Ok(Pending {
            path: path.to_path_buf(),
            rules: entries
                .into_iter()
                .map(|e| PendingRule {
                    id: e.id,
                    waits_for: e.note,
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

    /// Entries naming no catalog rule, listed twice, with a scenario, or also listed untestable:
    /// one positioned line each.
    pub fn check(
        &self,
        catalog: &Catalog,
        coverage: &Coverage,
        untestable: &Untestable,
    ) -> Vec<String> {
        let entries: Vec<Listed> = self
            .rules
            .iter()
            .map(|r| Listed {
                id: r.id.clone(),
                note: r.waits_for.clone(),
                line: r.line,
                column: r.column,
            })
            .collect();
        let mut problems = listed::check(&self.path, "pending", &entries, catalog, coverage);
        for entry in &entries {
            if let Some(other) = untestable.rules.iter().find(|r| r.id == entry.id) {
                problems.push(format!(
                    "{}: rule `{}` is listed pending and untestable (`{}:{}:{}`): a rule that \
                     waits for work is testable; keep one entry",
                    listed::at(&self.path, entry),
                    entry.id,
                    untestable.path.display(),
                    other.line,
                    other.column
                ));
            }
        }
        problems
    }
}
