//! The rule catalog.
