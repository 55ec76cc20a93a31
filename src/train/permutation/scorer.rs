//! How the search scores a candidate: the class's butterflies of random unitary blocks behind
//! it, fitted by Adam with the trainer's cosine decay, then polished where the fit stopped short
//! (see the parent module's docs), and the relaxation that proposes candidates of its own.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;

use burn::module::Module;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

use super::memo::Memo;
use super::{check_finite, followed_by, stop_if_asked, PermutationSearch};
use crate::backend::FftBackend;
use crate::error::Result;
use crate::nn::{
    Butterfly, ButterflyConfig, ButterflyInit, ButterflyProduct, RelaxedPermutation, RelaxedPermutationConfig,
};
use crate::ops::Permutation;
use crate::train::lm::{Polish, PolishSettings, Twiddles};
use crate::train::objective::{scalar, Objective};
use crate::train::run::INITIAL_LOG2_LAMBDA;

/// A score this far below the target's own scale (the rmse of the zero map) ends the search and
/// the scoring fit: a butterfly behind the right permutation fits the pairs to 1e-9 … 1e-17 of
/// it in the scoring fit, behind a wrong one it stays within a factor of 3 of it (the DFT's
/// pairs at N = 8 … 32 in f64, measured with 1000 steps at a constant rate; f32 was not
/// measured). A product's fit can stall behind the right one too (the DCT-II's Makhoul gather in
/// BPBP at N = 32 reached rmse 5e-4 and 3e-3 from two seeds, 0.003 and 0.02 of its scale, with
/// those 1000 steps): then the polish follows, and every candidate is scored and the best kept.
pub(super) const SOLVED: f64 = 1e-3;

/// A relaxed permutation, then the butterflies of the run's class (the first behind the fixed
/// permutation `after`, the others behind the search's later one): the model a permutation is
/// learned in.
#[derive(Module, Debug)]
struct Relaxed<B: Backend> {
    perm: RelaxedPermutation<B>,
    butterflies: Vec<Butterfly<B>>,
}

/// `factors` butterflies of random unitary blocks (seeds from `seed`), the first behind `first`
/// and the others behind `later`: a product of the class BPBP… whose later permutations are one.
pub(super) fn butterflies<B: FftBackend>(
    n: usize,
    factors: usize,
    (first, later): (&Permutation, &Permutation),
    seed: u64,
    device: &B::Device,
) -> Result<Vec<Butterfly<B>>> {
    (0..factors as u64)
        .map(|k| {
            let perm = if k == 0 { first.clone() } else { later.clone() };
            ButterflyConfig::new(n)
                .with_init(ButterflyInit::RandomUnitary { seed: seed.wrapping_add(k.wrapping_mul(0x51ed)) })
                .with_permutation(perm)
                .init::<B>(device)
        })
        .collect()
}

/// The image of `(re, im)` under `layers`, in order.
fn through<B: FftBackend>(
    layers: &[Butterfly<B>],
    (mut re, mut im): (burn::tensor::Tensor<B, 2>, burn::tensor::Tensor<B, 2>),
) -> Result<(burn::tensor::Tensor<B, 2>, burn::tensor::Tensor<B, 2>)> {
    for b in layers {
        (re, im) = b.forward(re, im)?;
    }
    Ok((re, im))
}

/// What scores a candidate: the objective, on the autodiff backend (the fit) and the inner one
/// (the polish), the early stop, and the search's settings.
pub(super) struct Scorer<'a, B: FftBackend> {
    pub(super) objective: &'a Objective<B>,
    pub(super) inner: Objective<B::InnerBackend>,
    pub(super) factors: usize,
    pub(super) search: &'a PermutationSearch,
    /// The rmse that ends a fit, the polish and the search: [`SOLVED`] of the target's scale.
    pub(super) solved: f64,
    pub(super) stop: Option<&'a AtomicBool>,
    pub(super) device: &'a B::Device,
    /// The search's progress, where the run keeps it: what is there is not fitted again.
    pub(super) memo: Option<&'a Memo>,
    /// Every stalled fit's score, `(first, later, seed)` as gathers, as the memo keeps them: a
    /// chain's bottom that fits the members from one seed after another scores the bit reversal
    /// and identity pairs its first round fitted from the same seeds, and a run without a
    /// checkpoint directory (no memo) would fit them again, with the same outcome.
    stalled: RefCell<HashMap<FitKey, f64>>,
}

/// A fit's candidate and seed: the first permutation's gather, the later ones', the seed.
type FitKey = (Vec<usize>, Vec<usize>, u64);

impl<'a, B: FftBackend> Scorer<'a, B> {
    pub(super) fn new(
        objective: &'a Objective<B>,
        factors: usize,
        search: &'a PermutationSearch,
        stop: Option<&'a AtomicBool>,
        device: &'a B::Device,
    ) -> Self {
        let solved = SOLVED * own_scale(objective);
        let stalled = RefCell::default();
        Scorer { objective, inner: objective.inner(), factors, search, solved, stop, device, memo: None, stalled }
    }

    /// This scorer, keeping its fits' scores and relaxations' gathers in `memo` and taking those
    /// found there.
    pub(super) fn with_memo(self, memo: Option<&'a Memo>) -> Self {
        Scorer { memo, ..self }
    }
}

/// The rmse of the zero map: the target's own scale, which [`SOLVED`] is a fraction of.
pub(super) fn own_scale<B: FftBackend>(objective: &Objective<B>) -> f64 {
    let (re, im) = objective.input();
    scalar(objective.mean_square(&objective.residual((re.zeros_like(), im.zeros_like())))).sqrt()
}

impl<B: FftBackend> Scorer<'_, B> {
    /// One relaxation from `seed` with the first butterfly behind `after` and the later ones
    /// behind `later`, hardened: the relaxed family's permutation, then `after`, as one gather.
    pub(super) fn relax(&self, seed: u64, after: &Permutation, later: &Permutation) -> Result<Permutation> {
        if let Some(kept) = self.memo.map(|m| m.relaxation(seed, after, later)).transpose()?.flatten() {
            return Ok(kept);
        }
        let hardened = self.relax_anew(seed, after, later)?;
        if let Some(memo) = self.memo {
            memo.keep_relaxation(seed, after, later, &hardened)?;
        }
        Ok(hardened)
    }

    fn relax_anew(&self, seed: u64, after: &Permutation, later: &Permutation) -> Result<Permutation> {
        let (objective, search, n) = (self.objective, self.search, self.objective.n());
        let perm = RelaxedPermutationConfig::new(n).with_seed(seed).init::<B>(self.device)?;
        let butterflies = butterflies::<B>(n, self.factors, (after, later), seed, self.device)?;
        let mut model = Relaxed { perm, butterflies };
        let mut optim_b = AdamConfig::new().with_epsilon(1e-8).init::<B, Relaxed<B>>();
        let mut optim_p = AdamConfig::new().with_epsilon(1e-8).init::<B, Relaxed<B>>();
        for step in 0..search.relax_steps {
            stop_if_asked(self.stop)?;
            let (re, im) = objective.input();
            let y = through(&model.butterflies, model.perm.forward(re, im)?)?;
            let loss = objective.mean_square(&objective.residual(y));
            check_finite(scalar(loss.clone()), step)?;
            let mut grads = loss.backward();
            let g_perm = GradientsParams::from_module(&mut grads, &model.perm);
            let g_bf = GradientsParams::from_module(&mut grads, &model.butterflies);
            model = optim_b.step(search.lr, model, g_bf);
            model = optim_p.step(search.logit_lr, model, g_perm);
        }
        followed_by(&model.perm.harden(), after, n)
    }

    /// The rmse the class's butterflies of random unitary blocks (seeded from `seed`), the
    /// first behind `perms.0` and the later ones behind `perms.1`, reach in the scoring fit
    /// (`score_steps` Adam steps, then the polish where that did not reach the early stop),
    /// and the butterflies they ended as. A score this scorer or the memo kept is taken from
    /// there, with no butterflies: it is above the early stop (one below it is not kept), so
    /// they are not used.
    pub(super) fn fit(&self, perms: (&Permutation, &Permutation), seed: u64) -> Result<(f64, Vec<Butterfly<B>>)> {
        let n = self.objective.n();
        let key = (perms.0.indices(n), perms.1.indices(n), seed);
        let kept = self.stalled.borrow().get(&key).copied();
        if let Some(score) = kept.or_else(|| self.memo.and_then(|m| m.fit(perms, seed))) {
            return Ok((score, Vec::new()));
        }
        let (score, layers) = self.fit_anew(perms, seed)?;
        if score > self.solved {
            self.stalled.borrow_mut().insert(key, score);
            if let Some(memo) = self.memo {
                memo.keep_fit(perms, seed, score)?;
            }
        }
        Ok((score, layers))
    }

    fn fit_anew(&self, perms: (&Permutation, &Permutation), seed: u64) -> Result<(f64, Vec<Butterfly<B>>)> {
        let (objective, search) = (self.objective, self.search);
        let mut layers = butterflies::<B>(objective.n(), self.factors, perms, seed ^ 0x5c0e, self.device)?;
        let steps = search.score_steps;
        let mut optim = AdamConfig::new().with_epsilon(1e-8).init::<B, Vec<Butterfly<B>>>();
        let mut last = f64::INFINITY;
        for step in 0..=steps {
            stop_if_asked(self.stop)?;
            let (re, im) = objective.input();
            let loss = objective.mean_square(&objective.residual(through(&layers, (re, im))?));
            last = scalar(loss.clone());
            check_finite(last, step)?;
            if step == steps || last.sqrt() <= self.solved {
                break;
            }
            // The trainer's cosine decay: its last steps, at small rates, settle the fit in its basin.
            let decay = 0.5 * (1.0 + (std::f64::consts::PI * step as f64 / steps as f64).cos());
            let lr = search.lr_final + (search.lr - search.lr_final) * decay;
            let grads = GradientsParams::from_grads(loss.backward(), &layers);
            layers = optim.step(lr, layers, grads);
        }
        if last.sqrt() <= self.solved || search.polish_steps == 0 {
            return Ok((last.sqrt(), layers));
        }
        self.polish(layers)
    }

    /// The butterflies `layers` (each behind its own permutation) after Levenberg–Marquardt on every twiddle, until the rmse reaches the early stop, the
    /// polish stalls or `polish_steps` are taken, and the rmse they reach. Behind a wrong
    /// permutation it stalls within a few steps where Adam left it; behind the right one it
    /// keeps falling: the DCT-II in BPBP at N = 64 (f64, seed 0), fitted to rmse 1.7e-2 … 8e-2
    /// behind each of the four self-similar representatives, fell to 3.7e-4 in 60 steps behind
    /// its own and not below 2.3e-2 behind the three others (the fits alone, 1.7e-2 against
    /// 2.3e-2, did not tell them apart).
    fn polish(&self, layers: Vec<Butterfly<B>>) -> Result<(f64, Vec<Butterfly<B>>)> {
        let mut product = ButterflyProduct { factors: layers };
        let perms = product.permutations();
        let (re, im) = product.stacked_twiddles();
        let theta = Twiddles { re: re.inner(), im: im.inner() };
        let mask = Twiddles::masks(theta.re.ones_like(), false);
        let mut polish = Polish::<B>::new(&self.inner, &perms, theta, mask, INITIAL_LOG2_LAMBDA, 0);
        // Patient: a refused step only raises the damping (the trainer's last stage), so a slow
        // descent behind the right permutation is not cut short.
        let settings = PolishSettings {
            cg_iters: self.search.cg_iters,
            cg_tol: self.search.cg_tol,
            stop_loss: self.solved * self.solved,
            max_stalled: self.search.max_stalled,
            patient: true,
        };
        for step in 0..self.search.polish_steps {
            stop_if_asked(self.stop)?;
            check_finite(polish.loss, step)?;
            if polish.done(&settings) {
                break;
            }
            polish.step(&settings);
        }
        product.set_stacked_twiddles(Tensor::from_inner(polish.theta.re), Tensor::from_inner(polish.theta.im));
        Ok((polish.loss.sqrt(), product.factors))
    }
}
