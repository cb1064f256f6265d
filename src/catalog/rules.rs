//! [`Catalog`]: every normative statement of the spec, with a stable id (`features/rules.yaml`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;

/// What kind of statement a rule is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    /// A behavioural requirement.
    Rule,
    /// One of the spec's error messages.
    Error,
    /// A property that holds after every rewind.
    Invariant,
}

/// Where a rule is observable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleSide {
    /// The server (database, API, realtime).
    Server,
    /// The agent runtimes and the daemon.
    Runtime,
    /// The browser client.
    Client,
}

/// One catalog entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The stable id (`init.human-only`).
    pub id: String,
    /// The spec section (`"3"`, `"6.1.1"`, or `"inventory"`).
    pub section: String,
    /// The spec documents stating it.
    pub sources: Vec<String>,
    /// rule / error / invariant.
    pub kind: RuleKind,
    /// server / runtime / client.
    pub side: RuleSide,
    /// A one-line English paraphrase.
    pub text: String,
    /// Errors only: the verbatim message of spec section 9.
    #[serde(default)]
    pub message: Option<String>,
    /// Errors only: the stable machine code.
    #[serde(default)]
    pub code: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    version: u32,
    rules: Vec<Rule>,
}

/// Where each rule's id and message are written, read in a second pass over the same text (the
/// catalog's own structs stay plain strings).
#[derive(Debug, Deserialize)]
struct LocatedFile {
    rules: Vec<LocatedRule>,
}

#[derive(Debug, Deserialize)]
struct LocatedRule {
    id: Spanned<String>,
    #[serde(default)]
    message: Option<Spanned<String>>,
}

/// Where a rule is written in the catalog: 1-based line and column of its id and, for an
/// error, of its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleLocation {
    /// Line and column of the `id` value.
    pub id: (u64, u64),
    /// Line and column of the `message` value, if the rule has one.
    pub message: Option<(u64, u64)>,
}

/// Why the catalog could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// A list that goes with the catalog (`untestable.yaml`, `pending.yaml`) cannot be read or
    /// is malformed: the message names the file, the line and the column.
    #[error(transparent)]
    Input(#[from] crate::input_file::InputFileError),
    /// The file could not be read.
    #[error("cannot read rule catalog `{}`: {source}", path.display())]
    Read {
        /// The catalog path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The YAML is malformed or has unknown keys (the message carries line and column).
    #[error("{}: {detail}", path.display())]
    Parse {
        /// The catalog path.
        path: PathBuf,
        /// The parser's message, with its location.
        detail: String,
    },
    /// An entry breaks a catalog rule (duplicate id, error without message...).
    #[error("{}: rule `{id}`: {detail}", path.display())]
    Invalid {
        /// The catalog path.
        path: PathBuf,
        /// The offending rule id.
        id: String,
        /// What is wrong.
        detail: String,
    },
}

/// The loaded catalog, in file order.
#[derive(Debug, Clone)]
pub struct Catalog {
    path: PathBuf,
    rules: Vec<Rule>,
    locations: HashMap<String, RuleLocation>,
}

impl Catalog {
    /// Loads and validates `path`.
    pub fn load(path: &Path) -> Result<Self, CatalogError> {
        let text = std::fs::read_to_string(path).map_err(|source| CatalogError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses and validates catalog text; `path` is only used in messages.
    pub fn parse(path: &Path, text: &str) -> Result<Self, CatalogError> {
        let file: CatalogFile = serde_saphyr::from_str(text).map_err(|e| CatalogError::Parse {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        let invalid = |id: &str, detail: String| CatalogError::Invalid {
            path: path.to_path_buf(),
            id: id.to_owned(),
            detail,
        };
        if file.version != 1 {
            return Err(invalid(
                "-",
                format!(
                    "unsupported catalog `version: {}` (expected 1)",
                    file.version
                ),
            ));
        }
        let mut seen = HashSet::new();
        let mut codes = HashSet::new();
        for rule in &file.rules {
            let well_formed = !rule.id.is_empty()
                && rule
                    .id
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-')
                && rule.id.contains('.');
            if !well_formed {
                return Err(invalid(
                    &rule.id,
                    "ids are `<area>.<kebab-slug>` in lowercase ASCII".to_owned(),
                ));
            }
            if !seen.insert(rule.id.as_str()) {
                return Err(invalid(&rule.id, "duplicate id".to_owned()));
            }
            match (rule.kind, &rule.message, &rule.code) {
                (RuleKind::Error, Some(_), Some(code)) => {
                    if !codes.insert(code.as_str()) {
                        return Err(invalid(&rule.id, format!("duplicate error code `{code}`")));
                    }
                }
                (RuleKind::Error, _, _) => {
                    return Err(invalid(
                        &rule.id,
                        "an `error` needs both `message` and `code`".to_owned(),
                    ))
                }
                (_, None, None) => {}
                _ => {
                    return Err(invalid(
                        &rule.id,
                        "only `error` entries carry `message` and `code`".to_owned(),
                    ))
                }
            }
            if rule.text.trim().is_empty() {
                return Err(invalid(&rule.id, "empty `text`".to_owned()));
            }
        }
        // The text parsed once already: a second pass for positions cannot fail on it, and
        // if it did, messages would only lose their line and column.
        let locations = serde_saphyr::from_str::<LocatedFile>(text)
            .map(|located| {
                located
                    .rules
                    .into_iter()
                    .map(|r| {
                        let at = |l: serde_saphyr::Location| (l.line(), l.column());
                        let location = RuleLocation {
                            id: at(r.id.referenced),
                            message: r.message.map(|m| at(m.referenced)),
                        };
                        (r.id.value, location)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Catalog {
            path: path.to_path_buf(),
            rules: file.rules,
            locations,
        })
    }

    /// Where rule `id` is written, if the catalog holds it.
    pub fn location(&self, id: &str) -> Option<RuleLocation> {
        self.locations.get(id).copied()
    }

    /// `path:line:column` of rule `id`'s id (or of its message, with `message`), for messages;
    /// the catalog's path alone when the position is unknown.
    pub fn at(&self, id: &str, message: bool) -> String {
        let location = self.location(id);
        let position = match (location, message) {
            (Some(l), true) => l.message.or(Some(l.id)),
            (Some(l), false) => Some(l.id),
            (None, _) => None,
        };
        match position {
            Some((line, column)) if line > 0 => {
                format!("{}:{line}:{column}", self.path.display())
            }
            _ => self.path.display().to_string(),
        }
    }

    /// Where the catalog was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every rule, in file order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The rule with this id.
    pub fn get(&self, id: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// The error rule whose verbatim message is `message`.
    pub fn error_by_message(&self, message: &str) -> Option<&Rule> {
        self.rules
            .iter()
            .find(|r| r.kind == RuleKind::Error && r.message.as_deref() == Some(message))
    }

    /// Rule counts per section, in section order.
    pub fn count_by_section(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for rule in &self.rules {
            *counts.entry(rule.section.clone()).or_default() += 1;
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Catalog, CatalogError> {
        Catalog::parse(Path::new("rules.yaml"), text)
    }

    #[test]
    fn the_shipped_catalog_loads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("features/rules.yaml");
        let catalog = Catalog::load(&path).expect("features/rules.yaml is valid");
        let errors = catalog
            .rules()
            .iter()
            .filter(|r| r.kind == RuleKind::Error)
            .count();
        assert_eq!(errors, 11, "spec section 9 lists 11 errors");
    }

    #[test]
    fn rules_and_messages_are_located() {
        let catalog = parse("version: 1\nrules:\n  - id: a.b\n    section: \"3\"\n    sources: [rewind.md]\n    kind: rule\n    side: server\n    text: x\n  - id: err.x\n    section: \"9\"\n    sources: [rewind.md]\n    kind: error\n    side: server\n    text: y\n    message: \"no\"\n    code: x\n")
            .expect("catalog");
        assert_eq!(catalog.at("a.b", false), "rules.yaml:3:9");
        assert_eq!(catalog.at("err.x", true), "rules.yaml:15:14");
        assert_eq!(
            catalog.at("a.b", true),
            "rules.yaml:3:9",
            "no message: the id"
        );
        assert_eq!(catalog.at("nope", false), "rules.yaml");
    }

    #[test]
    fn unknown_keys_are_located() {
        let err = parse("version: 1\nrules:\n  - id: a.b\n    section: \"3\"\n    sources: [rewind.md]\n    kind: rule\n    side: server\n    text: x\n    colour: red\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("colour"), "{err}");
        assert!(err.contains("9"), "names the line: {err}");
    }

    #[test]
    fn duplicates_and_malformed_errors_are_refused() {
        let rule = "  - id: a.b\n    section: \"3\"\n    sources: [rewind.md]\n    kind: rule\n    side: server\n    text: x\n";
        let err = parse(&format!("version: 1\nrules:\n{rule}{rule}")).unwrap_err();
        assert!(err.to_string().contains("duplicate id"), "{err}");
        let err = parse("version: 1\nrules:\n  - id: err.x\n    section: \"9\"\n    sources: [rewind.md]\n    kind: error\n    side: server\n    text: x\n")
            .unwrap_err();
        assert!(err.to_string().contains("needs both"), "{err}");
    }
}
