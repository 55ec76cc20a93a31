//! The DFT and inverse DFT in f64 through rustfft.
//!
//! Conventions (numpy's): the forward transform is `X[k] = s · Σ_j x[j] e^{-2πi jk/N}` and the
//! inverse `x[j] = s' · Σ_k X[k] e^{+2πi jk/N}`, where the scales s, s' follow [`FftNorm`].

use num_complex::Complex64;
use rustfft::FftPlanner;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Normalisation of a DFT pair, named as numpy names them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum FftNorm {
    /// Forward unscaled, inverse scaled by 1/N (rustfft's forward, numpy's default).
    Backward,
    /// Both directions scaled by 1/√N: the transform is unitary.
    #[default]
    Ortho,
    /// Forward scaled by 1/N, inverse unscaled.
    Forward,
}

impl FftNorm {
    /// The overall scale of the transform of size `n` in the given direction.
    pub fn scale(self, n: usize, inverse: bool) -> f64 {
        let n = n as f64;
        match (self, inverse) {
            (FftNorm::Ortho, _) => 1.0 / n.sqrt(),
            (FftNorm::Backward, false) | (FftNorm::Forward, true) => 1.0,
            (FftNorm::Backward, true) | (FftNorm::Forward, false) => 1.0 / n,
        }
    }

    /// The scale of each of the log2(n) butterfly stages: `scale(n, inverse)^(1/log2 n)`,
    /// which is 1, 1/√2 or 1/2 whatever n is.
    pub fn stage_scale(self, inverse: bool) -> f64 {
        match (self, inverse) {
            (FftNorm::Ortho, _) => std::f64::consts::FRAC_1_SQRT_2,
            (FftNorm::Backward, false) | (FftNorm::Forward, true) => 1.0,
            (FftNorm::Backward, true) | (FftNorm::Forward, false) => 0.5,
        }
    }
}

/// Transforms every contiguous length-`n` chunk of `data` in place: forward DFT, or inverse when
/// `inverse`, scaled by `norm`. `data.len()` must be a non-zero multiple of `n` (any n ≥ 1).
///
/// # Errors
/// [`Error::InvalidInput`] when `n` is 0 or `data.len()` is not a non-zero multiple of it.
pub fn fft_in_place(data: &mut [Complex64], n: usize, inverse: bool, norm: FftNorm) -> Result<()> {
    if n == 0 || data.is_empty() || !data.len().is_multiple_of(n) {
        return Err(Error::invalid("fft_in_place", format!("a non-zero multiple of n = {n} values"), data.len()));
    }
    fft_chunks(data, n, inverse, norm);
    Ok(())
}

/// [`fft_in_place`] for callers that guarantee the lengths.
pub(crate) fn fft_chunks(data: &mut [Complex64], n: usize, inverse: bool, norm: FftNorm) {
    let mut planner = FftPlanner::<f64>::new();
    let plan = if inverse { planner.plan_fft_inverse(n) } else { planner.plan_fft_forward(n) };
    plan.process(data);
    let scale = norm.scale(n, inverse);
    if scale != 1.0 {
        data.iter_mut().for_each(|z| *z *= scale);
    }
}

/// The forward DFT of `x` with normalisation `norm`.
pub fn dft(x: &[Complex64], norm: FftNorm) -> Vec<Complex64> {
    let mut y = x.to_vec();
    if !y.is_empty() {
        fft_chunks(&mut y, x.len(), false, norm);
    }
    y
}

/// The inverse DFT of `x` with normalisation `norm`.
pub fn idft(x: &[Complex64], norm: FftNorm) -> Vec<Complex64> {
    let mut y = x.to_vec();
    if !y.is_empty() {
        fft_chunks(&mut y, x.len(), true, norm);
    }
    y
}
