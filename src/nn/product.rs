//! Products of butterflies: K (permutation, butterfly) factors applied one after the other, the
//! model class that represents every target of [`crate::reference::factorizations`] exactly.
//!
//! Dao et al. (ICML 2019) call one factor **BP** (a permutation, then a butterfly) and two
//! **BPBP**; the DFT is one factor, convolution two, and the real transforms (Hartley, DCT-II,
//! DST-II) one factor followed by a pairing of outputs k and −k, two more factors of which only
//! one stage is learned ([`crate::reference::factorizations`] has each construction). The trainer
//! fits a [`ButterflyProduct`] in the target's [`model_class`].

use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{backend::Backend, Tensor};

use super::butterfly::{
    basis_images_on_backend, dense_on_backend, images_on_backend, Butterfly, ButterflyConfig, ButterflyInit,
};
use crate::error::{check_power_of_two, Error, Result};
use crate::ops::butterfly::{ButterflyOps, Permutation, Tangent};
use crate::reference::butterfly::{apply, product_matrix};
use crate::reference::factorizations::{exact, learned_stages, permutations, Factor, Factorization};
use crate::reference::identify::{butterfly_permutation, factor_permutation, F64_TOLERANCE};
use crate::reference::{ComplexMatrix, Target};
use crate::tensors::float_tensor;

/// Configuration of a [`ButterflyProduct`].
#[derive(Config, Debug)]
pub struct ButterflyProductConfig {
    /// Transform size N: a power of two, at least 2.
    pub n: usize,
    /// The input permutation of each factor, the first applied first: K = its length ≥ 1.
    pub permutations: Vec<Permutation>,
    /// How each factor's twiddles start (default: Haar-random unitary blocks). A seeded
    /// initialiser gives factor k of K the seed `seed · K + k`, so a single factor keeps `seed`.
    #[config(default = "ButterflyInit::RandomUnitary { seed: 0 }")]
    pub init: ButterflyInit,
    /// How the factors after the first start, where they differ from `init` (seeds as for
    /// `init`). The trainer uses [`ButterflyInit::NearIdentity`] here.
    #[config(default = "None")]
    pub rest: Option<ButterflyInit>,
}

impl ButterflyProductConfig {
    /// Builds the product on `device`, after checking the configuration.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when N is not a power of two ≥ 2, there are no factors, or a
    /// permutation is not of size N; [`Error::OutOfMemory`] when the twiddles do not fit.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<ButterflyProduct<B>> {
        let op = "butterfly_product.init";
        check_power_of_two(op, self.n)?;
        let k = self.permutations.len();
        if k == 0 {
            return Err(Error::invalid(op, "at least one factor (permutation)", "none"));
        }
        let factors = self
            .permutations
            .iter()
            .enumerate()
            .map(|(i, p)| {
                ButterflyConfig::new(self.n)
                    .with_permutation(p.clone())
                    .with_init(factor_init(
                        if i == 0 { &self.init } else { self.rest.as_ref().unwrap_or(&self.init) },
                        i,
                        k,
                    ))
                    .init(device)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ButterflyProduct { factors })
    }
}

/// The initialiser of factor `i` of `k`: seeds become `seed · k + i`.
fn factor_init(init: &ButterflyInit, i: usize, k: usize) -> ButterflyInit {
    let seed_of = |seed: u64| seed.wrapping_mul(k as u64).wrapping_add(i as u64);
    match init {
        ButterflyInit::RandomUnitary { seed } => ButterflyInit::RandomUnitary { seed: seed_of(*seed) },
        ButterflyInit::Randn { seed, scale } => ButterflyInit::Randn { seed: seed_of(*seed), scale: *scale },
        ButterflyInit::NearIdentity { seed, weight } => {
            ButterflyInit::NearIdentity { seed: seed_of(*seed), weight: *weight }
        }
        other => other.clone(),
    }
}

/// A product of K butterflies: `y = F_{K−1} ⋯ F_1 F_0 x`, each factor `F_k` a [`Butterfly`]
/// (its permutation, then its log2 N stages). With K = 1 it is the [`Butterfly`] itself.
///
/// The parameters are the factors' twiddles; in the trainer and the safetensors export they are
/// stacked factor-major as `[K · log2 N, N/2, 2, 2]` (stage s of factor k at row `k · log2 N + s`).
#[derive(Module, Debug)]
pub struct ButterflyProduct<B: Backend> {
    /// The factors, the first applied first.
    pub factors: Vec<Butterfly<B>>,
}

impl<B: Backend> ButterflyProduct<B> {
    /// A product of one factor.
    pub fn from_butterfly(layer: Butterfly<B>) -> Self {
        ButterflyProduct { factors: vec![layer] }
    }

    /// The single factor, when there is exactly one.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the product has more than one factor.
    pub fn into_butterfly(mut self) -> Result<Butterfly<B>> {
        if self.factors.len() != 1 {
            return Err(Error::invalid("butterfly_product.into_butterfly", "one factor", self.factors.len()));
        }
        Ok(self.factors.remove(0))
    }

    /// The product of `factorization`'s factors in f64, cast to `B`'s float type.
    ///
    /// # Errors
    /// Those of [`Butterfly::from_factor`].
    pub fn from_factorization(factorization: &Factorization, device: &B::Device) -> Result<Self> {
        let factors =
            factorization.factors().iter().map(|f| Butterfly::from_factor(f, device)).collect::<Result<Vec<_>>>()?;
        Ok(ButterflyProduct { factors })
    }

    /// The same product on backend `C` (twiddles through f64, rounded to `C`'s float type; the
    /// same permutations): an f64 solution as an f32 device evaluates it.
    ///
    /// # Errors
    /// Those of [`Butterfly::from_factor`] (none for a product built here).
    pub fn cast<C: Backend>(&self, device: &C::Device) -> Result<ButterflyProduct<C>> {
        let n = self.n();
        let factors = self
            .factors
            .iter()
            .map(|f| {
                let (re, im) = f.twiddles_f64();
                Butterfly::from_factor(&Factor { permutation: f.permutation().indices(n), re, im }, device)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ButterflyProduct { factors })
    }

    /// The product of size 2N whose factors are this product's, each doubled
    /// ([`Butterfly::doubled`]: applied to both halves, with a random last stage, factor k's
    /// drawn from `seed + k`). A product of bit-reversed DFT-like factors keeps its structure:
    /// after the bit reversal of 2N, the first log2 N stages of each factor act on the even and
    /// the odd samples as the factor of N did.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a factor's permutation is a gather.
    pub fn doubled(&self, seed: u64) -> Result<ButterflyProduct<B>> {
        let factors = self
            .factors
            .iter()
            .enumerate()
            .map(|(k, f)| f.doubled(seed.wrapping_add(k as u64)))
            .collect::<Result<Vec<_>>>()?;
        Ok(ButterflyProduct { factors })
    }

    /// The product of size 2N grown from this two-factor layer (both factors after the bit
    /// reversal) by the eigenstructure of the targets ([`crate::reference::growth`]): `half` the
    /// target this layer was trained on, `target` the one at 2N; with the start's rmse against
    /// `target` in f64. `None` where the layer is not of that shape or a step of the construction
    /// is singular (a layer far from its target), so the caller starts otherwise.
    ///
    /// # Errors
    /// Those of [`Target::matrix`] (sizes, memory) and of the construction.
    pub fn eigen_doubled(&self, half: &Target, target: &Target) -> Result<Option<(ButterflyProduct<B>, f64)>> {
        let n = self.n();
        if self.factors.len() != 2 || self.factors.iter().any(|f| *f.permutation() != Permutation::BitReversal) {
            return Ok(None);
        }
        let (re, im) = self.factors[0].twiddles_f64();
        let grown = crate::reference::growth::eigen_doubled((&re, &im), &half.matrix(n)?, &target.matrix(2 * n)?)?;
        let Some(grown) = grown else { return Ok(None) };
        let device = self.factors[0].twiddle_re.device();
        let permutation = Permutation::BitReversal.indices(2 * n);
        let factors = grown
            .factors
            .iter()
            .map(|(re, im)| {
                let factor = crate::reference::factorizations::Factor {
                    permutation: permutation.clone(),
                    re: re.clone(),
                    im: im.clone(),
                };
                Butterfly::from_factor(&factor, &device)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some((ButterflyProduct { factors }, grown.rmse)))
    }

    /// Transform size N.
    pub fn n(&self) -> usize {
        self.factors[0].n()
    }

    /// The number of factors K.
    pub fn len(&self) -> usize {
        self.factors.len()
    }

    /// Always false: a product has at least one factor.
    pub fn is_empty(&self) -> bool {
        self.factors.is_empty()
    }

    /// The factors' input permutations, the first applied first.
    pub fn permutations(&self) -> Vec<Permutation> {
        self.factors.iter().map(|f| f.permutation().clone()).collect()
    }

    /// The product with every twiddle's imaginary part set to 0 (real butterflies).
    pub fn real_part(self) -> Self {
        let factors = self
            .factors
            .into_iter()
            .map(|mut f| {
                let zeros = f.twiddle_im.val().zeros_like();
                f.twiddle_im = Param::from_tensor(zeros.require_grad());
                f
            })
            .collect();
        ButterflyProduct { factors }
    }

    /// The twiddles stacked factor-major, `(re, im)`, each `[K · log2 N, N/2, 2, 2]`.
    pub fn stacked_twiddles(&self) -> (Tensor<B, 4>, Tensor<B, 4>) {
        let re = self.factors.iter().map(|f| f.twiddle_re.val()).collect();
        let im = self.factors.iter().map(|f| f.twiddle_im.val()).collect();
        (Tensor::cat(re, 0), Tensor::cat(im, 0))
    }

    /// The dense N×N matrix of the product, computed in f64 on the CPU from the twiddles.
    pub fn to_matrix(&self) -> ComplexMatrix {
        let n = self.n();
        let factors: Vec<_> = self
            .factors
            .iter()
            .map(|f| {
                let (re, im) = f.twiddles_f64();
                (re, im, f.permutation().indices(n))
            })
            .collect();
        product_matrix(n, factors.iter().map(|(re, im, p)| (&re[..], &im[..], &p[..])))
            .expect("the factors' twiddles have the product's n by construction")
    }

    /// [`forward`](Self::forward) through the tensor-op reference on any backend; the gradient
    /// comes from Burn's autodiff.
    ///
    /// # Errors
    /// As [`forward`](Self::forward).
    pub fn forward_reference<const D: usize>(
        &self,
        re: Tensor<B, D>,
        im: Tensor<B, D>,
    ) -> Result<(Tensor<B, D>, Tensor<B, D>)> {
        self.factors.iter().try_fold((re, im), |(re, im), f| f.forward_reference(re, im))
    }
}

impl<B: ButterflyOps> ButterflyProduct<B> {
    /// Applies the factors in order to complex vectors along the last dimension (the fused
    /// kernels where the backend has them, see [`ButterflyOps`]).
    ///
    /// # Shapes
    /// - `re`, `im`: `[..., N]`, the same shape
    /// - returns `(re, im)`, each `[..., N]`
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the shapes differ or the last dimension is not N.
    pub fn forward<const D: usize>(&self, re: Tensor<B, D>, im: Tensor<B, D>) -> Result<(Tensor<B, D>, Tensor<B, D>)> {
        self.factors.iter().try_fold((re, im), |(re, im), f| f.forward(re, im))
    }

    /// Applies the product to real vectors (imaginary part zero).
    ///
    /// # Shapes
    /// - `x`: `[..., N]`
    /// - returns `(re, im)`, each `[..., N]`
    pub fn forward_real<const D: usize>(&self, x: Tensor<B, D>) -> Result<(Tensor<B, D>, Tensor<B, D>)> {
        let im = x.zeros_like();
        self.forward(x, im)
    }

    /// The dense N×N matrix as the product computes it on its backend and dtype (see
    /// [`Butterfly::matrix_on_backend`]).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when the N×N batch and its f64 copy do not fit.
    pub fn matrix_on_backend(&self) -> Result<ComplexMatrix> {
        dense_on_backend(self.n(), &self.factors[0].twiddle_re.device(), |re, im| self.forward(re, im))
    }
}

/// Applies K stacked factors to a batch: factor k's twiddles are rows `k · log2 n ..` of
/// `tw_re`, `tw_im` (`[K · log2 n, n/2, 2, 2]`), its permutation `perms[k]`. Through `B`'s
/// [`ButterflyOps`] (fused where the backend has kernels).
///
/// # Shapes
/// - `x`: `(re, im)`, each `[batch, n]`
/// - returns `(re, im)`, each `[batch, n]`
pub fn product_forward<B: ButterflyOps>(
    x: (Tensor<B, 2>, Tensor<B, 2>),
    tw_re: &Tensor<B, 4>,
    tw_im: &Tensor<B, 4>,
    perms: &[Permutation],
) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let log_n = x.0.dims()[1].trailing_zeros() as usize;
    perms.iter().enumerate().fold(x, |(re, im), (k, p)| {
        let (tr, ti) = (tw_re.clone().narrow(0, k * log_n, log_n), tw_im.clone().narrow(0, k * log_n, log_n));
        B::butterfly(re, im, tr, ti, p)
    })
}

/// The tangent of [`product_forward`] along a direction `(dtw_re, dtw_im)` of the stacked
/// twiddles (the input held fixed): `(y, dy)`, one [`ButterflyOps::butterfly_tangent`] per
/// factor, the tangent permuted with the signal where a factor begins.
///
/// # Shapes
/// - `x`: `(re, im)`, each `[batch, n]`
/// - `tw_*`, `dtw_*`: `[K · log2 n, n/2, 2, 2]` for `K = perms.len()` factors
/// - returns `((y_re, y_im), (dy_re, dy_im))`, each `[batch, n]`
pub fn product_tangent<B: ButterflyOps>(
    x: (Tensor<B, 2>, Tensor<B, 2>),
    tw: (&Tensor<B, 4>, &Tensor<B, 4>),
    dtw: (&Tensor<B, 4>, &Tensor<B, 4>),
    perms: &[Permutation],
) -> Tangent<B> {
    let log_n = x.0.dims()[1].trailing_zeros() as usize;
    let dx = (x.0.zeros_like(), x.1.zeros_like());
    perms.iter().enumerate().fold((x, dx), |(y, dy), (k, p)| {
        let f = |t: &Tensor<B, 4>| t.clone().narrow(0, k * log_n, log_n);
        B::butterfly_tangent(y, dy, (&f(tw.0), &f(tw.1)), (&f(dtw.0), &f(dtw.1)), p)
    })
}

/// How a factor's input permutation was obtained: what a training report says was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PermutationSource {
    /// Found from the target's matrix ([`crate::reference::identify`]).
    Identified,
    /// Taken from the target's exact factorization (a per-target table: knowledge of the answer).
    Table,
    /// The identity, as the class sets it: the class B, a later factor of BPBP, or a user's
    /// matrix that no permutation makes a butterfly.
    Identity,
    /// Learned by gradient descent from the target's pairs, where they are too few to
    /// determine its matrix ([`crate::train::permutation`]).
    Learned,
    /// The half-size member's permutation doubled (a grown run on a user's operator): found
    /// from the matrix at the smallest size of the chain, and carried up by the doubling.
    Grown,
}

/// The model class that represents a target exactly ([`model_class`]): a product of
/// (permutation, butterfly) factors of which some stages may be fixed permutations.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelClass {
    /// Each factor's input permutation, the first applied first.
    pub permutations: Vec<Permutation>,
    /// How each of them was obtained.
    pub sources: Vec<PermutationSource>,
    /// Whether each stage of the stacked factors is learned (factor-major, `K · log2 N`).
    pub learned: Vec<bool>,
    /// The stacked twiddles `(re, im)` (`[K · log2 N, N/2, 2, 2]` row-major, f64) whose stages
    /// that are not learned the model keeps; `None` when every stage is learned.
    pub fixed: Option<(Vec<f64>, Vec<f64>)>,
    /// Whether the butterflies are real (every twiddle's imaginary part fixed at 0; `train
    /// --real`): the Hadamard transform's exact factorization is, the others' are not.
    pub real: bool,
}

impl ModelClass {
    /// The number of stages learned and the number fixed to a known factorization's values,
    /// over all factors.
    pub fn stage_counts(&self) -> (usize, usize) {
        let learned = self.learned.iter().filter(|&&l| l).count();
        (learned, self.learned.len() - learned)
    }

    /// 1 for every twiddle entry of a learned stage, 0 elsewhere, as the stacked twiddles.
    pub fn stage_mask(&self, n: usize) -> Vec<f64> {
        let per_stage = 2 * n;
        self.learned.iter().flat_map(|&l| std::iter::repeat_n(if l { 1.0 } else { 0.0 }, per_stage)).collect()
    }

    /// `product` with the stages that are not learned set to their fixed values (the learned
    /// ones as they were); the product itself when every stage is learned.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the product's factors or size differ from the class's.
    pub fn impose<B: Backend>(&self, product: ButterflyProduct<B>) -> Result<ButterflyProduct<B>> {
        let product = if self.real { product.real_part() } else { product };
        let Some((fixed_re, fixed_im)) = &self.fixed else { return Ok(product) };
        let n = product.n();
        let log_n = n.trailing_zeros() as usize;
        let per_factor = log_n * 2 * n;
        if product.len() * per_factor != fixed_re.len() || self.learned.len() != product.len() * log_n {
            return Err(Error::invalid(
                "model_class.impose",
                format!("{} stages of size {}", self.learned.len(), fixed_re.len() / self.learned.len().max(1) / 2),
                format!("{} factors of size {n}", product.len()),
            ));
        }
        let factors = product
            .factors
            .into_iter()
            .enumerate()
            .map(|(k, mut f)| {
                let learned = &self.learned[k * log_n..(k + 1) * log_n];
                if learned.iter().all(|&l| l) {
                    return f;
                }
                let (mut re, mut im) = f.twiddles_f64();
                for (s, _) in learned.iter().enumerate().filter(|(_, &l)| !l) {
                    let (a, b) = (s * 2 * n, (s + 1) * 2 * n);
                    re[a..b].copy_from_slice(&fixed_re[k * per_factor + a..k * per_factor + b]);
                    im[a..b].copy_from_slice(&fixed_im[k * per_factor + a..k * per_factor + b]);
                }
                let device = f.twiddle_re.device();
                let shape = [log_n, n / 2, 2, 2];
                let param = |v: Vec<f64>| Param::from_tensor(float_tensor::<B, 4>(v, shape, &device).require_grad());
                f.twiddle_re = param(re);
                f.twiddle_im = param(im);
                f
            })
            .collect();
        Ok(ButterflyProduct { factors })
    }
}

/// A model class chosen by name instead of the target's own (`train --model`), in Dao et al.'s
/// notation (ICML 2019): every stage learned, and
/// - `B`: one butterfly, no input permutation;
/// - `BP`: one butterfly after the first permutation of the target's own class (found from the
///   matrix where it is, see [`model_class`]);
/// - `BPBP`: that factor, then a second butterfly (no permutation; a circulant keeps its exact
///   factorization's two).
///
/// A class that cannot represent the target trains like any other and misses the bar (the
/// floor is always the target's exact factorization's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelChoice {
    /// One butterfly, no permutation.
    B,
    /// One permutation, then one butterfly.
    Bp,
    /// Two (permutation, butterfly) factors.
    Bpbp,
}

impl ModelChoice {
    /// Every choice, in the order the CLI lists them.
    pub const VARIANTS: [ModelChoice; 3] = [ModelChoice::B, ModelChoice::Bp, ModelChoice::Bpbp];

    /// The lowercase name (`b`, `bp`, `bpbp`): what `--model` takes and `Display` and serde
    /// write ([`ModelChoice::name`] is the papers' spelling).
    pub const fn as_str(self) -> &'static str {
        match self {
            ModelChoice::B => "b",
            ModelChoice::Bp => "bp",
            ModelChoice::Bpbp => "bpbp",
        }
    }

    /// The number of (permutation, butterfly) factors.
    pub fn factors(self) -> usize {
        match self {
            ModelChoice::B | ModelChoice::Bp => 1,
            ModelChoice::Bpbp => 2,
        }
    }

    /// The name as the benchmark data and the checkpoint manifest give it: `"B"`, `"BP"`, `"BPBP"`.
    pub fn name(self) -> &'static str {
        match self {
            ModelChoice::B => "B",
            ModelChoice::Bp => "BP",
            ModelChoice::Bpbp => "BPBP",
        }
    }
}

impl std::fmt::Display for ModelChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses the lowercase name ([`ModelChoice::as_str`]); any other text is refused naming them
/// all.
impl std::str::FromStr for ModelChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::VARIANTS.into_iter().find(|m| m.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = Self::VARIANTS.map(Self::as_str).to_vec();
            Error::invalid("model", format!("one of {}", names.join(", ")), format!("{s:?}"))
        })
    }
}

/// The model class to train for `target` at size `n`: `choice`'s where one is given, the
/// target's own otherwise ([`model_class`] with `dense`, the target's matrix, where given;
/// [`model_class_of_size`] without).
///
/// # Errors
/// [`Error::InvalidInput`] when `n` is not a power of two ≥ 2 or differs from `dense`'s size,
/// or (no choice) a one-factor target is not a butterfly after any permutation.
pub fn model_class_for(
    target: &Target,
    n: usize,
    dense: Option<&ComplexMatrix>,
    choice: Option<ModelChoice>,
) -> Result<ModelClass> {
    if let Some(d) = dense.filter(|d| d.n() != n) {
        return Err(Error::invalid("model", format!("the target's matrix at N = {n}"), format!("N = {}", d.n())));
    }
    let Some(choice) = choice else { return model_class_with(target, n, dense) };
    let log_n = check_power_of_two("model", n)?;
    let exact_perms = permutations(target, n)?;
    let first = match dense {
        Some(dense) => {
            let own = model_class_with(target, n, Some(dense))?;
            (own.permutations[0].clone(), own.sources[0])
        }
        None => (Permutation::gather(exact_perms[0].clone())?, PermutationSource::Table),
    };
    let (permutations, sources) = match choice {
        ModelChoice::B => (vec![Permutation::Identity], vec![PermutationSource::Identity]),
        ModelChoice::Bp => (vec![first.0], vec![first.1]),
        ModelChoice::Bpbp if exact_perms.len() == 2 => (
            exact_perms.into_iter().map(Permutation::gather).collect::<Result<_>>()?,
            vec![PermutationSource::Table; 2],
        ),
        ModelChoice::Bpbp => (vec![first.0, Permutation::Identity], vec![first.1, PermutationSource::Identity]),
    };
    let learned = vec![true; permutations.len() * log_n];
    Ok(ModelClass { permutations, sources, learned, fixed: None, real: false })
}

/// The model class that represents `target` exactly, at the size of `dense`, the target's
/// matrix ([`Target::matrix`]). A target of one factor gets the permutation that makes `dense`
/// a butterfly, found from it ([`crate::reference::identify`]), and learns every stage; the
/// real transforms (one factor, then the pairing `M` whose only learned stage sits between
/// fixed permutations) get their first permutation found from it too, given the pattern of
/// `M` ([`crate::reference::identify::factor_permutation`]); the circulant, whose later
/// factor is a free butterfly, takes the permutations of its exact factorization. Every
/// product learns the stages of [`learned_stages`] ([`crate::reference::factorizations`] has
/// the construction).
///
/// # Errors
/// [`Error::InvalidInput`] when the size is not a power of two ≥ 2, or a one-factor target is
/// not a butterfly after any permutation.
pub fn model_class(target: &Target, dense: &ComplexMatrix) -> Result<ModelClass> {
    model_class_with(target, dense.n(), Some(dense))
}

/// The model class of `target` at size `n` without its matrix: as [`model_class`], except that a
/// one-factor target takes the permutation of its exact factorization instead of finding it
/// (which needs the N×N matrix; the trainer does this at the sizes where it builds none).
///
/// # Errors
/// [`Error::InvalidInput`] when the size is not a power of two ≥ 2.
pub fn model_class_of_size(target: &Target, n: usize) -> Result<ModelClass> {
    model_class_with(target, n, None)
}

fn model_class_with(target: &Target, n: usize, dense: Option<&ComplexMatrix>) -> Result<ModelClass> {
    let learned = learned_stages(target, n)?;
    let log_n = n.trailing_zeros() as usize;
    let mut permutations: Vec<Permutation> =
        permutations(target, n)?.into_iter().map(Permutation::gather).collect::<Result<_>>()?;
    let fixed = match learned.iter().all(|&l| l) {
        true => None,
        false => exact(target, n)?.map(|f| {
            let re = f.factors().iter().flat_map(|f| f.re.iter().copied()).collect();
            let im = f.factors().iter().flat_map(|f| f.im.iter().copied()).collect();
            (re, im)
        }),
    };
    // A user's target has no table: its factors keep the identity until one is found.
    let given = if target.is_users() { PermutationSource::Identity } else { PermutationSource::Table };
    let mut sources = vec![given; permutations.len()];
    let Some(dense) = dense else { return Ok(ModelClass { permutations, sources, learned, fixed, real: false }) };
    let unfound = || {
        Error::invalid(
            "model",
            "a target that is a butterfly after some permutation, then its class's later factors",
            format!("{:?} at N = {n}, which is not", target.kind()),
        )
    };
    if permutations.len() == 1 {
        let (perm, source) = match target {
            // A user's matrix need not be a butterfly after any permutation: where none is
            // found its model keeps the identity, trains like any other, and misses the bar.
            Target::Matrix(_) | Target::Operator(_) | Target::Data(_) => {
                match butterfly_permutation(dense, user_tolerance(target))? {
                    Some(perm) => (Permutation::gather(perm)?, PermutationSource::Identified),
                    None => (Permutation::Identity, PermutationSource::Identity),
                }
            }
            _ => {
                let perm = butterfly_permutation(dense, F64_TOLERANCE)?.ok_or_else(unfound)?;
                (Permutation::gather(perm)?, PermutationSource::Identified)
            }
        };
        let (permutations, sources) = (vec![perm], vec![source]);
        return Ok(ModelClass { permutations, sources, learned, fixed, real: false });
    }
    // A product whose later factors are fixed up to values (the pairing M: one learned stage
    // between fixed permutations) gets its first permutation from the matrix too, given only
    // where those factors can mix rows; one whose later factors are free butterflies (the
    // circulant's) takes its exact factorization's.
    if let Some((fixed_re, fixed_im)) = fixed.as_ref().filter(|_| !learned[log_n..].iter().all(|&l| l)) {
        let outer = outer_pattern(
            n,
            &permutations[1..],
            &learned[log_n..],
            &fixed_re[log_n * 2 * n..],
            &fixed_im[log_n * 2 * n..],
        )?;
        let perm = factor_permutation(dense, &outer, F64_TOLERANCE)?.ok_or_else(unfound)?;
        permutations[0] = Permutation::gather(perm)?;
        sources[0] = PermutationSource::Identified;
    }
    Ok(ModelClass { permutations, sources, learned, fixed, real: false })
}

/// The relative tolerance to which a user's target's matrix is searched for structure: its
/// entries' own ([`crate::reference::MatrixTarget::tolerance`]), data's own for the matrix fitted
/// to it ([`crate::reference::DataTarget::tolerance`]), f64's for an operator (whose images are
/// computed in f64).
fn user_tolerance(target: &Target) -> f64 {
    match target {
        Target::Matrix(m) => m.tolerance(),
        Target::Data(d) => d.tolerance(),
        _ => F64_TOLERANCE,
    }
}

/// The matrix of a class's later factors with every learned stage's blocks set to generic
/// values (fixed pseudo-random numbers) and the fixed stages as the class fixes them: its
/// nonzero pattern says which rows of the first factor each output may mix, whatever is learned.
fn outer_pattern(n: usize, perms: &[Permutation], learned: &[bool], re: &[f64], im: &[f64]) -> Result<ComplexMatrix> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x5eed);
    let per_stage = 2 * n;
    let (mut re, mut im) = (re.to_vec(), im.to_vec());
    for (s, _) in learned.iter().enumerate().filter(|(_, &l)| l) {
        for i in s * per_stage..(s + 1) * per_stage {
            (re[i], im[i]) = (rng.random_range(0.5..1.5), rng.random_range(-1.0..1.0));
        }
    }
    let log_n = n.trailing_zeros() as usize;
    let indices: Vec<Vec<usize>> = perms.iter().map(|p| p.indices(n)).collect();
    let per_factor = log_n * per_stage;
    // Column by column (O(N² log N)), not as a product of dense matrices (O(N³)).
    let mut failed = None;
    let m = ComplexMatrix::from_linear_map(n, |col| {
        for (k, p) in indices.iter().enumerate() {
            let r = k * per_factor..(k + 1) * per_factor;
            if let Err(e) = apply(&re[r.clone()], &im[r], p, col) {
                failed.get_or_insert(e);
            }
        }
    });
    failed.map_or(Ok(m), Err)
}

/// The exact factorization of `target` at size `n` as a [`ButterflyProduct`] on `B` (`None`
/// where none is known).
///
/// # Errors
/// Those of [`crate::reference::factorizations::exact`].
pub fn exact_product<B: Backend>(target: &Target, n: usize, device: &B::Device) -> Result<Option<ButterflyProduct<B>>> {
    exact(target, n)?.map(|f| ButterflyProduct::from_factorization(&f, device)).transpose()
}

/// A learned linear transform of size N whose matrix can be measured as its backend computes
/// it: a [`Butterfly`] or a [`ButterflyProduct`] ([`crate::metrics::rmse`] takes either).
pub trait LinearTransform {
    /// Transform size N.
    fn size(&self) -> usize;

    /// The dense N×N matrix as the layer computes it on its backend and dtype.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when the N×N batch and its f64 copy do not fit.
    fn dense_on_backend(&self) -> Result<ComplexMatrix>;

    /// The images of the basis vectors `e_start … e_{start+count−1}` as the layer computes them
    /// on its backend and dtype, row-major `[count, N]` (row r is column `start + r` of the
    /// matrix): the matrix a block of columns at a time.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the range leaves `0..N`; [`Error::OutOfMemory`] when the
    /// batch does not fit.
    fn basis_images(&self, start: usize, count: usize) -> Result<Vec<num_complex::Complex64>>;

    /// The images of the rows of `x` (row-major `[rows, N]`) as the layer computes them on its
    /// backend and dtype (the inputs rounded to it).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `x` is not a non-zero multiple of N values;
    /// [`Error::OutOfMemory`] when the batch does not fit.
    fn images(&self, x: &[num_complex::Complex64]) -> Result<Vec<num_complex::Complex64>>;
}

impl<B: ButterflyOps> LinearTransform for Butterfly<B> {
    fn size(&self) -> usize {
        self.n()
    }
    fn dense_on_backend(&self) -> Result<ComplexMatrix> {
        self.matrix_on_backend()
    }
    fn basis_images(&self, start: usize, count: usize) -> Result<Vec<num_complex::Complex64>> {
        basis_images_on_backend(self.n(), start, count, &self.twiddle_re.device(), |re, im| self.forward(re, im))
    }
    fn images(&self, x: &[num_complex::Complex64]) -> Result<Vec<num_complex::Complex64>> {
        images_on_backend(self.n(), x, &self.twiddle_re.device(), |re, im| self.forward(re, im))
    }
}

impl<B: ButterflyOps> LinearTransform for ButterflyProduct<B> {
    fn size(&self) -> usize {
        self.n()
    }
    fn dense_on_backend(&self) -> Result<ComplexMatrix> {
        self.matrix_on_backend()
    }
    fn basis_images(&self, start: usize, count: usize) -> Result<Vec<num_complex::Complex64>> {
        let device = self.factors[0].twiddle_re.device();
        basis_images_on_backend(self.n(), start, count, &device, |re, im| self.forward(re, im))
    }
    fn images(&self, x: &[num_complex::Complex64]) -> Result<Vec<num_complex::Complex64>> {
        let device = self.factors[0].twiddle_re.device();
        images_on_backend(self.n(), x, &device, |re, im| self.forward(re, im))
    }
}
