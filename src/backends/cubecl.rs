//! CubeCL backends (wgpu, CUDA) without autodiff: the fused forward kernel.

use burn::tensor::{Tensor, TensorPrimitive};
use burn_cubecl::{element::BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};

use crate::butterfly::{butterfly_forward_reference, Permutation};
use crate::error::Result;
use crate::kernels::butterfly as kernel;
use crate::kernels::spectral as spectral_kernel;
use crate::ops::{ButterflyOps, SpectralOps};
use crate::spectral::{check_pair, check_stft, spectral_loss_composed, stft_magnitudes_reference, LossParams, Magnitude, StftTables};

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> ButterflyOps for CubeBackend<R, F, I, BT> {
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
        let packed = kernel::forward::<R, F>(
            x_re.into_primitive().tensor(),
            x_im.into_primitive().tensor(),
            tw_re.into_primitive().tensor(),
            tw_im.into_primitive().tensor(),
            perm,
        );
        split_packed(Tensor::<Self, 3>::from_primitive(TensorPrimitive::Float(packed)), batch, n)
    }

    fn butterfly_is_fused(n: usize, device: &Self::Device) -> bool {
        kernel::fused_supported::<R, F>(n, device)
    }
}

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> SpectralOps for CubeBackend<R, F, I, BT> {
    fn stft_magnitudes(x: Tensor<Self, 2>, tables: &StftTables<Self>, hop: usize, magnitude: Magnitude, eps: f64) -> Result<Tensor<Self, 3>> {
        if !Self::stft_is_fused(tables.win(), &x.device()) {
            return stft_magnitudes_reference(x, tables, hop, magnitude, eps);
        }
        check_stft("stft_magnitudes", &x, tables.win(), hop)?;
        let m = spectral_kernel::magnitudes::<R, F>(
            x.into_primitive().tensor(),
            tables.window_values.clone().into_primitive().tensor(),
            tables.twiddle_re.clone().into_primitive().tensor(),
            tables.twiddle_im.clone().into_primitive().tensor(),
            hop,
            magnitude,
            eps,
        );
        Ok(Tensor::from_primitive(TensorPrimitive::Float(m)))
    }

    fn stft_is_fused(win: usize, device: &Self::Device) -> bool {
        spectral_kernel::fused_supported::<R, F>(win, device)
    }

    fn spectral_loss(pred: Tensor<Self, 2>, target: Tensor<Self, 2>, tables: &StftTables<Self>, params: &LossParams) -> Result<Tensor<Self, 1>> {
        if !Self::spectral_loss_is_fused(tables.win(), &pred.device()) {
            return spectral_loss_composed(pred, target, tables, params);
        }
        check_pair("spectral_loss", &pred, &target)?;
        check_stft("spectral_loss", &pred, tables.win(), params.hop)?;
        let (loss, _sums) = spectral_kernel::loss_forward::<R, F>(
            pred.into_primitive().tensor(),
            target.into_primitive().tensor(),
            tables.window_values.clone().into_primitive().tensor(),
            tables.twiddle_re.clone().into_primitive().tensor(),
            tables.twiddle_im.clone().into_primitive().tensor(),
            *params,
        );
        Ok(Tensor::from_primitive(TensorPrimitive::Float(loss)))
    }

    fn spectral_loss_is_fused(win: usize, device: &Self::Device) -> bool {
        spectral_kernel::loss_supported::<R, F>(win, device)
    }
}

/// `[2, batch, n]` → (re, im), each `[batch, n]` (views, no copy).
pub(crate) fn split_packed<B: burn::tensor::backend::Backend>(
    packed: Tensor<B, 3>,
    batch: usize,
    n: usize,
) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let re = packed.clone().narrow(0, 0, 1).reshape([batch, n]);
    let im = packed.narrow(0, 1, 1).reshape([batch, n]);
    (re, im)
}
