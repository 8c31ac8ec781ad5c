#!/usr/bin/python3
"""Order-0 entropy of colour residuals under reversible colour transforms (docs/colour.md).

    /usr/bin/python3 bench/colour_transforms.py FOLDER [FRAMES]

FOLDER holds one sequence of RGB PNG frames. For every tenth frame pair (up to FRAMES frames), the
previous-frame residual ("prev") and the frame itself through the LOCO-I median predictor
("intra") are split into three planes and coded, in the estimate, as:
  chain   R, G - R, B - G, each difference only where it is smaller (chunk versions 3-5)
  ycocg   YCoCg-R (Y, Co, Cg), as FFV1 and JPEG XL use it
  plans   the best of tezip's channel plans: any order, the second plane minus the first or not,
          the third minus the first, the second, their floor mean, or nothing
Sizes are order-0 entropies in bytes, given relative to `chain`. A screening measurement: tezip's
encoder codes motion-compensated residuals with spatial transforms and a context coder.
"""
import glob
import itertools
import sys

import numpy as np
from PIL import Image


def entropy_bytes(x):
    _, counts = np.unique(x, return_counts=True)
    p = counts / counts.sum()
    return float(-(counts * np.log2(p)).sum() / 8)


def med(x):
    a = np.zeros_like(x); a[:, 1:] = x[:, :-1]
    b = np.zeros_like(x); b[1:, :] = x[:-1, :]
    c = np.zeros_like(x); c[1:, 1:] = x[:-1, :-1]
    p = np.where(c >= np.maximum(a, b), np.minimum(a, b), np.where(c <= np.minimum(a, b), np.maximum(a, b), a + b - c))
    return x - p


def ycocg_r(r, g, b):
    co = r - b
    t = b + (co >> 1)
    cg = g - t
    return [t + (cg >> 1), co, cg]


def best_plan(planes, cost):
    best = None
    for a, b, c in itertools.permutations(range(3)):
        pa, pb, pc = planes[a], planes[b], planes[c]
        total = cost(pa) + min(cost(pb), cost(pb - pa))
        total += min(cost(pc), cost(pc - pa), cost(pc - pb), cost(pc - ((pa + pb) >> 1)))
        best = total if best is None else min(best, total)
    return best


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    files = sorted(glob.glob(sys.argv[1] + "/*.png"))[: int(sys.argv[2]) if len(sys.argv) > 2 else 60]
    frames = np.stack([np.asarray(Image.open(f).convert("RGB")).astype(np.int32) for f in files])
    for mode in ("intra", "prev"):
        cost = (lambda x: entropy_bytes(med(x))) if mode == "intra" else entropy_bytes
        total = {"chain": 0.0, "ycocg": 0.0, "plans": 0.0}
        for t in range(1, len(frames), max(1, len(frames) // 10)):
            x = frames[t] if mode == "intra" else frames[t] - frames[t - 1]
            r, g, b = x[..., 0], x[..., 1], x[..., 2]
            total["chain"] += cost(r) + min(cost(g), cost(g - r)) + min(cost(b), cost(b - g))
            total["ycocg"] += sum(cost(p) for p in ycocg_r(r, g, b))
            total["plans"] += best_plan([r, g, b], cost)
        print(f"{sys.argv[1]} {mode}: " + " ".join(f"{k} {v / total['chain']:.4f}" for k, v in total.items()))


if __name__ == "__main__":
    main()
