//! The one helper every fused op's `Autodiff` impl shares: recording a kernel launch on Burn's
//! autodiff graph with its custom `Backward`.

use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::ops::{Backward, OpsKind};
use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;

/// Runs a fused forward on the inner backend and records it on the autodiff graph.
///
/// `compute` gets the inputs' inner tensors and returns the output with the state `op`'s
/// backward needs (handles, cheap to clone). Where no input is tracked the state is dropped and
/// the output is a leaf; otherwise `op.backward` receives the state when gradients are asked.
pub(crate) fn record_fused<B, C, Op, const N: usize>(
    op: Op,
    inputs: [FloatTensor<Autodiff<B, C>>; N],
    compute: impl FnOnce([FloatTensor<B>; N]) -> (FloatTensor<B>, Op::State),
) -> FloatTensor<Autodiff<B, C>>
where
    B: Backend,
    C: CheckpointStrategy,
    Op: Backward<B, N>,
{
    let parents = inputs.each_ref().map(|t| t.node.clone());
    let primitives = inputs.map(|t| t.primitive);
    match op.prepare::<C>(parents).compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            let (out, state) = compute(primitives);
            prep.finish(state, out)
        }
        OpsKind::UnTracked(prep) => prep.finish(compute(primitives).0),
    }
}
