//! `Autodiff<CubeBackend>`: the fused forward kernels, each with a custom `Backward` that
//! launches its fused backward kernels.
//!
//! - Butterfly: input gradient and twiddle gradient in one launch per pass (two passes from
//!   N = 1024), each followed by a deterministic reduction of its twiddle gradient over the
//!   batch.
//! - Spectral magnitudes: per-(frame, offset) gradients from an on-chip inverse FFT, then a
//!   gather of every covering frame's contribution into each sample.

use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::Autodiff;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorPrimitive};
use burn_cubecl::{element::BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};

use super::cubecl::split_packed;
use crate::butterfly::{butterfly_forward_reference, Permutation};
use crate::error::Result;
use crate::kernels::butterfly as kernel;
use crate::kernels::spectral as spectral_kernel;
use crate::ops::{ButterflyOps, SpectralOps};
use crate::spectral::{check_pair, check_stft, spectral_loss_composed, stft_magnitudes_reference, LossParams, Magnitude, StftTables};

/// The backward step of the fused butterfly: consumes the gradient of the packed output
/// `[2, batch, n]` and registers the gradients of `x_re`, `x_im`, `tw_re`, `tw_im`.
#[derive(Debug)]
struct FusedButterflyBackward;

/// What the backward needs: the forward's inputs (the stage inputs are recomputed on-chip).
type State<B> = (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>, FloatTensor<B>, Permutation);

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> Backward<CubeBackend<R, F, I, BT>, 4>
    for FusedButterflyBackward
{
    type State = State<CubeBackend<R, F, I, BT>>;

    fn backward(self, ops: Ops<Self::State, 4>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        type B<R, F, I, BT> = CubeBackend<R, F, I, BT>;
        let [node_xr, node_xi, node_twr, node_twi] = ops.parents;
        let grad_out = grads.consume::<B<R, F, I, BT>>(&ops.node);
        let (x_re, x_im, tw_re, tw_im, perm) = ops.state;
        let tw_shape = tw_re.meta.shape().clone();
        let (grad_x, grad_tw) = kernel::backward::<R, F>(grad_out, x_re, x_im, tw_re, tw_im, perm);

        let grad_x = Tensor::<B<R, F, I, BT>, 3>::from_primitive(TensorPrimitive::Float(grad_x));
        let [_, batch, n] = grad_x.dims();
        let (gx_re, gx_im) = split_packed(grad_x, batch, n);
        let grad_tw = Tensor::<B<R, F, I, BT>, 2>::from_primitive(TensorPrimitive::Float(grad_tw));
        let dims: [usize; 4] = tw_shape.dims();
        let entries = grad_tw.dims()[1];
        let gtw_re = grad_tw.clone().narrow(0, 0, 1).reshape(dims);
        let gtw_im = grad_tw.narrow(0, 1, 1).reshape(dims);
        debug_assert_eq!(entries, dims.iter().product::<usize>());

        if let Some(node) = node_xr {
            grads.register::<B<R, F, I, BT>>(node.id, gx_re.into_primitive().tensor());
        }
        if let Some(node) = node_xi {
            grads.register::<B<R, F, I, BT>>(node.id, gx_im.into_primitive().tensor());
        }
        if let Some(node) = node_twr {
            grads.register::<B<R, F, I, BT>>(node.id, gtw_re.into_primitive().tensor());
        }
        if let Some(node) = node_twi {
            grads.register::<B<R, F, I, BT>>(node.id, gtw_im.into_primitive().tensor());
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
        perm: Permutation,
    ) -> (Tensor<Self, 2>, Tensor<Self, 2>) {
        let [batch, n] = x_re.dims();
        if !Self::butterfly_is_fused(n, &x_re.device()) {
            return butterfly_forward_reference(x_re, x_im, tw_re, tw_im, perm);
        }
        let (xr, xi) = (x_re.into_primitive().tensor(), x_im.into_primitive().tensor());
        let (twr, twi) = (tw_re.into_primitive().tensor(), tw_im.into_primitive().tensor());
        let parents = [xr.node.clone(), xi.node.clone(), twr.node.clone(), twi.node.clone()];
        let packed = match FusedButterflyBackward.prepare::<C>(parents).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let out = kernel::forward::<R, F>(
                    xr.primitive.clone(),
                    xi.primitive.clone(),
                    twr.primitive.clone(),
                    twi.primitive.clone(),
                    perm,
                );
                prep.finish((xr.primitive, xi.primitive, twr.primitive, twi.primitive, perm), out)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(kernel::forward::<R, F>(xr.primitive, xi.primitive, twr.primitive, twi.primitive, perm))
            }
        };
        split_packed(Tensor::<Self, 3>::from_primitive(TensorPrimitive::Float(packed)), batch, n)
    }

    fn butterfly_is_fused(n: usize, device: &Self::Device) -> bool {
        CubeBackend::<R, F, I, BT>::butterfly_is_fused(n, device)
    }
}

/// The backward step of the fused magnitude spectrogram: consumes the gradient of the
/// magnitudes `[signals, frames, bins]` and registers the gradient of the signals.
#[derive(Debug)]
struct FusedStftBackward;

/// What the spectrogram's backward needs: the signals and the constant tables (the spectrum is
/// recomputed on-chip), and the op's parameters.
#[derive(Clone, Debug)]
struct StftState<T> {
    x: T,
    window: T,
    twiddle_re: T,
    twiddle_im: T,
    hop: usize,
    magnitude: Magnitude,
    eps: f64,
}

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> Backward<CubeBackend<R, F, I, BT>, 1> for FusedStftBackward {
    type State = StftState<FloatTensor<CubeBackend<R, F, I, BT>>>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let [node_x] = ops.parents;
        let grad_m = grads.consume::<CubeBackend<R, F, I, BT>>(&ops.node);
        let s = ops.state;
        if let Some(node) = node_x {
            let grad_x = spectral_kernel::backward::<R, F>(grad_m, s.x, s.window, s.twiddle_re, s.twiddle_im, s.hop, s.magnitude, s.eps);
            grads.register::<CubeBackend<R, F, I, BT>>(node.id, grad_x);
        }
    }
}

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement, C: CheckpointStrategy> SpectralOps
    for Autodiff<CubeBackend<R, F, I, BT>, C>
{
    fn stft_magnitudes(x: Tensor<Self, 2>, tables: &StftTables<Self>, hop: usize, magnitude: Magnitude, eps: f64) -> Result<Tensor<Self, 3>> {
        if !Self::stft_is_fused(tables.win(), &x.device()) {
            return stft_magnitudes_reference(x, tables, hop, magnitude, eps);
        }
        check_stft("stft_magnitudes", &x, tables.win(), hop)?;
        let inner = |t: &Tensor<Self, 1>| t.clone().inner().into_primitive().tensor();
        let (window, twiddle_re, twiddle_im) = (inner(&tables.window_values), inner(&tables.twiddle_re), inner(&tables.twiddle_im));
        let xp = x.into_primitive().tensor();
        let launch = |x| spectral_kernel::magnitudes::<R, F>(x, window.clone(), twiddle_re.clone(), twiddle_im.clone(), hop, magnitude, eps);
        let m = match FusedStftBackward.prepare::<C>([xp.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let out = launch(xp.primitive.clone());
                let state = StftState { x: xp.primitive, window: window.clone(), twiddle_re: twiddle_re.clone(), twiddle_im: twiddle_im.clone(), hop, magnitude, eps };
                prep.finish(state, out)
            }
            OpsKind::UnTracked(prep) => prep.finish(launch(xp.primitive)),
        };
        Ok(Tensor::from_primitive(TensorPrimitive::Float(m)))
    }

    fn stft_is_fused(win: usize, device: &Self::Device) -> bool {
        CubeBackend::<R, F, I, BT>::stft_is_fused(win, device)
    }

    fn spectral_loss(pred: Tensor<Self, 2>, target: Tensor<Self, 2>, tables: &StftTables<Self>, params: &LossParams) -> Result<Tensor<Self, 1>> {
        if !Self::spectral_loss_is_fused(tables.win(), &pred.device()) {
            return spectral_loss_composed(pred, target, tables, params);
        }
        check_pair("spectral_loss", &pred, &target)?;
        check_stft("spectral_loss", &pred, tables.win(), params.hop)?;
        let inner = |t: &Tensor<Self, 1>| t.clone().inner().into_primitive().tensor();
        let (window, twiddle_re, twiddle_im) = (inner(&tables.window_values), inner(&tables.twiddle_re), inner(&tables.twiddle_im));
        let (p, t) = (pred.into_primitive().tensor(), target.into_primitive().tensor());
        let params = *params;
        let launch = |p, t| spectral_kernel::loss_forward::<R, F>(p, t, window.clone(), twiddle_re.clone(), twiddle_im.clone(), params);
        let loss = match FusedLossBackward.prepare::<C>([p.node.clone(), t.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let (loss, sums) = launch(p.primitive.clone(), t.primitive.clone());
                let state = LossState { pred: p.primitive, target: t.primitive, sums, window: window.clone(), twiddle_re: twiddle_re.clone(), twiddle_im: twiddle_im.clone(), params };
                prep.finish(state, loss)
            }
            OpsKind::UnTracked(prep) => prep.finish(launch(p.primitive, t.primitive).0),
        };
        Ok(Tensor::from_primitive(TensorPrimitive::Float(loss)))
    }

    fn spectral_loss_is_fused(win: usize, device: &Self::Device) -> bool {
        CubeBackend::<R, F, I, BT>::spectral_loss_is_fused(win, device)
    }
}

/// The backward step of the fused loss: consumes the loss gradient `[1]` and registers the
/// gradients of pred and target.
#[derive(Debug)]
struct FusedLossBackward;

/// What the fused loss's backward needs: both signals, the forward's three sums, the tables and
/// the loss's constants.
#[derive(Clone, Debug)]
struct LossState<T> {
    pred: T,
    target: T,
    sums: T,
    window: T,
    twiddle_re: T,
    twiddle_im: T,
    params: LossParams,
}

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> Backward<CubeBackend<R, F, I, BT>, 2> for FusedLossBackward {
    type State = LossState<FloatTensor<CubeBackend<R, F, I, BT>>>;

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let [node_p, node_t] = ops.parents;
        let grad_loss = grads.consume::<CubeBackend<R, F, I, BT>>(&ops.node);
        let s = ops.state;
        if node_p.is_none() && node_t.is_none() {
            return;
        }
        let (gp, gt) = spectral_kernel::loss_backward::<R, F>(grad_loss, s.sums, s.pred, s.target, s.window, s.twiddle_re, s.twiddle_im, s.params);
        if let Some(node) = node_p {
            grads.register::<CubeBackend<R, F, I, BT>>(node.id, gp);
        }
        if let Some(node) = node_t {
            grads.register::<CubeBackend<R, F, I, BT>>(node.id, gt);
        }
    }
}
