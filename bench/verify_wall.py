#!/usr/bin/env python3
"""Wall-clock frames/s of `tezip verify` for several builds, each on its own archive, interleaved.

    bench/verify_wall.py RUNS THREADS FRAMES TEZIP:ARCHIVE...

Each pair's whole process `TEZIP verify ARCHIVE -T THREADS` runs in turn, RUNS times; the best
wall time and the best user CPU time of each count (the shared machine's load moves all alike).
FRAMES: the archive's frame count, for frames/s. Used for PredNet decoding (docs/performance.md),
where the issue counts frames/s on 2 threads."""
import resource
import subprocess
import sys
import time


def run(argv):
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    runs, threads, frames = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    pairs = [spec.rsplit(":", 1) for spec in sys.argv[4:]]
    best = {}
    for _ in range(runs):
        for exe, archive in pairs:
            wall, user = run([exe, "verify", archive, "-T", threads])
            old = best.get((exe, archive), (float("inf"), float("inf")))
            best[(exe, archive)] = (min(old[0], wall), min(old[1], user))
    print("| build | archive | wall s | frames/s | user s |\n|---|---|--:|--:|--:|")
    for (exe, archive), (wall, user) in best.items():
        print(f"| {exe} | {archive} | {wall:.3f} | {frames / wall:.0f} | {user:.3f} |")


if __name__ == "__main__":
    main()
