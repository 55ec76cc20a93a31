//! Fused butterfly backward: the kernel, the deterministic partial-sum reduction, and the launch
//! wrapper.
//!
//! For a stage `y0 = t00·x0 + t01·x1`, `y1 = t10·x0 + t11·x1` and a real loss, with gradients
//! written as complex numbers `g = ∂L/∂re + i·∂L/∂im`:
//! `g_x0 = conj(t00)·g_y0 + conj(t10)·g_y1`, `g_x1 = conj(t01)·g_y0 + conj(t11)·g_y1`, and
//! `g_tab = g_ya · conj(x_b)` summed over the batch.

use burn_cubecl::{tensor::CubeTensor, CubeRuntime, FloatElement};

use crate::ops::cubecl::empty;
use cubecl::{prelude::*, CubeDim};

use super::forward::{
    launch_pass, line_element, permuted, planar_split, radix_config, slot_of, swizzled, swizzled_pair, twiddle_of,
};
use super::radix;
use super::{
    device_backward_passes, reverse_bits, InputOrder, Order, Pass, PassConfig, Split, SplitInput, TwiddleTables,
    MAX_PARTIAL_BYTES,
};
use crate::ops::cubecl::grid;
use crate::ops::onchip::{SharedSplit, SplitArray};
use crate::ops::tuning::{self, DeviceLimits};

/// Where a (cube, line slot)'s partial twiddle gradient goes. Every line slot of a cube sees
/// lines of one residue `g` (mod lines per row `G`) only (the cube count is a multiple of
/// `G / rows`), so its partial covers that residue's twiddles; partials are laid out
/// `[G, per_g, 2, local entries]` and `(g, m)` is returned, `m` numbering the slots of residue
/// `g`.
#[cube]
fn partial_slot(cube: usize, l: usize, #[comptime] lines_per_row: usize, #[comptime] rows: usize) -> (usize, usize) {
    let cube_groups = comptime![if lines_per_row > rows { lines_per_row / rows } else { 1 }];
    let line_groups = comptime![if rows > lines_per_row { rows / lines_per_row } else { 1 }];
    let g = ((cube % cube_groups) * rows + l) % lines_per_row;
    let m = (cube / cube_groups) * line_groups + l / lines_per_row;
    (g, m)
}

/// The barrier after a stage: per plane where the next stage reads only what the plane wrote
/// (`between`: another stage of the same direction follows, and `cfg.plane_sync`), per cube
/// otherwise.
#[cube]
fn stage_sync(#[comptime] between: bool, #[comptime] cfg: PassConfig) {
    if comptime![between && cfg.plane_sync] {
        sync_plane();
    } else {
        sync_cube();
    }
}

/// What [`fetch`] reads: the pass's input permuted by the first pass's order (`gather`), or the
/// output gradient as it lies; and which parts (`re`, `im`) it reads (the others read as zeros).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Fetch {
    gather: bool,
    re: bool,
    im: bool,
}

impl Fetch {
    /// The pass's input, both parts, permuted.
    const INPUT: Fetch = Fetch { gather: true, re: true, im: true };

    /// The output gradient's parts that `cfg` says are nonzero, as they lie.
    fn grad(cfg: PassConfig) -> Fetch {
        Fetch { gather: false, re: cfg.grad_parts[0], im: cfg.grad_parts[1] }
    }
}

/// The thread's slots `q` (elements `t + q · threads` of the cube's lines, [`slot_of`]) of the
/// chunk of lines from `first_line`, read from `input` into registers `regs` as `what` says.
/// Rows past the batch read as zeros.
#[cube]
fn fetch<F: Float>(
    input: &SplitInput<F>,
    order: &Array<u32>,
    regs: &mut SplitArray<F>,
    first_line: usize,
    batch: usize,
    #[comptime] what: Fetch,
    #[comptime] cfg: PassConfig,
) {
    let threads = comptime![cfg.threads];
    #[unroll]
    for q in 0..comptime![cfg.rows * (1usize << cfg.log_local) / cfg.threads] {
        let (l, j) = slot_of(UNIT_POS_X as usize + q * threads, cfg);
        let (row, i) = line_element(first_line + l, j, cfg);
        let mut col = i;
        if comptime![what.gather] {
            col = permuted(i, order, cfg);
        }
        let src = row * comptime![1usize << cfg.log_n] + col;
        regs.re[q] = F::new(0.0);
        regs.im[q] = F::new(0.0);
        if row < batch {
            if comptime![what.re] {
                regs.re[q] = input.re[src];
            }
            if comptime![what.im] {
                regs.im[q] = input.im[input.im_offset as usize + src];
            }
        }
    }
}

/// Writes the thread's slots (as [`fetch`] read them) to their places in shared memory.
#[cube]
fn deposit<F: Float>(shared: &mut SharedSplit<F>, regs: &SplitArray<F>, #[comptime] cfg: PassConfig) {
    let threads = comptime![cfg.threads];
    #[unroll]
    for q in 0..comptime![cfg.rows * (1usize << cfg.log_local) / cfg.threads] {
        let (l, j) = slot_of(UNIT_POS_X as usize + q * threads, cfg);
        let at = swizzled((l << comptime![cfg.log_local]) + j, cfg);
        shared.re[at] = regs.re[q];
        shared.im[at] = regs.im[q];
    }
}

/// What the backward kernel writes: the input gradient, packed `[2, batch, n]`, and each (cube,
/// line slot)'s partial twiddle gradient.
#[derive(CubeLaunch, CubeType)]
pub(crate) struct BackwardOutputs<F: Float> {
    pub grad_x: Array<F>,
    pub partials: Array<F>,
}

/// How the backward kernel's cubes share the lines: `batch` rows, `cubes` cubes looping over
/// the chunks of lines.
#[derive(CubeLaunch, CubeType)]
pub(crate) struct Chunking {
    pub batch: u32,
    pub cubes: u32,
}

/// Each cube loops over line chunks `c, c + cubes, …`; each thread loads its twiddle blocks once,
/// before the loop (they are the same for every chunk). Per chunk: load x (permuted on the first
/// pass; fetched into registers while the previous chunk ran), run the pass's forward stages
/// keeping every stage's input in registers, load the output gradient (fetched while the
/// forward stages ran), run the stages backwards accumulating the twiddle gradient in
/// registers, and store the input gradient (un-permuted). At the end each (cube, line slot)
/// writes its partial twiddle gradient.
#[cube(launch_unchecked)]
pub(crate) fn butterfly_backward_kernel<F: Float>(
    grad_out: &SplitInput<F>,
    x: &SplitInput<F>,
    order: &Array<u32>,
    twiddles: &TwiddleTables<F>,
    out: &mut BackwardOutputs<F>,
    chunking: &Chunking,
    #[comptime] cfg: PassConfig,
) {
    let log_n = comptime![cfg.log_n];
    let stage0 = comptime![cfg.stage0];
    let log_local = comptime![cfg.log_local];
    let rows = comptime![cfg.rows];
    let threads = comptime![cfg.threads];
    let n = comptime![1usize << log_n];
    let local = comptime![1usize << log_local];
    let half = comptime![local / 2];
    let half_n = comptime![n / 2];
    let lines_per_row = comptime![cfg.lines_per_row()];
    let per_thread = comptime![rows * half / threads];
    // Element j of line l at `swizzled(l · local + j)` (spread over the banks).
    let lines_len = comptime![rows * local];
    let mut shared = SharedSplit::<F> { re: SharedMemory::<F>::new(lines_len), im: SharedMemory::<F>::new(lines_len) };
    // Every stage's input (4 floats per butterfly), written and read back by the thread that owns
    // the butterfly, and the twiddle-gradient accumulators (8 per block): registers.
    let mut hist = Array::<F>::new(comptime![log_local * per_thread * 4]);
    let mut acc = Array::<F>::new(comptime![log_local * per_thread * 8]);
    #[unroll]
    for a in 0..comptime![log_local * per_thread * 8] {
        acc[a] = F::new(0.0);
    }
    let batch = chunking.batch as usize;
    let cubes = chunking.cubes as usize;
    let cube = CUBE_POS;
    if cube >= cubes {
        terminate!();
    }
    let t = UNIT_POS_X as usize;
    // A cube's lines keep their residues mod lines-per-row from chunk to chunk (the cube count
    // is a multiple of the cube groups), so each thread's twiddle blocks are the same for every
    // chunk: load them once, into registers, layout (re, im) × [t00, t01, t10, t11].
    let mut tw = Array::<F>::new(comptime![log_local * per_thread * 8]);
    #[unroll]
    for s in 0..log_local {
        #[unroll]
        for p in 0..per_thread {
            let b = t + p * threads;
            let w = ((stage0 + s) * half_n + twiddle_of(cube * rows + b / half, b % half, cfg)) * 4;
            let a = (s * per_thread + p) * 8;
            #[unroll]
            for j in 0..4usize {
                tw[a + 2 * j] = twiddles.re[w + j];
                tw[a + 2 * j + 1] = twiddles.im[w + j];
            }
        }
    }
    let plane = batch * n;
    let chunks = (batch * lines_per_row).div_ceil(rows);
    // The next chunk's input and output gradient, fetched into registers one phase ahead (x
    // while this chunk runs, its gradient while this chunk's backward stages run), so the
    // global loads' latency overlaps the stages instead of stalling the cube between chunks.
    let slots = comptime![2 * per_thread];
    let mut xs = SplitArray::<F> { re: Array::<F>::new(slots), im: Array::<F>::new(slots) };
    let mut gs = SplitArray::<F> { re: Array::<F>::new(slots), im: Array::<F>::new(slots) };
    fetch(x, order, &mut xs, cube * rows, batch, comptime![Fetch::INPUT], cfg);
    fetch(grad_out, order, &mut gs, cube * rows, batch, comptime![Fetch::grad(cfg)], cfg);

    let mut chunk = cube;
    while chunk < chunks {
        let first_line = chunk * rows;
        let next_line = first_line + cubes * rows;
        deposit(&mut shared, &xs, cfg);
        fetch(x, order, &mut xs, next_line, batch, comptime![Fetch::INPUT], cfg);
        sync_cube();

        #[unroll]
        for s in 0..log_local {
            let st = comptime![1usize << s];
            #[unroll]
            for p in 0..per_thread {
                let b = t + p * threads;
                let k = b % half;
                let l = b / half;
                let i0 = l * local + ((k >> s) << (s + 1)) + (k & (st - 1));
                let (i0, i1) = swizzled_pair(i0, st, cfg);
                let w = (s * per_thread + p) * 8;
                let (ar, ai, br, bi) = (shared.re[i0], shared.im[i0], shared.re[i1], shared.im[i1]);
                let h = (s * per_thread + p) * 4;
                hist[h] = ar;
                hist[h + 1] = ai;
                hist[h + 2] = br;
                hist[h + 3] = bi;
                // The last stage's output is not needed: the output gradient replaces it.
                if comptime![s + 1 < log_local] {
                    let (t00r, t00i, t01r, t01i) = (tw[w], tw[w + 1], tw[w + 2], tw[w + 3]);
                    let (t10r, t10i, t11r, t11i) = (tw[w + 4], tw[w + 5], tw[w + 6], tw[w + 7]);
                    shared.re[i0] = t00r * ar - t00i * ai + t01r * br - t01i * bi;
                    shared.im[i0] = t00r * ai + t00i * ar + t01r * bi + t01i * br;
                    shared.re[i1] = t10r * ar - t10i * ai + t11r * br - t11i * bi;
                    shared.im[i1] = t10r * ai + t10i * ar + t11r * bi + t11i * br;
                }
            }
            stage_sync(comptime![s + 1 < log_local], cfg);
        }

        deposit(&mut shared, &gs, cfg);
        fetch(grad_out, order, &mut gs, next_line, batch, comptime![Fetch::grad(cfg)], cfg);
        sync_cube();

        #[unroll]
        for r in 0..log_local {
            let s = comptime![log_local - 1 - r];
            let st = comptime![1usize << s];
            #[unroll]
            for p in 0..per_thread {
                let b = t + p * threads;
                let k = b % half;
                let l = b / half;
                let i0 = l * local + ((k >> s) << (s + 1)) + (k & (st - 1));
                let (i0, i1) = swizzled_pair(i0, st, cfg);
                let w = (s * per_thread + p) * 8;
                let (g0r, g0i, g1r, g1i) = (shared.re[i0], shared.im[i0], shared.re[i1], shared.im[i1]);
                let h = (s * per_thread + p) * 4;
                let (ar, ai, br, bi) = (hist[h], hist[h + 1], hist[h + 2], hist[h + 3]);
                // g_tab += g_ya · conj(x_b); layout (re, im) × [t00, t01, t10, t11].
                let a = (s * per_thread + p) * 8;
                acc[a] += g0r * ar + g0i * ai;
                acc[a + 1] += g0i * ar - g0r * ai;
                acc[a + 2] += g0r * br + g0i * bi;
                acc[a + 3] += g0i * br - g0r * bi;
                acc[a + 4] += g1r * ar + g1i * ai;
                acc[a + 5] += g1i * ar - g1r * ai;
                acc[a + 6] += g1r * br + g1i * bi;
                acc[a + 7] += g1i * br - g1r * bi;
                let (t00r, t00i, t01r, t01i) = (tw[w], tw[w + 1], tw[w + 2], tw[w + 3]);
                let (t10r, t10i, t11r, t11i) = (tw[w + 4], tw[w + 5], tw[w + 6], tw[w + 7]);
                // g_x0 = conj(t00)·g0 + conj(t10)·g1, g_x1 = conj(t01)·g0 + conj(t11)·g1.
                shared.re[i0] = t00r * g0r + t00i * g0i + t10r * g1r + t10i * g1i;
                shared.im[i0] = t00r * g0i - t00i * g0r + t10r * g1i - t10i * g1r;
                shared.re[i1] = t01r * g0r + t01i * g0i + t11r * g1r + t11i * g1i;
                shared.im[i1] = t01r * g0i - t01i * g0r + t11r * g1i - t11i * g1r;
            }
            stage_sync(comptime![r + 1 < log_local], cfg);
        }

        // Position i of the permuted vector came from x[perm(i)]: its gradient goes back there.
        #[unroll]
        for q in 0..comptime![2 * per_thread] {
            let (l, j) = slot_of(t + q * threads, cfg);
            let (row, i) = line_element(first_line + l, j, cfg);
            if row < batch {
                let dst = row * n + permuted(i, order, cfg);
                let at = swizzled(l * local + j, cfg);
                out.grad_x[dst] = shared.re[at];
                out.grad_x[plane + dst] = shared.im[at];
            }
        }
        sync_cube();
        chunk += cubes;
    }

    // partials: [lines_per_row, per_g, 2, entries]
    let entries = comptime![log_local * half * 4];
    let per_g = (cubes / comptime![if lines_per_row > rows { lines_per_row / rows } else { 1 }])
        * comptime![if rows > lines_per_row { rows / lines_per_row } else { 1 }];
    #[unroll]
    for s in 0..log_local {
        #[unroll]
        for p in 0..per_thread {
            let b = t + p * threads;
            let k = b % half;
            let (g, m) = partial_slot(cube, b / half, lines_per_row, rows);
            let base = (g * per_g + m) * 2 * entries + (s * half + k) * 4;
            let a = (s * per_thread + p) * 8;
            #[unroll]
            for j in 0..4usize {
                out.partials[base + j] = acc[a + 2 * j];
                out.partials[base + entries + j] = acc[a + 2 * j + 1];
            }
        }
    }
}

/// Twiddle-gradient entries one cube of [`sum_partials_kernel`] sums (its threads along x).
const SUM_ENTRIES: usize = 32;
/// Threads of [`sum_partials_kernel`] sharing one entry (along y): each sums every
/// `SUM_SLICES`-th partial, then the slices are added in order.
const SUM_SLICES: usize = 16;

/// Sums the partials of one pass into its stages' rows of the twiddle gradient
/// `out: [2, log2 n · n/2 · 4]`. Entry `e` is summed by `SUM_SLICES` threads: thread `y` adds the
/// partials `m = y, y + SUM_SLICES, …` of its residue in that order, and the first thread adds
/// the slices' sums in the order `y = 0, 1, …`: the same order on every call (deterministic, no
/// atomics), with `SUM_SLICES` times the parallelism of one thread per entry (at N = 256 one
/// pass has 1024 partials per entry).
#[cube(launch)]
pub(crate) fn sum_partials_kernel<F: Float>(
    parts: &Array<F>,
    out: &mut Array<F>,
    per_g: u32,
    #[comptime] log_n: usize,
    #[comptime] stage0: usize,
    #[comptime] log_local: usize,
    #[comptime] reversed: bool,
) {
    let half_n = comptime![1usize << (log_n - 1)];
    let half = comptime![1usize << (log_local - 1)];
    let lines_per_row = comptime![1usize << (log_n - log_local)];
    let local_entries = comptime![log_local * half * 4];
    let pass_entries = comptime![log_local * half_n * 4];
    let all_entries = comptime![log_n * half_n * 4];
    let x = UNIT_POS_X as usize;
    let y = UNIT_POS_Y as usize;
    let e = CUBE_POS * SUM_ENTRIES + x;
    let inside = e < comptime![2 * pass_entries];
    let c = e / pass_entries;
    let rest = e % pass_entries;
    let s = rest / comptime![half_n * 4];
    let k = (rest / 4) % half_n;
    let jj = rest % 4;
    let mut g = k / half;
    let mut k_local = k % half;
    if comptime![stage0 > 0] {
        g = k % lines_per_row;
        k_local = k / lines_per_row;
    }
    if comptime![reversed] {
        // Chunk g was line rev(g) of its row (`PassConfig::reversed`).
        g = reverse_bits(g, comptime![log_n - log_local]);
    }
    let per_g = per_g as usize;
    let src = (s * half + k_local) * 4 + jj + c * local_entries;
    let mut sum = F::new(0.0);
    if inside {
        let mut m = y;
        while m < per_g {
            sum += parts[(g * per_g + m) * 2 * local_entries + src];
            m += SUM_SLICES;
        }
    }
    let mut slices = SharedMemory::<F>::new(comptime![SUM_ENTRIES * SUM_SLICES]);
    slices[y * SUM_ENTRIES + x] = sum;
    sync_cube();
    if inside && y == 0 {
        let mut total = slices[x];
        #[unroll]
        for j in 1..SUM_SLICES {
            total += slices[j * SUM_ENTRIES + x];
        }
        out[c * all_entries + ((stage0 + s) * half_n + k) * 4 + jj] = total;
    }
}

/// Launches the backward of one pass: output gradient (and which of its parts the kernel reads)
/// and the pass's input `x` → packed input gradient; writes the pass's stages of `grad_tw`.
fn backward_pass<R: CubeRuntime, F: FloatElement>(
    pass: &Pass,
    (grad_out, grad_parts): (&Split<R>, [bool; 2]),
    x: &Split<R>,
    tw: &Split<R>,
    grad_tw: &CubeTensor<R>,
    batch: usize,
    order: &InputOrder<R>,
) -> CubeTensor<R> {
    let client = x.re.client.clone();
    let n = 1usize << pass.log_n;
    let rows = pass.plan.rows;
    let lines_per_row = pass.lines_per_row();
    let local_entries = pass.log_local * (1 << (pass.log_local - 1)) * 4;
    let slot_bytes = rows * 2 * local_entries * core::mem::size_of::<F>();
    // A multiple of the cube groups, so each line slot of a cube sees one residue.
    let cube_groups = (lines_per_row / rows).max(1);
    let chunks = (batch * lines_per_row).div_ceil(rows);
    let limits = DeviceLimits::of(&client);
    let max_cubes = tuning::max_backward_cubes(&limits, n, tuning::overrides());
    let cubes = chunks.min(max_cubes).min(MAX_PARTIAL_BYTES / slot_bytes).max(cube_groups);
    let cubes = cubes / cube_groups * cube_groups;
    let per_g = (cubes / cube_groups) * (rows / lines_per_row).max(1);
    let grad_x = empty::<R, F>(&x.re, vec![2, batch, n]);
    let partials = empty::<R, F>(&x.re, vec![cubes * rows, 2, local_entries]);
    let mut cfg = pass.config(pass.plan, order.order, false);
    cfg.reversed = pass.stage0 == 0 && order.order == Order::BitReversed && lines_per_row > 1;
    cfg.plane_sync = pass.plane_sync() && limits.compiler.has_plane_barrier();
    cfg.grad_parts = grad_parts;
    // SAFETY: every index the kernel forms is in bounds by construction: rows past the batch
    // are masked, the cube count matches the partials buffer, shared-memory and twiddle indices
    // stay below their comptime sizes.
    unsafe {
        butterfly_backward_kernel::launch_unchecked::<F, R>(
            &client,
            grid(cubes),
            CubeDim::new_1d(pass.plan.threads as u32),
            grad_out.arg::<F>(),
            x.arg::<F>(),
            order.table.clone().into_array_arg(),
            tw.twiddles::<F>(),
            BackwardOutputsLaunch::new(grad_x.clone().into_array_arg(), partials.clone().into_array_arg()),
            ChunkingLaunch::new(batch as u32, cubes as u32),
            cfg,
        );
    }
    let len = 2 * pass.entries();
    sum_partials_kernel::launch::<F, R>(
        &client,
        grid(len.div_ceil(SUM_ENTRIES)),
        CubeDim::new_2d(SUM_ENTRIES as u32, SUM_SLICES as u32),
        partials.into_array_arg(),
        grad_tw.clone().into_array_arg(),
        per_g as u32,
        pass.log_n,
        pass.stage0,
        pass.log_local,
        cfg.reversed,
    );
    grad_x
}

/// Launches the fused backward. Takes the output gradient (re and im, each `[batch, n]`; a part
/// the loss does not reach, `None`, counts as zeros) and the forward's inputs; returns the packed
/// input gradient `[2, batch, n]` and the twiddle gradient `[2, log2 n · n/2 · 4]` (re then im).
/// From N = 512 on CUDA (1024 elsewhere) it runs in two balanced passes
/// ([`backward_passes`](super::backward_passes)): the first pass's output is recomputed (by the
/// register-resident forward stopped after the pass's stages, where a row fits its cube) and the
/// passes run backwards.
pub fn backward<R: CubeRuntime, F: FloatElement>(
    grad_out: [Option<CubeTensor<R>>; 2],
    x_re: CubeTensor<R>,
    x_im: CubeTensor<R>,
    tw_re: CubeTensor<R>,
    tw_im: CubeTensor<R>,
    order: &InputOrder<R>,
) -> (CubeTensor<R>, CubeTensor<R>) {
    let dims = x_re.meta.shape().clone();
    let (batch, n) = (dims[0], dims[1]);
    let parts = grad_out.each_ref().map(Option::is_some);
    let grad_out = match grad_out {
        [Some(re), Some(im)] => Split::new(re, im),
        // The kernel reads only the parts it has: a tensor it has stands for the others.
        [Some(one), None] | [None, Some(one)] => Split::both(one),
        [None, None] => Split::both(x_re.clone()),
    };
    let (x, tw) = (Split::new(x_re, x_im), Split::new(tw_re, tw_im));
    let passes =
        device_backward_passes::<R, F>(n, &x.re.device).expect("butterfly backward: the caller checks fused_supported");
    let log_n = n.trailing_zeros() as usize;
    let grad_tw = empty::<R, F>(&x.re, vec![2, log_n * (n / 2) * 4]);
    let grad_x = match passes.as_slice() {
        [one] => backward_pass::<R, F>(one, (&grad_out, parts), &x, &tw, &grad_tw, batch, order),
        [first, second] => {
            // The first pass's output, recomputed: by the register-resident forward stopped after
            // the pass's stages where a row fits one of its cubes (it loads whole rows,
            // coalesced), otherwise by the shared-memory forward of the pass's lines.
            let mid = match radix_config::<R, F>(n, &x.re.device, order.order) {
                Some(cfg) => {
                    let cfg = cfg.first_stages(first.log_local);
                    radix::forward::<R, F>(&x, (&tw.re, &tw.im), batch, order, cfg)
                }
                None => launch_pass::<R, F>(first, &x, &planar_split::<R, F>(&tw, n / 2), batch, order),
            };
            let mid = Split::packed(mid);
            let grad_mid =
                backward_pass::<R, F>(second, (&grad_out, parts), &mid, &tw, &grad_tw, batch, &order.natural());
            backward_pass::<R, F>(first, (&Split::packed(grad_mid), [true; 2]), &x, &tw, &grad_tw, batch, order)
        }
        _ => unreachable!("butterfly backward: one or two passes"),
    };
    (grad_x, grad_tw)
}
