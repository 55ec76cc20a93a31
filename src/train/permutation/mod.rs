//! A product's input permutations found from the run's own objective, where no matrix says
//! what they are: candidates scored by the loss fresh butterflies reach behind them in a short fit from
//! random weights, the self-similar members of Dao et al.'s family first, then the hardened
//! results of their relaxation ([`RelaxedPermutation`](crate::nn::RelaxedPermutation), ICML 2019) trained with the class's
//! butterflies.
//!
//! Where the target's matrix is at hand the trainer finds a one-butterfly class's permutation
//! from it exactly ([`crate::reference::identify`]). It learns one where that is not possible:
//! a user's pairs too few to determine the matrix (fewer than N, where a butterfly needs only
//! about 2 log2 N), the real-output map (whose real part hides the butterfly's structure), and
//! the permutations of a product chosen with `--model` that no generic method finds from the
//! matrix (the real transforms' first in BPBP: behind the bit reversal or the identity the
//! DCT-II and DST-II stall at N = 16; the circulant's two).
//!
//! A candidate is a first factor's permutation and one for the later factors. Its score is the
//! rmse the class's butterflies behind them, of random unitary blocks, reach on the objective in a short
//! run of the trainer's own two phases: Adam with the trainer's cosine decay (3000 steps at
//! most), then, where that did not fit it, a patient Levenberg–Marquardt polish (60 steps at
//! most). Behind the right permutation the fit often reaches the float format's precision (the
//! DCT-II in BPBP at N = 32, f64, scale 0.18: rmse 1.8e-15 against 1.0e-2 and above for the 115
//! other representatives of the family); where it does not, the polish keeps falling behind
//! the right one and stalls at once behind a wrong one (the DCT-II at N = 64: 3.7e-4 against
//! 2.3e-2 and above, from fits of 1.7e-2 against 2.3e-2 that alone did not tell them apart). A
//! score below 1e-3 of the scale ends the search, and the butterflies it ended with start the
//! run's first attempt. After the self-similar candidates (round 1 below for one butterfly,
//! rounds 1 and 2 for a product), a best score a tenth of every other's ends it too (without the
//! hand-over). Otherwise every candidate is scored and the
//! best kept. Gathers that differ by exchanging the halves of aligned blocks make the same
//! butterflies ([`butterfly_representative`]): one pair is scored per pair of representatives.
//!
//! The candidates, in order:
//! 1. The family's self-similar members first, the later factors behind the identity: the
//!    same three choices at every level, then the identity or the bit reversal (16 gathers, at
//!    most 16 representatives at any N). They are the permutations a recursive fast algorithm
//!    applies (the bit reversal is one; so is a member of Makhoul's order for the DCT-II and
//!    DST-II, even samples, then odd ones reversed, followed by the bit reversal), a generic
//!    prior no target's table provides.
//! 2. For a product, each self-similar member behind every factor: a fast transform, then its
//!    inverse, each taking its input in the same order, as a convolution's two transforms do
//!    (the circulant's exact factorization has the bit reversal behind both).
//! 3. Dao et al.'s relaxation, from a few seeds, each hardened, the later factors behind the
//!    best candidate's: it reaches any member of the family, but a relaxation settles on a
//!    mixture whose rounding is rarely the right representative (at N = 32 for the DCT-II none
//!    of 16 was, from seed 0).
//!
//! The self-similar candidates are also the permutations a grown chain carries up
//! ([`carried_up`]): the same rule one level deeper is two copies of the rule at N behind one
//! split of 2N, so the doubled layer is the half-size one on both halves of that split. At a
//! chain's bottom the bit reversal and the identity are tried first ([`choose_doubling`]), then
//! the other candidates as above, without the relaxations (whose gathers have no rule to carry).
//! The DCT-II in BPBP at N = 16 fits behind neither of the first two, and behind the member
//! that reverses the second half at every level, followed by the bit reversal (a candidate of
//! step 1).

mod memo;
mod scorer;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use super::config::TrainConfig;
use super::objective::{Objective, Probes};
use crate::backend::{FftBackend, Precision};
use crate::error::{Error, Result};
use crate::nn::{family_member, Butterfly, PermutationSource};
use crate::ops::Permutation;
use crate::reference::factorizations::Factor;
use crate::reference::identify::butterfly_representative;
use crate::reference::Operator;
use memo::Memo;
pub use memo::MemoFile;
use scorer::Scorer;

/// How the permutation is searched for ([`learn_permutation`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PermutationSearch {
    /// Seeds tried (each a relaxation and a butterfly of its own).
    pub seeds: usize,
    /// Adam steps of each relaxation.
    pub relax_steps: usize,
    /// Adam steps of the fit that scores each hardened permutation.
    pub score_steps: usize,
    /// Adam's learning rate for the twiddles (the scoring fit's first).
    pub lr: f64,
    /// The scoring fit's last learning rate (a cosine decay from `lr`, as the trainer's).
    pub lr_final: f64,
    /// Adam's learning rate for the logits.
    pub logit_lr: f64,
    /// Levenberg–Marquardt steps at most after each scoring fit that ends above the early stop
    /// (0: the fit's rmse is the score).
    pub polish_steps: usize,
    /// Conjugate-gradient iterations at most per polish step ([`TrainConfig::cg_iters`]).
    pub cg_iters: usize,
    /// Relative residual at which the polish's conjugate gradients stop ([`TrainConfig::cg_tol`]).
    pub cg_tol: f64,
    /// Steps in a row that move no twiddle before the polish ends ([`TrainConfig::max_stalled`]).
    pub max_stalled: usize,
}

impl Default for PermutationSearch {
    /// The search's own settings, and the polish's of a default [`TrainConfig`].
    fn default() -> Self {
        PermutationSearch::for_config(&TrainConfig::new(2))
    }
}

impl PermutationSearch {
    /// The search a run configured by `cfg` makes: the polish's linear solves and its end as
    /// the run's own polish has them.
    pub fn for_config(cfg: &TrainConfig) -> Self {
        PermutationSearch {
            seeds: 8,
            relax_steps: 1000,
            score_steps: 3000,
            lr: 0.01,
            lr_final: 1e-4,
            logit_lr: 0.1,
            polish_steps: 60,
            cg_iters: cfg.cg_iters,
            cg_tol: cfg.cg_tol,
            max_stalled: cfg.max_stalled,
        }
    }
}

/// What [`learn_permutation`] found.
#[derive(Clone, Debug)]
pub struct LearnedPermutation {
    /// The first factor's permutation, of the candidate that scored best.
    pub permutation: Permutation,
    /// The later factors' permutation, of that candidate: the identity, unless the search
    /// found a product fits only with each factor behind the first's.
    pub later: Permutation,
    /// Its score: the rmse the class's butterflies behind them reached in the scoring fit.
    pub score: f64,
    /// Every candidate scored, in the order tried.
    pub tried: Vec<Scored>,
}

/// What a run's permutation search hands the run: the permutations it kept, how they were
/// obtained, and the butterflies fitted behind them (in f64; none where the fit did not come
/// below the early stop).
pub(super) struct Searched {
    pub learned: LearnedPermutation,
    pub source: PermutationSource,
    pub fitted: Vec<Factor>,
}

/// An f32 run's search, done in f64 on these probes (the run's): the number of factors,
/// whether the run is a chain's bottom, and where it keeps its progress (see
/// [`search_permutations`]).
pub(super) type SearchInF64<'a> = dyn Fn(&Probes, usize, bool, Option<&MemoFile>) -> Result<Searched> + 'a;

/// A candidate the search scored.
#[derive(Clone, Debug)]
pub struct Scored {
    /// The first factor's permutation.
    pub first: Permutation,
    /// The later factors'.
    pub later: Permutation,
    /// The rmse the scoring fit reached behind them.
    pub score: f64,
}

/// The permutations that make the objective's target a product of `factors` butterflies after
/// them (the first factor's, and one for the later ones), found from the objective alone (its
/// inputs and their images: no matrix is read): the self-similar candidates, then
/// `search.seeds` relaxations, until one scores below 1e-3 of the target's scale; the best
/// scored. See the module docs.
///
/// `stop` (the trainer's stop flag, set on SIGTERM and SIGINT) is read at every step: the
/// search runs before a run's first step, minutes at N = 64, and ends as asked.
///
/// # Errors
/// [`Error::InvalidInput`] when `search` asks for no seed; [`Error::Diverged`] when a loss is
/// not finite; [`Error::Interrupted`] (at step 0, nothing saved) once `stop` is set; those of
/// the layers' construction.
pub fn learn_permutation<B: FftBackend>(
    objective: &Objective<B>,
    factors: usize,
    search: &PermutationSearch,
    seed: u64,
    stop: Option<&AtomicBool>,
    device: &B::Device,
) -> Result<LearnedPermutation> {
    Ok(search_fitted(&Scorer::new(objective, factors, search, stop, device), seed, true)?.0)
}

/// [`learn_permutation`], and the butterflies its best candidate's scoring fit ended with where
/// that fit came below the early stop (none otherwise); without the relaxations unless `relax`
/// (the self-similar candidates only, every one of which the doubling carries up).
fn search_fitted<B: FftBackend>(
    scorer: &Scorer<'_, B>,
    seed: u64,
    relax: bool,
) -> Result<(LearnedPermutation, Vec<Butterfly<B>>)> {
    let (search, factors) = (scorer.search, scorer.factors);
    if search.seeds == 0 || factors == 0 {
        return Err(Error::invalid(
            "train.learn_permutation",
            "at least one seed and one factor",
            format!("{} seeds, {factors} factors", search.seeds),
        ));
    }
    let n = scorer.objective.n();
    let mut tried = Vec::with_capacity(32 + 2 * search.seeds);
    // One fit per pair of representatives: gathers of one make the same butterflies.
    let mut seen = HashSet::new();
    let mut best: Option<Vec<Butterfly<B>>> = None;
    // Scores the pair (fitted from `seed`) unless its representatives were; true once it fits.
    let mut score = |first: Permutation, later: Permutation, seed: u64, tried: &mut Vec<Scored>| -> Result<bool> {
        let key = (butterfly_representative(&first.indices(n)), butterfly_representative(&later.indices(n)));
        if !seen.insert(key) {
            return Ok(false);
        }
        let (score, layers) = scorer.fit((&first, &later), seed)?;
        if tried.iter().all(|t| score < t.score) {
            best = Some(layers);
        }
        tried.push(Scored { first, later, score });
        Ok(score <= scorer.solved)
    };
    let candidates = self_similar(n)?;
    'search: {
        // The self-similar members first, each fitted from the run's seed, the later factors
        // behind the identity.
        for first in &candidates {
            if score(first.clone(), Permutation::Identity, seed, &mut tried)? {
                break 'search;
            }
        }
        // A product's first round does not end the search by standing apart: a wrong member
        // can fit far better than the others and still stall (the circulant at N = 8, seed 0:
        // 5.9e-3 behind the identity, 9.9e-2 and above behind the other three, where the bit
        // reversal behind both factors, the exact factorization's, comes next).
        if factors == 1 && stands_apart(&tried) {
            break 'search;
        }
        // A product of more than one factor: then each factor behind the same member (a
        // transform, then its inverse, as in a convolution).
        if factors > 1 {
            for first in &candidates {
                if score(first.clone(), first.clone(), seed, &mut tried)? {
                    break 'search;
                }
            }
        }
        if stands_apart(&tried) || !relax {
            break 'search;
        }
        // The relaxations, the later factors behind the best candidate's.
        let later = lowest(&tried)?.later.clone();
        for s in 0..search.seeds as u64 {
            let seed = seed.wrapping_add(s.wrapping_mul(0x9e37_79b9));
            for after in [Permutation::Identity, Permutation::BitReversal] {
                if score(scorer.relax(seed, &after, &later)?, later.clone(), seed, &mut tried)? {
                    break 'search;
                }
            }
        }
    }
    let learned = best_of(tried)?;
    let fitted = match learned.score <= scorer.solved {
        true => best.unwrap_or_default(),
        false => Vec::new(),
    };
    Ok((learned, fitted))
}

/// A best score this far below every other candidate's, after a round of self-similar ones,
/// ends the search: behind a wrong permutation the polish stalls where the fit left it, behind
/// the right one it keeps falling. The DCT-II in BPBP at N = 64 (f64, seed 0) scored 3.7e-4
/// behind its own representative against 2.3e-2 and above behind the three other self-similar
/// ones, and none of the 16 relaxations scored below it (they cost about 550 of the search's
/// 694 s on two CPU cores; without them the search took 147 s).
const APART: f64 = 0.1;

/// Whether the best of `tried` scored at most [`APART`] times every other.
fn stands_apart(tried: &[Scored]) -> bool {
    let mut scores: Vec<f64> = tried.iter().map(|t| t.score).collect();
    scores.sort_by(f64::total_cmp);
    matches!(scores.as_slice(), [best, next, ..] if *best <= APART * *next)
}

/// The best scored of `tried`.
fn best_of(tried: Vec<Scored>) -> Result<LearnedPermutation> {
    let Scored { first, later, score } = lowest(&tried)?.clone();
    Ok(LearnedPermutation { permutation: first, later, score, tried })
}

/// The candidate of `tried` that scored lowest.
fn lowest(tried: &[Scored]) -> Result<&Scored> {
    tried
        .iter()
        .min_by(|a, b| a.score.total_cmp(&b.score))
        .ok_or_else(|| Error::invalid("train.learn_permutation", "at least one seed", 0))
}

/// Seeds [`choose_doubling`] fits each candidate from: a fit from random weights can stall
/// behind the right permutation (a product's attempts do: hence the trainer's restarts), so
/// more seeds guard a right candidate against bad starts, while a wrong one costs the chain's
/// bottom a fit per seed before the next step (with two seeds, 4.5 s for the DST-II at N = 8
/// and 9 s for the DCT-II at 32, f64 on two CPU cores, measured with 1000-step fits at a
/// constant rate and no polish; the fits now run 3000 steps and a polish). The Hartley
/// transform in BPBP at N = 64 (f64, run seeds 1 and 2, one CPU core): behind the bit
/// reversal the fits from the first three seeds stalled at rmse 1.6e-2 … 3.1e-2 (1/64 exactly
/// in four of the six: a unit column of error), and the fourth's reached the early stop for
/// both; with two seeds the chain was refused there (H100, the same runs). Six leave a margin
/// over those four.
const DOUBLING_SEEDS: usize = 6;

/// The `s`-th of a chain bottom's seeds for a run with seed `seed` (the run's own first).
fn doubling_seed(seed: u64, s: u64) -> u64 {
    seed.wrapping_add(s.wrapping_mul(0x9e37_79b9))
}

/// At the bottom of a grown chain, the permutations, of those the doubling carries up (the bit
/// reversal, the identity), that make the objective's target a product of `factors`
/// butterflies after them, chosen by the search's scoring fit (from up to six seeds each): the
/// first behind the bit reversal, then the identity, the later ones behind the identity; then,
/// for a product, each behind the bit reversal. `None` where none fits to 1e-3 of the target's
/// scale (the other self-similar members are scored next, from each of the same seeds in turn,
/// and the chain is refused where none of them fits either: a permutation of the run's own
/// would not double). No matrix is read.
///
/// # Errors
/// As [`learn_permutation`].
pub fn choose_doubling<B: FftBackend>(
    objective: &Objective<B>,
    factors: usize,
    search: &PermutationSearch,
    seed: u64,
    stop: Option<&AtomicBool>,
    device: &B::Device,
) -> Result<Option<LearnedPermutation>> {
    choose_with(&Scorer::new(objective, factors, search, stop, device), seed)
}

/// [`choose_doubling`] by `scorer`.
fn choose_with<B: FftBackend>(scorer: &Scorer<'_, B>, seed: u64) -> Result<Option<LearnedPermutation>> {
    let factors = scorer.factors;
    if factors == 0 {
        return Err(Error::invalid("train.choose_doubling", "at least one factor", 0));
    }
    let (br, id) = (Permutation::BitReversal, Permutation::Identity);
    let mut pairs = vec![(br.clone(), id.clone()), (id.clone(), id)];
    if factors > 1 {
        pairs.push((br.clone(), br));
    }
    let mut tried = Vec::new();
    for s in 0..DOUBLING_SEEDS as u64 {
        let seed = doubling_seed(seed, s);
        for (first, later) in &pairs {
            let score = scorer.fit((first, later), seed)?.0;
            tried.push(Scored { first: first.clone(), later: later.clone(), score });
            if score <= scorer.solved {
                return Ok(Some(best_of(tried)?));
            }
        }
    }
    Ok(None)
}

/// `first`, then `after`, as one gather.
fn followed_by(first: &Permutation, after: &Permutation, n: usize) -> Result<Permutation> {
    let (first, then) = (first.indices(n), after.indices(n));
    Permutation::gather(then.iter().map(|&i| first[i]).collect())
}

/// The members of the relaxed family that make the same choices at every level (eight), each
/// then followed by the identity and by the bit reversal: the permutations built by one rule
/// applied at every scale, as a recursive fast algorithm's are (the bit reversal is one;
/// Makhoul's even-then-reversed-odd order for the DCT, followed by the bit reversal, has the
/// representative of another).
fn self_similar(n: usize) -> Result<Vec<Permutation>> {
    let levels = (n.trailing_zeros() as usize).saturating_sub(1);
    let mut out = Vec::with_capacity(16);
    for rule in 0..8u8 {
        let choices: Vec<bool> = (0..levels).flat_map(|_| (0..3).map(move |c| rule >> (2 - c) & 1 == 1)).collect();
        let member = family_member(n, &choices)?;
        for after in [Permutation::Identity, Permutation::BitReversal] {
            out.push(followed_by(&member, &after, n)?);
        }
    }
    Ok(out)
}

/// `p`, a permutation of `n`, as the doubling carries it to 2n: the bit reversal and the
/// identity as themselves, a self-similar candidate of the search (step 1 of the module docs)
/// as the same rule one level deeper (where two candidates are one gather at `n`, the
/// first's); `None` for any other gather (a relaxation's, a user's), whose rule at 2n is not
/// known.
///
/// # Errors
/// [`Error::InvalidInput`] when `n` is not a power of two.
pub fn carried_up(p: &Permutation, n: usize) -> Result<Option<Permutation>> {
    let Permutation::Gather(indices) = p else { return Ok(Some(p.clone())) };
    let at_n = self_similar(n)?;
    let Some(k) = at_n.iter().position(|c| c.indices(n) == *indices) else { return Ok(None) };
    Ok(Some(self_similar(2 * n)?.swap_remove(k)))
}

/// A run's permutations, where they are searched for ([`super::run::Run::start`] says when):
/// learned from the objective ([`learn_permutation`], [`PermutationSource::Learned`]), with the
/// butterflies its scoring fit ended with where that fit came below the early stop, or at the
/// bottom of a grown chain (`doubles`) ones the doubling carries up ([`carried_up`],
/// [`PermutationSource::Chosen`]): the bit reversal or the identity ([`choose_doubling`], with
/// no butterflies), else the other self-similar candidates as the search scores them (with its
/// butterflies, as above).
///
/// Butterflies fitted above the early stop are not handed over: from the DCT-II's in BPBP at
/// N = 64 (f64, seed 0; scored 3.7e-4, the stop 1.3e-4) the first attempt's polish stalled at
/// 6.5e-5, where the second, from random weights behind the same permutation, reached the bar.
///
/// With `memo` (a run with a checkpoint directory), the search keeps its progress there and a
/// resumed run's search goes on from it (see [`memo`]); a stop then names the memo as what
/// to resume from.
///
/// # Errors
/// Those of [`learn_permutation`]; at a chain's bottom, [`Error::InvalidInput`] (`train.grow`)
/// where no pair of doubling permutations fits: the chain is refused here, before its bottom
/// trains (a permutation of the run's own would not double, and the run at 2N could not grow
/// from it); those of the memo's reading and writing.
pub(super) fn search_permutations<B: FftBackend>(
    cfg: &TrainConfig,
    objective: &Objective<B>,
    factors: usize,
    doubles: bool,
    memo: Option<&MemoFile>,
    stop: Option<&AtomicBool>,
    device: &B::Device,
) -> Result<(LearnedPermutation, PermutationSource, Vec<Butterfly<B>>)> {
    let search = PermutationSearch::for_config(cfg);
    let kept = memo.map(|f| Memo::open(f, objective.n(), factors, Precision::of::<B>(), &search)).transpose()?;
    let scorer = Scorer::new(objective, factors, &search, stop, device).with_memo(kept.as_ref());
    match searched(cfg, &scorer, doubles) {
        Err(Error::Interrupted { step: 0, checkpoint: None }) if kept.is_some() => {
            let checkpoint = kept.as_ref().map(|m| m.path().display().to_string());
            Err(Error::Interrupted { step: 0, checkpoint })
        }
        searched => searched,
    }
}

/// [`search_permutations`] by `scorer`.
fn searched<B: FftBackend>(
    cfg: &TrainConfig,
    scorer: &Scorer<'_, B>,
    doubles: bool,
) -> Result<(LearnedPermutation, PermutationSource, Vec<Butterfly<B>>)> {
    let (objective, factors) = (scorer.objective, scorer.factors);
    if !doubles {
        let (learned, layers) = search_fitted(scorer, cfg.seed, true)?;
        return Ok((learned, PermutationSource::Learned, layers));
    }
    if let Some(chosen) = choose_with(scorer, cfg.seed)? {
        return Ok((chosen, PermutationSource::Chosen, Vec::new()));
    }
    // Then the other self-similar members, as the search scores them (no relaxation: the
    // doubling carries none of its gathers up), kept where one fits or stands apart as the
    // search would keep it; fitted from each of the bit reversal's seeds in turn until one
    // does, since a fit behind the right member stalls as one behind the bit reversal can: the
    // DCT-II's chain to N = 64 with seed 5000 (f64) was refused at its bottom, 32, where the
    // run's own seed left every member at rmse 2.8e-2 or above.
    let mut best: Option<LearnedPermutation> = None;
    for s in 0..DOUBLING_SEEDS as u64 {
        let (learned, layers) = search_fitted(scorer, doubling_seed(cfg.seed, s), false)?;
        if !layers.is_empty() || stands_apart(&learned.tried) {
            return Ok((learned, PermutationSource::Chosen, layers));
        }
        if best.as_ref().is_none_or(|b| learned.score < b.score) {
            best = Some(learned);
        }
    }
    let learned = best.ok_or_else(|| Error::invalid("train.grow", "at least one seed", 0))?;
    Err(Error::invalid(
        "train.grow",
        format!(
            "permutations at N = {} that the doubling carries up (self-similar members of Dao et al.'s family, the bit reversal and the identity among them), to grow {}",
            cfg.n,
            cfg.target.name()
        ),
        format!(
            "none, by the search's scoring fit of {factors} butterflies behind each (the best to rmse {:.2e}, where a fit reaches {:.2e}, 1e-3 of the target's scale): this family cannot be grown by doubling from here, or its fits from random weights stalled (another seed or another grow_above may find one); train it at N = {} without grow_above",
            learned.score,
            scorer::SOLVED * scorer::own_scale(objective),
            2 * cfg.n
        ),
    ))
}

/// [`Error::Interrupted`] at step 0 with nothing saved once `stop` is set: the search comes
/// before the run's first step and its checkpoint.
fn stop_if_asked(stop: Option<&AtomicBool>) -> Result<()> {
    match stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
        true => Err(Error::Interrupted { step: 0, checkpoint: None }),
        false => Ok(()),
    }
}

fn check_finite(value: f64, step: usize) -> Result<()> {
    if value.is_finite() {
        Ok(())
    } else {
        Err(Error::Diverged { what: "loss", value, step })
    }
}

#[cfg(test)]
mod tests;
