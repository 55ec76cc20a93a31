//! What every on-chip kernel reads and computes with: the input orders, bit reversal,
//! split-complex inputs (real and imaginary parts apart), and 2×2 complex twiddle blocks.

use burn_cubecl::{kernel::into_contiguous, tensor::CubeTensor, CubeRuntime};
use cubecl::prelude::*;

/// `i` with its lowest `bits` bits reversed (`i < 2^bits ≤ 2^32`): one bit-reversal instruction
/// (`__brev`, WGSL's `reverseBits`) and a shift.
#[cube]
pub(crate) fn reverse_bits(i: usize, #[comptime] bits: usize) -> usize {
    let mut r = 0usize;
    if comptime![bits > 0] {
        r = ((i as u32).reverse_bits() >> comptime![(32 - bits) as u32]) as usize;
    }
    r
}

/// How a first pass orders its input: the compiled part of the input permutation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Order {
    /// `x[i]`.
    Natural,
    /// `x[bitrev(i)]`, the index computed.
    BitReversed,
    /// `x[g[i]]`: any other permutation, its indices read from a table on the device.
    Table,
}

/// A cube's split-complex elements in shared memory: real and imaginary parts apart.
#[derive(CubeType)]
pub(crate) struct SharedSplit<F: Float> {
    pub re: SharedMemory<F>,
    pub im: SharedMemory<F>,
}

/// A thread's split-complex elements in registers: real and imaginary parts apart.
#[derive(CubeType)]
pub(crate) struct SplitArray<F: Float> {
    pub re: Array<F>,
    pub im: Array<F>,
}

/// A split-complex input in a kernel: real parts, and imaginary parts from `im_offset` on in
/// `im` (so a packed `[2, batch, n]` intermediate can be passed as both).
#[derive(CubeLaunch, CubeType)]
pub(crate) struct SplitInput<F: Float> {
    pub re: Array<F>,
    pub im: Array<F>,
    pub im_offset: u32,
}

/// The twiddle tables in a kernel, `[log2 n · n/2 · 4]` each (re, im).
#[derive(CubeLaunch, CubeType)]
pub(crate) struct TwiddleTables<F: Float> {
    pub re: Array<F>,
    pub im: Array<F>,
}

/// One 2×2 complex block of twiddles.
#[derive(CubeType)]
pub(crate) struct Twiddles<F: Float> {
    pub(crate) t00r: F,
    pub(crate) t00i: F,
    pub(crate) t01r: F,
    pub(crate) t01i: F,
    pub(crate) t10r: F,
    pub(crate) t10i: F,
    pub(crate) t11r: F,
    pub(crate) t11i: F,
}

/// The 2×2 block `k` of stage `stage` from planar tables `[log2 n, 4, n/2]` (see
/// the forward's `planar_twiddles`): consecutive threads read consecutive blocks, so each of the eight loads
/// of a warp is one contiguous 128-byte line.
#[cube]
pub(crate) fn load_block<F: Float>(
    twiddles: &TwiddleTables<F>,
    stage: usize,
    k: usize,
    #[comptime] half_n: usize,
) -> Twiddles<F> {
    let w = stage * comptime![4 * half_n] + k;
    Twiddles::<F> {
        t00r: twiddles.re[w],
        t00i: twiddles.im[w],
        t01r: twiddles.re[w + half_n],
        t01i: twiddles.im[w + half_n],
        t10r: twiddles.re[w + comptime![2 * half_n]],
        t10i: twiddles.im[w + comptime![2 * half_n]],
        t11r: twiddles.re[w + comptime![3 * half_n]],
        t11i: twiddles.im[w + comptime![3 * half_n]],
    }
}

/// `T · (a, b)` for one complex 2×2 block: `(c0r, c0i, c1r, c1i)`.
#[cube]
pub(crate) fn block_times<F: Float>(tw: &Twiddles<F>, ar: F, ai: F, br: F, bi: F) -> (F, F, F, F) {
    (
        tw.t00r * ar - tw.t00i * ai + tw.t01r * br - tw.t01i * bi,
        tw.t00r * ai + tw.t00i * ar + tw.t01r * bi + tw.t01i * br,
        tw.t10r * ar - tw.t10i * ai + tw.t11r * br - tw.t11i * bi,
        tw.t10r * ai + tw.t10i * ar + tw.t11r * bi + tw.t11i * br,
    )
}

/// A split-complex tensor on the host, as [`SplitInput`] takes it.
#[derive(Clone, Debug)]
pub(crate) struct Split<R: CubeRuntime> {
    pub re: CubeTensor<R>,
    pub im: CubeTensor<R>,
    pub im_offset: usize,
}

impl<R: CubeRuntime> Split<R> {
    /// Real and imaginary parts apart, made contiguous.
    pub fn new(re: CubeTensor<R>, im: CubeTensor<R>) -> Self {
        Split { re: into_contiguous(re), im: into_contiguous(im), im_offset: 0 }
    }

    /// One tensor standing for both parts (made contiguous once), where a kernel reads only one
    /// of them or neither.
    pub fn both(t: CubeTensor<R>) -> Self {
        let t = into_contiguous(t);
        Split { re: t.clone(), im: t, im_offset: 0 }
    }

    /// A packed `[2, batch, n]` tensor: re then im.
    pub fn packed(t: CubeTensor<R>) -> Self {
        let dims = t.meta.shape();
        let im_offset = dims[1] * dims[2];
        Split { re: t.clone(), im: t, im_offset }
    }

    /// As a kernel input.
    pub fn arg<F: Float>(&self) -> SplitInputLaunch<F, R> {
        SplitInputLaunch::new(self.re.clone().into_array_arg(), self.im.clone().into_array_arg(), self.im_offset as u32)
    }

    /// As the kernels' twiddle tables (parts apart: the offset is 0).
    pub fn twiddles<F: Float>(&self) -> TwiddleTablesLaunch<F, R> {
        debug_assert_eq!(self.im_offset, 0);
        TwiddleTablesLaunch::new(self.re.clone().into_array_arg(), self.im.clone().into_array_arg())
    }
}

/// Shared-memory tree sum of `buf[j·threads + t]` over t, for j < 3; the sums end in
/// `buf[j·threads]`.
#[cube]
pub(crate) fn tree_sum3<F: Float>(buf: &mut SharedMemory<F>, #[comptime] threads: usize) {
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
