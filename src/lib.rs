// The crate documentation is the README: its Rust snippets run as doctests, so the front page
// cannot drift from the code.
#![doc = include_str!("../README.md")]
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
    Butterfly, ButterflyConfig, ButterflyInit, ButterflyLinear, ButterflyLinearConfig, ButterflyLinearInit,
    ButterflyProduct, ButterflyProductConfig, ConvOutput, FftConv1d, FftConv1dConfig, FftSource,
    MultiResolutionSpectralLoss, MultiResolutionSpectralLossConfig, RelaxedPermutation, RelaxedPermutationConfig,
    SpectralLoss, SpectralLossConfig,
};
pub use ops::spectral::{Distance, Magnitude, Window};
pub use ops::{AdamOps, ButterflyOps, CollectiveOps, KernelChoice, Permutation, ResidualOps, SpectralOps};
pub use reference::{ComplexMatrix, DataTarget, FftNorm, MatrixTarget, Operator, OperatorTarget, Target, TargetKind};
pub use tensors::{float_tensor, to_f64_vec};
pub use train::{TrainConfig, TrainReport, Trainer};

pub use burn;

/// The guide's Rust snippets, compiled and run as doctests like the README's, so the guide
/// cannot drift from the code either.
#[cfg(doctest)]
mod guide {
    #[doc = include_str!("../docs/guide/layers.md")]
    struct Layers;
    #[doc = include_str!("../docs/guide/models.md")]
    struct Models;
    #[doc = include_str!("../docs/guide/spectral-loss.md")]
    struct SpectralLoss;
    #[doc = include_str!("../docs/guide/training.md")]
    struct Training;
}
