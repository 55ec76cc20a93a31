//! TensorBoard scalars: one event file per run, in TensorFlow's format.
//!
//! The file is a TFRecord stream (each record: its length as a little-endian u64, the masked
//! CRC-32C of those 8 bytes, the data, the masked CRC-32C of the data) of `Event` protobufs
//! (`tensorflow/core/util/event.proto`): a first event naming the file version, then one per
//! logged step whose `Summary` holds `(tag, simple_value)` pairs. prost encodes the messages,
//! declared here with just the fields written; the crc crate computes the checksums. Every
//! write goes through `std::io` and returns its error, so a full disk stops training with a
//! message, and nothing panics.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// `Event` (event.proto): the fields this writer sets.
#[derive(Clone, PartialEq, prost::Message)]
struct Event {
    /// Seconds since the Unix epoch.
    #[prost(double, tag = "1")]
    wall_time: f64,
    #[prost(int64, tag = "2")]
    step: i64,
    #[prost(oneof = "What", tags = "3, 5")]
    what: Option<What>,
}

/// `Event.what`: the file's version record, or a summary of scalars.
#[derive(Clone, PartialEq, prost::Oneof)]
enum What {
    #[prost(string, tag = "3")]
    FileVersion(String),
    #[prost(message, tag = "5")]
    Summary(Summary),
}

/// `Summary` (summary.proto).
#[derive(Clone, PartialEq, prost::Message)]
struct Summary {
    #[prost(message, repeated, tag = "1")]
    value: Vec<SummaryValue>,
}

/// `Summary.Value` with its `simple_value` (a scalar, which TensorBoard plots as it is).
#[derive(Clone, PartialEq, prost::Message)]
struct SummaryValue {
    #[prost(string, tag = "1")]
    tag: String,
    #[prost(float, tag = "2")]
    simple_value: f32,
}

/// TFRecord's checksum: CRC-32C, rotated right by 15 bits and offset by a constant.
fn masked_crc(data: &[u8]) -> u32 {
    const CRC32C: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);
    let c = CRC32C.checksum(data);
    c.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// A TensorBoard event-file writer for one run.
pub struct TensorBoard {
    file: BufWriter<File>,
    path: PathBuf,
}

impl TensorBoard {
    /// Opens a new event file in `dir` (created if missing), named as TensorBoard looks for it
    /// (`events.out.tfevents.<seconds>.<name>`), and writes its version record.
    ///
    /// # Errors
    /// [`Error::Io`] when `dir` cannot be created or the file written.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| Error::io("tensorboard", dir, e))?;
        let now = wall_time();
        // Seconds and the process id keep two runs that log into one directory apart.
        let name = format!("events.out.tfevents.{}.learned-fft.{}", now as u64, std::process::id());
        let path = dir.join(name);
        let file = File::create(&path).map_err(|e| Error::io("tensorboard", &path, e))?;
        let mut tb = TensorBoard { file: BufWriter::new(file), path };
        tb.event(Event { wall_time: now, step: 0, what: Some(What::FileVersion("brain.Event:2".into())) })?;
        tb.flush()?;
        Ok(tb)
    }

    /// Adds scalars `(tag, value)` at `step` (as f32, TensorBoard's `simple_value`).
    ///
    /// # Errors
    /// [`Error::Io`] when the event file cannot be written.
    pub fn scalars(&mut self, step: usize, values: &[(&str, f64)]) -> Result<()> {
        let value = values.iter().map(|&(tag, v)| SummaryValue { tag: tag.to_string(), simple_value: v as f32 });
        let summary = Summary { value: value.collect() };
        let step = i64::try_from(step).map_err(|_| Error::invalid("tensorboard", "a step below 2^63", step))?;
        self.event(Event { wall_time: wall_time(), step, what: Some(What::Summary(summary)) })
    }

    /// Writes the buffered events to the file.
    ///
    /// # Errors
    /// [`Error::Io`] when the event file cannot be written.
    pub fn flush(&mut self) -> Result<()> {
        self.file.flush().map_err(|e| Error::io("tensorboard", &self.path, e))
    }

    /// Flushes and closes the event file.
    ///
    /// # Errors
    /// [`Error::Io`] when the event file cannot be written.
    pub fn close(mut self) -> Result<()> {
        self.flush()?;
        self.file.get_ref().sync_all().map_err(|e| Error::io("tensorboard", &self.path, e))
    }

    /// Appends one event as a TFRecord.
    fn event(&mut self, event: Event) -> Result<()> {
        use prost::Message;
        let data = event.encode_to_vec();
        let len = (data.len() as u64).to_le_bytes();
        let mut record = Vec::with_capacity(data.len() + 16);
        record.extend_from_slice(&len);
        record.extend_from_slice(&masked_crc(&len).to_le_bytes());
        record.extend_from_slice(&data);
        record.extend_from_slice(&masked_crc(&data).to_le_bytes());
        self.file.write_all(&record).map_err(|e| Error::io("tensorboard", &self.path, e))
    }
}

/// Seconds since the Unix epoch (0 on a clock set before it).
fn wall_time() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CRC-32C's check value is CRC-32C("123456789") = 0xe3069283 (the catalogue value
    /// TensorFlow's `crc32c_test.cc` checks too); masked, `((c >> 15) | (c << 17)) + 0xa282ead8`
    /// mod 2^32 = 0xc78ab0e5 (worked by hand from that value).
    #[test]
    fn masked_crc_is_tensorflows() {
        assert_eq!(masked_crc(b"123456789"), 0xc78a_b0e5);
    }
}
