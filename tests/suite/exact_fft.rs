//! The exact-init butterfly against rustfft on every backend, N = 2 … 4096.

use learned_fft::reference::{dft, FftNorm};
use learned_fft::{ButterflyConfig, ButterflyInit, ButterflyOps};
use num_complex::{Complex32, Complex64};
use rustfft::FftPlanner;

use crate::common::*;

const BATCH: usize = 4;

/// rustfft in f32 on the same inputs: the accuracy an f32 FFT is expected to have.
fn rustfft_f32(x: &[Complex64], n: usize, inverse: bool) -> Vec<Complex64> {
    let mut buf: Vec<Complex32> = x.iter().map(|z| Complex32::new(z.re as f32, z.im as f32)).collect();
    let mut planner = FftPlanner::<f32>::new();
    let plan = if inverse { planner.plan_fft_inverse(n) } else { planner.plan_fft_forward(n) };
    plan.process(&mut buf);
    buf.iter().map(|z| Complex64::new(z.re as f64, z.im as f64)).collect()
}

fn check_exact_vs_rustfft<B: ButterflyOps>(device: &B::Device, _tol: Tol) {
    for n in sizes_up_to(4096) {
        let x_re = round_to_backend::<B>(&normals(n as u64, BATCH * n), device);
        let x_im = round_to_backend::<B>(&normals(!(n as u64), BATCH * n), device);
        let x = complex(&x_re, &x_im);
        for inverse in [false, true] {
            // rustfft is unscaled in both directions: compare our unscaled (Backward) forward and
            // our Forward-norm inverse, and the unitary (Ortho) pair against rustfft scaled by 1/√N.
            for (norm, scale) in [
                (if inverse { FftNorm::Forward } else { FftNorm::Backward }, 1.0),
                (FftNorm::Ortho, 1.0 / (n as f64).sqrt()),
            ] {
                let layer =
                    ButterflyConfig::new(n).with_init(ButterflyInit::Fft { inverse, norm }).init::<B>(device).unwrap();
                let (yr, yi) = layer
                    .forward(tensor2::<B>(&x_re, BATCH, n, device), tensor2::<B>(&x_im, BATCH, n, device))
                    .unwrap();
                let ours = complex(&host(yr), &host(yi));
                let mut truth = x.clone();
                dft::fft_in_place(&mut truth, n, inverse, FftNorm::Backward).unwrap();
                if inverse {
                    truth.iter_mut().for_each(|z| *z *= n as f64);
                }
                truth.iter_mut().for_each(|z| *z *= scale);
                let err = rel_rms(&ours, &truth);
                let what = format!("n={n} inverse={inverse} {norm:?}");
                if is_f64::<B>() {
                    assert!(err <= F64_EXACT_REL_RMS, "{what}: rel RMS {err:e} > {F64_EXACT_REL_RMS:e}");
                } else {
                    let rustfft: Vec<Complex64> =
                        x.chunks(n).flat_map(|row| rustfft_f32(row, n, inverse)).map(|z| z * scale).collect();
                    let err_rustfft = rel_rms(&rustfft, &truth);
                    assert!(
                        err <= F32_EXACT_VS_RUSTFFT * err_rustfft,
                        "{what}: rel RMS {err:e} > {F32_EXACT_VS_RUSTFFT} × rustfft-f32's {err_rustfft:e}"
                    );
                }
            }
        }
    }
}
per_backend!(check_exact_vs_rustfft);

/// The unitary (default) exact butterfly against rustfft scaled by 1/√N, in f64.
#[test]
fn unitary_exact_butterfly_f64() {
    type B = NdArrayBackend<f64>;
    let device = Default::default();
    for n in sizes_up_to(4096) {
        let x_re = normals(3 * n as u64, BATCH * n);
        let x_im = normals(5 * n as u64, BATCH * n);
        let layer = ButterflyConfig::new(n).init::<B>(&device).unwrap();
        let (yr, yi) =
            layer.forward(tensor2::<B>(&x_re, BATCH, n, &device), tensor2::<B>(&x_im, BATCH, n, &device)).unwrap();
        let mut truth = complex(&x_re, &x_im);
        dft::fft_in_place(&mut truth, n, false, FftNorm::Ortho).unwrap();
        let err = rel_rms(&complex(&host(yr), &host(yi)), &truth);
        assert!(err <= F64_EXACT_REL_RMS, "n={n}: rel RMS {err:e}");
    }
}
