//! CubeCL backends (wgpu, CUDA) without autodiff: the fused forward kernel.

use burn::tensor::{Tensor, TensorPrimitive};
use burn_cubecl::{element::BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};

use super::kernel::InputOrder;
use super::{butterfly_forward_reference, butterfly_tangent_reference, kernel, ButterflyOps, Permutation, Tangent};
use super::{fft_conv_reference, ConvSize};
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
        let x_re = x_re.into_primitive().tensor();
        let order = InputOrder::new(perm, n, &x_re);
        let packed = kernel::forward::<R, F>(
            x_re,
            x_im.into_primitive().tensor(),
            tw_re.into_primitive().tensor(),
            tw_im.into_primitive().tensor(),
            &order,
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
        let prim = |t: Tensor<Self, 2>| t.into_primitive().tensor();
        let prim4 = |t: &Tensor<Self, 4>| t.clone().into_primitive().tensor();
        let x_re = prim(x.0);
        let order = InputOrder::new(perm, n, &x_re);
        let (y, dy) = kernel::tangent::<R, F>(
            (x_re, prim(x.1)),
            (prim(dx.0), prim(dx.1)),
            (prim4(tw.0), prim4(tw.1)),
            (prim4(dtw.0), prim4(dtw.1)),
            &order,
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

    fn butterfly_conv(
        x: Tensor<Self, 3>,
        weight: Tensor<Self, 2>,
        bias: Option<Tensor<Self, 1>>,
        tw_re: Tensor<Self, 4>,
        tw_im: Tensor<Self, 4>,
        perm: &Permutation,
        size: ConvSize,
    ) -> Tensor<Self, 3> {
        let ConvSize { n, out_len } = size;
        // The kernels index by these shapes unchecked: anything inconsistent takes the reference,
        // whose tensor ops check their operands.
        let [_, channels, length] = x.dims();
        let [taps_channels, taps] = weight.dims();
        let tw_shape = [n.trailing_zeros() as usize, n / 2, 2, 2];
        let consistent = channels == taps_channels
            && length <= n
            && taps <= n
            && out_len <= n
            && tw_re.dims() == tw_shape
            && tw_im.dims() == tw_shape
            && bias.as_ref().is_none_or(|b| b.dims() == [channels])
            && !matches!(perm, Permutation::Gather(g) if g.len() != n);
        if !consistent || !Self::butterfly_conv_is_fused(n, &x.device()) {
            return fft_conv_reference(x, weight, bias, tw_re, tw_im, perm, size);
        }
        let x = x.into_primitive().tensor();
        let order = InputOrder::new(perm, n, &x);
        let y = kernel::conv::fft_conv::<R, F>(
            x,
            weight.into_primitive().tensor(),
            bias.map(|b| b.into_primitive().tensor()),
            (tw_re.into_primitive().tensor(), tw_im.into_primitive().tensor()),
            &order,
            n,
            out_len,
        );
        Tensor::from_primitive(TensorPrimitive::Float(y))
    }

    fn butterfly_conv_is_fused(n: usize, device: &Self::Device) -> bool {
        kernel::conv::conv_supported::<R, F>(n, device)
    }
}
