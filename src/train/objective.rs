//! The training objective: the whole matrix, probed with the identity basis.
//!
//! loss(θ) = mean over the N×N entries of |M(θ) − T|², i.e. the square of the rmse metric
//! ([`crate::metrics`]), with M(θ) the layer's matrix computed by its forward on the backend in
//! its dtype. The target T is held as two tensors per part, `hi + lo`, where `hi` is T rounded to
//! the backend's float type and `lo` the rounding remainder (zero in f64). The residual is formed
//! as `(M − hi) − lo`: near a solution `M − hi` is exact (Sterbenz), so in f32 the residual, and
//! the loss, are accurate to a few ulps of themselves rather than of T — the loss the optimiser
//! sees is the metric, even at the floor, with no f64 on the device. Sums run in two levels (per
//! row, then over rows), so their rounding grows with 2N rather than N².

use burn::tensor::{backend::Backend, ElementConversion, Tensor};

use crate::error::Result;
use crate::memory;
use crate::nn::product_forward;
use crate::ops::ButterflyOps;
use crate::ops::Permutation;
use crate::reference::{ComplexMatrix, Target};
use crate::tensors::{eye, float_tensor};

/// A complex `[rows, n]` batch as `(re, im)`.
pub type Complex2<B> = (Tensor<B, 2>, Tensor<B, 2>);

/// The identity-basis objective for one target and size on one device.
#[derive(Clone, Debug)]
pub struct Objective<B: Backend> {
    n: usize,
    eye: Tensor<B, 2>,
    /// Target rows (row j = T e_j), rounded to the float type: re, im.
    hi: Complex2<B>,
    /// What rounding `hi` lost (zero at f64): re, im.
    lo: Complex2<B>,
}

/// Bytes a dense-objective run at size `n` needs at its peak, with `float` bytes per float,
/// counted as one memory (on a GPU part of it is the device's): the f64 target and its parts on
/// the host (80·N²); on the device the identity and the target's rounded parts for both
/// objectives (10·N² floats) and the forward's activations and their gradients
/// (4·(K·log2 N + 1)·N² floats for K factors). `None` when the figure overflows.
pub fn bytes_needed(n: usize, factors: usize, float: usize) -> Option<u64> {
    let log_n = n.checked_ilog2().unwrap_or(0) as usize;
    let device = 10 + 4 * (factors * log_n + 1);
    memory::sum(&[memory::product(&[n, n, 80]), memory::product(&[n, n, device, float])])
}

impl<B: Backend> Objective<B> {
    /// The objective for `target` at size `n`.
    pub fn new(target: &Target, n: usize, device: &B::Device) -> Result<Self> {
        Ok(Self::from_matrix(&target.matrix(n)?, device))
    }

    /// The objective for an explicit target matrix.
    pub fn from_matrix(t: &ComplexMatrix, device: &B::Device) -> Self {
        let n = t.n();
        // Row j of the layer's output for input e_j is column j of its matrix.
        let part = |f: &dyn Fn(num_complex::Complex64) -> f64| -> Vec<f64> {
            (0..n * n).map(|i| f(t.get(i % n, i / n))).collect()
        };
        let round = |x: f64| -> f64 { B::FloatElem::from_elem(x).elem::<f64>() };
        let (re, im) = (part(&|z| z.re), part(&|z| z.im));
        let hi = |v: &[f64]| v.iter().map(|&x| round(x)).collect::<Vec<_>>();
        let lo = |v: &[f64]| v.iter().map(|&x| x - round(x)).collect::<Vec<_>>();
        let t = |v: Vec<f64>| float_tensor::<B, 2>(v, [n, n], device);
        Objective { n, eye: eye::<B>(n, device), hi: (t(hi(&re)), t(hi(&im))), lo: (t(lo(&re)), t(lo(&im))) }
    }

    /// Transform size.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The input batch: the identity, as `(re, im)`.
    pub fn input(&self) -> Complex2<B> {
        (self.eye.clone(), self.eye.zeros_like())
    }

    /// `(y − hi) − lo` for the layer's output `y` on the identity basis.
    pub fn residual(&self, y: Complex2<B>) -> Complex2<B> {
        ((y.0 - self.hi.0.clone()) - self.lo.0.clone(), (y.1 - self.hi.1.clone()) - self.lo.1.clone())
    }

    /// Mean of |r|² over the entries, summed per row first (a `[1]` tensor).
    pub fn mean_square(&self, r: &Complex2<B>) -> Tensor<B, 1> {
        let sq = r.0.clone().powi_scalar(2) + r.1.clone().powi_scalar(2);
        sq.sum_dim(1).sum().div_scalar((self.n * self.n) as f64)
    }

    /// The loss of a product with stacked twiddles `(tw_re, tw_im)` (`[K · log2 n, n/2, 2, 2]`)
    /// and permutations `perms` (K of them), through `B`'s butterfly op (a `[1]` tensor).
    pub fn loss(&self, tw_re: &Tensor<B, 4>, tw_im: &Tensor<B, 4>, perms: &[Permutation]) -> Tensor<B, 1>
    where
        B: ButterflyOps,
    {
        let y = product_forward(self.input(), tw_re, tw_im, perms);
        self.mean_square(&self.residual(y))
    }
}

/// A `[1]` tensor's value as f64 (for logging and decisions; no arithmetic is done in f64).
pub fn scalar<B: Backend>(t: Tensor<B, 1>) -> f64 {
    t.into_scalar().elem::<f64>()
}
