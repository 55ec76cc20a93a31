//! Recover the gains of a few sinusoids by gradient descent on the spectral loss.
//!
//! ```text
//! cargo run --release --example spectral_loss                 # auto backend
//! cargo run --release --example spectral_loss -- --backend wgpu
//! ```
//!
//! A target signal is a sum of five sinusoids with unknown gains (frequencies and phases known,
//! some between bins). A model holding the five gains, all started at 0.1, renders its own
//! signal and is fitted by Adam to the target's magnitude spectrogram (window 256, hop 64, Hann,
//! linear magnitude, L1; plus the spectral-convergence term). The magnitudes ignore phase, so
//! the loss sees only what a spectrogram sees. It prints the loss as it falls and the learned
//! gains against the true ones, and draws the target's and the fitted signal's spectrograms to
//! `runs/spectral_loss/spectrograms.png`.

use burn::module::{Module, Param};
use burn::nn::loss::Reduction;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::{backend::Backend, Tensor};
use clap::Parser;
use learned_fft::backend::{dispatch, BackendKind, BackendTask, FftBackend, Precision, Selected, BACKEND_ENV};
use learned_fft::plot::Spectrogram;
use learned_fft::SpectralLossConfig;
use learned_fft::{float_tensor, to_f64_vec};

#[derive(Parser)]
struct Args {
    /// Backend: auto, wgpu, candle, ndarray, cuda.
    #[arg(long, env = BACKEND_ENV, default_value = "auto")]
    backend: BackendKind,
    /// Adam steps.
    #[arg(long, default_value_t = 300)]
    steps: usize,
    /// Where the spectrograms' picture goes.
    #[arg(long, default_value = "runs/spectral_loss")]
    out: std::path::PathBuf,
}

/// Samples per signal.
const T: usize = 8192;
/// Frequencies (cycles per sample × T) and phases of the sinusoids.
const FREQS: [f64; 5] = [300.0, 517.5, 1024.0, 1400.25, 2900.0];
const PHASES: [f64; 5] = [0.0, 0.4, 1.1, 2.0, 2.7];
/// The gains the model has to find.
const TRUE_GAINS: [f64; 5] = [1.0, 0.5, 0.8, 0.25, 0.6];

/// The model: one gain per sinusoid.
#[derive(Module, Debug)]
struct Gains<B: Backend> {
    gains: Param<Tensor<B, 2>>,
}

impl<B: Backend> Gains<B> {
    /// `[1, 5] × [5, T]` → `[1, T]`.
    fn render(&self, basis: &Tensor<B, 2>) -> Tensor<B, 2> {
        self.gains.val().matmul(basis.clone())
    }
}

struct Fit {
    steps: usize,
    out: std::path::PathBuf,
}

impl BackendTask for Fit {
    type Output = ();

    fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> learned_fft::Result<()> {
        let mut basis = Vec::with_capacity(FREQS.len() * T);
        for (f, p) in FREQS.iter().zip(PHASES) {
            basis.extend((0..T).map(|t| (2.0 * std::f64::consts::PI * f * t as f64 / T as f64 + p).sin()));
        }
        let basis = float_tensor::<B, 2>(basis, [FREQS.len(), T], &device);
        let target = float_tensor::<B, 2>(TRUE_GAINS.to_vec(), [1, FREQS.len()], &device).matmul(basis.clone());
        let config = SpectralLossConfig::new(256, 64).with_spectral_convergence(1.0);
        let loss_fn = config.init::<B>(&device)?;
        println!(
            "backend: {selected}; spectral loss W = 256, H = 64 ({} path)",
            if loss_fn.is_fused(&device) { "fused kernel" } else { "reference" }
        );

        let mut model = Gains { gains: Param::from_tensor(Tensor::<B, 2>::full([1, FREQS.len()], 0.1, &device)) };
        let mut optim = AdamConfig::new().init::<B, Gains<B>>();
        let mut first = None;
        let mut last = 0.0;
        for step in 0..=self.steps {
            let loss = loss_fn.forward(model.render(&basis), target.clone(), Reduction::Mean)?;
            last = to_f64_vec(loss.clone())[0];
            first.get_or_insert(last);
            if step % 25 == 0 {
                println!("step {step:4}  loss {last:.6}");
            }
            if step == self.steps {
                break;
            }
            let lr = if step < self.steps * 2 / 3 { 2e-2 } else { 2e-3 };
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(lr, model, grads);
        }
        let learned = to_f64_vec(model.gains.val());
        println!();
        println!("| sinusoid | frequency | true gain | learned gain |");
        println!("|---|---|---|---|");
        for (i, (g, want)) in learned.iter().zip(TRUE_GAINS).enumerate() {
            println!("| {i} | {:.2} | {want:.3} | {g:.3} |", FREQS[i]);
        }
        let worst = learned.iter().zip(TRUE_GAINS).map(|(g, w)| (g - w).abs()).fold(0.0, f64::max);
        println!();
        println!("loss {:.4} → {last:.6}; largest gain error {worst:.2e}", first.unwrap_or(last));

        // The magnitudes the loss compares, [1, frames, bins] each.
        let (predicted, target) = loss_fn.spectrograms(model.render(&basis), target)?;
        let [_, frames, bins] = target.dims();
        let target = Spectrogram::new(frames, bins, to_f64_vec(target))?;
        let predicted = Spectrogram::new(frames, bins, to_f64_vec(predicted))?;
        let path = self.out.join("spectrograms.png");
        let title = format!("|STFT| (W = 256, H = 64, Hann) of the target and of the fit after {} steps", self.steps);
        learned_fft::plot::spectrograms(&path, &target, &predicted, &title)?;
        println!("spectrograms: {}", path.display());
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
    dispatch(args.backend, Precision::F32, Fit { steps: args.steps, out: args.out })?;
    Ok(())
}
