//! The magnitude spectrogram at the heart of the loss: its constant tables, the checked entry
//! point, and the tensor-op reference twin.

use burn::tensor::{backend::Backend, Tensor};

use super::frame_indices;

use super::{distance, frame_count, magnitudes, Distance, Magnitude, Window};
use crate::error::{Error, Result};
use crate::ops::SpectralOps;
use crate::tensors::{float_tensor, select_columns};

/// The constants of a short-time transform of window length W, computed once in f64 and stored
/// on the device in the backend's float type: the windowed DFT basis of the reference path and
/// the window and twiddle tables of the fused kernels.
#[derive(Clone, Debug)]
pub struct StftTables<B: Backend> {
    win: usize,
    window: Window,
    /// `[W, W/2 + 1]`: `window[n]·cos(2π nk/W)`.
    pub(crate) basis_re: Tensor<B, 2>,
    /// `[W, W/2 + 1]`: `−window[n]·sin(2π nk/W)`.
    pub(crate) basis_im: Tensor<B, 2>,
    /// `[W]`: the window.
    pub(crate) window_values: Tensor<B, 1>,
    /// `[W/2]`: `cos(2π j/W)`.
    pub(crate) twiddle_re: Tensor<B, 1>,
    /// `[W/2]`: `−sin(2π j/W)`.
    pub(crate) twiddle_im: Tensor<B, 1>,
}

impl<B: Backend> StftTables<B> {
    /// The tables for window length `win` (at least 2) and `window`, on `device`.
    pub fn new(win: usize, window: Window, device: &B::Device) -> Result<Self> {
        if win < 2 {
            return Err(Error::invalid("stft_tables", "win ≥ 2", win));
        }
        let bins = win / 2 + 1;
        let values = window.values(win);
        // Reduce n·k mod W first so the angle is exact for large W.
        let angle = |i: usize| 2.0 * std::f64::consts::PI * (i % win) as f64 / win as f64;
        let mut re = vec![0.0; win * bins];
        let mut im = vec![0.0; win * bins];
        for n in 0..win {
            for k in 0..bins {
                re[n * bins + k] = values[n] * angle(n * k).cos();
                im[n * bins + k] = -values[n] * angle(n * k).sin();
            }
        }
        let half = win / 2;
        Ok(StftTables {
            win,
            window,
            basis_re: float_tensor(re, [win, bins], device),
            basis_im: float_tensor(im, [win, bins], device),
            window_values: float_tensor(values, [win], device),
            twiddle_re: float_tensor((0..half).map(|j| angle(j).cos()).collect(), [half], device),
            twiddle_im: float_tensor((0..half).map(|j| -angle(j).sin()).collect(), [half], device),
        })
    }

    /// The window length W.
    pub fn win(&self) -> usize {
        self.win
    }

    /// The analysis window.
    pub fn window(&self) -> Window {
        self.window
    }

    /// Number of bins, W/2 + 1.
    pub fn bins(&self) -> usize {
        self.win / 2 + 1
    }
}

/// Checks the input of a magnitude spectrogram: `x` is `[signals, T]` with T ≥ W and hop ≥ 1.
/// Returns the number of frames.
pub fn check_stft<B: Backend>(op: &'static str, x: &Tensor<B, 2>, win: usize, hop: usize) -> Result<usize> {
    if hop == 0 {
        return Err(Error::invalid(op, "hop ≥ 1", hop));
    }
    let t = x.dims()[1];
    frame_count(t, win, hop).ok_or_else(|| Error::invalid(op, format!("at least W = {win} samples per signal"), format!("{t} samples")))
}

/// The magnitude spectrogram through the tensor-op reference: frames gathered with `select`,
/// the DFT as a matmul with the windowed basis, the magnitude; its gradient comes from Burn's
/// autodiff.
///
/// # Shapes
/// - `x`: `[signals, T]` → `[signals, frames, W/2 + 1]`, frames = ⌊(T − W) / hop⌋ + 1
///
/// # Errors
/// [`Error::InvalidInput`] when T < W or hop = 0.
pub fn stft_magnitudes_reference<B: Backend>(x: Tensor<B, 2>, tables: &StftTables<B>, hop: usize, magnitude: Magnitude, eps: f64) -> Result<Tensor<B, 3>> {
    let win = tables.win;
    let frames = check_stft("stft_magnitudes", &x, win, hop)?;
    let [signals, _] = x.dims();
    let framed = select_columns(x, frame_indices(frames, win, hop)).reshape([signals, frames, win]);
    Ok(magnitudes(framed, &tables.basis_re, &tables.basis_im, magnitude, eps))
}

/// The magnitude spectrogram on `B`'s fastest path: the fused kernels where
/// [`SpectralOps::stft_is_fused`] says so, the reference twin elsewhere.
///
/// # Shapes
/// - `x`: `[signals, T]` → `[signals, frames, W/2 + 1]`
///
/// # Errors
/// [`Error::InvalidInput`] when T < W or hop = 0.
pub fn stft_magnitudes<B: SpectralOps>(x: Tensor<B, 2>, tables: &StftTables<B>, hop: usize, magnitude: Magnitude, eps: f64) -> Result<Tensor<B, 3>> {
    B::stft_magnitudes(x, tables, hop, magnitude, eps)
}

/// The constants of a reduced spectral loss, as [`SpectralOps::spectral_loss`] takes them:
/// `loss = scale · Σ d(|P|, |T|) + spectral_convergence · sqrt(Σ (|T| − |P|)² + eps) /
/// sqrt(Σ |T|² + eps)`, sums over signals, frames and bins.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossParams {
    /// Hop between frames.
    pub hop: usize,
    /// Magnitude measure.
    pub magnitude: Magnitude,
    /// Distance between magnitudes.
    pub distance: Distance,
    /// The magnitude's and the spectral-convergence norms' eps.
    pub eps: f64,
    /// The reduction's factor on the distance sum (1/count for the mean, 1 for the sum,
    /// 1/batch for the batch mean).
    pub scale: f64,
    /// Weight of the spectral-convergence term (0: off).
    pub spectral_convergence: f64,
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
/// [`Error::InvalidInput`] when the shapes differ, T < W or hop = 0.
pub fn spectral_loss_composed<B: SpectralOps>(pred: Tensor<B, 2>, target: Tensor<B, 2>, tables: &StftTables<B>, p: &LossParams) -> Result<Tensor<B, 1>> {
    check_pair("spectral_loss", &pred, &target)?;
    let mp = B::stft_magnitudes(pred, tables, p.hop, p.magnitude, p.eps)?;
    let mt = B::stft_magnitudes(target, tables, p.hop, p.magnitude, p.eps)?;
    Ok(loss_from_magnitudes(mp, mt, p))
}

/// Checks that two signal batches have the same shape.
pub fn check_pair<B: Backend>(op: &'static str, pred: &Tensor<B, 2>, target: &Tensor<B, 2>) -> Result<()> {
    if pred.dims() != target.dims() {
        return Err(Error::invalid(op, format!("pred and target of the same shape (pred is {:?})", pred.dims()), format!("target of shape {:?}", target.dims())));
    }
    Ok(())
}
