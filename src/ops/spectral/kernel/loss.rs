//! The whole spectral loss fused: both signals' spectra, the distance, the reduction and the
//! spectral-convergence term in one pass, and its backward.
//!
//! Forward: each cube loops over groups of `rows` frame pairs (pred and target frame g side by
//! side in shared memory), transforms both on-chip, and accumulates per thread
//! `s0 = Σ d(|P|, |T|)`, `s1 = Σ (|T| − |P|)²`, `s2 = Σ |T|²`; a tree in shared memory reduces
//! them per cube, and a one-cube kernel reduces the per-cube partials in a fixed order and writes
//! `loss = scale·s0 + sc·sqrt(s1 + eps)/sqrt(s2 + eps)`. No atomics: the value is reproducible.
//!
//! Backward: from the loss gradient g, each (frame, bin) gets `∂L/∂|P|` and `∂L/∂|T|`, hence both
//! bins' complex coefficients; one on-chip inverse FFT per frame reduces over bins, and the
//! overlap-add gather of [`super::backward`] sums every covering frame into each sample.

use burn_cubecl::{kernel::into_contiguous, tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::{prelude::*, CubeCount, CubeDim};

use super::backward::{overlap_add, signal_chunk};
use super::forward::frames_of;
use super::{fft_stages, load_frames, magnitude_code, magnitude_of, magnitude_slope, plan, Tables};
use crate::ops::butterfly::kernel::{reverse_bits, Plan};
use crate::ops::cubecl::empty;
use crate::ops::cubecl::grid;
use crate::ops::spectral::{Distance, LossParams};

/// Cubes of the forward, at most: each loops over its share of the frame groups, and the final
/// reduction reads this many partials per sum.
const MAX_LOSS_CUBES: usize = 1024;
/// Threads of the final reduction.
const FINISH_THREADS: usize = 256;

fn distance_code(d: Distance) -> u32 {
    match d {
        Distance::L1 => 0,
        Distance::L2 => 1,
    }
}

/// Whether the fused loss can run for window `win` (two frames per slot pair must fit in shared
/// memory; otherwise the loss composes the fused spectrogram op with tensor ops).
pub fn loss_supported<R: CubeRuntime, F: FloatElement>(win: usize, device: &R::Device) -> bool {
    if !super::fused_supported::<R, F>(win, device) {
        return false;
    }
    let client = R::client(device);
    let plan = plan(&client, win);
    2 * plan.shared_bytes(core::mem::size_of::<F>()) + 3 * plan.threads * core::mem::size_of::<F>()
        <= client.properties().hardware.max_shared_memory_size
}

/// Shared-memory tree sum of `buf[j·threads + t]` over t, for j < 3; the sums end in
/// `buf[j·threads]`.
#[cube]
fn tree_sum3<F: Float>(buf: &mut SharedMemory<F>, #[comptime] threads: usize) {
    let t = UNIT_POS_X as usize;
    #[unroll]
    for level in 0..comptime![threads.trailing_zeros() as usize] {
        let stride = comptime![threads >> (level + 1)];
        if t < stride {
            #[unroll]
            for j in 0..3usize {
                let other = buf[j * threads + t + stride];
                buf[j * threads + t] += other;
            }
        }
        sync_cube();
    }
}

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn loss_forward_kernel<F: Float>(
    pred: &Tensor<F>,
    target: &Tensor<F>,
    window: &Tensor<F>,
    tw_re: &Tensor<F>,
    tw_im: &Tensor<F>,
    partials: &mut Tensor<F>,
    eps: InputScalar,
    total: u32,
    frames: u32,
    t_len: u32,
    hop: u32,
    cubes: u32,
    #[comptime] log_w: usize,
    #[comptime] rows: usize,
    #[comptime] threads: usize,
    #[comptime] magnitude: u32,
    #[comptime] distance: u32,
) {
    let w = comptime![1usize << log_w];
    let bins = comptime![w / 2 + 1];
    let mut s_re = SharedMemory::<F>::new(comptime![2 * rows * w]);
    let mut s_im = SharedMemory::<F>::new(comptime![2 * rows * w]);
    let mut red = SharedMemory::<F>::new(comptime![3 * threads]);
    let eps: F = eps.get::<F>();
    let (total, frames, t_len, hop) = (total as usize, frames as usize, t_len as usize, hop as usize);
    let groups = total.div_ceil(rows);
    let t = UNIT_POS_X as usize;
    let mut a0 = F::new(0.0);
    let mut a1 = F::new(0.0);
    let mut a2 = F::new(0.0);
    let mut group = CUBE_POS;
    while group < groups {
        let first = group * rows;
        load_frames::<F>(pred, window, &mut s_re, &mut s_im, 0, first, total, frames, t_len, hop, log_w, rows, threads);
        load_frames::<F>(
            target, window, &mut s_re, &mut s_im, rows, first, total, frames, t_len, hop, log_w, rows, threads,
        );
        sync_cube();
        fft_stages::<F>(&mut s_re, &mut s_im, tw_re, tw_im, log_w, comptime![2 * rows], threads, false);
        #[unroll]
        for q in 0..comptime![(rows * bins).div_ceil(threads)] {
            let e = t + q * threads;
            let r = e / bins;
            let k = e % bins;
            if e < comptime![rows * bins] && first + r < total {
                let (pr, pi) = (s_re[r * w + k], s_im[r * w + k]);
                let (qr, qi) = (s_re[(rows + r) * w + k], s_im[(rows + r) * w + k]);
                let mp = magnitude_of::<F>(pr * pr + pi * pi, eps, magnitude);
                let mt = magnitude_of::<F>(qr * qr + qi * qi, eps, magnitude);
                let diff = mp - mt;
                if comptime![distance == 0] {
                    a0 += F::abs(diff);
                } else {
                    a0 += diff * diff;
                }
                a1 += diff * diff;
                a2 += mt * mt;
            }
        }
        sync_cube();
        group += cubes as usize;
    }
    red[t] = a0;
    red[threads + t] = a1;
    red[2 * threads + t] = a2;
    sync_cube();
    tree_sum3::<F>(&mut red, threads);
    if t == 0 {
        #[unroll]
        for j in 0..3usize {
            partials[CUBE_POS * 3 + j] = red[j * threads];
        }
    }
}

/// One cube: sums the per-cube partials in a fixed order (strided per thread, then a tree),
/// writes `sums = (s0, s1, s2)` and the loss.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn loss_finish_kernel<F: Float>(
    partials: &Tensor<F>,
    sums: &mut Tensor<F>,
    loss: &mut Tensor<F>,
    eps: InputScalar,
    scale: InputScalar,
    sc: InputScalar,
    cubes: u32,
    #[comptime] threads: usize,
    #[comptime] sc_on: bool,
) {
    let mut red = SharedMemory::<F>::new(comptime![3 * threads]);
    let t = UNIT_POS_X as usize;
    let mut a = Array::<F>::new(3usize);
    #[unroll]
    for j in 0..3usize {
        a[j] = F::new(0.0);
    }
    let mut c = t;
    while c < cubes as usize {
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
        let mut value = s0 * scale.get::<F>();
        if comptime![sc_on] {
            let e = eps.get::<F>();
            value += sc.get::<F>() * F::sqrt(s1 + e) / F::sqrt(s2 + e);
        }
        loss[0] = value;
    }
}

/// Per chunk of frames: both frames' per-offset gradients from the loss gradient.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn loss_backward_kernel<F: Float>(
    pred: &Tensor<F>,
    target: &Tensor<F>,
    window: &Tensor<F>,
    tw_re: &Tensor<F>,
    tw_im: &Tensor<F>,
    grad_loss: &Tensor<F>,
    sums: &Tensor<F>,
    grad_frames_p: &mut Tensor<F>,
    grad_frames_t: &mut Tensor<F>,
    eps: InputScalar,
    scale: InputScalar,
    sc: InputScalar,
    frame_offset: u32,
    total: u32,
    frames: u32,
    t_len: u32,
    hop: u32,
    #[comptime] log_w: usize,
    #[comptime] rows: usize,
    #[comptime] threads: usize,
    #[comptime] magnitude: u32,
    #[comptime] distance: u32,
    #[comptime] sc_on: bool,
) {
    let w = comptime![1usize << log_w];
    let half = comptime![w / 2];
    let mut s_re = SharedMemory::<F>::new(comptime![2 * rows * w]);
    let mut s_im = SharedMemory::<F>::new(comptime![2 * rows * w]);
    let total = total as usize;
    let offset = frame_offset as usize;
    let first = CUBE_POS * rows;
    if first >= total {
        terminate!();
    }
    let eps: F = eps.get::<F>();
    // ∂L/∂s0, ∂L/∂s1, ∂L/∂s2.
    let g = grad_loss[0];
    let g0 = g * scale.get::<F>();
    let mut g1 = F::new(0.0);
    let mut g2 = F::new(0.0);
    if comptime![sc_on] {
        let num = F::sqrt(sums[1] + eps);
        let den = F::sqrt(sums[2] + eps);
        let gs = g * sc.get::<F>();
        g1 = gs / (F::new(2.0) * num * den);
        g2 = F::new(0.0) - gs * num / (F::new(2.0) * den * den * den);
    }
    let (frames, t_len, hop) = (frames as usize, t_len as usize, hop as usize);
    load_frames::<F>(
        pred,
        window,
        &mut s_re,
        &mut s_im,
        0,
        offset + first,
        offset + total,
        frames,
        t_len,
        hop,
        log_w,
        rows,
        threads,
    );
    load_frames::<F>(
        target,
        window,
        &mut s_re,
        &mut s_im,
        rows,
        offset + first,
        offset + total,
        frames,
        t_len,
        hop,
        log_w,
        rows,
        threads,
    );
    sync_cube();
    fft_stages::<F>(&mut s_re, &mut s_im, tw_re, tw_im, log_w, comptime![2 * rows], threads, false);

    let t = UNIT_POS_X as usize;
    #[unroll]
    for q in 0..comptime![rows * w / threads] {
        let e = t + q * threads;
        let r = e / w;
        let k = e % w;
        let ep = r * w + k;
        let et = (rows + r) * w + k;
        let (pr, pi) = (s_re[ep], s_im[ep]);
        let (qr, qi) = (s_re[et], s_im[et]);
        let mut cp = F::new(0.0);
        let mut ct = F::new(0.0);
        if k <= half && first + r < total {
            let (pp, qq) = (pr * pr + pi * pi, qr * qr + qi * qi);
            let mp = magnitude_of::<F>(pp, eps, magnitude);
            let mt = magnitude_of::<F>(qq, eps, magnitude);
            let diff = mp - mt;
            let mut dd = F::new(2.0) * diff;
            if comptime![distance == 0] {
                dd = F::new(0.0);
                if diff > F::new(0.0) {
                    dd = F::new(1.0);
                } else if diff < F::new(0.0) {
                    dd = F::new(-1.0);
                }
            }
            // s1 = Σ (mt − mp)², s2 = Σ mt².
            let gp = g0 * dd + g1 * F::new(2.0) * diff;
            let gt = F::new(0.0) - g0 * dd - g1 * F::new(2.0) * diff + g2 * F::new(2.0) * mt;
            cp = gp * magnitude_slope::<F>(pp, eps, magnitude);
            ct = gt * magnitude_slope::<F>(qq, eps, magnitude);
        }
        s_re[ep] = cp * pr;
        s_im[ep] = cp * pi;
        s_re[et] = ct * qr;
        s_im[et] = ct * qi;
    }
    sync_cube();
    fft_stages::<F>(&mut s_re, &mut s_im, tw_re, tw_im, log_w, comptime![2 * rows], threads, true);

    #[unroll]
    for q in 0..comptime![rows * w / threads] {
        let e = t + q * threads;
        let r = e / w;
        let n = e % w;
        if first + r < total {
            let src = r * w + reverse_bits(n, log_w);
            let wn = window[n];
            grad_frames_p[(first + r) * w + n] = wn * s_re[src];
            grad_frames_t[(first + r) * w + n] = wn * s_re[rows * w + src];
        }
    }
}

/// The fused loss: returns `(loss [1], sums [3])`; `sums` is what the backward needs. The caller
/// checks [`loss_supported`] and the shapes first.
pub fn loss_forward<R: CubeRuntime, F: FloatElement>(
    pred: CubeTensor<R>,
    target: CubeTensor<R>,
    tables: &Tables<R>,
    p: LossParams,
) -> (CubeTensor<R>, CubeTensor<R>) {
    let dims = pred.meta.shape().clone();
    let (signals, t) = (dims[0], dims[1]);
    let win = tables.win();
    let (pred, target) = (into_contiguous(pred), into_contiguous(target));
    let client = pred.client.clone();
    let plan: Plan = plan(&client, win);
    let frames = frames_of(t, win, p.hop);
    let total = signals * frames;
    let cubes = total.div_ceil(plan.rows).clamp(1, MAX_LOSS_CUBES);
    let partials = empty::<R, F>(&pred, vec![cubes, 3]);
    let sums = empty::<R, F>(&pred, vec![3]);
    let loss = empty::<R, F>(&pred, vec![1]);
    loss_forward_kernel::launch::<F, R>(
        &client,
        CubeCount::Static(cubes as u32, 1, 1),
        CubeDim::new_1d(plan.threads as u32),
        pred.into_tensor_arg(),
        target.into_tensor_arg(),
        tables.window.clone().into_tensor_arg(),
        tables.tw_re.clone().into_tensor_arg(),
        tables.tw_im.clone().into_tensor_arg(),
        partials.clone().into_tensor_arg(),
        InputScalar::new(p.eps, F::dtype()),
        total as u32,
        frames as u32,
        t as u32,
        p.hop as u32,
        cubes as u32,
        plan.log_n,
        plan.rows,
        plan.threads,
        magnitude_code(p.magnitude),
        distance_code(p.distance),
    );
    loss_finish_kernel::launch::<F, R>(
        &client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(FINISH_THREADS as u32),
        partials.into_tensor_arg(),
        sums.clone().into_tensor_arg(),
        loss.clone().into_tensor_arg(),
        InputScalar::new(p.eps, F::dtype()),
        InputScalar::new(p.scale, F::dtype()),
        InputScalar::new(p.spectral_convergence, F::dtype()),
        cubes as u32,
        FINISH_THREADS,
        p.spectral_convergence > 0.0,
    );
    (loss, sums)
}

/// The fused loss's backward: the loss gradient `[1]`, the forward's `sums` and inputs → the
/// gradients of pred and target, `[signals, T]` each.
pub fn loss_backward<R: CubeRuntime, F: FloatElement>(
    grad_loss: CubeTensor<R>,
    sums: CubeTensor<R>,
    pred: CubeTensor<R>,
    target: CubeTensor<R>,
    tables: &Tables<R>,
    p: LossParams,
) -> (CubeTensor<R>, CubeTensor<R>) {
    let dims = pred.meta.shape().clone();
    let (signals, t) = (dims[0], dims[1]);
    let win = tables.win();
    let (pred, target, grad_loss) = (into_contiguous(pred), into_contiguous(target), into_contiguous(grad_loss));
    let client = pred.client.clone();
    let plan = plan(&client, win);
    let frames = frames_of(t, win, p.hop);
    let chunk = signal_chunk::<F>(signals, frames, win);
    let grad_p = empty::<R, F>(&pred, vec![signals, t]);
    let grad_t = empty::<R, F>(&pred, vec![signals, t]);
    let frames_p = empty::<R, F>(&pred, vec![chunk * frames, win]);
    let frames_t = empty::<R, F>(&pred, vec![chunk * frames, win]);
    let mut start = 0;
    while start < signals {
        let count = chunk.min(signals - start);
        let total = count * frames;
        loss_backward_kernel::launch::<F, R>(
            &client,
            grid(total.div_ceil(plan.rows)),
            CubeDim::new_1d(plan.threads as u32),
            pred.clone().into_tensor_arg(),
            target.clone().into_tensor_arg(),
            tables.window.clone().into_tensor_arg(),
            tables.tw_re.clone().into_tensor_arg(),
            tables.tw_im.clone().into_tensor_arg(),
            grad_loss.clone().into_tensor_arg(),
            sums.clone().into_tensor_arg(),
            frames_p.clone().into_tensor_arg(),
            frames_t.clone().into_tensor_arg(),
            InputScalar::new(p.eps, F::dtype()),
            InputScalar::new(p.scale, F::dtype()),
            InputScalar::new(p.spectral_convergence, F::dtype()),
            (start * frames) as u32,
            total as u32,
            frames as u32,
            t as u32,
            p.hop as u32,
            plan.log_n,
            plan.rows,
            plan.threads,
            magnitude_code(p.magnitude),
            distance_code(p.distance),
            p.spectral_convergence > 0.0,
        );
        overlap_add::<R, F>(&frames_p, &grad_p, start, count, frames, t, p.hop, win);
        overlap_add::<R, F>(&frames_t, &grad_t, start, count, frames, t, p.hop, win);
        start += count;
    }
    (grad_p, grad_t)
}
