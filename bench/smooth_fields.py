#!/usr/bin/env python3
"""Simulated fields (smooth in space, evolving in time) against SZ3, xz and zstd, in one run.

    bench/smooth_fields.py SZ3 TEZIP [BOUNDS] [--keep DIR]

Makes four inputs of the kind simulation snapshots are (numpy, a fixed seed; the same arrays on
every run): `wave16`/`wave8`, a damped 2-D wave equation driven by two oscillating sources (100
snapshots of 384x384, every 6th step), and `gs16`/`gs8`, a Gray-Scott reaction-diffusion system
(100 snapshots of 256x256, every 40th step), each scaled to the full 16- or 8-bit range. For each
bound of BOUNDS (default 0,2,16; 0 is lossless): lossless against `xz -9e` and `zstd -19` of the raw
array; abs E against SZ3 on the float32 array at E + 0.49, its values rounded (max error E), the
smaller of its 3-D levels on (T,H,W) and its 2-D ones on the frames stacked as one (T*H, W) image.
tezip: `compress -T 2` (default settings), each archive checked with `verify --against` (its max
error printed). Ratios are raw bytes over compressed bytes. Debian python3 (numpy)."""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

from sz3_vs_tezip import sz3_bytes


def laplacian(z):
    return np.roll(z, 1, 0) + np.roll(z, -1, 0) + np.roll(z, 1, 1) + np.roll(z, -1, 1) - 4 * z


def scaled(frames):
    a = np.asarray(frames)
    a = (a - a.min()) / (a.max() - a.min())
    return {16: (a * 65535 + 0.5).astype(np.uint16), 8: (a * 255 + 0.5).astype(np.uint8)}


def wave():
    n = 384
    u, previous, frames = np.zeros((n, n)), np.zeros((n, n)), []
    yy, xx = np.mgrid[0:n, 0:n]
    for step in range(600):
        source = (np.sin(step * 0.07) * np.exp(-((xx - 120) ** 2 + (yy - 200) ** 2) / 50)
                  + np.cos(step * 0.05) * np.exp(-((xx - 260) ** 2 + (yy - 150) ** 2) / 80))
        following = (2 * u - previous + 0.2 * laplacian(u) + 0.3 * source) * 0.999
        previous, u = u, following
        if step % 6 == 5:
            frames.append(u.copy())
    return scaled(frames)


def gray_scott():
    rng = np.random.default_rng(1)
    n = 256
    u, v = np.ones((n, n)), np.zeros((n, n))
    for _ in range(20):
        x, y = rng.integers(20, n - 20, 2)
        u[y - 5:y + 5, x - 5:x + 5], v[y - 5:y + 5, x - 5:x + 5] = 0.5, 0.25
    frames = []
    for step in range(120 * 40):
        uvv = u * v * v
        u += 0.16 * laplacian(u) - uvv + 0.035 * (1 - u)
        v += 0.08 * laplacian(v) + uvv - 0.1 * v
        if step % 40 == 39:
            frames.append(v.copy())
    return scaled(frames[20:])


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    keep = sys.argv[sys.argv.index("--keep") + 1] if "--keep" in sys.argv else None
    if keep in args:
        args.remove(keep)
    if len(args) < 2:
        sys.exit(__doc__)
    sz3, tezip = args[0], args[1]
    bounds = [int(b) for b in (args[2] if len(args) > 2 else "0,2,16").split(",")]
    work = keep or tempfile.mkdtemp(prefix="tezip-fields-")
    os.makedirs(work, exist_ok=True)
    inputs = {}
    for name, make in (("wave", wave), ("gs", gray_scott)):
        for bits, array in make().items():
            path = os.path.join(work, f"{name}{bits}.npy")
            np.save(path, array)
            inputs[f"{name}{bits}"] = (path, array)
    print("| data | bound | peer | peer ratio | tezip ratio | tezip / peer | tezip max error |\n|---|--:|---|--:|--:|--:|--:|")
    for name, (path, array) in inputs.items():
        raw = array.nbytes
        for bound in bounds:
            archive = os.path.join(work, "a.tzp")
            options = [] if bound == 0 else ["--mode", "abs", "--bound", str(bound)]
            subprocess.run([tezip, "compress", path, "-o", archive, "-T", "2", "-f", "-q"] + options, check=True)
            report = subprocess.run([tezip, "verify", archive, "--against", path, "-T", "2"], check=True,
                                    capture_output=True, text=True).stdout
            max_error = re.search(r"max_error=(\d+)", report).group(1)
            ours = raw / os.path.getsize(archive)
            if bound == 0:
                raw_path = os.path.join(work, "raw.bin")
                array.tofile(raw_path)
                subprocess.run(["xz", "-9e", "-k", "-f", "-T1", raw_path], check=True)
                subprocess.run(["zstd", "-19", "-q", "-f", "-T1", raw_path, "-o", raw_path + ".zst"], check=True)
                peers = {"xz -9e": os.path.getsize(raw_path + ".xz"), "zstd -19": os.path.getsize(raw_path + ".zst")}
                peer = min(peers, key=peers.get)
                peer_bytes = peers[peer]
            else:  # SZ3's better layout: its 3-D levels, or each snapshot in 2-D (the frames stacked)
                results = {layout: sz3_bytes(sz3, array[..., None], work, bound, stacked=layout == "2-D")
                           for layout in ("3-D", "2-D")}
                layout = min(results, key=lambda k: results[k][0])
                peer_bytes, peer_error = results[layout]
                peer = f"SZ3 {layout} (max error {peer_error:.0f})"
            print(f"| {name} | {bound} | {peer} | {raw / peer_bytes:.3f} | {ours:.3f} | {peer_bytes / os.path.getsize(archive):.3f} | "
                  f"{max_error} |", flush=True)


if __name__ == "__main__":
    main()
