//! Learn an unknown FIR filter with an FFT convolution layer built on a trained butterfly FFT.
//!
//! ```text
//! cargo run --release --example fft_conv                  # auto backend
//! cargo run --release --example fft_conv -- --backend wgpu
//! ```
//!
//! The model is one `FftConv1d` whose FFT is the trained N = 256 butterfly shipped in
//! `checkpoints/` (frozen: no gradient, never updated) and whose 16 taps are learnable, started at
//! random. It sees input/output pairs of an unknown 16-tap low-pass filter (signals of 240
//! samples, so the linear convolution fits in N = 256) and is fitted by Adam to the MSE plus a
//! spectral loss. It prints the loss as it falls and the learned taps against the true ones, and
//! draws them to `runs/fft_conv/taps.png`.

use burn::module::Module;
use burn::nn::loss::Reduction;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use clap::Parser;
use learned_fft::backend::{dispatch, BackendKind, BackendTask, FftBackend, Precision, Selected, BACKEND_ENV};
use learned_fft::SpectralLossConfig;
use learned_fft::{float_tensor, to_f64_vec};
use learned_fft::{FftConv1d, FftConv1dConfig, FftSource};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};

#[derive(Parser)]
struct Args {
    /// Backend: auto, wgpu, candle, ndarray, cuda.
    #[arg(long, env = BACKEND_ENV, default_value = "auto")]
    backend: BackendKind,
    /// The trained FFT (N = 256).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/checkpoints/dft-n256-f32.lfft"))]
    checkpoint: std::path::PathBuf,
    /// Adam steps.
    #[arg(long, default_value_t = 400)]
    steps: usize,
    /// Where the taps' picture goes.
    #[arg(long, default_value = "runs/fft_conv")]
    out: std::path::PathBuf,
}

/// Taps of the unknown filter.
const K: usize = 16;
/// Samples per signal.
const L: usize = 240;
/// Signals per batch.
const BATCH: usize = 32;

/// A Hamming-windowed sinc low-pass with cut-off 0.15 cycles per sample, delayed by (K − 1)/2.
fn true_filter() -> Vec<f64> {
    let c = 0.15;
    let mid = (K - 1) as f64 / 2.0;
    (0..K)
        .map(|n| {
            let t = n as f64 - mid;
            let sinc = if t == 0.0 {
                2.0 * c
            } else {
                (2.0 * std::f64::consts::PI * c * t).sin() / (std::f64::consts::PI * t)
            };
            sinc * (0.54 - 0.46 * (2.0 * std::f64::consts::PI * n as f64 / (K - 1) as f64).cos())
        })
        .collect()
}

/// `y[n] = Σ_k h[k] x[n − k]`, n < L, per signal.
fn filter(x: &[f64], h: &[f64]) -> Vec<f64> {
    let mut y = vec![0.0; x.len()];
    for (s, out) in x.chunks(L).zip(y.chunks_mut(L)) {
        for n in 0..L {
            out[n] = (0..K.min(n + 1)).map(|k| h[k] * s[n - k]).sum();
        }
    }
    y
}

struct Fit {
    checkpoint: std::path::PathBuf,
    steps: usize,
    out: std::path::PathBuf,
}

impl BackendTask for Fit {
    type Output = ();

    fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> learned_fft::Result<()> {
        let truth = true_filter();
        let config =
            FftConv1dConfig::new(1, K).with_bias(false).with_fft(FftSource::Checkpoint(self.checkpoint.clone()));
        B::seed(&device, 7);
        let mut model: FftConv1d<B> = config.init(L, &device)?;
        println!("backend: {selected}; FFT N = {} from {} (frozen)", model.fft_size(), self.checkpoint.display());
        let spectral = SpectralLossConfig::new(64, 16).init::<B>(&device)?;
        let mut optim = AdamConfig::new().init::<B, FftConv1d<B>>();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut first = None;
        let mut last = 0.0;
        for step in 0..=self.steps {
            // Fresh input/output pairs every step.
            let x: Vec<f64> = (0..BATCH * L).map(|_| StandardNormal.sample(&mut rng)).collect();
            let y = filter(&x, &truth);
            let xt = float_tensor::<B, 3>(x, [BATCH, 1, L], &device);
            let yt = float_tensor::<B, 2>(y, [BATCH, L], &device);
            let pred = model.forward(xt)?.reshape([BATCH, L]);
            let mse = (pred.clone() - yt.clone()).powi_scalar(2).mean();
            let loss = mse.clone() + spectral.forward(pred, yt, Reduction::Mean)?.mul_scalar(0.1);
            last = to_f64_vec(loss.clone())[0];
            first.get_or_insert(last);
            if step % 25 == 0 {
                println!("step {step:4}  loss {last:.3e}  mse {:.3e}", to_f64_vec(mse)[0]);
            }
            if step == self.steps {
                break;
            }
            let lr = if step < self.steps / 2 {
                1e-2
            } else if step < self.steps * 3 / 4 {
                2e-3
            } else {
                5e-4
            };
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(lr, model, grads);
        }
        let learned = to_f64_vec(model.weight.val());
        println!();
        println!("| tap | true | learned |");
        println!("|---|---|---|");
        for (k, (t, l)) in truth.iter().zip(&learned).enumerate() {
            println!("| {k} | {t:+.5} | {l:+.5} |");
        }
        let worst = truth.iter().zip(&learned).map(|(t, l)| (t - l).abs()).fold(0.0, f64::max);
        println!();
        let frozen = model.fft.num_params();
        println!("loss {:.3e} → {last:.3e}; largest tap error {worst:.2e}; {K} taps trained, the FFT's {frozen} parameters frozen", first.unwrap_or(last));
        let path = self.out.join("taps.png");
        let title =
            format!("{K}-tap low-pass: learned through a frozen trained FFT (N = {}) vs true", model.fft_size());
        learned_fft::plot::taps(&path, &truth, &learned, &title)?;
        println!("taps: {}", path.display());
        Ok(())
    }
}

/// Runs the example; an error is printed as its message (not in Debug form) with a failing exit
/// status.
fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    dispatch(args.backend, Precision::F32, Fit { checkpoint: args.checkpoint, steps: args.steps, out: args.out })?;
    Ok(())
}
