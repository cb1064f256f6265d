//! Tests of the generator: generated fixtures load (and their runtime sessions seed into the
//! mocks), generation is deterministic, canaries are unique, shrinking keeps cases valid, the
//! conditions each case aims at hold, and the shapes of a run cover what the generator claims.
//!
//! Seeding into PostgreSQL is tested when `REWIND_TEST_DATABASE_URL` names a server (as the
//! fixture seeding tests are; `REWIND_FUZZ_SEED_CASES` sets how many cases, 120 by default);
//! without it that test prints a note and passes. `REWIND_FUZZ_CASES=N` makes the loading test
//! walk N cases of each of its seeds.

use std::collections::{BTreeMap, BTreeSet};

use proptest::strategy::ValueTree;

use super::*;

mod checks;

use crate::fixtures::ScopeKind;
use checks::{check_case, load};

/// The seeds and case counts the loading tests walk: a few hundred cases.
const SEEDS: [(u64, u64); 3] = [(1, 120), (0xdead_beef, 100), (u64::MAX, 80)];

#[test]
fn generated_cases_load_and_hold_together() {
    // `REWIND_FUZZ_CASES=N` walks N cases of each seed instead (a longer soak).
    let soak: Option<u64> = std::env::var("REWIND_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok());
    for (seed, count) in SEEDS {
        for index in 0..soak.unwrap_or(count) {
            let (case, _) = case(seed, index);
            let fixture = load(&case);
            check_case(&case, &fixture);
        }
    }
}

#[test]
fn generation_is_deterministic_and_cases_differ() {
    let mut seen = BTreeSet::new();
    for index in 0..40 {
        let (first, _) = case(7, index);
        let (again, _) = case(7, index);
        assert_eq!(first.yaml, again.yaml, "case {index}");
        assert_eq!(first.request, again.request);
        assert_eq!(first.shape, again.shape);
        // Through the public strategy and the case's random generator, the same case.
        let mut runner = proptest::test_runner::TestRunner::new_with_rng(
            proptest::test_runner::Config::default(),
            case_rng(7, index),
        );
        let tree = proptest::strategy::Strategy::new_tree(
            &case_strategy(&GenConfig::default(), 7, index),
            &mut runner,
        )
        .expect("tree");
        assert_eq!(
            tree.current().yaml,
            first.yaml,
            "case {index} via the strategy"
        );
        // Cases differ beyond their names.
        let body = first.yaml.replace(&format!("{:x}-{index}", 7), "");
        assert!(seen.insert(body), "case {index} repeats an earlier case");
    }
    let (other_seed, _) = case(8, 0);
    assert_ne!(other_seed.yaml, case(7, 0).0.yaml);
}

#[test]
fn canaries_are_unique_across_a_run() {
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (seed, count) in [(1u64, 150u64), (0x10, 50), (0x1, 0)] {
        for index in 0..count {
            let (case, _) = case(seed, index);
            let fixture = load(&case);
            for canary in fixture.canaries() {
                if let Some(first) = seen.insert(canary.clone(), case.name.clone()) {
                    panic!("{canary} in {} and {first}", case.name);
                }
            }
        }
    }
    assert!(seen.len() > 1000, "only {} canaries", seen.len());
}

#[test]
fn shrinking_keeps_cases_valid() {
    /// Walks case `index` along a shrink, as a failing property would: accepts a few
    /// simplifications, rejects some. Returns how many simplifications changed the case.
    fn walk(index: u64) -> usize {
        let (first, mut tree) = case(0x5eed, index);
        let mut simplified = 0;
        let mut steps = 0;
        let mut last = first.yaml.clone();
        while steps < 30 && tree.simplify() {
            steps += 1;
            let current = tree.current();
            let fixture = load(&current);
            check_case(&current, &fixture);
            assert_eq!(current.name, first.name);
            if current.yaml != last {
                simplified += 1;
            }
            if steps % 5 == 4 && tree.complicate() {
                let current = tree.current();
                let fixture = load(&current);
                check_case(&current, &fixture);
            }
            last = current.yaml;
        }
        assert!(steps > 0, "case {index} cannot be simplified");
        simplified
    }
    // The cases are independent: walked on every core at once.
    let next = std::sync::atomic::AtomicU64::new(0);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let simplified: usize = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut simplified = 0;
                    loop {
                        let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if index >= 24 {
                            return simplified;
                        }
                        simplified += walk(index);
                    }
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert!(
        simplified > 100,
        "only {simplified} simplifications changed a case"
    );
}

#[test]
fn shrinking_reaches_a_small_case() {
    // Simplify as far as it goes, accepting every step: the result is small and still valid.
    let (first, mut tree) = case(3, 11);
    let mut steps = 0;
    while steps < 2000 && tree.simplify() {
        steps += 1;
    }
    let smallest = tree.current();
    let fixture = load(&smallest);
    check_case(&smallest, &fixture);
    assert!(
        smallest.shape.messages <= 4 && smallest.shape.messages < first.shape.messages.max(5),
        "{} messages left of {}:\n{}",
        smallest.shape.messages,
        first.shape.messages,
        smallest.yaml
    );
    assert_eq!(smallest.shape.aim, Aim::Complete);
}

#[test]
fn replay_rebuilds_any_case_along_a_walk() {
    for index in 0..6 {
        let (_, mut tree) = case(0xabc, index);
        for step in 0..25 {
            if step % 7 == 6 {
                tree.complicate();
            } else if !tree.simplify() {
                break;
            }
            let current = tree.current();
            let path = tree.path();
            assert!(
                current.yaml.contains(&format!("{path:?}")),
                "the header names {path}"
            );
            let (again, _) = replay(&GenConfig::default(), 0xabc, index, &path).expect("path");
            assert_eq!(again.yaml, current.yaml, "case {index} along {path}");
        }
    }
    assert!(replay(&GenConfig::default(), 1, 1, "x3").is_none());
    assert!(replay(&GenConfig::default(), 1, 1, "s").is_none());
    assert_eq!(
        replay(&GenConfig::default(), 1, 1, "")
            .expect("empty path")
            .0
            .yaml,
        case(1, 1).0.yaml
    );
}

/// The shapes of `count` cases of run `seed`.
fn shapes(seed: u64, count: u64) -> Vec<Shape> {
    (0..count).map(|index| case(seed, index).0.shape).collect()
}

#[test]
fn shapes_cover_what_the_generator_claims() {
    let shapes = shapes(1, 500);
    let count = |f: &dyn Fn(&Shape) -> bool| shapes.iter().filter(|s| f(s)).count();
    for kind in TargetScope::ALL {
        assert!(
            count(&|s| s.target_scope == kind) >= 50,
            "target scope {kind:?}"
        );
    }
    for runtime in ["codex", "claude", "opencode", "builtin"] {
        assert!(
            count(&|s| s.runtimes.contains(runtime)) >= 50,
            "runtime {runtime}"
        );
    }
    assert!(
        count(&|s| s
            .runtimes
            .iter()
            .any(|r| !["codex", "claude", "opencode", "builtin"].contains(&r.as_str())))
            >= 10,
        "unsupported runtimes in the suffix"
    );
    assert!(
        count(&|s| s.runtimes.is_empty()) >= 20,
        "human-only suffixes"
    );
    assert!(
        count(&|s| s.cascade && s.target_scope != TargetScope::ReplyThread) >= 50,
        "cascades"
    );
    assert!(
        count(&|s| s.cascade && s.aim == Aim::Complete) >= 20,
        "completing cascades"
    );
    for aim in Aim::ALL {
        assert!(count(&|s| s.aim == aim) >= 10, "aim {aim}");
    }
    let complete = count(&|s| s.aim == Aim::Complete);
    assert!(
        (175..=325).contains(&complete),
        "{complete} of 500 aimed at completing"
    );
    assert!(
        count(&|s| !s.also.is_empty()) >= 30,
        "cases with more than one guard"
    );
    for feature in Feature::ALL {
        assert!(
            count(&|s| s.features.contains(&feature)) >= 10,
            "feature {feature:?}"
        );
    }
    for projection in Projection::ALL {
        assert!(
            count(&|s| s.projections.contains(&projection)) >= 25,
            "projection {projection:?}"
        );
    }
    for len in [
        SuffixLen::One,
        SuffixLen::Few,
        SuffixLen::Several,
        SuffixLen::Many,
    ] {
        assert!(
            count(&|s| s.suffix_len == len) >= 10,
            "suffix length {len:?}"
        );
    }
    let largest = shapes.iter().map(|s| s.messages).max().unwrap_or(0);
    let mean = shapes.iter().map(|s| s.messages).sum::<usize>() / shapes.len();
    assert!(
        mean <= 40 && largest <= 90,
        "mean {mean}, largest {largest} messages"
    );
}

#[test]
fn size_knobs_bound_the_cases() {
    let small = GenConfig {
        max_background: 0,
        max_other_humans: 1,
        max_agents: 1,
        max_cold_rounds: 0,
        max_prefix_rounds: 1,
        max_suffix_rounds: 0,
        max_threads: 0,
        max_thread_rounds: 1,
        max_replies: 1,
    };
    for index in 0..60 {
        let (case, _) = case_with(&small, 9, index);
        let fixture = load(&case);
        check_case(&case, &fixture);
        assert!(
            case.shape.messages <= 16,
            "{}: {} messages",
            case.name,
            case.shape.messages
        );
        let main_lines = fixture
            .scopes
            .iter()
            .filter(|s| s.kind != ScopeKind::ReplyThread)
            .count();
        assert!(main_lines <= 3, "{}: {main_lines} conversations", case.name);
    }
}

/// Prints the shape histogram of 1000 cases of seed 1 (`cargo test --lib fuzz -- --ignored
/// --nocapture histogram`).
#[test]
#[ignore = "prints a report"]
fn histogram() {
    let shapes = shapes(1, 1000);
    let mut fields: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    let mut add = |field: &str, value: String| {
        *fields
            .entry(field.to_owned())
            .or_default()
            .entry(value)
            .or_default() += 1;
    };
    for s in &shapes {
        add("target scope", s.target_scope.name().to_owned());
        add("suffix length", s.suffix_len.name().to_owned());
        add("cascade", s.cascade.to_string());
        add("aim", s.aim.to_string());
        for also in &s.also {
            add("also", also.to_string());
        }
        if s.runtimes.is_empty() {
            add("runtime in suffix", "(none)".to_owned());
        }
        for runtime in &s.runtimes {
            add("runtime in suffix", runtime.clone());
        }
        for feature in &s.features {
            add("feature", feature.name().to_owned());
        }
        for projection in &s.projections {
            add("projection on suffix", projection.name().to_owned());
        }
        add(
            "messages",
            format!(
                "{:>2}-{:>2}",
                s.messages / 10 * 10,
                s.messages / 10 * 10 + 9
            ),
        );
    }
    for (field, values) in fields {
        println!("{field}:");
        for (value, n) in values {
            println!("  {value:<24} {n}");
        }
    }
}

#[tokio::test]
async fn generated_cases_seed_into_postgres() {
    use sqlx::{ConnectOptions, Connection};
    let Ok(url) = std::env::var("REWIND_TEST_DATABASE_URL") else {
        eprintln!("note: REWIND_TEST_DATABASE_URL is unset; skipping seeding generated cases");
        return;
    };
    let server: sqlx::postgres::PgConnectOptions = url.parse().expect("database url");
    let name = format!("fuzz_seed_{}", std::process::id());
    let mut admin = server.connect().await.expect("connect");
    for sql in [
        format!("DROP DATABASE IF EXISTS \"{name}\""),
        format!("CREATE DATABASE \"{name}\""),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&mut admin)
            .await
            .expect("create");
    }
    let mut conn = server
        .clone()
        .database(&name)
        .connect()
        .await
        .expect("connect");
    rewind_reference::MIGRATOR
        .run(&mut conn)
        .await
        .expect("migrate");
    let count: u64 = std::env::var("REWIND_FUZZ_SEED_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(120);
    for index in 0..count {
        let (case, _) = case(0x5eed, index);
        let fixture = load(&case);
        // Each case in a transaction rolled back, so that the next starts from empty tables.
        let mut tx = conn.begin().await.expect("begin");
        if let Err(err) = crate::fixtures::seed_fixture(&mut tx, &fixture).await {
            panic!("{}: {err}\n{}", case.name, case.yaml);
        }
        let seeded: i64 = sqlx::query_scalar("SELECT count(*) FROM scope_messages")
            .fetch_one(&mut *tx)
            .await
            .expect("count");
        assert_eq!(seeded, fixture.messages().count() as i64, "{}", case.name);
        tx.rollback().await.expect("rollback");
    }
    let _ = conn.close().await;
    let drop = format!("DROP DATABASE IF EXISTS \"{name}\"");
    sqlx::query(sqlx::AssertSqlSafe(drop))
        .execute(&mut admin)
        .await
        .expect("drop");
}
