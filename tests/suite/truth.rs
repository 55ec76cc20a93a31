//! The f64 references against closed forms and naive sums.

use std::f64::consts::PI;

use learned_fft::nn::model_class;
use learned_fft::reference::growth::eigen_doubled;
use learned_fft::reference::identify::{
    butterfly_permutation, butterfly_representative, butterfly_twiddles, factor_permutation, is_butterfly,
    F64_TOLERANCE,
};
use learned_fft::reference::{butterfly, dft, factorizations, ComplexMatrix, FftNorm, Target};
use learned_fft::{ButterflyInit, Permutation};
use num_complex::Complex64;

use crate::common::*;

/// Largest entry-wise error allowed for an f64 reference against its closed form: entries have
/// modulus ≤ 1 and pass through O(log2 N) ≤ 12 roundings of ε = 1.1e-16 in the fast algorithms,
/// and the closed forms reduce j·k mod N exactly before taking cos/sin.
const TRUTH_ABS: f64 = 1e-14;

fn cis(turns_num: usize, turns_den: usize, sign: f64) -> Complex64 {
    Complex64::from_polar(1.0, sign * 2.0 * PI * (turns_num % turns_den) as f64 / turns_den as f64)
}

fn closed_form(target: &Target, n: usize) -> ComplexMatrix {
    let nf = n as f64;
    let r = |v: f64| Complex64::new(v, 0.0);
    ComplexMatrix::from_fn(n, |k, j| match target {
        Target::Dft => cis(j * k, n, -1.0) / nf.sqrt(),
        Target::Idft => cis(j * k, n, 1.0) / nf.sqrt(),
        Target::Dct2 => {
            let s = if k == 0 { (1.0 / nf).sqrt() } else { (2.0 / nf).sqrt() };
            r(s * (PI * ((2 * j + 1) * k) as f64 / (2.0 * nf)).cos())
        }
        Target::Dst2 => {
            let s = if k == n - 1 { (1.0 / nf).sqrt() } else { (2.0 / nf).sqrt() };
            r(s * (PI * ((2 * j + 1) * (k + 1)) as f64 / (2.0 * nf)).sin())
        }
        Target::Hadamard => r(if (j & k).count_ones() % 2 == 0 { 1.0 } else { -1.0 } / nf.sqrt()),
        Target::Hartley => {
            let theta = 2.0 * PI * ((j * k) % n) as f64 / nf;
            r((theta.cos() + theta.sin()) / nf.sqrt())
        }
        Target::Circulant { kernel } => r(kernel[(k + n - j) % n]),
        // A user's matrix is its entries.
        Target::Matrix(m) => m.matrix().expect("held in memory").get(k, j),
        // The one operator of these tests.
        Target::Operator(_) => KronHadamardDft::entry(n, k, j),
        Target::Data(_) => unreachable!("data has no matrix, and is not among these targets"),
    })
}

/// Every target at size `n` (the circulant with a standard normal kernel drawn from `n`, a
/// user's matrix a random BP, a user's operator H₂ ⊗ DFT).
fn every_target(n: usize) -> [Target; 9] {
    let kernel = normals(n as u64, n);
    let matrix = learned_fft::MatrixTarget::new(crate::common::random_bp(n, n as u64)).expect("a valid matrix");
    [
        Target::Dft,
        Target::Idft,
        Target::Dct2,
        Target::Dst2,
        Target::Hadamard,
        Target::Hartley,
        Target::Circulant { kernel },
        Target::Matrix(matrix),
        Target::Operator(
            learned_fft::OperatorTarget::new(KronHadamardDft { wrong_adjoint: false }).expect("a valid operator"),
        ),
    ]
}

#[test]
fn targets_match_closed_forms() {
    for n in sizes_up_to(256) {
        for target in every_target(n) {
            let built = target.matrix(n).unwrap();
            let err = built.max_abs_diff(&closed_form(&target, n)).unwrap();
            assert!(err <= TRUTH_ABS, "{} n={n}: max |built − closed form| = {err:e}", target.kind());
        }
    }
}

/// `Target::apply` on a batch of complex vectors (the probes' truth) equals the closed-form
/// matrix times each vector; the real transforms act on the real and imaginary parts alike.
#[test]
fn target_apply_on_complex_batches_is_the_matrix_product() {
    for n in sizes_up_to(256) {
        let batch = 3;
        let x = complex(&normals(SEED, batch * n), &normals(SEED + 1, batch * n));
        for target in every_target(n) {
            let mut y = x.clone();
            target.apply(n, &mut y).unwrap();
            let m = closed_form(&target, n);
            let want: Vec<Complex64> = x.chunks(n).flat_map(|v| m.mul_vec(v).unwrap()).collect();
            // Entries of |x| ~ 1 summed over n terms of modulus ≤ 1 (the circulant's kernel ~ 1).
            let err = y.iter().zip(&want).map(|(a, b)| (a - b).norm()).fold(0.0, f64::max);
            assert!(err <= TRUTH_ABS * n as f64, "{} n={n}: max |apply − matrix · x| = {err:e}", target.kind());
        }
    }
    let mut odd = vec![Complex64::new(0.0, 0.0); 12];
    assert!(Target::Dft.apply(8, &mut odd).is_err(), "12 values are not a multiple of n = 8");
    assert!(Target::Dft.apply(12, &mut odd).is_err(), "n = 12 is not a power of two");
}

#[test]
fn unitary_targets_are_unitary() {
    for n in [2, 8, 64] {
        for target in [Target::Dft, Target::Idft, Target::Dct2, Target::Dst2, Target::Hadamard, Target::Hartley] {
            let m = target.matrix(n).unwrap();
            let err = m.matmul(&m.adjoint()).unwrap().max_abs_diff(&ComplexMatrix::identity(n)).unwrap();
            assert!(err <= TRUTH_ABS, "{} n={n}: |M Mᴴ − I| = {err:e}", target.kind());
        }
    }
}

/// Largest entry-wise error allowed for an exact factorization against its target: the
/// product of up to 3·log2 N ≤ 24 butterfly stages, each rounding once per entry (ε = 1.1e-16),
/// and the circulant's eigenvalues (a rustfft DFT of the kernel, entries up to ~√N·|h|).
const FACTORIZATION_ABS: f64 = 1e-13;

#[test]
fn exact_factorizations_equal_their_targets() {
    for n in sizes_up_to(256) {
        let kernel = normals(n as u64 + 7, n);
        // (target, factors of its model class)
        let targets = [
            (Target::Dft, 1),
            (Target::Idft, 1),
            (Target::Hadamard, 1),
            (Target::Circulant { kernel }, 2),
            (Target::Hartley, 3),
            (Target::Dct2, 3),
            (Target::Dst2, 3),
        ];
        for (target, factors) in targets {
            let f = factorizations::exact(&target, n).unwrap().expect("a factorization");
            assert_eq!(f.factors().len(), factors, "{} n={n}", target.kind());
            assert_eq!(factorizations::factor_count(&target), factors, "{}: the count without building", target.kind());
            let err = f.matrix().unwrap().max_abs_diff(&target.matrix(n).unwrap()).unwrap();
            assert!(err <= FACTORIZATION_ABS, "{} n={n}: max |factorization − target| = {err:e}", target.kind());
        }
    }
    // Why the Hadamard transform's permutation is the identity: after bit reversal the same
    // stages give another matrix (the DFT's permutation does not fit it).
    let n = 16;
    let mut f = factorizations::exact(&Target::Hadamard, n).unwrap().unwrap().factors()[0].clone();
    f.permutation = factorizations::bit_reversal(n);
    let m = butterfly::matrix(&f.re, &f.im, n, &f.permutation).unwrap();
    assert!(m.max_abs_diff(&Target::Hadamard.matrix(n).unwrap()).unwrap() > 0.1);
}

#[test]
fn circulant_is_the_naive_circular_convolution() {
    for n in [4, 32, 128] {
        let h = normals(1, n);
        let x = complex(&normals(2, n), &normals(3, n));
        let naive: Vec<Complex64> = (0..n).map(|k| (0..n).map(|j| x[j] * h[(k + n - j) % n]).sum()).collect();
        let via_matrix = Target::Circulant { kernel: h }.matrix(n).unwrap().mul_vec(&x).unwrap();
        let err = rel_rms(&via_matrix, &naive);
        assert!(err <= TRUTH_ABS, "n={n}: circulant rel err {err:e}");
    }
}

#[test]
fn dft_norms_follow_numpy() {
    let n = 16;
    let x = complex(&normals(4, n), &normals(5, n));
    let naive =
        |sign: f64| -> Vec<Complex64> { (0..n).map(|k| (0..n).map(|j| x[j] * cis(j * k, n, sign)).sum()).collect() };
    for norm in [FftNorm::Backward, FftNorm::Ortho, FftNorm::Forward] {
        for (inverse, sign) in [(false, -1.0), (true, 1.0)] {
            let expected: Vec<Complex64> = naive(sign).into_iter().map(|z| z * norm.scale(n, inverse)).collect();
            let got = if inverse { dft::idft(&x, norm) } else { dft::dft(&x, norm) };
            assert!(rel_rms(&got, &expected) <= TRUTH_ABS, "{norm:?} inverse={inverse}");
        }
        let back = dft::idft(&dft::dft(&x, norm), norm);
        assert!(rel_rms(&back, &x) <= TRUTH_ABS, "{norm:?} round trip");
        let stages = norm.stage_scale(false).powi(4);
        assert!((stages / norm.scale(n, false) - 1.0).abs() <= TRUTH_ABS, "{norm:?}: stage scale⁴ = {stages}");
    }
}

#[test]
fn exact_butterfly_definition_is_the_dft() {
    for n in sizes_up_to(1024) {
        for (inverse, target) in [(false, Target::Dft), (true, Target::Idft)] {
            let (re, im) = ButterflyInit::Fft { inverse, norm: FftNorm::Ortho }.twiddles(n);
            let m = butterfly::matrix(&re, &im, n, &Permutation::BitReversal.indices(n)).unwrap();
            let err = m.max_abs_diff(&target.matrix(n).unwrap()).unwrap();
            assert!(err <= TRUTH_ABS, "n={n} inverse={inverse}: {err:e}");
        }
    }
}

#[test]
fn random_unitary_init_is_unitary_and_identity_is_the_permutation() {
    for n in [2, 16, 128] {
        let (re, im) = ButterflyInit::RandomUnitary { seed: 7 }.twiddles(n);
        let m = butterfly::matrix(&re, &im, n, &Permutation::BitReversal.indices(n)).unwrap();
        let err = m.matmul(&m.adjoint()).unwrap().max_abs_diff(&ComplexMatrix::identity(n)).unwrap();
        assert!(err <= TRUTH_ABS, "n={n}: random unitary |M Mᴴ − I| = {err:e}");
        // Different seeds give different layers; the same seed the same one.
        assert_ne!(ButterflyInit::RandomUnitary { seed: 8 }.twiddles(n).0, re);
        assert_eq!(ButterflyInit::RandomUnitary { seed: 7 }.twiddles(n).0, re);

        let (re, im) = ButterflyInit::Identity.twiddles(n);
        let p = butterfly::matrix(&re, &im, n, &Permutation::BitReversal.indices(n)).unwrap();
        let perm = Permutation::BitReversal.indices(n);
        let expected = ComplexMatrix::from_fn(n, |r, c| Complex64::new((perm[r] == c) as u8 as f64, 0.0));
        assert_eq!(p, expected, "n={n}: identity init is the bit reversal");
    }
}

#[test]
fn randn_init_has_the_documented_scale() {
    let n = 1024;
    let scale = 0.5;
    let (re, im) = ButterflyInit::Randn { seed: 3, scale }.twiddles(n);
    let mean_sq = re.iter().zip(&im).map(|(a, b)| a * a + b * b).sum::<f64>() / re.len() as f64;
    // 20 480 samples of |t|² (exponential, mean scale²): the standard error is 0.7 % of the mean.
    assert!((mean_sq / (scale * scale) - 1.0).abs() < 0.05, "E|t|² = {mean_sq}, expected {}", scale * scale);
}

#[test]
fn bit_reversal_is_an_involution() {
    for n in sizes_up_to(4096) {
        let p = Permutation::BitReversal.indices(n);
        assert!(p.iter().enumerate().all(|(i, &j)| p[j] == i), "n={n}");
        if n >= 4 {
            assert_eq!(p[1], n / 2, "n={n}: bit reversal of 1");
        }
    }
}

/// A random butterfly after a random permutation: the search recovers the permutation (as its
/// representative), and finds none once one entry is changed.
#[test]
fn identification_recovers_the_permutation_of_a_random_butterfly() {
    for n in [4, 8, 64, 256] {
        for seed in 0..3 {
            let (re, im) = ButterflyInit::RandomUnitary { seed }.twiddles(n);
            let p0 = shuffled(n, 100 + seed);
            let t = butterfly::matrix(&re, &im, n, &p0).unwrap();
            let found = butterfly_permutation(&t, F64_TOLERANCE).unwrap();
            assert_eq!(found, Some(butterfly_representative(&p0)), "n={n} seed={seed}");
            // The found gather makes the matrix a butterfly: searching T·P⁻¹ gives the identity.
            let perm = found.unwrap();
            let undone = ComplexMatrix::from_fn(n, |r, c| t.get(r, perm[c]));
            let again = butterfly_permutation(&undone, F64_TOLERANCE).unwrap();
            assert_eq!(again, Some((0..n).collect()), "n={n} seed={seed}");
            // One entry changed: rows 0 and n/2 no longer have two directions per half.
            let broken = ComplexMatrix::from_fn(n, |r, c| t.get(r, c) + f64::from(u8::from(r == 0 && c == 0)) * 0.5);
            assert_eq!(butterfly_permutation(&broken, F64_TOLERANCE).unwrap(), None, "n={n} seed={seed}");
        }
    }
}

/// Positions `0..n` with the halves of aligned blocks exchanged at random (each block's with
/// probability 1/2): a symmetry of a butterfly's stages.
fn random_exchanges(n: usize, seed: u64) -> Vec<usize> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut q: Vec<usize> = (0..n).collect();
    let mut size = n;
    while size >= 2 {
        for block in q.chunks_mut(size) {
            if rng.random_bool(0.5) {
                let h = size / 2;
                for i in 0..h {
                    block.swap(i, i + h);
                }
            }
        }
        size /= 2;
    }
    q
}

/// A butterfly behind a gather with the halves of aligned blocks exchanged is a butterfly
/// behind the gather itself (the search finds the same representative, and the matrix undone
/// by it is a butterfly), while one exchange of two single positions across the halves makes
/// another class: what lets the permutation search score one gather per representative.
#[test]
fn gathers_of_one_representative_make_the_same_butterflies() {
    for n in [8, 64] {
        for seed in 0..3 {
            let p0 = shuffled(n, 200 + seed);
            let q = random_exchanges(n, 300 + seed);
            let p1: Vec<usize> = q.iter().map(|&i| p0[i]).collect();
            assert_ne!(p1, p0, "n={n} seed={seed}: the exchanges moved something");
            assert_eq!(butterfly_representative(&p1), butterfly_representative(&p0), "n={n} seed={seed}");
            let (re, im) = ButterflyInit::RandomUnitary { seed }.twiddles(n);
            let t = butterfly::matrix(&re, &im, n, &p1).unwrap();
            assert_eq!(butterfly_permutation(&t, F64_TOLERANCE).unwrap(), Some(butterfly_representative(&p0)));
            let undone = ComplexMatrix::from_fn(n, |r, c| t.get(r, p0[c]));
            assert!(is_butterfly(&undone, F64_TOLERANCE), "n={n} seed={seed}: behind p0 itself");
            let mut crossed = p0.clone();
            crossed.swap(0, n / 2);
            assert_ne!(butterfly_representative(&crossed), butterfly_representative(&p0), "n={n} seed={seed}");
            let undone = ComplexMatrix::from_fn(n, |r, c| t.get(r, crossed[c]));
            assert!(!is_butterfly(&undone, F64_TOLERANCE), "n={n} seed={seed}: behind the crossed gather");
        }
    }
}

/// The DFT and the iDFT are butterflies after the bit reversal, the Hadamard transform after
/// the identity; the real transforms and convolution are not butterflies after any permutation
/// (their classes are products, [`factorizations`]).
#[test]
fn identification_of_the_targets() {
    for n in sizes_up_to(1024) {
        let search = |t: &Target| butterfly_permutation(&t.matrix(n).unwrap(), F64_TOLERANCE).unwrap();
        assert_eq!(search(&Target::Dft), Some(Permutation::BitReversal.indices(n)), "dft n={n}");
        assert_eq!(search(&Target::Idft), Some(Permutation::BitReversal.indices(n)), "idft n={n}");
        assert_eq!(search(&Target::Hadamard), Some((0..n).collect()), "hadamard n={n}");
        if n >= 16 {
            for t in [Target::Dct2, Target::Dst2, Target::Hartley, Target::Circulant { kernel: normals(5, n) }] {
                assert_eq!(search(&t), None, "{:?} n={n}", t.kind());
            }
        }
    }
}

/// `M · B · P0` for a random butterfly `B`, a random gather `P0` and a pairing `M` of outputs k
/// and −k with random coefficients (`(M z)_k = α_k z_k + β_k z_{−k}`, the form of the real
/// transforms' class): the search, given only where `M` is nonzero, recovers `P0` (as its
/// representative), and finds none once one entry is changed.
#[test]
fn identification_under_a_pairing_recovers_the_first_permutation() {
    for n in [4, 8, 64, 256] {
        for seed in 0..3 {
            let (re, im) = ButterflyInit::RandomUnitary { seed }.twiddles(n);
            let p0 = shuffled(n, 200 + seed);
            let cs = |s: u64| -> Vec<Complex64> {
                normals(s, 2 * n).chunks(2).map(|c| Complex64::new(1.0 + c[0].abs(), c[1])).collect()
            };
            let (alpha, beta) = (cs(300 + seed), cs(400 + seed));
            // A pairing with α_k ≠ ±β_k stays invertible on every pair {k, −k}.
            let pairing = ComplexMatrix::from_fn(n, |k, j| {
                let mut z = Complex64::new(0.0, 0.0);
                if j == k {
                    z += alpha[k];
                }
                if j == (n - k) % n {
                    z += beta[k];
                }
                z
            });
            let t = pairing.matmul(&butterfly::matrix(&re, &im, n, &p0).unwrap()).unwrap();
            let found = factor_permutation(&t, &pairing, F64_TOLERANCE).unwrap();
            assert_eq!(found, Some(butterfly_representative(&p0)), "n={n} seed={seed}");
            let broken = ComplexMatrix::from_fn(n, |r, c| t.get(r, c) + f64::from(u8::from(r == 1 && c == 0)) * 0.5);
            assert_eq!(factor_permutation(&broken, &pairing, F64_TOLERANCE).unwrap(), None, "n={n} seed={seed}");
            // The identity pattern is the one-butterfly search, and the found gather undoes P0.
            let b = butterfly::matrix(&re, &im, n, &p0).unwrap();
            let perm = factor_permutation(&b, &ComplexMatrix::identity(n), F64_TOLERANCE).unwrap().unwrap();
            assert_eq!(perm, butterfly_representative(&p0), "n={n} seed={seed}");
            assert!(
                is_butterfly(&ComplexMatrix::from_fn(n, |r, c| b.get(r, perm[c])), F64_TOLERANCE),
                "n={n} seed={seed}"
            );
            let identity: Vec<usize> = (0..n).collect();
            assert_eq!(is_butterfly(&b, F64_TOLERANCE), butterfly_representative(&p0) == identity, "n={n} seed={seed}");
        }
    }
}

/// The Hartley transform, DCT-II and DST-II: their class's first permutation is found from the
/// matrix (given where the pairing's fixed factors mix rows), and it makes the target exact in
/// the class: it is the exact factorization's permutation up to the exchanges of halves that
/// keep a butterfly one (the representative [`butterfly_representative`]).
#[test]
fn the_real_transforms_first_permutation_is_found_from_the_matrix() {
    for n in sizes_up_to(1024).filter(|&n| n >= 4) {
        for target in [Target::Hartley, Target::Dct2, Target::Dst2] {
            let dense = target.matrix(n).unwrap();
            let class = model_class(&target, &dense).unwrap();
            let found = class.permutations[0].indices(n);
            let exact = factorizations::exact(&target, n).unwrap().unwrap();
            assert_eq!(found, butterfly_representative(&exact.factors()[0].permutation), "{:?} n={n}", target.kind());
        }
    }
}

/// A random butterfly's twiddles are read back from its matrix (up to the blocks' scales, so the
/// rebuilt matrix is compared), and a matrix that is no butterfly is read as one that differs.
#[test]
fn butterfly_twiddles_are_read_from_the_matrix() {
    for n in [2, 4, 16, 128] {
        for seed in 0..3 {
            let (re, im) = ButterflyInit::RandomUnitary { seed }.twiddles(n);
            let identity: Vec<usize> = (0..n).collect();
            let t = butterfly::matrix(&re, &im, n, &identity).unwrap();
            let (r2, i2) = butterfly_twiddles(&t).unwrap();
            let again = butterfly::matrix(&r2, &i2, n, &identity).unwrap();
            assert!(again.max_abs_diff(&t).unwrap() <= GROWTH_F64_TOL, "n={n} seed={seed}");
            if n >= 4 {
                let broken =
                    ComplexMatrix::from_fn(n, |r, c| t.get(r, c) + f64::from(u8::from(r == 0 && c == 0)) * 0.5);
                let (r3, i3) = butterfly_twiddles(&broken).unwrap();
                let read = butterfly::matrix(&r3, &i3, n, &identity).unwrap();
                assert!(read.max_abs_diff(&broken).unwrap() > 1e-3, "n={n} seed={seed}: not a butterfly");
            }
        }
    }
}

/// f64 agreement of the grown circulant start with its target: the construction is exact, so
/// only rounding (a few hundred operations per entry) separates them.
const GROWTH_F64_TOL: f64 = 1e-10;

/// The circulant grows from N/2 to N by the targets' eigenstructure: from the exact first factor
/// of the halved target with each last-stage block mixed by a random 2×2 map (the freedom a
/// learned layer uses: measured, every trained layer at N = 256 mixes each pair of frequencies
/// k, k + N/2), the grown product equals the target at N; from a random first factor it is no
/// start (none, or far from the target).
#[test]
fn a_circulant_grows_by_the_targets_eigenstructure() {
    for n in [8, 16, 64, 256] {
        for seed in 0..3 {
            let target = Target::Circulant { kernel: normals(1000 * n as u64 + seed, n) };
            let half = target.halved().unwrap();
            let exact = factorizations::exact(&half, n / 2).unwrap().unwrap();
            let first = &exact.factors()[0];
            let mut re = first.re.clone();
            let mut im = first.im.clone();
            let last = re.len() / n - 1; // stages of N/2: N/4 blocks of 4 values, N values each
            let mix = normals(seed + 7, 8 * n);
            for k in 0..n / 4 {
                let at = (last * (n / 4) + k) * 4;
                let a = |i: usize| Complex64::new(mix[8 * k + 2 * i], mix[8 * k + 2 * i + 1]);
                let t = |i: usize| Complex64::new(re[at + i], im[at + i]);
                let mixed = [
                    a(0) * t(0) + a(1) * t(2),
                    a(0) * t(1) + a(1) * t(3),
                    a(2) * t(0) + a(3) * t(2),
                    a(2) * t(1) + a(3) * t(3),
                ];
                for (i, z) in mixed.iter().enumerate() {
                    re[at + i] = z.re;
                    im[at + i] = z.im;
                }
            }
            let (half_m, full_m) = (half.matrix(n / 2).unwrap(), target.matrix(n).unwrap());
            let grown = eigen_doubled((&re, &im), &half_m, &full_m).unwrap().expect("a start");
            assert!(grown.rmse <= GROWTH_F64_TOL, "n={n} seed={seed}: rmse {:e}", grown.rmse);
            let bitrev = Permutation::BitReversal.indices(n);
            let product =
                butterfly::product_matrix(n, grown.factors.iter().map(|(r, i)| (&r[..], &i[..], &bitrev[..]))).unwrap();
            assert!(product.rmse(&full_m).unwrap() <= GROWTH_F64_TOL, "n={n} seed={seed}: the factors as returned");
            // A random first factor carries no eigenstructure.
            let (rr, ri) = ButterflyInit::RandomUnitary { seed }.twiddles(n / 2);
            let random = eigen_doubled((&rr, &ri), &half_m, &full_m).unwrap();
            assert!(random.is_none_or(|g| g.rmse > 1e-2), "n={n} seed={seed}: a random layer grew to the target");
        }
    }
}
