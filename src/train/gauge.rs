//! Gauge fixing: choosing one representative among the twiddles that give the same matrix.
//!
//! A butterfly factorisation is not unique: for any invertible diagonal D, replacing stage g by
//! `D B_g` and the next stage by `B_{g+1} D⁻¹` leaves the product unchanged (across a factor
//! boundary the diagonal passes through the next factor's permutation). Training from random
//! weights lands on an arbitrary member of that family. [`fix_gauge`] picks the member in which
//! every row of every block of every learned stage but the last has its **pivot** exactly 1: the
//! first entry, unless it is less than half the second in magnitude (then the second: a swap's
//! row `(0, 1)` keeps its 1 where it is). The last learned stage absorbs the scale; a fixed
//! permutation stage ([`crate::nn::ModelClass`]) passes the diagonal through unchanged.
//! For the DFT this is the textbook radix-2 gauge `[[1, w], [1, −w]]`: in it the f32 rounding of
//! the exact twiddles costs 0.16…0.56 × the floor (the floor is measured with unitary blocks,
//! whose every entry carries a rounded 1/√2), so an f32 training that polishes to the gauge's
//! own rounding level ends well below the floor. The rescaling is computed once, on the host in
//! f64, and rounded to the backend's type; the polish that follows runs on the device.
//!
//! The trainer fixes the gauge only after a first polish over every twiddle has converged: with
//! the gauge free, Gauss–Newton's flat directions cost conjugate gradients nothing (the
//! right-hand side has no component along them) and it converges quadratically, while the
//! constrained problem ([`gauge_mask`]) is worse conditioned; its second, short polish only has
//! to correct the rounding of the rescaling.

use num_complex::Complex64;

use crate::error::Result;
use crate::metrics::rmse_of_model;
use crate::nn::{model_class_of_size, Butterfly, ButterflyProduct};
use crate::ops::{ButterflyOps, Permutation};
use crate::reference::factorizations::{exact, Factor};
use crate::reference::Target;

/// The smallest |pivot| (relative to the RMS magnitude of its stage's entries) at which the
/// gauge is fixed; below it the division would amplify the error, and the twiddles are left as
/// they are.
pub const MIN_RELATIVE_PIVOT: f64 = 1e-4;

/// The pivot column of a block row `(t0, t1)`: 0 unless `|t0| < |t1| / 2`.
fn pivot(t0: Complex64, t1: Complex64) -> usize {
    usize::from(t0.norm() < 0.5 * t1.norm())
}

/// Index of entry `[g, b, r, c]` in twiddles `[G, n/2, 2, 2]`.
fn at(n: usize, g: usize, b: usize, r: usize, c: usize) -> usize {
    ((g * n / 2 + b) * 2 + r) * 2 + c
}

/// The stacked twiddles (`re`, `im`: `[K · log2 n, n/2, 2, 2]` row-major, K = `perms.len()`)
/// rescaled so that every block row of every learned stage but the last learned one has its
/// pivot exactly 1, the product unchanged (up to rounding). `learned` flags each stage (see
/// [`crate::nn::ModelClass`]); a stage that is not learned is a permutation (one nonzero per
/// block row) and stays as it is: the scaling passes through it to the next learned stage.
/// `None` where a pivot is too small to divide by (see [`MIN_RELATIVE_PIVOT`]) or not finite,
/// or a stage that is not learned is not a permutation.
pub fn fix_gauge(
    re: &[f64],
    im: &[f64],
    n: usize,
    perms: &[Permutation],
    learned: &[bool],
) -> Option<(Vec<f64>, Vec<f64>)> {
    let log_n = n.trailing_zeros() as usize;
    let stages = perms.len() * log_n;
    if log_n == 0 || re.len() != stages * n * 2 || im.len() != re.len() || learned.len() != stages {
        return None;
    }
    let mut t: Vec<Complex64> = re.iter().zip(im).map(|(&a, &b)| Complex64::new(a, b)).collect();
    let Some(last) = learned.iter().rposition(|&l| l) else { return Some((re.to_vec(), im.to_vec())) };
    let one = Complex64::new(1.0, 0.0);
    // The scaling still owed to each input position of stage g (a diagonal moved past stage g−1).
    let mut owed = vec![one; n];
    for g in 0..=last {
        let s = g % log_n;
        if s == 0 && g > 0 {
            // Input position q of a factor's first stage reads the previous output at perm[q].
            let gather = perms[g / log_n].indices(n);
            owed = gather.iter().map(|&p| owed[p]).collect();
        }
        // The position that row or column r of block b touches.
        let st = 1usize << s;
        let position = |b: usize, r: usize| 2 * st * (b / st) + b % st + r * st;
        let mut next = vec![one; n];
        if !learned[g] {
            for b in 0..n / 2 {
                for r in 0..2 {
                    let nonzero: Vec<usize> = (0..2).filter(|&c| t[at(n, g, b, r, c)].norm() != 0.0).collect();
                    let &[c] = nonzero.as_slice() else { return None };
                    next[position(b, r)] = owed[position(b, c)];
                }
            }
            owed = next;
            continue;
        }
        for b in 0..n / 2 {
            for r in 0..2 {
                for c in 0..2 {
                    t[at(n, g, b, r, c)] *= owed[position(b, c)];
                }
            }
        }
        if g == last {
            break;
        }
        let stage = &t[at(n, g, 0, 0, 0)..at(n, g + 1, 0, 0, 0)];
        let rms = (stage.iter().map(|z| z.norm_sqr()).sum::<f64>() / stage.len() as f64).sqrt();
        for b in 0..n / 2 {
            for r in 0..2 {
                let c = pivot(t[at(n, g, b, r, 0)], t[at(n, g, b, r, 1)]);
                let d = t[at(n, g, b, r, c)];
                if !(d.norm().is_finite() && d.norm() > MIN_RELATIVE_PIVOT * rms) {
                    return None;
                }
                t[at(n, g, b, r, 1 - c)] /= d;
                t[at(n, g, b, r, c)] = one;
                next[position(b, r)] = d;
            }
        }
        owed = next;
    }
    Some((t.iter().map(|z| z.re).collect(), t.iter().map(|z| z.im).collect()))
}

/// 1 for the twiddle entries the polish phase trains, 0 for those it keeps: every entry of a
/// stage that is not learned (`learned`, one flag per stage), and those [`fix_gauge`] pins (the
/// pivot of every block row in every learned stage but the last learned one), as the twiddles
/// `re`, `im` (stacked, `[G, n/2, 2, 2]`) stand.
pub fn gauge_mask(re: &[f64], im: &[f64], n: usize, learned: &[bool]) -> Vec<f64> {
    let stages = re.len() / (2 * n);
    let mut mask = vec![1.0; re.len()];
    let last = learned.iter().rposition(|&l| l);
    for g in 0..stages {
        if !learned.get(g).copied().unwrap_or(true) {
            mask[at(n, g, 0, 0, 0)..at(n, g + 1, 0, 0, 0)].fill(0.0);
            continue;
        }
        if Some(g) == last {
            continue;
        }
        for b in 0..n / 2 {
            for r in 0..2 {
                let z = |c| Complex64::new(re[at(n, g, b, r, c)], im[at(n, g, b, r, c)]);
                mask[at(n, g, b, r, pivot(z(0), z(1)))] = 0.0;
            }
        }
    }
    mask
}

/// The exact factorization's floor in the trainer's gauge: the rmse, on `B` (its float type),
/// of `target`'s exact factorization at size `n` with its gauge fixed as [`fix_gauge`] fixes a
/// trained layer's (in f64, then rounded to `B`'s type), measured as the report's rmse (through
/// the real part with `real_output`). `None` where the target has no exact factorization or its
/// gauge cannot be fixed.
///
/// The report's floor rounds the same factorization in unitary blocks, whose every entry carries
/// a rounded 1/√2; the trainer's gauge has exact ones where it can, so this is the lower of the
/// two, and the one an f32 run that ends at the exact factorization's gauge representative can
/// reach by rounding alone (for the DFT 0.21 … 0.43 × the unitary floor at N = 16 … 256).
///
/// # Errors
/// Those of the factorization and of the measurement ([`rmse_of_model`]).
pub fn floor_in_trainer_gauge<B: ButterflyOps>(
    n: usize,
    target: &Target,
    real_output: bool,
    device: &B::Device,
) -> Result<Option<f64>> {
    let Some(factorization) = exact(target, n)? else { return Ok(None) };
    let factors = factorization.factors();
    let perms = factors.iter().map(|f| Permutation::gather(f.permutation.clone())).collect::<Result<Vec<_>>>()?;
    let learned = model_class_of_size(target, n)?.learned;
    let re: Vec<f64> = factors.iter().flat_map(|f| f.re.iter().copied()).collect();
    let im: Vec<f64> = factors.iter().flat_map(|f| f.im.iter().copied()).collect();
    let Some((re, im)) = fix_gauge(&re, &im, n, &perms, &learned) else { return Ok(None) };
    let per_factor = re.len() / factors.len();
    let layer = ButterflyProduct::<B> {
        factors: factors
            .iter()
            .enumerate()
            .map(|(k, f)| {
                let span = k * per_factor..(k + 1) * per_factor;
                let factor =
                    Factor { permutation: f.permutation.clone(), re: re[span.clone()].to_vec(), im: im[span].to_vec() };
                Butterfly::from_factor(&factor, device)
            })
            .collect::<Result<Vec<_>>>()?,
    };
    rmse_of_model(&layer, target, real_output).map(Some)
}
