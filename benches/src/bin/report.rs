//! Prints the benchmark table from criterion's output, and writes it into a
//! file when one is given.
//!
//! ```text
//! cargo run --release -p tagpool-benches --bin report -- [--criterion-dir DIR] [OUT.md]
//! ```
//!
//! `OUT.md` is overwritten, unless it holds the markers
//! `<!-- bench-table:start -->` and `<!-- bench-table:end -->`: then only the
//! text between them is replaced.

use std::path::PathBuf;
use std::process::ExitCode;

use tagpool_benches::{collect, criterion_dir, render, write_into, Machine};

const USAGE: &str = "usage: report [--criterion-dir DIR] [OUT.md]";

fn main() -> ExitCode {
    let mut dir = None;
    let mut out = None;
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--criterion-dir") => match args.next() {
                Some(d) => dir = Some(PathBuf::from(d)),
                None => return fail(USAGE),
            },
            Some("-h" | "--help") => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ if out.is_none() => out = Some(PathBuf::from(arg)),
            _ => return fail(USAGE),
        }
    }
    let dir = dir.unwrap_or_else(criterion_dir);
    let results = match collect(&dir) {
        Ok(results) if !results.medians.is_empty() => results,
        Ok(_) => return fail(&format!("no benchmarks under {}", dir.display())),
        Err(e) => return fail(&format!("cannot read {}: {e}", dir.display())),
    };
    let report = render(&results, &Machine::current());
    print!("{report}");
    if let Some(path) = out {
        if let Err(e) = write_into(&path, &report) {
            return fail(&format!("cannot write {}: {e}", path.display()));
        }
        eprintln!("report: wrote {}", path.display());
    }
    ExitCode::SUCCESS
}

fn fail(message: &str) -> ExitCode {
    eprintln!("report: {message}");
    ExitCode::FAILURE
}
