//! A user's own matrix as the target: read from `.npy` exactly, learned from its entries alone,
//! and refused with a clear error when the file is not a matrix the trainer can take.

use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use learned_fft::backend::{BackendKind, Precision, Selected};
use learned_fft::nn::PermutationSource;
use learned_fft::train::{FloorSource, Observer};
use learned_fft::{Error, MatrixTarget, Target, TrainConfig, Trainer};
use num_complex::{Complex, Complex64};

use crate::cli::{last_json, run, stderr};
use crate::common::{entries, random_bp, random_unitary, save_npy, save_npy_ordered, scratch, wgpu_device, SEED};

/// The f64 bar: what a learned target must reach in f64 (as for the built-ins).
const F64_TRAIN_BAR: f64 = 1e-14;
/// Relative error of an entry stored in single precision: half an ulp of f32.
const F32_ENTRY_TOL: f64 = 6e-8;

/// The binary, as a user runs it (no backend from the environment).
fn cli(args: &[&str]) -> Output {
    run(args, &[])
}

fn read(path: &Path) -> Vec<Complex64> {
    let t = MatrixTarget::read(path).expect("the file reads");
    entries(&t.matrix().expect("its matrix"))
}

#[test]
fn npy_files_of_every_accepted_dtype_and_order_read_as_written() {
    let dir = scratch("npy-dtypes");
    let n = 8;
    let m = entries(&random_bp(n, SEED));
    let shape = [n as u64, n as u64];
    let path = dir.join("m.npy");
    // complex128, C order: exactly.
    save_npy(&path, &shape, m.clone());
    assert_eq!(read(&path), m);
    // complex128, Fortran order (the file holds column-major entries): the same matrix.
    let column_major: Vec<Complex64> = (0..n * n).map(|i| m[(i % n) * n + i / n]).collect();
    save_npy_ordered(&path, &shape, column_major, npyz::Order::Fortran);
    assert_eq!(read(&path), m);
    // complex64: each part rounded to f32 once.
    save_npy(&path, &shape, m.iter().map(|z| Complex::new(z.re as f32, z.im as f32)).collect());
    let got = read(&path);
    for (g, w) in got.iter().zip(&m) {
        assert!((g - w).norm() <= F32_ENTRY_TOL * w.norm().max(1e-30) * 2.0, "{g} vs {w}");
    }
    // float64 and float32: real matrices.
    let real: Vec<f64> = m.iter().map(|z| z.re).collect();
    save_npy(&path, &shape, real.clone());
    assert_eq!(read(&path), real.iter().map(|&x| Complex64::new(x, 0.0)).collect::<Vec<_>>());
    save_npy(&path, &shape, real.iter().map(|&x| x as f32).collect());
    for (g, w) in read(&path).iter().zip(&real) {
        assert!(g.im == 0.0 && (g.re - w).abs() <= F32_ENTRY_TOL * w.abs(), "{g} vs {w}");
    }
}

/// Writes one tensor of `dtype` with `shape` and little-endian `bytes` as a `.safetensors` file.
fn save_safetensors(path: &Path, tensors: &[(&str, safetensors::Dtype, Vec<usize>, Vec<u8>)]) {
    let views: Vec<(String, safetensors::tensor::TensorView)> = tensors
        .iter()
        .map(|(name, dtype, shape, bytes)| {
            let view = safetensors::tensor::TensorView::new(*dtype, shape.clone(), bytes).expect("a valid tensor");
            (name.to_string(), view)
        })
        .collect();
    std::fs::write(path, safetensors::serialize(views, None).expect("it serialises")).unwrap();
}

fn le_f64(v: impl IntoIterator<Item = f64>) -> Vec<u8> {
    v.into_iter().flat_map(f64::to_le_bytes).collect()
}

#[test]
fn safetensors_files_read_as_written_and_bad_ones_are_refused() {
    use safetensors::Dtype::{F32, F64, I64};
    let dir = scratch("safetensors");
    let n = 8;
    let m = entries(&random_bp(n, SEED));
    let path = dir.join("m.safetensors");
    // Complex F64, [N, N, 2] (real and imaginary parts last): exactly.
    let parts = le_f64(m.iter().flat_map(|z| [z.re, z.im]));
    save_safetensors(&path, &[("m", F64, vec![n, n, 2], parts)]);
    assert_eq!(read(&path), m);
    // Real F32, [N, N]: each entry rounded to f32 once, and looked at with f32's tolerance.
    let real: Vec<u8> = m.iter().flat_map(|z| (z.re as f32).to_le_bytes()).collect();
    save_safetensors(&path, &[("m", F32, vec![n, n], real)]);
    let t = MatrixTarget::read(&path).unwrap();
    assert_eq!(t.tolerance(), learned_fft::reference::identify::F32_TOLERANCE);
    for (g, w) in entries(&t.matrix().unwrap()).iter().zip(&m) {
        assert!(g.im == 0.0 && (g.re - w.re).abs() <= F32_ENTRY_TOL * w.re.abs(), "{g} vs {w}");
    }
    // Not one tensor, not a matrix's shape, not a float dtype, not a safetensors file, NaN.
    let bad = |tensors: &[(&str, safetensors::Dtype, Vec<usize>, Vec<u8>)], parts: &[&str]| {
        save_safetensors(&path, tensors);
        let msg = MatrixTarget::read(&path).unwrap_err().to_string();
        assert!(msg.contains("m.safetensors") && parts.iter().all(|p| msg.contains(p)), "{msg} (expected {parts:?})");
    };
    let square = le_f64(vec![0.5; n * n]);
    bad(
        &[("re", F64, vec![n, n], square.clone()), ("im", F64, vec![n, n], square.clone())],
        &["one tensor", "2 tensors"],
    );
    bad(&[("m", F64, vec![n, n, 3], le_f64(vec![0.5; n * n * 3]))], &["[rows, cols, 2]", "[8, 8, 3]"]);
    bad(&[("m", I64, vec![n, n], vec![0; n * n * 8])], &["F32 or F64", "I64"]);
    bad(&[("m", F64, vec![n, 4], le_f64(vec![0.5; n * 4]))], &["a square matrix", "8×4"]);
    let mut nan = vec![0.5; n * n];
    nan[10] = f64::NAN;
    bad(&[("m", F64, vec![n, n], le_f64(nan))], &["finite entries", "NaN", "(1, 2)"]);
    std::fs::write(&path, b"not a safetensors file").unwrap();
    let msg = MatrixTarget::read(&path).unwrap_err().to_string();
    assert!(msg.contains("a safetensors file") && msg.contains("does not parse"), "{msg}");
}

#[test]
fn a_random_bp_given_as_a_matrix_is_learned_to_the_f64_bar() {
    for n in [8, 16] {
        let target = Target::Matrix(MatrixTarget::new(random_bp(n, SEED + n as u64)).expect("a valid matrix"));
        let config = TrainConfig::new(n).with_target(target).with_seed(n as u64);
        let r =
            Trainer::new(config).expect("a valid config").run(BackendKind::Ndarray, Precision::F64, &mut ()).unwrap();
        assert!(r.reached && r.rmse <= F64_TRAIN_BAR, "N = {n}: rmse {:.3e}", r.rmse);
        // Nothing of an answer was given: no factorization of the matrix is known here, every
        // stage was learned, and the permutation was found from the entries.
        assert_eq!(r.floor, None);
        assert_eq!((r.model.as_str(), r.stages_learned, r.stages_fixed), ("BP", n.trailing_zeros() as usize, 0));
        assert_eq!(r.permutations, [PermutationSource::Identified]);
    }
}

#[test]
fn a_random_bp_in_f32_reaches_the_rounding_of_its_own_f64_solution() {
    for n in [8, 16] {
        let target = Target::Matrix(MatrixTarget::new(random_bp(n, SEED + 10 + n as u64)).expect("a valid matrix"));
        let config = TrainConfig::new(n).with_target(target).with_seed(n as u64);
        let r =
            Trainer::new(config).expect("a valid config").run(BackendKind::Ndarray, Precision::F32, &mut ()).unwrap();
        // The bar needs no answer: the model's own f64 solution, rounded to f32.
        assert_eq!(r.floor_source, Some(FloorSource::OwnF64Solution), "N = {n}");
        let floor = r.floor.expect("the f64 polish found a solution");
        // Within the rounding's own spread of it (metrics::F32_OWN_BAR_OVER_FLOOR).
        assert_eq!(r.bar, Some(learned_fft::metrics::F32_OWN_BAR_OVER_FLOOR * floor));
        assert!(
            r.reached && r.rmse <= r.bar.unwrap(),
            "N = {n}: rmse {:.3e} = {:.3} × the floor {floor:.3e}",
            r.rmse,
            r.rmse / floor
        );
        // The floor is the rounding of a solution, not a training error: near f32's epsilon.
        assert!(floor < 1e-6, "N = {n}: floor {floor:.3e}");
    }
}

/// A solution f32 holds exactly has a floor of 0: a Hadamard matrix of N = 16 in the trainer's
/// gauge (twiddles ±1, a last stage of ±1/4). Its f32 run ends a hair from it, and the bar is
/// f64's, not 0 (`metrics::bar`): with a bar of 0 it ended at rmse 9.5e-24, `reached: false`.
#[test]
fn a_matrix_whose_solution_f32_holds_exactly_reaches_its_bar_in_f32() {
    let target = Target::Matrix(MatrixTarget::new(Target::Hadamard.matrix(16).unwrap()).expect("a valid matrix"));
    let config = TrainConfig::new(16).with_target(target);
    let r = Trainer::new(config).expect("a valid config").run(BackendKind::Ndarray, Precision::F32, &mut ()).unwrap();
    assert_eq!((r.floor_source, r.floor), (Some(FloorSource::OwnF64Solution), Some(0.0)), "{r:?}");
    assert_eq!(r.bar, Some(F64_TRAIN_BAR));
    assert!(r.reached && r.rmse <= F64_TRAIN_BAR, "rmse {:.3e}", r.rmse);
}

/// The backend and precision of every run a trainer starts, in order.
#[derive(Default)]
struct Starts(Vec<(BackendKind, Precision)>);

impl Observer for Starts {
    fn start(&mut self, selected: &Selected, _config: &TrainConfig, _start_step: usize) {
        self.0.push((selected.kind, selected.precision));
    }
    fn finding_floor(&mut self, selected: &Selected) {
        self.0.push((selected.kind, selected.precision));
    }
}

/// An f32 run's floor is the solution nearest where each attempt ended, polished on in f64 (not
/// a separate f64 run from random weights before it: for a product that ended at another
/// solution, and at N = 256 it took more than 15 minutes on 2 cores): the f32 run starts first,
/// then one f64 polish per attempt, on the run's backend where it has f64.
#[test]
fn an_f32_runs_own_f64_solution_is_polished_from_its_end_on_its_backend_where_it_has_f64() {
    let n = 8;
    let target = Target::Matrix(MatrixTarget::new(random_bp(n, SEED + 30)).expect("a valid matrix"));
    // wgpu has no f64: its run's solution is trained on the CPU, with ndarray.
    let mut cases = vec![(BackendKind::Ndarray, BackendKind::Ndarray), (BackendKind::Candle, BackendKind::Candle)];
    if wgpu_device().is_some() {
        cases.push((BackendKind::Wgpu, BackendKind::Ndarray));
    }
    for (kind, solved_on) in cases {
        let config = TrainConfig::new(n).with_target(target.clone()).with_seed(4);
        let mut starts = Starts::default();
        let r = Trainer::new(config).expect("a valid config").run(kind, Precision::F32, &mut starts).unwrap();
        let polishes = vec![(solved_on, Precision::F64); r.attempts];
        assert_eq!(starts.0, [vec![(kind, Precision::F32)], polishes].concat(), "{kind}");
        assert_eq!(r.floor_source, Some(FloorSource::OwnF64Solution), "{kind}");
        assert!(r.reached, "{kind}: rmse {:.3e}, bar {:?}", r.rmse, r.bar);
    }
}

/// Asks its run to stop as the f64 polish that finds the f32 run's floor starts.
struct StopAtF64(Arc<AtomicBool>);

impl Observer for StopAtF64 {
    fn finding_floor(&mut self, selected: &Selected) {
        assert_eq!(selected.precision, Precision::F64);
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A stop during the f64 polish that finds an f32 run's floor stops the f32 run with its own
/// checkpoint (the polish has none), the run resumed from it finds its floor again and reaches
/// its bar, and resumed once more after its end it reports the same floor and bar (found again
/// in that process, not left out).
#[test]
fn a_stop_while_the_floor_is_found_keeps_the_f32_runs_checkpoint_and_resumes() {
    let n = 8;
    let dir = scratch("stop-in-floor");
    let target = Target::Matrix(MatrixTarget::new(random_bp(n, SEED + 40)).expect("a valid matrix"));
    let config =
        TrainConfig::new(n).with_target(target).with_seed(5).with_checkpoint_dir(Some(dir.display().to_string()));
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = Trainer::new(config.clone()).unwrap().with_stop_flag(stop.clone()).run(
        BackendKind::Ndarray,
        Precision::F32,
        &mut StopAtF64(stop),
    );
    match stopped {
        Err(Error::Interrupted { checkpoint: Some(path), step }) => {
            assert!(Path::new(&path).exists() && step > 0, "{path} at step {step}")
        }
        other => panic!("stopped while its floor was found: {other:?}"),
    }
    let resumed =
        || Trainer::new(config.clone()).unwrap().with_resume(true).run(BackendKind::Ndarray, Precision::F32, &mut ());
    let r = resumed().unwrap();
    assert_eq!(r.floor_source, Some(FloorSource::OwnF64Solution));
    assert!(r.reached, "rmse {:.3e}, bar {:?}", r.rmse, r.bar);
    let again = resumed().unwrap();
    assert_eq!((again.rmse, again.floor, again.bar, again.reached), (r.rmse, r.floor, r.bar, r.reached));
}

/// The trainer's checkpoint directory inside `dir`, and the CLI's arguments for a run on the
/// file `m` in f64 on ndarray.
fn train_file_args(dir: &Path, m: &Path, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = ["--backend", "ndarray", "--precision", "f64", "train", "--quiet", "--seed", "3"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    a.extend(["--target-file".into(), m.display().to_string()]);
    a.extend(["--checkpoint-dir".into(), dir.join("ck").display().to_string()]);
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

#[test]
fn train_target_file_learns_it_and_its_checkpoint_evaluates_against_the_file() {
    let dir = scratch("target-file");
    let path = dir.join("bp.npy");
    save_npy(&path, &[16, 16], entries(&random_bp(16, SEED + 1)));
    let args = train_file_args(&dir, &path, &[]);
    let out = cli(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", stderr(&out));
    let report = last_json(&out);
    let train = &report["train"];
    assert_eq!(train["n"], 16, "N comes from the file: {report}");
    assert_eq!(train["reached"], true, "{report}");
    assert!(train["rmse"].as_f64().is_some_and(|r| r <= F64_TRAIN_BAR), "{report}");
    assert_eq!(train["stages_fixed"], 0, "{report}");
    assert_eq!(train["permutations"], serde_json::json!(["identified"]), "{report}");
    // The checkpoint names the file; eval reads it again and measures the same rmse.
    let ckpt = train["checkpoint"].as_str().expect("a checkpoint").to_string();
    let eval = cli(&["--backend", "ndarray", "eval", "--checkpoint", &ckpt]);
    assert!(eval.status.success(), "{}", stderr(&eval));
    let rmse = last_json(&eval)["rmse"].as_f64().expect("an rmse");
    assert!(rmse <= F64_TRAIN_BAR, "eval: {rmse:e}");
    // Another matrix in the file: the checkpoint is not evaluated against it.
    save_npy(&path, &[16, 16], entries(&random_bp(16, SEED + 2)));
    let eval = cli(&["--backend", "ndarray", "eval", "--checkpoint", &ckpt]);
    assert_eq!(eval.status.code(), Some(2), "{}", stderr(&eval));
    assert!(stderr(&eval).contains("the file changed"), "{}", stderr(&eval));
}

#[test]
fn a_matrix_no_butterfly_represents_ends_with_its_rmse_and_exit_1() {
    let dir = scratch("unitary-file");
    let path = dir.join("u.npy");
    save_npy(&path, &[8, 8], entries(&random_unitary(8, SEED)));
    let args = train_file_args(&dir, &path, &["--adam-steps", "300", "--polish-iters", "20"]);
    let out = cli(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("matrix at N = 8: rmse") && !err.contains("panicked"), "{err}");
    let report = last_json(&out);
    assert_eq!(report["train"]["reached"], false, "{report}");
    // No permutation makes it a butterfly: the model kept the identity.
    assert_eq!(report["train"]["permutations"], serde_json::json!(["identity"]), "{report}");
    // Its best rmse is reported: finite, and far above the bar (a random unitary is no BP).
    assert!(report["train"]["rmse"].as_f64().is_some_and(|r| r.is_finite() && r > 1e-3), "{report}");
}

/// An f32 run of a product searches in f64 and hands over butterflies only where the search's
/// best fit came below its early stop: BPBP fits a random unitary at N = 16 behind no candidate,
/// so nothing is handed over, and the run trains from random weights and ends with its rmse,
/// exit 1 (an empty hand-over once panicked).
#[test]
fn an_f32_product_whose_search_fits_nothing_ends_with_its_rmse_and_exit_1() {
    let dir = scratch("unitary-bpbp-f32");
    let path = dir.join("u.npy");
    save_npy(&path, &[16, 16], entries(&random_unitary(16, SEED)));
    let mut args = train_file_args(&dir, &path, &["--model", "bpbp", "--restarts", "0", "--adam-steps", "300"]);
    args.extend(["--polish-iters", "20"].map(String::from));
    let f64_at = args.iter().position(|a| a == "f64").expect("the precision");
    args[f64_at] = "f32".into();
    let out = cli(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let report = last_json(&out);
    assert_eq!((report["train"]["reached"].as_bool(), report["train"]["model"].as_str()), (Some(false), Some("BPBP")));
    assert!(report["train"]["rmse"].as_f64().is_some_and(|r| r.is_finite() && r > 1e-3), "{report}");
    // Trained from random weights: its first record is Adam's.
    let first = err
        .lines()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok().filter(|v| v["progress"].is_object()));
    assert_eq!(first.map(|v| v["progress"]["phase"].clone()), Some(serde_json::json!("adam")), "{err}");
}

#[test]
fn bad_target_files_are_refused_naming_the_file_and_the_problem() {
    let dir = scratch("bad-target-files");
    let good = entries(&random_bp(8, SEED));
    let file = |name: &str| dir.join(name);
    let mut nan = good.clone();
    nan[9] = Complex64::new(f64::NAN, 0.0);
    let mut inf = good.clone();
    inf[3] = Complex64::new(0.0, f64::INFINITY);
    save_npy(&file("rect.npy"), &[8, 4], good[..32].to_vec());
    save_npy(&file("six.npy"), &[6, 6], good[..36].to_vec());
    save_npy(&file("cube.npy"), &[2, 2, 2], good[..8].to_vec());
    save_npy(&file("nan.npy"), &[8, 8], nan);
    save_npy(&file("inf.npy"), &[8, 8], inf);
    save_npy(&file("int.npy"), &[8, 8], (0..64i64).collect());
    save_npy(&file("good.npy"), &[8, 8], good.clone());
    let bytes = std::fs::read(file("good.npy")).unwrap();
    std::fs::write(file("short.npy"), &bytes[..bytes.len() - 10]).unwrap();
    std::fs::write(file("long.npy"), [&bytes[..], &[0u8; 16]].concat()).unwrap();
    std::fs::write(file("text.npy"), "0 1\n1 0\n").unwrap();
    let cases: [(&str, &[&str]); 11] = [
        ("rect.npy", &["a square matrix", "8×4"]),
        ("six.npy", &["power of two", "6×6"]),
        ("cube.npy", &["two-dimensional", "[2, 2, 2]"]),
        ("nan.npy", &["finite entries", "NaN", "(1, 1)"]),
        ("inf.npy", &["finite entries", "inf", "(0, 3)"]),
        ("int.npy", &["float32, float64, complex64 or complex128", "<i8"]),
        ("short.npy", &["truncated"]),
        ("long.npy", &["longer than its array"]),
        ("text.npy", &["numpy .npy file"]),
        ("missing.npy", &["missing.npy"]),
        // A size that is not the file's.
        ("good.npy", &["n = 8 (the size of the target matrix", "got 16"]),
    ];
    for (name, parts) in cases {
        let path = file(name);
        let extra: &[&str] = if name == "good.npy" { &["--n", "16"] } else { &[] };
        let args = train_file_args(&dir.join(name.replace('.', "-")), &path, extra);
        let out = cli(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name} panicked: {err}");
        assert!(err.contains(name), "{name}: the error names the file: {err}");
        for part in parts {
            assert!(err.contains(part), "{name}: the error should mention {part:?}: {err}");
        }
        assert!(!dir.join(name.replace('.', "-")).exists(), "{name}: nothing is written");
    }
}
