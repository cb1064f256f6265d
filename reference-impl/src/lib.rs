//! `rewind-reference`: the reference implementation of the conversation Rewind operation on
//! PostgreSQL.
//!
//! It is the executable reading of the spec and the proof that every conformance scenario can
//! be satisfied. Modules mirror the spec: [`plan`] (the suffix boundary and scope roles),
//! [`guards`] (initiation constraints), [`lifecycle`] (the durable operation), [`apply`] (the
//! one-transaction tombstone), [`recompute`] (summaries and read-state clamps) and [`realtime`]
//! (post-commit invalidation and the rewind notice), joined by [`Rewinder`]. [`Variant`] picks
//! the reading taken where the spec leaves a choice open. [`delivery`] is the daemon's live
//! delivery, which commits the recovery points a rewind later restores.

pub mod apply;
pub mod capabilities;
pub mod delivery;
pub mod driver;
pub mod error;
pub mod gc;
pub mod guards;
pub mod lifecycle;
pub mod messages;
pub mod plan;
pub mod reads;
pub mod realtime;
pub mod recompute;
pub mod recovery;
pub mod restore_failure;
pub mod runtimes;
pub mod scrub;
pub mod server;
mod service;
pub mod sql;
pub mod status;
pub mod surfaces;
pub mod variant;

pub use error::{RewindError, SpecError};
pub use plan::{RewindPlan, ScopeId, SuffixBoundary};
pub use service::{Actor, RewindCommand, RewindOutcome, Rewinder};
pub use status::OperationStatus;
pub use variant::Variant;

/// The spec schema, embedded: the tables and column names every implementation shares.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");
