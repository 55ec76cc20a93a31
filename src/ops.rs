//! Backend-extension traits: one per op family ([`ButterflyOps`], [`SpectralOps`]).
//!
//! [`ButterflyOps`] is implemented for every backend learned-fft supports:
//!
//! | backend | `butterfly` runs | gradient from |
//! |---|---|---|
//! | `NdArray`, `Candle` (and `Autodiff` of them) | the tensor-op reference | Burn's autodiff |
//! | `CubeBackend` (wgpu, CUDA) | the fused CubeCL forward kernel | — |
//! | `Autodiff<CubeBackend>` | the fused forward kernel | the fused backward kernel, through a custom `Backward` |
//!
//! Where the fused kernel cannot run (N above [`crate::kernels::butterfly::MAX_FUSED_N`], or a
//! device with too little shared memory) the CubeCL backends take the reference path, whose
//! gradient is again Burn's autodiff: no path ever lacks a backward.

use burn::tensor::{backend::Backend, Tensor};
use serde::{Deserialize, Serialize};

use crate::butterfly::{butterfly_forward_reference, Permutation};
use crate::error::Result;
use crate::spectral::{spectral_loss_composed, stft_magnitudes_reference, LossParams, Magnitude, StftTables};

/// The butterfly product as a backend op.
pub trait ButterflyOps: Backend {
    /// Applies `perm` and then the butterfly factors to a batch of complex vectors.
    ///
    /// # Shapes
    /// - `x_re`, `x_im`: `[batch, n]`
    /// - `tw_re`, `tw_im`: `[log2 n, n/2, 2, 2]`
    /// - returns `(re, im)`, each `[batch, n]`
    ///
    /// The default is the tensor-op reference
    /// ([`butterfly_forward_reference`]); CubeCL backends override it with the fused kernels.
    fn butterfly(
        x_re: Tensor<Self, 2>,
        x_im: Tensor<Self, 2>,
        tw_re: Tensor<Self, 4>,
        tw_im: Tensor<Self, 4>,
        perm: Permutation,
    ) -> (Tensor<Self, 2>, Tensor<Self, 2>) {
        butterfly_forward_reference(x_re, x_im, tw_re, tw_im, perm)
    }

    /// Whether [`butterfly`](Self::butterfly) takes the fused kernel path for size `n` on
    /// `device` (false for the reference backends).
    fn butterfly_is_fused(_n: usize, _device: &Self::Device) -> bool {
        false
    }
}

/// The spectral loss's magnitude spectrogram as a backend op. Same backends and paths as
/// [`ButterflyOps`]: the tensor-op reference on ndarray and candle; on CubeCL backends the fused
/// forward kernel and, under `Autodiff`, the fused backward kernels through a custom `Backward`.
/// Where the fused kernels cannot run (W not a power of two, W above
/// [`crate::kernels::spectral::MAX_FUSED_WIN`]) every backend takes the reference path.
pub trait SpectralOps: Backend {
    /// Magnitudes of the windowed DFT of every frame: frames of W = `tables.win()` samples start
    /// at 0 and step `hop`; bins 0…W/2.
    ///
    /// # Shapes
    /// - `x`: `[signals, T]`
    /// - returns `[signals, ⌊(T − W) / hop⌋ + 1, W/2 + 1]`
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] when T < W or hop = 0.
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
    /// [`crate::Error::InvalidInput`] when the shapes differ, T < W or hop = 0.
    fn spectral_loss(pred: Tensor<Self, 2>, target: Tensor<Self, 2>, tables: &StftTables<Self>, params: &LossParams) -> Result<Tensor<Self, 1>> {
        spectral_loss_composed(pred, target, tables, params)
    }

    /// Whether [`spectral_loss`](Self::spectral_loss) runs as one fused pass for window length
    /// `win` on `device`.
    fn spectral_loss_is_fused(_win: usize, _device: &Self::Device) -> bool {
        false
    }
}

/// Which implementation an op takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum KernelChoice {
    /// The fused kernels where they can run (CubeCL backends, supported sizes), the reference
    /// twin elsewhere.
    #[default]
    Auto,
    /// The fused kernels, or an error where they cannot run.
    Fused,
    /// Always the tensor-op reference twin.
    Reference,
}
