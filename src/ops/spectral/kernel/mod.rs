//! The fused spectral-loss kernels: each frame's FFT on-chip, in registers between trips through
//! shared memory.
//!
//! - [`magnitudes`] (forward): one cube per `rows` frames. Loads each frame windowed (coalesced,
//!   scattered bit-reversed into shared memory), runs the log2 W radix-2 stages in groups of up to
//!   three in registers ([`fft_stages`]), and writes every (frame, bin)'s magnitude in parallel:
//!   bins 0…W/2, frames of all signals at once.
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
//! Every buffer reaches the kernels as an `Array` (contiguous, indexed linearly), never as a
//! `Tensor`: a tensor argument's shape and strides are metadata that CubeCL's CUDA runtime
//! uploads before each launch (a pool allocation, a staging copy and a host-to-device copy on its
//! device thread: in a host profile of one-signal calls, the copy alone was about a tenth of that
//! thread's busy time).

mod backward;
mod forward;
mod loss;

pub use backward::backward;
pub use forward::magnitudes;
pub(crate) use loss::finish_unit_grads;
pub use loss::{loss_backward, loss_forward, loss_supported};

use burn_cubecl::{kernel::into_contiguous, tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::prelude::*;

use crate::ops::cubecl::floor_pow2;
use crate::ops::onchip::{
    deposit_thread, reverse_bits, swizzled, Order, RadixConfig, SharedSplit, SplitArray, MAX_LOG_ELEMS,
};
use crate::ops::spectral::{Distance, Magnitude, MAX_FUSED_WIN};
use crate::ops::tuning::{self, DeviceLimits};

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
            self.window.clone().into_array_arg(),
            self.tw_re.clone().into_array_arg(),
            self.tw_im.clone().into_array_arg(),
        )
    }
}

/// The constant tables in a kernel: the window `[W]` and the twiddles `e^{−2πi j/W}` `[W/2]`.
#[derive(CubeLaunch, CubeType)]
pub(crate) struct FrameTables<F: Float> {
    pub window: Array<F>,
    pub tw_re: Array<F>,
    pub tw_im: Array<F>,
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

    /// The launches of a range of every signal, `chunk` signals each (the last takes the rest).
    pub fn chunks(self, chunk: usize) -> impl Iterator<Item = FrameRange> {
        let signals = self.total / self.frames;
        (0..signals).step_by(chunk.max(1)).map(move |start| self.signals(start, chunk.min(signals - start)))
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
    /// Threads per cube: `rows · W / 2^log_elems`.
    pub threads: usize,
    /// log2 of the elements a thread holds in the on-chip FFT: it runs up to `log_elems` radix-2
    /// stages in registers between two trips through shared memory.
    pub log_elems: usize,
    /// Magnitude measure.
    pub magnitude: Magnitude,
}

impl FrameConfig {
    /// The configuration for windows of `win` samples (a power of two) on a device with
    /// `max_units` threads per cube and shared memory for `max_elems` elements of frames:
    /// [`tuning::frame_cube`]'s elements per cube and per thread (see [`Self::planned`]).
    pub fn new(win: usize, max_units: usize, max_elems: usize, magnitude: Magnitude) -> Self {
        Self::planned(win, max_units, max_elems, tuning::frame_cube(tuning::overrides()), magnitude)
    }

    /// The configuration for `cube` elements per cube (a power of two; at most `max_elems`, at
    /// least one frame) and `2^log_elems` elements per thread (1 … [`MAX_LOG_ELEMS`], at most
    /// W), more elements per thread where the threads would exceed `max_units` (fewer rows where W
    /// leaves no more).
    pub fn planned(
        win: usize,
        max_units: usize,
        max_elems: usize,
        (cube, log_elems): (usize, usize),
        magnitude: Magnitude,
    ) -> Self {
        let log_w = win.trailing_zeros() as usize;
        let cube = cube.min(floor_pow2(max_elems)).max(win);
        let max_log_elems = log_w.min(MAX_LOG_ELEMS);
        let mut log_elems = log_elems.clamp(1, MAX_LOG_ELEMS).min(max_log_elems);
        let mut rows = cube / win;
        while (rows * win) >> log_elems > max_units.max(1) {
            if log_elems < max_log_elems {
                log_elems += 1;
            } else if rows > 1 {
                rows /= 2;
            } else {
                break;
            }
        }
        FrameConfig { log_w, rows, threads: (rows * win) >> log_elems, log_elems, magnitude }
    }

    /// The on-chip FFT's mapping of elements to threads, groups of stages and shared-memory
    /// slots: the register-resident butterfly forward's ([`RadixConfig`]), over the cube's
    /// `rows` frames, every stage, in groups of up to `log_elems`.
    pub fn fft(&self) -> RadixConfig {
        RadixConfig {
            log_n: self.log_w,
            log_rows: self.rows.trailing_zeros() as usize,
            log_elems: self.log_elems,
            log_group: self.log_elems,
            log_stack: 0,
            order: Order::Natural,
            stages: self.log_w,
            log_chunks: 0,
            reload: false,
        }
    }

    /// Bytes of shared memory the frames of a cube take, in `float`-byte floats.
    pub fn shared_bytes(&self, float: usize) -> usize {
        2 * self.rows * (1 << self.log_w) * float
    }
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
    crate::ops::onchip::plan::single_pass_supported::<R, F>(win, device) && win <= MAX_FUSED_WIN
}

/// The kernels' comptime configuration for window `win` on `client`'s device, in float type `F`:
/// its frames take at most the device's budget of shared memory ([`DeviceLimits::budget`]), one
/// frame at least.
pub(crate) fn frame_config<R: CubeRuntime, F: FloatElement>(
    client: &cubecl::client::ComputeClient<R>,
    win: usize,
    magnitude: Magnitude,
) -> FrameConfig {
    let limits = DeviceLimits::of(client);
    let max_elems = limits.budget() / (2 * core::mem::size_of::<F>());
    FrameConfig::new(win, limits.max_units, max_elems, magnitude)
}

/// Where element `index` of a cube's frames (`slot · W + i`) lives in shared memory: the
/// register-resident butterfly's swizzle, under which every access of the on-chip FFT's groups
/// hits 32 distinct banks per warp.
#[cube]
pub(crate) fn at(index: usize, #[comptime] cfg: FrameConfig) -> usize {
    swizzled(index, comptime![cfg.fft()])
}

/// How [`load_frames`] fills a cube's slots: for the kernel's [`FrameConfig`], and with a second
/// signal's frames as the imaginary parts where `pair`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FrameLoad {
    pub cfg: FrameConfig,
    pub pair: bool,
}

/// Loads `cfg.rows` frames into shared memory (slots at [`at`]), windowed and in bit-reversed
/// order: `x`'s frame as the real part, and `y`'s as the imaginary part where `load.pair` (a
/// packed pair of real frames, one FFT for both), else zero (`y` unread). Slot `r` holds frame
/// `first + r` of the launch's frames (see [`Framing`]); slots past the last frame are zero.
#[cube]
pub(crate) fn load_frames<F: Float>(
    x: &Array<F>,
    y: &Array<F>,
    window: &Array<F>,
    shared: &mut SharedSplit<F>,
    first: usize,
    framing: &Framing,
    #[comptime] load: FrameLoad,
) {
    let cfg = comptime![load.cfg];
    let pair = comptime![load.pair];
    let log_w = comptime![cfg.log_w];
    let w = comptime![1usize << cfg.log_w];
    let threads = comptime![cfg.threads];
    let total = framing.total as usize;
    let frames = framing.frames as usize;
    let offset = framing.offset as usize;
    let t_len = framing.t_len as usize;
    let hop = framing.hop as usize;
    let t = UNIT_POS_X as usize;
    // Element q of this thread, `t + q·threads`, lies in row `t / W + (q·threads) / W` (threads
    // and W are powers of two): the signal and frame of its first row are divided out once, and
    // the others step from there.
    let r0 = first + t / w;
    let signal0 = (offset + r0) / frames;
    let frame0 = (offset + r0) % frames;
    #[unroll]
    for q in 0..comptime![cfg.rows * w / cfg.threads] {
        let e = t + q * threads;
        let r = r0 + comptime![q * cfg.threads / w];
        // Consecutive threads read consecutive samples and scatter them bit-reversed (the
        // swizzle keeps the scattered writes free of bank conflicts).
        let n = e % w;
        let mut re = F::new(0.0);
        let mut im = F::new(0.0);
        if r < total {
            let mut signal = signal0;
            let mut frame = frame0 + comptime![q * cfg.threads / w];
            while frame >= frames {
                frame -= frames;
                signal += 1;
            }
            let at = signal * t_len + frame * hop + n;
            let wn = window[n];
            re = x[at] * wn;
            if comptime![pair] {
                im = y[at] * wn;
            }
        }
        let slot = at((e - n) + reverse_bits(n, log_w), cfg);
        shared.re[slot] = re;
        shared.im[slot] = im;
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

/// The radix-2 stages of the cube's length-W transforms held in shared memory (slots at
/// [`at`]), with twiddles `tw[j] = e^{−2πi j/W}` for j < W/2. Forward (`inverse = false`):
/// decimation in time, bit-reversed input → natural-order spectrum. Inverse (`inverse = true`):
/// decimation in frequency with conjugate twiddles, natural-order input → bit-reversed output,
/// unnormalised (`z_n = Σ_k Z_k e^{+2πi nk/W}`). The stages run in groups of up to
/// `cfg.log_elems` ([`FrameConfig::fft`]): a thread loads the `2^g` elements a group of `g`
/// stages mixes into registers, runs the group's stages there and writes them back, so the
/// frames cross shared memory, and the cube synchronises, once per group instead of once per
/// stage. Ends with the cube synchronised.
#[cube]
pub(crate) fn fft_stages<F: Float>(
    shared: &mut SharedSplit<F>,
    tables: &FrameTables<F>,
    #[comptime] cfg: FrameConfig,
    #[comptime] inverse: bool,
) {
    let fft = comptime![cfg.fft()];
    let log_w = comptime![cfg.log_w];
    let threads = comptime![cfg.threads];
    let elems = comptime![1usize << cfg.log_elems];
    let groups = comptime![cfg.fft().groups()];
    let t = UNIT_POS_X as usize;
    let mut regs = SplitArray::<F> { re: Array::<F>::new(elems), im: Array::<F>::new(elems) };
    #[unroll]
    for step in 0..groups {
        let gi = comptime![if inverse { groups - 1 - step } else { step }];
        let b0 = comptime![fft.group(gi).0];
        let g = comptime![fft.group(gi).1];
        let r = comptime![1usize << g];
        // The thread's part of its instances' cube indices and slots: instance q adds the
        // constant part of `q · threads` (disjoint bits; the swizzle is an xor of shifts).
        let base_t = deposit_thread(t, fft, gi);
        let slot_t = swizzled(base_t, fft);
        #[unroll]
        for q in 0..comptime![fft.instances(gi)] {
            let base = base_t | comptime![fft.deposit(gi, q * threads)];
            #[unroll]
            for e in 0..r {
                let slot = slot_t ^ comptime![fft.swizzle(fft.deposit(gi, q * threads) | (e << b0))];
                regs.re[q * r + e] = shared.re[slot];
                regs.im[q * r + e] = shared.im[slot];
            }
            // Stage b0 + s's twiddle for the pair whose first element is e0 is
            // `e^{−2πi j / 2^(b0+s+1)}`, `j = low + (e0 mod 2^s)·2^b0`, with `low` the instance's
            // index bits below the group: the product of one table entry per instance and stage,
            // `e^{−2πi low / 2^(b0+s+1)}` (1 in the first group), and a constant,
            // `e^{−2πi (e0 mod 2^s) / 2^(s+1)}`.
            let low = base & comptime![(1usize << b0) - 1];
            #[unroll]
            for k in 0..g {
                let s = comptime![if inverse { g - 1 - k } else { k }];
                let mut tr = F::new(1.0);
                let mut ti = F::new(0.0);
                if comptime![b0 > 0] {
                    let at = low << comptime![log_w - 1 - b0 - s];
                    tr = tables.tw_re[at];
                    ti = tables.tw_im[at];
                }
                #[unroll]
                for pair in 0..comptime![r / 2] {
                    // The pair's elements: `pair` with a zero inserted at bit s, and that plus 2^s.
                    let e0 = comptime![((pair >> s) << (s + 1)) | (pair & ((1usize << s) - 1))];
                    let a = comptime![q * r + e0];
                    let b = comptime![q * r + e0 + (1usize << s)];
                    // The constant's index, and whether the constant is −i (a quarter turn).
                    let j = comptime![e0 & ((1usize << s) - 1)];
                    let minus_i = comptime![j > 0 && (j << 2) == (1usize << (s + 1))];
                    let (cr, ci) = comptime![twiddle_constant(j, s + 1)];
                    // In the first group a twiddle of 1 or −i takes no multiplication.
                    let plain = comptime![b0 == 0 && (j == 0 || minus_i)];
                    let mut wr = tr;
                    let mut wi = ti;
                    if comptime![b0 == 0] {
                        if comptime![!plain] {
                            wr = float_constant::<F>(cr);
                            wi = float_constant::<F>(ci);
                        }
                    } else if comptime![minus_i] {
                        wr = ti;
                        wi = F::new(0.0) - tr;
                    } else if comptime![j > 0] {
                        let (cr, ci) = (float_constant::<F>(cr), float_constant::<F>(ci));
                        wr = tr * cr - ti * ci;
                        wi = tr * ci + ti * cr;
                    }
                    let (ar, ai, br, bi) = (regs.re[a], regs.im[a], regs.re[b], regs.im[b]);
                    if comptime![inverse] {
                        // (a + b, conj(w)·(a − b)).
                        let (dr, di) = (ar - br, ai - bi);
                        regs.re[a] = ar + br;
                        regs.im[a] = ai + bi;
                        if comptime![plain && minus_i] {
                            regs.re[b] = F::new(0.0) - di;
                            regs.im[b] = dr;
                        } else if comptime![plain] {
                            regs.re[b] = dr;
                            regs.im[b] = di;
                        } else {
                            regs.re[b] = wr * dr + wi * di;
                            regs.im[b] = wr * di - wi * dr;
                        }
                    } else {
                        // (a + w·b, a − w·b).
                        let mut xr = br;
                        let mut xi = bi;
                        if comptime![plain && minus_i] {
                            xr = bi;
                            xi = F::new(0.0) - br;
                        } else if comptime![!plain] {
                            xr = wr * br - wi * bi;
                            xi = wr * bi + wi * br;
                        }
                        regs.re[a] = ar + xr;
                        regs.im[a] = ai + xi;
                        regs.re[b] = ar - xr;
                        regs.im[b] = ai - xi;
                    }
                }
            }
            #[unroll]
            for e in 0..r {
                let slot = slot_t ^ comptime![fft.swizzle(fft.deposit(gi, q * threads) | (e << b0))];
                shared.re[slot] = regs.re[q * r + e];
                shared.im[slot] = regs.im[q * r + e];
            }
        }
        sync_cube();
    }
}

/// `e^{−2πi j / 2^bits}` as `(re, im)`, computed in f64: a compile-time constant of the kernels.
fn twiddle_constant(j: usize, bits: usize) -> (f64, f64) {
    let angle = 2.0 * std::f64::consts::PI * j as f64 / (1u64 << bits) as f64;
    (angle.cos(), -angle.sin())
}

/// In a `#[cube]` function: the compile-time f64 `value` as a constant
/// of the kernel's float type, rounded once to it (`F::new` takes an f32, which would round an f64
/// kernel's constants to single precision).
#[allow(unused_variables)]
pub(crate) fn float_constant<F: Float>(value: f64) -> F {
    cubecl::unexpanded!()
}

/// The expansion of [`float_constant()`].
pub(crate) mod float_constant {
    use cubecl::ir::{ConstantValue, ManagedVariable, Scope};
    use cubecl::prelude::*;

    /// The expansion: a constant variable of `F`'s type.
    pub fn expand<F: Float>(scope: &mut Scope, value: f64) -> NativeExpand<F> {
        ManagedVariable::Plain(F::as_type(scope).constant(ConstantValue::Float(value))).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::onchip::mapping::checks::{check_free_of_bank_conflicts, check_groups_cover_the_cube};

    /// Every window the kernels take, on devices of 256 and 1024 threads per cube.
    fn configs() -> impl Iterator<Item = (usize, FrameConfig)> {
        (1..=MAX_FUSED_WIN.trailing_zeros() as usize).flat_map(|log_w| {
            [256, 1024]
                .into_iter()
                .map(move |units| (units, FrameConfig::new(1 << log_w, units, 4096, Magnitude::Linear)))
        })
    }

    /// Each thread holds `2^log_elems` elements of the cube's frames, no more threads than the
    /// device allows, and the frames fit Metal's 32 KiB in f32 (with the loss's reduction up to
    /// W = 2048; at 4096 the frame alone fills them).
    #[test]
    fn frames_fit_the_cube() {
        for (units, cfg) in configs() {
            let w = 1usize << cfg.log_w;
            assert!(cfg.log_elems >= 1 && cfg.log_elems <= cfg.log_w.min(MAX_LOG_ELEMS), "{cfg:?}");
            assert_eq!(cfg.threads << cfg.log_elems, cfg.rows * w, "{cfg:?}");
            assert_eq!(cfg.fft().threads(), cfg.threads, "{cfg:?}");
            assert!(cfg.threads <= units && cfg.rows >= 1, "{cfg:?}");
            let reduction = 3 * cfg.threads * 4;
            let budget = 32 << 10;
            assert!(cfg.shared_bytes(4) <= budget, "{cfg:?}");
            if w <= 2048 {
                assert!(cfg.shared_bytes(4) + reduction <= budget, "{cfg:?}");
            }
        }
    }

    /// The on-chip FFT's groups apply every stage, each element held once per group, and every
    /// access of a warp hits 32 distinct banks where the cube holds at least 1024 elements: every
    /// window but W = 2 on a device of fewer than 512 threads per cube.
    #[test]
    fn fft_groups_cover_the_frames_without_bank_conflicts() {
        for (units, cfg) in configs() {
            let fft = cfg.fft();
            check_groups_cover_the_cube(&fft);
            if cfg.log_w > 1 || units >= 512 {
                assert!(fft.log_cube() >= 10, "{cfg:?}");
                check_free_of_bank_conflicts(&fft);
            }
        }
    }

    /// An override of the cube's elements or of the elements per thread stays within the
    /// shared memory and the threads the device offers (one frame at least).
    #[test]
    fn overrides_are_bounded_by_the_device() {
        for log_w in 1..=MAX_FUSED_WIN.trailing_zeros() as usize {
            let w = 1usize << log_w;
            for (cube, log_elems) in [(1 << 20, 3), (1 << 20, 99), (1, 0), (64, 1)] {
                let cfg = FrameConfig::planned(w, 256, 2048, (cube, log_elems), Magnitude::Linear);
                assert!(cfg.rows >= 1 && cfg.rows * w <= 2048.max(w), "{cfg:?}");
                assert!(cfg.threads <= 256 && cfg.threads << cfg.log_elems == cfg.rows * w, "{cfg:?}");
                assert!((1..=MAX_LOG_ELEMS.min(log_w)).contains(&cfg.log_elems), "{cfg:?}");
            }
        }
    }
}
