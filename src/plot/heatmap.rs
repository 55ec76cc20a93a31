//! Heat maps: the error matrix |M − T| beside |M|, and spectrograms.

use std::path::Path;

use plotters::prelude::*;

use super::canvas::{decade, finite, render, text, Area, Drawn};
use crate::error::{Error, Result};
use crate::reference::ComplexMatrix;

/// Size of [`matrix_error`]'s picture in pixels (width, height).
pub const MATRIX_SIZE: (u32, u32) = (1400, 660);
/// Size of [`spectrograms`]' picture in pixels (width, height).
pub const SPECTROGRAM_SIZE: (u32, u32) = (1400, 660);

/// Decades a logarithmic colour scale spans below its largest value.
const LOG_DECADES: f64 = 5.0;
/// Width of a colour bar with its labels, in pixels.
const BAR_WIDTH: u32 = 120;

/// How values map to colours.
#[derive(Clone, Copy, Debug)]
enum Scale {
    /// `lo..hi` linearly.
    Linear { lo: f64, hi: f64 },
    /// `10^lo..10^hi` logarithmically (`lo`, `hi` are exponents).
    Log { lo: f64, hi: f64 },
}

impl Scale {
    /// A logarithmic scale from the largest of `values` down [`LOG_DECADES`] (or to the smallest
    /// positive value, when that is closer); values at or below zero take the lowest colour.
    fn log_of(values: impl Iterator<Item = f64>) -> Scale {
        let (min, max) = values.filter(|v| *v > 0.0).fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
        if max == 0.0 {
            return Scale::Log { lo: -17.0, hi: -16.0 };
        }
        let hi = max.log10();
        let lo = min.log10().max(hi - LOG_DECADES);
        Scale::Log { lo: lo.min(hi - 1.0), hi }
    }

    /// `0..max` linearly.
    fn linear_of(values: impl Iterator<Item = f64>) -> Scale {
        let hi = values.fold(0.0f64, f64::max);
        Scale::Linear { lo: 0.0, hi: if hi > 0.0 { hi } else { 1.0 } }
    }

    /// The scale's ends in its own units (exponents for a log scale).
    fn ends(self) -> (f64, f64) {
        match self {
            Scale::Linear { lo, hi } | Scale::Log { lo, hi } => (lo, hi),
        }
    }

    /// `v` on the scale, in 0..=1.
    fn unit(self, v: f64) -> f64 {
        let (lo, hi) = self.ends();
        let x = match self {
            Scale::Linear { .. } => v,
            Scale::Log { .. } if v > 0.0 => v.log10(),
            Scale::Log { .. } => return 0.0,
        };
        ((x - lo) / (hi - lo)).clamp(0.0, 1.0)
    }

    fn colour(self, v: f64) -> RGBColor {
        ViridisRGB.get_color(self.unit(v))
    }

    fn label(self, x: f64) -> String {
        match self {
            Scale::Linear { .. } => format!("{x:.3}"),
            Scale::Log { .. } => decade(x),
        }
    }
}

/// A heat map's data: `rows × cols` values, row 0 drawn at the top.
struct Grid<'a> {
    rows: usize,
    cols: usize,
    value: &'a dyn Fn(usize, usize) -> f64,
}

/// One axis: its description and the data range it spans (`start` at the left or bottom).
struct Axis<'a> {
    desc: &'a str,
    start: f64,
    end: f64,
}

/// A heat map with its axes and a colour bar. Each pixel shows the largest value of the cells it
/// covers, so that no single large entry disappears when the grid has more cells than pixels.
fn heat_map(area: &Area, title: &str, x: Axis, y: Axis, grid: &Grid, scale: Scale) -> Drawn {
    let (main, bar) = area.split_horizontally(area.dim_in_pixel().0.saturating_sub(BAR_WIDTH));
    let mut chart = ChartBuilder::on(&main)
        .caption(title, text(22))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(x.start..x.end, y.start..y.end)?;
    let pixels = chart.plotting_area().strip_coord_spec();
    let (w, h) = pixels.dim_in_pixel();
    let (w, h) = (w as usize, h as usize);
    for py in 0..h {
        let (r0, r1) = covered(py, h, grid.rows);
        for px in 0..w {
            let (c0, c1) = covered(px, w, grid.cols);
            let v = (r0..r1)
                .flat_map(|r| (c0..c1).map(move |c| (r, c)))
                .map(|(r, c)| (grid.value)(r, c))
                .fold(f64::NEG_INFINITY, f64::max);
            pixels.draw_pixel((px as i32, py as i32), &scale.colour(v))?;
        }
    }
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc(x.desc)
        .y_desc(y.desc)
        .label_style(text(15))
        .axis_desc_style(text(17))
        .x_labels(8)
        .y_labels(8)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    colour_bar(&bar, scale)
}

/// The cells `[first, last)` that pixel `p` of `pixels` covers on a grid of `cells`.
fn covered(p: usize, pixels: usize, cells: usize) -> (usize, usize) {
    let first = p * cells / pixels;
    let last = ((p + 1) * cells).div_ceil(pixels).clamp(first + 1, cells.max(1));
    (first.min(cells.saturating_sub(1)), last)
}

fn colour_bar(area: &Area, scale: Scale) -> Drawn {
    let (lo, hi) = scale.ends();
    let mut chart = ChartBuilder::on(area)
        .margin_top(46)
        .margin_bottom(60)
        .margin_left(8)
        .right_y_label_area_size(70)
        .build_cartesian_2d(0.0..1.0, lo..hi)?;
    let pixels = chart.plotting_area().strip_coord_spec();
    let (w, h) = pixels.dim_in_pixel();
    for py in 0..h {
        let colour = ViridisRGB.get_color(1.0 - (py as f64 + 0.5) / h as f64);
        for px in 0..w {
            pixels.draw_pixel((px as i32, py as i32), &colour)?;
        }
    }
    chart
        .configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_labels(6)
        .label_style(text(14))
        .y_label_formatter(&|v| scale.label(*v))
        .draw()?;
    Ok(())
}

/// Draws the learned matrix's error `|M − T|` (log colour scale) beside `|M|` (linear), with
/// rows (outputs) downwards and columns (inputs) across, to `path` ([`MATRIX_SIZE`]).
///
/// # Errors
/// [`Error::InvalidInput`] when the sizes differ; [`Error::Plot`] or [`Error::Io`] when drawing or
/// writing fails.
pub fn matrix_error(
    path: impl AsRef<Path>,
    learned: &ComplexMatrix,
    target: &ComplexMatrix,
    title: &str,
) -> Result<()> {
    matrix_error_at(path.as_ref(), learned, target, title)
}

/// [`matrix_error`] for a path given as one (compiled once here, not in every caller).
fn matrix_error_at(path: &Path, learned: &ComplexMatrix, target: &ComplexMatrix, title: &str) -> Result<()> {
    let op = "plot.matrix";
    let n = learned.n();
    if target.n() != n {
        return Err(Error::invalid(op, format!("a target of size {n} like the learned matrix"), target.n()));
    }
    let err: Vec<f64> = learned.as_slice().iter().zip(target.as_slice()).map(|(m, t)| (m - t).norm()).collect();
    let abs: Vec<f64> = learned.as_slice().iter().map(|m| m.norm()).collect();
    finite(op, "matrix entries", &err)?;
    let rmse = (err.iter().map(|e| e * e).sum::<f64>() / err.len() as f64).sqrt();
    let (err_scale, abs_scale) = (Scale::log_of(err.iter().copied()), Scale::linear_of(abs.iter().copied()));
    let nf = n as f64;
    render(op, path, MATRIX_SIZE, |root| {
        let root = root.titled(title, text(26))?;
        let (left, right) = root.split_horizontally(root.dim_in_pixel().0 / 2);
        let axes = || {
            (Axis { desc: "column (input)", start: 0.0, end: nf }, Axis { desc: "row (output)", start: nf, end: 0.0 })
        };
        let (x, y) = axes();
        let e = |r: usize, c: usize| err[r * n + c];
        heat_map(
            &left,
            &format!("|M − T|  (rmse {rmse:.2e})"),
            x,
            y,
            &Grid { rows: n, cols: n, value: &e },
            err_scale,
        )?;
        let (x, y) = axes();
        let a = |r: usize, c: usize| abs[r * n + c];
        heat_map(&right, "|M|", x, y, &Grid { rows: n, cols: n, value: &a }, abs_scale)
    })
}

/// A magnitude spectrogram: `frames × bins` values, frame-major (`values[f * bins + k]`).
#[derive(Clone, Debug)]
pub struct Spectrogram {
    frames: usize,
    bins: usize,
    values: Vec<f64>,
}

impl Spectrogram {
    /// Checks the shape: `values.len() == frames × bins`, both at least 1.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the expected and the received length.
    pub fn new(frames: usize, bins: usize, values: Vec<f64>) -> Result<Self> {
        let op = "plot.spectrogram";
        if frames == 0 || bins == 0 || values.len() != frames * bins {
            return Err(Error::invalid(
                op,
                format!("{frames} × {bins} values with frames, bins ≥ 1"),
                format!("{} values", values.len()),
            ));
        }
        finite(op, "magnitudes", &values)?;
        Ok(Spectrogram { frames, bins, values })
    }

    /// Frames (time).
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// Frequency bins.
    pub fn bins(&self) -> usize {
        self.bins
    }
}

/// Draws the target's and the prediction's spectrograms side by side on one logarithmic colour
/// scale (the same colour is the same magnitude in both), time across and frequency upwards, to
/// `path` ([`SPECTROGRAM_SIZE`]).
///
/// # Errors
/// [`Error::InvalidInput`] when the shapes differ; [`Error::Plot`] or [`Error::Io`] when drawing
/// or writing fails.
pub fn spectrograms(path: impl AsRef<Path>, target: &Spectrogram, prediction: &Spectrogram, title: &str) -> Result<()> {
    spectrograms_at(path.as_ref(), target, prediction, title)
}

/// [`spectrograms`] for a path given as one (compiled once here, not in every caller).
fn spectrograms_at(path: &Path, target: &Spectrogram, prediction: &Spectrogram, title: &str) -> Result<()> {
    let op = "plot.spectrograms";
    if (target.frames, target.bins) != (prediction.frames, prediction.bins) {
        return Err(Error::invalid(
            op,
            format!("a prediction of {} frames × {} bins like the target", target.frames, target.bins),
            format!("{} × {}", prediction.frames, prediction.bins),
        ));
    }
    let scale = Scale::log_of(target.values.iter().chain(&prediction.values).copied());
    let (frames, bins) = (target.frames, target.bins);
    render(op, path, SPECTROGRAM_SIZE, |root| {
        let root = root.titled(title, text(26))?;
        let (left, right) = root.split_horizontally(root.dim_in_pixel().0 / 2);
        for (area, s, name) in [(&left, target, "target"), (&right, prediction, "prediction")] {
            // Row 0 (the top) is the highest bin.
            let v = |r: usize, c: usize| s.values[c * bins + (bins - 1 - r)];
            let x = Axis { desc: "frame", start: 0.0, end: frames as f64 };
            let y = Axis { desc: "frequency bin", start: 0.0, end: bins as f64 };
            heat_map(area, name, x, y, &Grid { rows: bins, cols: frames, value: &v }, scale)?;
        }
        Ok(())
    })
}
