//! The butterfly product evaluated in f64 on the CPU: the definition every other implementation
//! (the tensor-op reference twin, the fused kernels) is checked against.
//!
//! # Definition
//! N = 2^L. The twiddles `t[s][k][a][b]` (stage s < L, block k < N/2, output row a, input
//! column b) are complex. The input is first permuted (`x ← x[perm]`), then each stage
//! s = 0, 1, …, L−1 with stride `st = 2^s` maps every block k, with `g = k / st`,
//! `j = k % st`, `i0 = 2·st·g + j`, `i1 = i0 + st`:
//!
//! ```text
//! y[i0] = t[s][k][0][0] · x[i0] + t[s][k][0][1] · x[i1]
//! y[i1] = t[s][k][1][0] · x[i0] + t[s][k][1][1] · x[i1]
//! ```
//!
//! Twiddles are stored row-major in `[L, N/2, 2, 2]` order, real and imaginary parts apart.

use num_complex::Complex64;

use super::matrix::ComplexMatrix;
use crate::error::{check_power_of_two, Error, Result};

/// Applies the butterfly with twiddles `(tw_re, tw_im)` (each `[L, n/2, 2, 2]` row-major) after
/// the gather `perm` (`x ← x[perm]`, a permutation of `0..n`) to `x` in place. `x.len()` must
/// be a power of two ≥ 2 and the twiddles and `perm` of its size.
///
/// # Errors
/// [`Error::InvalidInput`] when `x.len()` is not a power of two ≥ 2, `perm` is not a
/// permutation of `0..n` or the twiddles are not `[log2 n, n/2, 2, 2]`.
pub fn apply(tw_re: &[f64], tw_im: &[f64], perm: &[usize], x: &mut [Complex64]) -> Result<()> {
    let n = x.len();
    let log_n = check_power_of_two("reference::butterfly::apply", n)?;
    let mut seen = vec![false; n];
    if perm.len() != n || !perm.iter().all(|&i| i < n && !std::mem::replace(&mut seen[i], true)) {
        return Err(Error::invalid(
            "reference::butterfly::apply",
            format!("a permutation of 0..{n}"),
            format!("{} indices{}", perm.len(), if perm.len() == n { " that are not one" } else { "" }),
        ));
    }
    for len in [tw_re.len(), tw_im.len()] {
        if len != log_n * n * 2 {
            return Err(Error::invalid(
                "reference::butterfly::apply",
                format!("{} twiddle values for n = {n}", log_n * n * 2),
                len,
            ));
        }
    }
    apply_unchecked(tw_re, tw_im, perm, x);
    Ok(())
}

fn apply_unchecked(tw_re: &[f64], tw_im: &[f64], perm: &[usize], x: &mut [Complex64]) {
    let n = x.len();
    let log_n = n.trailing_zeros() as usize;
    let permuted: Vec<Complex64> = perm.iter().map(|&i| x[i]).collect();
    x.copy_from_slice(&permuted);
    let t = |s: usize, k: usize, a: usize, b: usize| {
        let idx = ((s * (n / 2) + k) * 2 + a) * 2 + b;
        Complex64::new(tw_re[idx], tw_im[idx])
    };
    for s in 0..log_n {
        let st = 1usize << s;
        for k in 0..n / 2 {
            let (g, j) = (k / st, k % st);
            let i0 = 2 * st * g + j;
            let i1 = i0 + st;
            let (x0, x1) = (x[i0], x[i1]);
            x[i0] = t(s, k, 0, 0) * x0 + t(s, k, 0, 1) * x1;
            x[i1] = t(s, k, 1, 0) * x0 + t(s, k, 1, 1) * x1;
        }
    }
}

/// The twiddles of a butterfly of size 2N whose first log2 N stages act on both halves as the
/// stages of `half` (size `n`) do, followed by `last`, the N blocks of its last stage; all in
/// the `[L, N/2, 2, 2]` layout (of either part, or of complex values). After the bit reversal of
/// 2N, those stages transform the even and the odd samples as `half` after the bit reversal of
/// N does.
pub fn doubled_stages<T: Copy>(half: &[T], n: usize, last: &[T]) -> Vec<T> {
    let stage = 2 * n; // values of one stage of size n: n/2 blocks of 4
    let mut out = Vec::with_capacity(2 * half.len() + last.len());
    for block in half.chunks_exact(stage) {
        out.extend_from_slice(block);
        out.extend_from_slice(block);
    }
    out.extend_from_slice(last);
    out
}

/// The dense N×N matrix of a product of butterflies, each `(tw_re, tw_im, perm)` as for
/// [`matrix`], the first applied first (the identity for none).
///
/// # Errors
/// As [`matrix`], for any factor.
pub fn product_matrix<'a>(
    n: usize,
    factors: impl IntoIterator<Item = (&'a [f64], &'a [f64], &'a [usize])>,
) -> Result<ComplexMatrix> {
    factors.into_iter().try_fold(ComplexMatrix::identity(n), |m, (re, im, perm)| matrix(re, im, n, perm)?.matmul(&m))
}

/// The dense N×N matrix of the butterfly with the given twiddles and input gather `perm`.
///
/// # Errors
/// As [`apply`] on a vector of length `n`.
pub fn matrix(tw_re: &[f64], tw_im: &[f64], n: usize, perm: &[usize]) -> Result<ComplexMatrix> {
    // Checks the sizes once; every column then has the same length.
    apply(tw_re, tw_im, perm, &mut vec![Complex64::new(0.0, 0.0); n])?;
    Ok(ComplexMatrix::from_linear_map(n, |col| apply_unchecked(tw_re, tw_im, perm, col)))
}
