//! `learned-fft bench linear`: `ButterflyLinear` against Burn's dense `Linear` of the same shape,
//! forward and forward + backward, on random real input ([`super::timing`]'s medians).

use burn::module::{AutodiffModule, Module};
use burn::nn::LinearConfig;
use burn::tensor::{Distribution, Tensor};
use serde::Serialize;

use learned_fft::backend::{BackendTask, FftBackend, Selected};
use learned_fft::error::{Error, Result};
use learned_fft::memory;
use learned_fft::{ButterflyLinearConfig, ButterflyOps};

use super::timing::{median_ms, pipelined_ms};

/// The timed task.
#[derive(Clone, Debug)]
pub struct LinearBench {
    /// Input features.
    pub in_size: usize,
    /// Output features.
    pub out_size: usize,
    /// Batch rows.
    pub batch: usize,
    /// Butterfly factors per stack.
    pub nblocks: usize,
    /// Untimed calls first.
    pub warmup: usize,
    /// Timed calls (the median is reported).
    pub iters: usize,
}

/// One layer's timings and size.
#[derive(Clone, Debug, Serialize)]
pub struct LayerTimes {
    /// Trainable parameters.
    pub params: usize,
    /// Median forward time.
    pub forward_ms: f64,
    /// Mean forward time of calls issued back to back.
    pub forward_pipelined_ms: f64,
    /// Median forward + backward time (every parameter's gradient and the input's).
    pub fwd_bwd_ms: f64,
    /// Mean forward + backward time of calls issued back to back.
    pub fwd_bwd_pipelined_ms: f64,
}

/// Result of [`LinearBench`].
#[derive(Clone, Debug, Serialize)]
pub struct LinearBenchResult {
    /// Input features.
    pub in_size: usize,
    /// Output features.
    pub out_size: usize,
    /// Batch rows.
    pub batch: usize,
    /// Butterfly factors per stack.
    pub nblocks: usize,
    /// Backend, precision and device.
    pub backend: Selected,
    /// Whether the butterfly ran the fused kernels (false: the tensor-op reference).
    pub fused: bool,
    /// `ButterflyLinear` (real, with bias, increasing stride, Randn).
    pub butterfly: LayerTimes,
    /// Burn's `Linear` (with bias).
    pub dense: LayerTimes,
    /// Dense time over butterfly time, forward + backward per call (above 1: the butterfly is
    /// faster).
    pub fwd_bwd_speedup: f64,
    /// Dense time over butterfly time, forward + backward back to back.
    pub fwd_bwd_pipelined_speedup: f64,
}

/// Times `forward` (on the inner backend) and forward + backward of one layer: `loss` maps an
/// input that requires a gradient to the scalar whose backward (every gradient) is timed.
pub(super) fn times<B: FftBackend, O>(
    params: usize,
    (warmup, iters): (usize, usize),
    device: &B::Device,
    x: &Tensor<B::InnerBackend, 2>,
    forward_inner: impl Fn(Tensor<B::InnerBackend, 2>) -> Result<O>,
    loss: impl Fn(Tensor<B, 2>) -> Result<Tensor<B, 1>>,
) -> Result<LayerTimes> {
    let fwd = || forward_inner(x.clone()).map(drop);
    let step = || {
        let x = Tensor::<B, 2>::from_inner(x.clone()).require_grad();
        drop(loss(x)?.backward());
        Ok(())
    };
    Ok(LayerTimes {
        params,
        forward_ms: median_ms::<B::InnerBackend>(device, warmup, iters, fwd)?,
        forward_pipelined_ms: pipelined_ms::<B::InnerBackend>(device, warmup, iters, fwd)?,
        fwd_bwd_ms: median_ms::<B::InnerBackend>(device, warmup, iters, step)?,
        fwd_bwd_pipelined_ms: pipelined_ms::<B::InnerBackend>(device, warmup, iters, step)?,
    })
}

impl BackendTask for LinearBench {
    type Output = LinearBenchResult;

    fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> Result<LinearBenchResult> {
        let op = "bench linear";
        if self.batch == 0 {
            return Err(Error::invalid(op, "batch >= 1", self.batch));
        }
        let butterfly = ButterflyLinearConfig::new(self.in_size, self.out_size)
            .with_nblocks(self.nblocks)
            .with_seed(Some(0))
            .init::<B>(&device)?;
        // Input, output and gradients of both layers, the dense weight and its gradient, and the
        // butterfly's padded stacks and per-factor activations.
        let (n, float) = (butterfly.n(), std::mem::size_of::<B::FloatElem>());
        let rows = self.batch;
        let needed = memory::sum(&[
            memory::product(&[rows, self.in_size + self.out_size, 4, float]),
            memory::product(&[self.in_size, self.out_size, 2, float]),
            memory::product(&[rows, n, butterfly.nstacks(), self.nblocks + 2, 2, float]),
        ]);
        memory::ensure(op, || format!("{rows} rows of {} → {}", self.in_size, self.out_size), needed)?;
        let dense = LinearConfig::new(self.in_size, self.out_size).init::<B>(&device);
        let x = Tensor::<B::InnerBackend, 2>::random([rows, self.in_size], Distribution::Normal(0.0, 1.0), &device);

        let (butterfly_inner, dense_inner) = (butterfly.valid(), dense.valid());
        let counts = (self.warmup, self.iters);
        // Summed per row first, as `bench butterfly` does: one-kernel sums of the whole batch
        // serialise on an atomic and are not what is timed.
        let b = times::<B, _>(
            butterfly.num_params(),
            counts,
            &device,
            &x,
            |x| butterfly_inner.forward(x),
            |x| Ok(butterfly.forward(x)?.sum_dim(1).sum()),
        )?;
        let d = times::<B, _>(
            dense.num_params(),
            counts,
            &device,
            &x,
            |x| Ok(dense_inner.forward(x)),
            |x| Ok(dense.forward(x).sum_dim(1).sum()),
        )?;
        Ok(LinearBenchResult {
            in_size: self.in_size,
            out_size: self.out_size,
            batch: rows,
            nblocks: self.nblocks,
            backend: selected.clone(),
            fused: <B as ButterflyOps>::butterfly_is_fused(n, &device),
            fwd_bwd_speedup: d.fwd_bwd_ms / b.fwd_bwd_ms,
            fwd_bwd_pipelined_speedup: d.fwd_bwd_pipelined_ms / b.fwd_bwd_pipelined_ms,
            butterfly: b,
            dense: d,
        })
    }
}
