//! Fused butterfly backward: the kernel, the deterministic partial-sum reduction, and the launch
//! wrapper.
//!
//! For a stage `y0 = t00·x0 + t01·x1`, `y1 = t10·x0 + t11·x1` and a real loss, with gradients
//! written as complex numbers `g = ∂L/∂re + i·∂L/∂im`:
//! `g_x0 = conj(t00)·g_y0 + conj(t10)·g_y1`, `g_x1 = conj(t01)·g_y0 + conj(t11)·g_y1`, and
//! `g_tab = g_ya · conj(x_b)` summed over the batch.

use burn_cubecl::{kernel::into_contiguous, tensor::CubeTensor, CubeRuntime, FloatElement};

use crate::kernels::empty;
use cubecl::{prelude::*, CubeCount, CubeDim};

use super::forward::permuted;
use super::{grid, Plan};
use crate::butterfly::Permutation;

/// Cubes of the backward launch, at most: each loops over its share of the batch.
const MAX_BACKWARD_CUBES: usize = 512;

/// Each (cube, row slot) writes one partial twiddle gradient; their buffer stays under this many
/// bytes (storage bindings are limited to 128 MiB on some Vulkan drivers, lavapipe among them).
const MAX_PARTIAL_BYTES: usize = 64 << 20;

/// Each cube loops over row chunks `c, c + cubes, …`. Per chunk: load x (permuted), run the
/// forward stages keeping each thread's stage inputs in registers, load the output gradient, run
/// the stages backwards accumulating the twiddle gradient in registers, and store the input
/// gradient (un-permuted). At the end each (cube, row slot) writes its partial twiddle gradient.
#[cube(launch)]
pub(crate) fn butterfly_backward_kernel<F: Float>(
    grad_out: &Tensor<F>,
    x_re: &Tensor<F>,
    x_im: &Tensor<F>,
    tw_re: &Tensor<F>,
    tw_im: &Tensor<F>,
    grad_x: &mut Tensor<F>,
    partials: &mut Tensor<F>,
    batch: u32,
    cubes: u32,
    #[comptime] log_n: usize,
    #[comptime] rows: usize,
    #[comptime] threads: usize,
    #[comptime] bit_reverse: bool,
) {
    let n = comptime![1usize << log_n];
    let half = comptime![n / 2];
    let per_thread = comptime![rows * half / threads];
    let mut s_re = SharedMemory::<F>::new(comptime![rows * n]);
    let mut s_im = SharedMemory::<F>::new(comptime![rows * n]);
    // Stage inputs (x0r, x0i, x1r, x1i) and twiddle-gradient accumulators (8 per block).
    let mut saved = Array::<F>::new(comptime![log_n * per_thread * 4]);
    let mut acc = Array::<F>::new(comptime![log_n * per_thread * 8]);
    for a in 0..comptime![log_n * per_thread * 8] {
        acc[a] = F::new(0.0);
    }
    let batch = batch as usize;
    let cubes = cubes as usize;
    let cube = CUBE_POS;
    if cube >= cubes {
        terminate!();
    }
    let t = UNIT_POS_X as usize;
    let plane = batch * n;
    let chunks = batch.div_ceil(rows);

    let mut chunk = cube;
    while chunk < chunks {
        let first_row = chunk * rows;
        #[unroll]
        for q in 0..comptime![2 * per_thread] {
            let e = t + q * threads;
            let row = first_row + e / n;
            let src = permuted(e % n, log_n, bit_reverse);
            let mut vr = F::new(0.0);
            let mut vi = F::new(0.0);
            if row < batch {
                vr = x_re[row * n + src];
                vi = x_im[row * n + src];
            }
            s_re[e] = vr;
            s_im[e] = vi;
        }
        sync_cube();

        for s in 0..log_n {
            let st = 1usize << s;
            #[unroll]
            for p in 0..per_thread {
                let b = t + p * threads;
                let k = b % half;
                let i0 = (b / half) * n + ((k >> s) << (s + 1)) + (k & (st - 1));
                let i1 = i0 + st;
                let w = (s * half + k) * 4;
                let (ar, ai, br, bi) = (s_re[i0], s_im[i0], s_re[i1], s_im[i1]);
                let v = (s * per_thread + p) * 4;
                saved[v] = ar;
                saved[v + 1] = ai;
                saved[v + 2] = br;
                saved[v + 3] = bi;
                let (t00r, t00i, t01r, t01i) = (tw_re[w], tw_im[w], tw_re[w + 1], tw_im[w + 1]);
                let (t10r, t10i, t11r, t11i) = (tw_re[w + 2], tw_im[w + 2], tw_re[w + 3], tw_im[w + 3]);
                s_re[i0] = t00r * ar - t00i * ai + t01r * br - t01i * bi;
                s_im[i0] = t00r * ai + t00i * ar + t01r * bi + t01i * br;
                s_re[i1] = t10r * ar - t10i * ai + t11r * br - t11i * bi;
                s_im[i1] = t10r * ai + t10i * ar + t11r * bi + t11i * br;
            }
            sync_cube();
        }

        #[unroll]
        for q in 0..comptime![2 * per_thread] {
            let e = t + q * threads;
            let row = first_row + e / n;
            let mut gr = F::new(0.0);
            let mut gi = F::new(0.0);
            if row < batch {
                gr = grad_out[row * n + e % n];
                gi = grad_out[plane + row * n + e % n];
            }
            s_re[e] = gr;
            s_im[e] = gi;
        }
        sync_cube();

        for r in 0..log_n {
            let s = log_n - 1 - r;
            let st = 1usize << s;
            #[unroll]
            for p in 0..per_thread {
                let b = t + p * threads;
                let k = b % half;
                let i0 = (b / half) * n + ((k >> s) << (s + 1)) + (k & (st - 1));
                let i1 = i0 + st;
                let w = (s * half + k) * 4;
                let (g0r, g0i, g1r, g1i) = (s_re[i0], s_im[i0], s_re[i1], s_im[i1]);
                let v = (s * per_thread + p) * 4;
                let (ar, ai, br, bi) = (saved[v], saved[v + 1], saved[v + 2], saved[v + 3]);
                // g_tab += g_ya · conj(x_b); layout (re, im) × [t00, t01, t10, t11].
                let a = (s * per_thread + p) * 8;
                acc[a] += g0r * ar + g0i * ai;
                acc[a + 1] += g0i * ar - g0r * ai;
                acc[a + 2] += g0r * br + g0i * bi;
                acc[a + 3] += g0i * br - g0r * bi;
                acc[a + 4] += g1r * ar + g1i * ai;
                acc[a + 5] += g1i * ar - g1r * ai;
                acc[a + 6] += g1r * br + g1i * bi;
                acc[a + 7] += g1i * br - g1r * bi;
                let (t00r, t00i, t01r, t01i) = (tw_re[w], tw_im[w], tw_re[w + 1], tw_im[w + 1]);
                let (t10r, t10i, t11r, t11i) = (tw_re[w + 2], tw_im[w + 2], tw_re[w + 3], tw_im[w + 3]);
                // g_x0 = conj(t00)·g0 + conj(t10)·g1, g_x1 = conj(t01)·g0 + conj(t11)·g1.
                s_re[i0] = t00r * g0r + t00i * g0i + t10r * g1r + t10i * g1i;
                s_im[i0] = t00r * g0i - t00i * g0r + t10r * g1i - t10i * g1r;
                s_re[i1] = t01r * g0r + t01i * g0i + t11r * g1r + t11i * g1i;
                s_im[i1] = t01r * g0i - t01i * g0r + t11r * g1i - t11i * g1r;
            }
            sync_cube();
        }

        // Position i of the permuted vector came from x[perm(i)]: its gradient goes back there.
        #[unroll]
        for q in 0..comptime![2 * per_thread] {
            let e = t + q * threads;
            let row = first_row + e / n;
            if row < batch {
                let dst = row * n + permuted(e % n, log_n, bit_reverse);
                grad_x[dst] = s_re[e];
                grad_x[plane + dst] = s_im[e];
            }
        }
        sync_cube();
        chunk += cubes;
    }

    // partials: [cubes · rows, 2, log_n, half, 4]
    let entries = comptime![log_n * half * 4];
    for s in 0..log_n {
        #[unroll]
        for p in 0..per_thread {
            let b = t + p * threads;
            let k = b % half;
            let slot = cube * rows + b / half;
            let base = slot * 2 * entries + (s * half + k) * 4;
            let a = (s * per_thread + p) * 8;
            #[unroll]
            for j in 0..4usize {
                partials[base + j] = acc[a + 2 * j];
                partials[base + entries + j] = acc[a + 2 * j + 1];
            }
        }
    }
}

/// `out[e] = Σ_p parts[p · len + e]`, summed in the order p = 0, 1, …: deterministic.
#[cube(launch)]
pub(crate) fn sum_partials_kernel<F: Float>(parts: &Tensor<F>, out: &mut Tensor<F>, num_parts: u32, len: u32) {
    let e = ABSOLUTE_POS;
    let len = len as usize;
    if e >= len {
        terminate!();
    }
    let mut sum = F::new(0.0);
    for p in 0..num_parts as usize {
        sum += parts[p * len + e];
    }
    out[e] = sum;
}

/// Launches the fused backward. Takes the packed output gradient `[2, batch, n]` and the
/// forward's inputs; returns the packed input gradient `[2, batch, n]` and the twiddle gradient
/// `[2, log2 n · n/2 · 4]` (re then im).
pub fn backward<R: CubeRuntime, F: FloatElement>(
    grad_out: CubeTensor<R>,
    x_re: CubeTensor<R>,
    x_im: CubeTensor<R>,
    tw_re: CubeTensor<R>,
    tw_im: CubeTensor<R>,
    perm: Permutation,
) -> (CubeTensor<R>, CubeTensor<R>) {
    let dims = x_re.meta.shape().clone();
    let (batch, n) = (dims[0], dims[1]);
    let grad_out = into_contiguous(grad_out);
    let (x_re, x_im, tw_re, tw_im) = (into_contiguous(x_re), into_contiguous(x_im), into_contiguous(tw_re), into_contiguous(tw_im));
    let client = x_re.client.clone();
    let plan = Plan::new(n, client.properties().hardware.max_units_per_cube as usize);
    let entries = plan.log_n * (n / 2) * 4;
    let slot_bytes = plan.rows * 2 * entries * core::mem::size_of::<F>();
    let cubes = batch.div_ceil(plan.rows).min(MAX_BACKWARD_CUBES).min(MAX_PARTIAL_BYTES / slot_bytes).max(1);
    let grad_x = empty::<R, F>(&x_re, vec![2, batch, n]);
    let partials = empty::<R, F>(&x_re, vec![cubes * plan.rows, 2, entries]);
    let grad_tw = empty::<R, F>(&x_re, vec![2, entries]);
    butterfly_backward_kernel::launch::<F, R>(
        &client,
        grid(cubes),
        CubeDim::new_1d(plan.threads as u32),
        grad_out.into_tensor_arg(),
        x_re.into_tensor_arg(),
        x_im.into_tensor_arg(),
        tw_re.into_tensor_arg(),
        tw_im.into_tensor_arg(),
        grad_x.clone().into_tensor_arg(),
        partials.clone().into_tensor_arg(),
        batch as u32,
        cubes as u32,
        plan.log_n,
        plan.rows,
        plan.threads,
        perm == Permutation::BitReversal,
    );
    let len = 2 * entries;
    let block = 256;
    sum_partials_kernel::launch::<F, R>(
        &client,
        CubeCount::Static(len.div_ceil(block) as u32, 1, 1),
        CubeDim::new_1d(block as u32),
        partials.into_tensor_arg(),
        grad_tw.clone().into_tensor_arg(),
        (cubes * plan.rows) as u32,
        len as u32,
    );
    (grad_x, grad_tw)
}
