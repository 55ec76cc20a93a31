//! Exact factorizations of the targets into products of (permutation, butterfly) factors, in
//! f64: the proof that a model class represents a target, and (evaluated in a lower precision)
//! the floor a trained layer is measured against.
//!
//! A [`Factor`] is a permutation followed by one butterfly ([`super::butterfly`]: log2 N stages
//! of N/2 complex 2×2 blocks, increasing stride); a [`Factorization`] applies its factors in
//! order, the first to the input. Every target is exact in one of these:
//!
//! | target | factors | permutation(s) | why it is exact |
//! |---|---|---|---|
//! | DFT, iDFT | 1 | bit reversal | the radix-2 decimation-in-time FFT (Cooley–Tukey): block k of stage s is `[[1, w], [1, −w]]/√2`, `w = e^{∓2πi (k mod 2^s) / 2^{s+1}}` |
//! | Hadamard | 1 | identity | `H_N = H_2 ⊗ ⋯ ⊗ H_2`: stage s applies `H_2/√2` to the index pairs 2^s apart (the fast Walsh–Hadamard transform) |
//! | circulant | 2 | bit reversal, bit reversal | `C = F⁻¹ diag(F̂h) F` (the convolution theorem, `F̂h` the unnormalised DFT of the kernel): the DFT, then the inverse DFT with the diagonal folded into its first stage's block columns (`P_br D = D' P_br`) |
//! | Hartley | 3 | bit reversal, identity, identity | `H = Re F − Im F = M F` with `(Mz)_k = ((1+i) z_k + (1−i) z_{−k})/2` (since `F̄ = J F`, `J` the index negation); `M` is two butterflies ([`negation_pairing`]) |
//! | DCT-II | 3 | Makhoul's reordering then bit reversal, identity, identity | Makhoul (1980): `X_k = Re(e^{−iπk/2N} V_k)` with `V` the DFT of `v = (x_0, x_2, …, x_3, x_1)`; the real part of a complex-linear map is `(A + Ā)/2`, again an `M F P` |
//! | DST-II | 3 | as DCT-II | `DST = R · DCT · S` (`S = diag((−1)^n)`, `R` the output reversal): `S` folds into the first stage's columns, `R` into the last factor ([`reverse_output`]) |
//!
//! The pairing `M` of an output k with −k (mod N) is the XOR of k with the bits above its lowest
//! set bit. Conjugated by the permutation `C` that, when the top bit is set, flips those bits
//! below the top one, the partners differ only in the top bit: pass A is `C` (uniformly
//! controlled swaps in stages 0 … L−2) then the 2×2 blocks of `M` at stride N/2 in stage L−1;
//! pass B is `C` again (`C` is an involution). Only that one stage carries values: the model
//! class of these three targets learns BP and it, and keeps `C` fixed ([`learned_stages`]).

use std::f64::consts::{FRAC_1_SQRT_2, PI};

use num_complex::Complex64;

use super::dft::FftNorm;
use super::matrix::ComplexMatrix;
use super::targets::{kernel_spectrum, Target};
use crate::error::{check_power_of_two, Result};

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
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] when a factor's twiddles or permutation do not fit N
    /// (not for a factorization built here).
    pub fn matrix(&self) -> Result<ComplexMatrix> {
        super::butterfly::product_matrix(
            self.n,
            self.factors.iter().map(|f| (&f.re[..], &f.im[..], &f.permutation[..])),
        )
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
pub(crate) fn blocks(n: usize, mut block: impl FnMut(usize, usize) -> [Complex64; 4]) -> (Vec<f64>, Vec<f64>) {
    let log_n = n.trailing_zeros() as usize;
    let all: Vec<[Complex64; 4]> =
        (0..log_n).flat_map(|s| (0..n / 2).map(move |k| (s, k))).map(|(s, k)| block(s, k)).collect();
    (all.iter().flat_map(|b| b.map(|z| z.re)).collect(), all.iter().flat_map(|b| b.map(|z| z.im)).collect())
}

/// The number of factors of `target`'s exact factorization ([`exact`]), known without building
/// it (for memory estimates before anything is allocated).
pub fn factor_count(target: &Target) -> usize {
    match target {
        // A user's matrix, operator or data: its own class is BP (the permutation found from the
        // matrix, where one makes it a butterfly), and no factorization of it is known.
        Target::Dft | Target::Idft | Target::Hadamard | Target::Matrix(_) | Target::Operator(_) | Target::Data(_) => 1,
        Target::Circulant { .. } => 2,
        Target::Hartley | Target::Dct2 | Target::Dst2 => 3,
    }
}

/// The name of `target`'s model class, as the benchmark data and the checkpoint manifest give
/// it: `"BP"` (one permutation–butterfly factor), `"BPBP"` (two), or `"BP+M"` (one, then the
/// pairing `M`: one learned stage between fixed permutations, see [`learned_stages`]).
pub fn model_name(target: &Target) -> &'static str {
    match factor_count(target) {
        1 => "BP",
        2 => "BPBP",
        _ => "BP+M",
    }
}

/// Which stages of `target`'s model class are learned, one flag per stage of the stacked factors
/// (`K · log2 n`, factor-major, K = [`factor_count`]); the others are fixed to those of its exact
/// factorization ([`exact`]), which there are permutations (every block `[[1, 0], [0, 1]]` or
/// `[[0, 1], [1, 0]]`, up to a row swap), like the factors' input permutations.
///
/// Every stage is learned except in the pairing `M` of Hartley, DCT-II and DST-II (see the module
/// docs): `M = C S C`, where `C` is a fixed permutation and `S` one stage of N/2 blocks at stride
/// N/2, so only pass A's last stage (`S`) is learned, and the model is **BP** followed by one
/// learned stage between two fixed permutations: log2 N + 1 learned stages where three free
/// factors would have 3 log2 N.
///
/// # Errors
/// [`Error::InvalidInput`](crate::error::Error::InvalidInput) when `n` is not a power of two ≥ 2.
pub fn learned_stages(target: &Target, n: usize) -> Result<Vec<bool>> {
    check_power_of_two("factorization", n)?;
    let log_n = n.trailing_zeros() as usize;
    Ok(match factor_count(target) {
        3 => (0..3 * log_n).map(|g| g < log_n || g == 2 * log_n - 1).collect(),
        k => vec![true; k * log_n],
    })
}

/// The input permutations (gather indices) of the factors of `target`'s exact factorization at
/// size `n` ([`exact`]), the first applied first, known without building the twiddles.
///
/// # Errors
/// [`Error::InvalidInput`](crate::error::Error::InvalidInput) when `n` is not a power of two ≥ 2.
pub fn permutations(target: &Target, n: usize) -> Result<Vec<Vec<usize>>> {
    check_power_of_two("factorization", n)?;
    let (br, identity) = (bit_reversal(n), (0..n).collect::<Vec<_>>());
    Ok(match target {
        Target::Dft | Target::Idft => vec![br],
        Target::Hadamard | Target::Matrix(_) | Target::Operator(_) | Target::Data(_) => vec![identity],
        Target::Circulant { .. } => vec![br.clone(), br],
        Target::Hartley => vec![br, identity.clone(), identity],
        Target::Dct2 | Target::Dst2 => {
            // Makhoul's v_j = x[m(j)]: even samples forwards, then odd samples backwards; the
            // butterfly's bit reversal comes after it: x ← x[m(br(i))].
            let m = |j: usize| if j < n / 2 { 2 * j } else { 2 * (n - j) - 1 };
            vec![br.iter().map(|&j| m(j)).collect(), identity.clone(), identity]
        }
    })
}

/// The exact factorization of `target` at size `n` in the smallest model class this crate knows
/// for it (see the module docs), or `None` where none is known yet.
///
/// # Errors
/// [`Error::InvalidInput`](crate::error::Error::InvalidInput) when `n` is not a power of two ≥ 2, or a circulant kernel is not of
/// length `n`.
pub fn exact(target: &Target, n: usize) -> Result<Option<Factorization>> {
    let mut perms = permutations(target, n)?.into_iter();
    let mut perm = || perms.next().expect("permutations() has one per factor");
    let single = |permutation: Vec<usize>, (re, im): (Vec<f64>, Vec<f64>)| Factorization {
        n,
        factors: vec![Factor { permutation, re, im }],
    };
    Ok(Some(match target {
        // A user's matrix or operator: none is known (the trainer learns one).
        Target::Matrix(_) | Target::Operator(_) | Target::Data(_) => return Ok(None),
        Target::Dft | Target::Idft => single(perm(), fft_twiddles(n, *target == Target::Idft, FftNorm::Ortho)),
        Target::Hadamard => {
            let (p, m) = (Complex64::new(FRAC_1_SQRT_2, 0.0), Complex64::new(-FRAC_1_SQRT_2, 0.0));
            single(perm(), blocks(n, |_, _| [p, p, p, m]))
        }
        Target::Circulant { kernel } => {
            // λ = the unnormalised DFT of h: C = F⁻¹ diag(λ) F for the unitary F.
            let lambda = kernel_spectrum(kernel, n)?;
            let (br, second) = (perm(), perm());
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
                    Factor { permutation: br, re: forward.0, im: forward.1 },
                    Factor {
                        permutation: second,
                        re: inverse.iter().map(|z| z.re).collect(),
                        im: inverse.iter().map(|z| z.im).collect(),
                    },
                ],
            }
        }
        Target::Hartley => {
            let (alpha, beta) = (Complex64::new(0.5, 0.5), Complex64::new(0.5, -0.5));
            let (a, b) = negation_pairing(n, &vec![alpha; n], &vec![beta; n]);
            three(n, [perm(), perm(), perm()], fft_twiddles(n, false, FftNorm::Ortho), a, b)
        }
        Target::Dct2 | Target::Dst2 => {
            let nf = n as f64;
            // X_k = s_k √N Re(w_k (F v)_k), w_k = e^{−iπk/2N}: M's α_k = s_k √N w_k / 2, β_k = its
            // conjugate's (the Re), with s_0 = √(1/N), s_k = √(2/N).
            let pair: (Vec<Complex64>, Vec<Complex64>) = (0..n)
                .map(|k| {
                    let c = if k == 0 { 1.0 } else { 2.0f64.sqrt() } / 2.0;
                    let w = Complex64::from_polar(1.0, -PI * k as f64 / (2.0 * nf));
                    (w * c, w.conj() * c)
                })
                .unzip();
            let (a, b) = negation_pairing(n, &pair.0, &pair.1);
            let perms = [perm(), perm(), perm()];
            let (mut re, mut im) = fft_twiddles(n, false, FftNorm::Ortho);
            if *target == Target::Dct2 {
                return Ok(Some(three(n, perms, (re, im), a, b)));
            }
            // DST-II = R · DCT-II · diag((−1)^j): the signs scale the first stage's columns (block
            // k's column c takes input position 2k + c, which holds x[perm[2k + c]]).
            for k in 0..n / 2 {
                for (r, c) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                    if perms[0][2 * k + c] % 2 == 1 {
                        re[(k * 2 + r) * 2 + c] = -re[(k * 2 + r) * 2 + c];
                        im[(k * 2 + r) * 2 + c] = -im[(k * 2 + r) * 2 + c];
                    }
                }
            }
            three(n, perms, (re, im), a, reverse_output(n, &b))
        }
    }))
}

/// A factorization of three factors with these permutations: `first`, then `a`, then `b`.
fn three(n: usize, perms: [Vec<usize>; 3], first: Twiddles, a: Twiddles, b: Twiddles) -> Factorization {
    let factors = perms.into_iter().zip([first, a, b]).map(|(permutation, (re, im))| Factor { permutation, re, im });
    Factorization { n, factors: factors.collect() }
}

/// Twiddles `(re, im)`, `[log2 N, N/2, 2, 2]` row-major.
type Twiddles = (Vec<f64>, Vec<f64>);

/// Two butterflies (no permutations), `B ∘ A`, equal to `M` with `(Mz)_k = α_k z_k + β_k z_{σ(k)}`,
/// `σ(k) = −k mod N` (see the module docs).
pub fn negation_pairing(n: usize, alpha: &[Complex64], beta: &[Complex64]) -> (Twiddles, Twiddles) {
    let top = n.trailing_zeros() as usize - 1;
    let (one, zero) = (Complex64::new(1.0, 0.0), Complex64::new(0.0, 0.0));
    // Stages 0 … L−2 of both passes: C swaps the pair when the top bit is set and a bit below
    // the stage's is set (the pair's lowest set bit is below s, so s is among the flipped bits).
    let swap = |s: usize, k: usize| -> [Complex64; 4] {
        let st = 1usize << s;
        let i0 = 2 * st * (k / st) + k % st;
        if i0 & (st - 1) != 0 && (i0 >> top) & 1 == 1 {
            [zero, one, one, zero]
        } else {
            [one, zero, zero, one]
        }
    };
    let a = blocks(n, |s, k| {
        if s < top {
            return swap(s, k);
        }
        // Stage L−1: position p (top bit clear) holds z_p, position p + N/2 holds z_{σ(p)}.
        let p = k;
        if p == 0 {
            let h = n / 2;
            [alpha[0] + beta[0], zero, zero, alpha[h] + beta[h]]
        } else {
            let q = n - p;
            [alpha[p], beta[p], beta[q], alpha[q]]
        }
    });
    let b = blocks(n, |s, k| if s < top { swap(s, k) } else { [one, zero, zero, one] });
    (a, b)
}

/// The twiddles of `R ∘ B` for a butterfly `B`, where `R` reverses the output (`k → N−1−k`, every
/// bit flipped): stage s's block for the pair with common bits k is B's block for the pair whose
/// bits below s are flipped, with its rows swapped.
pub fn reverse_output(n: usize, b: &Twiddles) -> Twiddles {
    let half = n / 2;
    let at = |s: usize, k: usize, e: usize| (s * half + k) * 4 + e;
    let (mut re, mut im) = (vec![0.0; b.0.len()], vec![0.0; b.1.len()]);
    for s in 0..n.trailing_zeros() as usize {
        let low = (1usize << s) - 1;
        for k in 0..half {
            let from = k ^ low;
            for (e, f) in [(0, 2), (1, 3), (2, 0), (3, 1)] {
                re[at(s, k, e)] = b.0[at(s, from, f)];
                im[at(s, k, e)] = b.1[at(s, from, f)];
            }
        }
    }
    (re, im)
}
