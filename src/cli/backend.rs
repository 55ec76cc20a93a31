//! `learned-fft backend`: the backend and device a command would use.

use learned_fft::backend::select;
use serde_json::{json, Value};

use super::Global;

/// Selects the backend as every command does and reports it.
pub fn run(global: &Global) -> learned_fft::Result<Value> {
    let selected = select(global.backend, global.precision())?;
    eprintln!("backend: {selected}");
    Ok(json!({ "backend": selected }))
}
