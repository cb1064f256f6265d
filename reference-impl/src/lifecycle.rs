//! [`OperationStatus`] and the durable `rewind_operations` row (spec 6.4).
//!
//! A row is written `preparing` before restore and apply; the partial unique index on
//! `thread_id WHERE status = 'preparing'` makes it the per-scope lock that refuses a second
//! concurrent rewind. Every later status goes through [`OperationStatus`], never a literal.

use sqlx::{PgConnection, PgPool};

use crate::error::{DbContext, RewindError, SpecError};
use crate::plan::RewindPlan;
pub use crate::status::OperationStatus;

/// Records the plan as a `preparing` operation and returns its id.
///
/// Refuses with `another rewind is already in progress` when the primary scope already has a
/// `preparing` operation.
pub async fn begin(conn: &mut PgConnection, plan: &RewindPlan) -> Result<String, RewindError> {
    let id = uuid::Uuid::now_v7().to_string();
    let plan_json = serde_json::to_value(plan).unwrap_or(serde_json::Value::Null);
    let inserted = sqlx::query(
        "INSERT INTO rewind_operations \
         (id, workspace_id, thread_id, target_message_id, initiator_user_id, status, plan) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&id)
    .bind(&plan.boundary.primary.workspace_id)
    .bind(plan.operation_scope_id.as_str())
    .bind(&plan.boundary.primary.target_message_id)
    .bind(&plan.initiator_user_id)
    .bind(OperationStatus::Preparing.as_str())
    .bind(plan_json)
    .execute(conn)
    .await;
    match inserted {
        Ok(_) => Ok(id),
        Err(sqlx::Error::Database(e))
            if e.constraint() == Some("rewind_operations_one_preparing_idx") =>
        {
            Err(RewindError::refused(SpecError::RewindInProgress))
        }
        Err(source) => Err(RewindError::Database {
            action: "recording the preparing operation",
            source,
        }),
    }
}

/// Records a failure: `failed` before any restore, `repair_required` after one.
pub async fn fail(
    pool: &PgPool,
    operation_id: &str,
    status: OperationStatus,
    code: &str,
    message: &str,
) -> Result<(), RewindError> {
    sqlx::query(
        "UPDATE rewind_operations SET status = $2, error_code = $3, error_message = $4, \
         updated_at = now() WHERE id = $1",
    )
    .bind(operation_id)
    .bind(status.as_str())
    .bind(code)
    .bind(message)
    .execute(pool)
    .await
    .db("recording the operation failure")?;
    Ok(())
}

/// [`crate::Variant::Alternative`]: records a refusal made at planning time as a `failed`
/// operation of the requested scope and target, and returns its id. Nothing else changes.
///
/// The operation row references the scope, the target message and the initiating user, so a
/// refusal whose scope, target or (human) initiator does not exist cannot be recorded; then
/// nothing is written and `None` is returned.
pub async fn record_refusal(
    pool: &PgPool,
    scope_id: &str,
    target_message_id: &str,
    initiator_user_id: &str,
    code: &str,
    message: &str,
) -> Result<Option<String>, RewindError> {
    let id = uuid::Uuid::now_v7().to_string();
    let inserted = sqlx::query(
        "INSERT INTO rewind_operations \
         (id, workspace_id, thread_id, target_message_id, initiator_user_id, status, \
          error_code, error_message) \
         SELECT $1, s.workspace_id, s.id, m.id, u.id, $5, $6, $7 \
         FROM scopes s, scope_messages m, users u \
         WHERE s.id = $2 AND m.id = $3 AND u.id = $4",
    )
    .bind(&id)
    .bind(scope_id)
    .bind(target_message_id)
    .bind(initiator_user_id)
    .bind(OperationStatus::Failed.as_str())
    .bind(code)
    .bind(message)
    .execute(pool)
    .await
    .db("recording the refused operation")?;
    Ok((inserted.rows_affected() == 1).then_some(id))
}
