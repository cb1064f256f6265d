//! [`InputFileError`] and [`parse_yaml`]: the small YAML files a user hands the harness (a
//! capability profile, an expectations file), read with positioned errors.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_saphyr::Location;

use crate::fixtures::{positioned_yaml_error, Position, YamlKind};

/// A user-given YAML file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum InputFileError {
    /// The file cannot be read.
    #[error("cannot read the {what} `{}`: {source}", path.display())]
    Read {
        /// What the file is (`capability profile`).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file, or one of its entries, is malformed.
    #[error("{at}: {message}")]
    Invalid {
        /// Where.
        at: Position,
        /// What is wrong.
        message: String,
    },
}

impl InputFileError {
    /// An error about the value at `location` of `path`.
    pub fn at(path: &Path, location: Location, message: String) -> Self {
        InputFileError::Invalid {
            at: Position {
                path: path.to_path_buf(),
                line: location.line(),
                column: location.column(),
            },
            message,
        }
    }
}

/// Reads `path` (a `what`, for errors).
pub fn read(what: &'static str, path: &Path) -> Result<String, InputFileError> {
    std::fs::read_to_string(path).map_err(|source| InputFileError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

/// Parses YAML text; `path` names it in errors.
pub fn parse_yaml<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, InputFileError> {
    serde_saphyr::from_str(text).map_err(|e| {
        let needs = needs::<T>();
        let kind = YamlKind {
            what: "file",
            needs: &needs,
        };
        let (at, message) = positioned_yaml_error(path, text, &e, kind);
        InputFileError::Invalid { at, message }
    })
}

/// What a file read as `T` needs, for the message about an empty one: the first key an empty
/// mapping lacks.
fn needs<T: DeserializeOwned>() -> String {
    let mut result = serde_saphyr::from_str::<T>("{}").err();
    while let Some(serde_saphyr::Error::WithSnippet { error, .. }) = result {
        result = Some(*error);
    }
    match result {
        Some(serde_saphyr::Error::SerdeMissingField { field, .. }) => {
            format!("it needs a mapping with at least the key `{field}`")
        }
        _ => "it needs a YAML mapping (`{}` when it declares nothing)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde::Deserialize;

    use super::{parse_yaml, InputFileError};

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Doc {
        entries: Vec<Entry>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Entry {
        name: String,
        count: u32,
    }

    /// Parses `text` as a [`Doc`], expecting an error: its line, column and message.
    fn fail(text: &str) -> (u64, u64, String) {
        match parse_yaml::<Doc>(Path::new("x.yaml"), text) {
            Ok(doc) => panic!("parsed but should not have: {doc:?}"),
            Err(InputFileError::Invalid { at, message }) => (at.line, at.column, message),
            Err(other) => panic!("not a content error: {other}"),
        }
    }

    #[test]
    fn an_empty_file_names_the_key_it_needs() {
        assert_eq!(
            fail(""),
            (
                1,
                1,
                "the file is empty (0 bytes); it needs a mapping with at least the key `entries`"
                    .to_owned()
            )
        );
        assert_eq!(
            fail("# nothing yet\n").2,
            "the file is empty (only comments and blank lines); it needs a mapping with at \
             least the key `entries`"
        );
    }

    #[test]
    fn a_wrong_type_names_the_key_path_and_the_value() {
        assert_eq!(
            fail("entries:\n  - {name: a, count: 1}\n  - {name: b, count: many}\n"),
            (
                3,
                22,
                "wrong type for `entries[1].count`: found `many` (expected a non-negative \
                 integer)"
                    .to_owned()
            )
        );
        let err = crate::profile::CapabilityProfile::parse(
            Path::new("profile.yaml"),
            "runtimes: codex\nsurfaces: []\n",
        )
        .expect_err("runtimes is not a list");
        assert_eq!(
            err.to_string(),
            "profile.yaml:1:11: wrong type for `runtimes`: found `codex` (expected a list)"
        );
    }

    #[test]
    fn a_syntax_error_points_at_the_open_bracket() {
        // The parser stops on line 3; the list opened on line 1 lacks its `]`.
        assert_eq!(
            fail("entries: [\n  {name: a, count: 1}\nother: 2\n"),
            (
                1,
                10,
                "unclosed bracket `[`: no closing `]` before line 3, where the parser stopped \
                 at 3:6 (illegal placement of ':' indicator) (add the closing `]` where the list \
                 ends)"
                    .to_owned()
            )
        );
    }
}
