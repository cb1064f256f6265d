//! [`Register`]: the ambiguity register (`features/ambiguities.yaml`), every point where the spec
//! leaves a choice open or where a step must decide what the spec's words mean, with the
//! readings the suite accepts.
//!
//! An entry is either *tagged* (the scenarios it affects carry `@ambiguity:<id>` and the entry
//! lists them; the gate checks both lists agree) or *step-wide* (it lists the step texts that
//! apply it wherever they are used). A step that accepts several readings records the one the
//! implementation took, and the run reports it.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::coverage::FeatureScan;

/// Tag prefix that links a scenario to a register entry.
pub const AMBIGUITY_TAG_PREFIX: &str = "ambiguity:";

/// What the suite does about an ambiguity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Every listed reading passes; the run reports which one the implementation took.
    AcceptEveryReading,
    /// One reading is required; `chosen` names it and `reason` says why the others are not
    /// defensible.
    OneReading,
}

/// One defensible (or considered) reading of the spec text.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reading {
    /// Stable id (`failed`, `repair-required`).
    pub id: String,
    /// What an implementation taking this reading does.
    pub text: String,
}

/// One register entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ambiguity {
    /// Stable kebab-case id, used in `@ambiguity:<id>` tags.
    pub id: String,
    /// Where the spec says it (`"6.4"`, `"9"`, `"inventory"`, `"protocol"`).
    pub section: String,
    /// The spec's own words, quoted verbatim (or `—` when the spec says nothing).
    pub spec: String,
    /// The question the text leaves open, in one or two sentences.
    pub question: String,
    /// The readings considered.
    pub readings: Vec<Reading>,
    /// accept-every-reading / one-reading.
    pub policy: Policy,
    /// one-reading only: the reading required.
    #[serde(default)]
    pub chosen: Option<String>,
    /// Why this policy.
    pub reason: String,
    /// Tagged entries: `<feature file>: <scenario name>` of every scenario tagged with it.
    #[serde(default)]
    pub scenarios: Vec<String>,
    /// Step-wide entries: the step texts (as written in the step definitions) that apply it.
    #[serde(default)]
    pub steps: Vec<String>,
    /// Entries no scenario can observe yet: why.
    #[serde(default)]
    pub untested: Option<String>,
}

impl Ambiguity {
    /// Whether `reading` is one of this entry's readings the suite accepts.
    pub fn accepts(&self, reading: &str) -> bool {
        match self.policy {
            Policy::AcceptEveryReading => self.readings.iter().any(|r| r.id == reading),
            Policy::OneReading => self.chosen.as_deref() == Some(reading),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RegisterFile {
    version: u32,
    ambiguities: Vec<Ambiguity>,
}

/// Why the register could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// The file could not be read.
    #[error("cannot read the ambiguity register `{}`: {source}", path.display())]
    Read {
        /// The register path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The YAML is malformed or has unknown keys (the message carries line and column).
    #[error("{}: {detail}", path.display())]
    Parse {
        /// The register path.
        path: PathBuf,
        /// The parser's message, with its location.
        detail: String,
    },
    /// An entry breaks a register rule.
    #[error("{}: ambiguity `{id}`: {detail}", path.display())]
    Invalid {
        /// The register path.
        path: PathBuf,
        /// The offending entry.
        id: String,
        /// What is wrong.
        detail: String,
    },
}

/// The loaded register, in file order.
#[derive(Debug, Clone, Default)]
pub struct Register {
    path: PathBuf,
    entries: Vec<Ambiguity>,
}

fn kebab(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !id.starts_with('-')
        && !id.ends_with('-')
}

impl Register {
    /// Loads and validates `path`.
    pub fn load(path: &Path) -> Result<Self, RegisterError> {
        let text = std::fs::read_to_string(path).map_err(|source| RegisterError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses and validates register text; `path` is only used in messages.
    pub fn parse(path: &Path, text: &str) -> Result<Self, RegisterError> {
        let file: RegisterFile =
            serde_saphyr::from_str(text).map_err(|e| RegisterError::Parse {
                path: path.to_path_buf(),
                detail: e.to_string(),
            })?;
        let invalid = |id: &str, detail: String| RegisterError::Invalid {
            path: path.to_path_buf(),
            id: id.to_owned(),
            detail,
        };
        if file.version != 1 {
            return Err(invalid(
                "-",
                format!(
                    "unsupported register `version: {}` (expected 1)",
                    file.version
                ),
            ));
        }
        let mut seen = HashSet::new();
        for entry in &file.ambiguities {
            let id = entry.id.as_str();
            if !kebab(id) {
                return Err(invalid(id, "ids are kebab-case lowercase ASCII".to_owned()));
            }
            if !seen.insert(id) {
                return Err(invalid(id, "duplicate id".to_owned()));
            }
            for (field, value) in [
                ("spec", &entry.spec),
                ("question", &entry.question),
                ("reason", &entry.reason),
            ] {
                if value.trim().is_empty() {
                    return Err(invalid(id, format!("empty `{field}`")));
                }
            }
            let mut readings = HashSet::new();
            for reading in &entry.readings {
                if !kebab(&reading.id) {
                    return Err(invalid(
                        id,
                        format!("reading id `{}` is not kebab-case", reading.id),
                    ));
                }
                if !readings.insert(reading.id.as_str()) {
                    return Err(invalid(id, format!("duplicate reading `{}`", reading.id)));
                }
            }
            match (entry.policy, &entry.chosen) {
                (Policy::AcceptEveryReading, None) if entry.readings.len() >= 2 => {}
                (Policy::AcceptEveryReading, None) => {
                    return Err(invalid(
                        id,
                        "`accept-every-reading` needs at least two readings".to_owned(),
                    ))
                }
                (Policy::AcceptEveryReading, Some(_)) => {
                    return Err(invalid(
                        id,
                        "`chosen` belongs to `one-reading` entries".to_owned(),
                    ))
                }
                (Policy::OneReading, Some(chosen)) if readings.contains(chosen.as_str()) => {}
                (Policy::OneReading, Some(chosen)) => {
                    return Err(invalid(
                        id,
                        format!("`chosen: {chosen}` is not one of its readings"),
                    ))
                }
                (Policy::OneReading, None) => {
                    return Err(invalid(
                        id,
                        "`one-reading` needs `chosen` (the required reading)".to_owned(),
                    ))
                }
            }
            let places = usize::from(!entry.scenarios.is_empty())
                + usize::from(!entry.steps.is_empty())
                + usize::from(entry.untested.is_some());
            if places != 1 {
                return Err(invalid(
                    id,
                    "give exactly one of `scenarios` (tagged), `steps` (step-wide) or \
                     `untested` (why no scenario observes it)"
                        .to_owned(),
                ));
            }
        }
        Ok(Register {
            path: path.to_path_buf(),
            entries: file.ambiguities,
        })
    }

    /// The register's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every entry, in file order.
    pub fn entries(&self) -> &[Ambiguity] {
        &self.entries
    }

    /// The entry with this id.
    pub fn get(&self, id: &str) -> Option<&Ambiguity> {
        self.entries.iter().find(|e| e.id == id)
    }

    /// Gate problems: `@ambiguity:` tags naming no entry, tagged entries whose scenario list
    /// differs from the scenarios carrying the tag (in the files `scan` read). `features` is the
    /// features directory (the entries name scenarios relative to it).
    pub fn check(&self, scan: &FeatureScan, features: &Path) -> Vec<String> {
        let mut problems = Vec::new();
        let mut tagged: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for tag in &scan.ambiguity_tags {
            let file = tag.file.strip_prefix(features).unwrap_or(&tag.file);
            let name = format!("{}: {}", file.display(), tag.scenario);
            match self.get(&tag.id) {
                Some(entry) if !entry.scenarios.is_empty() => {
                    tagged.entry(entry.id.as_str()).or_default().insert(name);
                }
                Some(_) => problems.push(format!(
                    "{}:{}:{}: tag `@ambiguity:{}`: the entry in {} is step-wide or untested; \
                     list the scenario under its `scenarios` instead",
                    tag.file.display(),
                    tag.line,
                    tag.column,
                    tag.id,
                    self.path.display()
                )),
                None => problems.push(format!(
                    "{}:{}:{}: tag `@ambiguity:{}` names no entry of {} (scenario `{}`)",
                    tag.file.display(),
                    tag.line,
                    tag.column,
                    tag.id,
                    self.path.display(),
                    tag.scenario
                )),
            }
        }
        for entry in self.entries.iter().filter(|e| !e.scenarios.is_empty()) {
            let listed: BTreeSet<String> = entry.scenarios.iter().cloned().collect();
            let carrying = tagged.remove(entry.id.as_str()).unwrap_or_default();
            for missing in carrying.difference(&listed) {
                problems.push(format!(
                    "{}: ambiguity `{}`: scenario `{missing}` carries the tag but is not listed",
                    self.path.display(),
                    entry.id
                ));
            }
            // A run of part of the features (`--features FILE`) cannot see the other files.
            let scanned = |name: &String| {
                scan.files.iter().any(|f| {
                    let file = f.strip_prefix(features).unwrap_or(f);
                    name.starts_with(&format!("{}: ", file.display()))
                })
            };
            for stale in listed.difference(&carrying).filter(|n| scanned(n)) {
                problems.push(format!(
                    "{}: ambiguity `{}`: lists `{stale}`, which no scenario tagged \
                     `@ambiguity:{}` matches",
                    self.path.display(),
                    entry.id,
                    entry.id
                ));
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENTRY: &str = "version: 1\nambiguities:\n  - id: a-b\n    section: \"6.4\"\n    spec: x\n    question: q\n    readings:\n      - id: one\n        text: t\n      - id: two\n        text: t\n    policy: accept-every-reading\n    reason: r\n    scenarios: [\"x.feature: s1\"]\n";

    #[test]
    fn a_valid_entry_loads_and_accepts_its_readings() {
        let register = Register::parse(Path::new("a.yaml"), ENTRY).expect("register");
        let entry = register.get("a-b").expect("entry");
        assert!(entry.accepts("one") && entry.accepts("two") && !entry.accepts("three"));
    }

    #[test]
    fn bad_entries_name_the_entry_and_the_problem() {
        let one = ENTRY.replace("accept-every-reading", "one-reading");
        let err = Register::parse(Path::new("a.yaml"), &one).unwrap_err();
        assert!(err.to_string().contains("`a-b`") && err.to_string().contains("chosen"));
        let both = ENTRY.replace("    reason: r\n", "    reason: r\n    steps: [s]\n");
        let err = Register::parse(Path::new("a.yaml"), &both).unwrap_err();
        assert!(err.to_string().contains("exactly one of"), "{err}");
        let typo = ENTRY.replace("question:", "qestion:");
        let err = Register::parse(Path::new("a.yaml"), &typo).unwrap_err();
        assert!(err.to_string().contains("line"), "{err}");
    }

    #[test]
    fn the_gate_compares_tags_with_the_listed_scenarios() {
        let register = Register::parse(Path::new("a.yaml"), ENTRY).expect("register");
        let dir = std::env::temp_dir().join(format!("rc-amb-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(
            dir.join("x.feature"),
            "Feature: f\n\n  @ambiguity:a-b\n  Scenario: s2\n    Given x\n\n  @ambiguity:nope\n  Scenario: s3\n    Given y\n",
        )
        .expect("write");
        let scan = super::super::scan_features(&dir).expect("scan");
        let problems = register.check(&scan, &dir);
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(problems
            .iter()
            .any(|p| p.contains("`x.feature: s2`") && p.contains("not listed")));
        assert!(problems.iter().any(|p| p.contains("`x.feature: s1`")));
        assert!(problems
            .iter()
            .any(|p| p.contains("x.feature:8:3") && p.contains("nope")));
    }
}
