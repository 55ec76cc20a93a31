//! Sums across devices (an all-reduce), for data-parallel training: one tensor of one shape on
//! each of several devices in, their sum on every one of those devices out, with no read to the
//! host where the backend has a collective for it.
//!
//! CUDA has one: NCCL's all-reduce through CubeCL's client, as Burn's own
//! `DistributedBackend::all_reduce` calls it (without Burn's `distributed` feature, which would
//! rebuild every Burn crate for a method this crate calls directly). CubeCL queues it after the
//! work already queued on the calling thread's stream of each device and makes that stream wait
//! for it, so the sum is ordered like any other op. Elsewhere (wgpu, the CPU backends, CUDA
//! without NCCL's library) the op answers `None` and the caller sums through the host.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// The all-reduce of [the module](self); the CPU backends and wgpu take the default (none).
pub trait CollectiveOps: Backend {
    /// The sum of `parts`, each on a device of its own, on each part's device (in the parts'
    /// order), every copy alike to the bit; `None` where the backend has no collective or the
    /// parts do not qualify (fewer than two, or two on one device), and the caller sums them
    /// some other way. The parts are left as they were.
    fn all_reduce_sum<const D: usize>(parts: &[Tensor<Self, D>]) -> Option<Vec<Tensor<Self, D>>> {
        let _ = parts;
        None
    }
}

#[cfg(feature = "fused")]
mod cubecl_impl {
    use burn::tensor::{Tensor, TensorMetadata, TensorPrimitive};
    use burn_cubecl::ops::numeric;
    use burn_cubecl::tensor::CubeTensor;
    use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};
    use cubecl::device::Device;
    use cubecl::server::{ReduceOperation, ServerCommunication};

    use super::CollectiveOps;

    /// Whether NCCL's library loads: CubeCL's CUDA collective panics on the device's thread
    /// without it (a CUDA driver does not bring it), and the caller can sum another way.
    #[cfg(feature = "cuda")]
    fn nccl_loads() -> bool {
        static LOADS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        // SAFETY: only tries to open the library by its usual names.
        *LOADS.get_or_init(|| unsafe { cudarc::nccl::sys::is_culib_present() })
    }

    /// Without CUDA in the build no runtime here has a collective.
    #[cfg(not(feature = "cuda"))]
    fn nccl_loads() -> bool {
        false
    }

    impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> CollectiveOps for CubeBackend<R, F, I, BT> {
        fn all_reduce_sum<const D: usize>(parts: &[Tensor<Self, D>]) -> Option<Vec<Tensor<Self, D>>> {
            if !<R::Server as ServerCommunication>::SERVER_COMM_ENABLED || parts.len() < 2 || !nccl_loads() {
                return None;
            }
            let tensors: Vec<CubeTensor<R>> = parts.iter().map(|p| p.clone().into_primitive().tensor()).collect();
            let ids: Vec<_> = tensors.iter().map(|t| t.device.to_id()).collect();
            if (1..ids.len()).any(|i| ids[..i].contains(&ids[i])) {
                return None;
            }
            let sums: Vec<CubeTensor<R>> = tensors
                .into_iter()
                .map(|t| {
                    // A fresh contiguous copy to reduce in place: the part may be shared or strided.
                    let zeros = numeric::zeros_client::<R>(t.client.clone(), t.device.clone(), t.shape(), t.dtype);
                    let sum = numeric::add(zeros, t);
                    let mut client = sum.client.clone();
                    client.all_reduce(
                        sum.handle.clone(),
                        sum.handle.clone(),
                        sum.dtype.into(),
                        ids.clone(),
                        ReduceOperation::Sum,
                    );
                    sum
                })
                .collect();
            // Each device's stream waits for its all-reduce before the sum is used.
            for sum in &sums {
                sum.client.sync_collective();
            }
            Some(sums.into_iter().map(|s| Tensor::from_primitive(TensorPrimitive::Float(s))).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::Tensor;

    use super::CollectiveOps;
    use crate::tensors::{float_tensor, to_f64_vec};

    /// Two parts, 1..=4 and their tenfold, on `device` (the same device twice), in `B`'s own
    /// float type (see [`float_tensor`]).
    fn parts<B: CollectiveOps>(device: &B::Device) -> Vec<Tensor<B, 1>> {
        let one = float_tensor::<B, 1>(vec![1.0, 2.0, 3.0, 4.0], [4], device);
        vec![one.clone(), one.mul_scalar(10.0)]
    }

    /// The CPU backends have no collective: the caller is told to sum another way, and the parts
    /// are left as they were.
    #[test]
    fn the_cpu_backends_decline() {
        type B = crate::backend::NdArrayBackend<f32>;
        let device = Default::default();
        let parts = parts::<B>(&device);
        assert!(B::all_reduce_sum(&parts).is_none());
        assert_eq!(to_f64_vec(parts[1].clone()), vec![10.0, 20.0, 30.0, 40.0]);
    }

    /// wgpu has no collective in CubeCL 0.10: the op declines rather than reach for one (which
    /// would panic there), and declines parts on one device on any backend. Skipped without an
    /// adapter.
    #[cfg(feature = "wgpu")]
    #[test]
    fn wgpu_declines() {
        type B = crate::backend::WgpuBackend;
        if crate::backend::wgpu_adapter().is_none() {
            assert!(!crate::backend::wgpu_required(), "LEARNED_FFT_REQUIRE_WGPU=1 but wgpu found no adapter");
            return;
        }
        let device = Default::default();
        let parts = parts::<B>(&device);
        assert!(B::all_reduce_sum(&parts).is_none());
        assert!(B::all_reduce_sum(&parts[..1]).is_none());
        assert_eq!(to_f64_vec(parts[0].clone()), vec![1.0, 2.0, 3.0, 4.0]);
    }
}
