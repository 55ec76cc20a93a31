//! A dense square complex matrix in f64, row-major.

use num_complex::Complex64;

use crate::error::{Error, Result};

/// Dense N×N complex matrix in f64, stored row-major: entry (r, c) is `data[r * n + c]`.
#[derive(Clone, Debug, PartialEq)]
pub struct ComplexMatrix {
    n: usize,
    data: Vec<Complex64>,
}

impl ComplexMatrix {
    /// The matrix whose entry (r, c) is `f(r, c)`.
    pub fn from_fn(n: usize, mut f: impl FnMut(usize, usize) -> Complex64) -> Self {
        let mut data = Vec::with_capacity(n * n);
        for r in 0..n {
            for c in 0..n {
                data.push(f(r, c));
            }
        }
        Self { n, data }
    }

    /// The matrix of a linear map, found by applying `apply` to each basis vector: `apply`
    /// receives e_c in a buffer of length n and must leave the image in that buffer, which
    /// becomes column c.
    pub fn from_linear_map(n: usize, mut apply: impl FnMut(&mut [Complex64])) -> Self {
        let mut data = vec![Complex64::new(0.0, 0.0); n * n];
        let mut column = vec![Complex64::new(0.0, 0.0); n];
        for c in 0..n {
            column.fill(Complex64::new(0.0, 0.0));
            column[c] = Complex64::new(1.0, 0.0);
            apply(&mut column);
            for (r, value) in column.iter().enumerate() {
                data[r * n + c] = *value;
            }
        }
        Self { n, data }
    }

    /// Builds a matrix from row-major entries; `None` when `data.len() != n * n`.
    pub fn from_row_major(n: usize, data: Vec<Complex64>) -> Option<Self> {
        (data.len() == n * n).then_some(Self { n, data })
    }

    /// The N×N identity.
    pub fn identity(n: usize) -> Self {
        Self::from_fn(n, |r, c| Complex64::new(if r == c { 1.0 } else { 0.0 }, 0.0))
    }

    /// Side length N.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Entry (r, c).
    pub fn get(&self, r: usize, c: usize) -> Complex64 {
        self.data[r * self.n + c]
    }

    /// Row `r`'s entries.
    pub fn row(&self, r: usize) -> &[Complex64] {
        &self.data[r * self.n..(r + 1) * self.n]
    }

    /// Row-major entries.
    pub fn as_slice(&self) -> &[Complex64] {
        &self.data
    }

    fn check_size(&self, op: &'static str, len: usize) -> Result<()> {
        if len != self.n {
            return Err(Error::invalid(op, format!("size {}", self.n), len));
        }
        Ok(())
    }

    /// Matrix–vector product `self · x`; `x` must have length N.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `x.len()` is not N.
    pub fn mul_vec(&self, x: &[Complex64]) -> Result<Vec<Complex64>> {
        self.check_size("ComplexMatrix::mul_vec", x.len())?;
        Ok(self.data.chunks_exact(self.n).map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum()).collect())
    }

    /// Matrix product `self · other`; both N×N.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the sizes differ.
    pub fn matmul(&self, other: &ComplexMatrix) -> Result<ComplexMatrix> {
        self.check_size("ComplexMatrix::matmul", other.n)?;
        let n = self.n;
        Ok(Self::from_fn(n, |r, c| (0..n).map(|k| self.get(r, k) * other.get(k, c)).sum()))
    }

    /// Conjugate transpose.
    pub fn adjoint(&self) -> ComplexMatrix {
        Self::from_fn(self.n, |r, c| self.get(c, r).conj())
    }

    /// Real parts, row-major.
    pub fn re(&self) -> Vec<f64> {
        self.data.iter().map(|z| z.re).collect()
    }

    /// Imaginary parts, row-major.
    pub fn im(&self) -> Vec<f64> {
        self.data.iter().map(|z| z.im).collect()
    }

    /// The error metric of Dao et al. (2019): sqrt(mean over the N×N entries of |self − other|²).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the sizes differ.
    pub fn rmse(&self, other: &ComplexMatrix) -> Result<f64> {
        self.check_size("ComplexMatrix::rmse", other.n)?;
        let sum: f64 = self.data.iter().zip(&other.data).map(|(a, b)| (a - b).norm_sqr()).sum();
        Ok((sum / self.data.len() as f64).sqrt())
    }

    /// Largest entry-wise modulus of `self − other`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the sizes differ.
    pub fn max_abs_diff(&self, other: &ComplexMatrix) -> Result<f64> {
        self.check_size("ComplexMatrix::max_abs_diff", other.n)?;
        Ok(self.data.iter().zip(&other.data).map(|(a, b)| (a - b).norm()).fold(0.0, f64::max))
    }
}
