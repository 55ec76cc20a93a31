//! Builds the exact unitary FFT butterfly for N = 8 … 1024 (`--max-n 4096` for more) on the
//! chosen backend and prints how close it is to the f64 DFT (rustfft):
//!
//! - `twiddle rmse`: rmse of the matrix the stored twiddles represent, multiplied out in f64
//!   (what rounding the twiddles alone costs);
//! - `floor`: rmse of the matrix the layer computes on the backend, in its dtype;
//! - `rel err`: relative RMS error on random inputs against rustfft in f64;
//! - `rustfft f32`: the same for rustfft itself run in f32 on the same inputs.
//!
//! ```text
//! cargo run --example exact_fft -- --backend auto --precision f32
//! ```

use clap::Parser;
use learned_fft::backend::{dispatch, BackendKind, BackendTask, FftBackend, Precision, Selected};
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
    #[arg(long, default_value_t = 1024)]
    max_n: usize,
}

struct Table {
    max_n: usize,
}

impl BackendTask for Table {
    type Output = Vec<ExactRow>;
    fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> learned_fft::Result<Vec<ExactRow>> {
        println!("backend: {selected}");
        println!("{:>6}  {:>12}  {:>12}  {:>14}  {:>14}", "N", "twiddle rmse", "floor", "rel err", "rustfft f32");
        let mut rows = Vec::new();
        let mut n = 8;
        while n <= self.max_n {
            let row = exact_row::<B::InnerBackend>(n, &device)?;
            let rustfft = row.rustfft_f32_rel_err.map_or("-".to_string(), |e| format!("{e:.3e}"));
            println!(
                "{:>6}  {:>12.3e}  {:>12.3e}  {:>14.3e}  {:>14}",
                row.n, row.twiddle_rmse, row.floor, row.rel_err_vs_rustfft, rustfft
            );
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
