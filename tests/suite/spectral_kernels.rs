//! The fused spectral kernels against the reference twin on the same backend: the loss and the
//! gradients of both inputs over windows, hops, batches and every option; determinism; the
//! accumulation over overlapping frames; and the errors of a fused path that cannot run.

use burn::backend::Autodiff;
use burn::nn::loss::Reduction;
use burn::tensor::backend::Backend;
use learned_fft::SpectralOps;
use learned_fft::{Distance, KernelChoice, Magnitude, SpectralLoss, SpectralLossConfig, Window};

use crate::common::*;

/// Fused against reference in f32, relative error of the loss (the acceptance bar). Both paths
/// compute each bin in f32, as an FFT or as a W-term dot product; the loss averages many bins.
/// The reference is not an f32 judge everywhere: its DFT is a matmul with the windowed basis, and
/// Burn's CUDA matmul stages f32 operands as TF32 on tensor cores (10-bit mantissa; measured on an
/// H200: the W = 2 linear-magnitude L1 loss 1.9e-4 from the fused one, which lavapipe and Vulkan
/// on the same GPU put within this bar). Where fused and reference differ by more than a bar, the
/// checker holds the fused path to that same bar against the f64 reference (ndarray) instead.
const LOSS_F32_REL: f64 = 1e-5;
/// Fused against reference in f32, relative RMS error of each input's gradient (the acceptance
/// bar). The log magnitude's gradient `re/(re² + im² + eps)` is ill-conditioned where a bin is
/// near zero: an f32 DFT's absolute error then becomes a large relative error. Such bins are
/// common: with `center` and a symmetric window, the first frame is even about its middle, its
/// spectrum is real, and a real bin comes far closer to zero than a complex one. Where the two
/// f32 paths then differ by more than the bar, the checker measures the fused gradient against
/// the f64 gradient instead, with the bound [`SENSITIVITY_BOUND`] for the log magnitude and this
/// bar for the others (whose reference can be TF32, see [`LOSS_F32_REL`]).
const GRAD_F32_REL: f64 = 1e-4;
/// In those ill-conditioned log-magnitude cases the fused gradient's error against f64 may be at
/// most this many times the gradient's [`sensitivity`] to f32-level input perturbations: an f32
/// FFT is backward stable, so an accurate f32 path errs no more than that. (Comparing with the
/// f32 reference's error instead is a coin toss: both errors come from one near-zero bin and
/// their ratio scattered over 0.09…4.1 in the CI cases. Measured fused/sensitivity: 0.04…0.29;
/// the reference's: 0.04…1.1.)
const SENSITIVITY_BOUND: f64 = 1.0;
/// Perturbation draws of [`sensitivity`].
const SENSITIVITY_DRAWS: usize = 8;
/// One input's gradient computed alone against the same gradient computed with the other's:
/// relative RMS. With both, one inverse FFT carries the two frames' gradients as its real and
/// imaginary parts, and each butterfly rounds a little of one into the other (a few f32 ulps
/// over log2 W stages); alone, the other part is zero.
const ONE_GRAD_F32_REL: f64 = 1e-6;

/// f64 on CUDA against f64 on ndarray, relative (loss) and relative RMS (gradients): the same
/// sums in other orders (the fused FFT, the reference's broadcast sums, ndarray's matmul).
/// Measured on an H200, fused against reference: loss 1.7e-16, gradient 2.1e-15.
#[cfg(feature = "cuda")]
const CUDA_F64_REL: f64 = 1e-12;

const OPTIONS: [(Magnitude, Distance); 6] = [
    (Magnitude::Linear, Distance::L1),
    (Magnitude::Linear, Distance::L2),
    (Magnitude::Power, Distance::L1),
    (Magnitude::Power, Distance::L2),
    (Magnitude::Log, Distance::L1),
    (Magnitude::Log, Distance::L2),
];

/// Loss and gradients `(loss, grad pred, grad target)` on one path, of `forward` with
/// `Reduction::Mean`.
fn run<B: Backend>(
    cfg: &SpectralLossConfig,
    kernel: KernelChoice,
    pred: &[f64],
    target: &[f64],
    batch: usize,
    t: usize,
    device: &B::Device,
) -> (f64, Vec<f64>, Vec<f64>)
where
    Autodiff<B>: SpectralOps<Device = B::Device>,
{
    run_with::<B>(cfg, kernel, Some(Reduction::Mean), 1.0, pred, target, batch, t, device)
}

/// As [`run`], with any reduction, or (`None`) the sum of `forward_no_reduction`, which takes the
/// spectrogram op and tensor ops instead of the one-pass fused loss; of `c · loss` (an upstream
/// gradient other than 1 where `c ≠ 1`).
#[allow(clippy::too_many_arguments)]
fn run_with<B: Backend>(
    cfg: &SpectralLossConfig,
    kernel: KernelChoice,
    reduction: Option<Reduction>,
    c: f64,
    pred: &[f64],
    target: &[f64],
    batch: usize,
    t: usize,
    device: &B::Device,
) -> (f64, Vec<f64>, Vec<f64>)
where
    Autodiff<B>: SpectralOps<Device = B::Device>,
{
    type A<B> = Autodiff<B>;
    let loss: SpectralLoss<A<B>> = cfg.clone().with_kernel(kernel).init(device).unwrap();
    let p = tensor2::<A<B>>(pred, batch, t, device).require_grad();
    let q = tensor2::<A<B>>(target, batch, t, device).require_grad();
    let l = match reduction {
        Some(r) => loss.forward(p.clone(), q.clone(), r).unwrap(),
        None => loss.forward_no_reduction(p.clone(), q.clone()).unwrap().sum(),
    };
    let l = if c == 1.0 { l } else { l.mul_scalar(c) };
    let value = host(l.clone())[0];
    let g = l.backward();
    (value, host(p.grad(&g).unwrap()), host(q.grad(&g).unwrap()))
}

/// The cases: every W = 2…1024 (and 4096, the largest fused window) with H ∈ {1, W/4, W/2, W},
/// T not a multiple of H, batch cycling 1…8; at H = W/4 every one of the six magnitude/distance
/// options (every W ≥ 8 with `LEARNED_FFT_FULL_SWEEP=1`, W = 8, 256, 1024 otherwise), elsewhere
/// one cycling over the cases, as do windows, center and spectral convergence; and a hop longer
/// than the signal at W = 8 and 256.
fn cases() -> Vec<(SpectralLossConfig, usize, usize)> {
    let mut out = Vec::new();
    let mut case = 0usize;
    for w in sizes_up_to(1024).chain([4096]) {
        let mut hops: Vec<usize> = if w == 4096 { vec![w / 2] } else { vec![1, w / 4, w / 2, w] };
        hops.retain(|&h| h >= 1);
        hops.dedup();
        let mut configs = Vec::new();
        for hop in hops {
            // Every option at H = W/4: for every W in the full sweep, at three windows in CI.
            if hop == w / 4 && w >= 8 && (full_sweep() || [8, 256, 1024].contains(&w)) {
                configs.extend(OPTIONS.map(|o| (hop, o)));
            } else {
                configs.push((hop, OPTIONS[(case + configs.len()) % OPTIONS.len()]));
            }
        }
        for (hop, (magnitude, distance)) in configs {
            let window = [Window::Hann, Window::Hamming, Window::Rectangular][case % 3];
            let cfg = SpectralLossConfig::new(w, hop)
                .with_magnitude(magnitude)
                .with_distance(distance)
                .with_window(window)
                .with_center(case % 4 == 1)
                .with_spectral_convergence(if case % 5 == 2 { 0.5 } else { 0.0 });
            let batch = 1 + case % 8;
            // A few frames (more when the hop is small), and T mod H ≠ 0 where H > 1.
            let t = w + hop * (2 + case % 3) + hop.max(2) / 2 + usize::from(hop > 2);
            out.push((cfg, batch, t));
            case += 1;
        }
    }
    // A hop longer than the signal: one frame (the overlap-add takes such a hop as T).
    for w in [8, 256] {
        out.push((SpectralLossConfig::new(w, 3 * w).with_center(w == 8), 2, w + 5));
    }
    out
}

/// The shared checker: fused = reference on the loss and both gradients, every case, through
/// `forward` with the three reductions (the one-pass fused loss) and through
/// `forward_no_reduction` (the fused spectrogram op).
fn check_fused_matches_reference<B: Backend>(device: &B::Device)
where
    Autodiff<B>: SpectralOps<Device = B::Device>,
{
    let mut seen = std::collections::HashSet::new();
    for (i, (cfg, batch, t)) in cases().into_iter().enumerate() {
        let loss: SpectralLoss<Autodiff<B>> = cfg.init(device).unwrap();
        assert!(loss.is_fused(device), "W={}: the fused path is not taken", cfg.win);
        // One pass for the whole loss up to W = 2048 (a packed frame pair and the reduction fit in
        // 32 KiB of shared memory, which every device offers); at W = 4096 where the device's
        // shared memory holds them (CUDA's does), or else the fused spectrograms with tensor ops:
        // both are checked against the reference below.
        if cfg.win <= 2048 {
            assert!(loss.is_fully_fused(device), "W={}: one-pass fused loss", cfg.win);
        }
        seen.insert((cfg.magnitude as u8, cfg.distance as u8));
        let pred = round_to_backend::<B>(&normals(3000 + i as u64, batch * t), device);
        let target = round_to_backend::<B>(&normals(4000 + i as u64, batch * t), device);
        let reduction = [Some(Reduction::Mean), Some(Reduction::Sum), Some(Reduction::BatchMean), None][i % 4].clone();
        let fused = run_with::<B>(&cfg, KernelChoice::Fused, reduction.clone(), 1.0, &pred, &target, batch, t, device);
        let reference =
            run_with::<B>(&cfg, KernelChoice::Reference, reduction.clone(), 1.0, &pred, &target, batch, t, device);
        let mut truth = None;
        let f64_run = || {
            run_with::<NdArrayBackend<f64>>(
                &cfg,
                KernelChoice::Reference,
                reduction.clone(),
                1.0,
                &pred,
                &target,
                batch,
                t,
                &Default::default(),
            )
        };
        let mut sens = None;
        let what = format!(
            "W={} H={} T={t} batch={batch} {:?} {:?} {:?} center={} sc={} reduction={reduction:?}",
            cfg.win, cfg.hop, cfg.magnitude, cfg.distance, cfg.window, cfg.center, cfg.spectral_convergence
        );
        let loss_err = (fused.0 - reference.0).abs() / reference.0.abs();
        if loss_err > LOSS_F32_REL {
            // The reference is no f32 judge where the backend's matmul is not f32 (see
            // [`LOSS_F32_REL`]): the fused loss then meets the same bar against f64.
            let exact = truth.get_or_insert_with(f64_run).0;
            let truth_err = (fused.0 - exact).abs() / exact.abs();
            assert!(
                truth_err <= LOSS_F32_REL,
                "{what}: loss {} vs reference {} (rel {loss_err:e}) and vs f64 {exact} (rel {truth_err:e})",
                fused.0,
                reference.0
            );
        }
        for (name, a, b) in [("pred", &fused.1, &reference.1), ("target", &fused.2, &reference.2)] {
            let err = rel_rms_real(a, b);
            if err <= GRAD_F32_REL {
                continue;
            }
            let f64_grads = truth.get_or_insert_with(f64_run);
            let want = if name == "pred" { &f64_grads.1 } else { &f64_grads.2 };
            let (fused_err, reference_err) = (rel_rms_real(a, want), rel_rms_real(b, want));
            if cfg.magnitude != Magnitude::Log {
                // Well conditioned: the fused gradient meets the same bar against f64.
                assert!(
                    fused_err <= GRAD_F32_REL,
                    "{what}: grad {name}: fused vs reference {err:e} > {GRAD_F32_REL:e}, and vs f64 {fused_err:e} (the reference's: {reference_err:e})"
                );
                continue;
            }
            let s =
                sens.get_or_insert_with(|| sensitivity(&cfg, reduction.clone(), &pred, &target, batch, t, f64_grads));
            let s = if name == "pred" { s.0 } else { s.1 };
            assert!(
                fused_err <= SENSITIVITY_BOUND * s,
                "{what}: grad {name}: fused vs reference {err:e} > {GRAD_F32_REL:e}, and against f64 the fused path's error {fused_err:e} is over {SENSITIVITY_BOUND}× what f32 rounding of the input alone causes ({s:e}; the reference's error is {reference_err:e})"
            );
        }
    }
    assert_eq!(seen.len(), OPTIONS.len(), "every magnitude/distance option is covered");
}

/// How far f32-level perturbations of the inputs move the f64 gradient: the relative RMS change
/// of `(grad pred, grad target)`, root-mean-square over [`SENSITIVITY_DRAWS`] draws in which
/// every sample of both inputs is scaled by `1 + u·log2(W)·ε_f32` (u standard normal). An f32
/// FFT is normwise backward stable with a backward error of about that size, so this is the
/// gradient error that an accurate f32 path cannot avoid.
#[allow(clippy::too_many_arguments)]
fn sensitivity(
    cfg: &SpectralLossConfig,
    reduction: Option<Reduction>,
    pred: &[f64],
    target: &[f64],
    batch: usize,
    t: usize,
    exact: &(f64, Vec<f64>, Vec<f64>),
) -> (f64, f64) {
    let scale = cfg.win.trailing_zeros().max(1) as f64 * f64::from(f32::EPSILON) / 2.0;
    let perturb = |v: &[f64], seed: u64| -> Vec<f64> {
        normals(seed, v.len()).iter().zip(v).map(|(u, x)| x * (1.0 + scale * u)).collect()
    };
    let (mut sp, mut st) = (0.0, 0.0);
    for d in 0..SENSITIVITY_DRAWS {
        let (p, q) = (perturb(pred, 9000 + 2 * d as u64), perturb(target, 9001 + 2 * d as u64));
        let g = run_with::<NdArrayBackend<f64>>(
            cfg,
            KernelChoice::Reference,
            reduction.clone(),
            1.0,
            &p,
            &q,
            batch,
            t,
            &Default::default(),
        );
        sp += rel_rms_real(&g.1, &exact.1).powi(2);
        st += rel_rms_real(&g.2, &exact.2).powi(2);
    }
    ((sp / SENSITIVITY_DRAWS as f64).sqrt(), (st / SENSITIVITY_DRAWS as f64).sqrt())
}

/// Two runs of the fused path give bitwise-identical losses and gradients (no atomics).
fn check_fused_deterministic<B: Backend>(device: &B::Device)
where
    Autodiff<B>: SpectralOps<Device = B::Device>,
{
    let (batch, t) = (8, 3001);
    let cfg = SpectralLossConfig::new(256, 64).with_spectral_convergence(1.0);
    let (pred, target) = (normals(51, batch * t), normals(52, batch * t));
    let first = run::<B>(&cfg, KernelChoice::Fused, &pred, &target, batch, t, device);
    let second = run::<B>(&cfg, KernelChoice::Fused, &pred, &target, batch, t, device);
    assert_eq!(first.0.to_bits(), second.0.to_bits(), "the loss differs between two runs");
    for (a, b) in [(&first.1, &second.1), (&first.2, &second.2)] {
        assert!(a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()), "a gradient differs between two runs");
    }
}

/// The gradient of pred alone, or of target alone (the other input a constant: the fused
/// backward then skips the other's coefficients and overlap-add), is the one computed with both
/// to within [`ONE_GRAD_F32_REL`], and the constant input gets none.
fn check_fused_one_gradient_is_the_same<B: Backend>(device: &B::Device)
where
    Autodiff<B>: SpectralOps<Device = B::Device>,
{
    type A<B> = Autodiff<B>;
    let (batch, t) = (3, 2500);
    for (w, hop, sc) in [(8, 2, 0.0), (256, 64, 1.0), (1024, 256, 0.5)] {
        let cfg = SpectralLossConfig::new(w, hop).with_spectral_convergence(sc).with_kernel(KernelChoice::Fused);
        let loss: SpectralLoss<A<B>> = cfg.init(device).unwrap();
        let (pred, target) = (normals(61 + w as u64, batch * t), normals(62 + w as u64, batch * t));
        let grads = |wants: (bool, bool)| {
            let p = tensor2::<A<B>>(&pred, batch, t, device);
            let q = tensor2::<A<B>>(&target, batch, t, device);
            let (p, q) = (if wants.0 { p.require_grad() } else { p }, if wants.1 { q.require_grad() } else { q });
            let g = loss.forward(p.clone(), q.clone(), Reduction::Mean).unwrap().backward();
            (p.grad(&g).map(host), q.grad(&g).map(host))
        };
        let both = grads((true, true));
        let (pred_alone, target_alone) = (grads((true, false)), grads((false, true)));
        let (Some(both_p), Some(both_t)) = (&both.0, &both.1) else { panic!("W={w}: both gradients") };
        for (name, alone, with_both) in [("pred", &pred_alone.0, both_p), ("target", &target_alone.1, both_t)] {
            let alone = alone.as_ref().unwrap_or_else(|| panic!("W={w}: no gradient of {name} alone"));
            let err = rel_rms_real(alone, with_both);
            assert!(err <= ONE_GRAD_F32_REL, "W={w}: {name}'s gradient alone differs by {err:e} (relative RMS)");
        }
        assert!(pred_alone.1.is_none(), "W={w}: a constant target got a gradient");
        assert!(target_alone.0.is_none(), "W={w}: a constant pred got a gradient");
    }
}

/// The loss's own gradient reaches the fused gradients: for `c · loss` (c = −2.5) the fused loss
/// and both gradients equal the f64 reference's, with the spectral-convergence term (whose
/// backward recomputes the spectra) and without it (whose forward computes the gradients at a
/// loss gradient of 1 and whose backward scales them).
fn check_fused_upstream_gradient<B: Backend>(device: &B::Device)
where
    Autodiff<B>: SpectralOps<Device = B::Device>,
{
    let (batch, t, c) = (2, 1500, -2.5);
    for (w, hop, sc) in [(8, 2, 0.0), (256, 64, 0.0), (1024, 256, 0.5)] {
        let cfg = SpectralLossConfig::new(w, hop).with_spectral_convergence(sc);
        let pred = round_to_backend::<B>(&normals(81 + w as u64, batch * t), device);
        let target = round_to_backend::<B>(&normals(82 + w as u64, batch * t), device);
        let fused =
            run_with::<B>(&cfg, KernelChoice::Fused, Some(Reduction::Mean), c, &pred, &target, batch, t, device);
        let truth = run_with::<NdArrayBackend<f64>>(
            &cfg,
            KernelChoice::Reference,
            Some(Reduction::Mean),
            c,
            &pred,
            &target,
            batch,
            t,
            &Default::default(),
        );
        let loss_err = (fused.0 - truth.0).abs() / truth.0.abs();
        assert!(loss_err <= LOSS_F32_REL, "W={w} sc={sc}: loss off by {loss_err:e}");
        for (name, f, r) in [("pred", &fused.1, &truth.1), ("target", &fused.2, &truth.2)] {
            let err = rel_rms_real(f, r);
            assert!(err <= GRAD_F32_REL, "W={w} sc={sc}: gradient of {name} off by {err:e} (relative RMS)");
        }
    }
}

/// A batch gives what its signals give one at a time, where the two take different paths: with
/// the mean reduction, the batch's loss is the mean of the signals' losses and each signal's
/// gradient is its own loss's over the batch size. In f32 the sums differ only in order:
/// [`LOSS_F32_REL`], [`GRAD_F32_REL`]. The paths:
/// - H = 1: the batch's frame gradients exceed one launch's scratch (64 MiB: 6 signals × 3073
///   frames of 1024 floats are 75 MiB), so the fused loss runs in two chunks of signals, its
///   partial sums at an offset in the second; a signal alone (12.6 MB) is one chunk.
/// - H = 4: the batch is one chunk of 18.9 MB, whose frames the forward sums into the samples; a
///   signal alone (3.1 MB, under `DEFERRED_FRAMES_BYTES`) leaves them to the backward, which sums
///   and scales them in one launch.
fn check_fused_chunks_agree<B: Backend>(device: &B::Device)
where
    Autodiff<B>: SpectralOps<Device = B::Device>,
{
    for hop in [1, 4] {
        chunks_agree::<B>(hop, device);
    }
}

fn chunks_agree<B: Backend>(hop: usize, device: &B::Device)
where
    Autodiff<B>: SpectralOps<Device = B::Device>,
{
    let (signals, t) = (6, 4096);
    let cfg = SpectralLossConfig::new(1024, hop);
    let pred = round_to_backend::<B>(&normals(91, signals * t), device);
    let target = round_to_backend::<B>(&normals(92, signals * t), device);
    let (loss, gp, gt) =
        run_with::<B>(&cfg, KernelChoice::Fused, Some(Reduction::Mean), 1.0, &pred, &target, signals, t, device);
    let mut mean = 0.0;
    for i in 0..signals {
        let part = |v: &[f64]| v[i * t..(i + 1) * t].to_vec();
        let (l, p1, t1) = run_with::<B>(
            &cfg,
            KernelChoice::Fused,
            Some(Reduction::Mean),
            1.0,
            &part(&pred),
            &part(&target),
            1,
            t,
            device,
        );
        mean += l / signals as f64;
        for (name, batch, alone) in [("pred", part(&gp), p1), ("target", part(&gt), t1)] {
            let alone: Vec<f64> = alone.iter().map(|g| g / signals as f64).collect();
            let err = rel_rms_real(&batch, &alone);
            assert!(err <= GRAD_F32_REL, "H={hop}, signal {i}: {name}'s gradient in the batch off by {err:e}");
        }
    }
    let err = (loss - mean).abs() / mean.abs();
    assert!(err <= LOSS_F32_REL, "H={hop}: batch loss {loss} against the signals' mean {mean}: {err:e}");
}

/// With H < W, the fused backward's gradient at samples covered by ≥ 2 frames equals the f64
/// reference gradient (itself checked against finite differences in `spectral`), and is far
/// from what an overwriting backward (the last covering frame alone) would give.
fn check_fused_accumulates_overlaps<B: Backend>(device: &B::Device)
where
    Autodiff<B>: SpectralOps<Device = B::Device>,
{
    let (w, hop, t) = (16, 4, 45);
    let cfg = SpectralLossConfig::new(w, hop).with_distance(Distance::L2);
    let pred = round_to_backend::<B>(&normals(71, t), device);
    let target = round_to_backend::<B>(&normals(72, t), device);
    let fused = run::<B>(&cfg, KernelChoice::Fused, &pred, &target, 1, t, device).1;
    let want = crate::spectral::grads(&cfg.clone(), &pred, &target, 1, t).0;
    let frames = learned_fft::ops::spectral::frame_count(t, w, hop).unwrap();
    let covering = |i: usize| (0..frames).filter(|f| f * hop <= i && i < f * hop + w).collect::<Vec<_>>();
    // Mean reduction here, Sum in `grads`: scale by the number of (frame, bin) terms.
    let terms = (frames * (w / 2 + 1)) as f64;
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mut overwrite_far = 0;
    let multi: Vec<usize> = (0..t).filter(|&i| covering(i).len() >= 2).collect();
    for &i in &multi {
        let got = fused[i] * terms;
        assert!(
            (got - want[i]).abs() <= GRAD_F32_REL * scale,
            "sample {i} (in {} frames): fused {got} vs reference {}",
            covering(i).len(),
            want[i]
        );
        let last = *covering(i).last().unwrap();
        let lo = last * hop;
        let only = crate::spectral::grads(
            &SpectralLossConfig::new(w, w).with_distance(Distance::L2),
            &pred[lo..lo + w],
            &target[lo..lo + w],
            1,
            w,
        )
        .0[i - lo];
        if (only - want[i]).abs() > 10.0 * GRAD_F32_REL * scale {
            overwrite_far += 1;
        }
    }
    assert!(
        overwrite_far >= multi.len() * 9 / 10,
        "an overwriting backward would pass at too many samples ({overwrite_far} of {} differ)",
        multi.len()
    );
}

/// All-zero inputs (every bin at the magnitude's eps floor, a zero spectral-convergence
/// denominator) give a finite loss and finite gradients on the fused path, for every option,
/// through `forward` and through `forward_no_reduction`; so does a zero prediction against a
/// non-zero target.
fn check_fused_zero_inputs_finite<B: Backend>(device: &B::Device)
where
    Autodiff<B>: SpectralOps<Device = B::Device>,
{
    let (batch, t) = (2, 100);
    let zeros = vec![0.0; batch * t];
    let target = normals(81, batch * t);
    for (magnitude, distance) in OPTIONS {
        let cfg = SpectralLossConfig::new(16, 4)
            .with_magnitude(magnitude)
            .with_distance(distance)
            .with_spectral_convergence(1.0);
        for (q, what) in [(&zeros, "zero target"), (&target, "non-zero target")] {
            for reduction in [Some(Reduction::Mean), None] {
                let (loss, gp, gq) =
                    run_with::<B>(&cfg, KernelChoice::Fused, reduction.clone(), 1.0, &zeros, q, batch, t, device);
                assert!(loss.is_finite(), "{magnitude:?} {distance:?} {what} {reduction:?}: loss {loss}");
                assert!(
                    gp.iter().chain(&gq).all(|v| v.is_finite()),
                    "{magnitude:?} {distance:?} {what} {reduction:?}: non-finite gradient"
                );
            }
        }
    }
}

on_cubecl!(check_fused_matches_reference);
on_cubecl!(check_fused_zero_inputs_finite);
on_cubecl!(check_fused_deterministic);
on_cubecl!(check_fused_one_gradient_is_the_same);
on_cubecl!(check_fused_accumulates_overlaps);
on_cubecl!(check_fused_upstream_gradient);
on_cubecl!(check_fused_chunks_agree);

/// `KernelChoice::Fused` where the fused kernels cannot run is a clear error; `Auto` takes the
/// reference path there instead.
#[test]
fn fused_path_that_cannot_run_is_an_error() {
    let x = |b: usize, t: usize| normals(9, b * t);
    type Nd = NdArrayBackend<f32>;
    let nd: SpectralLoss<Nd> =
        SpectralLossConfig::new(16, 4).with_kernel(KernelChoice::Fused).init(&Default::default()).unwrap();
    let p = tensor2::<Nd>(&x(1, 64), 1, 64, &Default::default());
    let err = nd.forward(p.clone(), p.clone(), Reduction::Mean).expect_err("refused").to_string();
    assert!(err.contains("spectral_loss.forward") && err.contains("power of two") && err.contains("W = 16"), "{err}");
    let auto: SpectralLoss<Nd> = SpectralLossConfig::new(16, 4).init(&Default::default()).unwrap();
    assert!(auto.forward(p.clone(), p, Reduction::Mean).is_ok());
    if let Some(device) = wgpu_device() {
        let odd: SpectralLoss<WgpuBackend> =
            SpectralLossConfig::new(12, 3).with_kernel(KernelChoice::Fused).init(&device).unwrap();
        let p = tensor2::<WgpuBackend>(&x(2, 50), 2, 50, &device);
        let err = odd.forward(p.clone(), p.clone(), Reduction::Mean).expect_err("refused").to_string();
        assert!(err.contains("power of two") && err.contains("W = 12"), "{err}");
        let auto: SpectralLoss<WgpuBackend> = SpectralLossConfig::new(12, 3).init(&device).unwrap();
        assert!(!auto.is_fused(&device) && auto.forward(p.clone(), p, Reduction::Mean).is_ok());
    }
}

/// CubeCL has no f64 matmul (Burn's kernels panic), so in f64 the reference twin sums broadcast
/// products instead: on CUDA it runs, for a window only the reference takes (W = 1000) and for
/// one the fused kernels take (W = 256), and it, the fused f64 loss and ndarray's f64 reference
/// agree to f64 precision, loss and both gradients.
#[cfg(feature = "cuda")]
#[test]
fn cuda_f64_reference_runs_and_agrees() {
    type Cuda = learned_fft::backend::CudaBackend<f64, i64>;
    let (batch, t) = (2, 3000);
    let (pred, target) = (normals(71, batch * t), normals(72, batch * t));
    for (win, hop) in [(1000, 250), (256, 64)] {
        let cfg = SpectralLossConfig::new(win, hop).with_distance(Distance::L2);
        let run = |kernel| {
            run_with::<Cuda>(&cfg, kernel, Some(Reduction::Mean), 1.0, &pred, &target, batch, t, &Default::default())
        };
        let truth = run_with::<NdArrayBackend<f64>>(
            &cfg,
            KernelChoice::Reference,
            Some(Reduction::Mean),
            1.0,
            &pred,
            &target,
            batch,
            t,
            &Default::default(),
        );
        for kernel in [KernelChoice::Reference, KernelChoice::Auto] {
            let got = run(kernel);
            let what = format!("W = {win}, {kernel:?}");
            let loss_err = (got.0 - truth.0).abs() / truth.0.abs();
            assert!(loss_err < CUDA_F64_REL, "{what}: loss {} vs {} (rel {loss_err:e})", got.0, truth.0);
            for (name, a, b) in [("pred", &got.1, &truth.1), ("target", &got.2, &truth.2)] {
                let err = rel_rms_real(a, b);
                assert!(err < CUDA_F64_REL, "{what}: gradient of {name}, rel RMS {err:e}");
            }
        }
    }
}
