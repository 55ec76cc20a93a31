//! Training a butterfly, or a product of butterflies, to reproduce a target transform from
//! random weights.
//!
//! The model is the target's class ([`crate::nn::model_class`]): a
//! [`crate::nn::ButterflyProduct`] of K (permutation, butterfly) factors (K = 1 for the DFT, the
//! iDFT and the Hadamard transform, 2 for the circulant; for the Hartley transform, the DCT-II
//! and the DST-II one factor and the pairing `M = C S C`, whose permutations `C` are fixed stages
//! and whose one stage `S` is learned). With one factor, the permutation is found from the
//! target's matrix ([`crate::reference::identify`]: the bit reversal for the DFT, the identity
//! for the Hadamard transform, any permutation for a matrix of that class); so does the first
//! factor of the Hartley transform, DCT-II and DST-II, under its pairing's pattern, while the
//! circulant keeps the bit reversals of its exact factorization. A product chosen with `--model`
//! ([`crate::nn::ModelChoice`]) whose first permutation no generic method finds from the matrix
//! learns it by gradient descent with the class's own butterflies behind it
//! ([`permutation::learn_permutation`]; at the bottom of a grown chain, of those the doubling
//! carries up, [`permutation::carried_up`]: the bit reversal or the identity
//! ([`permutation::choose_doubling`]), else another self-similar member). The first factor starts from
//! Haar-random unitary blocks, the others' learned stages near the identity (the circulant's
//! Haar-random too); Adam's gradients and the polish's steps leave the fixed stages exactly as
//! they are.
//!
//! **Growing** ([`TrainConfig::grow_above`]): above 4096 for one butterfly and above 4 for the
//! circulant, a run first trains the target halved at N/2 (itself grown the same way) and starts
//! from that layer doubled: one butterfly with a random last stage, straight into the polish; the
//! circulant's first attempt of a block from the layer grown by the targets' eigenstructure
//! ([`crate::reference::growth`], exact to rounding from a half-size layer at its bar), straight
//! into the polish, and otherwise with random last stages and Adam first.
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
pub use config::TrainConfig;
pub use observer::{AttemptLog, Observer, Progress};
pub use state::{Phase, TrainState};
pub use trainer::{TrainReport, Trainer, HALF_REUSE};
