//! `rewind-reference-server`: the reference implementation, served over driver protocol v1.
//!
//! ```text
//! rewind-reference-server --listen 127.0.0.1:8080 [--runtimes codex,claude,opencode,builtin]
//! ```
//!
//! Prints `listening on http://ADDR` once it accepts connections (with `--listen ...:0` the
//! system picks the port), and stops on Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use rewind_reference::driver::ReferenceDriver;
use rewind_reference::server::{serve, ServerState};

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
    let state = ServerState::new(ReferenceDriver {
        supported_runtimes: args.runtimes,
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
