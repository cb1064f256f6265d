//! [`Discrepancy`] and [`Judgement`]: what the judge found, as readable fragments.

use std::fmt;

use crate::oracle::readings::Readings;

/// Where a discrepancy lies.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Place {
    /// A row of a table, and one of its columns when the difference is in one column.
    Row {
        /// The table.
        table: String,
        /// The row's primary key (columns joined by ` / `).
        key: String,
        /// The column, when one column differs.
        column: Option<String>,
    },
    /// A table as a whole (rows of a table the spec schema does not define).
    Table {
        /// The table.
        table: String,
    },
    /// A field of the implementation's answer.
    Answer {
        /// The field (`outcome`, `message`, `operationId`, `status`, `rewoundMessageIds`).
        field: String,
    },
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Row {
                table,
                key,
                column: Some(column),
            } => write!(f, "`{table}` row `{key}` column `{column}`"),
            Place::Row {
                table,
                key,
                column: None,
            } => write!(f, "`{table}` row `{key}`"),
            Place::Table { table } => write!(f, "table `{table}`"),
            Place::Answer { field } => write!(f, "answer field `{field}`"),
        }
    }
}

/// One difference between what the spec allows and what the implementation did.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Discrepancy {
    /// Where.
    pub place: Place,
    /// What the spec allows there, as a lowercase fragment.
    pub expected: String,
    /// What was found, as a lowercase fragment.
    pub actual: String,
}

impl fmt::Display for Discrepancy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: expected {}, found {}",
            self.place, self.expected, self.actual
        )
    }
}

/// The judge's verdict on one rewind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// What the implementation did is one of the outcomes the spec allows.
    Ok {
        /// The readings it took (those of the outcome it matched, and those its rows show).
        readings: Readings,
    },
    /// It is not: the differences from the closest allowed outcome.
    Wrong {
        /// The differences, in table order.
        discrepancies: Vec<Discrepancy>,
        /// The readings of the closest allowed outcome.
        readings: Readings,
    },
}

impl Judgement {
    /// Whether the implementation did what the spec allows.
    pub fn is_ok(&self) -> bool {
        matches!(self, Judgement::Ok { .. })
    }

    /// The discrepancies (none for [`Judgement::Ok`]).
    pub fn discrepancies(&self) -> &[Discrepancy] {
        match self {
            Judgement::Ok { .. } => &[],
            Judgement::Wrong { discrepancies, .. } => discrepancies,
        }
    }

    /// The readings taken, or those of the closest allowed outcome.
    pub fn readings(&self) -> &Readings {
        match self {
            Judgement::Ok { readings } | Judgement::Wrong { readings, .. } => readings,
        }
    }
}

impl fmt::Display for Judgement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Judgement::Ok { readings } if readings.is_empty() => f.write_str("as the spec allows"),
            Judgement::Ok { readings } => write!(f, "as the spec allows, reading {readings}"),
            Judgement::Wrong {
                discrepancies,
                readings,
            } => {
                write!(f, "{} discrepancies", discrepancies.len())?;
                if !readings.is_empty() {
                    write!(f, " from the closest allowed outcome ({readings})")?;
                }
                for d in discrepancies {
                    write!(f, "\n- {d}")?;
                }
                Ok(())
            }
        }
    }
}
