//! Shared by every test: seeded random data, named tolerances, backends, and the checkers.

use burn::tensor::{backend::Backend, Tensor};
use learned_fft::{float_tensor, to_f64_vec};
use num_complex::Complex64;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

pub use learned_fft::backend::{CandleBackend, NdArrayBackend, WgpuBackend};

/// A fresh, empty scratch directory for one test (names are unique across the suite).
pub fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("learned-fft-tests-{}", std::process::id())).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Every test's RNG seed (offset per use so that draws are independent).
pub const SEED: u64 = 0x1ea2_6ed0_0ff7;

/// Whether to run the full kernel sweeps (`LEARNED_FFT_FULL_SWEEP=1`): every size with every
/// batch and option. Without it (CI on lavapipe) the sweeps keep the cases that exercise each
/// distinct kernel path (every size, one- and two-pass plans, multi-row cubes, both
/// permutations, every option at a few windows) and drop the slowest repeats.
pub fn full_sweep() -> bool {
    std::env::var("LEARNED_FFT_FULL_SWEEP").is_ok_and(|v| v == "1")
}

/// Sizes 2, 4, …, 4096.
pub fn sizes_up_to(max: usize) -> impl Iterator<Item = usize> {
    (1..=max.trailing_zeros()).map(|b| 1usize << b)
}

/// Tolerances of one float format. Each field says why it is what it is.
#[derive(Clone, Copy, Debug)]
pub struct Tol {
    /// Largest relative error allowed between autodiff and central finite differences, measured
    /// per entry against max(|entry|, 1e-3 · max |gradient|).
    pub fd_rel: f64,
    /// Finite-difference step. The test losses are quadratic in any single parameter or input
    /// entry (the butterfly is linear in each), so central differences have no truncation error
    /// and the step only trades against rounding: error ≈ ε·|L| / step.
    pub fd_step: f64,
    /// Relative RMS error allowed for the fft → ifft round trip and the adjoint identity.
    pub identity_rel: f64,
}

/// f64: the acceptance bar for finite differences is 1e-6; with step 1e-3 the rounding term is
/// about 1e-16 · |L| / 1e-3 ≈ 1e-12 relative, far inside it. The round trip passes through
/// 2·log2 N ≤ 24 stages, each rounding once per entry (≤ ε/2 ≈ 1.1e-16): 1e-13 bounds that
/// with room for the twiddles' own rounding.
pub const F64: Tol = Tol { fd_rel: 1e-6, fd_step: 1e-3, identity_rel: 1e-13 };

/// f32: with step 0.25 (exact for the quadratic test losses) the rounding term ε·|L|/step with
/// ε = 1.2e-7 and |L| up to ~N·|y|² stays below ~1e-4 of the gradient's scale for N ≤ 16; 1e-3
/// leaves a 10× margin. Round trip: 2·log2 N ≤ 24 stages, each rounding once per entry
/// (≤ ε/2 = 6e-8) plus the 1/√2 twiddle's rounding bias (1.7e-8 per stage): 24 × 7.7e-8 ≈ 1.9e-6,
/// rounded up to 2e-6.
pub const F32: Tol = Tol { fd_rel: 1e-3, fd_step: 0.25, identity_rel: 2e-6 };

/// The acceptance bar for the exact butterfly against rustfft in f64 (relative RMS error).
pub const F64_EXACT_REL_RMS: f64 = 1e-13;
/// In f32 the exact butterfly may be at most this many times less accurate than rustfft run in
/// f32 on the same inputs (the acceptance bar).
pub const F32_EXACT_VS_RUSTFFT: f64 = 4.0;

/// A seeded stream of standard normal f64 values.
pub fn normals(seed: u64, len: usize) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED ^ seed);
    (0..len).map(|_| StandardNormal.sample(&mut rng)).collect()
}

/// `v` rounded to f32 when `B`'s float type is f32, so the f64 truth sees exactly the inputs the
/// backend sees.
pub fn round_to_backend<B: Backend>(v: &[f64], device: &B::Device) -> Vec<f64> {
    to_f64_vec(float_tensor::<B, 1>(v.to_vec(), [v.len()], device))
}

/// A `[rows, cols]` tensor from row-major f64 values.
pub fn tensor2<B: Backend>(v: &[f64], rows: usize, cols: usize, device: &B::Device) -> Tensor<B, 2> {
    float_tensor(v.to_vec(), [rows, cols], device)
}

/// Host f64 copy of a tensor.
pub fn host<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f64> {
    to_f64_vec(t)
}

/// Complex vector from parts.
pub fn complex(re: &[f64], im: &[f64]) -> Vec<Complex64> {
    re.iter().zip(im).map(|(&r, &i)| Complex64::new(r, i)).collect()
}

/// sqrt(Σ|a − b|²) / sqrt(Σ|b|²).
pub fn rel_rms(a: &[Complex64], b: &[Complex64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y).norm_sqr()).sum();
    let den: f64 = b.iter().map(|y| y.norm_sqr()).sum();
    (num / den).sqrt()
}

/// sqrt(Σ(a − b)²) / sqrt(Σb²) for real vectors.
pub fn rel_rms_real(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den.max(f64::MIN_POSITIVE)).sqrt()
}

/// The wgpu device, or `None` (test skipped) when there is no adapter. With
/// `LEARNED_FFT_REQUIRE_WGPU=1` a missing adapter fails the test instead.
pub fn wgpu_device() -> Option<burn::backend::wgpu::WgpuDevice> {
    match learned_fft::backend::wgpu_adapter() {
        Some(_) => Some(Default::default()),
        None => {
            assert!(!learned_fft::backend::wgpu_required(), "LEARNED_FFT_REQUIRE_WGPU=1 but wgpu found no adapter");
            eprintln!("skipped: no wgpu adapter (set LEARNED_FFT_REQUIRE_WGPU=1 to fail instead)");
            None
        }
    }
}

/// Declares one `#[test]` per backend, each calling the generic `$check::<B>(&device, tol)`.
macro_rules! per_backend {
    ($check:ident) => {
        mod $check {
            use crate::common::*;
            #[test]
            fn ndarray_f64() {
                super::$check::<NdArrayBackend<f64>>(&Default::default(), F64);
            }
            #[test]
            fn ndarray_f32() {
                super::$check::<NdArrayBackend<f32>>(&Default::default(), F32);
            }
            #[test]
            fn candle_f64() {
                super::$check::<CandleBackend<f64>>(&Default::default(), F64);
            }
            #[test]
            fn candle_f32() {
                super::$check::<CandleBackend<f32>>(&Default::default(), F32);
            }
            #[test]
            fn wgpu_f32() {
                if let Some(device) = wgpu_device() {
                    super::$check::<WgpuBackend>(&device, F32);
                }
            }
        }
    };
}
pub(crate) use per_backend;

/// Is `B`'s float type f64?
pub fn is_f64<B: Backend>() -> bool {
    std::mem::size_of::<B::FloatElem>() == 8
}

/// Declares the CubeCL tests of a generic `$check::<B>(&device)`: wgpu always, CUDA with the
/// `cuda` feature.
macro_rules! on_cubecl {
    ($check:ident) => {
        mod $check {
            use crate::common::*;
            #[test]
            fn wgpu_f32() {
                if let Some(device) = wgpu_device() {
                    super::$check::<WgpuBackend>(&device);
                }
            }
            #[cfg(feature = "cuda")]
            #[test]
            fn cuda_f32() {
                super::$check::<learned_fft::backend::CudaBackend<f32, i32>>(&Default::default());
            }
        }
    };
}
pub(crate) use on_cubecl;

/// A random permutation of `0..n` (Fisher–Yates, seeded).
pub fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        v.swap(i, rng.random_range(0..=i));
    }
    v
}

/// The dense f64 matrix of a random BP: Haar-random unitary blocks (seeded) behind a random
/// permutation, multiplied out on ndarray in f64. Learnable exactly by the BP class, and
/// nothing about it is known to the crate beyond its entries.
pub fn random_bp(n: usize, seed: u64) -> learned_fft::ComplexMatrix {
    use learned_fft::nn::LinearTransform;
    use learned_fft::{ButterflyInit, ButterflyProductConfig, Permutation};
    use rand::seq::SliceRandom;
    let mut perm: Vec<usize> = (0..n).collect();
    perm.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    let layer = ButterflyProductConfig::new(n, vec![Permutation::gather(perm).expect("a permutation")])
        .with_init(ButterflyInit::RandomUnitary { seed })
        .init::<NdArrayBackend<f64>>(&Default::default())
        .expect("a random BP");
    layer.dense_on_backend().expect("its matrix")
}

/// A random dense unitary matrix (the product of 2N Householder reflections of standard normal
/// complex vectors): with probability 1 no butterfly after any permutation, nor a product of a
/// few, represents it.
pub fn random_unitary(n: usize, seed: u64) -> learned_fft::ComplexMatrix {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut m = vec![Complex64::new(0.0, 0.0); n * n];
    (0..n).for_each(|i| m[i * n + i] = Complex64::new(1.0, 0.0));
    for _ in 0..2 * n {
        let v: Vec<Complex64> =
            (0..n).map(|_| Complex64::new(StandardNormal.sample(&mut rng), StandardNormal.sample(&mut rng))).collect();
        let norm2: f64 = v.iter().map(|z| z.norm_sqr()).sum();
        // m ← (I − 2 v v* / |v|²) m, column by column.
        for c in 0..n {
            let dot: Complex64 = (0..n).map(|r| v[r].conj() * m[r * n + c]).sum();
            (0..n).for_each(|r| m[r * n + c] -= v[r] * dot * (2.0 / norm2));
        }
    }
    learned_fft::ComplexMatrix::from_row_major(n, m).expect("n × n entries")
}

/// A matrix's entries, row-major.
pub fn entries(m: &learned_fft::ComplexMatrix) -> Vec<Complex64> {
    (0..m.n()).flat_map(|r| (0..m.n()).map(move |c| m.get(r, c))).collect()
}

/// Writes `values` as a numpy `.npy` array of `shape` (C order), as `numpy.save` would.
pub fn save_npy<T: npyz::AutoSerialize>(path: &std::path::Path, shape: &[u64], values: Vec<T>) {
    save_npy_ordered(path, shape, values, npyz::Order::C)
}

/// As [`save_npy`], in the given order (`values` as stored in the file).
pub fn save_npy_ordered<T: npyz::AutoSerialize>(
    path: &std::path::Path,
    shape: &[u64],
    values: Vec<T>,
    order: npyz::Order,
) {
    use npyz::WriterBuilder;
    let file = std::io::BufWriter::new(std::fs::File::create(path).expect("an .npy file"));
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .order(order)
        .writer(file)
        .begin_nd()
        .expect("an .npy header");
    w.extend(values).expect("the array");
    w.finish().expect("the file");
}

/// A user's operator as a user would write one: H₂ ⊗ F_{N/2}, the unitary DFT of each half
/// (rustfft) followed by the 2×2 Hadamard across the halves, at every size ≥ 2 (a family), with
/// its adjoint (`wrong_adjoint`: the forward map given as the adjoint, which is not it).
pub struct KronHadamardDft {
    pub wrong_adjoint: bool,
}

impl KronHadamardDft {
    /// `y = (H₂ ⊗ F) x` on each length-n vector, with F the unitary DFT of n/2.
    fn map(n: usize, x: &mut [Complex64]) {
        let h = n / 2;
        let fft = rustfft::FftPlanner::<f64>::new().plan_fft_forward(h);
        let s = std::f64::consts::FRAC_1_SQRT_2;
        for v in x.chunks_mut(n) {
            // rustfft transforms each length-h chunk of the buffer: the two halves.
            fft.process(v);
            v.iter_mut().for_each(|z| *z /= (h as f64).sqrt());
            for i in 0..h {
                let (a, b) = (v[i], v[i + h]);
                (v[i], v[i + h]) = ((a + b) * s, (a - b) * s);
            }
        }
    }

    /// Its entry (k, j) in closed form.
    pub fn entry(n: usize, k: usize, j: usize) -> Complex64 {
        let h = n / 2;
        let sign = if k >= h && j >= h { -1.0 } else { 1.0 };
        let theta = -2.0 * std::f64::consts::PI * ((k % h) * (j % h) % h) as f64 / h as f64;
        Complex64::from_polar(sign * std::f64::consts::FRAC_1_SQRT_2 / (h as f64).sqrt(), theta)
    }
}

impl learned_fft::Operator for KronHadamardDft {
    fn name(&self) -> String {
        "H2 ⊗ DFT".into()
    }
    fn has_size(&self, n: usize) -> bool {
        n >= 2
    }
    fn apply(&self, n: usize, x: &mut [Complex64]) -> learned_fft::Result<()> {
        Self::map(n, x);
        Ok(())
    }
    fn apply_adjoint(&self, n: usize, x: &mut [Complex64]) -> Option<learned_fft::Result<()>> {
        // (H₂ ⊗ F)* = (I ⊗ F⁻¹)(H₂ ⊗ I): the Hadamard first, then the inverse DFT of each half.
        if self.wrong_adjoint {
            return Some(self.apply(n, x));
        }
        let (h, s) = (n / 2, std::f64::consts::FRAC_1_SQRT_2);
        for v in x.chunks_mut(n) {
            for i in 0..h {
                let (a, b) = (v[i], v[i + h]);
                (v[i], v[i + h]) = ((a + b) * s, (a - b) * s);
            }
        }
        Self::map_halves_inverse(n, x);
        Some(Ok(()))
    }
}

impl KronHadamardDft {
    /// The unitary inverse DFT of each half of each length-n vector.
    fn map_halves_inverse(n: usize, x: &mut [Complex64]) {
        let h = n / 2;
        let ifft = rustfft::FftPlanner::<f64>::new().plan_fft_inverse(h);
        for half in x.chunks_mut(h) {
            ifft.process(half);
            half.iter_mut().for_each(|z| *z /= (h as f64).sqrt());
        }
    }
}
