//! Gauge fixing: choosing one representative among the twiddles that give the same matrix.
//!
//! A butterfly factorisation is not unique: for any invertible diagonal D, replacing factor s by
//! `D B_s` and factor s+1 by `B_{s+1} D⁻¹` leaves the product unchanged. Training from random
//! weights lands on an arbitrary member of that family. [`fix_gauge`] picks the member whose
//! blocks in every factor but the last have first column exactly `(1, 1)`, as in the textbook
//! radix-2 FFT `[[1, w], [1, −w]]`; the last factor absorbs the scale. In this gauge the f32
//! rounding of the exact DFT twiddles costs 0.16…0.56 × the floor (the floor is measured with
//! unitary blocks, whose every entry carries a rounded 1/√2), so an f32 training that polishes
//! to the gauge's own rounding level ends well below the floor.
//!
//! The trainer fixes the gauge only after a first polish over every twiddle has converged: with
//! the gauge free, Gauss–Newton's flat directions cost conjugate gradients nothing (the
//! right-hand side has no component along them) and it converges quadratically, while the
//! constrained problem ([`gauge_mask`]) is worse conditioned; its second, short polish only has
//! to correct the rounding of the rescaling.

use burn::tensor::{backend::Backend, Tensor};

use crate::tensors::float_tensor;

/// The smallest |first-column entry| (relative to the stage's mean) at which the gauge is
/// fixed; below it the division would amplify the error, and the twiddles are left as they are.
pub const MIN_RELATIVE_PIVOT: f64 = 1e-4;

/// Complex product of `(ar, ai)` and `(br, bi)`.
fn cmul<B: Backend, const D: usize>(
    ar: Tensor<B, D>,
    ai: Tensor<B, D>,
    br: Tensor<B, D>,
    bi: Tensor<B, D>,
) -> (Tensor<B, D>, Tensor<B, D>) {
    (ar.clone() * br.clone() - ai.clone() * bi.clone(), ar * bi + ai * br)
}

/// Rescales the twiddles (`[log2 n, n/2, 2, 2]`, re and im) so that in every factor but the
/// last each block's first column is exactly `(1, 1)`, without changing the product (up to
/// rounding). Returns `None`, changing nothing, when a first-column entry is too small to divide
/// by (see [`MIN_RELATIVE_PIVOT`]) or not finite.
pub fn fix_gauge<B: Backend>(tw_re: Tensor<B, 4>, tw_im: Tensor<B, 4>) -> Option<(Tensor<B, 4>, Tensor<B, 4>)> {
    let [log_n, half, _, _] = tw_re.dims();
    let n = 2 * half;
    let stage = |t: &Tensor<B, 4>, s: usize| t.clone().narrow(0, s, 1).reshape([half, 2, 2]);
    let mut re: Vec<Tensor<B, 3>> = (0..log_n).map(|s| stage(&tw_re, s)).collect();
    let mut im: Vec<Tensor<B, 3>> = (0..log_n).map(|s| stage(&tw_im, s)).collect();
    for s in 0..log_n.saturating_sub(1) {
        // a[k, r] = entry (r, 0) of block k: the row scale that makes the first column 1.
        let (ar, ai) = (re[s].clone().narrow(2, 0, 1), im[s].clone().narrow(2, 0, 1)); // [half, 2, 1]
        let mag = ar.clone().powi_scalar(2) + ai.clone().powi_scalar(2);
        let (min, mean) = (mag.clone().min().into_scalar(), mag.clone().mean().into_scalar());
        let (min, mean): (f64, f64) =
            (burn::tensor::ElementConversion::elem(min), burn::tensor::ElementConversion::elem(mean));
        if !(min.is_finite() && mean.is_finite() && min > MIN_RELATIVE_PIVOT * MIN_RELATIVE_PIVOT * mean) {
            return None;
        }
        // Row r of block k divided by a[k, r]: multiply by conj(a) / |a|².
        let (dr, di) = (ar.clone() / mag.clone(), ai.clone().neg() / mag);
        let (nr, ni) = cmul(re[s].clone(), im[s].clone(), dr, di);
        // The first column becomes exactly 1 (the product's rounding is dropped).
        // (ones_like keeps the dtype: Burn 0.21's per-device default may be the other precision.)
        re[s] = nr.slice_assign([0..half, 0..2, 0..1], ar.ones_like());
        im[s] = ni.slice_assign([0..half, 0..2, 0..1], ar.zeros_like());
        // Factor s+1 takes the inverse: its column for position p is multiplied by a(p).
        // Stage s's (k, r) maps to position order [g, r, st]; stage s+1's (k', c) to [g', c, st'].
        let st = 1usize << s;
        let to_next = |a: Tensor<B, 3>| -> Tensor<B, 3> {
            a.reshape([n / (2 * st), st, 2])
                .permute([0, 2, 1])
                .reshape([n / (4 * st), 2, 2 * st])
                .permute([0, 2, 1])
                .reshape([half, 1, 2])
        };
        let (pr, pi) = (to_next(ar), to_next(ai));
        let (nr, ni) = cmul(re[s + 1].clone(), im[s + 1].clone(), pr, pi);
        re[s + 1] = nr;
        im[s + 1] = ni;
    }
    let join = |v: Vec<Tensor<B, 3>>| Tensor::stack::<4>(v, 0);
    Some((join(re), join(im)))
}

/// 1 for the twiddle entries the polish phase trains, 0 for those [`fix_gauge`] pins (the first
/// column of every block in every factor but the last). Shape `[log2 n, n/2, 2, 2]`.
pub fn gauge_mask<B: Backend>(log_n: usize, half: usize, device: &B::Device) -> Tensor<B, 4> {
    let mut v = vec![1.0; log_n * half * 4];
    for s in 0..log_n.saturating_sub(1) {
        for k in 0..half {
            for r in 0..2 {
                v[((s * half + k) * 2 + r) * 2] = 0.0;
            }
        }
    }
    float_tensor(v, [log_n, half, 2, 2], device)
}
