//! Export of a trained layer to safetensors, for use outside Burn (numpy, PyTorch).
//!
//! The file holds three tensors and string metadata:
//!
//! | name | dtype | shape | content |
//! |---|---|---|---|
//! | `twiddle_re` | F32 or F64 (the training precision) | `[log2 N, N/2, 2, 2]` | real parts |
//! | `twiddle_im` | same | same | imaginary parts |
//! | `permutation` | I64 | `[N]` | input index read by each position: `x_perm[i] = x[permutation[i]]` |
//!
//! Metadata: `n`, `target`, `precision`, `step`, `format` (`learned-fft-butterfly-v1`). Entry
//! `[s, k, a, b]` is row a, column b of block k of factor s, which acts on indices
//! `i0 = 2^{s+1}·⌊k / 2^s⌋ + (k mod 2^s)` and `i1 = i0 + 2^s`; the layer computes
//! `y = B_{L−1} ⋯ B_0 (x permuted)`. docs/guide/training.md (Export) shows the numpy code that rebuilds the matrix.
//!
//! A product of K > 1 factors ([`crate::nn::ButterflyProduct`]) is written in the format
//! `learned-fft-butterfly-product-v1`: the same tensors with a leading factor axis,
//! `twiddle_re` and `twiddle_im` `[K, log2 N, N/2, 2, 2]` and `permutation` `[K, N]`, and the
//! metadata `factors` = K. Factor 0 applies first: `y = F_{K−1}(⋯ F_0(x))`, each `F_k` a
//! butterfly as above with its own permutation.

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, TensorView};
use serde::Serialize;

use super::checkpoint::Checkpoint;
use crate::backend::{NdArrayBackend, Precision};
use crate::error::{Error, Result};
use crate::files::write_atomic;
use crate::tensors::to_f64_vec;

/// What [`export_safetensors`] wrote.
#[derive(Clone, Debug, Serialize)]
pub struct ExportSummary {
    /// The file written.
    pub path: String,
    /// Transform size.
    pub n: usize,
    /// Element type of the twiddles.
    pub dtype: String,
    /// Bytes written.
    pub bytes: usize,
}

/// Writes the twiddles of the checkpoint at `checkpoint` to a safetensors file at `out`
/// (atomically), in the precision it was trained in.
///
/// # Errors
/// As [`Checkpoint::read`] for the checkpoint; [`crate::Error::Io`] when `out` cannot be
/// written.
pub fn export_safetensors(checkpoint: impl AsRef<Path>, out: impl AsRef<Path>) -> Result<ExportSummary> {
    export_at(checkpoint.as_ref(), out.as_ref())
}

/// [`export_safetensors`] for paths given as such (compiled once here, not in every caller).
fn export_at(checkpoint: &Path, out: &Path) -> Result<ExportSummary> {
    let ckpt = Checkpoint::read(checkpoint)?;
    // f64 holds f32 values exactly, so reading through NdArray<f64> loses nothing.
    let layer = ckpt.product::<NdArrayBackend<f64>>(&Default::default())?;
    let (re, im) = layer.stacked_twiddles();
    let (re, im) = (to_f64_vec(re), to_f64_vec(im));
    let n = ckpt.config.n;
    let k = layer.len();
    // One factor keeps the single-butterfly format; a product has a leading factor axis.
    let lead = |rest: Vec<usize>| if k == 1 { rest } else { [vec![k], rest].concat() };
    let shape = lead(vec![n.trailing_zeros() as usize, n / 2, 2, 2]);
    let precision = ckpt.precision;
    let encode = |v: &[f64]| -> Vec<u8> {
        match precision {
            Precision::F32 => v.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect(),
            Precision::F64 => v.iter().flat_map(|&x| x.to_le_bytes()).collect(),
        }
    };
    let dtype = match precision {
        Precision::F32 => Dtype::F32,
        Precision::F64 => Dtype::F64,
    };
    let (re, im) = (encode(&re), encode(&im));
    let perm: Vec<u8> =
        layer.permutations().iter().flat_map(|p| p.indices(n)).flat_map(|i| (i as i64).to_le_bytes()).collect();
    let bad = |e: safetensors::SafeTensorError| Error::invalid("export", "tensors safetensors can encode", e);
    let tensors = vec![
        ("twiddle_re", TensorView::new(dtype, shape.clone(), &re).map_err(bad)?),
        ("twiddle_im", TensorView::new(dtype, shape, &im).map_err(bad)?),
        ("permutation", TensorView::new(Dtype::I64, lead(vec![n]), &perm).map_err(bad)?),
    ];
    let format = if k == 1 { "learned-fft-butterfly-v1" } else { "learned-fft-butterfly-product-v1" };
    let mut metadata = HashMap::from([
        ("format".to_string(), format.to_string()),
        ("n".to_string(), n.to_string()),
        ("target".to_string(), ckpt.config.target.kind().to_string()),
        ("precision".to_string(), ckpt.precision.to_string()),
        ("step".to_string(), ckpt.state.step.to_string()),
    ]);
    if k > 1 {
        metadata.insert("factors".to_string(), k.to_string());
    }
    let bytes = safetensors::serialize(tensors, Some(metadata)).map_err(bad)?;
    write_atomic("export", out, &bytes)?;
    Ok(ExportSummary { path: out.display().to_string(), n, dtype: ckpt.precision.to_string(), bytes: bytes.len() })
}
