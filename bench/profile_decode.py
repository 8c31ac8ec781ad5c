#!/usr/bin/env python3
"""Where decoding time goes: `tezip verify ARCHIVE -T 1` under perf, samples grouped by stage.

    bench/profile_decode.py TEZIP ARCHIVE [--pixels N] [--perf-data FILE] [--report-only] [--list-other]

Needs `perf` (Debian linux-perf). Samples CPU time at 4 kHz (cpu-clock), attributes each sample's
symbol to a stage and prints, per stage, the share of samples and the CPU nanoseconds per decoded
pixel (pixels: from `tezip info`, or --pixels). --report-only reads an earlier --perf-data FILE
(e.g. one recorded with an older build) instead of recording. Process start (the dynamic loader, shared library
constructors) is a stage of its own: it counts, as it does for a user. --list-other prints the
symbols that no stage claims, largest first.
"""
import collections
import os
import re
import subprocess
import sys
import tempfile

STAGES = [  # (stage, pattern on "dso symbol"), first match wins
    ("entropy decoding", r"decode_rans|decode_mapped|decode_symbols|decode_adaptive|finish_ranks|read_rank_table|libzstd|ZSTD_|StripedRans|decode_row_|scatter_rows|next_above|SignedSymbolReader|ZstdRankStream|ZstdFrameReader|map_plain_|parse_rank_bytes|liblzma|lzma_"),
    ("inverse transform", r"inverse_transform|MedianStep|prefix_sums"),
    # Intra planes: the median forecast and the dequantization in one wavefront (IntraStep).
    ("dequantization", r"dequantize|interval_dequantize|IntraStep|intra_lossless|intra_uniform|intra_rows"),
    ("channel references", r"undo_channel_ref|combine<|inverse_rct"),
    ("forecast", r"forecast|Predictor|predictor|build_forecast|motion|compensate|predict_inside|predict_narrow|::predict\b|predict_vector|far_field|average"),
    ("checksum", r"XXH|xxhash"),
    ("output conversion", r"pack_frames|to_interleaved|write_frame|imencode"),
    ("archive I/O", r"read_chunk|ArchiveReader|_copy_to_iter|filemap|vfs_read|ksys_read|copy_page_to_iter"),
    ("allocation and page faults", r"memset|page_fault|clear_page|do_anonymous_page|handle_mm_fault|malloc|_int_free|_int_malloc|unmap_page|free_pages|folio|pte|lru|mas_"),
    ("copies", r"memmove|memcpy"),
    ("threads and scheduling", r"finish_task_switch|_raw_spin_unlock|futex|schedule|try_to_wake_up|ThreadPool|pthread"),
    ("process start", r"ld-linux|_dl_|do_lookup|libtorch|libc10|libopencv|hwy::|TimerResolution|init_|__libc_start|_GLOBAL__sub_I"),
]


def main():
    args = sys.argv[1:]
    pixels = None
    data = None
    report_only = "--report-only" in args
    if report_only:
        args.remove("--report-only")
    list_other = "--list-other" in args  # also print the symbols no stage claims, largest first
    if list_other:
        args.remove("--list-other")
    if "--pixels" in args:
        i = args.index("--pixels"); pixels = int(args[i + 1]); del args[i:i + 2]
    if "--perf-data" in args:
        i = args.index("--perf-data"); data = args[i + 1]; del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    tezip, archive = args
    if pixels is None:
        info = subprocess.run([tezip, "info", archive], check=True, capture_output=True, text=True).stdout
        # raw bytes / bytes per sample; the geometry line names uint8 or uint16.
        raw = float(re.search(r"^raw:\s+([\d.]+) MB", info, re.M).group(1)) * 1e6
        pixels = int(raw / (2 if "uint16" in info else 1))
    data = data or os.path.join(tempfile.mkdtemp(prefix="tezip-perf-"), "perf.data")
    if not report_only:
      subprocess.run(["perf", "record", "-q", "-F", "4000", "-o", data, tezip, "verify", archive, "-T", "1", "-q"],
                     check=True, stderr=subprocess.DEVNULL)
    report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,sym", "--stdio",
                             "-F", "sample,dso,sym"], check=True, capture_output=True, text=True).stdout
    counts = collections.Counter()
    unclaimed = collections.Counter()
    total = 0
    for line in report.splitlines():
        m = re.match(r"\s+(\d+)\s+(\S+)\s+\[.\]\s+(.*)", line)
        if not m:
            continue
        n, dso, sym = int(m.group(1)), m.group(2), m.group(3)
        total += n
        key = dso + " " + sym
        stage = next((s for s, pat in STAGES if re.search(pat, key)), "other")
        counts[stage] += n
        if stage == "other":
            unclaimed[key] += n
    seconds = total / 4000.0
    print(f"{os.path.basename(archive)}: {total} samples = {seconds:.3f} CPU s, {pixels} pixels, "
          f"{seconds * 1e9 / pixels:.2f} ns/pixel in all")
    print("| stage | share | ns/pixel |\n|---|--:|--:|")
    for stage, _ in STAGES + [("other", "")]:
        n = counts.get(stage, 0)
        print(f"| {stage} | {100.0 * n / max(total, 1):.1f}% | {n / 4000.0 * 1e9 / pixels:.2f} |")
    if list_other:
        for key, n in unclaimed.most_common(12):
            print(f"  other: {100.0 * n / max(total, 1):.1f}% {key[:120]}")


if __name__ == "__main__":
    main()
