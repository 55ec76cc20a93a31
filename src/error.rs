//! The crate's error type: every user-facing entry point returns [`Result`].
//!
//! Messages name the operation, what it expected and what it received, so that
//! `"butterfly: expected n to be a power of two >= 2, got 12"` is enough to fix the call.

use std::fmt;

/// Errors returned by learned-fft's public entry points.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A size, shape or value that the operation cannot accept.
    #[error("{op}: expected {expected}, got {got}")]
    InvalidInput {
        /// The operation that refused the input (e.g. `"butterfly.forward"`).
        op: &'static str,
        /// What the operation accepts.
        expected: String,
        /// What it received.
        got: String,
    },
    /// The chosen backend cannot run at the requested precision.
    #[error("{op}: the {backend} backend does not support {precision} (supported: {supported})")]
    UnsupportedPrecision {
        /// The operation that needed the backend.
        op: &'static str,
        /// Backend name.
        backend: String,
        /// Requested precision.
        precision: String,
        /// Precisions that backend supports.
        supported: &'static str,
    },
    /// A backend name that is not one of the known ones.
    #[error("backend: expected one of auto, wgpu, candle, ndarray, cuda, got {0:?}")]
    UnknownBackend(String),
    /// The backend exists but cannot be used on this machine.
    #[error("backend: {backend} is not available: {reason}")]
    BackendUnavailable {
        /// Backend name.
        backend: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// Reading or writing a file failed.
    #[error("{op}: {path}: {source}")]
    Io {
        /// The operation that touched the file.
        op: &'static str,
        /// The file.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A checkpoint file that cannot be used: truncated, corrupt, or of another format.
    #[error("checkpoint: {path}: {reason}")]
    Checkpoint {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Training produced a non-finite loss or parameter and stopped.
    #[error("train: {what} became {value} at step {step}; stopped (the last checkpoint, if any, is intact)")]
    Diverged {
        /// What went non-finite (`"loss"`, `"twiddles"`).
        what: &'static str,
        /// The value seen.
        value: f64,
        /// The step.
        step: usize,
    },
    /// An operation would need more memory than the machine has: refused before allocating.
    #[error("{op}: {what} needs {} of memory, {}", bytes(*needed), available.map(|a| format!("{} is available", bytes(a))).unwrap_or_else(|| "more than can be addressed".into()))]
    OutOfMemory {
        /// The operation that refused.
        op: &'static str,
        /// What would need the memory (e.g. `"the dense N×N target at N = 65536"`).
        what: String,
        /// Bytes it would need (`u64::MAX` when the figure overflows).
        needed: u64,
        /// Bytes available now, when known.
        available: Option<u64>,
    },
    /// Training was asked to stop (SIGTERM, SIGINT, or the trainer's stop flag).
    #[error("train: stopped at step {step} as asked; {}", match checkpoint { Some(p) => format!("checkpoint written to {p}: run the same command with --resume to continue"), None => "nothing was saved (no checkpoint directory, or stopped before the first step)".into() })]
    Interrupted {
        /// The step the run stopped at (the checkpoint holds the state before it).
        step: usize,
        /// The checkpoint written on the way out, if the run has a checkpoint directory.
        checkpoint: Option<String>,
    },
    /// Another process holds the checkpoint directory.
    #[error("train: checkpoint directory {dir} is in use by {holder} (one trainer per directory; lock file {lock})")]
    Busy {
        /// The directory.
        dir: String,
        /// Who holds it, as its lock file says (`"process 1234"`).
        holder: String,
        /// The lock file.
        lock: String,
    },
    /// Drawing a picture failed.
    #[error("plot: {path}: {reason}")]
    Plot {
        /// The picture's file.
        path: String,
        /// What failed.
        reason: String,
    },
}

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shorthand for [`Error::Io`].
    pub fn io(op: &'static str, path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        Error::Io { op, path: path.as_ref().display().to_string(), source }
    }

    /// Shorthand for [`Error::InvalidInput`].
    pub fn invalid(op: &'static str, expected: impl fmt::Display, got: impl fmt::Display) -> Self {
        Error::InvalidInput { op, expected: expected.to_string(), got: got.to_string() }
    }
}

/// A byte count for people: `"64.0 GiB"`.
pub fn bytes(n: u64) -> String {
    if n == u64::MAX {
        return "more than 16 EiB".into();
    }
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let (mut v, mut unit) = (n as f64, 0);
    while v >= 1024.0 && unit + 1 < units.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", units[unit])
    }
}

/// `n` must be a power of two and at least 2; returns log2(n).
///
/// # Errors
/// [`Error::InvalidInput`], naming `op`, when `n` is not a power of two ≥ 2.
pub fn check_power_of_two(op: &'static str, n: usize) -> Result<usize> {
    if n < 2 || !n.is_power_of_two() {
        return Err(Error::invalid(op, "n to be a power of two >= 2", n));
    }
    Ok(n.trailing_zeros() as usize)
}
