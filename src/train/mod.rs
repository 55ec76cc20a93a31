//! Training a butterfly to reproduce a target transform from random weights.
//!
//! # Method
//! 1. **Adam** (cosine learning-rate decay) on the identity-basis loss
//!    ([`objective`]: mean |M(θ) − T|² over the N×N entries, the square of the rmse metric)
//!    from Haar-random unitary blocks, until the rmse reaches `switch_rmse`; an attempt that
//!    does not get there within `adam_steps` is restarted from new random weights.
//! 2. **Levenberg–Marquardt** ([`lm`]), matrix-free with conjugate gradients, on every
//!    twiddle until the loss stops falling (the float type's precision) or `stop_rmse`.
//! 3. **Gauge fixing** ([`gauge`]): the twiddles are rescaled, without changing the product, so
//!    that every block of every factor but the last has first column (1, 1), where f32 rounding
//!    costs least; a second Levenberg–Marquardt polish trains the other entries until the loss
//!    stops falling again (`fix_gauge = false` skips this stage).
//!
//! In f32 the loss is formed against the target split into an f32 value and its f32 rounding
//! remainder, so the optimiser sees the true error of its own f32 arithmetic down to and below
//! the floor; nothing on the device is f64. The host reads losses to decide and to log; the
//! final rmse and floor in the [`TrainReport`] are measured afterwards against the f64 target.

mod adam;
pub mod checkpoint;
pub mod config;
pub mod export;
pub mod gauge;
pub mod lm;
pub mod logging;
pub mod objective;
mod observer;
mod polish;
mod run;
pub mod state;
mod trainer;

pub use checkpoint::{Checkpoint, DirLock};
pub use config::TrainConfig;
pub use observer::{Observer, Progress};
pub use state::{Phase, TrainState};
pub use trainer::{TrainReport, Trainer};
