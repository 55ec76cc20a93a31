//! The `learned-fft` command line. Every command's last stdout line is one JSON object with its
//! results; human-readable output goes to stderr.

use clap::{Parser, Subcommand};
use learned_fft::backend::{dispatch, select, BackendKind, BackendTask, FftBackend, Precision, Selected};
use learned_fft::bench::ButterflyBench;
use learned_fft::metrics::exact_row;
use serde_json::json;

#[derive(Parser)]
#[command(name = "learned-fft", version, about = "Learn the FFT as a butterfly network on Burn")]
struct Cli {
    /// Backend: auto | wgpu | candle | ndarray | cuda.
    #[arg(long, global = true, env = "LEARNED_FFT_BACKEND", default_value = "auto")]
    backend: BackendKind,
    /// Precision: f32 | f64.
    #[arg(long, global = true, default_value = "f32")]
    precision: Precision,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the backend and device that would be used.
    Backend,
    /// Benchmarks; each prints one JSON object.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Accuracy of the exact FFT butterfly at size N: twiddle rmse, floor, error vs rustfft.
    Exact {
        /// Transform size (a power of two >= 2).
        #[arg(long, default_value_t = 1024)]
        n: usize,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
    /// The butterfly op: forward, and forward + backward, on random complex input.
    Butterfly {
        /// Transform size (a power of two >= 2).
        #[arg(long, default_value_t = 1024)]
        n: usize,
        /// Batch rows.
        #[arg(long, default_value_t = 16384)]
        batch: usize,
        /// Untimed warm-up calls.
        #[arg(long, default_value_t = 5)]
        warmup: usize,
        /// Timed calls (the median is reported).
        #[arg(long, default_value_t = 20)]
        iters: usize,
    },
}

struct Exact {
    n: usize,
}

impl BackendTask for Exact {
    type Output = serde_json::Value;
    fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> learned_fft::Result<Self::Output> {
        eprintln!("backend: {selected}");
        let row = exact_row::<B::InnerBackend>(self.n, &device)?;
        Ok(json!({ "backend": selected, "result": row }))
    }
}

fn run(cli: Cli) -> learned_fft::Result<serde_json::Value> {
    match cli.command {
        Command::Backend => {
            let selected = select(cli.backend, cli.precision)?;
            eprintln!("backend: {selected}");
            Ok(json!({ "backend": selected }))
        }
        Command::Exact { n } => dispatch(cli.backend, cli.precision, Exact { n }),
        Command::Bench(BenchCommand::Butterfly { n, batch, warmup, iters }) => {
            let result = dispatch(cli.backend, cli.precision, ButterflyBench { n, batch, warmup, iters })?;
            eprintln!(
                "butterfly n={} batch={} on {} ({}): forward {:.3} ms ({:.1} GB/s), fwd+bwd {:.3} ms",
                result.n,
                result.batch,
                result.backend,
                if result.fused { "fused" } else { "reference" },
                result.forward_ms,
                result.forward_gbps,
                result.fwd_bwd_ms
            );
            Ok(serde_json::to_value(result).expect("bench results serialise"))
        }
    }
}

fn main() {
    match run(Cli::parse()) {
        Ok(value) => println!("{value}"),
        Err(err) => {
            eprintln!("error: {err}");
            println!("{}", json!({ "error": err.to_string() }));
            std::process::exit(1);
        }
    }
}
