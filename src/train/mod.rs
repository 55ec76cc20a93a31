//! Training a butterfly, or a product of butterflies, to reproduce a target transform from
//! random weights.
//!
//! The model is the run's class ([`TrainConfig::class`], Dao et al.'s generic classes,
//! [`crate::nn::ModelChoice`]): a [`crate::nn::ButterflyProduct`] of K (permutation, butterfly)
//! factors with every stage learned. By default one (BP) for the DFT, the iDFT, the Hadamard
//! transform and a user's target, two (BPBP) for the Hartley transform, the DCT-II, the DST-II
//! and the circulant ([`default_class`]). With one factor, the permutation is found from the
//! target's matrix ([`crate::reference::identify`]: the bit reversal for the DFT, the identity
//! for the Hadamard transform, any permutation for a matrix of that class). A product's first
//! permutation, which no generic method finds from the matrix, is learned by gradient descent
//! with the class's own butterflies behind it ([`permutation::learn_permutation`]; at the
//! bottom of a grown chain, of those the doubling carries up, [`permutation::carried_up`]: the
//! bit reversal or the identity ([`permutation::choose_doubling`]), else another self-similar
//! member). Every factor starts from Haar-random unitary blocks. The exact factorizations
//! ([`crate::reference::factorizations`]) are the truth the report's floor is measured against,
//! never the model or its start.
//!
//! **Growing** ([`TrainConfig::grow_above`]): above 4096 for one butterfly and above the bottom
//! of a product's chain (16 for the circulant, 32 for the DCT-II and DST-II, 64 for the Hartley
//! transform), a run first trains the target halved at N/2 (itself grown the same way) and
//! starts from that layer doubled with random last stages: one butterfly straight into the
//! polish, a product with Adam first.
//!
//! # Method
//! 1. **Adam** (cosine learning-rate decay) on the identity-basis loss
//!    ([`objective`]: mean |M(θ) − T|² over the N×N entries, the square of the rmse metric)
//!    until the rmse reaches `switch_rmse` or the attempt has taken `adam_steps`.
//! 2. **Levenberg–Marquardt** ([`lm`]), matrix-free with conjugate gradients, on every
//!    twiddle until the loss stops falling (the float type's precision) or `stop_rmse`.
//! 3. **Gauge fixing** ([`gauge`]): the twiddles are rescaled, without changing the product, so
//!    that every block row of every learned stage but the last has its pivot exactly 1 (for the DFT the
//!    textbook `[[1, w], [1, −w]]`), where f32 rounding costs least; a second
//!    Levenberg–Marquardt polish trains the other entries until the loss stops falling again
//!    (`fix_gauge = false` skips this stage).
//!
//! A polish that stalls above the bar (a local minimum) starts the run again from new random
//! weights, `restarts` times at most; a run that ends above its bar says so in its report.
//!
//! In f32 the loss is formed against the target split into an f32 value and its f32 rounding
//! remainder, so the optimiser sees the true error of its own f32 arithmetic down to and below
//! the floor; nothing on the device is f64. The host reads losses to decide and to log; the
//! final rmse and floor in the [`TrainReport`] are measured afterwards against the f64 target.

mod adam;
mod attempt;
mod chain;
pub mod checkpoint;
pub mod config;
pub mod export;
pub mod gauge;
pub mod lm;
pub mod logging;
pub mod objective;
mod observer;
pub mod optimizer;
pub mod permutation;
mod polish;
mod run;
pub mod state;
mod trainer;

pub use crate::metrics::FloorSource;
pub use attempt::{block_start, PLATEAU_OVER_SWITCH};
pub use checkpoint::{Checkpoint, DirLock};
pub use config::{default_class, TrainConfig};
pub use observer::{AttemptLog, Observer, Progress};
pub use state::{Level, Phase, TrainState};
pub use trainer::{TrainReport, Trainer, HALF_REUSE};
