//! CubeCL backends (wgpu, CUDA): the Adam update as one kernel per tensor.

use burn::tensor::{Tensor, TensorPrimitive};
use burn_cubecl::{element::BoolElement, kernel::into_contiguous, CubeBackend, CubeRuntime, FloatElement, IntElement};
use cubecl::{prelude::*, CubeDim};

use super::kernel::{adam_kernel, AdamScalarsLaunch};
use super::{AdamOps, AdamStep};
use crate::ops::cubecl::{empties, grid};
use crate::ops::tuning::ELEMENTWISE_UNITS;

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> AdamOps for CubeBackend<R, F, I, BT> {
    fn adam_update<const D: usize>(
        param: Tensor<Self, D>,
        grad: Tensor<Self, D>,
        moments: Option<(Tensor<Self, D>, Tensor<Self, D>)>,
        step: &AdamStep,
    ) -> (Tensor<Self, D>, Tensor<Self, D>, Tensor<Self, D>) {
        let dims = param.dims();
        let inner = |t: Tensor<Self, D>| into_contiguous(t.into_primitive().tensor());
        let (p, g) = (inner(param), inner(grad));
        let fresh = moments.is_none();
        // On the first step the kernel reads no moments; the gradient stands in as the argument.
        let (m, v) = match moments {
            Some((m, v)) => (inner(m), inner(v)),
            None => (g.clone(), g.clone()),
        };
        let len = p.meta.shape.num_elements();
        // Flat outputs in one allocation, shaped as the parameter below.
        let [p_out, m_out, v_out] = empties::<R, F, 3>(&p, [&[len], &[len], &[len]]);
        let (correction_2, factor) = step.corrections();
        let scalar = |x: f64| InputScalar::new(x, F::dtype());
        let scalars = AdamScalarsLaunch::new(
            scalar(step.beta_1 as f64),
            scalar((1.0 - step.beta_1) as f64),
            scalar(step.beta_2 as f64),
            scalar((1.0 - step.beta_2) as f64),
            scalar(factor as f64),
            scalar((step.epsilon * correction_2) as f64),
            scalar(step.lr),
            len as u32,
        );
        // SAFETY: one unit per element; units past `len` leave before reading or writing, and
        // every array holds `len` elements (the inputs made contiguous, the outputs allocated so).
        unsafe {
            adam_kernel::launch_unchecked::<F, R>(
                &p.client.clone(),
                grid(len.div_ceil(ELEMENTWISE_UNITS)),
                CubeDim::new_1d(ELEMENTWISE_UNITS as u32),
                p.into_array_arg(),
                g.into_array_arg(),
                m.into_array_arg(),
                v.into_array_arg(),
                p_out.clone().into_array_arg(),
                m_out.clone().into_array_arg(),
                v_out.clone().into_array_arg(),
                scalars,
                fresh,
            );
        }
        let wrap = |t| Tensor::<Self, 1>::from_primitive(TensorPrimitive::Float(t)).reshape(dims);
        (wrap(p_out), wrap(m_out), wrap(v_out))
    }
}
