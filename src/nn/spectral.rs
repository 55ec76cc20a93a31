//! The spectral loss: compares two signals by the magnitudes of their short-time spectra.
//!
//! For signals `[batch, T]`, frames of W samples start at 0 and step H; there are
//! ⌊(T − W) / H⌋ + 1 of them (with `center`, the signal is first reflect-padded by W/2 on both
//! sides, like `torch.stft(center=True)`). Each frame is windowed and transformed; bins
//! 0…W/2 are kept. The loss is the distance between the two magnitude spectrograms, reduced,
//! plus an optional spectral-convergence term.
//!
//! **eps policy.** `Magnitude::Linear` is `sqrt(re² + im² + eps)` and `Magnitude::Log` is
//! `½ ln(re² + im² + eps)`, so their gradients stay finite where the spectrum is zero;
//! `Magnitude::Power` is `re² + im²`, smooth everywhere. The spectral-convergence norms are
//! `sqrt(Σ … + eps)` for the same reason. eps defaults to 1e-8 (relative to signals of unit
//! scale).
//!
//! **Two paths, one loss.** The magnitude spectrogram goes through [`SpectralOps`]: on CubeCL
//! backends (wgpu, CUDA) the fused kernels of [`crate::ops::spectral`] (each frame's FFT
//! on-chip; the backward accumulates every bin's and every overlapping frame's contribution into
//! each sample, deterministically); elsewhere, or when [`SpectralLossConfig::kernel`] asks for
//! it, the reference twin: framing with tensor ops, the DFT as a matmul with a cos/sin basis
//! computed in f64 (the window folded in), its gradient from Burn's autodiff. The fused kernels
//! need W to be a power of two up to [`MAX_FUSED_WIN`]; with
//! [`KernelChoice::Auto`] other windows take the reference path, with [`KernelChoice::Fused`]
//! they are an error. The distance and the reductions are tensor ops on both paths; the sums
//! are taken one axis at a time (no atomics), so the loss is deterministic.

use burn::config::Config;
use burn::module::Module;
use burn::nn::loss::Reduction;
use burn::tensor::{backend::Backend, Tensor};

use crate::error::{Error, Result};
use crate::ops::spectral::{
    check_pair, check_stft, distance, frame_count, loss_from_magnitudes, reflect_indices, stft_magnitudes_reference,
    Distance, LossParams, Magnitude, SpectralOps, StftTables, Window, MAX_FUSED_WIN,
};
use crate::ops::KernelChoice;
use crate::tensors::select_columns;

/// Configuration of a [`SpectralLoss`].
#[derive(Config, Debug)]
pub struct SpectralLossConfig {
    /// Window (and DFT) length W, at least 2.
    pub win: usize,
    /// Hop H between frame starts, at least 1.
    pub hop: usize,
    /// Analysis window.
    #[config(default = "Window::Hann")]
    pub window: Window,
    /// Magnitude measure.
    #[config(default = "Magnitude::Linear")]
    pub magnitude: Magnitude,
    /// Distance between magnitudes.
    #[config(default = "Distance::L1")]
    pub distance: Distance,
    /// The eps of the magnitude and of the spectral-convergence norms (see the module docs).
    #[config(default = 1e-8)]
    pub eps: f64,
    /// Weight of the spectral-convergence term ‖|Y| − |X|‖_F / ‖|Y|‖_F (0: off).
    #[config(default = 0.0)]
    pub spectral_convergence: f64,
    /// Reflect-pad the signal by W/2 on both sides first (torch.stft's `center=True`).
    #[config(default = false)]
    pub center: bool,
    /// Fused kernels or the reference twin (see the module docs).
    #[config(default = "KernelChoice::Auto")]
    pub kernel: KernelChoice,
}

impl SpectralLossConfig {
    /// Builds the loss on `device`, after checking the configuration.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when W < 2, H = 0, eps is not finite and positive or the
    /// spectral-convergence weight is negative or not finite.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<SpectralLoss<B>> {
        let op = "spectral_loss.init";
        if self.win < 2 {
            return Err(Error::invalid(op, "win ≥ 2", self.win));
        }
        if self.hop == 0 {
            return Err(Error::invalid(op, "hop ≥ 1", self.hop));
        }
        if !(self.eps.is_finite() && self.eps > 0.0) {
            return Err(Error::invalid(op, "eps finite and > 0", self.eps));
        }
        if !(self.spectral_convergence.is_finite() && self.spectral_convergence >= 0.0) {
            return Err(Error::invalid(op, "spectral_convergence finite and ≥ 0", self.spectral_convergence));
        }
        Ok(SpectralLoss { tables: StftTables::new(self.win, self.window, device)?, config: self.clone() })
    }
}

/// The spectral loss (see the module docs). A Burn [`Module`] without parameters (its window
/// and DFT tables are constants), so a model can hold it as a field.
///
/// # Example
/// ```
/// use burn::backend::NdArray;
/// use burn::nn::loss::Reduction;
/// use burn::tensor::{Distribution, Tensor};
/// use learned_fft::SpectralLossConfig;
///
/// let device = Default::default();
/// // Frames of 64 samples every 16.
/// let loss = SpectralLossConfig::new(64, 16).init::<NdArray>(&device)?;
/// let x = Tensor::<NdArray, 2>::random([2, 256], Distribution::Default, &device);
/// assert_eq!(loss.frames(256), Some(13));
/// let same = loss.forward(x.clone(), x.clone(), Reduction::Mean)?;
/// assert!(same.into_scalar().abs() < 1e-6);
/// let apart = loss.forward(x.clone(), x * 2.0, Reduction::Mean)?;
/// assert!(apart.into_scalar() > 0.0);
/// # Ok::<(), learned_fft::Error>(())
/// ```
#[derive(Module, Debug)]
pub struct SpectralLoss<B: Backend> {
    tables: StftTables<B>,
    #[module(skip)]
    config: SpectralLossConfig,
}

impl<B: SpectralOps> SpectralLoss<B> {
    /// The configuration.
    pub fn config(&self) -> &SpectralLossConfig {
        &self.config
    }

    /// Number of bins, W/2 + 1.
    pub fn bins(&self) -> usize {
        self.config.win / 2 + 1
    }

    /// Number of frames for signals of `t` samples (after centering, if on).
    pub fn frames(&self, t: usize) -> Option<usize> {
        let t = if self.config.center { t + 2 * (self.config.win / 2) } else { t };
        frame_count(t, self.config.win, self.config.hop)
    }

    /// Whether [`forward`](Self::forward) takes the fused kernels on `device`.
    pub fn is_fused(&self, device: &B::Device) -> bool {
        self.config.kernel != KernelChoice::Reference && B::stft_is_fused(self.config.win, device)
    }

    /// The signal as framed: reflect-padded by W/2 on both sides when `center` is on.
    fn pad(&self, x: Tensor<B, 2>, op: &'static str) -> Result<Tensor<B, 2>> {
        if !self.config.center {
            return Ok(x);
        }
        let t = x.dims()[1];
        let pad = self.config.win / 2;
        if pad >= t {
            return Err(Error::invalid(
                op,
                format!("more than W/2 = {pad} samples per signal to reflect-pad (center = true)"),
                t,
            ));
        }
        Ok(select_columns(x, reflect_indices(t, pad)))
    }

    /// Whether this loss takes the fused kernels on `device`; with `KernelChoice::Fused`, an
    /// error where they cannot run.
    fn use_fused(&self, device: &B::Device, op: &'static str) -> Result<bool> {
        let c = &self.config;
        match c.kernel {
            KernelChoice::Reference => Ok(false),
            KernelChoice::Auto => Ok(B::stft_is_fused(c.win, device)),
            KernelChoice::Fused if B::stft_is_fused(c.win, device) => Ok(true),
            KernelChoice::Fused => Err(Error::invalid(
                op,
                format!("a window the fused kernels support (kernel = Fused: a CubeCL backend and W a power of two in 2…{})", MAX_FUSED_WIN),
                format!("W = {} on {}", c.win, std::any::type_name::<B>()),
            )),
        }
    }

    /// One signal batch's magnitude spectrogram (already padded) on the chosen path.
    fn spectrogram(&self, x: Tensor<B, 2>, fused: bool) -> Result<Tensor<B, 3>> {
        let c = &self.config;
        if fused {
            B::stft_magnitudes(x, &self.tables, c.hop, c.magnitude, c.eps)
        } else {
            stft_magnitudes_reference(x, &self.tables, c.hop, c.magnitude, c.eps)
        }
    }

    /// Checks and pads both inputs; returns them with the path to take.
    fn prepare(
        &self,
        pred: Tensor<B, 2>,
        target: Tensor<B, 2>,
        op: &'static str,
    ) -> Result<(Tensor<B, 2>, Tensor<B, 2>, bool)> {
        check_pair(op, &pred, &target)?;
        let fused = self.use_fused(&pred.device(), op)?;
        let (pred, target) = (self.pad(pred, op)?, self.pad(target, op)?);
        check_stft(op, &pred, self.config.win, self.config.hop)?;
        Ok((pred, target, fused))
    }

    /// The two magnitude spectrograms.
    ///
    /// # Shapes
    /// - `pred`, `target`: `[batch, T]`
    /// - returns two `[batch, frames, W/2 + 1]`
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the shapes differ or T is shorter than W.
    pub fn spectrograms(&self, pred: Tensor<B, 2>, target: Tensor<B, 2>) -> Result<(Tensor<B, 3>, Tensor<B, 3>)> {
        let (pred, target, fused) = self.prepare(pred, target, "spectral_loss.forward")?;
        Ok((self.spectrogram(pred, fused)?, self.spectrogram(target, fused)?))
    }

    /// The per-(frame, bin) distance, without reduction and without the spectral-convergence
    /// term (which is not per bin).
    ///
    /// # Shapes
    /// - `pred`, `target`: `[batch, T]`
    /// - returns `[batch, frames, W/2 + 1]`
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the shapes differ or T is shorter than W.
    pub fn forward_no_reduction(&self, pred: Tensor<B, 2>, target: Tensor<B, 2>) -> Result<Tensor<B, 3>> {
        let (mp, mt) = self.spectrograms(pred, target)?;
        Ok(distance(mp, mt, self.config.distance))
    }

    /// The loss: the distance reduced (`Mean`/`Auto`: mean over batch, frames and bins; `Sum`;
    /// `BatchMean`: sum / batch), plus `spectral_convergence` × ‖|Y| − |X|‖_F / ‖|Y|‖_F over
    /// the whole batch, with Y the target's spectrogram.
    ///
    /// # Shapes
    /// - `pred`, `target`: `[batch, T]`
    /// - returns `[1]`
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the shapes differ or T is shorter than W, or when
    /// [`KernelChoice::Fused`] is asked for where the fused kernels cannot run.
    pub fn forward(&self, pred: Tensor<B, 2>, target: Tensor<B, 2>, reduction: Reduction) -> Result<Tensor<B, 1>> {
        let (pred, target, fused) = self.prepare(pred, target, "spectral_loss.forward")?;
        let c = &self.config;
        let [batch, t] = pred.dims();
        let frames = frame_count(t, c.win, c.hop).unwrap_or(0);
        let scale = match reduction {
            Reduction::Mean | Reduction::Auto => 1.0 / (batch * frames * self.bins()) as f64,
            Reduction::Sum => 1.0,
            Reduction::BatchMean => 1.0 / batch as f64,
        };
        let params = LossParams {
            hop: c.hop,
            magnitude: c.magnitude,
            distance: c.distance,
            eps: c.eps,
            scale,
            spectral_convergence: c.spectral_convergence,
        };
        if fused {
            // One fused pass where the backend has it, the fused spectrograms plus tensor ops
            // elsewhere.
            return B::spectral_loss(pred, target, &self.tables, &params);
        }
        let (mp, mt) = (self.spectrogram(pred, false)?, self.spectrogram(target, false)?);
        Ok(loss_from_magnitudes(mp, mt, &params))
    }

    /// Whether [`forward`](Self::forward) runs as one fused pass (spectra, distance and
    /// reduction together) on `device`.
    pub fn is_fully_fused(&self, device: &B::Device) -> bool {
        self.is_fused(device) && B::spectral_loss_is_fused(self.config.win, device)
    }
}

/// Several [`SpectralLoss`]es at different resolutions, summed. Each resolution is a full
/// [`SpectralLossConfig`]; the default is auraloss's three (W = 1024, 2048, 512 with hops 120,
/// 240, 50; Hann window, linear magnitude, L1).
#[derive(Config, Debug)]
pub struct MultiResolutionSpectralLossConfig {
    /// One config per resolution.
    #[config(
        default = "vec![SpectralLossConfig::new(1024, 120), SpectralLossConfig::new(2048, 240), SpectralLossConfig::new(512, 50)]"
    )]
    pub resolutions: Vec<SpectralLossConfig>,
}

impl MultiResolutionSpectralLossConfig {
    /// Builds one [`SpectralLoss`] per resolution.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when there is no resolution or one of them is invalid
    /// ([`SpectralLossConfig::init`]).
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<MultiResolutionSpectralLoss<B>> {
        if self.resolutions.is_empty() {
            return Err(Error::invalid("multi_resolution_spectral_loss.init", "at least one resolution", "none"));
        }
        let losses = self.resolutions.iter().map(|c| c.init(device)).collect::<Result<Vec<_>>>()?;
        Ok(MultiResolutionSpectralLoss { losses })
    }
}

/// The sum of several spectral losses (a [`Module`] too).
#[derive(Module, Debug)]
pub struct MultiResolutionSpectralLoss<B: Backend> {
    losses: Vec<SpectralLoss<B>>,
}

impl<B: SpectralOps> MultiResolutionSpectralLoss<B> {
    /// The single-resolution losses.
    pub fn losses(&self) -> &[SpectralLoss<B>] {
        &self.losses
    }

    /// Σ over resolutions of [`SpectralLoss::forward`].
    ///
    /// # Shapes
    /// - `pred`, `target`: `[batch, T]`, T at least the largest W
    /// - returns `[1]`
    ///
    /// # Errors
    /// As [`SpectralLoss::forward`], for any resolution.
    pub fn forward(&self, pred: Tensor<B, 2>, target: Tensor<B, 2>, reduction: Reduction) -> Result<Tensor<B, 1>> {
        let mut total: Option<Tensor<B, 1>> = None;
        for l in &self.losses {
            let v = l.forward(pred.clone(), target.clone(), reduction.clone())?;
            total = Some(match total {
                None => v,
                Some(t) => t + v,
            });
        }
        Ok(total.expect("at least one resolution"))
    }
}
