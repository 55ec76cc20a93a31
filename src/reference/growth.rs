//! Growing a two-butterfly layer of a circulant from N/2 to N by the target's eigenstructure,
//! in f64. The trainer does not use it: it reads the target's eigenvectors, knowledge of the
//! circulant's answer that a generic class is not given (a grown circulant run doubles its
//! half-size layer with random last stages and runs Adam). It is kept as a reference
//! construction: how far the doubled layer is from a solution, and what would close the gap.
//!
//! # Why the plain doubled start is far from a solution
//! A circulant is `C = F⁻¹ D F`; a learned factorization `C = (B₂ P) (B₁ P)` (P the bit
//! reversal) has `B₁ P = G F` where `G` is not diagonal: the first factor's last stage is free
//! to mix each pair of frequencies `k` and `k + N/2` (its blocks combine exactly those two
//! outputs), and the second factor's first stage undoes the mixing. Measured on three trained
//! circulant layers at N = 256: every row of `B₁ P F⁻¹` has two entries, at `k` and `k + 128`.
//! Doubled to 2N (the N-point factor on the even and on the odd samples, a new last stage), the
//! mixing sits inside the first log₂ N stages, where the 2N solution needs pure frequencies:
//! no last stage reaches `C` from there, which is why Adam starts at rmse ≈ 1 and often lands
//! in a spurious minimum (one attempt in four at N = 256, one in six at 512).
//!
//! # The construction
//! Only the targets are used, not `F`: the rows of a solution's first factor are left
//! eigenvectors of the target (`f C = λ f`), and the learned rows of one last-stage block span
//! two of them. So:
//! 1. In the half-size first factor, each last-stage block `(r, r + N/4)` is replaced by `A · T`,
//!    `A` the 2×2 map that takes the block's two rows `R` to eigenvectors of the halved target:
//!    `R C = M R` for the 2×2 `M = R C R⁺`, and the rows of `A` are `M`'s left eigenvectors
//!    (scaled so each new row has unit norm).
//! 2. The factor is doubled (its stages on both halves after the 2N bit reversal) and its new
//!    last stage, pairing `(r, r + N/2)`, is found the same way against the target at N: the
//!    two rows a block combines are the same pure frequency on the even and on the odd
//!    samples, whose span holds two eigenvectors of `C`.
//! 3. The second factor is then `C · F₁⁻¹` (the first factor inverted stage by stage), and its
//!    twiddles are read off it as a butterfly after the bit reversal
//!    ([`identify::butterfly_twiddles`](super::identify::butterfly_twiddles)).
//!
//! From a half-size layer at its f32 floor the product is at the f32 floor of 2N (rmse 1.2e-7
//! at N = 512 from layers trained in f32); from one that missed its bar the start is useless
//! and the caller checks the product's rmse before using it.

use num_complex::Complex64;

use super::butterfly::{doubled_stages, product_matrix};
use super::identify::butterfly_twiddles;
use super::matrix::ComplexMatrix;
use crate::error::{check_power_of_two, Error, Result};

/// A two-factor start of size 2N and its rmse against the target in f64.
#[derive(Clone, Debug)]
pub struct Grown {
    /// The factors' twiddles `(re, im)`, each `[log2 2N, N, 2, 2]`, the first applied first;
    /// both after the bit reversal of 2N.
    pub factors: [(Vec<f64>, Vec<f64>); 2],
    /// rmse of their product against the target at 2N.
    pub rmse: f64,
}

/// The start at 2N grown from the first factor `(re, im)` of a two-butterfly layer of size N
/// (after the bit reversal; its second factor is not needed) by the eigenstructure of the
/// halved target `half` (N×N) and of the target `full` (2N×2N), see the module docs. `None`
/// where a step is singular (two equal eigenvalues, a row of zeros): the layer does not carry
/// the structure, and the caller starts otherwise.
///
/// # Errors
/// [`Error::InvalidInput`] when the sizes do not match (N a power of two ≥ 2, the twiddles of
/// that N, `full` of size 2N).
pub fn eigen_doubled(first: (&[f64], &[f64]), half: &ComplexMatrix, full: &ComplexMatrix) -> Result<Option<Grown>> {
    let op = "reference::growth::eigen_doubled";
    let n = half.n();
    let log_n = check_power_of_two(op, n)?;
    if full.n() != 2 * n {
        return Err(Error::invalid(op, format!("a target of size {}", 2 * n), full.n()));
    }
    let (re, im) = first;
    if re.len() != log_n * n * 2 || im.len() != re.len() {
        return Err(Error::invalid(op, format!("{} twiddle values for n = {n}", log_n * n * 2), re.len()));
    }
    let bitrev_n = super::factorizations::bit_reversal(n);
    let bitrev_2n = super::factorizations::bit_reversal(2 * n);
    let mut tw: Vec<Complex64> = re.iter().zip(im).map(|(&a, &b)| Complex64::new(a, b)).collect();

    // 1. The half-size factor's last stage, its rows made eigenvectors of the halved target:
    //    block r's new rows are A times its old ones, its twiddles A · T.
    let h1 = product_matrix(n, [(re, im, &bitrev_n[..])])?;
    let mut rows: Vec<Vec<Complex64>> = (0..n).map(|r| h1.row(r).to_vec()).collect();
    let last = (log_n - 1) * n * 2;
    for r in 0..n / 2 {
        let pair = [std::mem::take(&mut rows[r]), std::mem::take(&mut rows[r + n / 2])];
        let Some(a) = eigen_rows(&pair, half) else { return Ok(None) };
        let block = &mut tw[last + r * 4..last + r * 4 + 4];
        let at = mul2(&a, &[[block[0], block[1]], [block[2], block[3]]]);
        block.copy_from_slice(&[at[0][0], at[0][1], at[1][0], at[1][1]]);
        rows[r] = combine(&a[0], &pair);
        rows[r + n / 2] = combine(&a[1], &pair);
    }

    // 2. Doubled: stage s < log2 N of 2N is stage s of N on both halves; the new last stage
    //    pairs (r, r + N), whose rows before it are row r of the half factor on the even
    //    samples and on the odd ones.
    let mut last_stage = Vec::with_capacity(4 * n);
    for row in &rows {
        let spread = |parity: usize| {
            let mut v = vec![Complex64::new(0.0, 0.0); 2 * n];
            for (m, &z) in row.iter().enumerate() {
                v[2 * m + parity] = z;
            }
            v
        };
        let Some(a) = eigen_rows(&[spread(0), spread(1)], full) else { return Ok(None) };
        last_stage.extend_from_slice(&[a[0][0], a[0][1], a[1][0], a[1][1]]);
    }
    let first2 = doubled_stages(&tw, n, &last_stage);

    // 3. The second factor: C · F₁⁻¹, F₁ = B_L ⋯ B_0 P, so C · Pᵀ · B_0⁻¹ ⋯ B_L⁻¹ by columns,
    //    then undo its own bit reversal and read its twiddles.
    let size = 2 * n;
    let mut y: Vec<Vec<Complex64>> = (0..size).map(|r| bitrev_2n.iter().map(|&p| full.get(r, p)).collect()).collect();
    for s in 0..=log_n {
        let st = 1usize << s;
        for k in 0..n {
            let (g, j) = (k / st, k % st);
            let (i0, i1) = (2 * st * g + j, 2 * st * g + j + st);
            let b = &first2[(s * n + k) * 4..(s * n + k) * 4 + 4];
            let Some(inv) = inverse2(&[[b[0], b[1]], [b[2], b[3]]]) else { return Ok(None) };
            for row in &mut y {
                let (a0, a1) = (row[i0], row[i1]);
                row[i0] = a0 * inv[0][0] + a1 * inv[1][0];
                row[i1] = a0 * inv[0][1] + a1 * inv[1][1];
            }
        }
    }
    // Factor 2 = B₂ · P: B₂ = (C F₁⁻¹) · Pᵀ, column i of B₂ is column bitrev(i) of C F₁⁻¹.
    let b2 = ComplexMatrix::from_fn(size, |r, c| y[r][bitrev_2n[c]]);
    let Some(second) = butterfly_twiddles(&b2) else { return Ok(None) };
    let first = first2.iter().map(|z| (z.re, z.im)).unzip();
    let factors = [first, second];
    let product = product_matrix(size, factors.iter().map(|(re, im)| (&re[..], &im[..], &bitrev_2n[..])))?;
    let rmse = product.rmse(full)?;
    Ok(rmse.is_finite().then_some(Grown { factors, rmse }))
}

/// The 2×2 map `A` taking the two rows `R` (spanning a space the target `c` maps into itself
/// from the left, `R C = M R`) to left eigenvectors of `c`, each scaled to unit norm; `None`
/// where `R` has rank < 2 or `M`'s eigenvalues coincide.
fn eigen_rows(rows: &[Vec<Complex64>; 2], c: &ComplexMatrix) -> Option<[[Complex64; 2]; 2]> {
    let n = c.n();
    // R C, row by row.
    let rc: Vec<Vec<Complex64>> = rows
        .iter()
        .map(|r| {
            let mut out = vec![Complex64::new(0.0, 0.0); n];
            for (k, &z) in r.iter().enumerate() {
                if z != Complex64::new(0.0, 0.0) {
                    let crow = c.row(k);
                    out.iter_mut().zip(crow).for_each(|(o, &v)| *o += z * v);
                }
            }
            out
        })
        .collect();
    let dot = |a: &[Complex64], b: &[Complex64]| a.iter().zip(b).map(|(x, y)| x * y.conj()).sum::<Complex64>();
    // M = (R C) Rᴴ (R Rᴴ)⁻¹.
    let gram = [[dot(&rows[0], &rows[0]), dot(&rows[0], &rows[1])], [dot(&rows[1], &rows[0]), dot(&rows[1], &rows[1])]];
    let cross = [[dot(&rc[0], &rows[0]), dot(&rc[0], &rows[1])], [dot(&rc[1], &rows[0]), dot(&rc[1], &rows[1])]];
    let m = mul2(&cross, &inverse2(&gram)?);
    // Left eigenvectors u M = λ u of M = [[a, b], [c, d]]: u = (c, λ − a) or (λ − d, b).
    let (a, b, cc, d) = (m[0][0], m[0][1], m[1][0], m[1][1]);
    let half_trace = (a + d) / 2.0;
    let disc = (half_trace * half_trace - (a * d - b * cc)).sqrt();
    let scale = a.norm() + b.norm() + cc.norm() + d.norm();
    if disc.norm().is_nan() || disc.norm() <= 1e-9 * scale {
        return None;
    }
    let mut out = [[Complex64::new(0.0, 0.0); 2]; 2];
    for (i, lambda) in [half_trace + disc, half_trace - disc].into_iter().enumerate() {
        let (u, v) = ([cc, lambda - a], [lambda - d, b]);
        let u = if u[0].norm() + u[1].norm() >= v[0].norm() + v[1].norm() { u } else { v };
        // Scale so the new row u · R has unit norm.
        let new = combine(&u, rows);
        let norm = dot(&new, &new).re.sqrt();
        if !norm.is_finite() || norm <= 0.0 {
            return None;
        }
        out[i] = [u[0] / norm, u[1] / norm];
    }
    Some(out)
}

/// `u[0] · rows[0] + u[1] · rows[1]`.
fn combine(u: &[Complex64; 2], rows: &[Vec<Complex64>; 2]) -> Vec<Complex64> {
    rows[0].iter().zip(&rows[1]).map(|(x, y)| u[0] * x + u[1] * y).collect()
}

fn mul2(a: &[[Complex64; 2]; 2], b: &[[Complex64; 2]; 2]) -> [[Complex64; 2]; 2] {
    let e = |i: usize, j: usize| a[i][0] * b[0][j] + a[i][1] * b[1][j];
    [[e(0, 0), e(0, 1)], [e(1, 0), e(1, 1)]]
}

fn inverse2(a: &[[Complex64; 2]; 2]) -> Option<[[Complex64; 2]; 2]> {
    let det = a[0][0] * a[1][1] - a[0][1] * a[1][0];
    let scale = a.iter().flatten().map(|z| z.norm_sqr()).sum::<f64>();
    if det.norm().is_nan() || det.norm() <= 1e-12 * scale {
        return None;
    }
    Some([[a[1][1] / det, -a[0][1] / det], [-a[1][0] / det, a[0][0] / det]])
}
