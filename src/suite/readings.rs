//! What an implementation chose where the spec leaves a choice: the readings of the ambiguity
//! register it took ([`Readings`]), and the machine codes it gives each refusal ([`CodeTable`],
//! [`RunCodes`]).
//!
//! Section 9 defines refusal *messages*; the codes are the implementation's. They must still be
//! consistent: one code per section 9 message, distinct messages distinct codes, and no other
//! refusal (a failed restore) reusing a section 9 message's code. A refusal the spec does not
//! word (register entry `unworded-refusals`: a non-human initiator, a target that is gone) may
//! carry any message and code, so it is not recorded at all.
//!
//! A scenario's verdict never depends on which other scenarios ran: a scenario checks its own
//! refusals against each other ([`CodeTable`], one per scenario) and against the codes the
//! capability profile declares (`errorCodes:`). Across scenarios, the run's refusals are
//! compared once at the end ([`RunCodes::review`], in a fixed order): a conflict there is a
//! finding of the run, not of a scenario. Declaring `errorCodes` turns every code check into a
//! per-scenario one.

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

/// One refusal as the run saw it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Observation {
    scenario: String,
    message: String,
    code: String,
    spec_message: bool,
}

/// Every refusal code the run's scenarios recorded, compared across scenarios at the end.
#[derive(Debug, Default)]
pub struct RunCodes {
    seen: std::collections::BTreeSet<Observation>,
}

/// What [`RunCodes::review`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CodeReview {
    /// Section 9 message to the code the implementation gave it (the first in the fixed order
    /// where it gave several).
    pub spec_codes: BTreeMap<String, String>,
    /// Each inconsistency between scenarios, in words.
    pub conflicts: Vec<String>,
}

impl RunCodes {
    /// Records a refusal a scenario accepted (after its own checks).
    pub fn record(&mut self, message: &str, code: &str, spec_message: bool, scenario: &str) {
        self.seen.insert(Observation {
            scenario: scenario.to_owned(),
            message: message.to_owned(),
            code: code.to_owned(),
            spec_message,
        });
    }

    /// Compares the recorded refusals with each other, in an order fixed by their contents (not
    /// by when the scenarios ran), so that the same refusals always give the same findings.
    pub fn review(&self) -> CodeReview {
        let mut table = CodeTable::default();
        let mut conflicts = Vec::new();
        for o in &self.seen {
            if let Err(e) = table.observe(&o.message, &o.code, o.spec_message, None, &o.scenario) {
                let finding = format!("scenario `{}`: {e}", o.scenario);
                if !conflicts.contains(&finding) {
                    conflicts.push(finding);
                }
            }
        }
        CodeReview {
            spec_codes: table.spec_codes(),
            conflicts,
        }
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

    #[test]
    fn the_runs_review_does_not_depend_on_the_order_scenarios_ran_in() {
        let observations = [
            ("agent refused", "a", "own-code", true),
            ("not own", "a", "not_own", true),
            ("other human", "b", "other_human", true),
            ("restore failed", "restore", "other_human", false),
        ];
        let mut forward = RunCodes::default();
        for (scenario, message, code, spec) in observations {
            forward.record(message, code, spec, scenario);
        }
        let mut backward = RunCodes::default();
        for (scenario, message, code, spec) in observations.iter().rev() {
            backward.record(message, code, *spec, scenario);
        }
        let review = forward.review();
        assert_eq!(review, backward.review());
        assert_eq!(review.conflicts.len(), 2, "{review:?}");
        assert!(review.conflicts[0].contains("one section 9 error, one code"));
        assert!(review.conflicts[1].contains("clients could not tell them apart"));
    }

    #[test]
    fn consistent_refusals_give_no_finding() {
        let mut run = RunCodes::default();
        run.record("a", "A", true, "s1");
        run.record("a", "A", true, "s2");
        run.record("b", "B", true, "s2");
        run.record("restore", "R", false, "s3");
        let review = run.review();
        assert!(review.conflicts.is_empty(), "{review:?}");
        assert_eq!(review.spec_codes.len(), 2);
    }
}
