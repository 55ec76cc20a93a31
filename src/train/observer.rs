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
    /// A record of the f64 polish that finds an f32 attempt's own floor
    /// ([`TrainConfig::own_floor`]), from where the attempt's polish ended: its `step` counts
    /// that polish's steps from 0 (the f32 run's steps do not move meanwhile), its `rmse` is
    /// f64's, and it has no `floor`. Not kept in the run's history or TensorBoard logs.
    #[serde(default)]
    pub finding_floor: bool,
}

/// Receives progress while training runs (a progress bar, a logger). `()` ignores everything.
pub trait Observer {
    /// Called with the backend and the step training starts from.
    fn start(&mut self, _selected: &Selected, _config: &TrainConfig, _start_step: usize) {}
    /// Called every `log_every` steps and at phase changes.
    fn progress(&mut self, _p: &Progress) {}
    /// Called, in f32, as the f64 polish that finds an attempt's own floor
    /// ([`TrainConfig::own_floor`]) starts, with the backend it runs on (the run's own where
    /// that computes in f64; ndarray for wgpu, which has none). Its records follow, marked
    /// [`Progress::finding_floor`].
    fn finding_floor(&mut self, _selected: &Selected) {}
}

impl Observer for () {}

/// The observer of the f64 polish that finds an f32 attempt's own floor: its start is told as
/// [`Observer::finding_floor`] (it is not a run the user started), and its records are handed
/// on marked [`Progress::finding_floor`], so a display tells them from the run's own (they
/// count their own steps, in f64).
pub(super) struct FindingFloor<'a>(pub &'a mut dyn Observer);

impl Observer for FindingFloor<'_> {
    fn start(&mut self, selected: &Selected, _config: &TrainConfig, _start_step: usize) {
        self.0.finding_floor(selected);
    }

    fn progress(&mut self, p: &Progress) {
        self.0.progress(&Progress { finding_floor: true, floor: None, ..p.clone() });
    }
}

/// One attempt of a run as its progress records saw it ([`crate::train::TrainReport::attempt_log`]):
/// where its Adam phase ended and where its polish left it, which says why a run needed
/// restarts (or missed its bar). Steps are those of the records, so within `log_every` of the
/// exact ones.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttemptLog {
    /// The attempt (0 first).
    pub attempt: usize,
    /// The step of its first record.
    pub first_step: usize,
    /// The step of its first polish record (`None`: no polish recorded).
    pub polish_step: Option<usize>,
    /// The step of its last record.
    pub last_step: usize,
    /// The device's rmse at its last Adam record (`None`: no Adam recorded, as for a layer grown
    /// straight into the polish).
    pub adam_rmse: Option<f64>,
    /// The device's rmse at its last record.
    pub rmse: f64,
}

impl AttemptLog {
    /// The attempts of `history` (records in step order, as a run keeps them), one entry each.
    pub fn from_history(history: &[Progress]) -> Vec<AttemptLog> {
        let mut logs: Vec<AttemptLog> = Vec::new();
        for p in history {
            if logs.last().is_none_or(|log| log.attempt != p.attempt) {
                logs.push(AttemptLog {
                    attempt: p.attempt,
                    first_step: p.step,
                    polish_step: None,
                    last_step: p.step,
                    adam_rmse: None,
                    rmse: p.rmse,
                });
            }
            let Some(log) = logs.last_mut() else { continue };
            match p.phase {
                Phase::Adam => log.adam_rmse = Some(p.rmse),
                Phase::Polish => {
                    log.polish_step.get_or_insert(p.step);
                }
                Phase::Done => {}
            }
            log.last_step = p.step;
            log.rmse = p.rmse;
        }
        logs
    }
}
