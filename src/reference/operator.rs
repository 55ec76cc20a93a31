//! A target a user brings as an operator: code that applies the transform to vectors, so that no
//! N×N matrix need exist (the objective above [`DENSE_MAX_N`](crate::train::objective::DENSE_MAX_N)
//! measures it on random probes), and a family of sizes can grow from its member of half the
//! size.
//!
//! The built-in targets implement the same trait ([`Target`](super::Target) is an
//! [`Operator`]), and the objective reads every target through it.

use std::sync::Arc;

use num_complex::Complex64;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The operation named in an operator's errors.
const OP: &str = "target operator";

/// A linear transform given by its action on vectors, in f64: a family with members at some
/// powers of two N ≥ 2.
///
/// The trainer uses what the operator offers and nothing else: its images of vectors (the
/// objective), its matrix where it can build one by applying it to the basis (N ≤ 4096: the
/// input permutation that makes it a butterfly is found from that matrix), and its member of
/// half the size where it has one (a run grows from it, [`crate::train::TrainConfig::grow_above`]).
///
/// # Example
/// ```
/// use learned_fft::reference::{Operator, OperatorTarget};
/// use learned_fft::{Result, Target};
/// use num_complex::Complex64;
///
/// /// y[k] = x[k] · (−1)^k: a diagonal operator at every size.
/// struct Alternate;
/// impl Operator for Alternate {
///     fn name(&self) -> String {
///         "alternate".into()
///     }
///     fn has_size(&self, _n: usize) -> bool {
///         true
///     }
///     fn apply(&self, n: usize, x: &mut [Complex64]) -> Result<()> {
///         x.iter_mut().enumerate().filter(|(i, _)| (i % n) % 2 == 1).for_each(|(_, z)| *z = -*z);
///         Ok(())
///     }
/// }
///
/// let target = Target::Operator(OperatorTarget::new(Alternate)?);
/// let m = target.matrix(4)?; // built by applying it to the basis
/// assert_eq!(m.get(1, 1), Complex64::new(-1.0, 0.0));
/// # Ok::<(), learned_fft::Error>(())
/// ```
pub trait Operator: Send + Sync {
    /// Its name, as reports, checkpoints and errors give it.
    fn name(&self) -> String;

    /// Whether it has a member of size `n` (asked for powers of two ≥ 2 only).
    fn has_size(&self, n: usize) -> bool;

    /// Applies its member of size `n` to every contiguous length-`n` vector of `x`, in place.
    /// `x.len()` is a non-zero multiple of `n`, and `n` a size it has.
    ///
    /// # Errors
    /// Whatever the operator cannot do; the trainer stops with the error.
    fn apply(&self, n: usize, x: &mut [Complex64]) -> Result<()>;

    /// Applies the adjoint (conjugate transpose) of its member of size `n` the same way, where it
    /// offers one (`None`: it does not). An adjoint given is checked against [`Operator::apply`]
    /// when the target is made ([`OperatorTarget::new`]), so a wrong one is refused there.
    ///
    /// # Errors
    /// As [`Operator::apply`].
    fn apply_adjoint(&self, n: usize, x: &mut [Complex64]) -> Option<Result<()>> {
        let _ = (n, x);
        None
    }
}

/// The sizes an operator's fingerprint and adjoint are checked at: the smallest powers of two it
/// has, up to this one.
const CHECK_MAX_N: usize = 1 << 14;

/// The relative tolerance of the adjoint check `⟨A x, y⟩ = ⟨x, A* y⟩`: a few hundred ulps of f64
/// for sums of N products, far below any wrong adjoint (off by O(1)).
const ADJOINT_TOLERANCE: f64 = 1e-10;

/// The relative tolerance to which an operator given again must reproduce its fingerprint: its
/// images may differ by rounding between machines (an FFT library picks its algorithm by CPU),
/// never by more than this for the same operator.
const FINGERPRINT_TOLERANCE: f64 = 1e-9;

/// Entries of the fingerprint kept (the first of the image): enough to tell operators apart,
/// few enough for a checkpoint's config.
const FINGERPRINT_ENTRIES: usize = 16;

/// A user's [`Operator`] as a [`Target`](super::Target): the operator, its name, and its
/// fingerprint (its images of a fixed random vector at its smallest size).
///
/// A checkpoint records the name and the fingerprint, not the code: a run resumes, and a
/// checkpoint is evaluated, only with the operator given again (the fingerprint must agree).
#[derive(Clone, Serialize, Deserialize)]
pub struct OperatorTarget {
    name: String,
    /// The smallest size it has (to [`CHECK_MAX_N`]), where the fingerprint is taken.
    fingerprint_n: usize,
    /// The first [`FINGERPRINT_ENTRIES`] entries of its image of the fixed vector at
    /// `fingerprint_n`, as (re, im) pairs.
    fingerprint: Vec<[f64; 2]>,
    /// The operator (not written to checkpoints).
    #[serde(skip)]
    op: Option<Arc<dyn Operator>>,
}

/// Names the operator and its fingerprint's size.
impl std::fmt::Debug for OperatorTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorTarget")
            .field("name", &self.name)
            .field("fingerprint_n", &self.fingerprint_n)
            .field("held", &self.op.is_some())
            .finish()
    }
}

/// Two operator targets are the same target when their names agree and their fingerprints agree
/// to 1e-9 relative (`FINGERPRINT_TOLERANCE`).
impl PartialEq for OperatorTarget {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.fingerprint_n == other.fingerprint_n
            && distance(&self.fingerprint, &other.fingerprint) <= FINGERPRINT_TOLERANCE
    }
}

impl OperatorTarget {
    /// The target of `op`, after checking it: it has a size ≤ 16384, its images there are
    /// finite, and its adjoint, where it offers one, is the adjoint of its [`Operator::apply`] at
    /// every size it has up to 16384.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the operator when one of those fails; the operator's own
    /// errors.
    pub fn new(op: impl Operator + 'static) -> Result<Self> {
        let op: Arc<dyn Operator> = Arc::new(op);
        let name = op.name();
        let sizes: Vec<usize> = (1..=CHECK_MAX_N.ilog2()).map(|k| 1 << k).filter(|&n| op.has_size(n)).collect();
        let Some(&fingerprint_n) = sizes.first() else {
            return Err(Error::invalid(OP, format!("{name} to have a size 2, 4, …, {CHECK_MAX_N}"), "none of them"));
        };
        let mut x = fixed_vector(fingerprint_n, 0);
        apply_checked(op.as_ref(), fingerprint_n, &mut x)?;
        let fingerprint = x.iter().take(FINGERPRINT_ENTRIES).map(|z| [z.re, z.im]).collect();
        for &n in sizes.iter().take(4) {
            check_adjoint(op.as_ref(), n)?;
        }
        Ok(OperatorTarget { name, fingerprint_n, fingerprint, op: Some(op) })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The operator.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a target read back from a checkpoint, which records only the
    /// operator's name and fingerprint: give the operator again.
    pub fn operator(&self) -> Result<&dyn Operator> {
        self.op.as_deref().ok_or_else(|| {
            Error::invalid(
                OP,
                format!("the operator {} itself (a checkpoint records only its name and fingerprint)", self.name),
                "a target read back from a checkpoint: give the operator again",
            )
        })
    }

    /// Whether the operator has a member of size `n` (false for one not held).
    pub fn has_size(&self, n: usize) -> bool {
        self.op.as_ref().is_some_and(|op| op.has_size(n))
    }

    /// Applies the operator's member of size `n`, checking that it has one and that the images
    /// are finite.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the operator when it has no member of size `n`, it is not
    /// held ([`OperatorTarget::operator`]), or an image is NaN or infinite; the operator's own.
    pub fn apply(&self, n: usize, x: &mut [Complex64]) -> Result<()> {
        let op = self.operator()?;
        if !op.has_size(n) {
            return Err(Error::invalid(OP, format!("{} to have a member of size N = {n}", self.name), "none"));
        }
        apply_checked(op, n, x)
    }
}

/// Applies `op` and refuses non-finite images, naming the operator.
fn apply_checked(op: &dyn Operator, n: usize, x: &mut [Complex64]) -> Result<()> {
    op.apply(n, x)?;
    if let Some((i, z)) = x.iter().enumerate().find(|(_, z)| !(z.re.is_finite() && z.im.is_finite())) {
        return Err(Error::invalid(
            OP,
            format!("{} to give finite images", op.name()),
            format!("{z} at entry {} of vector {} (N = {n})", i % n, i / n),
        ));
    }
    Ok(())
}

/// Checks `⟨A x, y⟩ = ⟨x, A* y⟩` at size `n` on fixed random vectors, where `op` offers an
/// adjoint.
fn check_adjoint(op: &dyn Operator, n: usize) -> Result<()> {
    let (x, y) = (fixed_vector(n, 1), fixed_vector(n, 2));
    let mut ay = y.clone();
    let Some(done) = op.apply_adjoint(n, &mut ay) else { return Ok(()) };
    done?;
    let mut ax = x.clone();
    apply_checked(op, n, &mut ax)?;
    let dot = |a: &[Complex64], b: &[Complex64]| -> Complex64 { a.iter().zip(b).map(|(a, b)| a * b.conj()).sum() };
    let (lhs, rhs) = (dot(&ax, &y), dot(&x, &ay));
    let norm = |v: &[Complex64]| v.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt();
    let scale = norm(&ax) * norm(&y) + norm(&x) * norm(&ay);
    let gap = (lhs - rhs).norm();
    // A NaN gap (an adjoint with NaN images) fails too.
    if gap.is_nan() || gap > ADJOINT_TOLERANCE * scale {
        return Err(Error::invalid(
            OP,
            format!("the adjoint of {} to satisfy ⟨A x, y⟩ = ⟨x, A* y⟩ (to {ADJOINT_TOLERANCE:e})", op.name()),
            format!("⟨A x, y⟩ = {lhs:.6e}, ⟨x, A* y⟩ = {rhs:.6e} at N = {n}"),
        ));
    }
    Ok(())
}

/// A fixed random complex vector of length `n` (standard normal parts), one per `stream`.
fn fixed_vector(n: usize, stream: u64) -> Vec<Complex64> {
    let mut rng = ChaCha8Rng::seed_from_u64(0x0b5e_55ed ^ (stream << 32) ^ n as u64);
    let mut draw = || -> f64 { StandardNormal.sample(&mut rng) };
    (0..n).map(|_| Complex64::new(draw(), draw())).collect()
}

/// ‖a − b‖ / ‖b‖ (∞ for different lengths).
fn distance(a: &[[f64; 2]], b: &[[f64; 2]]) -> f64 {
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    let diff: f64 = a.iter().zip(b).map(|(a, b)| (a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sum();
    let norm: f64 = b.iter().map(|b| b[0] * b[0] + b[1] * b[1]).sum();
    (diff / norm.max(f64::MIN_POSITIVE)).sqrt()
}
