#!/usr/bin/env python3
"""Does a better next-frame forecast than the previous frame exist among linear filters of it?

For each frame t of each folder, the residual's cost (order-0 entropy in bits of the residual, or of
its median-predicted form, the smaller: a stand-in for tezip's coder) with the forecast
  previous   the previous frame
  ls3x3      a 3x3 filter of the previous frame plus a bias, fitted to frame t by least squares
             (the MSE-optimal linear forecast: what an MSE- or L1-trained network aims at)
  log3x3     the same filter fitted to minimise sum log(1 + |e|) (reweighted least squares from
             the previous frame): a loss that counts bits, not squared error
  ls3d       least squares over the 3x3 previous-frame taps and the current frame's causal
             neighbours W, N, NW, NE (a 3-D LS predictor; entropy of its error as it is)
Coefficients are rounded to 1/256, as a coded filter would be. The fit is on frame t itself, an
upper bound on what any such filter, learned or coded, could reach.

usage: /usr/bin/python3 bench/forecast_filter_estimates.py [--frames N] NAME=GLOB ...
(docs/training.md, "Why a lower MSE does not shrink the archive")
"""
import argparse
import glob

import numpy as np
from PIL import Image

OFFSETS = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
CAUSAL = [(0, -1), (-1, 0), (-1, -1), (-1, 1)]


def load(pattern, n):
    frames = []
    for f in sorted(glob.glob(pattern))[:n]:
        a = np.asarray(Image.open(f))
        frames.append((a[..., 1] if a.ndim == 3 else a).astype(np.int64))  # colour: green
    return frames


def entropy_bits(e):
    _, counts = np.unique(e, return_counts=True)
    return float(-(counts * np.log2(counts / counts.sum())).sum())


def median_residual(r):
    w, n, nw = np.zeros_like(r), np.zeros_like(r), np.zeros_like(r)
    w[:, 1:], n[1:, :], nw[1:, 1:] = r[:, :-1], r[:-1, :], r[:-1, :-1]
    hi, lo = np.maximum(w, n), np.minimum(w, n)
    return r - np.where(nw >= hi, lo, np.where(nw <= lo, hi, w + n - nw))


def cost(r):
    return min(entropy_bits(r), entropy_bits(median_residual(r)))


def taps(a, offsets):
    h, w = a.shape
    p = np.pad(a, 1, mode="edge")
    return [p[1 + dy:1 + dy + h, 1 + dx:1 + dx + w] for dy, dx in offsets]


def design(features, shape):
    return np.stack([f.ravel() for f in features] + [np.ones(int(np.prod(shape)))], 1).astype(np.float64)


def apply(A, w, shape):
    return np.round(A[:, :-1] @ (np.round(w[:-1] * 256) / 256) + np.round(w[-1])).reshape(shape).astype(np.int64)


def fit_ls(A, y):
    return np.linalg.lstsq(A, y, rcond=None)[0]


def fit_log(A, y, iterations=8):
    w = np.zeros(A.shape[1])
    w[4] = 1.0  # the previous frame
    for _ in range(iterations):
        e = np.abs(y - A @ w)
        weight = 1.0 / ((e + 0.5) * (1.0 + e))
        Aw = A * weight[:, None]
        w = np.linalg.solve(A.T @ Aw + 1e-6 * np.eye(A.shape[1]), Aw.T @ y)
    return w


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=12)
    ap.add_argument("sets", nargs="+", help="NAME=GLOB")
    args = ap.parse_args()
    print("| data | previous bits/px | ls3x3 / previous | log3x3 / previous | ls3d / previous |")
    print("|---|--:|--:|--:|--:|")
    for item in args.sets:
        name, pattern = item.split("=", 1)
        frames = load(pattern, args.frames)
        top = int(max(f.max() for f in frames))
        top = 255 if top < 256 else 65535
        total = dict(previous=0.0, ls3x3=0.0, log3x3=0.0, ls3d=0.0)
        for t in range(1, len(frames)):
            x, prev = frames[t], frames[t - 1]
            y = x.ravel().astype(np.float64)
            A = design(taps(prev, OFFSETS), x.shape)
            total["previous"] += cost(x - prev)
            total["ls3x3"] += cost(x - np.clip(apply(A, fit_ls(A, y), x.shape), 0, top))
            total["log3x3"] += cost(x - np.clip(apply(A, fit_log(A, y), x.shape), 0, top))
            A3 = design(taps(prev, OFFSETS) + taps(x, CAUSAL), x.shape)
            total["ls3d"] += cost(x - np.clip(apply(A3, fit_ls(A3, y), x.shape), 0, top))
        pixels = frames[0].size * (len(frames) - 1)
        p = total["previous"]
        print(f"| {name} | {p / pixels:.3f} | {total['ls3x3'] / p:.3f} | {total['log3x3'] / p:.3f} | {total['ls3d'] / p:.3f} |")


if __name__ == "__main__":
    main()
