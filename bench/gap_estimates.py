#!/usr/bin/python3
"""Order-0 and context-conditioned entropy estimates of prediction ideas for lossless video, on the
luma of real frames, before building any of them (docs/ratio_gaps.md has the figures).

  gap_estimates.py MODE FOLDER [FIRST=40] [COUNT=8]

MODE:
  refs      motion from the previous frame only, against a per-block choice among the previous
            frame, the one before it (its own vectors) and their mean; and the one before it with
            the previous frame's vectors doubled instead of searched
  intra     per 16x16 block, the median (LOCO-I) predictor on the frame's own pixels instead of the
            motion-compensated residual, where it has the smaller sum of absolute values
  contexts  intra residuals (median predictor) under tezip-like activity classes and under
            FFV1-like quantized pixel gradients; inter residuals with the forecast's gradient as a
            second context dimension (the forecast is known to the decoder before the residual)
  interp    half-pixel motion with bilinear against H.264's 6-tap interpolation
  above     intra residuals (median predictor) under the activity classes and, besides, the
            quantized pixel gradients of the row above only (T - TL, T - TR: 81 classes), which a
            striped decoder could know before the row; against FFV1's three gradients (729)
  side      inter residuals under the activity classes and a second context dimension the decoder
            knows before the residual: the forecast's gradient, the previous frame's residual
            magnitude at the same place, the previous frame's own change, the forecast's move

Motion: 16x16 blocks (8x8 for interp), full search of +-6 pixels in half pixels by SAD. Residual
costs are bytes of order-0 or conditional entropy, side information (vectors, maps, tables) not
counted: an upper bound on what each idea can gain.
"""
import glob
import sys

import numpy as np
from PIL import Image

B, R = 16, 6


def frames(folder, first, count):
    files = sorted(glob.glob(folder + "/*"))[first:first + count]
    return [np.asarray(Image.open(f).convert("L"), dtype=np.int64) for f in files]


def upsample2(ref, pad, six_tap=False):
    """The reference at twice the resolution, values x2 (x4 at the bilinear centre, halved)."""
    p = np.pad(ref, pad, mode="edge")
    h, w = p.shape
    u = np.zeros((2 * h - 1, 2 * w - 1), np.int64)
    u[::2, ::2] = p * 2
    if not six_tap:
        u[1::2, ::2] = p[:-1] + p[1:]
        u[::2, 1::2] = p[:, :-1] + p[:, 1:]
        u[1::2, 1::2] = (p[:-1, :-1] + p[1:, :-1] + p[:-1, 1:] + p[1:, 1:] + 1) // 2
        return u

    def tap6(a, axis):
        taps, n, out = [1, -5, 20, 20, -5, 1], a.shape[axis], 0
        for j, c in enumerate(taps):
            sl = [slice(None)] * 2
            sl[axis] = slice(j, n - 5 + j)
            out = out + c * a[tuple(sl)]
        return out

    u[5:2 * h - 5:2, ::2] = np.clip((tap6(p, 0) + 16) >> 5, 0, 255) * 2
    u[::2, 5:2 * w - 5:2] = np.clip((tap6(p, 1) + 16) >> 5, 0, 255) * 2
    u[5:2 * h - 5:2, 5:2 * w - 5:2] = np.clip((tap6(tap6(p, 0), 1) + 512) >> 10, 0, 255) * 2
    return u


def motion(cur, ref, block=B, six_tap=False):
    """Per block the half-pixel vector of least SAD: the forecast and the vectors (half pixels)."""
    pad = R + 4
    u = upsample2(ref, pad, six_tap)
    H, W = cur.shape
    best = np.full((H // block, W // block), 1 << 60, np.int64)
    out = np.zeros((H, W), np.int64)
    vy = np.zeros_like(best)
    vx = np.zeros_like(best)
    ones = np.ones((block, block), bool)
    for dy in range(-2 * R, 2 * R + 1):
        for dx in range(-2 * R, 2 * R + 1):
            sh = u[2 * pad + dy:2 * pad + dy + 2 * H:2, 2 * pad + dx:2 * pad + dx + 2 * W:2]
            sad = np.abs(2 * cur - sh).reshape(H // block, block, W // block, block).sum(axis=(1, 3))
            m = sad < best
            best[m], vy[m], vx[m] = sad[m], dy, dx
            mm = np.kron(m, ones)
            out[mm] = sh[mm]
    return (out + 1) // 2, vy, vx


def displaced(ref, vy, vx, scale):
    """The reference displaced block by block by scale x the vectors (half pixels)."""
    pad = 4 * R + 8
    u = upsample2(ref, pad)
    out = np.zeros((vy.shape[0] * B, vy.shape[1] * B), np.int64)
    for by in range(vy.shape[0]):
        for bx in range(vy.shape[1]):
            oy, ox = 2 * pad + 2 * by * B + vy[by, bx] * scale, 2 * pad + 2 * bx * B + vx[by, bx] * scale
            out[by * B:(by + 1) * B, bx * B:(bx + 1) * B] = u[oy:oy + 2 * B:2, ox:ox + 2 * B:2]
    return (out + 1) // 2


def med(a, b, c):
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    return np.where(c >= hi, lo, np.where(c <= lo, hi, a + b - c))


def median_residual(x):
    """x minus the median predictor of its left, upper and upper-left neighbours (0 outside)."""
    a = np.zeros_like(x); a[:, 1:] = x[:, :-1]
    b = np.zeros_like(x); b[1:, :] = x[:-1, :]
    c = np.zeros_like(x); c[1:, 1:] = x[:-1, :-1]
    return x - med(a, b, c)


def entropy(sym, ctx=None):
    """Bytes of the conditional entropy of sym given ctx (order 0 without)."""
    ctx = np.zeros_like(sym) if ctx is None else ctx
    _, n = np.unique(ctx.astype(np.int64) * (1 << 20) + sym + (1 << 19), return_counts=True)
    _, m = np.unique(ctx, return_counts=True)
    return float(-(n * np.log2(n)).sum() + (m * np.log2(m)).sum()) / 8


def block_sums(r, block=B):
    H, W = r.shape
    return np.abs(r).reshape(H // block, block, W // block, block).sum(axis=(1, 3))


def activity_class(r):
    """tezip's context (docs/format.md): half-octave classes of 2 left + 2 up + up-left + up-right + left-left."""
    p = np.pad(np.abs(r), ((2, 0), (2, 2)))
    act = 2 * p[2:, 1:-3] + 2 * p[1:-1, 2:-2] + p[1:-1, 1:-3] + p[1:-1, 3:-1] + p[2:, :-4]
    return np.minimum(15, np.floor(2 * np.log2(act + 1)).astype(np.int64))


def run(mode, F):
    tot = {}

    def add(k, v):
        tot[k] = tot.get(k, 0.0) + v

    H, W = (F[0].shape[0] // B) * B, (F[0].shape[1] // B) * B
    F = [f[:H, :W] for f in F]
    ones = np.ones((B, B), np.int64)
    prev_inter = None
    for t in range(2 if mode in ("refs", "side") else 1, len(F)):
        cur = F[t]
        if mode == "interp":
            for name, six in (("bilinear", False), ("6tap", True)):
                r = cur - motion(cur, F[t - 1], 8, six)[0]
                add(name, min(entropy(r), entropy(median_residual(r))))
            continue
        p1, vy, vx = motion(cur, F[t - 1])
        if mode == "refs":
            p2 = motion(cur, F[t - 2])[0]
            p2s = displaced(F[t - 2], vy, vx, 2)
            add("previous", entropy(median_residual(cur - p1)))
            for name, second in (("two refs searched", p2), ("two refs, doubled vectors", p2s)):
                cands = [p1, second, (p1 + second + 1) // 2]
                choice = np.argmin(np.stack([block_sums(cur - c) for c in cands]), axis=0)
                add(name, entropy(median_residual(cur - np.choose(np.kron(choice, ones), cands))))
        elif mode == "intra":
            inter, intra = median_residual(cur - p1), median_residual(cur)
            take = np.kron(block_sums(intra) < block_sums(inter), ones).astype(bool)
            add("inter", entropy(inter))
            add("intra", entropy(intra))
            add("per-block choice", entropy(np.where(take, intra, inter)))
            add("blocks intra (%)", 100 * take.mean() / (len(F) - 1))
        elif mode == "contexts":
            x = cur
            p = np.pad(x, ((2, 0), (2, 2)), mode="edge")
            L, T, TL, TR = p[2:, 1:-3], p[1:-1, 2:-2], p[1:-1, 1:-3], p[1:-1, 3:-1]
            r = x - med(L, T, TL)

            def q(d):  # FFV1-like gradient quantization, 9 levels with sign
                a = np.abs(d)
                return np.sign(d) * np.select([a == 0, a <= 2, a <= 6, a <= 14], [0, 1, 2, 3], 4)

            g = q(T - TL) * 81 + q(TL - L) * 9 + q(T - TR)
            sign = np.where(g < 0, -1, 1)
            add("intra: activity classes (16)", entropy(r, activity_class(r)))
            add("intra: pixel gradients (365, sign folded)", entropy(r * sign, np.abs(g)))
            add("intra: both", entropy(r * sign, np.abs(g) * 16 + activity_class(r)))
            inter = median_residual(cur - p1)
            fp = np.pad(p1, 1, mode="edge")
            grad = np.abs(fp[1:-1, 2:] - fp[1:-1, :-2]) + np.abs(fp[2:, 1:-1] - fp[:-2, 1:-1])
            g8 = np.minimum(7, np.floor(np.log2(grad + 1)).astype(np.int64))
            add("inter: activity classes (16)", entropy(inter, activity_class(inter)))
            add("inter: x forecast gradient (4)", entropy(inter, activity_class(inter) * 4 + g8 // 2))
            add("inter: x forecast gradient (8)", entropy(inter, activity_class(inter) * 8 + g8))
        elif mode == "above":
            p = np.pad(cur, ((2, 0), (2, 2)), mode="edge")
            L, T, TL, TR = p[2:, 1:-3], p[1:-1, 2:-2], p[1:-1, 1:-3], p[1:-1, 3:-1]
            r = cur - med(L, T, TL)
            act = activity_class(r)

            def q9(d):  # FFV1-like gradient quantization, 9 levels with sign
                a = np.abs(d)
                return np.sign(d) * np.select([a == 0, a <= 2, a <= 6, a <= 14], [0, 1, 2, 3], 4)

            add("intra: activity classes (16)", entropy(r, act))
            add("intra: x row-above gradients (81)", entropy(r, act * 81 + q9(T - TL) * 9 + q9(T - TR) + 40))
            add("intra: x FFV1's three gradients (729)",
                entropy(r, act * 729 + q9(T - TL) * 81 + q9(TL - L) * 9 + q9(T - TR) + 364))
        elif mode == "side":
            inter = median_residual(cur - p1)
            act = activity_class(inter)

            def cls(v, n):  # octave classes of a magnitude, n of them
                return np.minimum(n - 1, np.floor(np.log2(np.abs(v) + 1)).astype(np.int64))

            fp = np.pad(p1, 1, mode="edge")
            grad = np.abs(fp[1:-1, 2:] - fp[1:-1, :-2]) + np.abs(fp[2:, 1:-1] - fp[:-2, 1:-1])
            pres = F[t - 1] - motion(F[t - 1], F[t - 2])[0]
            sides = {
                "forecast gradient": cls(grad, 8),
                "previous residual": cls(pres, 8),
                "previous change": cls(F[t - 1] - F[t - 2], 8),
                "forecast move": cls(p1 - F[t - 1], 8),
            }
            add("activity classes (16)", entropy(inter, act))
            for name, side in sides.items():
                add(name + " (4)", entropy(inter, act * 4 + side // 2))
                add(name + " (8)", entropy(inter, act * 8 + side))
            add("gradient x previous residual (4x4)",
                entropy(inter, act * 16 + sides["forecast gradient"] // 2 * 4 + sides["previous residual"] // 2))
            add("contexts used", 0)
    return tot


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    mode, folder = sys.argv[1], sys.argv[2]
    first = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    count = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    if mode not in ("refs", "intra", "contexts", "interp", "side", "above"):
        sys.exit(__doc__)
    tot = run(mode, frames(folder, first, count))
    print(folder.rstrip("/").split("/")[-1], mode, {k: round(v / 1e3, 1) if "%" not in k else round(v, 1) for k, v in tot.items()})


if __name__ == "__main__":
    main()
