//! `learned-fft bench rfft`: the transform of real signals through the half-size butterfly
//! (`Butterfly::rfft`) against the complex path it replaces (a butterfly of the full size on the
//! signal with a zero imaginary part, its first N/2 + 1 bins kept), forward and forward +
//! backward ([`super::timing`]'s medians); or, with a kernel length, `FftConv1d` through rfft
//! against its complex path.

use burn::module::{AutodiffModule, Module};
use burn::tensor::{backend::Backend, Distribution, ElementConversion, Tensor};
use serde::Serialize;

use learned_fft::backend::{BackendTask, FftBackend, Selected};
use learned_fft::error::{Error, Result};
use learned_fft::memory;
use learned_fft::nn::exact_fft;
use learned_fft::{ButterflyOps, FftConv1dConfig};

use super::linear::{times, LayerTimes};

/// The timed task.
#[derive(Clone, Debug)]
pub struct RfftBench {
    /// Samples per signal (a power of two >= 4).
    pub n: usize,
    /// Signals.
    pub batch: usize,
    /// Untimed calls first.
    pub warmup: usize,
    /// Timed calls (the median is reported).
    pub iters: usize,
    /// `Some((taps, channels))`: time `FftConv1d` on signals of `n` samples instead.
    pub conv: Option<(usize, usize)>,
}

/// The convolution timed by [`RfftBench`] with a kernel length.
#[derive(Clone, Debug, Serialize)]
pub struct ConvShape {
    /// Taps K.
    pub taps: usize,
    /// Channels.
    pub channels: usize,
    /// FFT size (the rfft path's butterfly has half of it).
    pub fft_size: usize,
    /// Whether the forward (inference) of the rfft path ran the fused kernels.
    pub rfft_fused: bool,
    /// Whether the forward (inference) of the complex path ran the fused kernels.
    pub complex_fused: bool,
}

/// Result of [`RfftBench`].
#[derive(Clone, Debug, Serialize)]
pub struct RfftBenchResult {
    /// Samples per signal.
    pub n: usize,
    /// Signals.
    pub batch: usize,
    /// Backend, precision and device.
    pub backend: Selected,
    /// Whether the butterflies ran the fused kernels (false: the tensor-op reference).
    pub fused: bool,
    /// The convolution timed, if not the bare transform (`rfft` and `complex` are then
    /// `FftConv1d` with and without `rfft`).
    pub conv: Option<ConvShape>,
    /// `rfft` through the exact butterfly of size N/2 (`params`: its twiddles).
    pub rfft: LayerTimes,
    /// The exact butterfly of size N on the real signal, bins 0 … N/2 kept.
    pub complex: LayerTimes,
    /// Complex time over rfft time, forward + backward per call (above 1: rfft is faster).
    pub fwd_bwd_speedup: f64,
    /// Complex time over rfft time, forward per call.
    pub forward_speedup: f64,
    /// Complex time over rfft time, forward back to back.
    pub forward_pipelined_speedup: f64,
    /// How far the two paths' forward outputs (inference, on the timed input; the convolution's
    /// layers share their taps and bias) are apart: the RMS of the difference over the RMS of
    /// the complex path's. Both compute the same map, so this is rounding (about 1e-7 in f32).
    pub output_rel_rms: f64,
}

impl BackendTask for RfftBench {
    type Output = RfftBenchResult;

    fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> Result<RfftBenchResult> {
        let op = "bench rfft";
        let n = self.n;
        if let Some((taps, channels)) = self.conv {
            return conv_times::<B>(&self, taps, channels, device, selected);
        }
        if n < 4 || !n.is_power_of_two() {
            return Err(Error::invalid(op, "n a power of two >= 4", n));
        }
        let float = std::mem::size_of::<B::FloatElem>();
        // The signal, the full-size complex pass's input, output and gradients (about 8 copies).
        memory::ensure(op, || format!("{} signals of {n}", self.batch), memory::product(&[self.batch, n, 8, float]))?;
        let (half, full) = (exact_fft::<B>(n / 2, false, &device)?, exact_fft::<B>(n, false, &device)?);
        let (half_inner, full_inner) = (half.valid(), full.valid());
        let keep = n / 2 + 1;
        let x = Tensor::<B::InnerBackend, 2>::random([self.batch, n], Distribution::Normal(0.0, 1.0), &device);
        let twiddles = |n: usize| 4 * n * n.trailing_zeros() as usize;
        let counts = (self.warmup, self.iters);
        // The backward of `sum(re) + sum(im)`, summed per row first, into the signal and the
        // twiddles.
        let loss = |(re, im): (Tensor<B, 2>, Tensor<B, 2>)| (re.sum_dim(1) + im.sum_dim(1)).sum();
        let agreement = {
            let (rr, ri) = half_inner.rfft(x.clone())?;
            let (cr, ci) = first_columns(full_inner.forward_real(x.clone())?, keep);
            rel_rms(Tensor::cat(vec![rr, ri], 1), Tensor::cat(vec![cr, ci], 1))
        };
        let r =
            times::<B, _>(twiddles(n / 2), counts, &device, &x, |x| half_inner.rfft(x), |x| Ok(loss(half.rfft(x)?)))?;
        let c = times::<B, _>(
            twiddles(n),
            counts,
            &device,
            &x,
            |x| full_inner.forward_real(x).map(|y| first_columns(y, keep)),
            |x| Ok(loss(first_columns(full.forward_real(x)?, keep))),
        )?;
        Ok(RfftBenchResult {
            n,
            batch: self.batch,
            backend: selected.clone(),
            fused: <B as ButterflyOps>::butterfly_is_fused(n, &device),
            conv: None,
            fwd_bwd_speedup: c.fwd_bwd_ms / r.fwd_bwd_ms,
            forward_speedup: c.forward_ms / r.forward_ms,
            forward_pipelined_speedup: c.forward_pipelined_ms / r.forward_pipelined_ms,
            rfft: r,
            complex: c,
            output_rel_rms: agreement,
        })
    }
}

/// `rms(a − b) / rms(b)`, reduced on the device.
fn rel_rms<B: Backend, const D: usize>(a: Tensor<B, D>, b: Tensor<B, D>) -> f64 {
    let diff: f64 = (a - b.clone()).powi_scalar(2).sum().into_scalar().elem();
    let norm: f64 = b.powi_scalar(2).sum().into_scalar().elem();
    (diff / norm).sqrt()
}

/// The first `keep` columns of a complex pair `[rows, n]`.
fn first_columns<B: Backend>((re, im): (Tensor<B, 2>, Tensor<B, 2>), keep: usize) -> (Tensor<B, 2>, Tensor<B, 2>) {
    (re.narrow(1, 0, keep), im.narrow(1, 0, keep))
}

/// [`RfftBench`] with a kernel length: `FftConv1d` (exact FFT, frozen, causal, bias) through
/// rfft against the same layer's complex path on `[batch, channels, n]` signals; the backward
/// into the signal, the taps and the bias.
fn conv_times<B: FftBackend>(
    bench: &RfftBench,
    taps: usize,
    channels: usize,
    device: B::Device,
    selected: &Selected,
) -> Result<RfftBenchResult> {
    let (n, batch) = (bench.n, bench.batch);
    let float = std::mem::size_of::<B::FloatElem>();
    let fft_size = (n + taps.max(1) - 1).next_power_of_two();
    memory::ensure(
        "bench rfft",
        || format!("{batch} × {channels} signals of {n}"),
        memory::product(&[batch, channels, fft_size, 8, float]),
    )?;
    let layer = |rfft: bool| FftConv1dConfig::new(channels, taps).with_rfft(rfft).init::<B>(n, &device);
    let real = layer(true)?;
    // The same taps and bias on both paths, so their outputs can be compared.
    let mut complex = layer(false)?;
    complex.weight = real.weight.clone();
    complex.bias = real.bias.clone();
    let (real_inner, complex_inner) = (real.valid(), complex.valid());
    let x = Tensor::<B::InnerBackend, 2>::random([batch, channels * n], Distribution::Normal(0.0, 1.0), &device);
    let counts = (bench.warmup, bench.iters);
    let shape = [batch, channels, n];
    let agreement =
        rel_rms(real_inner.forward(x.clone().reshape(shape))?, complex_inner.forward(x.clone().reshape(shape))?);
    let loss = |y: Tensor<B, 3>| y.sum_dim(2).sum();
    let r = times::<B, _>(
        real.num_params(),
        counts,
        &device,
        &x,
        |x| real_inner.forward(x.reshape(shape)),
        |x| Ok(loss(real.forward(x.reshape(shape))?)),
    )?;
    let c = times::<B, _>(
        complex.num_params(),
        counts,
        &device,
        &x,
        |x| complex_inner.forward(x.reshape(shape)),
        |x| Ok(loss(complex.forward(x.reshape(shape))?)),
    )?;
    Ok(RfftBenchResult {
        n,
        batch,
        backend: selected.clone(),
        fused: <B as ButterflyOps>::butterfly_is_fused(fft_size / 2, &device),
        conv: Some(ConvShape {
            taps,
            channels,
            fft_size: real.fft_size(),
            rfft_fused: <B::InnerBackend as ButterflyOps>::butterfly_conv_real_is_fused(fft_size, &device),
            complex_fused: <B::InnerBackend as ButterflyOps>::butterfly_conv_is_fused(fft_size, &device),
        }),
        fwd_bwd_speedup: c.fwd_bwd_ms / r.fwd_bwd_ms,
        forward_speedup: c.forward_ms / r.forward_ms,
        forward_pipelined_speedup: c.forward_pipelined_ms / r.forward_pipelined_ms,
        rfft: r,
        complex: c,
        output_rel_rms: agreement,
    })
}
