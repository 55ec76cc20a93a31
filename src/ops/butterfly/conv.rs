//! FFT convolution through a butterfly: the op behind the layer `nn::conv::FftConv1d`.
//!
//! Each channel `c` of a signal `x` `[batch, channels, L]` is convolved with its taps `h[c]`
//! `[channels, K]` through the butterfly `F` (`[log2 N, N/2, 2, 2]` twiddles and an input
//! permutation): zero-pad both to N, `X = F x`, `H = √N · F h`, `y = Re F conj(X ⊙ H)`, crop to
//! the first `out_len` samples, add `bias[c]`. For the unitary DFT `F conj(z) = conj(F⁻¹ z)`, so
//! this is the linear (or, with `N = L`, circular) convolution.
//!
//! - here, and `fft_conv_reference` in the slice's `mod.rs`: the tensor-op twin, three
//!   butterflies (fused where the backend has kernels) and the spectrum product as tensor ops;
//!   any backend, its gradient from Burn's autodiff.
//! - `kernel/conv.rs`: the fused forward for CubeCL backends without autodiff (inference): after
//!   a small launch that relays the twiddles, one launch for the taps' spectra and one for the
//!   convolution (both transforms and the product on-chip, the stages register-resident). Under autodiff the reference runs, so every path that records a graph has its
//!   backward.
//!
//! The dispatch is `ButterflyOps::butterfly_conv`.
//!
//! [`real_composed`] is the same convolution through a butterfly of half the size, `G` of
//! M = N/2: the signal and the taps through `rfft` (packed as M complex values, `G`, the split
//! step of `rfft.rs`), their M + 1 bins multiplied, and back through `irfft` (the merge step,
//! `G⁻¹ z = conj(G conj z)`, unpacked). Two half-size butterflies per signal instead of two
//! full-size ones, as tensor ops with the butterflies fused where the backend has kernels.

use burn::tensor::{backend::Backend, Tensor};

use super::{rfft, ButterflyOps};
use crate::tensors::full;

/// `x` `[batch, channels, L]` zero-padded to `[batch, channels, n]`.
fn pad<B: Backend>(x: Tensor<B, 3>, n: usize) -> Tensor<B, 3> {
    let [b, c, l] = x.dims();
    if l == n {
        return x;
    }
    Tensor::cat(vec![x.clone(), full::<B, 3>([b, c, n - l], 0.0, &x.device())], 2)
}

/// The FFT convolution as tensor ops, with `fft` the butterfly on `[rows, n]` (re, im) pairs
/// (`fft_conv_reference` passes the backend's own).
pub(crate) fn composed<B: Backend>(
    x: Tensor<B, 3>,
    weight: Tensor<B, 2>,
    bias: Option<Tensor<B, 1>>,
    n: usize,
    out_len: usize,
    fft: impl Fn(Tensor<B, 2>, Tensor<B, 2>) -> (Tensor<B, 2>, Tensor<B, 2>),
) -> Tensor<B, 3> {
    // The butterfly along the last dimension of `[a, b, n]` tensors.
    let fft3 = |re: Tensor<B, 3>, im: Tensor<B, 3>| {
        let dims = re.dims();
        let rows = dims[0] * dims[1];
        let (yr, yi) = fft(re.reshape([rows, n]), im.reshape([rows, n]));
        (yr.reshape(dims), yi.reshape(dims))
    };
    let scale = (n as f64).sqrt();
    let x = pad(x, n);
    let (xr, xi) = fft3(x.clone(), x.zeros_like());
    let h = pad(weight.unsqueeze_dim::<3>(0), n);
    let (hr, hi) = fft3(h.clone(), h.zeros_like());
    let (hr, hi) = (hr.mul_scalar(scale), hi.mul_scalar(scale));
    // Z = X ⊙ H, then y = Re F conj(Z).
    let zr = xr.clone() * hr.clone() - xi.clone() * hi.clone();
    let zi = xr * hi + xi * hr;
    let (yr, _) = fft3(zr, zi.neg());
    crop_and_bias(yr, out_len, bias)
}

/// The first `out_len` samples of `y` `[batch, channels, n]`, plus `bias[c]` on channel c.
fn crop_and_bias<B: Backend>(y: Tensor<B, 3>, out_len: usize, bias: Option<Tensor<B, 1>>) -> Tensor<B, 3> {
    let [_, channels, n] = y.dims();
    let y = if out_len == n { y } else { y.narrow(2, 0, out_len) };
    match bias {
        Some(bias) => y + bias.reshape([1, channels, 1]),
        None => y,
    }
}

/// The FFT convolution through `half_fft`, the butterfly of size `n / 2` on `[rows, n / 2]`
/// (re, im) pairs: rfft, the product of the M + 1 bins, irfft (see the module docs). `n ≥ 4`.
pub(crate) fn real_composed<B: ButterflyOps>(
    x: Tensor<B, 3>,
    weight: Tensor<B, 2>,
    bias: Option<Tensor<B, 1>>,
    n: usize,
    out_len: usize,
    half_fft: impl Fn(Tensor<B, 2>, Tensor<B, 2>) -> (Tensor<B, 2>, Tensor<B, 2>),
) -> Tensor<B, 3> {
    let bins = n / 2 + 1;
    // The unitary transform of size n of `[a, b, n]` real signals: `[a, b, n/2 + 1]` bins.
    let rfft3 = |x: Tensor<B, 3>| {
        let [a, b, _] = x.dims();
        let (xr, xi) = rfft::forward(x.reshape([a * b, n]), &half_fft);
        (xr.reshape([a, b, bins]), xi.reshape([a, b, bins]))
    };
    let channels = weight.dims()[0];
    let (xr, xi) = rfft3(pad(x, n));
    let (hr, hi) = rfft3(pad(weight.unsqueeze_dim::<3>(0), n));
    // Z = √n · X ⊙ H, the spectrum of the convolution in the unitary convention.
    let scale = (n as f64).sqrt();
    let zr = (xr.clone() * hr.clone() - xi.clone() * hi.clone()).mul_scalar(scale);
    let zi = (xr * hi + xi * hr).mul_scalar(scale);
    let [batch, _, _] = zr.dims();
    let rows = batch * channels;
    let y = rfft::inverse(zr.reshape([rows, bins]), zi.reshape([rows, bins]), &half_fft);
    crop_and_bias(y.reshape([batch, channels, n]), out_len, bias)
}
