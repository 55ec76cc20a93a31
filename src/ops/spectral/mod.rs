//! The spectral loss's ops: the magnitude spectrogram and the whole reduced loss as backend
//! ops ([`SpectralOps`]) with their value types; the tensor-op twin (`reference.rs`); the fused
//! CubeCL kernels (`kernel/`); the backend impls (`cubecl.rs`, `autodiff.rs`).

#[cfg(feature = "fused")]
mod autodiff;
#[cfg(feature = "fused")]
mod cubecl;
#[cfg(feature = "fused")]
pub(crate) mod kernel;
pub(crate) mod reference;
mod tables;
mod window;

pub use reference::{distance, loss_from_magnitudes, magnitudes, spectral_loss_composed, stft_magnitudes_reference};
pub use tables::StftTables;
pub use window::{frame_count, frame_indices, reflect_indices, Window};

use burn::tensor::{backend::Backend, Tensor};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Largest window the fused kernels handle (one frame must fit in shared memory, as for the
/// butterfly: 2 · 4096 · 4 bytes = 32 KiB in f32). Larger windows take the reference path.
pub const MAX_FUSED_WIN: usize = 4096;

/// How a bin's magnitude is measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Magnitude {
    /// `sqrt(re² + im² + eps)`.
    #[default]
    Linear,
    /// `re² + im²`.
    Power,
    /// `½ ln(re² + im² + eps)` (the log of the linear magnitude).
    Log,
}

/// How two magnitudes are compared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Distance {
    /// Absolute difference.
    #[default]
    L1,
    /// Squared difference.
    L2,
}

/// The magnitude spectrogram and the spectral loss as backend ops. Same backends and paths as
/// [`ButterflyOps`](crate::ops::butterfly::ButterflyOps): the tensor-op reference on ndarray
/// and candle; on CubeCL backends the fused forward kernel and, under `Autodiff`, the fused
/// backward kernels through a custom `Backward`. Where the fused kernels cannot run (W not a
/// power of two, W above [`MAX_FUSED_WIN`]) every backend takes the reference path.
pub trait SpectralOps: Backend {
    /// Magnitudes of the windowed DFT of every frame: frames of W = `tables.win()` samples start
    /// at 0 and step `hop`; bins 0…W/2.
    ///
    /// # Shapes
    /// - `x`: `[signals, T]`
    /// - returns `[signals, ⌊(T − W) / hop⌋ + 1, W/2 + 1]`
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when T < W or hop = 0.
    fn stft_magnitudes(
        x: Tensor<Self, 2>,
        tables: &StftTables<Self>,
        hop: usize,
        magnitude: Magnitude,
        eps: f64,
    ) -> Result<Tensor<Self, 3>> {
        stft_magnitudes_reference(x, tables, hop, magnitude, eps)
    }

    /// Whether [`stft_magnitudes`](Self::stft_magnitudes) takes the fused kernel path for
    /// window length `win` on `device` (false for the reference backends).
    fn stft_is_fused(_win: usize, _device: &Self::Device) -> bool {
        false
    }

    /// The whole reduced spectral loss between two signal batches (see [`LossParams`]). The
    /// default composes [`stft_magnitudes`](Self::stft_magnitudes) with tensor ops; CubeCL
    /// backends override it with one fused pass (both spectra, distance, reduction) and a fused
    /// backward.
    ///
    /// # Shapes
    /// - `pred`, `target`: `[signals, T]`
    /// - returns `[1]`
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the shapes differ, T < W or hop = 0.
    fn spectral_loss(
        pred: Tensor<Self, 2>,
        target: Tensor<Self, 2>,
        tables: &StftTables<Self>,
        params: &LossParams,
    ) -> Result<Tensor<Self, 1>> {
        spectral_loss_composed(pred, target, tables, params)
    }

    /// Whether [`spectral_loss`](Self::spectral_loss) runs as one fused pass for window length
    /// `win` on `device`.
    fn spectral_loss_is_fused(_win: usize, _device: &Self::Device) -> bool {
        false
    }

    /// Whether the reference twin's DFT may be a matmul on `device`. CubeCL backends in f64 say
    /// no (Burn's matmul kernels there take no f64, and panic), and the twin sums broadcast
    /// products instead: slower, the same sums.
    fn reference_matmul(_device: &Self::Device) -> bool {
        true
    }
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

/// The magnitude spectrogram on `B`'s fastest path: the fused kernels where
/// [`SpectralOps::stft_is_fused`] says so, the reference twin elsewhere.
///
/// # Shapes
/// - `x`: `[signals, T]` → `[signals, frames, W/2 + 1]`
///
/// # Errors
/// [`Error::InvalidInput`] when T < W or hop = 0.
pub fn stft_magnitudes<B: SpectralOps>(
    x: Tensor<B, 2>,
    tables: &StftTables<B>,
    hop: usize,
    magnitude: Magnitude,
    eps: f64,
) -> Result<Tensor<B, 3>> {
    B::stft_magnitudes(x, tables, hop, magnitude, eps)
}

/// The most samples a signal may have: the fused kernels index a signal's samples in 32 bits
/// (their divisions by the hop take numerators below 2^31), and 2^30 samples (4 GiB in f32, six
/// hours at 48 kHz) is beyond any audio batch.
pub const MAX_SIGNAL_SAMPLES: usize = 1 << 30;

/// Checks the input of a magnitude spectrogram: `x` is `[signals, T]` with W ≤ T ≤
/// [`MAX_SIGNAL_SAMPLES`] and hop ≥ 1. Returns the number of frames.
pub fn check_stft<B: Backend>(op: &'static str, x: &Tensor<B, 2>, win: usize, hop: usize) -> Result<usize> {
    check_framing(op, x.dims()[1], win, hop)
}

/// [`check_stft`] on a signal length `t`.
fn check_framing(op: &'static str, t: usize, win: usize, hop: usize) -> Result<usize> {
    if hop == 0 {
        return Err(Error::invalid(op, "hop ≥ 1", hop));
    }
    if t > MAX_SIGNAL_SAMPLES {
        return Err(Error::invalid(
            op,
            format!("at most {MAX_SIGNAL_SAMPLES} samples per signal"),
            format!("{t} samples"),
        ));
    }
    frame_count(t, win, hop)
        .ok_or_else(|| Error::invalid(op, format!("at least W = {win} samples per signal"), format!("{t} samples")))
}

/// Checks that two signal batches have the same shape.
pub fn check_pair<B: Backend>(op: &'static str, pred: &Tensor<B, 2>, target: &Tensor<B, 2>) -> Result<()> {
    if pred.dims() != target.dims() {
        return Err(Error::invalid(
            op,
            format!("pred and target of the same shape (pred is {:?})", pred.dims()),
            format!("target of shape {:?}", target.dims()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A signal longer than [`MAX_SIGNAL_SAMPLES`] is refused with the limit in the message; one of
    /// exactly that length is framed.
    #[test]
    fn signal_length_is_bounded() {
        let err = check_framing("spectral_loss", MAX_SIGNAL_SAMPLES + 1, 1024, 256).unwrap_err().to_string();
        assert!(err.contains("spectral_loss") && err.contains(&MAX_SIGNAL_SAMPLES.to_string()), "{err}");
        assert_eq!(
            check_framing("spectral_loss", MAX_SIGNAL_SAMPLES, 1024, 256).unwrap(),
            (MAX_SIGNAL_SAMPLES - 1024) / 256 + 1
        );
    }
}
