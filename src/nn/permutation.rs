//! A learnable permutation for models that train one end to end by gradient descent: Dao et
//! al.'s relaxed recursive permutation (ICML 2019, §3.2; HazyResearch/butterfly's
//! `Permutation`).
//!
//! The family: at each level ℓ = 0 … L−2 (blocks of `b = N / 2^ℓ` consecutive entries, from the
//! whole vector down to blocks of 4), optionally gather each block's even-indexed entries
//! before its odd ones, then optionally reverse its first half, and optionally its second half.
//! Separating at every level is the bit reversal; nothing at all is the identity. The relaxation
//! takes each of the three choices of a level with probability `sigmoid(logit)` and mixes the
//! two results, so the layer is a doubly stochastic matrix, differentiable in its logits; a
//! trained layer ends as the hard permutation of its most likely choices
//! ([`RelaxedPermutation::harden`]), which a [`crate::nn::Butterfly`] applies as a gather.
//!
//! The trainer finds a one-factor target's permutation from its matrix exactly where it has one
//! ([`crate::reference::identify`]: any permutation rather than this family only, with no
//! hyperparameters), and learns it with this layer where it has none: a user's pairs too few to
//! determine the matrix ([`crate::train::permutation`]).

use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{backend::Backend, Tensor};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::error::{check_power_of_two, Error, Result};
use crate::ops::Permutation;
use crate::tensors::{float_tensor, to_f64_vec};

/// Configuration of a [`RelaxedPermutation`].
#[derive(Config, Debug)]
pub struct RelaxedPermutationConfig {
    /// Size N: a power of two, at least 2.
    pub n: usize,
    /// Seed of the initial logits (standard normal, as in Dao et al.).
    #[config(default = 0)]
    pub seed: u64,
}

impl RelaxedPermutationConfig {
    /// Builds the layer on `device`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when N is not a power of two ≥ 2.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<RelaxedPermutation<B>> {
        check_power_of_two("relaxed_permutation.init", self.n)?;
        let levels = levels(self.n);
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let logits = (0..levels * 3).map(|_| StandardNormal.sample(&mut rng)).collect();
        RelaxedPermutation::from_logits(self.n, logits, device)
    }
}

/// Logits clamped to ±this before the sigmoid: beyond it the probability is 1 or 0 in f64 and
/// `exp` could overflow.
const LOGIT_CLAMP: f64 = 40.0;

/// The sigmoid in the logits' own float type. (Burn's `activation::sigmoid` computes in f32
/// whatever the backend's type, which costs an f64 model half its digits: finite differences
/// of its loss in f64 were off by 1 %.)
fn probabilities<B: Backend>(logits: Tensor<B, 2>) -> Tensor<B, 2> {
    logits.clamp(-LOGIT_CLAMP, LOGIT_CLAMP).neg().exp().add_scalar(1.0).recip()
}

/// The number of levels of size N (blocks of N down to 4; blocks of 2 have nothing to choose).
fn levels(n: usize) -> usize {
    (n.trailing_zeros() as usize).saturating_sub(1)
}

/// Dao et al.'s relaxed permutation (see the module docs): logits `[L − 1, 3]`, level ℓ's
/// `(separate, reverse first half, reverse second half)` for blocks of `N / 2^ℓ`.
#[derive(Module, Debug)]
pub struct RelaxedPermutation<B: Backend> {
    /// The logits, `[L − 1, 3]` (empty for N = 2).
    pub logits: Param<Tensor<B, 2>>,
    #[module(skip)]
    n: usize,
}

impl<B: Backend> RelaxedPermutation<B> {
    /// A layer with these logits (`[L − 1, 3]` row-major).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when N is not a power of two ≥ 2 or the logits are not
    /// `3 · (log2 N − 1)` values.
    pub fn from_logits(n: usize, logits: Vec<f64>, device: &B::Device) -> Result<Self> {
        let op = "relaxed_permutation";
        check_power_of_two(op, n)?;
        let levels = levels(n);
        if logits.len() != levels * 3 {
            return Err(Error::invalid(op, format!("{} logits for N = {n}", levels * 3), logits.len()));
        }
        Ok(RelaxedPermutation { logits: Param::from_tensor(float_tensor(logits, [levels, 3], device)), n })
    }

    /// Size N.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Applies the relaxed permutation along the last dimension (the same mixing to the real
    /// and imaginary parts, which a real matrix does).
    ///
    /// # Shapes
    /// - `re`, `im`: `[..., N]`, the same shape
    /// - returns `(re, im)`, each `[..., N]`
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the shapes differ or the last dimension is not N.
    pub fn forward<const D: usize>(&self, re: Tensor<B, D>, im: Tensor<B, D>) -> Result<(Tensor<B, D>, Tensor<B, D>)> {
        let op = "relaxed_permutation.forward";
        if re.dims() != im.dims() {
            return Err(Error::invalid(op, format!("im of re's shape {:?}", re.dims()), format!("{:?}", im.dims())));
        }
        Ok((self.forward_real(re)?, self.forward_real(im)?))
    }

    /// Applies the relaxed permutation to real vectors along the last dimension.
    ///
    /// # Shapes
    /// - `x`: `[..., N]`
    /// - returns `[..., N]`
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the last dimension is not N.
    pub fn forward_real<const D: usize>(&self, x: Tensor<B, D>) -> Result<Tensor<B, D>> {
        let dims = x.dims();
        let n = self.n;
        if D == 0 || dims[D - 1] != n {
            return Err(Error::invalid(
                "relaxed_permutation.forward",
                format!("last dimension {n}"),
                format!("{dims:?}"),
            ));
        }
        let rows = dims.iter().take(D - 1).product::<usize>();
        let probs = probabilities(self.logits.val());
        let mut y: Tensor<B, 2> = x.reshape([rows, n]);
        for level in 0..levels(n) {
            let b = n >> level;
            let p = |c: usize| probs.clone().slice([level..level + 1, c..c + 1]);
            // Evens before odds in every block of b.
            let blocks = y.clone().reshape([rows, n / b, b]);
            let separated = blocks.clone().reshape([rows, n / b, b / 2, 2]).swap_dims(2, 3).reshape([rows, n / b, b]);
            let p_sep = p(0).reshape([1, 1, 1]);
            let mixed = blocks * (p_sep.ones_like() - p_sep.clone()) + separated * p_sep;
            // Each half reversed with its own probability.
            let halves = mixed.reshape([rows, n / b, 2, b / 2]);
            let p_rev = probs.clone().slice([level..level + 1, 1..3]).reshape([1, 1, 2, 1]);
            let reversed = halves.clone().flip([3]);
            y = (halves * (p_rev.ones_like() - p_rev.clone()) + reversed * p_rev).reshape([rows, n]);
        }
        Ok(y.reshape(dims))
    }

    /// The hard permutation of the most likely choices (each probability rounded to 0 or 1),
    /// as a gather for a [`crate::nn::Butterfly`]: at saturated logits the relaxed layer equals
    /// it.
    pub fn harden(&self) -> Permutation {
        let choices: Vec<bool> = to_f64_vec(self.logits.val()).iter().map(|&l| l > 0.0).collect();
        family_member(self.n, &choices).expect("the layer's logits are its levels' choices")
    }
}

/// The member of the family (see the module docs) of these choices, `3 · (log2 N − 1)` of
/// them, level by level: separate evens from odds, reverse the first half, reverse the second
/// half. [`RelaxedPermutation::harden`] takes each logit's sign.
///
/// # Errors
/// [`Error::InvalidInput`] when N is not a power of two ≥ 2 or the choices are not
/// `3 · (log2 N − 1)`.
pub fn family_member(n: usize, choices: &[bool]) -> Result<Permutation> {
    let op = "relaxed_permutation.family_member";
    check_power_of_two(op, n)?;
    if choices.len() != levels(n) * 3 {
        return Err(Error::invalid(op, format!("{} choices for N = {n}", levels(n) * 3), choices.len()));
    }
    let mut indices: Vec<usize> = (0..n).collect();
    for level in 0..levels(n) {
        let b = n >> level;
        let take = |c: usize| choices[level * 3 + c];
        for block in indices.chunks_mut(b) {
            if take(0) {
                let separated: Vec<usize> =
                    block.iter().step_by(2).chain(block.iter().skip(1).step_by(2)).copied().collect();
                block.copy_from_slice(&separated);
            }
            let (lo, hi) = block.split_at_mut(b / 2);
            if take(1) {
                lo.reverse();
            }
            if take(2) {
                hi.reverse();
            }
        }
    }
    Permutation::gather(indices)
}
