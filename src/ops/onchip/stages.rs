//! The register-resident stages as `#[cube]` functions: groups of butterfly stages on a
//! thread's registers, the swizzled exchanges through shared memory between groups, and the
//! twiddle loads (a block as two vector loads).

use cubecl::prelude::*;

use super::blocks::{block_times, load_block, reverse_bits, Order, SharedSplit, SplitArray, TwiddleTables, Twiddles};
use super::mapping::{RadixConfig, MIN_LOG_CUBE};

/// Four entries of a twiddle block (`t00, t01, t10, t11`, real or imaginary parts) as one
/// vector: a block is two vector loads instead of eight scalar ones.
pub(crate) type Quad<F> = Vector<F, Const<4>>;

/// `x_a, x_b ← T · (x_a, x_b)` in registers.
#[cube]
fn apply_registers<F: Float>(regs: &mut SplitArray<F>, #[comptime] a: usize, #[comptime] b: usize, tw: &Twiddles<F>) {
    let (c0r, c0i, c1r, c1i) = block_times(tw, regs.re[a], regs.im[a], regs.re[b], regs.im[b]);
    regs.re[a] = c0r;
    regs.im[a] = c0i;
    regs.re[b] = c1r;
    regs.im[b] = c1i;
}

/// The block whose real parts are vector `w` of the relaid tables (the butterfly's `radix_twiddles`) and
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
    regs: &mut SplitArray<F>,
    #[comptime] a: usize,
    #[comptime] b: usize,
    twiddles: &TwiddleTables<F>,
    w: usize,
    #[comptime] half_n: usize,
) {
    apply_registers(regs, a, b, &load_block(twiddles, 0, w, half_n));
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
pub(crate) fn move_group<F: Float>(
    shared: &mut SharedSplit<F>,
    regs: &mut SplitArray<F>,
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
                regs.re[at] = shared.re[slot];
                regs.im[at] = shared.im[slot];
            } else {
                shared.re[slot] = regs.re[at];
                shared.im[slot] = regs.im[at];
            }
        }
    }
}

/// The shared-memory slot of input sample `j` of the row at cube index `base` (`r · n` for the
/// cube's row r) under the configuration's input order: its position, bit-reversed, or the
/// gather table's inverse (`order[n + j]`), swizzled.
#[cube]
pub(crate) fn input_slot(base: usize, j: usize, order: &Array<u32>, #[comptime] cfg: RadixConfig) -> usize {
    let mut slot = swizzled(base + j, cfg);
    if comptime![cfg.order == Order::Table] {
        slot = swizzled(base + order[comptime![1usize << cfg.log_n] + j] as usize, cfg);
    } else if comptime![cfg.order == Order::BitReversed] {
        slot = swizzled(base + reverse_bits(j, comptime![cfg.log_n]), cfg);
    }
    slot
}

/// Once every thread has put its samples in their slots: the first group's elements of the
/// thread into its registers.
#[cube]
pub(crate) fn first_group_from_shared<F: Float>(
    shared: &mut SharedSplit<F>,
    regs: &mut SplitArray<F>,
    #[comptime] cfg: RadixConfig,
) {
    sync_cube();
    let slot0 = swizzled(deposit_thread(UNIT_POS_X as usize, cfg, comptime![0usize]), cfg);
    move_group(shared, regs, slot0, comptime![0usize], cfg, comptime![0usize], true);
}

/// Group `gi`'s stages on the thread's registers (every slab and instance; thread `t`), each
/// twiddle block loaded once for every instance that shares it, from vector `base` on in the
/// relaid tables (the butterfly's `radix_twiddles`).
#[cube]
pub(crate) fn group_stages<F: Float>(
    regs: &mut SplitArray<F>,
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
                        apply_registers(regs, at + e0, at + e1, &load_quads(twiddles, w, half_n));
                    }
                }
            } else if comptime![shares] {
                let tw = load_quads(twiddles, (outside_t | inside) + stage_base + base, half_n);
                #[unroll]
                for s in 0..stack {
                    #[unroll]
                    for q in 0..instances {
                        let at = comptime![s * elems + q * r];
                        apply_registers(regs, at + e0, at + e1, &tw);
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
                        apply_registers(regs, at + e0, at + e1, &tw);
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
pub(crate) fn exchange<F: Float>(
    shared: &mut SharedSplit<F>,
    regs: &mut SplitArray<F>,
    slot_g: usize,
    t: usize,
    #[comptime] cfg: RadixConfig,
    #[comptime] gi: usize,
) {
    let stack = comptime![1usize << cfg.log_stack];
    let slot_next = swizzled(deposit_thread(t, cfg, comptime![gi + 1]), cfg);
    #[unroll]
    for s in 0..stack {
        move_group(shared, regs, slot_g, s, cfg, gi, false);
        sync_cube();
        move_group(shared, regs, slot_next, s, cfg, comptime![gi + 1], true);
        if comptime![s + 1 < stack] {
            sync_cube();
        }
    }
}
