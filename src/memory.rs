//! Memory checked before anything large is allocated: an operation estimates the bytes it needs
//! and refuses with the figure ([`Error::OutOfMemory`]) when the machine does not have them,
//! rather than aborting in the allocator or overflowing a capacity.

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
