//! The fused FFT convolution forward (CubeCL backends without autodiff): one launch transforms
//! every channel's taps, one more convolves every row with both transforms on-chip.
//!
//! A cube holds one zero-padded row of N complex values in shared memory (N ≤ 4096 in f32:
//! 32 KiB, Metal's limit) and runs the butterfly's stages there, one barrier per stage, its
//! threads stepping over the stage's N/2 blocks; twiddles are read from the layer's tables
//! (`[log2 N, N/2, 2, 2]`, contiguous) through the cache. The input permutation is applied as the
//! row is loaded (bit reversal computed, a gather read from its table). The convolution kernel
//! keeps the spectrum product in registers between its two transforms: each thread reads the
//! values that its slots of the second transform gather, multiplies them by the taps' spectrum,
//! and writes their conjugates after a barrier. One launch per call is what a small convolution
//! costs (the reference path takes some twenty tensor operations), which is where the time of
//! such calls goes.

use burn_cubecl::{kernel::into_contiguous, tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::{prelude::*, CubeDim};

use super::{reverse_bits, InputOrder, Order};
use crate::ops::cubecl::{empties, floor_pow2, grid};

/// Shared memory a cube fills at most (Metal's limit, which every wgpu and CUDA device offers).
const SHARED_BUDGET: usize = 32 << 10;
/// Threads per cube at most (each steps over `N/2 / threads` blocks per stage): a small call's
/// time is the stages' latency (one cube per row, one barrier per stage), so a cube takes as
/// many threads as the device allows, up to one per block.
const MAX_THREADS: usize = 1024;

/// What the kernels are compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ConvConfig {
    /// log2 N.
    pub log_n: usize,
    /// Threads per cube (a power of two ≤ N/2).
    pub threads: usize,
    /// How the butterfly orders its input.
    pub order: Order,
    /// Whether a bias is added.
    pub bias: bool,
}

impl ConvConfig {
    /// The configuration for size `n` on a device with `max_units` threads and `max_shared`
    /// bytes per cube, in `elem`-byte floats; `None` where a row does not fit a cube.
    pub fn new(n: usize, elem: usize, max_units: usize, max_shared: usize, order: Order, bias: bool) -> Option<Self> {
        if !n.is_power_of_two() || n < 2 || 2 * n * elem > SHARED_BUDGET.min(max_shared) || max_units == 0 {
            return None;
        }
        let threads = (n / 2).min(MAX_THREADS).min(floor_pow2(max_units));
        Some(ConvConfig { log_n: n.trailing_zeros() as usize, threads, order, bias })
    }
}

/// Whether the fused convolution runs for size `n` on `device` in float type `F`.
pub fn conv_supported<R: CubeRuntime, F: FloatElement>(n: usize, device: &R::Device) -> bool {
    let client = R::client(device);
    let props = &client.properties().hardware;
    let units = props.max_units_per_cube as usize;
    ConvConfig::new(n, core::mem::size_of::<F>(), units, props.max_shared_memory_size, Order::Natural, false).is_some()
}

/// Slot `i` of the permuted row: the source index `g[i]` (`y[i] = x[g[i]]`).
#[cube]
fn source(i: usize, order: &Array<u32>, #[comptime] cfg: ConvConfig) -> usize {
    let mut j = i;
    if comptime![cfg.order == Order::BitReversed] {
        j = reverse_bits(i, cfg.log_n);
    } else if comptime![cfg.order == Order::Table] {
        j = order[i] as usize;
    }
    j
}

/// Loads the real row `values[start … start + len]`, zero-padded to N and permuted, into shared
/// memory (imaginary part zero).
#[cube]
fn load_real<F: Float>(
    values: &Array<F>,
    start: usize,
    len: usize,
    order: &Array<u32>,
    s_re: &mut SharedMemory<F>,
    s_im: &mut SharedMemory<F>,
    #[comptime] cfg: ConvConfig,
) {
    let n = comptime![1usize << cfg.log_n];
    let t = UNIT_POS_X as usize;
    #[unroll]
    for q in 0..comptime![n / cfg.threads] {
        let i = t + q * comptime![cfg.threads];
        let j = source(i, order, cfg);
        let mut v = F::new(0.0);
        if j < len {
            v = values[start + j];
        }
        s_re[i] = v;
        s_im[i] = F::new(0.0);
    }
    sync_cube();
}

/// Every stage of the butterfly on the row in shared memory (its input permuted already).
#[cube]
fn stages<F: Float>(
    s_re: &mut SharedMemory<F>,
    s_im: &mut SharedMemory<F>,
    tw_re: &Array<F>,
    tw_im: &Array<F>,
    #[comptime] cfg: ConvConfig,
) {
    let half = comptime![1usize << (cfg.log_n - 1)];
    let t = UNIT_POS_X as usize;
    for s in 0..comptime![cfg.log_n] {
        let low = (1usize << s) - 1;
        #[unroll]
        for q in 0..comptime![half / cfg.threads] {
            let k = t + q * comptime![cfg.threads];
            let i0 = ((k >> s) << (s + 1)) | (k & low);
            let i1 = i0 + (1usize << s);
            let w = (s * half + k) * 4;
            let (t00r, t01r, t10r, t11r) = (tw_re[w], tw_re[w + 1], tw_re[w + 2], tw_re[w + 3]);
            let (t00i, t01i, t10i, t11i) = (tw_im[w], tw_im[w + 1], tw_im[w + 2], tw_im[w + 3]);
            let (ar, ai, br, bi) = (s_re[i0], s_im[i0], s_re[i1], s_im[i1]);
            s_re[i0] = t00r * ar - t00i * ai + t01r * br - t01i * bi;
            s_im[i0] = t00r * ai + t00i * ar + t01r * bi + t01i * br;
            s_re[i1] = t10r * ar - t10i * ai + t11r * br - t11i * bi;
            s_im[i1] = t10r * ai + t10i * ar + t11r * bi + t11i * br;
        }
        sync_cube();
    }
}

/// One cube per channel: `spectrum[c] = scale · F (taps[c] zero-padded)`, packed `[2, channels,
/// N]` (re, then im at `plane`).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
fn conv_taps_kernel<F: Float>(
    taps: &Array<F>,
    order: &Array<u32>,
    tw_re: &Array<F>,
    tw_im: &Array<F>,
    spectrum: &mut Array<F>,
    taps_len: u32,
    plane: u32,
    scale: InputScalar,
    #[comptime] cfg: ConvConfig,
) {
    let scale: F = scale.get::<F>();
    let n = comptime![1usize << cfg.log_n];
    let mut s_re = SharedMemory::<F>::new(n);
    let mut s_im = SharedMemory::<F>::new(n);
    let c = CUBE_POS;
    let len = taps_len as usize;
    load_real(taps, c * len, len, order, &mut s_re, &mut s_im, cfg);
    stages(&mut s_re, &mut s_im, tw_re, tw_im, cfg);
    let t = UNIT_POS_X as usize;
    #[unroll]
    for q in 0..comptime![n / cfg.threads] {
        let i = t + q * comptime![cfg.threads];
        spectrum[c * n + i] = s_re[i] * scale;
        spectrum[plane as usize + c * n + i] = s_im[i] * scale;
    }
}

/// One cube per row `(b, c)`: `X = F x`, `Z = X ⊙ spectrum[c]`, `y = Re F conj(Z)`, the first
/// `out_len` samples plus `bias[c]`.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
fn conv_kernel<F: Float>(
    x: &Array<F>,
    spectrum: &Array<F>,
    bias: &Array<F>,
    order: &Array<u32>,
    tw_re: &Array<F>,
    tw_im: &Array<F>,
    output: &mut Array<F>,
    channels: u32,
    length: u32,
    out_len: u32,
    plane: u32,
    #[comptime] cfg: ConvConfig,
) {
    let n = comptime![1usize << cfg.log_n];
    let per = comptime![n / cfg.threads];
    let mut s_re = SharedMemory::<F>::new(n);
    let mut s_im = SharedMemory::<F>::new(n);
    let row = CUBE_POS;
    let c = row % channels as usize;
    let len = length as usize;
    load_real(x, row * len, len, order, &mut s_re, &mut s_im, cfg);
    stages(&mut s_re, &mut s_im, tw_re, tw_im, cfg);
    // Each thread gathers what its slots of the second transform take, conj(X ⊙ H) at g[i]...
    let t = UNIT_POS_X as usize;
    let mut zr = Array::<F>::new(per);
    let mut zi = Array::<F>::new(per);
    #[unroll]
    for q in 0..per {
        let i = t + q * comptime![cfg.threads];
        let j = source(i, order, cfg);
        let (xr, xi) = (s_re[j], s_im[j]);
        let (hr, hi) = (spectrum[c * n + j], spectrum[plane as usize + c * n + j]);
        zr[q] = xr * hr - xi * hi;
        zi[q] = xr * hi + xi * hr;
    }
    sync_cube();
    // ...and writes them once every thread has read.
    #[unroll]
    for q in 0..per {
        let i = t + q * comptime![cfg.threads];
        s_re[i] = zr[q];
        s_im[i] = -zi[q];
    }
    sync_cube();
    stages(&mut s_re, &mut s_im, tw_re, tw_im, cfg);
    let out = out_len as usize;
    #[unroll]
    for q in 0..per {
        let i = t + q * comptime![cfg.threads];
        if i < out {
            let mut y = s_re[i];
            if comptime![cfg.bias] {
                y += bias[c];
            }
            output[row * out + i] = y;
        }
    }
}

/// The fused FFT convolution: `x` `[batch, channels, L]`, `weight` `[channels, K]`, `bias`
/// `[channels]`, twiddles `[log2 n, n/2, 2, 2]` → `[batch, channels, out_len]`. The caller checks
/// [`conv_supported`] and the shapes (`L, K, out_len ≤ n`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn fft_conv<R: CubeRuntime, F: FloatElement>(
    x: CubeTensor<R>,
    weight: CubeTensor<R>,
    bias: Option<CubeTensor<R>>,
    tw: (CubeTensor<R>, CubeTensor<R>),
    order: &InputOrder<R>,
    n: usize,
    out_len: usize,
) -> CubeTensor<R> {
    let dims = x.meta.shape().to_vec();
    let (batch, channels, length) = (dims[0], dims[1], dims[2]);
    let taps = weight.meta.shape()[1];
    let client = x.client.clone();
    let props = &client.properties().hardware;
    let cfg = ConvConfig::new(
        n,
        core::mem::size_of::<F>(),
        props.max_units_per_cube as usize,
        props.max_shared_memory_size,
        order.order,
        bias.is_some(),
    )
    .expect("the caller checks conv_supported");
    let (x, weight) = (into_contiguous(x), into_contiguous(weight));
    let (tw_re, tw_im) = (into_contiguous(tw.0), into_contiguous(tw.1));
    // One allocation for both (each is a request to the device thread).
    let [spectrum, output] = empties::<R, F, 2>(&x, [&[2, channels, n], &[batch, channels, out_len]]);
    // Without a bias the kernel reads none: the taps stand in for it.
    let bias = bias.map(into_contiguous).unwrap_or_else(|| weight.clone());
    let plane = (channels * n) as u32;
    // SAFETY: a cube per channel (row); threads step over N / threads slots and N/2 / threads
    // blocks exactly; reads of the taps and the row are masked by their lengths, twiddle reads
    // stay within [log2 n, n/2, 2, 2], table reads within its first n words.
    unsafe {
        conv_taps_kernel::launch_unchecked::<F, R>(
            &client,
            grid(channels),
            CubeDim::new_1d(cfg.threads as u32),
            weight.clone().into_array_arg(),
            order.table.clone().into_array_arg(),
            tw_re.clone().into_array_arg(),
            tw_im.clone().into_array_arg(),
            spectrum.clone().into_array_arg(),
            taps as u32,
            plane,
            InputScalar::new((n as f64).sqrt(), F::dtype()),
            cfg,
        );
        conv_kernel::launch_unchecked::<F, R>(
            &client,
            grid(batch * channels),
            CubeDim::new_1d(cfg.threads as u32),
            x.clone().into_array_arg(),
            spectrum.into_array_arg(),
            bias.into_array_arg(),
            order.table.clone().into_array_arg(),
            tw_re.into_array_arg(),
            tw_im.into_array_arg(),
            output.clone().into_array_arg(),
            channels as u32,
            length as u32,
            out_len as u32,
            plane,
            cfg,
        );
    }
    output
}
