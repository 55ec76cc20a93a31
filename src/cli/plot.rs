//! `learned-fft plot`: a checkpoint's pictures as PNG files.

use clap::Args;
use serde_json::{json, Value};

use super::Global;

#[derive(Args)]
pub struct PlotArgs {
    /// Checkpoint file.
    #[arg(long)]
    checkpoint: String,
    /// Directory the pictures go to (created if missing).
    #[arg(long)]
    out: String,
}

/// Draws the pictures and names each written or skipped one on stderr.
pub fn run(args: PlotArgs, global: &Global) -> learned_fft::Result<Value> {
    let pictures = learned_fft::plot::checkpoint_pictures(args.checkpoint, args.out, global.backend, global.precision)?;
    for file in &pictures.written {
        eprintln!("wrote {file}");
    }
    for why in &pictures.skipped {
        eprintln!("skipped {why}");
    }
    Ok(json!({ "plot": pictures }))
}
