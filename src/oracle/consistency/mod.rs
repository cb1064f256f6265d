//! [`consistency`]: what holds in every state reached by any sequence of completed rewinds,
//! refused rewinds and live sends, for checks where the order of events is unknown (after a
//! storm of concurrent rewinds, after database faults).

mod operations;
mod projections;
mod rows;

use std::collections::BTreeSet;
use std::fmt;

use super::judge::Place;
use super::state::State;

/// One way a state breaks the spec's invariants.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    /// Where.
    pub place: Place,
    /// What is wrong, as a lowercase fragment.
    pub problem: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.problem)
    }
}

/// What the checks share.
pub(crate) struct Facts<'a> {
    pub state: &'a State,
    pub start: Option<&'a State>,
    /// Messages that were tombstones in the starting state: they are exempt from the checks of
    /// a tombstone's making (the fixtures write them without `rewoundAt` or operation).
    pub old_tombstones: BTreeSet<String>,
    /// The other tombstones.
    pub new_tombstones: BTreeSet<String>,
    /// Operations that were already `completed` in the starting state.
    pub old_completed: BTreeSet<String>,
}

impl Facts<'_> {
    fn violation(&self, out: &mut Vec<Violation>, place: Place, problem: impl Into<String>) {
        out.push(Violation {
            place,
            problem: problem.into(),
        });
    }
}

/// The spec's invariants that must hold in `state` whatever completed, refused or concurrent
/// rewinds and live sends led there from `start` (the state before any of them, when known).
///
/// - **Operations**: none is left `preparing`, every status is one of section 6.4's; every
///   id a completed operation lists is a tombstone, and every tombstone made since `start`
///   belongs to exactly one completed operation (a cascaded thread's messages may instead hang
///   off an operation that lists its primary boundary only: oracle entry
///   `operation-rewound-ids`). For each operation completed since `start`: its target is its
///   first listed message of its scope (`thread_id`), the messages of that scope between the
///   target and its last listed message are all tombstones (no half-tombstoned suffix), what it
///   lists outside its scope lies in reply threads of its last message, those threads are
///   archived and wholly tombstoned, and its notice (`rewind-notice:<id>`, a `system` message)
///   lies above its last listed message. A reply thread archived since `start` is the cascade
///   of a completed operation, and no live reply thread hangs off a new tombstone.
/// - **Transcript**: every tombstone made since `start` is a proper one (content `''`,
///   metadata only the rewound marker and `rewoundAt`); no message went away or came back
///   from a tombstone, and surviving messages are as they were (reply summaries aside).
/// - **Summaries**: in every scope holding such a tombstone, `visible_message_count`,
///   `latest_message_at` and `visible_last_message_at` follow the visible messages, the
///   high-water marks cover every message, a rewound thread parent counts no reply and a live
///   one no more than its threads' visible messages (a live send need not update it).
/// - **Read state**: in those scopes no read or dismiss cursor and no sync-dirty message
///   frontier lies past the visible tail (section 6.2); memberships and private grants are as
///   in `start`, cursors aside (section 10).
/// - **Projections**: no share card, reaction, pin, top notice, search document, source
///   (either side), message attachment, recovery point, unfinished outbox row or pending
///   activity event is bound to a tombstone made since `start`; no durable stream event or
///   conversation index entry of one keeps a content-bearing key, and none quotes its former
///   content (known from `start`).
pub fn consistency(state: &State, start: Option<&State>) -> Vec<Violation> {
    let old_tombstones = start.map(State::rewound_ids).unwrap_or_default();
    let new_tombstones = state
        .rewound_ids()
        .difference(&old_tombstones)
        .cloned()
        .collect();
    let old_completed = start
        .map(|s| {
            s.operations
                .values()
                .filter(|o| o.status == "completed")
                .map(|o| o.id.clone())
                .collect()
        })
        .unwrap_or_default();
    let facts = Facts {
        state,
        start,
        old_tombstones,
        new_tombstones,
        old_completed,
    };
    let mut out = Vec::new();
    operations::check(&facts, &mut out);
    rows::check(&facts, &mut out);
    projections::check(&facts, &mut out);
    out.sort();
    out.dedup();
    out
}
