//! Exact factorizations of the targets into products of (permutation, butterfly) factors, in
//! f64: the proof that a model class represents a target, and (evaluated in a lower precision)
//! the floor a trained layer is measured against.
//!
//! A [`Factor`] is a permutation followed by one butterfly ([`super::butterfly`]: log2 N stages
//! of N/2 complex 2×2 blocks, increasing stride); a [`Factorization`] applies its factors in
//! order, the first to the input. Known exactly here:
//!
//! | target | factors | permutation(s) | why it is exact |
//! |---|---|---|---|
//! | DFT, iDFT | 1 | bit reversal | the radix-2 decimation-in-time FFT (Cooley–Tukey): block k of stage s is `[[1, w], [1, −w]]/√2`, `w = e^{∓2πi (k mod 2^s) / 2^{s+1}}` |
//! | Hadamard | 1 | identity | `H_N = H_2 ⊗ ⋯ ⊗ H_2`: stage s applies `H_2/√2` to the index pairs 2^s apart (the fast Walsh–Hadamard transform) |
//! | circulant | 2 | bit reversal, bit reversal | `C = F⁻¹ diag(F̂h) F` (the convolution theorem, `F̂h` the unnormalised DFT of the kernel): the DFT, then the inverse DFT with the diagonal folded into its first stage's block columns (`P_br D = D' P_br`) |
//!
//! DCT-II, DST-II and Hartley have no factorization here yet: [`exact`] returns `None`.

use std::f64::consts::{FRAC_1_SQRT_2, PI};

use num_complex::Complex64;

use super::dft::{fft_chunks, FftNorm};
use super::matrix::ComplexMatrix;
use super::targets::Target;
use crate::error::{check_power_of_two, Error, Result};

/// One factor: the gather `x ← x[permutation]`, then a butterfly with these twiddles
/// (`[log2 N, N/2, 2, 2]` row-major, real and imaginary parts apart).
#[derive(Clone, Debug, PartialEq)]
pub struct Factor {
    /// Gather indices of the input permutation.
    pub permutation: Vec<usize>,
    /// Real parts of the twiddles.
    pub re: Vec<f64>,
    /// Imaginary parts of the twiddles.
    pub im: Vec<f64>,
}

/// A product of [`Factor`]s, the first applied first.
#[derive(Clone, Debug, PartialEq)]
pub struct Factorization {
    n: usize,
    factors: Vec<Factor>,
}

impl Factorization {
    /// Transform size.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The factors, the first applied first.
    pub fn factors(&self) -> &[Factor] {
        &self.factors
    }

    /// The dense matrix of the product, in f64.
    pub fn matrix(&self) -> Result<ComplexMatrix> {
        let mut m = ComplexMatrix::identity(self.n);
        for f in &self.factors {
            m = super::butterfly::matrix(&f.re, &f.im, self.n, &f.permutation)?.matmul(&m)?;
        }
        Ok(m)
    }
}

/// Gather indices of the bit reversal of log2 n bits.
pub fn bit_reversal(n: usize) -> Vec<usize> {
    let bits = n.trailing_zeros();
    (0..n).map(|i| if bits == 0 { i } else { i.reverse_bits() >> (usize::BITS - bits) }).collect()
}

/// The exact radix-2 decimation-in-time FFT's twiddles (after [`bit_reversal`]): block k of
/// stage s is `c · [[1, w], [1, −w]]` with `w = e^{∓2πi j / 2^{s+1}}`, `j = k mod 2^s` (minus for
/// the forward transform) and `c` the per-stage scale of `norm`.
pub fn fft_twiddles(n: usize, inverse: bool, norm: FftNorm) -> (Vec<f64>, Vec<f64>) {
    let c = norm.stage_scale(inverse);
    let sign = if inverse { 1.0 } else { -1.0 };
    blocks(n, |s, k| {
        let st = 1usize << s;
        let w = Complex64::from_polar(1.0, sign * 2.0 * PI * (k % st) as f64 / (2 * st) as f64);
        let one = Complex64::new(c, 0.0);
        [one, w * c, one, -w * c]
    })
}

/// Twiddles `(re, im)` with block k of stage s given by `block(s, k)` (row-major 2×2).
fn blocks(n: usize, mut block: impl FnMut(usize, usize) -> [Complex64; 4]) -> (Vec<f64>, Vec<f64>) {
    let log_n = n.trailing_zeros() as usize;
    let all: Vec<[Complex64; 4]> =
        (0..log_n).flat_map(|s| (0..n / 2).map(move |k| (s, k))).map(|(s, k)| block(s, k)).collect();
    (all.iter().flat_map(|b| b.map(|z| z.re)).collect(), all.iter().flat_map(|b| b.map(|z| z.im)).collect())
}

/// The exact factorization of `target` at size `n` in the smallest model class this crate knows
/// for it (see the module docs), or `None` where none is known yet.
///
/// # Errors
/// [`Error::InvalidInput`] when `n` is not a power of two ≥ 2, or a circulant kernel is not of
/// length `n`.
pub fn exact(target: &Target, n: usize) -> Result<Option<Factorization>> {
    check_power_of_two("factorization", n)?;
    let single = |permutation: Vec<usize>, (re, im): (Vec<f64>, Vec<f64>)| Factorization {
        n,
        factors: vec![Factor { permutation, re, im }],
    };
    Ok(Some(match target {
        Target::Dft | Target::Idft => single(bit_reversal(n), fft_twiddles(n, *target == Target::Idft, FftNorm::Ortho)),
        Target::Hadamard => {
            let (p, m) = (Complex64::new(FRAC_1_SQRT_2, 0.0), Complex64::new(-FRAC_1_SQRT_2, 0.0));
            single((0..n).collect(), blocks(n, |_, _| [p, p, p, m]))
        }
        Target::Circulant { kernel } => {
            if kernel.len() != n {
                return Err(Error::invalid(
                    "factorization.circulant",
                    format!("a kernel of length n = {n}"),
                    format!("length {}", kernel.len()),
                ));
            }
            // λ = the unnormalised DFT of h: C = F⁻¹ diag(λ) F for the unitary F.
            let mut lambda: Vec<Complex64> = kernel.iter().map(|&h| Complex64::new(h, 0.0)).collect();
            fft_chunks(&mut lambda, n, false, FftNorm::Backward);
            let br = bit_reversal(n);
            // F⁻¹ diag(λ) = B⁻¹ P_br diag(λ) = B⁻¹ diag(λ ∘ br) P_br: stage 0's block k acts on
            // positions 2k and 2k + 1, so its column b takes the factor λ[br(2k + b)].
            let (re, im) = fft_twiddles(n, true, FftNorm::Ortho);
            let mut inverse: Vec<Complex64> = re.iter().zip(&im).map(|(&r, &i)| Complex64::new(r, i)).collect();
            for k in 0..n / 2 {
                for a in 0..2 {
                    for b in 0..2 {
                        inverse[(k * 2 + a) * 2 + b] *= lambda[br[2 * k + b]];
                    }
                }
            }
            let forward = fft_twiddles(n, false, FftNorm::Ortho);
            Factorization {
                n,
                factors: vec![
                    Factor { permutation: br.clone(), re: forward.0, im: forward.1 },
                    Factor {
                        permutation: br,
                        re: inverse.iter().map(|z| z.re).collect(),
                        im: inverse.iter().map(|z| z.im).collect(),
                    },
                ],
            }
        }
        Target::Dct2 | Target::Dst2 | Target::Hartley => return Ok(None),
    }))
}
