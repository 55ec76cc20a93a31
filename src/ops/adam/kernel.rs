//! The fused Adam update: one unit per element reads the parameter, its gradient and the two
//! moments once and writes the three results (Burn's Adam reads and writes them about thirteen
//! times, a launch each).

use cubecl::prelude::*;

/// The step's scalars, in the kernel's float type (see [`super::AdamStep`]).
#[derive(CubeLaunch, CubeType)]
pub(super) struct AdamScalars {
    /// β₁, 1 − β₁, β₂, 1 − β₂.
    pub beta_1: InputScalar,
    pub keep_1: InputScalar,
    pub beta_2: InputScalar,
    pub keep_2: InputScalar,
    /// `c = √(1 − β₂ᵗ) / (1 − β₁ᵗ)`, and `ε √(1 − β₂ᵗ)`.
    pub factor: InputScalar,
    pub epsilon: InputScalar,
    /// The learning rate.
    pub lr: InputScalar,
    /// Elements of the tensor.
    pub len: u32,
}

/// `m' = β₁ m + (1 − β₁) g`, `v' = β₂ v + (1 − β₂) g²`, `p' = p − lr · (c m') / (√v' + ε')`, in
/// the order of Burn's ops. With `fresh` (the first step) the moments are zero and `m`, `v` are
/// not read.
#[cube(launch_unchecked)]
pub(super) fn adam_kernel<F: Float>(
    param: &Array<F>,
    grad: &Array<F>,
    m: &Array<F>,
    v: &Array<F>,
    param_out: &mut Array<F>,
    m_out: &mut Array<F>,
    v_out: &mut Array<F>,
    s: &AdamScalars,
    #[comptime] fresh: bool,
) {
    let i = ABSOLUTE_POS;
    if i >= s.len as usize {
        terminate!();
    }
    let g = grad[i];
    let mut m1 = g * s.keep_1.get::<F>();
    let mut v1 = (g * g) * s.keep_2.get::<F>();
    if comptime![!fresh] {
        m1 = m[i] * s.beta_1.get::<F>() + m1;
        v1 = v[i] * s.beta_2.get::<F>() + v1;
    }
    let update = (m1 * s.factor.get::<F>()) / (F::sqrt(v1) + s.epsilon.get::<F>());
    param_out[i] = param[i] - update * s.lr.get::<F>();
    m_out[i] = m1;
    v_out[i] = v1;
}
