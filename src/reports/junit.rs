//! JUnit XML, written from the final report: one `<testsuite>` per feature file and one
//! `<testcase>` per scenario, so a leak-scan failure or a protocol violation shows as what it
//! is (cucumber's own JUnit writer ran before both were known and showed those as passed).
//!
//! - `classname` is the feature file, `name` the scenario name with its line, `file` and
//!   `line` say where it is, `time` is its wall time in seconds;
//! - `<properties>`: each `rule` it checks, each ambiguity `reading:<id>` it took, its other
//!   `tag`s;
//! - a failure is `<failure type="failed|undefined_step|unexpected_pass">`, a protocol
//!   violation `<error type="protocol_violation">` (every violation in the body); an expected
//!   failure or a scenario the profile left out is `<skipped message="...">`;
//! - what failed the run outside every scenario (a feature that does not parse, a stale
//!   expectation) is a failed test case of a last suite named `run`.

use std::fmt::Write as _;

use super::{first_lines, seconds, Outcome, RunData, ScenarioEntry};

/// The JUnit XML of `data`.
pub fn render(data: &RunData) -> String {
    let mut suites: Vec<(&str, Vec<&ScenarioEntry>)> = Vec::new();
    for scenario in &data.scenarios {
        match suites.last_mut() {
            Some((feature, list)) if *feature == scenario.feature => list.push(scenario),
            _ => suites.push((&scenario.feature, vec![scenario])),
        }
    }
    let timestamp = data.started_at.format("%Y-%m-%dT%H:%M:%S").to_string();
    let t = data.tally();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" \
         time=\"{}\" timestamp=\"{timestamp}\">",
        attr(&format!("rewind-conformance: {}", data.sut)),
        t.total + data.problems.len(),
        t.failed + t.skipped + t.unexpected_passes + data.problems.len(),
        t.violations,
        t.expected_failures + t.not_applicable,
        seconds(data.duration),
    );
    for (feature, scenarios) in &suites {
        let count = |f: fn(Outcome) -> bool| scenarios.iter().filter(|s| f(s.outcome)).count();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" \
             time=\"{}\" timestamp=\"{timestamp}\">",
            attr(feature),
            scenarios.len(),
            count(|o| matches!(
                o,
                Outcome::Failed | Outcome::Skipped | Outcome::UnexpectedPass
            )),
            count(|o| o == Outcome::ProtocolViolation),
            count(|o| matches!(o, Outcome::ExpectedFailure | Outcome::NotApplicable)),
            seconds(scenarios.iter().map(|s| s.duration).sum()),
        );
        for scenario in scenarios {
            testcase(&mut out, scenario);
        }
        out.push_str("  </testsuite>\n");
    }
    if !data.problems.is_empty() {
        let _ = writeln!(
            out,
            "  <testsuite name=\"run\" tests=\"{0}\" failures=\"{0}\" errors=\"0\" skipped=\"0\" \
             time=\"0.000\" timestamp=\"{timestamp}\">",
            data.problems.len()
        );
        for (n, problem) in data.problems.iter().enumerate() {
            let _ = writeln!(
                out,
                "    <testcase classname=\"run\" name=\"run problem {}\" time=\"0.000\">\n      \
                 <failure message=\"{}\" type=\"run_problem\">{}</failure>\n    </testcase>",
                n + 1,
                attr(&first_lines(problem, 1, 300)),
                text(problem)
            );
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

fn testcase(out: &mut String, s: &ScenarioEntry) {
    let _ = writeln!(
        out,
        "    <testcase classname=\"{}\" name=\"{}\" file=\"{}\" line=\"{}\" time=\"{}\">",
        attr(&s.feature),
        attr(&format!("{} (line {})", s.name, s.line)),
        attr(&s.feature),
        s.line,
        seconds(s.duration),
    );
    let mut properties: Vec<(String, &str)> = Vec::new();
    for tag in &s.tags {
        match tag.strip_prefix("rule:") {
            Some(rule) => properties.push(("rule".to_owned(), rule)),
            None => properties.push(("tag".to_owned(), tag)),
        }
    }
    for (ambiguity, reading) in &s.readings {
        properties.push((format!("reading:{ambiguity}"), reading));
    }
    if !properties.is_empty() {
        out.push_str("      <properties>\n");
        for (name, value) in &properties {
            let _ = writeln!(
                out,
                "        <property name=\"{}\" value=\"{}\"/>",
                attr(name),
                attr(value)
            );
        }
        out.push_str("      </properties>\n");
    }
    let failure = s.failure.as_deref().unwrap_or(s.outcome.label());
    let message = attr(&first_lines(failure, 1, 300));
    match s.outcome {
        Outcome::Passed => {}
        Outcome::Failed | Outcome::Skipped | Outcome::UnexpectedPass => {
            let kind = match s.outcome {
                Outcome::Skipped => "undefined_step",
                Outcome::UnexpectedPass => "unexpected_pass",
                _ => "failed",
            };
            let _ = writeln!(
                out,
                "      <failure message=\"{message}\" type=\"{kind}\">{}</failure>",
                text(failure)
            );
        }
        Outcome::ProtocolViolation => {
            let body = if s.violations.is_empty() {
                failure.to_owned()
            } else {
                s.violations.join("\n")
            };
            let _ = writeln!(
                out,
                "      <error message=\"{message}\" type=\"protocol_violation\">{}</error>",
                text(&body)
            );
        }
        Outcome::ExpectedFailure | Outcome::NotApplicable => {
            let prefix = if s.outcome == Outcome::NotApplicable {
                "not applicable: "
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "      <skipped message=\"{}\"/>",
                attr(&format!("{prefix}{}", first_lines(failure, 1, 300)))
            );
            if s.outcome == Outcome::ExpectedFailure {
                let _ = writeln!(out, "      <system-out>{}</system-out>", text(failure));
            }
        }
    }
    out.push_str("    </testcase>\n");
}

/// Escapes `s` for XML character data. Characters XML 1.0 does not allow at all (control
/// characters other than tab, newline and carriage return) are written as `\u{..}` text.
pub fn text(s: &str) -> String {
    escape(s, false)
}

/// Escapes `s` for a double- or single-quoted XML attribute; newlines and tabs stay newlines
/// and tabs (an attribute's raw newline would be read back as a space).
pub fn attr(s: &str) -> String {
    escape(s, true)
}

fn escape(s: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            '\'' if attribute => out.push_str("&apos;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' if attribute => out.push_str("&#9;"),
            '\t' | '\n' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::with_sample;
    use super::*;
    use quick_xml::events::Event;

    /// An element's name and its attributes (unescaped).
    type Element = (String, Vec<(String, String)>);

    /// Parses `xml` with a real XML parser; returns each element, in document order, and every
    /// text node.
    fn parse(xml: &str) -> (Vec<Element>, Vec<String>) {
        let mut reader = quick_xml::Reader::from_str(xml);
        let mut elements = Vec::new();
        let mut texts = Vec::new();
        loop {
            match reader.read_event() {
                Ok(Event::Start(e)) | Ok(Event::Empty(e)) => {
                    let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                    let attrs = e
                        .attributes()
                        .map(|a| {
                            let a = a.expect("a well-formed attribute");
                            (
                                String::from_utf8_lossy(a.key.as_ref()).into_owned(),
                                a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                                    .expect("a valid escape")
                                    .into_owned(),
                            )
                        })
                        .collect();
                    elements.push((name, attrs));
                }
                Ok(Event::Text(t)) => {
                    texts.push(t.xml10_content().expect("UTF-8 text").into_owned());
                }
                Ok(Event::GeneralRef(r)) => {
                    let resolved = match r.resolve_char_ref().expect("a valid character reference")
                    {
                        Some(c) => c.to_string(),
                        None => {
                            let name = r.decode().expect("UTF-8").into_owned();
                            quick_xml::escape::resolve_predefined_entity(&name)
                                .unwrap_or_else(|| panic!("unknown entity `&{name};`"))
                                .to_owned()
                        }
                    };
                    texts.push(resolved);
                }
                Ok(Event::Eof) => break,
                Ok(_) => {}
                Err(e) => panic!(
                    "not well-formed XML at {}: {e}\n{xml}",
                    reader.error_position()
                ),
            }
        }
        (elements, texts)
    }

    #[test]
    fn escaping_round_trips_through_a_real_parser() {
        let nasty = "a<b>&\"c\" 'd' ]]> \u{1}\u{1b} tab\tnl\nend";
        let xml = format!(
            "<r a=\"{}\" b='{}'>{}</r>",
            attr(nasty),
            attr(nasty),
            text(nasty)
        );
        let (elements, texts) = parse(&xml);
        let expected = "a<b>&\"c\" 'd' ]]> \\u{1}\\u{1b} tab\tnl\nend";
        assert_eq!(elements[0].1[0].1, expected);
        assert_eq!(elements[0].1[1].1, expected);
        assert_eq!(texts.concat(), expected);
    }

    #[test]
    fn every_verdict_has_its_element() {
        with_sample(|data| {
            let xml = render(data);
            let (elements, _) = parse(&xml);
            let get = |attrs: &[(String, String)], key: &str| {
                attrs
                    .iter()
                    .find(|(k, _)| k == key)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            };
            let root = &elements[0];
            assert_eq!(root.0, "testsuites");
            assert_eq!(get(&root.1, "tests"), "6", "{xml}");
            assert_eq!(get(&root.1, "failures"), "2", "{xml}");
            assert_eq!(get(&root.1, "errors"), "1", "{xml}");
            assert_eq!(get(&root.1, "skipped"), "2", "{xml}");
            // Each test case followed by the elements it holds.
            let mut cases: Vec<(String, Vec<String>)> = Vec::new();
            for (name, attrs) in &elements {
                match name.as_str() {
                    "testcase" => cases.push((get(attrs, "name"), Vec::new())),
                    "testsuite" | "testsuites" => {}
                    other => {
                        if let Some(last) = cases.last_mut() {
                            let detail = match other {
                                "property" => {
                                    format!("{}={}", get(attrs, "name"), get(attrs, "value"))
                                }
                                "failure" | "error" => format!("{other}:{}", get(attrs, "type")),
                                _ => other.to_owned(),
                            };
                            last.1.push(detail);
                        }
                    }
                }
            }
            let find = |prefix: &str| {
                cases
                    .iter()
                    .find(|(n, _)| n.starts_with(prefix))
                    .unwrap_or_else(|| panic!("no test case `{prefix}`: {xml}"))
                    .1
                    .clone()
            };
            let passed = find("the suffix is tombstoned <fast> & \"quoted\" (line 3)");
            assert!(passed.contains(&"rule=apply.a".to_owned()), "{passed:?}");
            assert!(passed.contains(&"reading:tail-fork=cascade".to_owned()));
            assert!(passed.contains(&"tag=slow".to_owned()));
            assert!(!passed.iter().any(|d| d.starts_with("failure")));
            let leak = find("a leak ]]> `x` | y (line 9)");
            assert!(leak.contains(&"failure:failed".to_owned()), "{leak:?}");
            assert!(leak.contains(&"rule=apply.b".to_owned()), "{leak:?}");
            assert!(find("off the schema").contains(&"error:protocol_violation".to_owned()));
            assert!(find("known bug").contains(&"skipped".to_owned()));
            assert!(find("reads history").contains(&"skipped".to_owned()));
            assert!(find("run problem 1").contains(&"failure:run_problem".to_owned()));
        });
    }

    #[test]
    fn failure_text_and_times_are_kept() {
        with_sample(|data| {
            let xml = render(data);
            let (_, texts) = parse(&xml);
            let all = texts.concat();
            assert!(all.contains("still holds `CANARY-\\u{1}x`"), "{all}");
            assert!(all.contains("-a\n+b"), "{all}");
            assert!(all.contains("`POST /detach` answered 500"), "{all}");
            assert!(xml.contains("time=\"0.090\""), "{xml}");
            assert!(xml.contains("time=\"4.321\""), "{xml}");
        });
    }
}
