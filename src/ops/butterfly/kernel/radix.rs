//! The register-resident forward for one-pass sizes: each thread holds up to 32 elements in
//! registers and runs groups of stages on them, so the signal crosses shared memory once per
//! group instead of once per stage.
//!
//! ## Mapping
//! A cube holds `2^B` elements of shared memory (`B = log2 rows + log2 n`; a cube index `I`
//! is `row · n + i`). The `log2 n` stages are split into groups of at most `log_group` stages.
//! For a group of stages `[b0, b0 + g)`, a thread holds the `r = 2^g` elements that differ only
//! in those bits, for `E / r` instances (`E` elements per thread): its free index
//! `f = t + q · threads` is deposited into the other bits of `I`, lane bits first, the instance
//! bits last (row bits where the cube has them).
//! - **Shared memory without bank conflicts.** Element `I` lives at `I ^ fold(I)`, where `fold`
//!   xors the 5-bit chunks above the lowest, so bit `p` of `I` moves bank bit `p mod 5`. The
//!   32 lanes of a warp take five free bits with distinct residues mod 5 (the smallest free bit
//!   of each residue), so every shared-memory access of a warp touches 32 distinct banks. The
//!   same swizzle makes the coalesced load and store conflict-free, bit reversal included.
//! - **Global memory straight to registers.** With the bit reversal, the first group's lanes
//!   are the five highest column bits (the five lowest of the source), so it loads coalesced from
//!   global memory into registers; where the last group leaves the five lowest column bits free,
//!   it stores coalesced from registers. Only the rounds between groups use shared memory.
//! - **Coalesced twiddles.** For a stage `p` of group `G`, the forward reads the twiddles
//!   relaid by [`radix_twiddles`]: block `k` sits at its column bits outside `G` in the group's
//!   lane-first order, then the group's other bits above. A warp's lanes are the lowest of
//!   those, and a block's four real parts (and its four imaginary parts) sit side by side, so a
//!   block is two 16-byte vector loads ([`Quad`]) and each of a warp's is 512 contiguous bytes.
//! - **Twiddle reuse.** A thread's instances differ in row bits (where the cube holds enough
//!   rows): each twiddle block is loaded once and applied to all of them (groups smaller than
//!   the thread's elements trade more shared-memory rounds for more rows per load).

use burn_cubecl::{tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::{prelude::*, CubeDim};

use super::{block_times, load_block, reverse_bits, InputOrder, Order, Split, SplitInput, TwiddleTables, Twiddles};
use crate::ops::cubecl::{empty, grid};
use crate::ops::tuning::DeviceLimits;

/// Largest group of stages a thread holds (2^5 = 32 complex elements: 64 registers).
pub(crate) const MAX_LOG_ELEMS: usize = 5;
/// Most slabs a cube stacks, log2 (registers: `2^(log_elems + log_stack)` complex elements a
/// thread).
pub(crate) const MAX_LOG_STACK: usize = 3;
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
    /// Most stages in one group (at most `log_elems`): a thread holds `2^(log_elems − g)`
    /// instances of a group of `g` stages, rows apart where the cube has the rows, so each
    /// twiddle block it loads serves that many rows.
    pub log_group: usize,
    /// log2 of the slabs a cube stacks: `2^log_rows` rows each (one shared memory's worth), held
    /// in registers side by side (a thread holds `2^(log_elems + log_stack)` elements), so every
    /// twiddle block a thread loads serves each slab; the slabs cross the shared memory one after
    /// the other between groups.
    pub log_stack: usize,
    /// How the input is ordered.
    pub order: Order,
    /// Stages applied: the first `stages` of the `log_n` (all of them for the forward; the
    /// first pass's for the backward's recompute of a two-pass split, [`Self::first_stages`]).
    pub stages: usize,
    /// log2 of the chunks a row holds: 0 for a transform of `n` points; otherwise the first
    /// pass of one of `n · 2^log_chunks` points ([`Self::chunked`]), each cube's rows being chunk
    /// `h` (its stages' twiddles from `h · n/2` on) of consecutive batch rows.
    pub log_chunks: usize,
    /// Whether each twiddle block is loaded again for every slab and instance it serves
    /// instead of once for all of them ([`tuning::default_reload`](crate::ops::tuning::default_reload)): more loads (L1 hits), shorter
    /// register live ranges.
    pub reload: bool,
}

impl RadixConfig {
    /// The configuration for `n` with `2^log_elems` elements per thread in groups of at most
    /// `log_group` stages on `limits`' device, a cube filling its budget, in `elem`-byte floats;
    /// `None` where a row does not fit one cube.
    pub fn with_elems(
        n: usize,
        elem: usize,
        limits: &DeviceLimits,
        order: Order,
        (log_elems, log_group): (usize, usize),
    ) -> Option<Self> {
        if !n.is_power_of_two()
            || n < 2
            || !(1..=MAX_LOG_ELEMS).contains(&log_elems)
            || !(1..=log_elems).contains(&log_group)
        {
            return None;
        }
        let log_n = n.trailing_zeros() as usize;
        let budget = limits.budget() / (2 * elem);
        if budget < 2 {
            return None;
        }
        let log_cube = usize::BITS as usize - 1 - budget.leading_zeros() as usize;
        if log_cube < log_n.max(MIN_LOG_CUBE) || log_cube < log_elems {
            return None;
        }
        let cfg = Self::plain(log_n, log_cube - log_n, order, (log_elems, log_group));
        (cfg.threads() <= limits.max_units && cfg.threads() >= 1).then_some(cfg)
    }

    /// One row of `n` per cube (no row bits), `2^log_elems` elements a thread in groups of at
    /// most `log_group` stages (both at most `log2 n`), in `order`: the convolution's transforms,
    /// whose rows each need their own channel's spectrum. `None` for `n` not a power of two ≥ 2.
    pub fn single_row(n: usize, order: Order, (log_elems, log_group): (usize, usize)) -> Option<Self> {
        if !n.is_power_of_two() || n < 2 || log_elems == 0 || log_group == 0 {
            return None;
        }
        let log_n = n.trailing_zeros() as usize;
        let log_elems = log_elems.min(log_n).min(MAX_LOG_ELEMS);
        let log_group = log_group.min(log_elems);
        Some(Self::plain(log_n, 0, order, (log_elems, log_group)))
    }

    /// Every stage of `2^log_n` points, `2^log_rows` rows a cube, one slab, not chunked.
    fn plain(log_n: usize, log_rows: usize, order: Order, (log_elems, log_group): (usize, usize)) -> Self {
        RadixConfig {
            log_n,
            log_rows,
            log_elems,
            log_group,
            log_stack: 0,
            order,
            stages: log_n,
            log_chunks: 0,
            reload: false,
        }
    }

    /// The same mapping with `2^log_stack` slabs per cube (at most [`MAX_LOG_STACK`]).
    pub fn stacked(self, log_stack: usize) -> Self {
        RadixConfig { log_stack: log_stack.min(MAX_LOG_STACK), ..self }
    }

    /// The first pass (all `log2 n` stages) of a bit-reversed transform of `n · 2^log_chunks`
    /// points, on its chunks of `n`: after the bit reversal, chunk `h` of a row holds the
    /// samples `rev(c) · 2^log_chunks + rev(h)` (`c < n`), which a cube loads straight into
    /// registers (consecutive lanes 2^log_chunks samples apart; the cubes of the other chunks
    /// of the same rows, launched next to it, read the rest of those sectors), and it writes
    /// the chunk contiguously. `None` unless a cube holds one row a slab and loads it directly.
    pub fn chunked(self, log_chunks: usize) -> Option<Self> {
        let cfg = RadixConfig { log_chunks, ..self };
        (self.log_rows == 0 && self.stages == self.log_n && cfg.direct_load()).then_some(cfg)
    }

    /// The same mapping with each twiddle block reloaded for every slab and instance it serves
    /// where `reload` ([`Self::reload`]).
    pub fn reloading(self, reload: bool) -> Self {
        RadixConfig { reload, ..self }
    }

    /// Rows one cube transforms (all its slabs).
    pub fn cube_rows(&self) -> usize {
        1 << (self.log_rows + self.log_stack)
    }

    /// The same kernel stopping after the first `stages` stages (at least one, at most
    /// `log_n`): its output is the intermediate after them, in natural order.
    pub fn first_stages(self, stages: usize) -> Self {
        RadixConfig { stages: stages.clamp(1, self.log_n), ..self }
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
        self.stages.div_ceil(self.log_group.min(self.stages))
    }

    /// Group `i`: its first stage and its number of stages (groups balanced, larger first).
    pub fn group(&self, i: usize) -> (usize, usize) {
        let count = self.groups();
        let (base, extra) = (self.stages / count, self.stages % count);
        (i * base + i.min(extra), base + usize::from(i < extra))
    }

    /// Instances (sets of `2^g` elements) a thread holds in group `i`.
    pub fn instances(&self, i: usize) -> usize {
        1 << (self.log_elems - self.group(i).1)
    }

    /// The bits of the cube index a thread's free index fills in group `i`, in order: five lane
    /// bits with distinct residues mod 5 (where the cube has ten bits), then the rest ascending.
    /// Where the first group loads straight from global memory ([`Self::direct_load`]) its lanes
    /// are the five highest column bits, highest first, which the bit reversal makes the five
    /// lowest of the source: consecutive lanes read consecutive floats.
    pub fn free_order(&self, i: usize) -> Vec<usize> {
        let (b0, g) = self.group(i);
        let bits = self.log_cube();
        let free: Vec<usize> = (0..bits).filter(|p| !(b0..b0 + g).contains(p)).collect();
        let mut lanes = Vec::new();
        if i == 0 && self.direct_load() {
            lanes.extend((self.log_n - 5..self.log_n).rev());
        } else if bits >= 10 {
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

    /// Whether the first group reads its elements from global memory into registers (no
    /// staging through shared memory): for a bit-reversed input whose five highest column bits
    /// lie outside the first group.
    pub fn direct_load(&self) -> bool {
        self.order == Order::BitReversed && self.log_cube() >= 10 && self.log_n >= 5 + self.group(0).1
    }

    /// Whether the last group writes its elements from registers to global memory: where the
    /// five lowest column bits lie outside it (its lanes are then those bits, so consecutive lanes
    /// write consecutive floats).
    pub fn direct_store(&self) -> bool {
        let last = self.groups() - 1;
        self.groups() >= 2 && self.group(last).0 >= 5 && self.free_order(last)[..5] == [0, 1, 2, 3, 4]
    }

    /// The column bits (below `log_n`) of group `i`'s free index, in its order: the twiddle
    /// address of a block holds them in this order, so a warp's lanes read consecutive entries.
    pub fn column_order(&self, i: usize) -> Vec<usize> {
        self.free_order(i).into_iter().filter(|&p| p < self.log_n).collect()
    }

    /// Where bit `j` of group `i`'s free index goes in the twiddle address (`None` for a row bit).
    pub fn address_bit(&self, i: usize, j: usize) -> Option<usize> {
        let order = self.free_order(i);
        (order[j] < self.log_n).then(|| order[..j].iter().filter(|&&p| p < self.log_n).count())
    }

    /// Bit `j` of the free index of group `i` goes to this bit of the cube index.
    pub fn position(&self, i: usize, j: usize) -> usize {
        self.free_order(i)[j]
    }

    /// Bits of the free index in group `i`.
    #[cfg(test)]
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

    /// Where cube element `index` lives in shared memory. The map is linear over GF(2) (an xor
    /// of shifted copies of the index), so the slot of `a | b` for disjoint `a`, `b` is the xor
    /// of theirs: the kernels swizzle the thread's part once and xor in a constant per element.
    pub fn swizzle(&self, index: usize) -> usize {
        if self.log_cube() < MIN_LOG_CUBE {
            return index;
        }
        index ^ (((index >> 5) ^ (index >> 10)) & 31)
    }

    /// log2 of the threads per cube.
    pub fn log_threads(&self) -> usize {
        self.log_cube() - self.log_elems
    }

    /// The cube index of free index `f` of group `gi` (its group bits zero): [`deposit`] at
    /// compile time. Depositing scatters bits, so the index of `t + q · threads` (`t <
    /// threads`, disjoint bits) is the thread's part, [`deposit_thread`], or this constant.
    pub fn deposit(&self, gi: usize, f: usize) -> usize {
        self.free_order(gi).into_iter().enumerate().map(|(j, p)| ((f >> j) & 1) << p).fold(0, |a, b| a | b)
    }

    /// The twiddle address outside the group's bits of free index `f` of group `gi`:
    /// [`outside_address`]'s constant part, at compile time (the same scatter argument).
    pub fn outside(&self, gi: usize, f: usize) -> usize {
        let order = self.free_order(gi);
        let mut bit = 0;
        let mut address = 0;
        for (j, p) in order.into_iter().enumerate() {
            if p < self.log_n {
                address |= ((f >> j) & 1) << bit;
                bit += 1;
            }
        }
        address
    }

    /// The twiddle address (within a stage) of the butterfly at row index `i0` (bit `p` clear)
    /// of stage `p` in group `i`: the column bits outside the group in [`Self::column_order`],
    /// then the group's other bits.
    #[cfg(test)]
    pub fn twiddle_address(&self, i0: usize, p: usize) -> usize {
        let i = self.group_of(p);
        let (b0, g) = self.group(i);
        let outside: usize = self.column_order(i).iter().enumerate().map(|(r, &q)| ((i0 >> q) & 1) << r).sum();
        let inside = (i0 >> b0) & ((1 << g) - 1);
        let s = p - b0;
        let inside = (inside & ((1 << s) - 1)) | ((inside >> (s + 1)) << s);
        outside | (inside << (self.log_n - g))
    }

    /// The group holding stage `p`.
    #[cfg(test)]
    pub fn group_of(&self, p: usize) -> usize {
        (0..self.groups()).find(|&i| (self.group(i).0..self.group(i).0 + self.group(i).1).contains(&p)).unwrap_or(0)
    }
}

/// Four entries of a twiddle block (`t00, t01, t10, t11`, real or imaginary parts) as one
/// vector: a block is two vector loads instead of eight scalar ones.
pub(crate) type Quad<F> = Vector<F, Const<4>>;

/// `x_a, x_b ← T · (x_a, x_b)` in registers.
#[cube]
fn apply_registers<F: Float>(
    vr: &mut Array<F>,
    vi: &mut Array<F>,
    #[comptime] a: usize,
    #[comptime] b: usize,
    tw: &Twiddles<F>,
) {
    let (c0r, c0i, c1r, c1i) = block_times(tw, vr[a], vi[a], vr[b], vi[b]);
    vr[a] = c0r;
    vi[a] = c0i;
    vr[b] = c1r;
    vi[b] = c1i;
}

/// The block whose real parts are vector `w` of the relaid tables ([`radix_twiddles`]) and
/// imaginary parts vector `w + half_n`: two vector loads.
#[cube]
fn load_quads<F: Float>(twiddles: &Array<Quad<F>>, w: usize, #[comptime] half_n: usize) -> Twiddles<F> {
    let (tr, ti) = (twiddles[w], twiddles[w + half_n]);
    Twiddles::<F> {
        t00r: tr[0],
        t00i: ti[0],
        t01r: tr[1],
        t01i: ti[1],
        t10r: tr[2],
        t10i: ti[2],
        t11r: tr[3],
        t11i: ti[3],
    }
}

/// `x_a, x_b ← T · (x_a, x_b)` for the block at entries `w + c · half_n` of planar tables.
#[cube]
pub(crate) fn apply<F: Float>(
    vr: &mut Array<F>,
    vi: &mut Array<F>,
    #[comptime] a: usize,
    #[comptime] b: usize,
    twiddles: &TwiddleTables<F>,
    w: usize,
    #[comptime] half_n: usize,
) {
    apply_registers(vr, vi, a, b, &load_block(twiddles, 0, w, half_n));
}

/// The cube index of thread `t`'s first instance of group `gi` (`t < threads`; its group bits
/// zero): instance `q` is this or [`RadixConfig::deposit`]`(gi, q · threads)`.
#[cube]
pub(crate) fn deposit_thread(t: usize, #[comptime] cfg: RadixConfig, #[comptime] gi: usize) -> usize {
    let mut index = 0;
    #[unroll]
    for j in 0..comptime![cfg.log_threads()] {
        index |= ((t >> j) & 1) << comptime![cfg.position(gi, j)];
    }
    index
}

/// Shared-memory slot of cube element `index` (see [`RadixConfig::swizzle`]).
#[cube]
pub(crate) fn swizzled(index: usize, #[comptime] cfg: RadixConfig) -> usize {
    if comptime![cfg.log_cube() >= MIN_LOG_CUBE] {
        index ^ (((index >> 5) ^ (index >> 10)) & 31)
    } else {
        index
    }
}

/// The twiddle address of thread `t`'s first instance of group `gi` outside the group's bits
/// (`t < threads`): its column bits in [`RadixConfig::column_order`]; instance `q` adds
/// [`RadixConfig::outside`]`(gi, q · threads)`.
#[cube]
fn outside_address(t: usize, #[comptime] cfg: RadixConfig, #[comptime] gi: usize) -> usize {
    let mut address = 0;
    #[unroll]
    for j in 0..comptime![cfg.log_threads()] {
        if comptime![cfg.address_bit(gi, j).is_some()] {
            address |= ((t >> j) & 1) << comptime![cfg.address_bit(gi, j).unwrap_or(0)];
        }
    }
    address
}

/// `bits`-bit reversal of a comptime value (`bits ≥ 1`).
pub(crate) fn reversed(i: usize, bits: usize) -> usize {
    i.reverse_bits() >> (usize::BITS as usize - bits)
}

/// Slab `s`'s elements of group `gi`'s instances for the thread whose first slot is `slot_t`
/// (registers `s · elems + q · r + e`): from shared memory to the registers where `load`, else
/// back.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn move_group<F: Float>(
    s_re: &mut SharedMemory<F>,
    s_im: &mut SharedMemory<F>,
    vr: &mut Array<F>,
    vi: &mut Array<F>,
    slot_t: usize,
    #[comptime] s: usize,
    #[comptime] cfg: RadixConfig,
    #[comptime] gi: usize,
    #[comptime] load: bool,
) {
    let threads = comptime![cfg.threads()];
    let elems = comptime![1usize << cfg.log_elems];
    let b0 = comptime![cfg.group(gi).0];
    let r = comptime![1usize << cfg.group(gi).1];
    #[unroll]
    for q in 0..comptime![cfg.instances(gi)] {
        #[unroll]
        for e in 0..r {
            let slot = slot_t ^ comptime![cfg.swizzle(cfg.deposit(gi, q * threads) | (e << b0))];
            let at = comptime![s * elems + q * r + e];
            if comptime![load] {
                vr[at] = s_re[slot];
                vi[at] = s_im[slot];
            } else {
                s_re[slot] = vr[at];
                s_im[slot] = vi[at];
            }
        }
    }
}

/// Group `gi`'s stages on the thread's registers (every slab and instance; thread `t`), each
/// twiddle block loaded once for every instance that shares it, from vector `base` on in the
/// relaid tables ([`radix_twiddles`]).
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn group_stages<F: Float>(
    vr: &mut Array<F>,
    vi: &mut Array<F>,
    twiddles: &Array<Quad<F>>,
    t: usize,
    base: usize,
    #[comptime] cfg: RadixConfig,
    #[comptime] gi: usize,
) {
    let log_n = comptime![cfg.log_n];
    let half_n = comptime![1usize << (log_n - 1)];
    let stack = comptime![1usize << cfg.log_stack];
    let threads = comptime![cfg.threads()];
    let elems = comptime![1usize << cfg.log_elems];
    let b0 = comptime![cfg.group(gi).0];
    let g = comptime![cfg.group(gi).1];
    let r = comptime![1usize << g];
    let instances = comptime![cfg.instances(gi)];
    let shares = comptime![cfg.shares_twiddles(gi)];
    // The twiddle address of the thread's first instance; instance q adds a constant.
    let outside_t = outside_address(t, cfg, gi);
    #[unroll]
    for st in 0..g {
        let stage = comptime![b0 + st];
        let stage_base = comptime![stage * 2 * half_n];
        #[unroll]
        for pair in 0..comptime![r / 2] {
            // The pair's elements: `pair` with a zero inserted at bit st, and that plus 2^st.
            let e0 = comptime![((pair >> st) << (st + 1)) | (pair & ((1usize << st) - 1))];
            let e1 = comptime![e0 + (1usize << st)];
            let inside = comptime![pair << (log_n - g)];
            if comptime![cfg.reload] {
                // Where the instances share their blocks, `outside` is zero for every one of
                // them (their free bits are row bits), so each reloads the same block.
                #[unroll]
                for s in 0..stack {
                    #[unroll]
                    for q in 0..instances {
                        let w = (outside_t | comptime![cfg.outside(gi, q * threads) | inside]) + stage_base + base;
                        let at = comptime![s * elems + q * r];
                        apply_registers(vr, vi, at + e0, at + e1, &load_quads(twiddles, w, half_n));
                    }
                }
            } else if comptime![shares] {
                let tw = load_quads(twiddles, (outside_t | inside) + stage_base + base, half_n);
                #[unroll]
                for s in 0..stack {
                    #[unroll]
                    for q in 0..instances {
                        let at = comptime![s * elems + q * r];
                        apply_registers(vr, vi, at + e0, at + e1, &tw);
                    }
                }
            } else {
                #[unroll]
                for q in 0..instances {
                    let w = (outside_t | comptime![cfg.outside(gi, q * threads) | inside]) + stage_base + base;
                    let tw = load_quads(twiddles, w, half_n);
                    #[unroll]
                    for s in 0..stack {
                        let at = comptime![s * elems + q * r];
                        apply_registers(vr, vi, at + e0, at + e1, &tw);
                    }
                }
            }
        }
    }
}

/// The exchange from group `gi`'s layout (the thread's first slot `slot_g`) to group `gi + 1`'s,
/// a slab at a time. Within one slab a thread writes (next group) exactly the slots it read, so
/// one slab needs one barrier; the next slab's write needs the reads of this one done.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn exchange<F: Float>(
    s_re: &mut SharedMemory<F>,
    s_im: &mut SharedMemory<F>,
    vr: &mut Array<F>,
    vi: &mut Array<F>,
    slot_g: usize,
    t: usize,
    #[comptime] cfg: RadixConfig,
    #[comptime] gi: usize,
) {
    let stack = comptime![1usize << cfg.log_stack];
    let slot_next = swizzled(deposit_thread(t, cfg, comptime![gi + 1]), cfg);
    #[unroll]
    for s in 0..stack {
        move_group(s_re, s_im, vr, vi, slot_g, s, cfg, gi, false);
        sync_cube();
        move_group(s_re, s_im, vr, vi, slot_next, s, cfg, comptime![gi + 1], true);
        if comptime![s + 1 < stack] {
            sync_cube();
        }
    }
}

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
    let mut s_re = SharedMemory::<F>::new(cube_len);
    let mut s_im = SharedMemory::<F>::new(cube_len);
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
    let mut vr = Array::<F>::new(comptime![elems * stack]);
    let mut vi = Array::<F>::new(comptime![elems * stack]);

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
                    vr[s * elems + q * r + e] = re;
                    vi[s * elems + q * r + e] = im;
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
                s_re[slot] = re;
                s_im[slot] = im;
            }
            sync_cube();
            move_group(&mut s_re, &mut s_im, &mut vr, &mut vi, slot0, s, cfg, comptime![0usize], true);
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
        group_stages(&mut vr, &mut vi, twiddles, t, tw_base, cfg, gi);
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
                            output[dst + comptime![e << b0]] = vr[s * elems + q * r + e];
                            output[plane + dst + comptime![e << b0]] = vi[s * elems + q * r + e];
                        }
                    }
                }
            }
        } else if comptime![gi == last] {
            // Through shared memory, a slab at a time: coalesced stores from its natural layout.
            let slot_t = swizzled(t, cfg);
            #[unroll]
            for s in 0..stack {
                move_group(&mut s_re, &mut s_im, &mut vr, &mut vi, slot_g, s, cfg, gi, false);
                sync_cube();
                // One row a slab where chunked: `dst < plane` is `row < batch` either way.
                let dst_t = (first_row + s * rows) * row_len + h_dst + t;
                #[unroll]
                for q in 0..elems {
                    let dst = dst_t + comptime![q * threads];
                    if dst < plane {
                        let slot = slot_t ^ comptime![cfg.swizzle(q * threads)];
                        output[dst] = s_re[slot];
                        output[plane + dst] = s_im[slot];
                    }
                }
                if comptime![s + 1 < stack] {
                    sync_cube();
                }
            }
        } else {
            exchange(&mut s_re, &mut s_im, &mut vr, &mut vi, slot_g, t, cfg, gi);
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
    let o = CUBE_POS * comptime![RELAYOUT_THREADS] + UNIT_POS_X as usize;
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

/// Threads per cube of [`radix_twiddles_kernel`].
const RELAYOUT_THREADS: usize = 256;

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
            grid(len.div_ceil(RELAYOUT_THREADS)),
            CubeDim::new_1d(RELAYOUT_THREADS as u32),
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
    use super::checks::{check_free_of_bank_conflicts, check_groups_cover_the_cube};
    use super::*;
    use crate::ops::butterfly::Permutation;
    use crate::ops::tuning::Compiler;

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
            assert!(
                std::env::var("LEARNED_FFT_REQUIRE_WGPU").map_or(true, |v| v != "1"),
                "LEARNED_FFT_REQUIRE_WGPU=1 but wgpu found no adapter"
            );
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

/// Host checks of a configuration's mapping, shared with the other kernels that use it.
#[cfg(test)]
pub(crate) mod checks {
    use super::RadixConfig;

    /// The groups apply `cfg.stages` stages, and every group's deposit, with its own bits, covers
    /// the cube once: each element is held by exactly one (thread, instance, element).
    pub(crate) fn check_groups_cover_the_cube(cfg: &RadixConfig) {
        let stages: usize = (0..cfg.groups()).map(|i| cfg.group(i).1).sum();
        assert_eq!(stages, cfg.stages, "{cfg:?}");
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

    /// The swizzle is a permutation, and the 32 lanes of a warp hit 32 distinct banks for each
    /// element of every group (a cube of at least ten bits).
    pub(crate) fn check_free_of_bank_conflicts(cfg: &RadixConfig) {
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
