//! [`Expectations`]: an implementation's known failures, each with a reason, as
//! web-platform-tests keeps them.
//!
//! An expected failure does not fail the run; an expected failure that passes does (remove it
//! from the file), and so does an entry that names no scenario, so the file stays honest.
//!
//! ```yaml
//! # expectations.yaml
//! expected_failures:
//!   - scenario: "features/apply.feature: search documents of the suffix are scrubbed"
//!     reason: "our search index is rebuilt by a nightly job (ACME-1234)"
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::fixtures::Position;

/// One known failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectation {
    /// The feature file, as the run names it (`features/apply.feature`).
    pub feature: String,
    /// The scenario name, exactly as the run prints it.
    pub scenario: String,
    /// Why it fails.
    pub reason: String,
    /// Where the entry is.
    pub at: Position,
}

impl Expectation {
    /// Whether this entry names the scenario `name` of feature file `feature`.
    pub fn matches(&self, feature: &str, name: &str) -> bool {
        name == self.scenario
            && (feature == self.feature || feature.ends_with(&format!("/{}", self.feature)))
    }
}

/// The known failures of one implementation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expectations {
    /// The entries, in file order.
    pub entries: Vec<Expectation>,
    /// The file they came from.
    pub path: Option<PathBuf>,
}

/// An expectations file that cannot be used.
pub type ExpectationsError = crate::input_file::InputFileError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    expected_failures: Vec<Spanned<EntryDoc>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryDoc {
    scenario: String,
    reason: String,
}

impl Expectations {
    /// Reads an expectations file.
    pub fn load(path: &Path) -> Result<Self, ExpectationsError> {
        Self::parse(path, &crate::input_file::read("expectations file", path)?)
    }

    /// Parses expectations text; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ExpectationsError> {
        let doc: Doc = crate::input_file::parse_yaml(path, text)?;
        let mut entries: Vec<Expectation> = Vec::new();
        for item in doc.expected_failures {
            let at = Position {
                path: path.to_path_buf(),
                line: item.referenced.line(),
                column: item.referenced.column(),
            };
            let invalid = |message: String| ExpectationsError::Invalid {
                at: at.clone(),
                message,
            };
            let Some((feature, scenario)) = item.value.scenario.split_once(": ") else {
                return Err(invalid(format!(
                    "`{}` does not name a scenario (expected `<feature file>: <scenario name>`, \
                     e.g. `features/apply.feature: the suffix is tombstoned`)",
                    item.value.scenario
                )));
            };
            if item.value.reason.trim().is_empty() {
                return Err(invalid(
                    "an expected failure needs a `reason` (why it fails, and where it is tracked)"
                        .to_owned(),
                ));
            }
            let entry = Expectation {
                feature: feature.trim().to_owned(),
                scenario: scenario.trim().to_owned(),
                reason: item.value.reason.trim().to_owned(),
                at: at.clone(),
            };
            if let Some(first) = entries
                .iter()
                .find(|e| e.feature == entry.feature && e.scenario == entry.scenario)
            {
                return Err(invalid(format!(
                    "`{}` is listed twice (first at line {})",
                    item.value.scenario, first.at.line
                )));
            }
            entries.push(entry);
        }
        Ok(Expectations {
            entries,
            path: Some(path.to_path_buf()),
        })
    }

    /// The entry naming this scenario, if any.
    pub fn find(&self, feature: &str, name: &str) -> Option<&Expectation> {
        self.entries.iter().find(|e| e.matches(feature, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Expectations, ExpectationsError> {
        Expectations::parse(Path::new("expectations.yaml"), text)
    }

    #[test]
    fn entries_name_a_feature_and_a_scenario() {
        let e = parse(
            "expected_failures:\n  - scenario: \"features/apply.feature: a b\"\n    reason: slow index\n",
        )
        .expect("valid");
        assert!(e.find("features/apply.feature", "a b").is_some());
        assert!(e.find("/ci/work/features/apply.feature", "a b").is_some());
        assert!(e.find("features/apply.feature", "a").is_none());
        assert_eq!(e.entries[0].at.line, 2);
    }

    #[test]
    fn a_missing_reason_is_an_error_with_its_position() {
        let err = parse("expected_failures:\n  - scenario: \"f.feature: x\"\n    reason: \" \"\n")
            .expect_err("empty reason");
        let text = err.to_string();
        assert!(text.starts_with("expectations.yaml:2:"), "{text}");
        assert!(text.contains("needs a `reason`"), "{text}");
        let err = parse("expected_failures:\n  - scenario: \"f.feature: x\"\n").expect_err("none");
        assert!(err.to_string().contains("missing key `reason`"), "{err}");
    }

    #[test]
    fn a_scenario_without_its_feature_and_duplicates_are_errors() {
        let err = parse("expected_failures:\n  - scenario: x\n    reason: r\n").expect_err("bad");
        assert!(
            err.to_string().contains("does not name a scenario"),
            "{err}"
        );
        let twice = "expected_failures:\n  - scenario: \"f: x\"\n    reason: r\n  - scenario: \"f: x\"\n    reason: r\n";
        let err = parse(twice).expect_err("twice");
        assert!(
            err.to_string().contains("listed twice (first at line 2)"),
            "{err}"
        );
    }
}
