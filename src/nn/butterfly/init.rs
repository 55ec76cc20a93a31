//! Twiddle initialisers, computed in f64 on the CPU and cast to the backend's float type.

use num_complex::Complex64;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

use crate::reference::factorizations::{blocks, fft_twiddles};
use crate::reference::FftNorm;

/// How the twiddles of a [`Butterfly`](super::Butterfly) start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ButterflyInit {
    /// The exact radix-2 decimation-in-time FFT (with [`Permutation::BitReversal`](crate::ops::Permutation::BitReversal)
    /// (super::Permutation::BitReversal)): block k of stage s is
    /// `c · [[1, w], [1, −w]]` with `w = e^{∓2πi j / 2^{s+1}}`, `j = k mod 2^s` (minus for the
    /// forward transform, plus for the inverse) and the per-stage scale `c` of `norm`
    /// (1/√2 for [`FftNorm::Ortho`], which makes every block unitary).
    Fft {
        /// Build the inverse DFT instead of the forward one.
        inverse: bool,
        /// Normalisation of the whole transform.
        norm: FftNorm,
    },
    /// Every block is the 2×2 identity: the butterfly is the permutation alone.
    Identity,
    /// Every block an independent Haar-random 2×2 unitary matrix (QR of a complex Gaussian
    /// matrix with the phases of R's diagonal removed); the product is then unitary.
    RandomUnitary {
        /// RNG seed (ChaCha8).
        seed: u64,
    },
    /// Every block near the 2×2 identity: `(1 − weight) · I + weight · U`, U a Haar-random
    /// unitary block as in [`ButterflyInit::RandomUnitary`]. The trainer starts the factors of
    /// a product after the first this way (see [`crate::train`]).
    NearIdentity {
        /// RNG seed (ChaCha8).
        seed: u64,
        /// Weight of the random unitary part, in (0, 1].
        weight: f64,
    },
    /// Every entry complex Gaussian: real and imaginary parts independent N(0, scale²/2), so
    /// E|t|² = scale². `scale = 1/√2` keeps the expected norm of a vector through each stage.
    Randn {
        /// RNG seed (ChaCha8).
        seed: u64,
        /// Standard deviation of the complex entries.
        scale: f64,
    },
}

impl Default for ButterflyInit {
    fn default() -> Self {
        ButterflyInit::Fft { inverse: false, norm: FftNorm::Ortho }
    }
}

impl ButterflyInit {
    /// The twiddles in f64 as `(re, im)`, each `[log_n, n/2, 2, 2]` row-major.
    pub fn twiddles(&self, n: usize) -> (Vec<f64>, Vec<f64>) {
        match self {
            ButterflyInit::Fft { inverse, norm } => fft_twiddles(n, *inverse, *norm),
            ButterflyInit::Identity => {
                let (one, zero) = (Complex64::new(1.0, 0.0), Complex64::new(0.0, 0.0));
                blocks(n, |_, _| [one, zero, zero, one])
            }
            ButterflyInit::RandomUnitary { seed } => {
                let mut rng = ChaCha8Rng::seed_from_u64(*seed);
                blocks(n, |_, _| haar_unitary_2x2(&mut rng))
            }
            ButterflyInit::NearIdentity { seed, weight } => {
                let mut rng = ChaCha8Rng::seed_from_u64(*seed);
                let (one, zero) = (Complex64::new(1.0 - weight, 0.0), Complex64::new(0.0, 0.0));
                blocks(n, |_, _| {
                    let u = haar_unitary_2x2(&mut rng);
                    [one + u[0] * weight, zero + u[1] * weight, zero + u[2] * weight, one + u[3] * weight]
                })
            }
            ButterflyInit::Randn { seed, scale } => {
                let mut rng = ChaCha8Rng::seed_from_u64(*seed);
                let sd = scale / std::f64::consts::SQRT_2;
                blocks(n, |_, _| std::array::from_fn(|_| complex_normal(&mut rng) * sd))
            }
        }
    }
}

/// Real and imaginary parts independent standard normal.
fn complex_normal(rng: &mut ChaCha8Rng) -> Complex64 {
    Complex64::new(StandardNormal.sample(rng), StandardNormal.sample(rng))
}

/// A Haar-distributed 2×2 unitary `[u00, u01, u10, u11]` (row-major): Gram–Schmidt on the
/// columns of a complex Gaussian matrix, which is QR with R's diagonal real and positive.
fn haar_unitary_2x2(rng: &mut ChaCha8Rng) -> [Complex64; 4] {
    loop {
        let (a0, a1, b0, b1) = (complex_normal(rng), complex_normal(rng), complex_normal(rng), complex_normal(rng));
        let na = (a0.norm_sqr() + a1.norm_sqr()).sqrt();
        if na < 1e-12 {
            continue;
        }
        let (q0, q1) = (a0 / na, a1 / na);
        let proj = q0.conj() * b0 + q1.conj() * b1;
        let (v0, v1) = (b0 - proj * q0, b1 - proj * q1);
        let nv = (v0.norm_sqr() + v1.norm_sqr()).sqrt();
        if nv < 1e-12 {
            continue;
        }
        // Columns (q0, q1) and (v0, v1)/nv; row-major storage.
        return [q0, v0 / nv, q1, v1 / nv];
    }
}
