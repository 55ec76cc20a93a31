//! The register-resident forward for one-pass sizes: each thread holds a group of up to five
//! stages' worth of elements in registers, so the signal crosses shared memory once per group
//! instead of once per stage.
//!
//! ## Mapping
//! A cube holds `2^B` elements of shared memory (`B = log2 rows + log2 n`; a cube index `I`
//! is `row · n + i`). The `log2 n` stages are split into groups of at most `log2 E` stages
//! (`E` elements per thread). For a group of stages `[b0, b0 + g)`, a thread holds the
//! `r = 2^g` elements that differ only in those bits, for `E / r` instances: its free index
//! `f = t + q · threads` is deposited into the other bits of `I`, lane bits first.
//! - **Shared memory without bank conflicts.** Element `I` lives at `I ^ fold(I)`, where `fold`
//!   xors the 5-bit chunks above the lowest, so bit `p` of `I` moves bank bit `p mod 5`. The
//!   32 lanes of a warp take five free bits with distinct residues mod 5 (the smallest free bit
//!   of each residue), so every shared-memory access of a warp touches 32 distinct banks. The
//!   same swizzle makes the coalesced load and store conflict-free, bit reversal included.
//! - **Coalesced twiddles.** For a stage `p` of group `G`, the forward reads the twiddles
//!   relaid by [`radix_twiddles`]: block `k` (the butterfly at index `i0`, bit `p` clear) sits at
//!   `compress(i0, outside G) + compress(i0, G \ {p}) · 2^(log2 n − g)`. A warp's lanes differ
//!   in the lowest free bits, so each of its twiddle loads is one contiguous line, and the
//!   thread's pairs add a constant offset.
//! - **Twiddle reuse.** A thread's instances differ in row bits (where the cube holds enough
//!   rows): each twiddle block is loaded once and applied to all of them.

use burn_cubecl::{tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::{prelude::*, CubeDim};

use super::{reverse_bits, InputOrder, Order, Split, SplitInput, TwiddleTables};
use crate::ops::cubecl::{empty, grid};

/// Largest group of stages a thread holds (2^5 = 32 complex elements: 64 registers).
pub(crate) const MAX_LOG_ELEMS: usize = 5;
/// The environment variable that overrides [`default_log_elems`] (1 … 5; 0 turns the
/// register-resident forward off, for comparisons): read by the forward's launcher.
pub(crate) const LOG_ELEMS_VAR: &str = "LEARNED_FFT_RADIX_LOG_ELEMS";

/// log2 of the elements a thread holds per group on runtime `runtime` (CubeCL's name for it)
/// at size `n`, or `None` where the shared-memory forward is faster. Measured on an NVIDIA H200
/// (forward, 256 MiB of complex f32, medians of 20 calls, one run; GB/s of the previous forward
/// → this one): on CUDA, 8 elements at N = 64 (1033 → 1249) and 4096 (496 → 645), 16 at
/// N = 256 … 2048 (831 → 1322 at 512, 653 → 852 at 1024, 578 → 854 at 2048); 32 elements were
/// no better than 16 at any size. Through Vulkan (wgpu) the larger register arrays are slower than
/// the shared-memory forward from N = 512 on (at 2048: 429 with it, 364 with 8 elements, 219
/// with 16), so there it holds 8 elements up to N = 256 (433 → 551 at N = 64) and is off above.
pub(crate) fn default_log_elems(runtime: &str, n: usize) -> Option<usize> {
    match (runtime, n) {
        ("cuda", 128..=2048) => Some(4),
        ("cuda", _) => Some(3),
        (_, ..=256) => Some(3),
        _ => None,
    }
}
/// Shared memory a cube fills (32 KiB: Metal's limit, which every wgpu and CUDA device offers).
const SHARED_BUDGET: usize = 32 << 10;
/// Fewest elements a cube holds for the swizzle (one 32-bank row).
const MIN_LOG_CUBE: usize = 5;

/// What the register-resident forward is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RadixConfig {
    /// log2 n.
    pub log_n: usize,
    /// log2 of the rows a cube holds.
    pub log_rows: usize,
    /// log2 of the elements a thread holds per group.
    pub log_elems: usize,
    /// How the input is ordered.
    pub order: Order,
}

impl RadixConfig {
    /// The configuration for `n` with `2^log_elems` elements per thread on a device with
    /// `max_units` threads and `max_shared` bytes per cube, in `elem`-byte floats; `None` where
    /// a row does not fit one cube.
    pub fn with_elems(
        n: usize,
        elem: usize,
        max_units: usize,
        max_shared: usize,
        order: Order,
        log_elems: usize,
    ) -> Option<Self> {
        if !n.is_power_of_two() || n < 2 || !(1..=MAX_LOG_ELEMS).contains(&log_elems) {
            return None;
        }
        let log_n = n.trailing_zeros() as usize;
        let budget = SHARED_BUDGET.min(max_shared) / (2 * elem);
        if budget < 2 {
            return None;
        }
        let log_cube = usize::BITS as usize - 1 - budget.leading_zeros() as usize;
        if log_cube < log_n.max(MIN_LOG_CUBE) || log_cube < log_elems {
            return None;
        }
        let cfg = RadixConfig { log_n, log_rows: log_cube - log_n, log_elems, order };
        (cfg.threads() <= max_units && cfg.threads() >= 1).then_some(cfg)
    }

    /// log2 of the elements a cube holds.
    pub fn log_cube(&self) -> usize {
        self.log_n + self.log_rows
    }

    /// Threads per cube.
    pub fn threads(&self) -> usize {
        1 << (self.log_cube() - self.log_elems)
    }

    /// Groups of stages.
    pub fn groups(&self) -> usize {
        self.log_n.div_ceil(self.log_elems.min(self.log_n))
    }

    /// Group `i`: its first stage and its number of stages (groups balanced, larger first).
    pub fn group(&self, i: usize) -> (usize, usize) {
        let count = self.groups();
        let (base, extra) = (self.log_n / count, self.log_n % count);
        (i * base + i.min(extra), base + usize::from(i < extra))
    }

    /// Instances (sets of `2^g` elements) a thread holds in group `i`.
    pub fn instances(&self, i: usize) -> usize {
        1 << (self.log_elems - self.group(i).1)
    }

    /// The bits of the cube index a thread's free index fills in group `i`, in order: five lane
    /// bits with distinct residues mod 5 (where the cube has ten bits), then the rest ascending.
    pub fn free_order(&self, i: usize) -> Vec<usize> {
        let (b0, g) = self.group(i);
        let bits = self.log_cube();
        let free: Vec<usize> = (0..bits).filter(|p| !(b0..b0 + g).contains(p)).collect();
        let mut lanes = Vec::new();
        if bits >= 10 {
            for residue in 0..5 {
                if let Some(&p) = free.iter().find(|&&p| p % 5 == residue) {
                    lanes.push(p);
                }
            }
            lanes.sort_unstable();
        }
        let rest = free.iter().copied().filter(|p| !lanes.contains(p));
        lanes.iter().copied().chain(rest).collect()
    }

    /// Bit `j` of the free index of group `i` goes to this bit of the cube index.
    pub fn position(&self, i: usize, j: usize) -> usize {
        self.free_order(i)[j]
    }

    /// Bits of the free index in group `i`.
    pub fn free_bits(&self, i: usize) -> usize {
        self.log_cube() - self.group(i).1
    }

    /// Whether a thread's instances of group `i` differ in row bits only (so they share their
    /// twiddle blocks).
    pub fn shares_twiddles(&self, i: usize) -> bool {
        let order = self.free_order(i);
        let top = self.log_elems - self.group(i).1;
        order[order.len() - top..].iter().all(|&p| p >= self.log_n)
    }

    /// Where cube element `index` lives in shared memory.
    #[cfg(test)]
    pub fn swizzle(&self, index: usize) -> usize {
        if self.log_cube() < MIN_LOG_CUBE {
            return index;
        }
        index ^ (((index >> 5) ^ (index >> 10)) & 31)
    }

    /// The twiddle address (within a stage) of the butterfly at row index `i0` (bit `p` clear)
    /// of stage `p` in group `(b0, g)`: the bits outside the group, then the group's other bits.
    #[cfg(test)]
    pub fn twiddle_address(&self, i0: usize, p: usize) -> usize {
        let (b0, g) = self.group_of(p);
        let outside = (i0 & ((1 << b0) - 1)) | ((i0 >> (b0 + g)) << b0);
        let inside = (i0 >> b0) & ((1 << g) - 1);
        let s = p - b0;
        let inside = (inside & ((1 << s) - 1)) | ((inside >> (s + 1)) << s);
        outside | (inside << (self.log_n - g))
    }

    /// The group holding stage `p`.
    #[cfg(test)]
    pub fn group_of(&self, p: usize) -> (usize, usize) {
        (0..self.groups()).map(|i| self.group(i)).find(|&(b0, g)| (b0..b0 + g).contains(&p)).unwrap_or((0, 1))
    }
}

/// `x_i0, x_i1 ← T · (x_i0, x_i1)` for the block `(tr, ti)` at entries `w + c · half_n`.
#[cube]
fn apply<F: Float>(
    vr: &mut Array<F>,
    vi: &mut Array<F>,
    #[comptime] a: usize,
    #[comptime] b: usize,
    twiddles: &TwiddleTables<F>,
    w: usize,
    #[comptime] half_n: usize,
) {
    let t00r = twiddles.re[w];
    let t00i = twiddles.im[w];
    let t01r = twiddles.re[w + half_n];
    let t01i = twiddles.im[w + half_n];
    let t10r = twiddles.re[w + comptime![2 * half_n]];
    let t10i = twiddles.im[w + comptime![2 * half_n]];
    let t11r = twiddles.re[w + comptime![3 * half_n]];
    let t11i = twiddles.im[w + comptime![3 * half_n]];
    let (ar, ai, br, bi) = (vr[a], vi[a], vr[b], vi[b]);
    vr[a] = t00r * ar - t00i * ai + t01r * br - t01i * bi;
    vi[a] = t00r * ai + t00i * ar + t01r * bi + t01i * br;
    vr[b] = t10r * ar - t10i * ai + t11r * br - t11i * bi;
    vi[b] = t10r * ai + t10i * ar + t11r * bi + t11i * br;
}

/// The cube index of instance `f` of group `gi` (its group bits zero).
#[cube]
fn deposit(f: usize, #[comptime] cfg: RadixConfig, #[comptime] gi: usize) -> usize {
    let mut index = 0;
    #[unroll]
    for j in 0..comptime![cfg.free_bits(gi)] {
        index |= ((f >> j) & 1) << comptime![cfg.position(gi, j)];
    }
    index
}

/// Shared-memory slot of cube element `index` (see [`RadixConfig::swizzle`]).
#[cube]
fn swizzled(index: usize, #[comptime] cfg: RadixConfig) -> usize {
    if comptime![cfg.log_cube() >= MIN_LOG_CUBE] {
        index ^ (((index >> 5) ^ (index >> 10)) & 31)
    } else {
        index
    }
}

/// The twiddle address of the pair whose row bits outside group `gi` are those of `i0`.
#[cube]
fn outside_address(i0: usize, #[comptime] cfg: RadixConfig, #[comptime] gi: usize) -> usize {
    let b0 = comptime![cfg.group(gi).0];
    let g = comptime![cfg.group(gi).1];
    (i0 & comptime![(1usize << b0) - 1]) | ((i0 >> comptime![b0 + g]) << b0)
}

/// One cube transforms `2^log_rows` consecutive rows: coalesced load (permuted on the way into
/// shared memory), the stage groups in registers, coalesced store.
#[cube(launch_unchecked)]
pub(crate) fn butterfly_radix_kernel<F: Float>(
    x: &SplitInput<F>,
    order: &Tensor<u32>,
    twiddles: &TwiddleTables<F>,
    output: &mut Tensor<F>,
    batch: u32,
    #[comptime] cfg: RadixConfig,
) {
    let log_n = comptime![cfg.log_n];
    let n = comptime![1usize << log_n];
    let half_n = comptime![n / 2];
    let rows = comptime![1usize << cfg.log_rows];
    let threads = comptime![cfg.threads()];
    let elems = comptime![1usize << cfg.log_elems];
    let cube_len = comptime![1usize << cfg.log_cube()];
    let mut s_re = SharedMemory::<F>::new(cube_len);
    let mut s_im = SharedMemory::<F>::new(cube_len);
    let batch = batch as usize;
    let im_offset = x.im_offset as usize;
    let first_row = CUBE_POS * rows;
    if first_row >= batch {
        terminate!();
    }
    let t = UNIT_POS_X as usize;

    // Coalesced load: element j of a row goes to slot rev(j), inv(j) (the table's second half)
    // or j.
    #[unroll]
    for q in 0..elems {
        let index = t + q * threads;
        let row = first_row + (index >> log_n);
        let j = index & comptime![n - 1];
        let mut re = F::new(0.0);
        let mut im = F::new(0.0);
        if row < batch {
            re = x.re[row * n + j];
            im = x.im[im_offset + row * n + j];
        }
        let mut i = j;
        if comptime![cfg.order == Order::Table] {
            i = order[n + j] as usize;
        } else if comptime![cfg.order == Order::BitReversed] {
            i = reverse_bits(j, log_n);
        }
        let slot = swizzled((index >> log_n << log_n) | i, cfg);
        s_re[slot] = re;
        s_im[slot] = im;
    }
    sync_cube();

    let mut vr = Array::<F>::new(elems);
    let mut vi = Array::<F>::new(elems);
    #[unroll]
    for gi in 0..comptime![cfg.groups()] {
        let b0 = comptime![cfg.group(gi).0];
        let g = comptime![cfg.group(gi).1];
        let r = comptime![1usize << g];
        let instances = comptime![cfg.instances(gi)];
        let shares = comptime![cfg.shares_twiddles(gi)];
        #[unroll]
        for q in 0..instances {
            let base = deposit(t + q * threads, cfg, gi);
            #[unroll]
            for e in 0..r {
                let slot = swizzled(base | (e << b0), cfg);
                vr[q * r + e] = s_re[slot];
                vi[q * r + e] = s_im[slot];
            }
        }
        #[unroll]
        for s in 0..g {
            let stage = comptime![b0 + s];
            let stage_base = comptime![stage * 4 * half_n];
            #[unroll]
            for pair in 0..comptime![r / 2] {
                // The pair's elements: `pair` with a zero inserted at bit s, and that plus 2^s.
                let e0 = comptime![((pair >> s) << (s + 1)) | (pair & ((1usize << s) - 1))];
                let e1 = comptime![e0 + (1usize << s)];
                let inside = comptime![pair << (log_n - g)];
                if comptime![shares] {
                    let base = deposit(t, cfg, gi);
                    let w = stage_base + (outside_address(base & comptime![n - 1], cfg, gi) | inside);
                    #[unroll]
                    for q in 0..instances {
                        apply(&mut vr, &mut vi, q * r + e0, q * r + e1, twiddles, w, half_n);
                    }
                } else {
                    #[unroll]
                    for q in 0..instances {
                        let base = deposit(t + q * threads, cfg, gi);
                        let w = stage_base + (outside_address(base & comptime![n - 1], cfg, gi) | inside);
                        apply(&mut vr, &mut vi, q * r + e0, q * r + e1, twiddles, w, half_n);
                    }
                }
            }
        }
        #[unroll]
        for q in 0..instances {
            let base = deposit(t + q * threads, cfg, gi);
            #[unroll]
            for e in 0..r {
                let slot = swizzled(base | (e << b0), cfg);
                s_re[slot] = vr[q * r + e];
                s_im[slot] = vi[q * r + e];
            }
        }
        sync_cube();
    }

    let plane = batch * n;
    #[unroll]
    for q in 0..elems {
        let index = t + q * threads;
        let row = first_row + (index >> log_n);
        if row < batch {
            let dst = row * n + (index & comptime![n - 1]);
            let slot = swizzled(index, cfg);
            output[dst] = s_re[slot];
            output[plane + dst] = s_im[slot];
        }
    }
}

/// `[log2 n, n/2, 2, 2]` → `[log2 n, 4, n/2]`, each stage's blocks at their
/// [`RadixConfig::twiddle_address`], one element per unit.
#[cube(launch_unchecked)]
fn radix_twiddles_kernel<F: Float>(input: &Tensor<F>, output: &mut Tensor<F>, #[comptime] cfg: RadixConfig) {
    let half_n = comptime![1usize << (cfg.log_n - 1)];
    let o = CUBE_POS * comptime![RELAYOUT_THREADS] + UNIT_POS_X as usize;
    if o >= output.len() {
        terminate!();
    }
    let a = o % half_n;
    let c = (o / half_n) % 4;
    let stage = o / comptime![4 * half_n];
    // Invert the address: find the block k whose address is `a` (the stage's group is a
    // runtime value here, so every group is tried and the matching one kept).
    let mut k = 0;
    #[unroll]
    for gi in 0..comptime![cfg.groups()] {
        let b0 = comptime![cfg.group(gi).0];
        let g = comptime![cfg.group(gi).1];
        if stage >= b0 && stage < b0 + g {
            let s = stage - b0;
            let outside = a & comptime![(1usize << (cfg.log_n - g)) - 1];
            let inside = a >> comptime![cfg.log_n - g];
            // The group's bits of i0: `inside` with a zero inserted at bit s.
            let group_bits = ((inside >> s) << (s + 1)) | (inside & ((1usize << s) - 1));
            let i0 =
                (outside & comptime![(1usize << b0) - 1]) | (group_bits << b0) | ((outside >> b0) << comptime![b0 + g]);
            k = ((i0 >> (stage + 1)) << stage) | (i0 & ((1usize << stage) - 1));
        }
    }
    output[o] = input[(stage * half_n + k) * 4 + c];
}

/// Threads per cube of [`radix_twiddles_kernel`].
const RELAYOUT_THREADS: usize = 256;

/// One twiddle table (`[log2 n, n/2, 2, 2]`, contiguous) relaid for [`butterfly_radix_kernel`].
fn radix_twiddles<R: CubeRuntime, F: FloatElement>(tw: &CubeTensor<R>, cfg: RadixConfig) -> CubeTensor<R> {
    let len = tw.meta.shape().num_elements();
    let output = empty::<R, F>(tw, vec![len]);
    // SAFETY: units past `len` are masked; every read index is below `len` by construction.
    unsafe {
        radix_twiddles_kernel::launch_unchecked::<F, R>(
            &tw.client,
            grid(len.div_ceil(RELAYOUT_THREADS)),
            CubeDim::new_1d(RELAYOUT_THREADS as u32),
            tw.clone().into_tensor_arg(),
            output.clone().into_tensor_arg(),
            cfg,
        );
    }
    output
}

/// Launches the register-resident forward: `x` `[batch, n]`, twiddles `[log2 n, n/2, 2, 2]`
/// (contiguous) → packed `[2, batch, n]`.
pub(crate) fn forward<R: CubeRuntime, F: FloatElement>(
    x: &Split<R>,
    tw: &Split<R>,
    batch: usize,
    order: &InputOrder<R>,
    cfg: RadixConfig,
) -> CubeTensor<R> {
    let n = 1usize << cfg.log_n;
    let tables = Split::new(radix_twiddles::<R, F>(&tw.re, cfg), radix_twiddles::<R, F>(&tw.im, cfg));
    let output = empty::<R, F>(&x.re, vec![2, batch, n]);
    let cubes = batch.div_ceil(1 << cfg.log_rows);
    // SAFETY: rows past the batch are masked; shared-memory indices stay below 2^log_cube
    // (the swizzle only permutes the lowest five bits), twiddle indices below the table's length.
    unsafe {
        butterfly_radix_kernel::launch_unchecked::<F, R>(
            &x.re.client,
            grid(cubes),
            CubeDim::new_1d(cfg.threads() as u32),
            x.arg::<F>(),
            order.table.clone().into_tensor_arg(),
            tables.twiddles::<F>(),
            output.clone().into_tensor_arg(),
            batch as u32,
            cfg,
        );
    }
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs() -> impl Iterator<Item = RadixConfig> {
        (1..=12).flat_map(|log_n| {
            (1..=MAX_LOG_ELEMS)
                .filter_map(move |e| RadixConfig::with_elems(1 << log_n, 4, 1024, 48 << 10, Order::BitReversed, e))
        })
    }

    /// Every group's deposit, with its own bits, covers the cube once: each element is held by
    /// exactly one (thread, instance, element).
    #[test]
    fn groups_cover_the_cube_once() {
        for cfg in configs() {
            let stages: usize = (0..cfg.groups()).map(|i| cfg.group(i).1).sum();
            assert_eq!(stages, cfg.log_n, "{cfg:?}");
            for gi in 0..cfg.groups() {
                let (b0, g) = cfg.group(gi);
                let mut seen = vec![false; 1 << cfg.log_cube()];
                for f in 0..1usize << cfg.free_bits(gi) {
                    let base: usize = (0..cfg.free_bits(gi)).map(|j| ((f >> j) & 1) << cfg.position(gi, j)).sum();
                    for e in 0..1usize << g {
                        let i = base | (e << b0);
                        assert!(!seen[i], "{cfg:?} group {gi}: {i} twice");
                        seen[i] = true;
                    }
                }
                assert!(seen.iter().all(|&s| s), "{cfg:?} group {gi}");
            }
        }
    }

    /// The 32 lanes of a warp hit 32 distinct banks in every group (where the cube has ten
    /// bits), and the swizzle is a permutation.
    #[test]
    fn warps_are_free_of_bank_conflicts() {
        for cfg in configs().filter(|c| c.log_cube() >= 10) {
            let mut slots: Vec<usize> = (0..1 << cfg.log_cube()).map(|i| cfg.swizzle(i)).collect();
            slots.sort_unstable();
            assert!(slots.iter().enumerate().all(|(i, &s)| i == s), "{cfg:?}: swizzle");
            for gi in 0..cfg.groups() {
                let (b0, g) = cfg.group(gi);
                for e in 0..1usize << g {
                    let mut banks: Vec<usize> = (0..32usize)
                        .map(|f| {
                            let base: usize = (0..5).map(|j| ((f >> j) & 1) << cfg.position(gi, j)).sum();
                            cfg.swizzle(base | (e << b0)) % 32
                        })
                        .collect();
                    banks.sort_unstable();
                    banks.dedup();
                    assert_eq!(banks.len(), 32, "{cfg:?} group {gi} element {e}");
                }
            }
        }
    }

    /// The twiddle address is a permutation of each stage's blocks.
    #[test]
    fn twiddle_addresses_are_a_permutation() {
        for cfg in configs() {
            let n = 1usize << cfg.log_n;
            for p in 0..cfg.log_n {
                let mut seen = vec![false; n / 2];
                for i0 in (0..n).filter(|i| i & (1 << p) == 0) {
                    let a = cfg.twiddle_address(i0, p);
                    assert!(!seen[a], "{cfg:?} stage {p}");
                    seen[a] = true;
                }
            }
        }
    }
}
