#!/usr/bin/python3
"""Exact copies in decoded video, and what references after a frame could take of them: measured on
a (T,H,W) uint8 `.npy` (gray frames; a 4-D array's channel 1), before building anything
(docs/ratio_gaps.md, "Decoded video copies the next frame").

  next_frame_estimates.py copies FRAMES.npy [LAST=120]
      per frame, the share of pixels equal to frame t - 1; to t - 2 only; to t - 3 only; to t + 1
      but not t - 1; to t + 1 and none of the three before (frames 3 .. LAST)
  next_frame_estimates.py structures FRAMES.npy FIRST LAST
      order-0 entropy (KB) of zero-motion residuals over frames FIRST .. LAST - 1, per 16x16 block
      the candidate with the smallest sum of log2(1 + |r|) (maps not counted): P-frames from
      t - 1; per block t - 1 or t - 2; t - 1, t - 2 or t - 3; anchors every 2 frames with B-frames
      per block t - 1, t + 1 or their mean; the same with more references on both
"""
import sys

import numpy as np

B = 16


def load(path):
    a = np.load(path, mmap_mode="r")
    return a[..., 1] if a.ndim == 4 else a


def copies(a, last):
    total, n = np.zeros(5), 0
    for t in range(3, min(len(a) - 3, last)):
        f, p1, p2, p3, n1 = (np.asarray(a[k]) for k in (t, t - 1, t - 2, t - 3, t + 1))
        e1, e2, e3, x1 = f == p1, f == p2, f == p3, f == n1
        total += [e1.mean(), (e2 & ~e1).mean(), (e3 & ~e1 & ~e2).mean(), (x1 & ~e1).mean(), (x1 & ~e1 & ~e2 & ~e3).mean()]
        n += 1
    print("= t-1 %.3f | = t-2 only %.3f | = t-3 only %.3f | = t+1, not t-1 %.3f | = t+1, none before %.3f" % tuple(total / n))


def structures(a, first, last):
    a = np.asarray(a[:, : a.shape[1] // B * B, : a.shape[2] // B * B]).astype(np.int32)
    h, w = a.shape[1:]

    def blocks(x):
        return x.reshape(h // B, B, w // B, B).swapaxes(1, 2)

    def choose(candidates):
        costs = np.stack([np.log2(1 + np.abs(blocks(r))).sum(axis=(2, 3)) for r in candidates])
        best, out = costs.argmin(0), np.zeros_like(candidates[0])
        for i, r in enumerate(candidates):
            blocks(out)[best == i] = blocks(r)[best == i]
        return out

    def kb(residuals):
        _, counts = np.unique(np.concatenate([r.ravel() for r in residuals]), return_counts=True)
        return -(counts * np.log2(counts / counts.sum())).sum() / 8 / 1024

    frames = range(first, last)
    mean = lambda t: (a[t - 1] + a[t + 1] + 1) >> 1
    rows = {
        "P-frames from t - 1": [a[t] - a[t - 1] for t in frames],
        "P-frames, per block t - 1 or t - 2": [choose([a[t] - a[t - 1], a[t] - a[t - 2]]) for t in frames],
        "P-frames, per block t - 1, t - 2 or t - 3": [choose([a[t] - a[t - k] for k in (1, 2, 3)]) for t in frames],
        "anchors every 2 (from t - 2), B per block t - 1, t + 1, mean": [
            a[t] - a[t - 2] if t % 2 == 0 else choose([a[t] - a[t - 1], a[t] - a[t + 1], a[t] - mean(t)]) for t in frames],
        "anchors per block t - 2 or t - 4, B also t - 2 or t + 3": [
            choose([a[t] - a[t - 2], a[t] - a[t - 4]]) if t % 2 == 0
            else choose([a[t] - a[t - 1], a[t] - a[t + 1], a[t] - mean(t), a[t] - a[t - 2], a[t] - a[min(t + 3, len(a) - 1)]])
            for t in frames],
    }
    for name, residuals in rows.items():
        print("%-64s %9.1f KB" % (name, kb(residuals)))


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("copies", "structures"):
        sys.exit(__doc__)
    a = load(sys.argv[2])
    if sys.argv[1] == "copies":
        copies(a, int(sys.argv[3]) if len(sys.argv) > 3 else 120)
    else:
        structures(a, max(4, int(sys.argv[3])), min(int(sys.argv[4]), len(a) - 3))


if __name__ == "__main__":
    main()
