//! Pictures of what was learned, as PNG files: the training curve, the error matrix, the
//! twiddles, spectrograms and filter taps.
//!
//! Drawn with [plotters](https://docs.rs/plotters) into an RGB buffer, with the DejaVu Sans font
//! embedded in the crate (no system fonts are needed), encoded by the `png` crate and written
//! atomically. Every figure has a fixed size in pixels, given by its `*_SIZE` constant.
//!
//! | function | file the CLI writes | size (px) |
//! |---|---|---|
//! | [`training_curve`] | `curve.png` | [`CURVE_SIZE`] |
//! | [`matrix_error`] | `error.png` | [`MATRIX_SIZE`] |
//! | [`twiddle_magnitudes`] | `twiddles.png` | [`TWIDDLES_SIZE`] |
//! | [`spectrograms`] | (the `spectral_loss` example) | [`SPECTROGRAM_SIZE`] |
//! | [`taps`] | (the `fft_conv` example) | [`TAPS_SIZE`] |
//!
//! [`checkpoint_pictures`] draws the first three for a checkpoint (`learned-fft plot`).

mod canvas;
mod checkpoint;
mod curves;
mod heatmap;

pub use checkpoint::{checkpoint_pictures, checkpoint_pictures_on, Pictures, CURVE_FILE, ERROR_FILE, TWIDDLES_FILE};
pub use curves::{taps, training_curve, twiddle_magnitudes, CURVE_SIZE, TAPS_SIZE, TWIDDLES_SIZE};
pub use heatmap::{matrix_error, spectrograms, Spectrogram, MATRIX_SIZE, SPECTROGRAM_SIZE};
