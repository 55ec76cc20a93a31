//! A user's own data as the target: pairs of input and output vectors and nothing else, in code
//! or from two `.npy` files; learned from the pairs, and refused with a clear error when the
//! files are not pairs the trainer can take.

use std::path::Path;
use std::process::Output;

use burn::backend::{Autodiff, NdArray};
use learned_fft::backend::{select, BackendKind, Precision};
use learned_fft::metrics;
use learned_fft::nn::PermutationSource;
use learned_fft::train::FloorSource;
use learned_fft::{ComplexMatrix, DataTarget, Target, TrainConfig, TrainReport, Trainer};
use num_complex::Complex64;

use crate::cli::{last_json, run, stderr};
use crate::common::{complex, normals, random_bp, save_npy, scratch, SEED};

/// The f64 bar: what a learned target must reach in f64 (as for the built-ins).
const F64_TRAIN_BAR: f64 = 1e-14;
/// The learned matrix against the map the pairs came from, when the pairs determine it: the bar
/// on the data, amplified by the inputs' conditioning (2N standard normal inputs: about 6).
const F64_MATRIX_REL: f64 = 1e-13;

/// `rows` pairs (x, M x) with standard normal complex inputs, row-major.
fn pairs(m: &ComplexMatrix, rows: usize, seed: u64) -> (Vec<Complex64>, Vec<Complex64>) {
    let n = m.n();
    let x = complex(&normals(seed, rows * n), &normals(seed + 1, rows * n));
    let y = x.chunks(n).flat_map(|v| m.mul_vec(v).expect("a vector of size N")).collect();
    (x, y)
}

fn train_f64(config: TrainConfig) -> (learned_fft::ButterflyProduct<Autodiff<NdArray<f64>>>, TrainReport) {
    let selected = select(BackendKind::Ndarray, Precision::F64).unwrap();
    let trainer = Trainer::new(config).expect("a valid config");
    trainer.run_on::<Autodiff<NdArray<f64>>>(&Default::default(), &selected, &mut ()).unwrap()
}

#[test]
fn a_random_bp_is_learned_from_its_pairs_alone() {
    let n = 16;
    let m = random_bp(n, SEED + 20);
    let (x, y) = pairs(&m, 2 * n, SEED);
    let data = DataTarget::new(n, x.clone(), y.clone()).unwrap();
    let (layer, r) = train_f64(TrainConfig::new(n).with_target(Target::Data(data)).with_seed(1));
    assert!(r.reached && r.rmse <= F64_TRAIN_BAR, "rmse {:.3e}", r.rmse);
    // Nothing but the pairs: every stage learned, the permutation found from the matrix the
    // pairs determine (least squares), no factorization known.
    assert_eq!((r.model.as_str(), r.stages_learned, r.stages_fixed), ("BP", 4, 0));
    assert_eq!(r.permutations, [PermutationSource::Identified]);
    assert_eq!(r.floor, None);
    // The rmse on the pairs is the matrix's: the layer is the map they came from.
    let err = metrics::rmse(&layer, &m).unwrap();
    assert!(err <= F64_MATRIX_REL, "rmse against the map: {err:.3e}");
    // The data's scale is not the map's: pairs a thousand times larger give the same run.
    let scaled = |v: &[Complex64]| v.iter().map(|z| z * 1000.0).collect();
    let data = DataTarget::new(n, scaled(&x), scaled(&y)).unwrap();
    let (_, big) = train_f64(TrainConfig::new(n).with_target(Target::Data(data)).with_seed(1));
    assert!(big.reached && (big.rmse - r.rmse).abs() <= F64_TRAIN_BAR, "{:.3e} vs {:.3e}", big.rmse, r.rmse);
}

#[test]
fn the_dfts_bit_reversal_is_found_from_its_pairs_alone() {
    // Pairs of the unitary DFT (rustfft) and nothing else: the permutation the trainer ends
    // with is the bit reversal, found from the matrix the pairs determine.
    let n = 32;
    let x = complex(&normals(SEED + 30, 2 * n * n), &normals(SEED + 31, 2 * n * n));
    let mut y = x.clone();
    let fft = rustfft::FftPlanner::<f64>::new().plan_fft_forward(n);
    fft.process(&mut y);
    y.iter_mut().for_each(|z| *z /= (n as f64).sqrt());
    let data = Target::Data(DataTarget::new(n, x, y).unwrap());
    let (layer, r) = train_f64(TrainConfig::new(n).with_target(data).with_seed(4));
    assert!(r.reached && r.rmse <= F64_TRAIN_BAR, "rmse {:.3e}", r.rmse);
    assert_eq!(r.permutations, [PermutationSource::Identified]);
    assert_eq!(layer.permutations(), [learned_fft::Permutation::BitReversal]);
}

#[test]
fn adam_on_minibatches_reaches_the_same_bar() {
    let n = 16;
    let m = random_bp(n, SEED + 21);
    let (x, y) = pairs(&m, 4 * n, SEED + 2);
    let data = Target::Data(DataTarget::new(n, x, y).unwrap());
    let (layer, r) = train_f64(TrainConfig::new(n).with_target(data).with_seed(2).with_batch_size(Some(n)));
    assert!(r.reached && r.rmse <= F64_TRAIN_BAR, "rmse {:.3e}", r.rmse);
    assert!(metrics::rmse(&layer, &m).unwrap() <= F64_MATRIX_REL);
}

#[test]
fn data_in_f32_reaches_the_rounding_of_its_own_f64_solution() {
    // Inputs that are f32 numbers (data saved as complex64, as the probes are drawn): on an f32
    // device they are exact. Inputs of more digits are rounded as they reach it, and the run
    // fits that rounding: see training.md.
    let n = 8;
    let m = random_bp(n, SEED + 22);
    let x: Vec<Complex64> = complex(&normals(SEED + 4, 2 * n * n), &normals(SEED + 5, 2 * n * n))
        .into_iter()
        .map(|z| Complex64::new(z.re as f32 as f64, z.im as f32 as f64))
        .collect();
    let y = x.chunks(n).flat_map(|v| m.mul_vec(v).unwrap()).collect();
    let config = TrainConfig::new(n).with_target(Target::Data(DataTarget::new(n, x, y).unwrap())).with_seed(3);
    let r = Trainer::new(config).unwrap().run(BackendKind::Ndarray, Precision::F32, &mut ()).unwrap();
    assert_eq!(r.floor_source, Some(FloorSource::OwnF64Solution));
    let floor = r.floor.expect("the f64 polish found a solution");
    assert!(r.reached && floor < 1e-6, "rmse {:.3e}, floor {floor:.3e}", r.rmse);
}

/// `rows` pairs of the unitary DFT of size `n` (rustfft) with standard normal complex inputs.
fn dft_pairs(n: usize, rows: usize, seed: u64) -> (Vec<Complex64>, Vec<Complex64>) {
    let x = complex(&normals(seed, rows * n), &normals(seed + 1, rows * n));
    let mut y = x.clone();
    rustfft::FftPlanner::<f64>::new().plan_fft_forward(n).process(&mut y);
    y.iter_mut().for_each(|z| *z /= (n as f64).sqrt());
    (x, y)
}

#[test]
fn the_dfts_permutation_is_learned_from_pairs_too_few_for_its_matrix() {
    // 12 pairs at N = 16: fewer than N, so they determine no matrix and nothing can be
    // identified; more than 2 log2 N, so they pin a butterfly down. The permutation is learned
    // by gradient descent (a relaxed permutation hardened), and the run reaches the bar.
    let n = 16;
    let (x, y) = dft_pairs(n, 12, SEED + 40);
    let data = DataTarget::new(n, x, y).unwrap();
    assert!(data.fitted_matrix().unwrap().is_none(), "12 pairs do not span C^16");
    let (layer, r) = train_f64(TrainConfig::new(n).with_target(Target::Data(data)).with_seed(5));
    assert_eq!(r.permutations, [PermutationSource::Learned]);
    assert_eq!((r.stages_learned, r.stages_fixed), (4, 0));
    assert!(r.reached && r.rmse <= F64_TRAIN_BAR, "rmse {:.3e}", r.rmse);
    // Not only a fit of the pairs: the layer is the DFT (measured 3.5e-17), whose matrix the
    // pairs never gave (so
    // the permutation is one that makes the DFT a butterfly: the bit reversal, up to exchanging
    // the halves of a level).
    let err = metrics::rmse(&layer, &Target::Dft.matrix(n).unwrap()).unwrap();
    assert!(err <= F64_MATRIX_REL, "rmse against the DFT: {err:.3e}");
}

#[test]
fn too_few_pairs_determine_no_matrix_and_the_model_keeps_the_identity() {
    let n = 8;
    let (x, y) = pairs(&random_bp(n, SEED + 23), n / 2, SEED + 6);
    let data = DataTarget::new(n, x, y).unwrap();
    assert!(data.fitted_matrix().unwrap().is_none(), "N/2 pairs do not span C^N");
    let config = TrainConfig::new(n).with_target(Target::Data(data)).with_restarts(0).with_adam_steps(100);
    let (_, r) = train_f64(config);
    assert_eq!(r.permutations, [PermutationSource::Identity]);
}

/// The binary, as a user runs it (no backend from the environment).
fn cli(args: &[&str]) -> Output {
    run(args, &[])
}

/// The CLI's arguments for a run on the files `x`, `y` in f64 on ndarray, checkpoints in `dir`.
fn train_data_args(dir: &Path, x: &Path, y: &Path, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = ["--backend", "ndarray", "--precision", "f64", "train", "--quiet", "--seed", "3"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    a.extend(["--data".into(), x.display().to_string(), y.display().to_string()]);
    a.extend(["--checkpoint-dir".into(), dir.join("ck").display().to_string()]);
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

#[test]
fn train_data_learns_from_the_files_and_its_checkpoint_evaluates_against_them() {
    let dir = scratch("train-data");
    let n = 16;
    let m = random_bp(n, SEED + 24);
    let (x, y) = pairs(&m, 2 * n, SEED + 8);
    let shape = [(2 * n) as u64, n as u64];
    let (xp, yp) = (dir.join("x.npy"), dir.join("y.npy"));
    save_npy(&xp, &shape, x);
    save_npy(&yp, &shape, y.clone());
    let args = train_data_args(&dir, &xp, &yp, &[]);
    let out = cli(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", stderr(&out));
    let report = last_json(&out);
    let train = &report["train"];
    assert_eq!(train["n"], 16, "N comes from the files: {report}");
    assert_eq!(train["reached"], true, "{report}");
    assert_eq!(train["stages_fixed"], 0, "{report}");
    assert_eq!(train["permutations"], serde_json::json!(["identified"]), "{report}");
    // The checkpoint names the files; eval reads them again and measures the same rmse.
    let ckpt = train["checkpoint"].as_str().expect("a checkpoint").to_string();
    let eval = cli(&["--backend", "ndarray", "eval", "--checkpoint", &ckpt]);
    assert!(eval.status.success(), "{}", stderr(&eval));
    assert!(last_json(&eval)["rmse"].as_f64().is_some_and(|r| r <= F64_TRAIN_BAR), "{}", stderr(&eval));
    // Other outputs in the file: the checkpoint is not evaluated against them.
    let mut other = y;
    other[5] += Complex64::new(1.0, 0.0);
    save_npy(&yp, &shape, other);
    let eval = cli(&["--backend", "ndarray", "eval", "--checkpoint", &ckpt]);
    assert_eq!(eval.status.code(), Some(2), "{}", stderr(&eval));
    assert!(stderr(&eval).contains("the files changed"), "{}", stderr(&eval));
}

#[test]
fn bad_data_files_are_refused_naming_the_file_and_the_problem() {
    let dir = scratch("bad-data-files");
    let file = |name: &str| dir.join(name);
    let v = complex(&normals(SEED, 16 * 8), &normals(SEED + 1, 16 * 8));
    let mut nan = v.clone();
    nan[11] = Complex64::new(f64::NAN, 0.0);
    save_npy(&file("x.npy"), &[16, 8], v.clone());
    save_npy(&file("y.npy"), &[16, 8], v.clone());
    save_npy(&file("y-short.npy"), &[8, 8], v[..64].to_vec());
    save_npy(&file("x6.npy"), &[16, 6], v[..96].to_vec());
    save_npy(&file("y6.npy"), &[16, 6], v[..96].to_vec());
    save_npy(&file("flat.npy"), &[128], v.clone());
    save_npy(&file("y-nan.npy"), &[16, 8], nan);
    // (inputs, outputs, extra flags, what the error must say)
    let cases: [(&str, &str, &[&str], &[&str]); 7] = [
        ("x.npy", "y-short.npy", &[], &["y-short.npy", "shape of", "16×8", "8×8"]),
        ("x6.npy", "y6.npy", &[], &["x6.npy", "power of two", "6 columns"]),
        ("flat.npy", "y.npy", &[], &["flat.npy", "two-dimensional", "[128]"]),
        ("x.npy", "y-nan.npy", &[], &["y-nan.npy", "finite entries", "NaN", "(1, 3)"]),
        ("x.npy", "missing.npy", &[], &["missing.npy"]),
        ("x.npy", "y.npy", &["--n", "16"], &["n = 8 (the size of the data's vectors)", "got 16"]),
        ("x.npy", "y.npy", &["--grow-above", "4"], &["no growing and no probes for data"]),
    ];
    for (i, (x, y, extra, parts)) in cases.into_iter().enumerate() {
        let run_dir = dir.join(format!("run{i}"));
        let args = train_data_args(&run_dir, &file(x), &file(y), extra);
        let out = cli(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{x} {y} {extra:?}: {err}");
        assert!(!err.contains("panicked"), "{x} {y} panicked: {err}");
        for part in parts {
            assert!(err.contains(part), "{x} {y} {extra:?}: the error should mention {part:?}: {err}");
        }
        assert!(!run_dir.exists(), "{x} {y}: nothing is written");
    }
    // In memory: outputs of another count, and NaN inputs.
    let bad = DataTarget::new(8, v.clone(), v[..64].to_vec()).unwrap_err().to_string();
    assert!(bad.contains("same non-zero multiple of N = 8") && bad.contains("128 and 64"), "{bad}");
    let bad = DataTarget::new(8, nan_first(&v), v.clone()).unwrap_err().to_string();
    assert!(bad.contains("the inputs to be finite") && bad.contains("(0, 0)"), "{bad}");
}

fn nan_first(v: &[Complex64]) -> Vec<Complex64> {
    let mut v = v.to_vec();
    v[0] = Complex64::new(0.0, f64::NAN);
    v
}
