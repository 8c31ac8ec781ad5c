#!/usr/bin/python3
"""Does partial exchange train as well as a global shuffle? A small, honest check on one machine.

Moving MNIST (datasets/fetch mmnist: 100 sequences x 20 frames of 64x64), 80 sequences for
training, compressed losslessly into one archive (GOPs of 4), 20 held out. A next-frame predictor
(3 frames in, the 4th out, at 32x32) is trained data-parallel on 4 MPI ranks: each rank reads its
own tezip.Stream, gradients are averaged with mpi4py's Allreduce (what DDP does), same seed, same
model initialisation and the same number of steps in every condition:

    global   exchange=1, every rank reads from the shared archive each epoch (a global reshuffle
             of GOPs)
    local    exchange=0, node-local stores: each rank keeps its first-epoch chunks
    q0.1     exchange=0.1 over MPI between the stores
    q0.3     exchange=0.3 over MPI between the stores

Run (about 2 minutes on 2 cores):
    bench/distributed_train.py [--build build-notorch] [--mmnist PATH/mmnist.npy] [--epochs 6]
It starts `mpirun -np 4` itself for each condition and prints a Markdown table: validation MSE
after each epoch (x 1e3) and, per epoch and rank on average, compressed bytes read from the shared
archive and sent over MPI.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def rank_main(args):
    import numpy as np
    import torch
    from mpi4py import MPI

    import tezip

    torch.set_num_threads(1)
    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    q = args.condition
    val = np.load(args.val)  # (N, 20, 64, 64) uint8

    def prep(clips):  # (B, 4, 64, 64) uint8 -> (B, 4, 32, 32) float
        x = torch.from_numpy(np.ascontiguousarray(clips)).float().div_(255)
        return torch.nn.functional.avg_pool2d(x, 2)

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 1, 3, padding=1))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    vclips = np.stack([val[s, t:t + 4] for s in range(val.shape[0]) for t in range(0, 16, 4)])
    vx = prep(vclips)
    results = []
    store = os.path.join(args.work, f"store-{rank}")
    for epoch in range(args.epochs):
        kwargs = dict(clip_len=4, stride=1, seed=1, epoch=epoch, shuffle_buffer=64, threads=1)
        if q == "global":
            stream = tezip.Stream(args.archive, rank=rank, world_size=world, exchange=1.0, **kwargs)
            shared = stream.exchange_report()["bytes"][rank]  # all it reads comes from the shared file
            sent = 0
        else:
            before = tezip.store_traffic(store)["source_bytes"] if epoch else 0
            stream = tezip.Stream(args.archive, exchange=0.0 if q == "local" else float(q[1:]), store=store,
                                  comm=comm, exchange_timeout=60, **kwargs)
            shared = tezip.store_traffic(store)["source_bytes"] - before
            sent = stream.store_stats()["sent_bytes"]
        batch = []
        model.train()
        for sample in stream:
            batch.append(sample.frames)
            if len(batch) < args.batch:
                continue
            x = prep(np.stack(batch))
            batch = []
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x[:, :3]), x[:, 3:])
            loss.backward()
            for p in model.parameters():  # data-parallel: the mean gradient over the ranks
                g = p.grad.numpy()
                comm.Allreduce(MPI.IN_PLACE, g, op=MPI.SUM)
                g /= world
            opt.step()
        model.eval()
        with torch.no_grad():
            vloss = torch.nn.functional.mse_loss(model(vx[:, :3]), vx[:, 3:]).item()
        stats = comm.gather({"shared": shared, "sent": sent}, root=0)
        if rank == 0:
            results.append({"epoch": epoch, "val_mse": vloss,
                            "shared_bytes": sum(s["shared"] for s in stats) / world,
                            "sent_bytes": sum(s["sent"] for s in stats) / world})
    if rank == 0:
        with open(os.path.join(args.work, "result.json"), "w") as f:
            json.dump(results, f)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build-notorch"))
    p.add_argument("--mmnist", default=None, help="mmnist.npy (default: the datasets/fetch cache)")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--conditions", default="global,local,q0.1,q0.3")
    p.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--condition", help=argparse.SUPPRESS)
    p.add_argument("--archive", help=argparse.SUPPRESS)
    p.add_argument("--val", help=argparse.SUPPRESS)
    p.add_argument("--work", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rank_main:
        return rank_main(args)

    import numpy as np
    candidates = [args.mmnist, os.environ.get("TEZIP_CACHE", "") and os.path.join(os.environ["TEZIP_CACHE"], "mmnist/mmnist.npy"),
                  os.path.join(ROOT, ".cache/datasets/mmnist/mmnist.npy"), "/work/main/.cache/datasets/mmnist/mmnist.npy"]
    mmnist = next((c for c in candidates if c and os.path.exists(c)), None)
    if not mmnist:
        sys.exit("no mmnist.npy: run datasets/fetch mmnist (or give --mmnist)")
    data = np.load(mmnist)
    with tempfile.TemporaryDirectory(prefix="tezip-train-") as tmp:
        train = os.path.join(tmp, "train.npy")
        np.save(train, data[:80])
        np.save(os.path.join(tmp, "val.npy"), data[80:])
        archive = os.path.join(tmp, "train.tzp")
        subprocess.run([os.path.join(args.build, "tezip"), "compress", train, "-o", archive, "--gop", "4", "-q"], check=True)
        raw = data[:80].nbytes
        compressed = os.path.getsize(archive)
        ratio = raw / compressed
        env = dict(os.environ, PYTHONPATH=os.path.join(args.build, "python"), OMP_NUM_THREADS="1")
        rows = {}
        for cond in args.conditions.split(","):
            work = os.path.join(tmp, cond)
            os.makedirs(work)
            start = time.time()
            subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(args.ranks), sys.executable,
                            os.path.abspath(__file__), "--rank-main", "--condition", cond, "--archive", archive,
                            "--val", os.path.join(tmp, "val.npy"), "--work", work, "--epochs", str(args.epochs),
                            "--batch", str(args.batch)], check=True, env=env, timeout=900)
            with open(os.path.join(work, "result.json")) as f:
                rows[cond] = json.load(f)
            print(f"{cond}: {time.time() - start:.0f} s", file=sys.stderr, flush=True)
    print(f"Moving MNIST, 80 training sequences ({raw / 1e6:.1f} MB raw, {compressed / 1e6:.2f} MB "
          f"compressed, ratio {ratio:.2f}), {args.ranks} ranks, batch {args.batch} per rank, {args.epochs} epochs\n")
    print("| condition | " + " | ".join(f"val MSE x1e3 e{e}" for e in range(args.epochs)) +
          " | shared-file KB/rank, epoch 0 | later epochs | MPI sent KB/rank/epoch (later) |")
    print("|---|" + "--:|" * (args.epochs + 3))
    for cond, r in rows.items():
        later = r[1:] or r
        print(f"| {cond} | " + " | ".join(f"{x['val_mse'] * 1e3:.3f}" for x in r) +
              f" | {r[0]['shared_bytes'] / 1e3:.1f} | {sum(x['shared_bytes'] for x in later) / len(later) / 1e3:.1f}"
              f" | {sum(x['sent_bytes'] for x in later) / len(later) / 1e3:.1f} |")


if __name__ == "__main__":
    main()
