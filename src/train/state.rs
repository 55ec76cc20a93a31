//! Where a run stands: its [`TrainState`] (saved in every checkpoint) and [`Phase`].

use serde::{Deserialize, Serialize};

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
