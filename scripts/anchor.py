#!/usr/bin/env python3
"""Same-run anchors on an NVIDIA GPU with PyTorch, for `learned-fft bench ... --anchor FILE`.

Prints one JSON object (one line) per run. Append the lines of the shapes you bench to one file and
pass it to the bench run on the same GPU in the same sitting; the bench finds the line of its own shape
and reports its ratios to it under "anchor" in its JSON:

    # butterfly: cuFFT C2C, and an unfused PyTorch butterfly (forward, forward + backward)
    python3 scripts/anchor.py --n 1024 --batch 32768 >> anchor.jsonl
    learned-fft --backend cuda bench butterfly --n 1024 --batch 32768 --anchor anchor.jsonl

    # ButterflyLinear: torch.nn.Linear and an unfused PyTorch butterfly linear layer
    python3 scripts/anchor.py --linear --in-size 1024 --out-size 1024 --batch 4096 >> anchor.jsonl
    learned-fft --backend cuda bench linear --in-size 1024 --out-size 1024 --batch 4096 --anchor anchor.jsonl

    # spectral loss: an STFT-magnitude loss built on torch.stft (forward, forward + backward)
    python3 scripts/anchor.py --stft --win 64 --hop 16 --signals 64 --samples 48000 >> anchor.jsonl
    learned-fft --backend cuda bench spectral --win 64 --hop 16 --signals 64 --samples 48000 --anchor anchor.jsonl

`bench butterfly --anchor` matches the line by "n" and "batch" and reads "cufft_effective_GBps" and
"torch_butterfly_fwdbwd_ms"; `bench spectral --anchor` matches "win", "hop", "signals" and "samples"
and reads "torch_stft_loss_fwd_ms" and "torch_stft_loss_fwdbwd_ms"; `bench linear --anchor` matches
"in_size", "out_size", "nblocks" and "batch" and reads "torch_linear_fwdbwd_ms" and
"torch_butterfly_linear_fwdbwd_ms" (src/cli/anchor.rs). Every line
also carries "device" (the GPU's name), which the bench repeats beside its ratios.

What is timed (medians of CUDA-event timings, after warm-up; CUDA events time the GPU only, so these
anchors pay no host sync, unlike a synchronised call of the bench):
- `cufft_c2c_ms`: torch.fft.fft over the last axis of a [batch, n] complex64 tensor (cuFFT C2C);
  `cufft_effective_GBps` counts one read and one write of the signal, as the bench's GB/s do.
- `torch_butterfly_fwd_ms`, `torch_butterfly_fwdbwd_ms`: log2(n) stages of learned 2x2 complex blocks
  as tensor ops (no fusion), the forward alone and the forward with the backward of sum(re(y)) into
  the input and the twiddles.
- `torch_linear_fwd_ms`, `torch_linear_fwdbwd_ms`, `torch_butterfly_linear_fwd_ms`,
  `torch_butterfly_linear_fwdbwd_ms`: torch.nn.Linear, and torch_butterfly's real `Butterfly`
  layer written out as tensor ops (padding, stacks, alternating strides, bias), forward and the
  forward with the backward of sum(y) into the input and every parameter.
- `torch_stft_loss_fwd_ms`, `torch_stft_loss_fwdbwd_ms`: two torch.stft calls (Hann window,
  center=False), magnitudes sqrt(max(re^2 + im^2, 1e-8)), the mean squared difference, and its
  gradient with respect to the prediction.

Requires PyTorch with CUDA. Standard output is the JSON line only; errors go to standard error.
"""
import argparse
import json
import math
import sys


def median_ms(torch, fn, iters, warm):
    """Median of `iters` CUDA-event timings of `fn`, after `warm` untimed calls."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2]


def fft_anchor(torch, n, batch, iters, warm):
    dev = torch.device("cuda")
    x = torch.randn(batch, n, dtype=torch.complex64, device=dev)
    ms = median_ms(torch, lambda: torch.fft.fft(x, dim=-1), iters, warm)
    logn = int(math.log2(n))
    tw = torch.randn(logn, n // 2, 2, 2, dtype=torch.complex64, device=dev, requires_grad=True)
    xb = x.clone().requires_grad_(True)

    def butterfly():
        o = xb
        for idx in range(logn):
            s = 1 << idx
            t = tw[idx].view(n // (2 * s), s, 2, 2).permute(0, 2, 3, 1)
            o = (t * o.view(batch, n // (2 * s), 1, 2, s)).sum(dim=3).reshape(batch, n)
        return o

    def butterfly_fb():
        butterfly().real.sum().backward()

    bf_iters = max(1, min(iters, 20))
    return {
        "n": n,
        "batch": batch,
        "cufft_c2c_ms": ms,
        "cufft_effective_GBps": 2 * x.numel() * 8 / ms / 1e6,
        "torch_butterfly_fwd_ms": median_ms(torch, butterfly, bf_iters, warm),
        "torch_butterfly_fwdbwd_ms": median_ms(torch, butterfly_fb, bf_iters, warm),
    }


def stft_anchor(torch, win, hop, signals, samples, iters, warm):
    dev = torch.device("cuda")
    a = torch.randn(signals, samples, device=dev, requires_grad=True)
    b = torch.randn(signals, samples, device=dev)
    w = torch.hann_window(win, device=dev)

    def loss():
        A = torch.stft(a, win, hop, window=w, return_complex=True, center=False)
        B = torch.stft(b, win, hop, window=w, return_complex=True, center=False)
        ma = torch.sqrt(torch.clamp(A.real ** 2 + A.imag ** 2, min=1e-8))
        mb = torch.sqrt(torch.clamp(B.real ** 2 + B.imag ** 2, min=1e-8))
        return ((ma - mb) ** 2).mean()

    def fb():
        a.grad = None
        loss().backward()

    st_iters = max(1, min(iters, 20))
    return {
        "win": win,
        "hop": hop,
        "signals": signals,
        "samples": samples,
        "torch_stft_loss_fwd_ms": median_ms(torch, loss, st_iters, warm),
        "torch_stft_loss_fwdbwd_ms": median_ms(torch, fb, st_iters, warm),
    }


def linear_anchor(torch, in_size, out_size, nblocks, batch, iters, warm):
    """torch.nn.Linear and an unfused real butterfly linear layer (torch_butterfly's
    `Butterfly(in_size, out_size, bias=True, complex=False, increasing_stride=True,
    nblocks=nblocks)` forward, `butterfly_multiply_torch`, written out as tensor ops): forward,
    and forward + backward of sum(y) into the input and every parameter."""
    dev = torch.device("cuda")
    x = torch.randn(batch, in_size, device=dev, requires_grad=True)
    dense = torch.nn.Linear(in_size, out_size).to(dev)
    n = 1 << max(1, math.ceil(math.log2(in_size)))
    nstacks = max(1, (1 << math.ceil(math.log2(out_size))) // n)
    logn = int(math.log2(n))
    tw = (torch.randn(nstacks, nblocks, logn, n // 2, 2, 2, device=dev) / math.sqrt(2)).requires_grad_(True)
    bias = torch.zeros(out_size, device=dev, requires_grad=True)

    def butterfly():
        o = torch.nn.functional.pad(x, (0, n - in_size)).unsqueeze(1).expand(batch, nstacks, n)
        increasing = True
        for block in range(nblocks):
            for idx in range(logn):
                ls = idx if increasing else logn - 1 - idx
                s = 1 << ls
                t = tw[:, block, ls].view(nstacks, n // (2 * s), s, 2, 2).permute(0, 1, 3, 4, 2)
                o = (t * o.reshape(batch, nstacks, n // (2 * s), 1, 2, s)).sum(dim=4).reshape(batch, nstacks, n)
            increasing = not increasing
        return o.reshape(batch, nstacks * n)[:, :out_size] + bias

    def dense_fb():
        dense(x).sum().backward()

    def butterfly_fb():
        butterfly().sum().backward()

    it = max(1, min(iters, 20))
    return {
        "in_size": in_size,
        "out_size": out_size,
        "nblocks": nblocks,
        "batch": batch,
        "torch_linear_fwd_ms": median_ms(torch, lambda: dense(x), it, warm),
        "torch_linear_fwdbwd_ms": median_ms(torch, dense_fb, it, warm),
        "torch_butterfly_linear_fwd_ms": median_ms(torch, butterfly, it, warm),
        "torch_butterfly_linear_fwdbwd_ms": median_ms(torch, butterfly_fb, it, warm),
    }


def main():
    p = argparse.ArgumentParser(
        description="Same-run cuFFT / PyTorch anchors for `learned-fft bench butterfly|spectral --anchor`.")
    p.add_argument("--n", type=int, default=1024, help="transform size (a power of two; butterfly anchors)")
    p.add_argument("--batch", type=int, default=16384, help="rows (butterfly anchors)")
    p.add_argument("--stft", action="store_true", help="the torch.stft loss anchor instead of the butterfly's")
    p.add_argument("--win", type=int, default=64, help="STFT window (--stft)")
    p.add_argument("--hop", type=int, default=16, help="STFT hop (--stft)")
    p.add_argument("--signals", type=int, default=64, help="signals (--stft)")
    p.add_argument("--samples", type=int, default=48000, help="samples per signal (--stft)")
    p.add_argument("--linear", action="store_true",
                   help="the torch.nn.Linear and unfused butterfly-linear anchor instead of the butterfly's")
    p.add_argument("--in-size", type=int, default=1024, help="input features (--linear)")
    p.add_argument("--out-size", type=int, default=1024, help="output features (--linear)")
    p.add_argument("--nblocks", type=int, default=1, help="butterfly factors per stack (--linear)")
    p.add_argument("--iters", type=int, default=50,
                   help="timed calls of cuFFT (the butterfly and the STFT loss take at most 20)")
    p.add_argument("--warmup", type=int, default=10, help="untimed calls before timing")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    a = p.parse_args()
    if a.n < 2 or a.n & (a.n - 1):
        p.error(f"--n must be a power of two of at least 2, got {a.n}")
    for name in ("batch", "win", "hop", "signals", "samples", "iters", "in_size", "out_size", "nblocks"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if a.stft and a.win > a.samples:
        p.error(f"--win ({a.win}) must not exceed --samples ({a.samples})")
    try:
        import torch
    except ImportError:
        sys.exit("anchor.py: PyTorch is not installed (pip install torch)")
    if not torch.cuda.is_available():
        sys.exit("anchor.py: PyTorch sees no CUDA device; the anchors time cuFFT and PyTorch on the GPU")
    torch.manual_seed(a.seed)
    out = {"device": torch.cuda.get_device_name(0)}
    if a.linear:
        out.update(linear_anchor(torch, a.in_size, a.out_size, a.nblocks, a.batch, a.iters, a.warmup))
    elif a.stft:
        out.update(stft_anchor(torch, a.win, a.hop, a.signals, a.samples, a.iters, a.warmup))
    else:
        out.update(fft_anchor(torch, a.n, a.batch, a.iters, a.warmup))
    out["torch"] = torch.__version__
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
