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

use burn::tensor::Shape;
use burn_cubecl::{kernel::into_contiguous, tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::{prelude::*, CubeDim};

use super::conv::{gather_permuted, store_result, transform, ConvConfig};
use super::radix::radix_twiddles;
use super::InputOrder;
use crate::ops::cubecl::{empties, grid};
use crate::ops::onchip::blocks::SplitInputLaunch;
use crate::ops::onchip::{
    deposit_thread, move_group, swizzled, Order, Quad, RadixConfig, SharedSplit, SplitArray, SplitInput,
};
use crate::ops::tuning::DeviceLimits;

/// Whether the fused rfft and the fused convolution of real signals run for the FFT size `n`
/// (a butterfly of `n / 2`) on `device` in float type `F`.
pub fn real_supported<R: CubeRuntime, F: FloatElement>(n: usize, device: &R::Device) -> bool {
    let limits = DeviceLimits::of(&R::client(device));
    n >= 4 && ConvConfig::new(n / 2, core::mem::size_of::<F>(), &limits, Order::Natural, false).is_some()
}

/// The split step's table for size `n` on `like`'s device, in `F`: one small upload.
fn split_table<R: CubeRuntime, F: FloatElement>(n: usize, like: &CubeTensor<R>) -> CubeTensor<R> {
    let values: Vec<F> = split_twiddles(n).into_iter().map(F::from_elem).collect();
    CubeTensor::new_contiguous(
        like.client.clone(),
        like.device.clone(),
        Shape::from(vec![values.len()]),
        like.client.create_from_slice(F::as_bytes(&values)),
        F::dtype(),
    )
}

/// The fused rfft: real rows `x` `[rows, n]` through the butterfly of `n / 2` (twiddles
/// `[log2 n − 1, n/4, 2, 2]`), packed, transformed and split → `[2, rows, n/2 + 1]` (re, then
/// im): the unitary rfft of size n when the butterfly is the unitary DFT of n/2. The caller
/// checks [`real_supported`] and the shapes.
pub(crate) fn rfft<R: CubeRuntime, F: FloatElement>(
    x: CubeTensor<R>,
    (tw_re, tw_im): (CubeTensor<R>, CubeTensor<R>),
    order: &InputOrder<R>,
) -> CubeTensor<R> {
    let dims = x.meta.shape().to_vec();
    let (rows, n) = (dims[0], dims[1]);
    let m = n / 2;
    let client = x.client.clone();
    let limits = DeviceLimits::of(&client);
    let cfg = ConvConfig::new(m, core::mem::size_of::<F>(), &limits, order.order, false)
        .expect("the caller checks real_supported");
    let x = into_contiguous(x);
    let split = split_table::<R, F>(n, &x);
    let tables = radix_twiddles::<R, F>((&tw_re, &tw_im), cfg.radix);
    let [spectrum] = empties::<R, F, 1>(&x, [&[2, rows, m + 1]]);
    // SAFETY: as in `fft_conv_real`'s taps launch, with `rows` rows of n samples.
    unsafe {
        rfft_rows_kernel::launch_unchecked::<F, R>(
            &client,
            grid(rows),
            CubeDim::new_1d(cfg.radix.threads() as u32),
            x.into_array_arg(),
            order.table.clone().into_array_arg(),
            RealTwiddlesLaunch::new(tables.into_array_arg(), split.into_array_arg()),
            spectrum.clone().into_array_arg(),
            RfftLayoutLaunch::new(rows as u32, n as u32, (rows * (m + 1)) as u32),
            InputScalar::new(0.5 * std::f64::consts::FRAC_1_SQRT_2, F::dtype()),
            cfg,
        );
    }
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

/// Loads the real row `values[start … start + len]`, zero-padded to N = 2M, packed in pairs
/// (`z[m] = x[2m] + i·x[2m+1]`) and permuted, into the first group's registers.
#[cube]
fn load_packed<F: Float>(
    values: &Array<F>,
    start: usize,
    len: usize,
    order: &Array<u32>,
    shared: &mut SharedSplit<F>,
    regs: &mut SplitArray<F>,
    #[comptime] cfg: RadixConfig,
) {
    let log_m = comptime![cfg.log_n];
    let m = comptime![1usize << log_m];
    let threads = comptime![cfg.threads()];
    let t = UNIT_POS_X as usize;
    #[unroll]
    for q in 0..comptime![1usize << cfg.log_elems] {
        let j = t + comptime![q * threads];
        let (mut re, mut im) = (F::new(0.0), F::new(0.0));
        if 2 * j < len {
            re = values[start + 2 * j];
        }
        if 2 * j + 1 < len {
            im = values[start + 2 * j + 1];
        }
        let mut slot = swizzled(j, cfg);
        if comptime![cfg.order == Order::Table] {
            slot = swizzled(order[m + j] as usize, cfg);
        } else if comptime![cfg.order == Order::BitReversed] {
            slot = swizzled(crate::ops::onchip::reverse_bits(j, log_m), cfg);
        }
        shared.re[slot] = re;
        shared.im[slot] = im;
    }
    sync_cube();
    let slot0 = swizzled(deposit_thread(t, cfg, comptime![0usize]), cfg);
    move_group(shared, regs, slot0, comptime![0usize], cfg, comptime![0usize], true);
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

/// One cube per row: `spectrum[c] = s · rfft(x[c] zero-padded to N)`, the M + 1 bins at
/// `c · (M + 1) + k` (re, then im from `plane` on), with `scale = s / (2√2)`: the unitary rfft
/// (`Butterfly::rfft`) for s = 1, the convolution's taps for s = √N.
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
    let elems = comptime![1usize << rc.log_elems];
    let threads = comptime![rc.threads()];
    let quarter = comptime![m / 2 + 1];
    let scale: F = scale.get::<F>();
    let mut shared = SharedSplit::<F> { re: SharedMemory::<F>::new(m), im: SharedMemory::<F>::new(m) };
    let mut regs = SplitArray::<F> { re: Array::<F>::new(elems), im: Array::<F>::new(elems) };
    let c = CUBE_POS;
    // The grid may hold a few cubes more than rows (`grid`); a whole cube leaves at once.
    if c >= layout.rows as usize {
        terminate!();
    }
    let t = UNIT_POS_X as usize;
    let len = layout.len as usize;
    let plane = layout.plane as usize;
    load_packed(x, c * len, len, order, &mut shared, &mut regs, rc);
    transform(&mut shared, &mut regs, &twiddles.stages, 0usize, rc);
    store_result(&mut shared, &mut regs, rc);
    sync_cube();
    let out = c * (m + 1);
    #[unroll]
    for q in 0..comptime![elems / 2 + 1] {
        let k = t + comptime![q * threads];
        if k < quarter {
            let pz = (m - k) % m;
            let (ka, kz) = (swizzled(k, rc), swizzled(pz, rc));
            let (xr, xi, yr, yi) = split_pair::<F>(
                shared.re[ka],
                shared.im[ka],
                shared.re[kz],
                shared.im[kz],
                twiddles.split[k],
                twiddles.split[quarter + k],
                scale,
            );
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
    load_packed(x, row * len, len, order, &mut shared, &mut regs, rc);
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
            let (hr, hi) = (filter.spectrum[h + k], filter.spectrum[plane + h + k]);
            let (hmr, hmi) = (filter.spectrum[h + m - k], filter.spectrum[plane + h + m - k]);
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

/// The fused FFT convolution of real signals: `x` `[batch, channels, L]`, `weight`
/// `[channels, K]`, `bias` `[channels]`, twiddles `[log2 n − 1, n/4, 2, 2]` (a butterfly of
/// n/2), `(n, out_len)` →
/// `[batch, channels, out_len]`. The caller checks [`real_supported`] and the shapes
/// (`L, K, out_len ≤ n`).
pub(crate) fn fft_conv_real<R: CubeRuntime, F: FloatElement>(
    x: CubeTensor<R>,
    weight: CubeTensor<R>,
    bias: Option<CubeTensor<R>>,
    (tw_re, tw_im): (CubeTensor<R>, CubeTensor<R>),
    order: &InputOrder<R>,
    (n, out_len): (usize, usize),
) -> CubeTensor<R> {
    let dims = x.meta.shape().to_vec();
    let (batch, channels, length) = (dims[0], dims[1], dims[2]);
    let taps = weight.meta.shape()[1];
    let m = n / 2;
    let client = x.client.clone();
    let limits = DeviceLimits::of(&client);
    let cfg = ConvConfig::new(m, core::mem::size_of::<F>(), &limits, order.order, bias.is_some())
        .expect("the caller checks real_supported");
    let (x, weight) = (into_contiguous(x), into_contiguous(weight));
    let split = split_table::<R, F>(n, &x);
    let tables = radix_twiddles::<R, F>((&tw_re, &tw_im), cfg.radix);
    let [spectrum, output] = empties::<R, F, 2>(&x, [&[2, channels, m + 1], &[batch, channels, out_len]]);
    let bias = bias.map(into_contiguous).unwrap_or_else(|| weight.clone());
    let plane = (channels * (m + 1)) as u32;
    let rows = batch * channels;
    // SAFETY: a cube per channel (row) of M / 2^e threads holding 2^e elements each, which
    // cover the row exactly (shared-memory slots below M: the swizzle permutes the lowest five
    // bits); reads of the taps and the row are masked by their lengths, twiddle reads stay within
    // the relaid table, split-table reads within its 2 (M/2 + 1) + 2 entries, table reads within its
    // 2M words, spectrum reads and writes within channels · (M + 1) per part, output writes
    // masked by `out_len`; cubes past the last row leave before touching anything.
    unsafe {
        rfft_rows_kernel::launch_unchecked::<F, R>(
            &client,
            grid(channels),
            CubeDim::new_1d(cfg.radix.threads() as u32),
            weight.clone().into_array_arg(),
            order.table.clone().into_array_arg(),
            RealTwiddlesLaunch::new(tables.clone().into_array_arg(), split.clone().into_array_arg()),
            spectrum.clone().into_array_arg(),
            RfftLayoutLaunch::new(channels as u32, taps as u32, plane),
            InputScalar::new((n as f64).sqrt() * 0.5 * std::f64::consts::FRAC_1_SQRT_2, F::dtype()),
            cfg,
        );
        conv_real_kernel::launch_unchecked::<F, R>(
            &client,
            grid(rows),
            CubeDim::new_1d(cfg.radix.threads() as u32),
            x.clone().into_array_arg(),
            RealFilterLaunch::new(spectrum.into_array_arg(), bias.into_array_arg()),
            order.table.clone().into_array_arg(),
            RealTwiddlesLaunch::new(tables.into_array_arg(), split.into_array_arg()),
            output.clone().into_array_arg(),
            RealRowLayoutLaunch::new(rows as u32, channels as u32, length as u32, out_len as u32, plane, 0u32),
            cfg,
        );
    }
    output
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
    let pos = CUBE_POS * comptime![PAIR_THREADS] + UNIT_POS_X as usize;
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

/// Threads per cube of [`pair_map_kernel`].
const PAIR_THREADS: usize = 256;

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
            grid(pairs.div_ceil(PAIR_THREADS)),
            CubeDim::new_1d(PAIR_THREADS as u32),
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
