//! The butterfly forward as plain Burn tensor ops: the reference twin of the fused kernels.
//! It runs on every backend and gets its gradient from Burn's autodiff.

use burn::tensor::{backend::Backend, Tensor};

use crate::tensors::select_columns;

use super::Permutation;

/// Applies `perm` then the log2(n) butterfly factors to a batch of complex vectors.
///
/// The definition (index conventions included) is in [`crate::reference::butterfly`].
///
/// # Shapes
/// - `re`, `im`: `[batch, n]`
/// - `tw_re`, `tw_im`: `[log2 n, n/2, 2, 2]`
/// - returns `(re, im)`, each `[batch, n]`
///
/// Shapes are not checked here; [`Butterfly::forward`](crate::Butterfly::forward) checks them.
pub fn butterfly_forward_reference<B: Backend>(
    re: Tensor<B, 2>,
    im: Tensor<B, 2>,
    tw_re: Tensor<B, 4>,
    tw_im: Tensor<B, 4>,
    perm: &Permutation,
) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let n = re.dims()[1];
    let log_n = n.trailing_zeros() as usize;
    let (mut re, mut im) = permute_input(re, im, perm);
    for s in 0..log_n {
        (re, im) = butterfly_stage(re, im, &tw_re, &tw_im, s);
    }
    (re, im)
}

/// Applies the input permutation `perm` to a batch `[batch, n]` of complex vectors.
pub(crate) fn permute_input<B: Backend>(
    re: Tensor<B, 2>,
    im: Tensor<B, 2>,
    perm: &Permutation,
) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let n = re.dims()[1];
    match perm {
        Permutation::Identity => (re, im),
        _ => {
            let idx: Vec<i64> = perm.indices(n).into_iter().map(|i| i as i64).collect();
            (select_columns(re, idx.clone()), select_columns(im, idx))
        }
    }
}

/// Applies stage `s` (row s of the twiddles `tw_re`, `tw_im`, `[K · log2 n, n/2, 2, 2]` for K
/// stacked factors: the blocks pairing indices `2^(s mod log2 n)` apart) to a batch
/// `[batch, n]` of complex vectors.
///
/// Block k = g·st + j (st = 2^(s mod log2 n)) takes elements `2·st·g + j` and that plus st. The
/// stage gathers the blocks' first and second inputs as `[batch, n/2]` rows, forms both outputs
/// with every twiddle entry a `[1, n/2]` row, and interleaves them back: every product is
/// two-dimensional with the long axis innermost. (Broadcast products over
/// `[batch, groups, 2, 2, st]` summed over the block's input axis, the form this replaced, ran
/// their innermost loop over st elements, one in the first stage: about 60 ms per stage for
/// 16 000 rows of 32 on two CPU cores.) Each output adds the two inputs' products in the order
/// of the block's sum, `(t_a0 · x_0) + (t_a1 · x_1)`.
pub(crate) fn butterfly_stage<B: Backend>(
    re: Tensor<B, 2>,
    im: Tensor<B, 2>,
    tw_re: &Tensor<B, 4>,
    tw_im: &Tensor<B, 4>,
    s: usize,
) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let [batch, n] = re.dims();
    let st = 1usize << (s % n.trailing_zeros() as usize);
    let groups = n / (2 * st);
    let (ar, br) = block_inputs(re, groups, st);
    let (ai, bi) = block_inputs(im, groups, st);
    let (tr, ti) = (block_entries(tw_re, s), block_entries(tw_im, s));
    // Output a of every block, `t_a0 · x_0 + t_a1 · x_1` in complex arithmetic.
    let output = |a: usize| {
        let (t0r, t0i, t1r, t1i) = (&tr[2 * a], &ti[2 * a], &tr[2 * a + 1], &ti[2 * a + 1]);
        let yr = (ar.clone() * t0r.clone() - ai.clone() * t0i.clone())
            + (br.clone() * t1r.clone() - bi.clone() * t1i.clone());
        let yi = (ai.clone() * t0r.clone() + ar.clone() * t0i.clone())
            + (bi.clone() * t1r.clone() + br.clone() * t1i.clone());
        (yr.reshape([batch, groups, 1, st]), yi.reshape([batch, groups, 1, st]))
    };
    let ((y0r, y0i), (y1r, y1i)) = (output(0), output(1));
    (Tensor::cat(vec![y0r, y1r], 2).reshape([batch, n]), Tensor::cat(vec![y0i, y1i], 2).reshape([batch, n]))
}

/// The blocks' first and second inputs of `x` `[batch, n]` at a stage of stride `st`, each
/// `[batch, n/2]` in block order.
fn block_inputs<B: Backend>(x: Tensor<B, 2>, groups: usize, st: usize) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let batch = x.dims()[0];
    let x = x.reshape([batch, groups, 2, st]);
    let half = groups * st;
    (x.clone().narrow(2, 0, 1).reshape([batch, half]), x.narrow(2, 1, 1).reshape([batch, half]))
}

/// Row `s` of the stacked twiddles as the four entries `t_ab` (row-major: 00, 01, 10, 11) of
/// every block, each `[1, n/2]` in block order.
fn block_entries<B: Backend>(tw: &Tensor<B, 4>, s: usize) -> [Tensor<B, 2>; 4] {
    let half = tw.dims()[1];
    let row = tw.clone().narrow(0, s, 1).reshape([half, 4]);
    std::array::from_fn(|e| row.clone().narrow(1, e, 1).reshape([1, half]))
}

/// [`butterfly_forward_reference`] for real vectors and real twiddles: the same product with
/// every imaginary part zero, at a quarter of the multiplications.
///
/// # Shapes
/// - `x`: `[batch, n]`
/// - `tw`: `[log2 n, n/2, 2, 2]`
/// - returns `[batch, n]`
pub fn butterfly_real_reference<B: Backend>(x: Tensor<B, 2>, tw: Tensor<B, 4>, perm: &Permutation) -> Tensor<B, 2> {
    let [batch, n] = x.dims();
    let log_n = n.trailing_zeros() as usize;
    let mut x = match perm {
        Permutation::Identity => x,
        _ => select_columns(x, perm.indices(n).into_iter().map(|i| i as i64).collect()),
    };
    for s in 0..log_n {
        // The complex stage's products (see `butterfly_stage`) without their imaginary parts.
        let st = 1usize << s;
        let groups = n / (2 * st);
        let (a, b) = block_inputs(x, groups, st);
        let t = block_entries(&tw, s);
        let output =
            |e: usize| (a.clone() * t[e].clone() + b.clone() * t[e + 1].clone()).reshape([batch, groups, 1, st]);
        x = Tensor::cat(vec![output(0), output(2)], 2).reshape([batch, n]);
    }
    x
}

/// The forward-mode derivative (tangent) of [`butterfly_forward_reference`]: with `y = B(θ) P x`,
/// returns `(y, dy)` where `dy = B(θ) P dx + (∂/∂θ B(θ) · dθ) P x` — the change of the output
/// along input direction `dx` and twiddle direction `dθ`. One sweep through the stages,
/// `dy_s = T_s dy_{s−1} + V_s y_{s−1}` (the product is linear in each stage).
///
/// # Shapes
/// - `x`, `dx`: `(re, im)`, each `[batch, n]`
/// - `tw`, `dtw`: `(re, im)`, each `[log2 n, n/2, 2, 2]`
/// - returns `((y_re, y_im), (dy_re, dy_im))`, each `[batch, n]`
pub fn butterfly_tangent_reference<B: Backend>(
    x: (Tensor<B, 2>, Tensor<B, 2>),
    dx: (Tensor<B, 2>, Tensor<B, 2>),
    tw: (&Tensor<B, 4>, &Tensor<B, 4>),
    dtw: (&Tensor<B, 4>, &Tensor<B, 4>),
    perm: &Permutation,
) -> Tangent<B> {
    let log_n = x.0.dims()[1].trailing_zeros() as usize;
    let (mut yr, mut yi) = permute_input(x.0, x.1, perm);
    let (mut dr, mut di) = permute_input(dx.0, dx.1, perm);
    for s in 0..log_n {
        let (ar, ai) = butterfly_stage(dr, di, tw.0, tw.1, s);
        let (br, bi) = butterfly_stage(yr.clone(), yi.clone(), dtw.0, dtw.1, s);
        (dr, di) = (ar + br, ai + bi);
        (yr, yi) = butterfly_stage(yr, yi, tw.0, tw.1, s);
    }
    ((yr, yi), (dr, di))
}

/// A value and its tangent, `((re, im), (d re, d im))`: what [`butterfly_tangent_reference`]
/// and [`ButterflyOps::butterfly_tangent`](super::ButterflyOps::butterfly_tangent) return.
pub type Tangent<B> = ((Tensor<B, 2>, Tensor<B, 2>), (Tensor<B, 2>, Tensor<B, 2>));
