#!/usr/bin/env python3
"""What the forecast's detail could save as a context of the residual's symbols, estimated before
building (docs/defaults.md, "Side classes").

    /usr/bin/python3 bench/side_context_estimates.py "FRAMES_GLOB" FIRST COUNT [E]

Frames FIRST .. FIRST + COUNT - 1 of the glob (luma) in the closed loop of
second_reference_estimates.py at abs E (0: lossless): each frame forecast by the mean of frames
t - 1 and t - 2, each displaced by its own searched 16x16 field (frame 1 by frame 0 alone). Prints
kilobytes of the symbols' entropy (median transform of the quantized residual) under 16 activity
classes of five causal neighbours' magnitudes (a stand-in for tezip's striped coder), and with a
second context: the forecast's gradient |f(x+1) - f(x-1)| + |f(y+1) - f(y-1)| in octave classes
(the two references' difference |f1 - f2| too) as a context dimension of its own (tables
multiplied), or added to the activity sum before its 16 classes (no more tables), shifted by s.
Tables are not counted.
"""
import sys
import numpy as np
import second_reference_estimates as sre


def octaves(v, n):
    return np.minimum(n - 1, np.floor(np.log2(1 + v)).astype(int))


def activity(s):
    a = np.zeros_like(s)
    a[:, 1:] += np.abs(s[:, :-1]); a[1:, :] += np.abs(s[:-1, :]); a[:, 2:] += np.abs(s[:, :-2])
    a[1:, 1:] += np.abs(s[:-1, :-1]); a[1:, :-1] += np.abs(s[:-1, 1:])
    return a


def classes16(a):
    return np.minimum(15, np.floor(np.log2(1 + a) * 2).astype(int))


def context_entropy(s, ctx):
    return sum(sre.ent(s[ctx == k]) for k in np.unique(ctx))


def main():
    frames = sre.load(sys.argv)
    totals = {}
    recs = [frames[0].copy()]
    for t in range(1, len(frames)):
        x = frames[t]
        v1, p1, R = sre.search(x, recs[-1]); f1 = sre.comp(v1, p1, R, x.shape)
        f, d = f1, np.zeros_like(x)
        if len(recs) > 1:
            v2, p2, _ = sre.search(x, recs[-2]); f2 = sre.comp(v2, p2, R, x.shape)
            f, d = (f1 + f2 + 1) // 2, np.abs(f1 - f2)
        q = sre.q_of(x - f)
        recs.append(np.clip(f + q * sre.STEP, 0, 255)); del recs[:-2]
        s = sre.medt(q); a = activity(s); c = classes16(a)
        fp = np.pad(f, 1, mode='edge')
        g = np.abs(fp[1:-1, 2:] - fp[1:-1, :-2]) + np.abs(fp[2:, 1:-1] - fp[:-2, 1:-1])
        candidates = {"activity classes (16)": c,
                      "x gradient octaves (4)": c * 4 + octaves(g, 4), "x gradient octaves (8)": c * 8 + octaves(g, 8),
                      "x references differ (4)": c * 4 + octaves(d, 4),
                      "x gradient (4) x differ (4)": (c * 4 + octaves(d, 4)) * 4 + octaves(g, 4)}
        for shift in range(3):
            candidates[f"activity + gradient octave, s = {shift}"] = classes16(a + octaves(g >> shift, 8))
        for name, ctx in candidates.items():
            totals[name] = totals.get(name, 0.0) + context_entropy(s, ctx)
    base = totals["activity classes (16)"]
    for name, bits in totals.items():
        print(f"{name:40s} {bits / 1e3:8.1f} KB {100 * (bits / base - 1):+6.2f}%")


if __name__ == "__main__":
    main()
