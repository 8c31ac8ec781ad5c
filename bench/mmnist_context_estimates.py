#!/usr/bin/env python3
"""What context modelling could save on Moving MNIST, estimated before building (docs/ratio_gaps.md,
"Moving MNIST: context coding estimated").

    /usr/bin/python3 bench/mmnist_context_estimates.py .cache/datasets/mmnist/mmnist.npy [SEQUENCES]

1. Key frames: each sequence's first frame through an adaptive binary coder (LZMA-style
   probabilities, 12 bits, shift 4): a zero flag under 256 contexts of its causal neighbours
   (W, N, NW, NE, WW, NN nonzero; W, N above 128), then nonzero values as 8 binary decisions under
   5 buckets of max(W, N, NE). Models start afresh each sequence (a chunk decodes on its own).
2. Later frames: per 8 x 8 block the whole-pixel vector within +-6 with the fewest mismatches
   against the previous frame, coded against the left (or upper) block's; then per pixel an
   "equals the motion-compensated pixel" flag under its neighbours' flags, and a mismatch's value
   in 8 binary decisions. Counts of adaptive code lengths (-log2 p), not a coder's output.
Compare with `zstd -19` on each sequence's raw bytes (and on its first frame alone)."""
import math
import sys

import numpy as np


class Bit:
    __slots__ = ("p",)

    def __init__(self):
        self.p = 2048


def cost(m, b, shift=4):
    p = m.p / 4096.0
    c = -math.log2(p if b == 0 else 1 - p)
    m.p += ((4096 - m.p) >> shift) if b == 0 else -(m.p >> shift)
    return c


def tree(models, v):
    c, node = 0.0, 1
    for i in range(7, -1, -1):
        b = (v >> i) & 1
        c += cost(models[node], b)
        node = node * 2 + b
    return c


def key_frame_bits(f):
    zc = [Bit() for _ in range(256)]
    vc = [[Bit() for _ in range(256)] for _ in range(6)]
    h, w = f.shape
    g = np.zeros((h + 2, w + 4), int)
    g[2:, 2:w + 2] = f
    total = 0.0
    for y in range(2, h + 2):
        for x in range(2, w + 2):
            W, N, NW, NE, WW, NN = g[y, x - 1], g[y - 1, x], g[y - 1, x - 1], g[y - 1, x + 1], g[y, x - 2], g[y - 2, x]
            ctx = ((W > 0) + 2 * (N > 0) + 4 * (NW > 0) + 8 * (NE > 0) + 16 * (WW > 0) + 32 * (NN > 0)
                   + 64 * (W > 128) + 128 * (N > 128))
            v = g[y, x]
            total += cost(zc[ctx], int(v != 0))
            if v:
                p = max(W, N, NE)
                total += tree(vc[0 if p == 0 else 1 + min(4, p // 64)], v)
    return total


def later_frames_bits(seq, block=8, reach=6):
    eq = [Bit() for _ in range(64)]
    values = [[Bit() for _ in range(256)] for _ in range(4)]
    same, comp = Bit(), [[Bit() for _ in range(32)] for _ in range(2)]
    total = 0.0
    for t in range(1, seq.shape[0]):
        ref, cur = np.pad(seq[t - 1], reach), seq[t]
        h, w = cur.shape
        mc, vectors = np.zeros_like(cur), {}
        for by in range(0, h, block):
            for bx in range(0, w, block):
                blk = cur[by:by + block, bx:bx + block]
                best = None
                for dy in range(-reach, reach + 1):
                    for dx in range(-reach, reach + 1):
                        cand = ref[by + reach + dy:by + reach + dy + block, bx + reach + dx:bx + reach + dx + block]
                        e = np.count_nonzero(cand != blk) * 64 + abs(dx) + abs(dy)
                        if best is None or e < best[0]:
                            best = (e, dy, dx)
                _, dy, dx = best
                vectors[(by, bx)] = (dy, dx)
                top, left = by + reach + dy, bx + reach + dx
                mc[by:by + block, bx:bx + block] = ref[top:top + block, left:left + block]
                pred = vectors.get((by, bx - block), vectors.get((by - block, bx), (0, 0)))
                total += cost(same, int((dy, dx) != pred))
                if (dy, dx) != pred:
                    for k, c in enumerate((dy + reach, dx + reach)):
                        node = 1
                        for i in range(4, -1, -1):
                            b = (c >> i) & 1
                            total += cost(comp[k][node], b)
                            node = node * 2 + b
        flags = np.ones((h + 1, w + 2), int)
        for y in range(h):
            for x in range(w):
                v, m = cur[y, x], mc[y, x]
                ctx = (m > 0) + 2 * flags[y + 1, x] + 4 * flags[y, x + 1] + 8 * flags[y, x + 2] + 16 * (m > 200) + 32 * flags[y, x]
                e = int(v == m)
                flags[y + 1, x + 1] = e
                total += cost(eq[ctx], 1 - e)
                if not e:
                    total += tree(values[min(3, m // 64)], v)
    return total


def main():
    a = np.load(sys.argv[1]).astype(int)
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    key = sum(key_frame_bits(a[s, 0]) for s in range(n)) / 8 / n
    later = sum(later_frames_bits(a[s]) for s in range(n)) / 8 / n
    print(f"{n} sequences: key frame {key:.0f} bytes, later frames {later:.0f} bytes a sequence")


if __name__ == "__main__":
    main()
