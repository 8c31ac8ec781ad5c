#!/usr/bin/env python3
"""What a second reference could save, estimated before building (docs/defaults.md, "A second
reference for P-frames in bounded modes").

    /usr/bin/python3 bench/second_reference_estimates.py "FRAMES_GLOB" FIRST COUNT [E]

Frames FIRST .. FIRST + COUNT - 1 of the glob (PNG/PGM; colour as luma), coded in a closed loop at
abs E (0: lossless) as tezip's linear quantizer does (bins of 2E + 1, the reconstruction fed back),
with five forecasts: frame t - 1 displaced by whole-pixel 16x16 motion searched on the
reconstruction ("one ref"); the rounded-up mean of that and frame t - 2 displaced by its own
searched field ("mean of two"), or by the first field doubled ("mean doubled"); and per 16x16 block
the better (by absolute error) of the mean and the one-reference forecast ("per-block ...").
Prints, cumulatively per frame, kilobytes of the symbols' order-0 entropy and of their entropy
under 16 activity classes after the median transform (a stand-in for tezip's coder); motion
vectors and block maps are not counted.
"""
import sys, glob
import numpy as np
from PIL import Image
E = 2; STEP = 2 * E + 1
B = 16


def load(argv):
    """Frames FIRST .. FIRST + COUNT - 1 of the glob as luma, and sets the bound E (argv[4], default 2)."""
    global E, STEP
    E = int(argv[4]) if len(argv) > 4 else 2; STEP = 2 * E + 1
    files = sorted(glob.glob(argv[1]))[int(argv[2]):int(argv[2]) + int(argv[3])]
    return [np.asarray(Image.open(f).convert('L')).astype(np.int64) for f in files]

def search(cur, ref, R=6):
    h, w = cur.shape
    pad = np.pad(ref, R, mode='edge')
    best = np.full((h // B, w // B), 1 << 60); vec = np.zeros((h // B, w // B, 2), int)
    hb, wb = h // B * B, w // B * B
    for dy in range(-R, R + 1):
        for dx in range(-R, R + 1):
            cand = pad[R + dy:R + dy + h, R + dx:R + dx + w]
            sad = np.abs(cur - cand)[:hb, :wb].reshape(h // B, B, w // B, B).sum(axis=(1, 3)) + 4 * (abs(dx) + abs(dy))
            m = sad < best; best[m] = sad[m]; vec[m] = (dy, dx)
    return vec, pad, R

def comp(vec, pad, R, shape):
    h, w = shape; out = pad[R:R + h, R:R + w].copy()
    for by in range(h // B):
        for bx in range(w // B):
            dy, dx = vec[by, bx]
            out[by*B:(by+1)*B, bx*B:(bx+1)*B] = pad[R+dy+by*B:R+dy+(by+1)*B, R+dx+bx*B:R+dx+(bx+1)*B]
    return out

def q_of(r): return np.where(r >= 0, (r + E) // STEP, -((-r + E) // STEP))
def ent(s):
    _, c = np.unique(s, return_counts=True); return float(-(c * np.log2(c / c.sum())).sum()) / 8
def ctx_ent(s):
    a = np.zeros_like(s); a[:, 1:] += np.abs(s[:, :-1]); a[1:, :] += np.abs(s[:-1, :])
    cls = np.minimum(15, np.floor(np.log2(1 + a) * 2).astype(int))
    return sum(ent(s[cls == k]) for k in range(16) if (cls == k).any())
def medt(q):
    qp = np.pad(q, ((1, 0), (1, 0))); a, b, c = qp[1:, :-1], qp[:-1, 1:], qp[:-1, :-1]
    p = np.where(c >= np.maximum(a, b), np.minimum(a, b), np.where(c <= np.minimum(a, b), np.maximum(a, b), a + b - c))
    return q - p
def blockwise(cost_a, cost_b):
    h, w = cost_a.shape; hb, wb = h // B * B, w // B * B
    ca = cost_a[:hb, :wb].reshape(h // B, B, w // B, B).sum(axis=(1, 3)); cb = cost_b[:hb, :wb].reshape(h // B, B, w // B, B).sum(axis=(1, 3))
    return cb < ca

def main():
    frames = load(sys.argv)
    names = ["one ref", "mean of two", "per-block best", "mean doubled", "per-block doubled"]
    tot = {n: [0.0, 0.0] for n in names}
    recs = {n: [frames[0].copy()] for n in names}
    for t in range(1, len(frames)):
        x = frames[t]
        for n in names:
            r = recs[n]
            v1, p1, R = search(x, r[-1]); f1 = comp(v1, p1, R, x.shape)
            f = f1
            if n != "one ref" and len(r) > 1:
                if "doubled" in n:
                    v2 = np.clip(2 * v1, -12, 12); p2 = np.pad(r[-2], 12, mode='edge'); f2 = comp(v2, p2, 12, x.shape)
                else:
                    v2, p2, _ = search(x, r[-2]); f2 = comp(v2, p2, R, x.shape)
                fm = (f1 + f2 + 1) // 2
                if n.startswith("mean"): f = fm
                else:
                    use = blockwise(np.abs(x - f1), np.abs(x - fm))
                    f = f1.copy()
                    for by, bx in zip(*np.nonzero(use)):
                        f[by*B:(by+1)*B, bx*B:(bx+1)*B] = fm[by*B:(by+1)*B, bx*B:(bx+1)*B]
            q = q_of(x - f)
            rec = np.clip(f + q * STEP, 0, 255)
            assert np.abs(rec - x).max() <= E
            r.append(rec); del r[:-2]
            s = medt(q); tot[n][0] += ent(s); tot[n][1] += ctx_ent(s)
        print(t, "  ".join(f"{n}: {tot[n][0]/1e3:.1f} {tot[n][1]/1e3:.1f} KB" for n in names), flush=True)


if __name__ == "__main__":
    main()
