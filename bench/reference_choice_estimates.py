#!/usr/bin/env python3
"""Lossless estimates of reference choices and brightness compensation, before building any of them
(docs/ratio_gaps.md, "A camera sequence nobody tuned on").

    /usr/bin/python3 bench/reference_choice_estimates.py MODE "FRAMES_GLOB" FIRST COUNT

Frames FIRST .. FIRST + COUNT - 1 of the glob (PNG/PGM; colour as luma), lossless. Forecasts are
frames displaced by whole-pixel 16x16 motion searched by SAD (second_reference_estimates.py); the
cost is kilobytes of the median transform's symbols under 16 activity classes (a stand-in for
tezip's coder). Vectors are not counted; per-block choices count log2 of their options a block.

MODE:
  refs        P-frames: frame t - 1 alone; the mean of t - 1 and t - 2 (each its own field); per
              16x16 block t - 1 or the mean; per block t - 1, t - 2 or the mean (the block's
              smallest sum of log2(1 + |symbol|) wins)
  bframes     pairs of frames: sequential P-frames against an anchor every 2 frames (a P-frame from
              2 back) with the frame between as a B-frame, forecast by the mean of both sides or
              per block by the previous, the next or the mean
  brightness  each frame from t - 1 displaced, against that forecast plus the frame's mean offset,
              through a least-squares gain and offset, or through a 256-entry tone curve (each value
              of the forecast mapped to the median of the pixels it forecasts)
"""
import math
import sys

import numpy as np

import second_reference_estimates as sre

B = 16


def cost(x, f):
    return sre.ctx_ent(sre.medt(x - f)) / 1e3


def displaced(x, ref):
    v, p, r = sre.search(x, ref)
    return sre.comp(v, p, r, x.shape)


def per_block(x, candidates):
    """Per 16x16 block the candidate with the smallest sum of log2(1 + |median-transform symbol|)."""
    h, w = x.shape
    hb, wb = h // B * B, w // B * B
    costs = [np.log2(1 + np.abs(sre.medt(x - f)).astype(float))[:hb, :wb].reshape(h // B, B, w // B, B).sum(axis=(1, 3))
             for f in candidates]
    pick = np.argmin(np.stack(costs), 0)
    out = candidates[0].copy()
    for by in range(h // B):
        for bx in range(w // B):
            out[by * B:(by + 1) * B, bx * B:(bx + 1) * B] = candidates[pick[by, bx]][by * B:(by + 1) * B, bx * B:(bx + 1) * B]
    return out


def main():
    if len(sys.argv) < 5 or sys.argv[1] not in ("refs", "bframes", "brightness"):
        sys.exit(__doc__)
    mode = sys.argv[1]
    frames = sre.load([sys.argv[0]] + sys.argv[2:5] + ["0"])  # lossless: E = 0
    blocks = (frames[0].shape[0] // B) * (frames[0].shape[1] // B)
    total = {}

    def add(costs):
        for k, v in costs.items():
            total[k] = total.get(k, 0.0) + v

    if mode == "refs":
        for t in range(2, len(frames)):
            x = frames[t]
            f1, f2 = displaced(x, frames[t - 1]), displaced(x, frames[t - 2])
            m = (f1 + f2 + 1) // 2
            add({"t-1": cost(x, f1), "mean": cost(x, m),
                 "block: t-1 or mean": cost(x, per_block(x, [f1, m])) + blocks / 8e3,
                 "block: t-1, t-2 or mean": cost(x, per_block(x, [f1, f2, m])) + blocks * math.log2(3) / 8e3})
        base = total["t-1"]
    elif mode == "bframes":
        for t in range(2, len(frames) - 1, 2):  # frame t - 1 as a B-frame, frame t as an anchor
            b, anchor = t - 1, t
            f0, f1 = displaced(frames[b], frames[b - 1]), displaced(frames[b], frames[b + 1])
            m = (f0 + f1 + 1) // 2
            add({"sequential": cost(frames[b], f0) + cost(frames[anchor], displaced(frames[anchor], frames[anchor - 1])),
                 "anchors (P from 2 back)": cost(frames[anchor], displaced(frames[anchor], frames[anchor - 2])),
                 "B: mean": cost(frames[b], m),
                 "B: block of previous, next, mean": cost(frames[b], per_block(frames[b], [f0, f1, m])) +
                 blocks * math.log2(3) / 8e3})
        total["bidirectional, mean"] = total["anchors (P from 2 back)"] + total["B: mean"]
        total["bidirectional, per block"] = total["anchors (P from 2 back)"] + total["B: block of previous, next, mean"]
        base = total["sequential"]
    else:
        for t in range(1, len(frames)):
            x = frames[t]
            f = displaced(x, frames[t - 1])
            gain, offset = np.linalg.lstsq(np.stack([f.ravel(), np.ones(f.size)], 1), x.ravel().astype(float), rcond=None)[0]
            g64 = int(round(gain * 64))
            curve = np.arange(256)
            for v in np.unique(f):
                curve[v] = int(np.median(x[f == v]))
            add({"motion": cost(x, f), "offset": cost(x, np.clip(f + int(round((x - f).mean())), 0, 255)),
                 "gain and offset": cost(x, np.clip((f * g64 + 32) // 64 + int(round(offset)), 0, 255)),
                 "tone curve": cost(x, curve[np.clip(f, 0, 255)])})
        base = total["motion"]
    for k, v in total.items():
        print(f"{k:36s} {v:9.1f} KB  {v / base:.3f}")


if __name__ == "__main__":
    main()
