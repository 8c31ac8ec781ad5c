#!/usr/bin/env python3
"""The clips bench/prednet_gpu_probe.py reads, as one compressed .npz (33 MB, under the device's 64 MiB).

    /usr/bin/python3 bench/prednet_gpu_probe_data.py [-f] [OUT.npz]   (default gpu_probe_data/frames.npz)

An existing OUT is kept unless -f is given; the file is written under a temporary name, then renamed.

Gray (luma, PIL's 'L') uint8 arrays (T, H, W) from `datasets/fetch mire2 vtest colour`'s cache:
train_mire2 (its first 160 frames, 288x384), train_vtest (100 frames, the centre 320x448: what the
shipped model was trained on) and test_cup, test_megamind, test_box, test_tree (the first 32
frames of each colour clip, whole: clips no model here saw)."""
import argparse
import glob
import os
import sys
import tempfile

import numpy as np
from PIL import Image

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("TEZIP_CACHE", os.path.join(REPO, ".cache", "datasets"))


def load(pattern, n, crop=None):
    files = sorted(glob.glob(os.path.join(CACHE, pattern)))[:n]
    if len(files) < n:
        sys.exit(f"prednet_gpu_probe_data: {pattern}: {len(files)} frames, {n} wanted (run datasets/fetch first)")
    out = []
    for f in files:
        a = np.asarray(Image.open(f).convert("L"))
        if crop:
            h, w = a.shape
            y0, x0 = (h - crop[0]) // 2, (w - crop[1]) // 2
            a = a[y0:y0 + crop[0], x0:x0 + crop[1]]
        out.append(a)
    return np.stack(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=os.path.join(REPO, "gpu_probe_data", "frames.npz"))
    ap.add_argument("-f", "--force", action="store_true", help="replace an existing OUT")
    args = ap.parse_args()
    out = args.out if args.out.endswith(".npz") else args.out + ".npz"  # np.savez's own rule
    if os.path.exists(out) and not args.force:
        sys.exit(f"prednet_gpu_probe_data: {out} exists (give -f to replace it)")
    arrays = {"train_mire2": load("mire2/*.pgm", 160), "train_vtest": load("vtest/*.png", 100, crop=(320, 448))}
    for name in ("cup", "megamind", "box", "tree"):
        arrays["test_" + name] = load(f"colour/{name}/*.png", 32)
    folder = os.path.dirname(os.path.abspath(out))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".frames-", suffix=".npz", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez_compressed(f, **arrays)
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise
    for k, v in arrays.items():
        print(k, v.shape)
    print("wrote", out)


if __name__ == "__main__":
    main()
