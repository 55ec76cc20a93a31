//! Implementations of the [`crate::ops`] traits, one file per backend family. Each only forwards:
//! to the kernels ([`cubecl`]), to a custom `Backward` around them ([`autodiff`]), or to the
//! tensor-op reference ([`fallback`]).

pub mod autodiff;
pub mod cubecl;
pub mod fallback;
