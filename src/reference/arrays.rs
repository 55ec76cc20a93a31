//! Two-dimensional arrays of numbers from a user's files: numpy's `.npy` (`numpy.save`, read by
//! the npyz crate) and `.safetensors` (read by the safetensors crate). A user's matrix and a
//! user's data pairs are read from them.

use std::io::Cursor;
use std::path::Path;

use num_complex::{Complex, Complex64};

use crate::error::{Error, Result};

/// A two-dimensional array read from a file, as complex f64, row-major.
pub(crate) struct Array2 {
    pub rows: usize,
    pub cols: usize,
    pub values: Vec<Complex64>,
    /// Whether the file held single precision (float32, complex64, F32): its entries are exact
    /// to about 6e-8, not 1e-16.
    pub single: bool,
}

/// Reads the two-dimensional array, with finite entries, in the file at `path`: a `.safetensors`
/// file (by its extension; [`read_safetensors`]) or a `.npy` file (any other name; [`read_npy`]).
///
/// # Errors
/// [`Error::Io`] when the file cannot be read; [`Error::InvalidInput`] under `op`, naming the
/// file and the problem, when it is not such an array (not a file of its format, another dtype
/// or number of dimensions, a truncated file or one with bytes after the array, a NaN or
/// infinite entry); [`Error::OutOfMemory`] when it would not fit.
pub(crate) fn read_2d(op: &'static str, path: &Path) -> Result<Array2> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("safetensors") => read_safetensors(op, path),
        _ => read_npy(op, path),
    }
}

/// The array of float32, float64, complex64 or complex128 (either byte order, C or Fortran
/// order) in a `.npy` file.
fn read_npy(op: &'static str, path: &Path) -> Result<Array2> {
    let shown = path.display();
    let bad = |expected: &str, got: String| Error::invalid(op, format!("{shown} to be {expected}"), got);
    let bytes = std::fs::read(path).map_err(|e| Error::io(op, path, e))?;
    let mut cursor = Cursor::new(&bytes[..]);
    let header = npyz::NpyHeader::from_reader(&mut cursor)
        .map_err(|e| bad("a numpy .npy file (numpy.save)", format!("a file whose header does not parse ({e})")))?;
    let data = &bytes[usize::try_from(cursor.position()).unwrap_or(bytes.len()).min(bytes.len())..];
    let npy = npyz::NpyFile::with_header(header, data);
    let shape = npy.shape().to_vec();
    let (rows, cols) = match shape[..] {
        [rows, cols] => (rows, cols),
        _ => return Err(bad("a two-dimensional array", format!("shape {shape:?}"))),
    };
    let fits = |d: u64| usize::try_from(d).map_err(|_| bad("an array that fits in memory", format!("shape {shape:?}")));
    let (rows, cols) = (fits(rows)?, fits(cols)?);
    let npyz::DType::Plain(ty) = npy.dtype() else {
        return Err(bad("an array of plain numbers", format!("a structured dtype {}", npy.dtype().descr())));
    };
    let elem = match (ty.type_char(), ty.size_field()) {
        (npyz::TypeChar::Float, 4 | 8) | (npyz::TypeChar::Complex, 8 | 16) => ty.size_field(),
        _ => {
            return Err(bad(
                "float32, float64, complex64 or complex128",
                format!("dtype {ty} (cast it first, e.g. a.astype(numpy.complex128))"),
            ))
        }
    };
    // The entries as complex f64, and the file's data as read, at once.
    let needed = crate::memory::product(&[rows, cols, 16 + elem as usize]);
    crate::memory::ensure(op, || format!("the {rows}×{cols} array of {shown}"), needed)?;
    let data_bytes = data.len() as u64;
    let expected = (rows as u64) * (cols as u64) * elem;
    if data_bytes != expected {
        let what = if data_bytes < expected { "truncated" } else { "longer than its array" };
        return Err(bad(
            &format!("{expected} bytes of data after the header ({rows}×{cols} {ty})"),
            format!("{data_bytes} bytes: the file is {what}"),
        ));
    }
    let order = npy.order();
    let io = |e: std::io::Error| bad("a readable array", format!("an array that does not read back ({e})"));
    let values: Vec<Complex64> = match (ty.type_char(), elem) {
        (npyz::TypeChar::Float, 4) => {
            npy.into_vec::<f32>().map_err(io)?.into_iter().map(|x| Complex64::new(x.into(), 0.0)).collect()
        }
        (npyz::TypeChar::Float, _) => {
            npy.into_vec::<f64>().map_err(io)?.into_iter().map(|x| Complex64::new(x, 0.0)).collect()
        }
        (_, 8) => npy
            .into_vec::<Complex<f32>>()
            .map_err(io)?
            .into_iter()
            .map(|z| Complex64::new(z.re.into(), z.im.into()))
            .collect(),
        _ => npy.into_vec::<Complex64>().map_err(io)?,
    };
    if values.len() != rows * cols {
        return Err(bad(&format!("{rows}×{cols} entries"), format!("{} entries", values.len())));
    }
    let values = match order {
        npyz::Order::C => values,
        // The file holds the columns one after the other.
        npyz::Order::Fortran => (0..rows * cols).map(|i| values[(i % cols) * rows + i / cols]).collect(),
    };
    finite(
        op,
        path,
        Array2 { rows, cols, values, single: elem == 4 || ty.type_char() == npyz::TypeChar::Complex && elem == 8 },
    )
}

/// The one tensor of a `.safetensors` file: F32 or F64, of shape `[rows, cols]` (real) or
/// `[rows, cols, 2]` (complex: the real and imaginary parts last, as `torch.view_as_real`
/// writes them).
fn read_safetensors(op: &'static str, path: &Path) -> Result<Array2> {
    let shown = path.display();
    let bad = |expected: &str, got: String| Error::invalid(op, format!("{shown} to be {expected}"), got);
    let bytes = std::fs::read(path).map_err(|e| Error::io(op, path, e))?;
    let file = safetensors::SafeTensors::deserialize(&bytes)
        .map_err(|e| bad("a safetensors file", format!("a file that does not parse ({e})")))?;
    let tensors = file.tensors();
    let [(name, view)] = &tensors[..] else {
        let names: Vec<&str> = tensors.iter().map(|(n, _)| n.as_str()).collect();
        return Err(bad("a safetensors file of one tensor", format!("{} tensors {names:?}", tensors.len())));
    };
    let shape = view.shape().to_vec();
    let (rows, cols, complex) = match shape[..] {
        [rows, cols] => (rows, cols, false),
        [rows, cols, 2] => (rows, cols, true),
        _ => {
            return Err(bad(
                "a tensor [rows, cols], or [rows, cols, 2] for complex entries (real and imaginary parts last)",
                format!("shape {shape:?} (tensor {name:?})"),
            ))
        }
    };
    let parts: Vec<f64> = match view.dtype() {
        safetensors::Dtype::F32 => {
            view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]).into()).collect()
        }
        safetensors::Dtype::F64 => view
            .data()
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
            .collect(),
        other => return Err(bad("F32 or F64", format!("dtype {other:?} (tensor {name:?})"))),
    };
    let values: Vec<Complex64> = match complex {
        true => parts.chunks_exact(2).map(|p| Complex64::new(p[0], p[1])).collect(),
        false => parts.into_iter().map(|x| Complex64::new(x, 0.0)).collect(),
    };
    // The crate checks that the data's length is the shape's; this is that count again.
    if values.len() != rows * cols {
        return Err(bad(&format!("{rows}×{cols} entries"), format!("{} entries", values.len())));
    }
    finite(op, path, Array2 { rows, cols, values, single: view.dtype() == safetensors::Dtype::F32 })
}

/// The array, after checking that every entry is finite.
fn finite(op: &'static str, path: &Path, a: Array2) -> Result<Array2> {
    if let Some(i) = a.values.iter().position(|z| !(z.re.is_finite() && z.im.is_finite())) {
        return Err(Error::invalid(
            op,
            format!("{} to be an array of finite entries", path.display()),
            format!("{} at ({}, {})", a.values[i], i / a.cols, i % a.cols),
        ));
    }
    Ok(a)
}
