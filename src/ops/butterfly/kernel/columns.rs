//! The second pass of a two-pass forward in registers: each thread holds one column (the
//! `N / 2^stage0` samples `l, l + 2^stage0, …` of a row, `l < 2^stage0`) and runs the pass's
//! stages on it, for a few batch rows. A stage `p ≥ stage0` mixes bit `p` of the index, which
//! is a bit of the column's element number, so no sample leaves its thread: no shared memory,
//! no barrier. Consecutive threads take consecutive columns, so every load and store of a warp
//! is one line; the column's twiddle blocks are the same for every row, loaded once and kept in
//! registers across the thread's rows.

use burn_cubecl::{tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::{prelude::*, CubeDim};

use super::{Split, SplitInput, TwiddleTables};
use crate::ops::cubecl::{empty, grid};
use crate::ops::onchip::{apply, SplitArray};
use crate::ops::tuning::{COLUMN_ROWS_PER_THREAD, COLUMN_THREADS};

/// Most stages the pass holds in registers (a column of 4 samples, 4 twiddle blocks of 8 floats).
pub(crate) const MAX_COLUMN_STAGES: usize = 2;

/// What the kernel is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ColumnsConfig {
    /// log2 N of the whole transform.
    pub log_n: usize,
    /// The pass's first stage: a row has `2^stage0` columns, their samples `2^stage0` apart.
    pub stage0: usize,
}

impl ColumnsConfig {
    /// The pass from `stage0` to the last stage of `2^log_n` points, where its stages fit a
    /// thread (at most [`MAX_COLUMN_STAGES`]) and its columns fill whole cubes.
    pub fn new(log_n: usize, stage0: usize) -> Option<Self> {
        let stages = log_n.checked_sub(stage0)?;
        ((1..=MAX_COLUMN_STAGES).contains(&stages) && (1usize << stage0).is_multiple_of(COLUMN_THREADS))
            .then_some(ColumnsConfig { log_n, stage0 })
    }

    /// Samples a column holds.
    fn column_len(&self) -> usize {
        1 << (self.log_n - self.stage0)
    }
}

/// Stages `stage0 …` of the packed `[2, batch, N]` intermediate `x` → packed `output`, twiddles
/// planar `[log2 N, 4, N/2]`.
#[cube(launch_unchecked)]
fn butterfly_columns_kernel<F: Float>(
    x: &SplitInput<F>,
    twiddles: &TwiddleTables<F>,
    output: &mut Array<F>,
    batch: u32,
    #[comptime] cfg: ColumnsConfig,
) {
    let n = comptime![1usize << cfg.log_n];
    let half_n = comptime![n / 2];
    let stage0 = comptime![cfg.stage0];
    let len = comptime![cfg.column_len()];
    let blocks = comptime![(1usize << stage0) / COLUMN_THREADS];
    let batch = batch as usize;
    let first_row = (CUBE_POS / blocks) * COLUMN_ROWS_PER_THREAD;
    if first_row >= batch {
        terminate!();
    }
    let l = (CUBE_POS % blocks) * COLUMN_THREADS + UNIT_POS_X as usize;
    let plane = batch * n;
    let im_offset = x.im_offset as usize;
    let mut regs = SplitArray::<F> { re: Array::<F>::new(len), im: Array::<F>::new(len) };
    #[unroll]
    for r in 0..COLUMN_ROWS_PER_THREAD {
        let row = first_row + r;
        if row < batch {
            let at = row * n + l;
            #[unroll]
            for e in 0..len {
                regs.re[e] = x.re[at + comptime![e << stage0]];
                regs.im[e] = x.im[im_offset + at + comptime![e << stage0]];
            }
            #[unroll]
            for s in 0..comptime![cfg.log_n - stage0] {
                let p = comptime![stage0 + s];
                #[unroll]
                for pair in 0..comptime![len / 2] {
                    // Element e0 (bit s clear) is index e0 · 2^stage0 + l; its block drops bit p.
                    let e0 = comptime![((pair >> s) << (s + 1)) | (pair & ((1usize << s) - 1))];
                    let k = comptime![((e0 >> (s + 1)) << p) | ((e0 & ((1usize << s) - 1)) << stage0)];
                    let w = l + comptime![p * 4 * half_n + k];
                    apply(&mut regs, e0, comptime![e0 + (1usize << s)], twiddles, w, half_n);
                }
            }
            #[unroll]
            for e in 0..len {
                output[at + comptime![e << stage0]] = regs.re[e];
                output[plane + at + comptime![e << stage0]] = regs.im[e];
            }
        }
    }
}

/// Launches the column pass on the packed `[2, batch, N]` intermediate `x` with the planar
/// twiddles `tw` → packed `[2, batch, N]`.
pub(crate) fn forward<R: CubeRuntime, F: FloatElement>(
    x: &Split<R>,
    tw: &Split<R>,
    batch: usize,
    cfg: ColumnsConfig,
) -> CubeTensor<R> {
    let n = 1usize << cfg.log_n;
    let output = empty::<R, F>(&x.re, vec![2, batch, n]);
    let cubes = batch.div_ceil(COLUMN_ROWS_PER_THREAD) * ((1 << cfg.stage0) / COLUMN_THREADS);
    // SAFETY: rows past the batch are masked; a column's samples `l + e · 2^stage0` stay below
    // N; twiddle reads stay within the planar `[log2 N, 4, N/2]` tables (block `k + l < N/2`).
    unsafe {
        butterfly_columns_kernel::launch_unchecked::<F, R>(
            &x.re.client,
            grid(cubes),
            CubeDim::new_1d(COLUMN_THREADS as u32),
            x.arg::<F>(),
            tw.twiddles::<F>(),
            output.clone().into_array_arg(),
            batch as u32,
            cfg,
        );
    }
    output
}
