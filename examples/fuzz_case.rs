//! Prints a generated conversation case (`src/fuzz`) as fixture YAML.
//!
//! `cargo run --example fuzz_case -- SEED INDEX [PATH]`: case INDEX of run SEED (hexadecimal
//! with `0x`, else decimal), walked along the shrink PATH a fixture's header names (`s12c1`).
//! The YAML's header comment holds the rewind request and the case's shape.

use std::process::ExitCode;

use rewind_conformance::fuzz::{replay, GenConfig};

fn number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(seed), Some(index)) = (
        args.first().and_then(|a| number(a)),
        args.get(1).and_then(|a| number(a)),
    ) else {
        eprintln!("usage: fuzz_case SEED INDEX [PATH]");
        return ExitCode::from(2);
    };
    let path = args.get(2).map_or("", String::as_str);
    match replay(&GenConfig::default(), seed, index, path) {
        Some((case, _)) => {
            print!("{}", case.yaml);
            ExitCode::SUCCESS
        }
        None => {
            eprintln!("`{path}` is not a shrink path (like `s12c1s3`)");
            ExitCode::from(2)
        }
    }
}
