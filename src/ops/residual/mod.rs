//! The training objective's loss as one op: `Σ |(y − hi) − lo|² / norm` (summed per row first)
//! of a layer's output `y` against a target's images split as `hi + lo` (see
//! [`crate::train::objective`]).
//!
//! As tensor ops under Burn's autodiff the loss is ten launches forward and about as many
//! backward (each subtraction, square, sum and division a node). Its gradient is
//! `2 r / norm` times the upstream gradient, so on the CubeCL backends under autodiff the op
//! keeps the residual `r` from its forward and its backward is that product: two launches. The
//! trainer's Adam steps at N ≤ 4096 are launch-bound on a GPU; this is one of the two changes
//! (with the fused Adam update, [`crate::ops::adam`]) that cut their launches.

#[cfg(feature = "fused")]
mod autodiff;
#[cfg(feature = "fused")]
mod cubecl;

use burn::tensor::{backend::Backend, Tensor};

/// A complex `[rows, n]` tensor as `(re, im)`.
pub type Complex2<B> = (Tensor<B, 2>, Tensor<B, 2>);

/// A backend's objective loss (see the module docs).
pub trait ResidualOps: Backend {
    /// `Σ |(y − hi) − lo|² / norm`, summed over each row first, then over the rows (a `[1]`
    /// tensor). `hi` and `lo` are constants (no gradient reaches them).
    ///
    /// The default is [`residual_mean_square_reference`]; `Autodiff` of the CubeCL backends
    /// records the forward's residual and a backward of two launches.
    fn residual_mean_square(y: Complex2<Self>, hi: &Complex2<Self>, lo: &Complex2<Self>, norm: f64) -> Tensor<Self, 1> {
        residual_mean_square_reference(y, hi, lo, norm)
    }
}

/// The residual `(y − hi) − lo`, both parts.
pub fn residual<B: Backend>(y: Complex2<B>, hi: &Complex2<B>, lo: &Complex2<B>) -> Complex2<B> {
    ((y.0 - hi.0.clone()) - lo.0.clone(), (y.1 - hi.1.clone()) - lo.1.clone())
}

/// `Σ |r|² / norm` for a residual `r`, summed per row first (a `[1]` tensor).
pub fn mean_square<B: Backend>(r: &Complex2<B>, norm: f64) -> Tensor<B, 1> {
    let sq = r.0.clone().powi_scalar(2) + r.1.clone().powi_scalar(2);
    sq.sum_dim(1).sum().div_scalar(norm)
}

/// [`ResidualOps::residual_mean_square`] as tensor ops, on any backend (its gradient from Burn's
/// autodiff).
pub fn residual_mean_square_reference<B: Backend>(
    y: Complex2<B>,
    hi: &Complex2<B>,
    lo: &Complex2<B>,
    norm: f64,
) -> Tensor<B, 1> {
    mean_square(&residual(y, hi, lo), norm)
}
