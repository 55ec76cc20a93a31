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
use super::observer::{AttemptLog, Progress};
use super::optimizer::FusedAdam;
use super::permutation::Scored;
use super::run::{AdamOptimizer, Grown, INITIAL_LOG2_LAMBDA};
use super::state::{Phase, TrainState};
use super::trainer::HALF_REUSE;
use crate::backend::{FftBackend, Precision};
use crate::error::{Error, Result};
use crate::nn::{model_class_for, ButterflyInit, ButterflyProduct, ButterflyProductConfig, ModelClass};
use crate::ops::Permutation;
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
            levels: Vec::new(),
            refused_chain: None,
            kept_own_rounding: false,
            candidates: Vec::new(),
        }
    }

    /// The state of an attempt that starts from a `grown` layer: the half-size run's steps are
    /// counted (its seconds are the run's clock's). One butterfly goes straight to the polish
    /// (Adam would leave the trained stages; Levenberg–Marquardt fits the random last stage, a
    /// linear least-squares problem while the others stay put, and then polishes all of them);
    /// a whole start the caller gives (`aligned`) too; another product's attempt runs
    /// Adam first, as from random weights (its random last stages and
    /// the diagonal its second factor holds make the problem bilinear: for the circulant at
    /// N = 32 and 64 the polish from the grown layer itself stalled at rmse ≈ 1.2, and from 500
    /// Adam steps at 2e-2 … 2e-1, where Adam's full schedule reached 1e-4 and the bar).
    pub(super) fn grown<B: FftBackend>(&mut self, grown: Grown<B>, class: &ModelClass) -> Result<ButterflyProduct<B>> {
        self.step += grown.steps;
        self.phase = if grown.layer.len() > 1 && !grown.aligned { Phase::Adam } else { Phase::Polish };
        self.grown_from = Some(grown.from_n);
        self.levels = grown.levels;
        self.refused_chain = grown.refused_block;
        class.impose(grown.layer)
    }
}

/// The class a run at size `n` trains ([`model_class_for`] with `dense`, the target's matrix
/// where at hand), with the factors [`TrainConfig::factors`] asks for: (BP)^K repeats BPBP's
/// later factor.
pub(super) fn chosen_class(cfg: &TrainConfig, n: usize, dense: Option<&ComplexMatrix>) -> Result<ModelClass> {
    let class = model_class_for(&cfg.target, n, dense, Some(cfg.class()))?.with_factors(cfg.class_factors(), n);
    // A generic class learns every stage: no stage of a known factorization is given.
    match class.fixed {
        None => Ok(class),
        Some(_) => Err(Error::invalid("train", "a model class that learns every stage", format!("{class:?}"))),
    }
}

/// Attempt `attempt`'s random initial layer, in the run's model `class` ([`model_class_for`]):
/// Haar-random unitary blocks in every factor (seed `cfg.seed + attempt`, see
/// [`ButterflyProductConfig::init`] for each factor's), real where the class is.
pub(super) fn fresh_layer<B: FftBackend>(
    cfg: &TrainConfig,
    class: &ModelClass,
    attempt: usize,
    device: &B::Device,
) -> Result<ButterflyProduct<B>> {
    let seed = cfg.seed + attempt as u64;
    let layer = ButterflyProductConfig::new(cfg.n, class.permutations.clone())
        .with_init(ButterflyInit::RandomUnitary { seed })
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

/// Where Adam's last rmse in an attempt grown from a half-size layer must be, over
/// [`TrainConfig::switch_rmse`] (Adam's hand-over to the polish), for that layer to be given up:
/// such an attempt ended on Adam's plateau, and the other attempts of its block mostly end
/// there too. Measured in BPBP chains of the DCT-II and DST-II from N = 32 (2026-12-05, H200
/// and H100 with CUDA, N = 256 and 512, seeds 0–2, f32 and f64; one on two CPU cores at 128):
/// of 15 blocks with an attempt after one whose Adam plateaued (at rmse 5e-3 … 2.1e-2, 50 × the
/// hand-over and more), the later attempts stalled within 3 % of that rmse in 14, and reached
/// the bar in one (the DST-II at 256, seed 2, after 5.5e-3); all runs but one (the DCT-II at
/// 256, seed 2, ten attempts) reached in a later block. Where Adam handed over and the polish
/// stalled (the Hartley transform at 256 and 512 in f64, grown from 64: 7e-10 and 2.2e-6), the
/// block's next attempt reached the bar. A layer given up costs its retraining (about 7 400
/// steps of the chain to 256 for the DCT-II at 512, against about 1 100 steps an attempt at
/// 512), which the old blocks paid too after their three attempts.
pub const PLATEAU_OVER_SWITCH: f64 = 10.0;

/// The first attempt of the block `attempt` belongs to: the attempts of a block double one
/// trained half-size layer. A block ends after [`HALF_REUSE`] attempts, or after an attempt
/// (of those in `attempts`, the run's records) whose last Adam rmse was above
/// [`PLATEAU_OVER_SWITCH`] × `switch_rmse` (or not a number): the next attempt starts a block,
/// and doubles a half-size layer trained anew. An attempt that went straight to the polish (no
/// Adam record) keeps its block.
pub fn block_start(attempts: &[AttemptLog], attempt: usize, switch_rmse: f64) -> usize {
    let plateaued = |a: usize| {
        let adam = attempts.iter().find(|log| log.attempt == a).and_then(|log| log.adam_rmse);
        adam.is_some_and(|rmse| rmse.is_nan() || rmse > PLATEAU_OVER_SWITCH * switch_rmse)
    };
    let mut start = 0;
    for a in 1..=attempt {
        if plateaued(a - 1) || a - start >= HALF_REUSE {
            start = a;
        }
    }
    start
}

/// A block of attempts ([`block_start`]) and the block whose chain its half-size run grows
/// from ([`super::chain::HalfSource::of_block`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Block {
    /// Its first attempt.
    pub start: usize,
    /// The first attempt of the block that trained the chain under its half-size run: itself,
    /// or the block before it. Blocks alternate: the first trains its own chain, the second
    /// grows from the first's layer two sizes down, the third trains a chain of its own again
    /// (a new seed, a new search at the bottom), the fourth grows from the third's, and so on.
    /// A block that grew from a kept layer and missed is not followed by another from that
    /// layer: every DCT-II run at 128 stalled at rmse 2.09e-2 when every block grew from the
    /// first block's layer at 32 (seed 0, f64 and f32, H200, 2026-12-06), where the chains
    /// that searched a new bottom for their second block reached 128 in that block's first
    /// attempt (2026-12-05: f64 on two CPU cores and on an H100, f32 on an H100).
    pub anchor: usize,
}

impl Block {
    /// The run's first block: attempt 0, which trains its own chain.
    pub const FIRST: Block = Block { start: 0, anchor: 0 };
}

/// The first attempts of the blocks up to attempt `attempt`'s, first block first
/// ([`block_start`]), from the run's records.
fn block_starts(attempts: &[AttemptLog], attempt: usize, switch_rmse: f64) -> Vec<usize> {
    let mut starts: Vec<usize> = Vec::new();
    for a in 0..=attempt {
        let start = block_start(attempts, a, switch_rmse);
        if starts.last() != Some(&start) {
            starts.push(start);
        }
    }
    starts
}

/// The block attempt `attempt` belongs to, from the run's records ([`block_start`]), and how
/// many blocks come before it (0 in the first block).
pub(super) fn block_at(attempts: &[AttemptLog], attempt: usize, switch_rmse: f64) -> (Block, usize) {
    let starts = block_starts(attempts, attempt, switch_rmse);
    let ordinal = starts.len() - 1;
    (Block { start: starts[ordinal], anchor: starts[ordinal - ordinal % 2] }, ordinal)
}

/// The block attempt `attempt` belongs to ([`block_at`]).
#[cfg(test)]
fn block_of(attempts: &[AttemptLog], attempt: usize, switch_rmse: f64) -> Block {
    block_at(attempts, attempt, switch_rmse).0
}

/// How many blocks come before attempt `attempt`'s ([`block_at`]).
#[cfg(test)]
fn block_ordinal(attempts: &[AttemptLog], attempt: usize, switch_rmse: f64) -> usize {
    block_at(attempts, attempt, switch_rmse).1
}

/// Which of a searched run's `candidates` ([`TrainState::candidates`]: the kept permutations
/// first, then the others by score) block `ordinal` trains behind: the kept ones in every even
/// block (the first, the third, …), the others in turn in the odd blocks, cycling. As with the
/// chains' blocks, which alternate between a chain of their own and the block before's layer,
/// half of the attempts stay with the search's choice. A search can keep a wrong permutation
/// where no candidate's scoring fit came below its early stop: the DST-II at N = 16 (BPBP,
/// seed 3000, both precisions, 2026-12-07) kept a relaxation's gather scoring 8.8e-4 over the
/// self-similar member that the nine other seeds' searches had ended on (8.5e-3 there: its
/// scoring fit stalled), and all ten attempts trained behind the kept gather (the best ended at
/// 8.8e-4, the gather's own score).
pub(super) fn candidate_of(ordinal: usize, candidates: usize) -> usize {
    match ordinal % 2 {
        1 if candidates > 1 => 1 + (ordinal / 2) % (candidates - 1),
        _ => 0,
    }
}

/// The candidates of a run whose search kept `kept` (the first factor's permutation and the
/// later factors') among those it `tried`: `kept`, then every other pair it scored, best score
/// first, each once ([`TrainState::candidates`]).
pub(super) fn ranked_candidates(kept: (Permutation, Permutation), tried: &[Scored]) -> Vec<(Permutation, Permutation)> {
    let mut others: Vec<&Scored> = tried.iter().collect();
    others.sort_by(|a, b| a.score.total_cmp(&b.score));
    let mut candidates = vec![kept];
    for s in others {
        let pair = (s.first.clone(), s.later.clone());
        if !candidates.contains(&pair) {
            candidates.push(pair);
        }
    }
    candidates
}

#[cfg(test)]
mod tests {
    use super::{block_of, block_ordinal, block_start, candidate_of, ranked_candidates, Block, PLATEAU_OVER_SWITCH};
    use crate::ops::Permutation;
    use crate::train::permutation::Scored;
    use crate::train::{AttemptLog, HALF_REUSE};

    fn log(attempt: usize, adam_rmse: Option<f64>) -> AttemptLog {
        AttemptLog { attempt, first_step: 0, polish_step: None, last_step: 0, adam_rmse, rmse: 1.0 }
    }

    /// A block is [`HALF_REUSE`] attempts that handed over to the polish, and ends early after
    /// one whose Adam plateaued above [`PLATEAU_OVER_SWITCH`] × the hand-over (or not a number);
    /// one with no Adam record (straight into the polish) keeps its block.
    #[test]
    fn a_block_ends_after_its_attempts_or_on_adams_plateau() {
        assert_eq!(HALF_REUSE, 3, "the expected starts below are for blocks of three attempts");
        let switch = 1e-4;
        let starts = |logs: &[AttemptLog]| (0..=logs.len()).map(|a| block_start(logs, a, switch)).collect::<Vec<_>>();
        let mut logs: Vec<_> = (0..7).map(|a| log(a, Some(0.99 * switch))).collect();
        assert_eq!(starts(&logs), [0, 0, 0, 3, 3, 3, 6, 6]);
        logs[1].adam_rmse = Some(1.1e-2);
        assert_eq!(starts(&logs), [0, 0, 2, 2, 2, 5, 5, 5], "attempt 1 plateaued: attempt 2 starts a block");
        logs[1].adam_rmse = Some(PLATEAU_OVER_SWITCH * switch);
        assert_eq!(starts(&logs), [0, 0, 0, 3, 3, 3, 6, 6], "at the threshold the block goes on");
        logs[3].adam_rmse = Some(f64::NAN);
        logs[4].adam_rmse = None;
        assert_eq!(starts(&logs), [0, 0, 0, 3, 4, 4, 4, 7], "a NaN ends the block, no Adam record keeps it");
    }

    /// Blocks alternate between a chain of their own and the layer the block before trained:
    /// blocks 0, 3, 4 and 7 above train their own, 3 grows from 0's and 7 from 4's.
    #[test]
    fn every_other_block_trains_a_chain_of_its_own() {
        let switch = 1e-4;
        let mut logs: Vec<_> = (0..8).map(|a| log(a, Some(0.99 * switch))).collect();
        logs[3].adam_rmse = Some(f64::NAN);
        let blocks: Vec<_> = (0..=logs.len()).map(|a| block_of(&logs, a, switch)).collect();
        let block = |start, anchor| Block { start, anchor };
        let expected = [(0, 0), (0, 0), (0, 0), (3, 0), (4, 4), (4, 4), (4, 4), (7, 4), (7, 4)];
        assert_eq!(blocks, expected.map(|(s, a)| block(s, a)));
        let one_each: Vec<_> = (0..5).map(|a| block_of(&[], a, switch)).collect();
        assert_eq!(one_each, [(0, 0), (0, 0), (0, 0), (3, 0), (3, 0)].map(|(s, a)| block(s, a)));
    }

    /// A searched run's blocks alternate between the kept permutations (candidate 0) and the
    /// others in turn, cycling; with no other candidate every block keeps the search's choice.
    /// The blocks come from the run's records: blocks 0, 3, 4 and 7 above are ordinals 0 … 3.
    #[test]
    fn every_other_block_trains_behind_the_searchs_next_candidate() {
        let per_block: Vec<_> = (0..9).map(|ordinal| candidate_of(ordinal, 4)).collect();
        assert_eq!(per_block, [0, 1, 0, 2, 0, 3, 0, 1, 0]);
        assert!((0..9).all(|ordinal| candidate_of(ordinal, 1) == 0 && candidate_of(ordinal, 0) == 0));
        let switch = 1e-4;
        let mut logs: Vec<_> = (0..8).map(|a| log(a, Some(0.99 * switch))).collect();
        logs[3].adam_rmse = Some(f64::NAN);
        let ordinals: Vec<_> = (0..=logs.len()).map(|a| block_ordinal(&logs, a, switch)).collect();
        assert_eq!(ordinals, [0, 0, 0, 1, 2, 2, 2, 3, 3]);
        // Every attempt on Adam's plateau (the DST-II's at N = 16, seed 3000): a block each.
        let plateaued: Vec<_> = (0..10).map(|a| log(a, Some(1e-2))).collect();
        let candidates: Vec<_> = (0..10).map(|a| candidate_of(block_ordinal(&plateaued, a, switch), 3)).collect();
        assert_eq!(candidates, [0, 1, 0, 2, 0, 1, 0, 2, 0, 1]);
    }

    /// The kept pair comes first even where another scored lower (a chain's bottom keeps what
    /// the doubling carries up), then the others by score, each pair once.
    #[test]
    fn candidates_are_the_kept_pair_then_the_others_best_first() {
        let (id, br) = (Permutation::Identity, Permutation::BitReversal);
        let other = Permutation::Gather(vec![1, 0, 3, 2, 5, 4, 7, 6]);
        let scored = |first: &Permutation, later: &Permutation, score| Scored {
            first: first.clone(),
            later: later.clone(),
            score,
        };
        let tried = [
            scored(&id, &id, 3e-2),
            scored(&br, &id, 1e-3),
            scored(&other, &id, 2e-3),
            scored(&br, &br, 5e-3),
            scored(&other, &id, 4e-3),
        ];
        let ranked = ranked_candidates((id.clone(), id.clone()), &tried);
        let expected =
            [(id.clone(), id.clone()), (br.clone(), id.clone()), (other.clone(), id.clone()), (br.clone(), br.clone())];
        assert_eq!(ranked, expected);
        assert_eq!(ranked_candidates((br.clone(), id.clone()), &[]), [(br, id)]);
    }
}
