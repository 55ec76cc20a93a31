//! The spectral loss as plain Burn tensor ops: the reference twin, with its gradient from
//! Burn's autodiff.

use burn::tensor::{backend::Backend, Tensor};

use super::{Distance, Magnitude};

/// Per-(frame, bin) magnitudes of framed signals.
///
/// # Shapes
/// - `frames`: `[batch, frames, win]` (already windowed or not: the basis carries the window)
/// - `basis_re`, `basis_im`: `[win, bins]`, `window[n]·cos(2π n k / W)` and `−window[n]·sin(…)`
/// - returns `[batch, frames, bins]`
pub fn magnitudes<B: Backend>(frames: Tensor<B, 3>, basis_re: &Tensor<B, 2>, basis_im: &Tensor<B, 2>, magnitude: Magnitude, eps: f64) -> Tensor<B, 3> {
    let [batch, count, win] = frames.dims();
    let bins = basis_re.dims()[1];
    let flat = frames.reshape([batch * count, win]);
    let re = flat.clone().matmul(basis_re.clone());
    let im = flat.matmul(basis_im.clone());
    let power = re.powi_scalar(2) + im.powi_scalar(2);
    let m = match magnitude {
        Magnitude::Linear => (power + eps).sqrt(),
        Magnitude::Power => power,
        Magnitude::Log => (power + eps).log().mul_scalar(0.5),
    };
    m.reshape([batch, count, bins])
}

/// Per-(frame, bin) distance between two magnitude tensors.
pub fn distance<B: Backend>(a: Tensor<B, 3>, b: Tensor<B, 3>, distance: Distance) -> Tensor<B, 3> {
    let d = a - b;
    match distance {
        Distance::L2 => d.powi_scalar(2),
        Distance::L1 => d.abs(),
    }
}
