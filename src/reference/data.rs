//! A target a user brings as data: pairs of input and output vectors of a linear map, and nothing
//! else (no matrix, no code). Given in memory, or read from two `.npy` or `.safetensors` files.
//!
//! The trainer measures the layer on the pairs ([`crate::train::objective::Probes::data`]) and
//! reports the rmse they estimate ([`DataTarget`]). Where the inputs span the space (at least N
//! pairs, well conditioned) it also fits the map's matrix to them by least squares, only to find
//! the input permutation that makes it a butterfly ([`DataTarget::fitted_matrix`]); the layer is
//! learned from the pairs.

use std::path::Path;
use std::sync::Arc;

use num_complex::Complex64;
use serde::{Deserialize, Serialize};

use super::arrays::read_2d;
use super::identify::{F32_TOLERANCE, F64_TOLERANCE};
use super::matrix::ComplexMatrix;
use crate::error::{Error, Result};

/// The operation named in data's errors.
const OP: &str = "target data";

/// The largest N whose matrix is fitted to the data (an O(rows · N²) solve, and O(N³)): 2 s at
/// N = 1024 on one CPU core; 64 times that at 4096.
pub const FIT_MAX_N: usize = 1024;

/// The smallest pivot, relative to the largest, of the least-squares solve: below it the inputs
/// do not span the space well enough for the fitted matrix to show the map's structure. The
/// solve amplifies the data's rounding by about the ratio of its pivots, so at 1e-4 exact f64
/// pairs give the matrix to about 1e-12, well within [`F64_TOLERANCE`] (1e-9).
const FIT_MIN_PIVOT: f64 = 1e-4;

/// The input and output vectors of the pairs, row-major `[rows, n]` each.
#[derive(Clone, Debug, PartialEq)]
pub struct Pairs {
    /// Inputs x, one per row.
    pub inputs: Vec<Complex64>,
    /// Outputs y = T x, one per row.
    pub outputs: Vec<Complex64>,
}

/// Pairs (x, y = T x) of a linear map T of size N (a power of two ≥ 2), finite, at least one.
///
/// The rmse a run on data reports is the rmse of the matrix these pairs estimate:
/// `√(Σ |M x − y|² / (N Σ |x|²))`, which for inputs with independent entries of equal variance is
/// the rms of the entries of M − T (as for every other target), whatever the inputs' scale.
///
/// A checkpoint records where the pairs came from and a checksum, not the pairs: a run resumes,
/// and a checkpoint is evaluated, only with the same pairs (read again from their files, or given
/// again in memory).
///
/// # Example
/// ```
/// use learned_fft::reference::DataTarget;
/// use num_complex::Complex64;
///
/// // Two pairs of the map that swaps the two entries.
/// let x = vec![Complex64::new(1.0, 0.0), Complex64::new(2.0, 0.0), Complex64::new(0.0, 1.0), Complex64::new(3.0, 0.0)];
/// let y = vec![x[1], x[0], x[3], x[2]];
/// let data = DataTarget::new(2, x, y)?;
/// assert_eq!((data.n(), data.rows()), (2, 2));
/// // Two pairs span C²: the fitted matrix is the swap.
/// let m = data.fitted_matrix()?.expect("the inputs span the space");
/// assert!((m.get(0, 1).re - 1.0).abs() < 1e-12 && m.get(0, 0).norm() < 1e-12);
/// # Ok::<(), learned_fft::Error>(())
/// ```
#[derive(Clone, Serialize, Deserialize)]
pub struct DataTarget {
    /// The files of the inputs and the outputs; `None` for pairs given in memory.
    sources: Option<[String; 2]>,
    n: usize,
    rows: usize,
    /// CRC-32 of the inputs then the outputs as little-endian f64.
    checksum: u32,
    /// Whether either file held single precision.
    single: bool,
    /// The pairs (not written to checkpoints; read again from `sources` when absent).
    #[serde(skip)]
    pairs: Option<Arc<Pairs>>,
}

/// Names the pairs (their sources, size, count and checksum), not their values.
impl std::fmt::Debug for DataTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataTarget")
            .field("sources", &self.sources)
            .field("n", &self.n)
            .field("rows", &self.rows)
            .field("checksum", &format_args!("{:08x}", self.checksum))
            .finish()
    }
}

/// The same data: the same size, count and checksum, wherever the pairs came from.
impl PartialEq for DataTarget {
    fn eq(&self, other: &Self) -> bool {
        (self.n, self.rows, self.checksum) == (other.n, other.rows, other.checksum)
    }
}

impl DataTarget {
    /// The target of pairs given in memory: `inputs` and `outputs` row-major `[rows, n]`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `n` is not a power of two ≥ 2, the two are not the same
    /// non-zero multiple of `n` values, or a value is NaN or infinite.
    pub fn new(n: usize, inputs: Vec<Complex64>, outputs: Vec<Complex64>) -> Result<Self> {
        let pairs = Pairs { inputs, outputs };
        check(n, &pairs, "the inputs", "the outputs")?;
        Ok(DataTarget {
            sources: None,
            n,
            rows: pairs.inputs.len() / n,
            checksum: checksum(&pairs),
            single: false,
            pairs: Some(Arc::new(pairs)),
        })
    }

    /// The target of the pairs in two files, `inputs` and `outputs`, each a two-dimensional
    /// array `[rows, N]` (one vector per row; the same shape) with finite entries, in either of
    /// the formats of [`crate::reference::MatrixTarget::read`] (`.npy`, or `.safetensors` with
    /// `[rows, N, 2]` for complex values); N is their number of columns.
    ///
    /// # Errors
    /// [`Error::Io`] when a file cannot be read; [`Error::InvalidInput`], naming the file and the
    /// problem, when it is not such an array or the two shapes differ; [`Error::OutOfMemory`].
    pub fn read(inputs: impl AsRef<Path>, outputs: impl AsRef<Path>) -> Result<Self> {
        let (xp, yp) = (inputs.as_ref(), outputs.as_ref());
        let (x, y) = (read_2d(OP, xp)?, read_2d(OP, yp)?);
        if (x.rows, x.cols) != (y.rows, y.cols) {
            return Err(Error::invalid(
                OP,
                format!(
                    "{} to have the shape of {} ({}×{}: one output per input)",
                    yp.display(),
                    xp.display(),
                    x.rows,
                    x.cols
                ),
                format!("{}×{}", y.rows, y.cols),
            ));
        }
        let n = x.cols;
        if n < 2 || !n.is_power_of_two() {
            return Err(Error::invalid(
                OP,
                format!("{} to have N columns, N a power of two ≥ 2 (one vector per row)", xp.display()),
                format!("{} columns", n),
            ));
        }
        let single = x.single || y.single;
        let pairs = Pairs { inputs: x.values, outputs: y.values };
        let sources = Some([xp.display().to_string(), yp.display().to_string()]);
        Ok(DataTarget { sources, n, rows: x.rows, checksum: checksum(&pairs), single, pairs: Some(Arc::new(pairs)) })
    }

    /// The size N of the vectors.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The number of pairs.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The files of the inputs and the outputs (`None` for pairs given in memory).
    pub fn sources(&self) -> Option<&[String; 2]> {
        self.sources.as_ref()
    }

    /// The relative tolerance to which structure is looked for in the fitted matrix:
    /// [`F64_TOLERANCE`], or [`F32_TOLERANCE`] for data given in single precision.
    pub fn tolerance(&self) -> f64 {
        if self.single {
            F32_TOLERANCE
        } else {
            F64_TOLERANCE
        }
    }

    /// The pairs: those held, or (for a target read back from a checkpoint) the files read again.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the pairs are not held and were given in memory, or their
    /// files now hold other pairs; those of [`DataTarget::read`].
    pub fn pairs(&self) -> Result<Arc<Pairs>> {
        if let Some(p) = &self.pairs {
            return Ok(p.clone());
        }
        let Some([x, y]) = &self.sources else {
            return Err(Error::invalid(
                OP,
                "the pairs themselves: they were given in memory, and a checkpoint records only their checksum",
                "a target read back from a checkpoint",
            ));
        };
        let again = DataTarget::read(x, y)?;
        if again != *self {
            return Err(Error::invalid(
                OP,
                format!(
                    "{x} and {y} to hold the pairs the run trained on ({} pairs, checksum {:08x})",
                    self.rows, self.checksum
                ),
                format!("{} pairs, checksum {:08x}: the files changed", again.rows, again.checksum),
            ));
        }
        Ok(again.pairs.expect("read holds its pairs"))
    }

    /// The matrix T that fits the pairs best (least squares: the T minimising Σ |T x − y|²),
    /// where N ≤ [`FIT_MAX_N`] and the inputs span the space (at least N pairs, the normal
    /// equations well conditioned: every pivot ≥ 1e-4 of the largest); `None` otherwise. Exact
    /// pairs of a map then give its matrix to about 1e-12 relative, within the tolerance its
    /// structure is looked for to ([`DataTarget::tolerance`]). N pairs with random normal inputs
    /// are not enough at large N (their condition number grows like N); 2N are (about 6).
    ///
    /// # Errors
    /// Those of [`DataTarget::pairs`]; [`Error::OutOfMemory`].
    pub fn fitted_matrix(&self) -> Result<Option<ComplexMatrix>> {
        let n = self.n;
        if n > FIT_MAX_N || self.rows < n {
            return Ok(None);
        }
        let p = self.pairs()?;
        crate::memory::ensure(
            OP,
            || format!("the least-squares fit at N = {n}"),
            crate::memory::product(&[n, 2 * n, 16]),
        )?;
        // Rows r of X and Y: y_r = T x_r, so Y = X Tᵀ and the normal equations are
        // (Xᴴ X) Tᵀ = Xᴴ Y: one N×N system with N right-hand sides, [G | R] below.
        let (x, y) = (&p.inputs, &p.outputs);
        let width = 2 * n;
        let mut a = vec![Complex64::new(0.0, 0.0); n * width];
        for r in 0..self.rows {
            let (xr, yr) = (&x[r * n..(r + 1) * n], &y[r * n..(r + 1) * n]);
            for i in 0..n {
                let xi = xr[i].conj();
                let row = &mut a[i * width..(i + 1) * width];
                row[..n].iter_mut().zip(xr).for_each(|(g, xj)| *g += xi * xj);
                row[n..].iter_mut().zip(yr).for_each(|(g, yj)| *g += xi * yj);
            }
        }
        // Gauss–Jordan elimination with partial pivoting (the Gram matrix is Hermitian positive
        // semi-definite; pivoting keeps a nearly singular one from passing as regular).
        let largest = (0..n).map(|i| a[i * width + i].norm()).fold(0.0, f64::max);
        for col in 0..n {
            let pivot = (col..n)
                .max_by(|&i, &j| a[i * width + col].norm().total_cmp(&a[j * width + col].norm()))
                .expect("a non-empty range");
            let size = a[pivot * width + col].norm();
            if size.is_nan() || size < FIT_MIN_PIVOT * largest || largest == 0.0 {
                return Ok(None);
            }
            if pivot != col {
                for k in 0..width {
                    a.swap(pivot * width + k, col * width + k);
                }
            }
            let inv = a[col * width + col].inv();
            a[col * width..(col + 1) * width].iter_mut().for_each(|z| *z *= inv);
            let pivot_row: Vec<Complex64> = a[col * width..(col + 1) * width].to_vec();
            for i in (0..n).filter(|&i| i != col) {
                let f = a[i * width + col];
                if f != Complex64::new(0.0, 0.0) {
                    a[i * width..(i + 1) * width].iter_mut().zip(&pivot_row).for_each(|(z, p)| *z -= f * p);
                }
            }
        }
        // Row i of the solution is row i of Tᵀ: T[k][i] = a[i][n + k].
        Ok(Some(ComplexMatrix::from_fn(n, |k, i| a[i * width + n + k])))
    }
}

/// Pairs of size `n`: the same non-zero multiple of `n` values each, every one finite.
fn check(n: usize, p: &Pairs, inputs: &str, outputs: &str) -> Result<()> {
    if n < 2 || !n.is_power_of_two() {
        return Err(Error::invalid(OP, "N a power of two ≥ 2", n));
    }
    if p.inputs.is_empty() || !p.inputs.len().is_multiple_of(n) || p.outputs.len() != p.inputs.len() {
        return Err(Error::invalid(
            OP,
            format!("{inputs} and {outputs} to be the same non-zero multiple of N = {n} values"),
            format!("{} and {} values", p.inputs.len(), p.outputs.len()),
        ));
    }
    for (what, v) in [(inputs, &p.inputs), (outputs, &p.outputs)] {
        if let Some(i) = v.iter().position(|z| !(z.re.is_finite() && z.im.is_finite())) {
            return Err(Error::invalid(
                OP,
                format!("{what} to be finite"),
                format!("{} at ({}, {})", v[i], i / n, i % n),
            ));
        }
    }
    Ok(())
}

/// CRC-32 of the inputs then the outputs as little-endian f64, real then imaginary part.
fn checksum(p: &Pairs) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for z in p.inputs.iter().chain(&p.outputs) {
        h.update(&z.re.to_le_bytes());
        h.update(&z.im.to_le_bytes());
    }
    h.finalize()
}
