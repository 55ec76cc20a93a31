//! Dense target matrices in f64, in their unitary (orthonormal) scaling.
//!
//! Each is built by a fast algorithm (rustfft, rustdct, a fast Walsh–Hadamard transform) applied
//! to the basis vectors; the tests check each against its closed form or a naive O(N²) sum.
//!
//! | target | entry (row k, column j) |
//! |---|---|
//! | DFT | e^{-2πi jk/N} / √N |
//! | iDFT | e^{+2πi jk/N} / √N |
//! | DCT-II | s_k cos(π(2j+1)k / 2N), s_0 = √(1/N), s_k = √(2/N) |
//! | DST-II | s_k sin(π(2j+1)(k+1) / 2N), s_{N-1} = √(1/N), s_k = √(2/N) |
//! | Hadamard | (−1)^{popcount(j & k)} / √N (Sylvester order) |
//! | Hartley | (cos(2π jk/N) + sin(2π jk/N)) / √N |
//! | circulant | h[(k − j) mod N] (the matrix of circular convolution with h, unscaled) |
//! | matrix | a user's own N×N matrix, as given ([`MatrixTarget`]; one size N) |
//! | operator | a user's own transform, as its code applies it ([`OperatorTarget`]; a family) |
//! | data | a user's own input/output pairs ([`DataTarget`]; one size N, no matrix) |
//!
//! Every target is an [`Operator`]: the objective reads each through that trait.

use num_complex::Complex64;
use rustdct::DctPlanner;
use serde::{Deserialize, Serialize};

use super::data::DataTarget;
use super::dft::{fft_chunks, FftNorm};
use super::matrix::ComplexMatrix;
use super::operator::{Operator, OperatorTarget};
use super::user::MatrixTarget;
use crate::error::{check_power_of_two, Error, Result};

/// A linear transform the butterfly can be trained to reproduce.
///
/// # Example
/// ```
/// use learned_fft::Target;
///
/// // The unitary DFT of size 4: entry (k, j) is e^{-2πi jk/4} / 2, so (1, 1) is −i/2.
/// let dft = Target::Dft.matrix(4)?;
/// assert!(dft.get(1, 1).re.abs() < 1e-15 && (dft.get(1, 1).im + 0.5).abs() < 1e-15);
/// // A circulant is circular convolution with its kernel: column 0 is the kernel itself.
/// let h = vec![1.0, 2.0, 0.0, 0.0];
/// let conv = Target::Circulant { kernel: h.clone() }.matrix(4)?;
/// assert!((0..4).all(|k| (conv.get(k, 0).re - h[k]).abs() < 1e-12));
/// assert_eq!(Target::Dct2.kind().to_string(), "dct2");
/// # Ok::<(), learned_fft::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Target {
    /// Unitary discrete Fourier transform.
    Dft,
    /// Unitary inverse discrete Fourier transform.
    Idft,
    /// Orthonormal DCT-II (scipy's `dct(x, type=2, norm="ortho")`).
    Dct2,
    /// Orthonormal DST-II (scipy's `dst(x, type=2, norm="ortho")`).
    Dst2,
    /// Sylvester-ordered Walsh–Hadamard transform, scaled by 1/√N.
    Hadamard,
    /// Discrete Hartley transform, scaled by 1/√N.
    Hartley,
    /// Circular convolution with the given real kernel, whose length must equal N.
    Circulant {
        /// The kernel h; `(h ⊛ x)[k] = Σ_j h[(k − j) mod N] x[j]`.
        kernel: Vec<f64>,
    },
    /// A user's own matrix, in memory or from a `.npy` file, of one size.
    Matrix(MatrixTarget),
    /// A user's own operator (code that applies the transform), of the sizes it has.
    Operator(OperatorTarget),
    /// A user's own input/output pairs, of one size: no matrix, no code.
    Data(DataTarget),
}

/// Which [`Target`], without its data: what `--target` names. Displays as its lowercase name
/// (`dft`, `dct2`, …), the spelling the CLI, checkpoints' exports and file names share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    /// The unitary DFT (one butterfly).
    Dft,
    /// The unitary inverse DFT (one butterfly).
    Idft,
    /// The orthonormal DCT-II (three butterflies).
    Dct2,
    /// The orthonormal DST-II (three butterflies).
    Dst2,
    /// The orthonormal Walsh–Hadamard transform (one butterfly).
    Hadamard,
    /// The orthonormal Hartley transform (three butterflies).
    Hartley,
    /// Circular convolution with `--kernel` (two butterflies).
    Circulant,
    /// A user's matrix (`--target-file`); not named by `--target`.
    Matrix,
    /// A user's operator (in the library only); not named by `--target`.
    Operator,
    /// A user's input/output pairs (`--data`); not named by `--target`.
    Data,
}

impl std::fmt::Display for TargetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses the lowercase name ([`TargetKind::as_str`]); any other text is refused naming them all.
impl std::str::FromStr for TargetKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::VARIANTS.into_iter().find(|k| k.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = Self::VARIANTS.map(Self::as_str).to_vec();
            Error::invalid("target", format!("one of {}", names.join(", ")), format!("{s:?}"))
        })
    }
}

impl TargetKind {
    /// Every built-in kind, in the order the CLI lists them (what `--target` names; a user's
    /// matrix comes with `--target-file`).
    pub const VARIANTS: [TargetKind; 7] = [
        TargetKind::Dft,
        TargetKind::Idft,
        TargetKind::Dct2,
        TargetKind::Dst2,
        TargetKind::Hadamard,
        TargetKind::Hartley,
        TargetKind::Circulant,
    ];

    /// The lowercase name (`dft`, `dct2`, …): what `--target` takes and `Display` and serde
    /// write.
    pub const fn as_str(self) -> &'static str {
        match self {
            TargetKind::Dft => "dft",
            TargetKind::Idft => "idft",
            TargetKind::Dct2 => "dct2",
            TargetKind::Dst2 => "dst2",
            TargetKind::Hadamard => "hadamard",
            TargetKind::Hartley => "hartley",
            TargetKind::Circulant => "circulant",
            TargetKind::Matrix => "matrix",
            TargetKind::Operator => "operator",
            TargetKind::Data => "data",
        }
    }

    /// The built-in target of this kind; `kernel` is the circulant's and must be empty for the
    /// others.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a kernel is given to a target that takes none, or the kind
    /// is a user's ([`TargetKind::Matrix`], [`TargetKind::Operator`], [`TargetKind::Data`]: the
    /// target is the matrix, the operator or the data itself, [`MatrixTarget`],
    /// [`OperatorTarget`], [`DataTarget`]).
    pub fn target(self, kernel: Vec<f64>) -> Result<Target> {
        if !kernel.is_empty() && self != TargetKind::Circulant {
            return Err(Error::invalid("target", "a kernel only for the circulant target", self));
        }
        Ok(match self {
            TargetKind::Dft => Target::Dft,
            TargetKind::Idft => Target::Idft,
            TargetKind::Dct2 => Target::Dct2,
            TargetKind::Dst2 => Target::Dst2,
            TargetKind::Hadamard => Target::Hadamard,
            TargetKind::Hartley => Target::Hartley,
            TargetKind::Circulant => Target::Circulant { kernel },
            TargetKind::Matrix | TargetKind::Operator | TargetKind::Data => {
                return Err(Error::invalid(
                    "target",
                    "a built-in target (a user's comes as a MatrixTarget, OperatorTarget or DataTarget)",
                    self,
                ))
            }
        })
    }
}

impl Target {
    /// Which target this is (displays as its short lowercase name: `dft`, `dct2`, …).
    pub fn kind(&self) -> TargetKind {
        match self {
            Target::Dft => TargetKind::Dft,
            Target::Idft => TargetKind::Idft,
            Target::Dct2 => TargetKind::Dct2,
            Target::Dst2 => TargetKind::Dst2,
            Target::Hadamard => TargetKind::Hadamard,
            Target::Hartley => TargetKind::Hartley,
            Target::Circulant { .. } => TargetKind::Circulant,
            Target::Matrix(_) => TargetKind::Matrix,
            Target::Operator(_) => TargetKind::Operator,
            Target::Data(_) => TargetKind::Data,
        }
    }

    /// Whether a user brought it (a matrix, an operator or data): no factorization of it is
    /// known, and the trainer uses only what it offers.
    pub fn is_users(&self) -> bool {
        matches!(self, Target::Matrix(_) | Target::Operator(_) | Target::Data(_))
    }

    /// The target of size N/2 that a run at N grows from ([`crate::train::TrainConfig::grow_above`]):
    /// the same transform, and for the circulant the kernel folded and scaled,
    /// `h'[j] = (h[j] + h[j + N/2]) / √2`, whose eigenvalues are the even-indexed ones of `h`'s
    /// over √2 (`F_{N/2} h' = (F_N h)[2k] / √2`). The scale keeps the entries' spread of a random
    /// kernel: folded unscaled from N = 1024 down to 16, the eigenvalues were 8 times a random
    /// kernel's at 16, and the runs there needed many more attempts. A user's operator is a
    /// family: its member of half the size is the same operator at N/2.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a circulant's kernel has odd length or fewer than 2 entries,
    /// or for a user's matrix or data (of one size: no member of half the size).
    pub fn halved(&self) -> Result<Target> {
        Ok(match self {
            Target::Matrix(m) => {
                return Err(Error::invalid(
                    "target.halved",
                    "a target with a member of half the size",
                    format!("a matrix of one size (N = {})", m.n()),
                ))
            }
            Target::Data(d) => {
                return Err(Error::invalid(
                    "target.halved",
                    "a target with a member of half the size",
                    format!("data of one size (N = {})", d.n()),
                ))
            }
            Target::Circulant { kernel } => {
                let half = kernel.len() / 2;
                if half == 0 || kernel.len() % 2 != 0 {
                    return Err(Error::invalid("target.halved", "a circulant kernel of even length ≥ 2", kernel.len()));
                }
                Target::Circulant {
                    kernel: (0..half)
                        .map(|j| (kernel[j] + kernel[j + half]) * std::f64::consts::FRAC_1_SQRT_2)
                        .collect(),
                }
            }
            other => other.clone(),
        })
    }

    /// Whether the target has a member of size `n`: a circulant of its kernel's length, a user's
    /// matrix of its size, a user's operator of the sizes it has, the others of every power of
    /// two ≥ 2.
    pub fn has_size(&self, n: usize) -> bool {
        n >= 2
            && n.is_power_of_two()
            && match self {
                Target::Circulant { kernel } => kernel.len() == n,
                Target::Matrix(m) => m.n() == n,
                Target::Operator(o) => o.has_size(n),
                Target::Data(d) => d.n() == n,
                _ => true,
            }
    }

    /// The dense N×N matrix of this target. N must be a power of two ≥ 2 (the butterfly's sizes).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `n` is not a power of two ≥ 2, a circulant's kernel is not
    /// of length `n` or a user's matrix not of size `n`; [`Error::OutOfMemory`] when the matrix
    /// does not fit; those of [`MatrixTarget::matrix`].
    pub fn matrix(&self, n: usize) -> Result<ComplexMatrix> {
        check_power_of_two("target.matrix", n)?;
        if let Target::Data(_) = self {
            return Err(no_matrix("target.matrix"));
        }
        if let Target::Matrix(m) = self {
            check_size(m, n)?;
            return Ok((*m.matrix()?).clone());
        }
        // The complex f64 matrix, and as much again while it is built (the basis transformed).
        let needed = crate::memory::product(&[n, n, 32]);
        crate::memory::ensure("target.matrix", || format!("the dense N×N {} target at N = {n}", self.kind()), needed)?;
        // Column c of the matrix is the image of e_c: transform the basis as one batch.
        let mut basis = vec![Complex64::new(0.0, 0.0); n * n];
        basis.iter_mut().step_by(n + 1).for_each(|z| *z = Complex64::new(1.0, 0.0));
        self.apply(n, &mut basis)?;
        Ok(ComplexMatrix::from_fn(n, |r, c| basis[c * n + r]))
    }

    /// Applies the target (in its unitary scaling, as [`Target::matrix`]) to every contiguous
    /// length-`n` vector of `x` in place, in f64 by its fast algorithm: O(N log N) per vector, no
    /// N×N matrix. This is the truth the probe objective of large sizes is measured against.
    ///
    /// A user's matrix is applied as it is, O(N²) per vector.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `n` is not a power of two ≥ 2, `x` is not a non-zero multiple
    /// of `n` values, a circulant's kernel is not of length `n`, or a user's matrix not of size
    /// `n`; those of [`MatrixTarget::matrix`].
    pub fn apply(&self, n: usize, x: &mut [Complex64]) -> Result<()> {
        check_power_of_two("target.apply", n)?;
        if x.is_empty() || !x.len().is_multiple_of(n) {
            return Err(Error::invalid("target.apply", format!("a non-zero multiple of n = {n} values"), x.len()));
        }
        match self {
            Target::Dft => fft_chunks(x, n, false, FftNorm::Ortho),
            Target::Idft => fft_chunks(x, n, true, FftNorm::Ortho),
            Target::Dct2 => {
                let plan = DctPlanner::<f64>::new().plan_dct2(n);
                real_map(n, x, |v| {
                    plan.process_dct2(v);
                    orthonormalise(v, 0);
                })
            }
            Target::Dst2 => {
                let plan = DctPlanner::<f64>::new().plan_dst2(n);
                real_map(n, x, |v| {
                    plan.process_dst2(v);
                    orthonormalise(v, n - 1);
                })
            }
            Target::Hadamard => real_map(n, x, |v| {
                walsh_hadamard_in_place(v);
                let s = 1.0 / (n as f64).sqrt();
                v.iter_mut().for_each(|a| *a *= s);
            }),
            Target::Hartley => {
                // H = Re(F) − Im(F) for the unitary DFT F, since e^{-iθ} = cos θ − i sin θ; on a
                // real vector v that is Re(Fv) − Im(Fv).
                let mut z = vec![Complex64::new(0.0, 0.0); n];
                real_map(n, x, |v| {
                    z.iter_mut().zip(v.iter()).for_each(|(z, &a)| *z = Complex64::new(a, 0.0));
                    fft_chunks(&mut z, n, false, FftNorm::Ortho);
                    v.iter_mut().zip(&z).for_each(|(a, z)| *a = z.re - z.im);
                })
            }
            Target::Circulant { kernel } => {
                // h ⊛ x = F⁻¹ (F h ⊙ F x), with unnormalised forward and 1/N inverse.
                let h_hat = kernel_spectrum(kernel, n)?;
                fft_chunks(x, n, false, FftNorm::Backward);
                x.chunks_mut(n).for_each(|c| c.iter_mut().zip(&h_hat).for_each(|(x, h)| *x *= h));
                fft_chunks(x, n, true, FftNorm::Backward);
            }
            Target::Operator(o) => o.apply(n, x)?,
            Target::Data(_) => return Err(no_matrix("target.apply")),
            Target::Matrix(m) => {
                check_size(m, n)?;
                let m = m.matrix()?;
                let mut y = vec![Complex64::new(0.0, 0.0); n];
                for v in x.chunks_mut(n) {
                    y.iter_mut().enumerate().for_each(|(r, y)| *y = (0..n).map(|c| m.get(r, c) * v[c]).sum());
                    v.copy_from_slice(&y);
                }
            }
        }
        Ok(())
    }
}

/// Every target is an operator: the built-ins by their fast algorithms, a user's matrix by its
/// product, a user's operator by its own code.
impl Operator for Target {
    fn name(&self) -> String {
        match self {
            Target::Matrix(m) => format!("matrix {}", m.source().unwrap_or("(in memory)")),
            Target::Operator(o) => o.name().to_string(),
            Target::Data(d) => match d.sources() {
                Some([x, y]) => format!("data {x} → {y}"),
                None => "data (in memory)".to_string(),
            },
            other => other.kind().to_string(),
        }
    }
    fn has_size(&self, n: usize) -> bool {
        Target::has_size(self, n)
    }
    fn apply(&self, n: usize, x: &mut [Complex64]) -> Result<()> {
        Target::apply(self, n, x)
    }
}

/// Data is its pairs: it has no matrix and applies to no other vector.
fn no_matrix(op: &'static str) -> Error {
    Error::invalid(
        op,
        "a target with a matrix or an operator",
        "data, which has only its pairs (DataTarget::fitted_matrix fits a matrix to them)",
    )
}

/// A user's matrix is of one size: `n` must be it.
fn check_size(m: &MatrixTarget, n: usize) -> Result<()> {
    if m.n() != n {
        return Err(Error::invalid("target", format!("N = {} (the size of the matrix)", m.n()), format!("N = {n}")));
    }
    Ok(())
}

/// The unnormalised DFT of a circulant's kernel (its eigenvalues), after checking its length.
pub(crate) fn kernel_spectrum(kernel: &[f64], n: usize) -> Result<Vec<Complex64>> {
    if kernel.len() != n {
        return Err(Error::invalid(
            "target.circulant",
            format!("a kernel of length n = {n}"),
            format!("length {}", kernel.len()),
        ));
    }
    let mut h: Vec<Complex64> = kernel.iter().map(|&x| Complex64::new(x, 0.0)).collect();
    fft_chunks(&mut h, n, false, FftNorm::Backward);
    Ok(h)
}

/// Applies a real linear map, given in place on a real buffer of length `n`, to every
/// length-`n` complex vector of `x`: to its real and its imaginary part (linearity).
fn real_map(n: usize, x: &mut [Complex64], mut apply: impl FnMut(&mut [f64])) {
    let (mut re, mut im) = (vec![0.0; n], vec![0.0; n]);
    for v in x.chunks_mut(n) {
        v.iter().enumerate().for_each(|(i, z)| (re[i], im[i]) = (z.re, z.im));
        apply(&mut re);
        if v.iter().any(|z| z.im != 0.0) {
            apply(&mut im);
        } else {
            im.fill(0.0);
        }
        v.iter_mut().enumerate().for_each(|(i, z)| *z = Complex64::new(re[i], im[i]));
    }
}

/// Scales an unnormalised DCT-II / DST-II output to the orthonormal one: every coefficient by
/// √(2/N), the one at `special` by √(1/N).
fn orthonormalise(x: &mut [f64], special: usize) {
    let n = x.len() as f64;
    for (k, v) in x.iter_mut().enumerate() {
        *v *= if k == special { (1.0 / n).sqrt() } else { (2.0 / n).sqrt() };
    }
}

/// Unnormalised fast Walsh–Hadamard transform in Sylvester (natural) order.
fn walsh_hadamard_in_place(x: &mut [f64]) {
    let n = x.len();
    let mut h = 1;
    while h < n {
        for block in (0..n).step_by(2 * h) {
            for i in block..block + h {
                let (a, b) = (x[i], x[i + h]);
                x[i] = a + b;
                x[i + h] = a - b;
            }
        }
        h *= 2;
    }
}
