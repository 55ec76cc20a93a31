//! Fused butterfly forward: the kernel and its launch wrapper.

use burn_cubecl::{tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::{prelude::*, CubeDim};

use super::columns::{self, ColumnsConfig};
use super::radix;
use super::{
    block_times, device_passes, load_block, reverse_bits, InputOrder, Order, Pass, PassConfig, Split, SplitInput,
    TwiddleTables, Twiddles,
};
use crate::ops::cubecl::empty;
use crate::ops::cubecl::grid;
use crate::ops::onchip::RadixConfig;
use crate::ops::tuning::{self, DeviceLimits, ELEMENTWISE_UNITS};

/// Source index of position `i` after the input permutation (`table`: see [`InputOrder`]).
#[cube]
pub(crate) fn permuted(i: usize, table: &Array<u32>, #[comptime] cfg: PassConfig) -> usize {
    if comptime![cfg.order == Order::Table] {
        table[i] as usize
    } else if comptime![cfg.order == Order::BitReversed] {
        reverse_bits(i, comptime![cfg.log_n])
    } else {
        i
    }
}

/// Where element `j` of line `line` of a pass lives: its batch row, and its index in the row.
/// Contiguous lines (the first pass) are the chunks `g·2^log_local + j` of a row; strided lines
/// (the second pass, `stage0 > 0`) are the columns `g + j·2^stage0`.
#[cube]
pub(crate) fn line_element(line: usize, j: usize, #[comptime] cfg: PassConfig) -> (usize, usize) {
    let lines_per_row = comptime![cfg.lines_per_row()];
    let row = line / lines_per_row;
    let g = line_chunk(line, cfg);
    if comptime![cfg.strided()] {
        (row, g + (j << comptime![cfg.stage0]))
    } else {
        (row, (g << comptime![cfg.log_local]) + j)
    }
}

/// The chunk (first pass) or column (second pass) `g` of line `line`: its residue mod the lines
/// per row, bit-reversed where the pass's lines are ([`PassConfig::reversed`]).
#[cube]
pub(crate) fn line_chunk(line: usize, #[comptime] cfg: PassConfig) -> usize {
    let g = line % comptime![cfg.lines_per_row()];
    if comptime![cfg.reversed] {
        reverse_bits(g, comptime![cfg.log_lines()])
    } else {
        g
    }
}

/// The line (within the cube) and the element of the line that the cube's `e`-th load or store
/// touches: contiguous lines go element-major, strided and reversed lines line-major
/// (consecutive threads touch consecutive columns, so the accesses stay coalesced).
#[cube]
pub(crate) fn slot_of(e: usize, #[comptime] cfg: PassConfig) -> (usize, usize) {
    if comptime![cfg.line_major()] {
        (e % comptime![cfg.rows], e / comptime![cfg.rows])
    } else {
        (e >> comptime![cfg.log_local], e % comptime![1usize << cfg.log_local])
    }
}

/// Where element `linear` (= line · 2^log_local + index) of the cube's lines lives in shared
/// memory: the kernels' twin of [`bank_swizzle`](crate::ops::onchip::plan::bank_swizzle) (the same expression; see
/// there why), which spreads every access of the line kernels over the 32 banks.
#[cube]
pub(crate) fn swizzled(linear: usize, #[comptime] cfg: PassConfig) -> usize {
    let run = linear >> 5;
    let group = run >> comptime![cfg.swizzle_group()];
    linear ^ ((run & 1) * 31) ^ ((group << comptime![cfg.swizzle_shift()]) & 31)
}

/// The shared-memory slots of a butterfly's two elements, `i0` (bit `log2 st` clear) and
/// `i0 + st`. Below `st = 32` both lie in one run of 32 elements, which the swizzle xors with
/// one mask, so the second slot is the first's `^ st` (a few instructions per butterfly and
/// stage fewer than swizzling both).
#[cube]
pub(crate) fn swizzled_pair(i0: usize, #[comptime] st: usize, #[comptime] cfg: PassConfig) -> (usize, usize) {
    let a = swizzled(i0, cfg);
    if comptime![st < 32] {
        (a, a ^ st)
    } else {
        (a, swizzled(i0 + st, cfg))
    }
}

/// Loads the cube's lines of `x` (permuted on the first pass) into `re`, `im` (line `l` at
/// [`swizzled`] `l · 2^log_local + j`); rows past the batch read as zeros.
#[cube]
pub(crate) fn load_lines<F: Float>(
    x: &SplitInput<F>,
    order: &Array<u32>,
    re: &mut SharedMemory<F>,
    im: &mut SharedMemory<F>,
    first_line: usize,
    batch: usize,
    #[comptime] cfg: PassConfig,
) {
    #[unroll]
    for q in 0..comptime![cfg.rows * (1usize << cfg.log_local) / cfg.threads] {
        let (l, j) = slot_of(UNIT_POS_X as usize + q * comptime![cfg.threads], cfg);
        let (row, i) = line_element(first_line + l, j, cfg);
        let src = row * comptime![1usize << cfg.log_n] + permuted(i, order, cfg);
        let mut vr = F::new(0.0);
        let mut vi = F::new(0.0);
        if row < batch {
            vr = x.re[src];
            vi = x.im[x.im_offset as usize + src];
        }
        let at = swizzled((l << comptime![cfg.log_local]) + j, cfg);
        re[at] = vr;
        im[at] = vi;
    }
}

/// The global twiddle index `k` (of `N/2`) of local butterfly `k_local` on line `line`.
#[cube]
pub(crate) fn twiddle_of(line: usize, k_local: usize, #[comptime] cfg: PassConfig) -> usize {
    let g = line_chunk(line, cfg);
    if comptime![cfg.strided()] {
        g + (k_local << comptime![cfg.stage0])
    } else {
        (g << comptime![cfg.log_local - 1]) + k_local
    }
}

/// `[log2 n, n/2, 2, 2]` → `[log2 n, 4, n/2]`, one element per unit.
#[cube(launch_unchecked)]
fn planar_twiddles_kernel<F: Float>(input: &Array<F>, output: &mut Array<F>, #[comptime] half_n: usize) {
    let o = CUBE_POS * comptime![ELEMENTWISE_UNITS] + UNIT_POS_X as usize;
    if o >= output.len() {
        terminate!();
    }
    let k = o % half_n;
    let c = (o / half_n) % 4;
    let s = o / comptime![4 * half_n];
    output[o] = input[(s * half_n + k) * 4 + c];
}

/// The twiddle tables (re or im, `[log2 n, n/2, 2, 2]`) as the forward reads them, planar
/// `[log2 n, 4, n/2]`: one small copy per call (the tables are `2 log2 n` times one row's
/// bytes), after which a warp's twiddle loads are coalesced (with the blocks' four entries
/// side by side, each load of a warp spans four lines).
fn planar_twiddles<R: CubeRuntime, F: FloatElement>(tw: &CubeTensor<R>, half_n: usize) -> CubeTensor<R> {
    let len = tw.meta.shape().num_elements();
    let output = empty::<R, F>(tw, vec![len]);
    // SAFETY: the kernel masks units past `len`; its reads stay below `len` by construction.
    unsafe {
        planar_twiddles_kernel::launch_unchecked::<F, R>(
            &tw.client,
            grid(len.div_ceil(ELEMENTWISE_UNITS)),
            CubeDim::new_1d(ELEMENTWISE_UNITS as u32),
            tw.clone().into_array_arg(),
            output.clone().into_array_arg(),
            half_n,
        );
    }
    output
}

/// `(x_i0, x_i1) ← T · (x_i0, x_i1)` in shared memory.
#[cube]
fn apply_block<F: Float>(
    s_re: &mut SharedMemory<F>,
    s_im: &mut SharedMemory<F>,
    i0: usize,
    i1: usize,
    tw: &Twiddles<F>,
) {
    let (c0r, c0i, c1r, c1i) = block_times(tw, s_re[i0], s_im[i0], s_re[i1], s_im[i1]);
    s_re[i0] = c0r;
    s_im[i0] = c0i;
    s_re[i1] = c1r;
    s_im[i1] = c1i;
}

/// One cube transforms `rows` lines: load (permuted on the first pass) into shared memory, run
/// the pass's stages there, store. Thread `t` handles butterflies `t, t + threads, …` of every
/// stage. The imaginary input is read at `x_im[im_offset + …]`, so a packed `[2, batch, n]`
/// intermediate can be passed as both `x_re` and `x_im`.
#[cube(launch_unchecked)]
pub(crate) fn butterfly_forward_kernel<F: Float>(
    x: &SplitInput<F>,
    order: &Array<u32>,
    twiddles: &TwiddleTables<F>,
    output: &mut Array<F>,
    batch: u32,
    #[comptime] cfg: PassConfig,
) {
    let log_n = comptime![cfg.log_n];
    let stage0 = comptime![cfg.stage0];
    let log_local = comptime![cfg.log_local];
    let rows = comptime![cfg.rows];
    let threads = comptime![cfg.threads];
    let grouped = comptime![cfg.grouped];
    let n = comptime![1usize << log_n];
    let local = comptime![1usize << log_local];
    let half = comptime![local / 2];
    let half_n = comptime![n / 2];
    let lines_per_row = comptime![cfg.lines_per_row()];
    let per_thread = comptime![rows * half / threads];
    let mut s_re = SharedMemory::<F>::new(comptime![rows * local]);
    let mut s_im = SharedMemory::<F>::new(comptime![rows * local]);
    let batch = batch as usize;
    let im_offset = x.im_offset as usize;
    // Line `l` of the cube is `first_line + l·line_step`: consecutive lines, or (grouped) the
    // same chunk `g` of `rows` consecutive batch rows, which share their twiddles.
    let mut first_line = CUBE_POS * rows;
    let mut line_step = 1;
    if comptime![grouped] {
        first_line = (CUBE_POS / lines_per_row) * rows * lines_per_row + CUBE_POS % lines_per_row;
        line_step = lines_per_row;
    }
    if first_line / lines_per_row >= batch {
        terminate!();
    }
    let t = UNIT_POS_X as usize;

    #[unroll]
    for q in 0..comptime![2 * per_thread] {
        let (l, j) = slot_of(t + q * threads, cfg);
        let (row, i) = line_element(first_line + l * line_step, j, cfg);
        let src = row * n + permuted(i, order, cfg);
        let mut vr = F::new(0.0);
        let mut vi = F::new(0.0);
        if row < batch {
            vr = x.re[src];
            vi = x.im[im_offset + src];
        }
        let at = swizzled(l * local + j, cfg);
        s_re[at] = vr;
        s_im[at] = vi;
    }
    sync_cube();

    // Whole rows, or grouped lines (all lines of the cube share their twiddles): each thread's
    // butterflies of a stage use `kpt` twiddle blocks (one if threads are a multiple of n/2,
    // n/2 / threads otherwise), each loaded once for all the lines it serves.
    let shared_block = comptime![log_local == log_n || grouped];
    let kpt = comptime![if threads < half { half / threads } else { 1 }];
    #[unroll]
    for s in 0..log_local {
        let st = comptime![1usize << s];
        if comptime![shared_block] {
            #[unroll]
            for kb in 0..kpt {
                let k = t % half + kb * threads;
                let tw = load_block(twiddles, stage0 + s, twiddle_of(first_line, k, cfg), half_n);
                let k_base = ((k >> s) << (s + 1)) + (k & (st - 1));
                #[unroll]
                for p in 0..comptime![per_thread / kpt] {
                    // Butterfly `t + (p·kpt + kb)·threads` of the cube: row l, index k.
                    let l = (t + (p * kpt + kb) * threads) / half;
                    let i0 = l * local + k_base;
                    let (a, b) = swizzled_pair(i0, st, cfg);
                    apply_block(&mut s_re, &mut s_im, a, b, &tw);
                }
            }
        } else {
            #[unroll]
            for p in 0..per_thread {
                let b = t + p * threads;
                let k = b % half;
                let l = b / half;
                let i0 = l * local + ((k >> s) << (s + 1)) + (k & (st - 1));
                let tw = load_block(twiddles, stage0 + s, twiddle_of(first_line + l * line_step, k, cfg), half_n);
                let (a, b) = swizzled_pair(i0, st, cfg);
                apply_block(&mut s_re, &mut s_im, a, b, &tw);
            }
        }
        sync_cube();
    }

    let plane = batch * n;
    #[unroll]
    for q in 0..comptime![2 * per_thread] {
        let (l, j) = slot_of(t + q * threads, cfg);
        let (row, i) = line_element(first_line + l * line_step, j, cfg);
        if row < batch {
            let dst = row * n + i;
            let at = swizzled(l * local + j, cfg);
            output[dst] = s_re[at];
            output[plane + dst] = s_im[at];
        }
    }
}

/// Both twiddle tables of `tw` (contiguous, `[log2 n, n/2, 2, 2]`) made planar for [`launch_pass`].
pub(crate) fn planar_split<R: CubeRuntime, F: FloatElement>(tw: &Split<R>, half_n: usize) -> Split<R> {
    Split::new(planar_twiddles::<R, F>(&tw.re, half_n), planar_twiddles::<R, F>(&tw.im, half_n))
}

/// Launches one pass: input `x`, planar twiddles `tw` ([`planar_split`]) → packed `[2, batch, n]`.
pub(crate) fn launch_pass<R: CubeRuntime, F: FloatElement>(
    pass: &Pass,
    x: &Split<R>,
    tw: &Split<R>,
    batch: usize,
    order: &InputOrder<R>,
) -> CubeTensor<R> {
    let n = 1usize << pass.log_n;
    let output = empty::<R, F>(&x.re, vec![2, batch, n]);
    let lines = batch * pass.lines_per_row();
    let plan = pass.forward;
    // A first pass of two takes one chunk of `rows` batch rows per cube where the batch fills
    // them (each twiddle block then loads once for all the cube's lines).
    let grouped = pass.stage0 == 0 && pass.lines_per_row() > 1 && batch >= plan.rows;
    let cubes = if grouped { batch.div_ceil(plan.rows) * pass.lines_per_row() } else { lines.div_ceil(plan.rows) };
    // SAFETY: every index the kernel forms is in bounds by construction: rows past the batch
    // are masked, shared-memory and twiddle indices stay below their comptime sizes.
    unsafe {
        butterfly_forward_kernel::launch_unchecked::<F, R>(
            &x.re.client,
            grid(cubes),
            CubeDim::new_1d(plan.threads as u32),
            x.arg::<F>(),
            order.table.clone().into_array_arg(),
            tw.twiddles::<F>(),
            output.clone().into_array_arg(),
            batch as u32,
            pass.config(plan, order.order, grouped),
        );
    }
    output
}

/// Launches the fused forward: `[batch, n]` re and im, twiddles `[log2 n, n/2, 2, 2]` → packed
/// `[2, batch, n]`, in one or two passes, the input read in `order` as the first pass loads it.
/// The caller checks [`fused_supported`](super::fused_supported) first.
pub fn forward<R: CubeRuntime, F: FloatElement>(
    x_re: CubeTensor<R>,
    x_im: CubeTensor<R>,
    tw_re: CubeTensor<R>,
    tw_im: CubeTensor<R>,
    order: &InputOrder<R>,
) -> CubeTensor<R> {
    let dims = x_re.meta.shape().clone();
    let (batch, n) = (dims[0], dims[1]);
    let x = Split::new(x_re, x_im);
    let passes = device_passes::<R, F>(n, &x.re.device).expect("butterfly forward: the caller checks fused_supported");
    if passes.len() == 1 {
        if let Some(cfg) = radix_config::<R, F>(n, &x.re.device, order.order) {
            // The relayout reads the twiddles through their strides (no copy first).
            return radix::forward::<R, F>(&x, (&tw_re, &tw_im), batch, order, cfg);
        }
    }
    // Two passes: the first, on bit-reversed chunks, register-resident where it runs.
    let log_chunks = passes[0].log_n - passes[0].log_local;
    let chunked = (passes.len() == 2)
        .then(|| radix_config::<R, F>(1 << passes[0].log_local, &x.re.device, order.order))
        .flatten()
        .and_then(|cfg| cfg.chunked(log_chunks));
    let first = chunked.map(|cfg| radix::forward::<R, F>(&x, (&tw_re, &tw_im), batch, order, cfg));
    let tw = Split::new(tw_re, tw_im);
    let tw = planar_split::<R, F>(&tw, n / 2);
    let mut y = match first {
        Some(y) => y,
        None => launch_pass::<R, F>(&passes[0], &x, &tw, batch, order),
    };
    for pass in &passes[1..] {
        // A last pass of one or two stages: each thread's column in registers.
        y = match ColumnsConfig::new(pass.log_n, pass.stage0) {
            Some(cfg) => columns::forward::<R, F>(&Split::packed(y), &tw, batch, cfg),
            None => launch_pass::<R, F>(pass, &Split::packed(y), &tw, batch, &order.natural()),
        };
    }
    y
}

/// The register-resident forward's configuration for `n` on `device`, where it runs.
pub(super) fn radix_config<R: CubeRuntime, F: FloatElement>(
    n: usize,
    device: &R::Device,
    order: Order,
) -> Option<RadixConfig> {
    let limits = DeviceLimits::of(&R::client(device));
    radix_config_on(&limits, n, std::mem::size_of::<F>(), order, tuning::overrides())
}

/// [`radix_config`] for a device with `limits`, in `elem`-byte floats, under the overrides `o`.
pub(super) fn radix_config_on(
    limits: &DeviceLimits,
    n: usize,
    elem: usize,
    order: Order,
    o: &tuning::Overrides,
) -> Option<RadixConfig> {
    let mapping = tuning::radix_mapping(limits, n, o)?;
    let limits = match mapping.log_cube {
        // A smaller cube: its shared memory holds 2^log_cube complex elements (a row at least).
        Some(log_cube) => limits.capped((2 * elem) << log_cube.clamp(n.trailing_zeros() as usize, 20)),
        None => *limits,
    };
    RadixConfig::with_elems(n, elem, &limits, order, (mapping.log_elems, mapping.log_group))
        .map(|cfg| cfg.stacked(mapping.log_stack).reloading(mapping.reload))
}
