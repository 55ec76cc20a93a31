//! `Autodiff<CubeBackend>`: the loss computed on the inner backend and recorded as one node whose
//! backward is `2 r / norm` times the upstream gradient.

use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::backend::Autodiff;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorPrimitive};
use burn_cubecl::{element::BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};

use super::{mean_square, residual, Complex2, ResidualOps};
use crate::ops::autodiff::record_fused;

/// The loss's backward: the residual's two parts, scaled.
#[derive(Debug)]
struct ResidualBackward {
    norm: f64,
}

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> Backward<CubeBackend<R, F, I, BT>, 2>
    for ResidualBackward
{
    /// The residual `(re, im)` of the forward.
    type State = (FloatTensor<CubeBackend<R, F, I, BT>>, FloatTensor<CubeBackend<R, F, I, BT>>);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        type B<R, F, I, BT> = CubeBackend<R, F, I, BT>;
        let grad = grads.consume::<B<R, F, I, BT>>(&ops.node);
        // d/dy of Σ r² / norm is 2 r / norm; the upstream gradient is a [1] tensor.
        let factor = Tensor::<B<R, F, I, BT>, 1>::from_primitive(TensorPrimitive::Float(grad))
            .mul_scalar(2.0 / self.norm)
            .reshape([1, 1]);
        let (r_re, r_im) = ops.state;
        for (node, r) in ops.parents.into_iter().zip([r_re, r_im]) {
            if let Some(node) = node {
                let r = Tensor::<B<R, F, I, BT>, 2>::from_primitive(TensorPrimitive::Float(r));
                grads.register::<B<R, F, I, BT>>(node.id, (r * factor.clone()).into_primitive().tensor());
            }
        }
    }
}

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement, C: CheckpointStrategy> ResidualOps
    for Autodiff<CubeBackend<R, F, I, BT>, C>
{
    fn residual_mean_square(y: Complex2<Self>, hi: &Complex2<Self>, lo: &Complex2<Self>, norm: f64) -> Tensor<Self, 1> {
        let constant = |(re, im): &Complex2<Self>| (re.clone().inner(), im.clone().inner());
        let (hi, lo) = (constant(hi), constant(lo));
        let inputs = [y.0.into_primitive().tensor(), y.1.into_primitive().tensor()];
        let loss = record_fused::<CubeBackend<R, F, I, BT>, C, _, 2>(ResidualBackward { norm }, inputs, |[re, im]| {
            let wrap = |t| Tensor::<CubeBackend<R, F, I, BT>, 2>::from_primitive(TensorPrimitive::Float(t));
            let r = residual((wrap(re), wrap(im)), &hi, &lo);
            let loss = mean_square(&r, norm).into_primitive().tensor();
            (loss, (r.0.into_primitive().tensor(), r.1.into_primitive().tensor()))
        });
        Tensor::from_primitive(TensorPrimitive::Float(loss))
    }
}
