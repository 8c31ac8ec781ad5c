#!/usr/bin/env python3
"""Decode speed of two tezip builds, each on its own archive of the same data, against zstd -d, interleaved.

    bench/decode_before_after.py RUNS TEZIP_BEFORE TEZIP_AFTER NAME:BEFORE.tzp:AFTER.tzp:RAW.zst...

For each NAME, the three whole processes `TEZIP_BEFORE verify BEFORE.tzp -T 1`, `TEZIP_AFTER
verify AFTER.tzp -T 1` and `zstd -d -T1 -c RAW.zst` run in turn, RUNS times; the best CPU time
(user + system; with --user, user alone) of each counts, so that the shared machine's load moves
all three alike. Prints the
times, each build's ratio to zstd -d and the speed-up. RAW.zst: the raw pixels, `zstd -19 -T1`."""
import sys

from decode_vs_zstd import cpu_seconds  # whole-process CPU time, user + system (or user alone)


def main():
    # --user: user CPU time alone (on a VM whose kernel time swings by seconds between equal runs).
    user_only = "--user" in sys.argv
    if user_only:
        sys.argv.remove("--user")
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    runs, before, after = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    print("| data | zstd -d | before | after | speed-up |\n|---|--:|--:|--:|--:|")
    for spec in sys.argv[4:]:
        name, old, new, packed = spec.split(":")
        t_old, t_new, t_zstd = [], [], []
        for _ in range(runs):
            t_old.append(cpu_seconds([before, "verify", old, "-T", "1"], user_only))
            t_new.append(cpu_seconds([after, "verify", new, "-T", "1"], user_only))
            t_zstd.append(cpu_seconds(["zstd", "-d", "-T1", "-c", packed], user_only))
        o, n, z = min(t_old), min(t_new), min(t_zstd)
        print(f"| {name} | {z:.3f} s | {o:.3f} s ({z / o:.2f}x) | {n:.3f} s ({z / n:.2f}x) | {o / n:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
