//! Which input permutation makes a matrix a butterfly: the discrete half of learning a
//! (permutation, butterfly) factor, solved exactly from the matrix instead of by relaxation.
//!
//! # Method
//! A butterfly ([`super::butterfly`]) of size m = 2h is `B = S · diag(B₁, B₂)`: its last stage
//! `S` mixes the outputs `p` and `p + h` with one 2×2 block each, and the stages before act on
//! the two halves alone, as two butterflies of size h. So rows `p` and `p + h` of `B`,
//! restricted to the left half of the columns, are both multiples of row `p` of `B₁` (and on the
//! right half of `B₂`): the 2-vectors `(B[p, j], B[p + h, j])` of the columns `j` of one half
//! are all parallel. Conversely, a matrix with that property for every p factors that way
//! (row p of `B₁` is either of the two rows, up to a scale the last stage absorbs), and it is a
//! butterfly when the two halves are, recursively. This hierarchical rank-one structure is the
//! one Zheng, Riccietti and Gribonval identify butterfly factors by ("Efficient identification
//! of butterfly sparse matrix factorizations", SIAM J. Math. Data Sci. 5(1), 2023).
//!
//! For `T = B · P` with an unknown column permutation `P`, the halves are not known, but the
//! property says which columns go together: for every p, the columns whose 2-vectors point in
//! different directions lie in different halves. [`butterfly_permutation`] groups the columns
//! by direction at every level (a two-colouring of the columns, balanced to h and h) and
//! recurses into each half, in O(N² log N) for an N×N matrix. The permutation it returns is
//! unique up to exchanging the two halves of any level, which keeps a butterfly a butterfly
//! (it exchanges two sub-butterflies and the columns of the blocks that combine them); it puts
//! the half holding the smaller column index first, so the DFT gets the bit reversal and the
//! Hadamard transform the identity.
//!
//! Dao et al. (ICML 2019) learn the same choice by gradient descent on a relaxation (at each
//! level, probabilities of separating even and odd indices and of reversing the halves), which
//! needs a search over hyperparameters and reaches only the permutations of that family; this
//! finds any permutation that works, or shows that none does.

use num_complex::Complex64;

use super::matrix::ComplexMatrix;
use crate::error::{check_power_of_two, Result};

/// Relative tolerance of [`butterfly_permutation`] for matrices exact in f64: a 2-vector is zero
/// below this fraction of its rows' RMS magnitude, and two are parallel when the sine of their
/// angle is below it. f64 targets are exact to ~1e-15; a wrong grouping is off by O(1).
pub const F64_TOLERANCE: f64 = 1e-9;

/// Gather indices `perm` (`x ← x[perm]`) such that `t` is a butterfly after `perm`
/// (`t = B · P`, `(P x)[i] = x[perm[i]]`), or `None` when no permutation makes it one (within
/// `tol`, relative; see [`F64_TOLERANCE`]). See the module docs for the method.
///
/// # Errors
/// [`crate::Error::InvalidInput`] when the size of `t` is not a power of two ≥ 2.
pub fn butterfly_permutation(t: &ComplexMatrix, tol: f64) -> Result<Option<Vec<usize>>> {
    let n = t.n();
    check_power_of_two("identify.butterfly_permutation", n)?;
    let rows: Vec<Vec<Complex64>> = (0..n).map(|r| t.as_slice()[r * n..(r + 1) * n].to_vec()).collect();
    Ok(split(rows, (0..n).collect(), tol))
}

/// The ordering of `cols` (the original indices of the columns of `rows`, an m×m block that
/// must be a butterfly after it), or `None`.
fn split(rows: Vec<Vec<Complex64>>, cols: Vec<usize>, tol: f64) -> Option<Vec<usize>> {
    let m = cols.len();
    if m <= 2 {
        // One 2×2 block is any 2×2 matrix.
        let mut cols = cols;
        cols.sort_unstable();
        return Some(cols);
    }
    let h = m / 2;
    let mut colours = Colouring::new(m);
    // Once one component spans every column the halves are known (up to exchanging them): the
    // remaining pairs are only checked, each half's columns against its first one.
    let mut halves: Option<Vec<bool>> = None;
    for p in 0..h {
        let (a, b) = (&rows[p], &rows[p + h]);
        let scale_sqr = (norm_sqr(a) + norm_sqr(b)) / m as f64;
        if scale_sqr == 0.0 {
            continue;
        }
        let zero = |j: usize| a[j].norm_sqr() + b[j].norm_sqr() <= tol * tol * scale_sqr;
        if let Some(left) = &halves {
            let mut first: [Option<usize>; 2] = [None, None];
            for j in (0..m).filter(|&j| !zero(j)) {
                match first[usize::from(left[j])] {
                    Some(r) if !parallel((a[r], b[r]), (a[j], b[j]), tol) => return None,
                    Some(_) => {}
                    None => first[usize::from(left[j])] = Some(j),
                }
            }
            continue;
        }
        // One representative column per direction; a third direction rules out every split.
        let mut reps: Vec<usize> = Vec::with_capacity(2);
        for j in (0..m).filter(|&j| !zero(j)) {
            let v = (a[j], b[j]);
            match reps.iter().position(|&r| parallel((a[r], b[r]), v, tol)) {
                Some(0) => colours.join(reps[0], j, false)?,
                Some(_) => colours.join(reps[0], j, true)?,
                None if reps.is_empty() => reps.push(j),
                None if reps.len() == 1 => {
                    colours.join(reps[0], j, true)?;
                    reps.push(j);
                }
                None => return None,
            }
        }
        if colours.components == 1 {
            halves = Some(colours.balanced(h)?);
        }
    }
    let left = match halves {
        Some(left) => left,
        None => colours.balanced(h)?,
    };
    // The half holding the smallest original column comes first.
    let (mut first, mut second): (Vec<usize>, Vec<usize>) = (0..m).partition(|&j| left[j]);
    if second.iter().map(|&j| cols[j]).min() < first.iter().map(|&j| cols[j]).min() {
        std::mem::swap(&mut first, &mut second);
    }
    let mut order = Vec::with_capacity(m);
    for half in [first, second] {
        // Row p of the half's sub-butterfly: whichever of rows p, p + h is larger (both are
        // multiples of it where the split is right; the recursion checks the rest).
        let sub: Vec<Vec<Complex64>> = (0..h)
            .map(|p| {
                let on_half = |r: &[Complex64]| half.iter().map(|&j| r[j].norm_sqr()).sum::<f64>();
                let r = if on_half(&rows[p]) >= on_half(&rows[p + h]) { &rows[p] } else { &rows[p + h] };
                half.iter().map(|&j| r[j]).collect()
            })
            .collect();
        order.extend(split(sub, half.iter().map(|&j| cols[j]).collect(), tol)?);
    }
    Some(order)
}

fn norm_sqr(v: &[Complex64]) -> f64 {
    v.iter().map(|z| z.norm_sqr()).sum()
}

/// Whether two nonzero 2-vectors are parallel: |det| ≤ tol · |u| · |v|.
fn parallel(u: (Complex64, Complex64), v: (Complex64, Complex64), tol: f64) -> bool {
    let det = (u.0 * v.1 - u.1 * v.0).norm_sqr();
    det <= tol * tol * (u.0.norm_sqr() + u.1.norm_sqr()) * (v.0.norm_sqr() + v.1.norm_sqr())
}

/// A two-colouring under constraints "same colour" / "different colours", kept as a union–find
/// with each element's parity relative to its root.
struct Colouring {
    parent: Vec<usize>,
    /// Parity relative to the parent.
    parity: Vec<bool>,
    /// The number of components.
    components: usize,
}

impl Colouring {
    fn new(m: usize) -> Self {
        Colouring { parent: (0..m).collect(), parity: vec![false; m], components: m }
    }

    /// The root of `i` and `i`'s parity relative to it (compressing the path).
    fn find(&mut self, i: usize) -> (usize, bool) {
        let (mut root, mut parity) = (i, false);
        while self.parent[root] != root {
            parity ^= self.parity[root];
            root = self.parent[root];
        }
        // Point every node on the path at the root, with its parity relative to the root.
        let (mut v, mut pv) = (i, parity);
        while v != root && self.parent[v] != root {
            let (next, next_parity) = (self.parent[v], pv ^ self.parity[v]);
            self.parent[v] = root;
            self.parity[v] = pv;
            (v, pv) = (next, next_parity);
        }
        (root, parity)
    }

    /// Constrains `i` and `j` to differ (`differ`) or to agree; `None` on a contradiction.
    fn join(&mut self, i: usize, j: usize, differ: bool) -> Option<()> {
        let ((ri, pi), (rj, pj)) = (self.find(i), self.find(j));
        if ri == rj {
            return (pi ^ pj == differ).then_some(());
        }
        self.parent[rj] = ri;
        self.parity[rj] = pi ^ pj ^ differ;
        self.components -= 1;
        Some(())
    }

    /// A colouring with exactly `h` elements `true` (of 2h), or `None`. Each component can be
    /// flipped as a whole; the sizes are matched by a subset sum over the components.
    fn balanced(&mut self, h: usize) -> Option<Vec<bool>> {
        let m = self.parent.len();
        let mut comps: Vec<[usize; 2]> = Vec::new();
        let mut index = vec![usize::MAX; m];
        let comp_of: Vec<usize> = (0..m)
            .map(|i| {
                let (root, parity) = self.find(i);
                if index[root] == usize::MAX {
                    index[root] = comps.len();
                    comps.push([0, 0]);
                }
                comps[index[root]][usize::from(parity)] += 1;
                index[root]
            })
            .collect();
        // reach[c][s]: whether components 0..c can put s elements on the `true` side; choose
        // the orientation of each component backwards.
        let mut reach = vec![vec![false; h + 1]; comps.len() + 1];
        reach[0][0] = true;
        for (c, sizes) in comps.iter().enumerate() {
            for s in 0..=h {
                if reach[c][s] {
                    for &k in sizes {
                        if s + k <= h {
                            reach[c + 1][s + k] = true;
                        }
                    }
                }
            }
        }
        if !reach[comps.len()][h] {
            return None;
        }
        // flip[c]: the component's parity-`true` elements go to the `true` side.
        let mut flip = vec![false; comps.len()];
        let mut s = h;
        for c in (0..comps.len()).rev() {
            let sizes = comps[c];
            let zero_side = s >= sizes[0] && reach[c][s - sizes[0]];
            flip[c] = !zero_side;
            s -= if zero_side { sizes[0] } else { sizes[1] };
        }
        Some(
            (0..m)
                .map(|i| {
                    let parity = self.find(i).1;
                    parity == flip[comp_of[i]]
                })
                .collect(),
        )
    }
}
