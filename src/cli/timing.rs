//! The timed tasks behind `learned-fft bench` ([`super::bench`]): medians of synchronised
//! wall-clock timings, returned as serialisable results (the CLI prints them as JSON). Speed is
//! measured here and in `benches/`, never in tests.

use std::time::Instant;

use burn::module::AutodiffModule;
use burn::nn::loss::Reduction;
use burn::tensor::{backend::Backend, Distribution, Tensor};
use serde::Serialize;

use learned_fft::backend::{BackendTask, FftBackend, Selected};
use learned_fft::error::{check_power_of_two, Error, Result};
use learned_fft::memory;
use learned_fft::{Butterfly, ButterflyConfig, ButterflyInit, Permutation};
use learned_fft::{ButterflyOps, KernelChoice};
use learned_fft::{Distance, SpectralLoss, SpectralLossConfig};
use learned_fft::{FftConv1d, FftConv1dConfig};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Synchronises `device`, as a bench error where it cannot.
fn sync<B: Backend>(device: &B::Device) -> Result<()> {
    B::sync(device).map_err(|e| Error::invalid("bench", "a device that synchronises", format!("{e:?}")))
}

/// What both timings do first: refuse `iters = 0` (`needs` says why a timing is needed), run
/// `warmup` untimed calls of `f` and synchronise.
fn warm_up<B: Backend>(
    device: &B::Device,
    warmup: usize,
    iters: usize,
    needs: &str,
    f: &mut impl FnMut() -> Result<()>,
) -> Result<()> {
    if iters == 0 {
        return Err(Error::invalid("bench", format!("iters >= 1 ({needs})"), iters));
    }
    for _ in 0..warmup {
        f()?;
    }
    sync::<B>(device)
}

/// Median of `iters` timings of `f` (in milliseconds), after `warmup` untimed calls; the device
/// is synchronised before and after each call.
pub fn median_ms<B: Backend>(
    device: &B::Device,
    warmup: usize,
    iters: usize,
    mut f: impl FnMut() -> Result<()>,
) -> Result<f64> {
    warm_up::<B>(device, warmup, iters, "a median needs a timing", &mut f)?;
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters {
        let start = Instant::now();
        f()?;
        sync::<B>(device)?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// Mean milliseconds per call of `iters` calls of `f` issued back to back with one sync at the
/// end (after `warmup` calls and a sync), as a training loop that does not read its loss every
/// step issues them: the device's queue stays fed, and the wake-up and sync latency after a
/// call, which [`median_ms`] includes in every call and CUDA-event timings leave out, is paid
/// once.
pub fn pipelined_ms<B: Backend>(
    device: &B::Device,
    warmup: usize,
    iters: usize,
    mut f: impl FnMut() -> Result<()>,
) -> Result<f64> {
    warm_up::<B>(device, warmup, iters, "a mean needs a timing", &mut f)?;
    let start = Instant::now();
    for _ in 0..iters {
        f()?;
    }
    sync::<B>(device)?;
    Ok(start.elapsed().as_secs_f64() * 1e3 / iters as f64)
}

/// `learned-fft bench butterfly`: the butterfly's forward, and forward + backward (input and
/// twiddle gradients of `sum(re(y))`, as the PyTorch anchor measures), on random complex input.
#[derive(Clone, Debug)]
pub struct ButterflyBench {
    /// Transform size.
    pub n: usize,
    /// Batch rows.
    pub batch: usize,
    /// Untimed calls first.
    pub warmup: usize,
    /// Timed calls (the median is reported).
    pub iters: usize,
    /// The input permutation.
    pub permutation: BenchPermutation,
}

/// The input permutation of [`ButterflyBench`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum BenchPermutation {
    /// The FFT's bit reversal.
    BitReversal,
    /// No permutation.
    Identity,
    /// A random gather (seeded), as a learned permutation ends.
    Random,
}

impl BenchPermutation {
    /// The permutation for size `n`.
    fn build(self, n: usize) -> Result<Permutation> {
        Ok(match self {
            BenchPermutation::BitReversal => Permutation::BitReversal,
            BenchPermutation::Identity => Permutation::Identity,
            BenchPermutation::Random => {
                let mut indices: Vec<usize> = (0..n).collect();
                indices.shuffle(&mut ChaCha8Rng::seed_from_u64(n as u64));
                Permutation::gather(indices)?
            }
        })
    }
}

/// Result of [`ButterflyBench`].
#[derive(Clone, Debug, Serialize)]
pub struct ButterflyBenchResult {
    /// Transform size.
    pub n: usize,
    /// Batch rows.
    pub batch: usize,
    /// The input permutation.
    pub permutation: BenchPermutation,
    /// Backend, precision and device.
    pub backend: Selected,
    /// Whether the fused kernels ran (false: the tensor-op reference).
    pub fused: bool,
    /// Median forward time.
    pub forward_ms: f64,
    /// Mean forward time of calls issued back to back ([`pipelined_ms`]): the throughput, without
    /// the wake-up and sync latency after every call that a GPU-timed anchor leaves out too.
    pub forward_pipelined_ms: f64,
    /// Median forward + backward time.
    pub fwd_bwd_ms: f64,
    /// Mean forward + backward time of calls issued back to back ([`pipelined_ms`]).
    pub fwd_bwd_pipelined_ms: f64,
    /// Bytes counted per call: one read and one write of the complex signal.
    pub bytes: usize,
    /// `bytes / forward time`.
    pub forward_gbps: f64,
    /// `bytes / back-to-back forward time`.
    pub forward_pipelined_gbps: f64,
    /// `bytes / (forward + backward) time`.
    pub fwd_bwd_gbps: f64,
}

impl BackendTask for ButterflyBench {
    type Output = ButterflyBenchResult;

    fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> Result<ButterflyBenchResult> {
        check_power_of_two("bench butterfly", self.n)?;
        if self.batch == 0 {
            return Err(Error::invalid("bench butterfly", "batch >= 1", self.batch));
        }
        let (n, batch) = (self.n, self.batch);
        // Input, output and gradients (re, im), and the reference path's per-stage activations.
        let (log_n, float) = (n.trailing_zeros() as usize, std::mem::size_of::<B::FloatElem>());
        let needed = memory::product(&[batch, n, 8 + 2 * log_n, float]);
        memory::ensure("bench butterfly", || format!("{batch} rows of N = {n}"), needed)?;
        let layer: Butterfly<B> = ButterflyConfig::new(n)
            .with_init(ButterflyInit::RandomUnitary { seed: 0 })
            .with_permutation(self.permutation.build(n)?)
            .init(&device)?;
        let inner = layer.valid();
        let random = || Tensor::<B::InnerBackend, 2>::random([batch, n], Distribution::Normal(0.0, 1.0), &device);
        let (xr, xi) = (random(), random());

        let forward = || inner.forward(xr.clone(), xi.clone()).map(drop);
        let forward_ms = median_ms::<B::InnerBackend>(&device, self.warmup, self.iters, forward)?;
        let forward_pipelined_ms = pipelined_ms::<B::InnerBackend>(&device, self.warmup, self.iters, forward)?;
        let step = || {
            let x_re = Tensor::<B, 2>::from_inner(xr.clone()).require_grad();
            let x_im = Tensor::<B, 2>::from_inner(xi.clone()).require_grad();
            let (yr, _) = layer.forward(x_re, x_im)?;
            // `sum(re y)`, the anchor's loss, summed per row first: Burn's one-kernel `sum` of the
            // whole batch adds every cube's part to one float atomically, which serialises (a
            // quarter of the step on CUDA, docs/benchmarks.md#backward-changes-h200), and is not
            // what is timed.
            drop(yr.sum_dim(1).sum().backward());
            Ok(())
        };
        let fwd_bwd_ms = median_ms::<B::InnerBackend>(&device, self.warmup, self.iters, step)?;
        let fwd_bwd_pipelined_ms = pipelined_ms::<B::InnerBackend>(&device, self.warmup, self.iters, step)?;
        let bytes = 2 * batch * n * 2 * std::mem::size_of::<B::FloatElem>();
        Ok(ButterflyBenchResult {
            n,
            batch,
            permutation: self.permutation,
            backend: selected.clone(),
            fused: <B as ButterflyOps>::butterfly_is_fused(n, &device),
            forward_ms,
            forward_pipelined_ms,
            fwd_bwd_ms,
            fwd_bwd_pipelined_ms,
            bytes,
            forward_gbps: bytes as f64 / (forward_ms * 1e6),
            forward_pipelined_gbps: bytes as f64 / (forward_pipelined_ms * 1e6),
            fwd_bwd_gbps: bytes as f64 / (fwd_bwd_ms * 1e6),
        })
    }
}

/// `learned-fft bench spectral`: the spectral loss (Hann, linear magnitude, L2, mean: the loss of
/// the torch STFT anchor in `scripts/anchor.py --stft`) between random
/// signals: forward, and forward + backward (the gradient of `pred`, as in training), on the
/// configured fastest path and on the reference path of the same backend.
#[derive(Clone, Debug)]
pub struct SpectralBench {
    /// Window length W.
    pub win: usize,
    /// Hop H.
    pub hop: usize,
    /// Signals (batch rows).
    pub signals: usize,
    /// Samples per signal.
    pub samples: usize,
    /// Untimed calls first.
    pub warmup: usize,
    /// Timed calls (the median is reported).
    pub iters: usize,
    /// Also time the reference path.
    pub reference: bool,
}

/// Result of [`SpectralBench`].
#[derive(Clone, Debug, Serialize)]
pub struct SpectralBenchResult {
    /// Window length.
    pub win: usize,
    /// Hop.
    pub hop: usize,
    /// Signals.
    pub signals: usize,
    /// Samples per signal.
    pub samples: usize,
    /// Frames per signal.
    pub frames: usize,
    /// Backend, precision and device.
    pub backend: Selected,
    /// Whether the fused kernels ran (false: the tensor-op reference).
    pub fused: bool,
    /// Median forward time (`Auto` path).
    pub forward_ms: f64,
    /// Median forward + backward time (`Auto` path).
    pub fwd_bwd_ms: f64,
    /// Mean forward + backward time of calls issued back to back ([`pipelined_ms`], `Auto`
    /// path): with one signal, the per-call fixed cost without the sync after every call.
    pub fwd_bwd_pipelined_ms: f64,
    /// Median forward time of the reference path (if timed).
    pub reference_forward_ms: Option<f64>,
    /// Median forward + backward time of the reference path (if timed).
    pub reference_fwd_bwd_ms: Option<f64>,
    /// `reference_fwd_bwd_ms / fwd_bwd_ms`.
    pub speedup_vs_reference: Option<f64>,
    /// Relative difference of the two paths' losses on the benchmark's signals (a check on the
    /// hardware that ran it).
    pub loss_rel_diff: Option<f64>,
    /// Relative RMS difference of the two paths' gradients of `pred`.
    pub grad_rel_rms_diff: Option<f64>,
}

impl BackendTask for SpectralBench {
    type Output = SpectralBenchResult;

    fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> Result<SpectralBenchResult> {
        if self.signals == 0 {
            return Err(Error::invalid("bench spectral", "signals >= 1", self.signals));
        }
        let config = SpectralLossConfig::new(self.win, self.hop).with_distance(Distance::L2);
        let shape = [self.signals, self.samples];
        // The signals and their gradients; the reference path also holds every frame (W samples
        // per hop) with its spectrum and their gradients.
        let float = std::mem::size_of::<B::FloatElem>();
        let per_sample = if self.reference { self.win.div_ceil(self.hop.max(1)) * 8 } else { 8 };
        let needed = memory::product(&[self.signals, self.samples, per_sample, float]);
        let what = || format!("{} × {} samples at W = {}, H = {}", self.signals, self.samples, self.win, self.hop);
        memory::ensure("bench spectral", what, needed)?;
        let pred = Tensor::<B::InnerBackend, 2>::random(shape, Distribution::Normal(0.0, 1.0), &device);
        let target = Tensor::<B::InnerBackend, 2>::random(shape, Distribution::Normal(0.0, 1.0), &device);
        let time = |kernel: KernelChoice| -> Result<(f64, f64, f64)> {
            let inner: SpectralLoss<B::InnerBackend> = config.clone().with_kernel(kernel).init(&device)?;
            let outer: SpectralLoss<B> = config.clone().with_kernel(kernel).init(&device)?;
            let forward = median_ms::<B::InnerBackend>(&device, self.warmup, self.iters, || {
                inner.forward(pred.clone(), target.clone(), Reduction::Mean).map(drop)
            })?;
            let step = || {
                let p = Tensor::<B, 2>::from_inner(pred.clone()).require_grad();
                let loss = outer.forward(p, Tensor::from_inner(target.clone()), Reduction::Mean)?;
                drop(loss.backward());
                Ok(())
            };
            let fwd_bwd = median_ms::<B::InnerBackend>(&device, self.warmup, self.iters, step)?;
            let pipelined = pipelined_ms::<B::InnerBackend>(&device, self.warmup, self.iters, step)?;
            Ok((forward, fwd_bwd, pipelined))
        };
        let loss: SpectralLoss<B> = config.init(&device)?;
        let frames = loss.frames(self.samples).ok_or_else(|| {
            Error::invalid("bench spectral", format!("at least W = {} samples", self.win), self.samples)
        })?;
        let (forward_ms, fwd_bwd_ms, fwd_bwd_pipelined_ms) = time(KernelChoice::Auto)?;
        let reference = if self.reference { Some(time(KernelChoice::Reference)?) } else { None };
        let value_and_grad = |kernel: KernelChoice| -> Result<(Vec<f64>, Vec<f64>)> {
            let loss: SpectralLoss<B> = config.clone().with_kernel(kernel).init(&device)?;
            let p = Tensor::<B, 2>::from_inner(pred.clone()).require_grad();
            let l = loss.forward(p.clone(), Tensor::from_inner(target.clone()), Reduction::Mean)?;
            let value = learned_fft::to_f64_vec(l.clone());
            let grads = l.backward();
            let g = p.grad(&grads).ok_or_else(|| Error::invalid("bench spectral", "a gradient of pred", "none"))?;
            Ok((value, learned_fft::to_f64_vec(g)))
        };
        let (loss_rel_diff, grad_rel_rms_diff) = if self.reference {
            let (fv, fg) = value_and_grad(KernelChoice::Auto)?;
            let (rv, rg) = value_and_grad(KernelChoice::Reference)?;
            let num: f64 = fg.iter().zip(&rg).map(|(a, b)| (a - b) * (a - b)).sum();
            let den: f64 = rg.iter().map(|b| b * b).sum();
            (Some((fv[0] - rv[0]).abs() / rv[0].abs()), Some((num / den).sqrt()))
        } else {
            (None, None)
        };
        Ok(SpectralBenchResult {
            win: self.win,
            hop: self.hop,
            signals: self.signals,
            samples: self.samples,
            frames,
            backend: selected.clone(),
            fused: loss.is_fused(&device),
            forward_ms,
            fwd_bwd_ms,
            fwd_bwd_pipelined_ms,
            reference_forward_ms: reference.map(|r| r.0),
            reference_fwd_bwd_ms: reference.map(|r| r.1),
            speedup_vs_reference: reference.map(|r| r.1 / fwd_bwd_ms),
            loss_rel_diff,
            grad_rel_rms_diff,
        })
    }
}

/// `learned-fft bench conv`: [`FftConv1d`] (exact FFT, causal) against Burn's direct `conv1d`
/// (depthwise, the same outputs) for several kernel lengths; forward times.
#[derive(Clone, Debug)]
pub struct ConvBench {
    /// Kernel lengths K.
    pub kernels: Vec<usize>,
    /// Samples per signal L.
    pub length: usize,
    /// Channels.
    pub channels: usize,
    /// Signals.
    pub batch: usize,
    /// Untimed calls first.
    pub warmup: usize,
    /// Timed calls (the median is reported).
    pub iters: usize,
}

/// One kernel length of [`ConvBench`].
#[derive(Clone, Debug, Serialize)]
pub struct ConvBenchRow {
    /// Kernel length K.
    pub kernel: usize,
    /// FFT size N.
    pub fft_size: usize,
    /// Median forward time of the FFT convolution.
    pub fft_ms: f64,
    /// Median forward time of the direct convolution.
    pub direct_ms: f64,
    /// `direct_ms / fft_ms`.
    pub fft_speedup: f64,
}

/// Result of [`ConvBench`].
#[derive(Clone, Debug, Serialize)]
pub struct ConvBenchResult {
    /// Backend, precision and device.
    pub backend: Selected,
    /// Samples per signal.
    pub length: usize,
    /// Channels.
    pub channels: usize,
    /// Signals.
    pub batch: usize,
    /// One row per kernel length.
    pub rows: Vec<ConvBenchRow>,
    /// The smallest K from which on the FFT convolution is faster at every measured length.
    pub crossover: Option<usize>,
}

impl BackendTask for ConvBench {
    type Output = ConvBenchResult;

    fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> Result<ConvBenchResult> {
        type I<B> = <B as burn::tensor::backend::AutodiffBackend>::InnerBackend;
        let (l, c, batch) = (self.length, self.channels, self.batch);
        if l == 0 || c == 0 || batch == 0 {
            return Err(Error::invalid("bench conv", "length, channels and batch ≥ 1", format!("{l}, {c}, {batch}")));
        }
        if self.kernels.is_empty() {
            return Err(Error::invalid(
                "bench conv",
                format!("a kernel length of at most the signal's {l} samples"),
                "none",
            ));
        }
        let float = std::mem::size_of::<B::FloatElem>();
        let needed = memory::product(&[batch, c, l.checked_next_power_of_two().unwrap_or(usize::MAX), 16, float]);
        memory::ensure("bench conv", || format!("{batch} × {c} channels × {l} samples"), needed)?;
        let x = Tensor::<I<B>, 3>::random([batch, c, l], Distribution::Normal(0.0, 1.0), &device);
        let mut rows = Vec::new();
        for &k in &self.kernels {
            let conv: FftConv1d<I<B>> = FftConv1dConfig::new(c, k).init(l, &device)?;
            let fft_ms = median_ms::<I<B>>(&device, self.warmup, self.iters, || conv.forward(x.clone()).map(drop))?;
            // The same causal convolution directly: Burn's conv1d is a cross-correlation, so the
            // taps are flipped; K − 1 zeros of padding, the first L outputs kept.
            let weight = conv.weight.val().flip([1]).reshape([c, 1, k]);
            let options = burn::tensor::ops::ConvOptions::new([1], [k - 1], [1], c);
            let direct_ms = median_ms::<I<B>>(&device, self.warmup, self.iters, || {
                drop(burn::tensor::module::conv1d(x.clone(), weight.clone(), None, options.clone()).narrow(2, 0, l));
                Ok(())
            })?;
            rows.push(ConvBenchRow {
                kernel: k,
                fft_size: conv.fft_size(),
                fft_ms,
                direct_ms,
                fft_speedup: direct_ms / fft_ms,
            });
        }
        let crossover =
            (0..rows.len()).find(|&i| rows[i..].iter().all(|r| r.fft_speedup > 1.0)).map(|i| rows[i].kernel);
        Ok(ConvBenchResult { backend: selected.clone(), length: l, channels: c, batch, rows, crossover })
    }
}
