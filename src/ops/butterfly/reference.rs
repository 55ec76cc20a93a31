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
    let (re, im) = permute_input(re, im, perm);
    let (mut re, mut im) = (signal_major(re), signal_major(im));
    for s in 0..log_n {
        (re, im) = butterfly_stage(re, im, &tw_re, &tw_im, s);
    }
    (batch_major(re), batch_major(im))
}

/// `[batch, n]` as `[n, batch]`, the layout the stages work in: each stage's element-wise
/// products then run along rows of `stride · batch` contiguous values, where in `[batch, n]` the
/// early stages' rows are one or two values long and the CPU backends spend their time stepping
/// through dimensions (ndarray's strided iteration: 2.4 s for one forward of 256 vectors at
/// n = 4096 before this layout).
///
/// The product by one hands the op before it (the permutation's `select`) a gradient that is a
/// fresh, contiguous tensor rather than a transposed view: candle's `index_add`, the `select`
/// backward, takes only contiguous tensors.
fn signal_major<B: Backend>(x: Tensor<B, 2>) -> Tensor<B, 2> {
    x.mul_scalar(1.0).transpose()
}

/// The inverse of [`signal_major`]: `[n, batch]` back to `[batch, n]`, as a fresh tensor (the
/// product by one), so that ops after it that need contiguous input (candle's `index_select`)
/// take it as it is.
fn batch_major<B: Backend>(x: Tensor<B, 2>) -> Tensor<B, 2> {
    x.transpose().mul_scalar(1.0)
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
/// stacked factors: the blocks pairing indices `2^(s mod log2 n)` apart) to a batch of complex
/// vectors laid out `[n, batch]` ([`signal_major`]).
pub(crate) fn butterfly_stage<B: Backend>(
    re: Tensor<B, 2>,
    im: Tensor<B, 2>,
    tw_re: &Tensor<B, 4>,
    tw_im: &Tensor<B, 4>,
    s: usize,
) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let [n, batch] = re.dims();
    let ((r0, r1), (i0, i1)) = (halves(re, s), halves(im, s));
    let out = |a: usize| {
        let (tr0, ti0) = (twiddle_entry(tw_re, s, a, 0), twiddle_entry(tw_im, s, a, 0));
        let (tr1, ti1) = (twiddle_entry(tw_re, s, a, 1), twiddle_entry(tw_im, s, a, 1));
        let yr =
            tr0.clone() * r0.clone() - ti0.clone() * i0.clone() + tr1.clone() * r1.clone() - ti1.clone() * i1.clone();
        let yi = tr0 * i0.clone() + ti0 * r0.clone() + tr1 * i1.clone() + ti1 * r1.clone();
        (yr, yi)
    };
    let ((yr0, yi0), (yr1, yi1)) = (out(0), out(1));
    (Tensor::cat(vec![yr0, yr1], 1).reshape([n, batch]), Tensor::cat(vec![yi0, yi1], 1).reshape([n, batch]))
}

/// The two inputs of every block of stage `s` of `x` `[n, batch]`: `[groups, 1, stride, batch]`
/// each.
fn halves<B: Backend>(x: Tensor<B, 2>, s: usize) -> (Tensor<B, 4>, Tensor<B, 4>) {
    let [n, batch] = x.dims();
    let st = 1usize << (s % n.trailing_zeros() as usize);
    let x = x.reshape([n / (2 * st), 2, st, batch]);
    (x.clone().narrow(1, 0, 1), x.narrow(1, 1, 1))
}

/// Entry `(a, b)` of every block of stage `s` (row s of `tw`): `[groups, 1, stride, 1]`, to
/// multiply a block input `[groups, 1, stride, batch]`.
fn twiddle_entry<B: Backend>(tw: &Tensor<B, 4>, s: usize, a: usize, b: usize) -> Tensor<B, 4> {
    let [_, half, _, _] = tw.dims();
    let n = 2 * half;
    let st = 1usize << (s % n.trailing_zeros() as usize);
    let groups = n / (2 * st);
    tw.clone().narrow(0, s, 1).reshape([groups, st, 2, 2]).narrow(2, a, 1).narrow(3, b, 1).reshape([groups, 1, st, 1])
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
    let x = match perm {
        Permutation::Identity => x,
        _ => select_columns(x, perm.indices(n).into_iter().map(|i| i as i64).collect()),
    };
    let mut x = signal_major(x);
    for s in 0..log_n {
        let (x0, x1) = halves(x, s);
        let out = |a: usize| twiddle_entry(&tw, s, a, 0) * x0.clone() + twiddle_entry(&tw, s, a, 1) * x1.clone();
        x = Tensor::cat(vec![out(0), out(1)], 1).reshape([n, batch]);
    }
    batch_major(x)
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
    let (yr, yi) = permute_input(x.0, x.1, perm);
    let (dr, di) = permute_input(dx.0, dx.1, perm);
    let (mut yr, mut yi, mut dr, mut di) = (signal_major(yr), signal_major(yi), signal_major(dr), signal_major(di));
    for s in 0..log_n {
        let (ar, ai) = butterfly_stage(dr, di, tw.0, tw.1, s);
        let (br, bi) = butterfly_stage(yr.clone(), yi.clone(), dtw.0, dtw.1, s);
        (dr, di) = (ar + br, ai + bi);
        (yr, yi) = butterfly_stage(yr, yi, tw.0, tw.1, s);
    }
    ((batch_major(yr), batch_major(yi)), (batch_major(dr), batch_major(di)))
}

/// A value and its tangent, `((re, im), (d re, d im))`: what [`butterfly_tangent_reference`]
/// and [`ButterflyOps::butterfly_tangent`](super::ButterflyOps::butterfly_tangent) return.
pub type Tangent<B> = ((Tensor<B, 2>, Tensor<B, 2>), (Tensor<B, 2>, Tensor<B, 2>));
