//! [`Variant`]: which defensible reading the reference takes where the spec leaves a choice open.
//!
//! [`Variant::Recommended`] is the reference as it has always behaved (and the codes the rule
//! catalog recommends). [`Variant::Alternative`] takes the other defensible reading at every such
//! point; it exists to prove that the conformance suite accepts every spec-correct
//! implementation, not only the recommended one. Each difference lives where its behaviour
//! lives, switched on the variant:
//!
//! 1. refusal codes: `RW-E…` codes instead of the catalog's ([`crate::SpecError::code_for`],
//!    [`crate::RewindError::code_for`]);
//! 2. the message of a failed runtime restore ([`crate::RewindError::answer_message`]);
//! 3. a restore whose outcome is unknown (hang, crash, success without effect) is
//!    `repair_required`, not `failed` (`Rewinder::restore_runtimes`);
//! 4. failed fanout rows of the suffix are suppressed as unfinished; scrubbed stream events keep a `"rewound": true` marker, scrubbed conversation index rows
//!    point `lastMessage` at the last visible message ([`crate::scrub::scrub_suffix_facts`]);
//! 5. and 6. the rewind notice is written inside the apply transaction, after the scope's
//!    recompute (read cursors are still clamped to the surviving messages: clamping against a
//!    tail that includes the notice would lower no cursor, see the ambiguity register entry
//!    `cursor-clamp-and-notice`): it counts as a reply and marks message sync dirty
//!    ([`crate::apply::apply_rewind`]);
//! 7. (none: see 5.)
//! 8. refusals at planning time are recorded as `failed` operations
//!    ([`crate::lifecycle::record_refusal`]);
//! 9. `rewoundAt` sits at the top level of the tombstone metadata ([`crate::apply`]);
//! 10. only the target's own reply thread cascades ([`crate::guards::check_forks`]);
//! 11. a reply-thread rewind's `conversation:rewound` also goes to the thread scope
//!     ([`crate::realtime::publish_rewound`]);
//! 12. `rewoundMessageIds` lists the primary boundary only (`Rewinder::rewind`);
//! 13. the plan is made under the scope's row lock, which is taken before planning
//!     (`Rewinder::plan_and_begin`);
//! 14. the refusal of a non-human initiator, which the spec does not word, reuses a section 9
//!     message under its own code ([`crate::RewindError::answer_message`]).

use std::fmt;
use std::str::FromStr;

/// The reading the reference takes where the spec leaves a choice open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Variant {
    /// The recommended readings and the catalog's codes (the default).
    #[default]
    Recommended,
    /// The other defensible reading wherever the spec leaves a choice open: `RW-E…` codes,
    /// unknown restore outcomes recorded as `repair_required`, refusals recorded as `failed`
    /// operations, the notice counted as a reply and as a sync change, planning under the
    /// scope's row lock, and more (see the crate's `variant` module).
    Alternative,
}

impl Variant {
    /// Every variant.
    pub const ALL: [Variant; 2] = [Variant::Recommended, Variant::Alternative];

    /// The name used on the command line and in `REWIND_REFERENCE_VARIANT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::Recommended => "recommended",
            Variant::Alternative => "alternative",
        }
    }

    /// Whether this is [`Variant::Alternative`].
    pub fn is_alternative(self) -> bool {
        self == Variant::Alternative
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown variant `{0}` (expected `recommended` or `alternative`)")]
pub struct UnknownVariant(pub String);

impl FromStr for Variant {
    type Err = UnknownVariant;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Variant::ALL
            .into_iter()
            .find(|v| v.as_str() == text)
            .ok_or_else(|| UnknownVariant(text.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_the_default_is_recommended() {
        assert_eq!(Variant::default(), Variant::Recommended);
        for v in Variant::ALL {
            assert_eq!(v.as_str().parse::<Variant>(), Ok(v));
            assert_eq!(v.to_string(), v.as_str());
            let possible = clap::ValueEnum::to_possible_value(&v).expect("a value");
            assert_eq!(possible.get_name(), v.as_str());
        }
        let err = "Alternative".parse::<Variant>().unwrap_err();
        assert!(err.to_string().contains("`Alternative`"), "{err}");
        assert!("".parse::<Variant>().is_err());
    }
}
