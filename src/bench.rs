//! Benchmarks behind `learned-fft bench`: medians of synchronised wall-clock timings, returned
//! as serialisable results (the CLI prints them as JSON). Speed is measured here and in
//! `benches/`, never in tests.

use std::time::Instant;

use burn::module::AutodiffModule;
use burn::tensor::{backend::Backend, Distribution, Tensor};
use serde::Serialize;

use crate::backend::{BackendTask, FftBackend, Selected};
use crate::butterfly::{Butterfly, ButterflyConfig, ButterflyInit};
use crate::error::{check_power_of_two, Error, Result};
use crate::ops::ButterflyOps;

/// Median of `iters` timings of `f` (in milliseconds), after `warmup` untimed calls; the device
/// is synchronised before and after each call.
pub fn median_ms<B: Backend>(device: &B::Device, warmup: usize, iters: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let sync = || B::sync(device).map_err(|e| Error::invalid("bench", "a device that synchronises", format!("{e:?}")));
    for _ in 0..warmup {
        f()?;
    }
    sync()?;
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters.max(1) {
        let start = Instant::now();
        f()?;
        sync()?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
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
}

/// Result of [`ButterflyBench`].
#[derive(Clone, Debug, Serialize)]
pub struct ButterflyBenchResult {
    /// Transform size.
    pub n: usize,
    /// Batch rows.
    pub batch: usize,
    /// Backend, precision and device.
    pub backend: Selected,
    /// Whether the fused kernels ran (false: the tensor-op reference).
    pub fused: bool,
    /// Median forward time.
    pub forward_ms: f64,
    /// Median forward + backward time.
    pub fwd_bwd_ms: f64,
    /// Bytes counted per call: one read and one write of the complex signal.
    pub bytes: usize,
    /// `bytes / forward time`.
    pub forward_gbps: f64,
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
        let layer: Butterfly<B> = ButterflyConfig::new(n)
            .with_init(ButterflyInit::RandomUnitary { seed: 0 })
            .init(&device)?;
        let inner = layer.valid();
        let random = || Tensor::<B::InnerBackend, 2>::random([batch, n], Distribution::Normal(0.0, 1.0), &device);
        let (xr, xi) = (random(), random());

        let forward_ms = median_ms::<B::InnerBackend>(&device, self.warmup, self.iters, || {
            inner.forward(xr.clone(), xi.clone()).map(drop)
        })?;
        let fwd_bwd_ms = median_ms::<B::InnerBackend>(&device, self.warmup, self.iters, || {
            let x_re = Tensor::<B, 2>::from_inner(xr.clone()).require_grad();
            let x_im = Tensor::<B, 2>::from_inner(xi.clone()).require_grad();
            let (yr, _) = layer.forward(x_re, x_im)?;
            drop(yr.sum().backward());
            Ok(())
        })?;
        let bytes = 2 * batch * n * 2 * std::mem::size_of::<B::FloatElem>();
        Ok(ButterflyBenchResult {
            n,
            batch,
            backend: selected.clone(),
            fused: <B as ButterflyOps>::butterfly_is_fused(n, &device),
            forward_ms,
            fwd_bwd_ms,
            bytes,
            forward_gbps: bytes as f64 / (forward_ms * 1e6),
            fwd_bwd_gbps: bytes as f64 / (fwd_bwd_ms * 1e6),
        })
    }
}
