//! The FFT convolution layer against an explicit f64 convolution sum, its gradients against
//! finite differences, frozen FFTs under an optimiser; Welch's PSD against an f64 rustfft Welch;
//! top-k peaks; bad input.

use burn::backend::Autodiff;
use burn::module::{Module, Param};
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::Tensor;
use learned_fft::nn::exact_fft;
use learned_fft::nn::psd::{top_k_peaks, welch_psd, welch_psd_with};
use learned_fft::ButterflyOps;
use learned_fft::Window;
use learned_fft::{ConvOutput, FftConv1d, FftConv1dConfig, FftSource};
use num_complex::Complex64;

use crate::common::*;

/// f32: the layer runs three butterflies of log2 N ≤ 10 stages (x, the taps, the inverse), each
/// rounding every entry once per stage (≤ ε/2 = 6e-8), plus the spectrum product: ~35 roundings
/// of relative size 6e-8 ≈ 2e-6 of the output's RMS; 1e-5 leaves a 5× margin.
const CONV_REL_F32: f64 = 1e-5;
/// f64: the same ~35 roundings at 1.1e-16.
const CONV_REL_F64: f64 = 1e-12;
/// Welch's PSD: the same argument for one butterfly and a square: 1e-5 (f32), 1e-12 (f64).
const WELCH_REL_F32: f64 = 1e-5;
const WELCH_REL_F64: f64 = 1e-12;

/// The explicit sum `y[c, n] = Σ_k h[c, k] · x[c, n − k] + bias[c]`, in f64, for `x` of
/// `[batch, channels, l]`, taps `h` of `[channels, k]` and one bias per channel.
fn direct(x: &[f64], h: &[f64], bias: &[f64], l: usize, output: ConvOutput) -> Vec<f64> {
    let channels = bias.len();
    let (batch, k) = (x.len() / (channels * l), h.len() / channels);
    let out = if output == ConvOutput::Full { l + k - 1 } else { l };
    let mut y = vec![0.0; batch * channels * out];
    for b in 0..batch {
        for c in 0..channels {
            for n in 0..out {
                let mut s = bias[c];
                for j in 0..k {
                    let i = n as i64 - j as i64;
                    let i = match output {
                        ConvOutput::Circular => Some(i.rem_euclid(l as i64) as usize),
                        _ => (0..l as i64).contains(&i).then_some(i as usize),
                    };
                    if let Some(i) = i {
                        s += h[c * k + j] * x[(b * channels + c) * l + i];
                    }
                }
                y[(b * channels + c) * out + n] = s;
            }
        }
    }
    y
}

/// A layer with given taps and bias.
fn layer<B: ButterflyOps>(
    cfg: &FftConv1dConfig,
    l: usize,
    h: &[f64],
    bias: &[f64],
    device: &B::Device,
) -> FftConv1d<B> {
    let mut layer: FftConv1d<B> = cfg.init(l, device).unwrap();
    layer.weight = Param::from_tensor(tensor2::<B>(h, cfg.channels, cfg.kernel_size, device));
    layer.bias = Some(Param::from_tensor(learned_fft::float_tensor::<B, 1>(bias.to_vec(), [cfg.channels], device)));
    layer
}

/// Both paths (the butterfly of N on a zero imaginary part, and rfft through the butterfly of
/// N/2) against the f64 sum.
fn conv_matches_direct_sum<B: ButterflyOps>(device: &B::Device, _tol: Tol) {
    let limit = if is_f64::<B>() { CONV_REL_F64 } else { CONV_REL_F32 };
    let mut case = 0u64;
    for ((l, k, channels, batch, output), rfft) in [
        (16, 3, 1, 1, ConvOutput::Causal),
        (50, 7, 2, 3, ConvOutput::Causal),
        (50, 7, 2, 3, ConvOutput::Full),
        (64, 16, 3, 2, ConvOutput::Circular),
        (100, 33, 4, 2, ConvOutput::Full),
        (300, 129, 2, 1, ConvOutput::Causal),
        (5, 5, 1, 2, ConvOutput::Full),
        (4, 2, 2, 1, ConvOutput::Circular),
    ]
    .into_iter()
    .flat_map(|shape| [(shape, false), (shape, true)])
    {
        case += 1;
        let x = round_to_backend::<B>(&normals(700 + case, batch * channels * l), device);
        let h = round_to_backend::<B>(&normals(800 + case, channels * k), device);
        let bias = round_to_backend::<B>(&normals(900 + case, channels), device);
        let cfg = FftConv1dConfig::new(channels, k).with_output(output).with_rfft(rfft);
        let conv = layer::<B>(&cfg, l, &h, &bias, device);
        assert_eq!(conv.fft.n(), if rfft { conv.fft_size() / 2 } else { conv.fft_size() });
        let xt = learned_fft::float_tensor::<B, 1>(x.clone(), [x.len()], device).reshape([batch, channels, l]);
        let got = host(conv.forward(xt).unwrap());
        let want = direct(&x, &h, &bias, l, output);
        assert_eq!(got.len(), want.len(), "L={l} K={k} {output:?} rfft {rfft}: output length");
        let err = rel_rms_real(&got, &want);
        assert!(
            err <= limit,
            "L={l} K={k} C={channels} batch={batch} {output:?} rfft {rfft} (N={}): rel RMS {err:e} > {limit:e}",
            conv.fft_size()
        );
    }
}
per_backend!(conv_matches_direct_sum);

/// Gradients of `Σ a ⊙ y` with respect to the input, the taps and the bias equal central
/// differences (f64; the loss is linear in each, so the differences are exact up to rounding).
#[test]
fn conv_gradients_match_finite_differences() {
    type A = Autodiff<NdArrayBackend<f64>>;
    let device = Default::default();
    let (batch, channels, l, k) = (2, 2, 12, 5);
    for (output, rfft) in
        [(ConvOutput::Causal, false), (ConvOutput::Full, false), (ConvOutput::Causal, true), (ConvOutput::Full, true)]
    {
        let x = normals(1, batch * channels * l);
        let h = normals(2, channels * k);
        let bias = normals(3, channels);
        let out = if output == ConvOutput::Full { l + k - 1 } else { l };
        let a = normals(4, batch * channels * out);
        let cfg = FftConv1dConfig::new(channels, k).with_output(output).with_rfft(rfft);
        let loss_of = |x: &[f64], h: &[f64], bias: &[f64]| -> (f64, [Vec<f64>; 3]) {
            let conv = layer::<A>(&cfg, l, h, bias, &device);
            let xt = learned_fft::float_tensor::<A, 1>(x.to_vec(), [x.len()], &device)
                .reshape([batch, channels, l])
                .require_grad();
            let at = learned_fft::float_tensor::<A, 1>(a.clone(), [a.len()], &device).reshape([batch, channels, out]);
            let loss = (conv.forward(xt.clone()).unwrap() * at).sum();
            let value = host(loss.clone())[0];
            let g = loss.backward();
            let grads = [
                host(xt.grad(&g).unwrap()),
                host(conv.weight.grad(&g).unwrap()),
                host(conv.bias.as_ref().unwrap().grad(&g).unwrap()),
            ];
            (value, grads)
        };
        let (_, grads) = loss_of(&x, &h, &bias);
        let step = F64.fd_step;
        for (which, g) in grads.iter().enumerate() {
            let scale = g.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            for i in 0..g.len() {
                let eval = |d: f64| {
                    let (mut x2, mut h2, mut b2) = (x.clone(), h.clone(), bias.clone());
                    [&mut x2, &mut h2, &mut b2][which][i] += d;
                    loss_of(&x2, &h2, &b2).0
                };
                let fd = (eval(step) - eval(-step)) / (2.0 * step);
                assert!(
                    (g[i] - fd).abs() <= F64.fd_rel * g[i].abs().max(1e-3 * scale),
                    "{output:?} rfft {rfft} grad {which} entry {i}: {} vs fd {fd}",
                    g[i]
                );
            }
        }
    }
}

/// A frozen FFT (exact, or from a shipped checkpoint) gets no gradient and stays bit-identical
/// through Adam steps while the taps move; a learnable one moves. Both element types run in one
/// test: they share the device's default dtype, so for one of them the initialiser's value is
/// cast, and the layer must still make trainable parameters of it.
#[test]
fn frozen_fft_stays_frozen_under_an_optimiser() {
    frozen_fft_case::<Autodiff<NdArrayBackend<f32>>>();
    frozen_fft_case::<Autodiff<NdArrayBackend<f64>>>();
}

fn frozen_fft_case<A: burn::tensor::backend::AutodiffBackend + ButterflyOps>() {
    let device = Default::default();
    let channels = 2;
    let ckpt = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("checkpoints/dft-n64-f32.lfft");
    let sources = [(FftSource::Exact, true), (FftSource::Checkpoint(ckpt), true), (FftSource::Learnable, false)];
    // N = 64 (the butterfly of 64: the shipped dft-n64 checkpoint fits), and N = 128 through
    // rfft (the butterfly of 64 again).
    let cases = sources.iter().map(|s| (s, false, 48, 17)).chain(sources.iter().map(|s| (s, true, 100, 17)));
    for ((source, frozen), rfft, l, k) in cases {
        let (source, frozen) = (source.clone(), *frozen);
        let cfg = FftConv1dConfig::new(channels, k).with_fft(source.clone()).with_rfft(rfft);
        let mut conv: FftConv1d<A> = cfg.init(l, &device).unwrap();
        assert_eq!((conv.fft_size(), conv.fft.n()), if rfft { (128, 64) } else { (64, 64) });
        let bits = |c: &FftConv1d<A>| {
            host(c.fft.twiddle_re.val())
                .into_iter()
                .chain(host(c.fft.twiddle_im.val()))
                .map(f64::to_bits)
                .collect::<Vec<_>>()
        };
        let (tw0, w0) = (bits(&conv), host(conv.weight.val()));
        let mut optim = AdamConfig::new().init::<A, FftConv1d<A>>();
        let x = learned_fft::float_tensor::<A, 1>(normals(5, 3 * channels * l), [3 * channels * l], &device)
            .reshape([3, channels, l]);
        let y = learned_fft::float_tensor::<A, 1>(normals(6, 3 * channels * l), [3 * channels * l], &device)
            .reshape([3, channels, l]);
        for _ in 0..3 {
            let loss = (conv.forward(x.clone()).unwrap() - y.clone()).powi_scalar(2).mean();
            let grads = loss.backward();
            assert_eq!(
                conv.fft.twiddle_re.grad(&grads).is_none(),
                frozen,
                "{source:?}: twiddle gradient present = {}",
                !frozen
            );
            let grads = GradientsParams::from_grads(grads, &conv);
            conv = optim.step(1e-2, conv, grads);
        }
        assert_ne!(host(conv.weight.val()), w0, "{source:?}: the taps should train");
        assert_eq!(bits(&conv) == tw0, frozen, "{source:?}: twiddles bit-identical = {frozen} expected");
        let _ = conv.num_params();
    }
}

/// Welch in f64 on the host with rustfft (scipy's density scaling, no detrending).
fn welch_f64(x: &[f64], segment: usize, overlap: usize, window: Window) -> Vec<f64> {
    let hop = segment - overlap;
    let frames = learned_fft::ops::spectral::frame_count(x.len(), segment, hop).unwrap();
    let w = window.values(segment);
    let norm: f64 = w.iter().map(|v| v * v).sum();
    let fft = rustfft::FftPlanner::<f64>::new().plan_fft_forward(segment);
    let bins = segment / 2 + 1;
    let mut psd = vec![0.0; bins];
    for f in 0..frames {
        let mut buf: Vec<Complex64> = (0..segment).map(|n| Complex64::new(x[f * hop + n] * w[n], 0.0)).collect();
        fft.process(&mut buf);
        for k in 0..bins {
            let double = if k == 0 || k == segment / 2 { 1.0 } else { 2.0 };
            psd[k] += double * buf[k].norm_sqr() / norm / frames as f64;
        }
    }
    psd
}

fn welch_matches_f64<B: ButterflyOps>(device: &B::Device, _tol: Tol) {
    let limit = if is_f64::<B>() { WELCH_REL_F64 } else { WELCH_REL_F32 };
    for (t, segment, overlap, window, batch) in [
        (1000, 64, 32, Window::Hann, 3),
        (777, 128, 0, Window::Hamming, 2),
        (256, 256, 0, Window::Rectangular, 1),
        (500, 32, 24, Window::Hann, 2),
        (100, 4, 2, Window::Hann, 2),
        (50, 2, 1, Window::Rectangular, 1),
    ] {
        let x = round_to_backend::<B>(&normals(segment as u64 + t as u64, batch * t), device);
        // `welch_psd` through rfft (the butterfly of segment/2; of 2 at segment 2), and
        // `welch_psd_with` through the complex butterfly of the whole segment.
        let fft = exact_fft::<B>(segment, false, device).unwrap();
        let paths = [
            ("rfft", host(welch_psd(tensor2::<B>(&x, batch, t, device), segment, overlap, window).unwrap())),
            ("complex", host(welch_psd_with(&fft, tensor2::<B>(&x, batch, t, device), overlap, window).unwrap())),
        ];
        let bins = segment / 2 + 1;
        for (path, got) in paths {
            for b in 0..batch {
                let want = welch_f64(&x[b * t..(b + 1) * t], segment, overlap, window);
                let err = rel_rms_real(&got[b * bins..(b + 1) * bins], &want);
                assert!(
                    err <= limit,
                    "{path}: T={t} segment={segment} overlap={overlap} {window:?} row {b}: rel RMS {err:e} > {limit:e}"
                );
            }
        }
    }
}
per_backend!(welch_matches_f64);

/// Three sinusoids planted in noise are the three top peaks of the PSD, in every row.
#[test]
fn top_k_peaks_find_planted_sinusoids() {
    type Bk = NdArrayBackend<f32>;
    let device = Default::default();
    let (batch, t, segment) = (3, 4096, 256);
    let planted = [[17usize, 40, 90], [5, 64, 101], [30, 31 + 3, 120]];
    let noise = normals(42, batch * t);
    let mut x = vec![0.0; batch * t];
    for b in 0..batch {
        for (j, &bin) in planted[b].iter().enumerate() {
            let amp = [1.0, 0.7, 0.5][j];
            for n in 0..t {
                x[b * t + n] +=
                    amp * (2.0 * std::f64::consts::PI * bin as f64 * n as f64 / segment as f64 + j as f64).sin();
            }
        }
        for n in 0..t {
            x[b * t + n] += 0.05 * noise[b * t + n];
        }
    }
    let psd = welch_psd(tensor2::<Bk>(&x, batch, t, &device), segment, segment / 2, Window::Hann).unwrap();
    let (_, idx) = top_k_peaks(psd, 3).unwrap();
    let idx: Vec<i64> = idx.into_data().convert::<i64>().to_vec().unwrap();
    for b in 0..batch {
        let mut found: Vec<usize> = idx[b * 3..(b + 1) * 3].iter().map(|&i| i as usize).collect();
        found.sort();
        assert_eq!(found, planted[b].to_vec(), "row {b}");
    }
}

#[test]
fn conv_and_psd_bad_input_give_clear_errors() {
    type Bk = NdArrayBackend<f32>;
    let device = Default::default();
    let msg = |e: learned_fft::Error| e.to_string();
    let long = msg(FftConv1dConfig::new(1, 40).init::<Bk>(30, &device).expect_err("refused"));
    assert!(long.contains("fft_conv1d.init") && long.contains("40 taps") && long.contains("30"), "{long}");
    let circ =
        msg(FftConv1dConfig::new(1, 4).with_output(ConvOutput::Circular).init::<Bk>(30, &device).expect_err("refused"));
    assert!(circ.contains("power of two") && circ.contains("30"), "{circ}");
    let ckpt = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("checkpoints/dft-n64-f32.lfft");
    let wrong_n = msg(FftConv1dConfig::new(1, 4)
        .with_fft(FftSource::Checkpoint(ckpt))
        .init::<Bk>(100, &device)
        .expect_err("refused"));
    assert!(wrong_n.contains("N = 128") && wrong_n.contains("N = 64"), "{wrong_n}");
    // Through rfft the same signals need a checkpoint of half the FFT size.
    let ckpt128 = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("checkpoints/dft-n128-f32.lfft");
    let wrong_half = msg(FftConv1dConfig::new(1, 4)
        .with_fft(FftSource::Checkpoint(ckpt128))
        .with_rfft(true)
        .init::<Bk>(100, &device)
        .expect_err("refused"));
    assert!(
        wrong_half.contains("N = 64") && wrong_half.contains("rfft") && wrong_half.contains("N = 128"),
        "{wrong_half}"
    );
    let tiny = msg(FftConv1dConfig::new(1, 1)
        .with_output(ConvOutput::Circular)
        .with_rfft(true)
        .init::<Bk>(2, &device)
        .expect_err("refused"));
    assert!(tiny.contains("power of two ≥ 4") && tiny.contains('2'), "{tiny}");
    let conv: FftConv1d<Bk> = FftConv1dConfig::new(2, 4).init(20, &device).unwrap();
    let channels = msg(conv.forward(Tensor::zeros([1, 3, 20], &device)).expect_err("refused"));
    assert!(
        channels.contains("fft_conv1d.forward")
            && channels.contains("[batch, 2, 20]")
            && channels.contains("[1, 3, 20]"),
        "{channels}"
    );
    let psd = Tensor::<Bk, 2>::zeros([2, 33], &device);
    let k = msg(top_k_peaks(psd, 34).expect_err("refused"));
    assert!(k.contains("top_k_peaks") && k.contains("bins = 33") && k.contains("34"), "{k}");
    let short = msg(welch_psd(Tensor::<Bk, 2>::zeros([1, 50], &device), 64, 32, Window::Hann).expect_err("refused"));
    assert!(short.contains("welch_psd") && short.contains("64") && short.contains("50"), "{short}");
    let seg = msg(welch_psd(Tensor::<Bk, 2>::zeros([1, 50], &device), 12, 4, Window::Hann).expect_err("refused"));
    assert!(seg.contains("12"), "{seg}");
    let overlap = msg(welch_psd(Tensor::<Bk, 2>::zeros([1, 100], &device), 32, 32, Window::Hann).expect_err("refused"));
    assert!(overlap.contains("overlap") && overlap.contains("32"), "{overlap}");
}

/// The fused convolution (CubeCL backends without autodiff) equals the tensor-op reference on
/// the same backend, within [`CONV_REL_F32`] (both in f32, the butterflies' products in other
/// orders): Haar-random butterflies (not only the DFT) with each kind of input order (bit
/// reversal, identity, a gather), with and without a bias, N = 2 … 4096 (the largest a 32 KiB
/// cube holds in f32, where each thread steps over 8 blocks per stage), signals and taps shorter
/// than N, causal, full and circular output lengths.
fn fused_conv_matches_reference<B: ButterflyOps>(device: &B::Device) {
    let cases = [
        // (n, l, k, out_len, channels, batch, order, bias)
        (2, 2, 1, 2, 1, 1, 0, true),
        (8, 5, 3, 7, 2, 3, 1, false),
        (64, 64, 16, 64, 3, 2, 2, true),
        (256, 200, 50, 200, 2, 2, 0, true),
        (1024, 700, 300, 999, 1, 2, 2, false),
        (4096, 2048, 64, 2048, 2, 2, 0, true),
    ];
    fused_conv_case::<B>(device, &cases, false);
    fused_conv_case::<B>(device, &past_32_kib::<B>(device, &LARGE_COMPLEX_CASES, false), false);
}

/// Rows past 32 KiB in f32, which a cube holds where the device's shared memory does (CUDA:
/// N = 8192 complex, past which the complex kernel is capped, and 32768 real, a butterfly of
/// 16384 with 16 elements a thread; `tuning::conv_mapping`).
const LARGE_COMPLEX_CASES: [ConvCase; 2] =
    [(8192, 5000, 129, 5000, 2, 2, 2, true), (16384, 9000, 257, 9000, 1, 2, 0, false)];
/// As [`LARGE_COMPLEX_CASES`], through rfft (a butterfly of N/2).
const LARGE_REAL_CASES: [ConvCase; 2] =
    [(16384, 9001, 129, 9001, 2, 2, 2, true), (32768, 20000, 257, 20000, 1, 2, 0, false)];

/// Those of `cases` the device runs fused (the others fall back to the reference, which the
/// cases above cover); each size that runs is named on stderr.
fn past_32_kib<B: ButterflyOps>(device: &B::Device, cases: &[ConvCase], real: bool) -> Vec<ConvCase> {
    let runs = |n: usize| {
        if real {
            B::butterfly_conv_real_is_fused(n, device)
        } else {
            B::butterfly_conv_is_fused(n, device)
        }
    };
    let kept: Vec<ConvCase> = cases.iter().copied().filter(|c| runs(c.0)).collect();
    eprintln!("rows past 32 KiB on this device (real {real}): N = {:?}", kept.iter().map(|c| c.0).collect::<Vec<_>>());
    kept
}
on_cubecl!(fused_conv_matches_reference);

/// The fused convolution of real signals through the butterfly of N/2 (rfft and irfft with the
/// split and merge steps on-chip) equals the tensor-op path through the same butterfly, within
/// [`CONV_REL_F32`], as [`fused_conv_matches_reference`] checks the complex one: N = 4 (a
/// butterfly of 2, bins 0 and M the same thread's pair) … 8192 (a butterfly of 4096), odd signal
/// and tap lengths (a last pair half zero), odd output lengths (a last pair half stored).
fn fused_real_conv_matches_reference<B: ButterflyOps>(device: &B::Device) {
    let cases = [
        (4, 3, 2, 4, 1, 1, 0, true),
        (8, 5, 3, 7, 2, 3, 1, false),
        (16, 9, 8, 16, 2, 2, 2, true),
        (128, 128, 16, 128, 3, 2, 2, true),
        (512, 400, 51, 401, 2, 2, 0, true),
        (2048, 1400, 300, 1699, 1, 2, 2, false),
        (8192, 4096, 65, 4096, 2, 2, 0, true),
    ];
    fused_conv_case::<B>(device, &cases, true);
    fused_conv_case::<B>(device, &past_32_kib::<B>(device, &LARGE_REAL_CASES, true), true);
}
on_cubecl!(fused_real_conv_matches_reference);

/// Training through rfft with a frozen FFT runs the fused kernels under autodiff, forward and
/// backward: the forward equals the fused inference kernel to the bit (so the fused path ran),
/// and the gradients of `Σ a ⊙ y` for the signal, the taps and the bias equal those of the
/// tensor-op twin through Burn's autodiff, for causal, full and circular outputs, N = 4 … 8192
/// (… 32768 where the device's shared memory holds such a row), and with the signal untracked
/// (the taps' gradient alone).
fn fused_real_conv_backward_matches_reference<B: ButterflyOps>(device: &B::Device)
where
    Autodiff<B>: ButterflyOps,
{
    // (L, K, output, channels, batch, signal tracked)
    let cases = [
        (3, 2, ConvOutput::Causal, 1, 1, true),
        (9, 8, ConvOutput::Full, 2, 3, true),
        (128, 16, ConvOutput::Circular, 3, 2, true),
        (1400, 300, ConvOutput::Causal, 2, 2, true),
        (1400, 300, ConvOutput::Full, 1, 2, false),
        (4096, 65, ConvOutput::Causal, 2, 2, true),
        // Past 32 KiB (N = 16384 and 32768), where the device holds such a row (CUDA).
        (9001, 129, ConvOutput::Causal, 2, 2, true),
        (20000, 257, ConvOutput::Full, 1, 2, true),
    ];
    fused_conv_backward_case::<B>(device, &cases, true);
}
on_cubecl!(fused_real_conv_backward_matches_reference);

/// As [`fused_real_conv_backward_matches_reference`], the complex path (the layer's default):
/// N = 2 … 4096 (… 8192 where the device holds a 64 KiB row).
fn fused_conv_backward_matches_reference<B: ButterflyOps>(device: &B::Device)
where
    Autodiff<B>: ButterflyOps,
{
    let cases = [
        (2, 1, ConvOutput::Causal, 1, 1, true),
        (9, 8, ConvOutput::Full, 2, 3, true),
        (128, 16, ConvOutput::Circular, 3, 2, true),
        (1400, 300, ConvOutput::Causal, 2, 2, true),
        (1400, 300, ConvOutput::Full, 1, 2, false),
        (2048, 65, ConvOutput::Causal, 2, 2, true),
        (3000, 129, ConvOutput::Causal, 2, 2, true),
        // Past 32 KiB (N = 8192), where the device holds such a row (CUDA).
        (5000, 129, ConvOutput::Causal, 2, 2, true),
    ];
    fused_conv_backward_case::<B>(device, &cases, false);
}
on_cubecl!(fused_conv_backward_matches_reference);

/// A fused backward's cases (L, K, output, channels, batch, signal tracked) through the layer,
/// complex or (`real`) through rfft, against the inference kernel and the tensor-op twin.
fn fused_conv_backward_case<B: ButterflyOps>(
    device: &B::Device,
    cases: &[(usize, usize, ConvOutput, usize, usize, bool)],
    real: bool,
) where
    Autodiff<B>: ButterflyOps,
{
    use learned_fft::ops::butterfly::{fft_conv_real, fft_conv_reference, ConvSize};
    type A<B> = Autodiff<B>;
    // The same device, as `Autodiff<B>` names it.
    let ad_device = Tensor::<A<B>, 1>::from_inner(Tensor::<B, 1>::zeros([1], device)).device();
    for (case, &(l, k, output, channels, batch, track_x)) in cases.iter().enumerate() {
        let conv =
            FftConv1dConfig::new(channels, k).with_output(output).with_rfft(real).init::<A<B>>(l, &ad_device).unwrap();
        let n = conv.fft_size();
        let fused =
            if real { B::butterfly_conv_real_is_fused(n, device) } else { B::butterfly_conv_is_fused(n, device) };
        // A row within 32 KiB (complex f32 pairs of the butterfly's size: N, or N/2 through
        // rfft) fits every device; only past it may a device not run the fused kernel.
        let row_bytes = if real { n / 2 } else { n } * 2 * std::mem::size_of::<f32>();
        if !fused && row_bytes > 32 << 10 {
            eprintln!("N={n} real {real}: past this device's shared memory, not fused (the reference runs)");
            continue;
        }
        assert!(fused, "N={n} real {real}: the fused convolution does not run");
        let out = conv.output_length();
        let seed = 2000 + 10 * case as u64;
        let x_inner = tensor2::<B>(&normals(seed, batch * channels * l), batch * channels, l, device)
            .reshape([batch, channels, l]);
        let a = Tensor::<A<B>, 3>::from_inner(
            tensor2::<B>(&normals(seed + 1, batch * channels * out), batch * channels, out, device)
                .reshape([batch, channels, out]),
        );
        let leaf = |t: Tensor<B, 3>| {
            let t = Tensor::<A<B>, 3>::from_inner(t);
            if track_x {
                t.require_grad()
            } else {
                t
            }
        };

        // The layer: the fused path.
        let x = leaf(x_inner.clone());
        let y = conv.forward(x.clone()).unwrap();
        let fused_y = host(y.clone());
        let g = (y * a.clone()).sum().backward();
        let got = [
            track_x.then(|| host(x.grad(&g).unwrap())),
            Some(host(conv.weight.grad(&g).unwrap())),
            Some(host(conv.bias.as_ref().unwrap().grad(&g).unwrap())),
        ];

        // The same forward without autodiff: the fused inference kernel.
        let inner = |t: &Param<Tensor<A<B>, 2>>| t.val().inner();
        let (tw_re, tw_im) = (conv.fft.twiddle_re.val().inner(), conv.fft.twiddle_im.val().inner());
        let bias_inner = conv.bias.as_ref().unwrap().val().inner();
        let size = ConvSize { n, out_len: out };
        let perm = conv.fft.permutation();
        let plain_conv = if real { B::butterfly_conv_real } else { B::butterfly_conv };
        let plain = host(plain_conv(
            x_inner.clone(),
            inner(&conv.weight),
            Some(bias_inner.clone()),
            tw_re.clone(),
            tw_im.clone(),
            perm,
            size,
        ));
        assert_eq!(fused_y, plain, "L={l} K={k} {output:?}: the autodiff forward is not the fused kernel's");

        // The tensor-op twin, its gradient from Burn's autodiff.
        let x = leaf(x_inner);
        let h = Tensor::<A<B>, 2>::from_inner(inner(&conv.weight)).require_grad();
        let b = Tensor::<A<B>, 1>::from_inner(bias_inner).require_grad();
        let tw = |t: Tensor<B, 4>| Tensor::<A<B>, 4>::from_inner(t);
        let twin = if real { fft_conv_real } else { fft_conv_reference };
        let y = twin(x.clone(), h.clone(), Some(b.clone()), tw(tw_re), tw(tw_im), perm, size);
        let g = (y * a).sum().backward();
        let want = [
            track_x.then(|| host(x.grad(&g).unwrap())),
            Some(host(h.grad(&g).unwrap())),
            Some(host(b.grad(&g).unwrap())),
        ];
        for (which, (got, want)) in got.iter().zip(&want).enumerate() {
            match (got, want) {
                (Some(got), Some(want)) => {
                    let err = rel_rms_real(got, want);
                    assert!(
                        err <= CONV_REL_F32,
                        "L={l} K={k} {output:?} N={n} real {real}: gradient {which}: rel RMS {err:e}"
                    );
                }
                (None, None) => {}
                _ => panic!("L={l} K={k}: gradient {which} present on one path only"),
            }
        }
    }
}

/// `cases` (n, l, k, out_len, channels, batch, order, bias) through the fused convolution and
/// its tensor-op twin, complex or (`real`) through rfft with a butterfly of n/2.
fn fused_conv_case<B: ButterflyOps>(device: &B::Device, cases: &[ConvCase], real: bool) {
    use learned_fft::ops::butterfly::{fft_conv_real, fft_conv_reference, ConvSize};
    use learned_fft::{ButterflyInit, Permutation};
    for (case, &(n, l, k, out, channels, batch, order, with_bias)) in cases.iter().enumerate() {
        let size_fft = if real { n / 2 } else { n };
        let perm = match order {
            0 => Permutation::BitReversal,
            1 => Permutation::Identity,
            _ => Permutation::gather(shuffled(size_fft, case as u64)).unwrap(),
        };
        let fused =
            if real { B::butterfly_conv_real_is_fused(n, device) } else { B::butterfly_conv_is_fused(n, device) };
        assert!(fused, "N={n} real {real}: the fused convolution does not run");
        let (tw_re, tw_im) = ButterflyInit::RandomUnitary { seed: 40 + case as u64 }.twiddles(size_fft);
        let shape = [size_fft.trailing_zeros() as usize, size_fft / 2, 2, 2];
        let tw = |v: Vec<f64>| learned_fft::float_tensor::<B, 4>(v, shape, device);
        let (tw_re, tw_im) = (tw(tw_re), tw(tw_im));
        let seed = 1000 + 10 * case as u64;
        let x = tensor2::<B>(&normals(seed, batch * channels * l), batch * channels, l, device)
            .reshape([batch, channels, l]);
        let h = tensor2::<B>(&normals(seed + 1, channels * k), channels, k, device);
        let bias =
            with_bias.then(|| learned_fft::float_tensor::<B, 1>(normals(seed + 2, channels), [channels], device));
        let size = ConvSize { n, out_len: out };
        let run = |fused: bool| {
            let (x, h, b, re, im) = (x.clone(), h.clone(), bias.clone(), tw_re.clone(), tw_im.clone());
            host(match (real, fused) {
                (false, true) => B::butterfly_conv(x, h, b, re, im, &perm, size),
                (false, false) => fft_conv_reference(x, h, b, re, im, &perm, size),
                (true, true) => B::butterfly_conv_real(x, h, b, re, im, &perm, size),
                (true, false) => fft_conv_real(x, h, b, re, im, &perm, size),
            })
        };
        let (got, want) = (run(true), run(false));
        assert_eq!(got.len(), batch * channels * out, "N={n}: output length");
        let err = rel_rms_real(&got, &want);
        assert!(
            err <= CONV_REL_F32,
            "N={n} real {real} L={l} K={k} out={out} order {order} bias {with_bias}: rel RMS {err:e}"
        );
    }
}

/// A fused convolution's case: (n, l, k, out_len, channels, batch, order, bias).
type ConvCase = (usize, usize, usize, usize, usize, usize, usize, bool);
