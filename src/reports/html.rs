//! The rule-by-rule matrix as one self-contained HTML page: every catalog rule with its
//! section, kind, text, the scenarios of the run that check it and its status, grouped by spec
//! section, with filters by status, section and text. Inline CSS and script only; the page's
//! content security policy forbids loading anything else.
//!
//! The table is `table#rules`; each rule is a `tr.rule` with `data-rule`, `data-section` and
//! `data-status` (`pass`, `fail`, `expected_fail`, `not_applicable`, `not_run`, `untestable`,
//! `pending`, `uncovered`); an untestable rule's reason and a pending rule's `waits for ...` are a
//! `span.reason` in its scenarios cell; `#shown` says how many rows the filters show.

use std::fmt::Write as _;

use super::{clip, first_lines, Outcome, RuleStatus, RunData, RunOutcome};

/// Scenarios listed openly per rule; more are folded in `<details>`.
const OPEN_SCENARIOS: usize = 3;

/// The page of `data`.
pub fn render(data: &RunData) -> String {
    let t = data.tally();
    let counts = data.rules.counts();
    let mut out = String::new();
    let title = format!("Rewind conformance of {}: rule matrix", data.sut);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        esc(&title)
    );
    let outcome = data.outcome();
    let _ = writeln!(
        out,
        "<header>\n<h1>Rewind conformance of <code>{}</code>: <span class=\"outcome {}\" \
         id=\"outcome\">{}</span></h1>",
        esc(data.sut),
        outcome.as_str(),
        match outcome {
            RunOutcome::Passed => "passed",
            RunOutcome::Failed => "failed",
            RunOutcome::ProtocolViolation => "protocol violations",
        }
    );
    let _ = writeln!(
        out,
        "<p class=\"meta\">{} scenarios in {:.1} s on {}: {} passed, {} failed, {} undefined \
         steps, {} protocol violations, {} unexpected passes, {} expected failures, {} not \
         applicable. Declared: {}.</p>",
        t.total,
        data.duration.as_secs_f64(),
        data.started_at.format("%Y-%m-%d %H:%M:%S UTC"),
        t.passed,
        t.failed,
        t.skipped,
        t.violations,
        t.unexpected_passes,
        t.expected_failures,
        t.not_applicable,
        esc(data.profile)
    );
    if !data.problems.is_empty() {
        out.push_str("<ul class=\"problems\">\n");
        for problem in &data.problems {
            let _ = writeln!(out, "<li>{}</li>", esc(&clip(problem, 500)));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</header>\n<nav id=\"filters\">\n<div class=\"statuses\">");
    let _ = write!(
        out,
        "<button type=\"button\" class=\"status-filter active\" data-status=\"\">all \
         <b>{}</b></button>",
        data.rules.rows.len()
    );
    for (status, n) in &counts {
        let _ = write!(
            out,
            "<button type=\"button\" class=\"status-filter s-{0}\" data-status=\"{0}\"{2}>{1} \
             <b>{3}</b></button>",
            status.as_str(),
            status.label(),
            if *n == 0 { " disabled" } else { "" },
            n
        );
    }
    out.push_str("</div>\n<label>section <select id=\"section\"><option value=\"\">all</option>");
    let groups = data.rules.by_section();
    for (section, _) in &groups {
        let _ = write!(out, "<option value=\"{0}\">{0}</option>", esc(section));
    }
    let _ = writeln!(
        out,
        "</select></label>\n<label>search <input id=\"search\" type=\"search\" \
         placeholder=\"rule id, text or scenario\"></label>\n<span class=\"count\"><span \
         id=\"shown\">{0}</span> of {0} rules shown</span>\n</nav>",
        data.rules.rows.len()
    );
    out.push_str(
        "<table id=\"rules\">\n<thead><tr><th>rule</th><th>section</th><th>kind</th>\
         <th>text</th><th>status</th><th>scenarios</th></tr></thead>\n",
    );
    for (section, rows) in &groups {
        let mut tally: Vec<(RuleStatus, usize)> = Vec::new();
        for row in rows {
            match tally.iter_mut().find(|(s, _)| *s == row.status) {
                Some((_, n)) => *n += 1,
                None => tally.push((row.status, 1)),
            }
        }
        tally.sort();
        let summary: Vec<String> = tally
            .iter()
            .map(|(s, n)| format!("{n} {}", s.label()))
            .collect();
        let _ = writeln!(
            out,
            "<tbody class=\"group\" data-section=\"{0}\"><tr class=\"group-head\"><th \
             colspan=\"6\">{1} <span class=\"group-counts\">{2} rules: {3}</span></th></tr>",
            esc(section),
            if section.chars().all(|c| c.is_ascii_digit() || c == '.') {
                format!("Section {}", esc(section))
            } else {
                esc(section)
            },
            rows.len(),
            esc(&summary.join(", "))
        );
        for row in rows {
            let status = row.status.as_str();
            let _ = write!(
                out,
                "<tr class=\"rule s-{status}\" id=\"rule-{0}\" data-rule=\"{0}\" \
                 data-section=\"{1}\" data-status=\"{status}\"><td class=\"id\"><code>{0}\
                 </code></td><td>{2}</td><td>{3}</td><td class=\"text\">{4}</td><td \
                 class=\"status\"><span class=\"badge s-{status}\">{5}</span></td><td \
                 class=\"scenarios\">",
                esc(&row.rule.id),
                esc(section),
                esc(&row.rule.section),
                esc(&row.rule.kind),
                esc(&row.rule.text),
                row.status.label()
            );
            if let (true, Some(reason)) = (row.scenarios.is_empty(), &row.rule.untestable) {
                let _ = write!(out, "<span class=\"reason\">{}</span>", esc(reason));
            }
            if let (RuleStatus::Pending, Some(waits_for)) = (row.status, &row.rule.pending) {
                let _ = write!(
                    out,
                    "<span class=\"reason\">waits for {}</span>",
                    esc(waits_for)
                );
            }
            if !row.scenarios.is_empty() {
                let list = |items: &[super::rules::RuleScenario]| {
                    let mut html = String::from("<ul>");
                    for s in items {
                        let _ = write!(
                            html,
                            "<li class=\"v-{}\"><span class=\"verdict\">{}</span> <code>{}:{}\
                             </code> {}",
                            s.outcome.as_str(),
                            s.outcome.label(),
                            esc(&s.feature),
                            s.line,
                            esc(&s.name)
                        );
                        if let (true, Some(failure)) = (
                            s.outcome.fails()
                                || s.outcome == Outcome::ExpectedFailure
                                || s.outcome == Outcome::NotApplicable,
                            &s.failure,
                        ) {
                            let _ = write!(
                                html,
                                "<details><summary>{}</summary><pre>{}</pre></details>",
                                if s.outcome == Outcome::NotApplicable {
                                    "why"
                                } else {
                                    "failure"
                                },
                                esc(&first_lines(failure, 40, 400))
                            );
                        }
                        html.push_str("</li>");
                    }
                    html.push_str("</ul>");
                    html
                };
                if row.scenarios.len() <= OPEN_SCENARIOS {
                    out.push_str(&list(&row.scenarios));
                } else {
                    // The failing ones first, and open.
                    let mut sorted = row.scenarios.clone();
                    sorted.sort_by_key(|s| !s.outcome.fails());
                    let _ = write!(
                        out,
                        "<details{}><summary>{} scenarios</summary>{}</details>",
                        if row.status == RuleStatus::Fail {
                            " open"
                        } else {
                            ""
                        },
                        row.scenarios.len(),
                        list(&sorted)
                    );
                }
            }
            out.push_str("</td></tr>\n");
        }
        out.push_str("</tbody>\n");
    }
    out.push_str("</table>\n");
    if data.rules.rows.is_empty() {
        out.push_str("<p>The run had no rule catalog.</p>\n");
    }
    let _ = write!(
        out,
        "<footer>rewind-conformance {}; catalog <code>features/rules.yaml</code>, untestable \
         rules <code>features/untestable.yaml</code>, pending rules \
         <code>features/pending.yaml</code>.</footer>\n<script>{SCRIPT}</script>\n\
         </body>\n</html>\n",
        env!("CARGO_PKG_VERSION")
    );
    out
}

/// Escapes `text` for HTML text and double-quoted attributes.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = r##"
:root { --pass: #1a7f37; --fail: #cf222e; --xfail: #9a6700; --na: #6e7781; --notrun: #8c959f;
  --untestable: #8250df; --pending: #0550ae; --uncovered: #bc4c00; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 1.5rem 2rem;
  color: #1f2328; background: #fff; }
header h1 { font-size: 1.4rem; margin: 1rem 0 .3rem; }
.outcome.passed { color: var(--pass); } .outcome.failed, .outcome.protocol_violation { color: var(--fail); }
.meta { color: #57606a; margin: 0 0 .5rem; }
.problems { color: var(--fail); }
nav#filters { position: sticky; top: 0; background: #fff; padding: .5rem 0; display: flex;
  flex-wrap: wrap; gap: .6rem 1rem; align-items: center; border-bottom: 1px solid #d0d7de; z-index: 1; }
.statuses { display: flex; flex-wrap: wrap; gap: .3rem; }
button.status-filter { border: 1px solid #d0d7de; background: #f6f8fa; border-radius: 1rem;
  padding: .15rem .7rem; cursor: pointer; font: inherit; }
button.status-filter.active { background: #0969da; color: #fff; border-color: #0969da; }
button.status-filter:disabled { opacity: .45; cursor: default; }
.count { color: #57606a; }
table#rules { border-collapse: collapse; width: 100%; margin-top: .5rem; }
#rules th, #rules td { border-bottom: 1px solid #d8dee4; padding: .35rem .5rem; text-align: left;
  vertical-align: top; }
#rules thead th { background: #f6f8fa; }
tr.group-head th { background: #eaeef2; font-size: 1.02rem; }
.group-counts { font-weight: normal; color: #57606a; margin-left: .6rem; font-size: .9rem; }
td.id code { white-space: nowrap; }
td.text { max-width: 34rem; }
td.scenarios { min-width: 18rem; max-width: 36rem; }
td.scenarios ul { margin: 0; padding-left: 1rem; }
td.scenarios li { margin: .1rem 0; }
.verdict { font-size: .8rem; font-weight: 600; }
li.v-passed .verdict { color: var(--pass); }
li.v-failed .verdict, li.v-skipped .verdict, li.v-protocol_violation .verdict,
li.v-unexpected_pass .verdict { color: var(--fail); }
li.v-expected_failure .verdict { color: var(--xfail); }
li.v-not_applicable .verdict { color: var(--na); }
pre { white-space: pre-wrap; word-break: break-word; background: #f6f8fa; padding: .4rem;
  margin: .2rem 0; font-size: .8rem; max-height: 24rem; overflow: auto; }
.badge { display: inline-block; border-radius: .8rem; padding: .05rem .55rem; color: #fff;
  font-size: .8rem; font-weight: 600; white-space: nowrap; }
.badge.s-pass { background: var(--pass); } .badge.s-fail { background: var(--fail); }
.badge.s-expected_fail { background: var(--xfail); } .badge.s-not_applicable { background: var(--na); }
.badge.s-not_run { background: var(--notrun); } .badge.s-untestable { background: var(--untestable); }
.badge.s-pending { background: var(--pending); } .badge.s-uncovered { background: var(--uncovered); }
tr.rule.s-fail td { background: #fff5f5; }
.reason { color: #57606a; font-style: italic; }
.hidden { display: none; }
footer { margin-top: 1.5rem; color: #57606a; font-size: .85rem; }
"##;

const SCRIPT: &str = r##"
(function () {
  var status = "";
  var section = document.getElementById("section");
  var search = document.getElementById("search");
  var buttons = Array.prototype.slice.call(document.querySelectorAll("button.status-filter"));
  var groups = Array.prototype.slice.call(document.querySelectorAll("#rules tbody.group"));
  function apply() {
    var needle = search.value.trim().toLowerCase();
    var shown = 0;
    groups.forEach(function (group) {
      var inSection = !section.value || group.getAttribute("data-section") === section.value;
      var visible = 0;
      Array.prototype.forEach.call(group.querySelectorAll("tr.rule"), function (row) {
        var ok = inSection && (!status || row.getAttribute("data-status") === status) &&
          (!needle || row.textContent.toLowerCase().indexOf(needle) >= 0);
        row.classList.toggle("hidden", !ok);
        if (ok) { visible++; }
      });
      group.classList.toggle("hidden", visible === 0);
      shown += visible;
    });
    document.getElementById("shown").textContent = String(shown);
    document.body.setAttribute("data-filtered", status || section.value || needle ? "yes" : "no");
  }
  buttons.forEach(function (button) {
    button.addEventListener("click", function () {
      status = button.getAttribute("data-status");
      buttons.forEach(function (b) { b.classList.toggle("active", b === button); });
      apply();
    });
  });
  section.addEventListener("change", apply);
  search.addEventListener("input", apply);
  var wanted = /(?:^|[#&])status=([a-z_]+)/.exec(location.hash);
  if (wanted) {
    buttons.forEach(function (b) { if (b.getAttribute("data-status") === wanted[1]) { b.click(); } });
  }
  apply();
  document.body.setAttribute("data-ready", "yes");
})();
"##;

#[cfg(test)]
mod tests {
    use super::super::tests::with_sample;
    use super::*;

    #[test]
    fn one_row_per_rule_with_its_status_grouped_by_section() {
        with_sample(|data| {
            let html = render(data);
            let rows: Vec<(&str, &str)> = html
                .match_indices("<tr class=\"rule ")
                .map(|(at, _)| {
                    let row = &html[at..];
                    let attr = |name: &str| {
                        let start = row.find(&format!("{name}=\"")).expect(name) + name.len() + 2;
                        let end = start + row[start..].find('"').expect("closing quote");
                        &row[start..end]
                    };
                    (attr("data-rule"), attr("data-status"))
                })
                .collect();
            assert_eq!(
                rows,
                [
                    ("read.c", "not_applicable"),
                    ("scope.u", "untestable"),
                    ("scope.p", "pending"),
                    ("scope.v", "uncovered"),
                    ("apply.a", "fail"),
                    ("apply.b", "fail"),
                    ("apply.c", "not_run"),
                    ("apply.d", "not_run"),
                    ("err.x", "fail"),
                ]
            );
            assert_eq!(html.matches("<tbody class=\"group\"").count(), 6);
            assert!(
                html.contains("text of apply.a &lt;b&gt;&amp;&lt;/b&gt;"),
                "{html}"
            );
            assert!(html.contains("a leak ]]&gt; `x` | y"), "{html}");
            let pending = &html[html.find("data-rule=\"scope.p\"").expect("the pending row")..];
            let pending = &pending[..pending.find("</tr>").expect("the row's end")];
            assert!(
                pending.contains(
                    "<span class=\"reason\">waits for a client model &lt;of&gt; the browser \
                     &amp; `its` | cursor</span>"
                ),
                "{pending}"
            );
            assert!(
                html.contains("data-status=\"pending\">pending <b>1</b></button>"),
                "{html}"
            );
            assert!(!html.contains("http://") && !html.contains("https://"));
            assert!(!html.contains(" src=") && !html.contains("<link"));
        });
    }
}
