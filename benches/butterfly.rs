//! `cargo bench --bench butterfly`: times only the butterfly op (setup and upload stay outside
//! the timed closure; the device is synchronised inside it so the work is counted).

use burn::module::AutodiffModule;
use burn::tensor::{Distribution, Tensor};
use divan::Bencher;
use learned_fft::backend::{wgpu_adapter, NdArrayBackend, WgpuBackend};
use learned_fft::{ButterflyConfig, ButterflyInit, ButterflyOps};

fn main() {
    divan::main();
}

const BATCH: usize = 256;

fn bench_forward<B: ButterflyOps>(bencher: Bencher, n: usize, device: B::Device) {
    let layer = ButterflyConfig::new(n)
        .with_init(ButterflyInit::RandomUnitary { seed: 0 })
        .init::<burn::backend::Autodiff<B>>(&device)
        .unwrap()
        .valid();
    let x = || Tensor::<B, 2>::random([BATCH, n], Distribution::Normal(0.0, 1.0), &device);
    let (xr, xi) = (x(), x());
    B::sync(&device).unwrap();
    bencher.bench_local(|| {
        let y = layer.forward(xr.clone(), xi.clone()).unwrap();
        B::sync(&device).unwrap();
        y
    });
}

/// The fused kernel on wgpu (skipped without an adapter).
#[divan::bench(args = [64, 256, 1024, 4096])]
fn fused_forward_wgpu(bencher: Bencher, n: usize) {
    if wgpu_adapter().is_some() {
        bench_forward::<WgpuBackend>(bencher, n, Default::default());
    }
}

/// The tensor-op reference on ndarray.
#[divan::bench(args = [64, 256, 1024])]
fn reference_forward_ndarray(bencher: Bencher, n: usize) {
    bench_forward::<NdArrayBackend<f32>>(bencher, n, Default::default());
}
