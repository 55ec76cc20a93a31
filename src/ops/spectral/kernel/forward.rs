//! Fused spectral forward: every (frame, bin)'s magnitude, the frame's FFT on-chip.

use burn_cubecl::{kernel::into_contiguous, tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::{prelude::*, CubeDim};

use super::Tables;
use super::{
    at, fft_stages, frame_config, load_frames, magnitude_of, FrameConfig, FrameLoad, FrameRange, FrameTables, Framing,
};
use crate::ops::cubecl::empty;
use crate::ops::cubecl::grid;
use crate::ops::onchip::SharedSplit;
use crate::ops::spectral::Magnitude;

/// One cube per `cfg.rows` frames: load them (windowed, bit-reversed), transform on-chip, write
/// bins 0…W/2 of each, all (frame, bin) pairs in parallel.
#[cube(launch)]
pub(crate) fn stft_magnitude_kernel<F: Float>(
    x: &Array<F>,
    tables: &FrameTables<F>,
    output: &mut Array<F>,
    eps: InputScalar,
    framing: &Framing,
    #[comptime] cfg: FrameConfig,
) {
    let w = comptime![1usize << cfg.log_w];
    let bins = comptime![w / 2 + 1];
    let rows = comptime![cfg.rows];
    let threads = comptime![cfg.threads];
    let mut shared = SharedSplit::<F> {
        re: SharedMemory::<F>::new(comptime![cfg.rows * w]),
        im: SharedMemory::<F>::new(comptime![cfg.rows * w]),
    };
    let total = framing.total as usize;
    let first = CUBE_POS * rows;
    if first >= total {
        terminate!();
    }
    let eps: F = eps.get::<F>();
    load_frames::<F>(x, x, &tables.window, &mut shared, first, framing, comptime![FrameLoad { cfg, pair: false }]);
    sync_cube();
    fft_stages::<F>(&mut shared, tables, cfg, false);

    let t = UNIT_POS_X as usize;
    #[unroll]
    for q in 0..comptime![(cfg.rows * bins).div_ceil(cfg.threads)] {
        let e = t + q * threads;
        let r = e / bins;
        let k = e % bins;
        if e < comptime![cfg.rows * bins] && first + r < total {
            let slot = at(r * w + k, cfg);
            let (re, im) = (shared.re[slot], shared.im[slot]);
            output[(first + r) * bins + k] = magnitude_of::<F>(re * re + im * im, eps, comptime![cfg.magnitude]);
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
    let cfg = frame_config::<R, F>(&client, win, magnitude);
    let range = FrameRange::all(signals, t, win, hop);
    let output = empty::<R, F>(&x, vec![signals, range.frames, win / 2 + 1]);
    stft_magnitude_kernel::launch::<F, R>(
        &client,
        grid(range.total.div_ceil(cfg.rows)),
        CubeDim::new_1d(cfg.threads as u32),
        x.into_array_arg(),
        tables.arg::<F>(),
        output.clone().into_array_arg(),
        InputScalar::new(eps, F::dtype()),
        range.arg(),
        cfg,
    );
    output
}
