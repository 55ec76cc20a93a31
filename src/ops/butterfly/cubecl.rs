//! CubeCL backends (wgpu, CUDA) without autodiff: the fused forward kernel.

use burn::tensor::{Tensor, TensorPrimitive};
use burn_cubecl::{element::BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};

use super::reference::permute_input;
use super::{butterfly_forward_reference, butterfly_tangent_reference, kernel, ButterflyOps, Permutation, Tangent};
use crate::ops::cubecl::split_packed;

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> ButterflyOps for CubeBackend<R, F, I, BT> {
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
        if let Permutation::Gather(_) = perm {
            let (x_re, x_im) = permute_input(x_re, x_im, perm);
            return Self::butterfly(x_re, x_im, tw_re, tw_im, &Permutation::Identity);
        }
        let packed = kernel::forward::<R, F>(
            x_re.into_primitive().tensor(),
            x_im.into_primitive().tensor(),
            tw_re.into_primitive().tensor(),
            tw_im.into_primitive().tensor(),
            *perm == Permutation::BitReversal,
        );
        split_packed(Tensor::<Self, 3>::from_primitive(TensorPrimitive::Float(packed)), batch, n)
    }

    fn butterfly_tangent(
        x: (Tensor<Self, 2>, Tensor<Self, 2>),
        dx: (Tensor<Self, 2>, Tensor<Self, 2>),
        tw: (&Tensor<Self, 4>, &Tensor<Self, 4>),
        dtw: (&Tensor<Self, 4>, &Tensor<Self, 4>),
        perm: &Permutation,
    ) -> Tangent<Self> {
        let [batch, n] = x.0.dims();
        if !Self::butterfly_tangent_is_fused(n, &x.0.device()) {
            return butterfly_tangent_reference(x, dx, tw, dtw, perm);
        }
        if let Permutation::Gather(_) = perm {
            let x = permute_input(x.0, x.1, perm);
            let dx = permute_input(dx.0, dx.1, perm);
            return Self::butterfly_tangent(x, dx, tw, dtw, &Permutation::Identity);
        }
        let prim = |t: Tensor<Self, 2>| t.into_primitive().tensor();
        let prim4 = |t: &Tensor<Self, 4>| t.clone().into_primitive().tensor();
        let (y, dy) = kernel::tangent::<R, F>(
            (prim(x.0), prim(x.1)),
            (prim(dx.0), prim(dx.1)),
            (prim4(tw.0), prim4(tw.1)),
            (prim4(dtw.0), prim4(dtw.1)),
            *perm == Permutation::BitReversal,
        );
        let unpack = |t| split_packed(Tensor::<Self, 3>::from_primitive(TensorPrimitive::Float(t)), batch, n);
        (unpack(y), unpack(dy))
    }

    fn butterfly_is_fused(n: usize, device: &Self::Device) -> bool {
        kernel::fused_supported::<R, F>(n, device)
    }

    fn butterfly_tangent_is_fused(n: usize, device: &Self::Device) -> bool {
        kernel::tangent_supported::<R, F>(n, device)
    }
}
