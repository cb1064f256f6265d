//! The guards of sections 3 and 4 that need no agent: who may rewind to before which message,
//! the suffix, its forks and the cascade.

use std::collections::BTreeSet;

use rewind_driver_protocol::{Actor, RewindRequest};

use super::predict::{CascadeBoundary, PrimaryBoundary, ThreadParent};
use super::readings as r;
use super::spec;
use super::state::{Author, Lifecycle, State};

/// A guard that trips: its section 9 message, and the readings under which it does when it
/// does not trip under every reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    /// The section 9 message.
    pub message: &'static str,
    /// `None` when the guard trips under every reading.
    pub doubt: Option<Doubt>,
}

/// The ambiguity that decides whether a guard trips.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Doubt {
    /// The ambiguity id.
    pub ambiguity: &'static str,
    /// Its reading under which the guard trips.
    pub trips: &'static str,
    /// Its reading under which the guard holds.
    pub holds: &'static str,
}

impl Finding {
    /// A guard that trips under every reading.
    pub fn sure(message: &'static str) -> Self {
        Finding {
            message,
            doubt: None,
        }
    }

    /// A guard that trips under the `trips` reading of `ambiguity` only.
    pub fn doubtful(
        message: &'static str,
        ambiguity: &'static str,
        trips: &'static str,
        holds: &'static str,
    ) -> Self {
        Finding {
            message,
            doubt: Some(Doubt {
                ambiguity,
                trips,
                holds,
            }),
        }
    }
}

/// How the planning of a request begins.
pub(crate) enum Start {
    /// Refused without a section 9 text: a non-human initiator, a missing target, a target
    /// outside the requested scope, an already rewound target.
    Unworded,
    /// A target to plan from.
    Planned(Box<Planned>),
}

/// A request whose target exists in its scope and is not rewound.
#[derive(Debug, Clone)]
pub(crate) struct Planned {
    /// The initiating human.
    pub initiator: String,
    /// The primary boundary.
    pub boundary: PrimaryBoundary,
    /// The guards that trip whatever the fork and agent readings.
    pub findings: Vec<Finding>,
    /// The live threads of the suffix's last message, and whether the target is that message
    /// (then they cascade under every reading).
    pub tail_fork: Option<(Vec<String>, bool)>,
    /// Whether the target is recalled or the initiator is no member of the scope (register
    /// `recalled-target-and-membership`).
    pub recalled_or_not_member: bool,
    /// Whether the scope is archived (oracle entry `archived-primary-scope`).
    pub archived_scope: bool,
    /// The primary scope's parent, when it is a reply thread.
    pub thread_parent: Option<ThreadParent>,
}

/// What happens to the live threads of the suffix's tail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fork {
    /// The tail has no live thread.
    None,
    /// These threads cascade.
    Cascade(Vec<String>),
    /// The tail's thread blocks the rewind (register `tail-fork-below-target`, `refuse`).
    Refuse,
}

/// Checks the initiator and the target, builds the primary boundary and runs the guards that
/// need neither the cascade nor the agents.
pub(crate) fn start(state: &State, request: &RewindRequest) -> Start {
    let Actor::Human(initiator) = &request.actor else {
        return Start::Unworded;
    };
    let Some(scope) = state.scope(&request.scope_id) else {
        return Start::Unworded;
    };
    let Some(target) = state.message(&request.target_message_id) else {
        return Start::Unworded;
    };
    if target.scope_id != scope.id || target.is_rewound() {
        return Start::Unworded;
    }
    let mut findings = Vec::new();
    match &target.author {
        Author::Human(author) if author == initiator => {}
        author if author.is_non_participant() => findings.push(Finding::sure(spec::SYSTEM_MESSAGE)),
        _ => findings.push(Finding::sure(spec::NOT_OWN_MESSAGE)),
    }
    let suffix: Vec<_> = state
        .visible_messages(&scope.id)
        .filter(|m| m.seq >= target.seq)
        .collect();
    if suffix.iter().any(|m| !m.is_hot()) {
        findings.push(Finding::sure(spec::HOT_COLD_BOUNDARY));
    }
    if suffix.iter().any(|m| other_human(&m.author, initiator)) {
        findings.push(Finding::sure(spec::OTHER_HUMAN));
    }
    if state
        .operations
        .values()
        .any(|o| o.status == "preparing" && o.thread_id == scope.id)
    {
        findings.push(Finding::sure(spec::REWIND_IN_PROGRESS));
    }
    let mut tail_fork = None;
    for (index, message) in suffix.iter().enumerate() {
        let threads: Vec<String> = state
            .live_threads_of(&message.id)
            .into_iter()
            .map(|s| s.id.clone())
            .collect();
        if threads.is_empty() {
            continue;
        }
        if index + 1 < suffix.len() {
            findings.push(Finding::sure(spec::LATER_REPLY_THREAD));
        } else {
            tail_fork = Some((threads, suffix.len() == 1));
        }
    }
    let member = state
        .memberships
        .values()
        .any(|m| m.scope_id == scope.id && m.user_id.as_deref() == Some(initiator));
    let thread_parent = match (&scope.parent_scope_id, &scope.parent_message_id) {
        (Some(scope_id), Some(message_id)) => Some(ThreadParent {
            scope_id: scope_id.clone(),
            message_id: message_id.clone(),
        }),
        _ => None,
    };
    dedupe(&mut findings);
    Start::Planned(Box::new(Planned {
        initiator: initiator.clone(),
        boundary: PrimaryBoundary {
            workspace_id: scope.workspace_id.clone(),
            scope_id: scope.id.clone(),
            target_message_id: target.id.clone(),
            from_seq: target.seq,
            message_ids: suffix.iter().map(|m| m.id.clone()).collect(),
        },
        findings,
        tail_fork,
        recalled_or_not_member: target.lifecycle() == Lifecycle::Recalled || !member,
        archived_scope: scope.archived,
        thread_parent,
    }))
}

/// The cascade boundaries `fork` makes, adding the cascade's guards (another human's message,
/// a cold message) and, for [`Fork::Refuse`], the later-reply-thread refusal to `findings`.
pub(crate) fn cascade(
    state: &State,
    planned: &Planned,
    fork: &Fork,
    findings: &mut Vec<Finding>,
) -> Vec<CascadeBoundary> {
    let threads = match fork {
        Fork::None => return Vec::new(),
        Fork::Refuse => {
            findings.push(Finding::sure(spec::LATER_REPLY_THREAD));
            dedupe(findings);
            return Vec::new();
        }
        Fork::Cascade(threads) => threads,
    };
    let Some(parent) = planned.boundary.message_ids.last() else {
        return Vec::new();
    };
    let mut cascades = Vec::new();
    for thread in threads {
        let messages: Vec<_> = state.visible_messages(thread).collect();
        if messages
            .iter()
            .any(|m| other_human(&m.author, &planned.initiator))
        {
            findings.push(Finding::sure(spec::OTHER_HUMAN));
        }
        if messages.iter().any(|m| !m.is_hot()) {
            findings.push(Finding::doubtful(
                spec::HOT_COLD_BOUNDARY,
                r::COLD_IN_CASCADE,
                "refused",
                "allowed",
            ));
        }
        cascades.push(CascadeBoundary {
            scope_id: thread.clone(),
            parent_message_id: parent.clone(),
            from_seq: 1,
            message_ids: messages.iter().map(|m| m.id.clone()).collect(),
        });
    }
    dedupe(findings);
    cascades
}

fn other_human(author: &Author, initiator: &str) -> bool {
    matches!(author, Author::Human(id) if id != initiator)
}

/// Keeps each finding once, and a doubtful one only when the same message does not surely
/// trip.
pub(crate) fn dedupe(findings: &mut Vec<Finding>) {
    let sure: BTreeSet<&'static str> = findings
        .iter()
        .filter(|f| f.doubt.is_none())
        .map(|f| f.message)
        .collect();
    let mut seen = Vec::new();
    for finding in findings.drain(..) {
        if finding.doubt.is_some() && sure.contains(finding.message) {
            continue;
        }
        if !seen.contains(&finding) {
            seen.push(finding);
        }
    }
    *findings = seen;
}
