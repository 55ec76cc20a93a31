//! # learned-fft
//!
//! Learn the FFT as a butterfly network on [Burn](https://burn.dev).
//!
//! The layers, from the top down (each module imports only the ones below it):
//!
//! - [`plot`]: PNG pictures of what was learned (training curve, error matrix, twiddles,
//!   spectrograms, filter taps).
//! - [`train`]: the [`Trainer`] that fits a butterfly to a target transform from random init
//!   (Adam, then matrix-free Levenberg–Marquardt), with checkpoints, TensorBoard and export.
//! - [`metrics`]: the rmse metric of Dao et al. (2019) and its floor.
//! - [`nn`]: the layers a model holds: the [`Butterfly`] (a Burn `Module`, log2(N) factors of
//!   N/2 complex 2×2 blocks after a permutation, with exact-FFT, identity and random
//!   initialisers) and products of K of them ([`ButterflyProduct`], the model class of the
//!   convolution and the real transforms), the [`SpectralLoss`] (and multi-resolution),
//!   [`FftConv1d`], Welch's PSD.
//! - [`backend`]: backend choice (wgpu, candle, ndarray, cuda) and one generic code path.
//! - [`ops`]: one slice per op ([`ops::butterfly`], [`ops::spectral`]): the backend-extension
//!   traits [`ButterflyOps`] and [`SpectralOps`], their tensor-op twins, and the fused CubeCL
//!   kernels behind them on wgpu and CUDA with their custom backward (the FFT convolution's fused
//!   path runs where no graph is recorded; under autodiff it takes its twin and Burn's gradient).
//! - [`reference`](mod@reference): f64 truth on the CPU (rustfft, rustdct, dense target matrices); [`error`],
//!   and [`memory`], the estimate every large allocation is checked against first.
//!
//! ## Complex numbers
//! Complex tensors are `(re, im)` pairs of real tensors of the same shape.
//!
//! ## Example
//! ```
//! use burn::backend::NdArray;
//! use burn::tensor::{Tensor, Distribution};
//! use learned_fft::{ButterflyConfig, Target};
//!
//! let device = Default::default();
//! // The exact unitary FFT of size 64.
//! let fft = ButterflyConfig::new(64).init::<NdArray<f64>>(&device)?;
//! let x = Tensor::<NdArray<f64>, 2>::random([3, 64], Distribution::Default, &device);
//! let (re, im) = fft.forward_real(x)?;
//! assert_eq!(re.dims(), [3, 64]);
//! let rmse = learned_fft::metrics::rmse(&fft, &Target::Dft.matrix(64)?)?;
//! assert!(rmse < 1e-15);
//! # Ok::<(), learned_fft::Error>(())
//! ```

#![warn(missing_docs)]

pub mod backend;
pub mod error;
pub mod files;
pub mod memory;
pub mod metrics;
pub mod nn;
pub mod ops;
pub mod plot;
pub mod reference;
mod tensors;
pub mod train;

pub use backend::{dispatch, BackendKind, BackendTask, FftBackend, Precision, Selected};
pub use error::{Error, Result};
pub use nn::{
    Butterfly, ButterflyConfig, ButterflyInit, ButterflyProduct, ButterflyProductConfig, ConvOutput, FftConv1d,
    FftConv1dConfig, FftSource, MultiResolutionSpectralLoss, MultiResolutionSpectralLossConfig, RelaxedPermutation,
    RelaxedPermutationConfig, SpectralLoss, SpectralLossConfig,
};
pub use ops::spectral::{Distance, Magnitude, Window};
pub use ops::{ButterflyOps, KernelChoice, Permutation, SpectralOps};
pub use reference::{ComplexMatrix, FftNorm, Target, TargetKind};
pub use tensors::{float_tensor, to_f64_vec};
pub use train::{TrainConfig, TrainReport, Trainer};

pub use burn;
