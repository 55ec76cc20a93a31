//! Bad input gives a clear error naming the op, the expected and the received.

use burn::tensor::Tensor;
use learned_fft::backend::{select, BackendKind, Precision};
use learned_fft::{ButterflyConfig, ButterflyInit, Error, Target};

use crate::common::*;

type B = NdArrayBackend<f64>;

/// The error's message contains every one of `parts`.
fn says(err: Error, parts: &[&str]) {
    let msg = err.to_string();
    for part in parts {
        assert!(msg.contains(part), "error {msg:?} should mention {part:?}");
    }
}

#[test]
fn n_not_a_power_of_two() {
    for n in [3, 12, 1000] {
        let err = ButterflyConfig::new(n).init::<B>(&Default::default()).unwrap_err();
        says(err, &["butterfly.init", "power of two", &format!("got {n}")]);
    }
}

#[test]
fn n_below_two() {
    for n in [0, 1] {
        let err = ButterflyConfig::new(n).init::<B>(&Default::default()).unwrap_err();
        says(err, &["butterfly.init", ">= 2", &format!("got {n}")]);
    }
    says(Target::Dft.matrix(1).unwrap_err(), &["target.matrix", "got 1"]);
}

#[test]
fn last_dimension_not_n() {
    let device = Default::default();
    let layer = ButterflyConfig::new(8).init::<B>(&device).unwrap();
    let x = Tensor::<B, 3>::zeros([2, 3, 4], &device);
    says(layer.forward(x.clone(), x).unwrap_err(), &["butterfly.forward", "last dimension n = 8", "[2, 3, 4]"]);
    let x = Tensor::<B, 1>::zeros([16], &device);
    says(layer.forward_real(x).unwrap_err(), &["butterfly.forward", "n = 8", "[16]"]);
}

#[test]
fn re_and_im_of_different_shapes() {
    let device = Default::default();
    let layer = ButterflyConfig::new(8).init::<B>(&device).unwrap();
    let re = Tensor::<B, 2>::zeros([2, 8], &device);
    let im = Tensor::<B, 2>::zeros([3, 8], &device);
    says(layer.forward(re, im).unwrap_err(), &["butterfly.forward", "[2, 8]", "[3, 8]"]);
}

#[test]
fn f64_on_wgpu_is_refused() {
    let err = select(BackendKind::Wgpu, Precision::F64).unwrap_err();
    assert!(matches!(err, Error::UnsupportedPrecision { .. }), "{err:?}");
    says(err, &["wgpu", "f64", "supported: f32"]);
    // auto at f64 picks a backend that has it.
    let chosen = select(BackendKind::Auto, Precision::F64).unwrap();
    assert_eq!((chosen.kind, chosen.precision), (BackendKind::Candle, Precision::F64));
}

#[test]
fn unknown_backend_name() {
    let err = "tpu".parse::<BackendKind>().unwrap_err();
    says(err, &["backend", "auto, wgpu, candle, ndarray, cuda", "\"tpu\""]);
    assert_eq!("NdArray".parse::<BackendKind>().unwrap(), BackendKind::Ndarray);
    says("f16".parse::<Precision>().unwrap_err(), &["precision", "f32 or f64", "\"f16\""]);
}

#[test]
fn cuda_without_the_feature_is_a_clear_error() {
    if cfg!(feature = "cuda") {
        return;
    }
    says(select(BackendKind::Cuda, Precision::F32).unwrap_err(), &["cuda", "feature"]);
}

#[test]
fn f64_truth_helpers_refuse_mismatched_sizes() {
    use learned_fft::reference::{butterfly, dft, FftNorm};
    use learned_fft::Permutation;
    use num_complex::Complex64;
    let m = Target::Dft.matrix(8).unwrap();
    says(m.mul_vec(&[Complex64::new(1.0, 0.0); 4]).unwrap_err(), &["mul_vec", "size 8", "got 4"]);
    says(m.rmse(&Target::Dft.matrix(4).unwrap()).unwrap_err(), &["rmse", "size 8", "got 4"]);
    let mut x = vec![Complex64::new(0.0, 0.0); 10];
    says(dft::fft_in_place(&mut x, 4, false, FftNorm::Ortho).unwrap_err(), &["fft_in_place", "n = 4", "got 10"]);
    let (re, im) = ButterflyInit::Identity.twiddles(8);
    says(
        butterfly::matrix(&re, &im, 16, &Permutation::BitReversal.indices(16)).unwrap_err(),
        &["128 twiddle values for n = 16", "got 48"],
    );
    says(butterfly::matrix(&re, &im, 6, &Permutation::BitReversal.indices(6)).unwrap_err(), &["power of two", "got 6"]);
}

#[test]
fn bad_init_and_target_parameters() {
    let device = Default::default();
    for scale in [0.0, -1.0, f64::NAN] {
        let err =
            ButterflyConfig::new(8).with_init(ButterflyInit::Randn { seed: 0, scale }).init::<B>(&device).unwrap_err();
        says(err, &["butterfly.init", "scale"]);
    }
    let err = Target::Circulant { kernel: vec![1.0; 3] }.matrix(8).unwrap_err();
    says(err, &["target.circulant", "length n = 8", "length 3"]);
}
