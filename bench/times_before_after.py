#!/usr/bin/env python3
"""User, system and wall time of the same tezip command under two builds, interleaved.

    bench/times_before_after.py RUNS TEZIP_BEFORE TEZIP_AFTER ARGS...

Runs `TEZIP_BEFORE ARGS...` and `TEZIP_AFTER ARGS...` in turn, RUNS times each, and prints per
build the best user CPU time, the median system time and the best and median wall time, then the
wall-time speed-up. For effects the CPU-time scripts (encode_before_after.py, decode_vs_zstd.py)
do not show: page faults whose cost is system time and varies from run to run (docs/performance.md,
"No huge pages"). Output goes to the command's own -o; both builds get the same arguments."""
import resource
import subprocess
import sys
import time


def run(argv):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, wall


def median(values):
    return sorted(values)[len(values) // 2]


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    runs, builds, args = int(sys.argv[1]), {"before": sys.argv[2], "after": sys.argv[3]}, sys.argv[4:]
    times = {name: [] for name in builds}
    for _ in range(runs):
        for name, tezip in builds.items():
            times[name].append(run([tezip] + args))
    wall = {}
    for name, t in times.items():
        wall[name] = (min(x[2] for x in t), median([x[2] for x in t]))
        print(f"{name:6s} user {min(x[0] for x in t):.3f} s  system (median) {median([x[1] for x in t]):.3f} s  "
              f"wall {wall[name][0]:.3f} s (median {wall[name][1]:.3f} s)")
    print(f"wall speed-up {wall['before'][0] / wall['after'][0]:.2f}x (medians {wall['before'][1] / wall['after'][1]:.2f}x)")


if __name__ == "__main__":
    main()
