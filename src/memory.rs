//! Memory checked before anything large is allocated: an operation estimates the bytes it needs
//! and refuses with the figure ([`Error::OutOfMemory`]) when the machine does not have them,
//! rather than aborting in the allocator or overflowing a capacity. A GPU's own memory is
//! checked where the driver reports it ([`device_memory`], [`ensure_device`]).

use crate::error::{Error, Result};

/// Bytes of RAM available now, when the operating system says.
pub fn available() -> Option<u64> {
    use sysinfo::{MemoryRefreshKind, RefreshKind, System};
    let sys = System::new_with_specifics(RefreshKind::nothing().with_memory(MemoryRefreshKind::nothing().with_ram()));
    Some(sys.available_memory()).filter(|&b| b > 0)
}

/// `factors` multiplied, in bytes; `None` when the product overflows.
pub fn product(factors: &[usize]) -> Option<u64> {
    factors.iter().try_fold(1u64, |acc, &f| acc.checked_mul(u64::try_from(f).ok()?))
}

/// The sum of estimates; `None` when one is `None` or the sum overflows.
pub fn sum(terms: &[Option<u64>]) -> Option<u64> {
    terms.iter().try_fold(0u64, |acc, t| acc.checked_add((*t)?))
}

/// Refuses when `needed` bytes (`None`: more than a u64 can count) exceed the memory available
/// now. When the operating system does not say, only an overflowing figure is refused.
///
/// # Errors
/// [`Error::OutOfMemory`] naming `op`, `what`, the figure and what is available.
pub fn ensure(op: &'static str, what: impl FnOnce() -> String, needed: Option<u64>) -> Result<()> {
    let available = match needed {
        None => None,
        Some(bytes) => match available() {
            Some(have) if bytes > have => Some(have),
            _ => return Ok(()),
        },
    };
    Err(Error::OutOfMemory { op, what: what(), needed: needed.unwrap_or(u64::MAX), available })
}

/// A GPU's own memory, as its driver reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceMemory {
    /// The device, as errors name it (e.g. `"CUDA device 0"`).
    pub name: String,
    /// Its memory in bytes, in all.
    pub total: u64,
}

/// The memory of the device `device` names, where it is not the host's and its driver reports
/// it: a CUDA device's total (the driver's `cuDeviceTotalMem`). `None` for the CPU backends
/// (their memory is the host's, which [`ensure`] checks), for wgpu (whose API reports no memory
/// size, only limits on one buffer), and when the driver does not answer.
pub fn device_memory<D: 'static>(device: &D) -> Option<DeviceMemory> {
    #[cfg(feature = "cuda")]
    if let Some(cuda) = (device as &dyn std::any::Any).downcast_ref::<cubecl::cuda::CudaDevice>() {
        use cudarc::driver::result;
        result::init().ok()?;
        let ordinal = i32::try_from(cuda.index).ok()?;
        let handle = result::device::get(ordinal).ok()?;
        // SAFETY: `handle` is a device the initialised driver returned.
        let total = unsafe { result::device::total_mem(handle) }.ok()?;
        return Some(DeviceMemory { name: format!("CUDA device {}", cuda.index), total: total as u64 });
    }
    let _ = device;
    None
}

/// Refuses when `needed` bytes (`None`: more than a u64 can count) exceed the memory of the
/// device `memory` describes, before anything is allocated there.
///
/// # Errors
/// [`Error::OutOfMemory`] naming `op`, `what` on the device, the figure and the device's total.
pub fn ensure_device(
    op: &'static str,
    what: impl FnOnce() -> String,
    needed: Option<u64>,
    memory: &DeviceMemory,
) -> Result<()> {
    match needed {
        Some(bytes) if bytes <= memory.total => Ok(()),
        _ => Err(Error::OutOfMemory {
            op,
            what: format!("{} in the memory of {}", what(), memory.name),
            needed: needed.unwrap_or(u64::MAX),
            available: Some(memory.total),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_need_above_the_devices_memory_is_refused_naming_the_device_and_both_figures() {
        let gpu = DeviceMemory { name: "CUDA device 1".into(), total: 80 << 30 };
        assert!(ensure_device("train", || "training".into(), Some(80 << 30), &gpu).is_ok());
        let err = ensure_device("train", || "training at N = 1048576".into(), Some(81 << 30), &gpu).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, Error::OutOfMemory { needed, available: Some(a), .. } if needed == 81 << 30 && a == 80 << 30)
        );
        assert!(text.contains("training at N = 1048576 in the memory of CUDA device 1"), "{text}");
        // A figure that overflows is refused, whatever the device.
        assert!(ensure_device("train", String::new, None, &gpu).is_err());
    }

    #[test]
    fn the_cpu_backends_memory_is_the_hosts() {
        assert_eq!(device_memory(&burn::backend::ndarray::NdArrayDevice::Cpu), None);
    }
}
