//! The reference (tensor-op) path for backends without custom kernels: ndarray and candle, plain
//! and under autodiff, where Burn's autodiff gives the gradient.
#![allow(deprecated)] // burn-candle 0.21 is marked deprecated; it still works.

use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::candle::{FloatCandleElement, IntCandleElement};
use burn::backend::ndarray::{FloatNdArrayElement, IntNdArrayElement, NdArrayTensor, QuantElement, SharedArray};
use burn::backend::{Autodiff, Candle, NdArray};

use crate::ops::{ButterflyOps, SpectralOps};

impl<E: FloatNdArrayElement, I: IntNdArrayElement, Q: QuantElement> ButterflyOps for NdArray<E, I, Q> where
    NdArrayTensor: From<SharedArray<E>> + From<SharedArray<I>>
{
}

impl<E: FloatNdArrayElement, I: IntNdArrayElement, Q: QuantElement, C: CheckpointStrategy> ButterflyOps
    for Autodiff<NdArray<E, I, Q>, C>
where
    NdArrayTensor: From<SharedArray<E>> + From<SharedArray<I>>,
{
}

#[allow(deprecated)]
impl<F: FloatCandleElement, I: IntCandleElement> ButterflyOps for Candle<F, I> {}

#[allow(deprecated)]
impl<F: FloatCandleElement, I: IntCandleElement, C: CheckpointStrategy> ButterflyOps for Autodiff<Candle<F, I>, C> {}

impl<E: FloatNdArrayElement, I: IntNdArrayElement, Q: QuantElement> SpectralOps for NdArray<E, I, Q> where
    NdArrayTensor: From<SharedArray<E>> + From<SharedArray<I>>
{
}

impl<E: FloatNdArrayElement, I: IntNdArrayElement, Q: QuantElement, C: CheckpointStrategy> SpectralOps
    for Autodiff<NdArray<E, I, Q>, C>
where
    NdArrayTensor: From<SharedArray<E>> + From<SharedArray<I>>,
{
}

#[allow(deprecated)]
impl<F: FloatCandleElement, I: IntCandleElement> SpectralOps for Candle<F, I> {}

#[allow(deprecated)]
impl<F: FloatCandleElement, I: IntCandleElement, C: CheckpointStrategy> SpectralOps for Autodiff<Candle<F, I>, C> {}
