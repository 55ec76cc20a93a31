//! The spectral loss as plain Burn tensor ops: the reference twin, with its gradient from
//! Burn's autodiff.

use burn::tensor::{backend::Backend, Tensor};

use super::{check_pair, check_stft, frame_indices, Distance, LossParams, Magnitude, SpectralOps, StftTables};
use crate::error::Result;
use crate::tensors::select_columns;

/// Per-(frame, bin) magnitudes of framed signals.
///
/// # Shapes
/// - `frames`: `[batch, frames, win]` (already windowed or not: the basis carries the window)
/// - `basis_re`, `basis_im`: `[win, bins]`, `window[n]·cos(2π n k / W)` and `−window[n]·sin(…)`
/// - returns `[batch, frames, bins]`
pub fn magnitudes<B: SpectralOps>(
    frames: Tensor<B, 3>,
    basis_re: &Tensor<B, 2>,
    basis_im: &Tensor<B, 2>,
    magnitude: Magnitude,
    eps: f64,
) -> Tensor<B, 3> {
    let [batch, count, win] = frames.dims();
    let bins = basis_re.dims()[1];
    let flat = frames.reshape([batch * count, win]);
    let (re, im) = if B::reference_matmul(&flat.device()) {
        (flat.clone().matmul(basis_re.clone()), flat.matmul(basis_im.clone()))
    } else {
        (dft_by_sums(flat.clone(), basis_re), dft_by_sums(flat, basis_im))
    };
    let power = re.powi_scalar(2) + im.powi_scalar(2);
    let m = match magnitude {
        Magnitude::Linear => (power + eps).sqrt(),
        Magnitude::Power => power,
        Magnitude::Log => (power + eps).log().mul_scalar(0.5),
    };
    m.reshape([batch, count, bins])
}

/// Elements of the broadcast product [`dft_by_sums`] forms at once (64 Mi: 512 MiB in f64).
const DFT_SUM_CHUNK_ELEMS: usize = 1 << 26;

/// `x · basis` without a matmul, for backends that cannot multiply matrices in their float type
/// ([`SpectralOps::reference_matmul`]): each output is the same sum over the window of
/// `x[r, n] · basis[n, k]`, formed as a broadcast product and reduced over n, a chunk of rows at a
/// time so that the product stays under [`DFT_SUM_CHUNK_ELEMS`] elements.
///
/// # Shapes
/// - `x`: `[rows, win]`, `basis`: `[win, bins]` → `[rows, bins]`
pub(crate) fn dft_by_sums<B: Backend>(x: Tensor<B, 2>, basis: &Tensor<B, 2>) -> Tensor<B, 2> {
    dft_by_sums_in_chunks(x, basis, DFT_SUM_CHUNK_ELEMS)
}

/// [`dft_by_sums`] with at most `chunk_elems` elements of the product at once.
fn dft_by_sums_in_chunks<B: Backend>(x: Tensor<B, 2>, basis: &Tensor<B, 2>, chunk_elems: usize) -> Tensor<B, 2> {
    let [rows, win] = x.dims();
    let bins = basis.dims()[1];
    let chunk = (chunk_elems / (win * bins).max(1)).max(1);
    if rows == 0 {
        return Tensor::zeros([0, bins], (&x.device(), x.dtype()));
    }
    let b = basis.clone().unsqueeze_dim::<3>(0);
    let parts: Vec<Tensor<B, 2>> = (0..rows)
        .step_by(chunk)
        .map(|start| {
            let len = chunk.min(rows - start);
            let part = x.clone().narrow(0, start, len).unsqueeze_dim::<3>(2);
            (part * b.clone()).sum_dim(1).reshape([len, bins])
        })
        .collect();
    Tensor::cat(parts, 0)
}

/// Per-(frame, bin) distance between two magnitude tensors.
pub fn distance<B: Backend>(a: Tensor<B, 3>, b: Tensor<B, 3>, distance: Distance) -> Tensor<B, 3> {
    let d = a - b;
    match distance {
        Distance::L2 => d.powi_scalar(2),
        Distance::L1 => d.abs(),
    }
}

/// The magnitude spectrogram through the tensor-op reference: frames gathered with `select`,
/// the DFT as a matmul with the windowed basis, the magnitude; its gradient comes from Burn's
/// autodiff.
///
/// # Shapes
/// - `x`: `[signals, T]` → `[signals, frames, W/2 + 1]`, frames = ⌊(T − W) / hop⌋ + 1
///
/// # Errors
/// [`Error::InvalidInput`](crate::error::Error::InvalidInput) when T < W or hop = 0.
pub fn stft_magnitudes_reference<B: SpectralOps>(
    x: Tensor<B, 2>,
    tables: &StftTables<B>,
    hop: usize,
    magnitude: Magnitude,
    eps: f64,
) -> Result<Tensor<B, 3>> {
    let win = tables.win();
    let frames = check_stft("stft_magnitudes", &x, win, hop)?;
    let [signals, _] = x.dims();
    let framed = select_columns(x, frame_indices(frames, win, hop)).reshape([signals, frames, win]);
    Ok(magnitudes(framed, &tables.basis_re, &tables.basis_im, magnitude, eps))
}

/// The sum of all entries, one axis at a time: each step is a per-output reduction without
/// atomics, so the value does not change from run to run (a one-shot sum may use atomics).
pub(crate) fn sum_all<B: Backend>(x: Tensor<B, 3>) -> Tensor<B, 1> {
    x.sum_dim(2).sum_dim(1).sum_dim(0).reshape([1])
}

/// The reduced loss from two magnitude spectrograms, as tensor ops.
pub fn loss_from_magnitudes<B: Backend>(mp: Tensor<B, 3>, mt: Tensor<B, 3>, p: &LossParams) -> Tensor<B, 1> {
    let d = distance(mp.clone(), mt.clone(), p.distance);
    let mut loss = sum_all(d).mul_scalar(p.scale);
    if p.spectral_convergence > 0.0 {
        let num = (sum_all((mt.clone() - mp).powi_scalar(2)) + p.eps).sqrt();
        let den = (sum_all(mt.powi_scalar(2)) + p.eps).sqrt();
        loss = loss + (num / den).mul_scalar(p.spectral_convergence);
    }
    loss
}

/// The reduced loss through `B`'s magnitude spectrogram op (fused where it can run) and tensor
/// ops for the rest: the default of [`SpectralOps::spectral_loss`].
///
/// # Errors
/// [`Error::InvalidInput`](crate::error::Error::InvalidInput) when the shapes differ, T < W or hop = 0.
pub fn spectral_loss_composed<B: SpectralOps>(
    pred: Tensor<B, 2>,
    target: Tensor<B, 2>,
    tables: &StftTables<B>,
    p: &LossParams,
) -> Result<Tensor<B, 1>> {
    check_pair("spectral_loss", &pred, &target)?;
    let mp = B::stft_magnitudes(pred, tables, p.hop, p.magnitude, p.eps)?;
    let mt = B::stft_magnitudes(target, tables, p.hop, p.magnitude, p.eps)?;
    Ok(loss_from_magnitudes(mp, mt, p))
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Distribution, Tensor};

    use super::dft_by_sums_in_chunks;
    use crate::backend::NdArrayBackend;

    /// The sums and the matmul add the same f64 products in different orders: their difference is
    /// a few ulps of the sums' magnitude (~10 here), far below this.
    const F64_SUM_ORDER_TOL: f64 = 1e-12;

    /// The matmul-free DFT gives the matmul's result, across chunks of rows (5 rows a chunk and a
    /// remainder of 2) and in one piece.
    #[test]
    fn sums_equal_the_matmul_across_chunks() {
        type B = NdArrayBackend<f64>;
        let device = Default::default();
        let (rows, win, bins) = (37, 24, 13);
        // f64 named: the device's default dtype is the first backend's to touch it in this
        // process, f32 when an f32 test ran first (the sums then differed by 2e-6).
        let f64 = (&device, burn::tensor::DType::F64);
        let x = Tensor::<B, 2>::random([rows, win], Distribution::Normal(0.0, 1.0), f64);
        let basis = Tensor::<B, 2>::random([win, bins], Distribution::Normal(0.0, 1.0), f64);
        let expected = x.clone().matmul(basis.clone());
        for chunk_elems in [5 * win * bins, usize::MAX / 2] {
            let got = dft_by_sums_in_chunks(x.clone(), &basis, chunk_elems);
            assert_eq!(got.dims(), [rows, bins]);
            let worst = (got - expected.clone()).abs().max().into_scalar();
            assert!(worst < F64_SUM_ORDER_TOL, "chunks of {chunk_elems} elements: worst difference {worst:e}");
        }
        // No rows (an empty batch): an empty result, as the matmul gives.
        let empty = dft_by_sums_in_chunks(Tensor::<B, 2>::zeros([0, win], f64), &basis, 5 * win * bins);
        assert_eq!(empty.dims(), [0, bins]);
    }
}
