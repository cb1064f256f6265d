//! The oracle: an independent model of the Rewind spec (`rewind.md`, read with the ambiguity
//! register `features/ambiguities.yaml`) that predicts, from the database state before a rewind
//! and the request, every outcome the spec allows ([`predict`]), judges what an implementation
//! did ([`judge`]), and checks the invariants any sequence of rewinds and sends must keep
//! ([`consistency`]).
//!
//! Everything here is a pure function over [`DbSnapshot`](crate::inspect::DbSnapshot)s read as
//! [`State`]s: no database access, no async. It shares no code with the reference
//! implementation. Where neither the spec nor the register decides, every defensible reading is
//! accepted; those readings are listed in [`ORACLE_AMBIGUITIES`].

#![warn(missing_docs)]

mod agents;
mod consistency;
mod error;
mod guards;
mod judge;
mod predict;
pub mod readings;
pub mod spec;
mod state;
mod text;

#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;

pub use consistency::{consistency, Violation};
pub use error::OracleError;
pub use judge::{judge, Discrepancy, Judgement, Place};
pub use predict::{
    predict, Alternative, CascadeBoundary, Deployment, Effect, Outcome, Prediction,
    PrimaryBoundary, Refusal, RefusalTexts, ThreadParent,
};
pub use readings::{Readings, ORACLE_AMBIGUITIES};
pub use state::{
    ActivityEvent, Agent, Author, Lifecycle, Membership, Message, Operation, Outbox, RecoveryPoint,
    Row, Scope, State, Table, SPEC_TABLES,
};
pub use text::SuffixText;
