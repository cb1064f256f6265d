//! A seeded, replayable, shrinking generator of conversation states and rewind requests.
//!
//! [`case`]`(seed, index)` returns case `index` of run `seed`: a fixture (YAML that loads with
//! [`crate::fixtures::parse_fixture`] and seeds into the spec schema), the rewind request to
//! ask of it and its [`Shape`], plus the proptest value tree to shrink it by hand. A case is a
//! random but valid state of spec sections 1 to 6: DMs, channels, reply threads (middle, tail,
//! archived, interleaved with their main line), humans and agents on every runtime with their
//! runtime sessions and recovery points, cold history, recalled messages, earlier rewinds'
//! tombstones, system messages and every projection kind of the fixture format. About half of
//! the requests are meant to complete; the others aim at one or more guards. The generator
//! never computes the expected outcome: that is an independent oracle's job.

mod build;
mod finish;
mod generate;
mod ids;
mod model;
mod recipe;
mod render;
mod sessions;
mod shape;
#[cfg(test)]
mod tests;

pub use generate::{
    case, case_name, case_rng, case_strategy, case_with, replay, CaseTree, GeneratedCase,
};
pub use model::*;
pub use recipe::GenConfig;
pub use render::render_fixture;
pub use shape::{Aim, Feature, Projection, Shape, SuffixLen, TargetScope};
