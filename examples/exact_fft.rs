//! Builds the exact FFT butterfly for N = 8 … 4096 on the chosen backend and prints how close it
//! is to the f64 DFT (rustfft): the twiddles' own rounding, the floor, and the error on random
//! inputs.
//!
//! ```text
//! cargo run --example exact_fft -- --backend auto --precision f32
//! ```

use clap::Parser;
use learned_fft::backend::{dispatch, BackendKind, BackendTask, Precision, Selected};
use learned_fft::burn::tensor::backend::AutodiffBackend;
use learned_fft::metrics::{exact_row, ExactRow};

#[derive(Parser)]
struct Args {
    /// auto | wgpu | candle | ndarray | cuda
    #[arg(long, env = "LEARNED_FFT_BACKEND", default_value = "auto")]
    backend: BackendKind,
    /// f32 | f64
    #[arg(long, default_value = "f32")]
    precision: Precision,
    /// Largest N (a power of two).
    #[arg(long, default_value_t = 4096)]
    max_n: usize,
}

struct Table {
    max_n: usize,
}

impl BackendTask for Table {
    type Output = Vec<ExactRow>;
    fn run<B: AutodiffBackend>(self, device: B::Device, selected: &Selected) -> learned_fft::Result<Vec<ExactRow>> {
        println!("backend: {selected}");
        println!("{:>6}  {:>12}  {:>12}  {:>16}", "N", "twiddle rmse", "floor", "rel err vs fft");
        let mut rows = Vec::new();
        let mut n = 8;
        while n <= self.max_n {
            let row = exact_row::<B::InnerBackend>(n, &device)?;
            println!("{:>6}  {:>12.3e}  {:>12.3e}  {:>16.3e}", row.n, row.twiddle_rmse, row.floor, row.rel_err_vs_rustfft);
            rows.push(row);
            n *= 2;
        }
        Ok(rows)
    }
}

fn main() {
    let args = Args::parse();
    if let Err(err) = dispatch(args.backend, args.precision, Table { max_n: args.max_n }) {
        eprintln!("error: {err}");
        std::process::exit(1);
    }
}
