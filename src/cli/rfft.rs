//! `learned-fft bench rfft`: the transform of real signals through the half-size butterfly
//! (`Butterfly::rfft`) against the complex path it replaces (a butterfly of the full size on the
//! signal with a zero imaginary part, its first N/2 + 1 bins kept), forward and forward +
//! backward ([`super::timing`]'s medians).

use burn::module::AutodiffModule;
use burn::tensor::{Distribution, Tensor};
use serde::Serialize;

use learned_fft::backend::{BackendTask, FftBackend, Selected};
use learned_fft::error::{Error, Result};
use learned_fft::memory;
use learned_fft::nn::exact_fft;
use learned_fft::ButterflyOps;

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
}

impl BackendTask for RfftBench {
    type Output = RfftBenchResult;

    fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> Result<RfftBenchResult> {
        let op = "bench rfft";
        let n = self.n;
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
        let r =
            times::<B, _>(twiddles(n / 2), counts, &device, &x, |x| half_inner.rfft(x), |x| Ok(loss(half.rfft(x)?)))?;
        let bins = |(re, im): (Tensor<_, 2>, Tensor<_, 2>)| (re.narrow(1, 0, keep), im.narrow(1, 0, keep));
        let c = times::<B, _>(
            twiddles(n),
            counts,
            &device,
            &x,
            |x| full_inner.forward_real(x).map(|y| (y.0.narrow(1, 0, keep), y.1.narrow(1, 0, keep))),
            |x| Ok(loss(bins(full.forward_real(x)?))),
        )?;
        Ok(RfftBenchResult {
            n,
            batch: self.batch,
            backend: selected.clone(),
            fused: <B as ButterflyOps>::butterfly_is_fused(n, &device),
            fwd_bwd_speedup: c.fwd_bwd_ms / r.fwd_bwd_ms,
            forward_speedup: c.forward_ms / r.forward_ms,
            forward_pipelined_speedup: c.forward_pipelined_ms / r.forward_pipelined_ms,
            rfft: r,
            complex: c,
        })
    }
}
