//! Backend choice: ndarray (always compiled in), and with their crate features wgpu, candle and
//! CUDA, at f32 or f64.
//!
//! Everything that runs on "the chosen backend" is written once, generic over
//! `B: AutodiffBackend`, as a [`BackendTask`]; [`dispatch`] picks the concrete backend type at
//! run time. The choice comes from a `--backend` flag or the `LEARNED_FFT_BACKEND` environment
//! variable (the flag wins); `auto` takes wgpu when it is compiled in and a hardware wgpu adapter
//! (a GPU) exists, else candle when it is compiled in, else ndarray. A CPU adapter such as Mesa's
//! lavapipe is used only when wgpu is named: on a CPU, native code is faster. At f64 `auto` takes
//! the CPU backend, since wgpu is f32-only. A backend named but not compiled in is an error that
//! names the feature to build with.
//!
//! | backend | feature | f32 | f64 | device |
//! |---|---|---|---|---|
//! | ndarray | always | yes | yes | CPU |
//! | wgpu | `wgpu` | yes | refused (CubeCL's wgpu f64 returns wrong values) | default adapter (Vulkan; Metal on macOS) |
//! | candle | `candle` | yes | yes | CPU |
//! | cuda | `cuda` | yes | yes | GPU 0 |

use std::fmt;
use std::str::FromStr;

use burn::tensor::backend::{AutodiffBackend, Backend, Device as _, DeviceId};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::ops::{AdamOps, ButterflyOps, CollectiveOps, ResidualOps, SpectralOps};

/// The environment variable read when no `--backend` flag is given.
pub const BACKEND_ENV: &str = "LEARNED_FFT_BACKEND";

/// The wgpu backend without fusion: the concrete type custom CubeCL kernels are written for.
#[cfg(feature = "wgpu")]
pub type WgpuBackend = burn::backend::wgpu::CubeBackend<burn::backend::wgpu::WgpuRuntime, f32, i32, u32>;
/// The candle backend on the CPU at float type `F`. (burn-candle 0.21 is marked deprecated;
/// it still works and gives the same numbers, and the issue asks for it.)
#[cfg(feature = "candle")]
#[allow(deprecated)]
pub type CandleBackend<F = f32> = burn::backend::Candle<F, i64>;
/// The ndarray backend at float type `F`.
pub type NdArrayBackend<F = f32> = burn::backend::NdArray<F>;
/// The CUDA backend at float type `F` and int type `I`.
#[cfg(feature = "cuda")]
pub type CudaBackend<F = f32, I = i32> = burn_cubecl::CubeBackend<cubecl::cuda::CudaRuntime, F, I, u8>;

/// Which backend to run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// wgpu when a GPU adapter exists, else candle.
    Auto,
    /// wgpu (Vulkan; Metal on macOS; Mesa's lavapipe on a machine without a GPU).
    Wgpu,
    /// candle on the CPU.
    Candle,
    /// ndarray on the CPU.
    Ndarray,
    /// CUDA (needs the crate feature `cuda`).
    Cuda,
}

impl BackendKind {
    /// Every backend, in the order the CLI lists them.
    pub const VARIANTS: [BackendKind; 5] =
        [BackendKind::Auto, BackendKind::Wgpu, BackendKind::Candle, BackendKind::Ndarray, BackendKind::Cuda];

    /// The lowercase name: the one spelling that `--backend`, the environment variable,
    /// `Display` and the JSON records share.
    pub const fn as_str(self) -> &'static str {
        match self {
            BackendKind::Auto => "auto",
            BackendKind::Wgpu => "wgpu",
            BackendKind::Candle => "candle",
            BackendKind::Ndarray => "ndarray",
            BackendKind::Cuda => "cuda",
        }
    }

    /// The backend named by `LEARNED_FFT_BACKEND`, or `Auto` when it is unset or empty.
    pub fn from_env() -> Result<Self> {
        match std::env::var(BACKEND_ENV) {
            Ok(v) if !v.trim().is_empty() => v.parse().map_err(|_| {
                Error::invalid(
                    "backend",
                    format!("{BACKEND_ENV} to be one of auto, wgpu, candle, ndarray, cuda (or a --backend flag)"),
                    format!("{v:?}"),
                )
            }),
            _ => Ok(BackendKind::Auto),
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BackendKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let name = s.trim();
        Self::VARIANTS
            .into_iter()
            .find(|k| k.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| Error::UnknownBackend(s.to_string()))
    }
}

/// Floating-point precision of parameters and arithmetic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// IEEE single precision.
    #[default]
    F32,
    /// IEEE double precision.
    F64,
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Precision {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let name = s.trim();
        Self::VARIANTS
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| Error::invalid("precision", "f32 or f64", format!("{s:?}")))
    }
}

impl Precision {
    /// Both precisions, in the order the CLI lists them.
    pub const VARIANTS: [Precision; 2] = [Precision::F32, Precision::F64];

    /// The lowercase name (`f32`, `f64`): what `--precision` takes and `Display` and serde
    /// write.
    pub const fn as_str(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }

    /// The precision of backend `B`'s float type.
    pub fn of<B: burn::tensor::backend::Backend>() -> Self {
        match <B::FloatElem as burn::tensor::Element>::dtype() {
            burn::tensor::DType::F64 => Precision::F64,
            _ => Precision::F32,
        }
    }
}

/// The wgpu adapter a default wgpu device would use, if any.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AdapterSummary {
    /// Adapter name (e.g. `"NVIDIA H100 80GB HBM3"`, `"llvmpipe (LLVM 15.0.6, 256 bits)"`).
    pub name: String,
    /// Device type: `DiscreteGpu`, `IntegratedGpu`, `VirtualGpu`, `Cpu` or `Other`.
    pub device_type: String,
    /// Graphics API: `Vulkan`, `Metal`, `Dx12`, `Gl`, …
    pub api: String,
    /// The shader language CubeCL compiles the kernels to there: `SPIR-V` on Vulkan with the
    /// crate feature `vulkan`, else `WGSL`.
    pub compiler: String,
}

impl fmt::Display for AdapterSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}, {}, {})", self.name, self.device_type, self.api, self.compiler)
    }
}

/// The environment variable with which a test fails, instead of skipping, where wgpu finds no
/// adapter (CI sets it to `1`).
pub const REQUIRE_WGPU_ENV: &str = "LEARNED_FFT_REQUIRE_WGPU";

/// Whether a missing wgpu adapter must fail a test instead of skipping it
/// ([`REQUIRE_WGPU_ENV`] is `1`).
pub fn wgpu_required() -> bool {
    std::env::var(REQUIRE_WGPU_ENV).is_ok_and(|v| v == "1")
}

/// Looks for the adapter that wgpu's default device would pick (high-performance preference).
/// Returns `None` when wgpu finds none, or when this build lacks the `wgpu` feature; never
/// panics.
#[cfg(not(feature = "wgpu"))]
pub fn wgpu_adapter() -> Option<AdapterSummary> {
    None
}

/// Looks for the adapter that wgpu's default device would pick (high-performance preference).
/// Returns `None` when wgpu finds none; never panics.
#[cfg(feature = "wgpu")]
pub fn wgpu_adapter() -> Option<AdapterSummary> {
    let probe = || {
        // The one graphics API CubeCL's wgpu runtime uses here (Metal on macOS, else Vulkan):
        // probing the others (GL through EGL) finds nothing more and prints warnings of its own.
        let api = if cfg!(target_os = "macos") { wgpu::Backends::METAL } else { wgpu::Backends::VULKAN };
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: api,
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let adapter = cubecl::future::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            force_fallback_adapter: false,
            compatible_surface: None,
        }))
        .ok()?;
        let info = adapter.get_info();
        let spirv = cfg!(feature = "vulkan") && info.backend == wgpu::Backend::Vulkan;
        Some(AdapterSummary {
            name: info.name,
            device_type: format!("{:?}", info.device_type),
            api: format!("{:?}", info.backend),
            compiler: if spirv { "SPIR-V" } else { "WGSL" }.to_string(),
        })
    };
    std::panic::catch_unwind(probe).ok().flatten()
}

/// Checks that the CUDA driver library loads, starts and sees a device, before CubeCL's CUDA
/// runtime is touched (it panics without a driver).
#[cfg(feature = "cuda")]
fn cuda_probe() -> std::result::Result<(), String> {
    use cudarc::driver::{result, sys};
    // SAFETY: only tries to open the driver library by its usual names.
    if !unsafe { sys::is_culib_present() } {
        return Err("the CUDA driver library (libcuda) was not found: is the NVIDIA driver installed?".into());
    }
    result::init().map_err(|e| format!("the CUDA driver did not start: {e:?}"))?;
    match result::device::get_count() {
        Ok(0) => Err("the CUDA driver sees no device".into()),
        Ok(_) => Ok(()),
        Err(e) => Err(format!("the CUDA driver cannot count its devices: {e:?}")),
    }
}

/// Runs `f` with the process's stderr sent to /dev/null. Probing for a wgpu adapter loads the
/// Vulkan drivers, which print warnings of their own (Mesa's device-select layer prints
/// "XDG_RUNTIME_DIR is invalid…" twice without a display session); when `auto` then does not
/// take wgpu they only confuse. Only `auto`'s probe is silenced: a named wgpu shows them.
#[cfg(unix)]
fn without_stderr<T>(f: impl FnOnce() -> T) -> T {
    use std::os::fd::AsRawFd;
    let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") else { return f() };
    // SAFETY: dup/dup2/close on the process's own descriptor 2 and on a file this function
    // holds open; descriptor 2 is restored before returning.
    let saved = unsafe { libc::dup(2) };
    if saved < 0 || unsafe { libc::dup2(null.as_raw_fd(), 2) } < 0 {
        return f();
    }
    let out = f();
    unsafe {
        libc::dup2(saved, 2);
        libc::close(saved);
    }
    out
}

#[cfg(not(unix))]
fn without_stderr<T>(f: impl FnOnce() -> T) -> T {
    f()
}

/// The backend a run actually uses, after `auto` is resolved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Selected {
    /// The concrete backend (never `Auto`).
    pub kind: BackendKind,
    /// The precision.
    pub precision: Precision,
    /// Human-readable device: the wgpu adapter, `"CPU"`, or the CUDA device.
    pub device: String,
}

impl fmt::Display for Selected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} on {}", self.kind, self.precision, self.device)
    }
}

/// Resolves `auto` and checks that the backend can run at `precision` here.
pub fn select(kind: BackendKind, precision: Precision) -> Result<Selected> {
    if kind == BackendKind::Wgpu && precision == Precision::F64 {
        return Err(Error::UnsupportedPrecision {
            op: "backend",
            backend: BackendKind::Wgpu.to_string(),
            precision: precision.to_string(),
            supported: "f32",
        });
    }
    if let Some(feature) = missing_feature(kind) {
        return Err(Error::BackendUnavailable {
            backend: kind.to_string(),
            reason: format!("this build lacks the `{feature}` feature (cargo build --features {feature})"),
        });
    }
    // On the CPU candle's native code is faster than ndarray's, so auto prefers it when it is
    // compiled in.
    let cpu = if cfg!(feature = "candle") { BackendKind::Candle } else { BackendKind::Ndarray };
    let (kind, device) = match kind {
        // wgpu is f32-only, so auto at f64 goes to the CPU.
        BackendKind::Auto if precision == Precision::F64 => (cpu, "CPU".to_string()),
        // A CPU wgpu adapter (Mesa's lavapipe) emulates a GPU on the CPU, slower than candle's
        // native code: auto takes wgpu only on a hardware adapter.
        BackendKind::Auto => match without_stderr(wgpu_adapter) {
            Some(adapter) if adapter.device_type != "Cpu" => (BackendKind::Wgpu, adapter.to_string()),
            _ => (cpu, "CPU".to_string()),
        },
        BackendKind::Wgpu => match wgpu_adapter() {
            Some(adapter) => (BackendKind::Wgpu, adapter.to_string()),
            None => {
                return Err(Error::BackendUnavailable {
                    backend: BackendKind::Wgpu.to_string(),
                    reason: "no wgpu adapter found (on Linux without a GPU, install Mesa's lavapipe: \
                             apt-get install mesa-vulkan-drivers libvulkan1)"
                        .into(),
                })
            }
        },
        BackendKind::Candle | BackendKind::Ndarray => (kind, "CPU".to_string()),
        BackendKind::Cuda => {
            #[cfg(feature = "cuda")]
            cuda_probe().map_err(|reason| Error::BackendUnavailable { backend: kind.to_string(), reason })?;
            (kind, "CUDA device 0".to_string())
        }
    };
    Ok(Selected { kind, precision, device })
}

/// The crate feature a named backend needs when this build lacks it.
fn missing_feature(kind: BackendKind) -> Option<&'static str> {
    match kind {
        BackendKind::Wgpu if !cfg!(feature = "wgpu") => Some("wgpu"),
        BackendKind::Candle if !cfg!(feature = "candle") => Some("candle"),
        BackendKind::Cuda if !cfg!(feature = "cuda") => Some("cuda"),
        _ => None,
    }
}

/// `count` devices of `device`'s kind on backend `B`: `device` itself, then indices 1 …
/// count − 1 of its kind (CUDA devices 1, 2, … after the default CUDA device 0), for work
/// spread over the local GPUs.
///
/// # Errors
/// [`Error::InvalidInput`] naming `op` and the number of devices the backend reports, when it
/// reports fewer than `count` (or `count` is 0).
pub fn local_devices<B: Backend>(op: &'static str, device: &B::Device, count: usize) -> Result<Vec<B::Device>> {
    let id = device.to_id();
    let available = B::device_count(id.type_id);
    if count == 0 || count > available || count > usize::from(u16::MAX) {
        return Err(Error::invalid(
            op,
            format!("between 1 and the {available} device(s) the backend reports"),
            format!("{count} devices"),
        ));
    }
    // count ≤ u16::MAX: the indices fit.
    let others = (1..count as u16).map(|i| B::Device::from_id(DeviceId::new(id.type_id, i)));
    Ok(std::iter::once(device.clone()).chain(others).collect())
}

/// A backend learned-fft runs on: autodiff, with the butterfly and spectral ops on it and on its
/// inner backend, and the collective ops on its inner backend. Every backend [`dispatch`] picks satisfies it.
pub trait FftBackend:
    AutodiffBackend<InnerBackend: AdamOps + ButterflyOps + ResidualOps + SpectralOps + CollectiveOps>
    + ButterflyOps
    + ResidualOps
    + SpectralOps
{
}

impl<B> FftBackend for B
where
    B: AutodiffBackend + ButterflyOps + ResidualOps + SpectralOps,
    B::InnerBackend: AdamOps + ButterflyOps + ResidualOps + SpectralOps + CollectiveOps,
{
}

/// Work written once for every backend: [`dispatch`] calls `run` with the concrete autodiff
/// backend type that was chosen.
pub trait BackendTask {
    /// What the task returns.
    type Output;
    /// Runs the task on backend `B` (already wrapped in `Autodiff`) and its device.
    fn run<B: FftBackend>(self, device: B::Device, selected: &Selected) -> Result<Self::Output>;
}

/// Resolves the backend and precision, then runs `task` on it.
pub fn dispatch<T: BackendTask>(kind: BackendKind, precision: Precision, task: T) -> Result<T::Output> {
    use burn::backend::Autodiff;
    let selected = select(kind, precision)?;
    match (selected.kind, precision) {
        #[cfg(feature = "wgpu")]
        (BackendKind::Wgpu, _) => task.run::<Autodiff<WgpuBackend>>(Default::default(), &selected),
        #[cfg(feature = "candle")]
        (BackendKind::Candle, Precision::F32) => {
            task.run::<Autodiff<CandleBackend<f32>>>(Default::default(), &selected)
        }
        #[cfg(feature = "candle")]
        (BackendKind::Candle, Precision::F64) => {
            task.run::<Autodiff<CandleBackend<f64>>>(Default::default(), &selected)
        }
        (BackendKind::Ndarray, Precision::F32) => {
            task.run::<Autodiff<NdArrayBackend<f32>>>(Default::default(), &selected)
        }
        (BackendKind::Ndarray, Precision::F64) => {
            task.run::<Autodiff<NdArrayBackend<f64>>>(Default::default(), &selected)
        }
        #[cfg(feature = "cuda")]
        (BackendKind::Cuda, Precision::F32) => {
            task.run::<Autodiff<CudaBackend<f32, i32>>>(Default::default(), &selected)
        }
        #[cfg(feature = "cuda")]
        (BackendKind::Cuda, Precision::F64) => {
            task.run::<Autodiff<CudaBackend<f64, i64>>>(Default::default(), &selected)
        }
        (other, _) => Err(Error::BackendUnavailable { backend: other.to_string(), reason: "not compiled in".into() }),
    }
}
