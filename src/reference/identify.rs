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
//! **Under a fixed outer factor** ([`factor_permutation`]): the real transforms' class is
//! `T = M · B · P` with `M` a pairing of outputs k and −k whose 2×2 values are learned, so only
//! `M`'s pattern is known. Rows `k` and `−k` of `T` then span the same space as rows `k` and
//! `−k` of `B · P`, and the rank structure holds for spans: at a level of size m = 2h the rows
//! `{p, p + h, −p, −p + h}` of `B · P` span, on the columns of either half, the two rows
//! `{p, −p} mod h` of that half's sub-butterfly, a plane. So the column vectors of those four
//! rows of `T` lie in two planes meeting only at 0, one per half; the plane through two columns
//! holds a third direction only if both columns are in the same half (a plane through one
//! column of each half holds only vectors parallel to one of them), which is how the halves are
//! told apart, and the recursion carries each half's plane (the two most independent of the
//! four rows restricted to it) down as the span of its rows `{p, −p} mod h`.
//!
//! Dao et al. (ICML 2019) learn the same choice by gradient descent on a relaxation (at each
//! level, probabilities of separating even and odd indices and of reversing the halves), which
//! needs a search over hyperparameters and reaches only the permutations of that family; this
//! finds any permutation that works, or shows that none does.

use num_complex::Complex64;

use super::matrix::ComplexMatrix;
use crate::error::{check_power_of_two, Error, Result};

/// Relative tolerance of [`butterfly_permutation`] for matrices exact in f64: a 2-vector is zero
/// below this fraction of its rows' RMS magnitude, and two are parallel when the sine of their
/// angle is below it. f64 targets are exact to ~1e-15; a wrong grouping is off by O(1).
pub const F64_TOLERANCE: f64 = 1e-9;

/// The same for matrices given in single precision (a user's float32 file): their entries are
/// exact to ~6e-8 relative, and the rank tests' sums add a few ulps of f64 on top; a wrong
/// grouping is still off by O(1), so 1e-4 keeps three orders of margin on both sides.
pub const F32_TOLERANCE: f64 = 1e-4;

/// Gather indices `perm` (`x ← x[perm]`) such that `t` is a butterfly after `perm`
/// (`t = B · P`, `(P x)[i] = x[perm[i]]`), or `None` when no permutation makes it one (within
/// `tol`, relative; see [`F64_TOLERANCE`]). See the module docs for the method.
///
/// # Errors
/// [`crate::Error::InvalidInput`] when the size of `t` is not a power of two ≥ 2.
pub fn butterfly_permutation(t: &ComplexMatrix, tol: f64) -> Result<Option<Vec<usize>>> {
    let n = t.n();
    check_power_of_two("identify.butterfly_permutation", n)?;
    let groups = (0..n).map(|r| Group { index: vec![r], rows: vec![t.row(r).to_vec()] }).collect();
    Ok(split(groups, (0..n).collect(), tol))
}

/// The representative of `perm`'s class of gathers under a butterfly's symmetries, the one
/// [`butterfly_permutation`] returns: at every level the half holding the smaller index first,
/// each half ordered the same way.
///
/// A butterfly behind `perm` with the halves of any aligned block of positions exchanged makes
/// the same matrices as one behind `perm` (the exchange moves the sub-butterflies the stages
/// below it apply to the two halves, and swaps the columns of the blocks that combine them), so
/// gathers of one representative are one choice to a model that puts a butterfly behind its
/// permutation; [`butterfly_permutation`] finds a generic butterfly's permutation up to exactly
/// these exchanges. Of the 8 192 members of Dao et al.'s family at N = 32 (with the identity or
/// the bit reversal after them) 116 representatives are distinct, 378 of 65 536 at N = 64.
pub fn butterfly_representative(perm: &[usize]) -> Vec<usize> {
    if perm.len() <= 2 {
        let mut v = perm.to_vec();
        v.sort_unstable();
        return v;
    }
    let (a, b) = perm.split_at(perm.len() / 2);
    let (a, b) = (butterfly_representative(a), butterfly_representative(b));
    match a.first() < b.first() {
        true => [a, b].concat(),
        false => [b, a].concat(),
    }
}

/// Gather indices `perm` such that `t = A · B · P` for a butterfly `B` and some invertible `A`
/// whose sparsity is that of `outer` (only where `outer` is nonzero does `A` mix a row of `B`
/// into a row of `t`), or `None` when no permutation makes `t` one (within `tol`, relative).
///
/// This finds the first permutation of a product whose later factors are fixed up to values
/// (the pairing `M` of the Hartley transform, the DCT-II and the DST-II: `outer` is `M`'s
/// pattern, each output `k` mixed with `−k`). Each connected block of `outer`'s pattern tells
/// which rows of `B · P` span the same space as which rows of `t`, and the rank structure of the
/// module docs holds for those spans: at a level of size `m = 2h`, the rows of a block closed
/// under `p ↦ p + h` span, on either half of the columns, a space of half their number. Blocks
/// of up to 4 rows at every level (the pairing's `{p, p + h, −p, −p + h}`) are supported;
/// larger ones give `None`.
///
/// # Errors
/// [`crate::Error::InvalidInput`] when the sizes differ or are not a power of two ≥ 2, or a
/// block of `outer`'s pattern is not square (then `A` is not invertible).
pub fn factor_permutation(t: &ComplexMatrix, outer: &ComplexMatrix, tol: f64) -> Result<Option<Vec<usize>>> {
    let op = "identify.factor_permutation";
    let n = t.n();
    check_power_of_two(op, n)?;
    if outer.n() != n {
        return Err(Error::invalid(op, format!("an outer pattern of size {n}"), format!("size {}", outer.n())));
    }
    // Connected blocks of the bipartite pattern: rows of t (0..n) and rows of B (n..2n).
    let max = outer.as_slice().iter().map(|z| z.norm()).fold(0.0, f64::max);
    // A colouring with only "same colour" constraints is a plain union–find.
    let mut blocks = Colouring::new(2 * n);
    for r in 0..n {
        for c in 0..n {
            if outer.get(r, c).norm() > tol * max {
                blocks.join(r, n + c, false);
            }
        }
    }
    let mut members: std::collections::BTreeMap<usize, (Vec<usize>, Vec<usize>)> = Default::default();
    for i in 0..2 * n {
        let entry = members.entry(blocks.find(i).0).or_default();
        if i < n {
            entry.0.push(i);
        } else {
            entry.1.push(i - n);
        }
    }
    let mut groups = Vec::with_capacity(members.len());
    for (t_rows, index) in members.into_values() {
        if t_rows.len() != index.len() {
            return Err(Error::invalid(
                op,
                "an outer pattern whose blocks are square (an invertible outer factor)",
                format!("a block mixing {} rows into {}", index.len(), t_rows.len()),
            ));
        }
        groups.push(Group { index, rows: t_rows.iter().map(|&r| t.row(r).to_vec()).collect() });
    }
    Ok(split(groups, (0..n).collect(), tol))
}

/// Whether `t` is a butterfly as it stands (no permutation), within `tol` (relative): the
/// rank-one structure of the module docs on the natural halves of every level.
pub fn is_butterfly(t: &ComplexMatrix, tol: f64) -> bool {
    let n = t.n();
    n.is_power_of_two() && n >= 2 && is_butterfly_rows((0..n).map(|r| t.row(r).to_vec()).collect(), tol)
}

/// The twiddles (`(re, im)`, `[L, N/2, 2, 2]` as [`super::butterfly`] lays them out) of `t`
/// read as a butterfly with no permutation: at every level, on each half of the columns, the
/// larger of rows `p` and `p + h` is taken as row `p` of that half's sub-butterfly and the other
/// as its multiple (their ratio is the last stage's block column), recursively. Exact where `t`
/// is a butterfly ([`is_butterfly`]); otherwise the rows' least-squares multiples, which the
/// caller checks by the product. `None` where N is not a power of two ≥ 2 or a half of both
/// rows of a block is zero.
pub fn butterfly_twiddles(t: &ComplexMatrix) -> Option<(Vec<f64>, Vec<f64>)> {
    let n = t.n();
    if n < 2 || !n.is_power_of_two() {
        return None;
    }
    let log_n = n.trailing_zeros() as usize;
    let mut tw = vec![Complex64::new(0.0, 0.0); log_n * n * 2];
    read_twiddles((0..n).map(|r| t.row(r).to_vec()).collect(), 0, n, &mut tw)?;
    Some(tw.iter().map(|z| (z.re, z.im)).unzip())
}

/// [`butterfly_twiddles`] of the sub-butterfly acting on indices `offset … offset + m − 1`
/// (`rows`: its m×m matrix) of a butterfly of size `n`, into `tw`.
fn read_twiddles(rows: Vec<Vec<Complex64>>, offset: usize, n: usize, tw: &mut [Complex64]) -> Option<()> {
    let m = rows.len();
    let s = m.trailing_zeros() as usize - 1;
    // Block k of stage s pairs i0 = 2·2^s·(k / 2^s) + k % 2^s with i0 + 2^s.
    let block = |i0: usize| ((i0 >> (s + 1)) << s) | (i0 & ((1 << s) - 1));
    let at = |i0: usize| (s * (n / 2) + block(i0)) * 4;
    if m == 2 {
        let k = at(offset);
        tw[k..k + 4].copy_from_slice(&[rows[0][0], rows[0][1], rows[1][0], rows[1][1]]);
        return Some(());
    }
    let h = m / 2;
    let one = Complex64::new(1.0, 0.0);
    let mut halves = [Vec::with_capacity(h), Vec::with_capacity(h)];
    for p in 0..h {
        let k = at(offset + p);
        for (side, cols) in [0..h, h..m].into_iter().enumerate() {
            let (top, bottom) = (&rows[p][cols.clone()], &rows[p + h][cols]);
            let (pivot, other, pivot_is_top) =
                if norm_sqr(top) >= norm_sqr(bottom) { (top, bottom, true) } else { (bottom, top, false) };
            let scale = norm_sqr(pivot);
            if scale.is_nan() || scale <= 0.0 {
                return None;
            }
            let ratio = dot(pivot, other) / scale;
            let (t_top, t_bottom) = if pivot_is_top { (one, ratio) } else { (ratio, one) };
            // Column `side` of the block: (t[0][side], t[1][side]).
            tw[k + side] = t_top;
            tw[k + 2 + side] = t_bottom;
            halves[side].push(pivot.to_vec());
        }
    }
    let [left, right] = halves;
    read_twiddles(left, offset, n, tw)?;
    read_twiddles(right, offset + h, n, tw)
}

fn is_butterfly_rows(rows: Vec<Vec<Complex64>>, tol: f64) -> bool {
    let m = rows.len();
    if m <= 2 {
        return true;
    }
    let h = m / 2;
    [0..h, h..m].into_iter().all(|half| {
        let sub: Vec<Vec<Complex64>> = (0..h)
            .map(|p| {
                let on_half = |r: &[Complex64]| r[half.clone()].iter().map(|z| z.norm_sqr()).sum::<f64>();
                let r = if on_half(&rows[p]) >= on_half(&rows[p + h]) { &rows[p] } else { &rows[p + h] };
                r[half.clone()].to_vec()
            })
            .collect();
        let parallel_half = (0..h).all(|p| {
            let vs: Vec<Vec<Complex64>> = half.clone().map(|j| vec![rows[p][j], rows[p + h][j]]).collect();
            let scale = vs.iter().map(|v| norm_sqr(v)).sum::<f64>() / h as f64;
            rank_at_most(vs.iter().filter(|v| norm_sqr(v) > tol * tol * scale), 1, tol)
        });
        parallel_half && is_butterfly_rows(sub, tol)
    })
}

/// Rows of the butterfly being identified that are known only together: `rows` (as many as
/// `index`, over the current columns) span the same space as the rows `index` of `B · P`.
struct Group {
    index: Vec<usize>,
    rows: Vec<Vec<Complex64>>,
}

/// The ordering of `cols` (the original indices of the m current columns) that makes the m×m
/// block described by `groups` a butterfly (up to the groups' mixing), or `None`.
fn split(groups: Vec<Group>, cols: Vec<usize>, tol: f64) -> Option<Vec<usize>> {
    let m = cols.len();
    if m <= 2 {
        // One 2×2 block is any 2×2 matrix.
        let mut cols = cols;
        cols.sort_unstable();
        return Some(cols);
    }
    let h = m / 2;
    // A level's last stage mixes rows p and p + h: the groups joined under that (and under
    // their own mixing) are the level's blocks, each spanning half its rows on either half.
    let mut joined = Colouring::new(m);
    for g in &groups {
        for &i in &g.index[1..] {
            joined.join(g.index[0], i, false);
        }
    }
    for p in 0..h {
        joined.join(p, p + h, false);
    }
    let mut by_root: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for (gi, g) in groups.iter().enumerate() {
        by_root.entry(joined.find(g.index[0]).0).or_default().push(gi);
    }
    let blocks: Vec<Block> = by_root
        .into_values()
        .map(|gs| {
            let mut index = Vec::new();
            let mut rows = Vec::new();
            for gi in gs {
                index.extend_from_slice(&groups[gi].index);
                rows.extend(groups[gi].rows.iter().cloned());
            }
            Block { index, rows }
        })
        .collect();
    if blocks.iter().any(|b| b.rows.len() % 2 != 0 || b.rows.len() > 4) {
        return None;
    }
    let columns: Vec<_> = blocks.iter().map(|b| b.columns(tol)).collect();
    let mut colours = Colouring::new(m);
    // Once the colouring spans every column the halves are known (up to exchanging them); the
    // remaining blocks are only checked.
    for (b, cols) in blocks.iter().zip(&columns) {
        if colours.components == 1 {
            break;
        }
        b.constrain(cols, &mut colours, tol)?;
    }
    let left = colours.balanced(h)?;
    if !blocks.iter().zip(&columns).all(|(b, cols)| b.fits(cols, &left, tol)) {
        return None;
    }
    // The half holding the smallest original column comes first.
    let (mut first, mut second): (Vec<usize>, Vec<usize>) = (0..m).partition(|&j| left[j]);
    if second.iter().map(|&j| cols[j]).min() < first.iter().map(|&j| cols[j]).min() {
        std::mem::swap(&mut first, &mut second);
    }
    let mut order = Vec::with_capacity(m);
    for half in [first, second] {
        let sub = blocks.iter().map(|b| b.on_half(&half, h)).collect();
        order.extend(split(sub, half.iter().map(|&j| cols[j]).collect(), tol)?);
    }
    Some(order)
}

/// The rows of one block of a level: `rows` span the rows `index` of `B · P` (closed under
/// `p ↦ p ± h`), so on either half of the columns a space of dimension `rows.len() / 2`.
struct Block {
    index: Vec<usize>,
    rows: Vec<Vec<Complex64>>,
}

impl Block {
    fn dim(&self) -> usize {
        self.rows.len() / 2
    }

    /// The column vectors of the block (`None` where zero relative to the block's scale).
    fn columns(&self, tol: f64) -> Vec<Option<Vec<Complex64>>> {
        let m = self.rows[0].len();
        let scale = self.rows.iter().map(|r| norm_sqr(r)).sum::<f64>() / m as f64;
        (0..m)
            .map(|j| {
                let v: Vec<Complex64> = self.rows.iter().map(|r| r[j]).collect();
                (scale > 0.0 && norm_sqr(&v) > tol * tol * scale).then_some(v)
            })
            .collect()
    }

    /// Adds what this block's columns (`cols`, [`Block::columns`]) say about which columns go
    /// together; `None` on a contradiction.
    fn constrain(&self, cols: &[Option<Vec<Complex64>>], colours: &mut Colouring, tol: f64) -> Option<()> {
        let nonzero: Vec<usize> = (0..cols.len()).filter(|&j| cols[j].is_some()).collect();
        let v = |j: usize| cols[j].as_deref().unwrap_or(&[]);
        let Some(&d0) = nonzero.first() else { return Some(()) };
        if self.dim() == 1 {
            // Two directions, one per half; a third rules out every split.
            let mut other: Option<usize> = None;
            for &j in &nonzero[1..] {
                if parallel(v(d0), v(j), tol) {
                    colours.join(d0, j, false)?;
                } else {
                    match other {
                        Some(o) if !parallel(v(o), v(j), tol) => return None,
                        _ => other = Some(other.unwrap_or(j)),
                    }
                    colours.join(d0, j, true)?;
                }
            }
            return Some(());
        }
        // Two planes meeting only at 0. The plane through d0 and another column is d0's half's
        // when a third direction lies in it (a plane through columns of both halves holds only
        // vectors parallel to one of the two); then every column in it goes with d0 and every
        // other column opposite. A few candidates suffice unless a half has only two
        // directions, which the other blocks then decide.
        const CANDIDATES: usize = 8;
        for &j in nonzero.iter().filter(|&&j| !parallel(v(d0), v(j), tol)).take(CANDIDATES) {
            let basis = orthonormal(&[v(d0), v(j)], tol);
            let inside: Vec<bool> =
                (0..cols.len()).map(|c| cols[c].as_deref().is_none_or(|x| residual(x, &basis, tol))).collect();
            let third = nonzero.iter().any(|&c| inside[c] && !parallel(v(c), v(d0), tol) && !parallel(v(c), v(j), tol));
            if third {
                for &c in &nonzero {
                    colours.join(d0, c, !inside[c])?;
                }
                return Some(());
            }
        }
        for &j in &nonzero[1..] {
            if parallel(v(d0), v(j), tol) {
                colours.join(d0, j, false)?;
            }
        }
        Some(())
    }

    /// Whether the columns (`cols`) of each half span at most `dim` dimensions.
    fn fits(&self, cols: &[Option<Vec<Complex64>>], left: &[bool], tol: f64) -> bool {
        [true, false].into_iter().all(|side| {
            rank_at_most((0..cols.len()).filter(|&j| left[j] == side).filter_map(|j| cols[j].as_ref()), self.dim(), tol)
        })
    }

    /// The block's group in the sub-problem of `half` (columns of this level, size h): the rows
    /// `index mod h` of the half's sub-butterfly, spanned by `dim` of the block's rows restricted
    /// to the half (the most independent ones).
    fn on_half(&self, half: &[usize], h: usize) -> Group {
        let mut index: Vec<usize> = self.index.iter().map(|&i| i % h).collect();
        index.sort_unstable();
        index.dedup();
        let restricted: Vec<Vec<Complex64>> = self.rows.iter().map(|r| half.iter().map(|&j| r[j]).collect()).collect();
        let mut chosen: Vec<Vec<Complex64>> = Vec::with_capacity(index.len());
        let mut basis: Vec<Vec<Complex64>> = Vec::new();
        for _ in 0..index.len() {
            // The row with the largest part outside the rows chosen so far.
            let outside = |r: &Vec<Complex64>| norm_sqr(&project_out(r, &basis));
            let best = restricted.iter().max_by(|a, b| outside(a).total_cmp(&outside(b))).cloned().unwrap_or_default();
            let r = project_out(&best, &basis);
            if norm_sqr(&r) > 0.0 {
                basis.push(unit(r));
            }
            chosen.push(best);
        }
        Group { index, rows: chosen }
    }
}

fn norm_sqr(v: &[Complex64]) -> f64 {
    v.iter().map(|z| z.norm_sqr()).sum()
}

fn dot(a: &[Complex64], b: &[Complex64]) -> Complex64 {
    a.iter().zip(b).map(|(x, y)| x.conj() * y).sum()
}

/// `x` minus its projection on the orthonormal `basis`.
fn project_out(x: &[Complex64], basis: &[Vec<Complex64>]) -> Vec<Complex64> {
    let mut r = x.to_vec();
    for e in basis {
        let c = dot(e, &r);
        r.iter_mut().zip(e).for_each(|(ri, ei)| *ri -= c * ei);
    }
    r
}

/// An orthonormal basis of the span of `vs` (Gram–Schmidt, dropping a vector whose part outside
/// the others is at most `tol` of its norm).
fn orthonormal(vs: &[&[Complex64]], tol: f64) -> Vec<Vec<Complex64>> {
    let mut basis: Vec<Vec<Complex64>> = Vec::new();
    for v in vs {
        let r = project_out(v, &basis);
        let (nr, nv) = (norm_sqr(&r), norm_sqr(v));
        if nr > tol * tol * nv && nr > 0.0 {
            basis.push(unit(r));
        }
    }
    basis
}

/// Whether `x` lies in the span of the orthonormal `basis` (its part outside is at most `tol`
/// of its norm).
fn residual(x: &[Complex64], basis: &[Vec<Complex64>], tol: f64) -> bool {
    norm_sqr(&project_out(x, basis)) <= tol * tol * norm_sqr(x)
}

/// Whether two nonzero vectors are parallel (|sin| of their angle ≤ tol): by Lagrange's identity
/// `|u|²|v|² − |⟨u, v⟩|² = Σ_{i<j} |u_i v_j − u_j v_i|²`, the right side computed, which keeps
/// its relative accuracy where the left one cancels.
fn parallel(u: &[Complex64], v: &[Complex64], tol: f64) -> bool {
    let mut wedge = 0.0;
    for i in 0..u.len() {
        for j in i + 1..u.len() {
            wedge += (u[i] * v[j] - u[j] * v[i]).norm_sqr();
        }
    }
    wedge <= tol * tol * norm_sqr(u) * norm_sqr(v)
}

/// Whether the nonzero vectors `vs` span at most `dim` dimensions.
fn rank_at_most<'a>(vs: impl Iterator<Item = &'a Vec<Complex64>>, dim: usize, tol: f64) -> bool {
    let mut basis: Vec<Vec<Complex64>> = Vec::new();
    for v in vs {
        let r = project_out(v, &basis);
        if norm_sqr(&r) > tol * tol * norm_sqr(v) {
            basis.push(unit(r));
            if basis.len() > dim {
                return false;
            }
        }
    }
    true
}

fn unit(v: Vec<Complex64>) -> Vec<Complex64> {
    let s = norm_sqr(&v).sqrt();
    if s > 0.0 {
        v.into_iter().map(|z| z / s).collect()
    } else {
        v
    }
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
