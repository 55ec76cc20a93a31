//! Fused butterfly tangent (forward-mode derivative): the kernel and its launch wrapper.
//!
//! Each cube carries its lines and their tangents through the pass's stages in shared memory,
//! `y ← T y` and `dy ← T dy + V y` per 2×2 block (`T` the twiddles, `V` the twiddle
//! direction), so a Jacobian-vector product of the whole butterfly is one launch per pass
//! instead of several tensor ops per stage. Four lines of shared memory per line transformed,
//! so the passes are those of the forward at twice the element size.

use burn_cubecl::{tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::{prelude::*, CubeDim};

use super::forward::{line_element, load_lines, planar_split, slot_of, swizzled, swizzled_pair, twiddle_of};
use super::{block_times, load_block, passes, InputOrder, Pass, PassConfig, Split, SplitInput, TwiddleTables};
use crate::ops::cubecl::{empty, grid};
use crate::ops::tuning::DeviceLimits;

/// Stores the cube's lines from `re`, `im` into the packed `[2, batch, n]` output `y`.
#[cube]
fn store_lines<F: Float>(
    re: &SharedMemory<F>,
    im: &SharedMemory<F>,
    y: &mut Array<F>,
    first_line: usize,
    batch: usize,
    #[comptime] cfg: PassConfig,
) {
    let local = comptime![1usize << cfg.log_local];
    let n = comptime![1usize << cfg.log_n];
    #[unroll]
    for q in 0..comptime![cfg.rows * local / cfg.threads] {
        let (l, j) = slot_of(UNIT_POS_X as usize + q * comptime![cfg.threads], cfg);
        let (row, i) = line_element(first_line + l, j, cfg);
        if row < batch {
            let at = swizzled(l * local + j, cfg);
            y[row * n + i] = re[at];
            y[batch * n + row * n + i] = im[at];
        }
    }
}

/// A pass's inputs and their tangents.
#[derive(CubeLaunch, CubeType)]
pub(crate) struct Dual<F: Float> {
    pub x: SplitInput<F>,
    pub dx: SplitInput<F>,
}

/// A pass's outputs and their tangents, packed `[2, batch, n]` each.
#[derive(CubeLaunch, CubeType)]
pub(crate) struct DualOutputs<F: Float> {
    pub y: Array<F>,
    pub dy: Array<F>,
}

/// One cube carries `rows` lines and their tangents through the pass: load (permuted on the
/// first pass), the stages, store `y` and `dy` packed `[2, batch, n]` each. Thread `t` handles
/// butterflies `t, t + threads, …` of every stage.
#[cube(launch_unchecked)]
pub(crate) fn butterfly_tangent_kernel<F: Float>(
    input: &Dual<F>,
    order: &Array<u32>,
    twiddles: &TwiddleTables<F>,
    directions: &TwiddleTables<F>,
    out: &mut DualOutputs<F>,
    batch: u32,
    #[comptime] cfg: PassConfig,
) {
    let lines = comptime![cfg.rows << cfg.log_local];
    let half = comptime![1usize << (cfg.log_local - 1)];
    let mut s_re = SharedMemory::<F>::new(lines);
    let mut s_im = SharedMemory::<F>::new(lines);
    let mut d_re = SharedMemory::<F>::new(lines);
    let mut d_im = SharedMemory::<F>::new(lines);
    let batch = batch as usize;
    let first_line = CUBE_POS * comptime![cfg.rows];
    if first_line / comptime![cfg.lines_per_row()] >= batch {
        terminate!();
    }
    load_lines(&input.x, order, &mut s_re, &mut s_im, first_line, batch, cfg);
    load_lines(&input.dx, order, &mut d_re, &mut d_im, first_line, batch, cfg);
    sync_cube();

    #[unroll]
    for s in 0..comptime![cfg.log_local] {
        let st = comptime![1usize << s];
        #[unroll]
        for p in 0..comptime![cfg.rows * half / cfg.threads] {
            let b = UNIT_POS_X as usize + p * comptime![cfg.threads];
            let (k, l) = (b % half, b / half);
            let i0 = (l << comptime![cfg.log_local]) + ((k >> s) << (s + 1)) + (k & (st - 1));
            let (i0, i1) = swizzled_pair(i0, st, cfg);
            let w = twiddle_of(first_line + l, k, cfg);
            let tw = load_block(twiddles, comptime![cfg.stage0] + s, w, comptime![1usize << (cfg.log_n - 1)]);
            let tv = load_block(directions, comptime![cfg.stage0] + s, w, comptime![1usize << (cfg.log_n - 1)]);
            let (ar, ai, br, bi) = (s_re[i0], s_im[i0], s_re[i1], s_im[i1]);
            let (y0r, y0i, y1r, y1i) = block_times(&tw, ar, ai, br, bi);
            let (e0r, e0i, e1r, e1i) = block_times(&tw, d_re[i0], d_im[i0], d_re[i1], d_im[i1]);
            let (f0r, f0i, f1r, f1i) = block_times(&tv, ar, ai, br, bi);
            s_re[i0] = y0r;
            s_im[i0] = y0i;
            s_re[i1] = y1r;
            s_im[i1] = y1i;
            d_re[i0] = e0r + f0r;
            d_im[i0] = e0i + f0i;
            d_re[i1] = e1r + f1r;
            d_im[i1] = e1i + f1i;
        }
        sync_cube();
    }

    store_lines(&s_re, &s_im, &mut out.y, first_line, batch, cfg);
    store_lines(&d_re, &d_im, &mut out.dy, first_line, batch, cfg);
}

/// The tangent's passes for `n`: the forward's at twice the element size (four lines of
/// shared memory per line transformed instead of two).
pub(crate) fn tangent_passes(n: usize, elem: usize, limits: &DeviceLimits) -> Option<Vec<Pass>> {
    passes(n, 2 * elem, limits)
}

/// The tangent's passes for `n` on `device` in float type `F`.
fn device_tangent_passes<R: CubeRuntime, F: FloatElement>(n: usize, device: &R::Device) -> Option<Vec<Pass>> {
    tangent_passes(n, std::mem::size_of::<F>(), &DeviceLimits::of(&R::client(device)))
}

/// Whether the fused tangent runs for size `n` on `device` in float type `F`.
pub fn tangent_supported<R: CubeRuntime, F: FloatElement>(n: usize, device: &R::Device) -> bool {
    device_tangent_passes::<R, F>(n, device).is_some()
}

/// Launches one pass of the tangent: `(x, dx)`, planar twiddles and directions → packed
/// `(y, dy)`, `[2, batch, n]` each.
fn launch_pass<R: CubeRuntime, F: FloatElement>(
    pass: &Pass,
    x: &Split<R>,
    dx: &Split<R>,
    tw: &Split<R>,
    dtw: &Split<R>,
    batch: usize,
    order: &InputOrder<R>,
) -> (CubeTensor<R>, CubeTensor<R>) {
    let n = 1usize << pass.log_n;
    let y = empty::<R, F>(&x.re, vec![2, batch, n]);
    let dy = empty::<R, F>(&x.re, vec![2, batch, n]);
    let plan = pass.forward;
    let cubes = (batch * pass.lines_per_row()).div_ceil(plan.rows);
    // SAFETY: rows past the batch are masked; shared-memory and twiddle indices stay below
    // their comptime sizes by construction (the same plan as the forward's, at twice the
    // element size, so its four shared lines fit).
    unsafe {
        butterfly_tangent_kernel::launch_unchecked::<F, R>(
            &x.re.client,
            grid(cubes),
            CubeDim::new_1d(plan.threads as u32),
            DualLaunch::new(x.arg::<F>(), dx.arg::<F>()),
            order.table.clone().into_array_arg(),
            tw.twiddles::<F>(),
            dtw.twiddles::<F>(),
            DualOutputsLaunch::new(y.clone().into_array_arg(), dy.clone().into_array_arg()),
            batch as u32,
            pass.config(plan, order.order, false),
        );
    }
    (y, dy)
}

/// Launches the fused tangent: `x`, `dx` (`(re, im)`, `[batch, n]`), twiddles `tw` and their
/// direction `dtw` (`(re, im)`, `[log2 n, n/2, 2, 2]`) → packed `(y, dy)`, `[2, batch, n]`
/// each, the inputs read in `order` as the first pass loads them. The caller checks
/// [`tangent_supported`] first.
pub fn tangent<R: CubeRuntime, F: FloatElement>(
    x: (CubeTensor<R>, CubeTensor<R>),
    dx: (CubeTensor<R>, CubeTensor<R>),
    tw: (CubeTensor<R>, CubeTensor<R>),
    dtw: (CubeTensor<R>, CubeTensor<R>),
    order: &InputOrder<R>,
) -> (CubeTensor<R>, CubeTensor<R>) {
    let dims = x.0.meta.shape().clone();
    let (batch, n) = (dims[0], dims[1]);
    let passes =
        device_tangent_passes::<R, F>(n, &x.0.device).expect("butterfly tangent: the caller checks tangent_supported");
    let (x, dx) = (Split::new(x.0, x.1), Split::new(dx.0, dx.1));
    let tw = planar_split::<R, F>(&Split::new(tw.0, tw.1), n / 2);
    let dtw = planar_split::<R, F>(&Split::new(dtw.0, dtw.1), n / 2);
    let (mut y, mut dy) = launch_pass::<R, F>(&passes[0], &x, &dx, &tw, &dtw, batch, order);
    for pass in &passes[1..] {
        (y, dy) = launch_pass::<R, F>(pass, &Split::packed(y), &Split::packed(dy), &tw, &dtw, batch, &order.natural());
    }
    (y, dy)
}
