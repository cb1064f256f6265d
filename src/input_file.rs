//! [`InputFileError`] and [`parse_yaml`]: the small YAML files a user hands the harness (a
//! capability profile, an expectations file), read with positioned errors.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_saphyr::Location;

use crate::fixtures::Position;

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
        let (at, message) = crate::fixtures::positioned_yaml_error(path, &e);
        InputFileError::Invalid { at, message }
    })
}
