#!/usr/bin/env python3
"""Writes a user's target matrix for `learned-fft train --target-file`, as numpy's .npy.

    python3 scripts/random_bp.py --n 256 --seed 0 --out bp256.npy            # a random BP
    python3 scripts/random_bp.py --n 256 --seed 0 --out q256.npy --unitary   # no butterfly

A random BP is B·P: a gather P (x <- x[perm]) by a uniformly random permutation, then a butterfly
B of log2 N stages whose N/2 blocks are Haar-random 2x2 unitaries, in the crate's definition
(src/reference/butterfly.rs: stage s has stride 2^s and pairs i0 = 2·2^s·g + j with i0 + 2^s).
Unitary blocks keep the matrix well conditioned at every N, so its f32 rounding is of the
order of the DFT's. `--unitary` writes a Haar-random unitary matrix instead, which no
butterfly after any permutation represents (with probability 1). Entries are complex128, C
order; the matrix maps a column vector x to M x.
"""

import argparse

import numpy as np


def haar_unitary(rng, shape, k):
    """Haar-random k x k unitaries of the given batch shape (QR of a complex Gaussian, phases fixed)."""
    z = (rng.standard_normal(shape + (k, k)) + 1j * rng.standard_normal(shape + (k, k))) / np.sqrt(2)
    q, r = np.linalg.qr(z)
    d = np.diagonal(r, axis1=-2, axis2=-1)
    return q * (d / np.abs(d))[..., None, :]


def random_bp(n, rng):
    log_n = n.bit_length() - 1
    perm = rng.permutation(n)
    blocks = haar_unitary(rng, (log_n, n // 2), 2)
    # Columns of the identity, permuted: row i of x is x[perm[i]], so the gather's matrix.
    x = np.eye(n, dtype=np.complex128)[perm]
    k = np.arange(n // 2)
    for s in range(log_n):
        st = 1 << s
        i0 = 2 * st * (k // st) + k % st
        i1 = i0 + st
        t = blocks[s]
        x0, x1 = x[i0].copy(), x[i1].copy()
        x[i0] = t[:, 0, 0, None] * x0 + t[:, 0, 1, None] * x1
        x[i1] = t[:, 1, 0, None] * x0 + t[:, 1, 1, None] * x1
    return x


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, required=True, help="size, a power of two >= 2")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="the .npy file to write")
    p.add_argument("--unitary", action="store_true", help="a Haar-random unitary (no butterfly) instead")
    a = p.parse_args()
    if a.n < 2 or a.n & (a.n - 1):
        p.error(f"--n must be a power of two >= 2, not {a.n}")
    rng = np.random.default_rng(a.seed)
    m = haar_unitary(rng, (), a.n) if a.unitary else random_bp(a.n, rng)
    np.save(a.out, m)


if __name__ == "__main__":
    main()
