//! `learned-fft eval`: a checkpoint's rmse and floor against the f64 target.

use clap::Args;
use learned_fft::backend::{dispatch, BackendTask, FftBackend, Selected};
use learned_fft::metrics;
use learned_fft::train::Checkpoint;
use serde_json::{json, Value};

use super::Global;

#[derive(Args)]
pub struct EvalArgs {
    /// Checkpoint file (`checkpoint.lfft` in a run's checkpoint directory).
    #[arg(long)]
    checkpoint: String,
}

/// Reads the checkpoint and measures its layer on the chosen backend.
pub fn run(args: EvalArgs, global: &Global) -> learned_fft::Result<Value> {
    let checkpoint = Checkpoint::read(args.checkpoint)?;
    // The float type it trained in, unless --precision says otherwise.
    let precision = global.precision.unwrap_or(checkpoint.precision);
    dispatch(global.backend, precision, Eval { checkpoint })
}

struct Eval {
    checkpoint: Checkpoint,
}

impl BackendTask for Eval {
    type Output = Value;
    fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> learned_fft::Result<Self::Output> {
        eprintln!("backend: {selected}");
        let layer = self.checkpoint.product::<B::InnerBackend>(&device)?;
        let cfg = &self.checkpoint.config;
        // A real-output run's model is the real part of its layer's matrix.
        let rmse = metrics::rmse_of_model(&layer, &cfg.target, cfg.real_output)?;
        let floor = metrics::floor_of_model::<B::InnerBackend>(cfg.n, &cfg.target, cfg.real_output, &device)?;
        eprintln!(
            "N = {}, {:?}: rmse {rmse:.3e}{}",
            cfg.n,
            cfg.target,
            floor.map(|f| format!(", floor {f:.3e} ({:.3}×)", rmse / f)).unwrap_or_default()
        );
        Ok(json!({
            "backend": selected, "n": cfg.n, "target": cfg.target, "trained_precision": self.checkpoint.precision,
            "step": self.checkpoint.state.step, "rmse": rmse, "floor": floor,
            "rmse_over_floor": floor.map(|f| rmse / f), "real_output": cfg.real_output,
        }))
    }
}
