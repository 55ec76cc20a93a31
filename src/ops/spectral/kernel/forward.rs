//! Fused spectral forward: every (frame, bin)'s magnitude, the frame's FFT on-chip.

use burn_cubecl::{kernel::into_contiguous, tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::{prelude::*, CubeDim};

use super::{fft_stages, load_frames, magnitude_code, magnitude_of, plan, Tables};
use crate::ops::cubecl::empty;
use crate::ops::cubecl::grid;
use crate::ops::spectral::Magnitude;

/// One cube per `rows` frames: load them (windowed, bit-reversed), transform on-chip, write
/// bins 0…W/2 of each, all (frame, bin) pairs in parallel.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn stft_magnitude_kernel<F: Float>(
    x: &Tensor<F>,
    window: &Tensor<F>,
    tw_re: &Tensor<F>,
    tw_im: &Tensor<F>,
    output: &mut Tensor<F>,
    eps: InputScalar,
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
    let bins = comptime![w / 2 + 1];
    let mut s_re = SharedMemory::<F>::new(comptime![rows * w]);
    let mut s_im = SharedMemory::<F>::new(comptime![rows * w]);
    let total = total as usize;
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
        first,
        total,
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
    for q in 0..comptime![(rows * bins).div_ceil(threads)] {
        let e = t + q * threads;
        let r = e / bins;
        let k = e % bins;
        if e < comptime![rows * bins] && first + r < total {
            let (re, im) = (s_re[r * w + k], s_im[r * w + k]);
            output[(first + r) * bins + k] = magnitude_of::<F>(re * re + im * im, eps, magnitude);
        }
    }
}

/// The number of frames of `t` samples (the caller has checked `t ≥ win`).
pub(crate) fn frames_of(t: usize, win: usize, hop: usize) -> usize {
    (t - win) / hop + 1
}

/// Launches the fused forward: signals `[signals, T]`, window `[W]`, twiddle tables `[W/2]` →
/// magnitudes `[signals, frames, W/2 + 1]`. The caller checks
/// [`fused_supported`](super::fused_supported) and `T ≥ W` first.
pub fn magnitudes<R: CubeRuntime, F: FloatElement>(
    x: CubeTensor<R>,
    tables: &Tables<R>,
    hop: usize,
    magnitude: Magnitude,
    eps: f64,
) -> CubeTensor<R> {
    let dims = x.meta.shape().clone();
    let (signals, t) = (dims[0], dims[1]);
    let win = tables.win();
    let x = into_contiguous(x);
    let client = x.client.clone();
    let plan = plan(&client, win);
    let frames = frames_of(t, win, hop);
    let total = signals * frames;
    let bins = win / 2 + 1;
    let output = empty::<R, F>(&x, vec![signals, frames, bins]);
    stft_magnitude_kernel::launch::<F, R>(
        &client,
        grid(total.div_ceil(plan.rows)),
        CubeDim::new_1d(plan.threads as u32),
        x.into_tensor_arg(),
        tables.window.clone().into_tensor_arg(),
        tables.tw_re.clone().into_tensor_arg(),
        tables.tw_im.clone().into_tensor_arg(),
        output.clone().into_tensor_arg(),
        InputScalar::new(eps, F::dtype()),
        total as u32,
        frames as u32,
        t as u32,
        hop as u32,
        plan.log_n,
        plan.rows,
        plan.threads,
        magnitude_code(magnitude),
    );
    output
}
