//! Analysis windows and framing.

use serde::{Deserialize, Serialize};

/// The window applied to each frame before its DFT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Window {
    /// Periodic Hann, `0.5 − 0.5 cos(2π n / W)` (torch.hann_window's default).
    #[default]
    Hann,
    /// Periodic Hamming, `0.54 − 0.46 cos(2π n / W)`.
    Hamming,
    /// All ones.
    Rectangular,
}

impl Window {
    /// The `w` window values, computed in f64.
    pub fn values(self, w: usize) -> Vec<f64> {
        let phase = |n: usize| 2.0 * std::f64::consts::PI * n as f64 / w as f64;
        (0..w)
            .map(|n| match self {
                Window::Hann => 0.5 - 0.5 * phase(n).cos(),
                Window::Hamming => 0.54 - 0.46 * phase(n).cos(),
                Window::Rectangular => 1.0,
            })
            .collect()
    }
}

/// Number of frames of length `win` at hop `hop` in `t` samples: ⌊(t − win) / hop⌋ + 1
/// (`None` when `t < win`).
pub fn frame_count(t: usize, win: usize, hop: usize) -> Option<usize> {
    (t >= win && hop > 0).then(|| (t - win) / hop + 1)
}

/// Gather indices that frame a signal: frame f, offset o reads sample `f·hop + o`.
pub fn frame_indices(frames: usize, win: usize, hop: usize) -> Vec<i64> {
    (0..frames).flat_map(|f| (0..win).map(move |o| (f * hop + o) as i64)).collect()
}

/// Gather indices of torch.stft's `center=True` reflect padding by `pad` on both sides: padded
/// position p reads sample `reflect(p − pad)` (needs `pad < t`).
pub fn reflect_indices(t: usize, pad: usize) -> Vec<i64> {
    (0..t + 2 * pad)
        .map(|p| {
            let i = p as i64 - pad as i64;
            let last = t as i64 - 1;
            if i < 0 {
                -i
            } else if i > last {
                2 * last - i
            } else {
                i
            }
        })
        .collect()
}
