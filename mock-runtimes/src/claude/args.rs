//! The command line, parsed the way the CLI's option parser (commander) does: `--flag value`
//! and `--flag=value`, options with an optional value take the next argument only when it
//! does not start with `-`, list options take every following argument up to the next
//! option, one positional prompt at most, and `--` ends the options. Errors read as the
//! real ones (`error: unknown option '--x'`, exit 1).

/// How an option takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arity {
    /// A switch.
    Flag,
    /// `<value>`: required.
    Required,
    /// `[value]`: optional.
    Optional,
    /// `<values...>`: one or more.
    List,
}

/// One option the CLI knows: its long name, short name, arity, the placeholder its usage
/// line shows, and the values it accepts (when it restricts them).
struct Spec {
    long: &'static str,
    short: Option<char>,
    arity: Arity,
    placeholder: &'static str,
    choices: &'static [&'static str],
}

const fn spec(long: &'static str, arity: Arity, placeholder: &'static str) -> Spec {
    Spec {
        long,
        short: None,
        arity,
        placeholder,
        choices: &[],
    }
}

const OUTPUT_FORMATS: &[&str] = &["text", "json", "stream-json"];
const INPUT_FORMATS: &[&str] = &["text", "stream-json"];
const PERMISSION_MODES: &[&str] = &[
    "acceptEdits",
    "bypassPermissions",
    "default",
    "dontAsk",
    "plan",
];

/// The options of the real CLI the mock accepts (documented and hidden ones a driver
/// passes). Those that change nothing in the mock are accepted and ignored.
const SPECS: &[Spec] = &[
    Spec {
        short: Some('p'),
        ..spec("print", Arity::Flag, "")
    },
    Spec {
        short: Some('c'),
        ..spec("continue", Arity::Flag, "")
    },
    Spec {
        short: Some('r'),
        ..spec("resume", Arity::Optional, "[value]")
    },
    Spec {
        short: Some('d'),
        ..spec("debug", Arity::Optional, "[filter]")
    },
    Spec {
        short: Some('v'),
        ..spec("version", Arity::Flag, "")
    },
    Spec {
        short: Some('h'),
        ..spec("help", Arity::Flag, "")
    },
    Spec {
        short: Some('n'),
        ..spec("name", Arity::Required, "<name>")
    },
    Spec {
        choices: OUTPUT_FORMATS,
        ..spec("output-format", Arity::Required, "<format>")
    },
    Spec {
        choices: INPUT_FORMATS,
        ..spec("input-format", Arity::Required, "<format>")
    },
    Spec {
        choices: PERMISSION_MODES,
        ..spec("permission-mode", Arity::Required, "<mode>")
    },
    spec("verbose", Arity::Flag, ""),
    spec("fork-session", Arity::Flag, ""),
    spec("dangerously-skip-permissions", Arity::Flag, ""),
    spec("allow-dangerously-skip-permissions", Arity::Flag, ""),
    spec("include-partial-messages", Arity::Flag, ""),
    spec("replay-user-messages", Arity::Flag, ""),
    spec("strict-mcp-config", Arity::Flag, ""),
    spec("no-session-persistence", Arity::Flag, ""),
    spec("ide", Arity::Flag, ""),
    spec("disable-slash-commands", Arity::Flag, ""),
    spec("reply-on-resume", Arity::Flag, ""),
    spec("session-id", Arity::Required, "<uuid>"),
    spec("resume-session-at", Arity::Required, "<message id>"),
    spec("resume-drops-turn", Arity::Required, "<message id>"),
    spec("rewind-files", Arity::Required, "<user-message-id>"),
    spec("model", Arity::Required, "<model>"),
    spec("fallback-model", Arity::Required, "<model>"),
    spec("system-prompt", Arity::Required, "<prompt>"),
    spec("system-prompt-file", Arity::Required, "<file>"),
    spec("append-system-prompt", Arity::Required, "<prompt>"),
    spec("append-system-prompt-file", Arity::Required, "<file>"),
    spec("max-turns", Arity::Required, "<turns>"),
    spec("max-budget-usd", Arity::Required, "<amount>"),
    spec("max-thinking-tokens", Arity::Required, "<tokens>"),
    spec("settings", Arity::Required, "<file-or-json>"),
    spec("setting-sources", Arity::Required, "<sources>"),
    spec("permission-prompt-tool", Arity::Required, "<tool>"),
    spec("agents", Arity::Required, "<json>"),
    spec("agent", Arity::Required, "<agent>"),
    spec("json-schema", Arity::Required, "<schema>"),
    spec("debug-file", Arity::Required, "<path>"),
    spec("effort", Arity::Required, "<level>"),
    spec("allowedTools", Arity::List, "<tools...>"),
    spec("allowed-tools", Arity::List, "<tools...>"),
    spec("disallowedTools", Arity::List, "<tools...>"),
    spec("disallowed-tools", Arity::List, "<tools...>"),
    spec("tools", Arity::List, "<tools...>"),
    spec("mcp-config", Arity::List, "<configs...>"),
    spec("add-dir", Arity::List, "<directories...>"),
    spec("plugin-dir", Arity::List, "<paths...>"),
    spec("betas", Arity::List, "<betas...>"),
];

/// The parsed command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// `-p/--print`.
    pub print: bool,
    /// `--output-format` (default `text`).
    pub output_format: String,
    /// `--input-format` (default `text`).
    pub input_format: String,
    /// `--verbose`.
    pub verbose: bool,
    /// `--session-id`.
    pub session_id: Option<String>,
    /// `-r/--resume`: `Some(None)` when given without a value.
    pub resume: Option<Option<String>>,
    /// `-c/--continue`.
    pub continue_session: bool,
    /// `--resume-session-at`.
    pub resume_session_at: Option<String>,
    /// `--fork-session`.
    pub fork_session: bool,
    /// `--rewind-files`.
    pub rewind_files: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--permission-mode`.
    pub permission_mode: Option<String>,
    /// `--dangerously-skip-permissions`.
    pub skip_permissions: bool,
    /// `--replay-user-messages`.
    pub replay_user_messages: bool,
    /// `--no-session-persistence`.
    pub no_persistence: bool,
    /// `-v/--version`.
    pub version: bool,
    /// `-h/--help`.
    pub help: bool,
    /// The positional prompt.
    pub prompt: Option<String>,
}

impl Options {
    /// Whether the run resumes a session (`--resume` with a value, or `--continue`).
    pub fn resume_id(&self) -> Option<&str> {
        self.resume.as_ref().and_then(|r| r.as_deref())
    }
}

/// Parses the arguments after the program name. The error is the line to print on stderr.
pub fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        output_format: "text".into(),
        input_format: "text".into(),
        ..Options::default()
    };
    let mut positionals: Vec<String> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "--" {
            positionals.extend(args[i..].iter().cloned());
            break;
        }
        let (spec, inline) = if let Some(body) = arg.strip_prefix("--") {
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (body, None),
            };
            match SPECS.iter().find(|s| s.long == name) {
                Some(s) => (s, inline),
                None => return Err(format!("error: unknown option '{arg}'")),
            }
        } else if arg.len() >= 2 && arg.starts_with('-') && arg != "-" {
            let mut chars = arg[1..].chars();
            let c = chars.next().unwrap_or('-');
            let rest: String = chars.collect();
            match SPECS.iter().find(|s| s.short == Some(c)) {
                Some(s) if rest.is_empty() => (s, None),
                Some(s) if s.arity != Arity::Flag => (s, Some(rest)),
                _ => return Err(format!("error: unknown option '{arg}'")),
            }
        } else {
            positionals.push(arg.clone());
            continue;
        };
        let usage = usage_of(spec);
        let values: Vec<String> = match spec.arity {
            Arity::Flag => {
                if inline.is_some() {
                    return Err(format!("error: unknown option '{arg}'"));
                }
                Vec::new()
            }
            Arity::Required => match inline {
                Some(v) => vec![v],
                None if i < args.len() => {
                    i += 1;
                    vec![args[i - 1].clone()]
                }
                None => return Err(format!("error: option '{usage}' argument missing")),
            },
            Arity::Optional => match inline {
                Some(v) => vec![v],
                None if i < args.len() && !args[i].starts_with('-') => {
                    i += 1;
                    vec![args[i - 1].clone()]
                }
                None => Vec::new(),
            },
            Arity::List => {
                let mut values: Vec<String> = inline.into_iter().collect();
                while i < args.len() && !args[i].starts_with('-') {
                    values.push(args[i].clone());
                    i += 1;
                }
                if values.is_empty() {
                    return Err(format!("error: option '{usage}' argument missing"));
                }
                values
            }
        };
        if !spec.choices.is_empty() {
            if let Some(v) = values.first() {
                if !spec.choices.contains(&v.as_str()) {
                    return Err(format!(
                        "error: option '{usage}' argument '{v}' is invalid. Allowed choices are {}.",
                        spec.choices.join(", ")
                    ));
                }
            }
        }
        let value = values.first().cloned();
        match spec.long {
            "print" => o.print = true,
            "continue" => o.continue_session = true,
            "resume" => o.resume = Some(value),
            "version" => o.version = true,
            "help" => o.help = true,
            "output-format" => o.output_format = value.unwrap_or_default(),
            "input-format" => o.input_format = value.unwrap_or_default(),
            "permission-mode" => o.permission_mode = value,
            "verbose" => o.verbose = true,
            "fork-session" => o.fork_session = true,
            "dangerously-skip-permissions" => o.skip_permissions = true,
            "replay-user-messages" => o.replay_user_messages = true,
            "no-session-persistence" => o.no_persistence = true,
            "session-id" => o.session_id = value,
            "resume-session-at" => o.resume_session_at = value,
            "rewind-files" => o.rewind_files = value,
            "model" => o.model = value,
            _ => {}
        }
    }
    match positionals.len() {
        0 => {}
        1 => o.prompt = positionals.pop(),
        n => {
            return Err(format!(
                "error: too many arguments. Expected 1 argument but got {n}."
            ))
        }
    }
    Ok(o)
}

fn usage_of(spec: &Spec) -> String {
    let mut usage = String::new();
    if let Some(c) = spec.short {
        usage.push_str(&format!("-{c}, "));
    }
    usage.push_str("--");
    usage.push_str(spec.long);
    if !spec.placeholder.is_empty() {
        usage.push(' ');
        usage.push_str(spec.placeholder);
    }
    usage
}

/// The help text (`-h/--help`).
pub fn help() -> String {
    let mut text = String::from(
        "Usage: claude [options] [command] [prompt]\n\n\
         Claude Code (mock) - starts a session; with -p/--print or stream-json input it\n\
         answers every prompt with a canned reply and exits.\n\nOptions:\n",
    );
    for spec in SPECS {
        text.push_str("  ");
        text.push_str(&usage_of(spec));
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn both_value_forms_and_the_optional_resume_value_parse() {
        let o = parse(&args(&[
            "--output-format=stream-json",
            "--input-format",
            "stream-json",
            "--verbose",
            "-r",
            "abc",
            "--resume-session-at=u1",
            "--allowedTools",
            "Read",
            "Edit",
            "--model",
            "m",
        ]))
        .unwrap();
        assert_eq!(o.output_format, "stream-json");
        assert_eq!(o.input_format, "stream-json");
        assert_eq!(o.resume_id(), Some("abc"));
        assert_eq!(o.resume_session_at.as_deref(), Some("u1"));
        assert_eq!(o.model.as_deref(), Some("m"));
        let o = parse(&args(&["--resume", "--verbose", "-p", "hello"])).unwrap();
        assert_eq!(o.resume, Some(None));
        assert_eq!(o.prompt.as_deref(), Some("hello"));
    }

    #[test]
    fn errors_read_as_commander_errors() {
        assert_eq!(
            parse(&args(&["--frobnicate"])).unwrap_err(),
            "error: unknown option '--frobnicate'"
        );
        assert_eq!(
            parse(&args(&["--verbose=yes"])).unwrap_err(),
            "error: unknown option '--verbose=yes'"
        );
        assert_eq!(
            parse(&args(&["--model"])).unwrap_err(),
            "error: option '--model <model>' argument missing"
        );
        assert!(parse(&args(&["--output-format", "xml"]))
            .unwrap_err()
            .contains("Allowed choices are text, json, stream-json."));
        assert!(parse(&args(&["a", "b"]))
            .unwrap_err()
            .starts_with("error: too many arguments"));
    }
}
