//! [`ButterflyLinear`]: a drop-in replacement for a dense `Linear` layer, with torch_butterfly's
//! parameters and layout (`Butterfly(in_size, out_size, bias, complex, increasing_stride, init,
//! nblocks)`), on the fused butterfly kernels where the backend has them.

use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{backend::Backend, Distribution, Tensor};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use super::ButterflyInit;
use crate::error::{Error, Result};
use crate::memory;
use crate::ops::butterfly::{ButterflyOps, Permutation};
use crate::reference::factorizations::bit_reversal;
use crate::reference::FftNorm;
use crate::tensors::{bit_reversed_axis, float_tensor, select_columns, to_f64_vec};

/// How the twiddles of a [`ButterflyLinear`] start (torch_butterfly's `init`). Every block of
/// every factor is drawn independently, from the layer's seed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum ButterflyLinearInit {
    /// Every twiddle Gaussian with E|t|² = 1/2 (real: N(0, 1/2); complex: real and imaginary
    /// parts N(0, 1/4)), so each factor keeps a vector's expected squared norm.
    Randn,
    /// Every 2×2 block orthogonal (real: a rotation or a reflection, at a uniform angle) or
    /// unitary (complex: Haar-random): each factor, and so the square layer, is orthogonal or
    /// unitary.
    Ortho,
    /// Every block the 2×2 identity: the layer zero-pads, copies and truncates its input.
    Identity,
    /// Complex layers only: the radix-2 unitary FFT without its bit reversal. A block of
    /// increasing stride is `F · R` (decimation in time on the bit-reversed input), one of
    /// decreasing stride `R · F` (decimation in frequency, bit-reversed output), with F the
    /// unitary DFT of size n and R the bit reversal.
    Fft {
        /// The inverse DFT instead of the forward one.
        inverse: bool,
    },
}

/// Configuration of a [`ButterflyLinear`], with torch_butterfly's defaults.
///
/// # Example
/// ```
/// use burn::backend::NdArray;
/// use burn::tensor::Tensor;
/// use learned_fft::ButterflyLinearConfig;
///
/// let device = Default::default();
/// // 100 features in, 300 out: four butterflies of size 128 side by side on the zero-padded
/// // input (512 outputs, the first 300 kept).
/// let layer = ButterflyLinearConfig::new(100, 300).with_seed(Some(7)).init::<NdArray>(&device)?;
/// assert_eq!((layer.n(), layer.nstacks()), (128, 4));
/// let y = layer.forward(Tensor::<NdArray, 3>::ones([4, 10, 100], &device))?;
/// assert_eq!(y.dims(), [4, 10, 300]);
/// // A dense layer would hold 30 300 parameters; this one holds 4 · 7 · 64 · 4 twiddles + 300.
/// use burn::module::Module;
/// assert_eq!(layer.num_params(), 4 * 7 * 64 * 4 + 300);
/// // Zero features are refused, as is an input whose last dimension is not 100.
/// assert!(ButterflyLinearConfig::new(0, 4).init::<NdArray>(&device).is_err());
/// assert!(layer.forward(Tensor::<NdArray, 2>::ones([4, 99], &device)).is_err());
/// # Ok::<(), learned_fft::Error>(())
/// ```
#[derive(Config, Debug)]
pub struct ButterflyLinearConfig {
    /// Input features (at least 1). The input is zero-padded to n, the next power of two (at
    /// least 2).
    pub in_size: usize,
    /// Output features (at least 1): the first `out_size` outputs of `nstacks` butterflies of
    /// size n side by side, `nstacks` the next power of two of `out_size` over n, or 1 (as
    /// torch_butterfly sizes them).
    pub out_size: usize,
    /// Whether the layer adds a learned bias, drawn like a dense layer's: uniform in
    /// ±1/√`in_size`.
    #[config(default = true)]
    pub bias: bool,
    /// Complex twiddles and bias, for complex inputs ([`ButterflyLinear::forward_complex`]).
    #[config(default = false)]
    pub complex: bool,
    /// Whether the first factor's strides increase (1, 2, …, n/2) or decrease; the direction
    /// alternates from one factor to the next, as in torch_butterfly.
    #[config(default = true)]
    pub increasing_stride: bool,
    /// Butterfly factors in each stack's product (at least 1).
    #[config(default = 1)]
    pub nblocks: usize,
    /// How the twiddles start.
    #[config(default = "ButterflyLinearInit::Randn")]
    pub init: ButterflyLinearInit,
    /// The seed of the twiddles and the bias; `None` draws one from the backend's random
    /// generator, which `B::seed` sets, as Burn's own initialisers do.
    #[config(default = "None")]
    pub seed: Option<u64>,
}

impl ButterflyLinearConfig {
    /// Builds the layer on `device`, after checking the configuration.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for zero features or factors, or [`ButterflyLinearInit::Fft`] on
    /// a real layer; [`Error::OutOfMemory`] when the twiddles do not fit.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<ButterflyLinear<B>> {
        let op = "butterfly_linear.init";
        for (what, value) in [("in_size", self.in_size), ("out_size", self.out_size), ("nblocks", self.nblocks)] {
            if value == 0 {
                return Err(Error::invalid(op, format!("{what} of at least 1"), value));
            }
        }
        if !self.complex && matches!(self.init, ButterflyLinearInit::Fft { .. }) {
            return Err(Error::invalid(op, "the Fft init on a complex layer (complex: true)", "a real layer"));
        }
        let (n, nstacks) = geometry(self.in_size, self.out_size)?;
        let log_n = n.trailing_zeros() as usize;
        let parts = if self.complex { 2 } else { 1 };
        // The twiddles in f64 on the host, then on the device (at most f64).
        let needed = memory::product(&[nstacks, self.nblocks, log_n, n, 2, parts, 16]);
        memory::ensure(op, || format!("the twiddles of {nstacks} × {} butterflies of size {n}", self.nblocks), needed)?;

        let seed = self.seed.unwrap_or_else(|| draw_seed::<B>(device));
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let per_block = log_n * n * 2;
        let (mut re, mut im) = (Vec::with_capacity(nstacks * self.nblocks * per_block), Vec::new());
        for _ in 0..nstacks {
            for block in 0..self.nblocks {
                let increasing = self.increasing_stride == block.is_multiple_of(2);
                let (r, i) = self.block_twiddles(n, increasing, &mut rng);
                re.extend(r);
                im.extend(i);
            }
        }
        let shape = [nstacks, self.nblocks, log_n, n / 2, 2, 2];
        let twiddles = |v: Vec<f64>| Param::from_tensor(float_tensor::<B, 6>(v, shape, device));
        let bound = (self.in_size as f64).sqrt().recip();
        let mut bias = || {
            let v = (0..self.out_size).map(|_| rng.random_range(-bound..bound)).collect();
            Param::from_tensor(float_tensor::<B, 1>(v, [self.out_size], device))
        };
        let bias_re = self.bias.then(&mut bias);
        let bias_im = (self.bias && self.complex).then(bias);
        Ok(ButterflyLinear {
            twiddle_re: twiddles(re),
            twiddle_im: self.complex.then(|| twiddles(im)),
            bias_re,
            bias_im,
            in_size: self.in_size,
            out_size: self.out_size,
            n,
            increasing_stride: self.increasing_stride,
        })
    }

    /// One factor's twiddles `(re, im)` in the stored layout (`[log2 n, n/2, 2, 2]`, by log
    /// stride); `im` is empty for a real layer.
    fn block_twiddles(&self, n: usize, increasing: bool, rng: &mut ChaCha8Rng) -> (Vec<f64>, Vec<f64>) {
        let log_n = n.trailing_zeros() as usize;
        let blocks = log_n * n / 2;
        let half = std::f64::consts::FRAC_1_SQRT_2;
        if !self.complex {
            let re = match self.init {
                ButterflyLinearInit::Randn => {
                    (0..4 * blocks).map(|_| half * rng.sample::<f64, _>(StandardNormal)).collect()
                }
                ButterflyLinearInit::Ortho => (0..blocks)
                    .flat_map(|_| {
                        let theta = rng.random_range(0.0..std::f64::consts::TAU);
                        let det = if rng.random::<bool>() { 1.0 } else { -1.0 };
                        let (s, c) = theta.sin_cos();
                        [c, -s, det * s, det * c]
                    })
                    .collect(),
                ButterflyLinearInit::Identity | ButterflyLinearInit::Fft { .. } => {
                    (0..blocks).flat_map(|_| [1.0, 0.0, 0.0, 1.0]).collect()
                }
            };
            return (re, Vec::new());
        }
        let init = match self.init {
            ButterflyLinearInit::Randn => ButterflyInit::Randn { seed: rng.next_u64(), scale: half },
            ButterflyLinearInit::Ortho => ButterflyInit::RandomUnitary { seed: rng.next_u64() },
            ButterflyLinearInit::Identity => ButterflyInit::Identity,
            ButterflyLinearInit::Fft { inverse } => ButterflyInit::Fft { inverse, norm: FftNorm::Ortho },
        };
        let (re, im) = init.twiddles(n);
        if increasing || !matches!(self.init, ButterflyLinearInit::Fft { .. }) {
            return (re, im);
        }
        // The FFT's twiddles are those of the increasing-stride product; a decreasing factor
        // reads its stage s, block k from the stored row `decreasing_rows(n)[s·n/2 + k]`.
        let (mut stored_re, mut stored_im) = (vec![0.0; re.len()], vec![0.0; im.len()]);
        for (i, &row) in decreasing_rows(n).iter().enumerate() {
            let (to, from) = (row as usize * 4, i * 4);
            stored_re[to..to + 4].copy_from_slice(&re[from..from + 4]);
            stored_im[to..to + 4].copy_from_slice(&im[from..from + 4]);
        }
        (stored_re, stored_im)
    }
}

/// A butterfly layer in place of a dense `Linear`: `y = W x + b` with W a product of
/// `nblocks` butterfly factors per stack, on the input zero-padded to n (the next power of two
/// of `in_size`), the stacks' outputs concatenated and cut to `out_size`. It holds
/// `nstacks · nblocks · log2 n · n/2 · 4` twiddles (twice that when complex) where a dense layer
/// holds `in_size · out_size` weights, and applies them in O(n log n) per vector.
///
/// The layout and the arithmetic are torch_butterfly's (`torch_butterfly.Butterfly`): the
/// twiddles `[nstacks, nblocks, log2 n, n/2, 2, 2]` are indexed by log stride, so that factor
/// (stack t, block b) at log stride `ℓ` pairs the indices `i0 = 2^{ℓ+1}·g + j` and `i0 + 2^ℓ`
/// (`0 ≤ j < 2^ℓ`) with block `k = g·2^ℓ + j`: `y[i_a] = Σ_c t[t, b, ℓ, k, a, c] · x[i_c]`. A
/// factor of increasing stride applies `ℓ = 0, 1, …, log2 n − 1`, one of decreasing stride the
/// reverse; block b's direction is `increasing_stride` for even b and the other for odd b.
///
/// Real layers take [`forward`](Self::forward), complex ones
/// [`forward_complex`](Self::forward_complex). On wgpu and CUDA each factor is one launch of the
/// fused butterfly kernel each way (a real layer runs the complex kernel with zero imaginary
/// parts); elsewhere the tensor-op reference. A factor of decreasing stride is the increasing
/// one between two bit reversals with its twiddles re-indexed, the reversals folded into the
/// kernel's input order where a neighbouring factor allows; a stack that ends on one reverses
/// its output by a gather.
///
/// # Example
/// ```
/// use burn::backend::{Autodiff, NdArray};
/// use burn::tensor::Tensor;
/// use learned_fft::{ButterflyLinearConfig, ButterflyLinearInit};
///
/// type B = Autodiff<NdArray>;
/// let device = Default::default();
/// // Orthogonal at the start: the norm of a vector goes through unchanged (no bias).
/// let layer = ButterflyLinearConfig::new(64, 64)
///     .with_init(ButterflyLinearInit::Ortho)
///     .with_bias(false)
///     .with_nblocks(2)
///     .with_seed(Some(3))
///     .init::<B>(&device)?;
/// let x = Tensor::<B, 2>::random([8, 64], burn::tensor::Distribution::Normal(0.0, 1.0), &device);
/// let y = layer.forward(x.clone())?;
/// let norm = |t: Tensor<B, 2>| t.powi_scalar(2).sum().into_scalar();
/// assert!((norm(y.clone()) / norm(x) - 1.0).abs() < 1e-4);
/// // Trained like any layer: the twiddles get gradients.
/// let grads = y.sum().backward();
/// assert!(layer.twiddle_re.grad(&grads).is_some());
/// # Ok::<(), learned_fft::Error>(())
/// ```
#[derive(Module, Debug)]
pub struct ButterflyLinear<B: Backend> {
    /// Real parts of the twiddles, `[nstacks, nblocks, log2 n, n/2, 2, 2]`.
    pub twiddle_re: Param<Tensor<B, 6>>,
    /// Imaginary parts of the twiddles (complex layers), the same shape.
    pub twiddle_im: Option<Param<Tensor<B, 6>>>,
    /// Real part of the bias, `[out_size]`.
    pub bias_re: Option<Param<Tensor<B, 1>>>,
    /// Imaginary part of the bias (complex layers with a bias), `[out_size]`.
    pub bias_im: Option<Param<Tensor<B, 1>>>,
    #[module(skip)]
    in_size: usize,
    #[module(skip)]
    out_size: usize,
    #[module(skip)]
    n: usize,
    #[module(skip)]
    increasing_stride: bool,
}

impl<B: Backend> ButterflyLinear<B> {
    /// Input features.
    pub fn in_size(&self) -> usize {
        self.in_size
    }

    /// Output features.
    pub fn out_size(&self) -> usize {
        self.out_size
    }

    /// The butterflies' size: `in_size` rounded up to a power of two (at least 2).
    pub fn n(&self) -> usize {
        self.n
    }

    /// Butterflies side by side, each on the whole padded input.
    pub fn nstacks(&self) -> usize {
        self.twiddle_re.dims()[0]
    }

    /// Butterfly factors in each stack's product.
    pub fn nblocks(&self) -> usize {
        self.twiddle_re.dims()[1]
    }

    /// Whether the twiddles and the bias are complex.
    pub fn is_complex(&self) -> bool {
        self.twiddle_im.is_some()
    }

    /// Whether the first factor's strides increase.
    pub fn increasing_stride(&self) -> bool {
        self.increasing_stride
    }

    /// `[batch, in_size]` from `[..., in_size]`, and the output's shape.
    fn flatten<const D: usize>(&self, op: &'static str, x: Tensor<B, D>) -> Result<(Tensor<B, 2>, [usize; D])> {
        let dims = x.dims();
        let batch = dims[..D - 1].iter().product::<usize>();
        if dims[D - 1] != self.in_size || batch == 0 {
            return Err(Error::invalid(
                op,
                format!("a non-empty batch with last dimension in_size = {}", self.in_size),
                format!("shape {dims:?}"),
            ));
        }
        let mut out = dims;
        out[D - 1] = self.out_size;
        let x = x.reshape([batch, self.in_size]);
        let x = if self.n > self.in_size {
            // In the input's own dtype, whatever the backend's default (see `crate::tensors`).
            let zeros = Tensor::zeros([batch, self.n - self.in_size], (&x.device(), x.dtype()));
            Tensor::cat(vec![x, zeros], 1)
        } else {
            x
        };
        Ok((x, out))
    }

    /// Factor (`stack`, `block`) of `tw` as the butterfly op takes it (`[log2 n, n/2, 2, 2]`,
    /// by stage of the increasing-stride product), and whether its strides increase.
    fn factor(&self, tw: &Tensor<B, 6>, stack: usize, block: usize) -> (Tensor<B, 4>, bool) {
        let (n, log_n) = (self.n, self.n.trailing_zeros() as usize);
        let t = tw.clone().narrow(0, stack, 1).narrow(1, block, 1);
        let increasing = self.increasing_stride == block.is_multiple_of(2);
        if increasing {
            return (t.reshape([log_n, n / 2, 2, 2]), true);
        }
        // Stage s reads stored stage log2 n − 1 − s, its blocks in bit-reversed order
        // (`decreasing_rows`).
        let rows = bit_reversed_axis(t.reshape([log_n, n / 2, 4]).flip([0]));
        (rows.reshape([log_n, n / 2, 2, 2]), false)
    }

    /// Every stack through its factors: `apply(x, factor, perm)` runs one factor after the
    /// input order `perm`; a factor of decreasing stride runs as `R · B · R`, the reversals
    /// folded into the next factor's input order where there is one.
    fn stacks<X: Clone>(
        &self,
        x: X,
        mut apply: impl FnMut(X, usize, usize, &Permutation) -> X,
        reverse: impl Fn(X) -> X,
        cat: impl FnOnce(Vec<X>) -> X,
    ) -> X {
        let outs = (0..self.nstacks())
            .map(|stack| {
                // Whether the running value is held bit-reversed (after a decreasing factor).
                let mut reversed = false;
                let mut y = x.clone();
                for block in 0..self.nblocks() {
                    let increasing = self.increasing_stride == block.is_multiple_of(2);
                    // A factor of increasing stride wants the natural order, one of decreasing
                    // stride the bit-reversed order; R is its own inverse.
                    let perm = if increasing == reversed { Permutation::BitReversal } else { Permutation::Identity };
                    y = apply(y, stack, block, &perm);
                    reversed = !increasing;
                }
                if reversed {
                    reverse(y)
                } else {
                    y
                }
            })
            .collect();
        cat(outs)
    }

    /// `y` `[batch, n]` with its columns in bit-reversed order: a gather. (By transposes of
    /// index bits, as the twiddles are re-indexed, a complex layer's twiddle gradients came out
    /// wrong on wgpu, 0.56 relative error against finite differences, for a stack of size 16
    /// ending on a factor of decreasing stride; with the gather they are right.)
    fn reversed(&self, y: Tensor<B, 2>) -> Tensor<B, 2> {
        let reversal = bit_reversal(self.n).into_iter().map(|i| i as i64).collect();
        fresh_grad(select_columns(y, reversal))
    }

    /// The first `out_size` of the stacks' concatenated outputs, plus `bias`.
    fn finish(&self, y: Tensor<B, 2>, bias: Option<&Param<Tensor<B, 1>>>) -> Tensor<B, 2> {
        let y = if y.dims()[1] > self.out_size { y.narrow(1, 0, self.out_size) } else { y };
        match bias {
            Some(b) => y + b.val().unsqueeze_dim(0),
            None => y,
        }
    }
}

impl<B: ButterflyOps> ButterflyLinear<B> {
    /// Applies a real layer to real features along the last dimension.
    ///
    /// # Shapes
    /// - `x`: `[..., in_size]`
    /// - returns `[..., out_size]`
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the layer is complex, the last dimension is not `in_size`,
    /// or the batch is empty.
    pub fn forward<const D: usize>(&self, x: Tensor<B, D>) -> Result<Tensor<B, D>> {
        let op = "butterfly_linear.forward";
        if self.is_complex() {
            return Err(Error::invalid(op, "a real layer (complex: false)", "a complex layer: use forward_complex"));
        }
        let (x, out) = self.flatten(op, x)?;
        let tw = self.twiddle_re.val();
        let y = self.stacks(
            x,
            |x, stack, block, perm| B::butterfly_real(x, self.factor(&tw, stack, block).0, perm),
            |y| self.reversed(y),
            |ys| Tensor::cat(ys, 1),
        );
        Ok(self.finish(y, self.bias_re.as_ref()).reshape(out))
    }

    /// Applies a complex layer to complex features `(re, im)` along the last dimension.
    ///
    /// # Shapes
    /// - `re`, `im`: `[..., in_size]`, the same shape
    /// - returns `(re, im)`, each `[..., out_size]`
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the layer is real, the shapes differ, the last dimension is
    /// not `in_size`, or the batch is empty.
    pub fn forward_complex<const D: usize>(
        &self,
        re: Tensor<B, D>,
        im: Tensor<B, D>,
    ) -> Result<(Tensor<B, D>, Tensor<B, D>)> {
        let op = "butterfly_linear.forward_complex";
        let Some(tw_im) = &self.twiddle_im else {
            return Err(Error::invalid(op, "a complex layer (complex: true)", "a real layer: use forward"));
        };
        if re.dims() != im.dims() {
            return Err(Error::invalid(
                op,
                format!("re and im of the same shape (re is {:?})", re.dims()),
                format!("im of shape {:?}", im.dims()),
            ));
        }
        let ((re, out), (im, _)) = (self.flatten(op, re)?, self.flatten(op, im)?);
        let (tw_re, tw_im) = (self.twiddle_re.val(), tw_im.val());
        let (yr, yi) = self.stacks(
            (re, im),
            |(re, im), stack, block, perm| {
                B::butterfly(re, im, self.factor(&tw_re, stack, block).0, self.factor(&tw_im, stack, block).0, perm)
            },
            |(re, im)| (self.reversed(re), self.reversed(im)),
            |ys| {
                let (re, im): (Vec<_>, Vec<_>) = ys.into_iter().unzip();
                (Tensor::cat(re, 1), Tensor::cat(im, 1))
            },
        );
        let (yr, yi) = (self.finish(yr, self.bias_re.as_ref()), self.finish(yi, self.bias_im.as_ref()));
        Ok((yr.reshape(out), yi.reshape(out)))
    }
}

/// The butterfly size n and the number of stacks for `in_size → out_size` (torch_butterfly's
/// `in_size_extended` and `nstacks`).
fn geometry(in_size: usize, out_size: usize) -> Result<(usize, usize)> {
    let too_large = || Error::invalid("butterfly_linear.init", "sizes up to 2^62", format!("{in_size} → {out_size}"));
    let n = in_size.max(2).checked_next_power_of_two().ok_or_else(too_large)?;
    let out = out_size.checked_next_power_of_two().ok_or_else(too_large)?;
    Ok((n, (out / n).max(1)))
}

/// For a factor of decreasing stride run as `R · B · R` (R the bit reversal of n, B of
/// increasing stride): the stored block (`ℓ · n/2 + k'`, by log stride) that B's stage s, block k
/// reads, in B's order. B's block k of stage s pairs `i0` and `i0 + 2^s`; under R these are
/// `R(i0)` and `R(i0) + 2^ℓ` with `ℓ = log2 n − 1 − s`, the pair of stored block
/// `k' = 2^ℓ·⌊R(i0) / 2^{ℓ+1}⌋ + (R(i0) mod 2^ℓ)`. With `k = 2^s·g + j` that is
/// `k' = 2^ℓ·R_s(j) + R_ℓ(g)`: the bit reversal of k over log2 n − 1 bits, the same in every
/// stage, which the forward applies by transposes ([`bit_reversed_axis`]).
fn decreasing_rows(n: usize) -> Vec<i64> {
    let (log_n, half) = (n.trailing_zeros() as usize, n / 2);
    let reversal = bit_reversal(n);
    (0..log_n)
        .flat_map(|s| {
            let reversal = &reversal;
            (0..half).map(move |k| {
                let i0 = ((k >> s) << (s + 1)) | (k & ((1 << s) - 1));
                let (p, l) = (reversal[i0], log_n - 1 - s);
                let k_stored = ((p >> (l + 1)) << l) | (p & ((1 << l) - 1));
                (l * half + k_stored) as i64
            })
        })
        .collect()
}

/// `x` itself, through an op whose backward hands the op that made `x` a fresh, contiguous
/// gradient: the gradients reaching the output's gather are views (slices of the stacks'
/// concatenation), and candle's `index_add`, the `select` backward, takes only contiguous
/// tensors.
fn fresh_grad<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    x.mul_scalar(1.0)
}

/// A seed from the backend's random generator (what `B::seed` sets): four draws of 16 bits.
fn draw_seed<B: Backend>(device: &B::Device) -> u64 {
    let draws = Tensor::<B, 1>::random([4], Distribution::Uniform(0.0, 65536.0), device);
    to_f64_vec(draws).into_iter().fold(0u64, |seed, v| (seed << 16) | (v.clamp(0.0, 65535.0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every stored row is read exactly once, and each stage reads only its own log stride.
    #[test]
    fn decreasing_rows_are_a_permutation_by_stage() {
        for n in [2usize, 4, 16, 64] {
            let (log_n, half) = (n.trailing_zeros() as usize, n / 2);
            let rows = decreasing_rows(n);
            let mut seen = vec![false; rows.len()];
            for (i, &r) in rows.iter().enumerate() {
                let r = r as usize;
                assert!(!std::mem::replace(&mut seen[r], true), "row {r} read twice at n = {n}");
                assert_eq!(r / half, log_n - 1 - i / half, "stage {} at n = {n}", i / half);
            }
        }
    }

    /// The forward's re-indexing (stages flipped, blocks bit-reversed) reads the rows
    /// `decreasing_rows` derives block by block.
    #[test]
    fn decreasing_rows_are_flipped_stages_of_bit_reversed_blocks() {
        use burn::backend::NdArray;
        for n in [2usize, 4, 8, 32, 128] {
            let (log_n, half) = (n.trailing_zeros() as usize, n / 2);
            let rows: Vec<f64> = (0..log_n * half * 4).map(|i| (i / 4) as f64).collect();
            let t = float_tensor::<NdArray<f64>, 3>(rows, [log_n, half, 4], &Default::default());
            let got: Vec<i64> =
                to_f64_vec(bit_reversed_axis(t.flip([0]))).iter().step_by(4).map(|&v| v as i64).collect();
            assert_eq!(got, decreasing_rows(n), "n = {n}");
        }
    }

    #[test]
    fn geometry_follows_torch_butterfly() {
        assert_eq!(geometry(100, 300).unwrap(), (128, 4));
        assert_eq!(geometry(300, 100).unwrap(), (512, 1));
        assert_eq!(geometry(1, 1).unwrap(), (2, 1));
        assert_eq!(geometry(16, 16).unwrap(), (16, 1));
        assert_eq!(geometry(16, 17).unwrap(), (16, 2));
        assert!(geometry(usize::MAX, 1).is_err());
    }
}
