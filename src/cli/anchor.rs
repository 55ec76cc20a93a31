//! Same-run anchors: the JSON lines that `scripts/anchor.py` printed in the same run
//! (cuFFT, the unfused PyTorch butterfly, the torch.stft loss, torch's `Linear`), read back so
//! that a benchmark reports its ratios to them beside its own timings (`bench
//! butterfly|spectral|linear --anchor FILE`).

use std::path::Path;

use serde_json::{json, Map, Value};

use super::linear::LinearBenchResult;
use super::timing::{ButterflyBenchResult, SpectralBenchResult};
use learned_fft::error::{Error, Result};

/// The anchor line of the file at `path` (one JSON object per line) whose fields `key` equal
/// the values given: the anchor measured for the same shape.
fn find(op: &'static str, path: &Path, keys: &[(&str, usize)]) -> Result<Map<String, Value>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(op, path, e))?;
    let wanted = keys.iter().map(|(k, v)| format!("{k} = {v}")).collect::<Vec<_>>().join(", ");
    let mut lines = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        lines += 1;
        let value: Value = serde_json::from_str(line)
            .map_err(|e| Error::invalid(op, "an anchor file of JSON lines (scripts/anchor.py's output)", e))?;
        let Value::Object(fields) = value else {
            return Err(Error::invalid(op, "JSON objects, one per line", line));
        };
        if keys.iter().all(|(k, v)| fields.get(*k).and_then(Value::as_u64) == Some(*v as u64)) {
            return Ok(fields);
        }
    }
    Err(Error::invalid(
        op,
        format!("an anchor with {wanted} in {}", path.display()),
        format!("none among {lines} lines"),
    ))
}

/// An anchor line, checked before the benchmark runs (so a wrong file costs no timing).
pub struct Anchor {
    op: &'static str,
    fields: Map<String, Value>,
}

impl Anchor {
    /// The butterfly anchor for `n` and `batch` (cuFFT's throughput, the unfused PyTorch
    /// butterfly's forward + backward time).
    ///
    /// # Errors
    /// [`Error::Io`] or [`Error::InvalidInput`] when the file cannot be read, holds no line for
    /// this shape, or the line lacks a timing.
    pub fn butterfly(path: &Path, n: usize, batch: usize) -> Result<Self> {
        let op = "bench butterfly --anchor";
        let anchor = Anchor { op, fields: find(op, path, &[("n", n), ("batch", batch)])? };
        anchor.number("cufft_effective_GBps")?;
        anchor.number("torch_butterfly_fwdbwd_ms")?;
        Ok(anchor)
    }

    /// The torch.stft loss anchor for this window, hop, signals and samples.
    ///
    /// # Errors
    /// As [`Anchor::butterfly`].
    pub fn spectral(path: &Path, win: usize, hop: usize, signals: usize, samples: usize) -> Result<Self> {
        let op = "bench spectral --anchor";
        let keys = [("win", win), ("hop", hop), ("signals", signals), ("samples", samples)];
        let anchor = Anchor { op, fields: find(op, path, &keys)? };
        anchor.number("torch_stft_loss_fwd_ms")?;
        anchor.number("torch_stft_loss_fwdbwd_ms")?;
        Ok(anchor)
    }

    /// The linear-layer anchor for this shape (torch's `Linear` and the unfused PyTorch
    /// butterfly linear layer, forward + backward).
    ///
    /// # Errors
    /// As [`Anchor::butterfly`].
    pub fn linear(path: &Path, in_size: usize, out_size: usize, nblocks: usize, batch: usize) -> Result<Self> {
        let op = "bench linear --anchor";
        let keys = [("in_size", in_size), ("out_size", out_size), ("nblocks", nblocks), ("batch", batch)];
        let anchor = Anchor { op, fields: find(op, path, &keys)? };
        anchor.number("torch_linear_fwdbwd_ms")?;
        anchor.number("torch_butterfly_linear_fwdbwd_ms")?;
        Ok(anchor)
    }

    /// A positive number field.
    fn number(&self, key: &str) -> Result<f64> {
        self.fields
            .get(key)
            .and_then(Value::as_f64)
            .filter(|v| v.is_finite() && *v > 0.0)
            .ok_or_else(|| Error::invalid(self.op, format!("a positive number {key} in the anchor"), "none"))
    }

    /// The butterfly's forward throughput over cuFFT's, and its forward + backward speed-up over
    /// the unfused PyTorch butterfly: per call (`forward_ms`, `fwd_bwd_ms`, which pay the sync
    /// latency after every call that the anchor's CUDA events leave out) and back to back
    /// (`forward_pipelined_ms`, `fwd_bwd_pipelined_ms`).
    pub fn butterfly_ratios(&self, r: &ButterflyBenchResult) -> Result<Value> {
        let (cufft_gbps, torch_ms) = (self.number("cufft_effective_GBps")?, self.number("torch_butterfly_fwdbwd_ms")?);
        Ok(json!({
            "device": self.fields.get("device"),
            "cufft_gbps": cufft_gbps,
            "forward_over_cufft": r.forward_gbps / cufft_gbps,
            "forward_pipelined_over_cufft": r.forward_pipelined_gbps / cufft_gbps,
            "torch_butterfly_fwd_bwd_ms": torch_ms,
            "fwd_bwd_speedup_over_torch": torch_ms / r.fwd_bwd_ms,
            "fwd_bwd_pipelined_speedup_over_torch": torch_ms / r.fwd_bwd_pipelined_ms,
        }))
    }

    /// `ButterflyLinear`'s forward + backward speed-ups over torch's `Linear` and over the
    /// unfused PyTorch butterfly linear layer (per call and back to back, as for the butterfly).
    pub fn linear_ratios(&self, r: &LinearBenchResult) -> Result<Value> {
        let (dense, butterfly) =
            (self.number("torch_linear_fwdbwd_ms")?, self.number("torch_butterfly_linear_fwdbwd_ms")?);
        Ok(json!({
            "device": self.fields.get("device"),
            "torch_linear_fwd_bwd_ms": dense,
            "torch_butterfly_linear_fwd_bwd_ms": butterfly,
            "fwd_bwd_speedup_over_torch_linear": dense / r.butterfly.fwd_bwd_ms,
            "fwd_bwd_pipelined_speedup_over_torch_linear": dense / r.butterfly.fwd_bwd_pipelined_ms,
            "fwd_bwd_speedup_over_torch_butterfly": butterfly / r.butterfly.fwd_bwd_ms,
            "fwd_bwd_pipelined_speedup_over_torch_butterfly": butterfly / r.butterfly.fwd_bwd_pipelined_ms,
        }))
    }

    /// The spectral loss's speed-ups over the torch.stft loss, forward and forward + backward
    /// (per call, and back to back as for the butterfly).
    pub fn spectral_ratios(&self, r: &SpectralBenchResult) -> Result<Value> {
        let (fwd, fwd_bwd) = (self.number("torch_stft_loss_fwd_ms")?, self.number("torch_stft_loss_fwdbwd_ms")?);
        Ok(json!({
            "device": self.fields.get("device"),
            "torch_stft_loss_fwd_ms": fwd,
            "torch_stft_loss_fwd_bwd_ms": fwd_bwd,
            "forward_speedup_over_torch": fwd / r.forward_ms,
            "fwd_bwd_speedup_over_torch": fwd_bwd / r.fwd_bwd_ms,
            "fwd_bwd_pipelined_speedup_over_torch": fwd_bwd / r.fwd_bwd_pipelined_ms,
        }))
    }
}
