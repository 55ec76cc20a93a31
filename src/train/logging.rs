//! TensorBoard scalars through tensorboard-rs.
//!
//! tensorboard-rs panics on I/O errors (in its writer thread and on drop); this wrapper checks
//! the directory up front and turns a panic of any call into [`Error::TensorBoard`], so a full
//! disk stops training with a message instead of a crash.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use tensorboard_rs::summary_writer::SummaryWriter;

use crate::error::{Error, Result};

/// A TensorBoard event-file writer for one run.
pub struct TensorBoard {
    writer: Option<SummaryWriter>,
}

fn guarded<T>(what: &str, f: impl FnOnce() -> T) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f))
        .map_err(|_| Error::TensorBoard(format!("{what} failed (I/O error in the event writer)")))
}

impl TensorBoard {
    /// Opens a new event file in `dir` (created if missing).
    ///
    /// # Errors
    /// [`Error::Io`] when `dir` cannot be created or written; [`Error::TensorBoard`] when the
    /// event file cannot be opened.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| Error::io("tensorboard", dir, e))?;
        let probe = dir.join(".write-test");
        std::fs::write(&probe, b"").map_err(|e| Error::io("tensorboard", dir, e))?;
        let _ = std::fs::remove_file(&probe);
        let writer = guarded("opening the event file", || SummaryWriter::new(dir))?;
        Ok(TensorBoard { writer: Some(writer) })
    }

    /// Adds scalars `(tag, value)` at `step`.
    ///
    /// # Errors
    /// [`Error::TensorBoard`] when the event writer fails.
    pub fn scalars(&mut self, step: usize, values: &[(&str, f64)]) -> Result<()> {
        let Some(w) = self.writer.as_mut() else { return Ok(()) };
        guarded("writing scalars", || {
            for (tag, v) in values {
                w.add_scalar(tag, *v as f32, step);
            }
        })
    }

    /// Flushes events to disk.
    ///
    /// # Errors
    /// [`Error::TensorBoard`] when the event writer fails.
    pub fn flush(&mut self) -> Result<()> {
        let Some(w) = self.writer.as_mut() else { return Ok(()) };
        guarded("flushing", || w.flush())
    }

    /// Flushes and closes the event file.
    ///
    /// # Errors
    /// [`Error::TensorBoard`] when the event writer fails.
    pub fn close(mut self) -> Result<()> {
        let w = self.writer.take();
        guarded("closing", move || drop(w))
    }
}

impl Drop for TensorBoard {
    fn drop(&mut self) {
        let w = self.writer.take();
        let _ = catch_unwind(AssertUnwindSafe(move || drop(w)));
    }
}
