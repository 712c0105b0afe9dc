//! `qprof`: run SQL on DataFusion with every operator instrumented, and show where the
//! time and the memory went.

mod bench;
mod bench_cluster;
mod bench_history;
mod bench_replay;
mod cli;
mod cluster;
mod cluster_profiles;
mod data;
mod diff;
mod history;
mod live;
mod location;
mod otlp;
mod run;
mod serve;

use std::process::ExitCode;

use clap::Parser;
use qprof_core::alloc::CountingAllocator;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator::system();

/// The exit status of a process ended by SIGPIPE, as shells report it (128 + 13).
const BROKEN_PIPE_EXIT: i32 = 141;

fn main() -> ExitCode {
    // a bug must still end in one line, not a backtrace
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        // a reader that stopped reading (`qprof run | head`): end as a Unix tool ends on
        // SIGPIPE, without a word (Rust ignores the signal, so `println!` panics instead)
        if message.starts_with("failed printing to stdout") && message.contains("os error 32") {
            std::process::exit(BROKEN_PIPE_EXIT);
        }
        let place = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!(
            "error: internal error{place}: {}",
            message.replace('\n', " ")
        );
    }));
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(err) => {
            use clap::error::ErrorKind;
            if matches!(
                err.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) {
                let _ = err.print();
                return ExitCode::SUCCESS;
            }
            // clap's message up to its usage, on one line
            let rendered = err.render().to_string();
            let message: Vec<&str> = rendered
                .lines()
                .map(str::trim)
                .take_while(|l| !l.starts_with("Usage:"))
                .filter(|l| !l.is_empty())
                .collect();
            if message.is_empty() {
                eprintln!("error: invalid arguments");
            } else {
                eprintln!("{}", message.join(" "));
            }
            return ExitCode::from(2);
        }
    };
    match cli::dispatch(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", one_line(&err));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line, each cause after a colon; a cause whose text the
/// line already holds (an error that shows its source in its own text) is left out.
fn one_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string().replace('\n', " ");
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}
