//! Adam's update as one op: the moments and the parameter in one pass over each tensor.
//!
//! Burn's [`Adam`](burn::optim::Adam) takes some thirteen tensor ops per parameter tensor and
//! step (the two moments, the bias correction, the division, the step), each a kernel launch on
//! a GPU backend. The trainer's Adam steps are launch-bound (a butterfly of N = 1024 has 10 240
//! twiddles), so on the CubeCL backends [`AdamOps::adam_update`] is one fused kernel
//! (`kernel.rs`) and the tensor-op reference (the default method, Burn's formulas op for op) runs
//! everywhere else. The optimiser that calls it is
//! [`FusedAdam`](crate::train::optimizer::FusedAdam), whose state is Burn's
//! [`AdamState`](burn::optim::AdamState), so checkpoints are the same either way.

#[cfg(feature = "fused")]
mod cubecl;
#[cfg(feature = "fused")]
mod kernel;

use burn::tensor::{backend::Backend, Tensor};

/// The scalars of one Adam step: the hyperparameters (in f32, as Burn's `AdamConfig` holds
/// them), the step count after this step, and the learning rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamStep {
    /// Decay of the first moment.
    pub beta_1: f32,
    /// Decay of the second moment.
    pub beta_2: f32,
    /// Added to the second moment's square root (scaled by its bias correction, as Burn does).
    pub epsilon: f32,
    /// Steps taken, this one included (1 on the first step).
    pub time: usize,
    /// Learning rate.
    pub lr: f64,
}

impl AdamStep {
    /// `(√(1 − β₂ᵗ), √(1 − β₂ᵗ) / (1 − β₁ᵗ))`: the second moment's bias correction and the
    /// factor on the first moment, in f32 as Burn computes them.
    pub fn corrections(&self) -> (f32, f32) {
        let time = self.time as i32;
        let correction_2 = (1.0 - self.beta_2.powi(time)).sqrt();
        (correction_2, correction_2 / (1.0 - self.beta_1.powi(time)))
    }
}

/// A backend's Adam update (see the module docs).
pub trait AdamOps: Backend {
    /// One Adam step of `param` with gradient `grad` and moments `(m, v)` (`None` on the first
    /// step: both zero): returns the new parameter and moments,
    /// `m' = β₁ m + (1 − β₁) g`, `v' = β₂ v + (1 − β₂) g²`,
    /// `p' = p − lr · (c m') / (√v' + ε √(1 − β₂ᵗ))` with `c = √(1 − β₂ᵗ) / (1 − β₁ᵗ)`.
    ///
    /// The default is Burn's `Adam` op for op (its results to the bit); the CubeCL backends run
    /// one kernel per tensor.
    fn adam_update<const D: usize>(
        param: Tensor<Self, D>,
        grad: Tensor<Self, D>,
        moments: Option<(Tensor<Self, D>, Tensor<Self, D>)>,
        step: &AdamStep,
    ) -> (Tensor<Self, D>, Tensor<Self, D>, Tensor<Self, D>) {
        adam_update_reference(param, grad, moments, step)
    }
}

/// The tensor-op Adam update of [`AdamOps::adam_update`], on any backend: Burn's
/// `AdaptiveMomentum::transform` and `Adam::step` written out (no weight decay, no AMSGrad).
pub fn adam_update_reference<B: Backend, const D: usize>(
    param: Tensor<B, D>,
    grad: Tensor<B, D>,
    moments: Option<(Tensor<B, D>, Tensor<B, D>)>,
    step: &AdamStep,
) -> (Tensor<B, D>, Tensor<B, D>, Tensor<B, D>) {
    let (f1, f2) = (1.0 - step.beta_1, 1.0 - step.beta_2);
    let (m, v) = match moments {
        Some((m, v)) => (
            m.mul_scalar(step.beta_1).add(grad.clone().mul_scalar(f1)),
            v.mul_scalar(step.beta_2).add(grad.square().mul_scalar(f2)),
        ),
        None => (grad.clone().mul_scalar(f1), grad.square().mul_scalar(f2)),
    };
    let (correction_2, factor) = step.corrections();
    let update = m.clone().mul_scalar(factor).div(v.clone().sqrt().add_scalar(step.epsilon * correction_2));
    (param - update.mul_scalar(step.lr), m, v)
}
