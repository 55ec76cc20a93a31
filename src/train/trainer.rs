//! The trainer's API: [`Trainer`], its [`TrainReport`], and the [`Observer`] of its progress.
//! The run itself is [`super::run`]; its phases are [`super::adam`] and [`super::polish`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Serialize;

use super::checkpoint::{Phase, CHECKPOINT_FILE};
use super::config::TrainConfig;
use super::objective::scalar;
use super::run::Run;
use crate::backend::{dispatch, BackendKind, BackendTask, FftBackend, Precision, Selected};
use crate::error::Result;
use crate::metrics;
use crate::nn::Butterfly;
use crate::reference::Target;

/// One progress record, sent to the [`Observer`] every `log_every` steps and at phase changes.
#[derive(Clone, Debug, Serialize)]
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
    /// Seconds since this run started.
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

/// The outcome of a run. The rmse and floor here are the f64 metric of [`crate::metrics`],
/// computed after training from the layer's matrix on its backend.
#[derive(Clone, Debug, Serialize)]
pub struct TrainReport {
    /// Transform size.
    pub n: usize,
    /// Target transform.
    pub target: Target,
    /// The backend, precision and device used.
    pub backend: Selected,
    /// Seed of the attempt that produced the result.
    pub seed: u64,
    /// Attempts made (1 + restarts used).
    pub attempts: usize,
    /// Steps done in total.
    pub steps: usize,
    /// Seconds of training (summed over resumed runs; excludes the final evaluation).
    pub seconds: f64,
    /// The step this run resumed from, if it resumed.
    pub resumed_from: Option<usize>,
    /// Final loss on the device.
    pub loss: f64,
    /// rmse against the f64 target.
    pub rmse: f64,
    /// The floor (DFT and iDFT only).
    pub floor: Option<f64>,
    /// rmse / floor.
    pub rmse_over_floor: Option<f64>,
    /// Whether the twiddles are in the fixed gauge (first columns 1).
    pub gauge_fixed: bool,
    /// The checkpoint written at the end, if any.
    pub checkpoint: Option<String>,
}

/// Trains a [`Butterfly`] to reproduce a target transform (see [`crate::train`]).
#[derive(Clone, Debug)]
pub struct Trainer {
    config: TrainConfig,
    resume: bool,
    stop: Option<Arc<AtomicBool>>,
}

impl Trainer {
    /// A trainer for `config` (checked here).
    pub fn new(config: TrainConfig) -> Result<Self> {
        config.validate()?;
        Ok(Trainer { config, resume: false, stop: None })
    }

    /// Continue from `<checkpoint_dir>/checkpoint.lfft` (optimiser state and step counter
    /// included) instead of starting afresh.
    pub fn with_resume(mut self, resume: bool) -> Self {
        self.resume = resume;
        self
    }

    /// A flag that asks the run to stop: once it is set (by a signal handler, another thread),
    /// the run finishes its current step, writes a checkpoint (with a checkpoint directory) and
    /// returns [`crate::Error::Interrupted`]. The binary sets it on SIGTERM and SIGINT.
    pub fn with_stop_flag(mut self, stop: Arc<AtomicBool>) -> Self {
        self.stop = Some(stop);
        self
    }

    /// Whether a stop was asked for.
    pub(super) fn stop_asked(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst))
    }

    /// The config.
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// The running checkpoint's path, when checkpoints are on.
    pub fn checkpoint_path(&self) -> Option<PathBuf> {
        self.config.checkpoint_dir.as_ref().map(|d| Path::new(d).join(CHECKPOINT_FILE))
    }

    /// Trains on the named backend and precision (resolving `auto`, see
    /// [`crate::backend::dispatch`]).
    pub fn run(&self, backend: BackendKind, precision: Precision, observer: &mut dyn Observer) -> Result<TrainReport> {
        struct Task<'a>(&'a Trainer, &'a mut dyn Observer);
        impl BackendTask for Task<'_> {
            type Output = TrainReport;
            fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> Result<TrainReport> {
                self.0.run_on::<B>(&device, selected, self.1).map(|(_, report)| report)
            }
        }
        dispatch(backend, precision, Task(self, observer))
    }

    /// Whether the run continues from the checkpoint directory.
    pub(super) fn resumes(&self) -> bool {
        self.resume
    }

    /// Trains on backend `B` and returns the trained layer with the report.
    pub fn run_on<B: FftBackend>(
        &self,
        device: &B::Device,
        selected: &Selected,
        observer: &mut dyn Observer,
    ) -> Result<(Butterfly<B>, TrainReport)> {
        let mut run = Run::<B>::start(self, device, observer)?;
        run.announce(selected);
        run.adam()?;
        run.polish()?;
        finish(run, selected)
    }
}

/// The last checkpoint, and the report: the final loss on the device, and the f64 metric.
fn finish<B: FftBackend>(mut run: Run<'_, B>, selected: &Selected) -> Result<(Butterfly<B>, TrainReport)> {
    let theta = run.twiddles();
    let loss = scalar(run.inner_objective.loss(theta.re, theta.im, run.perm));
    run.state.seconds = run.seconds();
    run.save()?;
    let (cfg, device) = (run.cfg, run.device);
    let ended = run.close()?;
    let (layer, state) = (ended.layer, ended.state);
    let n = cfg.n;
    let rmse = metrics::rmse(&layer, &cfg.target.matrix(n)?)?;
    let floor = metrics::floor::<B>(n, &cfg.target, device)?;
    let report = TrainReport {
        n,
        target: cfg.target.clone(),
        backend: selected.clone(),
        seed: cfg.seed + state.attempt as u64,
        attempts: state.attempt + 1,
        steps: state.step,
        seconds: state.seconds,
        resumed_from: ended.resumed_from,
        loss,
        rmse,
        floor,
        rmse_over_floor: floor.map(|f| rmse / f),
        gauge_fixed: state.gauge_fixed,
        checkpoint: ended.checkpoint.map(|p| p.display().to_string()),
    };
    Ok((layer, report))
}
