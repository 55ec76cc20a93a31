//! Where a run stands: its [`TrainState`] (saved in every checkpoint) and [`Phase`].

use serde::{Deserialize, Serialize};

use crate::ops::Permutation;

/// Where training stands, saved in every checkpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainState {
    /// Steps done so far, over all phases and attempts.
    pub step: usize,
    /// Attempt (0 = first random init; r uses seed + r).
    pub attempt: usize,
    /// Steps done in this phase of this attempt.
    pub attempt_step: usize,
    /// The phase the next step belongs to.
    pub phase: Phase,
    /// log2 of the Levenberg–Marquardt damping.
    pub log2_lambda: i32,
    /// Whether the twiddles were gauge-fixed (the polish phase then trains only the free entries).
    pub gauge_fixed: bool,
    /// Polish steps in a row that did not lower the loss by 1 %.
    pub stalled: usize,
    /// The attempt step at which Adam's current plateau window (`plateau_steps`) opened, and
    /// the loss there; absent in checkpoints written before the plateau test, whose resumed run
    /// opens a window at its next multiple of `plateau_steps`.
    #[serde(default)]
    pub plateau_window: Option<(usize, f64)>,
    /// The polish step at which the polish's current rate window
    /// (`polish::CRAWL_WINDOW` steps) opened, and the loss there; absent in checkpoints written
    /// before the crawl test, whose resumed run opens a window at its next multiple.
    #[serde(default)]
    pub crawl_window: Option<(usize, f64)>,
    /// Whether the polish's current stage ended because it crawled: at its rate it would not
    /// reach the bar in its remaining steps (`polish::CRAWL_MARGIN`).
    #[serde(default)]
    pub crawled: bool,
    /// Seconds of training so far (summed over resumed runs).
    pub seconds: f64,
    /// The size of the trained layer this attempt grew from
    /// ([`TrainConfig::grow_above`](super::TrainConfig::grow_above)); `None` from random weights
    /// (and in checkpoints written before growing existed).
    #[serde(default)]
    pub grown_from: Option<usize>,
    /// The chain this attempt grew from, smallest size first: each half-size run's outcome
    /// (empty from random weights, and in checkpoints written before levels were kept).
    #[serde(default)]
    pub levels: Vec<Level>,
    /// Where this attempt's block of attempts had its own half-size chain refused, so the
    /// attempt doubled the first block's layer: that block's first attempt
    /// ([`TrainReport::refused_chain`](super::TrainReport::refused_chain)); `None` otherwise, and
    /// in checkpoints written before it was kept.
    #[serde(default)]
    pub refused_chain: Option<usize>,
    /// Whether the layer kept at the run's end is the rounding of its own f64 solution rather
    /// than where its polish ended (on random probes, where fresh probes measured it lower:
    /// `Run::keep_the_better_rounding`); false in checkpoints written before.
    #[serde(default)]
    pub kept_own_rounding: bool,
    /// The permutations a run's search scored (each a first factor's and the later factors'):
    /// those it kept first, then the others it scored, best score first. Every other block of
    /// attempts trains behind the kept ones; the blocks between them behind the others in turn,
    /// so a search that kept a wrong permutation costs blocks, not the run. Empty where the run
    /// searched none (and in checkpoints written before).
    #[serde(default)]
    pub candidates: Vec<(Permutation, Permutation)>,
}

/// One level of a grown chain: the outcome of the half-size run a run at twice its size grew
/// from ([`TrainConfig::grow_above`](super::TrainConfig::grow_above)). Its target is the run's
/// target halved ([`Target::halved`](crate::Target::halved)), its attempts at most
/// [`HALF_REUSE`](super::HALF_REUSE), and its steps and seconds count the chain below it, as a
/// run at that size grown from the same chain would report them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// Its size.
    pub n: usize,
    /// Seed of the attempt that produced the layer grown from.
    pub seed: u64,
    /// Attempts it made.
    pub attempts: usize,
    /// Steps, the chain below it included.
    pub steps: usize,
    /// Seconds of training, the chain below it included.
    pub seconds: f64,
    /// rmse of its layer against its f64 target.
    pub rmse: f64,
    /// Its floor ([`TrainReport::floor`](super::TrainReport::floor)).
    pub floor: Option<f64>,
    /// What the floor measures.
    pub floor_source: Option<crate::metrics::FloorSource>,
    /// Its bar ([`TrainReport::bar`](super::TrainReport::bar)).
    pub bar: Option<f64>,
    /// Whether its rmse is at or under its bar: a level that missed is still a start the size
    /// above can finish from.
    pub reached: bool,
}

/// Training phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Adam from random init.
    Adam,
    /// Levenberg–Marquardt polish.
    Polish,
    /// Finished.
    Done,
}
