//! What a run and each of its attempts start from: the state of a run that has not begun,
//! random weights in the run's model class, a layer grown from the half-size member, or a
//! checkpoint; and a fresh optimiser and learning-rate schedule.

use std::path::Path;

use burn::lr_scheduler::cosine::{CosineAnnealingLrScheduler, CosineAnnealingLrSchedulerConfig};
use burn::lr_scheduler::LrScheduler;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::Optimizer;

use super::checkpoint::Checkpoint;
use super::config::TrainConfig;
use super::observer::Progress;
use super::optimizer::FusedAdam;
use super::run::{AdamOptimizer, Grown, INITIAL_LOG2_LAMBDA};
use super::state::{Phase, TrainState};
use crate::backend::{FftBackend, Precision};
use crate::error::{Error, Result};
use crate::nn::{model_class_for, ButterflyInit, ButterflyProduct, ButterflyProductConfig, ModelClass};
use crate::reference::ComplexMatrix;

impl TrainState {
    /// The state of a run that has not begun.
    pub(super) fn start() -> Self {
        TrainState {
            step: 0,
            attempt: 0,
            attempt_step: 0,
            phase: Phase::Adam,
            log2_lambda: INITIAL_LOG2_LAMBDA,
            gauge_fixed: false,
            stalled: 0,
            plateau_window: None,
            crawl_window: None,
            crawled: false,
            seconds: 0.0,
            grown_from: None,
        }
    }

    /// The state of an attempt that starts from a `grown` layer: the half-size run's steps are
    /// counted (its seconds are the run's clock's). One butterfly goes straight to the polish
    /// (Adam would leave the trained stages; Levenberg–Marquardt fits the random last stage, a
    /// linear least-squares problem while the others stay put, and then polishes all of them);
    /// a product grown by the eigenstructure (`aligned`) too; another product's attempt runs
    /// Adam first, as from random weights (its random last stages and
    /// the diagonal its second factor holds make the problem bilinear: for the circulant at
    /// N = 32 and 64 the polish from the grown layer itself stalled at rmse ≈ 1.2, and from 500
    /// Adam steps at 2e-2 … 2e-1, where Adam's full schedule reached 1e-4 and the bar).
    pub(super) fn grown<B: FftBackend>(&mut self, grown: Grown<B>, class: &ModelClass) -> Result<ButterflyProduct<B>> {
        self.step += grown.steps;
        self.phase = if grown.layer.len() > 1 && !grown.aligned { Phase::Adam } else { Phase::Polish };
        self.grown_from = Some(grown.from_n);
        class.impose(grown.layer)
    }
}

/// Weight of the random unitary part in the blocks of a product's factors after the first
/// ([`ButterflyInit::NearIdentity`]) where the model class fixes some stages (Hartley, DCT-II,
/// DST-II): measured at N = 16 (f64, seeds 0–2), DCT-II needs 1–2 attempts from these and 5 (or
/// fails) from Haar-random blocks in every factor; 0.3 is no better than 1. Where every stage is
/// learned (the circulant's two free butterflies) every factor starts Haar-random instead: at
/// N = 32 (f32, candle, four random kernels) that took 5 attempts and 3 700 steps in all where
/// near-identity later factors took 11 attempts and 10 600 steps.
pub const REST_INIT_WEIGHT: f64 = 0.1;

/// The class a run at size `n` trains ([`model_class_for`] with `dense`, the target's matrix
/// where at hand), with the factors [`TrainConfig::factors`] asks for: (BP)^K repeats BPBP's
/// later factor.
pub(super) fn chosen_class(cfg: &TrainConfig, n: usize, dense: Option<&ComplexMatrix>) -> Result<ModelClass> {
    Ok(model_class_for(&cfg.target, n, dense, cfg.model)?.with_factors(cfg.chosen_factors().unwrap_or(0), n))
}

/// Attempt `attempt`'s random initial layer, in the run's model `class` ([`model_class_for`]):
/// Haar-random unitary blocks in the first factor; in the others near-identity random blocks
/// ([`REST_INIT_WEIGHT`]) when the class fixes some stages, Haar-random blocks otherwise (seed
/// `cfg.seed + attempt`, see [`ButterflyProductConfig::init`] for each factor's); and the
/// class's values in the stages it does not learn.
pub(super) fn fresh_layer<B: FftBackend>(
    cfg: &TrainConfig,
    class: &ModelClass,
    attempt: usize,
    device: &B::Device,
) -> Result<ButterflyProduct<B>> {
    let seed = cfg.seed + attempt as u64;
    let rest = class.fixed.as_ref().map(|_| ButterflyInit::NearIdentity { seed, weight: REST_INIT_WEIGHT });
    let layer = ButterflyProductConfig::new(cfg.n, class.permutations.clone())
        .with_init(ButterflyInit::RandomUnitary { seed })
        .with_rest(rest)
        .init(device)?;
    class.impose(layer)
}

pub(super) fn new_optim<B: FftBackend>() -> AdamOptimizer<B> {
    OptimizerAdaptor::from(FusedAdam::new(1e-8))
}

/// Burn's cosine decay, on the scale of `lr` (1 → `lr_final / lr` over `adam_steps`; the rate is
/// `lr ×` its value, since Burn's scheduler takes rates in (0, 1] only), positioned so that its
/// next `step()` gives the factor of attempt step `attempt_step`.
pub(super) fn schedule<B: FftBackend>(cfg: &TrainConfig, attempt_step: usize) -> Result<CosineAnnealingLrScheduler> {
    let schedule = CosineAnnealingLrSchedulerConfig::new(1.0, cfg.adam_steps.max(1))
        .with_min_lr(cfg.lr_final / cfg.lr)
        .init()
        .map_err(|e| Error::invalid("train", "0 < lr_final ≤ lr", e))?;
    // The record is the last step taken (`usize::MAX` before the first).
    Ok(schedule.load_record::<B>(attempt_step.wrapping_sub(1)))
}

/// What a run resumes from: the layer, optimiser, state and progress records.
type Resumed<B> = (ButterflyProduct<B>, AdamOptimizer<B>, TrainState, Vec<Progress>);

/// The layer, optimiser, state and progress records saved in the checkpoint at `path`.
pub(super) fn resume<B: FftBackend>(path: &Path, cfg: &TrainConfig, device: &B::Device) -> Result<Resumed<B>> {
    if !path.exists() {
        return Err(Error::invalid(
            "train.resume",
            format!("a checkpoint to continue ({})", path.display()),
            "none: this directory holds no stopped run (start it without --resume)",
        ));
    }
    let ckpt = Checkpoint::read(path)?;
    ckpt.check_compatible(cfg, Precision::of::<B>())?;
    let layer = ckpt.product::<B>(device)?;
    let mut optim = new_optim::<B>();
    if let Some(state) = ckpt.adam_state::<B>(device)? {
        optim = optim.load_record(state.into_iter().collect());
    }
    Ok((layer, optim, ckpt.state, ckpt.history))
}
