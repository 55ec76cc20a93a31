//! Power spectra on the butterfly FFT: [`welch_psd`] and [`top_k_peaks`], batched.

use burn::tensor::{backend::Backend, Int, Tensor};

use crate::error::{check_power_of_two, Error, Result};
use crate::nn::butterfly::{exact_fft, Butterfly};
use crate::ops::spectral::{frame_count, frame_indices, Window};
use crate::ops::ButterflyOps;
use crate::tensors::{float_tensor, full};

/// Welch's power spectral density on the exact butterfly FFT: segments of `segment` samples
/// overlapping by `overlap`, each windowed and transformed, their periodograms averaged.
///
/// The segments go through rfft, the exact butterfly of `segment / 2` and the split step (half
/// the butterfly work; on wgpu and CUDA one fused launch), except a segment of 2, and on wgpu
/// and CUDA a segment below 256, where the fused complex butterfly of `segment` on a zero
/// imaginary part measured faster (`bench rfft`, in the guide's benchmarks).
///
/// Scaling is scipy's `welch(x, fs=1, window, nperseg=segment, noverlap=overlap,
/// detrend=False, scaling="density")`: `|DFT|² / Σ w²`, one-sided (bins 1…S/2−1 doubled).
///
/// # Shapes
/// - `signal`: `[batch, T]` → `[batch, segment/2 + 1]`
///
/// # Errors
/// [`Error::InvalidInput`] when `segment` is not a power of two ≥ 2, `overlap ≥ segment`, or
/// T < `segment`.
pub fn welch_psd<B: ButterflyOps>(
    signal: Tensor<B, 2>,
    segment: usize,
    overlap: usize,
    window: Window,
) -> Result<Tensor<B, 2>> {
    check_power_of_two("welch_psd", segment)?;
    let device = signal.device();
    let complex_faster = complex_faster::<B>(segment, &device);
    if segment < 4 || complex_faster {
        let fft = exact_fft::<B>(segment, false, &signal.device())?;
        return welch_psd_with(&fft, signal, overlap, window);
    }
    let half = exact_fft::<B>(segment / 2, false, &signal.device())?;
    welch(signal, segment, overlap, window, |x| half.rfft(x))
}

/// [`welch_psd`] on a given butterfly of size `segment` (for example a trained one), applied to
/// each real segment with a zero imaginary part; its first `segment / 2 + 1` bins are kept.
///
/// # Errors
/// As [`welch_psd`].
pub fn welch_psd_with<B: ButterflyOps>(
    fft: &Butterfly<B>,
    signal: Tensor<B, 2>,
    overlap: usize,
    window: Window,
) -> Result<Tensor<B, 2>> {
    let bins = fft.n() / 2 + 1;
    welch(signal, fft.n(), overlap, window, |x| {
        let (re, im) = fft.forward_real(x)?;
        Ok((re.narrow(2, 0, bins), im.narrow(2, 0, bins)))
    })
}

/// Welch's estimate with `transform` taking the windowed segments `[batch, frames, segment]` to
/// their unitary DFT's bins `0 … segment/2` (re, im).
fn welch<B: Backend>(
    signal: Tensor<B, 2>,
    segment: usize,
    overlap: usize,
    window: Window,
    transform: impl FnOnce(Tensor<B, 3>) -> Result<(Tensor<B, 3>, Tensor<B, 3>)>,
) -> Result<Tensor<B, 2>> {
    let op = "welch_psd";
    if overlap >= segment {
        return Err(Error::invalid(op, format!("overlap < segment = {segment}"), overlap));
    }
    let [batch, t] = signal.dims();
    let hop = segment - overlap;
    let frames = frame_count(t, segment, hop).ok_or_else(|| {
        Error::invalid(op, format!("at least segment = {segment} samples per signal"), format!("{t} samples"))
    })?;
    let device = signal.device();
    let w = window.values(segment);
    let norm: f64 = w.iter().map(|v| v * v).sum();
    let framed =
        crate::tensors::select_columns(signal, frame_indices(frames, segment, hop)).reshape([batch, frames, segment]);
    let windowed = framed * float_tensor::<B, 1>(w, [segment], &device).reshape([1, 1, segment]);
    let (re, im) = transform(windowed)?;
    let bins = segment / 2 + 1;
    // The transform is unitary (DFT/√S): |DFT|² = S·|X|².
    let power = re.powi_scalar(2) + im.powi_scalar(2);
    let one_sided: Vec<f64> = (0..bins).map(|k| if k == 0 || k == segment / 2 { 1.0 } else { 2.0 }).collect();
    let weights = float_tensor::<B, 1>(one_sided, [bins], &device).reshape([1, 1, bins]);
    let psd = (power * weights).mean_dim(1).mul_scalar(segment as f64 / norm);
    Ok(psd.reshape([batch, bins]))
}

/// The k largest local maxima of each row: bins larger than their left neighbour and at least
/// their right one (an edge bin compares with its one neighbour). Returns `(values, indices)`,
/// each `[batch, k]`, largest first; a row with fewer than k peaks is filled with −∞ values.
///
/// # Errors
/// [`Error::InvalidInput`] when k is 0 or larger than the number of bins.
pub fn top_k_peaks<B: Backend>(psd: Tensor<B, 2>, k: usize) -> Result<(Tensor<B, 2>, Tensor<B, 2, Int>)> {
    let [batch, bins] = psd.dims();
    if k == 0 || k > bins {
        return Err(Error::invalid("top_k_peaks", format!("1 ≤ k ≤ bins = {bins}"), k));
    }
    let device = psd.device();
    let edge = full::<B, 2>([batch, 1], f64::NEG_INFINITY, &device);
    let (left, right) = if bins > 1 {
        (
            Tensor::cat(vec![edge.clone(), psd.clone().narrow(1, 0, bins - 1)], 1),
            Tensor::cat(vec![psd.clone().narrow(1, 1, bins - 1), edge], 1),
        )
    } else {
        (edge.clone(), edge)
    };
    let peak = psd.clone().greater(left).bool_and(psd.clone().greater_equal(right));
    let masked = psd.mask_fill(peak.bool_not(), f64::NEG_INFINITY);
    Ok(masked.topk_with_indices(k, 1))
}

/// Whether the fused complex butterfly of `segment` beats the fused rfft on `device` (below
/// `tuning::RFFT_MIN_FUSED_N`, or where only the complex one is fused).
#[cfg(feature = "fused")]
fn complex_faster<B: ButterflyOps>(segment: usize, device: &B::Device) -> bool {
    B::butterfly_is_fused(segment, device)
        && (segment < crate::ops::tuning::RFFT_MIN_FUSED_N || !B::butterfly_conv_real_is_fused(segment, device))
}

/// Without the fused kernels no butterfly is fused.
#[cfg(not(feature = "fused"))]
fn complex_faster<B: ButterflyOps>(_segment: usize, _device: &B::Device) -> bool {
    false
}
