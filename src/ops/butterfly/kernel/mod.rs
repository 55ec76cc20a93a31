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
pub(crate) use crate::ops::onchip::plan::{
    device_backward_passes, device_passes, passes, Pass, PassConfig, MAX_PARTIAL_BYTES,
};
pub use crate::ops::onchip::plan::{MAX_FUSED_N, MAX_SINGLE_PASS_N};
pub(crate) use crate::ops::onchip::{
    block_times, load_block, reverse_bits, Order, Split, SplitInput, TwiddleTables, Twiddles,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::onchip::plan::{backward_passes, bank_swizzle};
    use crate::ops::tuning::{
        self, Compiler, DeviceLimits, Overrides, BACKWARD_SPLIT_LOG_N, BACKWARD_SPLIT_LOG_N_PLANE_SYNC,
    };

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
