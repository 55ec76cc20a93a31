//! The spectral loss as plain Burn tensor ops: the reference twin, with its gradient from
//! Burn's autodiff.

use burn::tensor::{backend::Backend, Tensor};

use super::{check_pair, check_stft, frame_indices, Distance, LossParams, Magnitude, SpectralOps, StftTables};
use crate::error::Result;
use crate::tensors::select_columns;

/// Per-(frame, bin) magnitudes of framed signals.
///
/// # Shapes
/// - `frames`: `[batch, frames, win]` (already windowed or not: the basis carries the window)
/// - `basis_re`, `basis_im`: `[win, bins]`, `window[n]·cos(2π n k / W)` and `−window[n]·sin(…)`
/// - returns `[batch, frames, bins]`
pub fn magnitudes<B: Backend>(
    frames: Tensor<B, 3>,
    basis_re: &Tensor<B, 2>,
    basis_im: &Tensor<B, 2>,
    magnitude: Magnitude,
    eps: f64,
) -> Tensor<B, 3> {
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

/// The magnitude spectrogram through the tensor-op reference: frames gathered with `select`,
/// the DFT as a matmul with the windowed basis, the magnitude; its gradient comes from Burn's
/// autodiff.
///
/// # Shapes
/// - `x`: `[signals, T]` → `[signals, frames, W/2 + 1]`, frames = ⌊(T − W) / hop⌋ + 1
///
/// # Errors
/// [`Error::InvalidInput`](crate::error::Error::InvalidInput) when T < W or hop = 0.
pub fn stft_magnitudes_reference<B: Backend>(
    x: Tensor<B, 2>,
    tables: &StftTables<B>,
    hop: usize,
    magnitude: Magnitude,
    eps: f64,
) -> Result<Tensor<B, 3>> {
    let win = tables.win();
    let frames = check_stft("stft_magnitudes", &x, win, hop)?;
    let [signals, _] = x.dims();
    let framed = select_columns(x, frame_indices(frames, win, hop)).reshape([signals, frames, win]);
    Ok(magnitudes(framed, &tables.basis_re, &tables.basis_im, magnitude, eps))
}

/// The sum of all entries, one axis at a time: each step is a per-output reduction without
/// atomics, so the value does not change from run to run (a one-shot sum may use atomics).
pub(crate) fn sum_all<B: Backend>(x: Tensor<B, 3>) -> Tensor<B, 1> {
    x.sum_dim(2).sum_dim(1).sum_dim(0).reshape([1])
}

/// The reduced loss from two magnitude spectrograms, as tensor ops.
pub fn loss_from_magnitudes<B: Backend>(mp: Tensor<B, 3>, mt: Tensor<B, 3>, p: &LossParams) -> Tensor<B, 1> {
    let d = distance(mp.clone(), mt.clone(), p.distance);
    let mut loss = sum_all(d).mul_scalar(p.scale);
    if p.spectral_convergence > 0.0 {
        let num = (sum_all((mt.clone() - mp).powi_scalar(2)) + p.eps).sqrt();
        let den = (sum_all(mt.powi_scalar(2)) + p.eps).sqrt();
        loss = loss + (num / den).mul_scalar(p.spectral_convergence);
    }
    loss
}

/// The reduced loss through `B`'s magnitude spectrogram op (fused where it can run) and tensor
/// ops for the rest: the default of [`SpectralOps::spectral_loss`].
///
/// # Errors
/// [`Error::InvalidInput`](crate::error::Error::InvalidInput) when the shapes differ, T < W or hop = 0.
pub fn spectral_loss_composed<B: SpectralOps>(
    pred: Tensor<B, 2>,
    target: Tensor<B, 2>,
    tables: &StftTables<B>,
    p: &LossParams,
) -> Result<Tensor<B, 1>> {
    check_pair("spectral_loss", &pred, &target)?;
    let mp = B::stft_magnitudes(pred, tables, p.hop, p.magnitude, p.eps)?;
    let mt = B::stft_magnitudes(target, tables, p.hop, p.magnitude, p.eps)?;
    Ok(loss_from_magnitudes(mp, mt, p))
}
