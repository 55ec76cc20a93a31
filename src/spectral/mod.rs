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
//! This module is the reference twin: framing with tensor ops, the DFT as a matmul with a
//! cos/sin basis computed in f64 (the window folded in), magnitude, distance, reduction; the
//! gradient comes from Burn's autodiff on every backend.

mod reference;
mod window;

pub use reference::{distance, magnitudes};
pub use window::{frame_count, frame_indices, reflect_indices, Window};

use burn::config::Config;
use burn::nn::loss::Reduction;
use burn::tensor::{backend::Backend, Int, Tensor};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::tensors::{float_tensor, int_tensor};

/// How a bin's magnitude is measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Magnitude {
    /// `sqrt(re² + im² + eps)`.
    #[default]
    Linear,
    /// `re² + im²`.
    Power,
    /// `½ ln(re² + im² + eps)` (the log of the linear magnitude).
    Log,
}

/// How two magnitudes are compared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Distance {
    /// Absolute difference.
    #[default]
    L1,
    /// Squared difference.
    L2,
}

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
}

impl SpectralLossConfig {
    /// Builds the loss on `device`, after checking the configuration.
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
        let (w, bins) = (self.win, self.win / 2 + 1);
        let window = self.window.values(w);
        let mut re = vec![0.0; w * bins];
        let mut im = vec![0.0; w * bins];
        for n in 0..w {
            for k in 0..bins {
                // Reduce n·k mod W first so the angle is exact for large W.
                let angle = 2.0 * std::f64::consts::PI * ((n * k) % w) as f64 / w as f64;
                re[n * bins + k] = window[n] * angle.cos();
                im[n * bins + k] = -window[n] * angle.sin();
            }
        }
        Ok(SpectralLoss {
            basis_re: float_tensor(re, [w, bins], device),
            basis_im: float_tensor(im, [w, bins], device),
            config: self.clone(),
        })
    }
}

/// The spectral loss (see the module docs).
#[derive(Clone, Debug)]
pub struct SpectralLoss<B: Backend> {
    basis_re: Tensor<B, 2>,
    basis_im: Tensor<B, 2>,
    config: SpectralLossConfig,
}

impl<B: Backend> SpectralLoss<B> {
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

    /// Frames of a batch of signals: `[batch, T]` → `[batch, frames, W]`.
    fn frame(&self, x: Tensor<B, 2>, op: &'static str) -> Result<Tensor<B, 3>> {
        let [batch, t] = x.dims();
        let (w, hop) = (self.config.win, self.config.hop);
        let device = x.device();
        let (x, t) = if self.config.center {
            let pad = w / 2;
            if pad >= t {
                return Err(Error::invalid(op, format!("more than W/2 = {pad} samples per signal to reflect-pad (center = true)"), t));
            }
            let idx = reflect_indices(t, pad);
            let len = idx.len();
            (x.select(1, int_tensor::<B, 1>(idx, [len], &device)), len)
        } else {
            (x, t)
        };
        let frames = frame_count(t, w, hop).ok_or_else(|| Error::invalid(op, format!("at least W = {w} samples per signal"), format!("{t} samples")))?;
        let idx: Tensor<B, 1, Int> = int_tensor(frame_indices(frames, w, hop), [frames * w], &device);
        Ok(x.select(1, idx).reshape([batch, frames, w]))
    }

    fn check(&self, pred: &Tensor<B, 2>, target: &Tensor<B, 2>, op: &'static str) -> Result<()> {
        if pred.dims() != target.dims() {
            return Err(Error::invalid(op, format!("pred and target of the same shape (pred is {:?})", pred.dims()), format!("target of shape {:?}", target.dims())));
        }
        Ok(())
    }

    /// The two magnitude spectrograms, `[batch, frames, bins]` each.
    pub fn spectrograms(&self, pred: Tensor<B, 2>, target: Tensor<B, 2>) -> Result<(Tensor<B, 3>, Tensor<B, 3>)> {
        let op = "spectral_loss.forward";
        self.check(&pred, &target, op)?;
        let c = &self.config;
        let mp = magnitudes(self.frame(pred, op)?, &self.basis_re, &self.basis_im, c.magnitude, c.eps);
        let mt = magnitudes(self.frame(target, op)?, &self.basis_re, &self.basis_im, c.magnitude, c.eps);
        Ok((mp, mt))
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
    pub fn forward(&self, pred: Tensor<B, 2>, target: Tensor<B, 2>, reduction: Reduction) -> Result<Tensor<B, 1>> {
        let batch = pred.dims()[0];
        let (mp, mt) = self.spectrograms(pred, target)?;
        let d = distance(mp.clone(), mt.clone(), self.config.distance);
        let mut loss = match reduction {
            Reduction::Mean | Reduction::Auto => d.mean(),
            Reduction::Sum => d.sum(),
            Reduction::BatchMean => d.sum().div_scalar(batch as f64),
        };
        if self.config.spectral_convergence > 0.0 {
            let eps = self.config.eps;
            let num = ((mt.clone() - mp).powi_scalar(2).sum() + eps).sqrt();
            let den = (mt.powi_scalar(2).sum() + eps).sqrt();
            loss = loss + (num / den).mul_scalar(self.config.spectral_convergence);
        }
        Ok(loss)
    }
}

/// Several [`SpectralLoss`]es at different resolutions, summed. Each resolution is a full
/// [`SpectralLossConfig`]; the default is auraloss's three (W = 1024, 2048, 512 with hops 120,
/// 240, 50; Hann window, linear magnitude, L1).
#[derive(Config, Debug)]
pub struct MultiResolutionSpectralLossConfig {
    /// One config per resolution.
    #[config(default = "vec![SpectralLossConfig::new(1024, 120), SpectralLossConfig::new(2048, 240), SpectralLossConfig::new(512, 50)]")]
    pub resolutions: Vec<SpectralLossConfig>,
}

impl MultiResolutionSpectralLossConfig {
    /// Builds one [`SpectralLoss`] per resolution.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<MultiResolutionSpectralLoss<B>> {
        if self.resolutions.is_empty() {
            return Err(Error::invalid("multi_resolution_spectral_loss.init", "at least one resolution", "none"));
        }
        let losses = self.resolutions.iter().map(|c| c.init(device)).collect::<Result<Vec<_>>>()?;
        Ok(MultiResolutionSpectralLoss { losses })
    }
}

/// The sum of several spectral losses.
#[derive(Clone, Debug)]
pub struct MultiResolutionSpectralLoss<B: Backend> {
    losses: Vec<SpectralLoss<B>>,
}

impl<B: Backend> MultiResolutionSpectralLoss<B> {
    /// The single-resolution losses.
    pub fn losses(&self) -> &[SpectralLoss<B>] {
        &self.losses
    }

    /// Σ over resolutions of [`SpectralLoss::forward`].
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
