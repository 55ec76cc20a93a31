//! The whole spectral loss fused: both signals' spectra, the distance, the reduction and the
//! spectral-convergence term in one pass, and its backward.
//!
//! Forward: each cube takes a group of `rows` frame pairs, packs pred's frame g and target's
//! frame g into one complex frame (`z = p + i·t`: both are real, so one FFT gives both spectra,
//! `P_k = (Z_k + conj Z_{W−k}) / 2`, `T_k = (Z_k − conj Z_{W−k}) / 2i`), and accumulates per
//! thread `s0 = Σ d(|P|, |T|)`, `s1 = Σ (|T| − |P|)²`, `s2 = Σ |T|²`; a tree in shared memory
//! reduces them per cube, and a one-cube kernel reduces the per-cube partials in a fixed order and
//! writes `loss = scale·s0 + sc·sqrt(s1 + eps)/sqrt(s2 + eps)`. No atomics: the value is
//! reproducible.
//!
//! Backward: from the loss gradient g, each (frame, bin) gets `∂L/∂|P|` and `∂L/∂|T|`, hence both
//! bins' complex coefficients; their Hermitian extensions packed as one complex spectrum make one
//! on-chip inverse FFT per frame pair, whose real and imaginary parts are the two frames'
//! gradients; the overlap-add gather of [`super::backward`] sums every covering frame into each
//! sample. Without the spectral-convergence term the coefficients need only the loss's constant
//! factor: where a gradient will be asked for, the forward kernel does that work on the spectra it
//! has, for g = 1 ([`loss_forward`]'s `unit_grads`), and the backward only scales the result by g;
//! otherwise [`loss_backward_kernel`] computes the spectra again.

use burn_cubecl::{kernel::into_contiguous, tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::{prelude::*, CubeCount, CubeDim};

use super::backward::{overlap_add, signal_chunk};
use super::{at, fft_stages, frame_config, load_frames, magnitude_of, magnitude_slope, FrameLoad, Tables};
use super::{FrameConfig, FrameRange, FrameTables, Framing, LossConfig};
use crate::ops::cubecl::{empties, empty, floor_pow2, grid};
use crate::ops::onchip::{reverse_bits, tree_sum3, SharedSplit};
use crate::ops::spectral::{Distance, LossParams, Magnitude};
use crate::ops::tuning::LOSS_FINISH_THREADS;
use cubecl::client::ComputeClient;

/// Whether the fused loss can run for window `win` (a slot's packed frame pair and the reduction
/// must fit in shared memory; otherwise the loss composes the fused spectrogram op with tensor
/// ops).
pub fn loss_supported<R: CubeRuntime, F: FloatElement>(win: usize, device: &R::Device) -> bool {
    if !super::fused_supported::<R, F>(win, device) {
        return false;
    }
    let client = R::client(device);
    let frame = frame_config::<R, F>(&client, win, Magnitude::Linear);
    loss_shared_bytes(frame, core::mem::size_of::<F>()) <= client.properties().hardware.max_shared_memory_size
}

/// Shared memory of a loss kernel's cube in `float`-byte floats: one packed complex frame per
/// slot, and the forward's three-sum reduction.
fn loss_shared_bytes(frame: FrameConfig, float: usize) -> usize {
    frame.shared_bytes(float) + 3 * frame.threads * float
}

/// The two signals of the loss (or their per-frame gradients), `pred` and `target`.
#[derive(CubeLaunch, CubeType)]
pub(crate) struct Pair<F: Float> {
    pub pred: Array<F>,
    pub target: Array<F>,
}

/// The forward's per-cube partial sums (three per cube), this launch's from cube `first` on
/// (the frames go in chunks of launches).
#[derive(CubeLaunch, CubeType)]
pub(crate) struct Partials<F: Float> {
    pub sums: Array<F>,
    pub first: u32,
}

/// What the backward takes from the rest of the graph: the loss's gradient `[1]` and the
/// forward's three norm sums.
#[derive(CubeLaunch, CubeType)]
pub(crate) struct Upstream<F: Float> {
    pub grad_loss: Array<F>,
    pub sums: Array<F>,
}

/// The loss's runtime scalars: the magnitude's and the norms' eps, the reduction's factor on the
/// distance sum, the spectral-convergence weight.
#[derive(CubeLaunch, CubeType)]
pub(crate) struct LossScalars {
    pub eps: InputScalar,
    pub scale: InputScalar,
    pub sc: InputScalar,
}

/// The packed spectra `Z = P + iT` of frame pairs `first … first + rows − 1` (pred's frame the
/// real part, target's the imaginary part) in natural order in shared memory, the cube
/// synchronised; [`split_spectra`] reads both spectra from them.
#[cube]
fn pair_spectra<F: Float>(
    signals: &Pair<F>,
    tables: &FrameTables<F>,
    shared: &mut SharedSplit<F>,
    first: usize,
    framing: &Framing,
    #[comptime] frame: FrameConfig,
) {
    load_frames::<F>(
        &signals.pred,
        &signals.target,
        &tables.window,
        shared,
        first,
        framing,
        comptime![FrameLoad { cfg: frame, pair: true }],
    );
    sync_cube();
    fft_stages::<F>(shared, tables, frame, false);
}

/// Bin `k` (≤ W/2) of both real frames of slot `r` from their packed spectrum `Z = P + iQ`
/// (natural order): `P_k = (Z_k + conj Z_{W−k}) / 2`, `Q_k = (Z_k − conj Z_{W−k}) / 2i`.
/// Returns `(P_k.re, P_k.im, Q_k.re, Q_k.im)`.
#[cube]
fn split_spectra<F: Float>(shared: &SharedSplit<F>, r: usize, k: usize, #[comptime] cfg: FrameConfig) -> (F, F, F, F) {
    let w = comptime![1usize << cfg.log_w];
    let a = at(r * w + k, cfg);
    let b = at(r * w + ((w - k) & (w - 1)), cfg);
    let (zr, zi, cr, ci) = (shared.re[a], shared.im[a], shared.re[b], shared.im[b]);
    let half = F::new(0.5);
    (half * (zr + cr), half * (zi - ci), half * (zi + ci), half * (cr - zr))
}

/// The loss's gradient coefficients of bin `k` (≤ W/2) of slot `r`, packed in place for one inverse
/// FFT: from `∂L/∂|P_k|` and `∂L/∂|Q_k|` (`cp`, `ct`, already times the magnitudes' slopes), the
/// coefficients `c·P_k`, `c·Q_k`; their Hermitian extensions `H` (halved off DC and Nyquist, so
/// that the real inverse is the real part of the one-sided sum) go as `Hp + i·Ht` into bins k and
/// W − k, which only this unit reads and writes. One gradient alone goes in the real part.
#[cube]
fn pack_coefficients<F: Float>(
    shared: &mut SharedSplit<F>,
    r: usize,
    k: usize,
    spectra: (F, F, F, F),
    cp: F,
    ct: F,
    #[comptime] cfg: LossConfig,
) {
    let w = comptime![1usize << cfg.frame.log_w];
    let half = comptime![w / 2];
    let (pr, pi, qr, qi) = spectra;
    let mut h = F::new(0.5);
    if k == 0 || k == half {
        h = F::new(1.0);
    }
    // (a_re, a_im): the real part's coefficient, (b_re, b_im): the imaginary part's.
    let (mut ar, mut ai) = (h * cp * pr, h * cp * pi);
    let (mut br, mut bi) = (F::new(0.0), F::new(0.0));
    if comptime![cfg.grads.0 && cfg.grads.1] {
        br = h * ct * qr;
        bi = h * ct * qi;
    } else if comptime![!cfg.grads.0] {
        ar = h * ct * qr;
        ai = h * ct * qi;
    }
    // Z_k = A + iB, Z_{W−k} = conj A + i conj B (at DC and Nyquist both are real).
    let a = at(r * w + k, cfg.frame);
    shared.re[a] = ar - bi;
    shared.im[a] = ai + br;
    if k != 0 && k != half {
        let b = at(r * w + w - k, cfg.frame);
        shared.re[b] = ar + bi;
        shared.im[b] = br - ai;
    }
}

/// After the inverse FFT of the packed coefficients: each slot's frame gradients (times the
/// window) into `grad_frames` at the launch's frame `first + r` (pred's, and target's where both
/// are asked for).
#[cube]
fn write_frame_grads<F: Float>(
    shared: &SharedSplit<F>,
    tables: &FrameTables<F>,
    grad_frames: &mut Pair<F>,
    first: usize,
    total: usize,
    #[comptime] cfg: LossConfig,
) {
    let log_w = comptime![cfg.frame.log_w];
    let w = comptime![1usize << cfg.frame.log_w];
    let threads = comptime![cfg.frame.threads];
    let t = UNIT_POS_X as usize;
    #[unroll]
    for q in 0..comptime![cfg.frame.rows * w / cfg.frame.threads] {
        let e = t + q * threads;
        let r = e / w;
        let n = e % w;
        if first + r < total {
            let src = at(r * w + reverse_bits(n, log_w), cfg.frame);
            let wn = tables.window[n];
            grad_frames.pred[(first + r) * w + n] = wn * shared.re[src];
            if comptime![cfg.grads.0 && cfg.grads.1] {
                grad_frames.target[(first + r) * w + n] = wn * shared.im[src];
            }
        }
    }
}

/// One cube per group of `cfg.frame.rows` frame pairs: writes the group's three partial sums at
/// `partials.first + CUBE_POS`. With `cfg.grads` (a loss without the spectral-convergence term, whose
/// gradient needs only the reduction's constant factor) it goes on to the backward's work for a
/// loss gradient of 1, on the spectra it has: the coefficients, the inverse FFT and the frames'
/// gradients into `grad_frames` (the autodiff backward then scales their overlap-add by the loss's
/// gradient), so the backward computes no spectrum again.
/// (One group per cube rather than a loop over groups `CUBE_COUNT` apart: the loop kept its
/// per-thread addresses live across iterations, 122 registers against 64, half the occupancy.)
#[cube(launch)]
pub(crate) fn loss_forward_kernel<F: Float>(
    signals: &Pair<F>,
    tables: &FrameTables<F>,
    partials: &mut Partials<F>,
    grad_frames: &mut Pair<F>,
    scalars: &LossScalars,
    framing: &Framing,
    #[comptime] cfg: LossConfig,
) {
    let frame = comptime![cfg.frame];
    let rows = comptime![cfg.frame.rows];
    let threads = comptime![cfg.frame.threads];
    let w = comptime![1usize << cfg.frame.log_w];
    let bins = comptime![w / 2 + 1];
    let grads = comptime![cfg.grads.0 || cfg.grads.1];
    let mut shared = SharedSplit::<F> {
        re: SharedMemory::<F>::new(comptime![cfg.frame.rows * w]),
        im: SharedMemory::<F>::new(comptime![cfg.frame.rows * w]),
    };
    let mut red = SharedMemory::<F>::new(comptime![3 * cfg.frame.threads]);
    let eps: F = scalars.eps.get::<F>();
    // ∂L/∂s0 for a loss gradient of 1.
    let g0 = scalars.scale.get::<F>();
    let total = framing.total as usize;
    let first = CUBE_POS * rows;
    if first >= total {
        terminate!();
    }
    let t = UNIT_POS_X as usize;
    let mut a0 = F::new(0.0);
    let mut a1 = F::new(0.0);
    let mut a2 = F::new(0.0);
    pair_spectra::<F>(signals, tables, &mut shared, first, framing, frame);
    #[unroll]
    for q in 0..comptime![(cfg.frame.rows * bins).div_ceil(cfg.frame.threads)] {
        let e = t + q * threads;
        let r = e / bins;
        let k = e % bins;
        if e < comptime![cfg.frame.rows * bins] {
            let spectra = split_spectra::<F>(&shared, r, k, frame);
            let mut cp = F::new(0.0);
            let mut ct = F::new(0.0);
            if first + r < total {
                let (pp, qq, mt, diff) = bin_magnitudes::<F>(spectra, eps, cfg);
                if comptime![cfg.distance == Distance::L1] {
                    a0 += F::abs(diff);
                } else {
                    a0 += diff * diff;
                }
                a1 += diff * diff;
                a2 += mt * mt;
                if comptime![grads] {
                    let dd = distance_slope::<F>(diff, cfg);
                    cp = g0 * dd * magnitude_slope::<F>(pp, eps, comptime![cfg.frame.magnitude]);
                    ct = (F::new(0.0) - g0 * dd) * magnitude_slope::<F>(qq, eps, comptime![cfg.frame.magnitude]);
                }
            }
            if comptime![grads] {
                pack_coefficients::<F>(&mut shared, r, k, spectra, cp, ct, cfg);
            }
        }
    }
    red[t] = a0;
    red[threads + t] = a1;
    red[2 * threads + t] = a2;
    sync_cube();
    tree_sum3::<F>(&mut red, threads);
    if t == 0 {
        #[unroll]
        for j in 0..3usize {
            partials.sums[(partials.first as usize + CUBE_POS) * 3 + j] = red[j * threads];
        }
    }
    if comptime![grads] {
        sync_cube();
        fft_stages::<F>(&mut shared, tables, frame, true);
        write_frame_grads::<F>(&shared, tables, grad_frames, first, total, cfg);
    }
}

/// At one bin, from both spectra `(P.re, P.im, T.re, T.im)`: their squared magnitudes, the
/// target's magnitude and the difference `|P| − |T|`, in the loss's magnitude measure:
/// `(pp, qq, mt, diff)`.
#[cube]
fn bin_magnitudes<F: Float>(spectra: (F, F, F, F), eps: F, #[comptime] cfg: LossConfig) -> (F, F, F, F) {
    let (pr, pi, qr, qi) = spectra;
    let (pp, qq) = (pr * pr + pi * pi, qr * qr + qi * qi);
    let mp = magnitude_of::<F>(pp, eps, comptime![cfg.frame.magnitude]);
    let mt = magnitude_of::<F>(qq, eps, comptime![cfg.frame.magnitude]);
    (pp, qq, mt, mp - mt)
}

/// `∂d/∂diff` of the distance: `2·diff` (L2) or its sign (L1, 0 at 0).
#[cube]
fn distance_slope<F: Float>(diff: F, #[comptime] cfg: LossConfig) -> F {
    let mut dd = F::new(2.0) * diff;
    if comptime![cfg.distance == Distance::L1] {
        dd = F::new(0.0);
        if diff > F::new(0.0) {
            dd = F::new(1.0);
        } else if diff < F::new(0.0) {
            dd = F::new(-1.0);
        }
    }
    dd
}

/// One cube: sums the per-cube partials `[cubes, 3]` in a fixed order (strided per thread, then a
/// tree), writes `sums = (s0, s1, s2)` and the loss.
#[cube(launch)]
pub(crate) fn loss_finish_kernel<F: Float>(
    partials: &Array<F>,
    sums: &mut Array<F>,
    loss: &mut Array<F>,
    scalars: &LossScalars,
    #[comptime] threads: usize,
    #[comptime] spectral_convergence: bool,
) {
    let mut red = SharedMemory::<F>::new(comptime![3 * threads]);
    let t = UNIT_POS_X as usize;
    let cubes = partials.len() / 3;
    let mut a = Array::<F>::new(3usize);
    #[unroll]
    for j in 0..3usize {
        a[j] = F::new(0.0);
    }
    let mut c = t;
    while c < cubes {
        #[unroll]
        for j in 0..3usize {
            a[j] += partials[c * 3 + j];
        }
        c += threads;
    }
    #[unroll]
    for j in 0..3usize {
        red[j * threads + t] = a[j];
    }
    sync_cube();
    tree_sum3::<F>(&mut red, threads);
    if t == 0 {
        let (s0, s1, s2) = (red[0], red[threads], red[2 * threads]);
        sums[0] = s0;
        sums[1] = s1;
        sums[2] = s2;
        let mut value = s0 * scalars.scale.get::<F>();
        if comptime![spectral_convergence] {
            let e = scalars.eps.get::<F>();
            value += scalars.sc.get::<F>() * F::sqrt(s1 + e) / F::sqrt(s2 + e);
        }
        loss[0] = value;
    }
}

/// Per chunk of frames: both frames' per-offset gradients from the loss gradient.
#[cube(launch)]
pub(crate) fn loss_backward_kernel<F: Float>(
    signals: &Pair<F>,
    tables: &FrameTables<F>,
    upstream: &Upstream<F>,
    grad_frames: &mut Pair<F>,
    scalars: &LossScalars,
    framing: &Framing,
    #[comptime] cfg: LossConfig,
) {
    let grad_loss = &upstream.grad_loss;
    let sums = &upstream.sums;
    let frame = comptime![cfg.frame];
    let rows = comptime![cfg.frame.rows];
    let threads = comptime![cfg.frame.threads];
    let w = comptime![1usize << cfg.frame.log_w];
    let half = comptime![w / 2];
    let mut shared = SharedSplit::<F> {
        re: SharedMemory::<F>::new(comptime![cfg.frame.rows * w]),
        im: SharedMemory::<F>::new(comptime![cfg.frame.rows * w]),
    };
    let total = framing.total as usize;
    let first = CUBE_POS * rows;
    if first >= total {
        terminate!();
    }
    let eps: F = scalars.eps.get::<F>();
    // ∂L/∂s0, ∂L/∂s1, ∂L/∂s2.
    let g = grad_loss[0];
    let g0 = g * scalars.scale.get::<F>();
    let mut g1 = F::new(0.0);
    let mut g2 = F::new(0.0);
    if comptime![cfg.spectral_convergence] {
        let num = F::sqrt(sums[1] + eps);
        let den = F::sqrt(sums[2] + eps);
        let gs = g * scalars.sc.get::<F>();
        g1 = gs / (F::new(2.0) * num * den);
        g2 = F::new(0.0) - gs * num / (F::new(2.0) * den * den * den);
    }
    pair_spectra::<F>(signals, tables, &mut shared, first, framing, frame);

    let t = UNIT_POS_X as usize;
    #[unroll]
    for q in 0..comptime![(cfg.frame.rows * (half + 1)).div_ceil(cfg.frame.threads)] {
        let e = t + q * threads;
        let r = e / comptime![half + 1];
        let k = e % comptime![half + 1];
        if e < comptime![cfg.frame.rows * (half + 1)] {
            let spectra = split_spectra::<F>(&shared, r, k, frame);
            let mut cp = F::new(0.0);
            let mut ct = F::new(0.0);
            if first + r < total {
                let (pp, qq, mt, diff) = bin_magnitudes::<F>(spectra, eps, cfg);
                let dd = distance_slope::<F>(diff, cfg);
                // s1 = Σ (mt − mp)², s2 = Σ mt².
                let gp = g0 * dd + g1 * F::new(2.0) * diff;
                let gt = F::new(0.0) - g0 * dd - g1 * F::new(2.0) * diff + g2 * F::new(2.0) * mt;
                cp = gp * magnitude_slope::<F>(pp, eps, comptime![cfg.frame.magnitude]);
                ct = gt * magnitude_slope::<F>(qq, eps, comptime![cfg.frame.magnitude]);
            }
            pack_coefficients::<F>(&mut shared, r, k, spectra, cp, ct, cfg);
        }
    }
    sync_cube();
    fft_stages::<F>(&mut shared, tables, frame, true);
    write_frame_grads::<F>(&shared, tables, grad_frames, first, total, cfg);
}

impl LossParams {
    /// The fused loss kernels' comptime configuration for window `win` on `client`'s device.
    fn config<R: CubeRuntime, F: FloatElement>(
        &self,
        client: &ComputeClient<R>,
        win: usize,
        grads: (bool, bool),
    ) -> LossConfig {
        LossConfig {
            frame: frame_config::<R, F>(client, win, self.magnitude),
            distance: self.distance,
            spectral_convergence: self.spectral_convergence > 0.0,
            grads,
        }
    }

    /// The runtime scalars as a kernel argument.
    fn scalars<R: Runtime, F: FloatElement>(&self) -> LossScalarsLaunch<R> {
        LossScalarsLaunch::new(
            InputScalar::new(self.eps, F::dtype()),
            InputScalar::new(self.scale, F::dtype()),
            InputScalar::new(self.spectral_convergence, F::dtype()),
        )
    }
}

/// What both launchers of the fused loss start from: the two signals made contiguous on one
/// client, the comptime config, and every frame of the batch.
struct LossLaunch<R: CubeRuntime> {
    pred: CubeTensor<R>,
    target: CubeTensor<R>,
    client: ComputeClient<R>,
    cfg: LossConfig,
    all: FrameRange,
}

impl<R: CubeRuntime> LossLaunch<R> {
    fn new<F: FloatElement>(
        pred: CubeTensor<R>,
        target: CubeTensor<R>,
        tables: &Tables<R>,
        p: &LossParams,
        grads: (bool, bool),
    ) -> Self {
        let dims = pred.meta.shape().clone();
        let win = tables.win();
        let (pred, target) = (into_contiguous(pred), into_contiguous(target));
        let client = pred.client.clone();
        let cfg = p.config::<R, F>(&client, win, grads);
        LossLaunch { all: FrameRange::all(dims[0], dims[1], win, p.hop), pred, target, client, cfg }
    }
}

/// What [`loss_forward`] returns: the loss `[1]`, the sums `[3]` the backward needs, and, where it
/// was asked to, the gradients of pred and target `[signals, T]` for a loss gradient of 1.
pub struct LossForward<R: CubeRuntime> {
    /// The loss, `[1]`.
    pub loss: CubeTensor<R>,
    /// `(s0, s1, s2)`, `[3]`.
    pub sums: CubeTensor<R>,
    /// `∂loss/∂pred` and `∂loss/∂target`, those asked for and computed in the forward: `[signals,
    /// T]` each, or, where `frames` is given, the per-frame gradients `[frames, W]` of that range
    /// that [`finish_unit_grads`] sums into the samples.
    pub unit_grads: [Option<CubeTensor<R>>; 2],
    /// The frames the unit gradients are left as (the overlap-add deferred to the backward).
    pub frames: Option<FrameRange>,
}

/// Per-frame gradients of at most this many bytes (each) are left to the backward, whose
/// overlap-add then applies the loss's gradient in the same launch: one launch and one allocation
/// fewer per call, which is what a small call's time goes to. Above, the forward sums them into
/// the samples (`W / H` times smaller than the frames) before its result is held for the backward.
pub(crate) const DEFERRED_FRAMES_BYTES: usize = 8 << 20;

/// The backward of unit gradients from [`loss_forward`]: each times the loss gradient `g` (`[1]`).
/// Left as frames, they are summed into the samples and scaled in one launch; summed already,
/// they are scaled by `scale`, the caller's broadcast product.
pub(crate) fn finish_unit_grads<R: CubeRuntime, F: FloatElement>(
    unit_grads: [Option<CubeTensor<R>>; 2],
    frames: Option<FrameRange>,
    g: CubeTensor<R>,
    scale: impl Fn(CubeTensor<R>, CubeTensor<R>) -> CubeTensor<R>,
) -> [Option<CubeTensor<R>>; 2] {
    let g = into_contiguous(g);
    unit_grads.map(|unit| {
        unit.map(|unit| match frames {
            Some(range) => {
                let grad = empty::<R, F>(&unit, vec![range.total / range.frames, range.t_len]);
                overlap_add::<R, F>(&unit, Some(&g), &grad, &range);
                grad
            }
            None => scale(unit, g.clone()),
        })
    })
}

/// Whether [`loss_forward`] computes the gradients `grads` asks for in its pass: a loss without the
/// spectral-convergence term (whose gradient needs the whole reduction first) and some gradient
/// asked for.
pub fn forward_grads(p: &LossParams, grads: (bool, bool)) -> bool {
    (grads.0 || grads.1) && p.spectral_convergence == 0.0
}

/// The fused loss. Where [`forward_grads`] holds for `grads` (`(pred, target)`), it also returns
/// the gradients asked for at a loss gradient of 1, from the spectra it computes anyway (the
/// backward then only scales them). Frames go through the kernel in chunks of whole signals, with
/// or without gradients (the same chunks, so the loss is the same bits either way). The caller
/// checks [`loss_supported`] and the shapes first.
pub fn loss_forward<R: CubeRuntime, F: FloatElement>(
    pred: CubeTensor<R>,
    target: CubeTensor<R>,
    tables: &Tables<R>,
    p: LossParams,
    grads: (bool, bool),
) -> LossForward<R> {
    let grads = if forward_grads(&p, grads) { grads } else { (false, false) };
    let LossLaunch { pred, target, client, cfg, all } = LossLaunch::new::<F>(pred, target, tables, &p, grads);
    let (signals, t, win) = (all.total / all.frames, all.t_len, tables.win());
    let chunk = signal_chunk::<F>(signals, all.frames, win, t);
    let ranges: Vec<FrameRange> = all.chunks(chunk).collect();
    let cubes_of = |r: &FrameRange| r.total.div_ceil(cfg.frame.rows).max(1);
    let cubes: usize = ranges.iter().map(cubes_of).sum::<usize>().max(1);
    let max_units = client.properties().hardware.max_units_per_cube as usize;
    let finish_threads = LOSS_FINISH_THREADS.min(floor_pow2(max_units));
    // One allocation for the small outputs and the gradients that outlive the call (each
    // allocation is one more request to the device thread, which is what a small call's time goes
    // to); the frames' scratch is apart, released after the last chunk, unless the frames are the
    // result (below).
    let both = grads.0 && grads.1;
    let frame_dims = [chunk * all.frames, win];
    // Where the frames' gradients fit one launch and `DEFERRED_FRAMES_BYTES`, they are the result
    // (allocated with the partials, no overlap-add here: the backward's sums and scales them).
    let defer = (grads.0 || grads.1)
        && ranges.len() == 1
        && chunk * all.frames * win * core::mem::size_of::<F>() <= DEFERRED_FRAMES_BYTES;
    let scratch = || empty::<R, F>(&pred, frame_dims.to_vec());
    // Without gradients the kernel writes no frames: the partials stand for both buffers. With one
    // gradient its frames are in the first buffer and the second is not touched.
    let (partials, sums, loss, unit_a, unit_b, frames_a, frames_b) = match (defer, grads.0 || grads.1, both) {
        (true, _, true) => {
            let [p, s, l, a, b] = empties::<R, F, 5>(&pred, [&[cubes, 3], &[3], &[1], &frame_dims, &frame_dims]);
            (p, s, l, None, None, a, b)
        }
        (true, _, false) => {
            let [p, s, l, a] = empties::<R, F, 4>(&pred, [&[cubes, 3], &[3], &[1], &frame_dims]);
            (p, s, l, None, None, a.clone(), a)
        }
        (false, true, true) => {
            let [p, s, l, a, b] = empties::<R, F, 5>(&pred, [&[cubes, 3], &[3], &[1], &[signals, t], &[signals, t]]);
            (p, s, l, Some(a), Some(b), scratch(), scratch())
        }
        (false, true, false) => {
            let [p, s, l, a] = empties::<R, F, 4>(&pred, [&[cubes, 3], &[3], &[1], &[signals, t]]);
            let frames = scratch();
            (p, s, l, Some(a), None, frames.clone(), frames)
        }
        (false, false, _) => {
            let [p, s, l] = empties::<R, F, 3>(&pred, [&[cubes, 3], &[3], &[1]]);
            (p.clone(), s, l, None, None, p.clone(), p)
        }
    };
    let mut first_partial = 0;
    for range in &ranges {
        loss_forward_kernel::launch::<F, R>(
            &client,
            grid(cubes_of(range)),
            CubeDim::new_1d(cfg.frame.threads as u32),
            PairLaunch::new(pred.clone().into_array_arg(), target.clone().into_array_arg()),
            tables.arg::<F>(),
            PartialsLaunch::new(partials.clone().into_array_arg(), first_partial as u32),
            PairLaunch::new(frames_a.clone().into_array_arg(), frames_b.clone().into_array_arg()),
            p.scalars::<R, F>(),
            range.arg(),
            cfg,
        );
        if let Some(unit_a) = &unit_a {
            overlap_add::<R, F>(&frames_a, None, unit_a, range);
        }
        if let Some(unit_b) = &unit_b {
            overlap_add::<R, F>(&frames_b, None, unit_b, range);
        }
        first_partial += cubes_of(range);
    }
    loss_finish_kernel::launch::<F, R>(
        &client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(finish_threads as u32),
        partials.into_array_arg(),
        sums.clone().into_array_arg(),
        loss.clone().into_array_arg(),
        p.scalars::<R, F>(),
        finish_threads,
        cfg.spectral_convergence,
    );
    let (unit_a, unit_b) = if defer { (Some(frames_a), both.then_some(frames_b)) } else { (unit_a, unit_b) };
    let unit_grads = match grads {
        (true, true) => [unit_a, unit_b],
        (true, false) => [unit_a, None],
        (false, true) => [None, unit_a],
        (false, false) => [None, None],
    };
    LossForward { loss, sums, unit_grads, frames: defer.then_some(ranges[0]) }
}

/// The fused loss's backward: the loss gradient `[1]`, the forward's `sums` and inputs → the
/// gradients of pred and target, `[signals, T]` each, those of them that `grads` asks for
/// (`(pred, target)`; `(None, None)` when it asks for neither).
pub fn loss_backward<R: CubeRuntime, F: FloatElement>(
    grad_loss: CubeTensor<R>,
    sums: CubeTensor<R>,
    pred: CubeTensor<R>,
    target: CubeTensor<R>,
    tables: &Tables<R>,
    p: LossParams,
    grads: (bool, bool),
) -> (Option<CubeTensor<R>>, Option<CubeTensor<R>>) {
    if !grads.0 && !grads.1 {
        return (None, None);
    }
    let LossLaunch { pred, target, client, cfg, all } = LossLaunch::new::<F>(pred, target, tables, &p, grads);
    let grad_loss = into_contiguous(grad_loss);
    let (signals, t, win) = (all.total / all.frames, all.t_len, tables.win());
    let chunk = signal_chunk::<F>(signals, all.frames, win, t);
    let grad = || empty::<R, F>(&pred, vec![signals, t]);
    let frames = || empty::<R, F>(&pred, vec![chunk * all.frames, win]);
    // With one gradient, its frames are in the first buffer; the kernel does not touch the second,
    // so the gradient's buffer (which it does not bind otherwise) stands in for it rather than a
    // placeholder allocation.
    let both = grads.0 && grads.1;
    let (grad_a, frames_a) = (grad(), frames());
    let (grad_b, frames_b) = if both { (Some(grad()), frames()) } else { (None, grad_a.clone()) };
    for range in all.chunks(chunk) {
        loss_backward_kernel::launch::<F, R>(
            &client,
            grid(range.total.div_ceil(cfg.frame.rows)),
            CubeDim::new_1d(cfg.frame.threads as u32),
            PairLaunch::new(pred.clone().into_array_arg(), target.clone().into_array_arg()),
            tables.arg::<F>(),
            UpstreamLaunch::new(grad_loss.clone().into_array_arg(), sums.clone().into_array_arg()),
            PairLaunch::new(frames_a.clone().into_array_arg(), frames_b.clone().into_array_arg()),
            p.scalars::<R, F>(),
            range.arg(),
            cfg,
        );
        overlap_add::<R, F>(&frames_a, None, &grad_a, &range);
        if let Some(grad_b) = &grad_b {
            overlap_add::<R, F>(&frames_b, None, grad_b, &range);
        }
    }
    match grads {
        (true, true) => (Some(grad_a), grad_b),
        (true, false) => (Some(grad_a), None),
        _ => (None, Some(grad_a)),
    }
}
