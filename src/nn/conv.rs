//! FFT convolution with a (trained) butterfly FFT: [`FftConv1dConfig`] and [`FftConv1d`].
//!
//! Each channel of the input is convolved with its own filter of K taps (a depthwise
//! convolution, like Burn's `Conv1d` with `groups = channels`), through the FFT:
//!
//! 1. zero-pad the signal and the taps to N, a power of two: N ≥ L + K − 1 for a linear
//!    convolution, N = L for a circular one;
//! 2. `X = F x`, `H = √N · F h` with F the butterfly (unitary, so `F(x ∗ h) = √N · Fx ⊙ Fh`);
//! 3. `y = F⁻¹(X ⊙ H)`, where `F⁻¹ z = conj(F conj(z))` — exact for the unitary, symmetric DFT,
//!    and what a trained approximation of it is used as;
//! 4. crop, add the bias.
//!
//! It is a convolution (the filter is flipped), not Burn `Conv1d`'s cross-correlation:
//! `y[n] = Σ_k h[k] · x[n − k]` with `x` zero outside `0…L−1` (causal: output `n = 0…L−1`), or all
//! `L + K − 1` outputs ([`ConvOutput::Full`]), or indices mod L ([`ConvOutput::Circular`]).
//!
//! With `rfft` set, steps 2 and 3 run through a butterfly of size N/2 instead (rfft, the product
//! of N/2 + 1 bins, irfft).
//!
//! The op is [`ButterflyOps::butterfly_conv`] ([`ButterflyOps::butterfly_conv_real`] through
//! rfft): on wgpu and CUDA three fused launches (the twiddles relaid, the taps transformed, every
//! channel convolved) in inference, and in training with a frozen FFT, whose backward is the
//! convolution's adjoint (correlations with the taps and with the signal) through the same
//! kernels, exact for the exact FFT and within a checkpoint's own error for a trained one.
//! Elsewhere (a learnable FFT, a row larger than a cube holds, ndarray, candle) the tensor-op
//! reference ([`crate::ops::butterfly::fft_conv_reference`],
//! [`crate::ops::butterfly::fft_conv_real`]), its gradient from Burn's autodiff.
//!
//! Where the FFT comes from is [`FftSource`]: the exact FFT or a shipped checkpoint, both frozen
//! (no gradient, never updated by an optimiser), or a learnable butterfly started at the exact FFT.

use std::path::PathBuf;

use burn::config::Config;
use burn::module::{Initializer, Module, Param};
use burn::tensor::{backend::Backend, Tensor};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::nn::butterfly::{exact_fft, Butterfly};
use crate::ops::butterfly::ConvSize;
use crate::ops::ButterflyOps;

/// Where an [`FftConv1d`]'s FFT comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum FftSource {
    /// The exact unitary FFT, frozen.
    Exact,
    /// A butterfly from a checkpoint file (for example `checkpoints/dft-n256-f32.lfft`), frozen.
    /// Its N must be the size the convolution needs.
    Checkpoint(PathBuf),
    /// A butterfly started at the exact FFT and trained with the rest of the model.
    Learnable,
}

/// Which outputs of the convolution are kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConvOutput {
    /// Outputs 0…L−1 of the linear convolution (a causal FIR filter).
    #[default]
    Causal,
    /// All L + K − 1 outputs of the linear convolution.
    Full,
    /// The circular convolution of length L (L a power of two, K ≤ L).
    Circular,
}

/// Configuration of an [`FftConv1d`].
#[derive(Config, Debug)]
pub struct FftConv1dConfig {
    /// Channels C (each has its own filter).
    pub channels: usize,
    /// Taps per filter, K.
    pub kernel_size: usize,
    /// Add a learnable bias per channel.
    #[config(default = true)]
    pub bias: bool,
    /// Where the FFT comes from.
    #[config(default = "FftSource::Exact")]
    pub fft: FftSource,
    /// Which outputs are kept.
    #[config(default = "ConvOutput::Causal")]
    pub output: ConvOutput,
    /// Transform the real signals and taps through a butterfly of half the FFT size, N/2
    /// (rfft and irfft: [`Butterfly::rfft`]), instead of one of size N on a zero imaginary part:
    /// half the butterfly work. The layer's FFT then has size N/2 (a checkpoint must be of N/2),
    /// and N is at least 4.
    #[config(default = false)]
    pub rfft: bool,
    /// Initialiser of the taps and the bias: Burn `Conv1d`'s default (Kaiming uniform with gain
    /// 1/√3, fan-in K).
    #[config(default = "Initializer::KaimingUniform { gain: 0.577_350_269_189_625_8, fan_out_only: false }")]
    pub initializer: Initializer,
}

/// The FFT size for signals of `length` samples: the smallest power of two holding the linear
/// convolution, or `length` itself for a circular one; at least `smallest` (2, or 4 for the
/// rfft path, whose split step needs a half-size butterfly of 2).
fn fft_size(op: &'static str, output: ConvOutput, length: usize, kernel: usize, smallest: usize) -> Result<usize> {
    match output {
        ConvOutput::Circular => {
            if !length.is_power_of_two() || length < smallest || kernel > length {
                return Err(Error::invalid(op, format!("for a circular convolution a signal length that is a power of two ≥ {smallest} and ≥ kernel_size = {kernel}"), length));
            }
            Ok(length)
        }
        _ => Ok((length + kernel - 1).next_power_of_two().max(smallest)),
    }
}

impl FftConv1dConfig {
    /// Builds the layer for signals of `length` samples (the FFT size depends on it) on `device`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for zero channels or taps, a kernel longer than the signal, a
    /// circular convolution of a length that is not a power of two, or a checkpoint whose N is
    /// not the FFT size needed; checkpoint read errors.
    pub fn init<B: ButterflyOps>(&self, length: usize, device: &B::Device) -> Result<FftConv1d<B>> {
        let op = "fft_conv1d.init";
        if self.channels == 0 {
            return Err(Error::invalid(op, "channels ≥ 1", self.channels));
        }
        if self.kernel_size == 0 {
            return Err(Error::invalid(op, "kernel_size ≥ 1", self.kernel_size));
        }
        if self.kernel_size > length {
            return Err(Error::invalid(
                op,
                format!("a signal at least as long as the kernel ({} taps)", self.kernel_size),
                format!("length {length}"),
            ));
        }
        let n = fft_size(op, self.output, length, self.kernel_size, if self.rfft { 4 } else { 2 })?;
        // The butterfly's own size: N, or N/2 on the rfft path.
        let size = if self.rfft { n / 2 } else { n };
        let fft: Butterfly<B> = match &self.fft {
            FftSource::Exact => exact_fft(size, false, device)?.no_grad(),
            FftSource::Learnable => exact_fft(size, false, device)?,
            FftSource::Checkpoint(path) => {
                let layer = Butterfly::from_checkpoint(path, device)?;
                if layer.n() != size {
                    let half = if self.rfft { format!(", half the FFT size {n}: rfft") } else { String::new() };
                    return Err(Error::invalid(
                        op,
                        format!(
                            "a checkpoint of N = {size} (signals of {length} samples, kernel {} taps{half})",
                            self.kernel_size
                        ),
                        format!("{}: N = {}", path.display(), layer.n()),
                    ));
                }
                layer.no_grad()
            }
        };
        let k = self.kernel_size;
        let weight = Param::from_tensor(own_dtype(self.initializer.init_with::<B, 2, _>(
            [self.channels, k],
            Some(k),
            None,
            device,
        )));
        let bias = self.bias.then(|| {
            Param::from_tensor(own_dtype(self.initializer.init_with::<B, 1, _>([self.channels], Some(k), None, device)))
        });
        Ok(FftConv1d {
            weight,
            bias,
            fft,
            channels: self.channels,
            kernel_size: k,
            length,
            n,
            output: self.output,
            rfft: self.rfft,
        })
    }
}

/// The initialiser's value in `B`'s own float type, as an untracked leaf.
///
/// Burn's initialisers create the device's default dtype, which `NdArray<f32>` and
/// `NdArray<f64>` (or the two candle backends) share (see `crate::tensors`), so a cast may be a
/// real op. The value is taken off the autodiff graph first: a cast of a tracked tensor is not a
/// leaf, and `Param::from_tensor` could not make it a parameter again.
fn own_dtype<B: Backend, const D: usize>(init: Param<Tensor<B, D>>) -> Tensor<B, D> {
    init.val().set_require_grad(false).cast(<B::FloatElem as burn::tensor::Element>::dtype())
}

/// Depthwise 1-D convolution through a butterfly FFT (see the module docs).
///
/// # Example
/// ```
/// use burn::backend::NdArray;
/// use burn::module::Initializer;
/// use burn::tensor::Tensor;
/// use learned_fft::{to_f64_vec, FftConv1dConfig};
///
/// let device = Default::default();
/// // One channel, two taps of 1 and no bias, for signals of 6 samples: y[n] = x[n] + x[n − 1].
/// let conv = FftConv1dConfig::new(1, 2)
///     .with_bias(false)
///     .with_initializer(Initializer::Constant { value: 1.0 })
///     .init::<NdArray<f64>>(6, &device)?;
/// assert_eq!((conv.fft_size(), conv.output_length()), (8, 6));
/// let x = Tensor::<NdArray<f64>, 3>::from_floats([[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]], &device);
/// let y = to_f64_vec(conv.forward(x)?);
/// let want = [1.0, 3.0, 5.0, 7.0, 9.0, 11.0];
/// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-9));
/// # Ok::<(), learned_fft::Error>(())
/// ```
#[derive(Module, Debug)]
pub struct FftConv1d<B: Backend> {
    /// Filter taps, `[channels, kernel_size]`.
    pub weight: Param<Tensor<B, 2>>,
    /// Bias, `[channels]`.
    pub bias: Option<Param<Tensor<B, 1>>>,
    /// The FFT: of size N, or N/2 on the rfft path.
    pub fft: Butterfly<B>,
    #[module(skip)]
    channels: usize,
    #[module(skip)]
    kernel_size: usize,
    #[module(skip)]
    length: usize,
    #[module(skip)]
    n: usize,
    #[module(skip)]
    output: ConvOutput,
    #[module(skip)]
    rfft: bool,
}

impl<B: ButterflyOps> FftConv1d<B> {
    /// The FFT size N.
    pub fn fft_size(&self) -> usize {
        self.n
    }

    /// Output length for the configured signal length.
    pub fn output_length(&self) -> usize {
        match self.output {
            ConvOutput::Full => self.length + self.kernel_size - 1,
            _ => self.length,
        }
    }

    /// Applies the convolution.
    ///
    /// # Shapes
    /// - `x`: `[batch, channels, L]`, L the length given at `init`
    /// - returns `[batch, channels, L]` (causal, circular) or `[batch, channels, L + K − 1]` (full)
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the channels or the length differ from the layer's.
    pub fn forward(&self, x: Tensor<B, 3>) -> Result<Tensor<B, 3>> {
        let [batch, channels, length] = x.dims();
        if channels != self.channels || length != self.length {
            return Err(Error::invalid(
                "fft_conv1d.forward",
                format!("input [batch, {}, {}] (channels, length)", self.channels, self.length),
                format!("[{batch}, {channels}, {length}]"),
            ));
        }
        // Fused on CubeCL backends without autodiff (and through rfft with a frozen FFT under
        // autodiff too), the tensor-op reference (with its autodiff gradient) elsewhere:
        // `ButterflyOps::butterfly_conv`, or `butterfly_conv_real` through the half-size butterfly.
        let conv = if self.rfft { B::butterfly_conv_real } else { B::butterfly_conv };
        Ok(conv(
            x,
            self.weight.val(),
            self.bias.as_ref().map(|b| b.val()),
            self.fft.twiddle_re.val(),
            self.fft.twiddle_im.val(),
            self.fft.permutation(),
            ConvSize { n: self.n, out_len: self.output_length() },
        ))
    }
}
