//! A factor's input permutation learned by gradient descent, where no matrix says what it is:
//! Dao et al.'s relaxation ([`RelaxedPermutation`], ICML 2019) trained with a butterfly on the
//! run's own objective, then hardened.
//!
//! Where the target's matrix is at hand the trainer finds the permutation from it exactly
//! ([`crate::reference::identify`]); a user's pairs too few to determine the matrix (fewer than
//! N, where a butterfly needs only about 2 log2 N) have none, and this is how the permutation is
//! found then. The relaxed layer and a butterfly of random unitary blocks train together with
//! Adam on the objective, so the loss the permutation descends is the run's own; the hardened
//! permutation is then scored by the loss a fresh butterfly reaches behind it in a short fit,
//! and the best of a few seeds is kept (a relaxation can settle on a mixture whose rounding is
//! not the best permutation, and a wrong choice at a coarse level costs an O(1) loss, so the
//! scores tell right from wrong by orders of magnitude).

use std::sync::atomic::{AtomicBool, Ordering};

use burn::module::Module;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::backend::Backend;

use super::objective::{scalar, Objective};
use crate::backend::FftBackend;
use crate::error::{Error, Result};
use crate::nn::{Butterfly, ButterflyConfig, ButterflyInit, RelaxedPermutation, RelaxedPermutationConfig};
use crate::ops::Permutation;

/// How the permutation is searched for ([`learn_permutation`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PermutationSearch {
    /// Seeds tried (each a relaxation and a butterfly of its own).
    pub seeds: usize,
    /// Adam steps of each relaxation.
    pub relax_steps: usize,
    /// Adam steps of the fit that scores each hardened permutation.
    pub score_steps: usize,
    /// Adam's learning rate for the twiddles.
    pub lr: f64,
    /// Adam's learning rate for the logits.
    pub logit_lr: f64,
}

impl Default for PermutationSearch {
    fn default() -> Self {
        PermutationSearch { seeds: 8, relax_steps: 1000, score_steps: 1000, lr: 0.01, logit_lr: 0.1 }
    }
}

/// What [`learn_permutation`] found.
#[derive(Clone, Debug)]
pub struct LearnedPermutation {
    /// The hardened permutation that scored best.
    pub permutation: Permutation,
    /// Its score: the rmse a butterfly behind it reached in the scoring fit.
    pub score: f64,
    /// Every seed's hardened permutation and score, in the order tried.
    pub tried: Vec<(Permutation, f64)>,
}

/// A score this far below the target's own scale (the rmse of the zero map) ends the search: a
/// butterfly behind the right permutation fits the pairs to 1e-9 … 1e-17 of it in the scoring
/// fit's 1000 Adam steps, behind a wrong one it stays within a factor of 3 of it (the DFT's pairs
/// at N = 8 … 32 in f64, measured with the default search; f32 was not measured).
const SOLVED: f64 = 1e-3;

/// A relaxed permutation, then a butterfly: the model a permutation is learned in.
#[derive(Module, Debug)]
struct Relaxed<B: Backend> {
    perm: RelaxedPermutation<B>,
    butterfly: Butterfly<B>,
}

/// The permutation that makes the objective's target a butterfly after it, learned from the
/// objective alone (its inputs and their images: no matrix): see the module docs.
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
    search: &PermutationSearch,
    seed: u64,
    stop: Option<&AtomicBool>,
    device: &B::Device,
) -> Result<LearnedPermutation> {
    if search.seeds == 0 {
        return Err(Error::invalid("train.learn_permutation", "at least one seed", 0));
    }
    // The rmse of the zero map: the target's own scale.
    let (re, im) = objective.input();
    let scale = scalar(objective.mean_square(&objective.residual((re.zeros_like(), im.zeros_like())))).sqrt();
    let mut tried = Vec::with_capacity(search.seeds);
    'seeds: for s in 0..search.seeds as u64 {
        let seed = seed.wrapping_add(s.wrapping_mul(0x9e37_79b9));
        for after in [Permutation::Identity, Permutation::BitReversal] {
            let perm = relax(objective, search, seed, &after, stop, device)?;
            let score = fit(objective, &perm, search.score_steps, search.lr, seed, stop, device)?;
            tried.push((perm, score));
            if score <= SOLVED * scale {
                break 'seeds;
            }
        }
    }
    let (permutation, score) = tried
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .cloned()
        .ok_or_else(|| Error::invalid("train.learn_permutation", "at least one seed", 0))?;
    Ok(LearnedPermutation { permutation, score, tried })
}

/// One relaxation from `seed` with the butterfly behind `after`, hardened: the relaxed family's
/// permutation, then `after`, as one gather.
fn relax<B: FftBackend>(
    objective: &Objective<B>,
    search: &PermutationSearch,
    seed: u64,
    after: &Permutation,
    stop: Option<&AtomicBool>,
    device: &B::Device,
) -> Result<Permutation> {
    let n = objective.n();
    let perm = RelaxedPermutationConfig::new(n).with_seed(seed).init::<B>(device)?;
    let butterfly = ButterflyConfig::new(n)
        .with_init(ButterflyInit::RandomUnitary { seed })
        .with_permutation(after.clone())
        .init::<B>(device)?;
    let mut model = Relaxed { perm, butterfly };
    let mut optim_b = AdamConfig::new().with_epsilon(1e-8).init::<B, Relaxed<B>>();
    let mut optim_p = AdamConfig::new().with_epsilon(1e-8).init::<B, Relaxed<B>>();
    for step in 0..search.relax_steps {
        stop_if_asked(stop)?;
        let (re, im) = objective.input();
        let (re, im) = model.perm.forward(re, im)?;
        let y = model.butterfly.forward(re, im)?;
        let loss = objective.mean_square(&objective.residual(y));
        check_finite(scalar(loss.clone()), step)?;
        let mut grads = loss.backward();
        let g_perm = GradientsParams::from_module(&mut grads, &model.perm);
        let g_bf = GradientsParams::from_module(&mut grads, &model.butterfly);
        model = optim_b.step(search.lr, model, g_bf);
        model = optim_p.step(search.logit_lr, model, g_perm);
    }
    let (first, then) = (model.perm.harden().indices(n), after.indices(n));
    Permutation::gather(then.iter().map(|&i| first[i]).collect())
}

/// The rmse a butterfly of random unitary blocks behind `perm` reaches in `steps` Adam steps.
fn fit<B: FftBackend>(
    objective: &Objective<B>,
    perm: &Permutation,
    steps: usize,
    lr: f64,
    seed: u64,
    stop: Option<&AtomicBool>,
    device: &B::Device,
) -> Result<f64> {
    let n = objective.n();
    let mut butterfly = ButterflyConfig::new(n)
        .with_init(ButterflyInit::RandomUnitary { seed: seed ^ 0x5c0e })
        .with_permutation(perm.clone())
        .init::<B>(device)?;
    let mut optim = AdamConfig::new().with_epsilon(1e-8).init::<B, Butterfly<B>>();
    let mut last = f64::INFINITY;
    for step in 0..=steps {
        stop_if_asked(stop)?;
        let (re, im) = objective.input();
        let loss = objective.mean_square(&objective.residual(butterfly.forward(re, im)?));
        last = scalar(loss.clone());
        check_finite(last, step)?;
        if step == steps {
            break;
        }
        let grads = GradientsParams::from_grads(loss.backward(), &butterfly);
        butterfly = optim.step(lr, butterfly, grads);
    }
    Ok(last.sqrt())
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
