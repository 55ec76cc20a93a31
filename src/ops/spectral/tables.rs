//! The constant tables of a short-time transform (basis, window, twiddles).

use burn::module::Module;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

use super::Window;
use crate::error::{Error, Result};
use crate::tensors::float_tensor;

/// The constants of a short-time transform of window length W, computed once in f64 and stored
/// on the device in the backend's float type: the windowed DFT basis of the reference path and
/// the window and twiddle tables of the fused kernels.
#[derive(Module, Debug)]
pub struct StftTables<B: Backend> {
    win: usize,
    #[module(skip)]
    window: Window,
    /// `[W, W/2 + 1]`: `window[n]·cos(2π nk/W)`.
    pub(crate) basis_re: Tensor<B, 2>,
    /// `[W, W/2 + 1]`: `−window[n]·sin(2π nk/W)`.
    pub(crate) basis_im: Tensor<B, 2>,
    /// `[W]`: the window.
    pub(crate) window_values: Tensor<B, 1>,
    /// `[W/2]`: `cos(2π j/W)`.
    pub(crate) twiddle_re: Tensor<B, 1>,
    /// `[W/2]`: `−sin(2π j/W)`.
    pub(crate) twiddle_im: Tensor<B, 1>,
}

impl<B: Backend> StftTables<B> {
    /// The tables for window length `win` (at least 2) and `window`, on `device`.
    pub fn new(win: usize, window: Window, device: &B::Device) -> Result<Self> {
        if win < 2 {
            return Err(Error::invalid("stft_tables", "win ≥ 2", win));
        }
        let bins = win / 2 + 1;
        let values = window.values(win);
        // Reduce n·k mod W first so the angle is exact for large W.
        let angle = |i: usize| 2.0 * std::f64::consts::PI * (i % win) as f64 / win as f64;
        let mut re = vec![0.0; win * bins];
        let mut im = vec![0.0; win * bins];
        for n in 0..win {
            for k in 0..bins {
                re[n * bins + k] = values[n] * angle(n * k).cos();
                im[n * bins + k] = -values[n] * angle(n * k).sin();
            }
        }
        let half = win / 2;
        Ok(StftTables {
            win,
            window,
            basis_re: float_tensor(re, [win, bins], device),
            basis_im: float_tensor(im, [win, bins], device),
            window_values: float_tensor(values, [win], device),
            twiddle_re: float_tensor((0..half).map(|j| angle(j).cos()).collect(), [half], device),
            twiddle_im: float_tensor((0..half).map(|j| -angle(j).sin()).collect(), [half], device),
        })
    }

    /// The window length W.
    pub fn win(&self) -> usize {
        self.win
    }

    /// The analysis window.
    pub fn window(&self) -> Window {
        self.window
    }

    /// Number of bins, W/2 + 1.
    pub fn bins(&self) -> usize {
        self.win / 2 + 1
    }
}

/// The tables as the fused kernels take them, on the CubeCL backends.
#[cfg(feature = "fused")]
mod fused {
    use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
    use burn::backend::Autodiff;
    use burn::tensor::Tensor;
    use burn_cubecl::{element::BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};

    use super::super::kernel;
    use super::StftTables;

    impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> StftTables<CubeBackend<R, F, I, BT>> {
        /// The window and twiddle tables as the fused kernels take them.
        pub(crate) fn kernel_tables(&self) -> kernel::Tables<R> {
            let cube = |t: &Tensor<CubeBackend<R, F, I, BT>, 1>| t.clone().into_primitive().tensor();
            kernel::Tables::new(cube(&self.window_values), cube(&self.twiddle_re), cube(&self.twiddle_im))
        }
    }

    /// Burn's autodiff over a CubeCL backend.
    type AutodiffCube<R, F, I, BT, C> = Autodiff<CubeBackend<R, F, I, BT>, C>;

    impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement, C: CheckpointStrategy>
        StftTables<AutodiffCube<R, F, I, BT, C>>
    {
        /// The window and twiddle tables as the fused kernels take them (constants: taken from the
        /// inner backend, no graph).
        pub(crate) fn kernel_tables(&self) -> kernel::Tables<R> {
            let cube = |t: &Tensor<AutodiffCube<R, F, I, BT, C>, 1>| t.clone().inner().into_primitive().tensor();
            kernel::Tables::new(cube(&self.window_values), cube(&self.twiddle_re), cube(&self.twiddle_im))
        }
    }
}
