#!/usr/bin/env python3
"""Whole-process decode speed of tezip against zstd -d on the same raw pixels, in one run.

    bench/decode_vs_zstd.py TEZIP RAW_FILE ARCHIVE... [--runs N] [--before TEZIP_BEFORE]

RAW_FILE holds the archive's raw pixels (as decoded); it is compressed here with `zstd -19 -T1`
once (kept as RAW_FILE.zst). Each process is timed N times (default 5) and the best CPU time (user
+ system, so a busy machine skews it less) counts: `tezip verify ARCHIVE -T 1` (every GOP decoded
to memory and checked against its frame checksums: the loader's path) against `zstd -d -T1 -c`.
Prints MB/s of raw pixels for both and their ratio, and the ratio of user CPU time alone (best of
N too): on a VM whose kernel time for the same page faults swings by seconds from run to run, the
user ratio is the one that repeats. With --before, a second build's `verify` runs too, each of the
N rounds running zstd, the earlier build and TEZIP in turn (for a before/after in one run).""" 
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
    before = None
    if "--before" in args:
        i = args.index("--before")
        before = args[i + 1]
        del args[i:i + 2]
    if len(args) < 3:
        sys.exit(__doc__)
    tezip, raw, archives = args[0], args[1], args[2:]
    packed = raw + ".zst"
    if not os.path.exists(packed):
        subprocess.run(["zstd", "-19", "-T1", "-q", "-f", raw, "-o", packed], check=True)
    mb = os.path.getsize(raw) / 1e6
    zstd = ["zstd", "-d", "-T1", "-q", "-c", packed]

    def print_zstd(z, zu):
        print(f"zstd -d -T1 {os.path.basename(packed)}: {z:.3f} s, {mb / z:.1f} MB/s (user {zu:.3f} s)")

    if before is None:
        z, zu = best(zstd, runs)
        print_zstd(z, zu)
    for a in archives:
        builds = [tezip] if before is None else [before, tezip]
        if before is None:
            timed = {tezip: best([tezip, "verify", a, "-T", "1", "-q"], runs)}
        else:  # zstd, the earlier build and this one in turn, each round
            rounds = [[cpu_times(argv) for argv in [zstd] + [[b, "verify", a, "-T", "1", "-q"] for b in builds]]
                      for _ in range(runs)]
            z, zu = min(r[0][0] for r in rounds), min(r[0][1] for r in rounds)
            print_zstd(z, zu)
            timed = {b: (min(r[k + 1][0] for r in rounds), min(r[k + 1][1] for r in rounds)) for k, b in enumerate(builds)}
        for b in builds:
            t, tu = timed[b]
            user_ratio = f"{zu / tu:.2f}x" if zu >= 0.02 else "too short to tell"
            label = "" if before is None else (" (before)" if b == before else " (after)")
            print(f"tezip verify -T 1 {os.path.basename(a)}{label}: {t:.3f} s, {mb / t:.1f} MB/s, {z / t:.2f}x zstd -d "
                  f"(user {tu:.3f} s, {user_ratio})")


if __name__ == "__main__":
    main()
