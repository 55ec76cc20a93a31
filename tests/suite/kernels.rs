//! The fused CubeCL butterfly kernels against the tensor-op reference on the same backend:
//! output and both gradients, bitwise determinism, and an Adam trajectory.

use burn::backend::Autodiff;
use burn::module::Module;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::backend::Backend;
use learned_fft::ops::butterfly::{butterfly_forward_reference, butterfly_tangent_reference, Tangent};
use learned_fft::reference::{dft, FftNorm};
use learned_fft::{Butterfly, ButterflyConfig, ButterflyInit, ButterflyOps, Permutation};

use crate::common::*;

/// Fused kernel against reference in f32, relative RMS error per tensor (the acceptance bar):
/// both evaluate the same products in f32, in different orders.
const KERNEL_F32_REL: f64 = 1e-5;
/// The Adam trajectories of the two paths may differ by this relative amount in the loss
/// (the acceptance bar).
const ADAM_LOSS_REL: f64 = 1e-4;

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

/// The reference backends never take a fused path.
#[test]
fn reference_backends_are_not_fused() {
    assert!(!<NdArrayBackend<f32> as ButterflyOps>::butterfly_is_fused(64, &Default::default()));
    assert!(!<NdArrayBackend<f32> as ButterflyOps>::butterfly_tangent_is_fused(64, &Default::default()));
    assert!(!<Autodiff<CandleBackend<f32>> as ButterflyOps>::butterfly_is_fused(64, &Default::default()));
}
