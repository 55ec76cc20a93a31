//! The drawing surface every figure shares: an RGB buffer with the embedded font, encoded as PNG
//! and written atomically.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::register_font;

use crate::error::{Error, Result};
use crate::files::write_atomic;

/// DejaVu Sans (Bitstream Vera licence, `assets/LICENSE-DejaVu.txt`), so that text renders the
/// same on every machine, with no system fonts.
const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// A drawing area in pixels.
pub(super) type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

/// What a drawing closure returns (plotters' errors, boxed).
pub(super) type Drawn = std::result::Result<(), Box<dyn std::error::Error>>;

/// Registers the embedded font as plotters' sans-serif, once per process.
fn font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| register_font("sans-serif", FontStyle::Normal, FONT).is_ok());
    if ok {
        Ok(())
    } else {
        Err(Error::Plot { path: "<font>".into(), reason: "the embedded font does not parse".into() })
    }
}

/// Draws a `size` picture with `draw` on a white background and writes it to `path` as PNG.
pub(super) fn render(op: &'static str, path: &Path, size: (u32, u32), draw: impl FnOnce(&Area) -> Drawn) -> Result<()> {
    font()?;
    let failed = |e: &dyn std::fmt::Display| Error::Plot { path: path.display().to_string(), reason: e.to_string() };
    let (w, h) = size;
    let mut rgb = vec![255u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| failed(&e))?;
        draw(&root).map_err(|e| failed(&e))?;
        root.present().map_err(|e| failed(&e))?;
    }
    let png = encode(&rgb, size).map_err(|e| failed(&e))?;
    write_atomic(op, path, &png)
}

fn encode(rgb: &[u8], (w, h): (u32, u32)) -> std::result::Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(out)
}

/// Text of `px` pixels.
pub(super) fn text(px: u32) -> TextStyle<'static> {
    ("sans-serif", px).into_font().into()
}

/// A power of ten as a tick label: `1e-7`.
pub(super) fn decade(exponent: f64) -> String {
    format!("1e{}", exponent.round() as i64)
}

/// Series colours (Tableau 10: distinguishable, and readable by most colour-blind viewers).
pub(super) const PALETTE: [RGBColor; 5] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
];

/// Checks that every value is finite, naming the figure and the value.
pub(super) fn finite(op: &'static str, what: &str, values: &[f64]) -> Result<()> {
    match values.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) => Err(Error::invalid(op, format!("finite {what}"), format!("{} at index {i}", values[i]))),
    }
}
