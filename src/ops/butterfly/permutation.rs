//! The input permutation applied before the butterfly factors.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::reference::factorizations::bit_reversal;

/// Permutation applied to the input before the first butterfly factor.
///
/// With increasing strides (decimation in time) the exact FFT needs [`Permutation::BitReversal`].
/// Other targets need other permutations ([`crate::reference::factorizations`]); a learned
/// permutation ends as one too. [`Permutation::gather`] builds any of them from its gather
/// indices and returns the named variant where there is one, so two equal permutations compare
/// equal however they were built.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Permutation {
    /// `y[i] = x[bitrev(i)]`, reversing the log2(n) bits of the index.
    #[default]
    BitReversal,
    /// No permutation.
    Identity,
    /// Any other permutation, by its gather indices: `y[i] = x[indices[i]]`. Build it with
    /// [`Permutation::gather`], which checks the indices.
    Gather(Vec<usize>),
}

impl Permutation {
    /// Gather indices for size `n`: the permuted vector is `y[i] = x[indices[i]]`. (A
    /// [`Permutation::Gather`] has its own size; `n` is not used for it.)
    pub fn indices(&self, n: usize) -> Vec<usize> {
        match self {
            Permutation::Identity => (0..n).collect(),
            Permutation::BitReversal => bit_reversal(n),
            Permutation::Gather(indices) => indices.clone(),
        }
    }

    /// The permutation with these gather indices (`y[i] = x[indices[i]]`): the identity or the
    /// bit reversal where it is one of them, [`Permutation::Gather`] otherwise.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `indices` is not a permutation of `0..indices.len()`.
    pub fn gather(indices: Vec<usize>) -> Result<Permutation> {
        let n = indices.len();
        let mut seen = vec![false; n];
        for (i, &j) in indices.iter().enumerate() {
            if j >= n || std::mem::replace(&mut seen[j], true) {
                return Err(Error::invalid(
                    "permutation",
                    format!("each index in 0..{n} exactly once"),
                    format!("{j} at position {i}"),
                ));
            }
        }
        Ok([Permutation::BitReversal, Permutation::Identity]
            .into_iter()
            .find(|p| p.indices(n) == indices)
            .unwrap_or(Permutation::Gather(indices)))
    }

    /// Whether the permutation can act on vectors of size `n` (a [`Permutation::Gather`] has
    /// exactly `n` indices; the named ones fit every size).
    pub fn fits(&self, n: usize) -> bool {
        match self {
            Permutation::Gather(indices) => indices.len() == n,
            _ => true,
        }
    }

    /// [`fits`](Self::fits), as an error naming `op`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the permutation does not act on size `n`.
    pub fn check_fits(&self, op: &'static str, n: usize) -> Result<()> {
        match self {
            Permutation::Gather(indices) if indices.len() != n => {
                Err(Error::invalid(op, format!("a permutation of {n} indices"), indices.len()))
            }
            _ => Ok(()),
        }
    }
}
