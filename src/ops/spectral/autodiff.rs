//! `Autodiff<CubeBackend>`: the fused spectral kernels, each with a custom `Backward` that
//! launches its fused backward kernels (per-(frame, offset) gradients from an on-chip inverse
//! FFT, then a gather of every covering frame's contribution into each sample). The loss's
//! forward does that work itself where it can (no spectral-convergence term, and the gradients it
//! will be asked for known from the inputs' requirements), and its backward scales the result.

use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::backend::Autodiff;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{Shape, Tensor, TensorPrimitive};
use burn_cubecl::{element::BoolElement, tensor::CubeTensor, CubeBackend, CubeRuntime, FloatElement, IntElement};

use super::{check_pair, check_stft, kernel, spectral_loss_composed, stft_magnitudes_reference};
use super::{LossParams, Magnitude, SpectralOps, StftTables};
use crate::error::Result;
use crate::ops::autodiff::record_fused;

/// The backward step of the fused magnitude spectrogram: consumes the gradient of the
/// magnitudes `[signals, frames, bins]` and registers the gradient of the signals.
#[derive(Debug)]
struct FusedStftBackward;

/// What the spectrogram's backward needs: the signals and the constant tables (the spectrum is
/// recomputed on-chip), and the op's parameters.
#[derive(Clone, Debug)]
struct StftState<R: CubeRuntime> {
    x: CubeTensor<R>,
    tables: kernel::Tables<R>,
    hop: usize,
    magnitude: Magnitude,
    eps: f64,
}

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> Backward<CubeBackend<R, F, I, BT>, 1>
    for FusedStftBackward
{
    type State = StftState<R>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let [node_x] = ops.parents;
        let grad_m = grads.consume::<CubeBackend<R, F, I, BT>>(&ops.node);
        let s = ops.state;
        if let Some(node) = node_x {
            let grad_x = kernel::backward::<R, F>(grad_m, s.x, &s.tables, s.hop, s.magnitude, s.eps);
            grads.register::<CubeBackend<R, F, I, BT>>(node.id, grad_x);
        }
    }
}

/// The backward step of the fused loss: consumes the loss gradient `[1]` and registers the
/// gradients of pred and target.
#[derive(Debug)]
struct FusedLossBackward;

/// What the fused loss's backward needs: both signals, the forward's three sums, the tables and
/// the loss's constants; and the gradients the forward computed at a loss gradient of 1 where it
/// could (then the backward only scales them).
#[derive(Clone, Debug)]
struct LossState<R: CubeRuntime> {
    pred: CubeTensor<R>,
    target: CubeTensor<R>,
    sums: CubeTensor<R>,
    tables: kernel::Tables<R>,
    params: LossParams,
    unit_grads: [Option<CubeTensor<R>>; 2],
    frames: Option<kernel::FrameRange>,
}

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> Backward<CubeBackend<R, F, I, BT>, 2>
    for FusedLossBackward
{
    type State = LossState<R>;

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let [node_p, node_t] = ops.parents;
        let grad_loss = grads.consume::<CubeBackend<R, F, I, BT>>(&ops.node);
        if node_p.is_none() && node_t.is_none() {
            return;
        }
        let s = ops.state;
        let wants = (node_p.is_some(), node_t.is_some());
        let computed = (s.unit_grads[0].is_some(), s.unit_grads[1].is_some());
        let (gp, gt) = if computed == wants {
            // ∂L/∂x = g · ∂loss/∂x: the loss gradient `[1]` times the forward's gradients (in
            // their overlap-add where the forward left them as frames, else broadcast).
            type B<R, F, I, BT> = CubeBackend<R, F, I, BT>;
            let [a, b] = kernel::finish_unit_grads::<R, F>(s.unit_grads, s.frames, grad_loss, |u, g| {
                B::<R, F, I, BT>::float_mul(u, B::<R, F, I, BT>::float_reshape(g, Shape::new([1, 1])))
            });
            (a, b)
        } else {
            kernel::loss_backward::<R, F>(grad_loss, s.sums, s.pred, s.target, &s.tables, s.params, wants)
        };
        for (node, grad) in [(node_p, gp), (node_t, gt)] {
            if let (Some(node), Some(grad)) = (node, grad) {
                grads.register::<CubeBackend<R, F, I, BT>>(node.id, grad);
            }
        }
    }
}

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement, C: CheckpointStrategy> SpectralOps
    for Autodiff<CubeBackend<R, F, I, BT>, C>
{
    fn stft_magnitudes(
        x: Tensor<Self, 2>,
        tables: &StftTables<Self>,
        hop: usize,
        magnitude: Magnitude,
        eps: f64,
    ) -> Result<Tensor<Self, 3>> {
        if !Self::stft_is_fused(tables.win(), &x.device()) {
            return stft_magnitudes_reference(x, tables, hop, magnitude, eps);
        }
        check_stft("stft_magnitudes", &x, tables.win(), hop)?;
        let tables = tables.kernel_tables();
        let m = record_fused::<CubeBackend<R, F, I, BT>, C, _, 1>(
            FusedStftBackward,
            [x.into_primitive().tensor()],
            |[x]| {
                let out = kernel::magnitudes::<R, F>(x.clone(), &tables, hop, magnitude, eps);
                (out, StftState { x, tables: tables.clone(), hop, magnitude, eps })
            },
        );
        Ok(Tensor::from_primitive(TensorPrimitive::Float(m)))
    }

    fn stft_is_fused(win: usize, device: &Self::Device) -> bool {
        CubeBackend::<R, F, I, BT>::stft_is_fused(win, device)
    }

    fn spectral_loss(
        pred: Tensor<Self, 2>,
        target: Tensor<Self, 2>,
        tables: &StftTables<Self>,
        params: &LossParams,
    ) -> Result<Tensor<Self, 1>> {
        if !Self::spectral_loss_is_fused(tables.win(), &pred.device()) {
            return spectral_loss_composed(pred, target, tables, params);
        }
        check_pair("spectral_loss", &pred, &target)?;
        check_stft("spectral_loss", &pred, tables.win(), params.hop)?;
        let tables = tables.kernel_tables();
        let params = *params;
        let inputs = [pred.into_primitive().tensor(), target.into_primitive().tensor()];
        // The gradients the graph will ask for, which the forward computes in its pass where it can.
        let wants = (!inputs[0].node.requirement.is_none(), !inputs[1].node.requirement.is_none());
        let loss = record_fused::<CubeBackend<R, F, I, BT>, C, _, 2>(FusedLossBackward, inputs, |[pred, target]| {
            let out = kernel::loss_forward::<R, F>(pred.clone(), target.clone(), &tables, params, wants);
            let state = LossState {
                pred,
                target,
                sums: out.sums,
                tables: tables.clone(),
                params,
                unit_grads: out.unit_grads,
                frames: out.frames,
            };
            (out.loss, state)
        });
        Ok(Tensor::from_primitive(TensorPrimitive::Float(loss)))
    }

    fn spectral_loss_is_fused(win: usize, device: &Self::Device) -> bool {
        CubeBackend::<R, F, I, BT>::spectral_loss_is_fused(win, device)
    }

    fn reference_matmul(device: &Self::Device) -> bool {
        CubeBackend::<R, F, I, BT>::reference_matmul(device)
    }
}
