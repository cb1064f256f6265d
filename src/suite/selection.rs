//! Which scenarios a run selects, worked out before anything starts: so that a filter matching
//! nothing, or a scenario naming a fixture that does not exist, is an error at once instead of
//! a run that tests nothing or a step failure minutes later.
//!
//! The filters mean what they mean to cucumber: a tag expression evaluated on the tags of the
//! feature, the rule, the scenario and (for an outline) one of its `Examples` blocks; a regex
//! searched in the scenario's name (for an outline, its name as written or any of its expanded
//! names).

use std::path::{Path, PathBuf};

use cucumber::gherkin::tagexpr::TagOperation;
use cucumber::gherkin::{self, GherkinEnv};
use cucumber::tag::Ext as _;

/// One selected scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selected {
    /// The feature file.
    pub path: PathBuf,
    /// The scenario's line.
    pub line: usize,
    /// The scenario's name as written.
    pub name: String,
    /// The fixtures its `Given the conversation "..."` steps name (outline placeholders
    /// expanded), with the line of each step.
    pub fixtures: Vec<(String, usize)>,
    /// What runs: the scenario itself, or each selected example row of an outline.
    pub units: Vec<Unit>,
}

/// One scenario as it runs: a plain scenario, or one example row of an outline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// Its line, as reports name it (an example row's own line, as cucumber numbers it).
    pub line: usize,
    /// Its name, placeholders filled.
    pub name: String,
    /// Its tags (feature, rule, scenario and examples), without `@`.
    pub tags: Vec<String>,
    /// The fixture its first `Given the conversation "..."` step names, placeholders filled.
    pub fixture: Option<String>,
}

/// An example row: each placeholder with its value.
type Placeholders = Vec<(String, String)>;

/// The step that names a scenario's fixture.
const FIXTURE_STEP: &str = "the conversation ";

/// The scenarios of `files` that `tags` and `name` select (all of them without filters).
pub fn select(
    files: &[PathBuf],
    tags: Option<&TagOperation>,
    name: Option<&regex::Regex>,
) -> anyhow::Result<Vec<Selected>> {
    select_running(files, tags, name, &|_, _| true)
}

/// The scenarios of `files` that `tags` and `name` select and `runs` keeps; `runs` is given a
/// scenario's steps (its backgrounds' first) and its own tags.
pub fn select_running(
    files: &[PathBuf],
    tags: Option<&TagOperation>,
    name: Option<&regex::Regex>,
    runs: &dyn Fn(&[gherkin::Step], &[String]) -> bool,
) -> anyhow::Result<Vec<Selected>> {
    let mut selected = Vec::new();
    for file in files {
        let feature = gherkin::Feature::parse_path(file, GherkinEnv::default())
            .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        let mut background = steps_of(feature.background.as_ref());
        let in_rules = feature
            .rules
            .iter()
            .flat_map(|rule| rule.scenarios.iter().map(move |s| (Some(rule), s)));
        for (rule, scenario) in feature.scenarios.iter().map(|s| (None, s)).chain(in_rules) {
            let mut scope_tags: Vec<String> = feature.tags.clone();
            let mut steps = std::mem::take(&mut background);
            if let Some(rule) = rule {
                scope_tags.extend(rule.tags.iter().cloned());
                steps.extend(steps_of(rule.background.as_ref()));
            }
            scope_tags.extend(scenario.tags.iter().cloned());
            let gherkin_steps: Vec<gherkin::Step> = feature
                .background
                .iter()
                .chain(rule.and_then(|r| r.background.as_ref()))
                .flat_map(|b| b.steps.iter().cloned())
                .chain(scenario.steps.iter().cloned())
                .collect();
            if !runs(&gherkin_steps, &scenario.tags) {
                background = steps_of(feature.background.as_ref());
                continue;
            }
            steps.extend(
                scenario
                    .steps
                    .iter()
                    .map(|s| (s.value.clone(), s.position.line)),
            );
            background = steps_of(feature.background.as_ref());

            // One row of placeholder values per example (none for a plain scenario), with the
            // line cucumber gives the expanded scenario: the `Examples:` line plus the row's
            // index plus two.
            let mut rows: Vec<(Vec<String>, Placeholders, usize)> = Vec::new();
            for examples in &scenario.examples {
                let mut block_tags = scope_tags.clone();
                block_tags.extend(examples.tags.iter().cloned());
                let Some(table) = &examples.table else {
                    continue;
                };
                let Some((header, body)) = table.rows.split_first() else {
                    continue;
                };
                for (index, row) in body.iter().enumerate() {
                    let values = header.iter().cloned().zip(row.iter().cloned()).collect();
                    rows.push((
                        block_tags.clone(),
                        values,
                        examples.position.line + index + 2,
                    ));
                }
            }
            if scenario.examples.is_empty() {
                rows.push((scope_tags.clone(), Vec::new(), scenario.position.line));
            }
            let mut fixtures = Vec::new();
            let mut units = Vec::new();
            let mut chosen = false;
            for (row_tags, values, line) in &rows {
                let tags_match = tags.is_none_or(|t| t.eval(row_tags.iter()));
                let expanded = expand(&scenario.name, values);
                let name_matches =
                    name.is_none_or(|re| re.is_match(&scenario.name) || re.is_match(&expanded));
                if !(tags_match && name_matches) {
                    continue;
                }
                chosen = true;
                units.push(Unit {
                    line: *line,
                    name: expanded.clone(),
                    tags: row_tags
                        .iter()
                        .map(|t| t.trim_start_matches('@').to_owned())
                        .collect(),
                    fixture: steps
                        .iter()
                        .find_map(|(text, _)| fixture_named(&expand(text, values))),
                });
                for (text, line) in &steps {
                    if let Some(fixture) = fixture_named(&expand(text, values)) {
                        if !fixtures.iter().any(|(f, l)| *f == fixture && l == line) {
                            fixtures.push((fixture, *line));
                        }
                    }
                }
            }
            if chosen {
                selected.push(Selected {
                    path: file.clone(),
                    line: scenario.position.line,
                    name: scenario.name.clone(),
                    fixtures,
                    units,
                });
            }
        }
    }
    Ok(selected)
}

fn steps_of(background: Option<&gherkin::Background>) -> Vec<(String, usize)> {
    background
        .map(|b| {
            b.steps
                .iter()
                .map(|s| (s.value.clone(), s.position.line))
                .collect()
        })
        .unwrap_or_default()
}

/// The fixture of every scenario of `selected` that runs (those of `only` when it is given),
/// in the order they start.
pub fn fixture_plan(
    selected: &[Selected],
    only: Option<&std::collections::HashSet<super::shard::Key>>,
) -> Vec<String> {
    selected
        .iter()
        .flat_map(|s| {
            let feature = super::applicability::relative_to_cwd(&s.path)
                .display()
                .to_string();
            s.units.iter().filter_map(move |u| {
                let key = super::shard::Key {
                    feature: feature.clone(),
                    line: u.line,
                };
                if only.is_some_and(|only| !only.contains(&key)) {
                    return None;
                }
                u.fixture.clone()
            })
        })
        .collect()
}

/// `text` with every `<placeholder>` of `values` replaced.
fn expand(text: &str, values: &[(String, String)]) -> String {
    values.iter().fold(text.to_owned(), |text, (key, value)| {
        text.replace(&format!("<{key}>"), value)
    })
}

/// The fixture a step names, if it is `the conversation "<name>"`.
fn fixture_named(step: &str) -> Option<String> {
    let quoted = step.trim().strip_prefix(FIXTURE_STEP)?.trim();
    let inner = quoted.strip_prefix('"')?.strip_suffix('"')?;
    Some(inner.to_owned())
}

/// Where a scenario is, for messages: `path:line`.
pub fn at(path: &Path, line: usize) -> String {
    format!("{}:{line}", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FEATURE: &str = "\
@feature-tag
Feature: f
  Background:
    Given the conversation \"from-background\"

  @rule:a.one
  Scenario: plain one
    Then nothing

  Scenario Outline: outlined <runtime>
    Given the conversation \"<fixture>\"

    @rule:b.two
    Examples:
      | runtime | fixture |
      | codex   | fx-codex |

    Examples:
      | runtime | fixture |
      | claude  | fx-claude |
";

    fn file() -> (tempfile::TempDir, Vec<PathBuf>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("f.feature");
        std::fs::write(&path, FEATURE).expect("written");
        (dir, vec![path])
    }

    fn names(selected: &[Selected]) -> Vec<&str> {
        selected.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn no_filter_selects_every_scenario_with_the_fixtures_it_names() {
        let (_dir, files) = file();
        let all = select(&files, None, None).expect("parses");
        assert_eq!(names(&all), ["plain one", "outlined <runtime>"]);
        let fixtures: Vec<&str> = all[1].fixtures.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fixtures, ["from-background", "fx-codex", "fx-claude"]);
    }

    #[test]
    fn tags_count_feature_scenario_and_examples_tags() {
        let (_dir, files) = file();
        let tag = |t: &str| t.parse::<TagOperation>().expect("tag expression");
        let by_rule = select(&files, Some(&tag("@rule:b.two")), None).expect("parses");
        assert_eq!(names(&by_rule), ["outlined <runtime>"]);
        let fixtures: Vec<&str> = by_rule[0]
            .fixtures
            .iter()
            .map(|(f, _)| f.as_str())
            .collect();
        assert_eq!(
            fixtures,
            ["from-background", "fx-codex"],
            "only the tagged examples"
        );
        let everything = select(&files, Some(&tag("@feature-tag")), None).expect("parses");
        assert_eq!(everything.len(), 2);
        assert!(select(&files, Some(&tag("@rule:nope")), None)
            .expect("parses")
            .is_empty());
    }

    #[test]
    fn every_example_row_is_a_unit_with_cucumbers_line() {
        let (_dir, files) = file();
        let all = select(&files, None, None).expect("parses");
        let units: Vec<(usize, &str)> = all
            .iter()
            .flat_map(|s| s.units.iter().map(|u| (u.line, u.name.as_str())))
            .collect();
        assert_eq!(
            units,
            [
                (7, "plain one"),
                (16, "outlined codex"),
                (20, "outlined claude")
            ]
        );
        assert!(all[1].units[0].tags.contains(&"rule:b.two".to_owned()));
    }

    #[test]
    fn names_match_as_written_or_expanded() {
        let (_dir, files) = file();
        let re = |r: &str| regex::Regex::new(r).expect("regex");
        assert_eq!(
            names(&select(&files, None, Some(&re("claude"))).expect("parses")),
            ["outlined <runtime>"]
        );
        assert_eq!(
            names(&select(&files, None, Some(&re("^plain"))).expect("parses")),
            ["plain one"]
        );
        assert!(select(&files, None, Some(&re("nothing-like-this")))
            .expect("parses")
            .is_empty());
    }

    #[test]
    fn the_plan_is_each_running_units_first_fixture_in_order() {
        let (_dir, files) = file();
        let all = select(&files, None, None).expect("parses");
        // The background's fixture comes first in every scenario.
        assert_eq!(
            fixture_plan(&all, None),
            ["from-background", "from-background", "from-background"]
        );
        // A scenario the profile leaves out has no place in the plan.
        let outlines_only = select_running(&files, None, None, &|steps, _| {
            steps.iter().any(|s| s.value.contains("<fixture>"))
        })
        .expect("parses");
        assert_eq!(names(&outlines_only), ["outlined <runtime>"]);
        // A shard's plan holds its own units only.
        let only: std::collections::HashSet<super::super::shard::Key> =
            [super::super::shard::Key {
                feature: super::super::applicability::relative_to_cwd(&files[0])
                    .display()
                    .to_string(),
                line: 20,
            }]
            .into_iter()
            .collect();
        assert_eq!(fixture_plan(&all, Some(&only)), ["from-background"]);
    }
}
