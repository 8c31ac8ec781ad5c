#!/usr/bin/env python3
"""Encoding CPU time of two tezip builds on the same inputs, interleaved, and whether their archives are equal.

    bench/encode_before_after.py RUNS TEZIP_BEFORE TEZIP_AFTER "NAME:INPUT:RAW_MB[:COMPRESS_OPTION...]"...

For each entry, `compress INPUT -o ... -f -q -T 1 [options]` runs with each build in turn, RUNS
times; the best CPU time (user + system; with --user, user alone) of each counts. RAW_MB (raw pixel megabytes) gives MB/s.
Options are separated by colons (e.g. "mire2 abs 2:.cache/datasets/mire2:55.4:--mode:abs:--bound:2").
The last archives of both builds are compared byte for byte, and their sizes given (after / before - 1).
Archives go to a temporary folder."""
import filecmp
import os
import sys
import tempfile

from decode_vs_zstd import cpu_seconds  # whole-process CPU time, user + system (or user alone)


def main():
    # --user: user CPU time alone (on a VM whose kernel time swings by seconds between equal runs).
    user_only = "--user" in sys.argv
    if user_only:
        sys.argv.remove("--user")
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    runs, before, after = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    work = tempfile.mkdtemp(prefix="tezip-enc-")
    old_archive, new_archive = os.path.join(work, "before.tzp"), os.path.join(work, "after.tzp")
    print("| data | before | after | speed-up | archives |\n|---|--:|--:|--:|---|")
    for spec in sys.argv[4:]:
        name, source, raw_mb, *options = spec.split(":")
        t_old, t_new = [], []
        for _ in range(runs):
            t_old.append(cpu_seconds([before, "compress", source, "-o", old_archive, "-f", "-q", "-T", "1"] + options, user_only))
            t_new.append(cpu_seconds([after, "compress", source, "-o", new_archive, "-f", "-q", "-T", "1"] + options, user_only))
        same = filecmp.cmp(old_archive, new_archive, shallow=False)
        o, n, mb = min(t_old), min(t_new), float(raw_mb)
        old_size, new_size = os.path.getsize(old_archive), os.path.getsize(new_archive)
        sizes = "identical" if same else f"{old_size:,} -> {new_size:,} ({100 * (new_size / old_size - 1):+.2f}%)"
        print(f"| {name} | {o:.2f} s ({mb / o:.1f} MB/s) | {n:.2f} s ({mb / n:.1f} MB/s) | {o / n:.2f}x | {sizes} |",
              flush=True)
    for f in (old_archive, new_archive):
        if os.path.exists(f):
            os.remove(f)
    os.rmdir(work)


if __name__ == "__main__":
    main()
