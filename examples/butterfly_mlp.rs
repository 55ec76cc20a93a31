//! Replace the dense hidden layer of an MLP by `ButterflyLinear`, on a task the example makes up,
//! and compare accuracy, parameters and time with the dense model.
//!
//! ```text
//! cargo run --release --example butterfly_mlp                  # auto backend
//! cargo run --release --example butterfly_mlp -- --backend wgpu
//! ```
//!
//! The task: signals of 256 samples, each a sinusoid of random frequency and phase in one of 8
//! frequency bands, buried in white noise of twice its amplitude; the class is the band. Both
//! models are `hidden (256 → 256) → ReLU → Linear (256 → 8)`, the hidden layer a
//! `ButterflyLinear` of two factors or Burn's `Linear`. They are trained by Adam on the same
//! batches for the same steps and tested on the same 2000 fresh signals.

use std::time::Instant;

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig, Relu};
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::{backend::Backend, Int, Tensor, TensorData};
use clap::Parser;
use learned_fft::backend::{dispatch, BackendKind, BackendTask, FftBackend, Precision, Selected, BACKEND_ENV};
use learned_fft::{
    float_tensor, to_f64_vec, ButterflyLinear, ButterflyLinearConfig, ButterflyLinearInit, ButterflyOps,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

#[derive(Parser)]
struct Args {
    /// Backend: auto, wgpu, candle, ndarray, cuda.
    #[arg(long, env = BACKEND_ENV, default_value = "auto")]
    backend: BackendKind,
    /// Adam steps per model.
    #[arg(long, default_value_t = 600)]
    steps: usize,
}

/// Samples per signal, and the width of the hidden layer.
const N: usize = 256;
/// Frequency bands: the classes.
const CLASSES: usize = 8;
/// Signals per step.
const BATCH: usize = 64;
/// Held-out signals.
const TEST: usize = 2000;
/// Noise standard deviation; the sinusoid's amplitude is 1.
const NOISE: f64 = 2.0;

/// `count` signals and their classes: a sinusoid at a frequency drawn uniformly inside its
/// class's band of the 128 bins below Nyquist, random phase, plus white noise.
fn signals(count: usize, rng: &mut ChaCha8Rng) -> (Vec<f64>, Vec<i64>) {
    let band = (N / 2) as f64 / CLASSES as f64;
    let mut x = Vec::with_capacity(count * N);
    let mut labels = Vec::with_capacity(count);
    for _ in 0..count {
        let class = rng.random_range(0..CLASSES);
        let freq = band * (class as f64 + rng.random_range(0.1..0.9));
        let phase = rng.random_range(0.0..std::f64::consts::TAU);
        x.extend((0..N).map(|t| {
            let noise: f64 = StandardNormal.sample(rng);
            (std::f64::consts::TAU * freq * t as f64 / N as f64 + phase).sin() + NOISE * noise
        }));
        labels.push(class as i64);
    }
    (x, labels)
}

/// The MLP: one of the two hidden layers, ReLU, and the head.
#[derive(Module, Debug)]
struct Mlp<B: Backend> {
    butterfly: Option<ButterflyLinear<B>>,
    dense: Option<Linear<B>>,
    relu: Relu,
    head: Linear<B>,
}

impl<B: ButterflyOps> Mlp<B> {
    fn new(butterfly: bool, device: &B::Device) -> learned_fft::Result<Self> {
        let hidden = ButterflyLinearConfig::new(N, N).with_nblocks(2).with_init(ButterflyLinearInit::Ortho);
        Ok(Mlp {
            butterfly: if butterfly { Some(hidden.init(device)?) } else { None },
            dense: (!butterfly).then(|| LinearConfig::new(N, N).init(device)),
            relu: Relu::new(),
            head: LinearConfig::new(N, CLASSES).init(device),
        })
    }

    fn forward(&self, x: Tensor<B, 2>) -> learned_fft::Result<Tensor<B, 2>> {
        let h = match (&self.butterfly, &self.dense) {
            (Some(b), _) => b.forward(x)?,
            (None, Some(d)) => d.forward(x),
            (None, None) => unreachable!("Mlp::new sets one hidden layer"),
        };
        Ok(self.head.forward(self.relu.forward(h)))
    }
}

/// One model's outcome.
struct Outcome {
    params: usize,
    seconds: f64,
    final_loss: f64,
    accuracy: f64,
}

struct Compare {
    steps: usize,
}

impl Compare {
    fn train<B: FftBackend>(&self, butterfly: bool, device: &B::Device) -> learned_fft::Result<Outcome> {
        B::seed(device, 11);
        let mut model = Mlp::<B>::new(butterfly, device)?;
        let params = model.num_params();
        let mut optim = AdamConfig::new().init::<B, Mlp<B>>();
        let loss_fn = CrossEntropyLossConfig::new().init(device);
        // The same batches for both models.
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let labels = |l: Vec<i64>| Tensor::<B, 1, Int>::from_data(TensorData::new(l, [BATCH]), device);
        let start = Instant::now();
        let mut final_loss = f64::NAN;
        for step in 0..self.steps {
            let (x, y) = signals(BATCH, &mut rng);
            let logits = model.forward(float_tensor::<B, 2>(x, [BATCH, N], device))?;
            let loss = loss_fn.forward(logits, labels(y));
            if step % 100 == 0 || step + 1 == self.steps {
                final_loss = to_f64_vec(loss.clone())[0];
                println!("  step {step:4}  loss {final_loss:.4}");
            }
            let lr = if step < self.steps * 3 / 4 { 3e-3 } else { 5e-4 };
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(lr, model, grads);
        }
        let (x, y) = signals(TEST, &mut ChaCha8Rng::seed_from_u64(99));
        // Read back, so that the time includes the device's work.
        let logits = to_f64_vec(model.forward(float_tensor::<B, 2>(x, [TEST, N], device))?);
        let seconds = start.elapsed().as_secs_f64();
        let correct = logits
            .chunks(CLASSES)
            .zip(&y)
            .filter(|(row, &label)| {
                let best = row.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i);
                best == Some(label as usize)
            })
            .count();
        Ok(Outcome { params, seconds, final_loss, accuracy: correct as f64 / TEST as f64 })
    }
}

impl BackendTask for Compare {
    type Output = ();

    fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> learned_fft::Result<()> {
        println!("backend: {selected}; {} Adam steps of {BATCH} signals, {TEST} test signals", self.steps);
        println!("butterfly hidden layer:");
        let b = self.train::<B>(true, &device)?;
        println!("dense hidden layer:");
        let d = self.train::<B>(false, &device)?;
        println!();
        println!("| hidden layer | parameters | train + test time | final loss | test accuracy |");
        println!("|---|---|---|---|---|");
        for (name, o) in [("ButterflyLinear (2 factors)", &b), ("Linear", &d)] {
            println!(
                "| {name} | {} | {:.1} s | {:.4} | {:.1} % |",
                o.params,
                o.seconds,
                o.final_loss,
                100.0 * o.accuracy
            );
        }
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    dispatch(args.backend, Precision::F32, Compare { steps: args.steps })?;
    Ok(())
}
