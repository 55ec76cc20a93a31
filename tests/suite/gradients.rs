//! Gradient checks of the reference butterfly through Burn's autodiff: central finite
//! differences (both gradients), the adjoint identity, and the fft → ifft round trip.

use burn::backend::Autodiff;
use burn::tensor::{backend::Backend, Tensor};
use learned_fft::ops::butterfly::butterfly_forward_reference;
use learned_fft::reference::FftNorm;
use learned_fft::{ButterflyConfig, ButterflyInit, ButterflyOps, Permutation};
use num_complex::Complex64;

use crate::common::*;

/// Largest N checked coordinate by coordinate: the acceptance range in f64; in f32 the rounding
/// term of finite differences grows with N (see [`F32`]), so f32 stops at 16, and at 8 outside
/// the full sweep: two forwards a coordinate, each a device round trip on wgpu, made the f32
/// case at 16 the suite's slowest on lavapipe.
fn fd_max_n<B: Backend>() -> usize {
    match (is_f64::<B>(), full_sweep()) {
        (true, _) => 64,
        (false, true) => 16,
        (false, false) => 8,
    }
}

/// Largest N of the tangent check: 1024 in the full sweep; 128 otherwise, since every size
/// compiles its own kernels on wgpu (357 s for N = 2 … 1024 on lavapipe) and the fused tangent
/// is compared with the reference at every size up to 8192 in `kernels`.
fn tangent_max_n() -> usize {
    if full_sweep() {
        1024
    } else {
        128
    }
}

/// A gradient-check problem: twiddles, input and the loss
/// `L = Σ (a_re·y_re + a_im·y_im) + ½ Σ c·(y_re² + y_im²)`, all as host f64.
struct Problem {
    n: usize,
    batch: usize,
    tw: [Vec<f64>; 2],
    x: [Vec<f64>; 2],
    a: [Vec<f64>; 2],
    c: Vec<f64>,
}

impl Problem {
    fn new<B: Backend>(n: usize, batch: usize, device: &B::Device) -> Self {
        let len = batch * n;
        let s = n as u64 * 1000;
        let (tw_re, tw_im) = ButterflyInit::Randn { seed: s, scale: std::f64::consts::FRAC_1_SQRT_2 }.twiddles(n);
        let r = |v: &[f64]| round_to_backend::<B>(v, device);
        Problem {
            n,
            batch,
            tw: [r(&tw_re), r(&tw_im)],
            x: [r(&normals(s + 1, len)), r(&normals(s + 2, len))],
            a: [r(&normals(s + 3, len)), r(&normals(s + 4, len))],
            c: r(&normals(s + 5, len).iter().map(|v| v.abs()).collect::<Vec<_>>()),
        }
    }

    fn tw_tensor<B: Backend>(&self, v: &[f64], device: &B::Device) -> Tensor<B, 4> {
        let shape = [self.n.trailing_zeros() as usize, self.n / 2, 2, 2];
        learned_fft::float_tensor(v.to_vec(), shape, device)
    }

    /// The loss evaluated in f64 on the host from the backend's forward output.
    fn loss_host<B: Backend>(&self, tw: &[Vec<f64>; 2], x: &[Vec<f64>; 2], device: &B::Device) -> f64 {
        let (yr, yi) = butterfly_forward_reference(
            tensor2::<B>(&x[0], self.batch, self.n, device),
            tensor2::<B>(&x[1], self.batch, self.n, device),
            self.tw_tensor::<B>(&tw[0], device),
            self.tw_tensor::<B>(&tw[1], device),
            &Permutation::BitReversal,
        );
        let (yr, yi) = (host(yr), host(yi));
        (0..yr.len())
            .map(|i| self.a[0][i] * yr[i] + self.a[1][i] * yi[i] + 0.5 * self.c[i] * (yr[i] * yr[i] + yi[i] * yi[i]))
            .sum()
    }

    /// Autodiff gradients `[x_re, x_im, tw_re, tw_im]`.
    fn autodiff<B: Backend>(&self, device: &B::Device) -> [Vec<f64>; 4] {
        type A<B> = Autodiff<B>;
        let x_re = tensor2::<A<B>>(&self.x[0], self.batch, self.n, device).require_grad();
        let x_im = tensor2::<A<B>>(&self.x[1], self.batch, self.n, device).require_grad();
        let tw_re = self.tw_tensor::<A<B>>(&self.tw[0], device).require_grad();
        let tw_im = self.tw_tensor::<A<B>>(&self.tw[1], device).require_grad();
        let (yr, yi) = butterfly_forward_reference(
            x_re.clone(),
            x_im.clone(),
            tw_re.clone(),
            tw_im.clone(),
            &Permutation::BitReversal,
        );
        let t = |v: &[f64]| tensor2::<A<B>>(v, self.batch, self.n, device);
        let (a_re, a_im, c) = (t(&self.a[0]), t(&self.a[1]), t(&self.c));
        let loss = (a_re * yr.clone() + a_im * yi.clone()).sum()
            + (c * (yr.clone() * yr + yi.clone() * yi)).sum().mul_scalar(0.5);
        let grads = loss.backward();
        [
            host(x_re.grad(&grads).unwrap()),
            host(x_im.grad(&grads).unwrap()),
            host(tw_re.grad(&grads).unwrap()),
            host(tw_im.grad(&grads).unwrap()),
        ]
    }
}

/// The shared finite-difference checker: every entry of both inputs and both twiddle tensors.
fn check_finite_differences<B: Backend>(device: &B::Device, tol: Tol) {
    for n in sizes_up_to(fd_max_n::<B>()) {
        let p = Problem::new::<B>(n, 2, device);
        let ad = p.autodiff::<B>(device);
        for (which, grad) in ad.iter().enumerate() {
            let scale = grad.iter().fold(0.0f64, |m, g| m.max(g.abs()));
            assert!(scale > 0.0, "n={n}: gradient {which} is identically zero");
            for i in 0..grad.len() {
                let eval = |delta: f64| {
                    let (mut tw, mut x) = (p.tw.clone(), p.x.clone());
                    let v = if which < 2 { &mut x[which][i] } else { &mut tw[which - 2][i] };
                    *v += delta;
                    p.loss_host::<B>(&tw, &x, device)
                };
                let h = tol.fd_step;
                let fd = (eval(h) - eval(-h)) / (2.0 * h);
                let err = (fd - grad[i]).abs() / grad[i].abs().max(1e-3 * scale);
                assert!(
                    err <= tol.fd_rel,
                    "n={n} {} [{i}]: autodiff {} vs finite differences {fd} (rel err {err:e} > {:e})",
                    ["x_re", "x_im", "tw_re", "tw_im"][which],
                    grad[i],
                    tol.fd_rel
                );
            }
        }
    }
}
per_backend!(check_finite_differences);

/// For the linear map M of the layer, the gradient of f(x) = Re⟨y, Mx⟩ with respect to x is
/// Mᴴy: it must satisfy f(x) = Re⟨Mᴴy, x⟩ and equal Mᴴy computed in f64 from the twiddles.
fn check_adjoint_identity<B: ButterflyOps>(device: &B::Device, tol: Tol)
where
    Autodiff<B>: ButterflyOps<Device = B::Device>,
{
    type A<B> = Autodiff<B>;
    for n in sizes_up_to(1024) {
        let layer = ButterflyConfig::new(n)
            .with_init(ButterflyInit::Randn { seed: n as u64, scale: std::f64::consts::FRAC_1_SQRT_2 })
            .init::<A<B>>(device)
            .unwrap();
        let batch = 3;
        let xs = [normals(11 * n as u64, batch * n), normals(13 * n as u64, batch * n)];
        let ys = [normals(17 * n as u64, batch * n), normals(19 * n as u64, batch * n)];
        let x_re = tensor2::<A<B>>(&xs[0], batch, n, device).require_grad();
        let x_im = tensor2::<A<B>>(&xs[1], batch, n, device).require_grad();
        let (mr, mi) = layer.forward(x_re.clone(), x_im.clone()).unwrap();
        let f = (tensor2::<A<B>>(&ys[0], batch, n, device) * mr + tensor2::<A<B>>(&ys[1], batch, n, device) * mi).sum();
        let f_value = host(f.clone())[0];
        let grads = f.backward();
        let g = [host(x_re.grad(&grads).unwrap()), host(x_im.grad(&grads).unwrap())];

        let x = complex(&round_to_backend::<B>(&xs[0], device), &round_to_backend::<B>(&xs[1], device));
        let gc = complex(&g[0], &g[1]);
        let inner: f64 = x.iter().zip(&gc).map(|(x, g)| (g.conj() * x).re).sum();
        let norms = (x.iter().map(|z| z.norm_sqr()).sum::<f64>() * gc.iter().map(|z| z.norm_sqr()).sum::<f64>()).sqrt();
        let err = (f_value - inner).abs() / norms;
        assert!(err <= tol.identity_rel, "n={n}: f(x) = {f_value} but Re⟨Mᴴy, x⟩ = {inner} (rel {err:e})");

        let adjoint = layer.to_matrix().adjoint();
        let y = complex(&round_to_backend::<B>(&ys[0], device), &round_to_backend::<B>(&ys[1], device));
        let expected: Vec<Complex64> = y.chunks(n).flat_map(|row| adjoint.mul_vec(row).unwrap()).collect();
        let err = rel_rms(&gc, &expected);
        assert!(err <= tol.identity_rel, "n={n}: gradient vs Mᴴy in f64: rel RMS {err:e}");
    }
}
per_backend!(check_adjoint_identity);

/// The tangent is the derivative: for the output y of a product of two factors (a bit reversal
/// and a gather) and any u, `⟨dy, u⟩ = ⟨dθ, ∇_θ⟨y, u⟩⟩` with the gradient from Burn's autodiff,
/// and for one factor with an input direction too, `⟨dy, u⟩ = ⟨dx, ∇_x⟩ + ⟨dθ, ∇_θ⟩`; each
/// side is a sum of products, so they agree to the adjoint identity's rounding.
fn check_tangent_is_the_derivative<B: ButterflyOps>(device: &B::Device, tol: Tol)
where
    Autodiff<B>: ButterflyOps<Device = B::Device>,
{
    use learned_fft::nn::{product_forward, product_tangent};
    type A<B> = Autodiff<B>;
    let dot = |a: &[Vec<f64>], b: &[Vec<f64>]| -> (f64, f64) {
        let pairs = a.iter().zip(b).flat_map(|(a, b)| a.iter().zip(b));
        let value = pairs.clone().map(|(x, y)| x * y).sum::<f64>();
        let norm2 = |v: &[Vec<f64>]| v.iter().flatten().map(|x| x * x).sum::<f64>();
        (value, (norm2(a) * norm2(b)).sqrt())
    };
    for n in sizes_up_to(tangent_max_n()) {
        let batch = 3;
        let log_n = n.trailing_zeros() as usize;
        let s = 7 * n as u64;
        let perms = [Permutation::BitReversal, Permutation::gather(shuffled(n, s)).unwrap()];
        for k in [1, 2] {
            let shape = [k * log_n, n / 2, 2, 2];
            let len = shape.iter().product::<usize>();
            let host_tw: Vec<Vec<f64>> = (0..4).map(|i| round_to_backend::<B>(&normals(s + i, len), device)).collect();
            let host_x: Vec<Vec<f64>> =
                (4..8).map(|i| round_to_backend::<B>(&normals(s + i, batch * n), device)).collect();
            let u: Vec<Vec<f64>> = (8..10).map(|i| round_to_backend::<B>(&normals(s + i, batch * n), device)).collect();
            let tw = |i: usize| learned_fft::float_tensor::<B, 4>(host_tw[i].clone(), shape, device);
            let x = |i: usize| tensor2::<B>(&host_x[i], batch, n, device);
            // With one factor the input direction is (x2, x3); a product's tangent holds x fixed.
            let ((_, _), (dr, di)) = if k == 1 {
                B::butterfly_tangent((x(0), x(1)), (x(2), x(3)), (&tw(0), &tw(1)), (&tw(2), &tw(3)), &perms[1])
            } else {
                product_tangent((x(0), x(1)), (&tw(0), &tw(1)), (&tw(2), &tw(3)), &perms)
            };
            let (lhs, lhs_norm) = dot(&[host(dr), host(di)], &u);

            let ta = |i: usize| learned_fft::float_tensor::<A<B>, 4>(host_tw[i].clone(), shape, device).require_grad();
            let xa = |i: usize| tensor2::<A<B>>(&host_x[i], batch, n, device).require_grad();
            let (tr, ti, xr, xi) = (ta(0), ta(1), xa(0), xa(1));
            let (yr, yi) = product_forward((xr.clone(), xi.clone()), &tr, &ti, &perms[2 - k..]);
            let ua = |i: usize| tensor2::<A<B>>(&u[i], batch, n, device);
            let grads = (yr * ua(0) + yi * ua(1)).sum().backward();
            let mut grad = vec![host(tr.grad(&grads).unwrap()), host(ti.grad(&grads).unwrap())];
            let mut dir = vec![host_tw[2].clone(), host_tw[3].clone()];
            if k == 1 {
                grad.extend([host(xr.grad(&grads).unwrap()), host(xi.grad(&grads).unwrap())]);
                dir.extend([host_x[2].clone(), host_x[3].clone()]);
            }
            let (rhs, rhs_norm) = dot(&dir, &grad);
            let err = (lhs - rhs).abs() / lhs_norm.max(rhs_norm);
            assert!(err <= tol.identity_rel, "n={n} k={k}: ⟨dy, u⟩ = {lhs} but ⟨dθ, ∇⟩ = {rhs} (rel {err:e})");
        }
    }
}
per_backend!(check_tangent_is_the_derivative);

/// The unitary exact FFT followed by the unitary exact inverse FFT is the identity.
fn check_round_trip<B: ButterflyOps>(device: &B::Device, tol: Tol) {
    for n in sizes_up_to(4096) {
        let fft = ButterflyConfig::new(n).init::<B>(device).unwrap();
        let ifft = ButterflyConfig::new(n)
            .with_init(ButterflyInit::Fft { inverse: true, norm: FftNorm::Ortho })
            .init::<B>(device)
            .unwrap();
        let batch = 2;
        let xr = round_to_backend::<B>(&normals(23 * n as u64, batch * n), device);
        let xi = round_to_backend::<B>(&normals(29 * n as u64, batch * n), device);
        let (fr, fi) = fft.forward(tensor2::<B>(&xr, batch, n, device), tensor2::<B>(&xi, batch, n, device)).unwrap();
        let (br, bi) = ifft.forward(fr, fi).unwrap();
        let err = rel_rms(&complex(&host(br), &host(bi)), &complex(&xr, &xi));
        assert!(err <= tol.identity_rel, "n={n}: round trip rel RMS {err:e} > {:e}", tol.identity_rel);
    }
}
per_backend!(check_round_trip);

/// Central-difference step for the relaxed permutation's logits in f64: its loss is smooth but
/// not quadratic in a logit (a sigmoid), so the truncation error is ~h²·|L'''|/6 ≈ 1e-11 of the
/// gradient's scale at h = 1e-5, and the rounding error ε·|L|/h ≈ 1e-11 too.
const RELAXED_FD_STEP: f64 = 1e-5;
/// Largest relative error allowed between autodiff and those differences (both terms above
/// are ~1e-11; the acceptance bar for f64 gradients is 1e-6).
const RELAXED_FD_REL: f64 = 1e-6;

/// The relaxed permutation's gradients with respect to its logits and its input equal central
/// finite differences (f64), for the loss `Σ a·y + ½ Σ c·y²` of its output y.
#[test]
fn relaxed_permutation_gradients_match_finite_differences() {
    use learned_fft::nn::RelaxedPermutation;
    type B = NdArrayBackend<f64>;
    type A = Autodiff<B>;
    let device = Default::default();
    for n in [4usize, 8, 16, 32] {
        let (batch, levels) = (3, n.trailing_zeros() as usize - 1);
        let s = 7000 + n as u64;
        let (logits, x, a, c) =
            (normals(s, 3 * levels), normals(s + 1, batch * n), normals(s + 2, batch * n), normals(s + 3, batch * n));
        let loss_host = |logits: &[f64], x: &[f64]| {
            let layer = RelaxedPermutation::<B>::from_logits(n, logits.to_vec(), &device).unwrap();
            let y = host(layer.forward_real(tensor2::<B>(x, batch, n, &device)).unwrap());
            (0..y.len()).map(|i| a[i] * y[i] + 0.5 * c[i].abs() * y[i] * y[i]).sum::<f64>()
        };
        let layer = RelaxedPermutation::<A>::from_logits(n, logits.clone(), &device).unwrap();
        let xt = tensor2::<A>(&x, batch, n, &device).require_grad();
        let y = layer.forward_real(xt.clone()).unwrap();
        let c_abs: Vec<f64> = c.iter().map(|v| v.abs()).collect();
        let loss = (tensor2::<A>(&a, batch, n, &device) * y.clone()).sum()
            + (tensor2::<A>(&c_abs, batch, n, &device) * y.clone() * y).sum().mul_scalar(0.5);
        let grads = loss.backward();
        let ad = [host(layer.logits.grad(&grads).unwrap()), host(xt.grad(&grads).unwrap())];
        for (which, grad) in ad.iter().enumerate() {
            let scale = grad.iter().fold(0.0f64, |m, g| m.max(g.abs()));
            assert!(scale > 0.0, "n={n}: gradient {which} is identically zero");
            for i in 0..grad.len() {
                let eval = |delta: f64| {
                    let (mut l, mut xx) = (logits.clone(), x.clone());
                    if which == 0 {
                        l[i] += delta
                    } else {
                        xx[i] += delta
                    }
                    loss_host(&l, &xx)
                };
                let h = RELAXED_FD_STEP;
                let fd = (eval(h) - eval(-h)) / (2.0 * h);
                let err = (fd - grad[i]).abs() / grad[i].abs().max(1e-3 * scale);
                assert!(
                    err <= RELAXED_FD_REL,
                    "n={n} {} [{i}]: autodiff {} vs finite differences {fd} (rel err {err:e})",
                    ["logits", "x"][which],
                    grad[i]
                );
            }
        }
    }
}

/// The relaxed permutation is doubly stochastic at any logits, and at saturated logits it is the
/// gather of its hardened permutation: separations alone give the bit reversal, no choice at all
/// the identity.
#[test]
fn relaxed_permutation_is_doubly_stochastic_and_hardens_to_its_limit() {
    use learned_fft::nn::{RelaxedPermutation, RelaxedPermutationConfig};
    type B = NdArrayBackend<f64>;
    let device = Default::default();
    for n in [2usize, 4, 16, 64] {
        let levels = (n.trailing_zeros() as usize).saturating_sub(1);
        // Its matrix: row i is the layer applied to e_i (the layer is linear).
        let eye: Vec<f64> = (0..n * n).map(|i| f64::from(u8::from(i / n == i % n))).collect();
        let matrix =
            |layer: &RelaxedPermutation<B>| host(layer.forward_real(tensor2::<B>(&eye, n, n, &device)).unwrap());
        let layer = RelaxedPermutationConfig::new(n).with_seed(3).init::<B>(&device).unwrap();
        let m = matrix(&layer);
        for i in 0..n {
            let (row, col) = ((0..n).map(|j| m[i * n + j]).sum::<f64>(), (0..n).map(|j| m[j * n + i]).sum::<f64>());
            assert!((row - 1.0).abs() < 1e-12 && (col - 1.0).abs() < 1e-12, "n={n}: sums {row}, {col}");
            assert!((0..n).all(|j| m[i * n + j] >= 0.0), "n={n}: a negative weight");
        }
        let saturated = |logits: Vec<f64>| RelaxedPermutation::<B>::from_logits(n, logits, &device).unwrap();
        let separate_only = (0..levels).flat_map(|_| [40.0, -40.0, -40.0]).collect();
        let bit_reversal = saturated(separate_only).harden().indices(n);
        assert_eq!(bit_reversal, Permutation::BitReversal.indices(n), "n={n}");
        assert_eq!(saturated(vec![-40.0; 3 * levels]).harden().indices(n), (0..n).collect::<Vec<_>>(), "n={n}");
        let random = saturated(normals(n as u64, 3 * levels).iter().map(|v| 40.0 * v.signum()).collect());
        let indices = random.harden().indices(n);
        // Applied to e_i, the layer puts 1 where the gather reads i: y[k] = x[indices[k]].
        let m = matrix(&random);
        for i in 0..n {
            for k in 0..n {
                let expected = f64::from(u8::from(indices[k] == i));
                assert!((m[i * n + k] - expected).abs() < 1e-12, "n={n}: entry ({i}, {k}) is {}", m[i * n + k]);
            }
        }
    }
}
