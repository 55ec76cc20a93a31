//! Every choice the fused kernels make that the problem does not fix: how much shared memory a
//! cube fills, how many elements a thread holds, how stages are grouped, how many cubes a
//! backward launches, where the backward splits. A choice is a function of what the device
//! reports ([`DeviceLimits`]: its compiler, shared memory, threads per cube, multiprocessors)
//! and of the problem's size; where only measurement could decide, the measured winner is a
//! per-compiler table here, its data in `docs/benchmarks.md#kernel-defaults`.
//!
//! ## Overrides
//! For comparisons, environment variables override the defaults. They are read here and
//! nowhere else, once per process ([`overrides`]); values that do not parse are ignored.
//!
//! | variable | overrides | values |
//! |---|---|---|
//! | `LEARNED_FFT_SHARED_BUDGET_KIB` | [`DeviceLimits::budget`] | KiB (capped by the device) |
//! | `LEARNED_FFT_RADIX_LOG_ELEMS` | [`default_log_elems`] | 1 … 5; 0 turns the register-resident forward off |
//! | `LEARNED_FFT_RADIX_LOG_GROUP` | the most stages per group | 1 … the elements' log2 |
//! | `LEARNED_FFT_RADIX_LOG_STACK` | the slabs a cube stacks, log2 | 0 … 3 |
//! | `LEARNED_FFT_RADIX_LOG_CUBE` | [`default_log_cube`] | log2 of the elements a cube holds |
//! | `LEARNED_FFT_RADIX_RELOAD` | [`default_reload`] | 0 or 1 |
//! | `LEARNED_FFT_BACKWARD_CUBES` | [`max_backward_cubes`] | cubes |
//! | `LEARNED_FFT_BACKWARD_SPLIT_LOG_N` | [`backward_split_log_n`] | log2 N |
//! | `LEARNED_FFT_CONV_LOG_ELEMS`, `LEARNED_FFT_CONV_LOG_GROUP` | [`CONV_LOG_ELEMS`] | log2 |
//! | `LEARNED_FFT_SPECTRAL_CUBE_ELEMS`, `LEARNED_FFT_SPECTRAL_LOG_ELEMS` | [`FRAME_CUBE_ELEMS`], [`FRAME_LOG_ELEMS`] | a power of two; log2 |

use std::sync::OnceLock;

/// The compiler a CubeCL runtime generates kernels with: what the per-device tables key on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Compiler {
    /// CUDA (NVRTC).
    Cuda,
    /// wgpu on Vulkan through CubeCL's SPIR-V compiler (the crate feature `vulkan`).
    Spirv,
    /// wgpu through WGSL (Vulkan without the feature `vulkan`, Metal, DX12).
    Wgsl,
    /// Any other runtime: the portable defaults.
    Other,
}

impl Compiler {
    /// From CubeCL's name of a runtime (`"cuda"`, `"wgpu<spirv>"`, `"wgpu<wgsl>"`).
    pub fn from_runtime_name(name: &str) -> Self {
        match name {
            "cuda" => Compiler::Cuda,
            "wgpu<spirv>" => Compiler::Spirv,
            "wgpu<wgsl>" => Compiler::Wgsl,
            _ => Compiler::Other,
        }
    }

    /// Whether the compiler has a plane (warp) barrier: CUDA's `__syncwarp`. WGSL has none
    /// (CubeCL's WGSL compiler rejects it), so wgpu takes cube barriers.
    pub fn has_plane_barrier(self) -> bool {
        self == Compiler::Cuda
    }
}

/// Shared memory a cube fills by default: 32 KiB, Metal's limit, which every wgpu and CUDA
/// device offers. Larger cubes hold more rows (each twiddle block serves more of them) but fewer
/// fit a multiprocessor; where a device allows more, whether it pays is measured per device
/// before this default changes.
pub(crate) const DEFAULT_SHARED_BUDGET: usize = 32 << 10;

/// What a device reports that the kernels' configurations depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DeviceLimits {
    /// The compiler its kernels go through.
    pub compiler: Compiler,
    /// Shared memory per cube, bytes: the hard limit.
    pub max_shared: usize,
    /// Threads per cube, at most.
    pub max_units: usize,
    /// Multiprocessors, where the device reports them.
    pub sms: Option<u32>,
    /// Shared memory a cube fills by choice, bytes ([`Self::budget`]).
    budget: usize,
}

impl DeviceLimits {
    /// A device with these limits and the default budget ([`DEFAULT_SHARED_BUDGET`], at most
    /// `max_shared`); no override is consulted (tests and plans that must not vary).
    pub fn new(compiler: Compiler, max_shared: usize, max_units: usize) -> Self {
        DeviceLimits { compiler, max_shared, max_units, sms: None, budget: DEFAULT_SHARED_BUDGET.min(max_shared) }
    }

    /// What `client`'s device reports, with the budget override applied.
    pub fn of<R: cubecl::Runtime>(client: &cubecl::client::ComputeClient<R>) -> Self {
        let hardware = &client.properties().hardware;
        let mut limits = Self::new(
            Compiler::from_runtime_name(R::name(client)),
            hardware.max_shared_memory_size,
            hardware.max_units_per_cube as usize,
        );
        limits.sms = hardware.num_streaming_multiprocessors;
        if let Some(kib) = overrides().shared_budget_kib {
            limits.budget = (kib << 10).min(limits.max_shared);
        }
        limits
    }

    /// The same device with its budget at most `bytes` (where a smaller cube measured faster).
    pub fn capped(mut self, bytes: usize) -> Self {
        self.budget = self.budget.min(bytes);
        self
    }

    /// Shared memory a cube fills by choice, bytes (never above [`Self::max_shared`]): rows
    /// per cube, elements per cube and frames per cube are sized to it. A single row or frame
    /// that needs more takes up to `max_shared`.
    pub fn budget(&self) -> usize {
        self.budget
    }
}

/// The environment overrides (see the module docs), read once per process: the launchers ask
/// on every call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Overrides {
    pub shared_budget_kib: Option<usize>,
    pub radix_log_elems: Option<usize>,
    pub radix_log_group: Option<usize>,
    pub radix_log_stack: Option<usize>,
    pub radix_log_cube: Option<usize>,
    pub radix_reload: Option<bool>,
    pub backward_cubes: Option<usize>,
    pub backward_split_log_n: Option<usize>,
    pub conv_log_elems: Option<usize>,
    pub conv_log_group: Option<usize>,
    pub spectral_cube_elems: Option<usize>,
    pub spectral_log_elems: Option<usize>,
}

/// The overrides of this process (the module docs list them).
pub(crate) fn overrides() -> &'static Overrides {
    static CELL: OnceLock<Overrides> = OnceLock::new();
    CELL.get_or_init(|| Overrides::from_vars(|name| std::env::var(name).ok()))
}

impl Overrides {
    /// From a variable lookup (the environment, or a table in tests).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let num = |name: &str| var(name).and_then(|v| v.trim().parse::<usize>().ok());
        let positive = |name: &str| num(name).filter(|&v| v > 0);
        Overrides {
            shared_budget_kib: positive("LEARNED_FFT_SHARED_BUDGET_KIB"),
            radix_log_elems: num("LEARNED_FFT_RADIX_LOG_ELEMS"),
            radix_log_group: num("LEARNED_FFT_RADIX_LOG_GROUP"),
            radix_log_stack: num("LEARNED_FFT_RADIX_LOG_STACK"),
            radix_log_cube: num("LEARNED_FFT_RADIX_LOG_CUBE"),
            radix_reload: num("LEARNED_FFT_RADIX_RELOAD").map(|v| v != 0),
            backward_cubes: num("LEARNED_FFT_BACKWARD_CUBES"),
            backward_split_log_n: num("LEARNED_FFT_BACKWARD_SPLIT_LOG_N"),
            conv_log_elems: num("LEARNED_FFT_CONV_LOG_ELEMS"),
            conv_log_group: num("LEARNED_FFT_CONV_LOG_GROUP"),
            spectral_cube_elems: positive("LEARNED_FFT_SPECTRAL_CUBE_ELEMS").filter(|c| c.is_power_of_two()),
            spectral_log_elems: positive("LEARNED_FFT_SPECTRAL_LOG_ELEMS"),
        }
    }
}

/// The register-resident forward's mapping: log2 of the elements a thread holds, the most
/// stages per group, log2 of the slabs a cube stacks, log2 of the most elements a cube holds
/// (`None`: as many as the budget takes) and whether twiddle blocks are reloaded per slab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RadixMapping {
    pub log_elems: usize,
    pub log_group: usize,
    pub log_stack: usize,
    pub log_cube: Option<usize>,
    pub reload: bool,
}

/// The register-resident forward's mapping at size `n` on `limits`' device with the overrides
/// `o` applied, or `None` where the shared-memory forward runs instead.
pub(crate) fn radix_mapping(limits: &DeviceLimits, n: usize, o: &Overrides) -> Option<RadixMapping> {
    let compiler = limits.compiler;
    let (log_elems, log_group, log_stack) = match o.radix_log_elems {
        Some(0) => return None,
        Some(log_elems) => (log_elems, log_elems, 0),
        None => default_log_elems(compiler, n)?,
    };
    Some(RadixMapping {
        log_elems,
        log_group: o.radix_log_group.unwrap_or(log_group),
        log_stack: o.radix_log_stack.unwrap_or(log_stack),
        log_cube: o.radix_log_cube.or_else(|| default_log_cube(compiler, n)),
        reload: o.radix_reload.unwrap_or_else(|| default_reload(compiler, n)),
    })
}

/// log2 of the elements a thread holds, the most stages per group and log2 of the slabs a cube
/// stacks, through `compiler` at size `n`, or `None` where the shared-memory forward is faster:
/// the fastest forward of a sweep over these mappings
/// (data: `docs/benchmarks.md#kernel-defaults-tuning-default-log-elems`). Why they differ:
/// - CUDA runs up to 32 elements a thread well; through wgpu (WGSL and SPIR-V) the larger
///   register arrays are slower than the shared-memory forward, so wgpu holds 8 a thread.
/// - Stacked slabs let one twiddle block serve more rows. At N = 2048 and 4096, where a cube
///   holds one row, four slabs of 8 elements beat one of 32 (whose groups of 3 stages no longer
///   overlap their twiddle loads); at N = 256 stacking loses.
/// - The twiddle blocks are read as two vector loads: fewer instructions, more registers a
///   thread (168 against 128 at N = 1024), which moved the best mappings; any change to the
///   kernels' register use calls for the sweep again.
pub(crate) fn default_log_elems(compiler: Compiler, n: usize) -> Option<(usize, usize, usize)> {
    match (compiler, n) {
        (Compiler::Cuda, ..=64) => Some((4, 4, 0)),
        (Compiler::Cuda, 256) => Some((5, 2, 0)),
        (Compiler::Cuda, 1024) => Some((4, 2, 1)),
        (Compiler::Cuda, 2048 | 4096) => Some((3, 3, 2)),
        (Compiler::Cuda, _) => Some((5, 2, 0)),
        (Compiler::Spirv, 1024) => Some((3, 2, 1)),
        (_, 256 | 1024 | 4096) => Some((3, 3, 1)),
        _ => Some((3, 3, 0)),
    }
}

/// log2 of the most elements a cube holds through `compiler` at size `n`, where a cube smaller
/// than the budget measured faster: more cubes per multiprocessor, fewer threads at each
/// barrier. `None`: as many as the budget takes. Through wgpu (SPIR-V and WGSL alike; Metal and
/// DX12 compile the same WGSL) 1024-element cubes win at N = 256 and 1024; CUDA gains only at
/// N = 2048, one row a slab with four slabs stacked as at 4096 (data:
/// `docs/benchmarks.md#kernel-defaults-tuning-default-log-cube`).
pub(crate) fn default_log_cube(compiler: Compiler, n: usize) -> Option<usize> {
    match (compiler, n) {
        (Compiler::Cuda, 2048) => Some(11),
        (Compiler::Spirv | Compiler::Wgsl, 256 | 1024) => Some(10),
        _ => None,
    }
}

/// Whether the kernels reload each twiddle block for every slab and instance it serves through
/// `compiler` at size `n`. CUDA's compiler merges such reloads into one load, so there it makes
/// no difference. WGSL's compiler keeps them, and there the shorter register live ranges gain at
/// N = 1024 only (data: `docs/benchmarks.md#kernel-defaults-tuning-default-reload`).
pub(crate) fn default_reload(compiler: Compiler, n: usize) -> bool {
    matches!((compiler, n), (Compiler::Wgsl, 1024))
}

/// Butterflies a backward cube works on per stage (one per thread; where a line is longer, one
/// line): its threads keep their twiddles and twiddle-gradient accumulators in registers
/// (16 per stage), which limits how many cubes an SM runs; small cubes fill it best: 128 beats
/// 256 and 512, and 64 is no faster, on CUDA and through Vulkan (data:
/// `docs/benchmarks.md#kernel-defaults-tuning-backward-butterflies-per-cube`).
pub(crate) const BACKWARD_BUTTERFLIES_PER_CUBE: usize = 128;

/// Threads per cube of the element-wise kernels: Adam's update, the twiddle tables' relayouts
/// (for the radix kernels and the planar forward) and the rfft's pairing. Each thread handles
/// one element and no shared memory is used, so any width that fills a multiprocessor serves;
/// 256 is WebGPU's default limit on threads per workgroup, which every wgpu adapter grants, and
/// a multiple of every plane width (32 on NVIDIA and Apple, 64 on AMD).
pub(crate) const ELEMENTWISE_UNITS: usize = 256;

/// Butterflies a cube works on per stage, at least, in the forward's plan and the plan the
/// backward starts from: small N stack rows until a cube has this many.
pub(crate) const MIN_BUTTERFLIES_PER_CUBE: usize = 256;
/// Rows a forward cube holds at least where shared memory allows (64 KiB at N = 4096 in f32:
/// each twiddle block loaded serves two rows).
pub(crate) const FORWARD_MIN_ROWS: usize = 2;
/// Threads per cube, at most, before the device's own limit (the portable limit of wgpu, CUDA
/// and Metal).
pub(crate) const MAX_CUBE_THREADS: usize = 1024;

/// Threads per cube of the column pass of a two-pass forward (consecutive columns; a row's
/// columns must fill whole cubes, so the pass runs only where `2^stage0` is a multiple).
pub(crate) const COLUMN_THREADS: usize = 256;
/// Batch rows a thread of the column pass transforms: each twiddle block it loads serves all of
/// them.
pub(crate) const COLUMN_ROWS_PER_THREAD: usize = 4;

/// Threads of the spectral loss's final reduction, at most (each sums every `threads`-th
/// partial in order).
pub(crate) const LOSS_FINISH_THREADS: usize = 1024;

/// log2 N from which the backward runs in two balanced passes on a compiler without a plane
/// barrier.
pub(crate) const BACKWARD_SPLIT_LOG_N: usize = 10;
/// The same where the backward's stages synchronise per plane: a line of up to 64 elements then
/// takes no cube-wide barrier between stages, which makes N = 512 in two passes of 32 and 16
/// faster than in one (data: `docs/benchmarks.md#kernel-defaults-tuning-backward-split-log-n-plane-sync`).
pub(crate) const BACKWARD_SPLIT_LOG_N_PLANE_SYNC: usize = 9;

/// log2 N from which the backward splits through `compiler`, unless overridden.
pub(crate) fn backward_split_log_n(compiler: Compiler, o: &Overrides) -> usize {
    o.backward_split_log_n.unwrap_or(if compiler.has_plane_barrier() {
        BACKWARD_SPLIT_LOG_N_PLANE_SYNC
    } else {
        BACKWARD_SPLIT_LOG_N
    })
}

/// Cubes of the backward launch, at most, where [`max_backward_cubes`] has no measured count:
/// each loops over its share of the lines.
pub(crate) const MAX_BACKWARD_CUBES: usize = 1024;

/// Cubes of a backward launch at size `n` on `limits`' device, at most (unless overridden).
/// Fewer cubes each loop over more chunks (its next chunk's loads overlap the current one) and
/// write fewer partial twiddle gradients for the sum to read. On CUDA four cubes per SM were
/// fastest up to N = 1024 and three at 4096; other sizes and compilers keep
/// [`MAX_BACKWARD_CUBES`] (data: `docs/benchmarks.md#kernel-defaults-tuning-max-backward-cubes`).
pub(crate) fn max_backward_cubes(limits: &DeviceLimits, n: usize, o: &Overrides) -> usize {
    let measured = match (limits.compiler, n, limits.sms) {
        (Compiler::Cuda, ..=1024, Some(sms)) if sms > 0 => 4 * sms as usize,
        (Compiler::Cuda, 4096, Some(sms)) if sms > 0 => 3 * sms as usize,
        _ => MAX_BACKWARD_CUBES,
    };
    o.backward_cubes.unwrap_or(measured).max(1)
}

/// Smallest real signal the fused rfft takes on wgpu and CUDA where the complex butterfly is
/// fused too (Welch's PSD): 8 samples, the smallest measured. With several rows a cube its
/// forward took 0.46–0.53× the complex butterfly's time at every N = 8 … 256 (H200, CUDA,
/// 2026-11-30, `bench rfft --batch 65536`, two runs each: 1.84–3.94× faster). When its cubes
/// held one row it had measured 0.71× at N = 64, which had set this at 256. Under autodiff the
/// bare rfft's forward + backward is 0.49–0.87× the complex one's (its backward is not fused);
/// Welch's PSD is chosen by its forward (data: `docs/benchmarks.md#rfft`).
pub(crate) const RFFT_MIN_FUSED_N: usize = 8;

/// log2 of the elements a thread holds and the most stages per group in the convolution's
/// kernels: 8 elements in groups of 2 stages (512 threads at N = 4096, two instances a group,
/// six groups a transform): the fastest taps and convolution kernels together at N = 4096
/// (data: `docs/benchmarks.md#kernel-defaults-tuning-conv-log-elems`).
pub(crate) const CONV_LOG_ELEMS: (usize, usize) = (3, 2);

/// The convolution kernels' elements per thread and stages per group, unless overridden.
pub(crate) fn conv_log_elems(o: &Overrides) -> (usize, usize) {
    (o.conv_log_elems.unwrap_or(CONV_LOG_ELEMS.0), o.conv_log_group.unwrap_or(CONV_LOG_ELEMS.1))
}

/// The most shared memory a row of the complex convolution takes past the budget: 64 KiB
/// (N = 8192 in f32). On an H200 (CUDA, 2026-11-30, `bench rfft`, two runs) its fused forward at
/// N = 8192 took 0.40–0.50 ms a call against 0.85–0.89 ms for the tensor ops around the fused
/// butterfly it replaces, but at N = 16384 (a 128 KiB row, one cube a multiprocessor) 1.03 ms
/// against 0.86–0.91 ms. The rfft convolution's row of the same 128 KiB (N = 32768) beats its
/// own tensor-op path (0.61 against 1.05–1.10 ms), so it is not capped (data:
/// `docs/benchmarks.md#rfft`).
pub(crate) const COMPLEX_CONV_MAX_ROW_BYTES: usize = 64 << 10;

/// Whether the complex convolution's row of `n` `elem`-byte complex values is within
/// [`COMPLEX_CONV_MAX_ROW_BYTES`] or the budget ([`conv_mapping`] checks the device).
pub(crate) fn complex_conv_row_fits(limits: &DeviceLimits, n: usize, elem: usize) -> bool {
    2 * n * elem <= limits.budget().max(COMPLEX_CONV_MAX_ROW_BYTES)
}

/// The mapping of a convolution kernel's cube, which holds one row of `n` complex `elem`-byte
/// values (each row needs its own channel's spectrum, so a row is the least a cube holds):
/// `(log2 elements a thread, most stages a group)`, or `None` where the row does not fit.
///
/// - Shared memory: a row within the budget ([`DeviceLimits::budget`]) as every kernel; a row
///   past it takes up to the device's `max_shared`, as the budget's rule for a single row says.
///   On CUDA (227 KiB on an H100 or H200) that is a row of 16384 complex values in f32 (the
///   rfft convolution of N = 32768; the complex one is capped, [`complex_conv_row_fits`]),
///   where the 32 KiB budget stopped at 4096 and left larger convolutions to tensor ops around
///   the butterfly; a device reporting 32 KiB (Metal) or 48 KiB (Vulkan) keeps 4096.
/// - Threads: [`conv_log_elems`] elements a thread, more where the row would need more threads
///   than a cube may have (16 a thread at N = 16384 with 1024 threads), at most
///   [`MAX_LOG_ELEMS`](crate::ops::onchip::MAX_LOG_ELEMS).
pub(crate) fn conv_mapping(limits: &DeviceLimits, n: usize, elem: usize, o: &Overrides) -> Option<(usize, usize)> {
    if !n.is_power_of_two() || n < 2 || 2 * n * elem > limits.max_shared || limits.max_units == 0 {
        return None;
    }
    let log_n = n.trailing_zeros() as usize;
    let log_units = crate::ops::cubecl::floor_pow2(limits.max_units).trailing_zeros() as usize;
    let (log_elems, log_group) = conv_log_elems(o);
    let log_elems = log_elems.max(log_n.saturating_sub(log_units));
    (log_elems <= crate::ops::onchip::MAX_LOG_ELEMS).then_some((log_elems, log_group))
}

/// Elements of frames a spectral cube holds (one frame where W is larger): 1024, 8 KiB in
/// f32. Against 2048 it is faster through Vulkan and within 5 % either way on CUDA (data:
/// `docs/benchmarks.md#kernel-defaults-tuning-frame-cube-elems`).
pub(crate) const FRAME_CUBE_ELEMS: usize = 1024;
/// log2 of the elements a thread holds in the spectral kernels' on-chip FFT: 8, three radix-2
/// stages per trip through shared memory; 16 were slower on CUDA and through Vulkan (data:
/// `docs/benchmarks.md#kernel-defaults-tuning-frame-cube-elems`).
pub(crate) const FRAME_LOG_ELEMS: usize = 3;

/// The spectral kernels' elements per cube and log2 elements per thread, unless overridden.
pub(crate) fn frame_cube(o: &Overrides) -> (usize, usize) {
    (o.spectral_cube_elems.unwrap_or(FRAME_CUBE_ELEMS), o.spectral_log_elems.unwrap_or(FRAME_LOG_ELEMS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_parse_what_they_document_and_ignore_the_rest() {
        let table = [
            ("LEARNED_FFT_SHARED_BUDGET_KIB", "64"),
            ("LEARNED_FFT_RADIX_LOG_ELEMS", "0"),
            ("LEARNED_FFT_RADIX_RELOAD", "1"),
            ("LEARNED_FFT_BACKWARD_CUBES", "many"),
            ("LEARNED_FFT_SPECTRAL_CUBE_ELEMS", "1000"),
        ];
        let o = Overrides::from_vars(|name| table.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string()));
        assert_eq!(o.shared_budget_kib, Some(64));
        assert_eq!(o.radix_log_elems, Some(0));
        assert_eq!(o.radix_reload, Some(true));
        assert_eq!(o.backward_cubes, None, "not a number");
        assert_eq!(o.spectral_cube_elems, None, "not a power of two");
        let limits = DeviceLimits::new(Compiler::Cuda, 48 << 10, 1024);
        assert_eq!(radix_mapping(&limits, 1024, &o), None, "0 turns the register-resident forward off");
        assert_eq!(radix_mapping(&limits, 1024, &Overrides::default()).map(|m| m.log_elems), Some(4));
    }

    #[test]
    fn the_budget_never_exceeds_what_the_device_reports() {
        for shared in [16 << 10, 32 << 10, 48 << 10, 227 << 10] {
            let limits = DeviceLimits::new(Compiler::Wgsl, shared, 1024);
            assert!(limits.budget() <= shared);
            assert_eq!(limits.budget(), DEFAULT_SHARED_BUDGET.min(shared));
        }
    }

    /// A convolution's row fits the device's shared memory and threads per cube, whatever it
    /// reports; the budget's 32 KiB no longer stops a row where the device holds more.
    #[test]
    fn convolution_rows_fit_what_the_device_reports() {
        let o = Overrides::default();
        for (shared, units) in [(32 << 10, 1024), (48 << 10, 1024), (64 << 10, 256), (227 << 10, 1024)] {
            let limits = DeviceLimits::new(Compiler::Cuda, shared, units);
            for elem in [4, 8] {
                for log_n in 1..=16 {
                    let n = 1usize << log_n;
                    match conv_mapping(&limits, n, elem, &o) {
                        Some((log_elems, log_group)) => {
                            assert!(2 * n * elem <= shared, "N={n}: a row exceeds {shared} bytes");
                            assert!(n >> log_elems.min(log_n) <= units, "N={n}: more threads than {units}");
                            assert!((1..=log_elems).contains(&log_group));
                        }
                        None => {
                            assert!(2 * n * elem > shared || n >> crate::ops::onchip::MAX_LOG_ELEMS > units, "N={n}")
                        }
                    }
                }
            }
        }
        let cuda = DeviceLimits::new(Compiler::Cuda, 227 << 10, 1024);
        assert_eq!(conv_mapping(&cuda, 4096, 4, &o), Some(CONV_LOG_ELEMS), "the measured default below 1024 threads");
        assert_eq!(conv_mapping(&cuda, 16384, 4, &o), Some((4, CONV_LOG_ELEMS.1)), "16 elements a thread");
        assert_eq!(conv_mapping(&cuda, 32768, 4, &o), None, "256 KiB");
        let metal = DeviceLimits::new(Compiler::Wgsl, 32 << 10, 1024);
        assert_eq!(conv_mapping(&metal, 8192, 4, &o), None);
        // The complex convolution stops at 64 KiB where the device holds more, or at the budget.
        assert!(complex_conv_row_fits(&cuda, 8192, 4) && !complex_conv_row_fits(&cuda, 16384, 4));
        let big_budget = DeviceLimits { budget: 128 << 10, ..cuda };
        assert!(complex_conv_row_fits(&big_budget, 16384, 4));
    }

    #[test]
    fn runtime_names_map_to_their_compilers() {
        assert_eq!(Compiler::from_runtime_name("cuda"), Compiler::Cuda);
        assert_eq!(Compiler::from_runtime_name("wgpu<spirv>"), Compiler::Spirv);
        assert_eq!(Compiler::from_runtime_name("wgpu<wgsl>"), Compiler::Wgsl);
        assert_eq!(Compiler::from_runtime_name("hip"), Compiler::Other);
        assert!(Compiler::Cuda.has_plane_barrier() && !Compiler::Wgsl.has_plane_barrier());
    }
}
