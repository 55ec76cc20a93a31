//! Products of butterflies: K (permutation, butterfly) factors applied one after the other, the
//! model class that represents every target of [`crate::reference::factorizations`] exactly.
//!
//! Dao et al. (ICML 2019) call one factor **BP** (a permutation, then a butterfly) and two
//! **BPBP**; the DFT is one factor, convolution two, and the real transforms (Hartley, DCT-II,
//! DST-II) one factor followed by a pairing of outputs k and −k, two more factors of which only
//! one stage is learned ([`crate::reference::factorizations`] has each construction). The trainer
//! fits a [`ButterflyProduct`] in the target's [`model_class`](super::model_class).

use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{backend::Backend, Tensor};

use super::butterfly::{
    basis_images_on_backend, dense_on_backend, images_on_backend, Butterfly, ButterflyConfig, ButterflyInit,
};
use crate::error::{check_power_of_two, Error, Result};
use crate::ops::butterfly::{ButterflyOps, Permutation, Tangent};
use crate::reference::butterfly::product_matrix;
use crate::reference::factorizations::{exact, Factor, Factorization};
use crate::reference::{ComplexMatrix, Target};

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
        let factors = self.to_factors().iter().map(|f| Butterfly::from_factor(f, device)).collect::<Result<_>>()?;
        Ok(ButterflyProduct { factors })
    }

    /// The factors' permutations and twiddles in f64, as [`Butterfly::from_factor`] takes them:
    /// the product on no backend, to be rebuilt on any ([`ButterflyProduct::cast`]).
    pub fn to_factors(&self) -> Vec<Factor> {
        let n = self.n();
        self.factors
            .iter()
            .map(|f| {
                let (re, im) = f.twiddles_f64();
                Factor { permutation: f.permutation().indices(n), re, im }
            })
            .collect()
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

    /// [`ButterflyProduct::doubled`] with factor k behind `permutations[k]`, of size 2N
    /// ([`Butterfly::doubled_behind`]).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the permutations are not one a factor, or a gather is not of
    /// size 2N.
    pub fn doubled_behind(&self, permutations: &[Permutation], seed: u64) -> Result<ButterflyProduct<B>> {
        if permutations.len() != self.factors.len() {
            return Err(Error::invalid(
                "butterfly_product.doubled",
                format!("{} permutations, one a factor", self.factors.len()),
                permutations.len(),
            ));
        }
        let factors = self
            .factors
            .iter()
            .zip(permutations)
            .enumerate()
            .map(|(k, (f, p))| f.doubled_behind(p, seed.wrapping_add(k as u64)))
            .collect::<Result<Vec<_>>>()?;
        Ok(ButterflyProduct { factors })
    }

    /// Transform size N (0 for a product of no factors).
    pub fn n(&self) -> usize {
        self.factors.first().map_or(0, Butterfly::n)
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
        // One factor's twiddles are the stack: no copy in the forward and no slice in the
        // backward of a training step.
        if let [f] = &self.factors[..] {
            return (f.twiddle_re.val(), f.twiddle_im.val());
        }
        let re = self.factors.iter().map(|f| f.twiddle_re.val()).collect();
        let im = self.factors.iter().map(|f| f.twiddle_im.val()).collect();
        (Tensor::cat(re, 0), Tensor::cat(im, 0))
    }

    /// Replaces the twiddles with `(re, im)`, stacked as [`Self::stacked_twiddles`] gives them:
    /// trainable, with no gradient history.
    pub fn set_stacked_twiddles(&mut self, re: Tensor<B, 4>, im: Tensor<B, 4>) {
        let log_n = self.n().trailing_zeros() as usize;
        for (k, f) in self.factors.iter_mut().enumerate() {
            let part =
                |t: &Tensor<B, 4>| Param::from_tensor(t.clone().narrow(0, k * log_n, log_n).detach().require_grad());
            f.twiddle_re = part(&re);
            f.twiddle_im = part(&im);
        }
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
