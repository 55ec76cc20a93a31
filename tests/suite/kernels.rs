//! The fused CubeCL butterfly kernels against the tensor-op reference on the same backend:
//! output and both gradients, bitwise determinism, and an Adam trajectory; the fused Adam update
//! against its tensor ops, and the trainer's Adam against Burn's.

use burn::backend::Autodiff;
use burn::module::Module;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::backend::Backend;
use learned_fft::ops::adam::{adam_update_reference, AdamStep};
use learned_fft::ops::butterfly::{butterfly_forward_reference, butterfly_tangent_reference, Tangent};
use learned_fft::ops::residual::residual_mean_square_reference;
use learned_fft::reference::{dft, FftNorm};
use learned_fft::train::optimizer::FusedAdam;
use learned_fft::{AdamOps, Butterfly, ButterflyConfig, ButterflyInit, ButterflyOps, Permutation, ResidualOps};

use crate::common::*;

/// Fused kernel against reference in f32, relative RMS error per tensor (the acceptance bar):
/// both evaluate the same products in f32, in different orders.
const KERNEL_F32_REL: f64 = 1e-5;
/// The Adam trajectories of the two paths may differ by this relative amount in the loss
/// (the acceptance bar).
const ADAM_LOSS_REL: f64 = 1e-4;
/// The fused Adam update against its tensor ops in f32, largest difference relative to the
/// tensor's largest magnitude: the same operations in the same order, but a GPU compiler may
/// contract a product and a sum into one fused multiply-add (one rounding fewer), a few ulps.
const ADAM_UPDATE_F32_REL: f64 = 1e-6;

/// Output and gradients `[y_re, y_im, x_re, x_im, tw_re, tw_im]` of the linear loss
/// `Σ a_re·y_re + a_im·y_im` through the fused op or the reference; `halves` says which of the
/// two terms the loss has (a half it leaves out gets no gradient).
fn run<B: Backend>(
    n: usize,
    batch: usize,
    fused: bool,
    perm: &Permutation,
    halves: [bool; 2],
    device: &B::Device,
) -> [Vec<f64>; 6]
where
    Autodiff<B>: ButterflyOps<Device = B::Device>,
{
    type A<B> = Autodiff<B>;
    let seed = (n * 7919 + batch) as u64;
    let (tw_re, tw_im) = ButterflyInit::Randn { seed, scale: std::f64::consts::FRAC_1_SQRT_2 }.twiddles(n);
    let shape = [n.trailing_zeros() as usize, n / 2, 2, 2];
    let tw = |v: Vec<f64>| learned_fft::float_tensor::<A<B>, 4>(v, shape, device).require_grad();
    let (tw_re, tw_im) = (tw(tw_re), tw(tw_im));
    let x = |s: u64| tensor2::<A<B>>(&normals(seed + s, batch * n), batch, n, device);
    let (x_re, x_im) = (x(1).require_grad(), x(2).require_grad());
    let (yr, yi) = if fused {
        <A<B> as ButterflyOps>::butterfly(x_re.clone(), x_im.clone(), tw_re.clone(), tw_im.clone(), perm)
    } else {
        butterfly_forward_reference(x_re.clone(), x_im.clone(), tw_re.clone(), tw_im.clone(), perm)
    };
    let loss = match halves {
        [true, false] => (x(3) * yr.clone()).sum(),
        [false, true] => (x(4) * yi.clone()).sum(),
        _ => (x(3) * yr.clone() + x(4) * yi.clone()).sum(),
    };
    let grads = loss.backward();
    [
        host(yr),
        host(yi),
        host(x_re.grad(&grads).unwrap()),
        host(x_im.grad(&grads).unwrap()),
        host(tw_re.grad(&grads).unwrap()),
        host(tw_im.grad(&grads).unwrap()),
    ]
}

/// The shared kernel checker: fused = reference for every N and batch, both permutations.
fn check_kernel_matches_reference<B: Backend>(device: &B::Device)
where
    Autodiff<B>: ButterflyOps<Device = B::Device>,
{
    // One pass up to 4096, two above (the batches shrink with N to bound the reference's time).
    let two_pass = [(8192, &[1, 3, 257][..]), (16384, &[1, 3][..]), (65536, &[2][..])];
    // Batch 1000 fills many multi-row cubes; past N = 64 it repeats the same plans at the
    // reference path's highest cost, so the CI tier keeps it for small N only.
    let full = full_sweep();
    let batches = move |n: usize| -> &'static [usize] {
        if full || n <= 64 {
            &[1, 3, 257, 1000]
        } else {
            &[1, 3, 257]
        }
    };
    let cases = sizes_up_to(4096).map(|n| (n, batches(n))).chain(two_pass);
    assert!(
        !<Autodiff<B> as ButterflyOps>::butterfly_is_fused(1 << 17, device),
        "n above MAX_FUSED_N takes the reference path"
    );
    for (n, batches) in cases {
        assert!(<Autodiff<B> as ButterflyOps>::butterfly_is_fused(n, device), "n={n}: the fused path is not taken");
        for &batch in batches {
            // Any other permutation is a gather before the fused op: one batch checks it.
            let shuffled = Permutation::gather(shuffled(n, n as u64)).unwrap();
            for perm in [Permutation::BitReversal, Permutation::Identity, shuffled] {
                if perm != Permutation::BitReversal && batch != 3 {
                    continue;
                }
                let fused = run::<B>(n, batch, true, &perm, [true; 2], device);
                let reference = run::<B>(n, batch, false, &perm, [true; 2], device);
                assert_matches(&fused, &reference, &format!("n={n} batch={batch} {perm:?}"));
            }
        }
    }
    // A loss of one half of the output only (the other half's gradient is zero), one pass and
    // two.
    for n in [16, 1024] {
        for halves in [[true, false], [false, true]] {
            let fused = run::<B>(n, 3, true, &Permutation::BitReversal, halves, device);
            let reference = run::<B>(n, 3, false, &Permutation::BitReversal, halves, device);
            assert_matches(&fused, &reference, &format!("n={n} batch=3, halves {halves:?} in the loss"));
        }
    }
}

/// Every output and gradient of [`run`]'s fused path within [`KERNEL_F32_REL`] of the reference's.
fn assert_matches(fused: &[Vec<f64>; 6], reference: &[Vec<f64>; 6], case: &str) {
    for (i, name) in ["y_re", "y_im", "grad x_re", "grad x_im", "grad tw_re", "grad tw_im"].iter().enumerate() {
        let err = rel_rms_real(&fused[i], &reference[i]);
        assert!(err <= KERNEL_F32_REL, "{case} {name}: fused vs reference rel RMS {err:e} > {KERNEL_F32_REL:e}");
    }
}

/// Two runs of the fused backward give bitwise-identical gradients (no atomics).
fn check_deterministic<B: Backend>(device: &B::Device)
where
    Autodiff<B>: ButterflyOps<Device = B::Device>,
{
    for (n, batch) in [(16, 5000), (1024, 1000), (16384, 7)] {
        let first = run::<B>(n, batch, true, &Permutation::BitReversal, [true; 2], device);
        let second = run::<B>(n, batch, true, &Permutation::BitReversal, [true; 2], device);
        for i in 2..6 {
            let same = first[i].iter().zip(&second[i]).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "n={n} batch={batch}: gradient {i} differs between two runs");
        }
    }
}

/// 20 Adam steps fitting the DFT from random init: the kernel path's losses follow the
/// reference path's.
fn check_adam_trajectory<B: Backend>(device: &B::Device)
where
    Autodiff<B>: ButterflyOps<Device = B::Device>,
{
    type A<B> = Autodiff<B>;
    let (n, batch) = (64, 128);
    let xr = normals(101, batch * n);
    let xi = normals(103, batch * n);
    let mut target = complex(&xr, &xi);
    dft::fft_in_place(&mut target, n, false, FftNorm::Ortho).unwrap();
    let (tr, ti): (Vec<f64>, Vec<f64>) = target.iter().map(|z| (z.re, z.im)).unzip();
    let t = |v: &[f64]| tensor2::<A<B>>(v, batch, n, device);

    let trajectory = |fused: bool| -> Vec<f64> {
        let mut layer: Butterfly<A<B>> =
            ButterflyConfig::new(n).with_init(ButterflyInit::RandomUnitary { seed: 5 }).init(device).unwrap();
        let mut optim = AdamConfig::new().init::<A<B>, Butterfly<A<B>>>();
        let mut losses = Vec::new();
        for _ in 0..20 {
            let (yr, yi) = if fused {
                layer.forward(t(&xr), t(&xi)).unwrap()
            } else {
                layer.forward_reference(t(&xr), t(&xi)).unwrap()
            };
            let dr = yr - t(&tr);
            let di = yi - t(&ti);
            let loss = (dr.clone() * dr + di.clone() * di).mean();
            losses.push(host(loss.clone())[0]);
            let grads = GradientsParams::from_grads(loss.backward(), &layer);
            layer = optim.step(1e-2, layer, grads);
        }
        let _ = layer.num_params();
        losses
    };
    let (fused, reference) = (trajectory(true), trajectory(false));
    assert!(fused[19] < 0.9 * fused[0], "the loss should fall: {fused:?}");
    for (step, (a, b)) in fused.iter().zip(&reference).enumerate() {
        let err = (a - b).abs() / b.abs();
        assert!(err <= ADAM_LOSS_REL, "step {step}: fused loss {a} vs reference {b} (rel {err:e})");
    }
}

/// The fused tangent (forward-mode derivative) against the reference tangent on the same
/// backend: `y` and `dy` for every N up to 8192 (two passes from 4096 in f32: four lines of
/// shared memory per line), both fused permutations and a gather.
fn check_tangent_matches_reference<B: Backend + ButterflyOps>(device: &B::Device) {
    for n in sizes_up_to(8192) {
        assert!(B::butterfly_tangent_is_fused(n, device), "n={n}: the fused tangent is not taken");
        for batch in [1, 3, 257] {
            let shuffled = Permutation::gather(shuffled(n, n as u64 + 1)).unwrap();
            for perm in [Permutation::BitReversal, Permutation::Identity, shuffled] {
                if perm != Permutation::BitReversal && batch != 3 {
                    continue;
                }
                let seed = (n * 31 + batch) as u64;
                let shape = [n.trailing_zeros() as usize, n / 2, 2, 2];
                let tw = |s: u64| learned_fft::float_tensor::<B, 4>(normals(seed + s, 2 * n * shape[0]), shape, device);
                let x = |s: u64| tensor2::<B>(&normals(seed + s, batch * n), batch, n, device);
                let (tw_re, tw_im, v_re, v_im) = (tw(1), tw(2), tw(3), tw(4));
                let (xs, dxs) = ((x(5), x(6)), (x(7), x(8)));
                let fused = B::butterfly_tangent(xs.clone(), dxs.clone(), (&tw_re, &tw_im), (&v_re, &v_im), &perm);
                let reference = butterfly_tangent_reference(xs, dxs, (&tw_re, &tw_im), (&v_re, &v_im), &perm);
                let parts = |((a, b), (c, d)): Tangent<B>| [host(a), host(b), host(c), host(d)];
                for (i, (f, r)) in parts(fused).iter().zip(parts(reference)).enumerate() {
                    let err = rel_rms_real(f, &r);
                    assert!(
                        err <= KERNEL_F32_REL,
                        "n={n} batch={batch} {perm:?} {}: fused vs reference rel RMS {err:e} > {KERNEL_F32_REL:e}",
                        ["y_re", "y_im", "dy_re", "dy_im"][i]
                    );
                }
            }
        }
    }
    assert!(!B::butterfly_tangent_is_fused(1 << 17, device), "n above MAX_FUSED_N takes the reference path");
}

on_cubecl!(check_kernel_matches_reference);
on_cubecl!(check_tangent_matches_reference);
on_cubecl!(check_deterministic);
on_cubecl!(check_adam_trajectory);
on_cubecl!(check_fused_adam_matches_reference);
on_cubecl!(check_residual_loss_matches_reference);

/// The objective's loss recorded as one node under autodiff (its backward `2 r / norm` times the
/// upstream gradient) against the tensor ops and Burn's autodiff: the loss and both parts'
/// gradients, through a nonlinear function of the loss (so the upstream gradient is not 1), and
/// with the imaginary part untracked (the real-output map's zeros).
fn check_residual_loss_matches_reference<B: Backend>(device: &B::Device)
where
    Autodiff<B>: ResidualOps<Device = B::Device>,
{
    type A<B> = Autodiff<B>;
    let (rows, n, norm) = (33, 64, 3.0 * 33.0 * 64.0);
    let t = |seed: u64| tensor2::<A<B>>(&normals(seed, rows * n), rows, n, device);
    let (hi, lo) = ((t(3), t(4)), (t(5).mul_scalar(1e-7), t(6).mul_scalar(1e-7)));
    for tracked_im in [true, false] {
        let run = |fused: bool| -> [Vec<f64>; 3] {
            let y_re = t(1).require_grad();
            let y_im = if tracked_im { t(2).require_grad() } else { t(2) };
            let y = (y_re.clone(), y_im.clone());
            let loss = match fused {
                true => A::<B>::residual_mean_square(y, &hi, &lo, norm),
                false => residual_mean_square_reference(y, &hi, &lo, norm),
            };
            let grads = (loss.clone().exp() * 1.5).sum().backward();
            let grad = |y: &burn::tensor::Tensor<A<B>, 2>| y.grad(&grads).map(host).unwrap_or_default();
            [host(loss), grad(&y_re), grad(&y_im)]
        };
        let (fused, reference) = (run(true), run(false));
        for (i, (f, r)) in fused.iter().zip(&reference).enumerate() {
            assert_eq!(f.len(), r.len(), "{}: one path has a gradient the other lacks", ["loss", "d re", "d im"][i]);
            if !r.is_empty() {
                let err = rel_rms_real(f, r);
                assert!(err <= KERNEL_F32_REL, "{}: fused vs tensor ops rel RMS {err:e}", ["loss", "d re", "d im"][i]);
            }
        }
    }
}

/// Three Adam updates (the first without moments, then with them) of a butterfly's twiddle
/// shape and of a length that leaves the last cube partial: the fused kernel's parameter and
/// moments against the tensor ops on the same backend, at every step.
fn check_fused_adam_matches_reference<B: Backend + AdamOps>(device: &B::Device) {
    for shape in [[10, 512, 2, 2], [3, 5, 7, 1]] {
        let len: usize = shape.iter().product();
        let t = |seed: u64| learned_fft::float_tensor::<B, 4>(normals(seed, len), shape, device);
        let (mut fused, mut reference) = ((t(1), None), (t(1), None));
        for time in 1..=3 {
            let grad = t(10 + time as u64).mul_scalar(1e-3);
            let step = AdamStep { beta_1: 0.9, beta_2: 0.999, epsilon: 1e-8, time, lr: 1e-2 };
            let (p, m, v) = B::adam_update(fused.0, grad.clone(), fused.1, &step);
            let (pr, mr, vr) = adam_update_reference(reference.0, grad, reference.1, &step);
            for (name, a, b) in [("param", &p, &pr), ("moment 1", &m, &mr), ("moment 2", &v, &vr)] {
                let (a, b) = (host(a.clone()), host(b.clone()));
                let scale = b.iter().fold(0.0f64, |s, x| s.max(x.abs()));
                let err = a.iter().zip(&b).fold(0.0f64, |e, (x, y)| e.max((x - y).abs())) / scale;
                assert!(err <= ADAM_UPDATE_F32_REL, "{shape:?} step {time} {name}: fused vs tensor ops {err:e}");
            }
            fused = (p, Some((m, v)));
            reference = (pr, Some((mr, vr)));
        }
    }
}

/// The trainer's Adam takes Burn's steps to the bit on the CPU (the tensor-op update), over a
/// training loop of a butterfly with its own gradients: the two optimisers' layers stay equal.
#[test]
fn trainers_adam_equals_burns_on_the_cpu() {
    type A = Autodiff<NdArrayBackend<f32>>;
    let device = Default::default();
    let n = 16;
    let layer = || -> Butterfly<A> {
        ButterflyConfig::new(n).with_init(ButterflyInit::RandomUnitary { seed: 3 }).init(&device).unwrap()
    };
    let (mut ours, mut burns) = (layer(), layer());
    let mut fused = burn::optim::adaptor::OptimizerAdaptor::from(FusedAdam::new(1e-8));
    let mut adam = AdamConfig::new().with_epsilon(1e-8).init::<A, Butterfly<A>>();
    let x = tensor2::<A>(&normals(7, 4 * n), 4, n, &device);
    let loss = |l: &Butterfly<A>| {
        let (yr, yi) = l.forward(x.clone(), x.clone()).unwrap();
        (yr.clone() * yr.sin() + yi).sum()
    };
    for _ in 0..5 {
        let g = GradientsParams::from_grads(loss(&ours).backward(), &ours);
        ours = Optimizer::<Butterfly<A>, A>::step(&mut fused, 1e-2, ours, g);
        let g = GradientsParams::from_grads(loss(&burns).backward(), &burns);
        burns = adam.step(1e-2, burns, g);
    }
    let params = |l: &Butterfly<A>| [host(l.twiddle_re.val()), host(l.twiddle_im.val())];
    assert_eq!(params(&ours), params(&burns), "the trainer's Adam left Burn's path");
    assert_ne!(params(&ours), params(&layer()), "the steps moved nothing");
}

/// The reference backends never take a fused path.
#[test]
fn reference_backends_are_not_fused() {
    assert!(!<NdArrayBackend<f32> as ButterflyOps>::butterfly_is_fused(64, &Default::default()));
    assert!(!<NdArrayBackend<f32> as ButterflyOps>::butterfly_tangent_is_fused(64, &Default::default()));
    assert!(!<Autodiff<CandleBackend<f32>> as ButterflyOps>::butterfly_is_fused(64, &Default::default()));
}
