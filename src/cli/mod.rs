//! What only the command line needs: benchmarks, the training sweep, the progress line.

pub mod anchor;
pub mod bench;
pub mod progress;
pub mod sweep;
