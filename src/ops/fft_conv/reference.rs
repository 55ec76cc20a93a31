//! The tensor-op twin of the FFT convolution: three butterflies and the spectrum product.

use burn::tensor::Tensor;

use crate::ops::butterfly::{ButterflyOps, Permutation};
use crate::tensors::full;

/// `x` `[batch, channels, L]` zero-padded to `[batch, channels, n]`.
fn pad<B: ButterflyOps>(x: Tensor<B, 3>, n: usize) -> Tensor<B, 3> {
    let [b, c, l] = x.dims();
    if l == n {
        return x;
    }
    Tensor::cat(vec![x.clone(), full::<B, 3>([b, c, n - l], 0.0, &x.device())], 2)
}

/// The butterfly applied along the last dimension of `[a, b, n]` tensors.
fn butterfly<B: ButterflyOps>(
    re: Tensor<B, 3>,
    im: Tensor<B, 3>,
    tw: (&Tensor<B, 4>, &Tensor<B, 4>),
    perm: &Permutation,
) -> (Tensor<B, 3>, Tensor<B, 3>) {
    let dims = re.dims();
    let rows = dims[0] * dims[1];
    let (yr, yi) =
        B::butterfly(re.reshape([rows, dims[2]]), im.reshape([rows, dims[2]]), tw.0.clone(), tw.1.clone(), perm);
    (yr.reshape(dims), yi.reshape(dims))
}

/// The FFT convolution of the module docs, as tensor ops on any backend (the butterflies fused
/// where `B` has kernels); its gradient comes from Burn's autodiff.
///
/// # Shapes
/// - `x`: `[batch, channels, L]`, `L ≤ n`
/// - `weight`: `[channels, K]`, `K ≤ n`; `bias`: `[channels]`
/// - `tw_re`, `tw_im`: `[log2 n, n/2, 2, 2]`
/// - returns `[batch, channels, out_len]`, `out_len ≤ n`
///
/// The caller checks the shapes (the layer does, with errors naming it).
#[allow(clippy::too_many_arguments)]
pub fn fft_conv_reference<B: ButterflyOps>(
    x: Tensor<B, 3>,
    weight: Tensor<B, 2>,
    bias: Option<Tensor<B, 1>>,
    tw_re: Tensor<B, 4>,
    tw_im: Tensor<B, 4>,
    perm: &Permutation,
    n: usize,
    out_len: usize,
) -> Tensor<B, 3> {
    let channels = weight.dims()[0];
    let tw = (&tw_re, &tw_im);
    let scale = (n as f64).sqrt();
    let x = pad(x, n);
    let (xr, xi) = butterfly(x.clone(), x.zeros_like(), tw, perm);
    let h = pad(weight.unsqueeze_dim::<3>(0), n);
    let (hr, hi) = butterfly(h.clone(), h.zeros_like(), tw, perm);
    let (hr, hi) = (hr.mul_scalar(scale), hi.mul_scalar(scale));
    // Z = X ⊙ H, then y = Re F conj(Z).
    let zr = xr.clone() * hr.clone() - xi.clone() * hi.clone();
    let zi = xr * hi + xi * hr;
    let (yr, _) = butterfly(zr, zi.neg(), tw, perm);
    let mut y = if out_len == n { yr } else { yr.narrow(2, 0, out_len) };
    if let Some(bias) = bias {
        y = y + bias.reshape([1, channels, 1]);
    }
    y
}
