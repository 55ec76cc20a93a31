//! FFT convolution through a butterfly: the op behind [`FftConv1d`](crate::nn::conv::FftConv1d).
//!
//! Each channel `c` of a signal `x` `[batch, channels, L]` is convolved with its taps `h[c]`
//! `[channels, K]` through the butterfly `F` (`[log2 N, N/2, 2, 2]` twiddles and an input
//! permutation): zero-pad both to N, `X = F x`, `H = √N · F h`, `y = Re F conj(X ⊙ H)`, crop to
//! the first `out_len` samples, add `bias[c]`. For the unitary DFT `F conj(z) = conj(F⁻¹ z)`, so
//! this is the linear (or, with `N = L`, circular) convolution.
//!
//! - [`fft_conv_reference`]: the tensor-op twin, three butterflies (fused where the backend has
//!   kernels) and the spectrum product as tensor ops; any backend, its gradient from Burn's
//!   autodiff.
//! - `kernel`: the fused forward for CubeCL backends without autodiff (inference): one launch for
//!   the taps' spectra, one for the convolution (both transforms and the product on-chip).
//!   Under autodiff the reference runs, so every path that records a graph has its backward.
//!
//! The dispatch is [`ButterflyOps::butterfly_conv`](crate::ops::ButterflyOps::butterfly_conv).

pub(crate) mod kernel;
mod reference;

pub use reference::fft_conv_reference;
