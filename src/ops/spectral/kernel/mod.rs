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
use crate::ops::spectral::{Distance, Magnitude};

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

    /// The tables as a kernel argument.
    pub fn arg<F: Float>(&self) -> FrameTablesLaunch<F, R> {
        FrameTablesLaunch::new(
            self.window.clone().into_tensor_arg(),
            self.tw_re.clone().into_tensor_arg(),
            self.tw_im.clone().into_tensor_arg(),
        )
    }
}

/// The constant tables in a kernel: the window `[W]` and the twiddles `e^{−2πi j/W}` `[W/2]`.
#[derive(CubeLaunch, CubeType)]
pub(crate) struct FrameTables<F: Float> {
    pub window: Tensor<F>,
    pub tw_re: Tensor<F>,
    pub tw_im: Tensor<F>,
}

/// Which frames a launch covers: frames `offset … offset + total` of signals of `t_len` samples,
/// `frames` frames per signal, `hop` apart (frame `g` is frame `g % frames` of signal
/// `g / frames`). The backward takes signals in chunks, hence the offset.
#[derive(CubeLaunch, CubeType)]
pub(crate) struct Framing {
    pub offset: u32,
    pub total: u32,
    pub frames: u32,
    pub t_len: u32,
    pub hop: u32,
}

/// [`Framing`] on the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FrameRange {
    /// First frame of the launch.
    pub offset: usize,
    /// Frames of the launch.
    pub total: usize,
    /// Frames per signal.
    pub frames: usize,
    /// Samples per signal.
    pub t_len: usize,
    /// Hop between frames.
    pub hop: usize,
}

impl FrameRange {
    /// Every frame of `signals` signals of `t_len` samples.
    pub fn all(signals: usize, t_len: usize, win: usize, hop: usize) -> Self {
        let frames = forward::frames_of(t_len, win, hop);
        FrameRange { offset: 0, total: signals * frames, frames, t_len, hop }
    }

    /// The frames of signals `start … start + count`.
    pub fn signals(self, start: usize, count: usize) -> Self {
        FrameRange { offset: start * self.frames, total: count * self.frames, ..self }
    }

    /// As a kernel argument.
    pub fn arg<R: Runtime>(&self) -> FramingLaunch<R> {
        FramingLaunch::new(
            self.offset as u32,
            self.total as u32,
            self.frames as u32,
            self.t_len as u32,
            self.hop as u32,
        )
    }
}

/// What a spectral kernel is compiled for: the frame length, the cube's shape and the magnitude
/// measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FrameConfig {
    /// log2 W.
    pub log_w: usize,
    /// Frames a cube holds (frame pairs, packed one per slot, in the loss kernels).
    pub rows: usize,
    /// Threads per cube.
    pub threads: usize,
    /// Magnitude measure.
    pub magnitude: Magnitude,
}

/// What the fused loss kernels are compiled for: [`FrameConfig`], the distance, whether the
/// spectral-convergence term is on, and which gradients the backward computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct LossConfig {
    pub frame: FrameConfig,
    pub distance: Distance,
    pub spectral_convergence: bool,
    /// Which gradients the backward computes, `(pred, target)` (the forward computes neither):
    /// one alone runs half the inverse transforms.
    pub grads: (bool, bool),
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

/// The kernels' comptime configuration for window `win` on `client`'s device.
pub(crate) fn frame_config<R: CubeRuntime>(
    client: &cubecl::client::ComputeClient<R>,
    win: usize,
    magnitude: Magnitude,
) -> FrameConfig {
    let plan = plan(client, win);
    FrameConfig { log_w: plan.log_n, rows: plan.rows, threads: plan.threads, magnitude }
}

/// Loads `cfg.rows` frames into shared memory, windowed and in bit-reversed order: `x`'s frame
/// as the real part, and `y`'s as the imaginary part where `pair` (a packed pair of real frames,
/// one FFT for both), else zero (`y` unread). Slot `slot0 + r` holds frame `first + r` of the
/// launch's frames (see [`Framing`]); slots past the last frame are zero.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn load_frames<F: Float>(
    x: &Tensor<F>,
    y: &Tensor<F>,
    window: &Tensor<F>,
    s_re: &mut SharedMemory<F>,
    s_im: &mut SharedMemory<F>,
    slot0: usize,
    first: usize,
    framing: &Framing,
    #[comptime] cfg: FrameConfig,
    #[comptime] pair: bool,
) {
    let log_w = comptime![cfg.log_w];
    let w = comptime![1usize << cfg.log_w];
    let threads = comptime![cfg.threads];
    let total = framing.total as usize;
    let frames = framing.frames as usize;
    let offset = framing.offset as usize;
    let t_len = framing.t_len as usize;
    let hop = framing.hop as usize;
    let t = UNIT_POS_X as usize;
    #[unroll]
    for q in 0..comptime![cfg.rows * w / cfg.threads] {
        let e = t + q * threads;
        let r = first + e / w;
        let n = reverse_bits(e % w, log_w);
        let mut re = F::new(0.0);
        let mut im = F::new(0.0);
        if r < total {
            let g = offset + r;
            let at = (g / frames) * t_len + (g % frames) * hop + n;
            let wn = window[n];
            re = x[at] * wn;
            if comptime![pair] {
                im = y[at] * wn;
            }
        }
        s_re[slot0 * w + e] = re;
        s_im[slot0 * w + e] = im;
    }
}

/// `|X|` of one bin from its power `p = re² + im²`: linear `sqrt(p + eps)`, power `p`, or log
/// `½ ln(p + eps)`
#[cube]
pub(crate) fn magnitude_of<F: Float>(p: F, eps: F, #[comptime] magnitude: Magnitude) -> F {
    let mut m = p;
    if comptime![magnitude == Magnitude::Linear] {
        m = F::sqrt(p + eps);
    } else if comptime![magnitude == Magnitude::Log] {
        m = F::new(0.5) * F::ln(p + eps);
    }
    m
}

/// The factor f with `∂|X|/∂re = f·re`, `∂|X|/∂im = f·im`: linear `1/sqrt(p + eps)`, power `2`,
/// log `1/(p + eps)`.
#[cube]
pub(crate) fn magnitude_slope<F: Float>(p: F, eps: F, #[comptime] magnitude: Magnitude) -> F {
    let mut f = F::new(2.0);
    if comptime![magnitude == Magnitude::Linear] {
        f = F::new(1.0) / F::sqrt(p + eps);
    } else if comptime![magnitude == Magnitude::Log] {
        f = F::new(1.0) / (p + eps);
    }
    f
}

/// The radix-2 stages of `slots` length-W transforms held in shared memory, with twiddles
/// `tw[j] = e^{−2πi j/W}` for j < W/2. Forward (`inverse = false`): decimation in time,
/// bit-reversed input → natural-order spectrum. Inverse (`inverse = true`): decimation in
/// frequency with conjugate twiddles, natural-order input → bit-reversed output, unnormalised
/// (`z_n = Σ_k Z_k e^{+2πi nk/W}`). Ends with the cube synchronised.
#[cube]
pub(crate) fn fft_stages<F: Float>(
    s_re: &mut SharedMemory<F>,
    s_im: &mut SharedMemory<F>,
    tables: &FrameTables<F>,
    #[comptime] cfg: FrameConfig,
    #[comptime] slots: usize,
    #[comptime] inverse: bool,
) {
    let log_w = comptime![cfg.log_w];
    let threads = comptime![cfg.threads];
    let w = comptime![1usize << cfg.log_w];
    let half = comptime![w / 2];
    let per_thread = comptime![slots * w / 2 / cfg.threads];
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
            let wr = tables.tw_re[tw];
            let (ar, ai, br, bi) = (s_re[i0], s_im[i0], s_re[i1], s_im[i1]);
            if comptime![inverse] {
                let wi = F::new(0.0) - tables.tw_im[tw];
                let (dr, di) = (ar - br, ai - bi);
                s_re[i0] = ar + br;
                s_im[i0] = ai + bi;
                s_re[i1] = wr * dr - wi * di;
                s_im[i1] = wr * di + wi * dr;
            } else {
                let wi = tables.tw_im[tw];
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
