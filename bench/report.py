#!/usr/bin/python3
"""bench/report.py: BENCHMARKS.md and one plot per dataset from bench/run results.

usage: bench/report.py RESULTS_DIR... [--benchmarks-md PATH] [--plots-dir DIR]

RESULTS_DIR: a bench/run --out folder (results.csv, and run.json: command, date, machine, tool
versions, dataset geometry). With several folders, a dataset found in more than one is taken from
the last. Writes PATH (default <repo>/BENCHMARKS.md) and DIR/<dataset>.png (default: bench/plots
next to PATH, linked from PATH as bench/plots/<dataset>.png); prints the headline figures.

Runs with Debian's /usr/bin/python3; plots need python3-matplotlib (apt), the tables do not.
"""
import argparse, csv, datetime, json, math, os, platform, re, shutil, subprocess, sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PRED_ORDER = {"auto": 0, "intra": 1, "previous": 2, "linear": 3, "motion": 4, "bidirectional": 5,
              "previous --motion off": 6}
MODE_ORDER = {"lossless": 0, "abs": 1, "rel": 2, "pwrel": 3}
PEER_NAMES = {"zstd": "zstd -19 --long=27", "xz": "xz -9", "ffv1": "FFV1", "png": "PNG",
              "x265": "x265", "jxl": "JPEG XL", "zfp": "ZFP", "sz3": "SZ3"}


# -- machine and tools (called by bench/run at the start of a run) ---------------------------------
def _first_line(cmd):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20)
        out = p.stdout.decode(errors="replace").strip().splitlines()
        return out[0].strip() if out else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def tool_versions(tezip="build/tezip", sz3=None):
    v = {}
    v["tezip"] = re.sub(r"^tezip\s+", "", _first_line([str(tezip), "--version"])) if Path(tezip).exists() \
        else "(not built)"
    if shutil.which("zstd"):
        m = re.search(r"v(\d[\w.]*)", _first_line(["zstd", "--version"]))
        v["zstd"] = m.group(1) if m else "?"
    if shutil.which("xz"):
        v["xz"] = _first_line(["xz", "--version"]).split()[-1]
    if shutil.which("ffmpeg"):
        m = re.search(r"version (\S+)", _first_line(["ffmpeg", "-version"]))
        v["ffmpeg"] = m.group(1) if m else "?"
        x = _first_line(["dpkg-query", "-W", "-f", "${Package} ${Version}\\n", "libx265-*"])
        if x:
            v["x265 (libx265, via ffmpeg)"] = x.split()[-1]
    if shutil.which("cjxl"):
        m = re.search(r"v(\d[\w.]*)", _first_line(["cjxl", "--version"]))
        v["cjxl"] = m.group(1) if m else "?"
    if shutil.which("zfp"):
        m = re.search(r"version (\S+)", _first_line(["zfp"]))
        v["zfp"] = m.group(1) if m else "?"
    if sz3 and Path(sz3).exists():
        m = re.search(r"Version:?\s*(\S+)", _first_line([str(sz3), "-v"]))
        v["sz3"] = m.group(1) if m else "?"
    return v


def machine_info():
    info = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()}
    try:
        txt = Path("/proc/cpuinfo").read_text()
        m = re.search(r"^model name\s*:\s*(.+)$", txt, re.M)
        if m:
            info["cpu"] = m.group(1).strip()
    except OSError:
        pass
    try:
        m = re.search(r"^MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
        info["memory_gib"] = round(int(m.group(1)) / 2**20, 1)
    except (OSError, AttributeError):
        pass
    os_name = platform.system()
    try:
        m = re.search(r'^PRETTY_NAME="?([^"\n]+)', Path("/etc/os-release").read_text(), re.M)
        os_name = m.group(1)
    except (OSError, AttributeError):
        pass
    info["os"] = f"{os_name}, kernel {platform.release()}"
    try:
        info["loadavg"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        pass
    return info


# -- reading -----------------------------------------------------------------------------------------
def load(dirs):
    """-> (runs: list of run.json dicts, datasets: {name: (meta, rows)}), in dataset order."""
    runs, datasets = [], {}
    for d in dirs:
        d = Path(d)
        csv_path = d / "results.csv"
        if not csv_path.exists():
            sys.exit(f"report: {csv_path} not found")
        meta = {}
        if (d / "run.json").exists():
            meta = json.loads((d / "run.json").read_text())
        meta["dir"] = str(d)
        runs.append(meta)
        with open(csv_path, newline="") as f:
            rows = list(csv.DictReader(f))
        names = []
        for r in rows:
            if r["dataset"] not in names:
                names.append(r["dataset"])
        for n in names:
            dmeta = dict(meta.get("datasets", {}).get(n, {}))
            dmeta.setdefault("name", n)
            datasets.pop(n, None)
            datasets[n] = (dmeta, [r for r in rows if r["dataset"] == n])
    return runs, datasets


def fnum(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def good(r):
    return r["status"] == "ok" and fnum(r["ratio"]) is not None


def sort_key(r):
    if r["codec"] == "tezip":
        return (0, MODE_ORDER.get(r["mode"], 9), fnum(r["bound"]) or 0,
                PRED_ORDER.get(r["predictor"], 9), int(r["threads"] or 1))
    if r["mode"] == "lossless":
        return (1, 0, -(fnum(r["ratio"]) or 0), 0, 0)
    return (2, MODE_ORDER.get(r["mode"], 9), fnum(r["bound"]) or 0, r["codec"], 0)


def settings(r):
    if r["codec"] == "tezip":
        s = r["mode"] + (f" {r['bound']}" if r["bound"] else "") + f", {r['predictor']}"
        return s + (f", {r['threads']} threads" if str(r["threads"]) not in ("", "1") else "")
    s = r["config"]
    if r["codec"] == "zfp":
        s = ("reversible" if r["mode"] == "lossless" else f"accuracy {r['bound']}") + f" ({r['config']})"
    if r["codec"] == "sz3":
        s = ("lossless-only mode" if r["mode"] == "lossless" else f"abs {r['bound']}") + f" ({r['config']})"
    return s


def frames_cell(r, meta):
    total = meta.get("frames_total")
    k = int(r["frames"]) if r["frames"] else None
    if k is None:
        return ""
    return f"first {k} of {total}" if total and k < total else str(k)


def geometry(meta):
    if "w" not in meta:
        return ""
    return f"{meta['w']}x{meta['h']}, {meta['ch']} ch, {meta['bits']}-bit"


# -- headline ----------------------------------------------------------------------------------------
def headline(name, rows):
    t_lossless = [r for r in rows if r["codec"] == "tezip" and r["mode"] == "lossless" and good(r)]
    peers = [r for r in rows if r["codec"] != "tezip" and r["mode"] == "lossless" and good(r)]
    t_abs2 = [r for r in rows if r["codec"] == "tezip" and r["mode"] == "abs" and fnum(r["bound"]) == 2 and good(r)]
    parts = []
    best_t = max(t_lossless, key=lambda r: fnum(r["ratio"]), default=None)
    best_p = max(peers, key=lambda r: fnum(r["ratio"]), default=None)
    if best_t and best_p:
        q = fnum(best_t["ratio"]) / fnum(best_p["ratio"])
        cov = f", on its first {best_p['frames']} frames" if best_p["frames"] != best_t["frames"] else ""
        parts.append(f"lossless: tezip {fnum(best_t['ratio']):.3f} ({best_t['predictor']}) vs best peer "
                     f"{PEER_NAMES.get(best_p['codec'], best_p['codec'])} {fnum(best_p['ratio']):.3f}{cov} "
                     f"(x{q:.2f})")
    elif best_t:
        parts.append(f"lossless: tezip {fnum(best_t['ratio']):.3f} ({best_t['predictor']}), no lossless peer measured")
    elif best_p:
        parts.append(f"lossless: no tezip entry; best peer {PEER_NAMES.get(best_p['codec'], best_p['codec'])} "
                     f"{fnum(best_p['ratio']):.3f}")
    best_a = max(t_abs2, key=lambda r: fnum(r["ratio"]), default=None)
    # SZ3's best ratio at max error <= 2: its abs 1/2 entries and its lossless-only mode, which
    # beats its abs 2 on mostly-zero data such as Moving MNIST (49.8 against 9.6 there)
    sz3_a2 = max((r for r in rows if r["codec"] == "sz3" and good(r) and fnum(r["max_error"]) is not None
                  and fnum(r["max_error"]) <= 2), key=lambda r: fnum(r["ratio"]), default=None)
    if best_a and best_t:
        parts.append(f"abs 2: tezip {fnum(best_a['ratio']):.3f} ({best_a['predictor']}, max err "
                     f"{best_a['max_error']}) = x{fnum(best_a['ratio']) / fnum(best_t['ratio']):.2f} its lossless")
    if best_a and sz3_a2:
        cov = f", on its first {sz3_a2['frames']} frames" if sz3_a2["frames"] != best_a["frames"] else ""
        how = "lossless-only mode" if sz3_a2["mode"] == "lossless" else f"abs {sz3_a2['bound']}"
        parts.append(f"abs 2 vs SZ3's best at max err <= 2: x{fnum(best_a['ratio']) / fnum(sz3_a2['ratio']):.2f} "
                     f"(SZ3 {how} {fnum(sz3_a2['ratio']):.3f}, max err {sz3_a2['max_error']}{cov})")
    return f"**{name}**: " + "; ".join(parts) if parts else f"**{name}**: no results"


# -- plot --------------------------------------------------------------------------------------------
def plot(name, meta, rows, out_png):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FixedLocator, NullFormatter
    except ImportError:
        print("report: matplotlib missing (apt-get install python3-matplotlib); no plots", file=sys.stderr)
        return False
    rows = [r for r in rows if good(r) and fnum(r["max_error"]) is not None]
    fig, ax = plt.subplots(figsize=(9, 5.6), dpi=110)
    colors = {"auto": "tab:red", "previous": "tab:blue", "linear": "tab:orange", "intra": "tab:green"}
    ys, xs = [], []
    for pred in ("auto", "intra", "previous", "linear"):
        pts = sorted(((fnum(r["max_error"]), fnum(r["ratio"]), r) for r in rows
                      if r["codec"] == "tezip" and r["predictor"] == pred and r["mode"] in ("lossless", "abs")
                      and str(r["threads"]) in ("", "1")), key=lambda p: p[0])
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", color=colors[pred], lw=2,
                    ms=9 if len(pts) == 1 else 6, mec="black" if len(pts) == 1 else colors[pred],
                    label=f"tezip {pred}" + (" (lossless only)" if len(pts) == 1 else " (lossless, abs 1/2/4)"),
                    zorder=4)
            xs += [p[0] for p in pts]; ys += [p[1] for p in pts]
        for r in rows:
            if r["codec"] == "tezip" and r["predictor"] == pred and r["mode"] not in ("lossless", "abs") \
                    and str(r["threads"]) in ("", "1"):
                x, y = fnum(r["max_error"]), fnum(r["ratio"])
                ax.plot([x], [y], "*", color=colors[pred], ms=13, mec="black", mew=0.6, zorder=5,
                        label=f"tezip {pred} {r['mode']} {r['bound']}")
                ax.annotate(f"{r['mode']} {r['bound']}\nmax err {r['max_error']}", (x, y), fontsize=7.5,
                            xytext=(6, -4), textcoords="offset points", va="top")
                xs.append(x); ys.append(y)
    markers = {"zstd": "s", "xz": "D", "ffv1": "^", "png": "v", "x265": "P", "jxl": "X"}
    pcolors = {"zstd": "tab:gray", "xz": "tab:brown", "ffv1": "tab:purple", "png": "tab:pink",
               "x265": "tab:olive", "jxl": "tab:cyan"}
    total = meta.get("frames_total")
    # lossless peers: max error 0, drawn side by side just left of x = 0 (by ratio) to stay legible
    lp = sorted((r for r in rows if r["codec"] in markers and r["mode"] == "lossless"), key=lambda r: fnum(r["ratio"]))
    for i, r in enumerate(lp):
        y = fnum(r["ratio"])
        k = int(r["frames"])
        capped = f" [first {k}]" if total and k < total and k < int(meta.get("frames", total)) else ""
        ax.plot([-0.07 - 0.38 * i / max(1, len(lp) - 1)], [y], markers[r["codec"]], color=pcolors[r["codec"]],
                ms=8, mec="black", mew=0.5, label=f"{PEER_NAMES[r['codec']]} (lossless){capped}", zorder=3,
                ls="none")
        ys.append(y)
    if lp:
        ax.axvspan(-0.5, -0.02, color="0.92", zorder=0)
    z = sorted(((fnum(r["max_error"]), fnum(r["ratio"]), r) for r in rows if r["codec"] == "zfp"),
               key=lambda p: (p[0], p[1]))
    if z:
        k = int(z[0][2]["frames"])
        capped = f" [first {k}]" if total and k < total and k < int(meta.get("frames", total)) else ""
        ax.plot([p[0] for p in z], [p[1] for p in z], "--h", color="tab:red", ms=7,
                label=f"ZFP (reversible, -a 1/2/4){capped}", zorder=3)
        for x, y, r in z:
            ax.annotate("R" if r["mode"] == "lossless" else f"-a {r['bound']}", (x, y), fontsize=7,
                        color="tab:red", xytext=(5, -10 if r["mode"] == "lossless" else 2),
                        textcoords="offset points")
        xs += [p[0] for p in z]; ys += [p[1] for p in z]
    s3 = sorted(((fnum(r["max_error"]), fnum(r["ratio"]), r) for r in rows if r["codec"] == "sz3"),
                key=lambda p: (p[0], p[1]))
    if s3:
        k = int(s3[0][2]["frames"])
        capped = f" [first {k}]" if total and k < total and k < int(meta.get("frames", total)) else ""
        bounds = sorted({fnum(p[2]["bound"]) for p in s3 if p[2]["mode"] == "abs"})
        modes = ["lossless-only mode"] * any(p[2]["mode"] == "lossless" for p in s3) + \
            ([f"ABS {'/'.join(f'{b:g}' for b in bounds)}"] if bounds else [])
        ax.plot([p[0] for p in s3], [p[1] for p in s3], "--d", color="black", ms=6,
                label=f"SZ3 ({', '.join(modes)}){capped}", zorder=3)
        for x, y, r in s3:
            ax.annotate("L" if r["mode"] == "lossless" else f"ABS {r['bound']}", (x, y), fontsize=7,
                        color="black", xytext=(5, -10 if r["mode"] == "lossless" else 2),
                        textcoords="offset points")
        xs += [p[0] for p in s3]; ys += [p[1] for p in s3]
    xmax = max(xs + [4])
    ax.set_xscale("symlog", linthresh=1, linscale=0.6)
    ticks = [0, 1, 2, 4] + [10 ** e for e in range(1, 7) if 10 ** e <= xmax * 1.01]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.set_xticklabels([("0\nlossless" if t == 0 else f"{t:g}") for t in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(-0.55, xmax * 1.8)
    if ys and max(ys) / max(min(ys), 1e-9) > 15:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.set_xlabel("max abs error, measured (symlog; 0 = lossless; grey band: lossless peers, max error 0)")
    ax.set_ylabel("compression ratio (raw / compressed)")
    n = meta.get("frames")
    sub = f"{n} of {total} frames" if n and total and n < total else f"{n or '?'} frames"
    ax.set_title(f"{name}: {geometry(meta)}, {sub}" + (f", raw {meta['raw_bytes'] / 1e6:.1f} MB"
                                                       if meta.get("raw_bytes") else ""), fontsize=11)
    ax.grid(True, which="major", alpha=0.35)
    ax.legend(fontsize=7.5, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png)
    plt.close(fig)
    return True


# -- markdown ----------------------------------------------------------------------------------------
def table(meta, rows):
    best_lossless = max((fnum(r["ratio"]) for r in rows if r["mode"] == "lossless" and good(r)), default=None)
    lines = ["| codec | settings | frames | ratio | comp MB/s | decomp MB/s | max err | PSNR dB | note |",
             "|---|---|--:|--:|--:|--:|--:|--:|---|"]
    for r in sorted(rows, key=sort_key):
        ratio = r["ratio"] or "-"
        if best_lossless is not None and r["mode"] == "lossless" and good(r) and fnum(r["ratio"]) == best_lossless:
            ratio = f"**{ratio}**"
        note = r["status"] if r["status"] != "ok" else ""
        if r["note"] and r["note"] not in ("decode writes image files", "decode to memory with checksums"):
            n = re.sub(r"^first \d+ of \d+ frames;? ?", "", r["note"])
            note = f"{note}; {n}" if note and n else (note or n)
        lines.append(f"| {r['codec']} | {settings(r)} | {frames_cell(r, meta)} | {ratio} | "
                     f"{r['compress_MBps'] or '-'} | {r['decompress_MBps'] or '-'} | {r['max_error'] or '-'} | "
                     f"{r['psnr'] or '-'} | {note.replace('|', '/')} |")
    return "\n".join(lines)


def write(runs, datasets, md_path, plots_dir):
    md_path = Path(md_path).resolve()
    plots_dir = Path(plots_dir).resolve() if plots_dir else md_path.parent / "bench" / "plots"
    heads = [headline(n, rows) for n, (meta, rows) in datasets.items()]
    r0 = runs[0] if runs else {}
    m = r0.get("machine") or machine_info()
    tools = r0.get("tools") or tool_versions(REPO / "build/tezip")
    out = ["# tezip benchmarks", "",
           "Generated by `bench/report.py` from `bench/run` results; do not edit by hand. Method, peers' "
           f"commands and caveats: [bench/README.md]({os.path.relpath(REPO / 'bench/README.md', md_path.parent)}).",
           "",
           "## Headline", ""]
    out += [f"- {h}" for h in heads]
    out += ["", "ratio = raw pixel bytes / compressed bytes (higher is better); x = ratio of tezip's figure "
            "to the other one.", "", "## Machine and run", ""]
    out.append(f"- CPU: {m.get('cpu', '?')}, {m.get('cores', '?')} cores; memory {m.get('memory_gib', '?')} GiB; "
               f"OS: {m.get('os', '?')}")
    if m.get("loadavg") or r0.get("loadavg_end"):
        out.append(f"- load average (1/5/15 min) at start: {m.get('loadavg', '?')}, at end: "
                   f"{r0.get('loadavg_end', '?')} (above the core count the machine was shared and MB/s are low; "
                   "ratios are unaffected)")
    out.append("- tools: " + ", ".join(f"{k} {v}" for k, v in tools.items()))
    for r in runs:
        cmd = r.get("command", "(unknown: no run.json)")
        when = r.get("started", "?")
        took = f", took {r['elapsed_s'] / 60:.1f} min" if r.get("elapsed_s") else ""
        out.append(f"- command: `{cmd}` (run {when}{took}; results in `{r['dir']}`)")
        caps = r.get("caps")
        if caps:
            out.append(f"  - caps: {caps}")
        if r.get("runs"):
            out.append(f"  - timings: best of up to {r['runs']} runs, repeated while a measurement's total "
                       f"stays under {r.get('repeat_cap_s', '?')} s")
    out.append(f"- report written {datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}")
    out.append("")
    for n, (meta, rows) in datasets.items():
        total = meta.get("frames_total")
        k = meta.get("frames")
        cov = ""
        if k and total and k < total:
            cov = f"; all codecs on the first {k} of {total} frames ({meta.get('cap_reason', 'capped')})"
        raw = f", raw {meta['raw_bytes'] / 1e6:.1f} MB" if meta.get("raw_bytes") else ""
        out += [f"## {n}", "", f"{meta.get('description', '')}{' ' if meta.get('description') else ''}"
                f"{geometry(meta)}, {k or '?'} frames{raw}{cov}.", ""]
        out += [headline(n, rows), "", table(meta, rows), ""]
        png = plots_dir / f"{n}.png"
        if plot(n, meta, rows, png):
            rel = os.path.relpath(png, md_path.parent)
            out += [f"![{n}: ratio vs max error]({rel})", ""]
    # Measurements made by other commands (loader, batch jobs) live in bench/sections/*.md and are
    # carried into every regenerated report.
    for extra in sorted((Path(__file__).resolve().parent / "sections").glob("*.md")):
        out += [extra.read_text().rstrip(), ""]
    md_path.write_text("\n".join(out))
    print("\n".join(["headline:"] + ["  " + h.replace("**", "") for h in heads]))
    print(f"report: wrote {md_path} and plots in {plots_dir}", file=sys.stderr)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+", metavar="RESULTS_DIR")
    ap.add_argument("--benchmarks-md", default=str(REPO / "BENCHMARKS.md"))
    ap.add_argument("--plots-dir", default=None, help="default: bench/plots next to --benchmarks-md")
    a = ap.parse_args(argv)
    runs, datasets = load(a.dirs)
    write(runs, datasets, a.benchmarks_md, a.plots_dir)


if __name__ == "__main__":
    sys.dont_write_bytecode = True
    main()
