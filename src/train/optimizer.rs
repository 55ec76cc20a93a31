//! The trainer's optimiser: Adam with its update as one backend op per parameter tensor
//! ([`AdamOps::adam_update`], one kernel on the GPU backends), and Burn's own state.

use burn::optim::{AdamState, AdaptiveMomentumState, LearningRate, SimpleOptimizer};
use burn::tensor::{backend::Backend, Tensor};

use crate::ops::adam::{AdamOps, AdamStep};

/// Adam (no weight decay, no AMSGrad) with Burn's defaults β₁ = 0.9, β₂ = 0.999, and the
/// trainer's ε. The same arithmetic as Burn's [`burn::optim::Adam`] (on the CPU backends to the
/// bit) and the same state record, so a checkpoint written with either resumes with either.
#[derive(Clone, Debug)]
pub struct FusedAdam {
    beta_1: f32,
    beta_2: f32,
    epsilon: f32,
}

impl FusedAdam {
    /// Adam with β₁ = 0.9, β₂ = 0.999 and `epsilon`.
    pub fn new(epsilon: f32) -> Self {
        FusedAdam { beta_1: 0.9, beta_2: 0.999, epsilon }
    }
}

impl<B: Backend + AdamOps> SimpleOptimizer<B> for FusedAdam {
    type State<const D: usize> = AdamState<B, D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<B, D>,
        grad: Tensor<B, D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<B, D>, Option<Self::State<D>>) {
        let (time, moments) = match state {
            Some(AdamState { momentum }) => (momentum.time + 1, Some((momentum.moment_1, momentum.moment_2))),
            None => (1, None),
        };
        let step = AdamStep { beta_1: self.beta_1, beta_2: self.beta_2, epsilon: self.epsilon, time, lr };
        let (tensor, moment_1, moment_2) = B::adam_update(tensor, grad, moments, &step);
        let momentum = AdaptiveMomentumState { time, moment_1, moment_2, max_moment_2: None };
        (tensor, Some(AdamState { momentum }))
    }

    fn to_device<const D: usize>(mut state: Self::State<D>, device: &B::Device) -> Self::State<D> {
        state.momentum.moment_1 = state.momentum.moment_1.to_device(device);
        state.momentum.moment_2 = state.momentum.moment_2.to_device(device);
        state
    }
}
