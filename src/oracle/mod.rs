//! The oracle: an independent model of the Rewind spec (`rewind.md`, read with the ambiguity
//! register `features/ambiguities.yaml`). This first part reads database snapshots as the spec
//! schema ([`State`]).
//!
//! Everything here is a pure function over [`DbSnapshot`](crate::inspect::DbSnapshot)s read as
//! [`State`]s: no database access, no async. It shares no code with the reference
//! implementation. Where neither the spec nor the register decides, every defensible reading is
//! accepted; those readings are listed in [`ORACLE_AMBIGUITIES`].

#![warn(missing_docs)]

mod error;
pub mod readings;
pub mod spec;
mod state;

#[cfg(test)]
mod testkit;

pub use error::OracleError;
pub use readings::{Readings, ORACLE_AMBIGUITIES};
pub use state::{
    ActivityEvent, Agent, Author, Lifecycle, Membership, Message, Operation, Outbox, RecoveryPoint,
    Row, Scope, State, Table, SPEC_TABLES,
};
