//! The system-under-test contract.
