//! The step library: Given (conversation state), When (operations), Then (observations).
//!
//! Steps talk to the implementation only through [`ConversationApi`] and to the database only
//! through the spec's tables.
//!
//! [`ConversationApi`]: rewind_conformance::sut::ConversationApi

mod bad_input;
#[cfg(feature = "browser")]
pub mod client;
mod db_faults;
mod delivery;
mod end_to_end;
mod given;
mod invariants;
mod lifecycle;
mod oracle;
mod race;
mod read_surfaces;
mod reads;
mod realtime;
mod runtime;
mod scrub;
mod storm;
mod then;
mod when;

pub use db_faults::DatabaseFault;
pub use oracle::ORACLE_STEP;

/// Splits `"a, b, c"` into ids.
pub(crate) fn id_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}
