//! The spectral loss's reference twin: against an f64 STFT built on rustfft, against finite
//! differences (both inputs), accumulation over overlapping frames, zero inputs, bad input.

use burn::backend::Autodiff;
use burn::nn::loss::Reduction;
use burn::tensor::Tensor;
use learned_fft::{Distance, Magnitude, SpectralLoss, SpectralLossConfig, Window};
use num_complex::Complex64;

use crate::common::*;

/// f64: the loss is a sum of W-term dot products and a square root per bin; 1e-12 relative
/// leaves four orders of magnitude above the ~1e-16 · W rounding.
const SPECTRAL_REL_F64: f64 = 1e-12;
/// f32: each bin is a W-term dot product (W ≤ 64 here) rounded at ε = 6e-8 per term, and the
/// magnitudes' differences are then averaged: ~W·ε ≈ 4e-6 worst case per bin; 2e-5 bounds the
/// mean's relative error with margin.
const SPECTRAL_REL_F32: f64 = 2e-5;

const MAGNITUDES: [Magnitude; 3] = [Magnitude::Linear, Magnitude::Power, Magnitude::Log];
const DISTANCES: [Distance; 2] = [Distance::L1, Distance::L2];

/// The loss computed on the host in f64 with rustfft, straight from the definition.
fn loss_f64(cfg: &SpectralLossConfig, pred: &[f64], target: &[f64], batch: usize, t: usize) -> f64 {
    let w = cfg.win;
    let window = cfg.window.values(w);
    let fft = rustfft::FftPlanner::<f64>::new().plan_fft_forward(w);
    let spectrogram = |x: &[f64]| -> Vec<f64> {
        let (x, t) = if cfg.center {
            let idx = learned_fft::ops::spectral::reflect_indices(t, w / 2);
            (idx.iter().map(|&i| x[i as usize]).collect::<Vec<_>>(), t + 2 * (w / 2))
        } else {
            (x.to_vec(), t)
        };
        let frames = learned_fft::ops::spectral::frame_count(t, w, cfg.hop).unwrap();
        let mut out = Vec::new();
        for f in 0..frames {
            let mut buf: Vec<Complex64> = (0..w).map(|n| Complex64::new(x[f * cfg.hop + n] * window[n], 0.0)).collect();
            fft.process(&mut buf);
            for z in &buf[..w / 2 + 1] {
                let p = z.norm_sqr();
                out.push(match cfg.magnitude {
                    Magnitude::Linear => (p + cfg.eps).sqrt(),
                    Magnitude::Power => p,
                    Magnitude::Log => 0.5 * (p + cfg.eps).ln(),
                });
            }
        }
        out
    };
    let (mut sum, mut count, mut num, mut den) = (0.0, 0usize, 0.0, 0.0);
    for b in 0..batch {
        let mp = spectrogram(&pred[b * t..(b + 1) * t]);
        let mt = spectrogram(&target[b * t..(b + 1) * t]);
        for (p, q) in mp.iter().zip(&mt) {
            sum += match cfg.distance {
                Distance::L1 => (p - q).abs(),
                Distance::L2 => (p - q).powi(2),
            };
            count += 1;
            num += (q - p).powi(2);
            den += q * q;
        }
    }
    sum / count as f64 + cfg.spectral_convergence * ((num + cfg.eps).sqrt() / (den + cfg.eps).sqrt())
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-300)
}

/// The reference loss equals the f64 definition for many shapes and options.
fn matches_f64_stft<B: learned_fft::SpectralOps>(device: &B::Device, _tol: Tol) {
    let limit = if is_f64::<B>() { SPECTRAL_REL_F64 } else { SPECTRAL_REL_F32 };
    let mut case = 0u64;
    for (w, hops) in [(8usize, vec![1usize, 2, 4, 8]), (12, vec![3, 6]), (64, vec![16, 32])] {
        for hop in hops {
            for (batch, extra) in [(1usize, 1usize), (3, hop + 1)] {
                let t = w + 2 * hop + extra; // not a multiple of the hop
                for magnitude in MAGNITUDES {
                    for distance in DISTANCES {
                        case += 1;
                        let center = case.is_multiple_of(3);
                        let cfg = SpectralLossConfig::new(w, hop)
                            .with_magnitude(magnitude)
                            .with_distance(distance)
                            .with_center(center)
                            .with_window(if case.is_multiple_of(2) { Window::Hann } else { Window::Hamming })
                            .with_spectral_convergence(if case.is_multiple_of(4) { 0.5 } else { 0.0 });
                        let pred = round_to_backend::<B>(&normals(case, batch * t), device);
                        let target = round_to_backend::<B>(&normals(case + 1000, batch * t), device);
                        let loss: SpectralLoss<B> = cfg.init(device).unwrap();
                        let got = loss
                            .forward(
                                tensor2::<B>(&pred, batch, t, device),
                                tensor2::<B>(&target, batch, t, device),
                                Reduction::Mean,
                            )
                            .unwrap()
                            .into_scalar();
                        let got: f64 = burn::tensor::ElementConversion::elem(got);
                        let want = loss_f64(&cfg, &pred, &target, batch, t);
                        assert!(rel(got, want) <= limit, "W={w} H={hop} T={t} batch={batch} {magnitude:?} {distance:?} center={center}: {got} vs {want}");
                    }
                }
            }
        }
    }
}
per_backend!(matches_f64_stft);

/// Autodiff gradients of the reference loss w.r.t. `pred` and `target` (f64, ndarray).
pub(crate) fn grads(
    cfg: &SpectralLossConfig,
    pred: &[f64],
    target: &[f64],
    batch: usize,
    t: usize,
) -> (Vec<f64>, Vec<f64>) {
    grads_on::<Autodiff<NdArrayBackend<f64>>>(cfg, pred, target, batch, t)
}

/// The gradients of the summed loss for both inputs on backend `A`.
fn grads_on<A: burn::tensor::backend::AutodiffBackend + learned_fft::SpectralOps>(
    cfg: &SpectralLossConfig,
    pred: &[f64],
    target: &[f64],
    batch: usize,
    t: usize,
) -> (Vec<f64>, Vec<f64>) {
    let device = Default::default();
    let p = tensor2::<A>(pred, batch, t, &device).require_grad();
    let q = tensor2::<A>(target, batch, t, &device).require_grad();
    let loss: SpectralLoss<A> = cfg.init(&device).unwrap();
    let g = loss.forward(p.clone(), q.clone(), Reduction::Sum).unwrap().backward();
    (host(p.grad(&g).unwrap()), host(q.grad(&g).unwrap()))
}

fn loss_value(cfg: &SpectralLossConfig, pred: &[f64], target: &[f64], batch: usize, t: usize) -> f64 {
    type Bk = NdArrayBackend<f64>;
    let device = Default::default();
    let loss: SpectralLoss<Bk> = cfg.init(&device).unwrap();
    let v = loss
        .forward(tensor2::<Bk>(pred, batch, t, &device), tensor2::<Bk>(target, batch, t, &device), Reduction::Sum)
        .unwrap();
    burn::tensor::ElementConversion::elem(v.into_scalar())
}

/// Central differences of the loss w.r.t. one sample of pred (`which = 0`) or target (1).
fn fd(cfg: &SpectralLossConfig, pred: &[f64], target: &[f64], batch: usize, t: usize, which: usize, i: usize) -> f64 {
    let h = FD_STEP;
    let eval = |delta: f64| {
        let (mut p, mut q) = (pred.to_vec(), target.to_vec());
        if which == 0 {
            p[i] += delta
        } else {
            q[i] += delta
        }
        loss_value(cfg, &p, &q, batch, t)
    };
    (eval(h) - eval(-h)) / (2.0 * h)
}

/// Finite-difference tolerance in f64: 1e-6 relative to max(|g|, 1e-3·max|g|), plus the
/// central difference's own rounding, [`fd_rounding`].
const FD_REL_F64: f64 = 1e-6;
/// Step of the central differences.
const FD_STEP: f64 = 1e-6;

/// Rounding error of a central difference of a loss of size `loss`: each evaluation is off by a
/// few ulps of |L| (ε = 2.2e-16), so the difference quotient by ~4·ε·|L| / 2h. (The largest
/// deviation seen, with the Power magnitude, is 4.6e-8; this bound is 10–20× larger there.)
fn fd_rounding(loss: f64) -> f64 {
    4.0 * f64::EPSILON * loss.abs() / (2.0 * FD_STEP)
}

#[test]
fn reference_gradients_match_finite_differences_for_both_inputs() {
    let (batch, w, hop, t) = (2, 8, 2, 21);
    let mut case = 0;
    for magnitude in MAGNITUDES {
        for distance in DISTANCES {
            for sc in [0.0, 0.7] {
                case += 1;
                let cfg = SpectralLossConfig::new(w, hop)
                    .with_magnitude(magnitude)
                    .with_distance(distance)
                    .with_spectral_convergence(sc)
                    .with_center(case % 2 == 0);
                let pred = normals(500 + case, batch * t);
                let target = normals(600 + case, batch * t);
                let (gp, gq) = grads(&cfg, &pred, &target, batch, t);
                let slack = fd_rounding(loss_value(&cfg, &pred, &target, batch, t));
                for (which, g) in [(0, &gp), (1, &gq)] {
                    let scale = g.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                    for (i, &gi) in g.iter().enumerate() {
                        let want = fd(&cfg, &pred, &target, batch, t, which, i);
                        let allowed = FD_REL_F64 * gi.abs().max(1e-3 * scale) + slack;
                        assert!(
                            (gi - want).abs() <= allowed,
                            "{magnitude:?} {distance:?} sc={sc} input {which} sample {i}: autodiff {gi} vs fd {want}"
                        );
                    }
                }
            }
        }
    }
}

/// With H < W most samples lie in several frames; their gradient must sum every frame's and
/// every bin's contribution. The test also shows it can fail: the gradient an overwriting
/// backward would produce (only the last covering frame's contribution) is far from it.
#[test]
fn overlapping_frames_accumulate_into_each_sample() {
    let (batch, w, hop, t) = (1, 16, 4, 45);
    let cfg = SpectralLossConfig::new(w, hop).with_distance(Distance::L2);
    let pred = normals(71, t);
    let target = normals(72, t);
    let (g, _) = grads(&cfg, &pred, &target, batch, t);
    let frames = learned_fft::ops::spectral::frame_count(t, w, hop).unwrap();
    let covering = |i: usize| (0..frames).filter(|f| f * hop <= i && i < f * hop + w).collect::<Vec<_>>();
    let multi: Vec<usize> = (0..t).filter(|&i| covering(i).len() >= 2).collect();
    assert!(multi.len() > t / 2, "most samples are in ≥ 2 frames");
    let scale = g.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let slack = fd_rounding(loss_value(&cfg, &pred, &target, batch, t));
    let mut overwrite_far = 0;
    for &i in &multi {
        let want = fd(&cfg, &pred, &target, batch, t, 0, i);
        assert!(
            (g[i] - want).abs() <= FD_REL_F64 * g[i].abs().max(1e-3 * scale) + slack,
            "sample {i} (in {} frames): {} vs fd {want}",
            covering(i).len(),
            g[i]
        );
        // What an overwriting backward would give: the last covering frame alone, i.e. the
        // gradient of the loss restricted to that frame (other frames' samples held fixed).
        let last = *covering(i).last().unwrap();
        let lo = last * hop;
        let only = grads(
            &SpectralLossConfig::new(w, w).with_distance(Distance::L2),
            &pred[lo..lo + w],
            &target[lo..lo + w],
            1,
            w,
        )
        .0[i - lo];
        if (only - want).abs() > 1e-3 * want.abs().max(1e-3 * scale) {
            overwrite_far += 1;
        }
    }
    assert!(
        overwrite_far >= multi.len() * 9 / 10,
        "an overwriting backward would pass at too many samples ({overwrite_far} of {} differ)",
        multi.len()
    );
}

#[test]
fn zero_inputs_give_finite_gradients() {
    let (batch, t) = (2, 40);
    let zeros = vec![0.0; batch * t];
    for magnitude in MAGNITUDES {
        for distance in DISTANCES {
            let cfg = SpectralLossConfig::new(16, 4)
                .with_magnitude(magnitude)
                .with_distance(distance)
                .with_spectral_convergence(1.0);
            let (gp, gq) = grads(&cfg, &zeros, &zeros, batch, t);
            assert!(
                gp.iter().chain(&gq).all(|v| v.is_finite()),
                "{magnitude:?} {distance:?}: non-finite gradient at zero"
            );
        }
    }
}

#[test]
fn bad_input_gives_clear_errors() {
    type Bk = NdArrayBackend<f32>;
    let device = Default::default();
    let loss: SpectralLoss<Bk> = SpectralLossConfig::new(64, 16).init(&device).unwrap();
    let x = |b: usize, t: usize| Tensor::<Bk, 2>::zeros([b, t], &device);
    let msg = |r: learned_fft::Result<Tensor<Bk, 1>>| r.expect_err("refused").to_string();
    let short = msg(loss.forward(x(2, 50), x(2, 50), Reduction::Mean));
    assert!(short.contains("spectral_loss.forward") && short.contains("W = 64") && short.contains("50"), "{short}");
    let shapes = msg(loss.forward(x(2, 100), x(3, 100), Reduction::Mean));
    assert!(shapes.contains("same shape") && shapes.contains("[2, 100]") && shapes.contains("[3, 100]"), "{shapes}");
    let centered: SpectralLoss<Bk> = SpectralLossConfig::new(64, 16).with_center(true).init(&device).unwrap();
    let pad = msg(centered.forward(x(1, 20), x(1, 20), Reduction::Mean));
    assert!(pad.contains("W/2 = 32"), "{pad}");
    for (cfg, needle) in [
        (SpectralLossConfig::new(1, 1), "win"),
        (SpectralLossConfig::new(16, 0), "hop"),
        (SpectralLossConfig::new(16, 4).with_eps(0.0), "eps"),
        (SpectralLossConfig::new(16, 4).with_spectral_convergence(-1.0), "spectral_convergence"),
    ] {
        let err = cfg.init::<Bk>(&device).expect_err("refused").to_string();
        assert!(err.contains("spectral_loss.init") && err.contains(needle), "{err}");
    }
}

#[test]
fn multi_resolution_sums_its_resolutions() {
    type Bk = NdArrayBackend<f64>;
    let device = Default::default();
    let defaults = learned_fft::MultiResolutionSpectralLossConfig::new();
    let wins: Vec<(usize, usize)> = defaults.resolutions.iter().map(|c| (c.win, c.hop)).collect();
    assert_eq!(wins, [(1024, 120), (2048, 240), (512, 50)], "auraloss's defaults");
    let configs = vec![SpectralLossConfig::new(16, 4), SpectralLossConfig::new(32, 8).with_distance(Distance::L2)];
    let multi = learned_fft::MultiResolutionSpectralLossConfig::new()
        .with_resolutions(configs.clone())
        .init::<Bk>(&device)
        .unwrap();
    let (p, q) = (normals(90, 2 * 100), normals(91, 2 * 100));
    let total: f64 = burn::tensor::ElementConversion::elem(
        multi
            .forward(tensor2::<Bk>(&p, 2, 100, &device), tensor2::<Bk>(&q, 2, 100, &device), Reduction::Mean)
            .unwrap()
            .into_scalar(),
    );
    let parts: f64 = configs.iter().map(|c| loss_f64(c, &p, &q, 2, 100)).sum();
    assert!(rel(total, parts) <= SPECTRAL_REL_F64, "{total} vs {parts}");
    assert!(learned_fft::MultiResolutionSpectralLossConfig::new()
        .with_resolutions(vec![])
        .init::<Bk>(&device)
        .is_err());
}

/// A model holding the loss as a field, as a user's model would.
#[derive(burn::module::Module, Debug)]
struct WithLoss<B: burn::tensor::backend::Backend> {
    loss: SpectralLoss<B>,
}

/// The loss is a Burn module: a model can hold it (the derive above), it adds no parameters,
/// and the model's clone computes the same loss.
#[test]
fn the_loss_is_a_module_a_model_can_hold() {
    use burn::module::Module;
    let device = Default::default();
    let model = WithLoss::<NdArrayBackend<f64>> { loss: SpectralLossConfig::new(16, 4).init(&device).unwrap() };
    assert_eq!(model.num_params(), 0, "the loss has no trainable parameters");
    let (batch, t) = (2, 40);
    let pred = tensor2::<NdArrayBackend<f64>>(&normals(81, batch * t), batch, t, &device);
    let target = tensor2::<NdArrayBackend<f64>>(&normals(82, batch * t), batch, t, &device);
    let a = host(model.loss.forward(pred.clone(), target.clone(), Reduction::Mean).unwrap())[0];
    let b = host(model.clone().loss.forward(pred, target, Reduction::Mean).unwrap())[0];
    assert!(a > 0.0 && a.to_bits() == b.to_bits(), "{a} vs {b}");
}

/// At audio sizes (64 signals × 48000 samples, W = 64, H = 16: 191 808 frames, gathered in
/// pieces) the gradient on candle is ndarray's. candle's `index_add` takes only contiguous
/// tensors, and the gather's backward used to hand it strided slices.
#[test]
fn candle_gradients_match_ndarray_at_audio_sizes() {
    let (batch, t) = (64, 48_000);
    let cfg = SpectralLossConfig::new(64, 16).with_distance(Distance::L2);
    let (pred, target) = (normals(91, batch * t), normals(92, batch * t));
    let (gp, gt) = grads_on::<Autodiff<CandleBackend<f64>>>(&cfg, &pred, &target, batch, t);
    let (wp, wt) = grads(&cfg, &pred, &target, batch, t);
    let (ep, et) = (rel_rms_real(&gp, &wp), rel_rms_real(&gt, &wt));
    assert!(ep <= SPECTRAL_REL_F64 && et <= SPECTRAL_REL_F64, "candle vs ndarray: {ep:e}, {et:e}");
}
