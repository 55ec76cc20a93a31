//! The `learned-fft` command line (backend, exact, train, eval, plot, export, bench). Every command's
//! last stdout line is one JSON object with its results; human-readable output goes to stderr.
//! Each subcommand lives in its own file under `cli/`; this file parses, dispatches and prints.

mod cli;

use clap::{Parser, Subcommand};
use cli::Global;
use learned_fft::backend::{BackendKind, Precision};
use serde_json::json;

#[derive(Parser)]
#[command(name = "learned-fft", version, about = "Learn the FFT as a butterfly network on Burn")]
struct Cli {
    /// Backend: auto | wgpu | candle | ndarray | cuda [default: $LEARNED_FFT_BACKEND, else auto].
    /// The flag wins over the variable, which is not read when the flag is given.
    #[arg(long, global = true, value_parser = cli::one_of(&BackendKind::VARIANTS, BackendKind::as_str))]
    backend: Option<BackendKind>,
    /// Precision: f32 | f64 [default: f32; for eval, the checkpoint's].
    #[arg(long, global = true, value_parser = cli::one_of(&Precision::VARIANTS, Precision::as_str))]
    precision: Option<Precision>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the backend and device that would be used.
    Backend,
    /// Benchmarks; each prints one JSON object.
    #[command(subcommand)]
    Bench(cli::bench::BenchCommand),
    /// Accuracy of the exact FFT butterfly at size N: twiddle rmse, floor, error vs rustfft.
    Exact(cli::exact::ExactArgs),
    /// Train a butterfly from random weights to reproduce a transform.
    Train(Box<cli::train::TrainArgs>),
    /// rmse and floor of a checkpoint's layer against the f64 target, on the chosen backend.
    Eval(cli::eval::EvalArgs),
    /// Draw a checkpoint's pictures as PNG files: curve.png (the training curve), error.png
    /// (|M − T| beside |M|) and twiddles.png (each stage's twiddle magnitudes).
    Plot(cli::plot::PlotArgs),
    /// Write a checkpoint's twiddles to another format.
    Export(cli::export::ExportArgs),
}

fn run(cli: Cli) -> learned_fft::Result<serde_json::Value> {
    // The backend is resolved before any command runs: a bad LEARNED_FFT_BACKEND is an error for
    // every command, as it always was.
    let global = Global { backend: cli.backend.map_or_else(BackendKind::from_env, Ok)?, precision: cli.precision };
    match cli.command {
        Command::Backend => cli::backend::run(&global),
        Command::Bench(command) => cli::bench::run(command, &global),
        Command::Exact(args) => cli::exact::run(args, &global),
        Command::Train(args) => cli::train::run(*args, &global),
        Command::Eval(args) => cli::eval::run(args, &global),
        Command::Plot(args) => cli::plot::run(args, &global),
        Command::Export(args) => cli::export::run(args),
    }
}

fn main() {
    match run(Cli::parse()) {
        Ok(value) => {
            println!("{value}");
            // A command that ran but failed its purpose (a run under no bar) reports and exits 1.
            if value.get("error").is_some() {
                std::process::exit(1);
            }
        }
        Err(err) => {
            // A command that could not run (bad input, a file, a stop asked for) exits 2, as
            // clap's own usage errors do; 1 is kept for a run that ended under no bar.
            eprintln!("error: {err}");
            println!("{}", json!({ "error": err.to_string() }));
            std::process::exit(2);
        }
    }
}
