//! Helpers shared by the CubeCL impls of every op (wgpu, CUDA).

use burn::tensor::{backend::Backend, Shape, Tensor};
use burn_cubecl::{tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::server::MemoryLayoutDescriptor;

/// An uninitialised contiguous `F` tensor of shape `dims` on `like`'s device.
pub(crate) fn empty<R: CubeRuntime, F: FloatElement>(like: &CubeTensor<R>, dims: Vec<usize>) -> CubeTensor<R> {
    let shape = Shape::from(dims);
    let buffer = like.client.empty(shape.num_elements() * core::mem::size_of::<F>());
    CubeTensor::new_contiguous(like.client.clone(), like.device.clone(), shape, buffer, F::dtype())
}

/// Uninitialised contiguous `F` tensors of the shapes `dims` on `like`'s device, carved out of
/// one allocation: one request to the device instead of one per tensor, for small outputs of one
/// launch (the memory is released when the last of them is dropped, so not for scratch space that
/// should not live as long as the others).
pub(crate) fn empties<R: CubeRuntime, F: FloatElement, const K: usize>(
    like: &CubeTensor<R>,
    dims: [&[usize]; K],
) -> [CubeTensor<R>; K] {
    let size = core::mem::size_of::<F>();
    let descriptors = dims.iter().map(|d| MemoryLayoutDescriptor::contiguous(Shape::from(d.to_vec()), size)).collect();
    let mut layouts = like.client.empty_tensors(descriptors).into_iter();
    dims.map(|d| {
        let memory = layouts.next().expect("one layout per shape").memory;
        CubeTensor::new_contiguous(
            like.client.clone(),
            like.device.clone(),
            Shape::from(d.to_vec()),
            memory,
            F::dtype(),
        )
    })
}

/// The largest power of two no larger than `n` (1 for 0): a device's threads per cube as the
/// kernels' power-of-two plans may use them.
pub(crate) fn floor_pow2(n: usize) -> usize {
    1 << n.max(1).ilog2()
}

/// A cube count of at least `cubes` cubes, spread over x and y (x is limited to 65 535).
pub(crate) fn grid(cubes: usize) -> cubecl::CubeCount {
    let x = cubes.clamp(1, 65_535);
    cubecl::CubeCount::Static(x as u32, cubes.div_ceil(x).max(1) as u32, 1)
}

/// `[2, batch, n]` → (re, im), each `[batch, n]` (views, no copy).
pub(crate) fn split_packed<B: Backend>(packed: Tensor<B, 3>, batch: usize, n: usize) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let re = packed.clone().narrow(0, 0, 1).reshape([batch, n]);
    let im = packed.narrow(0, 1, 1).reshape([batch, n]);
    (re, im)
}
