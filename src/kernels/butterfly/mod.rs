//! The fused butterfly: all log2(N) stages in one launch with the signal held in shared memory.
//!
//! - [`forward`]: `x → y`, one cube per `rows` batch rows.
//! - [`backward`]: recomputes the forward on-chip (each thread keeps its own stage inputs), then
//!   runs the stages in reverse, producing the input gradient and per-cube partial twiddle
//!   gradients in one launch; a second small kernel sums the partials in a fixed order, so the
//!   twiddle gradient is deterministic (no atomics).
//!
//! Layouts: signals `[batch, n]` (re and im apart), twiddles `[log2 n, n/2, 2, 2]`; the forward
//! output and the input gradient are packed `[2, batch, n]` (re then im), the twiddle gradient
//! `[2, log2 n · n/2 · 4]`.

mod backward;
mod forward;

pub use backward::backward;
pub use forward::forward;
pub(crate) use forward::reverse_bits;

use burn_cubecl::{CubeRuntime, FloatElement};

/// Largest N the fused kernels handle (the signal of one row must fit in shared memory:
/// 2 · 4096 · 4 bytes = 32 KiB in f32). Larger N take the reference path.
pub const MAX_FUSED_N: usize = 4096;

/// Butterflies a cube works on per stage, at least (several rows per cube for small N).
const MIN_BUTTERFLIES_PER_CUBE: usize = 256;
/// Threads per cube, at most (the portable limit of wgpu, CUDA and Metal).
const MAX_THREADS: usize = 1024;

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
        let max_units = 1usize << (usize::BITS - 1 - max_units.max(1).leading_zeros());
        let threads = (half / 2).max(MIN_BUTTERFLIES_PER_CUBE).min(rows * half).min(MAX_THREADS).min(max_units);
        Plan { log_n: n.trailing_zeros() as usize, rows, threads }
    }

    /// Bytes of shared memory per cube for element size `elem`.
    pub fn shared_bytes(&self, elem: usize) -> usize {
        2 * self.rows * (1 << self.log_n) * elem
    }
}

/// A cube count of at least `cubes` cubes, spread over x and y (x is limited to 65 535).
pub(crate) fn grid(cubes: usize) -> cubecl::CubeCount {
    let x = cubes.clamp(1, 65_535);
    cubecl::CubeCount::Static(x as u32, cubes.div_ceil(x).max(1) as u32, 1)
}

/// Whether the fused kernels can run for size `n` on `device` in float type `F`.
pub fn fused_supported<R: CubeRuntime, F: FloatElement>(n: usize, device: &R::Device) -> bool {
    if !(2..=MAX_FUSED_N).contains(&n) || !n.is_power_of_two() {
        return false;
    }
    let props = R::client(device).properties().hardware.clone();
    let plan = Plan::new(n, props.max_units_per_cube as usize);
    plan.shared_bytes(std::mem::size_of::<F>()) <= props.max_shared_memory_size
}
