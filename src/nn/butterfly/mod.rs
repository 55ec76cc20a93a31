//! The butterfly layer: a learnable product of log2(N) sparse factors that can represent the FFT.
//!
//! See [`Butterfly`] for the layout and [`ButterflyConfig`] for construction.

mod init;

pub use init::ButterflyInit;

use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{backend::Backend, Tensor};

use crate::error::{check_power_of_two, Error, Result};
use crate::memory;
use crate::ops::butterfly::{butterfly_forward_reference, rfft, ButterflyOps, Permutation};
use crate::reference::butterfly::doubled_stages;
use crate::reference::factorizations::Factor;
use crate::reference::{self as truth, ComplexMatrix, FftNorm};
use crate::tensors::{eye, float_tensor, to_f64_vec};

/// Configuration of a [`Butterfly`]: its size, initial twiddles and input permutation.
///
/// # Example
/// ```
/// use burn::backend::NdArray;
/// use learned_fft::{ButterflyConfig, ButterflyInit, Permutation};
///
/// let device = Default::default();
/// // A random unitary butterfly of size 16 on the natural-order input.
/// let layer = ButterflyConfig::new(16)
///     .with_init(ButterflyInit::RandomUnitary { seed: 7 })
///     .with_permutation(Permutation::Identity)
///     .init::<NdArray>(&device)?;
/// assert_eq!((layer.n(), layer.log_n()), (16, 4));
/// // N must be a power of two.
/// assert!(ButterflyConfig::new(12).init::<NdArray>(&device).is_err());
/// # Ok::<(), learned_fft::Error>(())
/// ```
#[derive(Config, Debug)]
pub struct ButterflyConfig {
    /// Transform size N: a power of two, at least 2.
    pub n: usize,
    /// How the twiddles start (default: the exact unitary forward FFT).
    #[config(default = "ButterflyInit::Fft { inverse: false, norm: FftNorm::Ortho }")]
    pub init: ButterflyInit,
    /// Permutation applied to the input before the first factor (default: bit reversal).
    #[config(default = "Permutation::BitReversal")]
    pub permutation: Permutation,
}

impl ButterflyConfig {
    /// Builds the layer on `device`, after checking the configuration.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when N is not a power of two of at least 2, the permutation does
    /// not fit N, or the initialiser's scale or weight is out of range;
    /// [`Error::OutOfMemory`] when the twiddles do not fit.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<Butterfly<B>> {
        let log_n = self.assertions()?;
        let (re, im) = self.init.twiddles(self.n);
        let shape = [log_n, self.n / 2, 2, 2];
        let param = |v: Vec<f64>| Param::from_tensor(float_tensor::<B, 4>(v, shape, device));
        Ok(Butterfly { twiddle_re: param(re), twiddle_im: param(im), n: self.n, permutation: self.permutation.clone() })
    }

    fn assertions(&self) -> Result<usize> {
        let log_n = check_power_of_two("butterfly.init", self.n)?;
        self.permutation.check_fits("butterfly.init", self.n)?;
        // 4·log2(N)·N twiddle values, in f64 on the host, then on the device (at most f64).
        let needed = memory::product(&[log_n, self.n, 4, 8, 2]);
        memory::ensure("butterfly.init", || format!("the twiddles at N = {}", self.n), needed)?;
        if let ButterflyInit::Randn { scale, .. } = self.init {
            if !(scale.is_finite() && scale > 0.0) {
                return Err(Error::invalid("butterfly.init", "Randn scale finite and > 0", scale));
            }
        }
        if let ButterflyInit::NearIdentity { weight, .. } = self.init {
            if !(weight > 0.0 && weight <= 1.0) {
                return Err(Error::invalid("butterfly.init", "NearIdentity weight in (0, 1]", weight));
            }
        }
        Ok(log_n)
    }
}

/// A butterfly layer: `y = B_{L−1} ⋯ B_1 B_0 P x` for N = 2^L, where P is a fixed permutation
/// and each factor B_s holds N/2 independent complex 2×2 blocks pairing the indices that are
/// `2^s` apart (increasing stride, decimation in time).
///
/// Twiddles are two real parameter tensors, `twiddle_re` and `twiddle_im`, each
/// `[log2 N, N/2, 2, 2]`: entry `[s, k, a, b]` is row a, column b of block k of stage s. Block k
/// of stage s acts on indices `i0 = 2^{s+1}·⌊k / 2^s⌋ + (k mod 2^s)` and `i1 = i0 + 2^s`. The
/// exact definition is [`crate::reference::butterfly`].
///
/// With [`ButterflyInit::Fft`] and [`Permutation::BitReversal`] the layer is the FFT.
///
/// # Example
/// ```
/// use burn::backend::NdArray;
/// use burn::tensor::Tensor;
/// use learned_fft::{to_f64_vec, ButterflyConfig};
///
/// let device = Default::default();
/// // The default initialiser: the exact unitary FFT of size 8.
/// let fft = ButterflyConfig::new(8).init::<NdArray>(&device)?;
/// // The spectrum of a unit impulse is flat: every bin 1/√8.
/// let x = Tensor::<NdArray, 2>::from_floats([[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]], &device);
/// let (re, im) = fft.forward_real(x)?;
/// assert_eq!(re.dims(), [1, 8]);
/// assert!(to_f64_vec(re).iter().all(|v| (v - 8f64.sqrt().recip()).abs() < 1e-6));
/// assert!(to_f64_vec(im).iter().all(|v| v.abs() < 1e-6));
/// # Ok::<(), learned_fft::Error>(())
/// ```
#[derive(Module, Debug)]
pub struct Butterfly<B: Backend> {
    /// Real parts of the twiddles, `[log2 N, N/2, 2, 2]`.
    pub twiddle_re: Param<Tensor<B, 4>>,
    /// Imaginary parts of the twiddles, `[log2 N, N/2, 2, 2]`.
    pub twiddle_im: Param<Tensor<B, 4>>,
    #[module(skip)]
    n: usize,
    #[module(skip)]
    permutation: Permutation,
}

impl<B: Backend> Butterfly<B> {
    /// Transform size N.
    pub fn n(&self) -> usize {
        self.n
    }

    /// log2 N, the number of factors.
    pub fn log_n(&self) -> usize {
        self.n.trailing_zeros() as usize
    }

    /// The input permutation.
    pub fn permutation(&self) -> &Permutation {
        &self.permutation
    }

    /// The twiddles as f64 `(re, im)`, each `[log2 N, N/2, 2, 2]` row-major.
    pub fn twiddles_f64(&self) -> (Vec<f64>, Vec<f64>) {
        (to_f64_vec(self.twiddle_re.val()), to_f64_vec(self.twiddle_im.val()))
    }

    /// The dense N×N matrix the layer represents, computed in f64 on the CPU from its twiddles.
    pub fn to_matrix(&self) -> ComplexMatrix {
        let (re, im) = self.twiddles_f64();
        truth::butterfly::matrix(&re, &im, self.n, &self.permutation.indices(self.n))
            .expect("the layer's twiddles have the shape of its n by construction")
    }

    /// [`forward`](Self::forward) through the tensor-op reference on any backend, whatever
    /// kernels the backend has; the gradient comes from Burn's autodiff. Same shapes and errors.
    pub fn forward_reference<const D: usize>(
        &self,
        re: Tensor<B, D>,
        im: Tensor<B, D>,
    ) -> Result<(Tensor<B, D>, Tensor<B, D>)> {
        self.apply(re, im, butterfly_forward_reference)
    }

    fn apply<const D: usize>(
        &self,
        re: Tensor<B, D>,
        im: Tensor<B, D>,
        op_fn: impl FnOnce(
            Tensor<B, 2>,
            Tensor<B, 2>,
            Tensor<B, 4>,
            Tensor<B, 4>,
            &Permutation,
        ) -> (Tensor<B, 2>, Tensor<B, 2>),
    ) -> Result<(Tensor<B, D>, Tensor<B, D>)> {
        let op = "butterfly.forward";
        same_shape(op, &re, &im)?;
        let ((re, dims), (im, _)) = (rows(op, re, ("n", self.n))?, rows(op, im, ("n", self.n))?);
        let (yr, yi) = op_fn(re, im, self.twiddle_re.val(), self.twiddle_im.val(), &self.permutation);
        Ok((yr.reshape(dims), yi.reshape(dims)))
    }
}

impl<B: ButterflyOps> Butterfly<B> {
    /// Applies the butterfly to complex vectors along the last dimension.
    ///
    /// On wgpu and CUDA this runs the fused kernels (forward and backward), elsewhere the
    /// tensor-op reference; see [`ButterflyOps`].
    ///
    /// # Shapes
    /// - `re`, `im`: `[..., N]`, the same shape
    /// - returns `(re, im)`, each `[..., N]`
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the shapes differ or the last dimension is not N.
    pub fn forward<const D: usize>(&self, re: Tensor<B, D>, im: Tensor<B, D>) -> Result<(Tensor<B, D>, Tensor<B, D>)> {
        self.apply(re, im, B::butterfly)
    }

    /// Applies the butterfly to real vectors (imaginary part zero).
    ///
    /// # Shapes
    /// - `x`: `[..., N]`
    /// - returns `(re, im)`, each `[..., N]`
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the last dimension is not N.
    pub fn forward_real<const D: usize>(&self, x: Tensor<B, D>) -> Result<(Tensor<B, D>, Tensor<B, D>)> {
        let im = x.zeros_like();
        self.forward(x, im)
    }

    /// The transform of real signals of 2N samples through this butterfly of size N, their
    /// half-size member: the N + 1 bins `0 … N` (the rest follow from conjugate symmetry).
    /// Even and odd samples are packed as one complex vector of N, transformed, and split
    /// (the standard rfft step; [`ButterflyOps::butterfly_rfft`]: fused on wgpu and CUDA
    /// without autodiff, tensor ops elsewhere), half the butterfly work of
    /// [`forward_real`](Self::forward_real) on a butterfly of size 2N. When the layer is the
    /// unitary DFT of size N this is the unitary DFT of size 2N, numpy's
    /// `rfft(x, norm="ortho")`.
    ///
    /// # Shapes
    /// - `x`: `[..., 2N]`
    /// - returns `(re, im)`, each `[..., N + 1]`
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the last dimension is not 2N or the layer's N is below 2.
    pub fn rfft<const D: usize>(&self, x: Tensor<B, D>) -> Result<(Tensor<B, D>, Tensor<B, D>)> {
        let op = "butterfly.rfft";
        let (x, dims) = self.real_rows(op, x, ("2N", 2 * self.n))?;
        let (xr, xi) = B::butterfly_rfft(x, self.twiddle_re.val(), self.twiddle_im.val(), &self.permutation);
        Ok((xr.reshape(with_last(dims, self.n + 1)), xi.reshape(with_last(dims, self.n + 1))))
    }

    /// The inverse of [`rfft`](Self::rfft) for a unitary layer: real signals of 2N samples from
    /// their bins `0 … N`, numpy's `irfft(X, n=2N, norm="ortho")` when the layer is the unitary
    /// DFT of size N. As numpy's, it drops the imaginary parts of bins 0 and N. The layer's
    /// inverse is taken as `G⁻¹ z = conj(G conj z)`, exact for a unitary G (every learned DFT
    /// here is one to the precision it was trained to).
    ///
    /// # Shapes
    /// - `re`, `im`: `[..., N + 1]`, the same shape
    /// - returns `[..., 2N]`
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the shapes differ, the last dimension is not N + 1, or the
    /// layer's N is below 2.
    pub fn irfft<const D: usize>(&self, re: Tensor<B, D>, im: Tensor<B, D>) -> Result<Tensor<B, D>> {
        let op = "butterfly.irfft";
        same_shape(op, &re, &im)?;
        let ((re, dims), (im, _)) =
            (self.real_rows(op, re, ("N + 1", self.n + 1))?, self.real_rows(op, im, ("N + 1", self.n + 1))?);
        Ok(rfft::inverse(re, im, |re, im| self.apply_rows(re, im)).reshape(with_last(dims, 2 * self.n)))
    }

    /// `B`'s butterfly with this layer's twiddles on `[rows, n]` pairs, unchecked.
    fn apply_rows(&self, re: Tensor<B, 2>, im: Tensor<B, 2>) -> (Tensor<B, 2>, Tensor<B, 2>) {
        B::butterfly(re, im, self.twiddle_re.val(), self.twiddle_im.val(), &self.permutation)
    }

    /// `x` `[..., last]` as `[rows, last]`, with its shape, after checking `last`, that there is
    /// a signal, and N ≥ 2 (the split step's smallest size).
    fn real_rows<const D: usize>(
        &self,
        op: &'static str,
        x: Tensor<B, D>,
        last: (&str, usize),
    ) -> Result<(Tensor<B, 2>, [usize; D])> {
        if self.n < 2 {
            return Err(Error::invalid(op, "a butterfly of size 2 or more", format!("size {}", self.n)));
        }
        let (x, dims) = rows(op, x, last)?;
        if x.dims()[0] == 0 {
            return Err(Error::invalid(op, "at least one signal", format!("shape {dims:?}")));
        }
        Ok((x, dims))
    }

    /// The dense N×N matrix as the layer computes it: its forward applied to the identity on
    /// its own backend and dtype, then read back as f64. Unlike [`to_matrix`](Self::to_matrix)
    /// this includes the rounding of the backend's arithmetic.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when the N×N batch and its f64 copy do not fit.
    pub fn matrix_on_backend(&self) -> Result<ComplexMatrix> {
        dense_on_backend(self.n, &self.twiddle_re.device(), |re, im| self.forward(re, im))
    }
}

/// The dense N×N matrix of a linear layer as it computes it on `B`: `forward` applied to the
/// identity, read back as f64.
pub(crate) fn dense_on_backend<B: Backend>(
    n: usize,
    device: &B::Device,
    forward: impl FnOnce(Tensor<B, 2>, Tensor<B, 2>) -> Result<(Tensor<B, 2>, Tensor<B, 2>)>,
) -> Result<ComplexMatrix> {
    let float = std::mem::size_of::<B::FloatElem>();
    // The identity and output batches (re, im) on the device, then f64 copies and the matrix.
    let needed = memory::sum(&[memory::product(&[n, n, 6, float]), memory::product(&[n, n, 32])]);
    memory::ensure("butterfly.matrix", || format!("the dense N×N matrix at N = {n}"), needed)?;
    let eye = eye::<B>(n, device);
    let (yr, yi) = forward(eye.clone(), eye.zeros_like())?;
    // Row j of the output is M e_j, i.e. column j of M.
    let (yr, yi) = (to_f64_vec(yr), to_f64_vec(yi));
    Ok(ComplexMatrix::from_fn(n, |r, c| num_complex::Complex64::new(yr[c * n + r], yi[c * n + r])))
}

/// The images of the basis vectors `e_start … e_{start+count−1}` under a linear layer of size `n`
/// as it computes them on `B`, row-major `[count, n]` in f64 (row r is `M e_{start+r}`, column
/// `start + r` of its matrix).
/// The images of the rows of `x` (row-major `[rows, n]`) under `forward` on `device`.
pub(crate) fn images_on_backend<B: Backend>(
    n: usize,
    x: &[num_complex::Complex64],
    device: &B::Device,
    forward: impl FnOnce(Tensor<B, 2>, Tensor<B, 2>) -> Result<(Tensor<B, 2>, Tensor<B, 2>)>,
) -> Result<Vec<num_complex::Complex64>> {
    if x.is_empty() || !x.len().is_multiple_of(n) {
        return Err(Error::invalid("images", format!("a non-zero multiple of n = {n} values"), x.len()));
    }
    let rows = x.len() / n;
    let float = std::mem::size_of::<B::FloatElem>();
    let needed = memory::sum(&[memory::product(&[rows, n, 6, float]), memory::product(&[rows, n, 16])]);
    memory::ensure("images", || format!("{rows} vectors' images at N = {n}"), needed)?;
    let part =
        |f: fn(&num_complex::Complex64) -> f64| float_tensor::<B, 2>(x.iter().map(f).collect(), [rows, n], device);
    let (yr, yi) = forward(part(|z| z.re), part(|z| z.im))?;
    Ok(to_f64_vec(yr).into_iter().zip(to_f64_vec(yi)).map(|(re, im)| num_complex::Complex64::new(re, im)).collect())
}

pub(crate) fn basis_images_on_backend<B: Backend>(
    n: usize,
    start: usize,
    count: usize,
    device: &B::Device,
    forward: impl FnOnce(Tensor<B, 2>, Tensor<B, 2>) -> Result<(Tensor<B, 2>, Tensor<B, 2>)>,
) -> Result<Vec<num_complex::Complex64>> {
    if count == 0 || start.checked_add(count).is_none_or(|end| end > n) {
        return Err(Error::invalid(
            "basis_images",
            format!("basis vectors within 0..{n}"),
            format!("{start}..{start}+{count}"),
        ));
    }
    let float = std::mem::size_of::<B::FloatElem>();
    let needed = memory::sum(&[memory::product(&[count, n, 6, float]), memory::product(&[count, n, 32])]);
    memory::ensure("basis_images", || format!("{count} basis vectors' images at N = {n}"), needed)?;
    let mut v = vec![0.0; count * n];
    (0..count).for_each(|r| v[r * n + start + r] = 1.0);
    let x = float_tensor::<B, 2>(v, [count, n], device);
    let (yr, yi) = forward(x.clone(), x.zeros_like())?;
    Ok(to_f64_vec(yr).into_iter().zip(to_f64_vec(yi)).map(|(re, im)| num_complex::Complex64::new(re, im)).collect())
}

impl<B: Backend> Butterfly<B> {
    /// A layer with the twiddles and the permutation of an exact factor
    /// ([`crate::reference::factorizations`]), cast to `B`'s float type.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the twiddles are not `[log2 N, N/2, 2, 2]` for the
    /// permutation's N, or the permutation's indices are not a permutation.
    pub fn from_factor(factor: &Factor, device: &B::Device) -> Result<Self> {
        let op = "butterfly.from_factor";
        let n = factor.permutation.len();
        let log_n = check_power_of_two(op, n)?;
        let permutation = Permutation::gather(factor.permutation.clone())?;
        let len = log_n * n * 2;
        if factor.re.len() != len || factor.im.len() != len {
            return Err(Error::invalid(
                op,
                format!("{len} twiddles for N = {n}"),
                format!("{} and {}", factor.re.len(), factor.im.len()),
            ));
        }
        let shape = [log_n, n / 2, 2, 2];
        let param = |v: &[f64]| Param::from_tensor(float_tensor::<B, 4>(v.to_vec(), shape, device));
        Ok(Butterfly { twiddle_re: param(&factor.re), twiddle_im: param(&factor.im), n, permutation })
    }
}

impl<B: Backend> Butterfly<B> {
    /// The layer of size 2N whose first log2 N stages apply this layer to each half of the
    /// (permuted) input, with Haar-random unitary blocks (`seed`) in its last stage.
    ///
    /// With the bit reversal of 2N the first half holds the even samples in the bit-reversed
    /// order of N and the second half the odd ones, so a DFT of size N here gives stages
    /// `0 … log2 N − 1` of the radix-2 DFT of size 2N (decimation in time: `X_k = E_k + w^k O_k`);
    /// with the identity, a Hadamard transform of size N gives those of `H_2 ⊗ H_N`. The last
    /// stage is what remains to learn. The trainer starts large one-butterfly runs this way.
    /// (At N = 2 the bit reversal and the identity are one permutation, which the layer holds as
    /// the bit reversal: the doubled layer then has the bit reversal of 4.)
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the permutation is a gather (whose half-size pattern does not
    /// carry over to 2N by itself: see [`Butterfly::doubled_behind`]).
    pub fn doubled(&self, seed: u64) -> Result<Butterfly<B>> {
        if matches!(self.permutation, Permutation::Gather(_)) {
            return Err(Error::invalid(
                "butterfly.doubled",
                "a layer with the bit reversal or the identity",
                "a gather",
            ));
        }
        self.doubled_behind(&self.permutation, seed)
    }

    /// [`Butterfly::doubled`] behind `permutation`, a permutation of 2N (the bit reversal and the
    /// identity stand for theirs). Whatever it is, the first log2 N stages apply this layer's to
    /// each half of the input it gathers; the doubled layer is then this one on both halves of
    /// the input in an order `Q`, with `(P_N ⊕ P_N) · Q = P_2N`. Where `P_2N` is built by the rule
    /// that built `P_N` one level deeper (a self-similar member of Dao et al.'s family, the bit
    /// reversal among them), `Q` is that rule's top level: the split a recursive fast algorithm
    /// makes.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a gather `permutation` is not of size 2N.
    pub fn doubled_behind(&self, permutation: &Permutation, seed: u64) -> Result<Butterfly<B>> {
        let (n, log_n) = (self.n, self.log_n());
        if let Permutation::Gather(indices) = permutation {
            if indices.len() != 2 * n {
                return Err(Error::invalid("butterfly.doubled", format!("a permutation of {}", 2 * n), indices.len()));
            }
        }
        let (re, im) = self.twiddles_f64();
        let (last_re, last_im) = ButterflyInit::RandomUnitary { seed }.twiddles(2 * n);
        // Stage s of 2N: blocks 0 … N/2 − 1 act on the first half, the next N/2 on the second,
        // each as block k of stage s of N; the last stage of the random 2N twiddles.
        let last = log_n * 4 * n; // values of the first log2 N stages of 2N
        let factor = Factor {
            permutation: permutation.indices(2 * n),
            re: doubled_stages(&re, n, &last_re[last..]),
            im: doubled_stages(&im, n, &last_im[last..]),
        };
        Butterfly::from_factor(&factor, &self.twiddle_re.device())
    }
}

/// The exact unitary FFT butterfly of size n (shorthand for the default config), or its inverse.
///
/// # Errors
/// As [`ButterflyConfig::init`].
pub fn exact_fft<B: ButterflyOps>(n: usize, inverse: bool, device: &B::Device) -> Result<Butterfly<B>> {
    ButterflyConfig::new(n).with_init(ButterflyInit::Fft { inverse, norm: FftNorm::Ortho }).init(device)
}

/// `dims` with its last entry replaced by `last`.
fn with_last<const D: usize>(mut dims: [usize; D], last: usize) -> [usize; D] {
    dims[D - 1] = last;
    dims
}

/// An error naming `op` unless `re` and `im` have one shape.
fn same_shape<B: Backend, const D: usize>(op: &'static str, re: &Tensor<B, D>, im: &Tensor<B, D>) -> Result<()> {
    if re.dims() == im.dims() {
        return Ok(());
    }
    Err(Error::invalid(
        op,
        format!("re and im of the same shape (re is {:?})", re.dims()),
        format!("im of shape {:?}", im.dims()),
    ))
}

/// `x` `[..., last]` as `[rows, last]`, with its shape; an error naming `op` when its last
/// dimension is not `last` (`name` says what it is in the layer's terms, such as `n` or `2N`).
fn rows<B: Backend, const D: usize>(
    op: &'static str,
    x: Tensor<B, D>,
    (name, last): (&str, usize),
) -> Result<(Tensor<B, 2>, [usize; D])> {
    let dims = x.dims();
    if D == 0 || dims[D - 1] != last {
        return Err(Error::invalid(op, format!("last dimension {name} = {last}"), format!("shape {dims:?}")));
    }
    let rows = dims[..D - 1].iter().product::<usize>();
    Ok((x.reshape([rows, last]), dims))
}
