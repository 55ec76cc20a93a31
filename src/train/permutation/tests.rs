//! Unit tests of the permutation search and relaxation.

use burn::backend::Autodiff;

use std::sync::atomic::AtomicBool;

use super::memo::Memo;
use super::scorer::{own_scale, Scorer};
use super::{carried_up, family_member, search_fitted, self_similar, stands_apart, MemoFile};
use super::{LearnedPermutation, PermutationSearch, Scored, APART};
use crate::backend::{NdArrayBackend, Precision};
use crate::error::Error;
use crate::ops::Permutation;
use crate::reference::ComplexMatrix;
use crate::reference::Target;
use crate::train::checkpoint::SEARCH_FILE;
use crate::train::objective::Objective;
use crate::train::objective::Probes;
use num_complex::Complex64;

/// The polish after the scoring fit separates a right permutation from a wrong one where
/// the fit alone does not: the DFT at N = 16 behind the bit reversal, after a fit cut short
/// above the early stop, polishes below it; behind the identity (no butterfly there is the
/// DFT) the polish stays within a factor of ten of the target's scale.
#[test]
fn the_polish_after_the_fit_tells_the_right_permutation_from_a_wrong_one() {
    type B = Autodiff<NdArrayBackend<f64>>;
    let (n, device) = (16, Default::default());
    let objective = Objective::<B>::new(&Target::Dft, n, &device).unwrap();
    let fit_only = PermutationSearch { score_steps: 30, polish_steps: 0, ..PermutationSearch::default() };
    let polished = PermutationSearch { score_steps: 30, ..PermutationSearch::default() };
    let solved = Scorer::new(&objective, 1, &polished, None, &device).solved;
    let score = |perm: &Permutation, search: &PermutationSearch| {
        Scorer::new(&objective, 1, search, None, &device).fit((perm, &Permutation::Identity), 0).unwrap().0
    };
    let (fit, right) = (score(&Permutation::BitReversal, &fit_only), score(&Permutation::BitReversal, &polished));
    assert!(fit > solved, "the fit alone stopped short of {solved:e}: {fit:e}");
    assert!(right <= solved, "behind the bit reversal the polish reached {right:e}, not {solved:e}");
    let wrong = score(&Permutation::Identity, &polished);
    assert!(wrong > 0.1 * own_scale(&objective), "behind the identity: {wrong:e}");
}

/// A stalled fit is scored once per scorer, with or without a memo: a repeat (a chain's
/// bottom scores the bit reversal and identity pairs again from the seeds its first round
/// fitted them from) returns the same score and no butterflies, at once. The DFT at N = 8
/// behind the identity (no butterfly there is the DFT) stalls.
#[test]
fn a_scorer_fits_a_stalled_candidate_once() {
    type B = Autodiff<NdArrayBackend<f64>>;
    let (n, device) = (8, Default::default());
    let objective = Objective::<B>::new(&Target::Dft, n, &device).unwrap();
    let search = PermutationSearch { score_steps: 30, polish_steps: 2, ..PermutationSearch::default() };
    let stop = AtomicBool::new(false);
    let scorer = Scorer::new(&objective, 1, &search, Some(&stop), &device);
    let id = Permutation::Identity;
    let (first, layers) = scorer.fit((&id, &id), 3).unwrap();
    assert!(first > scorer.solved && !layers.is_empty(), "behind the identity: {first:e}");
    // A fit run again would stop at its first step, asked to.
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (again, layers) = scorer.fit((&id, &id), 3).unwrap();
    assert_eq!(again.to_bits(), first.to_bits());
    assert!(layers.is_empty());
    let other_seed = scorer.fit((&id, &id), 4);
    assert!(matches!(other_seed, Err(Error::Interrupted { .. })), "{other_seed:?}");
}

/// The doubling carries a self-similar candidate to the same rule one level deeper, and
/// nothing else but the bit reversal and the identity. A member followed by the identity at
/// 2N is two copies of itself at N behind the split `Q` its rule makes at the top level
/// alone, at every size: the doubled layer is the half-size one on both halves of the split
/// a recursive fast algorithm makes (the bit reversal's: even samples, then odd ones;
/// Makhoul's: even samples, then odd ones reversed). A gather that is no candidate (a
/// rotation) carries nowhere. (Where two rules make one gather at N, the first in the
/// search's order is carried: either doubles the layer exactly, behind its own split. At
/// N = 8, 32, 128 the member separating and reversing both halves at every level, then the
/// identity, is the one reversing both halves at every level, then the bit reversal.)
#[test]
fn the_doubling_carries_each_self_similar_rule_one_level_deeper() {
    // Q with up[i] = Q[p[i]] on the first half and Q[n + p[i - n]] on the second.
    let split = |n: usize, p: &[usize], up: &[usize]| -> Vec<usize> {
        let mut q = vec![usize::MAX; 2 * n];
        for i in 0..n {
            q[p[i]] = up[i];
            q[n + p[i]] = up[n + i];
        }
        q
    };
    for n in [8, 16, 32, 64] {
        let (at_n, at_2n) = (self_similar(n).unwrap(), self_similar(2 * n).unwrap());
        for (k, p) in at_n.iter().enumerate() {
            // Small sizes make some rules one gather: the first candidate that is it decides.
            if at_n[..k].iter().any(|c| c.indices(n) == p.indices(n)) {
                continue;
            }
            let up = carried_up(p, n).unwrap().expect("a candidate carries up");
            assert_eq!(up.indices(2 * n), at_2n[k].indices(2 * n), "candidate {k} at N = {n}");
            // Candidates 2r are rule r's members followed by the identity.
            if k % 2 == 0 {
                let rule = (k / 2) as u8;
                let levels = (2 * n).trailing_zeros() as usize - 1;
                let mut top = vec![false; 3 * levels];
                (0..3).for_each(|c| top[c] = rule >> (2 - c) & 1 == 1);
                let q = family_member(2 * n, &top).unwrap().indices(2 * n);
                assert_eq!(split(n, &p.indices(n), &up.indices(2 * n)), q, "rule {rule:03b}: N = {n} to {}", 2 * n);
            }
        }
        for p in [Permutation::BitReversal, Permutation::Identity] {
            assert_eq!(carried_up(&p, n).unwrap(), Some(p));
        }
        let rotated = Permutation::gather((0..n).map(|i| (i + 1) % n).collect()).unwrap();
        assert!(at_n.iter().all(|c| c.indices(n) != rotated.indices(n)));
        assert_eq!(carried_up(&rotated, n).unwrap(), None);
    }
}

/// A search stopped part of the way goes on from its memo as if it had never stopped: the
/// same candidates in the same order with the same scores, the same permutation kept, and
/// the memo as the uninterrupted search left it, fitting only what the memo did not hold.
/// A dense matrix of no structure (entries of a sine and a cosine of their indices) is
/// fitted by no butterfly behind any candidate, so every self-similar one is scored and a
/// relaxation follows; the memo holds the fits' scores, all above the early stop. Cut to its first half of them (a stop in the self-similar
/// round, before the relaxation), the resumed search replays exactly those. With the memo
/// whole, a search runs no fit at all: it ends even with the stop flag set. A broken memo is
/// refused naming its file, and one of another search (another fingerprint) is not read.
#[test]
fn a_search_resumed_from_its_memo_takes_the_path_of_one_never_stopped() {
    type B = Autodiff<NdArrayBackend<f64>>;
    let (n, device) = (8, Default::default());
    let dense = ComplexMatrix::from_fn(n, |r, c| {
        Complex64::new((0.7 * (n * r + c) as f64).sin(), (1.3 * (3 * r + 5 * c) as f64).cos()) / (n as f64).sqrt()
    });
    let objective = Objective::<B>::from_probes(&Probes::basis(&dense), &device);
    let search =
        PermutationSearch { seeds: 1, relax_steps: 50, score_steps: 100, polish_steps: 5, ..Default::default() };
    let dir = std::env::temp_dir().join(format!("learned-fft-memo-{}", std::process::id()));
    let file = MemoFile { path: dir.join(SEARCH_FILE), replay: false, fingerprint: 7 };
    let searched = |replay: bool, stop: Option<&AtomicBool>| {
        let memo = Memo::open(&MemoFile { replay, ..file.clone() }, n, 1, Precision::F64, &search)?;
        let scorer = Scorer::new(&objective, 1, &search, stop, &device).with_memo(Some(&memo));
        let solved = scorer.solved;
        search_fitted(&scorer, 0, true).map(|(learned, _)| (learned, memo.replayed(), solved))
    };
    let kept = || -> serde_json::Value { serde_json::from_slice(&std::fs::read(&file.path).unwrap()).unwrap() };
    let same = |a: &LearnedPermutation, b: &LearnedPermutation| {
        let pair = |s: &Scored| (s.first.indices(n), s.later.indices(n), s.score.to_bits());
        assert_eq!(a.tried.iter().map(pair).collect::<Vec<_>>(), b.tried.iter().map(pair).collect::<Vec<_>>());
        assert_eq!(a.permutation.indices(n), b.permutation.indices(n));
    };
    let (whole, replayed, solved) = searched(false, None).unwrap();
    assert_eq!(replayed, 0, "a new search reads no memo");
    let memo = kept();
    let fits = memo["fits"].as_array().unwrap().clone();
    let relaxations = memo["relaxations"].as_array().unwrap().len();
    assert!(fits.len() >= 4 && relaxations >= 1, "{} fits, {relaxations} relaxations kept", fits.len());
    assert!(fits.iter().all(|f| f["score"].as_f64().unwrap() > solved), "a fit below the early stop was kept");
    let cut = fits.len() / 2;
    let mut stopped = memo.clone();
    stopped["fits"] = serde_json::Value::Array(fits[..cut].to_vec());
    stopped["relaxations"] = serde_json::Value::Array(Vec::new());
    std::fs::write(&file.path, serde_json::to_vec(&stopped).unwrap()).unwrap();
    let (resumed, replayed, _) = searched(true, None).unwrap();
    assert_eq!(replayed, cut, "the resumed search fitted again what its memo held");
    same(&resumed, &whole);
    assert_eq!(kept(), memo, "the resumed search's memo");
    let stop = AtomicBool::new(true);
    let (read_back, replayed, _) = searched(true, Some(&stop)).unwrap();
    assert_eq!(replayed, fits.len() + relaxations);
    same(&read_back, &whole);
    // A new search (not resumed) starts its memo afresh, and stops at once.
    assert!(matches!(searched(false, Some(&stop)), Err(Error::Interrupted { step: 0, .. })));
    assert_eq!(kept()["fits"].as_array().unwrap().len(), 0);
    // A memo that is not one is refused, naming the file; one of another search is replaced.
    let mut short = memo.clone();
    short["fits"][0]["first"] = serde_json::json!([0, 1]);
    for (bad, says) in [(b"{\"fits\": [".to_vec(), "remove it"), (serde_json::to_vec(&short).unwrap(), "2 entries")] {
        std::fs::write(&file.path, bad).unwrap();
        match searched(true, None) {
            Err(e @ Error::Checkpoint { .. }) => {
                assert!(e.to_string().contains(says) && e.to_string().contains(SEARCH_FILE), "{e}")
            }
            other => panic!("a broken memo: {other:?}"),
        }
    }
    let mut other = memo.clone();
    other["context"]["fingerprint"] = serde_json::json!(8);
    std::fs::write(&file.path, serde_json::to_vec(&other).unwrap()).unwrap();
    assert!(
        matches!(searched(true, Some(&stop)), Err(Error::Interrupted { step: 0, .. })),
        "another search's memo was read"
    );
    assert_eq!(kept()["context"]["fingerprint"], 7);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The search ends before the relaxations only where the best self-similar score is a
/// tenth of every other's: one candidate alone, or a runner-up within that factor, goes on.
#[test]
fn a_score_stands_apart_only_far_below_every_other() {
    let tried = |scores: &[f64]| -> Vec<Scored> {
        let id = Permutation::Identity;
        scores.iter().map(|&score| Scored { first: id.clone(), later: id.clone(), score }).collect()
    };
    assert!(stands_apart(&tried(&[2.3e-2, 3.7e-4, 7.9e-2, 2.9e-2])));
    assert!(!stands_apart(&tried(&[2.3e-2, 3.7e-4, 7.9e-2, 3.0e-3])), "a runner-up within {APART}");
    assert!(!stands_apart(&tried(&[3.7e-4])), "one candidate has nothing to stand apart from");
    assert!(!stands_apart(&tried(&[])));
}
