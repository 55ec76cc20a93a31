//! The plan of the fused kernels' passes: how a transform of `n` points splits into launches
//! whose lines fit in the device's shared memory ([`passes`], [`backward_passes`]), and how each
//! launch maps lines and butterflies to cubes and threads ([`Plan`], [`Pass`], [`PassConfig`]).
//! The butterfly's kernels run them; the spectral kernels ask whether a frame fits one pass.

use burn_cubecl::{CubeRuntime, FloatElement};

use super::Order;
use crate::ops::cubecl::floor_pow2;
use crate::ops::tuning::{
    self, DeviceLimits, BACKWARD_BUTTERFLIES_PER_CUBE, FORWARD_MIN_ROWS, MAX_CUBE_THREADS, MIN_BUTTERFLIES_PER_CUBE,
};

/// Largest line one pass holds in shared memory on every device: 2 · 4096 · 4 bytes = 32 KiB in
/// f32, which every wgpu and CUDA device offers. A device whose shared-memory budget (chosen by
/// the kernel tuning) holds a longer row takes one pass up to that row.
pub const MAX_SINGLE_PASS_N: usize = 4096;

/// Largest N the fused butterfly handles (two passes). Above it (or where the twiddle gradient
/// would not fit one storage binding) the layer takes the reference path.
pub const MAX_FUSED_N: usize = 1 << 16;

/// Each (cube, line slot) of the backward writes one partial twiddle gradient; their buffer,
/// and the twiddle gradient itself, stay under this many bytes (storage bindings are limited to
/// 128 MiB on some Vulkan drivers, lavapipe among them).
pub(crate) const MAX_PARTIAL_BYTES: usize = 64 << 20;

/// How a launch maps rows and butterflies to cubes and threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// log2 n.
    pub log_n: usize,
    /// Batch rows held in shared memory at once by one cube.
    pub rows: usize,
    /// Threads per cube.
    pub threads: usize,
}

impl Plan {
    /// Several rows per cube for small n (at least 256 butterflies per stage); one or two
    /// butterflies per thread and stage, with at least 256 threads.
    pub fn new(n: usize, max_units: usize) -> Self {
        let half = n / 2;
        let rows = (MIN_BUTTERFLIES_PER_CUBE / half).max(1);
        // A power of two no larger than the device allows.
        let max_units = floor_pow2(max_units);
        let threads = (half / 2).max(MIN_BUTTERFLIES_PER_CUBE).min(rows * half).min(MAX_CUBE_THREADS).min(max_units);
        Plan { log_n: n.trailing_zeros() as usize, rows, threads }
    }

    /// The forward's plan: as many rows as fit in the device's budget
    /// ([`DeviceLimits::budget`]), at least [`FORWARD_MIN_ROWS`] where its `max_shared` bytes
    /// allow (at least one), and
    /// `clamp(n/2, 256, 1024)` threads. Each thread loads each of its twiddle blocks of a stage
    /// once for all the cube's rows (the twiddles, `2 log2 n` times the signal's bytes per row,
    /// are what limits a one-row plan).
    pub fn forward(n: usize, limits: &DeviceLimits, elem: usize) -> Self {
        let half = n / 2;
        let row_bytes = 2 * n * elem;
        let rows = (limits.budget() / row_bytes).max(FORWARD_MIN_ROWS.min(limits.max_shared / row_bytes)).max(1);
        let max_units = floor_pow2(limits.max_units);
        let threads = half.clamp(MIN_BUTTERFLIES_PER_CUBE, MAX_CUBE_THREADS).min(rows * half).min(max_units);
        Plan { log_n: n.trailing_zeros() as usize, rows, threads }
    }

    /// The backward's plan: [`Plan::new`] with [`BACKWARD_BUTTERFLIES_PER_CUBE`] butterflies
    /// per cube (one per thread for lines up to 512), and fewer rows where its lines would exceed
    /// the device's `max_shared` (down to one row).
    pub fn backward(n: usize, limits: &DeviceLimits, elem: usize) -> Self {
        let max_shared = limits.max_shared;
        let mut plan = Plan::new(n, limits.max_units);
        plan.rows = (BACKWARD_BUTTERFLIES_PER_CUBE / (n / 2)).max(1);
        plan.threads = plan.threads.min(plan.rows * n / 2);
        while plan.rows > 1 && plan.shared_bytes(elem) > max_shared {
            plan.rows /= 2;
            plan.threads = plan.threads.min(plan.rows * n / 2);
        }
        plan
    }

    /// Bytes of shared memory per cube for element size `elem` (the lines being transformed).
    pub fn shared_bytes(&self, elem: usize) -> usize {
        2 * self.rows * (1 << self.log_n) * elem
    }
}

/// Where element `linear` (= line · 2^log_local + index) of a cube's lines lives in shared
/// memory: `linear ^ φ(r)`, with `r = linear / 32` its run of 32 elements (one sweep of the 32
/// four-byte banks) and `φ(r) = 31·(r mod 2) ^ ((r >> max(1, log_local − 5)) << shift) mod 32`, a
/// permutation within each run, so the layout is as dense as the plain one.
///
/// Why: a warp's 32 butterflies of stage `s < 5` read 32 elements spread over two runs, all with
/// bit `s` clear; unswizzled, each bank is hit twice (Nsight Compute counted about half of the
/// backward's shared-memory wavefronts as bank conflicts: `docs/benchmarks.md#kernel-limits-h200`).
/// Inverting every odd run's low five bits sends one run's elements to the banks with bit `s`
/// set. The second term spreads line-major loads and stores (consecutive threads, element `j` of
/// consecutive lines) over the banks: `shift` is `log2(32 / min(rows, 32))`
/// ([`PassConfig::swizzle_shift`]). The butterfly kernels use `forward::swizzled`, the same
/// expression; this host twin is what the butterfly kernels' `swizzle_is_conflict_free` test checks on
/// every plan.
#[cfg(test)]
pub(crate) fn bank_swizzle(linear: usize, cfg: &PassConfig) -> usize {
    let run = linear >> 5;
    let group = run >> cfg.swizzle_group();
    linear ^ ((run & 1) * 31) ^ ((group << cfg.swizzle_shift()) & 31)
}

/// One launch over the lines of a batch: the stages `stage0 … stage0 + log_local − 1` of an
/// `N = 2^log_n` butterfly, on lines of `2^log_local` elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pass {
    /// log2 N of the whole transform.
    pub log_n: usize,
    /// First stage of this pass (0 for the first pass).
    pub stage0: usize,
    /// log2 of the line length (the stages of this pass).
    pub log_local: usize,
    /// Lines per cube and threads of the backward.
    pub plan: Plan,
    /// Lines per cube and threads of the forward.
    pub forward: Plan,
}

impl Pass {
    fn new(log_n: usize, stage0: usize, log_local: usize, limits: &DeviceLimits, elem: usize) -> Self {
        let local = 1 << log_local;
        Pass {
            log_n,
            stage0,
            log_local,
            plan: Plan::backward(local, limits, elem),
            forward: Plan::forward(local, limits, elem),
        }
    }

    /// Lines per batch row, `N / 2^log_local`.
    pub fn lines_per_row(&self) -> usize {
        1 << (self.log_n - self.log_local)
    }

    /// Whether the backward's threads of one line all lie in one plane of 32 (one butterfly per
    /// thread and stage, a line's half at most 32), so that its stages may synchronise per plane
    /// ([`PassConfig::plane_sync`], where the runtime has a plane barrier).
    pub fn plane_sync(&self) -> bool {
        let half = 1usize << (self.log_local - 1);
        let threads = self.plan.threads;
        threads == self.plan.rows * half && half <= 32 && threads.is_multiple_of(32)
    }

    /// Twiddle-table entries (of re or im) of this pass's stages, `log_local · N/2 · 4`.
    pub fn entries(&self) -> usize {
        self.log_local * (1 << (self.log_n - 1)) * 4
    }
}

/// What a pass's kernels are compiled for: the pass's stages, the cube's shape, and (first pass)
/// the input permutation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PassConfig {
    /// log2 N of the whole transform.
    pub log_n: usize,
    /// First stage of the pass.
    pub stage0: usize,
    /// log2 of the line length.
    pub log_local: usize,
    /// Lines a cube holds.
    pub rows: usize,
    /// Threads per cube.
    pub threads: usize,
    /// How the input is ordered (a later pass: natural).
    pub order: Order,
    /// (Forward) whether a cube's lines are the same chunk of consecutive rows.
    pub grouped: bool,
    /// (Backward, a bit-reversed first pass of two) whether line `λ` of a row is its chunk
    /// `g = rev(λ)` (bit reversal over the lines' `log2(N / 2^log_local)` bits). Element `j` of
    /// chunk `g` is `x[rev(j)·lines + λ]`, so consecutive lines read and write consecutive
    /// columns: the cube's loads and stores go line-major and stay coalesced, where the chunk
    /// order reads one float per 32-byte sector.
    pub reversed: bool,
    /// (Backward) whether the stages may synchronise per plane instead of per cube: each line's
    /// butterflies belong to threads of one plane (one butterfly per thread and stage, a line's
    /// half at most 32), so between stages only the plane's threads exchange data. Set only
    /// where the compiler has a plane barrier (CUDA's `__syncwarp`; WGSL has none).
    pub plane_sync: bool,
    /// (Backward) which parts (re, im) of the output gradient the kernel reads; a part the loss
    /// does not reach is zero, and the kernel neither reads nor needs a zero tensor for it.
    pub grad_parts: [bool; 2],
}

impl PassConfig {
    /// Lines per batch row: `N / 2^log_local`.
    pub fn lines_per_row(&self) -> usize {
        1 << (self.log_n - self.log_local)
    }

    /// Whether the lines are strided columns (a second pass) rather than contiguous chunks.
    pub fn strided(&self) -> bool {
        self.stage0 > 0
    }

    /// Whether the cube's loads and stores go line-major (consecutive threads, consecutive
    /// lines): where consecutive lines hold consecutive columns (strided or reversed lines).
    pub fn line_major(&self) -> bool {
        self.strided() || self.reversed
    }

    /// log2 of the lines per row.
    pub fn log_lines(&self) -> usize {
        self.log_n - self.log_local
    }

    /// The line term's shift in [`bank_swizzle`]: `log2(32 / min(rows, 32))`, so the lines a
    /// warp's line-major access touches (`min(rows, 32)` of them) land in different banks.
    pub fn swizzle_shift(&self) -> usize {
        5 - self.rows.clamp(1, 32).ilog2() as usize
    }

    /// `log2` of the runs of 32 elements that share the line term of [`bank_swizzle`]:
    /// `max(1, log_local − 5)`.
    pub fn swizzle_group(&self) -> usize {
        self.log_local.saturating_sub(5).max(1)
    }
}

impl Pass {
    /// The comptime configuration of a launch with `plan`.
    pub(crate) fn config(&self, plan: Plan, order: Order, grouped: bool) -> PassConfig {
        PassConfig {
            log_n: self.log_n,
            stage0: self.stage0,
            log_local: self.log_local,
            rows: plan.rows,
            threads: plan.threads,
            order,
            grouped,
            reversed: false,
            plane_sync: false,
            grad_parts: [true, true],
        }
    }
}

/// The passes of an `n`-point butterfly on `limits`' device: one if a line of `n` fits in its
/// shared memory, two if both halves of the split do; `None` otherwise (or if `n` is out of
/// range).
pub(crate) fn passes(n: usize, elem: usize, limits: &DeviceLimits) -> Option<Vec<Pass>> {
    if !(2..=MAX_FUSED_N).contains(&n) || !n.is_power_of_two() {
        return None;
    }
    let log_n = n.trailing_zeros() as usize;
    let fits = |a: usize| Plan::forward(1 << a, limits, elem).shared_bytes(elem) <= limits.max_shared;
    let longest = MAX_SINGLE_PASS_N.max(floor_pow2(limits.budget() / (2 * elem)));
    let max_local = (1..=longest.trailing_zeros() as usize).rev().find(|&a| fits(a))?;
    let pass = |stage0: usize, log_local: usize| Pass::new(log_n, stage0, log_local, limits, elem);
    let list = if log_n <= max_local {
        vec![pass(0, log_n)]
    } else if log_n - max_local <= max_local {
        vec![pass(0, max_local), pass(max_local, log_n - max_local)]
    } else {
        return None;
    };
    // The backward needs at least one partial per line of a row, and the twiddle gradient must
    // fit one binding.
    let grad_bytes = 2 * log_n * (n / 2) * 4 * elem;
    (grad_bytes <= MAX_PARTIAL_BYTES).then_some(list)
}

/// The backward's passes: from N = 2^`split_log_n` on ([`tuning::backward_split_log_n`] unless
/// overridden), or where the forward takes two, two balanced passes (lines of `2^⌈L/2⌉` and
/// `2^⌊L/2⌋`). Each thread of the backward keeps, per stage and butterfly, 8 twiddles, 8
/// twiddle-gradient accumulators and the stage's 4 inputs in registers; short lines keep that
/// small (more cubes per SM) at the cost of one more trip through device memory. `None` where
/// a pass's lines do not fit in shared memory.
pub(crate) fn backward_passes(n: usize, elem: usize, limits: &DeviceLimits, split_log_n: usize) -> Option<Vec<Pass>> {
    let forward = passes(n, elem, limits)?;
    let log_n = n.trailing_zeros() as usize;
    let list = if (log_n < split_log_n && forward.len() == 1) || log_n == 1 {
        forward
    } else {
        let a = log_n.div_ceil(2);
        let pass = |stage0: usize, log_local: usize| Pass::new(log_n, stage0, log_local, limits, elem);
        vec![pass(0, a), pass(a, log_n - a)]
    };
    list.iter().all(|p| p.plan.shared_bytes(elem) <= limits.max_shared).then_some(list)
}

/// The backward's passes for `n` on `device` in float type `F`.
pub(crate) fn device_backward_passes<R: CubeRuntime, F: FloatElement>(
    n: usize,
    device: &R::Device,
) -> Option<Vec<Pass>> {
    let limits = DeviceLimits::of(&R::client(device));
    let split = tuning::backward_split_log_n(limits.compiler, tuning::overrides());
    backward_passes(n, std::mem::size_of::<F>(), &limits, split)
}

/// The passes for `n` on `device` in float type `F`.
pub(crate) fn device_passes<R: CubeRuntime, F: FloatElement>(n: usize, device: &R::Device) -> Option<Vec<Pass>> {
    passes(n, std::mem::size_of::<F>(), &DeviceLimits::of(&R::client(device)))
}

/// Whether an `n`-point transform fits one pass on `device` in float type `F` (what the
/// single-pass spectral kernels need).
pub(crate) fn single_pass_supported<R: CubeRuntime, F: FloatElement>(n: usize, device: &R::Device) -> bool {
    device_passes::<R, F>(n, device).is_some_and(|p| p.len() == 1)
}
