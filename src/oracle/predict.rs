//! [`predict`]: the outcomes the spec allows for one rewind request on one database state.
//!
//! The spec leaves choices open (the ambiguity register), so a prediction is a set of
//! [`Alternative`]s, each with the readings under which it is the spec's answer. Guards are not
//! ordered (register `guard-order`): when several trip, each one's message is acceptable.

use std::collections::BTreeSet;

use rewind_driver_protocol::{Actor, RewindRequest};

use super::agents;
use super::guards::{self, Finding, Fork, Start};
use super::readings::{self as r, Readings};
use super::spec;
use super::state::State;

/// What the implementation under test restores: the runtime ids it declares (section 5's
/// `codex`, `claude`, `opencode`, `builtin`), and whether its runtime restores may fail in this
/// run (faults planted in the runtimes, a Codex release without `thread/rollback`).
///
/// An agent on a runtime outside [`Deployment::runtimes`], or on a runtime id that is not one
/// of section 5's (a recovery strategy name included), "does not support rewind".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployment {
    /// The runtime ids the implementation restores.
    pub runtimes: BTreeSet<String>,
    /// Whether a restore may fail: then every rewind that restores an agent may also end as a
    /// refusal worded as the implementation likes (register `restore-failure-wording`), with a
    /// `failed` or `repair_required` operation (register `restore-outcome-unknown`).
    pub restores_may_fail: bool,
}

impl Deployment {
    /// Every runtime of section 5, with restores that succeed.
    pub fn every_runtime() -> Self {
        Self::with_runtimes(spec::RUNTIMES)
    }

    /// Only these runtimes, with restores that succeed.
    pub fn with_runtimes<'a>(runtimes: impl IntoIterator<Item = &'a str>) -> Self {
        Deployment {
            runtimes: runtimes.into_iter().map(str::to_owned).collect(),
            restores_may_fail: false,
        }
    }

    /// The same deployment, with restores that may fail (or not).
    pub fn restores_may_fail(mut self, may_fail: bool) -> Self {
        self.restores_may_fail = may_fail;
        self
    }

    /// The runtimes a capability profile declares, with restores that succeed.
    pub fn for_profile(profile: &crate::profile::CapabilityProfile) -> Self {
        Self::with_runtimes(profile.runtimes.iter().map(String::as_str))
    }

    /// Whether an agent on `runtime` can be restored: the runtime is one of section 5's and the
    /// deployment declares it.
    pub fn restores(&self, runtime: &str) -> bool {
        spec::strategy_of(runtime).is_some() && self.runtimes.contains(runtime)
    }
}

/// The refusal messages an outcome accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefusalTexts {
    /// Exactly one of these section 9 messages (several when several guards trip).
    OneOf(BTreeSet<String>),
    /// Any message: the spec words no refusal for this case (register `unworded-refusals`).
    Any,
    /// Any message but these (a failed restore, register `restore-failure-wording`).
    AnyExcept(BTreeSet<String>),
}

impl RefusalTexts {
    /// Whether `message` is acceptable.
    pub fn accepts(&self, message: &str) -> bool {
        match self {
            RefusalTexts::OneOf(set) => set.contains(message),
            RefusalTexts::Any => true,
            RefusalTexts::AnyExcept(set) => !set.contains(message),
        }
    }
}

impl std::fmt::Display for RefusalTexts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |set: &BTreeSet<String>| {
            set.iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(" or ")
        };
        match self {
            RefusalTexts::OneOf(set) => f.write_str(&list(set)),
            RefusalTexts::Any => f.write_str("any message"),
            RefusalTexts::AnyExcept(set) => write!(f, "any message but {}", list(set)),
        }
    }
}

/// A refusal the spec allows: its acceptable messages and what it may leave behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The acceptable messages.
    pub texts: RefusalTexts,
    /// The statuses a `rewind_operations` row recording the refusal may have (one row at most,
    /// of the request's target on its scope; register `refusal-records-operation`).
    pub operation_statuses: BTreeSet<String>,
    /// Agents whose `runtime_session_id` may have changed (a restore that ran before another
    /// one failed; oracle entry `restore-session-pointer`).
    pub session_pointers_may_change: BTreeSet<String>,
}

impl Refusal {
    fn guard(texts: RefusalTexts) -> Self {
        Refusal {
            texts,
            operation_statuses: ["failed".to_owned()].into(),
            session_pointers_may_change: BTreeSet::new(),
        }
    }
}

/// The primary scope-local suffix boundary of section 2.1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrimaryBoundary {
    /// The scope's workspace.
    pub workspace_id: String,
    /// The primary (tombstone) scope; also the operation's `thread_id`.
    pub scope_id: String,
    /// The target, always `message_ids[0]`.
    pub target_message_id: String,
    /// The target's seq.
    pub from_seq: i64,
    /// The non-rewound messages of the scope with seq at or above `from_seq`, in seq order.
    pub message_ids: Vec<String>,
}

/// A cascaded reply-thread boundary of section 2.1: the whole live thread of the suffix's tail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CascadeBoundary {
    /// The child reply-thread scope, tombstoned and archived.
    pub scope_id: String,
    /// The suffix message it forks from.
    pub parent_message_id: String,
    /// Always 1.
    pub from_seq: i64,
    /// The thread's non-rewound messages in seq order.
    pub message_ids: Vec<String>,
}

/// The reply thread's parent when the primary scope is a reply thread: its summary is
/// recomputed (section 6.2) and its scope may announce it (register
/// `parent-refresh-after-thread-rewind`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadParent {
    /// The parent scope.
    pub scope_id: String,
    /// The parent message.
    pub message_id: String,
}

/// What a completed rewind does, in the spec's terms; the judge derives every expected row
/// from it and the state before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    /// The initiating human.
    pub initiator_user_id: String,
    /// The primary boundary.
    pub primary: PrimaryBoundary,
    /// The cascaded reply threads (the live threads of the suffix's tail message, when it
    /// cascades).
    pub cascades: Vec<CascadeBoundary>,
    /// The related agents under this alternative's reading of register `related-agents`.
    pub related_agents: BTreeSet<String>,
    /// The parent of the primary scope, when it is a reply thread.
    pub thread_parent: Option<ThreadParent>,
}

impl Effect {
    /// Every message the rewind tombstones: the primary suffix, then each cascade.
    pub fn rewound_ids(&self) -> Vec<String> {
        let mut ids = self.primary.message_ids.clone();
        for cascade in &self.cascades {
            ids.extend(cascade.message_ids.iter().cloned());
        }
        ids
    }

    /// Every scope the rewind tombstones in: the primary scope, then each cascade.
    pub fn tombstone_scopes(&self) -> Vec<String> {
        let mut scopes = vec![self.primary.scope_id.clone()];
        scopes.extend(self.cascades.iter().map(|c| c.scope_id.clone()));
        scopes
    }
}

/// One outcome the spec allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The rewind is refused and changes nothing.
    Refused(Refusal),
    /// The rewind completes with this effect.
    Completes(Box<Effect>),
}

/// An outcome with the readings under which the spec allows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alternative {
    /// The readings that lead to this outcome.
    pub readings: Readings,
    /// The outcome.
    pub outcome: Outcome,
}

/// The set of outcomes the spec allows for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prediction {
    /// The request predicted.
    pub request: RewindRequest,
    /// The acceptable outcomes, refusals and completions, each once.
    pub alternatives: Vec<Alternative>,
}

impl Prediction {
    /// The acceptable refusals with their readings.
    pub fn refusals(&self) -> impl Iterator<Item = (&Refusal, &Readings)> {
        self.alternatives.iter().filter_map(|a| match &a.outcome {
            Outcome::Refused(refusal) => Some((refusal, &a.readings)),
            Outcome::Completes(_) => None,
        })
    }

    /// The acceptable completions with their readings.
    pub fn completions(&self) -> impl Iterator<Item = (&Effect, &Readings)> {
        self.alternatives.iter().filter_map(|a| match &a.outcome {
            Outcome::Completes(effect) => Some((effect.as_ref(), &a.readings)),
            Outcome::Refused(_) => None,
        })
    }

    /// The initiating human, when the actor is one.
    pub fn initiator(&self) -> Option<&str> {
        match &self.request.actor {
            Actor::Human(id) => Some(id),
            _ => None,
        }
    }

    fn push(&mut self, readings: Readings, outcome: Outcome) {
        if let Some(same) = self.alternatives.iter_mut().find(|a| a.outcome == outcome) {
            same.readings.merge(&readings);
        } else {
            self.alternatives.push(Alternative { readings, outcome });
        }
    }
}

/// The outcomes the spec allows when `request` is made on `state` to an implementation that
/// restores what `deployment` says, with no concurrent writer.
///
/// Guards (sections 3, 4, 5, 7): a non-human initiator, a missing target, a target outside the
/// requested scope and an already rewound target are refused without a section 9 text
/// (register `unworded-refusals`); a target that is not the initiator's own human message,
/// a system/service/app target, a cold target or cold suffix, another human's message in the
/// suffix or a cascaded thread, a live reply thread on a suffix message before the tail, a
/// `preparing` operation on the scope, and each related agent's runtime guard refuse with
/// their section 9 message. Where a register entry (or an oracle entry of
/// [`ORACLE_AMBIGUITIES`](crate::oracle::ORACLE_AMBIGUITIES)) leaves a choice open, each reading contributes its outcome.
pub fn predict(state: &State, request: &RewindRequest, deployment: &Deployment) -> Prediction {
    let mut prediction = Prediction {
        request: request.clone(),
        alternatives: Vec::new(),
    };
    let start = match guards::start(state, request) {
        Start::Unworded => {
            prediction.push(
                Readings::new().with(r::UNWORDED_REFUSALS, "any-refusal"),
                Outcome::Refused(Refusal::guard(RefusalTexts::Any)),
            );
            return prediction;
        }
        Start::Planned(start) => start,
    };
    let mut base = Readings::new();
    for (ambiguity, refused) in [
        (
            r::RECALLED_TARGET_AND_MEMBERSHIP,
            start.recalled_or_not_member,
        ),
        (r::ARCHIVED_PRIMARY_SCOPE, start.archived_scope),
    ] {
        if refused {
            prediction.push(
                Readings::new().with(ambiguity, "refused"),
                Outcome::Refused(Refusal::guard(RefusalTexts::Any)),
            );
            base.take(ambiguity, "allowed");
        }
    }
    let forks: Vec<(Fork, Readings)> = match &start.tail_fork {
        None => vec![(Fork::None, Readings::new())],
        Some((threads, true)) => vec![(Fork::Cascade(threads.clone()), Readings::new())],
        Some((threads, false)) => vec![
            (
                Fork::Cascade(threads.clone()),
                Readings::new().with(r::TAIL_FORK_BELOW_TARGET, "cascade"),
            ),
            (
                Fork::Refuse,
                Readings::new().with(r::TAIL_FORK_BELOW_TARGET, "refuse"),
            ),
        ],
    };
    for (fork, fork_readings) in forks {
        let mut findings = start.findings.clone();
        let cascades = guards::cascade(state, &start, &fork, &mut findings);
        let effect_base = Effect {
            initiator_user_id: start.initiator.clone(),
            primary: start.boundary.clone(),
            cascades,
            related_agents: BTreeSet::new(),
            thread_parent: start.thread_parent.clone(),
        };
        for reading in [agents::WROTE_SUFFIX, agents::RECEIVED_OR_HOLDS_POINT] {
            let mut readings = base.clone();
            readings.merge(&fork_readings);
            readings.take(r::RELATED_AGENTS, reading);
            let mut effect = effect_base.clone();
            let mut findings = findings.clone();
            effect.related_agents = agents::related(state, &effect, reading);
            findings.extend(agents::findings(state, &effect, deployment));
            outcomes(&mut prediction, readings, findings, effect, deployment);
        }
    }
    prediction
}

/// Adds the outcomes of one combination of readings: a refusal when a guard surely trips,
/// else a completion, and a refusal too where a guard trips under some readings only.
fn outcomes(
    prediction: &mut Prediction,
    readings: Readings,
    findings: Vec<Finding>,
    effect: Effect,
    deployment: &Deployment,
) {
    let surely = findings.iter().any(|f| f.doubt.is_none());
    let texts: BTreeSet<String> = findings.iter().map(|f| f.message.to_owned()).collect();
    let either = |mut readings: Readings, texts: &BTreeSet<String>| {
        if texts.len() > 1 {
            readings.take(r::GUARD_ORDER, "either-guard");
        }
        readings
    };
    if surely {
        prediction.push(
            either(readings, &texts),
            Outcome::Refused(Refusal::guard(RefusalTexts::OneOf(texts))),
        );
        return;
    }
    if !findings.is_empty() {
        let mut refusing = readings.clone();
        for doubt in findings.iter().filter_map(|f| f.doubt.as_ref()) {
            refusing.take(doubt.ambiguity, doubt.trips);
        }
        prediction.push(
            either(refusing, &texts),
            Outcome::Refused(Refusal::guard(RefusalTexts::OneOf(texts))),
        );
    }
    let mut completing = readings;
    for doubt in findings.iter().filter_map(|f| f.doubt.as_ref()) {
        completing.take(doubt.ambiguity, doubt.holds);
    }
    // With no guard surely tripping, every related agent passed its runtime guards: each one
    // is restored, and each restore may fail.
    let restored = effect.related_agents.clone();
    if deployment.restores_may_fail && !restored.is_empty() {
        let failing = completing
            .clone()
            .with(r::RESTORE_FAILURE_WORDING, "own-wording")
            .with(r::RESTORE_FAILURE_WORDING, "runtime-guard-message")
            .with(r::RESTORE_OUTCOME_UNKNOWN, "failed")
            .with(r::RESTORE_OUTCOME_UNKNOWN, "repair-required");
        prediction.push(
            failing,
            Outcome::Refused(Refusal {
                texts: RefusalTexts::AnyExcept(
                    spec::NOT_A_RESTORE_FAILURE
                        .iter()
                        .map(|m| (*m).to_owned())
                        .collect(),
                ),
                operation_statuses: ["failed".to_owned(), "repair_required".to_owned()].into(),
                session_pointers_may_change: restored,
            }),
        );
    }
    prediction.push(completing, Outcome::Completes(Box::new(effect)));
}
