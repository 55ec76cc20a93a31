//! The solver of the polish phase: Levenberg–Marquardt (damped Gauss–Newton) on the
//! identity-basis residual, matrix-free, with conjugate gradients for each step. The phase that
//! drives it is `polish.rs`.
//!
//! The residual r(θ) = M(θ) − T is multilinear in the stages, so its Jacobian-vector product is
//! one tangent sweep through the stages of every factor (`dy_s = B_s dy_{s−1} + V_s y_{s−1}`,
//! the tangent permuted with the signal where a factor begins: [`Polish::jvp`], through
//! [`ButterflyOps::butterfly_tangent`](crate::ops::ButterflyOps::butterfly_tangent), a fused
//! kernel on the CubeCL backends), and its
//! transpose is the backward of the butterfly op (the fused kernel where there is one,
//! [`Polish::vjp`]). The twiddles of a product of K factors are stacked, `[K · log2 n, n/2, 2, 2]`. Each step solves `(JᵀJ + λI) δ = −Jᵀr` by conjugate gradients over the
//! trainable twiddles (all, or those [`gauge_mask`](super::gauge::gauge_mask) leaves free), then keeps
//! the step only if the loss falls; λ is a power of two that shrinks after a kept step and grows
//! after a refused one. The problem has zero residual at the solution, where Gauss–Newton
//! converges quadratically; in f32 it stops when steps no longer lower the (exactly measured,
//! see [`super::objective`]) loss.
//!
//! Every array operation runs on the backend in its float type; CG's scalars stay on the device
//! as one-element tensors, and the host only reads values to decide and to log.

use burn::tensor::{backend::Backend, Tensor};

use super::objective::{scalar, Complex2, Objective};
use crate::backend::FftBackend;
use crate::nn::{product_forward, product_tangent};
use crate::ops::Permutation;
use crate::tensors::{float_tensor, to_f64_vec};

/// Twiddles (or a direction in twiddle space) as `(re, im)`, each `[K · log2 n, n/2, 2, 2]`
/// (K factors stacked).
#[derive(Clone, Debug)]
pub struct Twiddles<B: Backend> {
    /// Real parts.
    pub re: Tensor<B, 4>,
    /// Imaginary parts.
    pub im: Tensor<B, 4>,
}

impl<B: Backend> Twiddles<B> {
    fn map(&self, f: impl Fn(Tensor<B, 4>) -> Tensor<B, 4>) -> Self {
        Twiddles { re: f(self.re.clone()), im: f(self.im.clone()) }
    }
    fn zip(&self, o: &Self, f: impl Fn(Tensor<B, 4>, Tensor<B, 4>) -> Tensor<B, 4>) -> Self {
        Twiddles { re: f(self.re.clone(), o.re.clone()), im: f(self.im.clone(), o.im.clone()) }
    }
    fn dot(&self, o: &Self) -> Tensor<B, 1> {
        (self.re.clone() * o.re.clone()).sum() + (self.im.clone() * o.im.clone()).sum()
    }
    /// The gradient masks of both parts from `mask`, the real parts' one: the same for the
    /// imaginary parts, or 0 for real butterflies (whose imaginary parts stay 0).
    pub fn masks(mask: Tensor<B, 4>, real: bool) -> Self {
        Twiddles { im: if real { mask.zeros_like() } else { mask.clone() }, re: mask }
    }
    /// `self + a · o` with `a` a one-element tensor.
    fn axpy(&self, a: &Tensor<B, 1>, o: &Self) -> Self {
        let a = a.clone().reshape([1, 1, 1, 1]);
        self.zip(o, |x, y| x + y * a.clone())
    }
}

/// A kept step that lowers the loss by less than this fraction of it counts as stalled.
pub const STALL_FRACTION: f64 = 1e-2;

/// The largest log2 λ: a step refused there ends the stage, so a polish whose every step is
/// refused ends too.
const MAX_LOG2_LAMBDA: i32 = 40;

/// Whether `trial` differs from `theta` anywhere (a change of half an ulp or more somewhere).
fn moves<B: Backend>(trial: &Twiddles<B>, theta: &Twiddles<B>) -> bool {
    let change = trial.zip(theta, |a, b| (a - b).abs());
    scalar(change.re.max() + change.im.max()) != 0.0
}

/// Significant bits [`Polish::short_stages`] rounds a stage's twiddles to, coarsest first: 4 holds the
/// values an exactly representable solution takes (0, ±1, ±1/2, ±1/16, …), 20 leaves a grid
/// 16 f32 ulps apart.
pub const SNAP_BITS: [u32; 5] = [4, 8, 12, 16, 20];

/// How far, in f32 ulps of its stage's largest modulus, [`Polish::short_stages`] lets each twiddle of a
/// stage lie from its short fraction. The f32 polish leaves a short solution's twiddles one or
/// two ulps off (the Hadamard transform at N = 128 and 256); a twiddle that is not short lies
/// this near the 20-bit grid only by chance (about 9 in 16), so a stage of many is not tried.
pub const SNAP_ULPS: f64 = 4.0;

/// `x` rounded to `bits` significant bits, or 0 where `|x|` is under `2^-bits` of `top` (its
/// stage's largest modulus).
fn short(x: f64, bits: u32, top: f64) -> f64 {
    if x == 0.0 || x.abs() < top * 2f64.powi(-(bits as i32)) {
        return 0.0;
    }
    let q = 2f64.powi(x.abs().log2().floor() as i32 + 1 - bits as i32);
    (x / q).round() * q
}

/// A stage whose free twiddles are short binary fractions to within [`SNAP_ULPS`]
/// ([`Polish::short_stages`]).
#[derive(Clone, Debug)]
pub struct ShortStage {
    stage: usize,
    bits: u32,
    /// The farthest free twiddle from its rounding, in ulps of the stage's largest modulus.
    farthest: f64,
    /// The stage's twiddles with the free ones rounded, `[re, im]`.
    values: [Vec<f64>; 2],
}

/// What [`Polish::restore`] goes back to.
#[derive(Clone, Debug)]
pub struct SavePoint<B: Backend> {
    theta: Twiddles<B>,
    mask: Twiddles<B>,
    loss: f64,
    log2_lambda: i32,
    stalled: usize,
}

impl<B: Backend> SavePoint<B> {
    /// The loss there.
    pub fn loss(&self) -> f64 {
        self.loss
    }
}

/// Settings of the polish phase.
#[derive(Clone, Copy, Debug)]
pub struct PolishSettings {
    /// Most CG iterations per step.
    pub cg_iters: usize,
    /// CG stops when its residual norm falls by this factor.
    pub cg_tol: f64,
    /// Stop once the loss (mean squared error) is at or below this.
    pub stop_loss: f64,
    /// Stop after this many steps in a row that lower the loss by less than [`STALL_FRACTION`]
    /// of itself (the precision of the float type is reached); with `patient`, refused steps
    /// count only where they no longer move any twiddle, and then end the stage.
    pub max_stalled: usize,
    /// How refused steps count: `patient` in the stage that ends the polish, where only the
    /// float type should end it; a stage that hands over to another (before the gauge is
    /// fixed) counts every refused step as stalled.
    pub patient: bool,
}

/// State of the polish phase on backend `B` (computations run on its inner backend).
pub struct Polish<'a, B: FftBackend> {
    objective: &'a Objective<B::InnerBackend>,
    perms: &'a [Permutation],
    mask: Twiddles<B::InnerBackend>,
    /// Current twiddles.
    pub theta: Twiddles<B::InnerBackend>,
    /// Current loss.
    pub loss: f64,
    /// log2 of the damping λ.
    pub log2_lambda: i32,
    /// Steps in a row that lowered the loss by less than [`STALL_FRACTION`] (see
    /// [`PolishSettings::patient`]).
    pub stalled: usize,
}

/// What one [`Polish::step`] did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StepOutcome {
    /// The step lowered the loss and was kept.
    Kept,
    /// The step did not lower the loss; λ grew.
    Refused,
}

type Inner<B> = <B as burn::tensor::backend::AutodiffBackend>::InnerBackend;

impl<'a, B: FftBackend> Polish<'a, B> {
    /// Starts from `theta`, training only where `mask` (of the real and the imaginary parts)
    /// is 1.
    pub fn new(
        objective: &'a Objective<Inner<B>>,
        perms: &'a [Permutation],
        theta: Twiddles<Inner<B>>,
        mask: Twiddles<Inner<B>>,
        log2_lambda: i32,
        stalled: usize,
    ) -> Self {
        let loss = scalar(objective.loss(&theta.re, &theta.im, perms));
        Polish { objective, perms, mask, theta, loss, log2_lambda, stalled }
    }

    fn residual(&self, theta: &Twiddles<Inner<B>>) -> Complex2<Inner<B>> {
        let y = product_forward(self.objective.input(), &theta.re, &theta.im, self.perms);
        self.objective.residual(y)
    }

    /// J v: the change of the layer's output on the identity basis along direction `v` (one
    /// fused tangent launch per factor and pass where the backend has the kernel), its real part
    /// only with the real-output map ([`Objective::project`]).
    pub fn jvp(&self, v: &Twiddles<Inner<B>>) -> Complex2<Inner<B>> {
        let dy = product_tangent(self.objective.input(), (&self.theta.re, &self.theta.im), (&v.re, &v.im), self.perms);
        self.objective.project(dy.1)
    }

    /// Jᵀ u, masked: the gradient of ⟨M(θ) on the identity basis, u⟩ with respect to θ.
    pub fn vjp(&self, u: Complex2<Inner<B>>) -> Twiddles<Inner<B>> {
        let tr = Tensor::<B, 4>::from_inner(self.theta.re.clone()).require_grad();
        let ti = Tensor::<B, 4>::from_inner(self.theta.im.clone()).require_grad();
        let (xr, xi) = self.objective.input();
        let (yr, yi) = product_forward((Tensor::from_inner(xr), Tensor::from_inner(xi)), &tr, &ti, self.perms);
        let inner = (yr * Tensor::from_inner(u.0)).sum_dim(1).sum() + (yi * Tensor::from_inner(u.1)).sum_dim(1).sum();
        let grads = inner.backward();
        let g = |t: &Tensor<B, 4>, mask: &Tensor<Inner<B>, 4>| {
            t.grad(&grads).map(|g| g * mask.clone()).unwrap_or_else(|| mask.zeros_like())
        };
        Twiddles { re: g(&tr, &self.mask.re), im: g(&ti, &self.mask.im) }
    }

    /// One Levenberg–Marquardt step.
    pub fn step(&mut self, settings: &PolishSettings) -> StepOutcome {
        let r = self.residual(&self.theta);
        let minus_g = self.vjp(r).map(|t| t.neg());
        let lambda = 2f64.powi(self.log2_lambda);
        // CG on (JᵀJ + λI) δ = −g, starting from δ = 0.
        let mut delta = minus_g.map(|t| t.zeros_like());
        let mut res = minus_g.clone();
        let mut p = res.clone();
        let mut rho = res.dot(&res);
        let rho0 = scalar(rho.clone());
        if rho0 > 0.0 && rho0.is_finite() {
            for _ in 0..settings.cg_iters {
                let q = self.vjp(self.jvp(&p)).zip(&p, |a, b| a + b * lambda);
                let alpha = rho.clone() / p.dot(&q);
                delta = delta.axpy(&alpha, &p);
                res = res.axpy(&alpha.neg(), &q);
                let rho_new = res.dot(&res);
                let r_now = scalar(rho_new.clone());
                if !r_now.is_finite() || r_now <= settings.cg_tol * settings.cg_tol * rho0 {
                    break;
                }
                let beta = rho_new.clone() / rho;
                p = res.axpy(&beta, &p);
                rho = rho_new;
            }
        }
        let trial = self.theta.zip(&delta, |t, d| t + d);
        let trial_loss = scalar(self.objective.loss(&trial.re, &trial.im, self.perms));
        if trial_loss.is_finite() && trial_loss < self.loss {
            let progress = trial_loss < self.loss * (1.0 - STALL_FRACTION);
            self.stalled = if progress { 0 } else { self.stalled + 1 };
            self.theta = trial;
            self.loss = trial_loss;
            self.log2_lambda = (self.log2_lambda - 2).max(-60);
            StepOutcome::Kept
        } else {
            self.log2_lambda = (self.log2_lambda + 2).min(MAX_LOG2_LAMBDA);
            // In the last stage a refused step that moved the twiddles says λ was too small,
            // not that the polish is over: the next, shorter step may be kept. One that no
            // longer moves them (every change under half an ulp) cannot be bettered by a
            // larger λ.
            if !settings.patient {
                self.stalled += 1;
            } else if self.log2_lambda == MAX_LOG2_LAMBDA || !moves(&trial, &self.theta) {
                self.stalled = self.stalled.max(settings.max_stalled);
            }
            StepOutcome::Refused
        }
    }

    /// The f32 finish's candidates: each stage whose free twiddles all lie within
    /// [`SNAP_ULPS`] of short binary fractions, at the coarsest of [`SNAP_BITS`] that holds them,
    /// in order of how short they are (fewest bits, then nearest). The polish phase
    /// (`polish.rs`) tries runs of them from the first ([`Self::fix_short`]), each followed by a
    /// polish of the rest, and keeps a run only where that ends below the loss before it.
    ///
    /// Why: where a solution's twiddles are short binary fractions (0, ±1, ±1/16), f32 holds
    /// them exactly and evaluates the layer there exactly, but the f32 polish stops one or two
    /// ulps off: near a solution its Gauss–Newton steps fit the rounding of the forward as much
    /// as the error (measured on the Hadamard transform at N = 128: from where the polish
    /// stalled at rmse 2.42e-9, its step at λ = 2^-40 rose to 2.64e-9). Rounding some stages
    /// alone raises the loss where the others' errors offset theirs, until those others are
    /// polished again; and a stage holding one value that is not short (1/√128 there) can lie
    /// near a 20-bit fraction by chance: hence runs, the likeliest first, each judged after its
    /// polish. The loss alone decides.
    pub fn short_stages(&self) -> Vec<ShortStage> {
        let dims = self.theta.re.dims();
        let per_stage = dims[1] * dims[2] * dims[3];
        let host = |t: &Tensor<Inner<B>, 4>| to_f64_vec(t.clone());
        let theta = [host(&self.theta.re), host(&self.theta.im)];
        let free = [host(&self.mask.re), host(&self.mask.im)];
        let mut found: Vec<ShortStage> = (0..dims[0])
            .filter_map(|s| {
                let range = s * per_stage..(s + 1) * per_stage;
                let top = range.clone().map(|i| theta[0][i].hypot(theta[1][i])).fold(0.0, f64::max);
                let ulp = f64::from((top as f32).next_up()) - f64::from(top as f32);
                let at = |bits| {
                    let mut values = [theta[0][range.clone()].to_vec(), theta[1][range.clone()].to_vec()];
                    let mut farthest: f64 = 0.0;
                    let mut any_free = false;
                    for (part, part_values) in values.iter_mut().enumerate() {
                        for (k, v) in part_values.iter_mut().enumerate() {
                            if free[part][range.start + k] != 0.0 {
                                let rounded = short(*v, bits, top);
                                farthest = farthest.max((rounded - *v).abs() / ulp);
                                *v = rounded;
                                any_free = true;
                            }
                        }
                    }
                    (any_free && farthest <= SNAP_ULPS).then_some(ShortStage { stage: s, bits, farthest, values })
                };
                SNAP_BITS.into_iter().find_map(at)
            })
            .collect();
        found.sort_by(|a, b| {
            (a.bits, a.farthest).partial_cmp(&(b.bits, b.farthest)).unwrap_or(std::cmp::Ordering::Equal)
        });
        found
    }

    /// Sets `stages` to their short values and fixes them (the mask 0 there); returns whether
    /// any twiddle is still free.
    pub fn fix_short(&mut self, stages: &[ShortStage]) -> bool {
        let dims = self.theta.re.dims();
        let device = self.theta.re.device();
        let per_stage = dims[1] * dims[2] * dims[3];
        let host = |t: &Tensor<Inner<B>, 4>| to_f64_vec(t.clone());
        let mut theta = [host(&self.theta.re), host(&self.theta.im)];
        let mut free = [host(&self.mask.re), host(&self.mask.im)];
        for stage in stages {
            let range = stage.stage * per_stage..(stage.stage + 1) * per_stage;
            for part in 0..2 {
                theta[part][range.clone()].copy_from_slice(&stage.values[part]);
                free[part][range.clone()].fill(0.0);
            }
        }
        let on_device = |v: &[f64]| float_tensor::<Inner<B>, 4>(v.to_vec(), dims, &device);
        self.theta = Twiddles { re: on_device(&theta[0]), im: on_device(&theta[1]) };
        self.mask = Twiddles { re: on_device(&free[0]), im: on_device(&free[1]) };
        self.loss = scalar(self.objective.loss(&self.theta.re, &self.theta.im, self.perms));
        self.stalled = 0;
        free.iter().flatten().any(|&m| m != 0.0)
    }

    /// The twiddles, mask, loss and damping, to go back to ([`Self::restore`]).
    pub fn save_point(&self) -> SavePoint<Inner<B>> {
        SavePoint {
            theta: self.theta.clone(),
            mask: self.mask.clone(),
            loss: self.loss,
            log2_lambda: self.log2_lambda,
            stalled: self.stalled,
        }
    }

    /// Back to `point`.
    pub fn restore(&mut self, point: SavePoint<Inner<B>>) {
        self.theta = point.theta;
        self.mask = point.mask;
        self.loss = point.loss;
        self.log2_lambda = point.log2_lambda;
        self.stalled = point.stalled;
    }

    /// Whether the phase is over: the loss reached `stop_loss`, or it stalled.
    pub fn done(&self, settings: &PolishSettings) -> bool {
        self.loss <= settings.stop_loss || self.stalled >= settings.max_stalled
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::Tensor;

    use super::{moves, short, Twiddles};

    /// The last polish stage ends at a refused step that does not move the twiddles: a step
    /// under half an ulp of every twiddle rounds back to them, one over half an ulp of one
    /// twiddle (of either part) moves them.
    #[test]
    fn a_step_moves_the_twiddles_only_by_half_an_ulp_or_more() {
        type B = crate::backend::NdArrayBackend<f32>;
        let device = Default::default();
        let part = |v: [f32; 4]| Tensor::<B, 1>::from_floats(v, &device).reshape([1, 1, 2, 2]);
        let theta = Twiddles { re: part([1.0, 0.5, 0.25, -1.0]), im: part([0.5, -0.25, 1.0, 0.5]) };
        // The finest f32 spacing by these twiddles is 2^-26 ≈ 1.49e-8 (just under 0.25 in
        // magnitude, where −0.25 + δ lands): half of it is 7.45e-9.
        let under = theta.map(|t| t + 5e-9);
        assert!(!moves(&under, &theta));
        let one_over = Twiddles { re: theta.re.clone(), im: theta.im.clone() + part([0.0, 0.0, 0.0, 4e-8]) };
        assert!(moves(&one_over, &theta));
        assert!(moves(&theta.map(|t| t * 2.0), &theta));
    }

    #[test]
    fn short_rounds_to_significant_bits_and_drops_what_its_stage_dwarfs() {
        let below_one = f64::from(1f32 - f32::EPSILON / 2.0);
        assert_eq!(short(below_one, 20, 1.0), 1.0);
        assert_eq!(short(-1.000_000_1, 12, 1.0), -1.0);
        assert_eq!(short(0.062_500_03, 8, 1.0), 0.0625);
        // 1/√2 is no short fraction: 12 bits move it by more than an f32 ulp.
        let r = std::f64::consts::FRAC_1_SQRT_2;
        assert!((short(r, 12, 1.0) - r).abs() > f64::from(f32::EPSILON));
        assert_eq!(short(6.5e-8, 20, 1.0), 0.0);
        let kept = short(6.5e-8, 20, 1e-7);
        assert!(kept != 0.0 && (kept / 6.5e-8 - 1.0).abs() <= 2f64.powi(-20), "{kept}");
        assert_eq!(short(0.0, 4, 1.0), 0.0);
    }
}
