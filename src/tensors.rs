//! Tensor creation with the backend's own element types.
//!
//! Burn 0.21 keeps one default float dtype per device, keyed by the device alone: `Candle<f32>`
//! and `Candle<f64>` (or `NdArray<f32>` and `NdArray<f64>`) share it, so in a process that uses
//! both, `Tensor::from_data(data, &device)` may produce f32 tensors on the f64 backend. Every
//! tensor this crate creates goes through these helpers, which name the dtype explicitly.

use burn::tensor::{backend::Backend, Element, Int, Tensor, TensorData};

/// A float tensor of `B`'s float type from f64 values (row-major).
pub fn float_tensor<B: Backend, const D: usize>(
    values: Vec<f64>,
    shape: [usize; D],
    device: &B::Device,
) -> Tensor<B, D> {
    Tensor::from_data(TensorData::new(values, shape), (device, <B::FloatElem as Element>::dtype()))
}

/// A float tensor of `B`'s float type filled with `value`.
pub fn full<B: Backend, const D: usize>(shape: [usize; D], value: f64, device: &B::Device) -> Tensor<B, D> {
    Tensor::full(shape, value, (device, <B::FloatElem as Element>::dtype()))
}

/// An int tensor of `B`'s int type.
pub fn int_tensor<B: Backend, const D: usize>(
    values: Vec<i64>,
    shape: [usize; D],
    device: &B::Device,
) -> Tensor<B, D, Int> {
    Tensor::from_data(TensorData::new(values, shape), (device, <B::IntElem as Element>::dtype()))
}

/// The identity matrix of `B`'s float type.
pub fn eye<B: Backend>(n: usize, device: &B::Device) -> Tensor<B, 2> {
    let mut v = vec![0.0; n * n];
    (0..n).for_each(|i| v[i * n + i] = 1.0);
    float_tensor(v, [n, n], device)
}

/// The values of a tensor as f64, row-major.
pub fn to_f64_vec<B: Backend, const D: usize>(tensor: Tensor<B, D>) -> Vec<f64> {
    tensor.into_data().iter::<f64>().collect()
}

/// Largest index tensor given to one `select`. Burn 0.21's `select` backward on wgpu returns
/// wrong gradients once the index has more than 65 535 entries (seen on lavapipe and on NVIDIA
/// through Vulkan, for framing and for the butterfly's permutation at N = 65536; `unfold` and
/// reflect `pad` are wrong elsewhere, so framing stays a `select`): longer gathers are split and
/// concatenated.
const MAX_SELECT_INDICES: usize = 1 << 15;

/// `x.select(1, indices)` for `[rows, cols]`, in pieces of at most [`MAX_SELECT_INDICES`].
pub fn select_columns<B: Backend>(x: Tensor<B, 2>, indices: Vec<i64>) -> Tensor<B, 2> {
    let device = x.device();
    let pieces: Vec<Tensor<B, 2>> = indices
        .chunks(MAX_SELECT_INDICES)
        .map(|c| x.clone().select(1, int_tensor::<B, 1>(c.to_vec(), [c.len()], &device)))
        .collect();
    // With several pieces, the backward of `cat` hands each `select` a column slice of the
    // gradient, which candle stores strided, and candle's `index_add` (the `select` backward)
    // takes only contiguous tensors. Multiplying by one gives each piece a backward that writes
    // a fresh, contiguous gradient first.
    let pieces: Vec<Tensor<B, 2>> =
        if pieces.len() > 1 { pieces.into_iter().map(|p| p.mul_scalar(1.0)).collect() } else { pieces };
    if pieces.len() == 1 {
        pieces.into_iter().next().expect("one piece")
    } else {
        Tensor::cat(pieces, 1)
    }
}

/// `x` `[outer, m, inner]` with its middle axis in bit-reversed order (m = 2^L), as ⌊L/2⌋ swaps
/// of index bits `(L−1−i, i)`, each a reshape, a transpose of two axes and a copy. Its backward
/// is the same few copies, where a `select`'s is, on the CubeCL backends, a kernel with one
/// thread per position off the selected axis, each looping over the whole index: re-indexing
/// the twiddles of `ButterflyLinear` 4096 → 4096 (24 576 rows of 4) that way made two factors
/// cost 11.8 ms forward + backward on an H200, 4.1 ms with these transposes (and the output's
/// bit reversal by transposes too).
pub fn bit_reversed_axis<B: Backend>(x: Tensor<B, 3>) -> Tensor<B, 3> {
    let [outer, m, inner] = x.dims();
    let bits = m.trailing_zeros() as usize;
    (0..bits / 2).fold(x, |x, i| {
        let (p, q) = (bits - 1 - i, i);
        // Index bits: [above p][p][between][q][below q], then the inner axis.
        let shape = [outer, m >> (p + 1), 2, 1 << (p - q - 1), 2, (1 << q) * inner];
        x.reshape(shape).swap_dims(2, 4).reshape([outer, m, inner])
    })
}
