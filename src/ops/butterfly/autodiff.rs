//! `Autodiff<CubeBackend>`: the fused forward kernel with a custom `Backward` that launches the
//! fused backward kernel (input gradient and twiddle gradient in one launch per pass, two
//! passes from N = 1024, each followed by a deterministic reduction of its twiddle gradient
//! over the batch).

use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::backend::Autodiff;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorPrimitive};
use burn_cubecl::{element::BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};

use super::kernel::InputOrder;
use super::{butterfly_forward_reference, kernel, ButterflyOps, Permutation};
use crate::ops::autodiff::record_fused;
use crate::ops::cubecl::split_packed;

/// The backward step of the fused butterfly: consumes the gradient of the packed output
/// `[2, batch, n]` and registers the gradients of `x_re`, `x_im`, `tw_re`, `tw_im`.
#[derive(Debug)]
struct FusedButterflyBackward;

/// What the backward needs: the forward's inputs (the stage inputs are recomputed on-chip) and
/// the input permutation as the kernels take it.
type State<R, B> = (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>, FloatTensor<B>, InputOrder<R>);

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> Backward<CubeBackend<R, F, I, BT>, 4>
    for FusedButterflyBackward
{
    type State = State<R, CubeBackend<R, F, I, BT>>;

    fn backward(self, ops: Ops<Self::State, 4>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        type B<R, F, I, BT> = CubeBackend<R, F, I, BT>;
        let grad_out = grads.consume::<B<R, F, I, BT>>(&ops.node);
        let (x_re, x_im, tw_re, tw_im, order) = ops.state;
        let tw_dims: [usize; 4] = tw_re.meta.shape().dims();
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
        let packed =
            record_fused::<CubeBackend<R, F, I, BT>, C, _, 4>(FusedButterflyBackward, inputs, |[xr, xi, twr, twi]| {
                // The gather's table goes up once and serves the backward's scatter too.
                let order = InputOrder::new(perm, n, &xr);
                let out = kernel::forward::<R, F>(xr.clone(), xi.clone(), twr.clone(), twi.clone(), &order);
                (out, (xr, xi, twr, twi, order))
            });
        split_packed(Tensor::<Self, 3>::from_primitive(TensorPrimitive::Float(packed)), batch, n)
    }

    fn butterfly_is_fused(n: usize, device: &Self::Device) -> bool {
        CubeBackend::<R, F, I, BT>::butterfly_is_fused(n, device)
    }
}
