//! The fused spectral-loss kernels: each frame's FFT on-chip, in shared memory.
//!
//! - [`magnitudes`] (forward): one cube per `rows` frames. Loads each frame windowed and in
//!   bit-reversed order, runs the log2 W radix-2 stages in shared memory, and writes every
//!   (frame, bin)'s magnitude in parallel: bins 0…W/2, frames of all signals at once.
//! - [`backward`]: one cube per `rows` frames recomputes the frame's spectrum on-chip, turns the
//!   magnitude gradient into each bin's complex coefficient, and reduces over bins with one
//!   inverse FFT (the adjoint of the forward DFT), giving each (frame, offset)'s gradient; a
//!   second kernel gathers, for every sample, the contributions of *all* frames that cover it,
//!   in a fixed order. Nothing is overwritten, nothing uses atomics: the gradient is
//!   deterministic run to run.
//!
//! Why an FFT rather than one W-term dot product per bin: the DFT per frame then costs
//! O(W log W) instead of O(W²) (at W = 1024 that is 50× fewer operations), and the frame is
//! read from device memory once either way. The twiddles `e^{−2πi j/W}` come from a table
//! computed in f64 on the host, not from `sin`/`cos` evaluated in f32 on the device.
//!
//! Layouts: signals `[signals, T]`; window `[W]`; twiddle tables `[W/2]` (re, im); magnitudes
//! and their gradient `[signals, frames, W/2 + 1]`; the per-frame gradient `[frames, W]`.

mod backward;
mod forward;
mod loss;

pub use backward::backward;
pub use forward::magnitudes;
pub use loss::{loss_backward, loss_forward, loss_supported};

use burn_cubecl::{kernel::into_contiguous, tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::prelude::*;

use crate::ops::butterfly::kernel::{reverse_bits, Plan};
use crate::ops::spectral::Magnitude;

/// Largest window the fused kernels handle (one frame must fit in shared memory, as for the
/// butterfly: 2 · 4096 · 4 bytes = 32 KiB in f32). Larger windows take the reference path.
pub const MAX_FUSED_WIN: usize = 4096;

/// The constant tables as the kernels take them: the window `[W]` and the twiddles
/// `e^{−2πi j/W}`, `[W/2]` each (re, im), contiguous.
#[derive(Clone, Debug)]
pub(crate) struct Tables<R: CubeRuntime> {
    pub window: CubeTensor<R>,
    pub tw_re: CubeTensor<R>,
    pub tw_im: CubeTensor<R>,
}

impl<R: CubeRuntime> Tables<R> {
    /// The tables, made contiguous.
    pub fn new(window: CubeTensor<R>, tw_re: CubeTensor<R>, tw_im: CubeTensor<R>) -> Self {
        Tables { window: into_contiguous(window), tw_re: into_contiguous(tw_re), tw_im: into_contiguous(tw_im) }
    }

    /// The window length W.
    pub fn win(&self) -> usize {
        self.window.meta.shape()[0]
    }
}

/// Whether the fused kernels can run for window `win` on `device` in float type `F`: `win` a
/// power of two in 2…[`MAX_FUSED_WIN`] whose frames fit in the device's shared memory.
pub fn fused_supported<R: CubeRuntime, F: FloatElement>(win: usize, device: &R::Device) -> bool {
    crate::ops::butterfly::kernel::single_pass_supported::<R, F>(win, device) && win <= MAX_FUSED_WIN
}

/// The launch plan: frames per cube and threads, as for a butterfly of size `win`.
pub(crate) fn plan<R: CubeRuntime>(client: &cubecl::client::ComputeClient<R>, win: usize) -> Plan {
    Plan::new(win, client.properties().hardware.max_units_per_cube as usize)
}

/// The magnitude measure as a kernel constant.
pub(crate) fn magnitude_code(m: Magnitude) -> u32 {
    match m {
        Magnitude::Linear => 0,
        Magnitude::Power => 1,
        Magnitude::Log => 2,
    }
}

/// Loads the cube's `rows` frames into shared memory, windowed and in bit-reversed order
/// (imaginary parts zero). Slot `slot0 + r` holds frame `first + r` of the `total` frames; frame `g` is
/// frame `g % frames` of signal `g / frames` and starts at sample `(g % frames) · hop`. Slots past
/// the last frame are zero.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn load_frames<F: Float>(
    x: &Tensor<F>,
    window: &Tensor<F>,
    s_re: &mut SharedMemory<F>,
    s_im: &mut SharedMemory<F>,
    slot0: usize,
    first: usize,
    total: usize,
    frames: usize,
    t_len: usize,
    hop: usize,
    #[comptime] log_w: usize,
    #[comptime] rows: usize,
    #[comptime] threads: usize,
) {
    let w = comptime![1usize << log_w];
    let t = UNIT_POS_X as usize;
    #[unroll]
    for q in 0..comptime![rows * w / threads] {
        let e = t + q * threads;
        let g = first + e / w;
        let n = reverse_bits(e % w, log_w);
        let mut v = F::new(0.0);
        if g < total {
            let f = g % frames;
            v = x[(g / frames) * t_len + f * hop + n] * window[n];
        }
        s_re[slot0 * w + e] = v;
        s_im[slot0 * w + e] = F::new(0.0);
    }
}

/// `|X|` of one bin from its power `p = re² + im²`: linear `sqrt(p + eps)`, power `p`, or log
/// `½ ln(p + eps)` (`magnitude` = 0, 1, 2).
#[cube]
pub(crate) fn magnitude_of<F: Float>(p: F, eps: F, #[comptime] magnitude: u32) -> F {
    let mut m = p;
    if comptime![magnitude == 0] {
        m = F::sqrt(p + eps);
    } else if comptime![magnitude == 2] {
        m = F::new(0.5) * F::ln(p + eps);
    }
    m
}

/// The factor f with `∂|X|/∂re = f·re`, `∂|X|/∂im = f·im`: linear `1/sqrt(p + eps)`, power `2`,
/// log `1/(p + eps)`.
#[cube]
pub(crate) fn magnitude_slope<F: Float>(p: F, eps: F, #[comptime] magnitude: u32) -> F {
    let mut f = F::new(2.0);
    if comptime![magnitude == 0] {
        f = F::new(1.0) / F::sqrt(p + eps);
    } else if comptime![magnitude == 2] {
        f = F::new(1.0) / (p + eps);
    }
    f
}

/// The radix-2 stages of `rows` length-W transforms held in shared memory, with twiddles
/// `tw[j] = e^{−2πi j/W}` for j < W/2. Forward (`inverse = false`): decimation in time,
/// bit-reversed input → natural-order spectrum. Inverse (`inverse = true`): decimation in
/// frequency with conjugate twiddles, natural-order input → bit-reversed output, unnormalised
/// (`z_n = Σ_k Z_k e^{+2πi nk/W}`). Ends with the cube synchronised.
#[cube]
pub(crate) fn fft_stages<F: Float>(
    s_re: &mut SharedMemory<F>,
    s_im: &mut SharedMemory<F>,
    tw_re: &Tensor<F>,
    tw_im: &Tensor<F>,
    #[comptime] log_w: usize,
    #[comptime] rows: usize,
    #[comptime] threads: usize,
    #[comptime] inverse: bool,
) {
    let w = comptime![1usize << log_w];
    let half = comptime![w / 2];
    let per_thread = comptime![rows * half / threads];
    let t = UNIT_POS_X as usize;
    for i in 0..log_w {
        let mut s = i;
        if comptime![inverse] {
            s = log_w - 1 - i;
        }
        let st = 1usize << s;
        #[unroll]
        for p in 0..per_thread {
            let b = t + p * threads;
            let k = b % half;
            let j = k & (st - 1);
            let i0 = (b / half) * w + ((k >> s) << (s + 1)) + j;
            let i1 = i0 + st;
            let tw = j << (log_w - 1 - s);
            let wr = tw_re[tw];
            let (ar, ai, br, bi) = (s_re[i0], s_im[i0], s_re[i1], s_im[i1]);
            if comptime![inverse] {
                let wi = F::new(0.0) - tw_im[tw];
                let (dr, di) = (ar - br, ai - bi);
                s_re[i0] = ar + br;
                s_im[i0] = ai + bi;
                s_re[i1] = wr * dr - wi * di;
                s_im[i1] = wr * di + wi * dr;
            } else {
                let wi = tw_im[tw];
                let tr = wr * br - wi * bi;
                let ti = wr * bi + wi * br;
                s_re[i0] = ar + tr;
                s_im[i0] = ai + ti;
                s_re[i1] = ar - tr;
                s_im[i1] = ai - ti;
            }
        }
        sync_cube();
    }
}
