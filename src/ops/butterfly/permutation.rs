//! The fixed input permutation applied before the butterfly factors.

use serde::{Deserialize, Serialize};

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
            Permutation::BitReversal => {
                let bits = n.trailing_zeros();
                (0..n).map(|i| if bits == 0 { i } else { i.reverse_bits() >> (usize::BITS - bits) }).collect()
            }
        }
    }
}
