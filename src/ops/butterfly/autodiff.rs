//! `Autodiff<CubeBackend>`: the fused forward kernel with a custom `Backward` that launches the
//! fused backward kernel (input gradient and twiddle gradient in one launch per pass, two
//! passes from N = 1024, each followed by a deterministic reduction of its twiddle gradient
//! over the batch).
//!
//! The forward writes one packed `[2, batch, n]` tensor; its halves reach the user as two
//! autodiff nodes of their own ([`Half`]) whose gradients are handed to the fused backward as
//! they are, instead of through Burn's `narrow`, whose backward fills a packed zero tensor per
//! half, slice-assigns into it and adds the two: three full-size launches, close to a tenth of
//! the fused forward + backward's time (`docs/benchmarks.md#backward-changes-h200`).

use std::sync::{Arc, Mutex, MutexGuard};

use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorPrimitive};
use burn_cubecl::{element::BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};

use super::cubecl::conv_shapes_fit;
use super::kernel::real::PairMap;
use super::kernel::InputOrder;
use super::{
    butterfly_forward_reference, fft_conv_real, fft_conv_reference, kernel, rfft, ButterflyOps, ConvSize, Permutation,
};
use crate::ops::autodiff::record_fused;
use crate::ops::cubecl::split_packed;

/// The output gradients of the two halves (re, im) of the packed output, put here by the
/// [`Half`] steps and taken by [`FusedButterflyBackward`]. A half's node is one level deeper in
/// the graph than the packed output, so Burn runs both halves' steps (those the loss reaches)
/// before the fused backward's.
type Halves<B> = Arc<Mutex<[Option<FloatTensor<B>>; 2]>>;

/// The cell, whatever a panicking thread left in it (it holds no invariant).
fn lock<B: Backend>(halves: &Halves<B>) -> MutexGuard<'_, [Option<FloatTensor<B>>; 2]> {
    halves.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One half (`part` 0: re, 1: im) of the packed output as an autodiff node: its backward hands
/// its gradient to the fused backward through `halves` and registers nothing itself.
#[derive(Debug)]
struct Half<B: Backend> {
    part: usize,
    halves: Halves<B>,
}

impl<B: Backend> Backward<B, 1> for Half<B> {
    type State = ();

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        lock::<B>(&self.halves)[self.part] = Some(grad);
    }
}

/// The backward step of the fused butterfly: takes the gradients of the output's halves (a half
/// the loss does not reach counts as zeros, which the kernel then does not read) and registers
/// the gradients of `x_re`, `x_im`, `tw_re`, `tw_im`.
#[derive(Debug)]
struct FusedButterflyBackward<B: Backend> {
    halves: Halves<B>,
}

/// What the backward needs: the forward's inputs (the stage inputs are recomputed on-chip) and
/// the input permutation as the kernels take it.
type State<R, B> = (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>, FloatTensor<B>, InputOrder<R>);

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> Backward<CubeBackend<R, F, I, BT>, 4>
    for FusedButterflyBackward<CubeBackend<R, F, I, BT>>
{
    type State = State<R, CubeBackend<R, F, I, BT>>;

    fn backward(self, ops: Ops<Self::State, 4>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        type B<R, F, I, BT> = CubeBackend<R, F, I, BT>;
        let (x_re, x_im, tw_re, tw_im, order) = ops.state;
        let tw_dims: [usize; 4] = tw_re.meta.shape().dims();
        let grad_out = std::mem::take(&mut *lock::<B<R, F, I, BT>>(&self.halves));
        let (grad_x, grad_tw) = kernel::backward::<R, F>(grad_out, x_re, x_im, tw_re, tw_im, &order);

        let grad_x = Tensor::<B<R, F, I, BT>, 3>::from_primitive(TensorPrimitive::Float(grad_x));
        let [_, batch, n] = grad_x.dims();
        let (gx_re, gx_im) = split_packed(grad_x, batch, n);
        let grad_tw = Tensor::<B<R, F, I, BT>, 2>::from_primitive(TensorPrimitive::Float(grad_tw));
        let gtw_re = grad_tw.clone().narrow(0, 0, 1).reshape(tw_dims);
        let gtw_im = grad_tw.narrow(0, 1, 1).reshape(tw_dims);

        let prim2 = |t: Tensor<B<R, F, I, BT>, 2>| t.into_primitive().tensor();
        let prim4 = |t: Tensor<B<R, F, I, BT>, 4>| t.into_primitive().tensor();
        let all = [prim2(gx_re), prim2(gx_im), prim4(gtw_re), prim4(gtw_im)];
        for (node, grad) in ops.parents.into_iter().zip(all) {
            if let Some(node) = node {
                grads.register::<B<R, F, I, BT>>(node.id, grad);
            }
        }
    }
}

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement, C: CheckpointStrategy> ButterflyOps
    for Autodiff<CubeBackend<R, F, I, BT>, C>
{
    fn butterfly(
        x_re: Tensor<Self, 2>,
        x_im: Tensor<Self, 2>,
        tw_re: Tensor<Self, 4>,
        tw_im: Tensor<Self, 4>,
        perm: &Permutation,
    ) -> (Tensor<Self, 2>, Tensor<Self, 2>) {
        let [batch, n] = x_re.dims();
        if !Self::butterfly_is_fused(n, &x_re.device()) {
            return butterfly_forward_reference(x_re, x_im, tw_re, tw_im, perm);
        }
        let inputs = [
            x_re.into_primitive().tensor(),
            x_im.into_primitive().tensor(),
            tw_re.into_primitive().tensor(),
            tw_im.into_primitive().tensor(),
        ];
        let halves = Halves::<CubeBackend<R, F, I, BT>>::default();
        let op = FusedButterflyBackward { halves: halves.clone() };
        let packed = record_fused::<CubeBackend<R, F, I, BT>, C, _, 4>(op, inputs, |[xr, xi, twr, twi]| {
            // The gather's table goes up once and serves the backward's scatter too.
            let order = InputOrder::new(perm, n, &xr);
            let out = kernel::forward::<R, F>(xr.clone(), xi.clone(), twr.clone(), twi.clone(), &order);
            (out, (xr, xi, twr, twi, order))
        });
        let inner =
            Tensor::<CubeBackend<R, F, I, BT>, 3>::from_primitive(TensorPrimitive::Float(packed.primitive.clone()));
        let (re, im) = split_packed(inner, batch, n);
        let half = |part: usize, view: Tensor<CubeBackend<R, F, I, BT>, 2>| {
            let node = Half { part, halves: halves.clone() }
                .prepare::<C>([packed.node.clone()])
                .compute_bound()
                .stateless(view.into_primitive().tensor());
            Tensor::<Self, 2>::from_primitive(TensorPrimitive::Float(node))
        };
        (half(0, re), half(1, im))
    }

    fn butterfly_is_fused(n: usize, device: &Self::Device) -> bool {
        CubeBackend::<R, F, I, BT>::butterfly_is_fused(n, device)
    }

    /// Fused (the forward's kernels, and the same kernels for the backward: `FusedConvBackward`)
    /// where the FFT is frozen; with a learnable FFT the tensor ops, which also give the
    /// twiddles' gradient.
    fn butterfly_conv(
        x: Tensor<Self, 3>,
        weight: Tensor<Self, 2>,
        bias: Option<Tensor<Self, 1>>,
        tw_re: Tensor<Self, 4>,
        tw_im: Tensor<Self, 4>,
        perm: &Permutation,
        size: ConvSize,
    ) -> Tensor<Self, 3> {
        if !fused_conv_runs::<R, F, I, BT, C>((&x, &weight, bias.as_ref()), (&tw_re, &tw_im), perm, size, false) {
            return fft_conv_reference(x, weight, bias, tw_re, tw_im, perm, size);
        }
        fused_conv::<R, F, I, BT, C>((x, weight, bias), (tw_re, tw_im), perm, size, false)
    }

    /// As [`Self::butterfly_conv`], through rfft (a butterfly of N/2).
    fn butterfly_conv_real(
        x: Tensor<Self, 3>,
        weight: Tensor<Self, 2>,
        bias: Option<Tensor<Self, 1>>,
        tw_re: Tensor<Self, 4>,
        tw_im: Tensor<Self, 4>,
        perm: &Permutation,
        size: ConvSize,
    ) -> Tensor<Self, 3> {
        if !fused_conv_runs::<R, F, I, BT, C>((&x, &weight, bias.as_ref()), (&tw_re, &tw_im), perm, size, true) {
            return fft_conv_real(x, weight, bias, tw_re, tw_im, perm, size);
        }
        fused_conv::<R, F, I, BT, C>((x, weight, bias), (tw_re, tw_im), perm, size, true)
    }

    fn rfft_split(zr: Tensor<Self, 2>, zi: Tensor<Self, 2>) -> (Tensor<Self, 2>, Tensor<Self, 2>) {
        match tracked_pair_map::<R, F, I, BT, C>(zr, zi, PairMap::Split) {
            Ok(out) => out,
            Err((zr, zi)) => rfft::split(zr, zi),
        }
    }

    fn rfft_merge(xr: Tensor<Self, 2>, xi: Tensor<Self, 2>) -> (Tensor<Self, 2>, Tensor<Self, 2>) {
        match tracked_pair_map::<R, F, I, BT, C>(xr, xi, PairMap::Merge) {
            Ok(out) => out,
            Err((xr, xi)) => rfft::merge(xr, xi),
        }
    }
}

/// The fused convolution (complex, or through rfft where `real`) with a frozen FFT under
/// autodiff: the inference kernels' forward, recorded with [`FusedConvBackward`]; the bias added
/// as a tensor op, whose gradient is the output gradient's sum.
fn fused_conv<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement, C: CheckpointStrategy>(
    (x, weight, bias): ConvInputs<Ad<R, F, I, BT, C>>,
    (tw_re, tw_im): Twiddles<Ad<R, F, I, BT, C>>,
    perm: &Permutation,
    ConvSize { n, out_len }: ConvSize,
    real: bool,
) -> Tensor<Ad<R, F, I, BT, C>, 3> {
    let channels = weight.dims()[0];
    let tw = (tw_re.inner().into_primitive().tensor(), tw_im.inner().into_primitive().tensor());
    let inputs = [x.into_primitive().tensor(), weight.into_primitive().tensor()];
    let op = FusedConvBackward { n, real };
    let y = record_fused::<CubeBackend<R, F, I, BT>, C, _, 2>(op, inputs, |[x, weight]| {
        let order = InputOrder::new(perm, if real { n / 2 } else { n }, &x);
        let (y, kept) = if real {
            kernel::real::fft_conv_real::<R, F>(x.clone(), weight.clone(), None, tw, &order, (n, out_len))
        } else {
            kernel::conv::fft_conv::<R, F>(x.clone(), weight.clone(), None, tw, &order, (n, out_len))
        };
        (y, (x, weight, kept, order))
    });
    let y = Tensor::from_primitive(TensorPrimitive::Float(y));
    match bias {
        Some(bias) => y + bias.reshape([1, channels, 1]),
        None => y,
    }
}

/// The autodiff backend these ops are for.
type Ad<R, F, I, BT, C> = Autodiff<CubeBackend<R, F, I, BT>, C>;

/// A convolution's signal, taps and bias.
type ConvInputs<B> = (Tensor<B, 3>, Tensor<B, 2>, Option<Tensor<B, 1>>);
/// The same, borrowed.
type ConvInputRefs<'a, B> = (&'a Tensor<B, 3>, &'a Tensor<B, 2>, Option<&'a Tensor<B, 1>>);
/// A butterfly's twiddles (re, im).
type Twiddles<B> = (Tensor<B, 4>, Tensor<B, 4>);
/// The same, borrowed.
type TwiddleRefs<'a, B> = (&'a Tensor<B, 4>, &'a Tensor<B, 4>);

/// Whether [`fused_conv`] runs: the FFT frozen (a learnable one takes the tensor ops, which also
/// give the twiddles' gradient), the shapes consistent (the kernels index by them unchecked),
/// and the size fused on the device.
fn fused_conv_runs<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement, C: CheckpointStrategy>(
    (x, weight, bias): ConvInputRefs<'_, Ad<R, F, I, BT, C>>,
    (tw_re, tw_im): TwiddleRefs<'_, Ad<R, F, I, BT, C>>,
    perm: &Permutation,
    size: ConvSize,
    real: bool,
) -> bool {
    type Inner<R, F, I, BT> = CubeBackend<R, F, I, BT>;
    let n = size.n;
    let frozen = !tw_re.is_require_grad() && !tw_im.is_require_grad();
    let (fft_n, runs) = if real {
        (n / 2, n >= 4 && Inner::<R, F, I, BT>::butterfly_conv_real_is_fused(n, &x.device()))
    } else {
        (n, Inner::<R, F, I, BT>::butterfly_conv_is_fused(n, &x.device()))
    };
    frozen && runs && conv_shapes_fit(x, weight, bias, (tw_re, tw_im), perm, size, fft_n)
}

/// The backward of the fused convolution (complex, or through rfft where `real`) with a frozen
/// FFT: the signal's and the taps' gradients through the forward's kernels with the filters
/// conjugated (`kernel::conv::correlations`), each only where its input is tracked.
#[derive(Debug)]
struct FusedConvBackward {
    n: usize,
    real: bool,
}

/// The forward's signal and taps, what its kernels computed that the backward reuses (the
/// relaid twiddles, the taps' spectra), and the input order.
type ConvState<R, B> = (FloatTensor<B>, FloatTensor<B>, kernel::conv::ConvKept<R>, InputOrder<R>);

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> Backward<CubeBackend<R, F, I, BT>, 2>
    for FusedConvBackward
{
    type State = ConvState<R, CubeBackend<R, F, I, BT>>;

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        type B<R, F, I, BT> = CubeBackend<R, F, I, BT>;
        let (x, weight, kept, order) = ops.state;
        let grad = grads.consume::<B<R, F, I, BT>>(&ops.node);
        let [x_node, weight_node] = ops.parents;
        let want = (x_node.is_some(), weight_node.is_some());
        let (channels, taps) = (weight.meta.shape()[0], weight.meta.shape()[1]);
        let backward = if self.real {
            kernel::real::fft_conv_real_backward::<R, F>
        } else {
            kernel::conv::fft_conv_backward::<R, F>
        };
        let (grad_x, grad_h) = backward(grad, (x, weight), kept, &order, self.n, want);
        if let (Some(node), Some(grad_x)) = (x_node, grad_x) {
            grads.register::<B<R, F, I, BT>>(node.id, grad_x);
        }
        if let (Some(node), Some(grad_h)) = (weight_node, grad_h) {
            // Per batch item → summed over the batch.
            let grad_h = Tensor::<B<R, F, I, BT>, 3>::from_primitive(TensorPrimitive::Float(grad_h))
                .sum_dim(0)
                .reshape([channels, taps]);
            grads.register::<B<R, F, I, BT>>(node.id, grad_h.into_primitive().tensor());
        }
    }
}

/// The backward of a fused pair map (the rfft's split or merge step, linear maps of rows): the
/// adjoint map of the output's gradient, one launch.
#[derive(Debug)]
struct PairMapBackward {
    adjoint: PairMap,
    m: usize,
}

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> Backward<CubeBackend<R, F, I, BT>, 2>
    for PairMapBackward
{
    type State = ();

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        type B<R, F, I, BT> = CubeBackend<R, F, I, BT>;
        let grad = Tensor::<B<R, F, I, BT>, 3>::from_primitive(TensorPrimitive::Float(
            grads.consume::<B<R, F, I, BT>>(&ops.node),
        ));
        let [_, rows, len] = grad.dims();
        let (gr, gi) = split_packed(grad, rows, len);
        let packed = kernel::real::pair_map::<R, F>(
            gr.into_primitive().tensor(),
            gi.into_primitive().tensor(),
            self.m,
            self.adjoint,
        );
        let in_len = self.adjoint.lengths(self.m).1;
        let (xr, xi) =
            split_packed(Tensor::<B<R, F, I, BT>, 3>::from_primitive(TensorPrimitive::Float(packed)), rows, in_len);
        for (node, grad) in ops.parents.into_iter().zip([xr, xi]) {
            if let Some(node) = node {
                grads.register::<B<R, F, I, BT>>(node.id, grad.into_primitive().tensor());
            }
        }
    }
}

/// `map` (the split or the merge) of rows `(re, im)` through the fused pair kernel, recorded
/// with its adjoint as the backward; `Err` with the inputs where their shapes are not the map's.
#[allow(clippy::type_complexity)]
fn tracked_pair_map<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement, C: CheckpointStrategy>(
    re: Tensor<Ad<R, F, I, BT, C>, 2>,
    im: Tensor<Ad<R, F, I, BT, C>, 2>,
    map: PairMap,
) -> Result<Pair<Autodiff<CubeBackend<R, F, I, BT>, C>>, Pair<Autodiff<CubeBackend<R, F, I, BT>, C>>> {
    let [rows, len] = re.dims();
    let (m, adjoint) = match map {
        PairMap::Split => (len, PairMap::SplitAdjoint),
        _ => (len.saturating_sub(1), PairMap::MergeAdjoint),
    };
    if !m.is_power_of_two() || m < 2 || im.dims() != [rows, len] || rows == 0 {
        return Err((re, im));
    }
    let inputs = [re.into_primitive().tensor(), im.into_primitive().tensor()];
    let packed = record_fused::<CubeBackend<R, F, I, BT>, C, _, 2>(PairMapBackward { adjoint, m }, inputs, |[r, i]| {
        (kernel::real::pair_map::<R, F>(r, i, m, map), ())
    });
    let packed = Tensor::<Autodiff<CubeBackend<R, F, I, BT>, C>, 3>::from_primitive(TensorPrimitive::Float(packed));
    Ok(split_packed(packed, rows, map.lengths(m).1))
}

/// Real and imaginary parts.
type Pair<B> = (Tensor<B, 2>, Tensor<B, 2>);
