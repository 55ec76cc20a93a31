//! Fused CubeCL kernels, one folder per op: each `#[cube]` kernel beside its launch wrapper.
//! They run on every CubeCL runtime (wgpu: Vulkan, Metal, DX12; CUDA) and use no plane
//! (subgroup) operations, so they also run on lavapipe.

pub mod butterfly;
pub mod spectral;

use burn::tensor::Shape;
use burn_cubecl::{tensor::CubeTensor, CubeRuntime, FloatElement};

/// An uninitialised contiguous `F` tensor of shape `dims` on `like`'s device.
pub(crate) fn empty<R: CubeRuntime, F: FloatElement>(like: &CubeTensor<R>, dims: Vec<usize>) -> CubeTensor<R> {
    let shape = Shape::from(dims);
    let buffer = like.client.empty(shape.num_elements() * core::mem::size_of::<F>());
    CubeTensor::new_contiguous(like.client.clone(), like.device.clone(), shape, buffer, F::dtype())
}
