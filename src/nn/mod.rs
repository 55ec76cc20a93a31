//! The layers a model holds: the [`Butterfly`] (a learnable FFT) and products of them
//! ([`ButterflyProduct`]), [`ButterflyLinear`] in place of a dense `Linear`, a learnable
//! [`RelaxedPermutation`], the [`SpectralLoss`] and its multi-resolution sum, [`FftConv1d`], and
//! Welch's PSD with peak picking. They run on any
//! backend through the ops of [`crate::ops`].

pub mod butterfly;
pub mod class;
pub mod conv;
pub mod linear;
pub mod permutation;
pub mod product;
pub mod psd;
pub mod spectral;

pub use butterfly::{exact_fft, Butterfly, ButterflyConfig, ButterflyInit};
pub use class::{model_class, model_class_for, model_class_of_size, ModelChoice, ModelClass, PermutationSource};
pub use conv::{ConvOutput, FftConv1d, FftConv1dConfig, FftSource};
pub use linear::{ButterflyLinear, ButterflyLinearConfig, ButterflyLinearInit};
pub use permutation::{family_member, RelaxedPermutation, RelaxedPermutationConfig};
pub use product::{
    exact_product, product_forward, product_tangent, ButterflyProduct, ButterflyProductConfig, LinearTransform,
};
pub use psd::{top_k_peaks, welch_psd, welch_psd_with};
pub use spectral::{MultiResolutionSpectralLoss, MultiResolutionSpectralLossConfig, SpectralLoss, SpectralLossConfig};
