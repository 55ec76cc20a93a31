//! The `learned-fft` command line (backend, exact, train, eval, plot, export, bench). Every command's
//! last stdout line is one JSON object with its results; human-readable output goes to stderr.

mod cli;

use clap::{Args, Parser, Subcommand, ValueEnum};
use cli::anchor::Anchor;
use cli::bench::{BenchPermutation, ButterflyBench, ConvBench, SpectralBench};
use cli::progress::ProgressLine;
use learned_fft::backend::{dispatch, select, BackendKind, BackendTask, FftBackend, Precision, Selected};
use learned_fft::metrics::{self, exact_row};
use learned_fft::train::Checkpoint;
use learned_fft::{TargetKind, TrainConfig, Trainer};
use serde_json::json;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The kernel lengths `bench conv` times by default (those no longer than the signal).
const DEFAULT_CONV_KERNELS: [usize; 7] = [16, 32, 64, 128, 256, 512, 1024];

#[derive(Parser)]
#[command(name = "learned-fft", version, about = "Learn the FFT as a butterfly network on Burn")]
struct Cli {
    /// Backend: auto | wgpu | candle | ndarray | cuda [default: $LEARNED_FFT_BACKEND, else auto].
    /// The flag wins over the variable, which is not read when the flag is given.
    #[arg(long, global = true)]
    backend: Option<BackendKind>,
    /// Precision: f32 | f64 [default: f32; for eval, the checkpoint's].
    #[arg(long, global = true)]
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
    Bench(BenchCommand),
    /// Accuracy of the exact FFT butterfly at size N: twiddle rmse, floor, error vs rustfft.
    Exact {
        /// Transform size (a power of two >= 2).
        #[arg(long, default_value_t = 1024)]
        n: usize,
    },
    /// Train a butterfly from random weights to reproduce a transform.
    Train(Box<TrainArgs>),
    /// rmse and floor of a checkpoint's layer against the f64 target, on the chosen backend.
    Eval {
        /// Checkpoint file (`checkpoint.lfft` in a run's checkpoint directory).
        #[arg(long)]
        checkpoint: String,
    },
    /// Draw a checkpoint's pictures as PNG files: curve.png (the training curve), error.png
    /// (|M − T| beside |M|) and twiddles.png (each stage's twiddle magnitudes).
    Plot {
        /// Checkpoint file.
        #[arg(long)]
        checkpoint: String,
        /// Directory the pictures go to (created if missing).
        #[arg(long)]
        out: String,
    },
    /// Write a checkpoint's twiddles to another format.
    Export {
        /// Checkpoint file.
        #[arg(long)]
        checkpoint: String,
        /// Output format.
        #[arg(long, value_enum, default_value = "safetensors")]
        format: ExportFormat,
        /// Output file.
        #[arg(long)]
        out: String,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum ExportFormat {
    /// safetensors (twiddle_re, twiddle_im, permutation; metadata).
    Safetensors,
}

/// Every field of the training config (defaults are TrainConfig's).
#[derive(Args)]
struct TrainArgs {
    /// Transform size N (a power of two).
    #[arg(long, default_value_t = 64)]
    n: usize,
    /// Target transform.
    #[arg(long, value_enum, default_value = "dft")]
    target: TargetKind,
    /// Kernel of the circulant target, comma-separated (length N).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    kernel: Vec<f64>,
    /// Seed of the random initial weights (restart r uses seed + r).
    #[arg(long)]
    seed: Option<u64>,
    /// Adam's initial learning rate.
    #[arg(long)]
    lr: Option<f64>,
    /// Adam's final learning rate (cosine decay).
    #[arg(long)]
    lr_final: Option<f64>,
    /// Most Adam steps per attempt.
    #[arg(long)]
    adam_steps: Option<usize>,
    /// Adam hands over to the polish early when its loss fell by less than 1 % over this many
    /// steps (0: never early).
    #[arg(long)]
    plateau_steps: Option<usize>,
    /// Measure the layer on this many random probe vectors instead of the N×N identity basis
    /// (default: the identity basis up to N = 4096, 256 probes above).
    #[arg(long)]
    probes: Option<usize>,
    /// Above this N a run of the DFT, iDFT, Hadamard transform or circulant starts from the
    /// layer trained at N/2, grown to N (default 4096, the circulant 4; N or more: from random
    /// weights at every size). A failed attempt reuses the trained half-size layer; every third
    /// attempt trains a new one.
    #[arg(long)]
    grow_above: Option<usize>,
    /// Model class to train instead of the target's own (which represents it exactly):
    /// `b` one butterfly, `bp` a permutation and a butterfly, `bpbp` two of them. A class that
    /// cannot represent the target misses the bar (exit status 1).
    #[arg(long, value_enum)]
    model: Option<learned_fft::nn::ModelChoice>,
    /// Real butterflies: every twiddle's imaginary part fixed at 0 (the Hadamard transform's
    /// exact factorization is real; the other targets' are not).
    #[arg(long, conflicts_with = "complex")]
    real: bool,
    /// Complex butterflies (the default).
    #[arg(long)]
    complex: bool,
    /// rmse at which Adam hands over to the polish phase.
    #[arg(long)]
    switch_rmse: Option<f64>,
    /// Further attempts from new random weights.
    #[arg(long)]
    restarts: Option<usize>,
    /// Most Levenberg–Marquardt iterations.
    #[arg(long)]
    polish_iters: Option<usize>,
    /// Most CG iterations per Levenberg–Marquardt step.
    #[arg(long)]
    cg_iters: Option<usize>,
    /// CG's relative residual tolerance.
    #[arg(long)]
    cg_tol: Option<f64>,
    /// Stalled polish steps before stopping.
    #[arg(long)]
    max_stalled: Option<usize>,
    /// Stop once the rmse is at or below this.
    #[arg(long)]
    stop_rmse: Option<f64>,
    /// TensorBoard directory.
    #[arg(long)]
    log_dir: Option<String>,
    /// Checkpoint directory.
    #[arg(long)]
    checkpoint_dir: Option<String>,
    /// Steps between checkpoints.
    #[arg(long)]
    checkpoint_every: Option<usize>,
    /// Steps between log records.
    #[arg(long)]
    log_every: Option<usize>,
    /// Do not fix the gauge before the polish phase (train every twiddle).
    #[arg(long)]
    free_gauge: bool,
    /// Continue from the checkpoint in --checkpoint-dir.
    #[arg(long)]
    resume: bool,
    /// No progress line (log records go to stderr as JSON lines instead).
    #[arg(long)]
    quiet: bool,
}

impl TrainArgs {
    fn config(&self) -> learned_fft::Result<TrainConfig> {
        let target = self.target.target(self.kernel.clone())?;
        let mut c = TrainConfig::new(self.n).with_target(target);
        macro_rules! set {
            ($($field:ident),*) => {$( if let Some(v) = self.$field.clone() { c.$field = v; } )*};
        }
        set!(
            seed,
            lr,
            lr_final,
            adam_steps,
            plateau_steps,
            switch_rmse,
            restarts,
            polish_iters,
            cg_iters,
            cg_tol,
            max_stalled,
            checkpoint_every,
            log_every
        );
        c.stop_rmse = self.stop_rmse;
        c.probes = self.probes;
        c.grow_above = self.grow_above;
        c.model = self.model;
        c.real = self.real;
        c.fix_gauge = !self.free_gauge;
        c.log_dir = self.log_dir.clone();
        c.checkpoint_dir = self.checkpoint_dir.clone();
        c.validate()?;
        Ok(c)
    }
}

/// Prints each progress record as a JSON line on stderr (for scripts and `--quiet`).
struct JsonLines;

impl learned_fft::train::Observer for JsonLines {
    fn progress(&mut self, p: &learned_fft::train::Progress) {
        eprintln!("{}", json!({ "progress": p }));
    }
}

struct Eval {
    checkpoint: Checkpoint,
}

impl BackendTask for Eval {
    type Output = serde_json::Value;
    fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> learned_fft::Result<Self::Output> {
        eprintln!("backend: {selected}");
        let layer = self.checkpoint.product::<B::InnerBackend>(&device)?;
        let cfg = &self.checkpoint.config;
        let rmse = metrics::rmse_to(&layer, &cfg.target)?;
        let floor = metrics::floor::<B::InnerBackend>(cfg.n, &cfg.target, &device)?;
        eprintln!(
            "N = {}, {:?}: rmse {rmse:.3e}{}",
            cfg.n,
            cfg.target,
            floor.map(|f| format!(", floor {f:.3e} ({:.3}×)", rmse / f)).unwrap_or_default()
        );
        Ok(json!({
            "backend": selected, "n": cfg.n, "target": cfg.target, "trained_precision": self.checkpoint.precision,
            "step": self.checkpoint.state.step, "rmse": rmse, "floor": floor,
            "rmse_over_floor": floor.map(|f| rmse / f),
        }))
    }
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Train targets from random init for several sizes and seeds (one precision); prints a
    /// JSON line per run on stderr and a summary table as JSON.
    Train {
        /// Targets, comma-separated (a circulant gets a random kernel per seed).
        #[arg(long, value_enum, value_delimiter = ',', default_value = "dft")]
        targets: Vec<TargetKind>,
        /// Sizes, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "8,16,32,64,128,256,512,1024")]
        sizes: Vec<usize>,
        /// Runs per size (seeds 0, 1000, 2000, …).
        #[arg(long, default_value_t = 10, value_parser = positive())]
        seeds: usize,
        /// Index of the first seed (seeds first · 1000, …), to split a sweep over processes.
        #[arg(long, default_value_t = 0)]
        first_seed: usize,
        /// Grow from N/2 above this size (default: each target's, see `train --grow-above`).
        #[arg(long)]
        grow_above: Option<usize>,
        /// Stop each run as soon as it is under the bar (time to the bar).
        #[arg(long)]
        to_bar: bool,
        /// Copy seed 0's checkpoint per size here and update manifest.json (nothing is copied
        /// when --first-seed is above 0).
        #[arg(long)]
        ship: Option<String>,
        /// Scratch directory for the runs.
        #[arg(long, default_value = "runs/sweep")]
        scratch: String,
        /// Also print every run's progress records as JSON lines on stderr.
        #[arg(long)]
        verbose: bool,
        /// Continue a sweep that was stopped (SIGTERM, Ctrl-C) with the same arguments: every
        /// run whose checkpoint is in the scratch directory resumes from it (a finished run
        /// reports at once), the others start.
        #[arg(long)]
        resume: bool,
    },
    /// FftConv1d (exact FFT) against Burn's direct conv1d, forward, for several kernel lengths.
    Conv {
        /// Kernel lengths, comma-separated [default: 16,32,64,128,256,512,1024, those no longer
        /// than the signal].
        #[arg(long, value_delimiter = ',')]
        kernels: Option<Vec<usize>>,
        /// Samples per signal (with K ≤ 1024, N = 4096: the largest fused butterfly).
        #[arg(long, default_value_t = 2048, value_parser = positive())]
        length: usize,
        /// Channels.
        #[arg(long, default_value_t = 8, value_parser = positive())]
        channels: usize,
        /// Signals.
        #[arg(long, default_value_t = 16, value_parser = positive())]
        batch: usize,
        /// Untimed warm-up calls.
        #[arg(long, default_value_t = 2)]
        warmup: usize,
        /// Timed calls (the median is reported).
        #[arg(long, default_value_t = 10, value_parser = positive())]
        iters: usize,
    },
    /// The spectral loss: forward, and forward + backward, on the fused path and on the
    /// reference path of the same backend, for random signals.
    Spectral {
        /// Window length W.
        #[arg(long, default_value_t = 1024)]
        win: usize,
        /// Hop H (default W/4).
        #[arg(long)]
        hop: Option<usize>,
        /// Signals (batch rows).
        #[arg(long, default_value_t = 64, value_parser = positive())]
        signals: usize,
        /// Samples per signal.
        #[arg(long, default_value_t = 48000, value_parser = positive())]
        samples: usize,
        /// Untimed warm-up calls.
        #[arg(long, default_value_t = 3)]
        warmup: usize,
        /// Timed calls (the median is reported).
        #[arg(long, default_value_t = 20, value_parser = positive())]
        iters: usize,
        /// Skip the reference path (it can be slow on a CPU).
        #[arg(long)]
        no_reference: bool,
        /// The same run's torch.stft anchor (`cufft_anchor.py --stft` output, JSON lines): adds
        /// the speed-ups over it for the same window, hop, signals and samples.
        #[arg(long)]
        anchor: Option<std::path::PathBuf>,
    },
    /// The butterfly op: forward, and forward + backward, on random complex input.
    Butterfly {
        /// Transform size (a power of two >= 2).
        #[arg(long, default_value_t = 1024)]
        n: usize,
        /// Batch rows.
        #[arg(long, default_value_t = 16384, value_parser = positive())]
        batch: usize,
        /// Untimed warm-up calls.
        #[arg(long, default_value_t = 5)]
        warmup: usize,
        /// Timed calls (the median is reported).
        #[arg(long, default_value_t = 20, value_parser = positive())]
        iters: usize,
        /// The input permutation: the FFT's bit reversal, none, or a random gather (what a
        /// learned permutation ends as).
        #[arg(long, value_enum, default_value_t = BenchPermutation::BitReversal)]
        permutation: BenchPermutation,
        /// The same run's cuFFT and PyTorch anchor (`cufft_anchor.py` output, JSON lines): adds
        /// the ratios to it for the same n and batch.
        #[arg(long)]
        anchor: Option<std::path::PathBuf>,
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

/// A count that must be at least 1 (`--iters 0` is refused, not taken as 1).
fn positive() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..)
}

/// The backend: the flag, else `LEARNED_FFT_BACKEND` (read only when no flag is given), else
/// auto.
fn backend(flag: Option<BackendKind>) -> learned_fft::Result<BackendKind> {
    flag.map_or_else(BackendKind::from_env, Ok)
}

/// SIGTERM and SIGINT set the returned flag, which asks a run to checkpoint and stop; a second
/// signal ends the process at once (status 128 + the signal).
fn stop_on_signals() -> learned_fft::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        let register = signal_hook::flag::register_conditional_shutdown(signal, 128 + signal, Arc::clone(&stop))
            .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&stop)));
        register.map_err(|e| learned_fft::Error::io("train.signals", "signal handlers", e))?;
    }
    Ok(stop)
}

fn run(cli: Cli) -> learned_fft::Result<serde_json::Value> {
    let precision = cli.precision.unwrap_or_default();
    let kind = backend(cli.backend)?;
    match cli.command {
        Command::Backend => {
            let selected = select(kind, precision)?;
            eprintln!("backend: {selected}");
            Ok(json!({ "backend": selected }))
        }
        Command::Exact { n } => dispatch(kind, precision, Exact { n }),
        Command::Train(args) => {
            let config = args.config()?;
            let (model, real) = (config.model, config.real);
            let trainer = Trainer::new(config)?.with_resume(args.resume).with_stop_flag(stop_on_signals()?);
            let report = if args.quiet {
                trainer.run(kind, precision, &mut JsonLines)?
            } else {
                let mut line = ProgressLine::default();
                let report = trainer.run(kind, precision, &mut line);
                line.finish();
                report?
            };
            eprintln!(
                "N = {}: rmse {:.3e}{} after {} steps in {:.1} s ({} attempt(s)) on {}",
                report.n,
                report.rmse,
                report.floor.map(|f| format!(", floor {f:.3e} ({:.3}×)", report.rmse / f)).unwrap_or_default(),
                report.steps,
                report.seconds,
                report.attempts,
                report.backend
            );
            if !report.reached {
                let why = missed_bar(&report, model, real);
                eprintln!("error: {why}");
                return Ok(json!({ "train": report, "error": why }));
            }
            Ok(json!({ "train": report }))
        }
        Command::Eval { checkpoint } => {
            let checkpoint = Checkpoint::read(checkpoint)?;
            // The float type it trained in, unless --precision says otherwise.
            let precision = cli.precision.unwrap_or(checkpoint.precision);
            dispatch(kind, precision, Eval { checkpoint })
        }
        Command::Plot { checkpoint, out } => {
            let pictures = learned_fft::plot::checkpoint_pictures(checkpoint, out, kind, cli.precision)?;
            for file in &pictures.written {
                eprintln!("wrote {file}");
            }
            for why in &pictures.skipped {
                eprintln!("skipped {why}");
            }
            Ok(json!({ "plot": pictures }))
        }
        Command::Export { checkpoint, format: ExportFormat::Safetensors, out } => {
            let summary = learned_fft::train::export::export_safetensors(checkpoint, out)?;
            eprintln!("wrote {} ({} bytes)", summary.path, summary.bytes);
            Ok(json!({ "export": summary }))
        }
        Command::Bench(BenchCommand::Train {
            targets,
            sizes,
            seeds,
            first_seed,
            grow_above,
            to_bar,
            ship,
            scratch,
            verbose,
            resume,
        }) => {
            let sweep = cli::sweep::Sweep {
                targets,
                sizes,
                seeds,
                first_seed,
                grow_above,
                backend: kind,
                precision,
                to_bar,
                ship: ship.map(Into::into),
                scratch: scratch.into(),
                resume,
                stop: Some(stop_on_signals()?),
            };
            let (mut lines, mut quiet) = (JsonLines, ());
            let observer: &mut dyn learned_fft::train::Observer = if verbose { &mut lines } else { &mut quiet };
            let rows = sweep.run(observer, |r| {
                eprintln!("{}", json!({ "run": { "target": r.target.kind(), "n": r.n, "seed": r.seed, "rmse": r.rmse, "floor": r.floor, "bar": r.bar, "reached": r.reached, "steps": r.steps, "seconds": r.seconds, "attempts": r.attempts, "backend": r.backend } }));
            })?;
            for r in &rows {
                eprintln!(
                    "{} N = {:5} {}: {}/{} under the bar {}; rmse median {:.2e} max {:.2e}; steps {}; seconds median {:.2} max {:.2}",
                    r.target, r.n, r.precision, r.reached, r.runs, r.bar.map_or("(none)".into(), |b| format!("{b:.2e}")),
                    r.rmse_median, r.rmse_max, r.steps_median, r.seconds_median, r.seconds_max
                );
            }
            Ok(json!({ "sweep": rows }))
        }
        Command::Bench(BenchCommand::Conv { kernels, length, channels, batch, warmup, iters }) => {
            // The default lengths stop at the signal's; lengths given are taken as they are (and
            // one longer than the signal is refused by the layer, naming it).
            let kernels =
                kernels.unwrap_or_else(|| DEFAULT_CONV_KERNELS.iter().copied().filter(|&k| k <= length).collect());
            let r = dispatch(kind, precision, ConvBench { kernels, length, channels, batch, warmup, iters })?;
            for row in &r.rows {
                eprintln!(
                    "conv K={} (N={}) on {}: fft {:.3} ms, direct {:.3} ms ({:.2}×)",
                    row.kernel, row.fft_size, r.backend, row.fft_ms, row.direct_ms, row.fft_speedup
                );
            }
            Ok(serde_json::to_value(r).expect("bench results serialise"))
        }
        Command::Bench(BenchCommand::Spectral { win, hop, signals, samples, warmup, iters, no_reference, anchor }) => {
            let hop = hop.unwrap_or((win / 4).max(1));
            let anchor = anchor.map(|path| Anchor::spectral(&path, win, hop, signals, samples)).transpose()?;
            let bench = SpectralBench { win, hop, signals, samples, warmup, iters, reference: !no_reference };
            let r = dispatch(kind, precision, bench)?;
            eprintln!(
                "spectral W={} H={} {}×{} on {} ({}): forward {:.3} ms, fwd+bwd {:.3} ms; reference fwd+bwd {}",
                r.win,
                r.hop,
                r.signals,
                r.samples,
                r.backend,
                if r.fused { "fused" } else { "reference" },
                r.forward_ms,
                r.fwd_bwd_ms,
                r.reference_fwd_bwd_ms.map(|t| format!("{t:.3} ms")).unwrap_or_else(|| "skipped".into())
            );
            let ratios = anchor.map(|a| a.spectral_ratios(&r)).transpose()?;
            with_anchor(serde_json::to_value(r).expect("bench results serialise"), ratios)
        }
        Command::Bench(BenchCommand::Butterfly { n, batch, warmup, iters, permutation, anchor }) => {
            let anchor = anchor.map(|path| Anchor::butterfly(&path, n, batch)).transpose()?;
            let result = dispatch(kind, precision, ButterflyBench { n, batch, warmup, iters, permutation })?;
            eprintln!(
                "butterfly n={} batch={} on {} ({}): forward {:.3} ms ({:.1} GB/s; back to back {:.3} ms, {:.1} GB/s), fwd+bwd {:.3} ms ({:.3} ms back to back)",
                result.n,
                result.batch,
                result.backend,
                if result.fused { "fused" } else { "reference" },
                result.forward_ms,
                result.forward_gbps,
                result.forward_pipelined_ms,
                result.forward_pipelined_gbps,
                result.fwd_bwd_ms,
                result.fwd_bwd_pipelined_ms
            );
            let ratios = anchor.map(|a| a.butterfly_ratios(&result)).transpose()?;
            with_anchor(serde_json::to_value(result).expect("bench results serialise"), ratios)
        }
    }
}

/// A benchmark's JSON with its ratios to the same run's anchor under `"anchor"`, when given.
fn with_anchor(
    mut value: serde_json::Value,
    ratios: Option<serde_json::Value>,
) -> learned_fft::Result<serde_json::Value> {
    if let (Some(ratios), serde_json::Value::Object(fields)) = (ratios, &mut value) {
        fields.insert("anchor".into(), ratios);
    }
    Ok(value)
}

/// Why a run did not reach its bar, for its error message.
fn missed_bar(report: &learned_fft::TrainReport, model: Option<learned_fft::nn::ModelChoice>, real: bool) -> String {
    let (target, precision) = (report.target.kind(), report.backend.precision);
    let chosen = model.map(|m| {
        format!(
            " (model {} from --model; the target's own class, {}, represents it exactly)",
            m.name(),
            learned_fft::reference::factorizations::model_name(&report.target)
        )
    });
    let why = match report.bar {
        Some(bar) => format!(
            "train: {target} at N = {}: rmse {:.3e} is above the bar {bar:.3e} ({}); the run did not recover the target",
            report.n,
            report.rmse,
            match precision {
                Precision::F64 => "f64: 1e-14".to_string(),
                Precision::F32 => "f32: the floor, its exact factorization's rmse in f32 on this backend".to_string(),
            }
        ),
        None => format!(
            "train: {target} at N = {}: rmse {:.3e}; no exact factorization of {target} in this model class is known, so \
             there is no {precision} bar and the run cannot count as recovering it",
            report.n, report.rmse
        ),
    };
    let real = if real { " (real butterflies from --real)" } else { "" };
    why + &chosen.unwrap_or_default() + real
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
            eprintln!("error: {err}");
            println!("{}", json!({ "error": err.to_string() }));
            std::process::exit(1);
        }
    }
}
