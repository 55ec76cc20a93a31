//! learned-fft's test suite: one binary, one module per concern.
//!
//! - `truth`: the f64 references (rustfft, target matrices, the butterfly definition) against
//!   closed forms and naive sums.
//! - `exact_fft`: the exact-init butterfly against rustfft on every backend.
//! - `gradients`: finite differences, the adjoint identity, the fft→ifft round trip.
//! - `kernels`: the fused CubeCL kernels against the reference twin (output, both gradients,
//!   determinism, an optimiser trajectory) on wgpu, and on CUDA with the `cuda` feature.
//! - `linear`: `ButterflyLinear` against torch_butterfly's definition written out in f64 on every
//!   backend, its gradients against finite differences of it, the FFT and orthogonal
//!   initialisers, Adam recovering a map the layer can represent, bad input.
//! - `rfft`: real signals through the half-size butterfly against rustfft on every backend,
//!   gradients against finite differences, the fused path against the CPU, bad input.
//! - `spectral`: the spectral loss reference against an f64 STFT, finite differences, overlap
//!   accumulation, zero inputs, bad input.
//! - `spectral_kernels`: the fused spectral kernels against the reference twin (loss, both
//!   gradients, every option), determinism, overlap accumulation, a fused path that cannot run.
//! - `train`: the trainer reaches the bars from random init; TensorBoard, checkpoints, resume
//!   after SIGKILL, export, divergence.
//! - `conv`: the FFT convolution layer against an explicit f64 sum, its gradients against finite
//!   differences, frozen FFTs under an optimiser; Welch's PSD against an f64 Welch; top-k peaks.
//! - `errors`: bad input gives a clear error.
//! - `plot`: the PNG pictures (CLI and examples) decode at their documented sizes; bad data.
//! - `user_target`: a user's own matrix: `.npy` files of every accepted dtype and order read
//!   exactly, a random BP learned from its matrix alone (library and `train --target-file`),
//!   a matrix no butterfly represents ends with its rmse, and bad files are refused.
//! - `user_data`: a user's own input/output pairs: learned from the pairs alone (in code, in
//!   f32 against its own solution, on minibatches, and through `train --data`), too few pairs
//!   keep the identity permutation, and bad files are refused.
//! - `user_operator`: a user's own operator: learned from its images alone, grown from its
//!   member of half the size, resumed only with the operator given again, bad operators refused.
//! - `cli`: the binary as a user runs it: sizes and counts it refuses, the backend flag over the
//!   environment, one trainer per checkpoint directory, SIGTERM/SIGINT leave a checkpoint.
//!
//! wgpu tests skip when no adapter is found, unless `LEARNED_FFT_REQUIRE_WGPU=1`, which makes
//! them fail instead (CI sets it). The kernel sweeps run a CI tier by default and every case
//! with `LEARNED_FFT_FULL_SWEEP=1` (the GPU runs use it).

mod cli;
mod common;
mod conv;
mod errors;
mod exact_fft;
mod gradients;
mod kernels;
mod linear;
mod plot;
mod rfft;
mod spectral;
mod spectral_kernels;
mod train;
mod truth;
mod user_data;
mod user_operator;
mod user_target;
