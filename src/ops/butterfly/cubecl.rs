//! CubeCL backends (wgpu, CUDA) without autodiff: the fused forward kernel.

use burn::tensor::{Tensor, TensorPrimitive};
use burn_cubecl::{element::BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};

use super::kernel::real::PairMap;
use super::kernel::InputOrder;
use super::{butterfly_forward_reference, butterfly_tangent_reference, kernel, ButterflyOps, Permutation, Tangent};
use super::{fft_conv_real, fft_conv_reference, rfft, rfft_reference, ConvSize};
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
        let consistent = conv_shapes_fit(&x, &weight, bias.as_ref(), (&tw_re, &tw_im), perm, size, n);
        if !consistent || !Self::butterfly_conv_is_fused(n, &x.device()) {
            return fft_conv_reference(x, weight, bias, tw_re, tw_im, perm, size);
        }
        let x = x.into_primitive().tensor();
        let order = InputOrder::new(perm, n, &x);
        let (y, _) = kernel::conv::fft_conv::<R, F>(
            x,
            weight.into_primitive().tensor(),
            bias.map(|b| b.into_primitive().tensor()),
            (tw_re.into_primitive().tensor(), tw_im.into_primitive().tensor()),
            &order,
            (n, out_len),
        );
        Tensor::from_primitive(TensorPrimitive::Float(y))
    }

    fn butterfly_conv_is_fused(n: usize, device: &Self::Device) -> bool {
        kernel::conv::conv_supported::<R, F>(n, device)
    }

    fn butterfly_conv_real(
        x: Tensor<Self, 3>,
        weight: Tensor<Self, 2>,
        bias: Option<Tensor<Self, 1>>,
        tw_re: Tensor<Self, 4>,
        tw_im: Tensor<Self, 4>,
        perm: &Permutation,
        size: ConvSize,
    ) -> Tensor<Self, 3> {
        let ConvSize { n, out_len } = size;
        let m = n / 2;
        // As in `butterfly_conv`: anything inconsistent takes the tensor ops, which check.
        let consistent = n >= 4 && conv_shapes_fit(&x, &weight, bias.as_ref(), (&tw_re, &tw_im), perm, size, m);
        if !consistent || !Self::butterfly_conv_real_is_fused(n, &x.device()) {
            return fft_conv_real(x, weight, bias, tw_re, tw_im, perm, size);
        }
        let x = x.into_primitive().tensor();
        let order = InputOrder::new(perm, m, &x);
        let (y, _) = kernel::real::fft_conv_real::<R, F>(
            x,
            weight.into_primitive().tensor(),
            bias.map(|b| b.into_primitive().tensor()),
            (tw_re.into_primitive().tensor(), tw_im.into_primitive().tensor()),
            &order,
            (n, out_len),
        );
        Tensor::from_primitive(TensorPrimitive::Float(y))
    }

    fn rfft_split(zr: Tensor<Self, 2>, zi: Tensor<Self, 2>) -> (Tensor<Self, 2>, Tensor<Self, 2>) {
        match pair_map::<R, F, I, BT>(zr, zi, PairMap::Split) {
            Ok(out) => out,
            Err((zr, zi)) => rfft::split(zr, zi),
        }
    }

    fn rfft_merge(xr: Tensor<Self, 2>, xi: Tensor<Self, 2>) -> (Tensor<Self, 2>, Tensor<Self, 2>) {
        match pair_map::<R, F, I, BT>(xr, xi, PairMap::Merge) {
            Ok(out) => out,
            Err((xr, xi)) => rfft::merge(xr, xi),
        }
    }

    fn butterfly_rfft(
        x: Tensor<Self, 2>,
        tw_re: Tensor<Self, 4>,
        tw_im: Tensor<Self, 4>,
        perm: &Permutation,
    ) -> (Tensor<Self, 2>, Tensor<Self, 2>) {
        let [rows, n] = x.dims();
        let m = n / 2;
        let tw_shape = [m.trailing_zeros() as usize, m / 2, 2, 2];
        let consistent = n >= 4
            && n.is_power_of_two()
            && tw_re.dims() == tw_shape
            && tw_im.dims() == tw_shape
            && !matches!(perm, Permutation::Gather(g) if g.len() != m);
        if !consistent || !Self::butterfly_conv_real_is_fused(n, &x.device()) {
            return rfft_reference(x, tw_re, tw_im, perm);
        }
        let x = x.into_primitive().tensor();
        let order = InputOrder::new(perm, m, &x);
        let packed =
            kernel::real::rfft::<R, F>(x, (tw_re.into_primitive().tensor(), tw_im.into_primitive().tensor()), &order);
        split_packed(Tensor::<Self, 3>::from_primitive(TensorPrimitive::Float(packed)), rows, m + 1)
    }

    fn butterfly_conv_real_is_fused(n: usize, device: &Self::Device) -> bool {
        kernel::real::real_supported::<R, F>(n, device)
    }
}

/// Real and imaginary parts.
type Refused<B> = (Tensor<B, 2>, Tensor<B, 2>);

/// `map` of rows `(re, im)` through the fused pair kernel: `Err` with the inputs where their
/// shapes are not the map's (the caller then takes the tensor ops, which check).
#[allow(clippy::type_complexity)]
pub(crate) fn pair_map<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement>(
    re: Tensor<CubeBackend<R, F, I, BT>, 2>,
    im: Tensor<CubeBackend<R, F, I, BT>, 2>,
    map: PairMap,
) -> Result<Refused<CubeBackend<R, F, I, BT>>, Refused<CubeBackend<R, F, I, BT>>> {
    let [rows, len] = re.dims();
    let m = match map {
        PairMap::Split | PairMap::MergeAdjoint => len,
        PairMap::SplitAdjoint | PairMap::Merge => len.saturating_sub(1),
    };
    if !m.is_power_of_two() || m < 2 || im.dims() != [rows, len] || rows == 0 {
        return Err((re, im));
    }
    let packed = kernel::real::pair_map::<R, F>(re.into_primitive().tensor(), im.into_primitive().tensor(), m, map);
    let out_len = map.lengths(m).1;
    Ok(split_packed(
        Tensor::<CubeBackend<R, F, I, BT>, 3>::from_primitive(TensorPrimitive::Float(packed)),
        rows,
        out_len,
    ))
}

/// Whether a convolution's operands have the shapes its fused kernels index by unchecked, for a
/// butterfly of `fft_n` (`size.n`, or half of it on the rfft path).
pub(super) fn conv_shapes_fit<B: burn::tensor::backend::Backend>(
    x: &Tensor<B, 3>,
    weight: &Tensor<B, 2>,
    bias: Option<&Tensor<B, 1>>,
    (tw_re, tw_im): (&Tensor<B, 4>, &Tensor<B, 4>),
    perm: &Permutation,
    size: ConvSize,
    fft_n: usize,
) -> bool {
    let [_, channels, length] = x.dims();
    let [taps_channels, taps] = weight.dims();
    let tw_shape = [fft_n.trailing_zeros() as usize, fft_n / 2, 2, 2];
    channels == taps_channels
        && length <= size.n
        && taps <= size.n
        && size.out_len <= size.n
        && tw_re.dims() == tw_shape
        && tw_im.dims() == tw_shape
        && bias.is_none_or(|b| b.dims() == [channels])
        && !matches!(perm, Permutation::Gather(g) if g.len() != fft_n)
}
