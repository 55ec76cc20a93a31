//! Writing files so that nothing is ever left half-written.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Writes `bytes` to `path` through `<path>.tmp` in the same directory (created if missing),
/// flushed to disk and renamed over `path`: a reader, or a process killed mid-write, sees the old
/// file or the new one, never half of one. `op` names the caller in errors.
pub fn write_atomic(op: &'static str, path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(op, dir, e))?;
    }
    let tmp = temporary(path);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        // Make the rename itself durable (best effort: not every platform can open a directory).
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(op, path, e)
    })
}

/// The temporary file [`write_atomic`] writes `path` through.
pub fn temporary(path: &Path) -> PathBuf {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    PathBuf::from(tmp)
}
