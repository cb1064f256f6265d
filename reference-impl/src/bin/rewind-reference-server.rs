//! `rewind-reference-server`: the reference implementation, served over driver protocol v1.
//!
//! ```text
//! rewind-reference-server --listen 127.0.0.1:8080 [--runtimes codex,claude,opencode,builtin]
//!                         [--variant recommended|alternative]
//! ```
//!
//! `--variant alternative` serves the alternative configuration: the other defensible reading
//! wherever the spec leaves a choice open (see `rewind_reference::variant`).
//!
//! Prints `listening on http://ADDR` once it accepts connections (with `--listen ...:0` the
//! system picks the port), and stops on Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use rewind_reference::driver::ReferenceDriver;
use rewind_reference::server::{serve, ServerState};
use rewind_reference::Variant;

/// Serves the reference implementation of the conversation Rewind operation over the
/// rewind-conformance driver protocol (version 1).
#[derive(Debug, Parser)]
#[command(name = "rewind-reference-server", version, about)]
struct Args {
    /// The address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:8080", env = "REWIND_SERVER_LISTEN")]
    listen: SocketAddr,
    /// Restore only these runtimes (comma separated); agents on any other runtime are refused
    /// as unsupported. Default: every runtime the reference knows.
    #[arg(long, value_delimiter = ',')]
    runtimes: Option<Vec<String>>,
    /// Which reading to take where the spec leaves a choice open. Both pass the conformance
    /// suite; `alternative` exists to prove that the suite accepts other spec-correct readings.
    #[arg(long, value_enum, default_value_t = Variant::Recommended)]
    variant: Variant,
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(variant = %args.variant, "serving the reference");
    let state = ServerState::new(ReferenceDriver {
        supported_runtimes: args.runtimes,
        variant: args.variant,
    });
    let result = runtime.block_on(serve(
        args.listen,
        state,
        |addr| {
            use std::io::Write as _;
            println!("listening on http://{addr}");
            let _ = std::io::stdout().flush();
        },
        shutdown_signal(),
    ));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: cannot serve on `{}`: {e}", args.listen);
            ExitCode::FAILURE
        }
    }
}

async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("rewind-reference-server").chain(args.iter().copied()))
    }

    #[test]
    fn the_variant_defaults_to_recommended() {
        let args = parse(&[]).expect("no arguments");
        assert_eq!(args.variant, Variant::Recommended);
        assert_eq!(args.runtimes, None);
    }

    #[test]
    fn the_variant_flag_takes_both_names_and_nothing_else() {
        assert_eq!(
            parse(&["--variant", "alternative"])
                .expect("alternative")
                .variant,
            Variant::Alternative
        );
        assert_eq!(
            parse(&["--variant=recommended"])
                .expect("recommended")
                .variant,
            Variant::Recommended
        );
        let err = parse(&["--variant", "other"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue);
        let text = err.to_string();
        assert!(
            text.contains("recommended") && text.contains("alternative"),
            "{text}"
        );
    }

    #[test]
    fn the_help_documents_the_variant() {
        let help = <Args as clap::CommandFactory>::command()
            .render_long_help()
            .to_string();
        assert!(help.contains("--variant"), "{help}");
        assert!(help.contains("alternative"), "{help}");
        assert!(help.contains("[default: recommended]"), "{help}");
    }
}
