//! The training loop: Adam from random weights, gauge fixing, Levenberg–Marquardt polish;
//! restarts, checkpoints, resume, TensorBoard.

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::module::Param;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::Tensor;
use serde::Serialize;

use super::checkpoint::{self, Checkpoint, Phase, TrainState, CHECKPOINT_FILE, CONFIG_FILE};
use super::config::TrainConfig;
use super::gauge::{fix_gauge, gauge_mask};
use super::logging::TensorBoard;
use super::objective::{scalar, Objective};
use super::polish::{Polish, PolishSettings, Twiddles};
use crate::backend::{dispatch, BackendTask, FftBackend, Selected};
use crate::error::{Error, Result};
use crate::metrics;
use crate::nn::{exact_fft, Butterfly, ButterflyConfig, ButterflyInit};
use crate::reference::Target;

/// The initial log2 of the Levenberg–Marquardt damping.
const INITIAL_LOG2_LAMBDA: i32 = -10;

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
}

impl Trainer {
    /// A trainer for `config` (checked here).
    pub fn new(config: TrainConfig) -> Result<Self> {
        config.validate()?;
        Ok(Trainer { config, resume: false })
    }

    /// Continue from `<checkpoint_dir>/checkpoint.lfft` (optimiser state and step counter
    /// included) instead of starting afresh.
    pub fn with_resume(mut self, resume: bool) -> Self {
        self.resume = resume;
        self
    }

    /// The config.
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// The running checkpoint's path, when checkpoints are on.
    pub fn checkpoint_path(&self) -> Option<PathBuf> {
        self.config.checkpoint_dir.as_ref().map(|d| Path::new(d).join(CHECKPOINT_FILE))
    }

    /// Trains on the backend the config names (resolving `auto`).
    pub fn run(&self, observer: &mut dyn Observer) -> Result<TrainReport> {
        struct Task<'a>(&'a Trainer, &'a mut dyn Observer);
        impl BackendTask for Task<'_> {
            type Output = TrainReport;
            fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> Result<TrainReport> {
                self.0.run_on::<B>(&device, selected, self.1).map(|(_, report)| report)
            }
        }
        dispatch(self.config.backend, self.config.precision, Task(self, observer))
    }

    /// Trains on backend `B` and returns the trained layer with the report.
    pub fn run_on<B: FftBackend>(
        &self,
        device: &B::Device,
        selected: &Selected,
        observer: &mut dyn Observer,
    ) -> Result<(Butterfly<B>, TrainReport)> {
        let cfg = &self.config;
        let n = cfg.n;
        let log_n = cfg.validate()?;
        let objective = Objective::<B>::new(&cfg.target, n, device)?;
        let inner_objective = Objective::<B::InnerBackend>::new(&cfg.target, n, device)?;
        let new_optim = || AdamConfig::new().with_epsilon(1e-8).init::<B, Butterfly<B>>();
        let fresh = |attempt: usize| -> Result<Butterfly<B>> {
            ButterflyConfig::new(n)
                .with_init(ButterflyInit::RandomUnitary { seed: cfg.seed + attempt as u64 })
                .init::<B>(device)
        };
        // The floor as the device measures it (for progress only; the report uses the f64 metric).
        let floor_device = match cfg.target {
            Target::Dft | Target::Idft => {
                let exact = exact_fft::<B::InnerBackend>(n, cfg.target == Target::Idft, device)?;
                Some(
                    scalar(inner_objective.loss(exact.twiddle_re.val(), exact.twiddle_im.val(), exact.permutation()))
                        .sqrt(),
                )
            }
            _ => None,
        };

        let ckpt_path = self.checkpoint_path();
        let (mut layer, mut optim, mut state, resumed_from) = if self.resume {
            let path =
                ckpt_path.clone().ok_or_else(|| Error::invalid("train.resume", "a checkpoint directory", "none"))?;
            let ckpt = Checkpoint::read(&path)?;
            check_compatible(&ckpt.config, cfg)?;
            let layer = ckpt.layer::<B>(device)?;
            let mut optim = new_optim();
            // Burn 0.21 decodes records in the device's default float dtype, which is fixed per
            // device for the whole process: if this process already used the device at the other
            // precision, Adam's state would come back in the wrong dtype.
            let default_dtype = Tensor::<B, 1>::zeros([1], device).dtype();
            let own = <B::FloatElem as burn::tensor::Element>::dtype();
            if ckpt.state.phase == Phase::Adam && default_dtype != own {
                return Err(Error::invalid(
                    "train.resume",
                    format!("a process whose default float type on this device is {own:?} (Burn keeps one per device)"),
                    format!("{default_dtype:?}; resume in a new process"),
                ));
            }
            if let Some(record) = ckpt.optimizer_record::<B, _>(device)? {
                optim = optim.load_record(record);
            }
            let step = ckpt.state.step;
            (layer, optim, ckpt.state, Some(step))
        } else {
            let state = TrainState {
                step: 0,
                attempt: 0,
                attempt_step: 0,
                phase: Phase::Adam,
                log2_lambda: INITIAL_LOG2_LAMBDA,
                gauge_fixed: false,
                stalled: 0,
                seconds: 0.0,
            };
            (fresh(0)?, new_optim(), state, None)
        };
        if let Some(dir) = &cfg.checkpoint_dir {
            let json = serde_json::to_vec_pretty(cfg)
                .map_err(|e| Error::invalid("train", "a config that encodes as JSON", e))?;
            checkpoint::write_atomic(&Path::new(dir).join(CONFIG_FILE), &json)?;
        }
        let mut tb = cfg.log_dir.as_ref().map(TensorBoard::open).transpose()?;
        observer.start(selected, cfg, state.step);
        let clock = Instant::now();
        let base_seconds = state.seconds;
        let perm = layer.permutation();
        let mut last_ckpt = resumed_from;
        let stop_rmse = cfg.stop_rmse.unwrap_or(0.0);

        let report_progress = |p: Progress, tb: &mut Option<TensorBoard>, observer: &mut dyn Observer| -> Result<()> {
            observer.progress(&p);
            if let Some(tb) = tb.as_mut() {
                let mut v = vec![("loss", p.loss), ("rmse", p.rmse)];
                if let Some(f) = p.floor {
                    v.push(("floor", f));
                }
                if let Some(lr) = p.lr {
                    v.push(("lr", lr));
                }
                tb.scalars(p.step, &v)?;
            }
            Ok(())
        };
        let save = |state: &mut TrainState,
                    layer: &Butterfly<B>,
                    optim: Option<Vec<u8>>,
                    last: &mut Option<usize>|
         -> Result<()> {
            if let Some(path) = &ckpt_path {
                state.seconds = base_seconds + clock.elapsed().as_secs_f64();
                checkpoint::write(path, cfg, state, layer, optim)?;
                *last = Some(state.step);
            }
            Ok(())
        };
        let due = |state: &TrainState, last: Option<usize>| {
            ckpt_path.is_some() && state.step.is_multiple_of(cfg.checkpoint_every) && last != Some(state.step)
        };

        // Phase 1: Adam from random weights, with restarts.
        while state.phase == Phase::Adam {
            if state.attempt_step >= cfg.adam_steps {
                if state.attempt < cfg.restarts {
                    state.attempt += 1;
                    state.attempt_step = 0;
                    layer = fresh(state.attempt)?;
                    optim = new_optim();
                    continue;
                }
                state.phase = Phase::Polish;
                state.attempt_step = 0;
                break;
            }
            let loss = objective.loss(layer.twiddle_re.val(), layer.twiddle_im.val(), perm);
            let value = scalar(loss.clone());
            if !value.is_finite() {
                return Err(Error::Diverged { what: "loss", value, step: state.step });
            }
            let rmse = value.sqrt();
            let lr = cfg.lr_at(state.attempt_step);
            let switching = rmse <= cfg.switch_rmse || rmse <= stop_rmse;
            if state.step % cfg.log_every == 0 || switching {
                let p = Progress {
                    step: state.step,
                    phase: Phase::Adam,
                    attempt: state.attempt,
                    loss: value,
                    rmse,
                    floor: floor_device,
                    lr: Some(lr),
                    seconds: clock.elapsed().as_secs_f64(),
                };
                report_progress(p, &mut tb, observer)?;
            }
            if switching {
                state.phase = if rmse <= stop_rmse { Phase::Done } else { Phase::Polish };
                state.attempt_step = 0;
                break;
            }
            if due(&state, last_ckpt) {
                let record = checkpoint::record_bytes::<B, _>(optim.to_record())?;
                save(&mut state, &layer, Some(record), &mut last_ckpt)?;
            }
            let grads = GradientsParams::from_grads(loss.backward(), &layer);
            layer = optim.step(lr, layer, grads);
            state.step += 1;
            state.attempt_step += 1;
        }

        // Phase 2: Levenberg–Marquardt on every twiddle; then the gauge is fixed and LM polishes
        // the free twiddles of the fixed gauge.
        if state.phase == Phase::Polish {
            let settings = PolishSettings {
                cg_iters: cfg.cg_iters,
                cg_tol: cfg.cg_tol,
                stop_loss: stop_rmse * stop_rmse,
                max_stalled: cfg.max_stalled,
            };
            loop {
                let theta = Twiddles { re: layer.twiddle_re.val().inner(), im: layer.twiddle_im.val().inner() };
                let mask = if state.gauge_fixed {
                    gauge_mask::<B::InnerBackend>(log_n, n / 2, device)
                } else {
                    theta.re.ones_like()
                };
                let mut polish =
                    Polish::<B>::new(&inner_objective, perm, theta, mask, state.log2_lambda, state.stalled);
                if !polish.loss.is_finite() {
                    return Err(Error::Diverged { what: "loss", value: polish.loss, step: state.step });
                }
                loop {
                    let done = polish.done(&settings) || state.attempt_step >= cfg.polish_iters;
                    if state.step % cfg.log_every == 0 || done {
                        let p = Progress {
                            step: state.step,
                            phase: Phase::Polish,
                            attempt: state.attempt,
                            loss: polish.loss,
                            rmse: polish.loss.sqrt(),
                            floor: floor_device,
                            lr: None,
                            seconds: clock.elapsed().as_secs_f64(),
                        };
                        report_progress(p, &mut tb, observer)?;
                    }
                    if done {
                        break;
                    }
                    if due(&state, last_ckpt) {
                        state.log2_lambda = polish.log2_lambda;
                        state.stalled = polish.stalled;
                        layer = with_twiddles(layer, polish.theta.clone());
                        save(&mut state, &layer, None, &mut last_ckpt)?;
                    }
                    polish.step(&settings);
                    state.step += 1;
                    state.attempt_step += 1;
                }
                state.log2_lambda = polish.log2_lambda;
                state.stalled = polish.stalled;
                let reached = polish.loss <= settings.stop_loss;
                layer = with_twiddles(layer, polish.theta);
                if state.gauge_fixed || !cfg.fix_gauge || reached || state.attempt_step >= cfg.polish_iters {
                    break;
                }
                let (re, im) = (layer.twiddle_re.val().inner(), layer.twiddle_im.val().inner());
                let Some((re, im)) = fix_gauge(re, im) else { break };
                layer = with_twiddles(layer, Twiddles { re, im });
                state.gauge_fixed = true;
                state.stalled = 0;
                state.log2_lambda = INITIAL_LOG2_LAMBDA;
            }
            state.phase = Phase::Done;
        }
        let loss = scalar(inner_objective.loss(layer.twiddle_re.val().inner(), layer.twiddle_im.val().inner(), perm));
        state.seconds = base_seconds + clock.elapsed().as_secs_f64();
        if ckpt_path.is_some() {
            save(&mut state, &layer, None, &mut last_ckpt)?;
        }
        if let Some(tb) = tb.take() {
            tb.close()?;
        }
        let target = cfg.target.matrix(n)?;
        let rmse = metrics::rmse(&layer, &target)?;
        let floor = metrics::floor::<B>(n, &cfg.target, device)?;
        let report = TrainReport {
            n,
            target: cfg.target.clone(),
            backend: selected.clone(),
            seed: cfg.seed + state.attempt as u64,
            attempts: state.attempt + 1,
            steps: state.step,
            seconds: state.seconds,
            resumed_from,
            loss,
            rmse,
            floor,
            rmse_over_floor: floor.map(|f| rmse / f),
            gauge_fixed: state.gauge_fixed,
            checkpoint: ckpt_path.map(|p| p.display().to_string()),
        };
        Ok((layer, report))
    }
}

/// The layer with its twiddles replaced (no gradient history).
fn with_twiddles<B: FftBackend>(mut layer: Butterfly<B>, theta: Twiddles<B::InnerBackend>) -> Butterfly<B> {
    layer.twiddle_re = Param::from_tensor(Tensor::from_inner(theta.re).require_grad());
    layer.twiddle_im = Param::from_tensor(Tensor::from_inner(theta.im).require_grad());
    layer
}

/// A resumed run must train the same shapes on the same problem.
fn check_compatible(saved: &TrainConfig, new: &TrainConfig) -> Result<()> {
    let op = "train.resume";
    if saved.n != new.n {
        return Err(Error::invalid(op, format!("n = {} as in the checkpoint", saved.n), format!("n = {}", new.n)));
    }
    if saved.target != new.target {
        return Err(Error::invalid(
            op,
            format!("target {:?} as in the checkpoint", saved.target),
            format!("{:?}", new.target),
        ));
    }
    if saved.precision != new.precision {
        return Err(Error::invalid(op, format!("precision {} as in the checkpoint", saved.precision), new.precision));
    }
    if saved.seed != new.seed {
        return Err(Error::invalid(op, format!("seed {} as in the checkpoint", saved.seed), new.seed));
    }
    Ok(())
}
