//! Fused spectral backward: per-(frame, offset) gradients from an on-chip inverse FFT, then a
//! deterministic gather over every frame that covers each sample.
//!
//! With `X_k = Σ_n w_n x_n e^{−2πi nk/W}` and a real loss, the gradient of frame sample n is
//! `w_n · Re Σ_{k ≤ W/2} G_k e^{+2πi nk/W}`, where `G_k = (∂L/∂|X_k|) · ∂|X_k|/∂(re, im)` as a
//! complex number: the unnormalised inverse DFT of the half spectrum G (zero above W/2).

use burn_cubecl::{kernel::into_contiguous, tensor::CubeTensor, CubeRuntime, FloatElement};

use crate::ops::cubecl::{empty, fast_div, FastDiv, FAST_DIV_LIMIT};
use cubecl::{prelude::*, CubeDim};

use super::Tables;
use super::{
    at, fft_stages, frame_config, load_frames, magnitude_slope, FrameConfig, FrameLoad, FrameRange, FrameTables,
    Framing,
};
use crate::ops::cubecl::grid;
use crate::ops::onchip::reverse_bits;
use crate::ops::onchip::SharedSplit;
use crate::ops::spectral::Magnitude;

/// The per-frame gradient buffer of one launch stays under this many bytes: signals are taken in
/// chunks (storage bindings are limited to 128 MiB on some Vulkan drivers, lavapipe among them).
const MAX_FRAME_GRAD_BYTES: usize = 64 << 20;

/// One cube per `cfg.rows` frames of the chunk: recompute the spectrum, form the coefficients
/// `G_k` (zero above W/2), inverse-transform on-chip, and write
/// `grad_frames[g, n] = w_n · Re z_n` for the chunk's frame g.
#[cube(launch)]
pub(crate) fn stft_backward_kernel<F: Float>(
    x: &Array<F>,
    tables: &FrameTables<F>,
    grad_m: &Array<F>,
    grad_frames: &mut Array<F>,
    eps: InputScalar,
    framing: &Framing,
    #[comptime] cfg: FrameConfig,
) {
    let log_w = comptime![cfg.log_w];
    let w = comptime![1usize << cfg.log_w];
    let half = comptime![w / 2];
    let bins = comptime![w / 2 + 1];
    let rows = comptime![cfg.rows];
    let threads = comptime![cfg.threads];
    let mut shared = SharedSplit::<F> {
        re: SharedMemory::<F>::new(comptime![cfg.rows * w]),
        im: SharedMemory::<F>::new(comptime![cfg.rows * w]),
    };
    let total = framing.total as usize;
    let offset = framing.offset as usize;
    let first = CUBE_POS * rows;
    if first >= total {
        terminate!();
    }
    let eps: F = eps.get::<F>();
    load_frames::<F>(x, x, &tables.window, &mut shared, first, framing, comptime![FrameLoad { cfg, pair: false }]);
    sync_cube();
    fft_stages::<F>(&mut shared, tables, cfg, false);

    let t = UNIT_POS_X as usize;
    #[unroll]
    for q in 0..comptime![cfg.rows * w / cfg.threads] {
        let e = t + q * threads;
        let r = e / w;
        let k = e % w;
        let slot = at(e, cfg);
        let mut cr = F::new(0.0);
        let mut ci = F::new(0.0);
        if k <= half && first + r < total {
            let (re, im) = (shared.re[slot], shared.im[slot]);
            let g = grad_m[(offset + first + r) * bins + k];
            let f = g * magnitude_slope::<F>(re * re + im * im, eps, comptime![cfg.magnitude]);
            cr = f * re;
            ci = f * im;
        }
        shared.re[slot] = cr;
        shared.im[slot] = ci;
    }
    sync_cube();
    fft_stages::<F>(&mut shared, tables, cfg, true);

    #[unroll]
    for q in 0..comptime![cfg.rows * w / cfg.threads] {
        let e = t + q * threads;
        let r = e / w;
        let n = e % w;
        if first + r < total {
            grad_frames[(first + r) * w + n] = tables.window[n] * shared.re[at(r * w + reverse_bits(n, log_w), cfg)];
        }
    }
}

/// Which samples [`overlap_add_kernel`] sums: `samples` of signals of `t_len` from signal
/// `first_signal` on, `frames` frames each, `hop` apart; the divisions by `t_len` and `hop` as
/// [`FastDiv`]s.
#[derive(CubeLaunch, CubeType)]
pub(crate) struct OverlapLayout {
    pub samples: u32,
    pub first_signal: u32,
    pub t_len: u32,
    pub frames: u32,
    pub hop: u32,
    pub by_t_len: FastDiv,
    pub by_hop: FastDiv,
}

/// `grad_x[s, i] = Σ_f grad_frames[(s·frames + f)·W + i − f·hop]` over every frame f that covers
/// sample i (`f·hop ≤ i < f·hop + W`), summed in increasing f: one thread per sample of the
/// launch's signals (those of its frames), no atomics. The divisions by the signal length and the
/// hop are [`FastDiv`]s: as `/` by a runtime value they were most of the kernel's instructions.
#[cube(launch)]
pub(crate) fn overlap_add_kernel<F: Float>(
    grad_frames: &Array<F>,
    scale: &Array<F>,
    grad_x: &mut Array<F>,
    layout: &OverlapLayout,
    #[comptime] win: usize,
    #[comptime] scaled: bool,
) {
    let samples = layout.samples;
    let t_len = layout.t_len;
    let frames = layout.frames;
    let hop = layout.hop;
    let by_t_len = &layout.by_t_len;
    let by_hop = &layout.by_hop;
    let i = (CUBE_POS * CUBE_DIM_X as usize + UNIT_POS_X as usize) as u32;
    if i >= samples {
        terminate!();
    }
    let s = fast_div(i, by_t_len);
    let pos = i - s * t_len;
    let mut hi = fast_div(pos, by_hop);
    if hi > frames - 1 {
        hi = frames - 1;
    }
    let mut f = 0u32;
    if pos as usize >= win {
        f = fast_div(pos + hop - comptime![win as u32], by_hop);
    }
    let mut sum = F::new(0.0);
    while f <= hi {
        sum += grad_frames[((s * frames + f) as usize) * win + (pos - f * hop) as usize];
        f += 1;
    }
    if comptime![scaled] {
        // The sum first, then the product: the bits of the sum scaled as a tensor would be.
        sum *= scale[0];
    }
    grad_x[layout.first_signal as usize * t_len as usize + i as usize] = sum;
}

/// Launches the fused backward: the magnitude gradient `[signals, frames, W/2 + 1]` and the
/// forward's inputs → the signal gradient `[signals, T]`.
pub fn backward<R: CubeRuntime, F: FloatElement>(
    grad_m: CubeTensor<R>,
    x: CubeTensor<R>,
    tables: &Tables<R>,
    hop: usize,
    magnitude: Magnitude,
    eps: f64,
) -> CubeTensor<R> {
    let dims = x.meta.shape().clone();
    let (signals, t) = (dims[0], dims[1]);
    let win = tables.win();
    let (grad_m, x) = (into_contiguous(grad_m), into_contiguous(x));
    let client = x.client.clone();
    let cfg = frame_config::<R, F>(&client, win, magnitude);
    let all = FrameRange::all(signals, t, win, hop);
    let chunk = signal_chunk::<F>(signals, all.frames, win, t);
    let grad_x = empty::<R, F>(&x, vec![signals, t]);
    let grad_frames = empty::<R, F>(&x, vec![chunk * all.frames, win]);
    for range in all.chunks(chunk) {
        stft_backward_kernel::launch::<F, R>(
            &client,
            grid(range.total.div_ceil(cfg.rows)),
            CubeDim::new_1d(cfg.threads as u32),
            x.clone().into_array_arg(),
            tables.arg::<F>(),
            grad_m.clone().into_array_arg(),
            grad_frames.clone().into_array_arg(),
            InputScalar::new(eps, F::dtype()),
            range.arg(),
            cfg,
        );
        overlap_add::<R, F>(&grad_frames, None, &grad_x, &range);
    }
    grad_x
}

/// Signals per backward launch: their per-frame gradients stay under [`MAX_FRAME_GRAD_BYTES`], and
/// their samples (`t_len` each) under [`FAST_DIV_LIMIT`], which the overlap-add's divisions need (at
/// least one signal).
pub(crate) fn signal_chunk<F: FloatElement>(signals: usize, frames: usize, win: usize, t_len: usize) -> usize {
    let by_bytes = MAX_FRAME_GRAD_BYTES / (frames * win * core::mem::size_of::<F>()).max(1);
    let by_samples = (FAST_DIV_LIMIT as usize - 1) / (t_len + win).max(1);
    by_bytes.min(by_samples).clamp(1, signals.max(1))
}

/// Launches the overlap-add gather: the per-frame gradients `[range.total, W]` of the signals
/// `range` covers into their rows of `grad_x` `[signals, T]`, each sum times `scale[0]` where a
/// scale `[1]` is given (the loss's gradient, for gradients the forward left as frames).
pub(crate) fn overlap_add<R: CubeRuntime, F: FloatElement>(
    grad_frames: &CubeTensor<R>,
    scale: Option<&CubeTensor<R>>,
    grad_x: &CubeTensor<R>,
    range: &FrameRange,
) {
    let block = 256usize;
    let samples = range.total / range.frames * range.t_len;
    // A hop past the signal's length frames it once, as a hop equal to it does: the clamp keeps
    // the kernel's numerators (`pos + hop`) under 2^31 for signals of up to 2^30 samples
    // ([`super::super::MAX_SIGNAL_SAMPLES`]).
    let hop = range.hop.min(range.t_len);
    overlap_add_kernel::launch::<F, R>(
        &grad_x.client,
        grid(samples.div_ceil(block)),
        CubeDim::new_1d(block as u32),
        grad_frames.clone().into_array_arg(),
        // Unscaled, the frames stand in for the scale, which the kernel does not read.
        scale.unwrap_or(grad_frames).clone().into_array_arg(),
        grad_x.clone().into_array_arg(),
        OverlapLayoutLaunch::new(
            samples as u32,
            (range.offset / range.frames) as u32,
            range.t_len as u32,
            range.frames as u32,
            hop as u32,
            FastDiv::new(range.t_len as u32).arg(),
            FastDiv::new(hop as u32).arg(),
        ),
        grad_frames.meta.shape()[1],
        scale.is_some(),
    );
}
