"""tezip.torch: ClipDataset and ClipDataLoader under DataLoader workers (fork and spawn), persistent
workers, two ranks (explicit, and torch.distributed with gloo), len(), and exact mid-epoch resume."""
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as tmp
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False

SEQUENCES, FRAMES, GOP = 4, 12, 3  # 16 blocks: 4 shards of 4 with 2 ranks x 2 workers
CLIP, STRIDE = 2, 2                # 5 samples per sequence (starts 0..8)
ALL = {(q, t) for q in range(SEQUENCES) for t in range(0, FRAMES - CLIP + 1, STRIDE)}


def make_archive(folder):
    rng = np.random.default_rng(7)
    frames = (rng.random((SEQUENCES, FRAMES, 9, 8)) * 255).astype(np.uint8)
    npy = os.path.join(folder, "clips.npy")
    np.save(npy, frames)
    out = os.path.join(folder, "clips.tzp")
    subprocess.run([os.environ.get("TEZIP_BINARY", "tezip"), "compress", npy, "-o", out, "--gop", str(GOP), "-q"],
                   check=True)
    return out, frames


def keys(batches):
    """[(sequence, start)] of index batches, in delivery order."""
    out = []
    for _, seqs, starts in batches:
        out += list(zip(seqs.tolist(), starts.tolist()))
    return out


def dataset(path, **kw):
    import tezip.torch as tt
    options = dict(clip_len=CLIP, stride=STRIDE, seed=11, shuffle_buffer=4, threads=1, return_index=True)
    options.update(kw)
    return tt.ClipDataset(path, **options)


def loader(ds, **kw):
    import tezip.torch as tt
    return tt.ClipDataLoader(ds, **kw)


def ddp_rank(rank, world, init, path, out):
    """One rank of a gloo process group (torch.multiprocessing.spawn): datasets made before and after
    init_process_group, read by DataLoaders with spawned workers."""
    early = dataset(path)  # made before the process group: found at set_epoch / pickling
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    late = dataset(path)
    result = {}
    for name, ds in (("early", early), ("late", late)):
        ds.set_epoch(1)
        result[name] = keys(loader(ds, batch_size=3, num_workers=2, multiprocessing_context="spawn"))
        result[name + "_len"] = len(ds)
    torch.save(result, os.path.join(out, f"rank{rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()


@unittest.skipUnless(HAVE_TORCH, "torch is not installed")
class ClipDatasetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.path, cls.frames = make_archive(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check_epoch(self, got, ds):
        self.assertEqual(len(got), len(ds), "len() is what an epoch delivers")
        self.assertEqual(set(got), ALL)

    def test_workers_fork_and_spawn(self):
        reference = None
        for context in ("fork", "spawn"):
            with self.subTest(context=context):
                ds = dataset(self.path)
                batches = list(loader(ds, batch_size=3, num_workers=2, multiprocessing_context=context))
                clips = batches[0][0]
                self.assertEqual(tuple(clips.shape[1:]), (CLIP, 1, 9, 8))
                q, t = batches[0][1][0].item(), batches[0][2][0].item()
                np.testing.assert_array_equal(clips[0, :, 0].numpy(), self.frames[q, t:t + CLIP])
                got = keys(batches)
                self.check_epoch(got, ds)
                if reference is None:
                    reference = got
                self.assertEqual(got, reference, "fork and spawn deliver the same order")

    def test_default_threads_share_the_cpus(self):
        import tezip.torch as tt
        cpus = len(os.sched_getaffinity(0))
        saved = os.environ.pop("LOCAL_WORLD_SIZE", None)
        try:
            self.assertEqual(tt.default_threads(), cpus)
            self.assertEqual(tt.default_threads(2), max(1, cpus // 2))
            self.assertEqual(tt.default_threads(4 * cpus), 1, "at least one thread")
            os.environ["LOCAL_WORLD_SIZE"] = "2"
            self.assertEqual(tt.default_threads(1), max(1, cpus // 2), "torchrun's processes on the node share them")
            os.environ["LOCAL_WORLD_SIZE"] = "not a number"
            self.assertEqual(tt.default_threads(1), cpus)
        finally:
            os.environ.pop("LOCAL_WORLD_SIZE", None)
            if saved is not None:
                os.environ["LOCAL_WORLD_SIZE"] = saved
        # The default (threads=None) in the main process and in workers delivers the whole epoch,
        # the same order as one thread.
        for workers in (0, 2):
            with self.subTest(workers=workers):
                ds = dataset(self.path, threads=None)
                got = keys(loader(ds, batch_size=3, num_workers=workers))
                self.check_epoch(got, ds)
                self.assertEqual(got, keys(loader(dataset(self.path, threads=1), batch_size=3, num_workers=workers)))

    def test_len_matches_delivery(self):
        for workers in (0, 1, 3):
            with self.subTest(workers=workers):
                ds = dataset(self.path, num_workers=workers)
                got = keys(torch.utils.data.DataLoader(ds, batch_size=4, num_workers=workers))
                self.check_epoch(got, ds)

    def test_persistent_workers_follow_set_epoch(self):
        ds = dataset(self.path)
        dl = loader(ds, batch_size=3, num_workers=2, persistent_workers=True, multiprocessing_context="spawn")
        epochs = []
        for epoch in range(3):
            ds.set_epoch(epoch)
            epochs.append(keys(dl))
            self.check_epoch(epochs[-1], ds)
        self.assertNotEqual(epochs[0], epochs[1])
        self.assertNotEqual(epochs[1], epochs[2])
        fresh = dataset(self.path)
        fresh.set_epoch(1)
        self.assertEqual(keys(loader(fresh, batch_size=3, num_workers=2)), epochs[1],
                         "persistent workers deliver epoch 1 as fresh workers do")

    def test_two_ranks(self):
        shards = []
        for rank in range(2):
            ds = dataset(self.path, rank=rank, world_size=2, balance="drop")
            ds.set_epoch(2)
            got = keys(loader(ds, batch_size=2, num_workers=2, multiprocessing_context="spawn"))
            self.assertEqual(len(got), len(ds))
            shards.append(got)
        self.assertEqual(len(shards[0]), len(shards[1]), "equal counts per rank")
        self.assertFalse(set(shards[0]) & set(shards[1]))
        self.assertTrue(set(shards[0]) | set(shards[1]) <= ALL)

    def test_torch_distributed_spawn(self):
        out = tempfile.mkdtemp(dir=self.tmp.name)
        init = "file://" + os.path.join(out, "rendezvous")
        tmp.spawn(ddp_rank, args=(2, init, self.path, out), nprocs=2, join=True)
        ranks = [torch.load(os.path.join(out, f"rank{r}.pt")) for r in range(2)]
        for name in ("early", "late"):
            with self.subTest(dataset=name):
                a, b = (set(k for k in r[name]) for r in ranks)
                self.assertEqual(len(ranks[0][name]), ranks[0][name + "_len"])
                self.assertEqual(len(ranks[0][name]), len(ranks[1][name]))
                self.assertEqual(a | b, ALL)
                self.assertFalse(a & b, "each rank reads its own shard, also in spawned workers")
        # The same as ranks given explicitly.
        explicit = dataset(self.path, rank=1, world_size=2)
        explicit.set_epoch(1)
        self.assertEqual(keys(loader(explicit, batch_size=3, num_workers=2)), ranks[1]["late"])

    def resume_case(self, workers, batch_size, stop, context="fork", drop_last=False):
        whole_ds = dataset(self.path, rank=1, world_size=2)
        whole_ds.set_epoch(3)
        options = dict(batch_size=batch_size, num_workers=workers, drop_last=drop_last)
        if workers:
            options["multiprocessing_context"] = context
        whole = [keys([b]) for b in loader(whole_ds, **options)]

        first_ds = dataset(self.path, rank=1, world_size=2)
        first_ds.set_epoch(3)
        first = loader(first_ds, **options)
        head = []
        for batch in first:
            head.append(keys([batch]))
            if len(head) == stop:
                break
        state = first.state_dict()
        self.assertEqual(state["epoch"], 3)
        self.assertEqual(state["samples"], sum(len(b) for b in head))

        again_ds = dataset(self.path, rank=1, world_size=2)
        again = loader(again_ds, **options)
        again.load_state_dict(state)
        self.assertEqual(again_ds.epoch, 3)
        again_ds.set_epoch(3)  # the usual loop sets the epoch again: the resume stays
        rest = [keys([b]) for b in again]
        self.assertEqual(head + rest, whole, "the resumed pass delivers exactly the batches not yet delivered")
        end = again.state_dict()
        if not drop_last:
            self.assertEqual(end["positions"], [again_ds.samples_per_worker(3)] * max(1, workers))
        self.assertEqual(len(list(again)), len(whole), "a second pass is a whole epoch again")

    def test_resume_with_workers(self):
        for workers, batch_size, stop in ((2, 3, 1), (2, 3, 2), (3, 2, 4), (2, 4, 3)):
            with self.subTest(workers=workers, batch_size=batch_size, stop=stop):
                self.resume_case(workers, batch_size, stop)

    def test_resume_spawn_drop_last_and_main_process(self):
        self.resume_case(2, 3, 3, context="spawn")
        self.resume_case(2, 4, 1, drop_last=True)
        self.resume_case(0, 3, 2)

    def test_resume_into_persistent_workers(self):
        ds = dataset(self.path)
        dl = loader(ds, batch_size=3, num_workers=2, persistent_workers=True)
        ds.set_epoch(4)
        whole = keys(dl)
        ds.set_epoch(4)
        it = iter(dl)
        head = keys([next(it), next(it), next(it)])
        state = dl.state_dict()
        del it
        ds.set_epoch(5)
        keys(dl)                   # the workers go on to another epoch, then the checkpoint is loaded
        dl.load_state_dict(state)  # into the same, still running, workers
        self.assertEqual(head + keys(dl), whole)
        with self.assertRaises(ValueError):
            loader(dataset(self.path, seed=12), batch_size=3, num_workers=2).load_state_dict(state)
        with self.assertRaises(ValueError):
            loader(dataset(self.path), batch_size=3, num_workers=3).load_state_dict(state)

    def test_dataset_state_without_loader(self):
        ds = dataset(self.path)
        ds.set_epoch(2)
        whole = [(q, t) for _, q, t in ds]
        it = iter(ds)
        head = [next(it)[1:] for _ in range(5)]
        state = ds.state_dict()
        self.assertEqual(state["positions"], [5])
        again = dataset(self.path)
        again.load_state_dict(state)
        self.assertEqual(head + [(q, t) for _, q, t in again], whole)

    def test_pickled_copy_is_independent(self):
        import pickle
        ds = dataset(self.path, rank=0, world_size=2)
        ds.set_epoch(6)
        copy = pickle.loads(pickle.dumps(ds))
        self.assertEqual(copy.epoch, 6)
        copy.set_epoch(7)
        self.assertEqual(ds.epoch, 6)
        self.assertEqual(copy.placement(), (0, 2))


if __name__ == "__main__":
    unittest.main()
