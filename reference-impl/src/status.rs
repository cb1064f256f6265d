//! [`OperationStatus`]: the stable lifecycle of a durable rewind operation (spec 6.4).
//!
//! It depends on nothing else in the crate, so both the lifecycle ([`crate::lifecycle`]) and
//! the errors that report a recorded status ([`crate::error`]) can use it.

/// The stable operation lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationStatus {
    /// Plan persisted; restore/apply not finished. The only status that blocks a new rewind.
    Preparing,
    /// Runtime restore and DB apply both succeeded.
    Completed,
    /// Failed before any runtime was restored; nothing was tombstoned.
    Failed,
    /// A runtime was restored but apply (or a later step) failed; needs a human to repair.
    RepairRequired,
}

impl OperationStatus {
    /// The value stored in `rewind_operations.status`.
    pub fn as_str(self) -> &'static str {
        match self {
            OperationStatus::Preparing => "preparing",
            OperationStatus::Completed => "completed",
            OperationStatus::Failed => "failed",
            OperationStatus::RepairRequired => "repair_required",
        }
    }
}
