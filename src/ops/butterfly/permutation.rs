//! The fixed input permutation applied before the butterfly factors.

use serde::{Deserialize, Serialize};

use crate::reference::factorizations::bit_reversal;

/// Permutation applied to the input before the first butterfly factor.
///
/// With increasing strides (decimation in time) the exact FFT needs [`Permutation::BitReversal`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Permutation {
    /// `y[i] = x[bitrev(i)]`, reversing the log2(n) bits of the index.
    #[default]
    BitReversal,
    /// No permutation.
    Identity,
}

impl Permutation {
    /// Gather indices: the permuted vector is `y[i] = x[indices[i]]`.
    pub fn indices(self, n: usize) -> Vec<usize> {
        match self {
            Permutation::Identity => (0..n).collect(),
            Permutation::BitReversal => bit_reversal(n),
        }
    }

    /// The permutation whose gather indices for size `n` are `indices`, when it is one of these.
    pub fn from_indices(indices: &[usize]) -> Option<Permutation> {
        let n = indices.len();
        [Permutation::BitReversal, Permutation::Identity].into_iter().find(|p| p.indices(n) == indices)
    }
}
