#!/usr/bin/env python3
"""Issue 16's question on a GPU: does a larger network, trained far longer than a CPU allows and on a
loss that counts bits, forecast frames it never saw better than the classical predictors at abs 2?

    bench/prednet_gpu_probe.py FRAMES.npz [--seconds S] [--adapt-seconds S] [--out DIR]

FRAMES.npz holds gray uint8 clips (T, H, W): arrays named train_* (the training set: mire2 and vtest,
which the shipped model was trained on) and test_* (clips no model here saw: the colour clips' luma).
Made by bench/prednet_gpu_probe_data.py. Runs on CUDA where there is one, else on the CPU (slowly:
give it small budgets there, for a check that it runs).

Every forecast is run in a closed loop at abs 2, as tezip's encoder codes a P-frame chain: frame 0
exact, then for t >= 1 the forecast f_t from the *reconstructed* frames before t, the symbol
q = round((x - f) / 5) (tezip's bins: width 2E + 1 centred on the forecast, E = 2), the
reconstruction clamp(f + 5 q, 0, 255). Cost of a clip: the symbols' order-0 entropy and their
entropy under 8 activity contexts of the causal neighbours' symbols (a stand-in for tezip's striped
rANS coder, whose contexts are of that kind), in bits a pixel; side information (motion vectors,
the model) is not counted, so every figure favours the candidate that needs it.

Forecasts (--classical, --nets, --adapt):
- previous: the reconstructed previous frame (tezip's `previous` without motion).
- motion: per 16x16 block the whole-pixel displacement within +-7 of the reconstructed previous
  frame with the least SAD against the frame itself (the encoder's search).
- motion8h: the same on 8x8 blocks, then the best of that and its 8 half-pixel neighbours (bilinear,
  rounded): nearer tezip's coded motion (16x16 blocks split into 8x8 where that pays, quarter
  pixels, spatial blocks; bidirectional GOPs add a second reference).
- networks NAME:BASE:SIZE:LOSS: a residual network that outputs a correction to the classical
  forecast BASE from the reconstructed frames t-1, t-2 and (unless BASE is previous) BASE itself;
  SIZE large (10 layers of 64 channels, dilations up to 8: a receptive field of 67 pixels, 0.33 M
  parameters, 7x the shipped PredNet's 48 k) or small (5 layers of 16: 19 pixels, 10 k); trained
  on random 128x128 crops of the training clips' closed-loop reconstructions with Adam for
  --seconds each; LOSS bits = mean log2(1 + |x - f| / 5), which grows as a symbol's code length
  does, or mse.
- NAME adapted (--adapt): that network fine-tuned for --adapt-seconds on the test clip's own first
  half (TEZIP's training on the data it compresses), evaluated on the whole clip.

The runs of 2026-12-04 (docs/training.md, "A larger network on a GPU"), on one H200:
    bench/prednet_gpu_probe.py gpu_probe_data/frames.npz --seconds 85 --adapt-seconds 25
    bench/prednet_gpu_probe.py gpu_probe_data/frames.npz --seconds 45 --adapt-seconds 10 \
        --classical previous,motion,motion8h --nets large:motion8h:large:bits,small:motion8h:small:bits \
        --adapt large,small

Prints a table and writes probe.json (to --out, else the current folder)."""
import argparse
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

E = 2
BIN = 2 * E + 1
SEARCH = 7
BLOCK = 16
CONTEXTS = 8
SPAN = 64  # symbols clamped to +-SPAN for the histograms (beyond it: a handful at abs 2)


def log(*args):
    print(*args, flush=True)


def quantize(x, f):
    """tezip's bins: q = sign(r) floor((|r| + E) / BIN), reconstruction clamp(f + BIN q)."""
    r = x - f
    q = torch.sign(r) * torch.div(r.abs() + E, BIN, rounding_mode="floor")
    return q, (f + BIN * q).clamp(0, 255)


def motion_forecast(ref, x, block=16, half=False):
    """Per block x block block of x, the whole-pixel shift of ref within +-SEARCH with the least SAD;
    with `half`, then the best of it and its 8 half-pixel neighbours (bilinear, rounded), as a
    codec's refinement."""
    H, W = x.shape
    hb, wb = H // block * block, W // block * block
    pad = SEARCH + 1
    padded = F.pad(ref[None, None], (pad, pad, pad, pad), mode="replicate")[0, 0]
    sad_of = lambda cand: F.avg_pool2d((cand[:hb, :wb] - x[:hb, :wb]).abs()[None, None], block)[0, 0]
    best = None
    best_sad = None
    for dy in range(-SEARCH, SEARCH + 1):
        for dx in range(-SEARCH, SEARCH + 1):
            sad = sad_of(padded[pad + dy:pad + dy + H, pad + dx:pad + dx + W])
            # Ties go to the smaller shift: the zero shift is tried with a small bonus.
            if dy == 0 and dx == 0:
                sad = sad - 1e-3
            if best is None:  # the first shift tried: index 0
                best_sad, best = sad, torch.zeros_like(sad, dtype=torch.long)
            else:
                better = sad < best_sad
                best_sad = torch.where(better, sad, best_sad)
                best = torch.where(better, torch.full_like(best, (dy + SEARCH) * (2 * SEARCH + 1) + dx + SEARCH), best)
    index = best.repeat_interleave(block, 0).repeat_interleave(block, 1)
    dys = torch.div(index, 2 * SEARCH + 1, rounding_mode="floor") - SEARCH
    dxs = index % (2 * SEARCH + 1) - SEARCH
    yy = torch.arange(hb, device=x.device)[:, None] + dys + pad
    xx = torch.arange(wb, device=x.device)[None, :] + dxs + pad
    pred = padded[yy, xx]
    if half:
        best_sad = sad_of(pred)
        for hy in (-1, 0, 1):
            for hx in (-1, 0, 1):
                if hy == 0 and hx == 0:
                    continue
                cand = torch.div(padded[yy, xx] + padded[yy + hy, xx] + padded[yy, xx + hx] + padded[yy + hy, xx + hx] + 2,
                                 4, rounding_mode="floor")
                sad = sad_of(cand)
                better = (sad < best_sad).repeat_interleave(block, 0).repeat_interleave(block, 1)
                best_sad = torch.minimum(sad, best_sad)
                pred = torch.where(better, cand, pred)
    out = ref.clone()
    out[:hb, :wb] = pred
    return out


SIZES = {
    # 0.33 M parameters, a receptive field of 67 pixels: 6x the shipped PredNet's 48 k.
    "large": (64, (1, 2, 4, 8, 1, 2, 4, 8, 1)),
    # 8 k parameters, a receptive field of 19 pixels.
    "small": (16, (1, 2, 4, 1)),
}


class Net(nn.Module):
    def __init__(self, inputs, size="large"):
        super().__init__()
        width, dilations = SIZES[size]
        self.head = nn.Conv2d(inputs, width, 3, padding=1)
        self.body = nn.ModuleList(nn.Conv2d(width, width, 3, padding=d, dilation=d) for d in dilations)
        self.tail = nn.Conv2d(width, 1, 3, padding=1)
        nn.init.zeros_(self.tail.weight)
        nn.init.zeros_(self.tail.bias)

    def forward(self, z):
        h = F.relu(self.head(z))
        for conv in self.body:
            h = h + F.relu(conv(h))
        return self.tail(h)


def net_inputs(r1, r2, mc):
    """The network's input planes, scaled to about [-1, 1]: frames t-1, t-2 (and the motion forecast)."""
    planes = [r1, r2] if mc is None else [r1, r2, mc]
    return (torch.stack(planes, dim=-3) - 128.0) / 128.0


# The classical forecasts: the reconstructed previous frame, or its motion compensation (the
# encoder searches against frame t itself).
CLASSICAL = {
    "previous": lambda r1, x_t: r1,
    "motion": lambda r1, x_t: motion_forecast(r1, x_t),  # 16x16 blocks, whole pixels
    "motion8h": lambda r1, x_t: motion_forecast(r1, x_t, block=8, half=True),  # 8x8 blocks, half pixels
}


class Forecaster:
    """A forecast of frame t from the reconstructed frames before it: a classical one (`base`), or
    with `net`, the base corrected by the network (whose inputs hold the base unless it is `previous`)."""

    def __init__(self, base, net=None):
        self.base, self.net = base, net

    def __call__(self, recon, x_t):
        r1 = recon[-1]
        base = CLASSICAL[self.base](r1, x_t)
        if self.net is None:
            return base
        r2 = recon[-2] if len(recon) > 1 else r1
        with torch.no_grad():
            delta = self.net(net_inputs(r1, r2, None if self.base == "previous" else base)[None])[0, 0]
        return (base + delta).round().clamp(0, 255)


def closed_loop(x, forecaster):
    """Symbols, reconstructions and forecast MSE of clip x (T, H, W float) coded at abs 2."""
    recon = [x[0]]
    symbols, sq = [], []
    for t in range(1, x.shape[0]):
        f = forecaster(recon, x[t])
        q, r = quantize(x[t], f)
        symbols.append(q)
        recon.append(r)
        sq.append(((x[t] - f) ** 2).mean().item())
    return torch.stack(symbols), torch.stack(recon), float(np.mean(sq))


def entropies(q):
    """Order-0 and context entropy of symbols q (T, H, W), bits a symbol."""
    v = (q.clamp(-SPAN, SPAN) + SPAN).long()
    n = v.numel()
    h0_counts = torch.bincount(v.flatten(), minlength=2 * SPAN + 1).double()
    p = h0_counts[h0_counts > 0] / n
    h0 = float(-(p * p.log2()).sum())
    a = q.abs()
    pad = F.pad(a[:, None], (1, 1, 1, 0))[:, 0]  # zeros left, right, above
    west = pad[:, 1:, :-2]
    north = pad[:, :-1, 1:-1]
    nw = pad[:, :-1, :-2]
    ne = pad[:, :-1, 2:]
    activity = 2 * west + 2 * north + nw + ne
    ctx = torch.log2(1 + activity).floor().clamp(max=CONTEXTS - 1).long()
    joint = torch.bincount((ctx * (2 * SPAN + 1) + v).flatten(), minlength=CONTEXTS * (2 * SPAN + 1)).double()
    joint = joint.view(CONTEXTS, 2 * SPAN + 1)
    totals = joint.sum(1, keepdim=True)
    nz = joint > 0
    hc = float(-(joint[nz] * (joint / totals.clamp(min=1))[nz].log2()).sum() / n)
    return h0, hc


def training_triples(clips, base):
    """Per training clip: closed-loop `previous` reconstructions at abs 2 (what a decoder holds), the
    frames, and the base forecasts from those reconstructions."""
    out = []
    for x in clips:
        _, recon, _ = closed_loop(x, Forecaster("previous"))
        bases = [None] + [CLASSICAL[base](recon[t - 1], x[t]) for t in range(1, x.shape[0])]
        out.append((x, recon, bases))
    return out


def batch(triples, with_base, size, crop, rng):
    z, base, target = [], [], []
    for _ in range(size):
        x, recon, bases = triples[rng.integers(len(triples))]
        t = int(rng.integers(2, x.shape[0]))
        H, W = x.shape[1:]
        y0, x0 = int(rng.integers(0, H - crop + 1)), int(rng.integers(0, W - crop + 1))
        s = (slice(y0, y0 + crop), slice(x0, x0 + crop))
        r1, r2, b = recon[t - 1][s], recon[t - 2][s], bases[t][s]
        z.append(net_inputs(r1, r2, b if with_base else None))
        base.append(b)
        target.append(x[t][s])
    return torch.stack(z), torch.stack(base)[:, None], torch.stack(target)[:, None]


def loss_of(kind, f, x):
    e = x - f
    return (e ** 2).mean() if kind == "mse" else torch.log2(1 + e.abs() / BIN).mean()


def train(net, triples, with_base, loss_kind, seconds, seed, lr=1e-3, crop=128, size=32):
    rng = np.random.default_rng(seed)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    start, steps, last = time.time(), 0, None
    while time.time() - start < seconds:
        # The learning rate falls as a cosine over the time budget.
        frac = min(1.0, (time.time() - start) / seconds)
        for g in opt.param_groups:
            g["lr"] = lr * 0.5 * (1 + math.cos(math.pi * frac))
        z, base, target = batch(triples, with_base, size, crop, rng)
        loss = loss_of(loss_kind, base + net(z), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
        last = float(loss.detach())
    return steps, last


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("frames")
    ap.add_argument("--seconds", type=float, default=75, help="training time of each network")
    ap.add_argument("--adapt-seconds", type=float, default=20, help="fine-tuning time on each test clip")
    ap.add_argument("--out", default=".")
    ap.add_argument("--batch", type=int, default=32, help="crops a training step")
    ap.add_argument("--classical", default="previous,motion", help="classical forecasts to compare (previous first)")
    ap.add_argument("--nets", default="net-previous:previous:large:bits,net-motion:motion:large:bits,"
                    "net-motion-mse:motion:large:mse", help="NAME:BASE:SIZE:LOSS,... (BASE: a classical forecast; "
                    "SIZE: large or small; LOSS: bits or mse)")
    ap.add_argument("--adapt", default="net-motion", help="networks fine-tuned on each test clip (names from --nets)")
    ap.add_argument("--max-frames", type=int, default=0, help="use at most this many frames a clip (0: all)")
    ap.add_argument("--max-size", type=int, default=0, help="centre crops of at most this many rows and columns (0: whole)")
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(1)
    if device == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        log("device", torch.cuda.get_device_name(0), "torch", torch.__version__)
    data = np.load(args.frames)
    clips = {}
    for name in data.files:
        a = data[name]
        if args.max_frames:
            a = a[: args.max_frames]
        if args.max_size:
            h, w = a.shape[1:]
            y0, x0 = max(0, (h - args.max_size) // 2), max(0, (w - args.max_size) // 2)
            a = a[:, y0:y0 + args.max_size, x0:x0 + args.max_size]
        clips[name] = torch.tensor(a, dtype=torch.float32, device=device)
    train_clips = [v for k, v in clips.items() if k.startswith("train_")]
    tests = {k[len("test_"):]: v for k, v in clips.items() if k.startswith("test_")}
    results = {"device": device, "seconds": args.seconds, "adapt_seconds": args.adapt_seconds, "clips": {}}

    crop = min([128] + [min(v.shape[1:]) for v in clips.values()])
    t0 = time.time()
    # Each network: name, base forecast, size, loss.
    specs = [tuple(spec.split(":")) for spec in args.nets.split(",")]
    triples = {base: training_triples(train_clips, base) for base in {spec[1] for spec in specs}}
    log(f"training reconstructions: {time.time() - t0:.1f} s")
    nets = {}
    for name, base, size, loss_kind in specs:
        net = Net(2 if base == "previous" else 3, size).to(device)
        steps, last = train(net, triples[base], base != "previous", loss_kind, args.seconds, seed=7, crop=crop,
                            size=args.batch)
        params = sum(p.numel() for p in net.parameters())
        log(f"{name} ({base}, {size}, {loss_kind}): {steps} steps in {args.seconds:.0f} s, final loss {last:.4f}, "
            f"{params} parameters")
        results[name] = {"base": base, "size": size, "loss": loss_kind, "steps": steps, "final_loss": last,
                         "parameters": params}
        nets[name] = (base, net.eval())
    adapt = [n for n in args.adapt.split(",") if n]

    header = f"{'clip':10} {'forecast':20} {'H0 b/px':>8} {'Hctx b/px':>9} {'vs best classical':>17} {'MSE / previous':>14}"
    log(header)
    for clip, x in tests.items():
        rows = {}
        for kind in args.classical.split(","):
            q, _, mse = closed_loop(x, Forecaster(kind))
            rows[kind] = (*entropies(q), mse)
        for name, (base, net) in nets.items():
            q, _, mse = closed_loop(x, Forecaster(base, net))
            rows[name] = (*entropies(q), mse)
        # Adapted: a network fine-tuned on the clip's own first half (bits loss), evaluated on the
        # whole clip.
        half = x[: max(3, x.shape[0] // 2)]
        for name in adapt:
            base, net = nets[name]
            adapted = Net(2 if base == "previous" else 3, results[name]["size"]).to(device)
            adapted.load_state_dict(net.state_dict())
            steps, _ = train(adapted.train(), training_triples([half], base), base != "previous", "bits",
                             args.adapt_seconds, seed=11, lr=3e-4, crop=crop, size=args.batch)
            q, _, mse = closed_loop(x, Forecaster(base, adapted.eval()))
            rows[name + " adapted"] = (*entropies(q), mse)
            results["clips"].setdefault(clip, {})[name + " adapt_steps"] = steps
        best = min(v[1] for k, v in rows.items() if k in CLASSICAL)
        for name, (h0, hc, mse) in rows.items():
            log(f"{clip:10} {name:20} {h0:8.4f} {hc:9.4f} {hc / max(best, 1e-9):17.3f} "
                f"{mse / max(rows['previous'][2], 1e-9):14.3f}")
        results["clips"].setdefault(clip, {}).update({k: {"h0": v[0], "hctx": v[1], "mse": v[2]} for k, v in rows.items()})
    results["total_seconds"] = time.time() - t0
    with open(os.path.join(args.out, "probe.json"), "w") as f:
        json.dump(results, f, indent=1)
    log(f"total {results['total_seconds']:.0f} s")


if __name__ == "__main__":
    main()
