//! Fused CubeCL kernels, one folder per op: each `#[cube]` kernel beside its launch wrapper.
//! They run on every CubeCL runtime (wgpu: Vulkan, Metal, DX12; CUDA) and use no plane
//! (subgroup) operations, so they also run on lavapipe.

pub mod butterfly;
