//! A small differentiable synthesiser (DDSP-style) trained with the multi-resolution spectral
//! loss to match target sounds that the example makes itself.
//!
//! ```text
//! cargo run --release --example ddsp_synth                  # auto backend
//! cargo run --release --example ddsp_synth -- --backend wgpu
//! cargo run --release --features cuda --example ddsp_synth -- --backend cuda --copies 512 --devices 2
//! ```
//!
//! The targets: four notes of 8192 samples at 16 kHz (f0 of 110, 165, 220 and 330 Hz), each a
//! harmonic tone with an amplitude envelope over the harmonics of its own (a spectral tilt and a
//! formant) plus white noise through a filter of its own (16 bands), the tone under a fixed
//! attack and decay.
//!
//! The model, as in DDSP's decoder: an MLP maps each note's conditioning (its f0 and which note
//! it is) to 48 harmonic amplitudes and 16 noise-band gains (DDSP's scaled sigmoid keeps them
//! positive). The synthesiser sums the harmonics (those below Nyquist) under the same envelope and
//! filters the same white noise in the frequency domain through `Butterfly::rfft` and
//! `Butterfly::irfft` (the exact butterfly of 4096, frozen). Adam minimises the sum of the linear-
//! and log-magnitude spectral losses at windows of 1024, 256 and 64 samples (hop a quarter of the
//! window, Hann, L1), 300 steps (the last third at a tenth of the rate). The example prints the
//! loss as it falls and the harmonic amplitudes' error, and draws the spectrograms of the targets
//! against the model's sounds before and after training to `runs/ddsp_synth/before.png` and
//! `after.png`.
//!
//! Data parallel: `--copies C` trains on 4·C notes (the four notes C times, each copy with white
//! noise of its own), and `--devices D` splits them evenly over the backend's first D devices.
//! Each device holds a replica: its notes, a copy of the decoder and an Adam of its own. Each
//! step, every replica computes its share of the loss (its notes' mean, divided by D) and its
//! gradients on a thread of its own, queued on the calling thread's stream of each device, and
//! packs them into one tensor; an all-reduce leaves their sum on every device, and every replica
//! takes Adam's step on it. The sum is the gradient of the mean over all notes, so the steps are
//! those of one device on the whole batch, up to rounding, and the replicas stay alike to the bit
//! (the run prints their largest difference at the end). The all-reduce is the backend's own
//! where it has one ([`CollectiveOps`]: NCCL on CUDA, with no wait on the host); elsewhere each
//! replica's gradients go through the host and every device adds them in the same order.
//! Weights cross devices only at the start, through the host (see [`Replica`]).
//! The loss is read back only when it is printed, and at the first and the last step.

use std::ops::Range;
use std::time::Instant;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::nn::loss::Reduction;
use burn::nn::{Linear, LinearConfig, Relu};
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::{Adam, AdamConfig, GradientsParams, Optimizer};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{activation::sigmoid, StreamId, Tensor, TensorData};
use clap::Parser;
use learned_fft::backend::{
    dispatch, local_devices, BackendKind, BackendTask, FftBackend, Precision, Selected, BACKEND_ENV,
};
use learned_fft::nn::exact_fft;
use learned_fft::plot::Spectrogram;
use learned_fft::{
    float_tensor, to_f64_vec, Butterfly, CollectiveOps, Magnitude, MultiResolutionSpectralLoss,
    MultiResolutionSpectralLossConfig, SpectralLossConfig,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

#[derive(Parser)]
struct Args {
    /// Backend: auto, wgpu, candle, ndarray, cuda.
    #[arg(long, env = BACKEND_ENV, default_value = "auto")]
    backend: BackendKind,
    /// Adam steps.
    #[arg(long, default_value_t = Setup::EXAMPLE.steps)]
    steps: usize,
    /// Adam's learning rate for the first two thirds of the steps (a tenth of it after).
    #[arg(long, default_value_t = Setup::EXAMPLE.lr)]
    lr: f64,
    /// Where the spectrograms' pictures go.
    #[arg(long, default_value = "runs/ddsp_synth")]
    out: std::path::PathBuf,
    /// Copies of the four notes (the batch is 4 × copies notes).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    copies: u16,
    /// Devices to split the notes over (the backend's first ones); the notes must split evenly.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    devices: u16,
}

/// Sample rate in Hz.
const RATE: f64 = 16_000.0;
/// The notes' fundamentals in Hz.
const F0: [f64; 4] = [110.0, 165.0, 220.0, 330.0];

/// What a run synthesises and trains. [`Setup::EXAMPLE`] is what the example runs; its test runs
/// a smaller one.
#[derive(Clone, Copy, Debug)]
struct Setup {
    /// Samples per note (a power of two ≥ the largest window).
    samples: usize,
    /// Harmonics per note (those at or above Nyquist are silent).
    harmonics: usize,
    /// Noise bands, evenly spaced from 0 Hz to Nyquist.
    bands: usize,
    /// Width of the MLP's hidden layers.
    hidden: usize,
    /// Windows of the spectral losses (hop a quarter of each).
    windows: [usize; 3],
    /// Adam steps, and the learning rate of the first two thirds (a tenth of it after).
    steps: usize,
    lr: f64,
    /// Copies of the four notes.
    copies: usize,
}

impl Setup {
    const EXAMPLE: Setup = Setup {
        samples: 8192,
        harmonics: 48,
        bands: 16,
        hidden: 64,
        windows: [1024, 256, 64],
        steps: 300,
        lr: 3e-3,
        copies: 1,
    };

    /// Notes in the batch: the four notes, `copies` times (note j is note j mod 4).
    fn notes(&self) -> usize {
        F0.len() * self.copies
    }

    /// The decoder's conditioning of notes `range`, `[notes, 1 + 4]`: f0 scaled, one-hot note.
    fn conditioning(&self, range: &Range<usize>) -> Vec<f64> {
        let mut cond = Vec::with_capacity(range.len() * (1 + F0.len()));
        for j in range.clone() {
            cond.push((F0[j % F0.len()] / F0[0]).log2() - 1.0);
            cond.extend((0..F0.len()).map(|i| f64::from(u8::from(i == j % F0.len()))));
        }
        cond
    }

    /// The target's harmonic amplitudes of note `i` (`[harmonics]`): a tilt of its own times a
    /// formant of its own, zero at and above Nyquist.
    fn target_harmonics(&self, i: usize) -> Vec<f64> {
        let tilt = [1.0, 1.4, 0.8, 1.2][i];
        let formant = [800.0, 1200.0, 1800.0, 2600.0][i];
        (1..=self.harmonics)
            .map(|h| {
                let f = h as f64 * F0[i];
                let bump = 1.0 + 3.0 * (-((f - formant) / 300.0).powi(2)).exp();
                if f < RATE / 2.0 {
                    0.5 * bump / (h as f64).powf(tilt)
                } else {
                    0.0
                }
            })
            .collect()
    }

    /// The target's noise-band gains of note `i` (`[bands]`): one band-pass of its own.
    fn target_bands(&self, i: usize) -> Vec<f64> {
        let centre = [0.2, 0.5, 0.35, 0.75][i] * (self.bands - 1) as f64;
        (0..self.bands).map(|b| 0.02 + 0.25 * (-((b as f64 - centre) / 2.0).powi(2)).exp()).collect()
    }
}

/// The decoder: conditioning `[notes, 1 + notes]` (f0 scaled, one-hot note) to harmonic
/// amplitudes and noise-band gains.
#[derive(Module, Debug)]
struct Decoder<B: Backend> {
    hidden1: Linear<B>,
    hidden2: Linear<B>,
    out: Linear<B>,
    relu: Relu,
}

impl<B: Backend> Decoder<B> {
    fn new(setup: &Setup, device: &B::Device) -> Self {
        let inputs = 1 + F0.len();
        Decoder {
            hidden1: LinearConfig::new(inputs, setup.hidden).init(device),
            hidden2: LinearConfig::new(setup.hidden, setup.hidden).init(device),
            out: LinearConfig::new(setup.hidden, setup.harmonics + setup.bands).init(device),
            relu: Relu::new(),
        }
    }

    /// `(amplitudes [notes, harmonics], gains [notes, bands])`, positive through DDSP's scaled
    /// sigmoid `2 · sigmoid(z)^ln 10 + 1e-7`.
    fn forward(&self, cond: Tensor<B, 2>, harmonics: usize) -> (Tensor<B, 2>, Tensor<B, 2>) {
        let h = self.relu.forward(self.hidden1.forward(cond));
        let h = self.relu.forward(self.hidden2.forward(h));
        let z = self.out.forward(h);
        let [notes, width] = z.dims();
        let positive = sigmoid(z).powf_scalar(std::f64::consts::LN_10).mul_scalar(2.0).add_scalar(1e-7);
        (positive.clone().slice([0..notes, 0..harmonics]), positive.slice([0..notes, harmonics..width]))
    }
}

/// What the synthesiser holds fixed: the harmonic basis under the envelope, the white noise's
/// spectrum, the bands' interpolation onto the bins, and the butterfly for the inverse.
struct Synth<B: FftBackend> {
    /// `[notes, harmonics, samples]`: `env(t) · sin(2π h f0 t / rate)`, zero at and above
    /// Nyquist.
    basis: Tensor<B, 3>,
    /// The noise's rfft, `[notes, bins]` each.
    noise: (Tensor<B, 2>, Tensor<B, 2>),
    /// `[bands, bins]`: linear interpolation of the band gains onto the rfft bins.
    interp: Tensor<B, 2>,
    /// The exact butterfly of `samples / 2` (frozen).
    fft: Butterfly<B>,
}

impl<B: FftBackend> Synth<B> {
    /// The synthesiser of notes `range` of the batch.
    fn new(setup: &Setup, range: &Range<usize>, device: &B::Device) -> learned_fft::Result<Self> {
        let (t, notes, harmonics) = (setup.samples, range.len(), setup.harmonics);
        // A 10 ms attack and a decay to a third over the note.
        let env = |s: usize| (s as f64 / (0.01 * RATE)).min(1.0) * (-(s as f64) / t as f64).exp();
        let mut basis = vec![0.0; notes * harmonics * t];
        for (i, j) in range.clone().enumerate() {
            let f0 = F0[j % F0.len()];
            for h in 1..=harmonics {
                let f = h as f64 * f0;
                if f >= RATE / 2.0 {
                    continue;
                }
                let row = &mut basis[(i * harmonics + h - 1) * t..][..t];
                for (s, v) in row.iter_mut().enumerate() {
                    *v = env(s) * (std::f64::consts::TAU * f * s as f64 / RATE).sin();
                }
            }
        }
        let basis = float_tensor::<B, 1>(basis, [notes * harmonics * t], device).reshape([notes, harmonics, t]);
        let fft = exact_fft::<B>(t / 2, false, device)?.no_grad();
        // Every note's white noise from one stream, so a note's noise is the same whichever
        // device holds it.
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let white: Vec<f64> = (0..range.end * t).map(|_| StandardNormal.sample(&mut rng)).collect();
        let white = white[range.start * t..].to_vec();
        let noise = fft.rfft(float_tensor::<B, 2>(white, [notes, t], device))?;
        let bins = t / 2 + 1;
        let mut interp = vec![0.0; setup.bands * bins];
        for k in 0..bins {
            let x = k as f64 / (bins - 1) as f64 * (setup.bands - 1) as f64;
            let lo = (x.floor() as usize).min(setup.bands - 2);
            let w = x - lo as f64;
            interp[lo * bins + k] = 1.0 - w;
            interp[(lo + 1) * bins + k] = w;
        }
        let interp = float_tensor::<B, 2>(interp, [setup.bands, bins], device);
        Ok(Synth { basis, noise: (noise.0.detach(), noise.1.detach()), interp, fft })
    }

    /// The notes `[notes, samples]` for amplitudes `[notes, harmonics]` and gains `[notes, bands]`:
    /// the harmonic sum plus the noise filtered by the gains interpolated onto the bins.
    fn render(&self, amplitudes: Tensor<B, 2>, gains: Tensor<B, 2>) -> learned_fft::Result<Tensor<B, 2>> {
        let [notes, harmonics] = amplitudes.dims();
        let t = self.basis.dims()[2];
        let tone = amplitudes.reshape([notes, 1, harmonics]).matmul(self.basis.clone()).reshape([notes, t]);
        let response = gains.matmul(self.interp.clone());
        let noise = self.fft.irfft(self.noise.0.clone() * response.clone(), self.noise.1.clone() * response)?;
        Ok(tone + noise)
    }
}

/// What a run measured.
#[derive(Clone, Debug)]
struct Outcome {
    /// The loss before the first step and after the last.
    first: f64,
    last: f64,
    /// RMS of the learned harmonic amplitudes' error relative to the targets' RMS, below Nyquist.
    harmonic_error: f64,
    seconds: f64,
    /// Notes per second over the steps after the first [`WARM`] (none in a shorter run).
    notes_per_second: Option<f64>,
    /// The largest difference between a weight of any replica and the first's at the end: 0 when
    /// every replica took the same steps.
    replica_spread: f64,
}

struct Train {
    setup: Setup,
    /// The devices the notes are split over.
    devices: Spread,
    /// Print progress and draw the pictures here (the test passes `None`).
    out: Option<std::path::PathBuf>,
}

/// Which devices a run splits its notes over.
#[derive(Clone, Copy, Debug)]
enum Spread {
    /// The backend's first `n` devices.
    Local(usize),
    /// The backend's default device `n` times, a thread each (the test's data-parallel run on
    /// one CPU).
    #[cfg_attr(not(test), allow(dead_code))]
    Repeat(usize),
}

impl Spread {
    /// The devices, the first of which holds the model and the optimiser.
    fn devices<B: Backend>(self, device: &B::Device) -> learned_fft::Result<Vec<B::Device>> {
        match self {
            Spread::Repeat(n) => Ok(vec![device.clone(); n]),
            Spread::Local(n) => local_devices::<B>("ddsp_synth", device, n),
        }
    }
}

/// Draws a module's lazily initialised parameters now, in the order of its fields (the order of
/// the decoder's forward). Burn initialises a parameter on first use, and each clone of an
/// uninitialised module (a fork per device) would draw weights of its own, and the optimiser's
/// copy others again.
struct Materialize;

impl<B: Backend> ModuleVisitor<B> for Materialize {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        param.val();
    }
}

/// The decoder before training, its weights drawn. They come from the backend's generator:
/// seeded, so a run repeats on one backend.
fn decoder<B: FftBackend>(setup: &Setup, device: &B::Device) -> Decoder<B> {
    B::seed(device, 5);
    let model = Decoder::<B>::new(setup, device);
    model.visit(&mut Materialize);
    model
}

/// One device's part of the batch: its notes' synthesiser, targets, conditioning and loss.
struct Shard<B: FftBackend> {
    device: B::Device,
    synth: Synth<B>,
    target: Tensor<B, 2>,
    cond: Tensor<B, 2>,
    loss: MultiResolutionSpectralLoss<B>,
}

impl<B: FftBackend> Shard<B> {
    /// Notes `range` of the batch on `device`.
    fn new(setup: &Setup, range: Range<usize>, device: &B::Device) -> learned_fft::Result<Self> {
        let synth = Synth::<B>::new(setup, &range, device)?;
        let notes = range.len();
        let amps: Vec<f64> = range.clone().flat_map(|j| setup.target_harmonics(j % F0.len())).collect();
        let bands: Vec<f64> = range.clone().flat_map(|j| setup.target_bands(j % F0.len())).collect();
        let target = synth
            .render(
                float_tensor::<B, 2>(amps, [notes, setup.harmonics], device),
                float_tensor::<B, 2>(bands, [notes, setup.bands], device),
            )?
            .detach();
        let cond = float_tensor::<B, 2>(setup.conditioning(&range), [notes, 1 + F0.len()], device);
        let loss = loss_config(setup).init::<B>(device)?;
        Ok(Shard { device: device.clone(), synth, target, cond, loss })
    }

    /// The model's sound for this shard's notes.
    fn sound(&self, model: &Decoder<B>, harmonics: usize) -> learned_fft::Result<Tensor<B, 2>> {
        let (amps, gains) = model.forward(self.cond.clone(), harmonics);
        self.synth.render(amps, gains)
    }

    /// This shard's loss times `scale` for `model` (a copy on this shard's device; the loss read
    /// back only if `read`: a read waits for the device), and the gradients of it.
    fn loss_and_grads(
        &self,
        model: &Decoder<B>,
        harmonics: usize,
        scale: f64,
        read: bool,
    ) -> learned_fft::Result<(Option<f64>, GradientsParams)> {
        let loss = self.loss.forward(self.sound(model, harmonics)?, self.target.clone(), Reduction::Mean)?;
        let loss = loss.mul_scalar(scale);
        let grads = GradientsParams::from_grads(loss.backward(), model);
        Ok((read.then(|| to_f64_vec(loss)[0]), grads))
    }
}

/// One device's replica: its notes, its copy of the decoder and an Adam of its own. Every
/// replica steps on the same gradient, alike to the bit on every device, so the copies stay alike
/// and no weights cross devices after the start: the shape of data-parallel training with an
/// all-reduce (see [`sums`]). The first weights go to the other devices through the host.
/// (CubeCL 0.10's device-to-device copy on CUDA, `Tensor::to_device`, receives into memory it
/// reserves without waiting for the work still queued on the destination, which may be using it:
/// with it, two devices ended the same run at a different loss each time. A read to the host
/// waits for the values, and an upload is ordered on the destination's stream.)
struct Replica<B: FftBackend> {
    shard: Shard<B>,
    model: Decoder<B>,
    optim: OptimizerAdaptor<Adam, Decoder<B>, B>,
}

impl<B: FftBackend> Replica<B> {
    /// The replicas of `model` (on the first shard's device) for `shards`: the first holds
    /// `model` itself, each other a copy through the host.
    fn all(shards: Vec<Shard<B>>, model: Decoder<B>) -> Vec<Self> {
        let weights = (shards.len() > 1).then(|| Packed::<B>::weights(&model).flat.into_data());
        shards
            .into_iter()
            .enumerate()
            .map(|(i, shard)| {
                let model = match (&weights, i) {
                    (Some(weights), 1..) => Packed::<B> { flat: Tensor::from_data(weights.clone(), &shard.device) }
                        .into_weights(model.clone()),
                    _ => model.clone(),
                };
                Replica { shard, model, optim: AdamConfig::new().init() }
            })
            .collect()
    }

    /// This replica's part of a step's gradient: its notes' loss divided by `replicas` (read
    /// back only if `read`) and its gradients; with other replicas, packed into one tensor.
    fn part(&self, harmonics: usize, replicas: usize, read: bool) -> learned_fft::Result<(Option<f64>, Part<B>)> {
        let (loss, grads) = self.shard.loss_and_grads(&self.model, harmonics, 1.0 / replicas as f64, read)?;
        if replicas == 1 {
            return Ok((loss, Part::Alone(grads)));
        }
        Ok((loss, Part::Shared(Packed::grads(&self.model, grads)?.flat)))
    }

    /// The sum of every replica's packed gradients, on this replica's device (replica `me`, whose
    /// own are `own`; the others' read to the host, `hosts`, in shard order): every replica adds
    /// the same values in the same order.
    fn host_sum(&self, me: usize, own: Tensor<B::InnerBackend, 1>, hosts: &[TensorData]) -> Tensor<B::InnerBackend, 1> {
        let term = |i: usize| {
            if i == me {
                own.clone()
            } else {
                Tensor::from_data(hosts[i].clone(), &self.shard.device)
            }
        };
        (1..hosts.len()).fold(term(0), |sum, i| sum + term(i))
    }

    /// Adam's step on `grads` at rate `lr`.
    fn step(&mut self, lr: f64, grads: GradientsParams) {
        self.model = self.optim.step(lr, self.model.clone(), grads);
    }
}

/// A replica's gradients for a step: as Burn keeps them (the only replica), or packed into one
/// tensor on its device.
enum Part<B: AutodiffBackend> {
    Alone(GradientsParams),
    Shared(Tensor<B::InnerBackend, 1>),
}

/// The whole batch's gradient on every replica's device, from every replica's packed gradients
/// (`owns`): the backend's all-reduce where it has one (NCCL on CUDA), else through the host
/// (each replica's read, then uploaded to every other and added in shard order).
fn sums<B: FftBackend>(
    replicas: &[Replica<B>],
    owns: Vec<Tensor<B::InnerBackend, 1>>,
) -> Vec<Tensor<B::InnerBackend, 1>> {
    if let Some(sums) = B::InnerBackend::all_reduce_sum(&owns) {
        return sums;
    }
    let hosts = on_each(&owns, |_, own| own.clone().into_data());
    on_each(replicas.iter().zip(owns), |me, (replica, own)| replica.host_sum(me, own, &hosts))
}

/// Every parameter's value, or its gradient, flattened and joined in the module's order (the
/// order `Module::visit` and `Module::map` walk), as one tensor without a graph.
struct Packed<B: AutodiffBackend> {
    flat: Tensor<B::InnerBackend, 1>,
}

impl<B: AutodiffBackend> Packed<B> {
    /// `model`'s weights.
    fn weights<M: Module<B>>(model: &M) -> Self {
        let mut visit = PackVisit::<B> { grads: None, parts: Vec::new(), missing: None };
        model.visit(&mut visit);
        Packed { flat: Tensor::cat(visit.parts, 0) }
    }

    /// `grads`, the gradients of `model`'s weights; an error if one is missing.
    fn grads<M: Module<B>>(model: &M, grads: GradientsParams) -> learned_fft::Result<Self> {
        let mut visit = PackVisit::<B> { grads: Some(grads), parts: Vec::new(), missing: None };
        model.visit(&mut visit);
        if let Some(id) = visit.missing {
            return Err(learned_fft::Error::invalid(
                "ddsp_synth",
                "a gradient for every weight",
                format!("none for {id}"),
            ));
        }
        Ok(Packed { flat: Tensor::cat(visit.parts, 0) })
    }

    /// `model` with these weights (on their device), each a new leaf that takes gradients, as
    /// `Module::fork` leaves them.
    fn into_weights<M: Module<B>>(self, model: M) -> M {
        model.map(&mut Unpack { flat: self.flat, at: 0 })
    }

    /// The gradients, registered under `model`'s parameters (the model they were packed from,
    /// or a copy of it: the same ids and shapes).
    fn into_grads<M: Module<B>>(self, model: &M) -> GradientsParams {
        let mut visit = UnpackGrads::<B> { flat: self.flat, at: 0, grads: GradientsParams::new() };
        model.visit(&mut visit);
        visit.grads
    }
}

/// Collects the flattened weights, or (with `grads`) the flattened gradients.
struct PackVisit<B: AutodiffBackend> {
    grads: Option<GradientsParams>,
    parts: Vec<Tensor<B::InnerBackend, 1>>,
    /// The first parameter without a gradient.
    missing: Option<ParamId>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for PackVisit<B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let value = match &mut self.grads {
            None => Some(param.val().inner()),
            Some(grads) => grads.remove::<B::InnerBackend, D>(param.id),
        };
        match value {
            Some(v) => {
                let n = v.shape().num_elements();
                self.parts.push(v.reshape([n]));
            }
            None => {
                self.missing.get_or_insert(param.id);
            }
        }
    }
}

/// Each parameter's slice of the packed tensor, in the module's order.
fn take<B: Backend, const D: usize>(flat: &Tensor<B, 1>, at: &mut usize, shape: burn::tensor::Shape) -> Tensor<B, D> {
    let n = shape.num_elements();
    let part = flat.clone().narrow(0, *at, n).reshape(shape);
    *at += n;
    part
}

struct Unpack<B: AutodiffBackend> {
    flat: Tensor<B::InnerBackend, 1>,
    at: usize,
}

impl<B: AutodiffBackend> ModuleMapper<B> for Unpack<B> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        param.map(|t| Tensor::from_inner(take(&self.flat, &mut self.at, t.shape())).require_grad())
    }
}

struct UnpackGrads<B: AutodiffBackend> {
    flat: Tensor<B::InnerBackend, 1>,
    at: usize,
    grads: GradientsParams,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for UnpackGrads<B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let g = take::<B::InnerBackend, D>(&self.flat, &mut self.at, param.shape());
        self.grads.register::<B::InnerBackend, D>(param.id, g);
    }
}

/// `work(i, item)` for every item, each on a thread of its own queued on this thread's stream
/// of each device. A thread of its own would get a stream of its own, and the work of one step
/// would cross streams on a device (the optimiser's weights into a forward, the gradients into
/// the optimiser) with nothing to order them: on CUDA, without a read of the loss every step, the
/// one-device run's final loss then changed from run to run (4.9 and 4.0 against 0.26).
fn on_each<T: Send, R: Send>(items: impl IntoIterator<Item = T>, work: impl Fn(usize, T) -> R + Sync) -> Vec<R> {
    let stream = StreamId::current();
    let work = &work;
    std::thread::scope(|scope| {
        let workers: Vec<_> = items
            .into_iter()
            .enumerate()
            .map(|(i, item)| scope.spawn(move || stream.executes(|| work(i, item))))
            .collect();
        // A worker that panicked passes its panic on.
        workers.into_iter().map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    })
}

/// Every replica's part of the whole batch's gradient, and the whole batch's loss (the mean over
/// every note, as one device would compute it), read back only if `read`.
fn parts<B: FftBackend>(
    replicas: &[Replica<B>],
    harmonics: usize,
    read: bool,
) -> learned_fft::Result<(Option<f64>, Parts<B>)> {
    let mut total = Some(0.0);
    let mut alone = None;
    let mut shared = Vec::with_capacity(replicas.len());
    for part in on_each(replicas, |_, replica| replica.part(harmonics, replicas.len(), read)) {
        let (value, part) = part?;
        total = total.zip(value).map(|(t, v)| t + v);
        match part {
            Part::Alone(grads) => alone = Some(grads),
            Part::Shared(part) => shared.push(part),
        }
    }
    Ok((total, alone.map_or(Parts::Shared(shared), Parts::Alone)))
}

/// Every replica's part of a step's gradient: the lone replica's, or one shared part per replica.
enum Parts<B: AutodiffBackend> {
    Alone(GradientsParams),
    Shared(Vec<Tensor<B::InnerBackend, 1>>),
}

/// One step of every replica: the whole batch's loss (read back only if `read`), then, given a
/// rate `lr`, every replica's Adam step on the whole batch's gradient.
fn step_all<B: FftBackend>(
    replicas: &mut [Replica<B>],
    harmonics: usize,
    read: bool,
    lr: Option<f64>,
) -> learned_fft::Result<Option<f64>> {
    let (loss, parts) = parts(replicas, harmonics, read)?;
    let Some(lr) = lr else { return Ok(loss) };
    match (replicas, parts) {
        ([replica], Parts::Alone(grads)) => replica.step(lr, grads),
        (replicas, Parts::Shared(owns)) if owns.len() == replicas.len() => {
            let sums = sums(replicas, owns);
            on_each(replicas.iter_mut().zip(sums), |_, (replica, sum)| {
                let grads = Packed::<B> { flat: sum }.into_grads(&replica.model);
                replica.step(lr, grads);
            });
        }
        (replicas, _) => {
            return Err(learned_fft::Error::invalid(
                "ddsp_synth",
                format!("one part of the gradient per replica ({})", replicas.len()),
                "a different count",
            ))
        }
    }
    Ok(loss)
}

/// The loss: linear and log magnitudes at each window, hop a quarter of it.
fn loss_config(setup: &Setup) -> MultiResolutionSpectralLossConfig {
    let resolutions = setup
        .windows
        .iter()
        .flat_map(|&w| [Magnitude::Linear, Magnitude::Log].map(|m| SpectralLossConfig::new(w, w / 4).with_magnitude(m)))
        .collect();
    MultiResolutionSpectralLossConfig::new().with_resolutions(resolutions)
}

/// The spectrograms at the middle window of the targets and of `sound`, notes stacked in time,
/// drawn to `path`.
fn draw<B: FftBackend>(
    loss: &MultiResolutionSpectralLoss<B>,
    sound: Tensor<B, 2>,
    target: Tensor<B, 2>,
    path: &std::path::Path,
    title: &str,
) -> learned_fft::Result<()> {
    let (predicted, target) = loss.losses()[2].spectrograms(sound, target)?;
    let [notes, frames, bins] = target.dims();
    let target = Spectrogram::new(notes * frames, bins, to_f64_vec(target))?;
    let predicted = Spectrogram::new(notes * frames, bins, to_f64_vec(predicted))?;
    learned_fft::plot::spectrograms(path, &target, &predicted, title)
}

impl BackendTask for Train {
    type Output = Outcome;

    fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> learned_fft::Result<Outcome> {
        let setup = self.setup;
        let (notes, harmonics) = (setup.notes(), setup.harmonics);
        let devices = self.devices.devices::<B>(&device)?;
        if notes % devices.len() != 0 {
            return Err(learned_fft::Error::invalid(
                "ddsp_synth",
                format!("notes that split evenly over {} devices", devices.len()),
                format!("{notes} notes (--copies {})", setup.copies),
            ));
        }
        let per = notes / devices.len();
        let shards = devices
            .iter()
            .enumerate()
            .map(|(i, d)| Shard::<B>::new(&setup, i * per..(i + 1) * per, d))
            .collect::<learned_fft::Result<Vec<_>>>()?;
        let main = &devices[0];
        let mut replicas = Replica::all(shards, decoder::<B>(&setup, main));
        // The four notes once, on the first device, for the pictures and the amplitudes' error.
        let preview = Shard::<B>::new(&Setup { copies: 1, ..setup }, 0..F0.len(), main)?;
        if self.out.is_some() {
            println!(
                "backend: {selected}; {notes} notes of {} samples over {} device(s), {harmonics} harmonics, {} noise bands, decoder of {} parameters",
                setup.samples,
                devices.len(),
                setup.bands,
                replicas[0].model.num_params()
            );
        }
        if let Some(out) = &self.out {
            let title = "|STFT| (W = 256, linear) of the four target notes and of the untrained synthesiser";
            let sound = preview.sound(&replicas[0].model, harmonics)?;
            draw(&preview.loss, sound, preview.target.clone(), &out.join("before.png"), title)?;
        }
        let start = Instant::now();
        let (mut first, mut last) = (None, 0.0);
        // The time from the end of step `WARM` on: the first steps compile the kernels.
        let mut warm = None;
        for step in 0..=setup.steps {
            let print = self.out.is_some() && step % 50 == 0;
            let read = print || step == 0 || step == setup.steps;
            // No step after the last loss.
            let lr = (step < setup.steps).then(|| if step < setup.steps * 2 / 3 { setup.lr } else { setup.lr / 10.0 });
            if let Some(value) = step_all(&mut replicas, harmonics, read, lr)? {
                last = value;
                first.get_or_insert(last);
                if print {
                    println!("step {step:4}  loss {last:.5}");
                }
            }
            if step + 1 == WARM {
                warm = Some(Instant::now());
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        // Steps after the warm-up per second, as notes per second.
        let notes_per_second = warm.map(|w| (setup.steps + 1 - WARM) as f64 * notes as f64 / w.elapsed().as_secs_f64());
        let truth_amps: Vec<f64> = (0..F0.len()).flat_map(|i| setup.target_harmonics(i)).collect();
        let model = &replicas[0].model;
        let weights = |model: &Decoder<B>| to_f64_vec(Packed::<B>::weights(model).flat);
        let first_weights = weights(model);
        let replica_spread = replicas[1..]
            .iter()
            .flat_map(|r| {
                weights(&r.model).into_iter().zip(&first_weights).map(|(a, b)| (a - b).abs()).collect::<Vec<_>>()
            })
            .fold(0.0, f64::max);
        let learned = to_f64_vec(model.forward(preview.cond.clone(), harmonics).0);
        // Only harmonics below Nyquist sound; the others' amplitudes are free.
        let audible: Vec<(f64, f64)> =
            learned.iter().zip(&truth_amps).filter(|(_, t)| **t > 0.0).map(|(a, t)| (*a, *t)).collect();
        let err = audible.iter().map(|(a, t)| (a - t).powi(2)).sum::<f64>();
        let norm = audible.iter().map(|(_, t)| t * t).sum::<f64>();
        let outcome = Outcome {
            first: first.unwrap_or(last),
            last,
            harmonic_error: (err / norm).sqrt(),
            seconds,
            notes_per_second,
            replica_spread,
        };
        if let Some(out) = &self.out {
            println!();
            println!(
                "loss {:.4} → {:.4} ({:.1}× lower) in {:.1} s; harmonic amplitudes' relative RMS error {:.3}",
                outcome.first,
                outcome.last,
                outcome.first / outcome.last,
                outcome.seconds,
                outcome.harmonic_error
            );
            if let Some(rate) = outcome.notes_per_second {
                println!(
                    "after the first {WARM} steps: {rate:.0} notes per second ({:.2} steps per second)",
                    rate / notes as f64
                );
            }
            if replicas.len() > 1 {
                println!("largest difference between the replicas' weights at the end: {:e}", outcome.replica_spread);
            }
            let title = format!(
                "|STFT| (W = 256, linear) of the four target notes and of the synthesiser after {} steps",
                setup.steps
            );
            let sound = preview.sound(model, harmonics)?;
            draw(&preview.loss, sound, preview.target.clone(), &out.join("after.png"), &title)?;
            println!("spectrograms: {} and {}", out.join("before.png").display(), out.join("after.png").display());
        }
        Ok(outcome)
    }
}

/// Steps before the throughput is timed (the first ones compile the GPU kernels).
const WARM: usize = 10;

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
    if !(args.lr.is_finite() && args.lr > 0.0) {
        return Err(format!("--lr: expected a positive finite learning rate, got {}", args.lr).into());
    }
    let setup = Setup { steps: args.steps, lr: args.lr, copies: usize::from(args.copies), ..Setup::EXAMPLE };
    let devices = Spread::Local(usize::from(args.devices));
    dispatch(args.backend, Precision::F32, Train { setup, devices, out: Some(args.out) })?;
    Ok(())
}
#[cfg(test)]
mod tests {
    use super::*;

    /// How far the test's run must lower the loss: it measured 219× (17.3 to 0.079 in 150 steps,
    /// 2026-11-29); a quarter of that leaves room for another CPU's rounding, and a synthesiser
    /// whose irfft, loss gradient or harmonic sum broke would not move it this far.
    const FALL: f64 = 50.0;
    /// The harmonic amplitudes' relative RMS error at the end: it measured 0.023; a tenth means
    /// the model found the targets' harmonics, not only a sound with a similar spectrogram.
    const HARMONIC_ERROR: f64 = 0.1;

    /// The test's smaller run: 2048 samples, 24 harmonics, 8 bands, windows of 512, 128 and 32.
    const SMALL: Setup =
        Setup { samples: 2048, harmonics: 24, bands: 8, windows: [512, 128, 32], steps: 150, ..Setup::EXAMPLE };

    /// Trains [`SMALL`] on ndarray over `devices` and checks that the loss falls by [`FALL`] and
    /// the harmonic amplitudes end within [`HARMONIC_ERROR`] of the targets'.
    fn learns_at_a_small_size(devices: Spread) -> Outcome {
        let outcome = dispatch(BackendKind::Ndarray, Precision::F32, Train { setup: SMALL, devices, out: None })
            .expect("the run works on ndarray");
        println!("{devices:?}: {:?}", (outcome.first, outcome.last, outcome.harmonic_error, outcome.seconds));
        assert!(outcome.first / outcome.last >= FALL, "{devices:?}: {outcome:?}");
        assert!(outcome.harmonic_error <= HARMONIC_ERROR, "{devices:?}: {outcome:?}");
        outcome
    }

    /// A smaller run of the example on the CPU learns the notes.
    #[test]
    fn the_synthesiser_learns_the_target_notes_at_a_small_size() {
        learns_at_a_small_size(Spread::Local(1));
    }

    /// How far the split batch's loss and gradients may differ from the whole batch's, relative
    /// (the loss, and each parameter's gradient as an RMS): the shards' means and the gradient
    /// sums add the same f32 terms in another order. Measured (2026-11-29): 4e-8 for the loss and
    /// at most 6e-8 for a gradient; with the decoder's weights drawn per worker (no
    /// [`Materialize`]) the loss was off by 3e-2.
    const SPLIT_REL: f64 = 1e-5;

    /// Every parameter's gradient, in the module's order, flattened.
    struct Collect<'a> {
        grads: &'a GradientsParams,
        out: Vec<Vec<f64>>,
    }

    impl<B: burn::tensor::backend::AutodiffBackend> ModuleVisitor<B> for Collect<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let g = self.grads.get::<B::InnerBackend, D>(param.id).expect("every parameter has a gradient");
            self.out.push(to_f64_vec(g));
        }
    }

    /// The batch split over two and four replicas (threads on one CPU) gives the whole batch's
    /// loss and gradient on every replica, alike to the bit on all of them, for the decoder as the
    /// run starts it ([`decoder`]: a fork of a decoder whose weights were not yet drawn would
    /// draw its own on each replica).
    #[test]
    fn replicas_sum_the_whole_batch_gradient() {
        type B = burn::backend::Autodiff<learned_fft::backend::NdArrayBackend<f32>>;
        let setup =
            Setup { samples: 1024, harmonics: 16, bands: 8, windows: [256, 64, 32], copies: 2, ..Setup::EXAMPLE };
        let device = Default::default();
        let model = decoder::<B>(&setup, &device);
        let flatten = |grads: &GradientsParams| {
            let mut collect = Collect { grads, out: Vec::new() };
            model.visit(&mut collect);
            collect.out
        };
        let run = |workers: usize| {
            let per = setup.notes() / workers;
            let shards: Vec<Shard<B>> =
                (0..workers).map(|i| Shard::new(&setup, i * per..(i + 1) * per, &device).expect("a shard")).collect();
            let replicas = Replica::all(shards, model.clone());
            let (loss, parts) = parts(&replicas, setup.harmonics, true).expect("a step");
            let loss = loss.expect("read");
            let owns = match parts {
                Parts::Alone(grads) => return (loss, flatten(&grads)),
                Parts::Shared(owns) => owns,
            };
            let sums: Vec<_> = sums(&replicas, owns)
                .into_iter()
                .map(|flat| flatten(&Packed::<B> { flat }.into_grads(&model)))
                .collect();
            for (me, sum) in sums.iter().enumerate() {
                assert!(sum == &sums[0], "{workers} replicas: replica {me}'s gradient differs from the first's");
            }
            (loss, sums[0].clone())
        };
        let (loss, grads) = run(1);
        for workers in [2, 4] {
            let (l, g) = run(workers);
            let rel = (l - loss).abs() / loss.abs();
            assert!(rel <= SPLIT_REL, "{workers} replicas: loss {l} against {loss}");
            let mut worst = 0.0f64;
            for (i, (a, b)) in grads.iter().zip(&g).enumerate() {
                let diff: f64 = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum();
                let norm: f64 = a.iter().map(|x| x * x).sum();
                let e = (diff / norm.max(f64::MIN_POSITIVE)).sqrt();
                assert!(e <= SPLIT_REL, "{workers} replicas, parameter {i}: gradient relative RMS difference {e:e}");
                worst = worst.max(e);
            }
            println!("{workers} replicas: loss relative difference {rel:e}, gradients' largest {worst:e}");
        }
    }

    /// The data-parallel run, two replicas on one CPU, learns the notes as the one-replica run
    /// does and ends with the replicas' weights alike to the bit; notes that do not split evenly
    /// are refused.
    #[test]
    fn a_data_parallel_run_learns_the_notes() {
        let outcome = learns_at_a_small_size(Spread::Repeat(2));
        assert_eq!(outcome.replica_spread, 0.0, "the replicas drifted apart: {outcome:?}");
        let err = dispatch(
            BackendKind::Ndarray,
            Precision::F32,
            Train { setup: SMALL, devices: Spread::Repeat(3), out: None },
        )
        .expect_err("4 notes over 3 workers");
        assert!(err.to_string().contains("split evenly"), "{err}");
    }
}
