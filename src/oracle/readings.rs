//! [`Readings`]: which reading of each ambiguity an outcome follows, for reports; and the ids of
//! the ambiguities the oracle decides, those of the register (`features/ambiguities.yaml`) and
//! the ones it had to add ([`ORACLE_AMBIGUITIES`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// For each ambiguity id, the readings an outcome is consistent with. An alternative of a
/// prediction carries the readings under which the spec allows it; a judgement carries the
/// readings the implementation was seen to take.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Readings {
    map: BTreeMap<String, BTreeSet<String>>,
}

impl Readings {
    /// No reading recorded.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `reading` of `ambiguity` applies.
    pub fn take(&mut self, ambiguity: &str, reading: &str) {
        self.map
            .entry(ambiguity.to_owned())
            .or_default()
            .insert(reading.to_owned());
    }

    /// These readings and `reading` of `ambiguity`.
    pub fn with(mut self, ambiguity: &str, reading: &str) -> Self {
        self.take(ambiguity, reading);
        self
    }

    /// Adds every reading of `other`.
    pub fn merge(&mut self, other: &Readings) {
        for (ambiguity, readings) in &other.map {
            self.map
                .entry(ambiguity.clone())
                .or_default()
                .extend(readings.iter().cloned());
        }
    }

    /// The readings recorded for `ambiguity`, if any.
    pub fn get(&self, ambiguity: &str) -> Option<&BTreeSet<String>> {
        self.map.get(ambiguity)
    }

    /// Each ambiguity with its readings, by ambiguity id.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &BTreeSet<String>)> {
        self.map.iter()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl fmt::Display for Readings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (ambiguity, readings) in &self.map {
            if !first {
                f.write_str("; ")?;
            }
            first = false;
            let list: Vec<&str> = readings.iter().map(String::as_str).collect();
            write!(f, "`{ambiguity}`: {}", list.join(" or "))?;
        }
        Ok(())
    }
}

/// Register entry `tail-fork-below-target`.
pub const TAIL_FORK_BELOW_TARGET: &str = "tail-fork-below-target";
/// Register entry `related-agents`.
pub const RELATED_AGENTS: &str = "related-agents";
/// Register entry `recalled-target-and-membership`.
pub const RECALLED_TARGET_AND_MEMBERSHIP: &str = "recalled-target-and-membership";
/// Register entry `guard-order`.
pub const GUARD_ORDER: &str = "guard-order";
/// Register entry `unworded-refusals`.
pub const UNWORDED_REFUSALS: &str = "unworded-refusals";
/// Register entry `refusal-records-operation`.
pub const REFUSAL_RECORDS_OPERATION: &str = "refusal-records-operation";
/// Register entry `restore-failure-wording`.
pub const RESTORE_FAILURE_WORDING: &str = "restore-failure-wording";
/// Register entry `restore-outcome-unknown`.
pub const RESTORE_OUTCOME_UNKNOWN: &str = "restore-outcome-unknown";
/// Register entry `tombstone-rewound-at`.
pub const TOMBSTONE_REWOUND_AT: &str = "tombstone-rewound-at";
/// Register entry `notice-in-reply-summary`.
pub const NOTICE_IN_REPLY_SUMMARY: &str = "notice-in-reply-summary";
/// Register entry `failed-fanout-rows`.
pub const FAILED_FANOUT_ROWS: &str = "failed-fanout-rows";
/// Register entry `scrubbed-stream-event-shape`.
pub const SCRUBBED_STREAM_EVENT_SHAPE: &str = "scrubbed-stream-event-shape";
/// Register entry `scrubbed-index-shape`.
pub const SCRUBBED_INDEX_SHAPE: &str = "scrubbed-index-shape";
/// Register entry `notice-marks-sync-dirty`.
pub const NOTICE_MARKS_SYNC_DIRTY: &str = "notice-marks-sync-dirty";
/// Register entry `cursor-clamp-and-notice` (one reading: `clamp-before-notice`).
pub const CURSOR_CLAMP_AND_NOTICE: &str = "cursor-clamp-and-notice";
/// Register entry `parent-refresh-after-thread-rewind`.
pub const PARENT_REFRESH: &str = "parent-refresh-after-thread-rewind";
/// Register entry `api-rewound-ids`.
pub const API_REWOUND_IDS: &str = "api-rewound-ids";

/// Oracle entry `cold-in-cascade` (registered step-wide on the spec model's step).
pub const COLD_IN_CASCADE: &str = "cold-in-cascade";
/// Oracle entry `archived-primary-scope` (registered step-wide on the spec model's step).
pub const ARCHIVED_PRIMARY_SCOPE: &str = "archived-primary-scope";
/// Oracle entry `agent-without-machine` (registered step-wide on the spec model's step).
pub const AGENT_WITHOUT_MACHINE: &str = "agent-without-machine";
/// Oracle entry `required-point-position` (registered step-wide on the spec model's step).
pub const REQUIRED_POINT_POSITION: &str = "required-point-position";
/// Oracle entry `first-participation` (registered step-wide on the spec model's step).
pub const FIRST_PARTICIPATION: &str = "first-participation";
/// Oracle entry `weak-activity-elsewhere` (registered step-wide on the spec model's step).
pub const WEAK_ACTIVITY_ELSEWHERE: &str = "weak-activity-elsewhere";
/// Oracle entry `restore-session-pointer` (registered step-wide on the spec model's step).
pub const RESTORE_SESSION_POINTER: &str = "restore-session-pointer";
/// Oracle entry `operation-rewound-ids` (registered step-wide on the spec model's step).
pub const OPERATION_REWOUND_IDS: &str = "operation-rewound-ids";
/// Oracle entry `suppressed-row-payload` (registered step-wide on the spec model's step).
pub const SUPPRESSED_ROW_PAYLOAD: &str = "suppressed-row-payload";
/// Oracle entry `refusal-operation-id` (registered step-wide on the spec model's step).
pub const REFUSAL_OPERATION_ID: &str = "refusal-operation-id";

/// The ambiguities the oracle decides beyond those the scenarios met: each id with the question
/// and the readings the oracle accepts (every one of them). Each is in the register, step-wide
/// on `Then the outcome is what the spec model predicts` (a test holds them to it).
pub const ORACLE_AMBIGUITIES: [(&str, &str); 10] = [
    (
        COLD_IN_CASCADE,
        "A cascaded reply thread holds a cold message: does section 3's hot/cold guard cover the \
         cascade? Readings `refused` (the cascade crosses the boundary) and `allowed` (section 3 \
         speaks of the suffix of the target's scope).",
    ),
    (
        ARCHIVED_PRIMARY_SCOPE,
        "The scope to rewind is an archived reply thread: is its message still a visible hot \
         target? Readings `refused` (an unworded refusal: the thread's entry is gone) and \
         `allowed` (section 3 asks only for a visible, non-rewound hot message).",
    ),
    (
        AGENT_WITHOUT_MACHINE,
        "A related agent has no machine at all (`machine_id` null): is it available for \
         recovery? Readings `available` (nothing was deleted) and `unavailable` (there is no \
         machine to restore on).",
    ),
    (
        REQUIRED_POINT_POSITION,
        "The required recovery point is the agent's earliest one on a rewound message; when the \
         agent wrote or received a rewound message before that point, is the point still the \
         required one? Readings `earliest-point` (it is) and `before-first-touch` (a point must \
         precede the agent's first rewound message, else it is missing).",
    ),
    (
        FIRST_PARTICIPATION,
        "Where does an agent's \"first participation\" lie: at its earliest recovery point on a \
         rewound message, its first rewound message, or the first rewound message delivered to \
         it? Activity elsewhere between the earliest and the latest of these refuses under some \
         readings only.",
    ),
    (
        WEAK_ACTIVITY_ELSEWHERE,
        "Does activity elsewhere that left no lasting runtime change count: a failed delivery, \
         a recovery point without a delivery row, or a message that a later rewind tombstoned? \
         Readings `counts` and `ignored`; an answered or leased delivery and a visible agent \
         message always count.",
    ),
    (
        RESTORE_SESSION_POINTER,
        "May a restore change a related agent's `agents.runtime_session_id` (a claude restore \
         before the first input starts a fresh session)? Readings `kept` and `replaced`.",
    ),
    (
        OPERATION_REWOUND_IDS,
        "Which ids does the completed operation's `rewound_message_ids` hold? Readings \
         `every-rewound-message` (cascades included), `primary-boundary` and `not-recorded` (the \
         column keeps its default: the spec names no such column, so the tombstones are \
         attributed by the operation's target and notice).",
    ),
    (
        SUPPRESSED_ROW_PAYLOAD,
        "Does suppressing an activity event or an outbox row of the suffix also scrub its \
         payload? Readings `kept` (evidence, allowed by the leak scan) and `scrubbed` (the \
         payload no longer quotes the suffix); `leased_until` may be cleared with the status.",
    ),
    (
        REFUSAL_OPERATION_ID,
        "Which operation may a refusal's answer name? Readings `own-failed-record` (the failed \
         row it recorded) and `existing-operation` (e.g. the `preparing` one that refused it).",
    ),
];
