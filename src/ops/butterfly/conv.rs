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

use burn::tensor::{backend::Backend, Tensor};

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
    let channels = weight.dims()[0];
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
    let mut y = if out_len == n { yr } else { yr.narrow(2, 0, out_len) };
    if let Some(bias) = bias {
        y = y + bias.reshape([1, channels, 1]);
    }
    y
}
