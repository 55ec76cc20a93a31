//! `learned-fft export`: a checkpoint's twiddles in another format.

use clap::{Args, ValueEnum};
use serde_json::{json, Value};

#[derive(Args)]
pub struct ExportArgs {
    /// Checkpoint file.
    #[arg(long)]
    checkpoint: String,
    /// Output format.
    #[arg(long, value_enum, default_value = "safetensors")]
    format: ExportFormat,
    /// Output file.
    #[arg(long)]
    out: String,
}

/// The formats `export` writes.
#[derive(Clone, Copy, ValueEnum)]
enum ExportFormat {
    /// safetensors (twiddle_re, twiddle_im, permutation; metadata).
    Safetensors,
}

/// Writes the file and names it on stderr.
pub fn run(args: ExportArgs) -> learned_fft::Result<Value> {
    let ExportFormat::Safetensors = args.format;
    let summary = learned_fft::train::export::export_safetensors(args.checkpoint, args.out)?;
    eprintln!("wrote {} ({} bytes)", summary.path, summary.bytes);
    Ok(json!({ "export": summary }))
}
