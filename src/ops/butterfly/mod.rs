//! The butterfly product as a backend op: the [`ButterflyOps`] trait and its value types, the
//! tensor-op twin (`reference.rs`), the fused CubeCL kernels (`kernel`) and the backend impls
//! (`cubecl.rs` without autodiff, `autodiff.rs` with the custom `Backward`).

#[cfg(feature = "fused")]
mod autodiff;
mod conv;
#[cfg(feature = "fused")]
mod cubecl;
#[cfg(feature = "fused")]
pub(crate) mod kernel;
mod permutation;
pub(crate) mod reference;
pub(crate) mod rfft;

#[cfg(feature = "fused")]
pub use kernel::{fused_passes, MAX_FUSED_N, MAX_SINGLE_PASS_N};
pub use permutation::Permutation;
pub use reference::{butterfly_forward_reference, butterfly_real_reference, butterfly_tangent_reference, Tangent};

use burn::tensor::{backend::Backend, Tensor};

/// The butterfly product as a backend op.
///
/// | backend | `butterfly` runs | gradient from |
/// |---|---|---|
/// | `NdArray`, `Candle` (and `Autodiff` of them) | the tensor-op reference | Burn's autodiff |
/// | `CubeBackend` (wgpu, CUDA) | the fused CubeCL forward kernel | — |
/// | `Autodiff<CubeBackend>` | the fused forward kernel | the fused backward kernel, through a custom `Backward` |
///
/// Where the fused kernel cannot run (N above `MAX_FUSED_N`, 2^16, or a device with too little
/// shared memory) the CubeCL backends take the reference path, whose gradient is again Burn's
/// autodiff: no path ever lacks a backward.
pub trait ButterflyOps: Backend {
    /// Applies `perm` and then the butterfly factors to a batch of complex vectors.
    ///
    /// # Shapes
    /// - `x_re`, `x_im`: `[batch, n]`
    /// - `tw_re`, `tw_im`: `[log2 n, n/2, 2, 2]`
    /// - returns `(re, im)`, each `[batch, n]`
    ///
    /// The default is the tensor-op reference ([`butterfly_forward_reference`]); CubeCL
    /// backends override it with the fused kernels, which apply every permutation as they
    /// load the input (the bit reversal computed, a [`Permutation::Gather`] read from a table of
    /// its indices) and scatter the input gradient back through it as they store.
    fn butterfly(
        x_re: Tensor<Self, 2>,
        x_im: Tensor<Self, 2>,
        tw_re: Tensor<Self, 4>,
        tw_im: Tensor<Self, 4>,
        perm: &Permutation,
    ) -> (Tensor<Self, 2>, Tensor<Self, 2>) {
        butterfly_forward_reference(x_re, x_im, tw_re, tw_im, perm)
    }

    /// [`butterfly`](Self::butterfly) for real vectors and real twiddles (every imaginary part
    /// zero): `y = B(θ) P x` in the reals.
    ///
    /// # Shapes
    /// - `x`: `[batch, n]`
    /// - `tw`: `[log2 n, n/2, 2, 2]`
    /// - returns `[batch, n]`
    ///
    /// Where [`butterfly`](Self::butterfly) is fused, this is that fused kernel (and its fused
    /// backward) with zero imaginary parts, which the kernel reads and multiplies like any
    /// others: one launch each way, at about four times the arithmetic a real kernel would need.
    /// Elsewhere it is the real tensor-op reference ([`butterfly_real_reference`]), a quarter of
    /// the complex one's multiplications. Either way the gradient exists.
    fn butterfly_real(x: Tensor<Self, 2>, tw: Tensor<Self, 4>, perm: &Permutation) -> Tensor<Self, 2> {
        let n = x.dims()[1];
        if Self::butterfly_is_fused(n, &x.device()) {
            let (x_im, tw_im) = (x.zeros_like(), tw.zeros_like());
            Self::butterfly(x, x_im, tw, tw_im, perm).0
        } else {
            butterfly_real_reference(x, tw, perm)
        }
    }

    /// The forward-mode derivative of [`butterfly`](Self::butterfly): `(y, dy)` with
    /// `y = B(θ) P x` and `dy = B(θ) P dx + (∂B/∂θ · dθ) P x`, the change of the output along
    /// the input direction `dx` and the twiddle direction `dtw` (what a Gauss–Newton solver's
    /// Jacobian-vector products need). Not differentiable itself on the CubeCL backends
    /// without autodiff, where it is one fused launch per pass; the default (also under
    /// `Autodiff`) is the tensor-op reference ([`butterfly_tangent_reference`]), whose gradient
    /// is Burn's.
    ///
    /// # Shapes
    /// - `x`, `dx`: `(re, im)`, each `[batch, n]`
    /// - `tw`, `dtw`: `(re, im)`, each `[log2 n, n/2, 2, 2]`
    /// - returns `((y_re, y_im), (dy_re, dy_im))`, each `[batch, n]`
    fn butterfly_tangent(
        x: (Tensor<Self, 2>, Tensor<Self, 2>),
        dx: (Tensor<Self, 2>, Tensor<Self, 2>),
        tw: (&Tensor<Self, 4>, &Tensor<Self, 4>),
        dtw: (&Tensor<Self, 4>, &Tensor<Self, 4>),
        perm: &Permutation,
    ) -> Tangent<Self> {
        butterfly_tangent_reference(x, dx, tw, dtw, perm)
    }

    /// Whether [`butterfly`](Self::butterfly) takes the fused kernel path for size `n` on
    /// `device` (false for the reference backends).
    fn butterfly_is_fused(_n: usize, _device: &Self::Device) -> bool {
        false
    }

    /// Whether [`butterfly_tangent`](Self::butterfly_tangent) takes the fused kernel path for
    /// size `n` on `device` (false for the reference backends and under `Autodiff`).
    fn butterfly_tangent_is_fused(_n: usize, _device: &Self::Device) -> bool {
        false
    }

    /// The FFT convolution through this butterfly (`conv.rs`): `x` `[batch,
    /// channels, L]` with the taps `weight` `[channels, K]` and `bias` `[channels]`, zero-padded to
    /// `n` → `[batch, channels, out_len]`. Default: the tensor-op reference
    /// ([`fft_conv_reference`]), whose gradient comes
    /// from Burn's autodiff; CubeCL backends run it fused (three launches) without autodiff, and
    /// under it where the twiddles are not tracked (the backward through the same kernels). The
    /// caller checks the shapes (`L, K, out_len ≤ n`, `tw_*` of size `n`).
    fn butterfly_conv(
        x: Tensor<Self, 3>,
        weight: Tensor<Self, 2>,
        bias: Option<Tensor<Self, 1>>,
        tw_re: Tensor<Self, 4>,
        tw_im: Tensor<Self, 4>,
        perm: &Permutation,
        size: ConvSize,
    ) -> Tensor<Self, 3> {
        fft_conv_reference(x, weight, bias, tw_re, tw_im, perm, size)
    }

    /// Whether [`butterfly_conv`](Self::butterfly_conv) takes the fused kernels for size `n` on
    /// `device` (false for the reference backends and under `Autodiff`).
    fn butterfly_conv_is_fused(_n: usize, _device: &Self::Device) -> bool {
        false
    }

    /// The rfft's split step (`rfft.rs`): from `Z = G z` `[rows, m]` (re, im; m a power of two
    /// ≥ 2) to the `m + 1` bins `[rows, m + 1]` of the transform of size 2m. Default: tensor ops
    /// (their gradient from Burn's autodiff); on wgpu and CUDA one launch, with and without
    /// autodiff (the backward one launch of its adjoint).
    fn rfft_split(zr: Tensor<Self, 2>, zi: Tensor<Self, 2>) -> (Tensor<Self, 2>, Tensor<Self, 2>) {
        rfft::split(zr, zi)
    }

    /// The rfft's merge step, the inverse of [`rfft_split`](Self::rfft_split): from the `m + 1`
    /// bins `[rows, m + 1]` to `√2 · Z` `[rows, m]`, the imaginary parts of bins 0 and m dropped.
    /// Default: tensor ops; on wgpu and CUDA one launch (and one for the backward).
    fn rfft_merge(xr: Tensor<Self, 2>, xi: Tensor<Self, 2>) -> (Tensor<Self, 2>, Tensor<Self, 2>) {
        rfft::merge(xr, xi)
    }

    /// The transform of real rows `x` `[rows, 2m]` through this butterfly of size `m` (`tw_*`
    /// `[log2 m, m/2, 2, 2]`, `perm` of size m): packed as m complex values, transformed, split
    /// into the `m + 1` bins `[rows, m + 1]` (re, im), the unitary rfft of size 2m when the
    /// butterfly is the unitary DFT of m (see `rfft.rs`). Default: [`rfft_reference`], tensor
    /// ops around [`butterfly`](Self::butterfly), whose gradient comes from Burn's autodiff; CubeCL
    /// backends without autodiff run it fused (one launch after the twiddles' relay). The
    /// caller checks the shapes (`m ≥ 2`).
    fn butterfly_rfft(
        x: Tensor<Self, 2>,
        tw_re: Tensor<Self, 4>,
        tw_im: Tensor<Self, 4>,
        perm: &Permutation,
    ) -> (Tensor<Self, 2>, Tensor<Self, 2>) {
        rfft_reference(x, tw_re, tw_im, perm)
    }

    /// The FFT convolution of real signals through this butterfly of half the FFT size (rfft,
    /// the product of the `n/2 + 1` bins, irfft; `conv.rs`), shapes as [`fft_conv_real`].
    /// Default: that tensor-op path, whose gradient comes from Burn's autodiff; CubeCL backends
    /// without autodiff run it fused (three launches, the split and merge steps on-chip), and so
    /// does `Autodiff` over them where the twiddles are not tracked (a frozen FFT), its backward
    /// the convolution's adjoint through the same kernels (three launches, the taps' gradient
    /// summed over the batch by a tensor op).
    fn butterfly_conv_real(
        x: Tensor<Self, 3>,
        weight: Tensor<Self, 2>,
        bias: Option<Tensor<Self, 1>>,
        tw_re: Tensor<Self, 4>,
        tw_im: Tensor<Self, 4>,
        perm: &Permutation,
        size: ConvSize,
    ) -> Tensor<Self, 3> {
        fft_conv_real(x, weight, bias, tw_re, tw_im, perm, size)
    }

    /// Whether [`butterfly_conv_real`](Self::butterfly_conv_real) and
    /// [`butterfly_rfft`](Self::butterfly_rfft) take the fused kernels for the FFT size `n` (a
    /// butterfly of `n / 2`) on `device` (false for the reference backends and under `Autodiff`).
    fn butterfly_conv_real_is_fused(_n: usize, _device: &Self::Device) -> bool {
        false
    }
}

/// The sizes of an FFT convolution: the transform's size `n` (a power of two, the butterfly's)
/// and how many output samples to keep (`out_len ≤ n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvSize {
    /// The transform's size.
    pub n: usize,
    /// Output samples kept.
    pub out_len: usize,
}

/// The FFT convolution (see `conv.rs`) as tensor ops on any backend, the butterflies through
/// `B`'s own (fused where it has kernels); its gradient comes from Burn's autodiff.
///
/// # Shapes
/// - `x`: `[batch, channels, L]`, `L ≤ n`
/// - `weight`: `[channels, K]`, `K ≤ n`; `bias`: `[channels]`
/// - `tw_re`, `tw_im`: `[log2 n, n/2, 2, 2]`
/// - returns `[batch, channels, size.out_len]`, `out_len ≤ n`
///
/// The caller checks the shapes (the layer does, with errors naming it).
pub fn fft_conv_reference<B: ButterflyOps>(
    x: Tensor<B, 3>,
    weight: Tensor<B, 2>,
    bias: Option<Tensor<B, 1>>,
    tw_re: Tensor<B, 4>,
    tw_im: Tensor<B, 4>,
    perm: &Permutation,
    size: ConvSize,
) -> Tensor<B, 3> {
    conv::composed(x, weight, bias, size.n, size.out_len, |re, im| {
        B::butterfly(re, im, tw_re.clone(), tw_im.clone(), perm)
    })
}

/// The transform of real rows `x` `[rows, 2m]` through the butterfly of size m as tensor ops
/// around `B`'s own butterfly (fused where it has kernels): packed as m complex values,
/// transformed, split into the `m + 1` bins (re, im) `[rows, m + 1]` (see
/// [`ButterflyOps::butterfly_rfft`]); its gradient comes from Burn's autodiff.
///
/// # Shapes
/// - `x`: `[rows, 2m]`, `m ≥ 2`
/// - `tw_re`, `tw_im`: `[log2 m, m/2, 2, 2]`; `perm` of size m
/// - returns `(re, im)`, each `[rows, m + 1]`
pub fn rfft_reference<B: ButterflyOps>(
    x: Tensor<B, 2>,
    tw_re: Tensor<B, 4>,
    tw_im: Tensor<B, 4>,
    perm: &Permutation,
) -> (Tensor<B, 2>, Tensor<B, 2>) {
    rfft::forward(x, |re, im| B::butterfly(re, im, tw_re.clone(), tw_im.clone(), perm))
}

/// The FFT convolution of real signals through the butterfly of half the FFT size: rfft, the
/// product of the `n/2 + 1` bins, irfft (see `conv.rs`), as tensor ops with `B`'s own butterflies
/// (fused where it has kernels); its gradient comes from Burn's autodiff. About half the
/// butterfly work of [`fft_conv_reference`].
///
/// # Shapes
/// As [`fft_conv_reference`], but `tw_re`, `tw_im`: `[log2 n − 1, n/4, 2, 2]` (a butterfly of
/// size n/2), `n ≥ 4`, and `perm` of size n/2.
pub fn fft_conv_real<B: ButterflyOps>(
    x: Tensor<B, 3>,
    weight: Tensor<B, 2>,
    bias: Option<Tensor<B, 1>>,
    tw_re: Tensor<B, 4>,
    tw_im: Tensor<B, 4>,
    perm: &Permutation,
    size: ConvSize,
) -> Tensor<B, 3> {
    conv::real_composed(x, weight, bias, size.n, size.out_len, |re, im| {
        B::butterfly(re, im, tw_re.clone(), tw_im.clone(), perm)
    })
}
