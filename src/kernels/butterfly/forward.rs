//! Fused butterfly forward: the kernel and its launch wrapper.

use burn::tensor::Shape;
use burn_cubecl::{kernel::into_contiguous, tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::{prelude::*, CubeDim};

use super::{grid, Plan};
use crate::butterfly::Permutation;

/// `i` with its lowest `bits` bits reversed.
#[cube]
pub(crate) fn reverse_bits(i: usize, #[comptime] bits: usize) -> usize {
    let mut r = 0;
    #[unroll]
    for b in 0..bits {
        r = (r << 1) | ((i >> b) & 1);
    }
    r
}

/// Source index of position `i` after the input permutation.
#[cube]
pub(crate) fn permuted(i: usize, #[comptime] log_n: usize, #[comptime] bit_reverse: bool) -> usize {
    if comptime![bit_reverse] {
        reverse_bits(i, log_n)
    } else {
        i
    }
}

/// One cube transforms `rows` batch rows: load (permuted) into shared memory, run every stage
/// there, store. Thread `t` handles butterflies `t, t + threads, …` of every stage.
#[cube(launch)]
pub(crate) fn butterfly_forward_kernel<F: Float>(
    x_re: &Tensor<F>,
    x_im: &Tensor<F>,
    tw_re: &Tensor<F>,
    tw_im: &Tensor<F>,
    output: &mut Tensor<F>,
    batch: u32,
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
    let batch = batch as usize;
    let first_row = CUBE_POS * rows;
    if first_row >= batch {
        terminate!();
    }
    let t = UNIT_POS_X as usize;

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
            let (t00r, t00i, t01r, t01i) = (tw_re[w], tw_im[w], tw_re[w + 1], tw_im[w + 1]);
            let (t10r, t10i, t11r, t11i) = (tw_re[w + 2], tw_im[w + 2], tw_re[w + 3], tw_im[w + 3]);
            s_re[i0] = t00r * ar - t00i * ai + t01r * br - t01i * bi;
            s_im[i0] = t00r * ai + t00i * ar + t01r * bi + t01i * br;
            s_re[i1] = t10r * ar - t10i * ai + t11r * br - t11i * bi;
            s_im[i1] = t10r * ai + t10i * ar + t11r * bi + t11i * br;
        }
        sync_cube();
    }

    let plane = batch * n;
    #[unroll]
    for q in 0..comptime![2 * per_thread] {
        let e = t + q * threads;
        let row = first_row + e / n;
        if row < batch {
            let dst = row * n + e % n;
            output[dst] = s_re[e];
            output[plane + dst] = s_im[e];
        }
    }
}

/// Launches the fused forward: `[batch, n]` re and im, twiddles `[log2 n, n/2, 2, 2]` → packed
/// `[2, batch, n]`. The caller checks [`fused_supported`](super::fused_supported) first.
pub fn forward<R: CubeRuntime, F: FloatElement>(
    x_re: CubeTensor<R>,
    x_im: CubeTensor<R>,
    tw_re: CubeTensor<R>,
    tw_im: CubeTensor<R>,
    perm: Permutation,
) -> CubeTensor<R> {
    let dims = x_re.meta.shape().clone();
    let (batch, n) = (dims[0], dims[1]);
    let (x_re, x_im, tw_re, tw_im) = (into_contiguous(x_re), into_contiguous(x_im), into_contiguous(tw_re), into_contiguous(tw_im));
    let client = x_re.client.clone();
    let plan = Plan::new(n, client.properties().hardware.max_units_per_cube as usize);
    let shape = Shape::from(vec![2, batch, n]);
    let buffer = client.empty(shape.num_elements() * core::mem::size_of::<F>());
    let output = CubeTensor::new_contiguous(client.clone(), x_re.device.clone(), shape, buffer, F::dtype());
    butterfly_forward_kernel::launch::<F, R>(
        &client,
        grid(batch.div_ceil(plan.rows)),
        CubeDim::new_1d(plan.threads as u32),
        x_re.into_tensor_arg(),
        x_im.into_tensor_arg(),
        tw_re.into_tensor_arg(),
        tw_im.into_tensor_arg(),
        output.clone().into_tensor_arg(),
        batch as u32,
        plan.log_n,
        plan.rows,
        plan.threads,
        perm == Permutation::BitReversal,
    );
    output
}
