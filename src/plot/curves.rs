//! Line and point figures: the training curve, the twiddle magnitudes per stage, filter taps.

use std::path::Path;

use plotters::prelude::*;

use super::canvas::{decade, finite, render, text, Drawn, PALETTE};
use crate::error::{Error, Result};
use crate::train::{Phase, Progress};

/// Size of [`training_curve`]'s picture in pixels (width, height).
pub const CURVE_SIZE: (u32, u32) = (1100, 640);
/// Size of [`twiddle_magnitudes`]' picture in pixels (width, height).
pub const TWIDDLES_SIZE: (u32, u32) = (1400, 1000);
/// Size of [`taps`]' picture in pixels (width, height).
pub const TAPS_SIZE: (u32, u32) = (1100, 640);

/// Draws a run's training curve to `path` ([`CURVE_SIZE`]): the rmse and the loss against the
/// step on a logarithmic axis, the floor (where the target has one) as a horizontal line, and
/// the polish phase shaded. `history` is the run's progress records
/// ([`crate::TrainReport::history`], [`crate::train::Checkpoint::history`]).
///
/// # Errors
/// [`Error::InvalidInput`] when `history` has no record with a positive loss; [`Error::Plot`] or
/// [`Error::Io`] when drawing or writing fails.
pub fn training_curve(path: impl AsRef<Path>, history: &[Progress], title: &str) -> Result<()> {
    training_curve_at(path.as_ref(), history, title)
}

/// [`training_curve`] for a path given as one (compiled once here, not in every caller).
fn training_curve_at(path: &Path, history: &[Progress], title: &str) -> Result<()> {
    let op = "plot.curve";
    let positive = |v: f64| v.is_finite() && v > 0.0;
    let values: Vec<f64> =
        history.iter().flat_map(|p| [p.loss, p.rmse].into_iter().chain(p.floor)).filter(|v| positive(*v)).collect();
    if values.is_empty() {
        return Err(Error::invalid(op, "progress records with a positive, finite loss", "none"));
    }
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min).log10().floor();
    let hi = values.iter().copied().fold(0.0, f64::max).log10().ceil().max(lo + 1.0);
    let last = history.iter().map(|p| p.step).max().unwrap_or(0).max(1) as f64;
    let polish_from = history.iter().find(|p| p.phase != Phase::Adam).map(|p| p.step as f64);
    let floor = history.iter().rev().find_map(|p| p.floor).filter(|f| positive(*f));
    let series = |f: fn(&Progress) -> f64| -> Vec<(f64, f64)> {
        history.iter().filter(|p| positive(f(p))).map(|p| (p.step as f64, f(p).log10())).collect()
    };
    let (rmse, loss) = (series(|p| p.rmse), series(|p| p.loss));
    render(op, path, CURVE_SIZE, |root| -> Drawn {
        let mut chart = ChartBuilder::on(root)
            .caption(title, text(26))
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(0.0..last, lo..hi)?;
        chart
            .configure_mesh()
            .x_desc("step")
            .y_desc("rmse, loss")
            .label_style(text(16))
            .axis_desc_style(text(18))
            .y_labels((hi - lo) as usize + 1)
            .y_label_formatter(&|v| decade(*v))
            .x_label_formatter(&|v| format!("{v:.0}"))
            .draw()?;
        if let Some(from) = polish_from {
            let shade = RGBColor(236, 236, 236).filled();
            chart
                .draw_series([Rectangle::new([(from, lo), (last, hi)], shade)])?
                .label("polish (Levenberg–Marquardt)")
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 20, y + 6)], shade));
        }
        let style = |c: RGBColor| c.stroke_width(3);
        chart
            .draw_series(LineSeries::new(rmse.clone(), style(PALETTE[0])))?
            .label("rmse")
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], style(PALETTE[0])));
        chart
            .draw_series(LineSeries::new(loss.clone(), style(PALETTE[1])))?
            .label("loss (mean |M − T|²)")
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], style(PALETTE[1])));
        if let Some(f) = floor {
            let black = BLACK.stroke_width(2);
            chart
                .draw_series(LineSeries::new([(0.0, f.log10()), (last, f.log10())], black))?
                .label(format!("floor {f:.2e} (the exact FFT's rmse in this precision)"))
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], black));
        }
        chart
            .configure_series_labels()
            .label_font(text(16))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerLeft)
            .draw()?;
        Ok(())
    })
}

/// A panel's caption: the stage and its stride, and the factor where there are several.
fn stage_caption(g: usize, log_n: usize, factors: usize) -> String {
    let s = g % log_n;
    let stage = format!("stage {s} (stride {})", 1usize << s);
    if factors > 1 {
        format!("factor {}, {stage}", g / log_n)
    } else {
        stage
    }
}

/// Draws each stage's twiddle magnitudes |t00|, |t01|, |t10|, |t11| against the block index, one
/// panel per stage (stride 2^s), to `path` ([`TWIDDLES_SIZE`]). `re` and `im` are the twiddles
/// `[log2 N, N/2, 2, 2]` row-major ([`crate::Butterfly::twiddles_f64`]), or K factors' stacked
/// `[K · log2 N, N/2, 2, 2]` (a [`crate::nn::ButterflyProduct`]'s).
///
/// # Errors
/// [`Error::InvalidInput`] when `n` is not a power of two ≥ 2 or the twiddles are not of its
/// shape; [`Error::Plot`] or [`Error::Io`] when drawing or writing fails.
pub fn twiddle_magnitudes(path: impl AsRef<Path>, n: usize, re: &[f64], im: &[f64], title: &str) -> Result<()> {
    twiddle_magnitudes_at(path.as_ref(), n, re, im, title)
}

/// [`twiddle_magnitudes`] for a path given as one (compiled once here, not in every caller).
fn twiddle_magnitudes_at(path: &Path, n: usize, re: &[f64], im: &[f64], title: &str) -> Result<()> {
    let op = "plot.twiddles";
    if n < 2 || !n.is_power_of_two() {
        return Err(Error::invalid(op, "n a power of two >= 2", n));
    }
    let log_n = n.trailing_zeros() as usize;
    let per_factor = log_n * n * 2;
    let factors = re.len() / per_factor;
    if factors == 0 || re.len() != factors * per_factor || im.len() != re.len() {
        return Err(Error::invalid(
            op,
            format!("twiddles of K · {per_factor} values ([K · {log_n}, {}, 2, 2]) for n = {n}", n / 2),
            format!("{} and {}", re.len(), im.len()),
        ));
    }
    let stages = factors * log_n;
    finite(op, "twiddles (real part)", re)?;
    finite(op, "twiddles (imaginary part)", im)?;
    let mag: Vec<f64> = re.iter().zip(im).map(|(a, b)| a.hypot(*b)).collect();
    let top = mag.iter().copied().fold(0.0, f64::max).max(1e-12) * 1.1;
    let blocks = n / 2;
    let mag = &mag;
    render(op, path, TWIDDLES_SIZE, |root| -> Drawn {
        let root = root.titled(title, text(26))?;
        let cols = if stages > 1 { 2 } else { 1 };
        let panels = root.split_evenly((stages.div_ceil(cols), cols));
        let names = ["|t00|", "|t01|", "|t10|", "|t11|"];
        let radius = if blocks > 64 { 1 } else { 3 };
        for (s, area) in panels.iter().enumerate().take(stages) {
            let mut chart = ChartBuilder::on(area)
                .caption(stage_caption(s, log_n, factors), text(16))
                .margin(6)
                .x_label_area_size(28)
                .y_label_area_size(50)
                .build_cartesian_2d(-0.5..blocks as f64 - 0.5, 0.0..top)?;
            chart
                .configure_mesh()
                .label_style(text(12))
                .x_labels(6)
                .y_labels(4)
                .x_label_formatter(&|v| format!("{v:.0}"))
                .y_label_formatter(&|v| format!("{v:.2}"))
                .draw()?;
            for (e, name) in names.iter().enumerate() {
                let colour = PALETTE[e];
                // Side by side within a block, so that equal magnitudes do not hide each other.
                let at = move |j: usize| (j as f64 + (e as f64 - 1.5) * 0.18, mag[((s * blocks + j) * 4) + e]);
                let drawn = chart.draw_series((0..blocks).map(|j| Circle::new(at(j), radius, colour.filled())))?;
                if s == 0 {
                    drawn.label(*name).legend(move |(x, y)| Circle::new((x + 10, y), 4, colour.filled()));
                }
            }
            if s == 0 {
                chart
                    .configure_series_labels()
                    .label_font(text(15))
                    .background_style(WHITE.mix(0.9))
                    .border_style(BLACK)
                    .position(SeriesLabelPosition::LowerRight)
                    .draw()?;
            }
        }
        Ok(())
    })
}

/// Draws learned filter taps against the true ones to `path` ([`TAPS_SIZE`]).
///
/// # Errors
/// [`Error::InvalidInput`] when the lengths differ or are zero, or a tap is not finite;
/// [`Error::Plot`] or [`Error::Io`] when drawing or writing fails.
pub fn taps(path: impl AsRef<Path>, truth: &[f64], learned: &[f64], title: &str) -> Result<()> {
    taps_at(path.as_ref(), truth, learned, title)
}

/// [`taps`] for a path given as one (compiled once here, not in every caller).
fn taps_at(path: &Path, truth: &[f64], learned: &[f64], title: &str) -> Result<()> {
    let op = "plot.taps";
    if truth.is_empty() || truth.len() != learned.len() {
        return Err(Error::invalid(
            op,
            format!("as many learned taps as true ones ({}), at least 1", truth.len()),
            learned.len(),
        ));
    }
    finite(op, "true taps", truth)?;
    finite(op, "learned taps", learned)?;
    let (lo, hi) = truth.iter().chain(learned).fold((0.0f64, 0.0f64), |(a, b), v| (a.min(*v), b.max(*v)));
    let pad = (hi - lo).max(1e-12) * 0.1;
    let k = truth.len() as f64;
    render(op, path, TAPS_SIZE, |root| -> Drawn {
        let mut chart = ChartBuilder::on(root)
            .caption(title, text(26))
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(-0.5..k - 0.5, lo - pad..hi + pad)?;
        chart
            .configure_mesh()
            .x_desc("tap")
            .y_desc("value")
            .label_style(text(16))
            .axis_desc_style(text(18))
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v:.2}"))
            .draw()?;
        let true_style = BLACK.stroke_width(2);
        chart
            .draw_series(LineSeries::new(truth.iter().enumerate().map(|(i, v)| (i as f64, *v)), true_style))?
            .label("true")
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], true_style));
        let red = PALETTE[3];
        chart
            .draw_series(learned.iter().enumerate().map(|(i, v)| Cross::new((i as f64, *v), 7, red.stroke_width(3))))?
            .label("learned")
            .legend(move |(x, y)| Cross::new((x + 10, y), 6, red.stroke_width(3)));
        chart
            .configure_series_labels()
            .label_font(text(16))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    })
}
