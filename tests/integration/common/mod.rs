//! Helpers the integration test modules share.

pub mod finished;
pub mod first_difference;
pub mod harness_env;
pub mod optional_tool;
pub mod suite_run;
