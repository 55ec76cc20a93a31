//! `learned-fft exact`: the exact FFT butterfly's accuracy at one size.

use clap::Args;
use learned_fft::backend::{dispatch, BackendTask, FftBackend, Selected};
use learned_fft::metrics::exact_row;
use serde_json::{json, Value};

use super::Global;

#[derive(Args)]
pub struct ExactArgs {
    /// Transform size (a power of two >= 2).
    #[arg(long, default_value_t = 1024)]
    n: usize,
}

/// Twiddle rmse, floor and error against rustfft, on the chosen backend.
pub fn run(args: ExactArgs, global: &Global) -> learned_fft::Result<Value> {
    dispatch(global.backend, global.precision(), Exact { n: args.n })
}

struct Exact {
    n: usize,
}

impl BackendTask for Exact {
    type Output = Value;
    fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> learned_fft::Result<Self::Output> {
        eprintln!("backend: {selected}");
        let row = exact_row::<B::InnerBackend>(self.n, &device)?;
        Ok(json!({ "backend": selected, "result": row }))
    }
}
