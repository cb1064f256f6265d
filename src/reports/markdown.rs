//! The Markdown summary, for a CI job summary (`$GITHUB_STEP_SUMMARY`) or a pull-request
//! comment: the counts first, then every failure (scenario, rules, the first lines of its
//! failure), then what failed the run outside every scenario, then the rule matrix folded in
//! `<details>`. It stays well under a pull-request comment's 65,536 characters: failures past
//! [`MAX_FAILURES`] are counted, not shown, and long cells are cut.

use std::fmt::Write as _;

use super::{clip, first_lines, RuleStatus, RunData, RunOutcome};

/// Failures shown in full; the others are counted.
pub const MAX_FAILURES: usize = 25;
/// Characters the failures may take; later ones are counted.
const FAILURES_BUDGET: usize = 30_000;
/// Characters the whole summary may take (a pull-request comment holds 65,536): the rule
/// matrix keeps only the rules that failed when all of them would not fit.
const TOTAL_BUDGET: usize = 60_000;
/// Lines of each failure shown.
const FAILURE_LINES: usize = 12;
/// Characters of each failure line shown.
const LINE_WIDTH: usize = 200;
/// Scenarios listed per rule in the matrix.
const SCENARIOS_PER_RULE: usize = 4;

/// The Markdown summary of `data`.
pub fn render(data: &RunData) -> String {
    let t = data.tally();
    let mut out = String::new();
    let (mark, verdict) = match data.outcome() {
        RunOutcome::Passed => ("✅", "passed"),
        RunOutcome::Failed => ("❌", "FAILED"),
        RunOutcome::ProtocolViolation => ("❌", "FAILED: protocol violations"),
    };
    let _ = writeln!(
        out,
        "## {mark} Rewind conformance of `{}`: {verdict}\n",
        code_span_text(data.sut)
    );
    let _ = writeln!(
        out,
        "{} scenarios in {:.1} s, {}; declared: {}\n",
        t.total,
        data.duration.as_secs_f64(),
        data.started_at.format("%Y-%m-%d %H:%M UTC"),
        inline(data.profile)
    );
    out.push_str(
        "| passed | failed | undefined steps | protocol violations | unexpected passes | \
         expected failures | not applicable |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let _ = writeln!(
        out,
        "| {} | {} | {} | {} | {} | {} | {} |\n",
        t.passed,
        t.failed,
        t.skipped,
        t.violations,
        t.unexpected_passes,
        t.expected_failures,
        t.not_applicable
    );
    if !data.rules.rows.is_empty() {
        let _ = writeln!(
            out,
            "Rules of the catalog: {} ({}).\n",
            data.rules.rows.len(),
            data.rules.describe_counts()
        );
    }
    let failures: Vec<_> = data.failures().collect();
    if !failures.is_empty() {
        let _ = writeln!(out, "### Failures ({})\n", failures.len());
        let start = out.len();
        let mut shown = 0;
        for s in failures.iter().take(MAX_FAILURES) {
            if out.len() - start > FAILURES_BUDGET {
                break;
            }
            shown += 1;
            let _ = writeln!(
                out,
                "**`{}`** {} — {}",
                code_span_text(&s.location()),
                inline(&s.name),
                s.outcome.label()
            );
            let rules: Vec<String> = s
                .rules()
                .map(|r| format!("`{}`", code_span_text(r)))
                .collect();
            if !rules.is_empty() {
                let _ = writeln!(out, "<br>rules: {}", rules.join(", "));
            }
            let text = if s.violations.len() > 1 {
                s.violations.join("\n")
            } else {
                s.failure.clone().unwrap_or_default()
            };
            if !text.is_empty() {
                out.push_str(&fenced(&first_lines(&text, FAILURE_LINES, LINE_WIDTH)));
            }
            out.push('\n');
        }
        if failures.len() > shown {
            let _ = writeln!(
                out,
                "... and {} more failures (every one is in the JUnit report and the results \
                 file).\n",
                failures.len() - shown
            );
        }
    }
    if !data.problems.is_empty() {
        let _ = writeln!(out, "### Run problems ({})\n", data.problems.len());
        for problem in &data.problems {
            let _ = writeln!(out, "- {}", inline(&clip(problem, 500)));
        }
        out.push('\n');
    }
    let expected: Vec<_> = data
        .scenarios
        .iter()
        .filter(|s| s.outcome == super::Outcome::ExpectedFailure)
        .collect();
    if !expected.is_empty() {
        let _ = writeln!(
            out,
            "<details><summary>Expected failures ({})</summary>\n",
            expected.len()
        );
        for s in expected.iter().take(MAX_FAILURES * 2) {
            let _ = writeln!(
                out,
                "- `{}` {}: {}",
                code_span_text(&s.location()),
                inline(&s.name),
                inline(&first_lines(
                    s.failure.as_deref().unwrap_or_default(),
                    1,
                    LINE_WIDTH
                ))
            );
        }
        out.push_str("\n</details>\n\n");
    }
    if !data.rules.rows.is_empty() {
        let _ = writeln!(
            out,
            "<details><summary>Rule matrix: {} rules ({})</summary>\n",
            data.rules.rows.len(),
            data.rules.describe_counts()
        );
        let mut rows: Vec<_> = data.rules.rows.iter().collect();
        // Worst first, then catalog order.
        rows.sort_by_key(|r| r.status);
        let table = matrix_table(&rows);
        if out.len() + table.len() < TOTAL_BUDGET {
            out.push_str(&table);
        } else {
            let failed: Vec<_> = rows
                .into_iter()
                .filter(|r| matches!(r.status, RuleStatus::Fail | RuleStatus::ExpectedFail))
                .collect();
            let _ = writeln!(
                out,
                "The whole matrix does not fit here: the rules that failed follow; every rule is \
                 in the rule matrix page and the results file.\n"
            );
            let table = matrix_table(&failed);
            if out.len() + table.len() < TOTAL_BUDGET {
                out.push_str(&table);
            }
        }
        out.push_str("\n</details>\n");
    }
    out
}

/// The rule matrix rows as a Markdown table.
fn matrix_table(rows: &[&super::rules::RuleRow]) -> String {
    let mut out =
        String::from("| rule | section | status | scenarios |\n| --- | --- | --- | --- |\n");
    for row in rows {
        let status = match row.status {
            RuleStatus::Fail => "**fail**".to_owned(),
            other => other.label().to_owned(),
        };
        let mut scenarios: Vec<String> = row
            .scenarios
            .iter()
            .take(SCENARIOS_PER_RULE)
            .map(|s| {
                format!(
                    "`{}:{}` {}",
                    code_span_text(&s.feature),
                    s.line,
                    s.outcome.label()
                )
            })
            .collect();
        if row.scenarios.len() > SCENARIOS_PER_RULE {
            scenarios.push(format!(
                "and {} more",
                row.scenarios.len() - SCENARIOS_PER_RULE
            ));
        }
        if scenarios.is_empty() {
            if let Some(reason) = &row.rule.untestable {
                scenarios.push(inline(&clip(reason, 120)));
            }
            if let (RuleStatus::Pending, Some(waits_for)) = (row.status, &row.rule.pending) {
                scenarios.push(inline(&clip(&format!("waits for {waits_for}"), 120)));
            }
        }
        let _ = writeln!(
            out,
            "| `{}` | {} | {status} | {} |",
            code_span_text(&row.rule.id),
            inline(&row.rule.section),
            scenarios.join("<br>")
        );
    }
    out
}

/// Text for a Markdown paragraph or table cell: Markdown and HTML punctuation escaped, line
/// breaks as spaces.
pub fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '#' | '~' | '!' => {
                out.push('\\');
                out.push(c);
            }
            '&' => out.push_str("&amp;"),
            '\n' | '\r' => out.push(' '),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Text for inside a single-backtick code span: backticks and pipes (a table cell) replaced,
/// line breaks as spaces.
fn code_span_text(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '`' => '\'',
            '|' => '/',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

/// `text` as a fenced code block whose fence no line of `text` can close.
pub fn fenced(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat(longest.max(2) + 1);
    let body: String = text
        .chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect();
    format!("\n{fence}text\n{body}\n{fence}\n")
}

#[cfg(test)]
mod tests {
    use super::super::tests::with_sample;
    use super::*;

    #[test]
    fn counts_then_failures_then_the_folded_matrix() {
        with_sample(|data| {
            let md = render(data);
            let counts = md.find("| passed | failed").expect("the counts table");
            let failures = md.find("### Failures (2)").expect("the failures");
            let problems = md.find("### Run problems (1)").expect("the run problems");
            let matrix = md
                .find("<details><summary>Rule matrix: 9 rules (")
                .expect("the folded matrix");
            assert!(
                counts < failures && failures < problems && problems < matrix,
                "{md}"
            );
            assert!(md.contains("FAILED: protocol violations"), "{md}");
            assert!(md.contains("| 1 | 1 | 0 | 1 | 0 | 1 | 1 |"), "{md}");
            assert!(
                md.contains("**`features/apply.feature:9`** a leak \\]\\]\\> \\`x\\` \\| y"),
                "{md}"
            );
            assert!(md.contains("<br>rules: `apply.a`, `apply.b`"), "{md}");
            assert!(md.contains("`POST /detach` answered 500"), "{md}");
            assert!(md.contains("| `apply.a` | 6 | **fail** |"), "{md}");
            assert!(
                md.contains("| `scope.u` | 2 | untestable | internal |"),
                "{md}"
            );
            assert!(md.contains("| `scope.v` | 2.1 | uncovered |  |"), "{md}");
            assert!(
                md.contains(
                    "| `scope.p` | 2 | pending | waits for a client model \\<of\\> the browser \
                     &amp; \\`its\\` \\| cursor |"
                ),
                "{md}"
            );
            // Worst first: a pending rule before the uncovered ones.
            assert!(md.find("| `scope.p` |") < md.find("| `scope.v` |"), "{md}");
            assert!(md.contains(", 1 pending, 1 uncovered)"), "{md}");
            assert!(
                md.contains("<details><summary>Expected failures (1)"),
                "{md}"
            );
            assert!(md.trim_end().ends_with("</details>"), "{md}");
        });
    }

    #[test]
    fn a_huge_run_still_fits_a_pull_request_comment() {
        use crate::reports::rules::{IndexedRule, RuleIndex};
        let mut report = crate::reports::tests::sample_report();
        let feature = report
            .record
            .features
            .get_mut("features/apply.feature")
            .expect("the sample feature");
        let failing = feature.scenarios[0].clone();
        for n in 0..300 {
            let mut s = failing.clone();
            s.line = 1000 + n;
            s.tags = vec![format!("rule:r.{n}")];
            s.failure = Some(format!("{}\n", "x".repeat(150)).repeat(40));
            feature.scenarios.push(s);
        }
        let index = RuleIndex::from_rules(
            (0..2000)
                .map(|n| IndexedRule {
                    id: format!("r.{n}"),
                    section: "6".to_owned(),
                    kind: "rule".to_owned(),
                    text: "t".to_owned(),
                    untestable: None,
                    pending: None,
                    has_scenario: true,
                })
                .collect(),
        );
        let (faults, compat) = Default::default();
        let data = RunData::new(
            "big",
            "all",
            chrono::DateTime::from_timestamp(0, 0).expect("a time"),
            std::time::Duration::from_secs(1),
            &report,
            &index,
            (&faults, &compat),
            Vec::new(),
        );
        let md = render(&data);
        assert!(md.len() < 65_536, "{} characters", md.len());
        assert!(md.contains("more failures (every one is in"), "{md}");
        assert!(md.contains("The whole matrix does not fit here"), "{md}");
        assert!(md.contains("| `r.299` | 6 | **fail** |"), "{md}");
        assert!(md.trim_end().ends_with("</details>"));
    }

    #[test]
    fn fences_outlast_the_text() {
        let block = fenced("a ```` b\n```");
        assert!(block.starts_with("\n`````text\n"), "{block}");
        assert!(block.ends_with("\n`````\n"), "{block}");
        assert_eq!(inline("a|b\n<c>"), "a\\|b \\<c\\>");
    }
}
