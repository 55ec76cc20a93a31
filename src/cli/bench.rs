//! `learned-fft bench`: the training sweep and the timings, each printing one JSON object.

use std::path::PathBuf;

use clap::Subcommand;
use learned_fft::backend::dispatch;
use learned_fft::nn::ModelChoice;
use learned_fft::{Result, TargetKind};
use serde_json::{json, Value};

use super::anchor::Anchor;
use super::linear::LinearBench;
use super::rfft::RfftBench;
use super::sweep::{Sweep, SWEEP_CHECKPOINT_EVERY};
use super::timing::{BenchPermutation, ButterflyBench, ConvBench, SpectralBench};
use super::{one_of, positive, stop_on_signals, Global, JsonLines};

/// The kernel lengths `bench conv` times by default (those no longer than the signal).
const DEFAULT_CONV_KERNELS: [usize; 7] = [16, 32, 64, 128, 256, 512, 1024];

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Train targets from random init for several sizes and seeds (one precision); prints a
    /// JSON line per run on stderr and a summary table as JSON.
    Train {
        /// Targets, comma-separated (a circulant gets a random kernel per seed).
        #[arg(long, value_delimiter = ',', default_value = "dft",
              value_parser = one_of(&TargetKind::VARIANTS, TargetKind::as_str))]
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
        /// Model class for every run instead of each target's own (see `train --model`).
        #[arg(long, value_parser = one_of(&ModelChoice::VARIANTS, ModelChoice::as_str))]
        model: Option<ModelChoice>,
        /// Factors of the class `--model bpbp` trains (see `train --factors`).
        #[arg(long, requires = "model")]
        factors: Option<usize>,
        /// Stop each run as soon as it is under the bar (time to the bar). Its bar must be known
        /// before the run, so in f32 it is the exact factorization's (as with --exact-floor).
        #[arg(long)]
        to_bar: bool,
        /// Take each f32 run's floor, bar and restarts from the target's exact factorization
        /// (`train --exact-floor`) instead of from the model's own f64 solution: a sweep that
        /// consults the answer, comparable with figures measured against it.
        #[arg(long)]
        exact_floor: bool,
        /// The default since the own floor became every f32 run's (kept so that earlier commands
        /// still run). Not with --to-bar, whose bar is the exact factorization's.
        #[arg(long, hide = true, conflicts_with_all = ["to_bar", "exact_floor"])]
        own_floor: bool,
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
        /// Spread each size's seeds over the backend's first D devices, one run per device at a
        /// time (the local GPUs: CUDA devices 0 … D − 1).
        #[arg(long, default_value_t = 1, value_parser = positive())]
        devices: usize,
        /// Continue a sweep that was stopped (SIGTERM, Ctrl-C) with the same arguments: every
        /// run whose checkpoint is in the scratch directory resumes from it (a finished run
        /// reports at once), the others start.
        #[arg(long)]
        resume: bool,
        /// Steps between each run's checkpoints in the scratch directory: a sweep killed
        /// outright (SIGKILL, the machine going down) resumes with --resume from at most this
        /// many steps back. A stop by SIGTERM or Ctrl-C checkpoints where it stops.
        #[arg(long, default_value_t = SWEEP_CHECKPOINT_EVERY, value_parser = positive())]
        checkpoint_every: usize,
        /// Also a row for every size below N that a run's grown chain passed (its half-size
        /// runs: at most 3 attempts each, on the target halved), marked `grown_in: N`; every
        /// run's line on stderr lists its chain's levels.
        #[arg(long)]
        levels: bool,
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
        /// The same run's torch.stft anchor (`scripts/anchor.py --stft` output, JSON lines): adds
        /// the speed-ups over it for the same window, hop, signals and samples.
        #[arg(long)]
        anchor: Option<PathBuf>,
    },
    /// The butterfly op: forward, and forward + backward, on random complex input.
    Butterfly {
        #[command(flatten)]
        size: OpSize,
        /// The input permutation: the FFT's bit reversal, none, or a random gather (what a
        /// learned permutation ends as).
        #[arg(long, value_enum, default_value_t = BenchPermutation::BitReversal)]
        permutation: BenchPermutation,
        /// The same run's cuFFT and PyTorch anchor (`scripts/anchor.py` output, JSON lines): adds
        /// the ratios to it for the same n and batch.
        #[arg(long)]
        anchor: Option<PathBuf>,
    },
    /// ButterflyLinear against Burn's dense Linear of the same shape: forward, and forward +
    /// backward, on random real input.
    Linear {
        /// Input features.
        #[arg(long, default_value_t = 1024, value_parser = positive())]
        in_size: usize,
        /// Output features.
        #[arg(long, default_value_t = 1024, value_parser = positive())]
        out_size: usize,
        /// Batch rows.
        #[arg(long, default_value_t = 4096, value_parser = positive())]
        batch: usize,
        /// Butterfly factors per stack.
        #[arg(long, default_value_t = 1, value_parser = positive())]
        nblocks: usize,
        /// Untimed warm-up calls.
        #[arg(long, default_value_t = 5)]
        warmup: usize,
        /// Timed calls (the median is reported).
        #[arg(long, default_value_t = 20, value_parser = positive())]
        iters: usize,
        /// The same run's torch anchor (`scripts/anchor.py --linear` output, JSON lines): adds
        /// the speed-ups over torch's Linear and the unfused PyTorch butterfly layer.
        #[arg(long)]
        anchor: Option<PathBuf>,
    },
    /// Real signals: `Butterfly::rfft` through the exact butterfly of half the size against the
    /// exact butterfly of the full size on a zero imaginary part (bins 0 … N/2 kept), forward,
    /// and forward + backward into the signal and the twiddles. With `--conv-taps K`, the same
    /// for `FftConv1d` (exact FFT, causal, signals of N samples) through rfft against its complex
    /// path, backward into the signal and the taps.
    Rfft {
        #[command(flatten)]
        size: OpSize,
        /// Time `FftConv1d` with this many taps instead of the bare transform.
        #[arg(long, value_parser = positive())]
        conv_taps: Option<usize>,
        /// Channels of the convolution (with `--conv-taps`).
        #[arg(long, default_value_t = 1, value_parser = positive())]
        channels: usize,
    },
}

/// The sizes and counts of `bench butterfly` and `bench rfft`.
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct OpSize {
    /// Transform size: samples per vector (a power of two; at least 2, 4 for rfft).
    #[arg(long, default_value_t = 1024)]
    pub n: usize,
    /// Batch rows: vectors per call.
    #[arg(long, default_value_t = 16384, value_parser = positive())]
    pub batch: usize,
    /// Untimed warm-up calls.
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,
    /// Timed calls (the median is reported).
    #[arg(long, default_value_t = 20, value_parser = positive())]
    pub iters: usize,
}

/// Runs one benchmark; its results are the returned JSON, a summary line goes to stderr.
pub fn run(command: BenchCommand, global: &Global) -> Result<Value> {
    let (kind, precision) = (global.backend, global.precision());
    match command {
        BenchCommand::Train {
            targets,
            sizes,
            seeds,
            first_seed,
            grow_above,
            model,
            factors,
            to_bar,
            exact_floor,
            own_floor,
            ship,
            scratch,
            verbose,
            devices,
            resume,
            checkpoint_every,
            levels,
        } => {
            let sweep = Sweep {
                targets,
                sizes,
                seeds,
                first_seed,
                grow_above,
                model,
                factors,
                backend: kind,
                precision,
                to_bar,
                own_floor: own_floor || !(exact_floor || to_bar),
                ship: ship.map(Into::into),
                scratch: scratch.into(),
                resume,
                checkpoint_every,
                stop: Some(stop_on_signals()?),
                devices,
                levels,
            };
            let observer = move || -> Box<dyn learned_fft::train::Observer> {
                if verbose {
                    Box::new(JsonLines)
                } else {
                    Box::new(())
                }
            };
            let rows = sweep.run(&observer, |r| {
                eprintln!("{}", json!({ "run": { "target": r.target.kind(), "n": r.n, "seed": r.seed, "rmse": r.rmse, "floor": r.floor, "floor_source": r.floor_source, "floor_in_trainer_gauge": r.floor_in_trainer_gauge, "bar": r.bar, "reached": r.reached, "steps": r.steps, "seconds": r.seconds, "attempts": r.attempts, "model": r.model, "stages_learned": r.stages_learned, "stages_fixed": r.stages_fixed, "permutations": r.permutations, "levels": r.levels, "refused_chain": r.refused_chain, "backend": r.backend } }));
            })?;
            for r in &rows {
                let chain = r.grown_in.map_or(String::new(), |n| format!(" (chains to {n})"));
                eprintln!(
                    "{} N = {:5}{chain} {}: {}/{} under the bar {}; rmse median {:.2e} max {:.2e}; steps {}; seconds median {:.2} max {:.2}",
                    r.target, r.n, r.precision, r.reached, r.runs, r.bar.map_or("(none)".into(), |b| format!("{b:.2e}")),
                    r.rmse_median, r.rmse_max, r.steps_median, r.seconds_median, r.seconds_max
                );
            }
            Ok(json!({ "sweep": rows }))
        }
        BenchCommand::Conv { kernels, length, channels, batch, warmup, iters } => {
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
        BenchCommand::Spectral { win, hop, signals, samples, warmup, iters, no_reference, anchor } => {
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
            Ok(with_anchor(serde_json::to_value(r).expect("bench results serialise"), ratios))
        }
        BenchCommand::Butterfly { size: OpSize { n, batch, warmup, iters }, permutation, anchor } => {
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
            Ok(with_anchor(serde_json::to_value(result).expect("bench results serialise"), ratios))
        }
        BenchCommand::Linear { in_size, out_size, batch, nblocks, warmup, iters, anchor } => {
            let anchor = anchor.map(|path| Anchor::linear(&path, in_size, out_size, nblocks, batch)).transpose()?;
            let r = dispatch(kind, precision, LinearBench { in_size, out_size, batch, nblocks, warmup, iters })?;
            eprintln!(
                "linear {}→{} batch={} on {} ({}): butterfly fwd+bwd {:.3} ms ({} params), dense {:.3} ms ({} params): {:.2}× ({:.2}× back to back)",
                r.in_size,
                r.out_size,
                r.batch,
                r.backend,
                if r.fused { "fused" } else { "reference" },
                r.butterfly.fwd_bwd_ms,
                r.butterfly.params,
                r.dense.fwd_bwd_ms,
                r.dense.params,
                r.fwd_bwd_speedup,
                r.fwd_bwd_pipelined_speedup
            );
            let ratios = anchor.map(|a| a.linear_ratios(&r)).transpose()?;
            Ok(with_anchor(serde_json::to_value(r).expect("bench results serialise"), ratios))
        }
        BenchCommand::Rfft { size: OpSize { n, batch, warmup, iters }, conv_taps, channels } => {
            let conv = conv_taps.map(|taps| (taps, channels));
            let r = dispatch(kind, precision, RfftBench { n, batch, warmup, iters, conv })?;
            let what =
                r.conv.as_ref().map_or("transform".to_string(), |c| format!("conv K={} C={}", c.taps, c.channels));
            eprintln!(
                "rfft {what} n={} batch={} on {} ({}): rfft fwd {:.3} ms, fwd+bwd {:.3} ms; complex fwd {:.3} ms, fwd+bwd {:.3} ms: {:.2}× forward, {:.2}× fwd+bwd; outputs apart by {:.1e} (rel RMS)",
                r.n,
                r.batch,
                r.backend,
                if r.fused { "fused" } else { "reference" },
                r.rfft.forward_ms,
                r.rfft.fwd_bwd_ms,
                r.complex.forward_ms,
                r.complex.fwd_bwd_ms,
                r.forward_speedup,
                r.fwd_bwd_speedup,
                r.output_rel_rms
            );
            Ok(serde_json::to_value(r).expect("bench results serialise"))
        }
    }
}

/// A benchmark's JSON with its ratios to the same run's anchor under `"anchor"`, when given.
fn with_anchor(mut value: Value, ratios: Option<Value>) -> Value {
    if let (Some(ratios), Value::Object(fields)) = (ratios, &mut value) {
        fields.insert("anchor".into(), ratios);
    }
    value
}
