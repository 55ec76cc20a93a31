//! The pictures of one checkpoint: its training curve, its error matrix and its twiddles.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::curves::{training_curve, twiddle_magnitudes};
use super::heatmap::matrix_error;
use crate::backend::{dispatch, BackendKind, BackendTask, FftBackend, Precision, Selected};
use crate::error::Result;
use crate::ops::ButterflyOps;
use crate::reference::{ComplexMatrix, Target};
use crate::tensors::to_f64_vec;
use crate::train::Checkpoint;
use num_complex::Complex64;

/// The training curve's file in the output directory.
pub const CURVE_FILE: &str = "curve.png";
/// The error matrix's file.
pub const ERROR_FILE: &str = "error.png";
/// The twiddle magnitudes' file.
pub const TWIDDLES_FILE: &str = "twiddles.png";

/// What [`checkpoint_pictures`] wrote.
#[derive(Clone, Debug, Serialize)]
pub struct Pictures {
    /// The files written.
    pub written: Vec<String>,
    /// The pictures not drawn, each with the reason.
    pub skipped: Vec<String>,
    /// The layer's rmse against the f64 target on the backend used (as `learned-fft eval` gives).
    pub rmse: f64,
}

/// Draws a checkpoint's pictures into `out_dir` (created if missing): [`CURVE_FILE`] from the
/// progress records the checkpoint holds (skipped, with the reason, in files written before
/// records were kept), [`ERROR_FILE`] with the layer's matrix as `backend` computes it in
/// `precision` (the checkpoint's own when `None`), and [`TWIDDLES_FILE`].
///
/// # Errors
/// Those of [`Checkpoint::read`], of backend selection, and of the figures.
pub fn checkpoint_pictures(
    checkpoint: impl AsRef<Path>,
    out_dir: impl AsRef<Path>,
    backend: BackendKind,
    precision: Option<Precision>,
) -> Result<Pictures> {
    // Generic only in the paths: every backend's instance is compiled here, not in each caller.
    pictures_at(checkpoint.as_ref(), out_dir.as_ref(), backend, precision)
}

/// [`checkpoint_pictures`] for paths given as such.
fn pictures_at(
    checkpoint: &Path,
    out_dir: &Path,
    backend: BackendKind,
    precision: Option<Precision>,
) -> Result<Pictures> {
    struct Task<'a>(Checkpoint, &'a Path);
    impl BackendTask for Task<'_> {
        type Output = Pictures;
        fn run<B: FftBackend>(self, device: B::Device, _: &Selected) -> Result<Pictures> {
            checkpoint_pictures_on::<B::InnerBackend>(&self.0, self.1, &device)
        }
    }
    let ckpt = Checkpoint::read(checkpoint)?;
    let precision = precision.unwrap_or(ckpt.precision);
    dispatch(backend, precision, Task(ckpt, out_dir))
}

/// [`checkpoint_pictures`] for a checkpoint already read, on backend `B`.
///
/// # Errors
/// Those of the layer's matrix and target ([`crate::Error::OutOfMemory`] at large N) and of the
/// figures.
pub fn checkpoint_pictures_on<B: ButterflyOps>(
    ckpt: &Checkpoint,
    out_dir: &Path,
    device: &B::Device,
) -> Result<Pictures> {
    let cfg = &ckpt.config;
    let n = cfg.n;
    let name = format!("{}, N = {n}, trained in {}, step {}", cfg.target.kind(), ckpt.precision, ckpt.state.step);
    let file = |f: &str| -> PathBuf { out_dir.join(f) };
    let mut pictures = Pictures { written: Vec::new(), skipped: Vec::new(), rmse: f64::NAN };
    if ckpt.history.is_empty() {
        pictures
            .skipped
            .push(format!("{CURVE_FILE}: the checkpoint holds no progress records (written before they were kept)"));
    } else {
        training_curve(file(CURVE_FILE), &ckpt.history, &format!("Training: {name}"))?;
        pictures.written.push(file(CURVE_FILE).display().to_string());
    }
    let layer = ckpt.product::<B>(device)?;
    let learned = layer.matrix_on_backend()?;
    // With the real-output map the model is Re(M) (M's imaginary part is free): the picture and
    // the rmse are of that, as `eval` measures it.
    let learned = match cfg.real_output {
        true => {
            let re = learned.re();
            ComplexMatrix::from_fn(n, |r, c| Complex64::new(re[r * n + c], 0.0))
        }
        false => learned,
    };
    // The rmse is `eval`'s (and the training report's) to the last bit: the dense matrix's rmse
    // sums the same errors in another order. Data has no matrix: its rmse is the one its pairs
    // estimate, and its picture is against the matrix fitted to them where they determine one.
    pictures.rmse = crate::metrics::rmse_of_model(&layer, &cfg.target, cfg.real_output)?;
    let (target, against) = match &cfg.target {
        Target::Data(d) => (d.fitted_matrix()?, "the matrix fitted to the data"),
        t => (Some(t.matrix(n)?), "the target T"),
    };
    match target {
        Some(target) => {
            let model = if cfg.real_output { "Re(M)" } else { "M" };
            matrix_error(file(ERROR_FILE), &learned, &target, &format!("Learned {model} against {against}: {name}"))?;
            pictures.written.push(file(ERROR_FILE).display().to_string());
        }
        None => pictures.skipped.push(format!(
            "{ERROR_FILE}: the data determine no matrix (fewer pairs than N, ill-conditioned inputs, or N > 1024)"
        )),
    }
    let (re, im) = layer.stacked_twiddles();
    let (re, im) = (to_f64_vec(re), to_f64_vec(im));
    twiddle_magnitudes(file(TWIDDLES_FILE), n, &re, &im, &format!("Twiddle magnitudes per stage: {name}"))?;
    pictures.written.push(file(TWIDDLES_FILE).display().to_string());
    Ok(pictures)
}
