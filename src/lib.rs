//! `rewind-conformance`: a specification-driven conformance harness for the conversation
//! Rewind operation.
//!
//! The library holds the three stages of a run: loading (the rule [`catalog`], the YAML
//! [`fixtures`]), provisioning the shared PostgreSQL ([`postgres`]) and driving an implementation
//! through the [`sut`] contract. The binary adds the command line and the Gherkin step library.

pub mod bench;
#[cfg(feature = "browser")]
pub mod browser;
pub mod bundled;
pub mod catalog;
pub mod expectations;
pub mod fixtures;
pub mod fuzz;
pub mod input_file;
pub mod inspect;
pub mod leak_scan;
pub mod leftovers;
pub mod mocks;
pub mod oracle;
pub mod postgres;
pub mod profile;
pub mod real;
pub mod register_doc;
pub mod sut;
pub mod witness;
