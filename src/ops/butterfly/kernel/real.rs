//! The fused FFT convolution of real signals through a butterfly of half the FFT size (CubeCL
//! backends without autodiff): the fused twin of `conv::real_composed` (rfft, the product of the
//! N/2 + 1 bins, irfft), in the same three launches as the complex kernels of [`super::conv`].
//!
//! A cube holds one row of M = N/2 complex values: the signal's samples packed in pairs,
//! `z[m] = x[2m] + i·x[2m+1]`, each pair read as it is loaded. After the butterfly `Z = G z` the
//! split, the product and the merge (`rfft.rs`) all pair bin `k` with bin `M − k`, so one thread
//! takes both of a pair from shared memory and leaves both results in their place: the spectrum
//! never leaves the chip, and no launch runs between the two transforms.
//!
//! With `W = exp(−2πi/N)`, `a = Z[k]`, `r = Z[(M − k) mod M]`, `E = (a + conj r)/2`,
//! `O = (a − conj r)/2i` and `P = W^k O`, the unitary transform of size N is
//! `X[k] = (E + P)/√2` and `X[M − k] = conj(E − P)/√2`. From the product's bins `Y[k]` and
//! `Y[M − k]`, the merge is `Z'[k] = E' + i·O'` and `Z'[M − k] = conj E' + i·conj O'`, with
//! `E' = (Y[k] + conj Y[M − k])/2` and `O' = W^−k (Y[k] − conj Y[M − k])/2`. The row then goes
//! through the butterfly again as `conj(√2·Z')` (`G⁻¹ z = conj(G conj z)` for a unitary G), and
//! its samples are the real and negated imaginary parts of the result, in pairs.
//!
//! The twiddles `W^k`, k = 0 … M/2, come from a table computed in f64 on the host, as the
//! spectral kernels' do: `sin`/`cos` in f32 on a GPU need not be accurate to the last bits. So
//! do the constant factors 1/(2√2) and 1/√2, which a literal in the kernel would hold only to
//! f32 precision.

use burn_cubecl::{kernel::into_contiguous, tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::{prelude::*, CubeDim};

use super::conv::{
    convolution, correlations, gather_permuted, store_result, transform, ConvConfig, ConvKept, ConvLaunches, ConvRows,
};
use super::radix::radix_twiddles;
use super::InputOrder;
use crate::ops::cubecl::{cached_table, empties, grid};
use crate::ops::onchip::blocks::SplitInputLaunch;
use crate::ops::onchip::{
    first_group_from_shared, input_slot, swizzled, Order, Quad, RadixConfig, SharedSplit, SplitArray, SplitInput,
};
use crate::ops::tuning::{DeviceLimits, ELEMENTWISE_UNITS};

/// Whether the fused rfft and the fused convolution of real signals run for the FFT size `n`
/// (a butterfly of `n / 2`) on `device` in float type `F`.
pub fn real_supported<R: CubeRuntime, F: FloatElement>(n: usize, device: &R::Device) -> bool {
    let limits = DeviceLimits::of(&R::client(device));
    n >= 4 && ConvConfig::new(n / 2, core::mem::size_of::<F>(), &limits, Order::Natural, false).is_some()
}

/// The split step's table for size `n` on `like`'s device, in `F`: uploaded once per device and
/// size.
fn split_table<R: CubeRuntime, F: FloatElement>(n: usize, like: &CubeTensor<R>) -> CubeTensor<R> {
    cached_table::<R, F>("rfft split", n, like, || split_twiddles(n))
}

/// The fused rfft: real rows `x` `[rows, n]` through the butterfly of `n / 2` (twiddles
/// `[log2 n − 1, n/4, 2, 2]`), packed, transformed and split → `[2, rows, n/2 + 1]` (re, then
/// im): the unitary rfft of size n when the butterfly is the unitary DFT of n/2. The caller
/// checks [`real_supported`] and the shapes.
pub(crate) fn rfft<R: CubeRuntime, F: FloatElement>(
    x: CubeTensor<R>,
    tw: (CubeTensor<R>, CubeTensor<R>),
    order: &InputOrder<R>,
) -> CubeTensor<R> {
    let dims = x.meta.shape().to_vec();
    let (rows, n) = (dims[0], dims[1]);
    let x = into_contiguous(x);
    let plan = RealPlan::filling::<F>(&x, tw, order, n);
    let [spectrum] = empties::<R, F, 1>(&x, [&[2, rows, n / 2 + 1]]);
    plan.spectra::<F>(x, (rows, n), 1.0, &spectrum);
    spectrum
}

/// `W^k = exp(−2πi k / n)` for k = 0 … n/4, computed in f64: the real parts, then the
/// imaginary, then the split step's factor 1/(2√2) and the merge step's 1/√2.
pub(crate) fn split_twiddles(n: usize) -> Vec<f64> {
    let count = n / 4 + 1;
    let angle = |k: usize| -std::f64::consts::TAU * k as f64 / n as f64;
    let scales = [0.5 * std::f64::consts::FRAC_1_SQRT_2, std::f64::consts::FRAC_1_SQRT_2];
    (0..count).map(|k| angle(k).cos()).chain((0..count).map(|k| angle(k).sin())).chain(scales).collect()
}

/// The rows a cube loads: from row `first` on, as many as the cube holds (`2^log_rows`), of
/// `len` samples each; rows from `rows` on are past the end (zeros).
#[derive(CubeType)]
struct RowSpan {
    first: usize,
    len: usize,
    rows: usize,
}

/// Loads the cube's real rows (`span`), each zero-padded to N = 2M, packed in pairs
/// (`z[m] = x[2m] + i·x[2m+1]`) and permuted, into the first group's registers.
#[cube]
fn load_packed<F: Float>(
    values: &Array<F>,
    span: &RowSpan,
    order: &Array<u32>,
    shared: &mut SharedSplit<F>,
    regs: &mut SplitArray<F>,
    #[comptime] cfg: RadixConfig,
) {
    let log_m = comptime![cfg.log_n];
    let threads = comptime![cfg.threads()];
    let t = UNIT_POS_X as usize;
    #[unroll]
    for q in 0..comptime![1usize << cfg.log_elems] {
        // Cube index i = r · M + j: element j of the cube's row r.
        let i = t + comptime![q * threads];
        let (r, j) = (i >> log_m, i & comptime![(1usize << log_m) - 1]);
        let row = span.first + r;
        let start = row * span.len;
        let (mut re, mut im) = (F::new(0.0), F::new(0.0));
        if row < span.rows && 2 * j < span.len {
            re = values[start + 2 * j];
        }
        if row < span.rows && 2 * j + 1 < span.len {
            im = values[start + 2 * j + 1];
        }
        let slot = input_slot(r << log_m, j, order, cfg);
        shared.re[slot] = re;
        shared.im[slot] = im;
    }
    first_group_from_shared(shared, regs, cfg);
}

/// The split step for the pair of bins `k` and `M − k` from `a = Z[k]` and `r = Z[(M − k) mod M]`
/// with `W^k`: `(X[k], X[M − k])` as (re, im, re, im), times `scale` (`1/(2√2)` for the unitary
/// transform: the halves of E and O, and its 1/√2).
#[cube]
fn split_pair<F: Float>(ar: F, ai: F, rr: F, ri: F, wr: F, wi: F, scale: F) -> (F, F, F, F) {
    // 2E = a + conj r; 2O = (a − conj r)/i; 2P = W^k · 2O.
    let (er, ei) = (ar + rr, ai - ri);
    let (or, oi) = (ai + ri, rr - ar);
    let (pr, pi) = (wr * or - wi * oi, wr * oi + wi * or);
    ((er + pr) * scale, (ei + pi) * scale, (er - pr) * scale, (pi - ei) * scale)
}

/// One cube per `2^log_rows` rows: `spectrum[c] = s · rfft(x[c] zero-padded to N)`, the M + 1
/// bins at `c · (M + 1) + k` (re, then im from `plane` on), with `scale = s / (2√2)`: the
/// unitary rfft (`Butterfly::rfft`) for s = 1, the convolution's taps for s = √N.
#[cube(launch_unchecked)]
fn rfft_rows_kernel<F: Float>(
    x: &Array<F>,
    order: &Array<u32>,
    twiddles: &RealTwiddles<F>,
    spectrum: &mut Array<F>,
    layout: &RfftLayout,
    scale: InputScalar,
    #[comptime] cfg: ConvConfig,
) {
    let rc = comptime![cfg.radix];
    let m = comptime![1usize << rc.log_n];
    let cube_rows = comptime![1usize << rc.log_rows];
    let cube = comptime![cube_rows * m];
    let threads = comptime![rc.threads()];
    let quarter = comptime![m / 2 + 1];
    let scale: F = scale.get::<F>();
    let mut shared = SharedSplit::<F> { re: SharedMemory::<F>::new(cube), im: SharedMemory::<F>::new(cube) };
    let mut regs = SplitArray::<F> {
        re: Array::<F>::new(comptime![1usize << rc.log_elems]),
        im: Array::<F>::new(comptime![1usize << rc.log_elems]),
    };
    let first = CUBE_POS * cube_rows;
    let rows = layout.rows as usize;
    // The grid may hold a few cubes more than needed (`grid`); a whole cube leaves at once.
    if first >= rows {
        terminate!();
    }
    let t = UNIT_POS_X as usize;
    let plane = layout.plane as usize;
    let span = RowSpan { first, len: layout.len as usize, rows };
    load_packed(x, &span, order, &mut shared, &mut regs, rc);
    transform(&mut shared, &mut regs, &twiddles.stages, 0usize, rc);
    store_result(&mut shared, &mut regs, rc);
    sync_cube();
    // Each pair (k, M − k) of each of the cube's rows, k ≤ M/2.
    #[unroll]
    for q in 0..comptime![(cube_rows * quarter).div_ceil(threads)] {
        let e = t + comptime![q * threads];
        let (r, k) = (e / quarter, e % quarter);
        let row = first + r;
        if e < comptime![cube_rows * quarter] && row < rows {
            let base = r * m;
            let pz = (m - k) % m;
            let (ka, kz) = (swizzled(base + k, rc), swizzled(base + pz, rc));
            let (xr, xi, yr, yi) = split_pair::<F>(
                shared.re[ka],
                shared.im[ka],
                shared.re[kz],
                shared.im[kz],
                twiddles.split[k],
                twiddles.split[quarter + k],
                scale,
            );
            let out = row * (m + 1);
            spectrum[out + k] = xr;
            spectrum[plane + out + k] = xi;
            if k != m - k {
                spectrum[out + m - k] = yr;
                spectrum[plane + out + m - k] = yi;
            }
        }
    }
}

/// Where [`rfft_rows_kernel`] reads and writes: `rows` rows of `len` samples, the spectrum's
/// imaginary parts from `plane` on.
#[derive(CubeLaunch, CubeType)]
struct RfftLayout {
    rows: u32,
    len: u32,
    plane: u32,
}

/// The twiddles both kernels read: the butterfly's, relaid for the register-resident stages
/// (`radix_twiddles`), and the split step's `W^k` ([`split_twiddles`]).
#[derive(CubeLaunch, CubeType)]
struct RealTwiddles<F: Float> {
    stages: Array<Quad<F>>,
    split: Array<F>,
}

/// What [`conv_real_kernel`] multiplies by and adds: each channel's M + 1 bins as
/// [`rfft_rows_kernel`] wrote them, and its bias (read only when the configuration has one).
#[derive(CubeLaunch, CubeType)]
struct RealFilter<F: Float> {
    spectrum: Array<F>,
    bias: Array<F>,
}

/// [`conv_real_kernel`]'s rows: `rows` in all, `channels` per batch item, `length` samples in,
/// `out_len` out, the spectrum's imaginary plane at `plane`, and `reload` (zero, which the
/// compiler cannot see) as the second transform's twiddle base.
#[derive(CubeLaunch, CubeType)]
struct RealRowLayout {
    rows: u32,
    channels: u32,
    length: u32,
    out_len: u32,
    plane: u32,
    reload: u32,
}

/// One cube per row `(b, c)`: `X = rfft(x)`, `Y = X ⊙ spectrum[c]`, `y = irfft(Y)`, the first
/// `out_len` samples plus `bias[c]`.
#[cube(launch_unchecked)]
fn conv_real_kernel<F: Float>(
    x: &Array<F>,
    filter: &RealFilter<F>,
    order: &Array<u32>,
    twiddles: &RealTwiddles<F>,
    output: &mut Array<F>,
    layout: &RealRowLayout,
    #[comptime] cfg: ConvConfig,
) {
    let rc = comptime![cfg.radix];
    let m = comptime![1usize << rc.log_n];
    let elems = comptime![1usize << rc.log_elems];
    let threads = comptime![rc.threads()];
    let quarter = comptime![m / 2 + 1];
    let row = CUBE_POS;
    if row >= layout.rows as usize {
        terminate!();
    }
    let mut shared = SharedSplit::<F> { re: SharedMemory::<F>::new(m), im: SharedMemory::<F>::new(m) };
    let mut regs = SplitArray::<F> { re: Array::<F>::new(elems), im: Array::<F>::new(elems) };
    let c = row % layout.channels as usize;
    let t = UNIT_POS_X as usize;
    let len = layout.length as usize;
    let plane = layout.plane as usize;
    let span = RowSpan { first: row, len, rows: layout.rows as usize };
    load_packed(x, &span, order, &mut shared, &mut regs, rc);
    transform(&mut shared, &mut regs, &twiddles.stages, 0usize, rc);
    store_result(&mut shared, &mut regs, rc);
    sync_cube();
    // Each pair of bins: split, product, merge, left in place as conj(√2·Z').
    let h = c * (m + 1);
    let (unitary, half) = (twiddles.split[2 * quarter], twiddles.split[2 * quarter + 1]);
    #[unroll]
    for q in 0..comptime![elems / 2 + 1] {
        let k = t + comptime![q * threads];
        if k < quarter {
            let pz = (m - k) % m;
            let (ka, kz) = (swizzled(k, rc), swizzled(pz, rc));
            let (wr, wi) = (twiddles.split[k], twiddles.split[quarter + k]);
            let (xr, xi, xmr, xmi) =
                split_pair::<F>(shared.re[ka], shared.im[ka], shared.re[kz], shared.im[kz], wr, wi, unitary);
            let (hr, mut hi) = (filter.spectrum[h + k], filter.spectrum[plane + h + k]);
            let (hmr, mut hmi) = (filter.spectrum[h + m - k], filter.spectrum[plane + h + m - k]);
            if comptime![cfg.correlate] {
                // The adjoint: the filter's conjugate (`fft_conv_real_backward`).
                hi = F::new(0.0) - hi;
                hmi = F::new(0.0) - hmi;
            }
            let (ykr, yki) = (xr * hr - xi * hi, xr * hi + xi * hr);
            let (ymr, ymi) = (xmr * hmr - xmi * hmi, xmr * hmi + xmi * hmr);
            // 2E' = Y[k] + conj Y[M − k]; 2D = Y[k] − conj Y[M − k]; 2O' = conj(W^k) · 2D.
            let (er, ei) = (ykr + ymr, yki - ymi);
            let (dr, di) = (ykr - ymr, yki + ymi);
            let (or, oi) = (wr * dr + wi * di, wr * di - wi * dr);
            // conj(√2·Z'[k]) = (2E'r − 2O'i, −(2E'i + 2O'r)) / √2.
            shared.re[ka] = (er - oi) * half;
            shared.im[ka] = F::new(0.0) - (ei + or) * half;
            if pz != k {
                // conj(√2·Z'[M − k]) = (2E'r + 2O'i, 2E'i − 2O'r) / √2.
                shared.re[kz] = (er + oi) * half;
                shared.im[kz] = (ei - or) * half;
            }
        }
    }
    sync_cube();
    gather_permuted(&shared, &mut regs, order, rc);
    // Every thread has gathered before the next transform's exchanges write.
    sync_cube();
    // The same twiddles again, from a base the compiler cannot see is zero (see `conv.rs`).
    transform(&mut shared, &mut regs, &twiddles.stages, layout.reload as usize, rc);
    store_result(&mut shared, &mut regs, rc);
    sync_cube();
    let out = layout.out_len as usize;
    let mut b = F::new(0.0);
    if comptime![cfg.bias] {
        b = filter.bias[c];
    }
    // Samples 2j and 2j + 1 are the real and the negated imaginary part of element j.
    #[unroll]
    for q in 0..elems {
        let j = t + comptime![q * threads];
        let slot = swizzled(j, rc);
        if 2 * j < out {
            output[row * out + 2 * j] = shared.re[slot] + b;
        }
        if 2 * j + 1 < out {
            output[row * out + 2 * j + 1] = b - shared.im[slot];
        }
    }
}

/// What one call's launches share: the configuration, the butterfly's twiddles relaid for the
/// register-resident stages (one small launch), the split table and the input order.
struct RealPlan<'a, R: CubeRuntime> {
    cfg: ConvConfig,
    tables: CubeTensor<R>,
    split: CubeTensor<R>,
    order: &'a InputOrder<R>,
    n: usize,
}

impl<'a, R: CubeRuntime> RealPlan<'a, R> {
    /// The plan for the FFT size `n` (a butterfly of n/2 with twiddles `tw`), adding a bias or
    /// not. The caller checks [`real_supported`].
    fn new<F: FloatElement>(
        like: &CubeTensor<R>,
        (tw_re, tw_im): (CubeTensor<R>, CubeTensor<R>),
        order: &'a InputOrder<R>,
        n: usize,
        bias: bool,
    ) -> Self {
        let limits = DeviceLimits::of(&like.client);
        let cfg = ConvConfig::new(n / 2, core::mem::size_of::<F>(), &limits, order.order, bias)
            .expect("the caller checks real_supported");
        Self::with_config::<F>(like, (tw_re, tw_im), order, n, cfg)
    }

    /// The plan for the bare rfft: as many rows a cube as fill its budget (its rows share no
    /// filter), one row a cube where that mapping does not exist.
    fn filling<F: FloatElement>(
        like: &CubeTensor<R>,
        tw: (CubeTensor<R>, CubeTensor<R>),
        order: &'a InputOrder<R>,
        n: usize,
    ) -> Self {
        let limits = DeviceLimits::of(&like.client);
        let (m, elem) = (n / 2, core::mem::size_of::<F>());
        let cfg = ConvConfig::filling(m, elem, &limits, order.order)
            .or_else(|| ConvConfig::new(m, elem, &limits, order.order, false))
            .expect("the caller checks real_supported");
        Self::with_config::<F>(like, tw, order, n, cfg)
    }

    fn with_config<F: FloatElement>(
        like: &CubeTensor<R>,
        (tw_re, tw_im): (CubeTensor<R>, CubeTensor<R>),
        order: &'a InputOrder<R>,
        n: usize,
        cfg: ConvConfig,
    ) -> Self {
        let tables = radix_twiddles::<R, F>((&tw_re, &tw_im), cfg.radix);
        RealPlan { cfg, tables, split: split_table::<R, F>(n, like), order, n }
    }
}

impl<R: CubeRuntime> ConvLaunches<R> for RealPlan<'_, R> {
    fn fft_size(&self) -> usize {
        self.n
    }

    fn bins(&self) -> usize {
        self.n / 2 + 1
    }

    /// The transform is `rfft` (the M + 1 bins, re then im).
    fn spectra<F: FloatElement>(
        &self,
        src: CubeTensor<R>,
        (rows, len): (usize, usize),
        s: f64,
        spectrum: &CubeTensor<R>,
    ) {
        let plane = (rows * (self.n / 2 + 1)) as u32;
        // The spectra take neither a bias nor the correlation: one compiled variant for all.
        let cfg = ConvConfig { bias: false, correlate: false, ..self.cfg };
        // SAFETY: a cube per 2^r rows (r = `log_rows`, 0 in the convolution's plans) of
        // 2^r · M / 2^e threads holding 2^e elements each, which cover the cube's rows exactly
        // (shared-memory slots below 2^r · M: the swizzle permutes the lowest five bits); reads
        // masked by the row count and by `len`, twiddle reads within the relaid table,
        // split-table reads within its 2 (M/2 + 1) + 2 entries, order-table reads within its 2M
        // words, spectrum writes masked by the row count, within rows · (M + 1) per part; cubes
        // past the last row leave first.
        unsafe {
            rfft_rows_kernel::launch_unchecked::<F, R>(
                &src.client.clone(),
                grid(rows.div_ceil(cfg.radix.cube_rows())),
                CubeDim::new_1d(cfg.radix.threads() as u32),
                src.into_array_arg(),
                self.order.table.clone().into_array_arg(),
                RealTwiddlesLaunch::new(self.tables.clone().into_array_arg(), self.split.clone().into_array_arg()),
                spectrum.clone().into_array_arg(),
                RfftLayoutLaunch::new(rows as u32, len as u32, plane),
                InputScalar::new(s * 0.5 * std::f64::consts::FRAC_1_SQRT_2, F::dtype()),
                cfg,
            );
        }
    }

    /// Through `irfft(rfft(x[r]) ⊙ spectrum[r mod filters])`.
    fn convolve<F: FloatElement>(
        &self,
        x: CubeTensor<R>,
        rows: ConvRows,
        (spectrum, bias): (CubeTensor<R>, CubeTensor<R>),
        output: &CubeTensor<R>,
    ) {
        let plane = (rows.filters * (self.n / 2 + 1)) as u32;
        let layout = RealRowLayoutLaunch::new(
            rows.rows as u32,
            rows.filters as u32,
            rows.len as u32,
            rows.out_len as u32,
            plane,
            0u32,
        );
        // SAFETY: as in `spectra`, a cube per row; spectrum reads within filters · (M + 1) per
        // part, bias reads (where the configuration has one) within `filters`, output writes
        // masked by `out_len`.
        unsafe {
            conv_real_kernel::launch_unchecked::<F, R>(
                &x.client.clone(),
                grid(rows.rows),
                CubeDim::new_1d(self.cfg.radix.threads() as u32),
                x.into_array_arg(),
                RealFilterLaunch::new(spectrum.into_array_arg(), bias.into_array_arg()),
                self.order.table.clone().into_array_arg(),
                RealTwiddlesLaunch::new(self.tables.clone().into_array_arg(), self.split.clone().into_array_arg()),
                output.clone().into_array_arg(),
                layout,
                self.cfg,
            );
        }
    }
}

/// The fused FFT convolution of real signals: `x` `[batch, channels, L]`, `weight`
/// `[channels, K]`, `bias` `[channels]`, twiddles `[log2 n − 1, n/4, 2, 2]` (a butterfly of
/// n/2), `(n, out_len)` →
/// `[batch, channels, out_len]`. The caller checks [`real_supported`] and the shapes
/// (`L, K, out_len ≤ n`).
/// Returns, beside the output, what its backward ([`fft_conv_real_backward`]) reuses.
pub(crate) fn fft_conv_real<R: CubeRuntime, F: FloatElement>(
    x: CubeTensor<R>,
    weight: CubeTensor<R>,
    bias: Option<CubeTensor<R>>,
    tw: (CubeTensor<R>, CubeTensor<R>),
    order: &InputOrder<R>,
    (n, out_len): (usize, usize),
) -> (CubeTensor<R>, ConvKept<R>) {
    let plan = RealPlan::new::<F>(&x, tw, order, n, bias.is_some());
    let (output, taps_spectrum) = convolution::<R, F, _>(&plan, x, weight, bias, out_len);
    (output, ConvKept { cfg: plan.cfg, tables: plan.tables, taps_spectrum })
}

/// The gradients of [`fft_conv_real`] ([`super::conv::correlations`], through the rfft
/// kernels with the filters conjugated) from the output's gradient `grad`; `kept` is what the
/// forward left. The rfft's split and merge steps assume its
/// butterfly is the DFT of N/2, as the adjoint does.
pub(crate) fn fft_conv_real_backward<R: CubeRuntime, F: FloatElement>(
    grad: CubeTensor<R>,
    x_weight: (CubeTensor<R>, CubeTensor<R>),
    kept: ConvKept<R>,
    order: &InputOrder<R>,
    n: usize,
    want: (bool, bool),
) -> (Option<CubeTensor<R>>, Option<CubeTensor<R>>) {
    let cfg = ConvConfig { bias: false, correlate: true, ..kept.cfg };
    let plan = RealPlan { cfg, tables: kept.tables, split: split_table::<R, F>(n, &grad), order, n };
    correlations::<R, F, _>(&plan, grad, x_weight, kept.taps_spectrum, want)
}

/// The split and merge steps of the rfft (`rfft.rs`) and their adjoints as maps of rows: each
/// pairs entry `k` with entry `M − k` (mod M on the side of M entries), so one thread per pair
/// computes both outputs from both inputs. With `W^k = exp(−2πi k/2M)` and `u = −i·W^k`:
/// - `Split`, `Z [M] → X [M + 1]`: `X[k] = c((1 + u)Z[k] + (1 − u) conj Z[M−k])`,
///   `X[M−k] = c((1 − ū) conj Z[k] + (1 + ū) Z[M−k])`, `c = 1/(2√2)`;
/// - `Merge`, `X [M + 1] → √2·Z' [M]` (bins 0 and M taken real):
///   `√2·Z'[k] = s((1 + ū)X[k] + (1 − ū) conj X[M−k])`,
///   `√2·Z'[M−k] = s((1 − u) conj X[k] + (1 + u) X[M−k])`, `s = 1/√2`;
/// - `SplitAdjoint` and `MergeAdjoint`: their transposes as real-linear maps (for `y = αz` the
///   gradient of z is `ᾱ·g`, for `y = α·conj z` it is `α·conj g`), a self-paired entry (k = 0,
///   or k = M/2) summing what both of its uses contribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum PairMap {
    Split,
    SplitAdjoint,
    Merge,
    MergeAdjoint,
}

impl PairMap {
    /// Entries per row in and out, for the half size `m`.
    pub fn lengths(self, m: usize) -> (usize, usize) {
        match self {
            PairMap::Split | PairMap::MergeAdjoint => (m, m + 1),
            PairMap::SplitAdjoint | PairMap::Merge => (m + 1, m),
        }
    }
}

/// `p·z + q·w` for complex `p, z, q, w` as (re, im) parts.
#[cube]
fn lin<F: Float>(pr: F, pi: F, zr: F, zi: F, qr: F, qi: F, wr: F, wi: F) -> (F, F) {
    (pr * zr - pi * zi + qr * wr - qi * wi, pr * zi + pi * zr + qr * wi + qi * wr)
}

/// One thread per (row, pair `k ≤ M/2`): [`PairMap`] `map` of `input` (re, im from `im_offset`)
/// into `output` `[2, rows, out_len]`.
#[cube(launch_unchecked)]
fn pair_map_kernel<F: Float>(
    input: &SplitInput<F>,
    split: &Array<F>,
    output: &mut Array<F>,
    rows: u32,
    #[comptime] m: usize,
    #[comptime] map: PairMap,
) {
    let quarter = comptime![m / 2 + 1];
    let (in_len, out_len) = comptime![map.lengths(m)];
    let pos = CUBE_POS * comptime![ELEMENTWISE_UNITS] + UNIT_POS_X as usize;
    if pos >= rows as usize * quarter {
        terminate!();
    }
    let row = pos / quarter;
    let k = pos % quarter;
    let pair = m - k;
    let (src, dst) = (row * in_len, row * out_len);
    let plane = rows as usize * out_len;
    let offset = input.im_offset as usize;
    let (wr, wi) = (split[k], split[quarter + k]);
    let one = F::new(1.0);
    // u = −i·W^k and its conjugate.
    let (ur, ui) = (wi, F::new(0.0) - wr);
    let (cr, ci) = (ur, wr);
    // The first input of the pair, and the second (M − k: mod M on the side of M entries).
    let mut second = pair;
    if comptime![in_len == m] {
        second = pair % m;
    }
    let (ar, mut ai) = (input.re[src + k], input.im[offset + src + k]);
    let (br, mut bi) = (input.re[src + second], input.im[offset + src + second]);
    let mut out2 = pair;
    if comptime![out_len == m] {
        out2 = pair % m;
    }
    if comptime![map == PairMap::Split] {
        let c = split[2 * quarter];
        let (xr, xi) = lin::<F>(one + ur, ui, ar, ai, one - ur, F::new(0.0) - ui, br, F::new(0.0) - bi);
        output[dst + k] = xr * c;
        output[plane + dst + k] = xi * c;
        if k != pair {
            let (yr, yi) = lin::<F>(one - cr, F::new(0.0) - ci, ar, F::new(0.0) - ai, one + cr, ci, br, bi);
            output[dst + out2] = yr * c;
            output[plane + dst + out2] = yi * c;
        }
    } else if comptime![map == PairMap::SplitAdjoint] {
        let c = split[2 * quarter];
        let (gr, gi) = lin::<F>(one + cr, ci, ar, ai, one - cr, F::new(0.0) - ci, br, F::new(0.0) - bi);
        let (hr, hi) = lin::<F>(one - ur, F::new(0.0) - ui, ar, F::new(0.0) - ai, one + ur, ui, br, bi);
        if k == 0 {
            output[dst] = (gr + hr) * c;
            output[plane + dst] = (gi + hi) * c;
        } else {
            output[dst + k] = gr * c;
            output[plane + dst + k] = gi * c;
            if k != pair {
                output[dst + out2] = hr * c;
                output[plane + dst + out2] = hi * c;
            }
        }
    } else if comptime![map == PairMap::Merge] {
        let s = split[2 * quarter + 1];
        if k == 0 {
            // numpy's irfft drops the imaginary parts of bins 0 and M.
            ai = F::new(0.0);
            bi = F::new(0.0);
        }
        let (zr, zi) = lin::<F>(one + cr, ci, ar, ai, one - cr, F::new(0.0) - ci, br, F::new(0.0) - bi);
        output[dst + k] = zr * s;
        output[plane + dst + k] = zi * s;
        if k != 0 && k != pair {
            let (yr, yi) = lin::<F>(one - ur, F::new(0.0) - ui, ar, F::new(0.0) - ai, one + ur, ui, br, bi);
            output[dst + out2] = yr * s;
            output[plane + dst + out2] = yi * s;
        }
    } else {
        let s = split[2 * quarter + 1];
        if k == 0 {
            // Only √2·Z'[0] used bins 0 and M, through their real parts.
            output[dst] = ((one + ur) * ar - ui * ai) * s;
            output[plane + dst] = F::new(0.0);
            output[dst + m] = ((one - ur) * ar + ui * ai) * s;
            output[plane + dst + m] = F::new(0.0);
        } else {
            let (gr, gi) = lin::<F>(one + ur, ui, ar, ai, one - ur, F::new(0.0) - ui, br, F::new(0.0) - bi);
            output[dst + k] = gr * s;
            output[plane + dst + k] = gi * s;
            if k != pair {
                let (hr, hi) = lin::<F>(one - cr, F::new(0.0) - ci, ar, F::new(0.0) - ai, one + cr, ci, br, bi);
                output[dst + out2] = hr * s;
                output[plane + dst + out2] = hi * s;
            }
        }
    }
}

/// [`PairMap`] `map` of rows `(re, im)` `[rows, len]` for the half size `m` → `[2, rows, out]`
/// (re, then im). The caller checks the lengths (`m` a power of two ≥ 2).
pub(crate) fn pair_map<R: CubeRuntime, F: FloatElement>(
    re: CubeTensor<R>,
    im: CubeTensor<R>,
    m: usize,
    map: PairMap,
) -> CubeTensor<R> {
    let rows = re.meta.shape()[0];
    let (_, out_len) = map.lengths(m);
    let (re, im) = (into_contiguous(re), into_contiguous(im));
    let split = split_table::<R, F>(2 * m, &re);
    let [output] = empties::<R, F, 1>(&re, [&[2, rows, out_len]]);
    let pairs = rows * (m / 2 + 1);
    let client = re.client.clone();
    // SAFETY: one thread per (row, k ≤ M/2), threads past the last leave first; reads at k and
    // M − k (mod M on a side of M entries) within the row, table reads within its
    // 2 (M/2 + 1) + 2 entries, writes within `[2, rows, out_len]`.
    unsafe {
        pair_map_kernel::launch_unchecked::<F, R>(
            &client,
            grid(pairs.div_ceil(ELEMENTWISE_UNITS)),
            CubeDim::new_1d(ELEMENTWISE_UNITS as u32),
            SplitInputLaunch::new(re.into_array_arg(), im.into_array_arg(), 0u32),
            split.into_array_arg(),
            output.clone().into_array_arg(),
            rows as u32,
            m,
            map,
        );
    }
    output
}
