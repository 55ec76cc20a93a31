//! The fused butterfly: every stage on-chip, in one launch for N ≤ 4096 (f32) and two above.
//!
//! - [`forward`]: `x → y`, each cube transforms several lines (a line is what one pass holds in
//!   shared memory: a whole row, or one of its sub-transforms). Where one pass holds a row and
//!   it measured faster (`tuning::default_log_elems`), the register-resident forward of
//!   `radix.rs` runs instead: groups of stages in registers, shared memory only between groups.
//! - [`backward`]: recomputes the forward on-chip (every stage's input kept in the registers of
//!   the thread that owns the butterfly), then runs the stages in reverse, producing the input
//!   gradient and per-cube partial twiddle gradients in one launch per pass; a second small
//!   kernel sums the partials in a fixed order, so the twiddle gradient is deterministic (no
//!   atomics).
//!
//! ## Passes
//! Stage `s` of the butterfly pairs elements whose indices differ in bit `s` only. With
//! `N = 2^L` and a shared-memory limit of `2^A` elements per line (`A = 12` in f32), `L ≤ A`
//! takes one pass. Otherwise stages `0…A−1` mix only the low `A` bits: pass 1 runs them on the
//! `N / 2^A` contiguous chunks of each row; stages `A…L−1` mix only the high bits: pass 2 runs
//! them on the `2^A` strided columns `{g + j·2^A}` (consecutive columns in one cube, so its
//! loads and stores stay coalesced). Two passes cover N up to `2^(2A)`; the launch wrappers
//! handle the split, and the intermediate goes through device memory once. In the forward,
//! with the bit reversal, pass 1 is the register-resident kernel on the chunks
//! (`RadixConfig::chunked`), and a pass 2 of one or two stages runs each column in one thread's
//! registers (`columns.rs`).
//!
//! - [`tangent`]: `(x, dx) → (y, dy)`, the forward-mode derivative along a twiddle direction,
//!   the forward's structure with the tangents carried beside the lines.
//!
//! Layouts: signals `[batch, n]` (re and im apart), twiddles `[log2 n, n/2, 2, 2]`; the forward
//! output and the input gradient are packed `[2, batch, n]` (re then im), the twiddle gradient
//! `[2, log2 n · n/2 · 4]`.

mod backward;
mod columns;
pub(crate) mod conv;
mod forward;
pub(crate) mod radix;
pub(crate) mod real;
mod tangent;

pub use backward::backward;
pub use forward::forward;
pub use tangent::{tangent, tangent_supported};

use burn::tensor::{DType, Shape};
use burn_cubecl::{tensor::CubeTensor, CubeRuntime, FloatElement};

use super::Permutation;
use crate::ops::cubecl::floor_pow2;
pub(crate) use crate::ops::onchip::{
    block_times, load_block, reverse_bits, Order, Split, SplitInput, TwiddleTables, Twiddles,
};
use crate::ops::tuning::{
    self, DeviceLimits, BACKWARD_BUTTERFLIES_PER_CUBE, FORWARD_MIN_ROWS, MAX_CUBE_THREADS, MIN_BUTTERFLIES_PER_CUBE,
};

/// The input permutation as the kernels take it: its [`Order`], and for [`Order::Table`] a
/// `[2n]` u32 table holding the gather indices `g` (`y[i] = x[g[i]]`, for kernels that gather
/// as they read) and then their inverse (`x[j]` lands at `y[inv[j]]`, for kernels that read
/// coalesced and scatter into shared memory). For the named orders the table is an input tensor,
/// bound and never read.
#[derive(Clone, Debug)]
pub struct InputOrder<R: CubeRuntime> {
    pub(crate) order: Order,
    pub(crate) table: CubeTensor<R>,
}

impl<R: CubeRuntime> InputOrder<R> {
    /// `perm` acting on rows of `n`, on `like`'s device (one small upload for a gather).
    pub(crate) fn new(perm: &Permutation, n: usize, like: &CubeTensor<R>) -> Self {
        let (order, bytes) = match perm {
            Permutation::Identity => (Order::Natural, None),
            Permutation::BitReversal => (Order::BitReversed, None),
            Permutation::Gather(gather) => {
                debug_assert_eq!(gather.len(), n, "the caller checks the permutation's size");
                let mut words = vec![0u32; 2 * n];
                for (i, &j) in gather.iter().enumerate() {
                    words[i] = j as u32;
                    words[n + j] = i as u32;
                }
                (Order::Table, Some(words.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>()))
            }
        };
        let table = match bytes {
            Some(bytes) => CubeTensor::new_contiguous(
                like.client.clone(),
                like.device.clone(),
                Shape::from(vec![bytes.len() / 4]),
                like.client.create_from_slice(&bytes),
                DType::U32,
            ),
            // The natural and bit-reversed orders read no table: `like` (an input, which the
            // kernels only read) is bound in its place, one request to the device fewer per call
            // than a placeholder allocation.
            None => like.clone(),
        };
        InputOrder { order, table }
    }

    /// The order of a later pass, which reads its input as it lies (the same table, unread).
    pub(crate) fn natural(&self) -> Self {
        InputOrder { order: Order::Natural, table: self.table.clone() }
    }
}

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
/// ([`PassConfig::swizzle_shift`]). The kernels use `forward::swizzled`, the same
/// expression; this host twin is what `tests::swizzle_is_conflict_free` checks on every plan.
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
    fn config(&self, plan: Plan, order: Order, grouped: bool) -> PassConfig {
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

/// Whether the fused butterfly can run for size `n` on `device` in float type `F` (in one or two
/// passes).
pub fn fused_supported<R: CubeRuntime, F: FloatElement>(n: usize, device: &R::Device) -> bool {
    device_passes::<R, F>(n, device).is_some() && device_backward_passes::<R, F>(n, device).is_some()
}

/// How many passes (launches of the forward) the fused butterfly takes for size `n` on `device`
/// in float type `F`: 1 while a line of `n` fits in shared memory, 2 above; `None` where it
/// cannot run.
pub fn fused_passes<R: CubeRuntime, F: FloatElement>(n: usize, device: &R::Device) -> Option<usize> {
    device_backward_passes::<R, F>(n, device)?;
    device_passes::<R, F>(n, device).map(|p| p.len())
}

/// Whether an `n`-point transform fits one pass on `device` in float type `F` (what the
/// single-pass spectral kernels need).
pub fn single_pass_supported<R: CubeRuntime, F: FloatElement>(n: usize, device: &R::Device) -> bool {
    device_passes::<R, F>(n, device).is_some_and(|p| p.len() == 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::tuning::{Compiler, Overrides, BACKWARD_SPLIT_LOG_N, BACKWARD_SPLIT_LOG_N_PLANE_SYNC};

    /// A wgpu (WGSL) device with `shared` bytes of shared memory and 1024 threads per cube.
    fn device(shared: usize) -> DeviceLimits {
        DeviceLimits::new(Compiler::Wgsl, shared, 1024)
    }

    /// What the tuning module hands a device reporting Metal's 32 KiB (WGSL), NVIDIA's Vulkan
    /// 48 KiB (SPIR-V and WGSL) or an H100's 227 KiB (CUDA), with 1024 or 256 threads per cube:
    /// no configuration of the forward, its register-resident and chunked variants, the
    /// tangent, the backward or the convolution, in f32 or f64, exceeds the shared memory or
    /// the threads the device reports.
    #[test]
    fn no_tuned_configuration_exceeds_what_the_device_reports() {
        use super::conv::ConvConfig;
        let o = Overrides::default();
        let devices = [
            (Compiler::Wgsl, 32 << 10),
            (Compiler::Spirv, 48 << 10),
            (Compiler::Wgsl, 48 << 10),
            (Compiler::Cuda, 227 << 10),
        ];
        let mut checked = 0;
        for (compiler, shared) in devices {
            for units in [1024, 256] {
                let limits = DeviceLimits::new(compiler, shared, units);
                for elem in [4, 8] {
                    let fits = |bytes: usize, threads: usize, what: &str| {
                        assert!(bytes <= shared && threads <= units, "{limits:?}, {elem}-byte floats: {what}");
                    };
                    for log_n in 1..=MAX_FUSED_N.trailing_zeros() as usize {
                        let n = 1 << log_n;
                        let split = tuning::backward_split_log_n(compiler, &o);
                        let lists = [
                            passes(n, elem, &limits),
                            super::tangent::tangent_passes(n, elem, &limits),
                            backward_passes(n, elem, &limits, split),
                        ];
                        for (list, e) in lists.iter().zip([elem, 2 * elem, elem]) {
                            for pass in list.iter().flatten() {
                                fits(pass.forward.shared_bytes(e), pass.forward.threads, &format!("{pass:?}"));
                                fits(pass.plan.shared_bytes(e), pass.plan.threads, &format!("{pass:?}"));
                                checked += 1;
                            }
                        }
                        // The register-resident forward, on a whole row or on the first pass's chunks.
                        let local = passes(n, elem, &limits).map(|p| 1usize << p[0].log_local);
                        let radix = local.and_then(|local| {
                            super::forward::radix_config_on(&limits, local, elem, Order::BitReversed, &o)
                        });
                        if let Some(cfg) = radix {
                            fits((2 * elem) << cfg.log_cube(), cfg.threads(), &format!("{cfg:?}"));
                            checked += 1;
                        }
                        if let Some(cfg) = ConvConfig::complex(n, elem, &limits, Order::Natural, true) {
                            fits(2 * n * elem, cfg.radix.threads(), &format!("{cfg:?}"));
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 1000, "only {checked} configurations checked");
    }

    /// Metal's 32 KiB of threadgroup memory, the smallest budget the crate targets: every size
    /// up to [`MAX_FUSED_N`] still gets a forward and a backward whose cubes fit it.
    #[test]
    fn every_size_fits_32_kib() {
        let (elem, shared) = (4, 32 << 10);
        let limits = device(shared);
        for log_n in 1..=MAX_FUSED_N.trailing_zeros() as usize {
            let n = 1 << log_n;
            let forward = passes(n, elem, &limits).unwrap_or_else(|| panic!("n={n}: no forward passes"));
            let backward = backward_passes(n, elem, &limits, BACKWARD_SPLIT_LOG_N)
                .unwrap_or_else(|| panic!("n={n}: no backward passes"));
            for pass in &forward {
                assert!(pass.forward.shared_bytes(elem) <= shared, "n={n}: forward {pass:?} over budget");
            }
            for pass in &backward {
                assert!(pass.plan.shared_bytes(elem) <= shared, "n={n}: backward {pass:?} over budget");
                // Every thread has at least one butterfly per stage.
                assert!(
                    pass.plan.threads >= 1 && pass.plan.rows << (pass.log_local - 1) >= pass.plan.threads,
                    "n={n}: {pass:?}"
                );
            }
            assert_eq!(forward.iter().map(|p| p.log_local).sum::<usize>(), log_n, "n={n}: forward stages");
            assert_eq!(backward.iter().map(|p| p.log_local).sum::<usize>(), log_n, "n={n}: backward stages");
        }
    }

    /// Whether each warp (32 consecutive threads) of `threads` hits 32 different banks when
    /// thread `t` touches element `at(t)`.
    fn conflict_free(threads: usize, at: impl Fn(usize) -> usize) -> bool {
        (0..threads).step_by(32).all(|w| {
            let mut banks = 0u32;
            (w..(w + 32).min(threads)).all(|t| {
                let bank = 1u32 << (at(t) % 32);
                let fresh = banks & bank == 0;
                banks |= bank;
                fresh
            })
        })
    }

    /// Every access of a line kernel with `cfg` through [`bank_swizzle`]: the swizzle permutes
    /// the cube's elements, and each warp's loads, stores (element- or line-major) and both
    /// halves of every stage's butterflies hit 32 different banks.
    fn assert_conflict_free(cfg: &PassConfig, what: &str) {
        let (local, half, threads) = (1 << cfg.log_local, 1 << (cfg.log_local - 1), cfg.threads);
        let swz = |linear: usize| bank_swizzle(linear, cfg);
        let mut seen: Vec<usize> = (0..cfg.rows * local).map(swz).collect();
        seen.sort_unstable();
        assert!(seen.iter().copied().eq(0..cfg.rows * local), "{what}: {cfg:?} is not a permutation");
        // What `forward::swizzled_pair` relies on: below 32 the second element's slot is the
        // first's `^ st`.
        for i0 in 0..cfg.rows * local {
            for s in (0..cfg.log_local.min(5)).filter(|s| i0 & (1 << s) == 0) {
                assert_eq!(swz(i0 + (1 << s)), swz(i0) ^ (1 << s), "{what}: {cfg:?}, element {i0}, stage {s}");
            }
        }
        let per_thread = cfg.rows * half / threads;
        for q in 0..2 * per_thread {
            let slot = |t: usize| {
                let e = t + q * threads;
                let (l, j) = if cfg.line_major() { (e % cfg.rows, e / cfg.rows) } else { (e / local, e % local) };
                swz(l * local + j)
            };
            assert!(conflict_free(threads, slot), "{what}: {cfg:?}, load/store {q}");
        }
        for s in 0..cfg.log_local {
            for p in 0..per_thread {
                let i0 = |t: usize| {
                    let b = t + p * threads;
                    let k = b % half;
                    (b / half) * local + ((k >> s) << (s + 1)) + (k & ((1 << s) - 1))
                };
                assert!(conflict_free(threads, |t| swz(i0(t))), "{what}: {cfg:?}, stage {s} x0");
                assert!(conflict_free(threads, |t| swz(i0(t) + (1 << s))), "{what}: {cfg:?}, stage {s} x1");
            }
        }
    }

    /// The bank swizzle leaves no conflict in any plan the forward, the tangent and the backward
    /// make, for every size and for 32, 48 and 100 KiB of shared memory (f32).
    #[test]
    fn swizzle_is_conflict_free() {
        let elem = 4;
        for shared in [32 << 10, 48 << 10, 100 << 10] {
            for log_n in 1..=MAX_FUSED_N.trailing_zeros() as usize {
                let n = 1 << log_n;
                for pass in passes(n, elem, &device(shared)).unwrap_or_default() {
                    for grouped in [false, true] {
                        assert_conflict_free(&pass.config(pass.forward, Order::Natural, grouped), "forward");
                    }
                }
                for pass in passes(n, 2 * elem, &device(shared)).unwrap_or_default() {
                    assert_conflict_free(&pass.config(pass.forward, Order::Natural, false), "tangent");
                }
                for pass in backward_passes(n, elem, &device(shared), BACKWARD_SPLIT_LOG_N).unwrap_or_default() {
                    let mut cfg = pass.config(pass.plan, Order::BitReversed, false);
                    assert_conflict_free(&cfg, "backward");
                    cfg.reversed = pass.stage0 == 0 && pass.lines_per_row() > 1;
                    assert_conflict_free(&cfg, "backward (reversed lines)");
                }
            }
        }
    }

    /// The backward's cubes hold only their lines (the stage inputs live in registers), so it
    /// splits exactly from N = 2^split, whatever the shared memory (down to Metal's 32 KiB); and
    /// on a runtime with a plane barrier, every pass of N = 512 … 4096 synchronises per plane.
    #[test]
    fn backward_splits_from_split_log_n() {
        for split in [BACKWARD_SPLIT_LOG_N, BACKWARD_SPLIT_LOG_N_PLANE_SYNC] {
            for shared in [32 << 10, 48 << 10, 100 << 10] {
                for log_n in 1..=12 {
                    let list = backward_passes(1 << log_n, 4, &device(shared), split).expect("fits");
                    let expected = if log_n < split || log_n == 1 { 1 } else { 2 };
                    assert_eq!(list.len(), expected, "n=2^{log_n}, split {split}, {shared} bytes");
                }
            }
        }
        let split = tuning::backward_split_log_n(Compiler::Cuda, &Overrides::default());
        for log_n in 9..=12 {
            for pass in backward_passes(1 << log_n, 4, &device(48 << 10), split).expect("fits") {
                assert!(pass.plane_sync(), "n=2^{log_n}: {pass:?}");
            }
        }
        assert!(!backward_passes(256, 4, &device(48 << 10), split).expect("fits")[0].plane_sync());
    }
}
