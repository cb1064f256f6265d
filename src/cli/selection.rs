//! Which scenarios of the selection a run executes: its shard (`--shard`, balanced by
//! `--durations`), and the `--list` listing of them with their rules.

use rewind_conformance::catalog::Catalog;

use super::args::RunArgs;
use super::usage;

/// What a run executes of its selection.
pub(super) struct Split {
    /// The scenarios this run executes when it is one shard of a split run (`None`: every
    /// selected one).
    pub(super) only: Option<std::collections::HashSet<crate::suite::shard::Key>>,
    /// How many scenarios it will finish.
    pub(super) expected: usize,
    /// How many the filters select (every shard together).
    pub(super) selected: usize,
    /// A digest of their places.
    pub(super) digest: String,
    /// Which shard this run is, for the results file.
    pub(super) shard: Option<crate::results::ShardRecord>,
}

/// The scenarios this run executes when it is one shard of a split run, and what the results
/// file records of the selection and the split.
pub(super) fn shard_of_selection(
    args: &RunArgs,
    selected: &[crate::suite::selection::Selected],
) -> anyhow::Result<Split> {
    use crate::suite::shard::{assign, load_durations, selection_digest, split_digest, Key};
    let keys: Vec<Key> = selected
        .iter()
        .flat_map(|s| {
            let feature = crate::suite::applicability::relative_to_cwd(&s.path)
                .display()
                .to_string();
            s.units.iter().map(move |u| Key {
                feature: feature.clone(),
                line: u.line,
            })
        })
        .collect();
    let digest = selection_digest(&keys);
    let Some(spec) = args.shard else {
        return Ok(Split {
            only: None,
            expected: keys.len(),
            selected: keys.len(),
            digest,
            shard: None,
        });
    };
    let durations = args.durations.as_deref().map(load_durations).transpose()?;
    let shard_of = assign(&keys, spec.count, durations.as_ref());
    let mine: std::collections::HashSet<Key> = keys
        .iter()
        .zip(&shard_of)
        .filter(|(_, shard)| **shard + 1 == spec.index)
        .map(|(k, _)| k.clone())
        .collect();
    if mine.is_empty() {
        return Err(usage(format!(
            "shard {spec} holds no scenario: the filters select {} scenario{}, fewer than {} \
             shards (use fewer shards)",
            keys.len(),
            if keys.len() == 1 { "" } else { "s" },
            spec.count
        )));
    }
    let count = mine.len();
    let loads = crate::suite::shard::loads(&keys, &shard_of, spec.count, durations.as_ref());
    let balance = match &durations {
        Some(_) => {
            let secs: Vec<String> = loads
                .values()
                .map(|(_, ms)| format!("{:.0}s", ms / 1000.0))
                .collect();
            format!("recorded work per shard {}", secs.join(" / "))
        }
        None => "no durations: balanced by count".to_owned(),
    };
    eprintln!(
        "shard {spec}: {count} of {} scenarios ({balance})",
        keys.len()
    );
    Ok(Split {
        only: Some(mine),
        expected: count,
        selected: keys.len(),
        digest,
        shard: Some(crate::results::ShardRecord {
            index: spec.index,
            count: spec.count,
            scenarios: count,
            balanced_by: if durations.is_some() {
                "durations"
            } else {
                "count"
            }
            .to_owned(),
            split: split_digest(&keys, &shard_of),
        }),
    })
}

/// `--list`: the selected scenarios (one line each, with their rules), then the rules they
/// check, on stdout.
pub(super) fn print_list(
    args: &RunArgs,
    selected: &[crate::suite::selection::Selected],
    only: Option<&std::collections::HashSet<crate::suite::shard::Key>>,
    catalog: &Catalog,
) {
    let mut rules = std::collections::BTreeSet::new();
    let mut count = 0;
    for s in selected {
        let feature = crate::suite::applicability::relative_to_cwd(&s.path)
            .display()
            .to_string();
        for unit in &s.units {
            let key = crate::suite::shard::Key {
                feature: feature.clone(),
                line: unit.line,
            };
            if only.is_some_and(|o| !o.contains(&key)) {
                continue;
            }
            let ids: Vec<&str> = unit
                .tags
                .iter()
                .filter_map(|t| t.strip_prefix("rule:"))
                .collect();
            rules.extend(ids.iter().map(|r| (*r).to_owned()));
            println!(
                "{feature}:{} {}  [{}]",
                unit.line,
                unit.name,
                ids.join(", ")
            );
            count += 1;
        }
    }
    let shard = args
        .shard
        .map(|s| format!(" in shard {s}"))
        .unwrap_or_default();
    println!(
        "\n{count} scenario{}{shard}, checking {} rule{}:",
        if count == 1 { "" } else { "s" },
        rules.len(),
        if rules.len() == 1 { "" } else { "s" }
    );
    for id in &rules {
        let text = catalog
            .rules()
            .iter()
            .find(|r| &r.id == id)
            .map(|r| r.text.as_str())
            .unwrap_or("");
        println!("  {id}  {text}");
    }
}
