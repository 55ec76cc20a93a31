//! `ButterflyLinear` against torch_butterfly's definition written out in f64 (every backend,
//! real and complex, both stride orders, stacks, padding, truncation), its gradients against
//! finite differences of that definition, the FFT and orthogonal initialisers, training it to a
//! map it can represent, and bad input.

use burn::backend::Autodiff;
use burn::module::{Module, Param};
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::{backend::Backend, Tensor};
use learned_fft::{ButterflyLinear, ButterflyLinearConfig, ButterflyLinearInit, ButterflyOps};
use num_complex::Complex64;

use crate::common::*;

/// The layer's forward against the f64 definition, relative RMS: in f64 both sum the same
/// products in different orders; in f32 the layer rounds every stage (up to 3 factors of 7
/// stages here), so its error is a few units of f32's 6e-8 per stage.
fn forward_rel<B: Backend>() -> f64 {
    if is_f64::<B>() {
        F64_EXACT_REL_RMS
    } else {
        1e-5
    }
}

/// The shapes the checks cover: (in, out, nblocks, increasing, complex, bias). Padding (6, 100),
/// truncation (20 → 5, 100 → 300), several stacks (6 → 12, 100 → 300), both stride orders and
/// their alternation over 1–3 factors.
const CASES: [(usize, usize, usize, bool, bool, bool); 7] = [
    (16, 16, 1, true, false, false),
    (16, 16, 2, false, false, true),
    (6, 12, 2, false, false, true),
    (20, 5, 3, true, false, true),
    (100, 300, 2, true, false, true),
    (8, 8, 3, false, true, true),
    (12, 40, 2, true, true, true),
];

fn config(case: (usize, usize, usize, bool, bool, bool), seed: u64) -> ButterflyLinearConfig {
    let (in_size, out_size, nblocks, increasing, complex, bias) = case;
    ButterflyLinearConfig::new(in_size, out_size)
        .with_nblocks(nblocks)
        .with_increasing_stride(increasing)
        .with_complex(complex)
        .with_bias(bias)
        .with_seed(Some(seed))
}

/// A layer's parameters on the host, as the definition reads them.
#[derive(Clone)]
struct Host {
    in_size: usize,
    out_size: usize,
    n: usize,
    nstacks: usize,
    nblocks: usize,
    increasing: bool,
    tw: Vec<Complex64>,
    bias: Vec<Complex64>,
}

impl Host {
    fn of<B: Backend>(layer: &ButterflyLinear<B>) -> Self {
        let tw_re = host(layer.twiddle_re.val());
        let tw_im = layer.twiddle_im.as_ref().map_or(vec![0.0; tw_re.len()], |t| host(t.val()));
        let b_re = layer.bias_re.as_ref().map_or(vec![0.0; layer.out_size()], |b| host(b.val()));
        let b_im = layer.bias_im.as_ref().map_or(vec![0.0; layer.out_size()], |b| host(b.val()));
        Host {
            in_size: layer.in_size(),
            out_size: layer.out_size(),
            n: layer.n(),
            nstacks: layer.nstacks(),
            nblocks: layer.nblocks(),
            increasing: layer.increasing_stride(),
            tw: complex(&tw_re, &tw_im),
            bias: complex(&b_re, &b_im),
        }
    }

    /// torch_butterfly's forward (`butterfly_multiply_torch`, then `post_process`) in f64, from
    /// its definition: pad to n; per stack, per block, per log stride ℓ (ascending for an
    /// increasing block, descending otherwise, the direction alternating over blocks), block
    /// `k = g·2^ℓ + j` maps `(x[i0], x[i0 + 2^ℓ])`, `i0 = 2^{ℓ+1}·g + j`, through its 2×2
    /// twiddle; concatenate the stacks, keep `out_size`, add the bias.
    fn forward(&self, x: &[Complex64]) -> Vec<Complex64> {
        let (n, log_n) = (self.n, self.n.trailing_zeros() as usize);
        x.chunks(self.in_size)
            .flat_map(|row| {
                let mut out = Vec::with_capacity(self.nstacks * n);
                for stack in 0..self.nstacks {
                    let mut v: Vec<Complex64> = row.to_vec();
                    v.resize(n, Complex64::new(0.0, 0.0));
                    for block in 0..self.nblocks {
                        let increasing = self.increasing == (block % 2 == 0);
                        for idx in 0..log_n {
                            let l = if increasing { idx } else { log_n - 1 - idx };
                            let stride = 1 << l;
                            let base = ((stack * self.nblocks + block) * log_n + l) * (n / 2);
                            let mut next = v.clone();
                            for g in 0..n / (2 * stride) {
                                for j in 0..stride {
                                    let t = &self.tw[(base + g * stride + j) * 4..][..4];
                                    let (i0, i1) = (2 * stride * g + j, 2 * stride * g + j + stride);
                                    next[i0] = t[0] * v[i0] + t[1] * v[i1];
                                    next[i1] = t[2] * v[i0] + t[3] * v[i1];
                                }
                            }
                            v = next;
                        }
                    }
                    out.extend(v);
                }
                out.truncate(self.out_size);
                out.iter_mut().zip(&self.bias).for_each(|(y, b)| *y += b);
                out
            })
            .collect()
    }
}

/// The layer's output on `B` for the host input `x` (`[batch, in]`), as complex values.
fn run<B: ButterflyOps>(layer: &ButterflyLinear<B>, x: &[Complex64], batch: usize) -> Vec<Complex64> {
    let device = layer.twiddle_re.device();
    let part =
        |f: fn(&Complex64) -> f64| tensor2::<B>(&x.iter().map(f).collect::<Vec<_>>(), batch, layer.in_size(), &device);
    if layer.is_complex() {
        let (yr, yi) = layer.forward_complex(part(|z| z.re), part(|z| z.im)).unwrap();
        complex(&host(yr), &host(yi))
    } else {
        let y = host(layer.forward(part(|z| z.re)).unwrap());
        complex(&y, &vec![0.0; y.len()])
    }
}

fn input(case: (usize, usize, usize, bool, bool, bool), batch: usize, seed: u64) -> Vec<Complex64> {
    let len = batch * case.0;
    let im = if case.4 { normals(seed + 1, len) } else { vec![0.0; len] };
    complex(&normals(seed, len), &im)
}

/// The forward equals the definition on every backend (fused on wgpu), for every case; a
/// rank-3 input gives the same rows.
fn check_matches_definition<B: ButterflyOps>(device: &B::Device, _tol: Tol) {
    for (i, &case) in CASES.iter().enumerate() {
        let layer = config(case, SEED + i as u64).init::<B>(device).unwrap();
        let batch = 5;
        let x = input(case, batch, SEED + 100 + i as u64);
        // The definition reads the input as the backend holds it.
        let x: Vec<Complex64> = {
            let re = round_to_backend::<B>(&x.iter().map(|z| z.re).collect::<Vec<_>>(), device);
            let im = round_to_backend::<B>(&x.iter().map(|z| z.im).collect::<Vec<_>>(), device);
            complex(&re, &im)
        };
        let want = Host::of(&layer).forward(&x);
        let got = run(&layer, &x, batch);
        let err = rel_rms(&got, &want);
        assert!(err <= forward_rel::<B>(), "case {case:?}: rel rms {err:.3e}");
    }
    // Leading dimensions are flattened and restored.
    let layer = config(CASES[4], SEED).init::<B>(device).unwrap();
    let x = tensor2::<B>(&normals(SEED, 600), 6, 100, device).reshape([2, 3, 100]);
    let y = layer.forward(x.clone()).unwrap();
    assert_eq!(y.dims(), [2, 3, 300]);
    let flat = layer.forward(x.reshape([6, 100])).unwrap();
    assert_eq!(host(y), host(flat));
}
per_backend!(check_matches_definition);

/// Gradients through Burn's autodiff (the fused backward on wgpu) against central differences of
/// the f64 definition, for the twiddles, the bias and the input, real and complex. The loss
/// `Σ a·y + ½ Σ c·|y|²` is quadratic in each single parameter, so the central difference is
/// exact up to f64 rounding at any step; the tolerance is the backend's gradient rounding.
fn check_gradients<B: Backend>(device: &B::Device, tol: Tol)
where
    Autodiff<B>: ButterflyOps<Device = B::Device>,
{
    type A<B> = Autodiff<B>;
    for (i, &case) in [CASES[2], CASES[3], CASES[5], CASES[6]].iter().enumerate() {
        let seed = SEED + 200 + i as u64;
        let layer = config(case, seed).init::<A<B>>(device).unwrap();
        let (batch, complex_layer) = (3, case.4);
        let h = Host::of(&layer);
        let x = {
            let x = input(case, batch, seed + 1);
            let re = round_to_backend::<B>(&x.iter().map(|z| z.re).collect::<Vec<_>>(), device);
            let im = round_to_backend::<B>(&x.iter().map(|z| z.im).collect::<Vec<_>>(), device);
            complex(&re, &im)
        };
        let outs = batch * case.1;
        let a = complex(&normals(seed + 3, outs), &normals(seed + 4, outs));
        let c: Vec<f64> = normals(seed + 5, outs).iter().map(|v| v.abs()).collect();
        let loss_host = |h: &Host, x: &[Complex64]| -> f64 {
            let y = h.forward(x);
            y.iter().zip(&a).zip(&c).map(|((y, a), c)| a.re * y.re + a.im * y.im + 0.5 * c * y.norm_sqr()).sum()
        };

        // Autodiff.
        let part = |v: Vec<f64>, cols: usize| tensor2::<A<B>>(&v, batch, cols, device).require_grad();
        let (xr, xi) = (part(x.iter().map(|z| z.re).collect(), case.0), part(x.iter().map(|z| z.im).collect(), case.0));
        let (yr, yi) = if complex_layer {
            layer.forward_complex(xr.clone(), xi.clone()).unwrap()
        } else {
            let y = layer.forward(xr.clone()).unwrap();
            (y.clone(), y.zeros_like())
        };
        let t = |v: Vec<f64>| tensor2::<A<B>>(&v, batch, case.1, device);
        let (ar, ai, cc) = (t(a.iter().map(|z| z.re).collect()), t(a.iter().map(|z| z.im).collect()), t(c.clone()));
        let loss = (ar * yr.clone() + ai * yi.clone()).sum()
            + ((yr.clone() * yr + yi.clone() * yi) * cc).sum().mul_scalar(0.5);
        let grads = loss.backward();

        // Central differences of the definition, one coordinate at a time.
        let step = 1e-3;
        let fd = |perturb: &dyn Fn(&mut Host, &mut Vec<Complex64>, f64)| {
            let (mut hp, mut xp, mut hm, mut xm) = (h.clone(), x.clone(), h.clone(), x.clone());
            perturb(&mut hp, &mut xp, step);
            perturb(&mut hm, &mut xm, -step);
            (loss_host(&hp, &xp) - loss_host(&hm, &xm)) / (2.0 * step)
        };
        let check = |name: &str, got: Vec<f64>, want: Vec<f64>| {
            let err = rel_rms_real(&got, &want);
            assert!(err <= tol.fd_rel, "case {case:?}, {name}: rel rms {err:.3e} against finite differences");
        };
        let tw_len = h.tw.len();
        let fd_tw = |im: bool| -> Vec<f64> {
            (0..tw_len)
                .map(|k| fd(&|h, _, d| h.tw[k] += if im { Complex64::new(0.0, d) } else { Complex64::new(d, 0.0) }))
                .collect()
        };
        check("twiddle_re", host(layer.twiddle_re.grad(&grads).unwrap()), fd_tw(false));
        if let Some(tw_im) = &layer.twiddle_im {
            check("twiddle_im", host(tw_im.grad(&grads).unwrap()), fd_tw(true));
        }
        let fd_bias = |im: bool| -> Vec<f64> {
            (0..case.1)
                .map(|k| fd(&|h, _, d| h.bias[k] += if im { Complex64::new(0.0, d) } else { Complex64::new(d, 0.0) }))
                .collect()
        };
        check("bias_re", host(layer.bias_re.as_ref().unwrap().grad(&grads).unwrap()), fd_bias(false));
        if let Some(b) = &layer.bias_im {
            check("bias_im", host(b.grad(&grads).unwrap()), fd_bias(true));
        }
        let fd_x = |im: bool| -> Vec<f64> {
            (0..x.len())
                .map(|k| fd(&|_, x, d| x[k] += if im { Complex64::new(0.0, d) } else { Complex64::new(d, 0.0) }))
                .collect()
        };
        check("x_re", host(xr.grad(&grads).unwrap()), fd_x(false));
        if complex_layer {
            check("x_im", host(xi.grad(&grads).unwrap()), fd_x(true));
        }
    }
}
per_backend!(check_gradients);

/// The FFT initialiser: an increasing-stride factor is `F · R`, a decreasing one `R · F`, with F
/// the unitary DFT (closed form) and R the bit reversal; the inverse likewise with F⁻¹.
#[test]
fn fft_init_is_the_dft_without_its_bit_reversal() {
    type B = NdArrayBackend<f64>;
    let device = Default::default();
    let n = 16usize;
    let reversal = learned_fft::reference::factorizations::bit_reversal(n);
    for (increasing, inverse) in [(true, false), (false, false), (true, true), (false, true)] {
        let layer = ButterflyLinearConfig::new(n, n)
            .with_complex(true)
            .with_bias(false)
            .with_increasing_stride(increasing)
            .with_init(ButterflyLinearInit::Fft { inverse })
            .init::<B>(&device)
            .unwrap();
        let eye: Vec<Complex64> =
            (0..n * n).map(|i| Complex64::new(f64::from(u8::from(i / n == i % n)), 0.0)).collect();
        // Row j of the output is the layer applied to e_j: column j of its matrix.
        let cols = run(&layer, &eye, n);
        let sign = if inverse { 1.0 } else { -1.0 };
        let f = |r: usize, c: usize| {
            Complex64::from_polar(1.0 / (n as f64).sqrt(), sign * std::f64::consts::TAU * (r * c) as f64 / n as f64)
        };
        for (j, col) in cols.chunks(n).enumerate() {
            for (r, got) in col.iter().enumerate() {
                let want = if increasing { f(r, reversal[j]) } else { f(reversal[r], j) };
                assert!((got - want).norm() < 1e-14, "increasing {increasing}, inverse {inverse}: ({r}, {j})");
            }
        }
    }
}

/// The orthogonal initialiser keeps every vector's norm, real and complex, over products of
/// factors in both orders; Randn draws twiddles of mean square 1/2, as documented.
#[test]
fn ortho_keeps_norms_and_randn_has_its_documented_scale() {
    type B = NdArrayBackend<f64>;
    let device = Default::default();
    let norm = |v: &[Complex64]| v.iter().map(|z| z.norm_sqr()).sum::<f64>();
    for complex_layer in [false, true] {
        for increasing in [false, true] {
            let case = (64, 64, 3, increasing, complex_layer, false);
            let layer = config(case, SEED).with_init(ButterflyLinearInit::Ortho).init::<B>(&device).unwrap();
            let x = input(case, 4, SEED + 1);
            let ratio = norm(&run(&layer, &x, 4)) / norm(&x);
            assert!((ratio - 1.0).abs() < 1e-13, "complex {complex_layer}, increasing {increasing}: {ratio}");
        }
        // 3 · 6 · 32 blocks of 4 entries: the mean of |t|² is within 0.1 of 1/2 (real: about
        // 4 of its standard deviations, 0.026; complex: 8).
        let case = (64, 64, 3, true, complex_layer, false);
        let layer = config(case, SEED).init::<B>(&device).unwrap();
        let h = Host::of(&layer);
        let mean = norm(&h.tw) / h.tw.len() as f64;
        assert!((mean - 0.5).abs() < 0.1, "complex {complex_layer}: mean |t|² {mean}");
    }
}

/// Trained with Adam from random twiddles, a layer recovers another layer of its own shape (a
/// map it can represent) from input/output pairs: the loss falls by 10⁴.
#[test]
fn adam_recovers_a_map_the_layer_can_represent() {
    type B = Autodiff<NdArrayBackend<f32>>;
    let device = Default::default();
    let case = (16, 16, 1, true, false, true);
    let teacher = config(case, 1).with_init(ButterflyLinearInit::Ortho).init::<B>(&device).unwrap();
    let mut student = config(case, 2).init::<B>(&device).unwrap();
    let mut optim = AdamConfig::new().init();
    let x = tensor2::<B>(&normals(SEED, 64 * 16), 64, 16, &device);
    let y = teacher.forward(x.clone()).unwrap().detach();
    let loss_of = |s: &ButterflyLinear<B>| (s.forward(x.clone()).unwrap() - y.clone()).powi_scalar(2).mean();
    let first: f64 = loss_of(&student).into_scalar().into();
    for _ in 0..1500 {
        let loss = loss_of(&student);
        let grads = GradientsParams::from_grads(loss.backward(), &student);
        student = optim.step(0.01, student, grads);
    }
    let last: f64 = loss_of(&student).into_scalar().into();
    assert!(last < first * 1e-4, "loss {first:.3e} → {last:.3e}");
}

/// Bad configurations and inputs get errors that name the problem.
#[test]
fn bad_configs_and_inputs_are_refused() {
    type B = NdArrayBackend<f32>;
    let device = Default::default();
    let refused = |cfg: ButterflyLinearConfig, what: &str| {
        let err = cfg.init::<B>(&device).unwrap_err().to_string();
        assert!(err.contains(what), "{err}");
    };
    refused(ButterflyLinearConfig::new(0, 4), "in_size");
    refused(ButterflyLinearConfig::new(4, 0), "out_size");
    refused(ButterflyLinearConfig::new(4, 4).with_nblocks(0), "nblocks");
    refused(ButterflyLinearConfig::new(4, 4).with_init(ButterflyLinearInit::Fft { inverse: false }), "complex");
    let real = ButterflyLinearConfig::new(10, 3).init::<B>(&device).unwrap();
    let complex_layer = ButterflyLinearConfig::new(10, 3).with_complex(true).init::<B>(&device).unwrap();
    let x = Tensor::<B, 2>::ones([2, 10], &device);
    let err = |r: learned_fft::Result<Tensor<B, 2>>| r.map(|_| ()).unwrap_err().to_string();
    assert!(err(real.forward(Tensor::ones([2, 9], &device))).contains("in_size = 10"));
    assert!(err(real.forward(Tensor::ones([0, 10], &device))).contains("non-empty"));
    assert!(err(complex_layer.forward(x.clone())).contains("forward_complex"));
    let e = real.forward_complex(x.clone(), x.clone()).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("use forward"), "{e}");
    let e =
        complex_layer.forward_complex(x.clone(), Tensor::ones([2, 11], &device)).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("same shape"), "{e}");
}

/// The parameters are torch_butterfly's and can be swapped into the layer: a layer given
/// another's twiddles and bias computes the other's map.
#[test]
fn parameters_load_into_a_layer_of_the_same_shape() {
    type B = NdArrayBackend<f64>;
    let device = Default::default();
    let case = CASES[4];
    let a = config(case, 1).init::<B>(&device).unwrap();
    let mut b = config(case, 2).init::<B>(&device).unwrap();
    assert_eq!(a.twiddle_re.dims(), [4, 2, 7, 64, 2, 2]);
    b.twiddle_re = Param::from_tensor(a.twiddle_re.val());
    b.bias_re = a.bias_re.clone();
    let x = input(case, 2, SEED);
    assert_eq!(run(&a, &x, 2), run(&b, &x, 2));
    assert_eq!(a.num_params(), 4 * 2 * 7 * 64 * 4 + 300);
}
