//! The model class a target is fitted in: how many (permutation, butterfly) factors, which
//! stages are learned, how each permutation is obtained ([`PermutationSource`]), and the user's
//! choice of class ([`ModelChoice`]). [`model_class`] finds the permutations from the target's
//! matrix where one is given.

use burn::module::Param;
use burn::tensor::backend::Backend;

use super::product::ButterflyProduct;
use crate::error::{check_power_of_two, Error, Result};
use crate::ops::butterfly::Permutation;
use crate::reference::butterfly::apply;
use crate::reference::factorizations::{exact, factor_count, learned_stages, permutations};
use crate::reference::identify::{butterfly_permutation, factor_permutation, F64_TOLERANCE};
use crate::reference::{ComplexMatrix, Target};
use crate::tensors::float_tensor;

/// How a factor's input permutation was obtained: what a training report says was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PermutationSource {
    /// Found from the target's matrix ([`crate::reference::identify`]).
    Identified,
    /// Found from the target's matrix given where the class's later factors may mix rows
    /// ([`crate::reference::identify::factor_permutation`]): the first permutation of the Hartley,
    /// DCT-II and DST-II classes, whose pairing M's pattern comes from their exact
    /// factorization. That pattern is knowledge of the answer's structure, so the report names
    /// it (`identified_given_pairing`) apart from [`PermutationSource::Identified`].
    #[serde(rename = "identified_given_pairing")]
    IdentifiedGivenPairing,
    /// Taken from the target's exact factorization (a per-target table: knowledge of the answer).
    Table,
    /// The identity, as the class sets it: the class B, a later factor of BPBP, a user's matrix
    /// that no permutation makes a butterfly, or a one-factor target whose matrix is not at hand
    /// (above the dense objective's sizes) in a run that does not grow.
    Identity,
    /// Learned by gradient descent ([`crate::train::permutation`]): from the target's pairs,
    /// where they are too few to determine its matrix, under the real-output map, and as the
    /// first permutation of a product chosen with `--model` that no generic method finds from
    /// the matrix (the Hartley transform's, the DCT-II's, the DST-II's, a user's matrix that
    /// no permutation makes one butterfly).
    Learned,
    /// Chosen, of the permutations the doubling carries up (the bit reversal, the identity, then
    /// the other self-similar members of Dao et al.'s family), by the fit a product reaches
    /// behind each ([`crate::train::permutation::choose_doubling`], then the search's scoring
    /// without its relaxations): the first permutation of a product chosen with `--model` at the
    /// bottom of a grown chain (where none fits, the chain is refused); a run at that size alone
    /// learns its own ([`PermutationSource::Learned`]).
    Chosen,
    /// The half-size member's permutation doubled (a grown run whose class takes no permutation
    /// from a table: a built-in's one butterfly, a user's operator, a product chosen with
    /// `--model`): obtained at the smallest size of the chain (its own report says how: for a
    /// product, [`PermutationSource::Chosen`]), and carried up by the doubling.
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

    /// The generic class `choice` at size `n` with nothing given: every stage learned, every
    /// permutation the identity until one is found or learned (their sources say
    /// [`PermutationSource::Identity`]), complex butterflies.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `n` is not a power of two ≥ 2.
    pub fn generic(choice: ModelChoice, n: usize) -> Result<Self> {
        let log_n = check_power_of_two("model", n)?;
        let k = choice.factors();
        Ok(ModelClass {
            permutations: vec![Permutation::Identity; k],
            sources: vec![PermutationSource::Identity; k],
            learned: vec![true; k * log_n],
            fixed: None,
            real: false,
        })
    }

    /// The class with at least `k` factors: each one added last, a butterfly behind the identity
    /// with every stage learned, as (BP)^K's later factors start (the trainer's search may find
    /// them another permutation). A class of `k` factors or more, or with fixed stages (a
    /// target's own, never a chosen one), comes back as it is.
    pub fn with_factors(mut self, k: usize, n: usize) -> Self {
        let log_n = n.trailing_zeros() as usize;
        while self.fixed.is_none() && self.permutations.len() < k {
            self.permutations.push(Permutation::Identity);
            self.sources.push(PermutationSource::Identity);
            self.learned.extend(std::iter::repeat_n(true, log_n));
        }
        self
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

/// A generic model class in Dao et al.'s notation (ICML 2019), every stage learned: what a run
/// trains (`train --model`, [`crate::train::TrainConfig::class`]; unset, the target's default,
/// [`crate::train::default_class`]):
/// - `B`: one butterfly, no input permutation;
/// - `BP`: one butterfly after a permutation, found from the target's matrix where one makes it
///   a butterfly (see [`model_class_for`]);
/// - `BPBP`: that factor, then a second butterfly behind the identity. Where no permutation is
///   found from the matrix (the Hartley transform's, the DCT-II's, the DST-II's, the
///   circulant's; a user's matrix that no permutation makes one butterfly), the class holds the
///   identity and the trainer learns the permutations with both butterflies behind them
///   ([`crate::train::permutation`]).
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

/// The model class for `target` at size `n`: the generic class `choice` where one is given (what
/// the trainer trains), the class of the target's exact factorization otherwise ([`model_class`]
/// with `dense`, the target's matrix, where given; [`model_class_of_size`] without: the truth a
/// report's floor is measured in, with the stages it fixes).
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
    let first = match dense {
        // A product's own class finds its first permutation only given its later factors'
        // pattern, or reads it from a table (the circulant's): nothing a generic class takes,
        // so it is not built.
        Some(_) if factor_count(target) > 1 => (Permutation::Identity, PermutationSource::Identity),
        Some(dense) => {
            let own = model_class_with(target, n, Some(dense))?;
            match own.sources[0] {
                PermutationSource::Identified => (own.permutations[0].clone(), PermutationSource::Identified),
                // Found only given the pairing's pattern, or read from the exact factorization
                // (the circulant's): a generic class reads neither (a product's permutations
                // are learned instead, see `crate::train`).
                _ => (Permutation::Identity, PermutationSource::Identity),
            }
        }
        // Not known without the matrix (as for the target's own class): the identity.
        None => (Permutation::Identity, PermutationSource::Identity),
    };
    let (permutations, sources) = match choice {
        ModelChoice::B => (vec![Permutation::Identity], vec![PermutationSource::Identity]),
        ModelChoice::Bp => (vec![first.0], vec![first.1]),
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
/// one-factor target's permutation is not found (that needs the N×N matrix) and is the identity
/// ([`PermutationSource::Identity`]); the trainer replaces it with the half-size member's,
/// doubled, where it grows. The products keep their exact factorization's
/// ([`PermutationSource::Table`]).
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
    let Some(dense) = dense else {
        // Without its matrix a one-factor target's permutation is not known, a built-in's no
        // more than a user's: it keeps the identity until a grown run brings its half-size
        // member's, doubled (the exact factorization's is not read).
        if permutations.len() == 1 {
            (permutations, sources) = (vec![Permutation::Identity], vec![PermutationSource::Identity]);
        }
        return Ok(ModelClass { permutations, sources, learned, fixed, real: false });
    };
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
        sources[0] = PermutationSource::IdentifiedGivenPairing;
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
