#!/usr/bin/env python3
"""abs 2 ratios of SZ3 and tezip on the same folders of frames, in one run.

    bench/sz3_vs_tezip.py SZ3 TEZIP NAME:FOLDER...

SZ3 (../shared/peers/build_sz3.sh) codes each channel as a (T,H,W) float32 array at ABS 2.49, its
decoded values rounded (the max error is checked and printed: 2); tezip compresses the folder with
`--mode abs --bound 2 -T 2`. Ratios are raw pixel bytes over compressed bytes; the last column is
SZ3 bytes over tezip bytes. Frames: the folder's PNG or PGM files in name order (Debian python3:
numpy, PIL)."""
import glob
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image


def sz3_bytes(sz3, frames, work, bound=2, stacked=False):
    """SZ3's bytes over every channel and the largest error of its rounded decoding (ABS bound + 0.49).
    Each channel as a (T,H,W) array, or with `stacked` as one 2-D image of the frames one below the
    other (SZ3's 2-D interpolation, which can beat its 3-D levels on snapshots far apart in time)."""
    t, h, w, channels = frames.shape
    top = 255 if frames.itemsize == 1 else 65535
    total, max_error = 0, 0.0
    shape = ["-2", str(w), str(h * t)] if stacked else ["-3", str(w), str(h), str(t)]
    dims = shape + ["-M", "ABS", str(bound + 0.49)]
    for c in range(channels):
        x = np.ascontiguousarray(frames[..., c]).astype(np.float32)
        x.tofile(f"{work}/in.f32")
        subprocess.run([sz3, "-f", "-i", f"{work}/in.f32", "-z", f"{work}/o.sz"] + dims, check=True, stdout=subprocess.DEVNULL)
        subprocess.run([sz3, "-f", "-z", f"{work}/o.sz", "-o", f"{work}/back.f32"] + dims, check=True, stdout=subprocess.DEVNULL)
        back = np.clip(np.rint(np.fromfile(f"{work}/back.f32", dtype=np.float32)), 0, top)
        max_error = max(max_error, float(np.abs(back - x.ravel()).max()))
        total += os.path.getsize(f"{work}/o.sz")
    return total, max_error


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    sz3, tezip = sys.argv[1], sys.argv[2]
    print("| data | T x H x W x C | SZ3 abs 2 | tezip abs 2 | tezip / SZ3 |\n|---|---|--:|--:|--:|")
    for spec in sys.argv[3:]:
        name, folder = spec.split(":", 1)
        files = sorted(glob.glob(os.path.join(folder, "*.png")) + glob.glob(os.path.join(folder, "*.pgm")))
        frames = np.stack([np.asarray(Image.open(f)) for f in files])
        if frames.ndim == 3:
            frames = frames[..., None]
        raw = frames.size * frames.itemsize
        with tempfile.TemporaryDirectory() as work:
            start = time.time()
            sz3_total, max_error = sz3_bytes(sz3, frames, work)
            sz3_seconds = time.time() - start
            start = time.time()
            subprocess.run([tezip, "compress", folder, "-o", f"{work}/a.tzp", "-T", "2", "--mode", "abs", "--bound", "2", "-q"],
                           check=True)
            tezip_seconds = time.time() - start
            tezip_total = os.path.getsize(f"{work}/a.tzp")
        shape = "x".join(str(n) for n in frames.shape)
        print(f"| {name} | {shape} | {raw / sz3_total:.3f} (max err {max_error:.0f}, {sz3_seconds:.0f} s) "
              f"| {raw / tezip_total:.3f} ({tezip_seconds:.0f} s) | {sz3_total / tezip_total:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
