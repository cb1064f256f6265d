//! [`Collector`]: a cucumber writer layer that records each scenario's outcome per feature.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use cucumber::event::{self, Cucumber, Feature, Rule, Scenario, Step};
use cucumber::{parser, Event, World, Writer};

/// How one scenario ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every step passed.
    Passed,
    /// A step or hook failed.
    Failed,
    /// A step matched no definition (or was skipped), which the run counts as failure.
    Skipped,
    /// The implementation answered outside the driver protocol (not JSON, off the schema,
    /// another version): nothing about conformance could be judged.
    ProtocolViolation,
    /// It failed, as the expectations file says it does.
    ExpectedFailure,
    /// It passed, but the expectations file says it fails: the entry must go.
    UnexpectedPass,
}

impl Verdict {
    /// The verdict's name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Passed => "passed",
            Verdict::Failed => "failed",
            Verdict::Skipped => "skipped",
            Verdict::ProtocolViolation => "protocol_violation",
            Verdict::ExpectedFailure => "expected_failure",
            Verdict::UnexpectedPass => "unexpected_pass",
        }
    }
}

/// A feature's path as reports name it: relative to the working directory when it is inside it.
pub fn feature_path(feature: &cucumber::gherkin::Feature) -> String {
    feature
        .path
        .as_ref()
        .map(|p| {
            let relative = std::env::current_dir()
                .ok()
                .and_then(|cwd| p.strip_prefix(cwd).ok().map(|r| r.to_path_buf()));
            relative.unwrap_or_else(|| p.clone()).display().to_string()
        })
        .unwrap_or_else(|| feature.name.clone())
}

/// One scenario's record.
#[derive(Debug, Clone)]
pub struct ScenarioRecord {
    /// The scenario name.
    pub name: String,
    /// Its line in the feature file.
    pub line: usize,
    /// Its tags (without `@`).
    pub tags: Vec<String>,
    /// How it ended.
    pub verdict: Verdict,
    /// The first failure's message.
    pub failure: Option<String>,
    /// The readings of the ambiguity register it took (ambiguity id to reading id).
    pub readings: BTreeMap<String, String>,
    /// Every protocol violation it met (the implementation answered outside driver protocol
    /// v1), in the order they were seen.
    pub violations: Vec<String>,
    /// Its wall time, from cucumber's `Started` event to its `Finished` event (hooks, the leak
    /// scan and the teardown included). Taken from the events' own timestamps: the writer
    /// chain is normalized, so a scenario's events may reach the collector late, in a batch.
    pub duration: Duration,
}

/// All scenarios of one feature file.
#[derive(Debug, Clone, Default)]
pub struct FeatureRecord {
    /// The feature name.
    pub name: String,
    /// Scenarios in the order they finished.
    pub scenarios: Vec<ScenarioRecord>,
}

/// What the collector gathered: features keyed by file path, plus parse errors.
#[derive(Debug, Clone, Default)]
pub struct RunRecord {
    /// Feature file path to its record.
    pub features: BTreeMap<String, FeatureRecord>,
    /// Feature files that failed to parse.
    pub parse_errors: Vec<String>,
    /// Scenarios in flight: (path, line) to when it started and the record being built.
    running: BTreeMap<(String, usize), (SystemTime, ScenarioRecord)>,
}

/// The writer layer; share its [`RunRecord`] through [`Collector::record`].
#[derive(Debug, Clone, Default)]
pub struct Collector {
    record: Arc<Mutex<RunRecord>>,
}

impl Collector {
    /// The shared record.
    pub fn record(&self) -> Arc<Mutex<RunRecord>> {
        Arc::clone(&self.record)
    }

    fn on_scenario<W>(
        &self,
        feature: &cucumber::gherkin::Feature,
        rule: Option<&cucumber::gherkin::Rule>,
        scenario: &cucumber::gherkin::Scenario,
        ev: &Scenario<W>,
        at: SystemTime,
    ) {
        let Ok(mut record) = self.record.lock() else {
            return;
        };
        let path = feature_path(feature);
        let key = (path.clone(), scenario.position.line);
        match ev {
            Scenario::Started => {
                let mut tags = feature.tags.clone();
                if let Some(rule) = rule {
                    tags.extend(rule.tags.iter().cloned());
                }
                tags.extend(scenario.tags.iter().cloned());
                record.running.insert(
                    key,
                    (
                        at,
                        ScenarioRecord {
                            name: scenario.name.clone(),
                            line: scenario.position.line,
                            tags,
                            verdict: Verdict::Passed,
                            failure: None,
                            readings: BTreeMap::new(),
                            violations: Vec::new(),
                            duration: Duration::ZERO,
                        },
                    ),
                );
            }
            Scenario::Step(step, Step::Failed(.., err))
            | Scenario::Background(step, Step::Failed(.., err)) => {
                if let Some((_, r)) = record.running.get_mut(&key) {
                    if r.failure.is_none() {
                        r.failure = Some(format!("step `{}`: {err}", step.value));
                    }
                    r.verdict = Verdict::Failed;
                }
            }
            Scenario::Step(step, Step::Skipped) | Scenario::Background(step, Step::Skipped) => {
                if let Some((_, r)) = record.running.get_mut(&key) {
                    if r.verdict == Verdict::Passed {
                        r.verdict = Verdict::Skipped;
                        r.failure =
                            Some(format!("step `{}` matches no step definition", step.value));
                    }
                }
            }
            Scenario::Hook(kind, event::Hook::Failed(_, info)) => {
                if let Some((_, r)) = record.running.get_mut(&key) {
                    r.verdict = Verdict::Failed;
                    let text = info
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| info.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_default();
                    r.failure
                        .get_or_insert(format!("{kind:?} hook failed: {text}"));
                }
            }
            Scenario::Finished => {
                if let Some((started, mut done)) = record.running.remove(&key) {
                    // A clock stepped back mid-scenario: no duration rather than a wrong one.
                    done.duration = at.duration_since(started).unwrap_or_default();
                    let entry = record.features.entry(path).or_default();
                    entry.name = feature.name.clone();
                    entry.scenarios.push(done);
                }
            }
            _ => {}
        }
    }
}

impl<W: World> Writer<W> for Collector {
    type Cli = cucumber::cli::Empty;

    async fn handle_event(&mut self, event: parser::Result<Event<Cucumber<W>>>, _cli: &Self::Cli) {
        match event {
            Err(e) => {
                if let Ok(mut record) = self.record.lock() {
                    record.parse_errors.push(e.to_string());
                }
            }
            Ok(event) => {
                if let Cucumber::Feature(feature, ev) = &event.value {
                    match ev {
                        Feature::Scenario(scenario, retryable) => {
                            self.on_scenario(feature, None, scenario, &retryable.event, event.at)
                        }
                        Feature::Rule(rule, Rule::Scenario(scenario, retryable)) => self
                            .on_scenario(feature, Some(rule), scenario, &retryable.event, event.at),
                        _ => {}
                    }
                }
            }
        }
    }
}
