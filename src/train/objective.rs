//! The training objective: the layer measured on a batch of input vectors whose images under
//! the target are known in f64.
//!
//! loss(θ) = Σ over the batch's rows x of |M(θ) x − T x|², divided by rows · N, with M(θ) the
//! layer's matrix computed by its forward on the backend in its dtype. Up to
//! [`DENSE_MAX_N`] the batch is the identity basis, and the loss is exactly the mean over the
//! N×N entries of |M(θ) − T|², the square of the rmse metric ([`crate::metrics`]). Above it
//! (or with [`TrainConfig::probes`](super::TrainConfig::probes)) the batch is `m` random complex
//! probes with independent normal entries of variance 1/N, so that E|(M − T) x|² = ‖M − T‖²_F / N
//! and the loss is an unbiased estimate of the same rmse²; their images `T x` come from the
//! target's fast algorithm in f64 ([`Target::apply`]), so no N×N matrix is built anywhere
//! (N = 16384 would need 4 GiB per dense copy in f64). The probes are drawn once per run from its
//! seed and rounded to f32, so every float type holds them exactly.
//!
//! The target's images are held as two tensors per part, `hi + lo`, where `hi` is rounded to
//! the backend's float type and `lo` the rounding remainder (zero in f64). The residual is
//! formed as `(M x − hi) − lo`: near a solution `M x − hi` is exact (Sterbenz), so in f32 the
//! residual, and the loss, are accurate to a few ulps of themselves rather than of T x — the
//! loss the optimiser sees is the metric, even at the floor, with no f64 on the device. Sums run
//! in two levels (per row, then over rows), so their rounding grows with 2N rather than N².
//!
//! With the real-output map ([`Objective::with_real_output`], `train --real-output`) the
//! objective compares the real part of the layer's output with a real target on real inputs
//! (the identity basis, real probes, a user's real pairs): loss = Σ |Re(M x) − T x|² over the
//! same normalisation. The model is then Re(M(θ)), the generic class in which complex
//! butterflies represent the real transforms (see [`crate::train::TrainConfig::real_output`]).

use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{ElementConversion, Tensor};
use num_complex::Complex64;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::error::{Error, Result};
use crate::memory;
use crate::nn::product_forward;
use crate::ops::residual::{mean_square, residual};
use crate::ops::{ButterflyOps, Permutation, ResidualOps};
use crate::reference::{ComplexMatrix, DataTarget, Operator, Target};
use crate::tensors::{eye, float_tensor};

pub use crate::ops::residual::Complex2;

/// The largest size whose objective is the identity basis (the N×N matrix); larger sizes are
/// measured on [`PROBES`] random vectors. At N = 4096 the dense objective's host copy of the
/// target is 1.3 GiB; at 16384 it would be 21 GiB.
pub const DENSE_MAX_N: usize = 4096;

/// Random probes above [`DENSE_MAX_N`]. A butterfly of size N has 2 N log2 N complex twiddles
/// and m probes give m N complex residuals, so m must exceed 2 log2 N (28 at N = 16384) for the
/// residual to pin the twiddles down; 256 leaves a wide margin at a small cost (a batch of 256
/// rows is 1/64 of the dense batch at N = 16384).
pub const PROBES: usize = 256;

/// The largest imaginary part, relative to the largest real part, of a target's images of real
/// inputs that the real-output map accepts as a real target: a built-in real transform applied in
/// f64 through a complex fast algorithm leaves imaginary parts of a few ulps (1e-16 relative),
/// a complex target leaves O(1); the parts under it are dropped.
pub const REAL_TARGET_TOLERANCE: f64 = 1e-10;

/// The seed of a run's probes, from the run's seed (the probes are fixed for the whole run,
/// every attempt and a resumed run included).
const PROBE_SEED_SALT: u64 = 0x9e37_79b9_7f4a_7c15;

/// The batch an objective measures on, in f64 on the host: the input rows and the target's
/// image of each, both row-major `[rows, n]`.
#[derive(Clone, Debug)]
pub struct Probes {
    n: usize,
    rows: usize,
    /// Input rows; `None`: the identity basis (rows = n).
    input: Option<Vec<Complex64>>,
    /// The inputs' mean squared norm per row, which the loss divides by (1 for the identity
    /// basis, and taken as 1 for the probes, whose expected squared norm it is).
    power: f64,
    /// The target's image of each input row.
    images: Vec<Complex64>,
}

impl Probes {
    /// The identity basis, with the target's images read from its dense matrix `t`.
    pub fn basis(t: &ComplexMatrix) -> Self {
        let n = t.n();
        // Row j is T e_j, column j of T.
        let images = (0..n * n).map(|i| t.get(i % n, i / n)).collect();
        Probes { n, rows: n, input: None, images, power: 1.0 }
    }

    /// `rows` random probes (see the module docs) drawn from `seed`, and their images under
    /// `target` by its own code (a built-in [`Target`]'s fast algorithm, a user's operator).
    /// With `real`, the probes are real (normal entries of variance 1/N, for the real-output
    /// map); complex otherwise.
    ///
    /// # Errors
    /// Those of the target's [`Operator::apply`].
    pub fn random(target: &dyn Operator, n: usize, rows: usize, seed: u64, real: bool) -> Result<Self> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ PROBE_SEED_SALT);
        let sd = (if real { 1.0 } else { 0.5 } / n as f64).sqrt();
        let mut draw = || {
            let g: f64 = StandardNormal.sample(&mut rng);
            (g * sd) as f32 as f64
        };
        let input: Vec<Complex64> = (0..rows * n)
            .map(|_| if real { Complex64::new(draw(), 0.0) } else { Complex64::new(draw(), draw()) })
            .collect();
        let mut images = input.clone();
        target.apply(n, &mut images)?;
        Ok(Probes { n, rows, input: Some(input), images, power: 1.0 })
    }

    /// A user's pairs, both sides scaled by the power of two that brings the inputs' mean
    /// squared norm nearest 1 (exact: inputs that are f32 numbers stay f32 numbers), and the
    /// loss divided by that mean: it is the rmse² the pairs estimate
    /// ([`crate::metrics::rmse_on_data`]), as on the identity basis and the probes, whatever the
    /// data's scale.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when every input is zero; those of [`DataTarget::pairs`].
    pub fn data(data: &DataTarget) -> Result<Self> {
        let (n, rows) = (data.n(), data.rows());
        let pairs = data.pairs()?;
        let mean: f64 = pairs.inputs.iter().map(|z| z.norm_sqr()).sum::<f64>() / rows as f64;
        if mean == 0.0 {
            return Err(Error::invalid("target data", "a non-zero input", "every input zero"));
        }
        let scale = (-mean.log2() / 2.0).round().exp2();
        let scaled = |v: &[Complex64]| v.iter().map(|z| z * scale).collect::<Vec<_>>();
        let (input, images) = (scaled(&pairs.inputs), scaled(&pairs.outputs));
        Ok(Probes { n, rows, input: Some(input), images, power: mean * scale * scale })
    }

    /// Rows of the batch.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// A CRC-32 of the batch (its sizes, inputs and images): what a permutation search's kept
    /// progress is tied to, so that it is never read on another batch.
    pub fn fingerprint(&self) -> u32 {
        let mut h = crc32fast::Hasher::new();
        h.update(&(self.n as u64).to_le_bytes());
        h.update(&(self.rows as u64).to_le_bytes());
        h.update(&self.power.to_le_bytes());
        let numbers = self.input.iter().flatten().chain(&self.images).flat_map(|z| [z.re, z.im]);
        numbers.for_each(|x| h.update(&x.to_le_bytes()));
        h.finalize()
    }

    /// The batch for the real-output map: the same, with the images' imaginary parts dropped.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the first offending value when an input is not real, or
    /// an image has an imaginary part above [`REAL_TARGET_TOLERANCE`] of the largest real part
    /// (the target is not a real map of real vectors).
    pub fn real(mut self) -> Result<Self> {
        let op = "train.real_output";
        if let Some((i, z)) = self.input.iter().flatten().enumerate().find(|(_, z)| z.im != 0.0) {
            let (r, c) = (i / self.n, i % self.n);
            return Err(Error::invalid(op, "real inputs", format!("input {r}, entry {c} = {z}")));
        }
        let scale = self.images.iter().fold(0.0f64, |m, z| m.max(z.re.abs()));
        // NaN parts are not real either.
        let real = |z: &Complex64| z.im.abs() <= REAL_TARGET_TOLERANCE * scale;
        if let Some((i, z)) = self.images.iter().enumerate().find(|(_, z)| !real(z)) {
            let (r, c) = (i / self.n, i % self.n);
            return Err(Error::invalid(
                op,
                "a real target (real images of real inputs)",
                format!("image {r}, entry {c} = {z}: the real-output map fits the real part only"),
            ));
        }
        self.images.iter_mut().for_each(|z| z.im = 0.0);
        Ok(self)
    }
}

/// The objective for one target and size on one device.
#[derive(Clone, Debug)]
pub struct Objective<B: Backend> {
    n: usize,
    rows: usize,
    /// The inputs' mean squared norm per row ([`Probes`]).
    power: f64,
    /// The input batch `[rows, n]`: re, im.
    input: Complex2<B>,
    /// The target's images of the input rows, rounded to the float type: re, im.
    hi: Complex2<B>,
    /// What rounding `hi` lost (zero at f64): re, im.
    lo: Complex2<B>,
    /// Whether the layer's output is compared by its real part only (the real-output map).
    real_output: bool,
}

/// Bytes a run at size `n` needs at its peak, with `float` bytes per float: on the host and on
/// the device ([`device_bytes_needed`]) together, as one memory (a CPU backend's). On the host the
/// dense objective (`rows` = n) keeps the f64 target and its parts (80·N²), the probes their
/// inputs and images in f64 (64·rows·N). `None` when the figure overflows.
pub fn bytes_needed(n: usize, rows: usize, factors: usize, float: usize) -> Option<u64> {
    memory::sum(&[host_bytes_needed(n, rows), device_bytes_needed(n, rows, factors, float)])
}

/// The host's part of [`bytes_needed`]: what stays on the host when a GPU computes.
pub fn host_bytes_needed(n: usize, rows: usize) -> Option<u64> {
    if rows == n {
        memory::product(&[n, n, 80])
    } else {
        memory::product(&[rows, n, 64])
    }
}

/// The device's part of [`bytes_needed`]: the input and the target's rounded parts for both
/// objectives (10·rows·N floats) and the forward's activations and their gradients
/// (4·(K·log2 N + 1)·rows·N floats for K factors).
pub fn device_bytes_needed(n: usize, rows: usize, factors: usize, float: usize) -> Option<u64> {
    let log_n = n.checked_ilog2().unwrap_or(0) as usize;
    let per_entry = factors.checked_mul(log_n)?.checked_add(1)?.checked_mul(4)?.checked_add(10)?;
    memory::product(&[rows, n, per_entry, float])
}

/// Rows of the objective's batch for a run at size `n` with `probes` asked for (see
/// [`TrainConfig::probes`](super::TrainConfig::probes)): `n` for the identity basis.
pub fn rows_for(n: usize, probes: Option<usize>) -> usize {
    match probes {
        Some(m) => m,
        None if n <= DENSE_MAX_N => n,
        None => PROBES,
    }
}

impl<B: Backend> Objective<B> {
    /// The identity-basis objective for `target` at size `n`.
    ///
    /// # Errors
    /// As [`Target::matrix`]: [`crate::Error::InvalidInput`] for a size that is not a power of
    /// two ≥ 2, [`crate::Error::OutOfMemory`] when the dense target does not fit.
    pub fn new(target: &Target, n: usize, device: &B::Device) -> Result<Self> {
        Ok(Self::from_matrix(&target.matrix(n)?, device))
    }

    /// The identity-basis objective for an explicit target matrix.
    pub fn from_matrix(t: &ComplexMatrix, device: &B::Device) -> Self {
        Self::from_probes(&Probes::basis(t), device)
    }

    /// The objective on a batch of probes.
    pub fn from_probes(p: &Probes, device: &B::Device) -> Self {
        let (n, rows) = (p.n, p.rows);
        let round = |x: f64| -> f64 { B::FloatElem::from_elem(x).elem::<f64>() };
        let t = |v: Vec<f64>| float_tensor::<B, 2>(v, [rows, n], device);
        let part = |f: fn(&Complex64) -> f64| p.images.iter().map(f).collect::<Vec<f64>>();
        let (re, im) = (part(|z| z.re), part(|z| z.im));
        let hi = |v: &[f64]| v.iter().map(|&x| round(x)).collect::<Vec<_>>();
        let lo = |v: &[f64]| v.iter().map(|&x| x - round(x)).collect::<Vec<_>>();
        let input = match &p.input {
            None => {
                let eye = eye::<B>(n, device);
                (eye.clone(), eye.zeros_like())
            }
            Some(x) => (t(x.iter().map(|z| z.re).collect()), t(x.iter().map(|z| z.im).collect())),
        };
        let (hi, lo) = ((t(hi(&re)), t(hi(&im))), (t(lo(&re)), t(lo(&im))));
        Objective { n, rows, power: p.power, input, hi, lo, real_output: false }
    }

    /// The objective with the real-output map on or off (see the module docs). Its batch must be
    /// real for it to mean the real part's fit ([`Probes::real`]).
    pub fn with_real_output(self, real_output: bool) -> Self {
        Objective { real_output, ..self }
    }

    /// Whether the layer's output is compared by its real part only.
    pub fn real_output(&self) -> bool {
        self.real_output
    }

    /// What the objective compares of a layer's output `y` (or of a change of it): all of it,
    /// or with the real-output map its real part (the imaginary part zero).
    pub fn project(&self, y: Complex2<B>) -> Complex2<B> {
        match self.real_output {
            true => {
                let zero = y.1.zeros_like();
                (y.0, zero)
            }
            false => y,
        }
    }

    /// Transform size.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Rows of the input batch (n for the identity basis).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The input batch (the identity basis, or the probes), as `(re, im)`.
    pub fn input(&self) -> Complex2<B> {
        self.input.clone()
    }

    /// Minibatch `k` of `size` rows (Adam's step `k` with
    /// [`TrainConfig::batch_size`](super::TrainConfig::batch_size)): the rows from `k · size`
    /// on, wrapping around the batch, so consecutive steps go through every row in turn. The
    /// whole objective when `size` is `None` or at least its rows.
    pub fn minibatch(&self, k: usize, size: Option<usize>) -> Objective<B> {
        let size = match size {
            Some(s) if s < self.rows => s,
            _ => return self.clone(),
        };
        let start = (k % self.rows.div_ceil(size)) * size;
        let rows = size.min(self.rows - start);
        let part = |t: &Tensor<B, 2>| t.clone().narrow(0, start, rows);
        let pair = |(re, im): &Complex2<B>| (part(re), part(im));
        let (input, hi, lo) = (pair(&self.input), pair(&self.hi), pair(&self.lo));
        Objective { n: self.n, rows, power: self.power, input, hi, lo, real_output: self.real_output }
    }

    /// `(y − hi) − lo` for the layer's output `y` on the input batch ([`Objective::project`]ed).
    pub fn residual(&self, y: Complex2<B>) -> Complex2<B> {
        residual(self.project(y), &self.hi, &self.lo)
    }

    /// What the loss divides Σ |r|² by: rows · n and the inputs' mean squared norm (1 but for
    /// data).
    fn norm(&self) -> f64 {
        (self.rows * self.n) as f64 * self.power
    }

    /// Σ |r|² over the entries divided by rows · n and by the inputs' mean squared norm (1 but
    /// for data), summed per row first (a `[1]` tensor).
    pub fn mean_square(&self, r: &Complex2<B>) -> Tensor<B, 1> {
        mean_square(r, self.norm())
    }

    /// The loss of a product with stacked twiddles `(tw_re, tw_im)` (`[K · log2 n, n/2, 2, 2]`)
    /// and permutations `perms` (K of them), through `B`'s butterfly op (a `[1]` tensor).
    pub fn loss(&self, tw_re: &Tensor<B, 4>, tw_im: &Tensor<B, 4>, perms: &[Permutation]) -> Tensor<B, 1>
    where
        B: ButterflyOps + ResidualOps,
    {
        let y = product_forward(self.input(), tw_re, tw_im, perms);
        B::residual_mean_square(self.project(y), &self.hi, &self.lo, self.norm())
    }
}

impl<B: AutodiffBackend> Objective<B> {
    /// The same objective on `B`'s inner backend (for the polish, which needs no autodiff).
    pub fn inner(&self) -> Objective<B::InnerBackend> {
        let pair = |(re, im): &Complex2<B>| (re.clone().inner(), im.clone().inner());
        let (input, hi, lo) = (pair(&self.input), pair(&self.hi), pair(&self.lo));
        Objective { n: self.n, rows: self.rows, power: self.power, input, hi, lo, real_output: self.real_output }
    }
}

/// A `[1]` tensor's value as f64 (for logging and decisions; no arithmetic is done in f64).
pub fn scalar<B: Backend>(t: Tensor<B, 1>) -> f64 {
    t.into_scalar().elem::<f64>()
}
