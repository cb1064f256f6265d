//! `--shard I/N`: splitting one run's scenarios across N CI jobs, every scenario in exactly one.
//!
//! The split is deterministic (the same selection and the same durations give the same shards on
//! every machine) and balanced: scenarios are dealt longest first, each to the shard with the
//! least work so far (the classic longest-processing-time rule). A scenario's work is its
//! duration in a previous run's results file (`--durations FILE`, the `durationMs` of each
//! scenario record), or, for a scenario that file does not know, the median of the known ones;
//! with no file every scenario weighs the same.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use anyhow::Context as _;

/// Which shard a run is: `index` of `count`, both 1-based on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSpec {
    /// 1..=count.
    pub index: usize,
    /// How many shards the whole run is split into.
    pub count: usize,
}

impl fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The most shards a run may be split into.
pub const MAX_SHARDS: usize = 256;

impl std::str::FromStr for ShardSpec {
    type Err = String;

    /// `2/4`: the second of four shards.
    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "`{text}` is not a shard: write `I/N`, the I-th of N shards, with 1 <= I <= N <= \
                 {MAX_SHARDS} (e.g. `--shard 2/4`)"
            )
        };
        let (index, count) = text.trim().split_once('/').ok_or_else(bad)?;
        let index: usize = index.trim().parse().map_err(|_| bad())?;
        let count: usize = count.trim().parse().map_err(|_| bad())?;
        if index == 0 || count == 0 || index > count || count > MAX_SHARDS {
            return Err(bad());
        }
        Ok(ShardSpec { index, count })
    }
}

/// A scenario as sharding sees it: where it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// The feature file, relative to the working directory.
    pub feature: String,
    /// The scenario's line (an outline example's own row).
    pub line: usize,
}

/// Recorded durations, by scenario.
pub type Durations = HashMap<Key, f64>;

/// Reads the durations of a previous run's results file (`run --json` or `--report-dir`'s
/// `results.json`): each scenario record's `feature`, `line` and `durationMs`. Records without a
/// duration are skipped; a file without any is an error (it cannot balance anything).
pub fn load_durations(path: &Path) -> anyhow::Result<Durations> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the durations file `{}`", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        let full = e.to_string();
        let position = format!(" at line {} column {}", e.line(), e.column());
        anyhow::anyhow!(
            "{}:{}:{}: `{}` is not JSON: {} (give a results file written by `run --json` or \
             `--report-dir`)",
            path.display(),
            e.line(),
            e.column(),
            path.display(),
            full.strip_suffix(&position).unwrap_or(&full)
        )
    })?;
    let scenarios = value
        .get("scenarios")
        .and_then(|s| s.as_array())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "`{}` has no `scenarios` list: give a results file written by `run --json` or \
                 `--report-dir`",
                path.display()
            )
        })?;
    let mut durations = Durations::new();
    for record in scenarios {
        let feature = record.get("feature").and_then(|f| f.as_str());
        let line = record.get("line").and_then(|l| l.as_u64());
        let ms = record.get("durationMs").and_then(|d| d.as_f64());
        if let (Some(feature), Some(line), Some(ms)) = (feature, line, ms) {
            if ms.is_finite() && ms >= 0.0 {
                durations.insert(
                    Key {
                        feature: feature.to_owned(),
                        line: line as usize,
                    },
                    ms,
                );
            }
        }
    }
    anyhow::ensure!(
        !durations.is_empty(),
        "`{}` records no scenario duration (`durationMs`): write it with a harness that records \
         durations, or shard without `--durations`",
        path.display()
    );
    Ok(durations)
}

/// Deals `keys` into `count` shards: the shard (0-based) of each key, in the order given.
pub fn assign(keys: &[Key], count: usize, durations: Option<&Durations>) -> Vec<usize> {
    let count = count.max(1);
    let known: Vec<f64> = {
        let mut known: Vec<f64> = keys
            .iter()
            .filter_map(|k| durations.and_then(|d| d.get(k)).copied())
            .collect();
        known.sort_by(f64::total_cmp);
        known
    };
    let fallback = if known.is_empty() {
        1.0
    } else {
        known[known.len() / 2]
    };
    let weight = |k: &Key| {
        durations
            .and_then(|d| d.get(k))
            .copied()
            .unwrap_or(fallback)
    };
    // Longest first; ties by place, so the order never depends on the input's order.
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|&a, &b| {
        weight(&keys[b])
            .total_cmp(&weight(&keys[a]))
            .then_with(|| keys[a].cmp(&keys[b]))
    });
    let mut load = vec![0.0_f64; count];
    let mut size = vec![0_usize; count];
    let mut shard_of = vec![0; keys.len()];
    for i in order {
        // The least loaded shard; ties go to the one with fewer scenarios, then the first.
        let target = (0..count)
            .min_by(|&a, &b| {
                load[a]
                    .total_cmp(&load[b])
                    .then_with(|| size[a].cmp(&size[b]))
                    .then_with(|| a.cmp(&b))
            })
            .unwrap_or(0);
        load[target] += weight(&keys[i]);
        size[target] += 1;
        shard_of[i] = target;
    }
    shard_of
}

/// The expected work of each shard (same units as the durations), for the run's summary.
pub fn loads(
    keys: &[Key],
    shard_of: &[usize],
    count: usize,
    durations: Option<&Durations>,
) -> BTreeMap<usize, (usize, f64)> {
    let mut out = BTreeMap::new();
    for (key, shard) in keys.iter().zip(shard_of) {
        let entry = out.entry(*shard).or_insert((0, 0.0));
        entry.0 += 1;
        entry.1 += durations.and_then(|d| d.get(key)).copied().unwrap_or(0.0);
    }
    for shard in 0..count {
        out.entry(shard).or_insert((0, 0.0));
    }
    out
}

/// A 64-bit FNV-1a digest, the same on every machine and build: what the results file records
/// to tell whether two shards come from one run (the suite they read, the scenarios they
/// selected, the split they made).
#[derive(Debug, Clone, Copy)]
pub struct Digest(u64);

impl Default for Digest {
    fn default() -> Self {
        Digest(0xcbf2_9ce4_8422_2325)
    }
}

impl Digest {
    /// Takes in `bytes`, with their length first (so that `ab`,`c` and `a`,`bc` differ).
    pub fn eat(&mut self, bytes: &[u8]) -> &mut Self {
        for b in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self
    }

    /// The digest in 16 hexadecimal digits.
    pub fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}

/// The digest of a selection: every scenario's place, in order.
pub fn selection_digest(keys: &[Key]) -> String {
    let mut sorted: Vec<&Key> = keys.iter().collect();
    sorted.sort();
    let mut digest = Digest::default();
    for key in sorted {
        digest
            .eat(key.feature.as_bytes())
            .eat(&(key.line as u64).to_le_bytes());
    }
    digest.hex()
}

/// The digest of a split: each scenario's place with its shard (0-based, as [`assign`] gives
/// them). Two shards made the same split exactly when their digests are equal.
pub fn split_digest(keys: &[Key], shard_of: &[usize]) -> String {
    let mut pairs: Vec<(&Key, usize)> = keys.iter().zip(shard_of.iter().copied()).collect();
    pairs.sort();
    let mut digest = Digest::default();
    for (key, shard) in pairs {
        digest
            .eat(key.feature.as_bytes())
            .eat(&(key.line as u64).to_le_bytes())
            .eat(&(shard as u64).to_le_bytes());
    }
    digest.hex()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: usize) -> Vec<Key> {
        (0..n)
            .map(|i| Key {
                feature: format!("features/f{}.feature", i % 3),
                line: 10 + i,
            })
            .collect()
    }

    #[test]
    fn shard_specs_parse_and_bad_ones_say_how() {
        assert_eq!(
            "2/4".parse::<ShardSpec>(),
            Ok(ShardSpec { index: 2, count: 4 })
        );
        for bad in ["0/4", "5/4", "4", "a/b", "1/0", "-1/2", "1/999"] {
            let err = bad.parse::<ShardSpec>().expect_err(bad);
            assert!(err.contains("`I/N`"), "{err}");
        }
    }

    #[test]
    fn every_key_lands_in_exactly_one_shard_and_counts_balance_without_durations() {
        for n in [1, 7, 100] {
            for count in 1..=6 {
                let keys = keys(n);
                let shard_of = assign(&keys, count, None);
                assert_eq!(shard_of.len(), n);
                assert!(shard_of.iter().all(|s| *s < count));
                let sizes = loads(&keys, &shard_of, count, None);
                let (min, max) = sizes
                    .values()
                    .fold((usize::MAX, 0), |(lo, hi), (c, _)| (lo.min(*c), hi.max(*c)));
                assert!(max - min <= 1, "{n} over {count}: {sizes:?}");
            }
        }
    }

    #[test]
    fn the_split_is_deterministic_whatever_the_input_order() {
        let keys = keys(40);
        let mut reversed = keys.clone();
        reversed.reverse();
        let a = assign(&keys, 4, None);
        let b = assign(&reversed, 4, None);
        for (i, key) in keys.iter().enumerate() {
            let j = reversed.iter().position(|k| k == key).expect("same keys");
            assert_eq!(a[i], b[j], "{key:?}");
        }
    }

    #[test]
    fn recorded_durations_balance_the_work_not_the_count() {
        let keys = keys(12);
        // One long scenario and eleven short ones.
        let mut durations = Durations::new();
        for (i, k) in keys.iter().enumerate() {
            durations.insert(k.clone(), if i == 0 { 1100.0 } else { 100.0 });
        }
        let shard_of = assign(&keys, 2, Some(&durations));
        let work = loads(&keys, &shard_of, 2, Some(&durations));
        assert_eq!(work[&0].1.max(work[&1].1), 1100.0, "{work:?}");
        assert_eq!(work[&shard_of[0]].0, 1, "the long one runs alone");
    }

    #[test]
    fn digests_follow_the_selection_and_the_split_not_the_order() {
        let keys = keys(9);
        let mut reversed = keys.clone();
        reversed.reverse();
        assert_eq!(selection_digest(&keys), selection_digest(&reversed));
        assert_ne!(selection_digest(&keys), selection_digest(&keys[1..]));
        let a = assign(&keys, 3, None);
        let b = assign(&reversed, 3, None);
        assert_eq!(split_digest(&keys, &a), split_digest(&reversed, &b));
        let durations: Durations = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), (i * i) as f64 * 10.0))
            .collect();
        let c = assign(&keys, 3, Some(&durations));
        assert_ne!(split_digest(&keys, &a), split_digest(&keys, &c));
        let mut ab = Digest::default();
        let mut a_b = Digest::default();
        assert_ne!(
            ab.eat(b"ab").eat(b"c").hex(),
            a_b.eat(b"a").eat(b"bc").hex()
        );
    }

    #[test]
    fn a_results_file_without_durations_is_refused_with_the_path() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("old.json");
        std::fs::write(&path, r#"{"scenarios":[{"feature":"f","line":3}]}"#).expect("written");
        let err = load_durations(&path).expect_err("no durations").to_string();
        assert!(
            err.contains("old.json") && err.contains("durationMs"),
            "{err}"
        );
        std::fs::write(&path, "{\n  \"scenarios\": [,]\n}").expect("written");
        let err = load_durations(&path).expect_err("not json").to_string();
        assert!(
            err.contains("is not JSON") && err.contains("old.json:2:17: "),
            "{err}"
        );
    }
}
