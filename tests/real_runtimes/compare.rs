//! Normalising runtime answers (ids, timestamps, paths, free text) and comparing a mock's
//! answers with the real runtime's, step by step, with one readable diff at the end.
//!
//! The mocks document the fields they imitate; the real runtimes send many more. A real answer
//! is therefore projected onto the mock's shape before the comparison: every key the mock sends
//! must be in the real answer with the same (normalised) value, keys only the real runtime sends
//! are listed on stderr and not compared. Arrays are compared element by element and by length.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use regex::Regex;
use serde_json::{Map, Value};

/// Keys whose values are times or durations: any non-null value reads `<time>`.
const TIME_KEYS: &[&str] = &[
    "createdAt",
    "updatedAt",
    "startedAt",
    "completedAt",
    "created",
    "updated",
    "completed",
    "timestamp",
    "durationMs",
    "startedAtMs",
    "completedAtMs",
    "emittedAtMs",
    "duration_ms",
    "duration_api_ms",
    "initialized",
    "time",
];

/// Keys whose values are free text or vary by build (versions, models, user agents, costs,
/// token counts): any non-null value reads `<text>`.
const TEXT_KEYS: &[&str] = &[
    "userAgent",
    "cliVersion",
    "claude_code_version",
    "version",
    "model",
    "modelID",
    "providerID",
    "modelProvider",
    "preview",
    "title",
    "slug",
    "total_cost_usd",
    "cost",
    "usage",
    "tokens",
    "modelUsage",
    "uuid_hint",
    "path",
    "cwd",
    "directory",
    "projectID",
    "platformOs",
    "apiKeySource",
    "output_style",
    "agents",
    "skills",
    "plugins",
    "tools",
    "mcp_servers",
    "slash_commands",
    "fast_mode_state",
    "memory_paths",
    "permissionMode",
    "itemsBackwardsCursor",
    "turnsBackwardsCursor",
    "backwardsCursor",
    "nextCursor",
    "revision",
];

/// Rewrites ids, times, temp paths and free text so that two runs compare equal when they
/// behave alike.
pub struct Normaliser {
    roots: Vec<(String, &'static str)>,
    ids: HashMap<String, String>,
    counters: HashMap<&'static str, usize>,
    uuid: Regex,
    opencode_id: Regex,
}

impl Normaliser {
    /// A normaliser that writes `label` for every occurrence of `root` (a temp directory).
    pub fn new(roots: &[(&Path, &'static str)]) -> Normaliser {
        let mut roots: Vec<(String, &'static str)> = roots
            .iter()
            .map(|(p, l)| (p.display().to_string(), *l))
            .collect();
        // The longest root first, so that nested roots win.
        roots.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        Normaliser {
            roots,
            ids: HashMap::new(),
            counters: HashMap::new(),
            uuid: Regex::new(
                r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
            )
            .expect("uuid regex"),
            opencode_id: Regex::new(r"\b(ses|msg|prt)_[0-9A-Za-z]{26}\b").expect("id regex"),
        }
    }

    /// The label of an id (numbered by first appearance, per kind).
    pub fn id(&mut self, kind: &'static str, raw: &str) -> String {
        if let Some(label) = self.ids.get(raw) {
            return label.clone();
        }
        let n = self.counters.entry(kind).or_insert(0);
        *n += 1;
        let label = format!("<{kind}-{n}>");
        self.ids.insert(raw.to_owned(), label.clone());
        label
    }

    /// The normalised text.
    pub fn text(&mut self, s: &str) -> String {
        let mut out = s.to_owned();
        for (root, label) in &self.roots {
            out = out.replace(root.as_str(), label);
        }
        let uuids: Vec<String> = self
            .uuid
            .find_iter(&out)
            .map(|m| m.as_str().to_owned())
            .collect();
        for raw in uuids {
            let label = self.id("uuid", &raw.to_ascii_lowercase());
            out = out.replace(&raw, &label);
        }
        let ids: Vec<(String, &'static str)> = self
            .opencode_id
            .captures_iter(&out)
            .map(|c| {
                let kind = match &c[1] {
                    "ses" => "ses",
                    "msg" => "msg",
                    _ => "prt",
                };
                (c[0].to_owned(), kind)
            })
            .collect();
        for (raw, kind) in ids {
            let label = self.id(kind, &raw);
            out = out.replace(&raw, &label);
        }
        out
    }

    /// The normalised value.
    pub fn value(&mut self, v: &Value) -> Value {
        self.value_in(v, "")
    }

    /// The normalised value found under key `parent` (the ids of `items` elements are item
    /// ids, free-form in both runtimes: they read `<item>`).
    fn value_in(&mut self, v: &Value, parent: &str) -> Value {
        match v {
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|i| self.value_in(i, parent)).collect())
            }
            Value::Object(map) => {
                let mut out = Map::new();
                for (k, v) in map {
                    let nv = if v.is_null() {
                        Value::Null
                    } else if parent == "items" && k == "id" {
                        Value::String("<item>".into())
                    } else if TIME_KEYS.contains(&k.as_str()) {
                        Value::String("<time>".into())
                    } else if TEXT_KEYS.contains(&k.as_str()) {
                        Value::String("<text>".into())
                    } else {
                        self.value_in(v, k)
                    };
                    out.insert(self.text(k), nv);
                }
                Value::Object(out)
            }
            other => other.clone(),
        }
    }
}

/// `real` restricted to the keys `mock` has (recursively); missing keys read `"<absent>"`.
/// Keys only `real` has are added to `extra` (as dotted paths).
pub fn project(real: &Value, mock: &Value, at: &str, extra: &mut BTreeSet<String>) -> Value {
    match (real, mock) {
        // Nothing in common (a result where the mock answered an error): all of it.
        (Value::Object(r), Value::Object(m))
            if !m.is_empty() && !m.keys().any(|k| r.contains_key(k)) =>
        {
            real.clone()
        }
        (Value::Object(r), Value::Object(m)) => {
            for k in r.keys() {
                if !m.contains_key(k) {
                    extra.insert(format!("{at}.{k}"));
                }
            }
            let mut out = Map::new();
            for (k, mv) in m {
                let pv = match r.get(k) {
                    Some(rv) => project(rv, mv, &format!("{at}.{k}"), extra),
                    None => Value::String("<absent>".into()),
                };
                out.insert(k.clone(), pv);
            }
            Value::Object(out)
        }
        (Value::Array(r), Value::Array(m)) => Value::Array(
            r.iter()
                .enumerate()
                .map(|(i, rv)| match m.get(i).or(m.first()) {
                    Some(mv) => project(rv, mv, &format!("{at}[]"), extra),
                    None => rv.clone(),
                })
                .collect(),
        ),
        _ => real.clone(),
    }
}

/// The answers of the mock and of the real runtime to the same calls, compared at the end.
/// Steps are recorded raw; the real answer is projected onto the mock's shape first and both
/// are normalised after, in step order, so that ids only the real runtime sends do not shift
/// the numbering of the others.
pub struct Comparison {
    mock_norm: Normaliser,
    real_norm: Normaliser,
    steps: Vec<(String, Value, Value)>,
}

impl Comparison {
    /// A comparison normalising each side with its own normaliser.
    pub fn new(mock_norm: Normaliser, real_norm: Normaliser) -> Comparison {
        Comparison {
            mock_norm,
            real_norm,
            steps: Vec::new(),
        }
    }

    /// Records one step.
    pub fn step(&mut self, label: impl Into<String>, mock: Value, real: Value) {
        self.steps.push((label.into(), mock, real));
    }

    /// Records the steps of two transcripts made by the same sequence on both sides.
    pub fn steps(&mut self, mock: Vec<(String, Value)>, real: Vec<(String, Value)>) {
        let n = mock.len().max(real.len());
        for i in 0..n {
            let (ml, mv) = mock
                .get(i)
                .cloned()
                .unwrap_or_else(|| ("(no step)".into(), Value::Null));
            let (rl, rv) = real
                .get(i)
                .cloned()
                .unwrap_or_else(|| ("(no step)".into(), Value::Null));
            let label = if ml == rl { ml } else { format!("{ml} / {rl}") };
            self.step(label, mv, rv);
        }
    }

    /// Panics with a unified diff (`-mock`, `+real`) of every step that differs.
    pub fn assert_same(mut self, what: &str) {
        let mut report = String::new();
        let mut differing = Vec::new();
        let steps = std::mem::take(&mut self.steps);
        let total = steps.len();
        for (label, mock, real) in steps {
            let mut extra = BTreeSet::new();
            let projected = project(&real, &mock, "", &mut extra);
            if !extra.is_empty() {
                eprintln!(
                    "{what}: {label}: only the real runtime sends {}",
                    extra.into_iter().collect::<Vec<_>>().join(", ")
                );
            }
            let mock = self.mock_norm.value(&mock);
            let projected = self.real_norm.value(&projected);
            if projected != mock {
                let m = serde_json::to_string_pretty(&mock).unwrap_or_default();
                let r = serde_json::to_string_pretty(&projected).unwrap_or_default();
                let diff = similar::TextDiff::from_lines(&m, &r);
                report.push_str(&format!("\n=== {label} (-mock +real)\n"));
                report.push_str(
                    &diff
                        .unified_diff()
                        .context_radius(4)
                        .header("mock", "real")
                        .to_string(),
                );
                differing.push(label);
            }
        }
        if !differing.is_empty() {
            panic!(
                "{what}: the mock and the real runtime differ in {} of {total} steps ({}):{report}",
                differing.len(),
                differing.join("; ")
            );
        }
    }
}
