//! How a cube's elements map to threads, registers and shared memory in the register-resident
//! stages ([`RadixConfig`]): host-side, evaluated at compile time of each kernel.

use super::blocks::Order;
use crate::ops::tuning::DeviceLimits;

/// Largest group of stages a thread holds (2^5 = 32 complex elements: 64 registers).
pub(crate) const MAX_LOG_ELEMS: usize = 5;
/// Most slabs a cube stacks, log2 (registers: `2^(log_elems + log_stack)` complex elements a
/// thread).
pub(crate) const MAX_LOG_STACK: usize = 3;
/// Fewest elements a cube holds for the swizzle (one 32-bank row).
pub(crate) const MIN_LOG_CUBE: usize = 5;

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
    /// instead of once for all of them ([`default_reload`](crate::ops::tuning::default_reload)): more loads (L1 hits), shorter
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

    /// The cube index of free index `f` of group `gi` (its group bits zero): [`RadixConfig::deposit`] at
    /// compile time. Depositing scatters bits, so the index of `t + q · threads` (`t <
    /// threads`, disjoint bits) is the thread's part, [`deposit_thread`](super::deposit_thread), or this constant.
    pub fn deposit(&self, gi: usize, f: usize) -> usize {
        self.free_order(gi).into_iter().enumerate().map(|(j, p)| ((f >> j) & 1) << p).fold(0, |a, b| a | b)
    }

    /// The twiddle address outside the group's bits of free index `f` of group `gi`:
    /// `outside_address`'s constant part, at compile time (the same scatter argument).
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
