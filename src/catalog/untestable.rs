//! [`Untestable`]: catalog rules no black-box scenario can check, each with its reason
//! (`features/untestable.yaml`).

use std::path::Path;

use serde::Deserialize;

use super::CatalogError;

/// One rule that is accounted for without a scenario.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UntestableRule {
    /// The catalog rule id.
    pub id: String,
    /// Why no black-box scenario can check it.
    pub reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UntestableFile {
    version: u32,
    untestable: Vec<UntestableRule>,
}

/// The list of untestable rules.
#[derive(Debug, Clone, Default)]
pub struct Untestable {
    /// The rules, in file order.
    pub rules: Vec<UntestableRule>,
}

impl Untestable {
    /// Loads `path`; a missing file is an empty list.
    pub fn load(path: &Path) -> Result<Self, CatalogError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => {
                return Err(CatalogError::Read {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        let file: UntestableFile =
            serde_saphyr::from_str(&text).map_err(|e| CatalogError::Parse {
                path: path.to_path_buf(),
                detail: e.to_string(),
            })?;
        if file.version != 1 {
            return Err(CatalogError::Invalid {
                path: path.to_path_buf(),
                id: "-".to_owned(),
                detail: format!("unsupported `version: {}` (expected 1)", file.version),
            });
        }
        for rule in &file.untestable {
            if rule.reason.trim().is_empty() {
                return Err(CatalogError::Invalid {
                    path: path.to_path_buf(),
                    id: rule.id.clone(),
                    detail: "an untestable rule needs a `reason`".to_owned(),
                });
            }
        }
        Ok(Untestable {
            rules: file.untestable,
        })
    }

    /// Whether `id` is listed.
    pub fn contains(&self, id: &str) -> bool {
        self.rules.iter().any(|r| r.id == id)
    }
}
