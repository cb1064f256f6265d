//! `cargo bench`: the rewind benchmark (see `src/bench/`), every suffix length and the
//! workspace case, printed as Markdown. `REWIND_DATABASE_URL` selects a server; otherwise an
//! embedded cluster is started.

use rewind_conformance::bench::{self, BenchOptions};
use rewind_conformance::postgres::PostgresChoice;

fn main() {
    // `cargo bench -- <filter>` and `cargo test --benches` pass arguments; a filter is not
    // supported, and under `--bench`-less test runs (`cargo test --benches`) nothing is run.
    if !std::env::args().any(|a| a == "--bench") {
        println!("rewind benchmark: run it with `cargo bench`");
        return;
    }
    let choice = match std::env::var("REWIND_DATABASE_URL") {
        Ok(url) if !url.is_empty() => PostgresChoice::Url(url),
        _ => PostgresChoice::Embedded,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let report = runtime.block_on(bench::run(&choice, &BenchOptions::default(), &mut |line| {
        eprintln!("bench: {line}")
    }));
    match report {
        Ok(report) => print!("{}", bench::markdown(&report)),
        Err(e) => {
            eprintln!("error: the benchmark failed: {e}");
            std::process::exit(1);
        }
    }
}
