//! The error metric and its floor.
//!
//! **rmse** = sqrt(mean over the N×N entries of |M − F|²), where M is the matrix the layer
//! computes on its backend and dtype ([`crate::nn::Butterfly::matrix_on_backend`]) and F the target in its
//! unitary scaling in f64 ([`Target::matrix`]). This is Dao et al.'s metric (2019), up to their
//! scalings of some targets and their complex mean over real and imaginary parts apart (the
//! guide's limits page compares the two side by side).
//!
//! For a user's data (pairs, no matrix) the rmse is the one the pairs estimate
//! ([`rmse_on_data`]).
//!
//! **floor** = the same rmse for the exact-twiddle butterfly (twiddles computed in f64, then cast)
//! evaluated in the same dtype on the same backend: what rounding alone costs, and the bar a
//! trained layer is measured against.

use crate::backend::Precision;
use crate::error::{Error, Result};
use crate::nn::{exact_fft, exact_product, LinearTransform};
use crate::ops::ButterflyOps;
use crate::reference::{ComplexMatrix, DataTarget, Target};
use num_complex::Complex64;

/// rmse of a layer (a [`crate::nn::Butterfly`] or a [`crate::nn::ButterflyProduct`]) against a
/// target matrix (see the module docs).
///
/// # Errors
/// [`Error::InvalidInput`] when the target's size is not the layer's; [`Error::OutOfMemory`]
/// when the layer's dense matrix does not fit.
pub fn rmse(layer: &impl LinearTransform, target: &ComplexMatrix) -> Result<f64> {
    if target.n() != layer.size() {
        return Err(Error::invalid("rmse", format!("a target of size {}", layer.size()), target.n()));
    }
    layer.dense_on_backend()?.rmse(target)
}

/// A layer seen through the real-output map ([`crate::train::TrainConfig::real_output`]): the
/// real matrix Re(M) of the layer's M as it computes it, so [`rmse_to`] and [`rmse`] measure
/// Re(M) against a real target. A complex input `a + i b` maps to `Re(M) a + i Re(M) b`.
#[derive(Clone, Copy, Debug)]
pub struct RealPart<'a, L>(pub &'a L);

fn real_parts(v: Vec<Complex64>) -> Vec<Complex64> {
    v.into_iter().map(|z| Complex64::new(z.re, 0.0)).collect()
}

impl<L: LinearTransform> LinearTransform for RealPart<'_, L> {
    fn size(&self) -> usize {
        self.0.size()
    }

    fn dense_on_backend(&self) -> Result<ComplexMatrix> {
        let m = self.0.dense_on_backend()?;
        let n = m.n();
        let data = real_parts(m.as_slice().to_vec());
        ComplexMatrix::from_row_major(n, data)
            .ok_or_else(|| Error::invalid("rmse", format!("{n}×{n} entries"), "another count"))
    }

    fn basis_images(&self, start: usize, count: usize) -> Result<Vec<Complex64>> {
        self.0.basis_images(start, count).map(real_parts)
    }

    fn images(&self, x: &[Complex64]) -> Result<Vec<Complex64>> {
        let part = |f: fn(&Complex64) -> f64| x.iter().map(|z| Complex64::new(f(z), 0.0)).collect::<Vec<_>>();
        let a = self.0.images(&part(|z| z.re))?;
        if x.iter().all(|z| z.im == 0.0) {
            return Ok(real_parts(a));
        }
        let b = self.0.images(&part(|z| z.im))?;
        Ok(a.iter().zip(&b).map(|(a, b)| Complex64::new(a.re, b.re)).collect())
    }
}

/// Basis vectors per block in [`rmse_to`]: 2^22 complex entries a block (64 MiB of f64 images on
/// the host, 32 MiB of f32 on the device).
const BLOCK_ENTRIES: usize = 1 << 22;

/// The rmse of a layer against `target` (see the module docs) with no N×N matrix: the layer's
/// images of the basis vectors, a block of them at a time on its backend, against the
/// target's fast algorithm in f64 ([`Target::apply`]). Equal to [`rmse`] against
/// `target.matrix(n)` up to the rounding of the sums; memory O(N) per basis vector of a block,
/// so sizes whose dense matrix does not fit are measured too.
///
/// # Errors
/// [`Error::InvalidInput`] for a circulant whose kernel is not of the layer's size;
/// [`Error::OutOfMemory`] when a block does not fit.
pub fn rmse_to(layer: &impl LinearTransform, target: &Target) -> Result<f64> {
    let n = layer.size();
    if let Target::Data(d) = target {
        return rmse_on_data(layer, d);
    }
    let block = (BLOCK_ENTRIES / n).clamp(1, n);
    let mut sum = 0.0;
    for start in (0..n).step_by(block) {
        let count = block.min(n - start);
        let images = layer.basis_images(start, count)?;
        let mut truth = vec![num_complex::Complex64::new(0.0, 0.0); count * n];
        (0..count).for_each(|r| truth[r * n + start + r] = num_complex::Complex64::new(1.0, 0.0));
        target.apply(n, &mut truth)?;
        sum += images.iter().zip(&truth).map(|(y, t)| (y - t).norm_sqr()).sum::<f64>();
    }
    Ok((sum / (n as f64 * n as f64)).sqrt())
}

/// The rmse of a layer that user data estimate ([`DataTarget`]): √(Σ |M x − y|² / (N Σ |x|²))
/// over the pairs, with M x as the layer computes it on its backend, a block of pairs at a time.
///
/// # Errors
/// [`Error::InvalidInput`] when the data's size is not the layer's, or the inputs are all zero;
/// those of [`DataTarget::pairs`]; [`Error::OutOfMemory`] when a block does not fit.
pub fn rmse_on_data(layer: &impl LinearTransform, data: &DataTarget) -> Result<f64> {
    let n = layer.size();
    if data.n() != n {
        return Err(Error::invalid("rmse", format!("data of size {n}"), data.n()));
    }
    let pairs = data.pairs()?;
    let block = (BLOCK_ENTRIES / n).max(1) * n;
    let (mut residual, mut input) = (0.0, 0.0);
    for (x, y) in pairs.inputs.chunks(block).zip(pairs.outputs.chunks(block)) {
        let images = layer.images(x)?;
        residual += images.iter().zip(y).map(|(m, y)| (m - y).norm_sqr()).sum::<f64>();
        input += x.iter().map(|z| z.norm_sqr()).sum::<f64>();
    }
    if input == 0.0 {
        return Err(Error::invalid("rmse", "data with a non-zero input", "every input zero"));
    }
    Ok((residual / (n as f64 * input)).sqrt())
}

/// The floor for `target` at size `n` on backend `B`: the rmse of its exact factorization
/// evaluated in `B`'s float type ([`crate::reference::factorizations`]), measured by
/// [`rmse_to`]. `None` for targets with no exact factorization here.
///
/// # Errors
/// [`Error::InvalidInput`] when `n` is not a power of two ≥ 2 (or not the circulant kernel's
/// length); [`Error::OutOfMemory`] when the factorization or the measurement does not fit.
pub fn floor<B: ButterflyOps>(n: usize, target: &Target, device: &B::Device) -> Result<Option<f64>> {
    match exact_product::<B>(target, n, device)? {
        Some(exact) => rmse_to(&exact, target).map(Some),
        None => Ok(None),
    }
}

/// [`rmse_to`] of the model a run trains: the layer's M, or with the real-output map
/// ([`crate::train::TrainConfig::real_output`]) Re(M).
///
/// # Errors
/// Those of [`rmse_to`].
pub fn rmse_of_model(layer: &impl LinearTransform, target: &Target, real_output: bool) -> Result<f64> {
    match real_output {
        true => rmse_to(&RealPart(layer), target),
        false => rmse_to(layer, target),
    }
}

/// [`floor`] for the model a run trains: with the real-output map, the exact factorization's
/// real part, rounded and evaluated the same way.
///
/// # Errors
/// Those of [`floor`].
pub fn floor_of_model<B: ButterflyOps>(
    n: usize,
    target: &Target,
    real_output: bool,
    device: &B::Device,
) -> Result<Option<f64>> {
    match exact_product::<B>(target, n, device)? {
        Some(exact) => rmse_of_model(&exact, target, real_output).map(Some),
        None => Ok(None),
    }
}

/// The f64 bar: a run from random init must reach an rmse of at most this.
pub const F64_BAR: f64 = 1e-14;
/// The f32 bar over an exact factorization's floor: a run must reach an rmse of at most this
/// multiple of the floor (the exact factorization's own rmse in f32 on the same backend).
pub const F32_BAR_OVER_FLOOR: f64 = 1.0;
/// The f32 bar over the model's own f64 solution's floor ([`FloorSource::OwnF64Solution`]). The
/// f32 run and that solution end at the same point of the trainer's gauge, each rounded to f32
/// its own way (the solution to nearest, the run by its f32 polish), so their rmse differ only
/// by how the last bits fall: measured 0.961–0.985 × at N = 16 and 64 and 1.000000006 × at
/// N = 8 (every one of 8 attempts between 1.0000000 and 1.0000015 ×), with ndarray f32. At
/// 1.0 × a run at the solution passes or fails on its rmse's eighth digit; 5 % over it still
/// admits only the rounding of a solution (Adam hands a run over at rmse 1e-4, 10⁴ times the
/// floor, and a polish that stalls away from the solution ends far above it).
pub const F32_OWN_BAR_OVER_FLOOR: f64 = 1.05;

/// The solution whose rounding a floor measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FloorSource {
    /// The target's exact factorization (a built-in target), its twiddles rounded to the
    /// backend's float type, in unitary blocks.
    ExactFactorization,
    /// The model's own solution, gauge-fixed as the trainer leaves it, its twiddles rounded to
    /// the backend's float type: needs no answer. The f64 polish of where the f32 run's attempt
    /// ended (the solution it found), for a user's target and, unless
    /// [`TrainConfig::own_floor`](crate::train::TrainConfig) is off, for a built-in.
    OwnF64Solution,
}

/// The bar a run in `precision` must reach: [`F64_BAR`] in f64; in f32 the floor times
/// [`F32_BAR_OVER_FLOOR`] (an exact factorization's) or [`F32_OWN_BAR_OVER_FLOOR`] (the model's
/// own solution's), and never below [`F64_BAR`]; `None` where the target has no floor.
///
/// The lower bound is for a solution that f32 holds exactly: a Hadamard matrix of N = 16 in
/// the trainer's gauge has twiddles ±1 and a last stage of ±1/4, so rounding it costs nothing
/// and its floor is 0. A bar of 0 asks for no error at all, which a polish need not land on: it
/// failed a run that ended at rmse 9.5e-24 (a user's Hadamard matrix, f32, ndarray). Within
/// f64's own bar the run is as exact as an f64 run is asked to be; every f32 floor measured
/// that is not 0 is above 1e-10 (N ≤ 16384), so the bound changes no other bar.
pub fn bar(precision: Precision, floor: Option<(f64, FloorSource)>) -> Option<f64> {
    match precision {
        Precision::F64 => Some(F64_BAR),
        Precision::F32 => floor.map(|(f, source)| {
            let over = match source {
                FloorSource::ExactFactorization => F32_BAR_OVER_FLOOR,
                FloorSource::OwnF64Solution => F32_OWN_BAR_OVER_FLOOR,
            };
            (over * f).max(F64_BAR)
        }),
    }
}

/// One row of the exact-butterfly accuracy table.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ExactRow {
    /// Transform size.
    pub n: usize,
    /// rmse of the matrix the stored twiddles represent, multiplied out in f64: what rounding the
    /// twiddles to the backend's dtype alone costs.
    pub twiddle_rmse: f64,
    /// The floor: rmse of the exact butterfly evaluated on the backend in its dtype.
    pub floor: f64,
    /// Relative RMS error of the exact (unnormalised) butterfly against rustfft in f64 on
    /// `probes` random complex vectors.
    pub rel_err_vs_rustfft: f64,
    /// For comparison, rustfft's own error in f32 on the same inputs (relative RMS against f64);
    /// `None` when the backend runs in f64.
    pub rustfft_f32_rel_err: Option<f64>,
}

/// Accuracy of the exact unitary DFT butterfly of size `n` on backend `B`.
///
/// # Errors
/// [`Error::InvalidInput`] when `n` is not a power of two ≥ 2; [`Error::OutOfMemory`] when the
/// dense matrices do not fit.
pub fn exact_row<B: ButterflyOps>(n: usize, device: &B::Device) -> Result<ExactRow> {
    use crate::tensors::{float_tensor, to_f64_vec};
    use num_complex::Complex64;
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};

    let target = Target::Dft.matrix(n)?;
    let layer = exact_fft::<B>(n, false, device)?;
    let twiddle_rmse = layer.to_matrix().rmse(&target)?;
    let floor = rmse(&layer, &target)?;

    let probes = 4;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(n as u64);
    let mut draw = || -> Vec<f64> { (0..probes * n).map(|_| StandardNormal.sample(&mut rng)).collect() };
    let to_tensor = |v: Vec<f64>| float_tensor::<B, 2>(v, [probes, n], device);
    let (xr, xi) = (to_tensor(draw()), to_tensor(draw()));
    // The truth is computed on the inputs as the backend holds them (rounded to its dtype).
    let host = |t: &burn::tensor::Tensor<B, 2>| to_f64_vec(t.clone());
    let pairs = |re: Vec<f64>, im: Vec<f64>| -> Vec<Complex64> {
        re.into_iter().zip(im).map(|(r, i)| Complex64::new(r, i)).collect()
    };
    let x = pairs(host(&xr), host(&xi));
    let mut truth = x.clone();
    crate::reference::dft::fft_in_place(&mut truth, n, false, crate::reference::FftNorm::Ortho)?;
    // Relative RMS error of `y` against the truth.
    let rel_err = |y: &[Complex64]| {
        let (num, den) =
            y.iter().zip(&truth).fold((0.0, 0.0), |(num, den), (z, t)| (num + (z - t).norm_sqr(), den + t.norm_sqr()));
        (num / den).sqrt()
    };
    let (yr, yi) = layer.forward(xr, xi)?;
    let rel_err_vs_rustfft = rel_err(&pairs(host(&yr), host(&yi)));
    let rustfft_f32_rel_err = (std::mem::size_of::<B::FloatElem>() == 4).then(|| {
        let mut x32: Vec<num_complex::Complex32> =
            x.iter().map(|z| num_complex::Complex32::new(z.re as f32, z.im as f32)).collect();
        rustfft::FftPlanner::<f32>::new().plan_fft_forward(n).process(&mut x32);
        let scale = 1.0 / (n as f64).sqrt();
        rel_err(&x32.iter().map(|z| Complex64::new(z.re as f64, z.im as f64) * scale).collect::<Vec<_>>())
    });
    Ok(ExactRow { n, twiddle_rmse, floor, rel_err_vs_rustfft, rustfft_f32_rel_err })
}
