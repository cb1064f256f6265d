//! [`Applicability`]: what the declared [`CapabilityProfile`] does to each scenario, applied by
//! [`ProfileParser`] as the features are parsed (after outline examples are expanded, so every
//! example is judged on its own).
//!
//! - A scenario that reads through an undeclared optional surface cannot be checked: it is
//!   left out of the run and reported as not applicable, with the surface named.
//! - A scenario whose rewind reaches an agent on an undeclared runtime is not skipped: it is
//!   rewritten to check what the spec requires of an implementation without that runtime, that
//!   the rewind is refused as unsupported (section 9), changes nothing, and calls no runtime.
//!   Which agents a rewind reaches is read from the scenario's fixture, as the spec builds the
//!   suffix ([`reached_runtimes`]): the authors of the suffix's non-rewound messages (and of the
//!   live reply thread of its tail, the one cascade), the agents they were fanned out to, and
//!   the agents holding a recovery point on them.

use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use cucumber::gherkin::{Feature, Scenario, Step, StepType};
use cucumber::parser::{self, Parser};
use futures::{Stream, StreamExt as _};
use regex::Regex;
use rewind_conformance::fixtures::{Author, Fixture, Message, Party, Scope};
use rewind_conformance::profile::{CapabilityProfile, RUNTIMES};

/// A scenario the profile took out of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotApplicable {
    /// The feature file (as reports name it).
    pub feature: String,
    /// The scenario's line.
    pub line: usize,
    /// The scenario's name.
    pub name: String,
    /// Why (`surface `message-sync` is not declared`).
    pub reason: String,
    /// The scenario's tags (feature and rule tags included), for run filters.
    pub tags: Vec<String>,
}

/// The step that opens a client scenario's page.
const BROWSER_STEP: &str = r#"^the browser shows scope "[^"]+" to human "#;

/// Steps that read through an optional surface, by surface (the read surfaces' step is added
/// per surface in [`Applicability::new`]).
const SURFACE_STEPS: &[(&str, &str)] = &[
    ("delivery", r#"^message "[^"]+" is delivered$"#),
    ("delivery", r#"^human "[^"]+" has said "[^"]+" to agent "#),
    (
        "delivery",
        r#"^human "[^"]+" starts sending .*, then its delivery$"#,
    ),
    (
        "read-state",
        r#"^human "[^"]+" has \d+ unread messages? in scope "#,
    ),
    (
        "read-state",
        r#"^the read cursor of human "[^"]+" in scope "#,
    ),
    ("message-sync", r#"^human "[^"]+" syncs scope "#),
    // The client scenarios: a browser client, and the implementation's surfaces its page shows
    // (`protocol/CLIENT.md`: the gateway answers the page through them).
    ("browser-client", BROWSER_STEP),
    ("message-sync", BROWSER_STEP),
    ("read-state", BROWSER_STEP),
    ("history", BROWSER_STEP),
    ("search", BROWSER_STEP),
    ("share-cards", BROWSER_STEP),
    ("conversation-index", BROWSER_STEP),
    ("message-sync", r#"^the sync page holds "#),
    (
        "recovery-point-gc",
        r#"^the recovery points of agent "[^"]+" are pruned$"#,
    ),
];

/// Steps that keep their meaning when a scenario is rewritten for an undeclared runtime: the
/// conversation and the state of its agents.
const STATE_STEPS: [&str; 3] = [
    r#"^the conversation "[^"]+"$"#,
    r#"^agent "[^"]+" has this problem: "#,
    r#"^the runtime of agent "[^"]+" is recorded as "#,
];

/// Steps a real runtime cannot serve under `--runtimes real`, with why: a scenario holding one
/// is reported not applicable with the reason.
const MOCK_ONLY_STEPS: &[(&str, &str)] = &[
    (
        r#"^the (?:codex|claude|opencode) runtime answers the restore of agent "[^"]+" with "(?:busy|unknown session|success-without-effect)"$"#,
        "it plants a fault only the runtime itself could answer that way; the journaling proxy in \
         front of a real runtime injects `error`, `hang` and `crash`",
    ),
    (
        r#"^agent "[^"]+" fails its next delivery with "(?:busy|unknown session|success-without-effect)"$"#,
        "it plants a delivery fault only the runtime itself could answer that way; the \
         journaling proxy in front of a real runtime injects `error`, `hang` and `crash`",
    ),
    (
        r#"^the opencode runtime answers the restore of agent "[^"]+" with "crash"$"#,
        "it crashes the OpenCode server inside one call; in front of a real server the \
         journaling proxy injects `error` and `hang`",
    ),
];

/// The tag of a scenario that only a real runtime can serve (it reads what the runtime sent its
/// model): not applicable on the mocks.
pub const REAL_ONLY_TAG: &str = "real-runtimes";

/// Whether a fixture's runtime session holds a turn without its answer: a codex turn without
/// `output_message`, or a claude or OpenCode user entry not followed by an assistant one.
fn holds_unanswered_turn(session: &serde_json::Value) -> bool {
    use serde_json::Value;
    if let Some(turns) = session.get("turns").and_then(Value::as_array) {
        return turns
            .iter()
            .any(|t| t.get("output_message").is_none_or(Value::is_null));
    }
    let entries = session
        .get("transcript")
        .or_else(|| session.get("messages"))
        .and_then(Value::as_array);
    let roles: Vec<&str> = entries
        .into_iter()
        .flatten()
        .filter_map(|e| {
            e.get("type")
                .or_else(|| e.get("role"))
                .and_then(Value::as_str)
        })
        .collect();
    roles
        .iter()
        .enumerate()
        .any(|(i, r)| *r == "user" && roles.get(i + 1) != Some(&"assistant"))
}

/// What `--runtimes real` does to scenarios: the releases of the run, and the steps no real
/// runtime serves.
struct RealRuntimes {
    /// The run's release per runtime (`codex`, `claude`, `opencode`).
    releases: BTreeMap<&'static str, String>,
    mock_only: Vec<(Regex, &'static str)>,
    codex_release: Regex,
}

/// The profile's effect on scenarios, for one run.
pub struct Applicability {
    profile: CapabilityProfile,
    fixtures: Arc<BTreeMap<String, Fixture>>,
    unsupported_message: String,
    surface_steps: Vec<(&'static str, Regex)>,
    state_steps: Vec<Regex>,
    conversation: Regex,
    rewind: Regex,
    refused_with: Regex,
    left_out: Mutex<Vec<NotApplicable>>,
    parsed: Mutex<Vec<(String, String)>>,
    real: Option<RealRuntimes>,
}

impl Applicability {
    /// The effect of `profile`; `unsupported_message` is section 9's text for an unsupported
    /// runtime.
    pub fn new(
        profile: CapabilityProfile,
        fixtures: Arc<BTreeMap<String, Fixture>>,
        unsupported_message: String,
    ) -> Self {
        let re = |pattern: &str| Regex::new(pattern).unwrap_or_else(|e| unreachable!("{e}"));
        Applicability {
            profile,
            fixtures,
            unsupported_message,
            surface_steps: SURFACE_STEPS
                .iter()
                .map(|(s, p)| (*s, re(p)))
                .chain(rewind_conformance::profile::READ_SURFACES.iter().map(|s| {
                    let step = format!(r#"^(?:human|agent) "[^"]+" reads the {s} of scope "#);
                    (*s, re(&step))
                }))
                .collect(),
            state_steps: STATE_STEPS.iter().map(|p| re(p)).collect(),
            conversation: re(r#"^the conversation "([^"]+)"$"#),
            // A rewind step, and the steps that start one while another is held or with a
            // database fault; the step that starts several at once names their targets.
            rewind: re(
                r#"^(?:(human|agent) "([^"]+)" (?:starts rewinding|rewinds)(?: scope "([^"]+)")? to before message "([^"]+)"(?: while the started rewind .+| with a "[^"]+" fault .+)?|the system rewinds to before message "([^"]+)"|\d+ rewinds by (human) "([^"]+)" to before messages "([^",]+)[^"]*" start at once)$"#,
            ),
            refused_with: re(r#"^the rewind is refused with "([^"]+)"$"#),
            left_out: Mutex::new(Vec::new()),
            parsed: Mutex::new(Vec::new()),
            real: None,
        }
    }

    /// The scenarios run on real runtimes of `releases` (`codex`, `claude`, `opencode` to a
    /// version): a scenario that needs what only a mock does is left out, with the reason.
    pub fn with_real_runtimes(mut self, releases: BTreeMap<&'static str, String>) -> Self {
        let re = |pattern: &str| Regex::new(pattern).unwrap_or_else(|e| unreachable!("{e}"));
        self.real = Some(RealRuntimes {
            releases,
            mock_only: MOCK_ONLY_STEPS.iter().map(|(p, r)| (re(p), *r)).collect(),
            codex_release: re(r#"^the codex runtime is release "([^"]+)"$"#),
        });
        self
    }

    /// Why a scenario cannot run on the run's real runtimes, if it cannot.
    fn real_unavailable(&self, steps: &[&Step]) -> Option<String> {
        let real = self.real.as_ref()?;
        let unanswered = steps.iter().find_map(|s| {
            let name = self.conversation.captures(&s.value)?[1].to_owned();
            let fixture = self.fixtures.get(&name)?;
            fixture
                .runtime_sessions
                .iter()
                .find(|(_, session)| holds_unanswered_turn(session))
                .map(|(agent, _)| (name, agent.clone()))
        });
        if let Some((fixture, agent)) = unanswered {
            return Some(format!(
                "real runtimes: fixture `{fixture}` seeds a turn of agent `{agent}` that the \
                 agent has not answered, and a real runtime answers every turn it is given"
            ));
        }
        steps.iter().find_map(|step| {
            if let Some(c) = real.codex_release.captures(&step.value) {
                let run = real
                    .releases
                    .get("codex")
                    .map(String::as_str)
                    .unwrap_or("?");
                return (&c[1] != run).then(|| {
                    format!(
                        "it runs on Codex {}, and this run's real Codex is {run} (run it with \
                         `--runtime-release codex={}`)",
                        &c[1], &c[1]
                    )
                });
            }
            real.mock_only
                .iter()
                .find(|(re, _)| re.is_match(&step.value))
                .map(|(_, why)| format!("real runtimes: {why}"))
        })
    }

    /// Whether the profile declares optional surface `surface`.
    pub fn declares(&self, surface: &str) -> bool {
        self.profile.surfaces.contains(surface)
    }

    /// The declared profile.
    pub fn profile(&self) -> &CapabilityProfile {
        &self.profile
    }

    /// The scenarios left out so far.
    pub fn not_applicable(&self) -> Vec<NotApplicable> {
        self.left_out
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Every scenario parsed, before filters (feature path, name as the run prints it).
    pub fn parsed(&self) -> Vec<(String, String)> {
        self.parsed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Records a scenario that another shard of the run executes: it is not run here, but it
    /// still counts as parsed, under the name a run would give it (so an expectations entry
    /// naming it is not stale in this shard).
    pub fn note_elsewhere(&self, path: &str, background: &[Step], scenario: &Scenario) {
        let steps: Vec<Step> = background.iter().chain(&scenario.steps).cloned().collect();
        let all: Vec<&Step> = steps.iter().collect();
        let name = self.adapt_runtimes(&all, scenario.clone()).name;
        self.parsed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((path.to_owned(), name));
    }

    /// Applies the profile to every scenario of `feature`.
    pub fn adapt(&self, mut feature: Feature) -> Feature {
        let path = super::collector::feature_path(&feature);
        let background = feature
            .background
            .as_ref()
            .map(|b| b.steps.clone())
            .unwrap_or_default();
        feature.scenarios = std::mem::take(&mut feature.scenarios)
            .into_iter()
            .filter_map(|s| self.adapt_scenario(&path, &background, s))
            .collect();
        for rule in &mut feature.rules {
            let mut steps = background.clone();
            steps.extend(rule.background.iter().flat_map(|b| b.steps.clone()));
            rule.scenarios = std::mem::take(&mut rule.scenarios)
                .into_iter()
                .filter_map(|s| self.adapt_scenario(&path, &steps, s))
                .collect();
        }
        feature
    }

    fn adapt_scenario(
        &self,
        path: &str,
        background: &[Step],
        scenario: Scenario,
    ) -> Option<Scenario> {
        let steps: Vec<Step> = background.iter().chain(&scenario.steps).cloned().collect();
        let all: Vec<&Step> = steps.iter().collect();
        let scenario = self.adapt_runtimes(&all, scenario);
        self.parsed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((path.to_owned(), scenario.name.clone()));
        let reason = self.leave_out_reason(&all, &scenario.tags);
        if let Some(reason) = reason {
            let mut left_out = self.left_out.lock().unwrap_or_else(|p| p.into_inner());
            left_out.push(NotApplicable {
                feature: path.to_owned(),
                line: scenario.position.line,
                name: scenario.name.clone(),
                reason,
                tags: scenario.tags.clone(),
            });
            return None;
        }
        Some(scenario)
    }

    /// Whether the profile lets a scenario with these steps (its backgrounds' first) and tags
    /// run; what [`Applicability::adapt`] keeps, without recording anything.
    pub fn runs(&self, steps: &[Step], tags: &[String]) -> bool {
        let all: Vec<&Step> = steps.iter().collect();
        self.leave_out_reason(&all, tags).is_none()
    }

    /// Why the profile leaves a scenario out, if it does.
    fn leave_out_reason(&self, all: &[&Step], tags: &[String]) -> Option<String> {
        let needs_real = self.real.is_none() && tags.iter().any(|t| t == REAL_ONLY_TAG);
        match self.undeclared_surface(all) {
            Some(surface) => Some(format!("surface `{surface}` is not declared")),
            None if needs_real => Some(
                "it checks a real runtime end to end (what the runtime sends its model): run it \
                 with --runtimes real"
                    .to_owned(),
            ),
            None => self
                .undeclared_delivery_runtime(all)
                .or_else(|| self.real_unavailable(all)),
        }
    }

    fn adapt_runtimes(&self, steps: &[&Step], scenario: Scenario) -> Scenario {
        // The spec model judges a scenario with what the profile declares: nothing to rewrite.
        if steps
            .iter()
            .any(|s| s.value == crate::suite::steps::ORACLE_STEP)
        {
            return scenario;
        }
        let undeclared = self.undeclared_runtimes(steps);
        if undeclared.is_empty() {
            scenario
        } else {
            self.expect_unsupported(scenario, &undeclared)
        }
    }

    fn undeclared_surface(&self, steps: &[&Step]) -> Option<&'static str> {
        steps.iter().find_map(|step| {
            self.surface_steps
                .iter()
                .find(|(surface, re)| {
                    !self.profile.surfaces.contains(*surface) && re.is_match(&step.value)
                })
                .map(|(surface, _)| *surface)
        })
    }

    /// Why a scenario that delivers cannot run: it names an agent on a runtime the profile
    /// leaves out (there is nothing to deliver to).
    fn undeclared_delivery_runtime(&self, steps: &[&Step]) -> Option<String> {
        let delivers = steps.iter().any(|step| {
            self.surface_steps
                .iter()
                .any(|(surface, re)| *surface == "delivery" && re.is_match(&step.value))
        });
        if !delivers {
            return None;
        }
        let fixture = steps.iter().find_map(|s| {
            self.conversation
                .captures(&s.value)
                .and_then(|c| self.fixtures.get(&c[1]))
        })?;
        let agent = Regex::new(r#"agent "([^"]+)""#).unwrap_or_else(|e| unreachable!("{e}"));
        let mentions =
            Regex::new(r#"mentioning "([^"]+)""#).unwrap_or_else(|e| unreachable!("{e}"));
        let named: BTreeSet<String> = steps
            .iter()
            .flat_map(|s| {
                let agents = agent.captures_iter(&s.value).map(|c| c[1].to_owned());
                let mentioned = mentions
                    .captures_iter(&s.value)
                    .flat_map(|c| {
                        c[1].split(',')
                            .map(|a| a.trim().to_owned())
                            .collect::<Vec<_>>()
                    })
                    .collect::<Vec<_>>();
                agents.chain(mentioned).collect::<Vec<_>>()
            })
            .collect();
        fixture
            .agents
            .iter()
            .filter(|a| named.contains(&a.id))
            .find(|a| {
                RUNTIMES.contains(&a.runtime.as_str())
                    && !self.profile.runtimes.contains(&a.runtime)
            })
            .map(|a| {
                format!(
                    "it delivers to agent `{}` on runtime `{}`, which is not declared",
                    a.id, a.runtime
                )
            })
    }

    /// The known runtimes the scenario's first rewind reaches that the profile leaves out.
    fn undeclared_runtimes(&self, steps: &[&Step]) -> BTreeSet<String> {
        let fixture = steps.iter().find_map(|s| {
            self.conversation
                .captures(&s.value)
                .and_then(|c| self.fixtures.get(&c[1]))
        });
        let rewind = steps.iter().find_map(|s| self.plain_rewind(&s.value));
        let (Some(fixture), Some((_, scope, target))) = (fixture, rewind) else {
            return BTreeSet::new();
        };
        reached_runtimes(fixture, &target, scope.as_deref())
            .into_iter()
            .filter(|r| RUNTIMES.contains(&r.as_str()) && !self.profile.runtimes.contains(r))
            .collect()
    }

    /// The rewind `step` asks for (the first, when it starts several), as the text of a plain
    /// rewind step, with its explicit scope and its target.
    fn plain_rewind(&self, step: &str) -> Option<(String, Option<String>, String)> {
        let c = self.rewind.captures(step)?;
        let text = |m: usize| c.get(m).map(|m| m.as_str().to_owned());
        if let Some(target) = text(5) {
            return Some((
                format!("the system rewinds to before message \"{target}\""),
                None,
                target,
            ));
        }
        let (kind, who, scope, target) = match text(1) {
            Some(kind) => (kind, text(2)?, text(3), text(4)?),
            None => (text(6)?, text(7)?, None, text(8)?.trim().to_owned()),
        };
        let explicit = scope
            .as_ref()
            .map(|s| format!(" scope \"{s}\""))
            .unwrap_or_default();
        Some((
            format!("{kind} \"{who}\" rewinds{explicit} to before message \"{target}\""),
            scope,
            target,
        ))
    }

    /// The scenario, rewritten to check that the rewind is refused as unsupported.
    fn expect_unsupported(
        &self,
        mut scenario: Scenario,
        undeclared: &BTreeSet<String>,
    ) -> Scenario {
        let names: Vec<&str> = undeclared.iter().map(String::as_str).collect();
        let original = std::mem::take(&mut scenario.steps);
        // A refusal the original scenario expects for another reason stays acceptable: the spec
        // does not order its guards.
        let other_refusal = original.iter().find_map(|s| {
            self.refused_with
                .captures(&s.value)
                .map(|c| c[1].to_owned())
                .filter(|m| *m != self.unsupported_message)
        });
        let any_refusal = original
            .iter()
            .any(|s| s.ty == StepType::Then && s.value == "the rewind is refused");
        let mut steps: Vec<Step> = original
            .iter()
            .filter(|s| self.state_steps.iter().any(|re| re.is_match(&s.value)))
            .cloned()
            .collect();
        let Some((rewind, (plain, _, _))) = original
            .iter()
            .find_map(|s| self.plain_rewind(&s.value).map(|p| (s, p)))
        else {
            return Scenario {
                steps: original,
                ..scenario
            };
        };
        let mut when = rewind.clone();
        when.ty = StepType::When;
        when.keyword = "When ".to_owned();
        when.value = plain;
        steps.push(when);
        let then = |value: String| Step {
            keyword: "Then ".to_owned(),
            ty: StepType::Then,
            value,
            docstring: None,
            table: None,
            span: rewind.span,
            position: rewind.position,
        };
        steps.push(then(match (&other_refusal, any_refusal) {
            (_, true) => "the rewind is refused".to_owned(),
            (Some(other), false) => format!(
                "the rewind is refused with \"{other}\" or \"{}\"",
                self.unsupported_message
            ),
            (None, false) => format!(
                "the rewind is refused with \"{}\"",
                self.unsupported_message
            ),
        }));
        steps.push(then("the database is unchanged".to_owned()));
        steps.push(then("no runtime received a call".to_owned()));
        scenario.name = format!(
            "{} [runtime {} not declared: refused as unsupported]",
            scenario.name,
            names.join(", ")
        );
        scenario
            .tags
            .extend(names.iter().map(|r| format!("undeclared-runtime:{r}")));
        scenario.steps = steps;
        scenario
    }
}

/// The runtime ids of the agents a rewind of `target` (in `scope`, default its own) reaches,
/// read from the fixture: the agents the spec's related-agent step (section 5, step 2) collects
/// from the suffix and its cascade.
///
/// - The primary suffix is the target and every later *non-rewound* message of its scope
///   (an earlier rewind's tombstones are no longer part of any suffix).
/// - Only the live (non-archived) reply thread of the suffix's tail, its last non-rewound
///   message, cascades (sections 2.1 and 4), with every non-rewound message of that thread.
/// - A live thread on an earlier suffix message is no cascade: section 4 blocks that rewind
///   ("a later message has a reply thread"), so nothing in the thread is ever restored and its
///   agents are not reached. The primary suffix's agents still are: the spec does not order
///   its guards, so an implementation may refuse such a rewind as unsupported first.
/// - Archived threads reach nobody, wherever they hang. The cascade is one level deep, as the
///   spec's cascade boundary (the child scope from seq 1).
pub fn reached_runtimes(fixture: &Fixture, target: &str, scope: Option<&str>) -> BTreeSet<String> {
    let Some(target) = fixture
        .scopes
        .iter()
        .flat_map(|s| &s.messages)
        .find(|m| m.id == target)
    else {
        return BTreeSet::new();
    };
    if scope.is_some_and(|s| s != target.scope) {
        return BTreeSet::new();
    }
    let primary = visible_from(fixture, &target.scope, target.seq);
    let mut suffix: BTreeSet<&str> = primary.iter().map(|m| m.id.as_str()).collect();
    if let Some(tail) = primary.last() {
        for thread in live_threads_of(fixture, &tail.id) {
            suffix.extend(
                visible_from(fixture, &thread.id, 1)
                    .iter()
                    .map(|m| m.id.as_str()),
            );
        }
    }
    let mut agents: BTreeSet<&str> = BTreeSet::new();
    let messages = fixture.scopes.iter().flat_map(|s| &s.messages);
    for m in messages.filter(|m| suffix.contains(m.id.as_str())) {
        if let Author::Agent(id) = &m.author {
            agents.insert(id);
        }
    }
    for row in &fixture.fanout_outbox {
        if let (Some(message), Party::Agent(id)) = (&row.message, &row.recipient) {
            if suffix.contains(message.as_str()) {
                agents.insert(id);
            }
        }
    }
    for point in &fixture.recovery_points {
        if suffix.contains(point.message.as_str()) {
            agents.insert(&point.agent);
        }
    }
    fixture
        .agents
        .iter()
        .filter(|a| agents.contains(a.id.as_str()))
        .map(|a| a.runtime.clone())
        .collect()
}

/// The non-rewound messages of scope `scope` from `from_seq` on, in seq order.
fn visible_from<'f>(fixture: &'f Fixture, scope: &str, from_seq: i64) -> Vec<&'f Message> {
    let mut messages: Vec<&Message> = fixture
        .scopes
        .iter()
        .filter(|s| s.id == scope)
        .flat_map(|s| &s.messages)
        .filter(|m| m.seq >= from_seq && m.recall_status() != Some("rewound"))
        .collect();
    messages.sort_by_key(|m| m.seq);
    messages
}

/// The live (non-archived) reply threads forked from message `parent`.
fn live_threads_of<'f>(fixture: &'f Fixture, parent: &str) -> Vec<&'f Scope> {
    fixture
        .scopes
        .iter()
        .filter(|s| {
            s.archived_at.is_none() && s.parent.as_ref().is_some_and(|p| p.message == parent)
        })
        .collect()
}

/// The features parser with the profile applied to every parsed feature.
pub struct ProfileParser {
    /// What to apply.
    pub applicability: Arc<Applicability>,
    /// Keep only these scenarios (one shard of a split run); `None`: keep every one.
    pub only: Option<Arc<std::collections::HashSet<super::shard::Key>>>,
}

impl<I: AsRef<std::path::Path>> Parser<I> for ProfileParser {
    type Cli = <parser::Basic as Parser<I>>::Cli;
    type Output = Pin<Box<dyn Stream<Item = parser::Result<Feature>>>>;

    fn parse(self, input: I, cli: Self::Cli) -> Self::Output {
        let applicability = self.applicability;
        let only = self.only;
        Box::pin(parser::Basic::new().parse(input, cli).map(move |feature| {
            feature.map(|mut f| {
                // cucumber's report trims the project directory off the front of a
                // path and then every leading `/`, which cuts an absolute path outside
                // the project (`/tmp/x.feature` became `tmp/x.feature`); a path
                // relative to the working directory is shown whole.
                f.path = f.path.map(|p| relative_to_cwd(&p));
                if let Some(only) = &only {
                    // Another shard's scenarios are not this run's: not run, not reported,
                    // but still known to exist.
                    let feature = super::collector::feature_path(&f);
                    let background: Vec<Step> =
                        f.background.iter().flat_map(|b| b.steps.clone()).collect();
                    let keep = |s: &Scenario| {
                        only.contains(&super::shard::Key {
                            feature: feature.clone(),
                            line: s.position.line,
                        })
                    };
                    let (mine, elsewhere): (Vec<_>, Vec<_>) =
                        std::mem::take(&mut f.scenarios).into_iter().partition(keep);
                    for s in &elsewhere {
                        applicability.note_elsewhere(&feature, &background, s);
                    }
                    f.scenarios = mine;
                    for rule in &mut f.rules {
                        let mut steps = background.clone();
                        steps.extend(rule.background.iter().flat_map(|b| b.steps.clone()));
                        let (mine, elsewhere): (Vec<_>, Vec<_>) =
                            std::mem::take(&mut rule.scenarios)
                                .into_iter()
                                .partition(keep);
                        for s in &elsewhere {
                            applicability.note_elsewhere(&feature, &steps, s);
                        }
                        rule.scenarios = mine;
                    }
                }
                applicability.adapt(f)
            })
        }))
    }
}

/// `path` as the run shows it: relative to the suite's root when the suite came from elsewhere
/// (the built-in suite, `--suite DIR`: `features/apply.feature` whatever the directory), else
/// relative to the working directory (with `..` where needed), so that it reads the same in
/// every report and resolves from where the run started; unchanged when it cannot be.
pub fn relative_to_cwd(path: &std::path::Path) -> std::path::PathBuf {
    use std::path::{Component, PathBuf};
    if let Some(shown) = rewind_conformance::bundled::shown_path(path) {
        return shown;
    }
    let Ok(cwd) = std::env::current_dir() else {
        return path.to_path_buf();
    };
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    // Lexically normalised: `a/./b/../c` is `a/c` (no symlinks are followed).
    fn normal(p: &std::path::Path) -> Vec<Component<'_>> {
        let mut out: Vec<Component> = Vec::new();
        for c in p.components() {
            match c {
                Component::CurDir => {}
                Component::ParentDir if matches!(out.last(), Some(Component::Normal(_))) => {
                    out.pop();
                }
                other => out.push(other),
            }
        }
        out
    }
    let (target, base) = (normal(&absolute), normal(&cwd));
    let common = target.iter().zip(&base).take_while(|(a, b)| a == b).count();
    if common == 0 {
        return path.to_path_buf();
    }
    let mut relative = PathBuf::new();
    for _ in common..base.len() {
        relative.push("..");
    }
    for c in &target[common..] {
        relative.push(c.as_os_str());
    }
    relative
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_paths_are_shown_relative_to_the_working_directory() {
        let cwd = std::env::current_dir().expect("cwd");
        assert_eq!(
            relative_to_cwd(&cwd.join("features/apply.feature")),
            std::path::PathBuf::from("features/apply.feature")
        );
        // Outside the working directory: relative, and it resolves back to the same file.
        let target = std::path::Path::new("/rewind-elsewhere/x/y.feature");
        let outside = relative_to_cwd(target);
        assert!(
            !outside.is_absolute() && outside.starts_with(".."),
            "{}",
            outside.display()
        );
        let mut resolved = cwd.clone();
        for part in outside.components() {
            match part {
                std::path::Component::ParentDir => {
                    resolved.pop();
                }
                other => resolved.push(other.as_os_str()),
            }
        }
        assert_eq!(
            resolved,
            target,
            "{} from {}",
            outside.display(),
            cwd.display()
        );
        assert_eq!(
            relative_to_cwd(std::path::Path::new("features/apply.feature")),
            std::path::PathBuf::from("features/apply.feature")
        );
    }

    fn shipped() -> BTreeMap<String, Fixture> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
        rewind_conformance::fixtures::load_fixture_dir(&dir).expect("the shipped fixtures load")
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    /// A fixture with one human, the agents `cody` (codex), `clio` (claude), `ode` (opencode)
    /// and `bix` (builtin), all members of every scope, and `scopes` (YAML list items).
    fn fixture(scopes: &str, extra: &str) -> Fixture {
        let text = format!(
            r#"
description: inline
workspace: {{id: ws, name: W}}
humans: [{{id: alice, name: Alice}}]
machines: [{{id: m, name: M}}]
agents:
  - {{id: cody, name: Cody, runtime: codex, machine: m}}
  - {{id: clio, name: Clio, runtime: claude, machine: m}}
  - {{id: ode, name: Ode, runtime: opencode, machine: m}}
  - {{id: bix, name: Bix, runtime: builtin, machine: m}}
scopes:
{scopes}
{extra}
"#
        );
        rewind_conformance::fixtures::parse_fixture(std::path::Path::new("inline.yaml"), &text)
            .expect("the inline fixture is valid")
    }

    const MEMBERS: &str =
        "[{human: alice, role: owner}, {agent: cody}, {agent: clio}, {agent: ode}, {agent: bix}]";

    /// The metadata of a message an earlier rewind tombstoned.
    const REWOUND: &str =
        r#"{messageRecall: {status: rewound, rewoundAt: "2026-01-01T00:00:00Z"}}"#;

    /// YAML list items, one per message (each a flow mapping), indented for `messages:`.
    fn items(messages: &[String]) -> String {
        messages.iter().map(|m| format!("      - {m}\n")).collect()
    }

    fn human(id: &str) -> String {
        format!("{{id: {id}, human: alice, content: {id}}}")
    }

    fn agent(id: &str, agent: &str) -> String {
        format!("{{id: {id}, agent: {agent}, content: {id}}}")
    }

    fn rewound(id: &str, author: &str) -> String {
        format!("{{id: {id}, {author}, content: \"\", metadata: {REWOUND}}}")
    }

    /// The DM `dm` with these messages.
    fn dm(messages: &[String]) -> String {
        format!(
            "  - id: dm\n    kind: dm\n    name: dm\n    members: {MEMBERS}\n    messages:\n{}",
            items(messages)
        )
    }

    /// A reply thread `id` forked from DM message `parent`.
    fn thread(id: &str, parent: &str, archived: bool, messages: &[String]) -> String {
        format!(
            "  - id: {id}\n    kind: reply_thread\n    name: {id}\n    \
             parent: {{scope: dm, message: {parent}}}\n    archived: {archived}\n    \
             members: {MEMBERS}\n    messages:\n{}",
            items(messages)
        )
    }

    #[test]
    fn racing_storm_and_fault_steps_name_their_rewind_as_a_plain_one() {
        let applicability = Applicability::new(
            CapabilityProfile::everything(),
            Arc::new(BTreeMap::new()),
            "unsupported".to_owned(),
        );
        let plain = |step: &str| applicability.plain_rewind(step).map(|(text, _, _)| text);
        for (step, expected) in [
            (
                r#"human "alice" starts rewinding to before message "codex-3""#,
                r#"human "alice" rewinds to before message "codex-3""#,
            ),
            (
                r#"human "alice" rewinds to before message "codex-1" while the started rewind is preparing"#,
                r#"human "alice" rewinds to before message "codex-1""#,
            ),
            (
                r#"human "alice" rewinds to before message "n-4" with a "statement timeout" fault at commit"#,
                r#"human "alice" rewinds to before message "n-4""#,
            ),
            (
                r#"8 rewinds by human "alice" to before messages "codex-3, codex-1" start at once"#,
                r#"human "alice" rewinds to before message "codex-3""#,
            ),
            (
                r#"agent "cody" rewinds scope "dm-1" to before message "m-2""#,
                r#"agent "cody" rewinds scope "dm-1" to before message "m-2""#,
            ),
            (
                r#"the system rewinds to before message "m-2""#,
                r#"the system rewinds to before message "m-2""#,
            ),
        ] {
            assert_eq!(plain(step).as_deref(), Some(expected), "{step}");
        }
        assert_eq!(plain(r#"human "alice" sends "hi" in scope "dm""#), None);
    }

    #[test]
    fn a_rewind_reaches_the_runtimes_of_its_suffix_only() {
        let fixtures = shipped();
        let agents = &fixtures["runtime-agents"];
        assert_eq!(reached_runtimes(agents, "codex-3", None), set(&["codex"]));
        assert_eq!(reached_runtimes(agents, "claude-1", None), set(&["claude"]));
        assert_eq!(
            reached_runtimes(agents, "builtin-3", None),
            set(&["builtin"])
        );
        assert_eq!(reached_runtimes(agents, "no-such-message", None), set(&[]));
        let humans = &fixtures["dm-two-humans"];
        assert_eq!(reached_runtimes(humans, "h-m4", None), set(&[]));
    }

    #[test]
    fn the_live_thread_of_the_suffix_tail_cascades_in_the_shipped_fixture() {
        let fixtures = shipped();
        let agents = &fixtures["runtime-agents"];
        // `codex-c3` is the tail of its channel; its live thread is where `cody-t` answers.
        assert_eq!(reached_runtimes(agents, "codex-c3", None), set(&["codex"]));
        assert_eq!(
            reached_runtimes(agents, "opencode-c3", None),
            set(&["opencode"])
        );
    }

    #[test]
    fn a_rewound_agent_message_after_the_target_is_not_in_the_suffix() {
        // The codex agent's only message after the target is a tombstone of an earlier rewind.
        let f = fixture(
            &dm(&[
                human("m-1"),
                human("m-2"),
                rewound("m-3", "agent: cody"),
                human("m-4"),
                agent("m-5", "clio"),
            ]),
            "",
        );
        assert_eq!(reached_runtimes(&f, "m-2", None), set(&["claude"]));
        assert_eq!(reached_runtimes(&f, "m-4", None), set(&["claude"]));
        let f = fixture(
            &dm(&[human("m-1"), human("m-2"), rewound("m-3", "agent: cody")]),
            "",
        );
        assert_eq!(reached_runtimes(&f, "m-2", None), set(&[]));
    }

    #[test]
    fn an_archived_thread_under_a_suffix_message_reaches_nobody() {
        // Archived threads on a middle suffix message and on the tail.
        let scopes = [
            dm(&[human("m-1"), human("m-2"), human("m-3")]),
            thread("th-mid", "m-2", true, &[agent("t-1", "cody")]),
            thread("th-tail", "m-3", true, &[agent("u-1", "ode")]),
        ]
        .concat();
        let extra = "fanout_outbox:\n  - {message: u-1, agent: bix, status: delivered}\n";
        let f = fixture(&scopes, extra);
        assert_eq!(reached_runtimes(&f, "m-2", None), set(&[]));
        assert_eq!(reached_runtimes(&f, "m-3", None), set(&[]));
    }

    #[test]
    fn a_live_thread_on_an_earlier_suffix_message_is_no_cascade() {
        // `m-2` has a live thread but is not the suffix's tail: the spec refuses that rewind for
        // the fork, so nothing in the thread is restored and its agents are not reached. The
        // primary suffix's agents still are (the spec does not order the guards).
        let scopes = [
            dm(&[human("m-1"), human("m-2"), agent("m-3", "clio")]),
            thread(
                "th-mid",
                "m-2",
                false,
                &[human("t-1"), agent("t-2", "cody")],
            ),
        ]
        .concat();
        let extra = "fanout_outbox:\n  - {message: t-1, agent: ode, status: delivered}\n";
        let f = fixture(&scopes, extra);
        assert_eq!(reached_runtimes(&f, "m-2", None), set(&["claude"]));
        assert_eq!(reached_runtimes(&f, "m-1", None), set(&["claude"]));
        // A rewind inside the thread reaches its agents: there the thread is the primary scope.
        assert_eq!(
            reached_runtimes(&f, "t-1", None),
            set(&["codex", "opencode"])
        );
    }

    #[test]
    fn the_live_thread_of_the_tail_cascades_with_its_visible_messages_only() {
        // The tail `m-3` has a live thread: its non-rewound messages join the suffix, with their
        // authors and fanout recipients.
        let scopes = [
            dm(&[human("m-1"), human("m-2"), human("m-3")]),
            thread(
                "th-tail",
                "m-3",
                false,
                &[
                    human("t-1"),
                    rewound("t-2", "agent: cody"),
                    agent("t-3", "clio"),
                ],
            ),
        ]
        .concat();
        let extra = "fanout_outbox:\n  - {message: t-1, agent: ode, status: delivered}\n";
        let f = fixture(&scopes, extra);
        let both = set(&["claude", "opencode"]);
        assert_eq!(reached_runtimes(&f, "m-2", None), both);
        assert_eq!(reached_runtimes(&f, "m-3", None), both);
        // A tombstone is no tail: the tail of `m-1`'s suffix is `m-2`, whose thread cascades.
        let scopes = [
            dm(&[human("m-1"), human("m-2"), rewound("m-3", "human: alice")]),
            thread("th-mid", "m-2", false, &[agent("t-1", "cody")]),
        ]
        .concat();
        assert_eq!(
            reached_runtimes(&fixture(&scopes, ""), "m-1", None),
            set(&["codex"])
        );
    }

    #[test]
    fn a_target_outside_the_named_scope_reaches_nothing() {
        let fixtures = shipped();
        assert_eq!(
            reached_runtimes(&fixtures["runtime-agents"], "codex-3", Some("elsewhere")),
            set(&[])
        );
    }

    /// A step of `text`, as the parser makes it.
    fn given(text: &str) -> Step {
        Step {
            keyword: "Given ".to_owned(),
            ty: StepType::Given,
            value: text.to_owned(),
            docstring: None,
            table: None,
            span: cucumber::gherkin::Span { start: 0, end: 0 },
            position: cucumber::gherkin::LineCol { line: 1, col: 1 },
        }
    }

    #[test]
    fn on_real_runtimes_only_what_a_proxy_cannot_do_is_left_out_with_the_reason() {
        let mock = Applicability::new(
            CapabilityProfile::everything(),
            Arc::new(BTreeMap::new()),
            "unsupported".to_owned(),
        );
        let real = Applicability::new(
            CapabilityProfile::everything(),
            Arc::new(BTreeMap::new()),
            "unsupported".to_owned(),
        )
        .with_real_runtimes(
            [
                ("codex", "0.171.0"),
                ("claude", "2.1.332"),
                ("opencode", "1.18.34"),
            ]
            .into_iter()
            .map(|(k, v)| (k, v.to_owned()))
            .collect(),
        );
        let why = |a: &Applicability, text: &str| {
            let step = given(text);
            a.real_unavailable(&[&step])
        };
        for served in [
            r#"the codex runtime answers the restore of agent "cody" with "error""#,
            r#"the claude runtime answers the restore of agent "clio" with "hang""#,
            r#"the codex runtime answers the restore of agent "cody" with "crash""#,
            r#"the codex runtime is release "0.171.0""#,
            r#"agent "ode" fails its next delivery with "error""#,
        ] {
            assert_eq!(why(&real, served), None, "{served}");
        }
        for (left_out, reason) in [
            (
                r#"the codex runtime answers the restore of agent "cody" with "busy""#,
                "only the runtime itself",
            ),
            (
                r#"the opencode runtime answers the restore of agent "ode" with "unknown session""#,
                "only the runtime itself",
            ),
            (
                r#"the opencode runtime answers the restore of agent "ode" with "crash""#,
                "crashes the OpenCode server",
            ),
            (
                r#"the codex runtime is release "0.155.1""#,
                "--runtime-release codex=0.155.1",
            ),
            (
                r#"agent "clio" fails its next delivery with "success-without-effect""#,
                "delivery fault",
            ),
        ] {
            let got = why(&real, left_out).unwrap_or_default();
            assert!(got.contains(reason), "{left_out}: {got:?}");
            assert_eq!(why(&mock, left_out), None, "the mocks serve {left_out}");
        }
        assert!(holds_unanswered_turn(&serde_json::json!({"turns": [
            {"id": "t1", "input_message": "a", "output_message": "b"},
            {"id": "t2", "input_message": "c"}]})));
        assert!(!holds_unanswered_turn(&serde_json::json!({"transcript": [
            {"uuid": "u", "type": "user", "message": "a"},
            {"uuid": "v", "type": "assistant", "message": "b"}]})));
        assert!(holds_unanswered_turn(&serde_json::json!({"messages": [
            {"id": "m", "role": "user", "message": "a"}]})));
        let shipped = shipped();
        let unanswered: Vec<&String> = shipped
            .iter()
            .filter(|(_, f)| f.runtime_sessions.values().any(holds_unanswered_turn))
            .map(|(name, _)| name)
            .collect();
        assert_eq!(
            unanswered,
            ["reply-thread-middle"],
            "the shipped fixtures with one"
        );
    }
}
