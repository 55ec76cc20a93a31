//! Real signals through the half-size butterfly (`Butterfly::rfft`, `Butterfly::irfft`) against
//! rustfft on every backend, their gradients against finite differences, bad input.

use burn::backend::Autodiff;
use burn::tensor::Tensor;
use learned_fft::reference::{dft, FftNorm};
use learned_fft::{ButterflyConfig, ButterflyInit, ButterflyOps, Error};
use num_complex::{Complex32, Complex64};
use rustfft::FftPlanner;

use crate::common::*;

const BATCH: usize = 3;

/// rustfft in f32 on the same input, scaled to the unitary convention: the accuracy an f32 FFT
/// is expected to have.
fn rustfft_f32(x: &[Complex64], n: usize, inverse: bool) -> Vec<Complex64> {
    let mut buf: Vec<Complex32> = x.iter().map(|z| Complex32::new(z.re as f32, z.im as f32)).collect();
    let mut planner = FftPlanner::<f32>::new();
    let plan = if inverse { planner.plan_fft_inverse(n) } else { planner.plan_fft_forward(n) };
    buf.chunks_mut(n).for_each(|row| plan.process(row));
    let scale = 1.0 / (n as f64).sqrt();
    buf.iter().map(|z| Complex64::new(z.re as f64 * scale, z.im as f64 * scale)).collect()
}

/// The first `keep` entries of each row of `n`.
fn head(x: &[Complex64], n: usize, keep: usize) -> Vec<Complex64> {
    x.chunks(n).flat_map(|row| row[..keep].to_vec()).collect()
}

/// Real signals of 2m samples (m = 2 … 2048) through the exact unitary butterfly of size m:
/// `rfft` equals the unitary DFT's bins 0 … m, and `irfft` of those bins gives the signals back,
/// within 1e-13 in f64 and within 4 × rustfft-f32's own error in f32.
fn check_rfft_vs_rustfft<B: ButterflyOps>(device: &B::Device, _tol: Tol) {
    for m in sizes_up_to(2048) {
        let n = 2 * m;
        let layer = ButterflyConfig::new(m).init::<B>(device).unwrap();
        let x = round_to_backend::<B>(&normals(n as u64 + 7, BATCH * n), device);
        let xc = complex(&x, &vec![0.0; x.len()]);
        let mut spectrum = xc.clone();
        dft::fft_in_place(&mut spectrum, n, false, FftNorm::Ortho).unwrap();
        let truth = head(&spectrum, n, m + 1);

        let (yr, yi) = layer.rfft(tensor2::<B>(&x, BATCH, n, device)).unwrap();
        let ours = complex(&host(yr), &host(yi));
        let err = rel_rms(&ours, &truth);

        // The inverse from the exact bins, rounded to the backend.
        let bins_re = round_to_backend::<B>(&truth.iter().map(|z| z.re).collect::<Vec<_>>(), device);
        let bins_im = round_to_backend::<B>(&truth.iter().map(|z| z.im).collect::<Vec<_>>(), device);
        let back = host(
            layer
                .irfft(tensor2::<B>(&bins_re, BATCH, m + 1, device), tensor2::<B>(&bins_im, BATCH, m + 1, device))
                .unwrap(),
        );
        let err_back = rel_rms_real(&back, &x);
        let what = format!("n = {n}");
        if is_f64::<B>() {
            assert!(err <= F64_EXACT_REL_RMS, "{what}: rfft rel RMS {err:e}");
            assert!(err_back <= F64_EXACT_REL_RMS, "{what}: irfft rel RMS {err_back:e}");
        } else {
            let forward_f32 = rel_rms(&head(&rustfft_f32(&xc, n, false), n, m + 1), &truth);
            assert!(
                err <= F32_EXACT_VS_RUSTFFT * forward_f32,
                "{what}: rfft rel RMS {err:e} > {F32_EXACT_VS_RUSTFFT} × rustfft-f32's {forward_f32:e}"
            );
            let inverse_f32: Vec<f64> = rustfft_f32(&spectrum, n, true).iter().map(|z| z.re).collect();
            let inverse_f32 = rel_rms_real(&inverse_f32, &x);
            assert!(
                err_back <= F32_EXACT_VS_RUSTFFT * inverse_f32,
                "{what}: irfft rel RMS {err_back:e} > {F32_EXACT_VS_RUSTFFT} × rustfft-f32's {inverse_f32:e}"
            );
        }

        // numpy drops the imaginary parts of bins 0 and m: so does irfft, to the bit.
        let mut odd_im = bins_im.clone();
        for row in odd_im.chunks_mut(m + 1) {
            row[0] += 1.5;
            row[m] -= 0.75;
        }
        let dropped = host(
            layer
                .irfft(tensor2::<B>(&bins_re, BATCH, m + 1, device), tensor2::<B>(&odd_im, BATCH, m + 1, device))
                .unwrap(),
        );
        assert_eq!(dropped, back, "{what}: the imaginary parts of bins 0 and m changed the signal");
    }
}
per_backend!(check_rfft_vs_rustfft);

/// The fused rfft (CubeCL backends without autodiff: packed, transformed and split in one
/// launch) equals the tensor-op path through the same butterfly, within 1e-5 relative (the
/// kernels' bar against their twins: a few roundings of 6e-8 per stage), for Haar-random
/// butterflies (not only the DFT) with each kind of input order, m = 2 … 4096 (the largest a
/// 32 KiB cube holds in f32), and 5 and 300 rows: the cubes hold several rows where M is
/// small, so part of one cube, and several cubes with part of the last.
fn fused_rfft_matches_reference<B: ButterflyOps>(device: &B::Device) {
    use learned_fft::ops::butterfly::rfft_reference;
    use learned_fft::Permutation;
    // M = 8192 and 16384 (one row past 32 KiB a cube) where the device's shared memory holds
    // them (CUDA).
    for (case, m) in [2usize, 4, 32, 128, 256, 1024, 4096, 8192, 16384].into_iter().enumerate() {
        let n = 2 * m;
        if m > 4096 && !B::butterfly_conv_real_is_fused(n, device) {
            eprintln!("m = {m}: past this device's shared memory, not fused");
            continue;
        }
        assert!(B::butterfly_conv_real_is_fused(n, device), "m = {m}: the fused rfft does not run");
        let perm = match case % 3 {
            0 => Permutation::BitReversal,
            1 => Permutation::Identity,
            _ => Permutation::gather(shuffled(m, case as u64)).unwrap(),
        };
        let (tw_re, tw_im) = ButterflyInit::RandomUnitary { seed: 70 + case as u64 }.twiddles(m);
        let shape = [m.trailing_zeros() as usize, m / 2, 2, 2];
        let tw = |v: Vec<f64>| learned_fft::float_tensor::<B, 4>(v, shape, device);
        let (tw_re, tw_im) = (tw(tw_re), tw(tw_im));
        // A cube holds up to 4096 / M rows: 5 rows are part of one, 300 fill some and leave a
        // part of the last (up to M = 2048).
        for rows in [5, 300] {
            let x = tensor2::<B>(&normals(500 + case as u64, rows * n), rows, n, device);
            let (fr, fi) = B::butterfly_rfft(x.clone(), tw_re.clone(), tw_im.clone(), &perm);
            let (rr, ri) = rfft_reference(x, tw_re.clone(), tw_im.clone(), &perm);
            assert_eq!(fr.dims(), [rows, m + 1], "m = {m}: shape");
            let err = rel_rms(&complex(&host(fr), &host(fi)), &complex(&host(rr), &host(ri)));
            assert!(err <= 1e-5, "m = {m}, order {}, {rows} rows: rel RMS {err:e}", case % 3);
        }
    }
}
on_cubecl!(fused_rfft_matches_reference);

/// The loss `L = Σ a·re + b·im + ½ Σ c·(re² + im²)` of a pair `(re, im)`, as a tensor.
fn quadratic<B: burn::tensor::backend::Backend>(
    re: Tensor<B, 2>,
    im: Tensor<B, 2>,
    w: &[Vec<f64>; 3],
    device: &B::Device,
) -> Tensor<B, 1> {
    let [rows, cols] = re.dims();
    let t = |v: &Vec<f64>| tensor2::<B>(v, rows, cols, device);
    (t(&w[0]) * re.clone() + t(&w[1]) * im.clone() + t(&w[2]) * (re.clone() * re + im.clone() * im).mul_scalar(0.5))
        .sum()
}

/// Gradients of `rfft` (into the signal and the twiddles) and of `irfft` (into both parts of
/// the bins and the twiddles) against central finite differences in f64 on ndarray, through a
/// random butterfly (the split and merge steps hold for any layer), m = 2 … 16.
#[test]
fn rfft_and_irfft_gradients_match_finite_differences() {
    type B = Autodiff<NdArrayBackend<f64>>;
    let device = Default::default();
    let (step, bar) = (F64.fd_step, F64.fd_rel);
    for m in [2usize, 4, 8, 16] {
        let n = 2 * m;
        let seed = 31 * m as u64;
        let layer = ButterflyConfig::new(m)
            .with_init(ButterflyInit::Randn { seed, scale: std::f64::consts::FRAC_1_SQRT_2 })
            .init::<B>(&device)
            .unwrap();
        let (tw_re, tw_im) = layer.twiddles_f64();
        let weights = |cols: usize, s: u64| {
            let c = normals(s + 2, BATCH * cols).iter().map(|v| v.abs()).collect();
            [normals(s, BATCH * cols), normals(s + 1, BATCH * cols), c]
        };
        let (wf, wi) = (weights(m + 1, seed + 10), weights(n, seed + 20));
        let x = normals(seed + 30, BATCH * n);
        let (br, bi) = (normals(seed + 40, BATCH * (m + 1)), normals(seed + 50, BATCH * (m + 1)));

        // Both losses for given twiddles and inputs, with their autodiff gradients when asked.
        let forward_loss = |tw: (&[f64], &[f64]), x: &[f64]| -> Tensor<B, 1> {
            let l = with_twiddles::<B>(m, tw, &device);
            let (yr, yi) = l.rfft(tensor2::<B>(x, BATCH, n, &device).require_grad()).unwrap();
            quadratic(yr, yi, &wf, &device)
        };
        let inverse_loss = |tw: (&[f64], &[f64]), re: &[f64], im: &[f64]| -> Tensor<B, 1> {
            let l = with_twiddles::<B>(m, tw, &device);
            let y = l.irfft(tensor2::<B>(re, BATCH, m + 1, &device), tensor2::<B>(im, BATCH, m + 1, &device)).unwrap();
            quadratic(y.clone(), y.zeros_like(), &wi, &device)
        };
        let value = |t: Tensor<B, 1>| host(t)[0];
        let check = |what: &str, auto: &[f64], fd: &dyn Fn(usize, f64) -> f64| {
            let scale = auto.iter().fold(0.0f64, |a, v| a.max(v.abs()));
            for (i, &g) in auto.iter().enumerate() {
                let fd = (fd(i, step) - fd(i, -step)) / (2.0 * step);
                let err = (g - fd).abs() / g.abs().max(1e-3 * scale);
                assert!(err <= bar, "m = {m}, {what}[{i}]: autodiff {g:e}, finite differences {fd:e}");
            }
        };
        let bumped = |v: &[f64], i: usize, h: f64| {
            let mut v = v.to_vec();
            v[i] += h;
            v
        };

        // rfft: into the signal and the twiddles.
        let l = with_twiddles::<B>(m, (&tw_re, &tw_im), &device);
        let xt = tensor2::<B>(&x, BATCH, n, &device).require_grad();
        let (yr, yi) = l.rfft(xt.clone()).unwrap();
        let grads = quadratic(yr, yi, &wf, &device).backward();
        check("rfft d/dx", &host(xt.grad(&grads).unwrap()), &|i, h| {
            value(forward_loss((&tw_re, &tw_im), &bumped(&x, i, h)))
        });
        let g_re = host(l.twiddle_re.grad(&grads).unwrap());
        check("rfft d/dtw_re", &g_re, &|i, h| value(forward_loss((&bumped(&tw_re, i, h), &tw_im), &x)));

        // irfft: into both parts of the bins and the twiddles.
        let l = with_twiddles::<B>(m, (&tw_re, &tw_im), &device);
        let (rt, it) = (
            tensor2::<B>(&br, BATCH, m + 1, &device).require_grad(),
            tensor2::<B>(&bi, BATCH, m + 1, &device).require_grad(),
        );
        let y = l.irfft(rt.clone(), it.clone()).unwrap();
        let grads = quadratic(y.clone(), y.zeros_like(), &wi, &device).backward();
        check("irfft d/dre", &host(rt.grad(&grads).unwrap()), &|i, h| {
            value(inverse_loss((&tw_re, &tw_im), &bumped(&br, i, h), &bi))
        });
        let g_im = host(it.grad(&grads).unwrap());
        check("irfft d/dim", &g_im, &|i, h| value(inverse_loss((&tw_re, &tw_im), &br, &bumped(&bi, i, h))));
        for row in g_im.chunks(m + 1) {
            assert!(row[0] == 0.0 && row[m] == 0.0, "m = {m}: the dropped parts have a gradient: {row:?}");
        }
        let g_tw = host(l.twiddle_im.grad(&grads).unwrap());
        check("irfft d/dtw_im", &g_tw, &|i, h| value(inverse_loss((&tw_re, &bumped(&tw_im, i, h)), &br, &bi)));
    }
}

/// A butterfly of size m with the given twiddles and the bit-reversal permutation.
fn with_twiddles<B: ButterflyOps>(m: usize, tw: (&[f64], &[f64]), device: &B::Device) -> learned_fft::Butterfly<B> {
    let factor = learned_fft::reference::factorizations::Factor {
        permutation: learned_fft::Permutation::BitReversal.indices(m),
        re: tw.0.to_vec(),
        im: tw.1.to_vec(),
    };
    learned_fft::Butterfly::from_factor(&factor, device).unwrap()
}

/// `rfft` of `x` `[BATCH, 2m]` through a default layer of size m, `irfft` of the bins, and the
/// gradient into `x` of `Σ w₀·re + w₁·im + Σ back²`: (the bins re then im, back, d/dx).
fn rfft_round_trip<B: ButterflyOps + burn::tensor::backend::AutodiffBackend>(
    m: usize,
    x: &[f64],
    w: &[Vec<f64>; 2],
    device: &B::Device,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let n = 2 * m;
    let layer = ButterflyConfig::new(m).init::<B>(device).unwrap();
    let xt = tensor2::<B>(x, BATCH, n, device).require_grad();
    let (yr, yi) = layer.rfft(xt.clone()).unwrap();
    let back = layer.irfft(yr.clone(), yi.clone()).unwrap();
    let loss = (tensor2::<B>(&w[0], BATCH, m + 1, device) * yr.clone()
        + tensor2::<B>(&w[1], BATCH, m + 1, device) * yi.clone())
    .sum()
        + back.clone().powf_scalar(2.0).sum();
    let grads = loss.backward();
    let mut y = host(yr);
    y.extend(host(yi));
    (y, host(back), host(xt.grad(&grads).unwrap()))
}

/// The fused path on wgpu: `rfft` and `irfft` and their gradients equal ndarray's in f32 within
/// 1e-5 relative (the kernels' own bar against the twin), m = 2 … 256.
#[test]
fn rfft_on_wgpu_equals_the_cpu() {
    let Some(wgpu) = wgpu_device() else { return };
    for m in [2usize, 16, 256] {
        let n = 2 * m;
        let x = normals(m as u64 + 3, BATCH * n);
        let w = [normals(m as u64 + 4, BATCH * (m + 1)), normals(m as u64 + 5, BATCH * (m + 1))];
        let cpu = rfft_round_trip::<Autodiff<NdArrayBackend<f32>>>(m, &x, &w, &Default::default());
        let gpu = rfft_round_trip::<Autodiff<WgpuBackend>>(m, &x, &w, &wgpu);
        for (what, a, b) in [("rfft", &cpu.0, &gpu.0), ("irfft", &cpu.1, &gpu.1), ("d/dx", &cpu.2, &gpu.2)] {
            let err = rel_rms_real(b, a);
            assert!(err <= 1e-5, "m = {m}, {what}: wgpu against ndarray, rel RMS {err:e}");
        }
    }
}

/// The split and merge steps alone, `ButterflyOps::rfft_split` and `rfft_merge` (fused on wgpu
/// with their adjoints as backward), and the gradient into their inputs of `Σ g·out`, against
/// ndarray's tensor ops and their autodiff gradient: within 1e-5 relative (the kernels' bar),
/// m = 2 … 1024, so the self-paired entries (k = 0 and k = m/2) and the inner pairs are each
/// checked both ways.
#[test]
fn split_and_merge_on_wgpu_equal_the_cpu() {
    let Some(wgpu) = wgpu_device() else { return };
    fn run<B: ButterflyOps + burn::tensor::backend::AutodiffBackend>(
        m: usize,
        merge: bool,
        device: &B::Device,
    ) -> Vec<f64> {
        let (cols_in, cols_out) = if merge { (m + 1, m) } else { (m, m + 1) };
        let seed = 10 * m as u64 + merge as u64;
        let input = |s: u64| tensor2::<B>(&normals(s, BATCH * cols_in), BATCH, cols_in, device).require_grad();
        let (re, im) = (input(seed), input(seed + 1));
        let (yr, yi) =
            if merge { B::rfft_merge(re.clone(), im.clone()) } else { B::rfft_split(re.clone(), im.clone()) };
        let weights = |s: u64| tensor2::<B>(&normals(s, BATCH * cols_out), BATCH, cols_out, device);
        let loss = (weights(seed + 2) * yr.clone() + weights(seed + 3) * yi.clone()).sum();
        let grads = loss.backward();
        let mut all = host(yr);
        all.extend(host(yi));
        all.extend(host(re.grad(&grads).unwrap()));
        all.extend(host(im.grad(&grads).unwrap()));
        all
    }
    for m in [2usize, 4, 64, 1024] {
        for merge in [false, true] {
            let cpu = run::<Autodiff<NdArrayBackend<f32>>>(m, merge, &Default::default());
            let gpu = run::<Autodiff<WgpuBackend>>(m, merge, &wgpu);
            let err = rel_rms_real(&gpu, &cpu);
            assert!(err <= 1e-5, "m = {m}, merge {merge}: wgpu against ndarray, rel RMS {err:e}");
        }
    }
}

/// Bad shapes are refused naming the op and what was expected.
#[test]
fn bad_rfft_input_is_refused() {
    type B = NdArrayBackend<f64>;
    let device = Default::default();
    let layer = ButterflyConfig::new(8).init::<B>(&device).unwrap();
    let invalid = |r: learned_fft::Result<()>, op: &str, part: &str| match r {
        Err(e @ Error::InvalidInput { .. }) => {
            let msg = e.to_string();
            assert!(msg.starts_with(op) && msg.contains(part), "{msg}");
        }
        other => panic!("expected an invalid-input error from {op}, got {other:?}"),
    };
    let zeros = |rows: usize, cols: usize| Tensor::<B, 2>::zeros([rows, cols], &device);
    invalid(layer.rfft(zeros(2, 8)).map(|_| ()), "butterfly.rfft", "last dimension 2N = 16");
    invalid(layer.rfft(zeros(0, 16)).map(|_| ()), "butterfly.rfft", "at least one signal");
    invalid(layer.irfft(zeros(2, 8), zeros(2, 8)).map(|_| ()), "butterfly.irfft", "last dimension N + 1 = 9");
    invalid(layer.irfft(zeros(2, 9), zeros(3, 9)).map(|_| ()), "butterfly.irfft", "the same shape");
}
