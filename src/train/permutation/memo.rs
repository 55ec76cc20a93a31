//! The search's progress, kept in the run's checkpoint directory so that a stopped search
//! resumes where it stopped: the score of every candidate fitted to no solution and every
//! relaxation's hardened gather, written after each. A resumed search takes them from here and
//! fits only the rest; since it decides on scores alone, it takes the same path as one that was
//! never stopped. A candidate that fits is not kept: its butterflies start the run, so a search
//! stopped after it fits it once more.
//!
//! The search comes before a run's first checkpoint and takes minutes where the run's fits are
//! slow (a grown chain's bottom on a busy device: the DCT-II's at N = 32 did not finish in
//! 450 s, shared by 16 runs on one GPU, and every resumed run searched from its start).
//!
//! A memo is kept for one search: the objective's probes (their fingerprint), the number of
//! factors, the search's settings and the backend's precision. One of another search is not
//! read (the run started over in another setting) and is replaced.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::PermutationSearch;
use crate::backend::Precision;
use crate::error::{Error, Result};
use crate::files::write_atomic;
use crate::ops::Permutation;
use crate::train::checkpoint::SEARCH_FILE;

/// Where a run's search keeps its progress, and whether it reads what is there.
#[derive(Clone, Debug)]
pub struct MemoFile {
    /// The memo, `<checkpoint_dir>/search.json`.
    pub path: PathBuf,
    /// Read the memo there (a resumed run); a new run starts it empty.
    pub replay: bool,
    /// The objective's fingerprint (its probes' [`crate::train::objective::Probes::fingerprint`]).
    pub fingerprint: u32,
}

impl MemoFile {
    /// The memo of a run with checkpoint directory `dir` (none without one).
    pub fn in_dir(dir: Option<&str>, replay: bool, fingerprint: u32) -> Option<Self> {
        dir.map(|d| MemoFile { path: Path::new(d).join(SEARCH_FILE), replay, fingerprint })
    }
}

/// What a memo belongs to: a search gives the same scores only on the same objective, in the
/// same class, with the same settings and float format.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Context {
    n: usize,
    factors: usize,
    precision: Precision,
    fingerprint: u32,
    search: PermutationSearch,
}

/// A candidate's score, fitted from `seed`, the later factors behind `later`.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Fit {
    first: Vec<usize>,
    later: Vec<usize>,
    seed: u64,
    score: f64,
}

/// A relaxation from `seed` (the first butterfly behind `after`, the later ones behind
/// `later`), hardened to `gather`.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Relaxation {
    seed: u64,
    after: Vec<usize>,
    later: Vec<usize>,
    gather: Vec<usize>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Contents {
    context: Context,
    fits: Vec<Fit>,
    relaxations: Vec<Relaxation>,
}

/// A search's memo, as the scorer reads and extends it.
#[derive(Debug)]
pub(super) struct Memo {
    path: PathBuf,
    n: usize,
    contents: RefCell<Contents>,
    replayed: Cell<usize>,
}

impl Memo {
    /// The memo at `file` for this search: what a resumed run finds there when it belongs to
    /// this search, empty otherwise; written at once, so a stop before the first candidate
    /// leaves it to resume from.
    ///
    /// # Errors
    /// [`Error::Checkpoint`] when a resumed run's memo cannot be read as one (remove it to search
    /// again); [`Error::Io`] when it cannot be written.
    pub(super) fn open(
        file: &MemoFile,
        n: usize,
        factors: usize,
        precision: Precision,
        search: &PermutationSearch,
    ) -> Result<Self> {
        let context = Context { n, factors, precision, fingerprint: file.fingerprint, search: search.clone() };
        let kept = match file.replay {
            true => read(&file.path)?.filter(|c| c.context == context),
            false => None,
        };
        let contents = kept.unwrap_or(Contents { context, fits: Vec::new(), relaxations: Vec::new() });
        let memo = Memo { path: file.path.clone(), n, contents: RefCell::new(contents), replayed: Cell::new(0) };
        memo.save()?;
        Ok(memo)
    }

    /// The file.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// How many fits and relaxations were taken from the memo rather than run.
    #[cfg(test)]
    pub(super) fn replayed(&self) -> usize {
        self.replayed.get()
    }

    /// The score kept for the candidate `(first, later)` fitted from `seed`.
    pub(super) fn fit(&self, (first, later): (&Permutation, &Permutation), seed: u64) -> Option<f64> {
        let (first, later) = (first.indices(self.n), later.indices(self.n));
        let contents = self.contents.borrow();
        let hit = contents.fits.iter().find(|f| f.seed == seed && f.first == first && f.later == later)?;
        self.replayed.set(self.replayed.get() + 1);
        Some(hit.score)
    }

    /// Keeps a candidate's score.
    pub(super) fn keep_fit(&self, (first, later): (&Permutation, &Permutation), seed: u64, score: f64) -> Result<()> {
        let fit = Fit { first: first.indices(self.n), later: later.indices(self.n), seed, score };
        self.contents.borrow_mut().fits.push(fit);
        self.save()
    }

    /// The gather kept for the relaxation from `seed` behind `after` and `later`.
    pub(super) fn relaxation(
        &self,
        seed: u64,
        after: &Permutation,
        later: &Permutation,
    ) -> Result<Option<Permutation>> {
        let (after, later) = (after.indices(self.n), later.indices(self.n));
        let contents = self.contents.borrow();
        let Some(hit) = contents.relaxations.iter().find(|r| r.seed == seed && r.after == after && r.later == later)
        else {
            return Ok(None);
        };
        self.replayed.set(self.replayed.get() + 1);
        Permutation::gather(hit.gather.clone()).map(Some).map_err(|e| corrupt(&self.path, e.to_string()))
    }

    /// Keeps a relaxation's hardened gather.
    pub(super) fn keep_relaxation(
        &self,
        seed: u64,
        after: &Permutation,
        later: &Permutation,
        gather: &Permutation,
    ) -> Result<()> {
        let relaxation = Relaxation {
            seed,
            after: after.indices(self.n),
            later: later.indices(self.n),
            gather: gather.indices(self.n),
        };
        self.contents.borrow_mut().relaxations.push(relaxation);
        self.save()
    }

    /// Writes the memo atomically: a stop mid-write leaves the former one.
    fn save(&self) -> Result<()> {
        let json = serde_json::to_vec(&*self.contents.borrow())
            .map_err(|e| corrupt(&self.path, format!("cannot encode the search's progress: {e}")))?;
        write_atomic("train.search", &self.path, &json)
    }
}

/// The memo at `path`, none where there is no file.
fn read(path: &Path) -> Result<Option<Contents>> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("train.search", path, e)),
    };
    let contents: Contents = serde_json::from_slice(&bytes)
        .map_err(|e| corrupt(path, format!("not a permutation search's progress ({e}); remove it to search again")))?;
    let n = contents.context.n;
    let fits = contents.fits.iter().flat_map(|f| [f.first.len(), f.later.len()]);
    let mut sizes =
        fits.chain(contents.relaxations.iter().flat_map(|r| [r.after.len(), r.later.len(), r.gather.len()]));
    if let Some(bad) = sizes.find(|&len| len != n) {
        return Err(corrupt(path, format!("a permutation of {bad} entries in a search at N = {n}")));
    }
    if let Some(f) = contents.fits.iter().find(|f| !(f.score.is_finite() && f.score >= 0.0)) {
        return Err(corrupt(path, format!("a score of {}", f.score)));
    }
    Ok(Some(contents))
}

fn corrupt(path: &Path, reason: impl Into<String>) -> Error {
    Error::Checkpoint { path: path.display().to_string(), reason: reason.into() }
}
