//! Real signals through a butterfly of half their length: the standard split step around a
//! complex FFT of size M = N/2, as tensor ops (their gradient from Burn's autodiff, the
//! butterfly's from its own backward).
//!
//! A real `x` of N samples is packed as `z[m] = x[2m] + i·x[2m+1]` (M complex values) and
//! transformed, `Z = G z`. With G the unitary DFT of size M, even and odd samples' spectra
//! separate as `E[k] = (Z[k] + conj Z[M−k]) / 2` and `O[k] = (Z[k] − conj Z[M−k]) / 2i`, and the
//! unitary DFT of size N is `X[k] = (E[k] + W^k O[k]) / √2` for k = 0 … M, with
//! `W = exp(−2πi/N)` and indices of Z taken mod M ([`split`]). The inverse ([`merge`]) runs the
//! same relations backwards: `Z[k] = E[k] + i·O[k]` with `E[k] = (X[k] + conj X[M−k]) / 2` and
//! `O[k] = W^−k (X[k] − conj X[M−k]) / 2`, then `z = √2 · G⁻¹ Z`, which for a unitary G is
//! `√2 · conj(G conj Z)`. So one butterfly serves both directions, as in the FFT convolution.
//!
//! The split and merge steps run through [`ButterflyOps::rfft_split`] and
//! [`ButterflyOps::rfft_merge`]: these tensor ops by default, one fused launch (and one for the
//! adjoint in the backward) on wgpu and CUDA.
//!
//! The butterfly then does half the work of a complex transform of size N with a zero imaginary
//! part: (N/2)·log2(N/2) blocks against N/2·log2 N for each of N/2 pairs, plus O(N) here.

use burn::tensor::{backend::Backend, Tensor};

use super::ButterflyOps;
use crate::tensors::float_tensor;

/// `exp(∓2πi k / n)` for k in `0..count`, as `[1, count]` rows (re, im); `sign` is −1 for the
/// forward direction.
fn twiddles<B: Backend>(n: usize, count: usize, sign: f64, device: &B::Device) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let angle = |k: usize| sign * std::f64::consts::TAU * k as f64 / n as f64;
    let re = (0..count).map(|k| angle(k).cos()).collect();
    let im = (0..count).map(|k| angle(k).sin()).collect();
    (float_tensor::<B, 2>(re, [1, count], device), float_tensor::<B, 2>(im, [1, count], device))
}

/// `z[k]` and `z[(m − k) mod m]` for k = 0 … `m` (m + 1 columns each) of `z` `[rows, m]`, m ≥ 2:
/// `[z0 … z(m−1) z0]` and `[z0 z(m−1) … z1 z0]`.
fn with_mirror<B: Backend>(z: Tensor<B, 2>) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let m = z.dims()[1];
    let first = z.clone().narrow(1, 0, 1);
    let mirrored = Tensor::cat(vec![first.clone(), z.clone().narrow(1, 1, m - 1).flip([1]), first.clone()], 1);
    (Tensor::cat(vec![z, first], 1), mirrored)
}

/// Packs real signals `[rows, 2m]` as complex `[rows, m]`: even samples the real part, odd the
/// imaginary.
fn pack<B: Backend>(x: Tensor<B, 2>) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let [rows, n] = x.dims();
    let pairs = x.reshape([rows, n / 2, 2]);
    (pairs.clone().narrow(2, 0, 1).reshape([rows, n / 2]), pairs.narrow(2, 1, 1).reshape([rows, n / 2]))
}

/// The inverse of [`pack`]: `[rows, m]` real and imaginary parts as `[rows, 2m]` samples.
fn unpack<B: Backend>(re: Tensor<B, 2>, im: Tensor<B, 2>) -> Tensor<B, 2> {
    let [rows, m] = re.dims();
    Tensor::stack::<3>(vec![re, im], 2).reshape([rows, 2 * m])
}

/// The split step: from `Z = G z` (`[rows, m]` each, m ≥ 2) to the `m + 1` bins of the
/// transform of size 2m (see the module docs).
pub(crate) fn split<B: Backend>(zr: Tensor<B, 2>, zi: Tensor<B, 2>) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let m = zr.dims()[1];
    let device = zr.device();
    let (ar, rr) = with_mirror(zr);
    let (ai, ri) = with_mirror(zi);
    // E = (a + conj r) / 2; D = a − conj r, and O = D / 2i = (Im D − i Re D) / 2.
    let (er, ei) = (ar.clone() + rr.clone(), ai.clone() - ri.clone());
    let (or, oi) = (ai + ri, rr - ar);
    let (wr, wi) = twiddles::<B>(2 * m, m + 1, -1.0, &device);
    // X = (E + W O) / √2, with the halves of E and O folded into the scale.
    let scale = 0.5 * std::f64::consts::FRAC_1_SQRT_2;
    let xr = (er + wr.clone() * or.clone() - wi.clone() * oi.clone()).mul_scalar(scale);
    let xi = (ei + wr * oi + wi * or).mul_scalar(scale);
    (xr, xi)
}

/// The merge step, the inverse of [`split`]: from the `m + 1` bins `[rows, m + 1]` of a real
/// signal's transform to `√2 · Z` `[rows, m]`, so that `G⁻¹` of it is the packed signal. The
/// imaginary parts of bins 0 and m are dropped, as numpy's and torch's `irfft` drop them (a real
/// signal's are zero).
pub(crate) fn merge<B: Backend>(xr: Tensor<B, 2>, xi: Tensor<B, 2>) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let m = xr.dims()[1] - 1;
    let device = xr.device();
    let inner = |t: Tensor<B, 2>| t.narrow(1, 1, m - 1);
    let zero = xi.clone().narrow(1, 0, 1).zeros_like();
    let xi = Tensor::cat(vec![zero.clone(), inner(xi), zero], 1);
    // a = X[k], r = X[m − k], k = 0 … m − 1.
    let (ar, ai) = (xr.clone().narrow(1, 0, m), xi.clone().narrow(1, 0, m));
    let (rr, ri) = (xr.narrow(1, 1, m).flip([1]), xi.narrow(1, 1, m).flip([1]));
    // E = (a + conj r) / 2; O = W^−k (a − conj r) / 2; Z = E + i O.
    let (er, ei) = (ar.clone() + rr.clone(), ai.clone() - ri.clone());
    let (dr, di) = (ar - rr, ai + ri);
    let (wr, wi) = twiddles::<B>(2 * m, m, 1.0, &device);
    let (or, oi) = (wr.clone() * dr.clone() - wi.clone() * di.clone(), wr * di + wi * dr);
    // √2 · Z, the halves folded into the scale.
    let scale = std::f64::consts::FRAC_1_SQRT_2;
    ((er - oi).mul_scalar(scale), (ei + or).mul_scalar(scale))
}

/// The transform of real rows `[rows, 2m]` through `fft`, a butterfly of size m on `[rows, m]`
/// (re, im) pairs: packed, transformed, split into the `m + 1` bins `[rows, m + 1]` (unitary of
/// size 2m when `fft` is the unitary DFT of m).
pub(crate) fn forward<B: ButterflyOps>(
    x: Tensor<B, 2>,
    fft: impl Fn(Tensor<B, 2>, Tensor<B, 2>) -> (Tensor<B, 2>, Tensor<B, 2>),
) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let (zr, zi) = pack(x);
    let (zr, zi) = fft(zr, zi);
    B::rfft_split(zr, zi)
}

/// The inverse of [`forward`] through the same `fft`: the bins `[rows, m + 1]` merged, through
/// `G⁻¹ z = conj(G conj z)`, unpacked to `[rows, 2m]` real samples.
pub(crate) fn inverse<B: ButterflyOps>(
    xr: Tensor<B, 2>,
    xi: Tensor<B, 2>,
    fft: impl Fn(Tensor<B, 2>, Tensor<B, 2>) -> (Tensor<B, 2>, Tensor<B, 2>),
) -> Tensor<B, 2> {
    let (zr, zi) = B::rfft_merge(xr, xi);
    let (zr, zi) = fft(zr, zi.neg());
    unpack(zr, zi.neg())
}
