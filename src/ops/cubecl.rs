//! Helpers shared by the CubeCL impls of every op (wgpu, CUDA).

use burn::tensor::{backend::Backend, Shape, Tensor};
use burn_cubecl::{tensor::CubeTensor, CubeRuntime, FloatElement};
use cubecl::prelude::*;
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

/// A constant table (`values`, computed in f64 on the host, stored as `F`) on `like`'s device,
/// uploaded once per (runtime, device, float type, `name`, `n`) and shared by every later call:
/// such tables depend on nothing else, and an upload per launch is a host-to-device copy on
/// every forward and backward of a small, launch-bound op. The tables are a few KiB each (one
/// per size in use) and live as long as the process.
pub(crate) fn cached_table<R: CubeRuntime, F: FloatElement>(
    name: &'static str,
    n: usize,
    like: &CubeTensor<R>,
    values: impl FnOnce() -> Vec<f64>,
) -> CubeTensor<R> {
    use cubecl::device::Device as _;
    use std::any::{Any, TypeId};
    use std::collections::HashMap;
    use std::sync::{LazyLock, Mutex};
    type Key = (TypeId, TypeId, cubecl::device::DeviceId, &'static str, usize);
    static TABLES: LazyLock<Mutex<HashMap<Key, Box<dyn Any + Send + Sync>>>> = LazyLock::new(Default::default);

    let key = (TypeId::of::<R>(), TypeId::of::<F>(), like.device.to_id(), name, n);
    // The map holds no invariant a panicking thread could break.
    let mut tables = TABLES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(table) = tables.get(&key).and_then(|t| t.downcast_ref::<CubeTensor<R>>()) {
        return table.clone();
    }
    let values: Vec<F> = values().into_iter().map(F::from_elem).collect();
    let table = CubeTensor::new_contiguous(
        like.client.clone(),
        like.device.clone(),
        Shape::from(vec![values.len()]),
        like.client.create_from_slice(F::as_bytes(&values)),
        F::dtype(),
    );
    tables.insert(key, Box::new(table.clone()));
    table
}

/// Division of `u32` numerators below 2^31 by a divisor `d ≥ 1` known only at launch, as a
/// multiply-high, an add and a shift (Granlund and Montgomery's round-up method): with
/// `l = ⌈log2 d⌉` and `m = ⌊2^32 (2^l − d) / d⌋ + 1`, `n / d = (mulhi(n, m) + n) >> l`. A GPU has no
/// integer divider: `n / d` for a runtime `d` compiles to some twenty instructions, which a kernel
/// that divides per element (the overlap-add) pays per element.
#[derive(CubeLaunch, CubeType, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FastDiv {
    /// `m`.
    pub magic: u32,
    /// `l`.
    pub shift: u32,
}

/// The largest numerator (exclusive) [`FastDiv`] divides exactly: `mulhi(n, m) + n` stays below
/// 2^32.
pub(crate) const FAST_DIV_LIMIT: u64 = 1 << 31;

impl FastDiv {
    /// The constants for divisor `d` (`1 ≤ d < 2^31`).
    pub fn new(d: u32) -> Self {
        assert!((1..1 << 31).contains(&d), "FastDiv: divisor {d} outside 1 .. 2^31");
        let shift = u32::BITS - (d - 1).leading_zeros();
        let magic = (((1u64 << 32) * ((1u64 << shift) - d as u64)) / d as u64 + 1) as u32;
        FastDiv { magic, shift }
    }

    /// The host twin of [`fast_div`] (what the unit test checks against `/`).
    #[cfg(test)]
    pub fn divide(&self, n: u32) -> u32 {
        let high = ((n as u64 * self.magic as u64) >> 32) as u32;
        ((high as u64 + n as u64) >> self.shift) as u32
    }

    /// As a kernel argument.
    pub fn arg<R: Runtime>(&self) -> FastDivLaunch<R> {
        FastDivLaunch::new(self.magic, self.shift)
    }
}

/// `n / d` for the `d` that `div` was made for (`n` below [`FAST_DIV_LIMIT`]).
#[cube]
pub(crate) fn fast_div(n: u32, div: &FastDiv) -> u32 {
    (u32::mul_hi(n, div.magic) + n) >> div.shift
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The magic-number division equals `/` for every divisor up to 4097 and at the edges above
    /// (powers of two and their neighbours, up to 2^31 − 1), on small numerators, every numerator
    /// near a multiple of the divisor, and the largest ones allowed.
    #[test]
    fn fast_div_equals_integer_division() {
        let top = (FAST_DIV_LIMIT - 1) as u32;
        let mut divisors: Vec<u32> = (1..=4097).collect();
        for k in 12..31 {
            divisors.extend([(1u32 << k) - 1, 1 << k, (1 << k) + 1]);
        }
        divisors.push(top);
        for d in divisors {
            let div = FastDiv::new(d);
            let mut numerators: Vec<u32> = (0..2048).chain(top - 2048..=top).collect();
            for q in [1u32, 2, 3, 1000, 65_536, top / d] {
                let base = q.saturating_mul(d).min(top);
                numerators.extend([base.saturating_sub(1), base, base.saturating_add(1).min(top)]);
            }
            for n in numerators {
                assert_eq!(div.divide(n), n / d, "{n} / {d} (magic {}, shift {})", div.magic, div.shift);
            }
        }
    }
}
