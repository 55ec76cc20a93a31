//! The layers a model holds: the [`Butterfly`] (a learnable FFT), the [`SpectralLoss`] and its
//! multi-resolution sum, [`FftConv1d`], and Welch's PSD with peak picking. They run on any
//! backend through the ops of [`crate::ops`].

pub mod butterfly;
pub mod conv;
pub mod psd;
pub mod spectral;

pub use butterfly::{exact_butterfly, exact_fft, target_permutation, Butterfly, ButterflyConfig, ButterflyInit};
pub use conv::{ConvOutput, FftConv1d, FftConv1dConfig, FftSource};
pub use psd::{top_k_peaks, welch_psd, welch_psd_with};
pub use spectral::{MultiResolutionSpectralLoss, MultiResolutionSpectralLossConfig, SpectralLoss, SpectralLossConfig};
