//! Watch a butterfly network recover the FFT from random weights.
//!
//! ```text
//! cargo run --release --example train_butterfly                  # N = 64, DFT, f32, auto backend
//! cargo run --release --example train_butterfly -- --n 256 --precision f64 --backend candle
//! ```
//!
//! Writes a checkpoint, the config and TensorBoard events under `runs/train_butterfly/`
//! (`tensorboard --logdir runs`), prints a short table, and draws the run's pictures beside the
//! checkpoint: `curve.png` (the training curve), `error.png` (|M − T| beside |M|) and
//! `twiddles.png` (each stage's twiddle magnitudes).

use clap::Parser;
use learned_fft::backend::{BackendKind, Precision, BACKEND_ENV};
use learned_fft::train::{FloorSource, Observer, Phase, Progress};
use learned_fft::{TrainConfig, Trainer};

/// Prints one line every 100 steps and at each phase change, so the run can be watched.
#[derive(Default)]
struct Watch {
    phase: Option<(Phase, usize, bool)>,
}

impl Observer for Watch {
    fn progress(&mut self, p: &Progress) {
        let phase = Some((p.phase, p.attempt, p.finding_floor));
        if !p.step.is_multiple_of(100) && phase == self.phase {
            return;
        }
        self.phase = phase;
        if p.finding_floor {
            // In f32 the bar is the rounding of the model's own f64 solution: the layer is
            // polished on in f64 to find it (its own steps, from 0).
            eprintln!("finding the f32 floor: f64 polish step {:>3}, rmse {:.3e}", p.step, p.rmse);
            return;
        }
        let floor = p.floor.map(|f| format!("  floor {f:.2e} ({:.2}×)", p.rmse / f)).unwrap_or_default();
        eprintln!("step {:>5}  {:<7} rmse {:.3e}{floor}", p.step, format!("{:?}", p.phase).to_lowercase(), p.rmse);
    }
}

#[derive(Parser)]
struct Args {
    /// Transform size (a power of two).
    #[arg(long, default_value_t = 64)]
    n: usize,
    /// Backend: auto, wgpu, candle, ndarray, cuda.
    #[arg(long, env = BACKEND_ENV, default_value = "auto")]
    backend: BackendKind,
    /// f32 or f64.
    #[arg(long, default_value = "f32")]
    precision: Precision,
    /// Seed of the random initial weights.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where the checkpoint and TensorBoard events go.
    #[arg(long, default_value = "runs/train_butterfly")]
    out: String,
}

/// Runs the example; an error is printed as its message (not in Debug form) with a failing exit
/// status.
fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let run = format!("{}/n{}-{}-seed{}", args.out, args.n, args.precision, args.seed);
    let config = TrainConfig::new(args.n)
        .with_seed(args.seed)
        .with_checkpoint_dir(Some(run.clone()))
        .with_log_dir(Some(run.clone()));
    let report = Trainer::new(config)?.run(args.backend, args.precision, &mut Watch::default())?;
    println!();
    // In f32 the floor is the rounding of the model's own f64 solution (no answer consulted);
    // the last ratio is against the exact factorization rounded in the trainer's gauge, which
    // a built-in's report gives beside it.
    let ratio = |f: Option<f64>| f.filter(|&f| f > 0.0).map(|f| format!("{:.3}", report.rmse / f));
    let source = match report.floor_source {
        Some(FloorSource::OwnF64Solution) => " (own f64 solution)",
        Some(FloorSource::ExactFactorization) => " (exact factorization)",
        None => "",
    };
    println!("| N | backend | rmse | floor | rmse / floor | rmse / exact factorization in the trainer's gauge | steps | seconds | attempts |");
    println!("|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {:.3e} | {} | {} | {} | {} | {:.1} | {} |",
        report.n,
        report.backend,
        report.rmse,
        report.floor.map(|f| format!("{f:.3e}{source}")).unwrap_or_else(|| "—".into()),
        ratio(report.floor).unwrap_or_else(|| "—".into()),
        ratio(report.floor_in_trainer_gauge).unwrap_or_else(|| "—".into()),
        report.steps,
        report.seconds,
        report.attempts
    );
    println!();
    let checkpoint = format!("{run}/checkpoint.lfft");
    let pictures = learned_fft::plot::checkpoint_pictures(&checkpoint, &run, args.backend, Some(args.precision))?;
    println!("checkpoint: {checkpoint}   TensorBoard: tensorboard --logdir {run}");
    println!("pictures: {}", pictures.written.join(", "));
    Ok(())
}
