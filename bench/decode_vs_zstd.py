#!/usr/bin/env python3
"""Whole-process decode speed of tezip against zstd -d on the same raw pixels, in one run.

    bench/decode_vs_zstd.py TEZIP RAW_FILE ARCHIVE... [--runs N]

RAW_FILE holds the archive's raw pixels (as decoded); it is compressed here with `zstd -19 -T1`
once (kept as RAW_FILE.zst). Each process is timed N times (default 5) and the best CPU time (user
+ system, so a busy machine skews it less) counts: `tezip verify ARCHIVE -T 1` (every GOP decoded
to memory and checked against its frame checksums: the loader's path) against `zstd -d -T1 -c`.
Prints MB/s of raw pixels for both and their ratio, and the ratio of user CPU time alone (best of
N too): on a VM whose kernel time for the same page faults swings by seconds from run to run, the
user ratio is the one that repeats.""" 
import os
import resource
import subprocess
import sys


def cpu_times(argv):
    """(user + system, user) CPU seconds of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user = after.ru_utime - before.ru_utime
    return user + (after.ru_stime - before.ru_stime), user


def cpu_seconds(argv, user_only=False):
    """The CPU seconds of one run: user + system, or user alone."""
    total, user = cpu_times(argv)
    return user if user_only else total


def best(argv, runs):
    """The best user + system and the best user time of `runs` runs."""
    times = [cpu_times(argv) for _ in range(runs)]
    return min(t for t, _ in times), min(u for _, u in times)


def main():
    args = sys.argv[1:]
    runs = 5
    if "--runs" in args:
        i = args.index("--runs")
        runs = int(args[i + 1])
        del args[i:i + 2]
    if len(args) < 3:
        sys.exit(__doc__)
    tezip, raw, archives = args[0], args[1], args[2:]
    packed = raw + ".zst"
    if not os.path.exists(packed):
        subprocess.run(["zstd", "-19", "-T1", "-q", "-f", raw, "-o", packed], check=True)
    mb = os.path.getsize(raw) / 1e6
    z, zu = best(["zstd", "-d", "-T1", "-q", "-c", packed], runs)
    print(f"zstd -d -T1 {os.path.basename(packed)}: {z:.3f} s, {mb / z:.1f} MB/s (user {zu:.3f} s)")
    for a in archives:
        t, tu = best([tezip, "verify", a, "-T", "1", "-q"], runs)
        user_ratio = f"{zu / tu:.2f}x" if zu >= 0.02 else "too short to tell"
        print(f"tezip verify -T 1 {os.path.basename(a)}: {t:.3f} s, {mb / t:.1f} MB/s, {z / t:.2f}x zstd -d "
              f"(user {tu:.3f} s, {user_ratio})")


if __name__ == "__main__":
    main()
