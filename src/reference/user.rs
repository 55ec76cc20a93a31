//! A target a user brings as its dense matrix: given in memory, or read from a numpy `.npy` file
//! (`numpy.save`) or a `.safetensors` file.
//!
//! The trainer uses only what the matrix offers: its entries (the objective), its size, and the
//! input permutation that makes it a butterfly where one exists (found from the entries,
//! [`crate::reference::identify`]). Nothing about where it came from.

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::arrays::read_2d;
use super::identify::{F32_TOLERANCE, F64_TOLERANCE};
use super::matrix::ComplexMatrix;
use crate::error::{Error, Result};

/// The operation named in a target file's errors.
const OP: &str = "target file";

/// A dense N×N matrix to learn, of one size N (a power of two ≥ 2) with finite entries.
///
/// A checkpoint records where the matrix came from and a checksum of its entries, not the
/// entries: a run resumes, and a checkpoint is evaluated, only with the same matrix (read again
/// from its file, or given again in memory).
///
/// # Example
/// ```
/// use learned_fft::reference::{ComplexMatrix, MatrixTarget};
/// use num_complex::Complex64;
///
/// // The 2×2 Hadamard matrix / √2, given in memory.
/// let s = std::f64::consts::FRAC_1_SQRT_2;
/// let h = ComplexMatrix::from_fn(2, |r, c| Complex64::new(if r * c == 1 { -s } else { s }, 0.0));
/// let target = MatrixTarget::new(h.clone())?;
/// assert_eq!(target.n(), 2);
/// assert_eq!(*target.matrix()?, h);
/// // A matrix that is not of a butterfly's size is refused.
/// assert!(MatrixTarget::new(ComplexMatrix::identity(3)).is_err());
/// # Ok::<(), learned_fft::Error>(())
/// ```
#[derive(Clone, Serialize, Deserialize)]
pub struct MatrixTarget {
    /// The file it was read from; `None` for a matrix given in memory.
    source: Option<String>,
    /// Its size N.
    n: usize,
    /// CRC-32 of its entries as little-endian f64 (real and imaginary parts, row-major).
    checksum: u32,
    /// Whether the entries were given in single precision (a float32 or complex64 file): then
    /// they are exact to about 6e-8, not 1e-16, and structure is looked for to that precision.
    #[serde(default)]
    single: bool,
    /// The entries (not written to checkpoints; read again from `source` when absent).
    #[serde(skip)]
    entries: Option<Arc<ComplexMatrix>>,
}

/// Names the matrix (its source, size and checksum), not its N² entries.
impl std::fmt::Debug for MatrixTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MatrixTarget")
            .field("source", &self.source.as_deref().unwrap_or("memory"))
            .field("n", &self.n)
            .field("checksum", &format_args!("{:08x}", self.checksum))
            .finish()
    }
}

/// Two matrix targets are the same target when their sizes and entries' checksums agree,
/// wherever the entries came from.
impl PartialEq for MatrixTarget {
    fn eq(&self, other: &Self) -> bool {
        (self.n, self.checksum) == (other.n, other.checksum)
    }
}

impl MatrixTarget {
    /// The target of a matrix given in memory.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the size is not a power of two ≥ 2 or an entry is NaN or
    /// infinite.
    pub fn new(matrix: ComplexMatrix) -> Result<Self> {
        check_entries("target matrix", "the matrix", &matrix)?;
        Ok(MatrixTarget {
            source: None,
            n: matrix.n(),
            checksum: checksum(&matrix),
            single: false,
            entries: Some(Arc::new(matrix)),
        })
    }

    /// The target of the matrix in the file at `path`, of a power-of-two size N ≥ 2 with finite
    /// entries:
    /// - a `.safetensors` file (by its extension) of one F32 or F64 tensor, `[N, N]` for a real
    ///   matrix or `[N, N, 2]` for a complex one (real and imaginary parts last, as
    ///   `torch.view_as_real` writes them);
    /// - otherwise a numpy `.npy` file of a two-dimensional array of float32, float64, complex64
    ///   or complex128 (either byte order, C or Fortran order).
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be read; [`Error::InvalidInput`], naming the file and
    /// the problem, when it is not such an array (not a file of its format, another dtype or
    /// shape, more than one tensor, a truncated file or one with bytes after the array, a NaN or
    /// infinite entry); [`Error::OutOfMemory`] when the matrix would not fit.
    pub fn read(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let (matrix, single) = read_matrix(path)?;
        let source = Some(path.display().to_string());
        Ok(MatrixTarget { source, n: matrix.n(), checksum: checksum(&matrix), single, entries: Some(Arc::new(matrix)) })
    }

    /// Its size N.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The relative tolerance to which structure is looked for in the entries
    /// ([`crate::reference::identify`]): [`F64_TOLERANCE`], or [`F32_TOLERANCE`] for entries
    /// given in single precision.
    pub fn tolerance(&self) -> f64 {
        if self.single {
            F32_TOLERANCE
        } else {
            F64_TOLERANCE
        }
    }

    /// The file it was read from (`None` for a matrix given in memory).
    pub fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// The matrix: the entries held, or (for a target read back from a checkpoint) the file
    /// read again.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the entries are not held and the target was given in
    /// memory, or its file now holds another matrix; those of [`MatrixTarget::read`].
    pub fn matrix(&self) -> Result<Arc<ComplexMatrix>> {
        if let Some(m) = &self.entries {
            return Ok(m.clone());
        }
        let Some(source) = &self.source else {
            return Err(Error::invalid(
                "target matrix",
                "the matrix itself: it was given in memory, and a checkpoint records only its checksum",
                "a target read back from a checkpoint",
            ));
        };
        let again = MatrixTarget::read(source)?;
        if again != *self {
            return Err(Error::invalid(
                OP,
                format!(
                    "{source} to hold the matrix the run trained on (N = {}, checksum {:08x})",
                    self.n, self.checksum
                ),
                format!("N = {}, checksum {:08x}: the file changed", again.n, again.checksum),
            ));
        }
        Ok(again.entries.expect("read holds its entries"))
    }
}

/// CRC-32 of the entries as little-endian f64, row-major, real then imaginary part.
fn checksum(m: &ComplexMatrix) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for r in 0..m.n() {
        for c in 0..m.n() {
            let z = m.get(r, c);
            h.update(&z.re.to_le_bytes());
            h.update(&z.im.to_le_bytes());
        }
    }
    h.finalize()
}

/// A matrix target's size and entries: a power of two ≥ 2, every entry finite.
fn check_entries(op: &'static str, what: &str, m: &ComplexMatrix) -> Result<()> {
    let n = m.n();
    if n < 2 || !n.is_power_of_two() {
        return Err(Error::invalid(op, format!("{what} to be N×N with N a power of two ≥ 2"), format!("{n}×{n}")));
    }
    for r in 0..n {
        for c in 0..n {
            let z = m.get(r, c);
            if !(z.re.is_finite() && z.im.is_finite()) {
                return Err(Error::invalid(op, format!("{what} to have finite entries"), format!("{z} at ({r}, {c})")));
            }
        }
    }
    Ok(())
}

/// Reads the square matrix of a file (see [`MatrixTarget::read`]), and whether its
/// entries were in single precision.
fn read_matrix(path: &Path) -> Result<(ComplexMatrix, bool)> {
    let a = read_2d(OP, path)?;
    let shown = path.display();
    let bad = |expected: &str, got: String| Error::invalid(OP, format!("{shown} to be {expected}"), got);
    let (rows, cols) = (a.rows, a.cols);
    if rows != cols {
        return Err(bad("a square matrix", format!("shape {rows}×{cols}")));
    }
    if rows < 2 || !rows.is_power_of_two() {
        return Err(bad("N×N with N a power of two ≥ 2 (a butterfly's size)", format!("{rows}×{cols}")));
    }
    let matrix = ComplexMatrix::from_row_major(rows, a.values)
        .ok_or_else(|| bad(&format!("{rows}×{cols} entries"), "another count".into()))?;
    Ok((matrix, a.single))
}
