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
    // Signal [batch, g, 1, b, st]; twiddles [1, g, a, b, st]; sum over b (the input index).
    let x_shape = [batch, groups, 1, 2, st];
    let (xr, xi) = (re.reshape(x_shape), im.reshape(x_shape));
    let (tr, ti) = (stage_twiddles(tw_re, s, groups, st), stage_twiddles(tw_im, s, groups, st));
    let yr = (tr.clone() * xr.clone() - ti.clone() * xi.clone()).sum_dim(3);
    let yi = (tr * xi + ti * xr).sum_dim(3);
    (yr.reshape([batch, n]), yi.reshape([batch, n]))
}

/// Row `s` of the stacked twiddles as `[1, groups, a, b, st]`, to multiply a signal shaped
/// `[batch, groups, 1, b, st]` and sum over `b` (the block's input index).
fn stage_twiddles<B: Backend>(tw: &Tensor<B, 4>, s: usize, groups: usize, st: usize) -> Tensor<B, 5> {
    tw.clone().narrow(0, s, 1).reshape([groups, st, 2, 2]).permute([0, 2, 3, 1]).unsqueeze_dim(0)
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
        let st = 1usize << s;
        let groups = n / (2 * st);
        let t = stage_twiddles(&tw, s, groups, st);
        x = (t * x.reshape([batch, groups, 1, 2, st])).sum_dim(3).reshape([batch, n]);
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
