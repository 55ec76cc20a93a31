//! Bring your own transform as code: an [`Operator`] the crate can only apply, learned as a
//! butterfly from random weights and grown as a family from N/2 with no N×N matrix above
//! N = 4096.
//!
//! ```text
//! cargo run --release --example train_operator                   # N = 256, f64, auto backend
//! cargo run --release --example train_operator -- --n 16384 --precision f32
//! cargo run --release --features cuda --example train_operator -- --n 65536 --backend cuda
//! ```
//!
//! The operator here is the unitary DFT computed by rustfft, standing in for a fast algorithm of
//! the user's own: the trainer is told its name, its sizes and its images of vectors, nothing
//! else. At N ≤ `--grow-above` it trains from random weights, the permutation found from the
//! operator's matrix (its images of the basis); above, each size starts from its trained member
//! of half the size, doubled, and the objective is the operator's images of random probes.

use std::process::ExitCode;
use std::sync::Mutex;

use clap::Parser;
use learned_fft::backend::{BackendKind, Precision, Selected, BACKEND_ENV};
use learned_fft::train::{Observer, Phase, Progress};
use learned_fft::{Operator, OperatorTarget, Target, TrainConfig, Trainer};
use num_complex::Complex64;
use rustfft::FftPlanner;

/// The unitary DFT by rustfft: the crate is told nothing else about it.
struct MyFft {
    /// rustfft's plans, kept between calls (a plan at N = 65536 costs more than one transform).
    planner: Mutex<FftPlanner<f64>>,
}

impl Operator for MyFft {
    fn name(&self) -> String {
        "my fft".into()
    }
    fn has_size(&self, n: usize) -> bool {
        n.is_power_of_two() && n >= 2
    }
    fn apply(&self, n: usize, x: &mut [Complex64]) -> learned_fft::Result<()> {
        // A poisoned lock means another thread panicked mid-plan; the planner itself is intact.
        let fft = self.planner.lock().unwrap_or_else(|e| e.into_inner()).plan_fft_forward(n);
        fft.process(x);
        let scale = 1.0 / (n as f64).sqrt();
        x.iter_mut().for_each(|z| *z *= scale);
        Ok(())
    }
}

/// Prints a line as each run starts (the sizes of the chain) and one at each phase change and
/// every 500 steps; in f32, the f64 polish that finds a run's floor counts its own steps.
#[derive(Default)]
struct Watch {
    phase: Option<(Phase, usize, bool)>,
}

impl Observer for Watch {
    fn start(&mut self, selected: &Selected, config: &TrainConfig, _start_step: usize) {
        eprintln!("N = {}: {selected}", config.n);
        self.phase = None;
    }
    fn progress(&mut self, p: &Progress) {
        let phase = Some((p.phase, p.attempt, p.finding_floor));
        if !p.step.is_multiple_of(500) && phase == self.phase {
            return;
        }
        self.phase = phase;
        let name = if p.finding_floor { "floor (f64)".to_string() } else { format!("{:?}", p.phase).to_lowercase() };
        eprintln!("  step {:>5}  {name:<7} rmse {:.3e}", p.step, p.rmse);
    }
}

#[derive(Parser)]
struct Args {
    /// Transform size (a power of two).
    #[arg(long, default_value_t = 256)]
    n: usize,
    /// Backend: auto, wgpu, candle, ndarray, cuda.
    #[arg(long, env = BACKEND_ENV, default_value = "auto")]
    backend: BackendKind,
    /// f64, or f32 (whose bar is the run's own solution, polished on in f64, rounded).
    #[arg(long, default_value = "f64")]
    precision: Precision,
    /// Seed of the random initial weights.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The largest size trained from random weights; above it each size grows from N/2.
    #[arg(long, default_value_t = 4096)]
    grow_above: usize,
}

/// Runs the example: exit status 1 when the run ends above its bar, and an error printed as its
/// message (not in Debug form).
fn main() -> ExitCode {
    run().unwrap_or_else(|err| {
        eprintln!("error: {err}");
        ExitCode::FAILURE
    })
}

fn run() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let args = Args::parse();
    let target = Target::Operator(OperatorTarget::new(MyFft { planner: Mutex::new(FftPlanner::new()) })?);
    let config =
        TrainConfig::new(args.n).with_target(target).with_seed(args.seed).with_grow_above(Some(args.grow_above));
    let report = Trainer::new(config)?.run(args.backend, args.precision, &mut Watch::default())?;
    println!();
    println!("| N | backend | rmse | bar | reached | permutation | grown from | steps | seconds | attempts |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {:.3e} | {} | {} | {:?} | {} | {} | {:.1} | {} |",
        report.n,
        report.backend,
        report.rmse,
        report.bar.map(|b| format!("{b:.3e}")).unwrap_or_else(|| "—".into()),
        report.reached,
        report.permutations,
        report.grown_from.map(|n| n.to_string()).unwrap_or_else(|| "—".into()),
        report.steps,
        report.seconds,
        report.attempts
    );
    Ok(if report.reached { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
