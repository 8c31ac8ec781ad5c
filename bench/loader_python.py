#!/usr/bin/env python3
"""The Python loader against the files it replaces, in one run: frames/s through a PyTorch DataLoader.

    PYTHONPATH=build/python /usr/bin/python3 bench/loader_python.py FRAMES_DIR [--tezip build/tezip]
        [--work DIR] [--batch 8] [--clip 4] [--epochs 2]

FRAMES_DIR is a folder of image frames (one sequence; PNG, PGM, ...). The script makes, in --work
(default: a temporary folder): a lossless and an abs-2 tezip archive (tezip compress), a PNG folder
of the same frames, and one (T, H, W[, C]) uint8 .npy file. Then the same DataLoader (batch --batch
of clips of --clip consecutive frames, shuffled, 0 and 2 workers, kept between epochs as a training
job keeps them: persistent_workers) reads each: tezip.torch.ClipDataset over each archive, PNG files
decoded by PIL, and the .npy through np.load(mmap_mode='r'). Pages are warm: each reader runs one
untimed epoch first, then --epochs timed ones over the same loader. Prints frames/s per reader and worker count, and the
ratio of the lossless archive to the PNG folder.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

import tezip
import tezip.torch as tezip_torch


class PngClips(Dataset):
    def __init__(self, files, clip):
        self.files, self.clip = files, clip

    def __len__(self):
        return len(self.files) // self.clip

    def __getitem__(self, i):
        from PIL import Image
        frames = [np.asarray(Image.open(f)) for f in self.files[i * self.clip:(i + 1) * self.clip]]
        return torch.from_numpy(np.stack(frames))


class NpyClips(Dataset):
    def __init__(self, path, clip):
        self.path, self.clip = path, clip
        self.n = np.load(path, mmap_mode="r").shape[0] // clip
        self.array = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.array is None:  # opened in the worker, as a real loader would
            self.array = np.load(self.path, mmap_mode="r")
        return torch.from_numpy(np.array(self.array[i * self.clip:(i + 1) * self.clip]))


def frames_per_second(make_loader, clip, epochs):
    """Frames/s over `epochs` epochs of one loader, after an untimed one (page cache, worker
    start-up). With workers the loader keeps them (persistent_workers), as a training job does:
    otherwise each epoch would time the fork and start of new workers, which on a short epoch is
    most of it (mire2, 125 clips: 0.3-0.4 s an epoch for every reader, .npy included)."""
    loader = make_loader()
    for _ in loader:
        pass
    frames, start = 0, time.perf_counter()
    for _ in range(epochs):
        for batch in loader:
            frames += batch.shape[0] * clip
    return frames / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("frames")
    p.add_argument("--tezip", default=os.path.join(os.path.dirname(__file__), "..", "build", "tezip"))
    p.add_argument("--work")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--clip", type=int, default=4)
    p.add_argument("--epochs", type=int, default=2)
    a = p.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="tezip-loader-")
    os.makedirs(work, exist_ok=True)
    from PIL import Image
    names = sorted(f for f in os.listdir(a.frames) if not f.startswith("."))
    png_dir = os.path.join(work, "png")
    if not os.path.isdir(png_dir):
        os.makedirs(png_dir)
        for n in names:
            Image.open(os.path.join(a.frames, n)).save(os.path.join(png_dir, os.path.splitext(n)[0] + ".png"))
    pngs = sorted(os.path.join(png_dir, f) for f in os.listdir(png_dir))
    npy = os.path.join(work, "frames.npy")
    if not os.path.exists(npy):
        np.save(npy, np.stack([np.asarray(Image.open(f)) for f in pngs]))
    archives = {}
    for label, mode in (("lossless", ["--mode", "lossless"]), ("abs 2", ["--mode", "abs", "--bound", "2"])):
        out = os.path.join(work, label.replace(" ", "") + ".tzp")
        if not os.path.exists(out):
            subprocess.run([a.tezip, "compress", png_dir, "-o", out, "-q"] + mode, check=True)
        archives[label] = out
    raw = os.path.getsize(npy)
    png_bytes = sum(os.path.getsize(f) for f in pngs)
    print(f"{len(pngs)} frames {np.load(npy, mmap_mode='r').shape[1:]} uint8, raw {raw / 1e6:.1f} MB, "
          f"PNG {png_bytes / 1e6:.1f} MB, lossless archive {os.path.getsize(archives['lossless']) / 1e6:.1f} MB, "
          f"abs-2 archive {os.path.getsize(archives['abs 2']) / 1e6:.1f} MB; batch {a.batch}, clips of {a.clip}")
    rows = []
    for workers in (0, 2):
        common = dict(batch_size=a.batch, num_workers=workers, persistent_workers=workers > 0)
        for label, path in archives.items():
            def make(path=path):
                # The default threads: the CPUs shared among the workers (1 each of 2 with 2
                # workers on 2 cores, 2 without workers).
                ds = tezip_torch.ClipDataset(path, clip_len=a.clip, stride=a.clip)
                return DataLoader(ds, **common)
            rows.append((f"tezip.torch.ClipDataset, {label} archive", workers, frames_per_second(make, a.clip, a.epochs)))
        rows.append(("PNG files through PIL", workers,
                     frames_per_second(lambda: DataLoader(PngClips(pngs, a.clip), shuffle=True, **common), a.clip, a.epochs)))
        rows.append(("raw .npy memmap", workers,
                     frames_per_second(lambda: DataLoader(NpyClips(npy, a.clip), shuffle=True, **common), a.clip, a.epochs)))
    print("| loader | workers | frames/s |\n|---|--:|--:|")
    for label, workers, fps in rows:
        print(f"| {label} | {workers} | {fps:.0f} |")
    for workers in (0, 2):
        t = next(f for l, w, f in rows if w == workers and "lossless" in l)
        png = next(f for l, w, f in rows if w == workers and "PNG" in l)
        print(f"lossless archive / PNG folder, {workers} workers: {t / png:.2f}x")
    if not a.work:
        shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main())
