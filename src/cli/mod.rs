//! The `learned-fft` subcommands, one file each: its clap arguments and its `run`, which returns
//! the JSON object `main` prints as the last stdout line. Beside them, what only the binary
//! needs: the benchmarks' timed tasks, the training sweep, the anchors, the progress line.
//!
//! The argument structs carry no doc comment: clap would take it for the subcommand's about,
//! which the variants of `main`'s `Command` give.

pub mod anchor;
pub mod backend;
pub mod bench;
pub mod eval;
pub mod exact;
pub mod export;
pub mod linear;
pub mod plot;
pub mod progress;
pub mod rfft;
pub mod sweep;
pub mod timing;
pub mod train;

use std::fmt::Display;
use std::str::FromStr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use learned_fft::backend::{BackendKind, Precision};
use serde_json::json;

/// What the global flags give every subcommand.
pub struct Global {
    /// `--backend`, else `LEARNED_FFT_BACKEND`, else auto.
    pub backend: BackendKind,
    /// `--precision` as given (eval and plot default to the checkpoint's, the others to f32).
    pub precision: Option<Precision>,
}

impl Global {
    /// The precision for a command that does not read a checkpoint.
    pub fn precision(&self) -> Precision {
        self.precision.unwrap_or_default()
    }
}

/// A value parser for one of the library's named enums: the names are clap's possible values
/// (listed in the help and in the error for any other text), the value comes from `FromStr`.
/// The library has no clap; this is where its names meet it.
pub fn one_of<T>(variants: &[T], name: fn(T) -> &'static str) -> impl TypedValueParser<Value = T>
where
    T: FromStr + Copy + Send + Sync + 'static,
    T::Err: Display,
{
    PossibleValuesParser::new(variants.iter().map(|&v| name(v))).try_map(|s| s.parse::<T>().map_err(|e| e.to_string()))
}

/// A count that must be at least 1 (`--iters 0` is refused, not taken as 1).
pub fn positive() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..)
}

/// SIGTERM and SIGINT set the returned flag, which asks a run to checkpoint and stop; a second
/// signal ends the process at once (status 128 + the signal).
pub fn stop_on_signals() -> learned_fft::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        let register = signal_hook::flag::register_conditional_shutdown(signal, 128 + signal, Arc::clone(&stop))
            .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&stop)));
        register.map_err(|e| learned_fft::Error::io("train.signals", "signal handlers", e))?;
    }
    Ok(stop)
}

/// Prints each progress record as a JSON line on stderr (for scripts and `--quiet`).
pub struct JsonLines;

impl learned_fft::train::Observer for JsonLines {
    fn progress(&mut self, p: &learned_fft::train::Progress) {
        eprintln!("{}", json!({ "progress": p }));
    }
}
