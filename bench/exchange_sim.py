#!/usr/bin/python3
"""The partial exchange at scale, on paper: 16 to 4,096 ranks, a dataset of 10 TB raw.

For each world size P and exchange fraction Q it runs the plan of loader/stream.cpp
(StreamPlan::owners: epoch 0 deals the shuffled blocks to the least-loaded rank; each later epoch
takes round(Q n) random blocks from every rank's n and deals them, shuffled, to the least-loaded
rank other than their previous owner) on a scaled model of the dataset, and prints, per rank:
the store size, the compressed bytes sent per epoch, the balance across ranks (max / mean of the
bytes held and sent), and the epoch's I/O time against a global reshuffle from a shared file
system. Every GOP holds the same number of samples (fixed GOPs), so the plan's load (samples) is
balanced to one block; the bytes per block vary like the measured chunk sizes (--chunk-cv).

    bench/exchange_sim.py [--raw-tb 10] [--ratio 16.8] [--gop-raw-mib 1] [--fs-gbs 100]
                          [--fs-client-gbs 5] [--net-gbs 12.5] [--ssd-gbs 3] [--blocks-per-rank 256]

Time model (per epoch, every rank in parallel, nothing overlapped with compute):
  global raw      max(raw dataset / shared FS bandwidth, raw share / one rank's FS client bandwidth)
  global tezip    the same for the compressed dataset (every rank reads its new share each epoch)
  partial Q       max over ranks of (bytes it receives / its network link), after epoch 0; the store
                  is read at local SSD speed (max share / ssd), overlapped with the exchange: the
                  epoch costs the larger of the two
"""
import argparse
import heapq
import random


def simulate(P, Q, n_per_rank, cv, epochs, seed=1):
    """Owners of blocks, as StreamPlan::owners with equal sample counts; returns per-epoch
    (bytes held per rank, bytes received per rank) with block sizes of mean 1."""
    rng = random.Random(seed)
    B = P * n_per_rank
    sigma2 = __import__("math").log(1 + cv * cv)
    mu = -sigma2 / 2
    size = [rng.lognormvariate(mu, sigma2 ** 0.5) for _ in range(B)]
    order = list(range(B))
    rng.shuffle(order)
    owner = [0] * B
    heap = [(0, r) for r in range(P)]
    for b in order:
        load, r = heapq.heappop(heap)
        owner[b] = r
        heapq.heappush(heap, (load + 1, r))
    out = []
    for e in range(1, epochs + 1):
        held = [[] for _ in range(P)]
        for b in range(B):
            held[owner[b]].append(b)
        load = [0] * P
        pool = []
        for r in range(P):
            rng.shuffle(held[r])
            m = round(Q * len(held[r]))
            pool += [(b, r) for b in held[r][:m]]
            load[r] = len(held[r]) - m
        rng.shuffle(pool)
        heap = [(load[r], r) for r in range(P)]
        heapq.heapify(heap)
        received = [0.0] * P
        for b, frm in pool:
            first = heapq.heappop(heap)
            if first[1] == frm:
                second = heapq.heappop(heap)
                heapq.heappush(heap, first)
                first = second
            owner[b] = first[1]
            received[first[1]] += size[b]
            heapq.heappush(heap, (first[0] + 1, first[1]))
        bytes_held = [0.0] * P
        for b in range(B):
            bytes_held[owner[b]] += size[b]
        out.append((bytes_held, received))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--raw-tb", type=float, default=10)
    p.add_argument("--ratio", type=float, default=16.8, help="compression ratio (measured: Moving MNIST lossless, bench/distributed_train.py)")
    p.add_argument("--gop-raw-mib", type=float, default=1.0, help="raw bytes of one GOP (16 frames of 256x256 8-bit)")
    p.add_argument("--chunk-cv", type=float, default=0.3, help="coefficient of variation of compressed chunk sizes")
    p.add_argument("--fs-gbs", type=float, default=100, help="shared file system, aggregate GB/s")
    p.add_argument("--fs-client-gbs", type=float, default=5, help="shared file system, GB/s one rank can read")
    p.add_argument("--net-gbs", type=float, default=12.5, help="network link per rank, GB/s (100 Gb/s)")
    p.add_argument("--ssd-gbs", type=float, default=3, help="node-local SSD read per rank, GB/s")
    p.add_argument("--blocks-per-rank", type=int, default=256, help="blocks per rank in the simulated plan (balance only)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--ranks", default="16,64,256,1024,4096")
    p.add_argument("--q", default="0.1,0.3")
    a = p.parse_args()
    raw = a.raw_tb * 1e12
    comp = raw / a.ratio
    blocks = raw / (a.gop_raw_mib * 2 ** 20)
    print(f"{a.raw_tb:g} TB raw at ratio {a.ratio:g}: {comp / 1e12:.3f} TB compressed, {blocks / 1e6:.1f} M GOPs of "
          f"{a.gop_raw_mib:g} MiB raw ({a.gop_raw_mib * 2 ** 20 / a.ratio / 1e3:.0f} KB compressed, CV {a.chunk_cv:g}); shared FS "
          f"{a.fs_gbs:g} GB/s ({a.fs_client_gbs:g} GB/s per rank), network {a.net_gbs:g} GB/s and SSD {a.ssd_gbs:g} GB/s per rank\n")
    print("| ranks | Q | store/rank GB | sent/rank/epoch GB | held max/mean | received max/mean | epoch I/O: global raw s | global tezip s | partial s | speed-up vs global tezip |")
    print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for P in map(int, a.ranks.split(",")):
        share = comp / P
        n_real = blocks / P
        for Q in map(float, a.q.split(",")):
            # The balance of a rank's bytes scales as cv / sqrt(n): simulate with n_sim blocks per
            # rank, then scale the spread to the real n.
            n_sim = min(a.blocks_per_rank, max(1, int(n_real)))
            res = simulate(P, Q, n_sim, a.chunk_cv, a.epochs)
            held, recv = res[-1]
            mean_h = sum(held) / P
            mean_r = sum(recv) / P
            scale = (n_sim / n_real) ** 0.5
            held_imb = 1 + (max(held) / mean_h - 1) * scale
            recv_imb = 1 + (max(recv) / mean_r - 1) * scale if mean_r else 1
            sent = Q * share
            t_raw = max(raw / (a.fs_gbs * 1e9), raw / P / (a.fs_client_gbs * 1e9))
            t_tezip = max(comp / (a.fs_gbs * 1e9), share / (a.fs_client_gbs * 1e9))
            t_partial = max(sent * recv_imb / (a.net_gbs * 1e9), share * held_imb / (a.ssd_gbs * 1e9))
            print(f"| {P} | {Q:g} | {share * held_imb / 1e9:.2f} | {sent / 1e9:.3f} | {held_imb:.3f} | {recv_imb:.3f} | "
                  f"{t_raw:.0f} | {t_tezip:.1f} | {t_partial:.2f} | {t_tezip / t_partial:.1f}x |")


if __name__ == "__main__":
    main()
