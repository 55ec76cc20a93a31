//! # learned-fft
//!
//! Learn the FFT as a butterfly network on [Burn](https://burn.dev).
//!
//! - [`butterfly`]: the [`Butterfly`] layer (a Burn `Module`), log2(N) factors of N/2 complex
//!   2×2 blocks after a fixed permutation, with exact-FFT, identity and random initialisers.
//! - [`reference`]: f64 truth on the CPU (rustfft, rustdct, dense target matrices).
//! - [`metrics`]: the rmse metric of Dao et al. (2019) and its floor.
//! - [`backend`]: backend choice (wgpu, candle, ndarray, cuda) and one generic code path.
//! - [`train`]: the [`Trainer`] that fits the layer to a target transform from random init
//!   (Adam, then matrix-free Levenberg–Marquardt), with checkpoints, TensorBoard and export.
//! - [`spectral`]: the spectral loss ([`SpectralLoss`], multi-resolution), fused on wgpu/CUDA.
//! - [`conv`]: [`conv::FftConv1d`], depthwise convolution through a (trained) butterfly FFT;
//!   [`psd`]: Welch's PSD and peak picking on the butterfly FFT.
//! - [`ops`]: the backend-extension traits [`ButterflyOps`] and [`SpectralOps`]; [`kernels`]
//!   the fused CubeCL kernels behind them on wgpu and CUDA, [`backends`] the per-backend
//!   implementations.
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

pub mod backend;
pub mod backends;
pub mod bench;
pub mod butterfly;
pub mod conv;
pub mod error;
pub mod kernels;
pub mod metrics;
pub mod ops;
pub mod psd;
pub mod reference;
pub mod spectral;
pub mod tensors;
pub mod train;

pub use backend::{dispatch, BackendKind, BackendTask, FftBackend, Precision, Selected};
pub use ops::{ButterflyOps, KernelChoice, SpectralOps};
pub use butterfly::{Butterfly, ButterflyConfig, ButterflyInit, Permutation};
pub use spectral::{MultiResolutionSpectralLoss, MultiResolutionSpectralLossConfig, SpectralLoss, SpectralLossConfig};
pub use error::{Error, Result};
pub use train::{TrainConfig, TrainReport, Trainer};
pub use reference::{ComplexMatrix, FftNorm, Target};

pub use burn;
