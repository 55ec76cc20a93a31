//! Fused spectral backward: per-(frame, offset) gradients from an on-chip inverse FFT, then a
//! deterministic gather over every frame that covers each sample.
//!
//! With `X_k = Σ_n w_n x_n e^{−2πi nk/W}` and a real loss, the gradient of frame sample n is
//! `w_n · Re Σ_{k ≤ W/2} G_k e^{+2πi nk/W}`, where `G_k = (∂L/∂|X_k|) · ∂|X_k|/∂(re, im)` as a
//! complex number: the unnormalised inverse DFT of the half spectrum G (zero above W/2).

use burn_cubecl::{kernel::into_contiguous, tensor::CubeTensor, CubeRuntime, FloatElement};

use crate::ops::cubecl::empty;
use cubecl::{prelude::*, CubeDim};

use super::forward::frames_of;
use super::{fft_stages, load_frames, magnitude_code, magnitude_slope, plan, Tables};
use crate::ops::butterfly::kernel::reverse_bits;
use crate::ops::cubecl::grid;
use crate::ops::spectral::Magnitude;

/// The per-frame gradient buffer of one launch stays under this many bytes: signals are taken in
/// chunks (storage bindings are limited to 128 MiB on some Vulkan drivers, lavapipe among them).
const MAX_FRAME_GRAD_BYTES: usize = 64 << 20;

/// One cube per `rows` frames of the chunk: recompute the spectrum, form the coefficients
/// `G_k` (zero above W/2), inverse-transform on-chip, and write
/// `grad_frames[g, n] = w_n · Re z_n` for the chunk's frame g.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn stft_backward_kernel<F: Float>(
    x: &Tensor<F>,
    window: &Tensor<F>,
    tw_re: &Tensor<F>,
    tw_im: &Tensor<F>,
    grad_m: &Tensor<F>,
    grad_frames: &mut Tensor<F>,
    eps: InputScalar,
    frame_offset: u32,
    total: u32,
    frames: u32,
    t_len: u32,
    hop: u32,
    #[comptime] log_w: usize,
    #[comptime] rows: usize,
    #[comptime] threads: usize,
    #[comptime] magnitude: u32,
) {
    let w = comptime![1usize << log_w];
    let half = comptime![w / 2];
    let bins = comptime![w / 2 + 1];
    let mut s_re = SharedMemory::<F>::new(comptime![rows * w]);
    let mut s_im = SharedMemory::<F>::new(comptime![rows * w]);
    let total = total as usize;
    let offset = frame_offset as usize;
    let first = CUBE_POS * rows;
    if first >= total {
        terminate!();
    }
    let eps: F = eps.get::<F>();
    load_frames::<F>(
        x,
        window,
        &mut s_re,
        &mut s_im,
        0,
        offset + first,
        offset + total,
        frames as usize,
        t_len as usize,
        hop as usize,
        log_w,
        rows,
        threads,
    );
    sync_cube();
    fft_stages::<F>(&mut s_re, &mut s_im, tw_re, tw_im, log_w, rows, threads, false);

    let t = UNIT_POS_X as usize;
    #[unroll]
    for q in 0..comptime![rows * w / threads] {
        let e = t + q * threads;
        let r = e / w;
        let k = e % w;
        let mut cr = F::new(0.0);
        let mut ci = F::new(0.0);
        if k <= half && first + r < total {
            let (re, im) = (s_re[e], s_im[e]);
            let g = grad_m[(offset + first + r) * bins + k];
            let f = g * magnitude_slope::<F>(re * re + im * im, eps, magnitude);
            cr = f * re;
            ci = f * im;
        }
        s_re[e] = cr;
        s_im[e] = ci;
    }
    sync_cube();
    fft_stages::<F>(&mut s_re, &mut s_im, tw_re, tw_im, log_w, rows, threads, true);

    #[unroll]
    for q in 0..comptime![rows * w / threads] {
        let e = t + q * threads;
        let r = e / w;
        let n = e % w;
        if first + r < total {
            grad_frames[(first + r) * w + n] = window[n] * s_re[r * w + reverse_bits(n, log_w)];
        }
    }
}

/// `grad_x[s, i] = Σ_f grad_frames[(s·frames + f)·W + i − f·hop]` over every frame f that covers
/// sample i (`f·hop ≤ i < f·hop + W`), summed in increasing f: one thread per sample of the
/// chunk's signals, no atomics.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn overlap_add_kernel<F: Float>(
    grad_frames: &Tensor<F>,
    grad_x: &mut Tensor<F>,
    signal_offset: u32,
    signals: u32,
    frames: u32,
    t_len: u32,
    hop: u32,
    #[comptime] win: usize,
) {
    let t_len = t_len as usize;
    let hop = hop as usize;
    let frames = frames as usize;
    let i = CUBE_POS * CUBE_DIM_X as usize + UNIT_POS_X as usize;
    if i >= signals as usize * t_len {
        terminate!();
    }
    let s = i / t_len;
    let pos = i % t_len;
    let mut hi = pos / hop;
    if hi > frames - 1 {
        hi = frames - 1;
    }
    let mut f = 0usize;
    if pos >= win {
        f = (pos + 1 - win).div_ceil(hop);
    }
    let mut sum = F::new(0.0);
    while f <= hi {
        sum += grad_frames[(s * frames + f) * win + pos - f * hop];
        f += 1;
    }
    grad_x[(signal_offset as usize) * t_len + i] = sum;
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
    let plan = plan(&client, win);
    let frames = frames_of(t, win, hop);
    let chunk = signal_chunk::<F>(signals, frames, win);
    let grad_x = empty::<R, F>(&x, vec![signals, t]);
    let grad_frames = empty::<R, F>(&x, vec![chunk * frames, win]);
    let mut start = 0;
    while start < signals {
        let count = chunk.min(signals - start);
        let total = count * frames;
        stft_backward_kernel::launch::<F, R>(
            &client,
            grid(total.div_ceil(plan.rows)),
            CubeDim::new_1d(plan.threads as u32),
            x.clone().into_tensor_arg(),
            tables.window.clone().into_tensor_arg(),
            tables.tw_re.clone().into_tensor_arg(),
            tables.tw_im.clone().into_tensor_arg(),
            grad_m.clone().into_tensor_arg(),
            grad_frames.clone().into_tensor_arg(),
            InputScalar::new(eps, F::dtype()),
            (start * frames) as u32,
            total as u32,
            frames as u32,
            t as u32,
            hop as u32,
            plan.log_n,
            plan.rows,
            plan.threads,
            magnitude_code(magnitude),
        );
        overlap_add::<R, F>(&grad_frames, &grad_x, start, count, frames, t, hop, win);
        start += count;
    }
    grad_x
}

/// Signals per backward launch: their per-frame gradients stay under [`MAX_FRAME_GRAD_BYTES`]
/// (at least one signal).
pub(crate) fn signal_chunk<F: FloatElement>(signals: usize, frames: usize, win: usize) -> usize {
    (MAX_FRAME_GRAD_BYTES / (frames * win * core::mem::size_of::<F>()).max(1)).clamp(1, signals.max(1))
}

/// Launches the overlap-add gather: the per-frame gradients `[count · frames, W]` of signals
/// `start … start + count` into their rows of `grad_x` `[signals, T]`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn overlap_add<R: CubeRuntime, F: FloatElement>(
    grad_frames: &CubeTensor<R>,
    grad_x: &CubeTensor<R>,
    start: usize,
    count: usize,
    frames: usize,
    t: usize,
    hop: usize,
    win: usize,
) {
    let block = 256usize;
    overlap_add_kernel::launch::<F, R>(
        &grad_x.client,
        grid((count * t).div_ceil(block)),
        CubeDim::new_1d(block as u32),
        grad_frames.clone().into_tensor_arg(),
        grad_x.clone().into_tensor_arg(),
        start as u32,
        count as u32,
        frames as u32,
        t as u32,
        hop as u32,
        win,
    );
}
