//! The butterfly's register-resident forward for one-pass sizes, on the on-chip stage engine
//! ([`crate::ops::onchip`], whose docs describe the mapping): the kernel, the twiddle relayout
//! it reads (block `k` of a stage at its column bits outside the group, so a warp's loads are
//! contiguous vectors) and the launch.

use burn_cubecl::{tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::{prelude::*, CubeDim};

use super::InputOrder;
use crate::ops::cubecl::{empty, grid};
use crate::ops::onchip::{
    deposit_thread, exchange, group_stages, move_group, reverse_bits, reversed, swizzled, Order, Quad, RadixConfig,
    SharedSplit, Split, SplitArray, SplitInput,
};
use crate::ops::tuning::ELEMENTWISE_UNITS;

/// One cube transforms `2^(log_rows + log_stack)` consecutive rows, in `2^log_stack` slabs of
/// `2^log_rows` rows (one shared-memory cube each): coalesced load (permuted on the way), the
/// stage groups in registers with every twiddle block applied to all the slabs' instances, the
/// slabs exchanged one after the other through the shared memory between groups, coalesced
/// store.
#[cube(launch_unchecked)]
pub(crate) fn butterfly_radix_kernel<F: Float>(
    x: &SplitInput<F>,
    order: &Array<u32>,
    twiddles: &Array<Quad<F>>,
    output: &mut Array<F>,
    batch: u32,
    #[comptime] cfg: RadixConfig,
) {
    let log_n = comptime![cfg.log_n];
    let n = comptime![1usize << log_n];
    let rows = comptime![1usize << cfg.log_rows];
    let stack = comptime![1usize << cfg.log_stack];
    let threads = comptime![cfg.threads()];
    let elems = comptime![1usize << cfg.log_elems];
    let cube_len = comptime![1usize << cfg.log_cube()];
    let mut shared = SharedSplit::<F> { re: SharedMemory::<F>::new(cube_len), im: SharedMemory::<F>::new(cube_len) };
    let batch = batch as usize;
    let im_offset = x.im_offset as usize;
    // A chunked pass: cube `c` takes chunk `c mod chunks` of its rows, so the cubes that share
    // the rows' sectors run side by side.
    let log_chunks = comptime![cfg.log_chunks];
    let chunks = comptime![1usize << log_chunks];
    let row_len = comptime![n << log_chunks];
    let h = CUBE_POS % chunks;
    let first_row = (CUBE_POS / chunks) * comptime![rows * stack];
    if first_row >= batch {
        terminate!();
    }
    let t = UNIT_POS_X as usize;
    let plane = batch * row_len;
    let h_dst = h * n;
    let tw_base = h * comptime![cfg.stages * n];
    let last = comptime![cfg.groups() - 1];
    let mut regs = SplitArray::<F> {
        re: Array::<F>::new(comptime![elems * stack]),
        im: Array::<F>::new(comptime![elems * stack]),
    };

    if comptime![cfg.direct_load()] {
        // Straight from global memory: element e of an instance sits at column
        // rev(base | e) = rev(base) | rev(e) of its row (the first group starts at stage 0).
        let r = comptime![1usize << cfg.group(0).1];
        let base_t = deposit_thread(t, cfg, comptime![0usize]);
        let row_t = first_row + (base_t >> log_n);
        let src_t = row_t * row_len
            + (reverse_bits(base_t & comptime![n - 1], log_n) << log_chunks)
            + reverse_bits(h, log_chunks);
        #[unroll]
        for s in 0..stack {
            #[unroll]
            for q in 0..comptime![cfg.instances(0)] {
                let base_q = comptime![cfg.deposit(0, q * threads)];
                let row = row_t + comptime![(base_q >> log_n) + s * rows];
                let src = src_t
                    + comptime![
                        ((base_q >> log_n) + s * rows) * row_len + (reversed(base_q & (n - 1), log_n) << log_chunks)
                    ];
                #[unroll]
                for e in 0..r {
                    let mut re = F::new(0.0);
                    let mut im = F::new(0.0);
                    if row < batch {
                        re = x.re[src + comptime![reversed(e, log_n) << log_chunks]];
                        im = x.im[im_offset + src + comptime![reversed(e, log_n) << log_chunks]];
                    }
                    regs.re[s * elems + q * r + e] = re;
                    regs.im[s * elems + q * r + e] = im;
                }
            }
        }
    } else {
        // Coalesced load, a slab at a time: element `t + q · threads` of the slab is at that
        // offset from its first row's; its slot is the xor of the thread's and a constant (the
        // permutations but the table's are linear in the column bits).
        let mut slot_t = swizzled(t, cfg);
        if comptime![cfg.order == Order::BitReversed] {
            slot_t = swizzled((t >> log_n << log_n) | reverse_bits(t & comptime![n - 1], log_n), cfg);
        }
        let slot0 = swizzled(deposit_thread(t, cfg, comptime![0usize]), cfg);
        #[unroll]
        for s in 0..stack {
            let src_t = (first_row + s * rows) * n + t;
            #[unroll]
            for q in 0..elems {
                let src = src_t + comptime![q * threads];
                let mut re = F::new(0.0);
                let mut im = F::new(0.0);
                if src < plane {
                    re = x.re[src];
                    im = x.im[im_offset + src];
                }
                let mut slot = slot_t ^ comptime![cfg.swizzle(q * threads)];
                if comptime![cfg.order == Order::Table] {
                    let index = t + comptime![q * threads];
                    let i = order[n + (index & comptime![n - 1])] as usize;
                    slot = swizzled((index >> log_n << log_n) | i, cfg);
                } else if comptime![cfg.order == Order::BitReversed] {
                    let c = comptime![q * threads];
                    slot = slot_t ^ comptime![cfg.swizzle((c >> log_n << log_n) | reversed(c & (n - 1), log_n))];
                }
                shared.re[slot] = re;
                shared.im[slot] = im;
            }
            sync_cube();
            move_group(&mut shared, &mut regs, slot0, s, cfg, comptime![0usize], true);
            if comptime![s + 1 < stack] {
                // The next slab's load overwrites slots other threads may still read.
                sync_cube();
            }
        }
    }

    #[unroll]
    for gi in 0..comptime![cfg.groups()] {
        let b0 = comptime![cfg.group(gi).0];
        let r = comptime![1usize << cfg.group(gi).1];
        let instances = comptime![cfg.instances(gi)];
        group_stages(&mut regs, twiddles, t, tw_base, cfg, gi);
        let base_g = deposit_thread(t, cfg, gi);
        let slot_g = swizzled(base_g, cfg);
        if comptime![gi == last && cfg.direct_store()] {
            // Straight to global memory: the five lowest column bits are the lanes.
            let row_t = first_row + (base_g >> log_n);
            let dst_t = row_t * row_len + h_dst + (base_g & comptime![n - 1]);
            #[unroll]
            for s in 0..stack {
                #[unroll]
                for q in 0..instances {
                    let base_q = comptime![cfg.deposit(gi, q * threads)];
                    if row_t + comptime![(base_q >> log_n) + s * rows] < batch {
                        let dst = dst_t + comptime![((base_q >> log_n) + s * rows) * row_len + (base_q & (n - 1))];
                        #[unroll]
                        for e in 0..r {
                            output[dst + comptime![e << b0]] = regs.re[s * elems + q * r + e];
                            output[plane + dst + comptime![e << b0]] = regs.im[s * elems + q * r + e];
                        }
                    }
                }
            }
        } else if comptime![gi == last] {
            // Through shared memory, a slab at a time: coalesced stores from its natural layout.
            let slot_t = swizzled(t, cfg);
            #[unroll]
            for s in 0..stack {
                move_group(&mut shared, &mut regs, slot_g, s, cfg, gi, false);
                sync_cube();
                // One row a slab where chunked: `dst < plane` is `row < batch` either way.
                let dst_t = (first_row + s * rows) * row_len + h_dst + t;
                #[unroll]
                for q in 0..elems {
                    let dst = dst_t + comptime![q * threads];
                    if dst < plane {
                        let slot = slot_t ^ comptime![cfg.swizzle(q * threads)];
                        output[dst] = shared.re[slot];
                        output[plane + dst] = shared.im[slot];
                    }
                }
                if comptime![s + 1 < stack] {
                    sync_cube();
                }
            }
        } else {
            exchange(&mut shared, &mut regs, slot_g, t, cfg, gi);
        }
    }
}

/// `[log2 n, n/2, 2, 2]` (any strides, re and im) → one contiguous `[log2 n, 2, n/2, 4]`: per
/// stage the real parts, then the imaginary parts, of its blocks at their
/// [`RadixConfig::twiddle_address`], the block's four entries side by side (one [`Quad`]); one
/// entry of both tables per unit, `len` units (`log2 n · 4 · n/2`, times the chunks).
#[cube(launch_unchecked)]
fn radix_twiddles_kernel<F: Float>(
    input: &StridedTwiddles<F>,
    output: &mut Array<F>,
    len: u32,
    #[comptime] cfg: RadixConfig,
) {
    let half_n = comptime![1usize << (cfg.log_n - 1)];
    let o = CUBE_POS * comptime![ELEMENTWISE_UNITS] + UNIT_POS_X as usize;
    if o >= len as usize {
        terminate!();
    }
    // Chunk `chunk`'s tables follow one another; its blocks are the row's from `chunk · n/2` on.
    let per_chunk = comptime![cfg.stages * 4 * half_n];
    let chunk = o / per_chunk;
    let a = o % half_n;
    let c = (o / half_n) % 4;
    let stage = (o % per_chunk) / comptime![4 * half_n];
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
            // The group's bits of i0: `inside` with a zero inserted at bit s; the others are
            // the address's low bits in the group's column order.
            let group_bits = ((inside >> s) << (s + 1)) | (inside & ((1usize << s) - 1));
            let mut i0 = group_bits << b0;
            #[unroll]
            for r in 0..comptime![cfg.log_n - g] {
                i0 |= ((outside >> r) & 1) << comptime![cfg.column_order(gi)[r]];
            }
            k = ((i0 >> (stage + 1)) << stage) | (i0 & ((1usize << stage) - 1));
        }
    }
    k += chunk * half_n;
    let (row, col) = (c >> 1, c & 1);
    let at_re =
        stage * input.re.stride(0) + k * input.re.stride(1) + row * input.re.stride(2) + col * input.re.stride(3);
    let at_im =
        stage * input.im.stride(0) + k * input.im.stride(1) + row * input.im.stride(2) + col * input.im.stride(3);
    // Entry c of the block at address `a`: vector `(chunk, stage) · n + a` (re), `+ n/2` (im).
    let at = ((o / comptime![4 * half_n]) * comptime![2 * half_n] + a) * 4 + c;
    output[at] = input.re[at_re];
    output[at + comptime![4 * half_n]] = input.im[at_im];
}

/// The twiddle tables as the user's module holds them, `[log2 n, n/2, 2, 2]` with any strides:
/// the one kernel argument that stays a tensor (its strides are read), the relayout's input.
#[derive(CubeLaunch, CubeType)]
struct StridedTwiddles<F: Float> {
    re: Tensor<F>,
    im: Tensor<F>,
}

/// Both twiddle tables (`[log2 n, n/2, 2, 2]`, any strides) relaid for
/// [`butterfly_radix_kernel`] into one table, in one launch: the stages it applies
/// (`cfg.stages`), `[stages, 2, n/2, 4]` (see [`radix_twiddles_kernel`]), for each chunk of a
/// chunked pass (`[chunks, stages, 2, n/2, 4]`, chunk `h`'s blocks being the row's `h · n/2 …`).
/// The kernels read it as [`Quad`]s: a warp's load of one part of 32 consecutive blocks is 512
/// contiguous bytes.
pub(crate) fn radix_twiddles<R: CubeRuntime, F: FloatElement>(
    (re, im): (&CubeTensor<R>, &CubeTensor<R>),
    cfg: RadixConfig,
) -> CubeTensor<R> {
    let len = (cfg.stages * 4 * (1 << (cfg.log_n - 1))) << cfg.log_chunks;
    let output = empty::<R, F>(re, vec![2 * len]);
    // SAFETY: units past `len` are masked; every read is at the strided offset of an in-bounds
    // 4-D index (stage < log2 n, block < n/2, entry < 4).
    unsafe {
        radix_twiddles_kernel::launch_unchecked::<F, R>(
            &re.client,
            grid(len.div_ceil(ELEMENTWISE_UNITS)),
            CubeDim::new_1d(ELEMENTWISE_UNITS as u32),
            StridedTwiddlesLaunch::new(re.clone().into_tensor_arg(), im.clone().into_tensor_arg()),
            output.clone().into_array_arg(),
            len as u32,
            cfg,
        );
    }
    output
}

/// Launches the register-resident forward: `x` `[batch, n]` (contiguous), twiddles
/// `[log2 n, n/2, 2, 2]` (any strides) → packed `[2, batch, n]`; for a chunked pass
/// ([`RadixConfig::chunked`]) `x` is `[batch, n · chunks]` and the output the same shape, each
/// chunk after the pass's stages.
pub(crate) fn forward<R: CubeRuntime, F: FloatElement>(
    x: &Split<R>,
    tw: (&CubeTensor<R>, &CubeTensor<R>),
    batch: usize,
    order: &InputOrder<R>,
    cfg: RadixConfig,
) -> CubeTensor<R> {
    let row_len = 1usize << (cfg.log_n + cfg.log_chunks);
    let tables = radix_twiddles::<R, F>(tw, cfg);
    let output = empty::<R, F>(&x.re, vec![2, batch, row_len]);
    let cubes = batch.div_ceil(cfg.cube_rows()) << cfg.log_chunks;
    // SAFETY: rows past the batch are masked; shared-memory indices stay below 2^log_cube
    // (the swizzle only permutes the lowest five bits), twiddle indices below the table's length.
    unsafe {
        butterfly_radix_kernel::launch_unchecked::<F, R>(
            &x.re.client,
            grid(cubes),
            CubeDim::new_1d(cfg.threads() as u32),
            x.arg::<F>(),
            order.table.clone().into_array_arg(),
            tables.into_array_arg(),
            output.clone().into_array_arg(),
            batch as u32,
            cfg,
        );
    }
    output
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::butterfly::Permutation;
    use crate::ops::onchip::mapping::checks::{check_free_of_bank_conflicts, check_groups_cover_the_cube};
    use crate::ops::onchip::MAX_LOG_ELEMS;
    use crate::ops::tuning::Compiler;
    use crate::ops::tuning::DeviceLimits;

    /// Every size, element count, group size, order and cube size, each applying all its stages
    /// or only the first few (the backward's recompute).
    fn configs() -> impl Iterator<Item = RadixConfig> {
        (1..=12).flat_map(|log_n| {
            (1..=MAX_LOG_ELEMS).flat_map(move |e| {
                (1..=e).flat_map(move |g| {
                    // Cubes of 4096 (48 KiB of f32 gives 32 KiB), 2048, 1024, 512 and 256 elements.
                    [(Order::BitReversed, 48usize << 10), (Order::Natural, 48 << 10)]
                        .into_iter()
                        .chain(
                            [16usize << 10, 8 << 10, 4 << 10, 2 << 10]
                                .into_iter()
                                .map(|shared| (Order::BitReversed, shared)),
                        )
                        .filter_map(move |(o, shared)| {
                            let limits = DeviceLimits::new(Compiler::Wgsl, shared, 1024);
                            RadixConfig::with_elems(1 << log_n, 4, &limits, o, (e, g))
                        })
                        .flat_map(move |cfg| (1..=log_n).map(move |stages| cfg.first_stages(stages)))
                })
            })
        })
    }

    /// Every group's deposit, with its own bits, covers the cube once: each element is held by
    /// exactly one (thread, instance, element).
    #[test]
    fn groups_cover_the_cube_once() {
        configs().for_each(|cfg| check_groups_cover_the_cube(&cfg));
    }

    /// The 32 lanes of a warp hit 32 distinct banks in every group (where the cube has ten
    /// bits), and the swizzle is a permutation.
    #[test]
    fn warps_are_free_of_bank_conflicts() {
        configs().filter(|c| c.log_cube() >= 10).for_each(|cfg| check_free_of_bank_conflicts(&cfg));
    }

    /// The twiddle address is a permutation of each stage's blocks.
    /// The kernel splits each instance's cube index, slot and twiddle address into the thread's
    /// part and a compile-time constant (`t + q · threads` has disjoint bits): the split must
    /// give what the whole free index gives.
    #[test]
    fn thread_and_constant_parts_compose() {
        for cfg in configs() {
            let threads = cfg.threads();
            for gi in 0..cfg.groups() {
                for q in 0..cfg.instances(gi) {
                    let c = q * threads;
                    // Every thread bit set and clear: a stride through the threads, the last one.
                    let ts = (0..threads).step_by((threads / 16).max(1)).chain([threads - 1]);
                    for t in ts {
                        let whole = cfg.deposit(gi, t + c);
                        assert_eq!(whole, cfg.deposit(gi, t) | cfg.deposit(gi, c), "{cfg:?} group {gi}");
                        assert_eq!(cfg.deposit(gi, t) & cfg.deposit(gi, c), 0, "{cfg:?} group {gi}");
                        let thread_bits: usize =
                            (0..cfg.log_threads()).map(|j| ((t >> j) & 1) << cfg.position(gi, j)).sum();
                        assert_eq!(thread_bits, cfg.deposit(gi, t), "{cfg:?} group {gi}");
                        assert_eq!(
                            cfg.swizzle(whole),
                            cfg.swizzle(cfg.deposit(gi, t)) ^ cfg.swizzle(cfg.deposit(gi, c))
                        );
                        assert_eq!(
                            cfg.outside(gi, t + c),
                            cfg.outside(gi, t) | cfg.outside(gi, c),
                            "{cfg:?} group {gi}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn twiddle_addresses_are_a_permutation() {
        for cfg in configs() {
            let n = 1usize << cfg.log_n;
            for p in 0..cfg.stages {
                let mut seen = vec![false; n / 2];
                for i0 in (0..n).filter(|i| i & (1 << p) == 0) {
                    let a = cfg.twiddle_address(i0, p);
                    assert!(!seen[a], "{cfg:?} stage {p}");
                    seen[a] = true;
                }
            }
        }
    }

    /// Group 0 of a direct load: its lanes read consecutive source columns (the bit reversal
    /// of its lane bits); the last group of a direct store: its lanes write consecutive columns.
    /// In every group the lanes' column bits are the twiddle address's lowest bits, in order.
    #[test]
    fn direct_loads_stores_and_twiddles_are_coalesced() {
        let mut direct = (0, 0);
        for cfg in configs() {
            let n = 1usize << cfg.log_n;
            if cfg.direct_load() {
                direct.0 += 1;
                let columns: Vec<usize> = (0..32usize)
                    .map(|f| {
                        let base: usize = (0..5).map(|j| ((f >> j) & 1) << cfg.position(0, j)).sum();
                        reversed(base & (n - 1), cfg.log_n)
                    })
                    .collect();
                assert!(columns.windows(2).all(|w| w[1] == w[0] + 1), "{cfg:?}: {columns:?}");
            }
            if cfg.direct_store() {
                direct.1 += 1;
                let last = cfg.groups() - 1;
                assert_eq!(cfg.free_order(last)[..5], [0, 1, 2, 3, 4], "{cfg:?}");
            }
            for gi in 0..cfg.groups() {
                let lanes = cfg.free_bits(gi).min(5);
                let bits: Vec<usize> = (0..lanes).filter_map(|j| cfg.address_bit(gi, j)).collect();
                assert!(bits.iter().enumerate().all(|(r, &b)| r == b), "{cfg:?} group {gi}: {bits:?}");
            }
        }
        assert!(direct.0 > 0 && direct.1 > 0, "no configuration loads or stores directly: {direct:?}");
    }

    /// Every configuration (elements and group sizes, the three orders, N = 2 … 4096, all the
    /// stages or the first few) against the dense product of the stages in f64, on the wgpu device: a batch that ends in a
    /// partial cube. Skipped without an adapter (the integration suite's wgpu tests say why).
    #[test]
    fn every_configuration_matches_the_stages_on_wgpu() {
        use crate::backend::WgpuBackend;
        use burn::tensor::{Tensor, TensorPrimitive};
        use num_complex::Complex64;
        /// f32 kernel against the f64 product, relative RMS: log2 N rounds of f32 products.
        const F32_REL: f64 = 1e-5;
        if crate::backend::wgpu_adapter().is_none() {
            assert!(!crate::backend::wgpu_required(), "LEARNED_FFT_REQUIRE_WGPU=1 but wgpu found no adapter");
            return;
        }
        type R = burn::backend::wgpu::WgpuRuntime;
        let device = Default::default();
        let client = <R as cubecl::Runtime>::client(&device);
        let limits = DeviceLimits::of(&client);
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut uniform = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        // Each (elements, group) pair at two or more sizes, each order, direct loads and stores,
        // shared and per-instance twiddles, one group and several (every configuration is a
        // kernel of its own to compile, which costs seconds on a CPU device).
        use Order::{BitReversed as B, Natural as Nat, Table as T};
        // The fourth field: the stages applied (fewer than log2 N: the backward's recompute); the
        // fifth: log2 of the slabs a cube stacks; the last: whether each block is reloaded for
        // every slab and instance it serves.
        let cases = [
            (1, (3, 1), Nat, 1, 0, false),
            (3, (5, 3), B, 3, 0, false),
            (5, (3, 2), T, 5, 0, false),
            (6, (3, 3), B, 6, 0, false),
            (6, (5, 5), B, 6, 0, false),
            (8, (4, 4), T, 8, 0, false),
            (8, (2, 1), B, 8, 0, false),
            (8, (5, 3), B, 8, 0, false),
            (8, (3, 3), B, 4, 0, false),
            (10, (5, 3), B, 10, 0, false),
            (10, (4, 4), B, 10, 0, false),
            (10, (3, 2), T, 10, 0, false),
            (10, (5, 5), Nat, 10, 0, false),
            (10, (5, 4), B, 5, 0, false),
            (12, (4, 2), B, 12, 0, false),
            (12, (3, 3), Nat, 12, 0, false),
            (12, (5, 2), T, 6, 0, false),
            (8, (4, 2), B, 8, 0, false),
            (12, (5, 2), B, 12, 0, false),
            (12, (3, 3), B, 12, 2, false),
            (12, (4, 4), Nat, 12, 1, false),
            (12, (4, 2), B, 6, 1, false),
            (10, (4, 2), T, 10, 1, false),
            (8, (3, 3), B, 4, 1, false),
            (6, (3, 3), B, 6, 3, false),
            (10, (3, 3), B, 10, 1, true),
            (12, (3, 3), B, 12, 2, true),
            (12, (4, 2), B, 6, 1, true),
            (8, (3, 3), T, 8, 1, true),
        ];
        let mut checked = 0;
        for (log_n, elems, order, stages, log_stack, reload) in cases {
            let n = 1usize << log_n;
            let Some(cfg) = RadixConfig::with_elems(n, 4, &limits, order, elems) else { continue };
            let cfg = cfg.first_stages(stages).stacked(log_stack).reloading(reload);
            // A full cube, and a partial one: with slabs, half of them and half a slab more (the
            // rest past the batch).
            let rows = 1 << cfg.log_rows;
            let batch = if log_stack == 0 { rows + 3 } else { cfg.cube_rows() * 3 / 2 + rows / 2 + 1 };
            let x: Vec<Vec<f64>> = (0..2).map(|_| (0..batch * n).map(|_| uniform()).collect()).collect();
            let tw: Vec<Vec<f64>> = (0..2).map(|_| (0..log_n * n * 2).map(|_| uniform()).collect()).collect();
            let gather: Vec<usize> = match order {
                Order::Natural => (0..n).collect(),
                Order::BitReversed => crate::reference::factorizations::bit_reversal(n),
                Order::Table => {
                    let mut g: Vec<usize> = (0..n).collect();
                    for i in (1..n).rev() {
                        g.swap(i, ((uniform() + 0.5) * (i + 1) as f64) as usize % (i + 1));
                    }
                    g
                }
            };
            let perm = match order {
                Order::Natural => Permutation::Identity,
                Order::BitReversed => Permutation::BitReversal,
                Order::Table => Permutation::Gather(gather.clone()),
            };
            // The f64 product, one row at a time (the crate's f64 butterfly), of the stages the
            // kernel applies: the later ones identity blocks there (the kernel gets them random).
            let mut applied = tw.clone();
            for (part, one) in applied.iter_mut().zip([1.0, 0.0]) {
                for (e, v) in part.iter_mut().enumerate().skip(stages * n * 2) {
                    *v = if e % 4 == 0 || e % 4 == 3 { one } else { 0.0 };
                }
            }
            let mut want = vec![0.0; 2 * batch * n];
            for row in 0..batch {
                let mut v: Vec<Complex64> =
                    (0..n).map(|i| Complex64::new(x[0][row * n + i], x[1][row * n + i])).collect();
                crate::reference::butterfly::apply(&applied[0], &applied[1], &gather, &mut v)
                    .expect("a valid butterfly");
                for (i, z) in v.into_iter().enumerate() {
                    want[row * n + i] = z.re;
                    want[batch * n + row * n + i] = z.im;
                }
            }
            let upload = |v: &Vec<f64>| {
                let floats: Vec<f32> = v.iter().map(|&a| a as f32).collect();
                Tensor::<WgpuBackend, 1>::from_floats(floats.as_slice(), &device)
            };
            let xs = Split::new(upload(&x[0]).into_primitive().tensor(), upload(&x[1]).into_primitive().tensor());
            // The twiddles as a layer holds them, `[log2 n, n/2, 2, 2]`; every other case
            // through a transposed view (strides not those of a contiguous table).
            let table = |v: &Vec<f64>| {
                if checked % 2 == 0 {
                    upload(v).reshape([log_n, n / 2, 2, 2])
                } else {
                    // Each block stored transposed, then viewed back.
                    let t: Vec<f64> = (0..v.len()).map(|i| v[(i & !3) | ((i & 1) << 1) | ((i >> 1) & 1)]).collect();
                    upload(&t).reshape([log_n, n / 2, 2, 2]).swap_dims(2, 3)
                }
            };
            let (tw_re, tw_im) = (table(&tw[0]).into_primitive().tensor(), table(&tw[1]).into_primitive().tensor());
            assert_eq!(tw_re.is_contiguous(), checked % 2 == 0);
            let input_order = InputOrder::new(&perm, n, &xs.re);
            let out = forward::<R, f32>(&xs, (&tw_re, &tw_im), batch, &input_order, cfg);
            let got = Tensor::<WgpuBackend, 3>::from_primitive(TensorPrimitive::Float(out))
                .into_data()
                .convert::<f64>()
                .into_vec::<f64>()
                .unwrap_or_default();
            assert_eq!(got.len(), want.len(), "{cfg:?}");
            let num: f64 = got.iter().zip(&want).map(|(a, b)| (a - b) * (a - b)).sum();
            let den: f64 = want.iter().map(|b| b * b).sum();
            let rel = (num / den).sqrt();
            assert!(rel < F32_REL, "{cfg:?}: relative RMS {rel:e} (batch {batch})");
            checked += 1;
        }
        assert_eq!(checked, cases.len(), "every configuration fits the adapter's budget and threads");
    }
}
