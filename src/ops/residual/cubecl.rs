//! CubeCL backends (wgpu, CUDA) without autodiff: the tensor ops (no gradient to keep).

use burn_cubecl::{element::BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};

use super::ResidualOps;

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> ResidualOps for CubeBackend<R, F, I, BT> {}
