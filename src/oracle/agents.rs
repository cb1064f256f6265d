//! The runtime guards of sections 3 and 5: which agents a rewind relates to, and whether each
//! can be restored.
//!
//! The oracle's reading of the data (the schema has no runtime-activity table):
//!
//! - **Related agents** (register `related-agents`): under `wrote-suffix` the authors of a
//!   rewound message; under `received-or-holds-point` also every agent with a fanout row of a
//!   rewound message (any status) or a recovery point on one.
//! - **The required recovery point** is the agent's recovery point on a rewound message with the
//!   smallest `global_seq`: the point written before the first rewound input reached it
//!   (section 5: "restore to before the target message entered the runtime"). None at all, or
//!   that point of another strategy than its runtime's (section 5's table), is "a required
//!   recovery point is missing". When the agent wrote a rewound message, or was delivered one
//!   (`delivered`, `leased` or `failed`), before that point, the point may not be the state
//!   before the agent's first rewound turn: refusing as missing is accepted beside completing
//!   (oracle entry `required-point-position`).
//! - **Availability**: the agent row exists and is not deleted, and its machine exists and is
//!   not deleted. An agent without a machine is accepted as available and as unavailable
//!   (oracle entry `agent-without-machine`).
//! - **First participation** is the agent's first touch of the rewound messages: its required
//!   point, its first rewound message, or the first rewound message delivered to it (oracle
//!   entry `first-participation`: after the last of these, activity elsewhere surely refuses;
//!   between the first and the last, refusing and completing are both accepted).
//! - **Activity in another conversation** is, in a scope the rewind does not tombstone, a
//!   message the agent wrote, a fanout row to it that is `delivered` or `leased` (a delivery it
//!   took, answered or not), with a `global_seq` after its first participation. Weaker traces
//!   (a `failed` delivery, a recovery point without such a row, activity on a message a later
//!   rewind tombstoned) are accepted as activity and as none (oracle entry
//!   `weak-activity-elsewhere`). Activity before the first participation never counts.

use std::collections::BTreeSet;

use super::guards::{dedupe, Finding};
use super::predict::{Deployment, Effect};
use super::readings as r;
use super::spec;
use super::state::{Message, State};

/// Register `related-agents`, reading `wrote-suffix`.
pub(crate) const WROTE_SUFFIX: &str = "wrote-suffix";
/// Register `related-agents`, reading `received-or-holds-point`.
pub(crate) const RECEIVED_OR_HOLDS_POINT: &str = "received-or-holds-point";

/// The agents related to `effect` under `reading` of register `related-agents`.
pub(crate) fn related(state: &State, effect: &Effect, reading: &str) -> BTreeSet<String> {
    let ids: BTreeSet<String> = effect.rewound_ids().into_iter().collect();
    let mut agents: BTreeSet<String> = ids
        .iter()
        .filter_map(|id| state.message(id))
        .filter_map(|m| match &m.author {
            super::state::Author::Agent(agent) => Some(agent.clone()),
            _ => None,
        })
        .collect();
    if reading == RECEIVED_OR_HOLDS_POINT {
        agents.extend(
            state
                .outbox
                .values()
                .filter(|o| o.recipient_kind == "agent")
                .filter(|o| o.message_id.as_ref().is_some_and(|m| ids.contains(m)))
                .map(|o| o.recipient_id.clone()),
        );
        agents.extend(
            state
                .recovery_points
                .values()
                .filter(|p| ids.contains(&p.message_id))
                .map(|p| p.agent_id.clone()),
        );
    }
    agents
}

/// The runtime guards that trip for the related agents of `effect`.
pub(crate) fn findings(state: &State, effect: &Effect, deployment: &Deployment) -> Vec<Finding> {
    let ids: BTreeSet<String> = effect.rewound_ids().into_iter().collect();
    let scopes: BTreeSet<String> = effect.tombstone_scopes().into_iter().collect();
    let mut findings = Vec::new();
    for agent in &effect.related_agents {
        findings.extend(agent_findings(state, agent, &ids, &scopes, deployment));
    }
    dedupe(&mut findings);
    findings
}

fn agent_findings(
    state: &State,
    agent_id: &str,
    ids: &BTreeSet<String>,
    scopes: &BTreeSet<String>,
    deployment: &Deployment,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let Some(agent) = state.agents.get(agent_id) else {
        return vec![Finding::sure(spec::AGENT_UNAVAILABLE)];
    };
    if agent.deleted {
        findings.push(Finding::sure(spec::AGENT_UNAVAILABLE));
    }
    match &agent.machine_id {
        Some(machine) if state.machines.get(machine) == Some(&false) => {}
        Some(_) => findings.push(Finding::sure(spec::AGENT_UNAVAILABLE)),
        None => findings.push(Finding::doubtful(
            spec::AGENT_UNAVAILABLE,
            r::AGENT_WITHOUT_MACHINE,
            "unavailable",
            "available",
        )),
    }
    let gseq = |id: &str| state.message(id).map(|m| m.global_seq);
    let mut points: Vec<(i64, &str)> = state
        .recovery_points
        .values()
        .filter(|p| p.agent_id == agent_id && ids.contains(&p.message_id))
        .filter_map(|p| gseq(&p.message_id).map(|g| (g, p.strategy.as_str())))
        .collect();
    points.sort();
    let point = points.first().copied();
    let wrote = ids
        .iter()
        .filter_map(|id| state.message(id))
        .filter(|m| authored_by(m, agent_id))
        .map(|m| m.global_seq)
        .min();
    let received = state
        .outbox
        .values()
        .filter(|o| o.recipient_kind == "agent" && o.recipient_id == agent_id)
        .filter(|o| matches!(o.status.as_str(), "delivered" | "leased" | "failed"))
        .filter_map(|o| o.message_id.as_deref())
        .filter(|m| ids.contains(*m))
        .filter_map(gseq)
        .min();
    match spec::strategy_of(&agent.runtime).filter(|_| deployment.restores(&agent.runtime)) {
        None => findings.push(Finding::sure(spec::AGENT_UNSUPPORTED)),
        Some(strategy) => match point {
            None => findings.push(Finding::sure(spec::RECOVERY_POINT_MISSING)),
            Some((_, used)) if used != strategy => {
                findings.push(Finding::sure(spec::RECOVERY_POINT_MISSING))
            }
            Some((at, _)) => {
                if wrote.into_iter().chain(received).any(|touch| touch < at) {
                    findings.push(Finding::doubtful(
                        spec::RECOVERY_POINT_MISSING,
                        r::REQUIRED_POINT_POSITION,
                        "before-first-touch",
                        "earliest-point",
                    ));
                }
            }
        },
    }
    let touches: Vec<i64> = point
        .map(|(g, _)| g)
        .into_iter()
        .chain(wrote)
        .chain(received)
        .collect();
    let (Some(first), Some(last)) = (touches.iter().min(), touches.iter().max()) else {
        return findings;
    };
    for (at, strong) in activity_elsewhere(state, agent_id, scopes) {
        if at > *last && strong {
            findings.push(Finding::sure(spec::CROSS_SCOPE_ACTIVITY));
        } else if at > *last {
            findings.push(Finding::doubtful(
                spec::CROSS_SCOPE_ACTIVITY,
                r::WEAK_ACTIVITY_ELSEWHERE,
                "counts",
                "ignored",
            ));
        } else if at > *first {
            findings.push(Finding::doubtful(
                spec::CROSS_SCOPE_ACTIVITY,
                r::FIRST_PARTICIPATION,
                "earliest-touch",
                "later-touch",
            ));
        }
    }
    findings
}

fn authored_by(message: &Message, agent_id: &str) -> bool {
    matches!(&message.author, super::state::Author::Agent(a) if a == agent_id)
}

/// The agent's traces outside `scopes`: the `global_seq` of each message it wrote or took or
/// was about to take, and whether the trace surely counts as activity.
fn activity_elsewhere(
    state: &State,
    agent_id: &str,
    scopes: &BTreeSet<String>,
) -> Vec<(i64, bool)> {
    let outside = |id: &str| state.message(id).filter(|m| !scopes.contains(&m.scope_id));
    let mut traces = Vec::new();
    for message in state.messages.values() {
        if authored_by(message, agent_id) && !scopes.contains(&message.scope_id) {
            traces.push((message.global_seq, !message.is_rewound()));
        }
    }
    for outbox in state.outbox.values() {
        if outbox.recipient_kind != "agent" || outbox.recipient_id != agent_id {
            continue;
        }
        let Some(message) = outbox.message_id.as_deref().and_then(outside) else {
            continue;
        };
        match outbox.status.as_str() {
            "delivered" | "leased" => traces.push((message.global_seq, !message.is_rewound())),
            "failed" => traces.push((message.global_seq, false)),
            _ => {}
        }
    }
    for point in state.recovery_points.values() {
        if point.agent_id != agent_id {
            continue;
        }
        if let Some(message) = outside(&point.message_id) {
            traces.push((message.global_seq, false));
        }
    }
    traces
}
