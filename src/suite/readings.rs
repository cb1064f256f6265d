//! What an implementation chose where the spec leaves a choice: the readings of the ambiguity
//! register it took ([`Readings`]), and the machine codes it gives each refusal ([`CodeTable`]).
//!
//! Section 9 defines refusal *messages*; the codes are the implementation's. Within one run the
//! codes must still be consistent: one code per section 9 message, distinct messages distinct
//! codes, and no other refusal (a failed restore, an unworded refusal) reusing a section 9
//! message's code. A capability profile may declare its codes (`errorCodes:`); then the declared
//! code is required.

use std::collections::BTreeMap;

/// Per scenario (feature path, line): the readings it recorded, ambiguity id to reading id.
pub type Readings = BTreeMap<(String, usize), BTreeMap<String, String>>;

/// Where a code was first seen.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    code: String,
    scenario: String,
}

/// The refusal codes an implementation has answered so far in this run.
#[derive(Debug, Default)]
pub struct CodeTable {
    /// Section 9 message to its code.
    spec: BTreeMap<String, Seen>,
    /// Codes of refusals that carry no section 9 message, to the message first seen with it.
    other: BTreeMap<String, (String, String)>,
}

impl CodeTable {
    /// Records a refusal. `spec_message` says whether `message` is one of section 9's;
    /// `declared` is the profile's code for it, if any. The error says what is inconsistent.
    pub fn observe(
        &mut self,
        message: &str,
        code: &str,
        spec_message: bool,
        declared: Option<&str>,
        scenario: &str,
    ) -> Result<(), String> {
        if let Some(want) = declared {
            if code != want {
                return Err(format!(
                    "refusal `{message}` carries code `{code}`, but the capability profile \
                     declares `{want}` for it"
                ));
            }
        }
        if spec_message {
            if let Some(seen) = self.spec.get(message) {
                if seen.code != code {
                    return Err(format!(
                        "refusal `{message}` carries code `{code}`, but carried `{}` in scenario \
                         `{}`: one section 9 error, one code",
                        seen.code, seen.scenario
                    ));
                }
                return Ok(());
            }
            if let Some((other, _)) = self.spec.iter().find(|(_, s)| s.code == code) {
                return Err(format!(
                    "refusal `{message}` carries code `{code}`, which `{other}` already carries: \
                     distinct section 9 errors need distinct codes"
                ));
            }
            if let Some((other, first)) = self.other.get(code) {
                return Err(format!(
                    "refusal `{message}` carries code `{code}`, which the refusal `{other}` (not \
                     a section 9 error, scenario `{first}`) already carries"
                ));
            }
            self.spec.insert(
                message.to_owned(),
                Seen {
                    code: code.to_owned(),
                    scenario: scenario.to_owned(),
                },
            );
        } else {
            if let Some((spec, _)) = self.spec.iter().find(|(_, s)| s.code == code) {
                return Err(format!(
                    "refusal `{message}` (not a section 9 error) carries code `{code}`, the code \
                     of `{spec}`: clients could not tell them apart"
                ));
            }
            self.other
                .entry(code.to_owned())
                .or_insert_with(|| (message.to_owned(), scenario.to_owned()));
        }
        Ok(())
    }

    /// Section 9 message to the code the implementation gave it.
    pub fn spec_codes(&self) -> BTreeMap<String, String> {
        self.spec
            .iter()
            .map(|(m, s)| (m.clone(), s.code.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_code_per_error_and_distinct_errors_distinct_codes() {
        let mut table = CodeTable::default();
        table.observe("a", "A", true, None, "s1").expect("first");
        table.observe("a", "A", true, None, "s2").expect("same");
        let err = table.observe("a", "B", true, None, "s3").unwrap_err();
        assert!(err.contains("`A`") && err.contains("s1"), "{err}");
        let err = table.observe("b", "A", true, None, "s4").unwrap_err();
        assert!(err.contains("distinct"), "{err}");
        let err = table
            .observe("restore", "A", false, None, "s5")
            .unwrap_err();
        assert!(err.contains("`a`"), "{err}");
        table
            .observe("restore", "R", false, None, "s6")
            .expect("own");
        let err = table.observe("c", "R", true, None, "s7").unwrap_err();
        assert!(err.contains("restore"), "{err}");
        let err = table.observe("d", "X", true, Some("D"), "s8").unwrap_err();
        assert!(err.contains("declares `D`"), "{err}");
        assert_eq!(table.spec_codes().len(), 1);
    }
}
