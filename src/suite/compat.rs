//! The runtime compatibility matrix: for each runtime, the release its mock imitated and each
//! step of a recovery strategy (start a session, deliver an input, restore, verify the restore,
//! continue after it), whether the runtime took the implementation's calls, or refused them and
//! with which error.
//!
//! It is read from the mock runtimes' call journals at the end of every scenario, so it shows
//! what the implementation under test actually asked of each runtime release, not what the
//! harness expected. Calls a planted fault answered (`fault:<kind>`) are left out: they say
//! nothing about compatibility.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use rewind_mock_runtimes::journal::JournalEntry;
use serde::{Deserialize, Serialize};

/// A step of a runtime recovery strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Step {
    /// A session or thread is started or resumed (codex `thread/start`/`thread/resume`, a
    /// claude `--session-id` run, OpenCode `POST /session`).
    Start,
    /// An input is handed over (codex `turn/start`, a claude prompt run, OpenCode `POST
    /// /session/{id}/message`).
    Deliver,
    /// The native restore (codex `thread/rollback`/`thread/revert`, a claude
    /// `--resume-session-at` run without a prompt, OpenCode `POST /session/{id}/revert`).
    Restore,
    /// A read-back after a restore (codex `thread/read`/`thread/turns/list`, OpenCode `GET
    /// /session/{id}` and its messages; claude keeps its transcript as a file, read without a
    /// call).
    Verify,
    /// The first input after a restore (for claude, the prompt run that applies the boundary).
    Continue,
}

impl Step {
    /// Every step, in strategy order.
    pub const ALL: [Step; 5] = [
        Step::Start,
        Step::Deliver,
        Step::Restore,
        Step::Verify,
        Step::Continue,
    ];

    fn label(self) -> &'static str {
        match self {
            Step::Start => "start",
            Step::Deliver => "deliver",
            Step::Restore => "restore",
            Step::Verify => "verify",
            Step::Continue => "continue",
        }
    }
}

/// One call a runtime answered: which step it served and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// The runtime (`codex`, `claude`, `opencode`).
    pub runtime: String,
    /// The release the mock imitated.
    pub release: String,
    /// The step the call served.
    pub step: Step,
    /// `None` when the runtime took the call, else its error.
    pub refusal: Option<String>,
}

/// Classifies one journal's calls, in order. `stdin`-less claude `--resume-session-at` runs are
/// restores; a deliver call on a session after a successful restore of it is a continue, and
/// reads between the two are verifies.
pub fn observe(runtime: &str, release: &str, journal: &[JournalEntry]) -> Vec<Observation> {
    let mut restored: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for entry in journal {
        if entry.outcome.starts_with("fault:") || entry.call == "process/start" {
            continue;
        }
        let target = entry.target.clone().unwrap_or_default();
        let after_restore = restored.contains(&target);
        let steps: Vec<Step> = match classify(runtime, entry) {
            Some(Kind::Start) => vec![Step::Start],
            Some(Kind::StartAndDeliver) => vec![Step::Start, Step::Deliver],
            Some(Kind::Deliver) if after_restore => vec![Step::Continue],
            Some(Kind::Deliver) => vec![Step::Deliver],
            Some(Kind::Restore) => vec![Step::Restore],
            Some(Kind::Read) if after_restore => vec![Step::Verify],
            Some(Kind::Read) | None => Vec::new(),
        };
        let ok = entry.outcome == "ok";
        for step in &steps {
            match step {
                Step::Restore if ok => {
                    restored.insert(target.clone());
                }
                Step::Continue if ok => {
                    restored.remove(&target);
                }
                _ => {}
            }
        }
        let refusal = (!ok).then(|| {
            let detail = entry
                .detail
                .clone()
                .unwrap_or_else(|| entry.outcome.clone());
            clip(&without_ids(detail.lines().next().unwrap_or_default()))
        });
        out.extend(steps.into_iter().map(|step| Observation {
            runtime: runtime.to_owned(),
            release: release.to_owned(),
            step,
            refusal: refusal.clone(),
        }));
    }
    out
}

/// `text` with the ids a runtime makes up per run (UUIDs, OpenCode's `ses_…`/`msg_…`/`prt_…`
/// ids) replaced by `<id>`: two runs that were refused alike read alike.
fn without_ids(text: &str) -> String {
    static IDS: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let ids = IDS.get_or_init(|| {
        regex::Regex::new(
            r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|\b(?:ses|msg|prt)_[0-9A-Za-z]{12,}\b",
        )
        .unwrap_or_else(|e| unreachable!("{e}"))
    });
    ids.replace_all(text, "<id>").into_owned()
}

/// What a call does, before the order of calls decides its step.
enum Kind {
    Start,
    StartAndDeliver,
    Deliver,
    Restore,
    Read,
}

fn classify(runtime: &str, entry: &JournalEntry) -> Option<Kind> {
    let call = entry.call.as_str();
    match runtime {
        "codex" => match call {
            "thread/start" | "thread/resume" => Some(Kind::Start),
            "turn/start" => Some(Kind::Deliver),
            "thread/rollback" | "thread/revert" => Some(Kind::Restore),
            "thread/read" | "thread/turns/list" => Some(Kind::Read),
            _ => None,
        },
        "claude" => {
            let prompted = entry
                .request
                .get("stdin")
                .and_then(|s| s.as_array())
                .is_some_and(|s| !s.is_empty());
            match call {
                "claude --session-id" if prompted => Some(Kind::StartAndDeliver),
                "claude --session-id" => Some(Kind::Start),
                "claude --resume-session-at" if prompted => Some(Kind::Deliver),
                "claude --resume-session-at" => Some(Kind::Restore),
                "claude --resume" | "claude --continue" if prompted => Some(Kind::Deliver),
                _ => None,
            }
        }
        _ => {
            let (method, path) = call.split_once(' ')?;
            let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
            match (method, parts.as_slice()) {
                ("POST", ["session"]) => Some(Kind::Start),
                ("POST", ["session", _, "message"]) => Some(Kind::Deliver),
                ("POST", ["session", _, "revert"]) => Some(Kind::Restore),
                ("GET", ["session", _]) | ("GET", ["session", _, "message"]) => Some(Kind::Read),
                _ => None,
            }
        }
    }
}

fn clip(text: &str) -> String {
    const MAX: usize = 120;
    if text.chars().count() <= MAX {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(MAX).collect();
        format!("{cut}...")
    }
}

/// One cell: how many calls the runtime took, and its refusals by error text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cell {
    /// Calls the runtime took.
    pub works: usize,
    /// Refusals, by the runtime's error.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub refused: BTreeMap<String, usize>,
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.works > 0 {
            parts.push(format!("works ({})", self.works));
        }
        for (error, count) in &self.refused {
            parts.push(format!("refused ({count}): {}", error.replace('|', "\\|")));
        }
        f.write_str(&parts.join("; "))
    }
}

/// One row: a runtime release and its cells by step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// The runtime.
    pub runtime: String,
    /// The release its mock imitated.
    pub release: String,
    /// The steps the run exercised.
    pub steps: BTreeMap<Step, Cell>,
}

/// The whole matrix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompatMatrix {
    rows: BTreeMap<(String, String), BTreeMap<Step, Cell>>,
}

impl CompatMatrix {
    /// Adds observations.
    pub fn add(&mut self, observations: &[Observation]) {
        for o in observations {
            let cell = self
                .rows
                .entry((o.runtime.clone(), o.release.clone()))
                .or_default()
                .entry(o.step)
                .or_default();
            match &o.refusal {
                None => cell.works += 1,
                Some(error) => *cell.refused.entry(error.clone()).or_default() += 1,
            }
        }
    }

    /// Whether nothing was observed.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Adds recorded rows (another run's, e.g. another shard's): the calls add up.
    pub fn add_rows(&mut self, rows: &[Row]) {
        for row in rows {
            let steps = self
                .rows
                .entry((row.runtime.clone(), row.release.clone()))
                .or_default();
            for (step, cell) in &row.steps {
                let mine = steps.entry(*step).or_default();
                mine.works += cell.works;
                for (error, count) in &cell.refused {
                    *mine.refused.entry(error.clone()).or_default() += count;
                }
            }
        }
    }

    /// The rows, runtime then release order.
    pub fn rows(&self) -> Vec<Row> {
        self.rows
            .iter()
            .map(|((runtime, release), steps)| Row {
                runtime: runtime.clone(),
                release: release.clone(),
                steps: steps.clone(),
            })
            .collect()
    }

    /// A Markdown table: runtime releases down, steps across (`-`: no call of that step).
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "| runtime | release | {} |\n|---|---|{}\n",
            Step::ALL.map(Step::label).join(" | "),
            "---|".repeat(Step::ALL.len())
        );
        for ((runtime, release), steps) in &self.rows {
            let cells: Vec<String> = Step::ALL
                .iter()
                .map(|s| {
                    steps
                        .get(s)
                        .map(Cell::to_string)
                        .unwrap_or_else(|| "-".to_owned())
                })
                .collect();
            out.push_str(&format!(
                "| {runtime} | {release} | {} |\n",
                cells.join(" | ")
            ));
        }
        out
    }
}

impl Cell {
    /// What the cell says whatever the number of calls: whether the runtime took any call of
    /// the step, and the errors it refused them with.
    fn outcome(&self) -> (bool, BTreeSet<&str>) {
        (
            self.works > 0,
            self.refused.keys().map(String::as_str).collect(),
        )
    }

    /// [`Cell::outcome`] in words: `works`, `refused: <error>`, or both.
    fn outcome_text(&self) -> String {
        let mut parts = Vec::new();
        if self.works > 0 {
            parts.push("works".to_owned());
        }
        for error in self.refused.keys() {
            parts.push(format!("refused: {error}"));
        }
        parts.join("; ")
    }
}

/// How one runtime step compares between two runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agreement {
    /// Both runs exercised it with the same outcome (call counts may differ).
    Same,
    /// It works in one run and not in the other, or is refused with another error.
    Diverges,
    /// Only the first run exercised it.
    OnlyFirst,
    /// Only the second run exercised it.
    OnlySecond,
}

/// One runtime step of two runs: each run's release and cell, when that run exercised it.
#[derive(Debug, Clone)]
pub struct PairedStep {
    /// The runtime.
    pub runtime: String,
    /// The step.
    pub step: Step,
    /// The first run's release and cell.
    pub first: Option<(String, Cell)>,
    /// The second run's release and cell.
    pub second: Option<(String, Cell)>,
}

impl PairedStep {
    /// Whether the two runs agree on this step.
    pub fn agreement(&self) -> Agreement {
        match (&self.first, &self.second) {
            (Some((_, a)), Some((_, b))) if a.outcome() == b.outcome() => Agreement::Same,
            (Some(_), Some(_)) => Agreement::Diverges,
            (Some(_), None) => Agreement::OnlyFirst,
            // A step neither run exercised is never paired.
            (None, _) => Agreement::OnlySecond,
        }
    }
}

/// The compatibility rows of two runs side by side, runtime step by runtime step (`compare`).
///
/// Per runtime, the rows of the two runs are paired by release: the same release label first,
/// then the same version (`0.171.0` and `0.171.0 (real)`), then, when one row of the runtime is
/// left on each side, those two (pinned against latest). A row left unpaired stands alone: its
/// steps are exercised by one run only, which is no divergence.
#[derive(Debug, Clone)]
pub struct SideBySide {
    /// What the first run is called in the table (its results file).
    pub first: String,
    /// What the second run is called.
    pub second: String,
    /// Every step either run exercised, runtime then release pairing then step order.
    pub steps: Vec<PairedStep>,
}

impl SideBySide {
    /// Pairs the rows of two runs.
    pub fn new(first: (&str, &[Row]), second: (&str, &[Row])) -> SideBySide {
        let runtimes: BTreeSet<&str> = first
            .1
            .iter()
            .chain(second.1)
            .map(|r| r.runtime.as_str())
            .collect();
        let mut steps = Vec::new();
        for runtime in runtimes {
            let of = |rows: &[Row]| -> Vec<Row> {
                rows.iter()
                    .filter(|r| r.runtime == runtime)
                    .cloned()
                    .collect()
            };
            for (a, b) in pair_rows(of(first.1), of(second.1)) {
                for step in Step::ALL {
                    let cell = |row: &Option<Row>| {
                        row.as_ref().and_then(|r| {
                            r.steps.get(&step).map(|c| (r.release.clone(), c.clone()))
                        })
                    };
                    let (first, second) = (cell(&a), cell(&b));
                    if first.is_some() || second.is_some() {
                        steps.push(PairedStep {
                            runtime: runtime.to_owned(),
                            step,
                            first,
                            second,
                        });
                    }
                }
            }
        }
        SideBySide {
            first: first.0.to_owned(),
            second: second.0.to_owned(),
            steps,
        }
    }

    /// The steps whose outcome differs between the two runs.
    pub fn divergences(&self) -> Vec<&PairedStep> {
        self.steps
            .iter()
            .filter(|s| s.agreement() == Agreement::Diverges)
            .collect()
    }

    /// How many steps only one of the runs exercised.
    pub fn one_sided(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s.agreement(), Agreement::OnlyFirst | Agreement::OnlySecond))
            .count()
    }

    /// One divergence in a line: runtime, step, and each run's release and outcome.
    pub fn describe(&self, step: &PairedStep) -> String {
        let side = |name: &str, side: &Option<(String, Cell)>| match side {
            Some((release, cell)) => format!("{release} in `{name}`: {}", cell.outcome_text()),
            None => format!("not exercised in `{name}`"),
        };
        format!(
            "{} {}: {}; {}",
            step.runtime,
            step.step.label(),
            side(&self.first, &step.first),
            side(&self.second, &step.second)
        )
    }

    /// The table: a line per runtime step, each run's release and cell next to the other's, and
    /// whether they agree (`-`: the run made no call of that step).
    pub fn table(&self) -> String {
        let mut out = format!(
            "| runtime | step | `{}` | `{}` | same? |\n|---|---|---|---|---|\n",
            escape(&self.first),
            escape(&self.second)
        );
        for s in &self.steps {
            let cell = |side: &Option<(String, Cell)>| match side {
                Some((release, cell)) => format!("{}: {cell}", escape(release)),
                None => "-".to_owned(),
            };
            let same = match s.agreement() {
                Agreement::Same => "yes".to_owned(),
                Agreement::Diverges => "**no: diverges**".to_owned(),
                Agreement::OnlyFirst => format!("not exercised in `{}`", escape(&self.second)),
                Agreement::OnlySecond => format!("not exercised in `{}`", escape(&self.first)),
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {same} |\n",
                escape(&s.runtime),
                s.step.label(),
                cell(&s.first),
                cell(&s.second)
            ));
        }
        out
    }

    /// The whole comparison as a Markdown document (`compare --compat-matrix`): a title, what
    /// the cells mean, the table, and the divergences.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "# Runtime compatibility side by side: `{}` and `{}`\n\n\
             What each runtime release answered the implementation at each step of its recovery \
             strategy in each run (`works (n)` calls, or `refused (n): <the runtime's error>`; \
             `-`: no such call in that run). A step diverges when it works in one run and not in \
             the other, or is refused with another error; call counts alone are no divergence, \
             and a step only one run exercised is not compared.\n\n",
            escape(&self.first),
            escape(&self.second)
        );
        out.push_str(&self.table());
        let divergences = self.divergences();
        if divergences.is_empty() {
            out.push_str("\nNo runtime step diverges.\n");
        } else {
            out.push_str(&format!(
                "\n**{} runtime step{} diverge{}:**\n\n",
                divergences.len(),
                if divergences.len() == 1 { "" } else { "s" },
                if divergences.len() == 1 { "s" } else { "" }
            ));
            for d in divergences {
                out.push_str(&format!("- {}\n", self.describe(d)));
            }
        }
        out
    }
}

/// Pairs one runtime's rows of two runs (see [`SideBySide`]).
fn pair_rows(mut first: Vec<Row>, mut second: Vec<Row>) -> Vec<(Option<Row>, Option<Row>)> {
    fn version(release: &str) -> &str {
        release.split(" (").next().unwrap_or(release).trim()
    }
    let mut pairs = Vec::new();
    let rules: [fn(&Row, &Row) -> bool; 2] = [
        |a, b| a.release == b.release,
        |a, b| version(&a.release) == version(&b.release),
    ];
    for same in rules {
        let mut i = 0;
        while i < first.len() {
            match second.iter().position(|b| same(&first[i], b)) {
                Some(j) => pairs.push((Some(first.remove(i)), Some(second.remove(j)))),
                None => i += 1,
            }
        }
    }
    if first.len() == 1 && second.len() == 1 {
        pairs.push((first.pop(), second.pop()));
    }
    pairs.extend(first.into_iter().map(|a| (Some(a), None)));
    pairs.extend(second.into_iter().map(|b| (None, Some(b))));
    pairs
}

/// Text that may stand in a Markdown table cell.
fn escape(text: &str) -> String {
    text.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(call: &str, target: &str, outcome: &str, detail: Option<&str>) -> JournalEntry {
        let mut e = JournalEntry::new("codex", call).target(target);
        e.outcome = outcome.to_owned();
        e.detail = detail.map(str::to_owned);
        e
    }

    #[test]
    fn codex_calls_map_to_steps_in_order_and_faults_are_left_out() {
        let journal = [
            entry("process/start", "", "ok", None),
            entry("initialize", "", "ok", None),
            entry("thread/resume", "t", "ok", None),
            entry("turn/start", "t", "ok", None),
            entry("thread/turns/list", "t", "ok", None),
            entry("thread/revert", "t", "ok", None),
            entry("thread/turns/list", "t", "ok", None),
            entry("turn/start", "t", "ok", None),
            entry("turn/start", "t", "ok", None),
            entry(
                "thread/rollback",
                "u",
                "error",
                Some("Invalid request: unknown variant `thread/rollback`\nmore"),
            ),
            entry("thread/revert", "u", "fault:error", Some("mock fault")),
        ];
        let seen = observe("codex", "0.171.0", &journal);
        let steps: Vec<(Step, bool)> = seen.iter().map(|o| (o.step, o.refusal.is_none())).collect();
        assert_eq!(
            steps,
            [
                (Step::Start, true),
                (Step::Deliver, true),
                (Step::Restore, true),
                (Step::Verify, true),
                (Step::Continue, true),
                (Step::Deliver, true),
                (Step::Restore, false),
            ]
        );
        assert_eq!(
            seen[6].refusal.as_deref(),
            Some("Invalid request: unknown variant `thread/rollback`")
        );
        let mut matrix = CompatMatrix::default();
        matrix.add(&seen);
        let table = matrix.markdown();
        assert!(table.contains("| codex | 0.171.0 | works (1) | works (2) | works (1); refused (1): Invalid request: unknown variant `thread/rollback` | works (1) | works (1) |"), "{table}");
        // Two runs' rows add up, as if one run had made every call.
        let (first, second) = seen.split_at(3);
        let (mut a, mut b) = (CompatMatrix::default(), CompatMatrix::default());
        a.add(first);
        b.add(second);
        let mut merged = CompatMatrix::default();
        merged.add_rows(&a.rows());
        merged.add_rows(&b.rows());
        assert_eq!(merged, matrix);
    }

    #[test]
    fn refusals_read_alike_whatever_ids_the_runtime_made_up() {
        for (text, read) in [
            (
                "409 Session is busy: ses_2415ce1c6001Kf3J8Y2n1MGCPe",
                "409 Session is busy: <id>",
            ),
            (
                "thread f768064f-9585-47ad-a39e-ed24c2c063fe already has an active writer",
                "thread <id> already has an active writer",
            ),
            ("no message msg_0123456789abCD", "no message <id>"),
            ("turn ses_short stays", "turn ses_short stays"),
        ] {
            assert_eq!(without_ids(text), read, "{text}");
        }
    }

    #[test]
    fn claude_runs_are_told_apart_by_their_prompt() {
        let run = |call: &str, stdin: serde_json::Value| {
            let mut e = JournalEntry::new("claude", call).target("s");
            e.request = json!({ "argv": [], "stdin": stdin });
            e
        };
        let journal = [
            run("claude --session-id", json!([{"type": "user"}])),
            run("claude --resume", json!([{"type": "user"}])),
            run("claude --resume-session-at", json!([])),
            run("claude --resume-session-at", json!([{"type": "user"}])),
            run("claude --resume", json!([{"type": "user"}])),
        ];
        let steps: Vec<Step> = observe("claude", "2.1.197", &journal)
            .iter()
            .map(|o| o.step)
            .collect();
        assert_eq!(
            steps,
            [
                Step::Start,
                Step::Deliver,
                Step::Deliver,
                Step::Restore,
                Step::Continue,
                Step::Deliver
            ]
        );
    }

    #[test]
    fn opencode_routes_map_to_steps() {
        let call = |c: &str| {
            let mut e = JournalEntry::new("opencode", c).target("ses_1");
            e.outcome = "ok".to_owned();
            e
        };
        let journal = [
            call("POST /session"),
            call("POST /session/ses_1/message"),
            call("POST /session/ses_1/revert"),
            call("GET /session/ses_1"),
            call("GET /session/ses_1/message"),
            call("POST /session/ses_1/message"),
            call("GET /session/ses_1/message"),
        ];
        let steps: Vec<Step> = observe("opencode", "1.18.33", &journal)
            .iter()
            .map(|o| o.step)
            .collect();
        assert_eq!(
            steps,
            [
                Step::Start,
                Step::Deliver,
                Step::Restore,
                Step::Verify,
                Step::Verify,
                Step::Continue
            ]
        );
    }
}
