//! The on-chip stage engine the fused kernels share (the butterfly's register-resident forward
//! and convolution, the spectral kernels' frame FFTs): each thread holds up to 32 elements in
//! registers and runs groups of stages on them, so the signal crosses shared memory once per
//! group instead of once per stage. No op's slice imports another's internals: what they share
//! lives here.
//!
//! - [`blocks`]: input orders, bit reversal, split-complex pairs (a kernel input, shared
//!   memory, registers), 2×2 twiddle blocks, shared-memory tree sums.
//! - [`mapping`]: [`RadixConfig`], the host-side map of a cube's elements to threads, registers
//!   and shared-memory slots.
//! - [`plan`]: the passes a transform splits into, and each launch's map of lines and
//!   butterflies to cubes and threads ([`Plan`](plan::Plan), [`Pass`](plan::Pass)).
//! - [`stages`]: the `#[cube]` functions: groups of stages in registers, the swizzled
//!   exchanges, the twiddle loads.
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
//!   relaid by the butterfly's `radix_twiddles`: block `k` sits at its column bits outside `G` in the group's
//!   lane-first order, then the group's other bits above. A warp's lanes are the lowest of
//!   those, and a block's four real parts (and its four imaginary parts) sit side by side, so a
//!   block is two 16-byte vector loads ([`Quad`](stages::Quad)) and each of a warp's is 512 contiguous bytes.
//! - **Twiddle reuse.** A thread's instances differ in row bits (where the cube holds enough
//!   rows): each twiddle block is loaded once and applied to all of them (groups smaller than
//!   the thread's elements trade more shared-memory rounds for more rows per load).

pub(crate) mod blocks;
pub(crate) mod mapping;
pub(crate) mod plan;
pub(crate) mod stages;

pub(crate) use blocks::{
    block_times, load_block, reverse_bits, tree_sum3, Order, SharedSplit, Split, SplitArray, SplitInput, TwiddleTables,
    Twiddles,
};
pub(crate) use mapping::{RadixConfig, MAX_LOG_ELEMS};
pub(crate) use stages::{
    apply, deposit_thread, exchange, first_group_from_shared, group_stages, input_slot, move_group, reversed, swizzled,
    Quad,
};
