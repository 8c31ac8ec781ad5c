#!/usr/bin/env python3
"""How much a key frame would gain from another intra predictor, estimated before building one.

    /usr/bin/python3 bench/intra_estimates.py FRAMES.npy T1,T2,...

For each listed frame of a (T, H, W) array (colour: its first channel), the residual of three
predictors of a pixel from its causal neighbours W, N, NW, NE (NN, WW, NNE for GAP), and the
conditional entropy of each residual given the class of its neighbours' residual magnitudes
(|W| + |N| + |NW| + |NE| in classes 0, 1-2, 3-5, 6-11, ... as the striped rANS coder's activity):
MED (LOCO-I's median, tezip's intra transform), CALIC's gradient-adjusted prediction (GAP), and a
blend of six predictors (W, N, W + N - NW, W + NE - N, (W + NE) / 2, MED), each weighted by
1 / (1 + its summed error at W, N, NW, NE)^2. Prints KB and each against MED. Table costs are not
counted: a lower bound for every predictor alike (docs/ratio_gaps.md, "At equal random access")."""
import sys

import numpy as np


def conditional_bits(symbols, contexts):
    """The entropy in bits of `symbols` coded with one adaptive-free table per context."""
    key = contexts.astype(np.int64) * (1 << 20) + (symbols.astype(np.int64) + (1 << 19))
    _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    _, context_inverse, context_counts = np.unique(contexts, return_inverse=True, return_counts=True)
    return -np.log2(counts[inverse] / context_counts[context_inverse]).sum()


def activity_classes(r):
    a = np.abs(r)
    act = np.zeros_like(a)
    act[:, 1:] += a[:, :-1]
    act[1:, :] += a[:-1, :]
    act[1:, 1:] += a[:-1, :-1]
    act[1:, :-1] += a[:-1, 1:]
    return sum((act > t).astype(int) for t in (0, 2, 5, 11, 23, 47, 95, 191))


def neighbours(x):
    p = np.pad(x, 2, mode='edge').astype(np.int64)
    h, w = x.shape
    at = lambda dy, dx: p[2 + dy:2 + dy + h, 2 + dx:2 + dx + w]
    return at(0, -1), at(-1, 0), at(-1, -1), at(-1, 1), at(-2, 0), at(0, -2), at(-1, 2)


def med(w, n, nw):
    return np.where(nw >= np.maximum(w, n), np.minimum(w, n), np.where(nw <= np.minimum(w, n), np.maximum(w, n), w + n - nw))


def predictions(x):
    w, n, nw, ne, nn, ww, nne = neighbours(x)
    out = {'med': med(w, n, nw)}
    dh = np.abs(w - ww) + np.abs(n - nw) + np.abs(n - ne)
    dv = np.abs(w - nw) + np.abs(n - nn) + np.abs(ne - nne)
    base = (w + n) / 2 + (ne - nw) / 4
    d = dv - dh
    gap = np.select([d > 80, d < -80, d > 32, d > 8, d < -32, d < -8],
                    [w, n, (base + w) / 2, (3 * base + w) / 4, (base + n) / 2, (3 * base + n) / 4], base)
    out['gap'] = np.round(gap)
    xs = x.astype(np.int64)
    h, wd = x.shape
    num = den = 0
    for s in (w, n, w + n - nw, w + ne - n, (w + ne + 1) // 2, med(w, n, nw)):
        e = np.pad(np.abs(xs - s).astype(np.float64), 1)
        local = e[1:1 + h, 0:wd] + e[0:h, 1:1 + wd] + e[0:h, 0:wd] + e[0:h, 2:2 + wd]
        weight = 1.0 / (1 + local) ** 2
        num, den = num + weight * s, den + weight
    out['blend'] = np.round(num / den)
    return out


def main():
    frames = np.load(sys.argv[1], mmap_mode='r')
    total = {}
    for t in (int(i) for i in sys.argv[2].split(',')):
        x = np.asarray(frames[t]).astype(np.int64)
        if x.ndim == 3:
            x = x[..., 0]
        for name, p in predictions(x).items():
            r = x - p.astype(np.int64)
            total[name] = total.get(name, 0) + conditional_bits(r, activity_classes(r)) / 8
    for name, v in total.items():
        print(f'{sys.argv[1]} {name}: {v / 1000:.1f} KB ({v / total["med"]:.3f})')


if __name__ == '__main__':
    main()
