//! CubeCL backends (wgpu, CUDA) without autodiff: the fused forward kernels.

use burn::tensor::{Tensor, TensorPrimitive};
use burn_cubecl::{element::BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};

use super::{check_pair, check_stft, kernel, spectral_loss_composed, stft_magnitudes_reference};
use super::{LossParams, Magnitude, SpectralOps, StftTables};
use crate::error::Result;

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> SpectralOps for CubeBackend<R, F, I, BT> {
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
        let t = tables.kernel_tables();
        let m = kernel::magnitudes::<R, F>(x.into_primitive().tensor(), &t, hop, magnitude, eps);
        Ok(Tensor::from_primitive(TensorPrimitive::Float(m)))
    }

    fn stft_is_fused(win: usize, device: &Self::Device) -> bool {
        kernel::fused_supported::<R, F>(win, device)
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
        let t = tables.kernel_tables();
        let (pred, target) = (pred.into_primitive().tensor(), target.into_primitive().tensor());
        let out = kernel::loss_forward::<R, F>(pred, target, &t, *params, (false, false));
        Ok(Tensor::from_primitive(TensorPrimitive::Float(out.loss)))
    }

    fn spectral_loss_is_fused(win: usize, device: &Self::Device) -> bool {
        kernel::loss_supported::<R, F>(win, device)
    }

    fn reference_matmul(_device: &Self::Device) -> bool {
        F::dtype() != burn::tensor::DType::F64
    }
}
