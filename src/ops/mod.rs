//! Backend ops, one vertical slice per op: [`butterfly`] and [`spectral`]. Each slice holds its
//! backend-extension trait and value types (`mod.rs`), the tensor-op twin that runs on every
//! backend (`reference.rs`), the fused CubeCL kernels (`kernel/`), and the impls for the CubeCL
//! backends (`cubecl.rs`) and for Burn's autodiff over them (`autodiff.rs`, a custom
//! `Backward` per kernel). Beside them, [`collective`]: sums across devices, for data-parallel
//! training (no gradient: it runs on the inner backend, on gradients); and the trainer's two
//! small ops, [`adam`] (the Adam update, on the inner backend) and [`residual`] (the objective's
//! loss, one autodiff node), which a training step's launch count makes worth fusing.
//!
//! The CPU backends (ndarray and candle, plain or under autodiff) take every trait's default
//! methods: the reference twin, with its gradient from Burn's autodiff. No path lacks a
//! backward.

pub mod adam;
#[cfg(feature = "fused")]
mod autodiff;
pub mod butterfly;
pub mod collective;
#[cfg(feature = "fused")]
mod cubecl;
#[cfg(feature = "fused")]
pub(crate) mod onchip;
pub mod residual;
pub mod spectral;
#[cfg(feature = "fused")]
pub(crate) mod tuning;

pub use adam::AdamOps;
pub use butterfly::{ButterflyOps, Permutation};
pub use collective::CollectiveOps;
pub use residual::ResidualOps;
pub use spectral::SpectralOps;

use serde::{Deserialize, Serialize};

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

/// The reference path for backends without custom kernels: every op trait with its default
/// methods, for a backend and for `Autodiff` of it.
macro_rules! reference_backend {
    (impl<$($g:ident: $bound:path),*> $backend:ty $(where $($w:tt)*)?) => {
        impl<$($g: $bound),*> AdamOps for $backend $(where $($w)*)? {}
        impl<$($g: $bound),*> ButterflyOps for $backend $(where $($w)*)? {}
        impl<$($g: $bound),*> SpectralOps for $backend $(where $($w)*)? {}
        impl<$($g: $bound),*> ResidualOps for $backend $(where $($w)*)? {}
        impl<$($g: $bound),*> CollectiveOps for $backend $(where $($w)*)? {}
        impl<$($g: $bound,)* C: burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy> ButterflyOps
            for burn::backend::Autodiff<$backend, C> $(where $($w)*)? {}
        impl<$($g: $bound,)* C: burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy> SpectralOps
            for burn::backend::Autodiff<$backend, C> $(where $($w)*)? {}
        impl<$($g: $bound,)* C: burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy> ResidualOps
            for burn::backend::Autodiff<$backend, C> $(where $($w)*)? {}
    };
}

mod reference_backends {
    use burn::backend::ndarray::{FloatNdArrayElement, IntNdArrayElement, NdArrayTensor, QuantElement, SharedArray};
    use burn::backend::NdArray;

    use super::{AdamOps, ButterflyOps, CollectiveOps, ResidualOps, SpectralOps};

    reference_backend!(impl<E: FloatNdArrayElement, I: IntNdArrayElement, Q: QuantElement> NdArray<E, I, Q>
        where NdArrayTensor: From<SharedArray<E>> + From<SharedArray<I>>);

    #[cfg(feature = "candle")]
    #[allow(deprecated)] // burn-candle 0.21 is marked deprecated; it still works.
    mod candle {
        use burn::backend::candle::{FloatCandleElement, IntCandleElement};
        use burn::backend::Candle;

        use super::super::{AdamOps, ButterflyOps, CollectiveOps, ResidualOps, SpectralOps};

        reference_backend!(impl<F: FloatCandleElement, I: IntCandleElement> Candle<F, I>);
    }
}
