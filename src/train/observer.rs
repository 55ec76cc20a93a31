//! What a run tells its watcher: a [`Progress`] record every `log_every` steps, sent to an
//! [`Observer`] (a progress bar, a logger, a test's recorder).

use serde::{Deserialize, Serialize};

use super::config::TrainConfig;
use super::state::Phase;
use crate::backend::Selected;

/// One progress record, sent to the [`Observer`] every `log_every` steps and at phase changes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Steps done (all phases).
    pub step: usize,
    /// Current phase.
    pub phase: Phase,
    /// Attempt number (restarts).
    pub attempt: usize,
    /// Loss: mean squared error over the matrix entries, as computed on the device.
    pub loss: f64,
    /// √loss: the rmse as the device measures it.
    pub rmse: f64,
    /// The same measure for the exact butterfly on this device and dtype (DFT and iDFT only).
    pub floor: Option<f64>,
    /// Adam's learning rate (Adam phase only).
    pub lr: Option<f64>,
    /// Seconds of training so far (summed over resumed runs).
    pub seconds: f64,
}

/// Receives progress while training runs (a progress bar, a logger). `()` ignores everything.
pub trait Observer {
    /// Called with the backend and the step training starts from.
    fn start(&mut self, _selected: &Selected, _config: &TrainConfig, _start_step: usize) {}
    /// Called every `log_every` steps and at phase changes.
    fn progress(&mut self, _p: &Progress) {}
}

impl Observer for () {}
