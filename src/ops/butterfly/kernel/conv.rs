//! The fused FFT convolution forward (CubeCL backends without autodiff): after a small launch
//! that relays the twiddles, one launch transforms every channel's taps, one more convolves every
//! row with both transforms on-chip.
//!
//! A cube holds one zero-padded row of N complex values (as large as the device's shared
//! memory allows, [`tuning::conv_mapping`], up to 64 KiB: N ≤ 4096 in f32 in Metal's 32 KiB,
//! 8192 on CUDA; the rfft convolution's rows go up to the device's limit) and runs the butterfly's stages register-resident, as the forward's
//! [`super::radix`] kernel does for one row: each thread holds `2^e` elements and runs groups of up to
//! `e` stages on them, the row crossing the (bank-conflict-free, swizzled) shared memory once
//! between groups instead of once per stage, the twiddles read from tables relaid so a warp's
//! loads are whole lines. The input permutation is applied as the row is loaded (bit reversal
//! straight from global memory into registers, other orders through shared memory). Between its
//! two transforms the convolution kernel stores the spectrum to shared memory and gathers it back
//! permuted into the first group's registers, where it multiplies it by the taps' spectrum, which
//! the taps kernel wrote in exactly that register order (so those reads are coalesced). Three
//! launches per call are what a small convolution costs (the reference path takes some twenty
//! tensor operations), which is where the time of such calls goes.

use burn_cubecl::{kernel::into_contiguous, tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::{prelude::*, CubeDim};

use super::radix::radix_twiddles;
use super::InputOrder;
use crate::ops::cubecl::{empties, grid};
use crate::ops::onchip::{
    deposit_thread, exchange, first_group_from_shared, group_stages, move_group, reverse_bits, reversed, swizzled,
    Order, Quad, RadixConfig, SharedSplit, SplitArray,
};
use crate::ops::tuning::{self, DeviceLimits};

/// What the kernels are compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ConvConfig {
    /// The register-resident mapping of one row per cube.
    pub radix: RadixConfig,
    /// Whether a bias is added.
    pub bias: bool,
    /// Whether the convolution multiplies by the filter's conjugate (its adjoint, the
    /// correlation), in the backward.
    pub correlate: bool,
}

impl ConvConfig {
    /// The configuration for size `n` on `limits`' device, in `elem`-byte floats: one row a
    /// cube, mapped by [`tuning::conv_mapping`]; `None` where a row does not fit a cube.
    pub fn new(n: usize, elem: usize, limits: &DeviceLimits, order: Order, bias: bool) -> Option<Self> {
        let mapping = tuning::conv_mapping(limits, n, elem, tuning::overrides())?;
        let radix = RadixConfig::single_row(n, order, mapping)?;
        (radix.threads() <= limits.max_units).then_some(ConvConfig { radix, bias, correlate: false })
    }

    /// [`Self::new`] for the complex kernels, whose row is capped at
    /// [`tuning::COMPLEX_CONV_MAX_ROW_BYTES`] past the budget.
    pub fn complex(n: usize, elem: usize, limits: &DeviceLimits, order: Order, bias: bool) -> Option<Self> {
        tuning::complex_conv_row_fits(limits, n, elem).then(|| Self::new(n, elem, limits, order, bias)).flatten()
    }

    /// As [`Self::new`] without a bias, but with as many rows a cube as fill its budget (the
    /// mapping of the fused butterfly's forward): for kernels whose rows share nothing, such as
    /// the bare rfft. `None` where that mapping does not exist.
    pub fn filling(n: usize, elem: usize, limits: &DeviceLimits, order: Order) -> Option<Self> {
        let radix = RadixConfig::with_elems(n, elem, limits, order, tuning::conv_log_elems(tuning::overrides()))?;
        Some(ConvConfig { radix, bias: false, correlate: false })
    }
}

/// Whether the fused convolution runs for size `n` on `device` in float type `F`.
pub fn conv_supported<R: CubeRuntime, F: FloatElement>(n: usize, device: &R::Device) -> bool {
    let limits = DeviceLimits::of(&R::client(device));
    ConvConfig::complex(n, core::mem::size_of::<F>(), &limits, Order::Natural, false).is_some()
}

/// Loads the real row `values[start … start + len]`, zero-padded to N and permuted, into the
/// first group's registers (imaginary parts zero).
#[cube]
fn load_real<F: Float>(
    values: &Array<F>,
    start: usize,
    len: usize,
    order: &Array<u32>,
    shared: &mut SharedSplit<F>,
    regs: &mut SplitArray<F>,
    #[comptime] cfg: RadixConfig,
) {
    let log_n = comptime![cfg.log_n];
    let n = comptime![1usize << log_n];
    let threads = comptime![cfg.threads()];
    let t = UNIT_POS_X as usize;
    if comptime![cfg.direct_load()] {
        // Element e of instance q sits at column rev(base | e) = rev(base_t) | rev(const): the
        // lanes are the highest column bits, so consecutive lanes read consecutive samples.
        let r = comptime![1usize << cfg.group(0).1];
        let src_t = reverse_bits(deposit_thread(t, cfg, comptime![0usize]), log_n);
        #[unroll]
        for q in 0..comptime![cfg.instances(0)] {
            #[unroll]
            for e in 0..r {
                let j = src_t + comptime![reversed(cfg.deposit(0, q * threads) | e, log_n)];
                let mut v = F::new(0.0);
                if j < len {
                    v = values[start + j];
                }
                regs.re[q * r + e] = v;
                regs.im[q * r + e] = F::new(0.0);
            }
        }
    } else {
        // Coalesced reads, each sample written to the slot of its permuted position.
        let mut slot_t = swizzled(t, cfg);
        if comptime![cfg.order == Order::BitReversed] {
            slot_t = swizzled(reverse_bits(t, log_n), cfg);
        }
        #[unroll]
        for q in 0..comptime![1usize << cfg.log_elems] {
            let j = t + comptime![q * threads];
            let mut v = F::new(0.0);
            if j < len {
                v = values[start + j];
            }
            let mut slot = slot_t ^ comptime![cfg.swizzle(q * threads)];
            if comptime![cfg.order == Order::Table] {
                slot = swizzled(order[n + j] as usize, cfg);
            } else if comptime![cfg.order == Order::BitReversed] {
                slot = slot_t ^ comptime![cfg.swizzle(reversed(q * threads, log_n))];
            }
            shared.re[slot] = v;
            shared.im[slot] = F::new(0.0);
        }
        first_group_from_shared(shared, regs, cfg);
    }
}

/// Every stage of the butterfly on the row in registers: from the first group's layout to the
/// last group's, the twiddles read from vector `base` on in the relaid table.
#[cube]
pub(super) fn transform<F: Float>(
    shared: &mut SharedSplit<F>,
    regs: &mut SplitArray<F>,
    twiddles: &Array<Quad<F>>,
    base: usize,
    #[comptime] cfg: RadixConfig,
) {
    let t = UNIT_POS_X as usize;
    #[unroll]
    for gi in 0..comptime![cfg.groups()] {
        group_stages(regs, twiddles, t, base, cfg, gi);
        if comptime![gi + 1 < cfg.groups()] {
            let slot_g = swizzled(deposit_thread(t, cfg, gi), cfg);
            exchange(shared, regs, slot_g, t, cfg, gi);
        }
    }
}

/// The transform's result `Y` (the last group's registers) through shared memory into the first
/// group's registers, permuted as the next transform takes its input: the register of cube index
/// `i` gets `Y[g[i]]`. Ends before a barrier: the caller syncs before shared memory is written.
#[cube]
fn permute_result<F: Float>(
    shared: &mut SharedSplit<F>,
    regs: &mut SplitArray<F>,
    order: &Array<u32>,
    #[comptime] cfg: RadixConfig,
) {
    store_result(shared, regs, cfg);
    sync_cube();
    gather_permuted(shared, regs, order, cfg);
}

/// The transform's result (the last group's registers) to shared memory in natural order:
/// element `i` at slot `swizzled(i)`. The caller syncs before reading it.
#[cube]
pub(super) fn store_result<F: Float>(
    shared: &mut SharedSplit<F>,
    regs: &mut SplitArray<F>,
    #[comptime] cfg: RadixConfig,
) {
    let last = comptime![cfg.groups() - 1];
    let slot_last = swizzled(deposit_thread(UNIT_POS_X as usize, cfg, last), cfg);
    move_group(shared, regs, slot_last, comptime![0usize], cfg, last, false);
}

/// The row in shared memory (element `i` at slot `swizzled(i)`) into the first group's
/// registers, permuted as a transform takes its input: the register of cube index `i` gets
/// element `g[i]`. Ends before a barrier: the caller syncs before shared memory is written.
#[cube]
pub(super) fn gather_permuted<F: Float>(
    shared: &SharedSplit<F>,
    regs: &mut SplitArray<F>,
    order: &Array<u32>,
    #[comptime] cfg: RadixConfig,
) {
    let log_n = comptime![cfg.log_n];
    let threads = comptime![cfg.threads()];
    let t = UNIT_POS_X as usize;
    let r = comptime![1usize << cfg.group(0).1];
    let base_t = deposit_thread(t, cfg, comptime![0usize]);
    let slot_t = swizzled(base_t, cfg);
    let slot_rev = swizzled(reverse_bits(base_t, log_n), cfg);
    #[unroll]
    for q in 0..comptime![cfg.instances(0)] {
        #[unroll]
        for e in 0..r {
            let c = comptime![cfg.deposit(0, q * threads) | e];
            let mut slot = slot_t ^ comptime![cfg.swizzle(c)];
            if comptime![cfg.order == Order::BitReversed] {
                slot = slot_rev ^ comptime![cfg.swizzle(reversed(c, log_n))];
            } else if comptime![cfg.order == Order::Table] {
                slot = swizzled(order[base_t + c] as usize, cfg);
            }
            regs.re[q * r + e] = shared.re[slot];
            regs.im[q * r + e] = shared.im[slot];
        }
    }
}

/// Where [`conv_taps_kernel`] reads and writes: `channels` rows of `taps_len` taps, the
/// spectrum's imaginary parts from `plane` on.
#[derive(CubeLaunch, CubeType)]
struct TapsLayout {
    channels: u32,
    taps_len: u32,
    plane: u32,
}

/// What [`conv_kernel`] multiplies by and adds: each channel's spectrum as
/// [`conv_taps_kernel`] wrote it, and its bias (read only when the configuration has one).
#[derive(CubeLaunch, CubeType)]
struct Filter<F: Float> {
    spectrum: Array<F>,
    bias: Array<F>,
}

/// [`conv_kernel`]'s rows: `rows` in all, `channels` per batch item, `length` samples in, `out_len` out, the
/// spectrum's imaginary plane at `plane`, and `reload` (zero, which the compiler cannot see)
/// as the second transform's twiddle base.
#[derive(CubeLaunch, CubeType)]
struct RowLayout {
    rows: u32,
    channels: u32,
    length: u32,
    out_len: u32,
    plane: u32,
    reload: u32,
}

/// One cube per channel: `spectrum[c] = scale · F (taps[c] zero-padded)`, permuted by the input
/// order and laid out in the convolution kernel's register order: register `k` of thread `t` at
/// `(c · elems + k) · threads + t` (re, then im at `plane`).
#[cube(launch_unchecked)]
fn conv_taps_kernel<F: Float>(
    taps: &Array<F>,
    order: &Array<u32>,
    twiddles: &Array<Quad<F>>,
    spectrum: &mut Array<F>,
    layout: &TapsLayout,
    scale: InputScalar,
    #[comptime] cfg: ConvConfig,
) {
    let plane = layout.plane;
    let rc = comptime![cfg.radix];
    let scale: F = scale.get::<F>();
    let n = comptime![1usize << rc.log_n];
    let elems = comptime![1usize << rc.log_elems];
    let threads = comptime![rc.threads()];
    let mut shared = SharedSplit::<F> { re: SharedMemory::<F>::new(n), im: SharedMemory::<F>::new(n) };
    let mut regs = SplitArray::<F> { re: Array::<F>::new(elems), im: Array::<F>::new(elems) };
    let c = CUBE_POS;
    // The grid may hold a few cubes more than rows (`grid`); a whole cube leaves at once.
    if c >= layout.channels as usize {
        terminate!();
    }
    let t = UNIT_POS_X as usize;
    let len = layout.taps_len as usize;
    load_real(taps, c * len, len, order, &mut shared, &mut regs, rc);
    transform(&mut shared, &mut regs, twiddles, 0usize, rc);
    permute_result(&mut shared, &mut regs, order, rc);
    #[unroll]
    for k in 0..elems {
        let at = (c * elems + k) * threads + t;
        spectrum[at] = regs.re[k] * scale;
        spectrum[plane as usize + at] = regs.im[k] * scale;
    }
}

/// One cube per row `(b, c)`: `X = F x`, `Z = X ⊙ spectrum[c]` (or its conjugate where the
/// configuration correlates), `y = Re F conj(Z)`, the first `out_len` samples plus `bias[c]`.
#[cube(launch_unchecked)]
fn conv_kernel<F: Float>(
    x: &Array<F>,
    filter: &Filter<F>,
    order: &Array<u32>,
    twiddles: &Array<Quad<F>>,
    output: &mut Array<F>,
    rows: &RowLayout,
    #[comptime] cfg: ConvConfig,
) {
    let channels = rows.channels;
    let length = rows.length;
    let out_len = rows.out_len;
    let plane = rows.plane;
    let rc = comptime![cfg.radix];
    let log_n = comptime![rc.log_n];
    let n = comptime![1usize << log_n];
    let elems = comptime![1usize << rc.log_elems];
    let threads = comptime![rc.threads()];
    let last = comptime![rc.groups() - 1];
    let mut shared = SharedSplit::<F> { re: SharedMemory::<F>::new(n), im: SharedMemory::<F>::new(n) };
    let mut regs = SplitArray::<F> { re: Array::<F>::new(elems), im: Array::<F>::new(elems) };
    let row = CUBE_POS;
    if row >= rows.rows as usize {
        terminate!();
    }
    let c = row % channels as usize;
    let t = UNIT_POS_X as usize;
    let len = length as usize;
    load_real(x, row * len, len, order, &mut shared, &mut regs, rc);
    transform(&mut shared, &mut regs, twiddles, 0usize, rc);
    // conj(X ⊙ H), permuted, in the first group's registers; H was written in that order.
    permute_result(&mut shared, &mut regs, order, rc);
    #[unroll]
    for k in 0..elems {
        let at = (c * elems + k) * threads + t;
        let (hr, mut hi) = (filter.spectrum[at], filter.spectrum[plane as usize + at]);
        if comptime![cfg.correlate] {
            hi = F::new(0.0) - hi;
        }
        let (xr, xi) = (regs.re[k], regs.im[k]);
        regs.re[k] = xr * hr - xi * hi;
        regs.im[k] = F::new(0.0) - (xr * hi + xi * hr);
    }
    // Every thread has gathered before the next transform's exchanges write.
    sync_cube();
    // The same twiddles again, from a base the compiler cannot see is zero: otherwise it keeps
    // every value the first transform loaded live until the second (hundreds of registers a
    // thread, spilled to local memory) instead of loading them again from the cache.
    transform(&mut shared, &mut regs, twiddles, rows.reload as usize, rc);
    let out = out_len as usize;
    let mut b = F::new(0.0);
    if comptime![cfg.bias] {
        b = filter.bias[c];
    }
    if comptime![rc.direct_store()] {
        // Straight from registers: the last group's lanes are the five lowest columns.
        let b0 = comptime![rc.group(last).0];
        let r = comptime![1usize << rc.group(last).1];
        let base_t = deposit_thread(t, rc, last);
        #[unroll]
        for q in 0..comptime![rc.instances(last)] {
            #[unroll]
            for e in 0..r {
                let i = base_t + comptime![rc.deposit(last, q * threads) | (e << b0)];
                if i < out {
                    output[row * out + i] = regs.re[q * r + e] + b;
                }
            }
        }
    } else {
        let slot_last = swizzled(deposit_thread(t, rc, last), rc);
        move_group(&mut shared, &mut regs, slot_last, comptime![0usize], rc, last, false);
        sync_cube();
        let slot_t = swizzled(t, rc);
        #[unroll]
        for q in 0..elems {
            let i = t + comptime![q * threads];
            if i < out {
                output[row * out + i] = shared.re[slot_t ^ comptime![rc.swizzle(q * threads)]] + b;
            }
        }
    }
}

/// The rows a [`ConvPlan::convolve`] launch (or the real one's) reads and writes: `rows` rows of
/// `len` samples in, `out_len` out, row `r` multiplied by the filter spectrum `r mod filters`.
#[derive(Clone, Copy)]
pub(super) struct ConvRows {
    pub rows: usize,
    pub len: usize,
    pub out_len: usize,
    pub filters: usize,
}

/// What a convolution's forward computed that its backward needs again: the configuration, the
/// twiddles relaid for it, and the taps' spectra (the signal's gradient multiplies by their
/// conjugate). Keeping them saves the backward two launches.
#[derive(Clone, Debug)]
pub(crate) struct ConvKept<R: CubeRuntime> {
    pub(super) cfg: ConvConfig,
    pub(super) tables: CubeTensor<R>,
    pub(super) taps_spectrum: CubeTensor<R>,
}

/// What one call's launches share: the configuration, the butterfly's twiddles relaid for the
/// register-resident stages (one small launch) and the input order.
struct ConvPlan<'a, R: CubeRuntime> {
    cfg: ConvConfig,
    tables: CubeTensor<R>,
    order: &'a InputOrder<R>,
    n: usize,
}

/// The two launches of a convolution plan (complex, or real through rfft), which its forward
/// and its backward ([`correlations`]) are made of.
pub(super) trait ConvLaunches<R: CubeRuntime> {
    /// The FFT size N.
    fn fft_size(&self) -> usize;

    /// Entries per part of one row's spectrum (N, or N/2 + 1 through rfft).
    fn bins(&self) -> usize;

    /// `spectrum[r] = s · (transform of src[r])` for `rows` rows of `len` samples each,
    /// zero-padded to N, in the layout [`Self::convolve`] reads; `spectrum` `[2, rows, bins]`,
    /// `src` contiguous.
    fn spectra<F: FloatElement>(&self, src: CubeTensor<R>, rows_len: (usize, usize), s: f64, spectrum: &CubeTensor<R>);

    /// `output[r] = x[r] ∗ filter[r mod filters]` (or the correlation where the plan
    /// correlates) through the spectra [`Self::spectra`] wrote for `filters` rows, its first
    /// `out_len` samples plus `bias[r mod filters]` where the plan adds one; `x` contiguous.
    fn convolve<F: FloatElement>(
        &self,
        x: CubeTensor<R>,
        rows: ConvRows,
        spectrum_bias: (CubeTensor<R>, CubeTensor<R>),
        output: &CubeTensor<R>,
    );
}

/// The gradients of a convolution without its bias (whose gradient is the output gradient's
/// sum) from the output's gradient `grad` `[batch, channels, out_len]`, through `plan` (which
/// correlates): the signal's `[batch, channels, L]` where `want.0`, and the taps' per batch item
/// `[batch, channels, K]` (the caller sums over the batch) where `want.1`. `taps_spectrum` is
/// the forward's.
///
/// Both are correlations, the convolution's adjoint: `∂x[m] = Σₙ g[n] h[n − m]` and
/// `∂h[k] = Σₙ g[n] x[n − k]`. With N ≥ L + K − 1 (or a circular convolution) no sample wraps,
/// so each is the forward's convolution with the filter's spectrum conjugated, cropped: the
/// gradient by the taps' spectra for `∂x`, by the signal's spectra (a filter per row) for `∂h`.
/// That is the adjoint through the DFT, which the forward computes when its butterfly is the
/// DFT: exact for the exact FFT, within a trained checkpoint's own error for one.
pub(super) fn correlations<R: CubeRuntime, F: FloatElement, P: ConvLaunches<R>>(
    plan: &P,
    grad: CubeTensor<R>,
    (x, weight): (CubeTensor<R>, CubeTensor<R>),
    taps_spectrum: CubeTensor<R>,
    want: (bool, bool),
) -> (Option<CubeTensor<R>>, Option<CubeTensor<R>>) {
    let dims = x.meta.shape().to_vec();
    let (batch, channels, length) = (dims[0], dims[1], dims[2]);
    let taps = weight.meta.shape()[1];
    let out_len = grad.meta.shape()[2];
    let grad = into_contiguous(grad);
    let rows = batch * channels;
    // The forward's scale of the taps' spectra.
    let scale = (plan.fft_size() as f64).sqrt();
    let grad_x = want.0.then(|| {
        // The bias slot is not read (no bias in the configuration).
        let [grad_x] = empties::<R, F, 1>(&grad, [&[batch, channels, length]]);
        let conv = ConvRows { rows, len: out_len, out_len: length, filters: channels };
        plan.convolve::<F>(grad.clone(), conv, (taps_spectrum, weight), &grad_x);
        grad_x
    });
    let grad_h = want.1.then(|| {
        let x = into_contiguous(x);
        let [spectrum, grad_h] = empties::<R, F, 2>(&grad, [&[2, rows, plan.bins()], &[batch, channels, taps]]);
        plan.spectra::<F>(x.clone(), (rows, length), scale, &spectrum);
        let conv = ConvRows { rows, len: out_len, out_len: taps, filters: rows };
        plan.convolve::<F>(grad.clone(), conv, (spectrum, x), &grad_h);
        grad_h
    });
    (grad_x, grad_h)
}

impl<R: CubeRuntime> ConvLaunches<R> for ConvPlan<'_, R> {
    fn fft_size(&self) -> usize {
        self.n
    }

    fn bins(&self) -> usize {
        self.n
    }

    /// The transform is the butterfly's, permuted by the input order and laid out in the
    /// convolution kernel's register order.
    fn spectra<F: FloatElement>(
        &self,
        src: CubeTensor<R>,
        (rows, len): (usize, usize),
        s: f64,
        spectrum: &CubeTensor<R>,
    ) {
        // The spectra take neither a bias nor the correlation: one compiled variant for all.
        let cfg = ConvConfig { bias: false, correlate: false, ..self.cfg };
        // SAFETY: a cube per row of N / 2^e threads holding 2^e elements each, which cover the
        // row exactly (shared-memory slots below N: the swizzle permutes the lowest five bits);
        // reads masked by `len`, twiddle reads within the relaid table (log2 N · N/2 blocks of two
        // quads), order-table reads within its 2N words, spectrum writes within rows · N per
        // part; cubes past the last row leave before touching anything.
        unsafe {
            conv_taps_kernel::launch_unchecked::<F, R>(
                &src.client.clone(),
                grid(rows),
                CubeDim::new_1d(cfg.radix.threads() as u32),
                src.into_array_arg(),
                self.order.table.clone().into_array_arg(),
                self.tables.clone().into_array_arg(),
                spectrum.clone().into_array_arg(),
                TapsLayoutLaunch::new(rows as u32, len as u32, (rows * self.n) as u32),
                InputScalar::new(s, F::dtype()),
                cfg,
            );
        }
    }

    fn convolve<F: FloatElement>(
        &self,
        x: CubeTensor<R>,
        rows: ConvRows,
        (spectrum, bias): (CubeTensor<R>, CubeTensor<R>),
        output: &CubeTensor<R>,
    ) {
        let layout = RowLayoutLaunch::new(
            rows.rows as u32,
            rows.filters as u32,
            rows.len as u32,
            rows.out_len as u32,
            (rows.filters * self.n) as u32,
            0u32,
        );
        // SAFETY: as in `spectra`, a cube per row; reads of the row masked by `len`, spectrum
        // reads within filters · N per part, bias reads (where the configuration has one) within
        // `filters`, output writes masked by `out_len`.
        unsafe {
            conv_kernel::launch_unchecked::<F, R>(
                &x.client.clone(),
                grid(rows.rows),
                CubeDim::new_1d(self.cfg.radix.threads() as u32),
                x.into_array_arg(),
                FilterLaunch::new(spectrum.into_array_arg(), bias.into_array_arg()),
                self.order.table.clone().into_array_arg(),
                self.tables.clone().into_array_arg(),
                output.clone().into_array_arg(),
                layout,
                self.cfg,
            );
        }
    }
}

/// The fused FFT convolution: `x` `[batch, channels, L]`, `weight` `[channels, K]`, `bias`
/// `[channels]`, twiddles `[log2 n, n/2, 2, 2]` → `[batch, channels, out_len]`. The caller checks
/// [`conv_supported`] and the shapes (`L, K, out_len ≤ n`). Returns, beside the output, what
/// its backward ([`fft_conv_backward`]) reuses.
pub(crate) fn fft_conv<R: CubeRuntime, F: FloatElement>(
    x: CubeTensor<R>,
    weight: CubeTensor<R>,
    bias: Option<CubeTensor<R>>,
    tw: (CubeTensor<R>, CubeTensor<R>),
    order: &InputOrder<R>,
    (n, out_len): (usize, usize),
) -> (CubeTensor<R>, ConvKept<R>) {
    let limits = DeviceLimits::of(&x.client);
    let cfg = ConvConfig::complex(n, core::mem::size_of::<F>(), &limits, order.order, bias.is_some())
        .expect("the caller checks conv_supported");
    // The twiddles relaid for the register-resident stages (one small launch; any strides).
    let plan = ConvPlan { cfg, tables: radix_twiddles::<R, F>((&tw.0, &tw.1), cfg.radix), order, n };
    let (output, taps_spectrum) = convolution::<R, F, _>(&plan, x, weight, bias, out_len);
    (output, ConvKept { cfg: plan.cfg, tables: plan.tables, taps_spectrum })
}

/// A convolution's forward through `plan`: the taps' spectra (scaled by √N), then the
/// convolution of every row with its channel's; the output `[batch, channels, out_len]` and the
/// spectra.
pub(super) fn convolution<R: CubeRuntime, F: FloatElement, P: ConvLaunches<R>>(
    plan: &P,
    x: CubeTensor<R>,
    weight: CubeTensor<R>,
    bias: Option<CubeTensor<R>>,
    out_len: usize,
) -> (CubeTensor<R>, CubeTensor<R>) {
    let dims = x.meta.shape().to_vec();
    let (batch, channels, length) = (dims[0], dims[1], dims[2]);
    let taps = weight.meta.shape()[1];
    let (x, weight) = (into_contiguous(x), into_contiguous(weight));
    // One allocation for both (each is a request to the device thread).
    let [spectrum, output] = empties::<R, F, 2>(&x, [&[2, channels, plan.bins()], &[batch, channels, out_len]]);
    // Without a bias the kernel reads none: the taps stand in for it.
    let bias = bias.map(into_contiguous).unwrap_or_else(|| weight.clone());
    plan.spectra::<F>(weight, (channels, taps), (plan.fft_size() as f64).sqrt(), &spectrum);
    let rows = ConvRows { rows: batch * channels, len: length, out_len, filters: channels };
    plan.convolve::<F>(x, rows, (spectrum.clone(), bias), &output);
    (output, spectrum)
}

/// The gradients of [`fft_conv`] ([`correlations`]) from the output's gradient `grad`; `kept`
/// is what the forward left.
pub(crate) fn fft_conv_backward<R: CubeRuntime, F: FloatElement>(
    grad: CubeTensor<R>,
    x_weight: (CubeTensor<R>, CubeTensor<R>),
    kept: ConvKept<R>,
    order: &InputOrder<R>,
    n: usize,
    want: (bool, bool),
) -> (Option<CubeTensor<R>>, Option<CubeTensor<R>>) {
    let cfg = ConvConfig { bias: false, correlate: true, ..kept.cfg };
    let plan = ConvPlan { cfg, tables: kept.tables, order, n };
    correlations::<R, F, _>(&plan, grad, x_weight, kept.taps_spectrum, want)
}
