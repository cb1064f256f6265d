//! [`OracleError`]: a snapshot the oracle cannot read as the spec schema.

/// A snapshot that does not hold the spec schema's rows as the oracle needs them. Each variant
/// names the table, and where it can the row and the column, so that a fuzzer's or a step's
/// failure points at the broken data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OracleError {
    /// A spec table is missing from the snapshot altogether.
    #[error("the snapshot has no table `{table}`")]
    MissingTable {
        /// The spec table.
        table: String,
    },
    /// A row is not a JSON object.
    #[error("row {index} of `{table}` is not a JSON object: {detail}")]
    NotAnObject {
        /// The table.
        table: String,
        /// The row's position in the snapshot's sorted rows.
        index: usize,
        /// What the JSON parser said, or what the row held instead.
        detail: String,
    },
    /// A row lacks a column the spec schema defines.
    #[error("`{table}` row `{key}` has no column `{column}`")]
    MissingColumn {
        /// The table.
        table: String,
        /// The row's key.
        key: String,
        /// The missing column.
        column: String,
    },
    /// A column holds a value of the wrong type.
    #[error("`{table}` row `{key}` column `{column}` holds {found}, expected {expected}")]
    WrongType {
        /// The table.
        table: String,
        /// The row's key.
        key: String,
        /// The column.
        column: String,
        /// What the schema makes it.
        expected: &'static str,
        /// The JSON found.
        found: String,
    },
    /// Two rows of a table share a primary key.
    #[error("`{table}` holds two rows with key `{key}`")]
    DuplicateKey {
        /// The table.
        table: String,
        /// The key both rows have.
        key: String,
    },
}
