//! A user's own operator as the target: learned from its images alone, grown from its member of
//! half the size, and refused with a clear error when it is not an operator the trainer can take.

use learned_fft::backend::{BackendKind, Precision};
use learned_fft::nn::PermutationSource;
use learned_fft::train::checkpoint::CONFIG_FILE;
use learned_fft::train::FloorSource;
use learned_fft::{Error, Operator, OperatorTarget, Result, Target, TrainConfig, TrainReport, Trainer};
use num_complex::Complex64;

use crate::common::{scratch, KronHadamardDft};

/// The f64 bar: what a learned target must reach in f64 (as for the built-ins).
const F64_TRAIN_BAR: f64 = 1e-14;

fn kron() -> Target {
    Target::Operator(OperatorTarget::new(KronHadamardDft { wrong_adjoint: false }).expect("a valid operator"))
}

fn train(config: TrainConfig, precision: Precision) -> Result<TrainReport> {
    Trainer::new(config)?.run(BackendKind::Ndarray, precision, &mut ())
}

#[test]
fn an_operator_is_learned_from_its_images_alone() {
    // H₂ ⊗ DFT₈ at N = 16: a butterfly after the permutation I₂ ⊗ (bit reversal of 8), which
    // the trainer finds from the operator's images of the basis.
    let n = 16;
    let r = train(TrainConfig::new(n).with_target(kron()).with_seed(1), Precision::F64).unwrap();
    assert!(r.reached && r.rmse <= F64_TRAIN_BAR, "rmse {:.3e}", r.rmse);
    assert_eq!(r.floor, None, "no factorization of a user's operator is known");
    assert_eq!((r.model.as_str(), r.stages_learned, r.stages_fixed), ("BP", 4, 0));
    assert_eq!(r.permutations, [PermutationSource::Identified]);
    // In f32 the bar is the rounding of the model's own f64 solution, as for a matrix.
    let r = train(TrainConfig::new(8).with_target(kron()).with_seed(1), Precision::F32).unwrap();
    assert_eq!(r.floor_source, Some(FloorSource::OwnF64Solution));
    let floor = r.floor.expect("the f64 polish found a solution");
    assert_eq!(r.bar, Some(learned_fft::metrics::F32_OWN_BAR_OVER_FLOOR * floor));
    assert!(r.reached && floor < 1e-6, "rmse {:e}, floor {floor:e}", r.rmse);
}

#[test]
fn an_operator_family_grows_from_its_member_of_half_the_size() {
    // A user's FFT (rustfft, unitary) from N = 8 (the permutation found there) to 32 by
    // doubling: the permutation at 16 and 32 is the doubled one, not found again.
    let my_fft = Target::Operator(OperatorTarget::new(Scaled { name: "my fft", scale: 1.0 }).unwrap());
    let config = TrainConfig::new(32).with_target(my_fft).with_seed(2).with_grow_above(Some(8));
    let wall = std::time::Instant::now();
    let r = train(config, Precision::F64).unwrap();
    let wall = wall.elapsed().as_secs_f64();
    assert!(r.reached && r.rmse <= F64_TRAIN_BAR, "rmse {:.3e}", r.rmse);
    assert_eq!(r.grown_from, Some(16));
    // The chain's seconds count each size's training once: within the call's wall time (they
    // once counted each half-size run twice, and exceeded it).
    assert!(r.seconds > 0.0 && r.seconds <= wall, "{:.3} s reported in {wall:.3} s", r.seconds);
    assert_eq!(r.permutations, [PermutationSource::Grown]);
    assert_eq!(r.stages_fixed, 0);
    // H₂ ⊗ DFT is a family too, but its member at N is not two of the member at N/2 and a
    // stage: its permutation at 8 (I₂ ⊗ the bit reversal of 4) does not double, and it says so.
    let config = TrainConfig::new(16).with_target(kron()).with_seed(2).with_grow_above(Some(8));
    let msg = train(config, Precision::F64).unwrap_err().to_string();
    assert!(msg.contains("H2 ⊗ DFT") && msg.contains("cannot be grown by doubling"), "{msg}");
}

#[test]
fn a_checkpoint_of_an_operator_run_resumes_only_with_the_operator_given_again() {
    let dir = scratch("operator-resume");
    let n = 8;
    let config =
        TrainConfig::new(n).with_target(kron()).with_seed(3).with_checkpoint_dir(Some(dir.display().to_string()));
    let first = train(config.clone(), Precision::F64).unwrap();
    assert!(first.reached);
    // The checkpoint's config records the operator's name and fingerprint, not its code.
    let text = std::fs::read_to_string(dir.join(CONFIG_FILE)).unwrap();
    let saved: TrainConfig = serde_json::from_str(&text).unwrap();
    let err = Trainer::new(saved).and_then(|t| t.with_resume(true).run(BackendKind::Ndarray, Precision::F64, &mut ()));
    let msg = err.expect_err("the operator is not in the checkpoint").to_string();
    assert!(msg.contains("H2 ⊗ DFT") && msg.contains("give the operator again"), "{msg}");
    // Given again, the run resumes (it had finished: the same result).
    let again = Trainer::new(config).unwrap().with_resume(true);
    let resumed = again.run(BackendKind::Ndarray, Precision::F64, &mut ()).unwrap();
    assert_eq!(resumed.rmse, first.rmse);
    // Another operator under the same name is another target: refused.
    let other = Target::Operator(OperatorTarget::new(Scaled { name: "H2 ⊗ DFT", scale: 2.0 }).unwrap());
    let config =
        TrainConfig::new(n).with_target(other).with_seed(3).with_checkpoint_dir(Some(dir.display().to_string()));
    let msg = train_resumed(config).expect_err("a different operator").to_string();
    assert!(msg.contains("as in the checkpoint"), "{msg}");
}

fn train_resumed(config: TrainConfig) -> Result<TrainReport> {
    Trainer::new(config)?.with_resume(true).run(BackendKind::Ndarray, Precision::F64, &mut ())
}

#[test]
fn bad_operators_are_refused_naming_the_operator_and_the_problem() {
    let refused = |r: Result<OperatorTarget>, words: &[&str]| {
        let msg = r.expect_err("refused").to_string();
        assert!(words.iter().all(|w| msg.contains(w)), "{msg} (expected {words:?})");
    };
    // An adjoint that is not the adjoint.
    refused(OperatorTarget::new(KronHadamardDft { wrong_adjoint: true }), &["H2 ⊗ DFT", "adjoint", "⟨A x, y⟩"]);
    // No size at all, and NaN images.
    refused(OperatorTarget::new(Sized { name: "sizeless", sizes: &[] }), &["sizeless", "none of them"]);
    refused(OperatorTarget::new(Scaled { name: "nan", scale: f64::NAN }), &["nan", "finite images"]);
    // A size it does not have, directly and down a growing chain.
    let only_8 = Target::Operator(OperatorTarget::new(Sized { name: "only 8", sizes: &[8] }).unwrap());
    let msg = train(TrainConfig::new(16).with_target(only_8), Precision::F64).unwrap_err().to_string();
    assert!(msg.contains("only 8") && msg.contains("member of size N = 16"), "{msg}");
    let gap = Target::Operator(OperatorTarget::new(Sized { name: "8 and 32", sizes: &[8, 32] }).unwrap());
    let config = TrainConfig::new(32).with_target(gap).with_grow_above(Some(8));
    let msg = train(config, Precision::F64).unwrap_err().to_string();
    assert!(msg.contains("8 and 32") && msg.contains("N = 16") && msg.contains("grows from"), "{msg}");
    // The operator's own error stops the run, as it was given.
    let failing = Target::Operator(OperatorTarget::new(Failing).unwrap());
    let err = train(TrainConfig::new(8).with_target(failing), Precision::F64).unwrap_err();
    assert!(matches!(&err, Error::InvalidInput { op: "failing operator", .. }), "{err}");
}

/// `scale` times the unitary DFT (rustfft), at every size.
struct Scaled {
    name: &'static str,
    scale: f64,
}

impl Operator for Scaled {
    fn name(&self) -> String {
        self.name.into()
    }
    fn has_size(&self, _: usize) -> bool {
        true
    }
    fn apply(&self, n: usize, x: &mut [Complex64]) -> Result<()> {
        rustfft::FftPlanner::<f64>::new().plan_fft_forward(n).process(x);
        let s = self.scale / (n as f64).sqrt();
        x.iter_mut().for_each(|z| *z *= s);
        Ok(())
    }
}

/// A real-output family grows as one butterfly: the DCT-II with its input gathered into the
/// order a butterfly of its Re(B P) factorization takes (Makhoul's reordering, then the bit
/// reversal), so that `--model b --real-output` can represent it, trained at N = 8 from random
/// weights and grown to 16. The report says what was given: no permutation (the identity), every
/// stage learned. With a permutation to learn (`bp`, the default under the map) growing is
/// refused: a permutation learned at each size does not double.
#[test]
fn a_real_output_family_grows_as_one_butterfly() {
    use learned_fft::nn::ModelChoice;
    let gathered = || Target::Operator(OperatorTarget::new(Gathered).expect("a valid operator"));
    let config = TrainConfig::new(16)
        .with_target(gathered())
        .with_model(Some(ModelChoice::B))
        .with_real_output(true)
        .with_grow_above(Some(8));
    let r = train(config, Precision::F64).unwrap();
    assert!(r.reached && r.rmse <= F64_TRAIN_BAR, "rmse {:.3e}", r.rmse);
    assert_eq!(r.grown_from, Some(8));
    assert_eq!((r.model.as_str(), r.stages_learned, r.stages_fixed), ("Re(B)", 4, 0));
    assert_eq!(r.permutations, [PermutationSource::Identity]);
    let config = TrainConfig::new(16).with_target(gathered()).with_real_output(true).with_grow_above(Some(8));
    let msg = train(config, Precision::F64).unwrap_err().to_string();
    assert!(msg.contains("real-output map except for one butterfly"), "{msg}");
}

/// A product chain whose bottom fits behind no permutation the doubling carries up is refused
/// there, before its bottom trains, naming the family and what to do instead: a dense random
/// matrix at each size (no butterfly product behind any self-similar permutation), BPBP grown
/// from N = 8 to 16.
#[test]
fn a_product_chain_is_refused_at_a_bottom_no_doubling_permutation_fits() {
    use learned_fft::nn::ModelChoice;
    let random = Target::Operator(OperatorTarget::new(Dense { seed: 5 }).expect("a valid operator"));
    let dir = scratch("refused-chain");
    let config = TrainConfig::new(16)
        .with_target(random)
        .with_model(Some(ModelChoice::Bpbp))
        .with_grow_above(Some(8))
        .with_checkpoint_dir(Some(dir.display().to_string()));
    let msg = train(config, Precision::F64).expect_err("refused at the chain's bottom").to_string();
    for words in ["dense random", "N = 8", "cannot be grown by doubling", "N = 16 without grow_above"] {
        assert!(msg.contains(words), "{words:?} missing from: {msg}");
    }
    // Nothing written, at N = 16 or in the bottom's own directory: no checkpoint, no config.
    fn files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let entries: Vec<std::path::PathBuf> =
            std::fs::read_dir(dir).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
        entries.into_iter().flat_map(|p| if p.is_dir() { files(&p) } else { vec![p] }).collect()
    }
    let written: Vec<_> = files(&dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "lfft") || p.ends_with(CONFIG_FILE))
        .collect();
    assert!(written.is_empty(), "written before the refusal: {written:?}");
}

/// A dense matrix of standard normal entries (seeded per size) at every size.
struct Dense {
    seed: u64,
}

impl Operator for Dense {
    fn name(&self) -> String {
        "dense random".into()
    }
    fn has_size(&self, n: usize) -> bool {
        n >= 2
    }
    fn apply(&self, n: usize, x: &mut [Complex64]) -> Result<()> {
        let entries = crate::common::normals(self.seed + n as u64, 2 * n * n);
        for v in x.chunks_mut(n) {
            let y: Vec<Complex64> = (0..n)
                .map(|k| {
                    (0..n).map(|j| Complex64::new(entries[2 * (k * n + j)], entries[2 * (k * n + j) + 1]) * v[j]).sum()
                })
                .collect();
            v.copy_from_slice(&y);
        }
        Ok(())
    }
}

/// The DCT-II whose member of size N takes its input gathered by Makhoul's reordering (even
/// samples ascending, odd ones descending), then the bit reversal: `y = C z`, `z[p[i]] = x[i]`.
struct Gathered;

impl Operator for Gathered {
    fn name(&self) -> String {
        "gathered DCT-II".into()
    }
    fn has_size(&self, n: usize) -> bool {
        n >= 2
    }
    fn apply(&self, n: usize, x: &mut [Complex64]) -> Result<()> {
        // The first permutation of the DCT-II's exact factorization is that gather.
        let p = learned_fft::reference::factorizations::permutations(&Target::Dct2, n)?.swap_remove(0);
        for chunk in x.chunks_mut(n) {
            let mut z = vec![Complex64::new(0.0, 0.0); n];
            p.iter().zip(chunk.iter()).for_each(|(&j, &v)| z[j] = v);
            Target::Dct2.apply(n, &mut z)?;
            chunk.copy_from_slice(&z);
        }
        Ok(())
    }
}

/// The identity, of the sizes given.
struct Sized {
    name: &'static str,
    sizes: &'static [usize],
}

impl Operator for Sized {
    fn name(&self) -> String {
        self.name.into()
    }
    fn has_size(&self, n: usize) -> bool {
        self.sizes.contains(&n)
    }
    fn apply(&self, _: usize, _: &mut [Complex64]) -> Result<()> {
        Ok(())
    }
}

/// An operator whose code fails on batches of more than one vector (what a run asks for).
struct Failing;

impl Operator for Failing {
    fn name(&self) -> String {
        "failing".into()
    }
    fn has_size(&self, _: usize) -> bool {
        true
    }
    fn apply(&self, n: usize, x: &mut [Complex64]) -> Result<()> {
        if x.len() > n {
            return Err(Error::invalid("failing operator", "one vector at a time", x.len() / n));
        }
        Ok(())
    }
}
