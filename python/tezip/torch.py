"""PyTorch adapter: `ClipDataset`, an IterableDataset over tezip Streams, and `ClipDataLoader`.

This file imports the user's own `torch` (pip, conda or Debian); the compiled tezip module links no
libtorch, so `import tezip` alone never loads one.

Shards. Worker w of the DataLoader of rank r reads its own stream, opened with rank = r * W + w and
world_size = world_size * W (W = num_workers, at least 1): shards are disjoint, cut on GOP
boundaries, and every (rank, worker) delivers the same number n of samples (a short shard repeats a
few of its own samples, see tezip.Stream's balance). len(dataset) = W * n, the samples a rank
delivers per epoch; it needs W, which ClipDataLoader tells the dataset (or pass num_workers=).

Rank. The rank and world size are taken in the process that builds the DataLoader: rank=/world_size=
if given, else torch.distributed where it is initialized: when the dataset is made, at set_epoch(),
len(), iteration, and when it is pickled for spawned workers. They travel with the dataset, so a
worker started with 'spawn' or 'forkserver' (which has no process group) reads the right shard.

Epochs. set_epoch(e), as with DistributedSampler, writes e into memory shared with the workers, which
read it whenever an epoch begins: persistent workers follow too. A new epoch shuffles anew and hands
a fraction `exchange` of each rank's blocks to other ranks.

Resume. ClipDataLoader counts the batches it hands out. Its state_dict() says where each worker's
stream stands; load_state_dict() makes the next pass of that epoch start every worker's stream there,
so the rest of the epoch is exactly the batches not yet delivered, in the same order (as MosaicML
Streaming's StreamingDataLoader). The state belongs to one rank: save one per rank. Resuming needs
the same dataset options, world size and num_workers.
"""
import ctypes
import multiprocessing
import multiprocessing.context
import os

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from . import Stream

__all__ = ["ClipDataset", "ClipDataLoader"]

_STATE_VERSION = 1
_MAX_WORKERS = 256
# Slots of the shared integers.
_EPOCH, _PASS, _RESUME_PASS, _RESUME_EPOCH, _RESUME_NEXT, _RESUME_POSITIONS = range(6)
# Options that fix which samples a stream delivers, and in which order (threads and prefetch do not).
_ORDER_OPTIONS = ("clip_len", "stride", "seed", "shuffle_buffer", "exchange", "balance")


def default_threads(workers=1):
    """Decoding threads per stream when none are given: this process's CPUs shared among the node's
    training processes (LOCAL_WORLD_SIZE, set by torchrun) and `workers` DataLoader workers."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        local = 1
    return max(1, cpus // (local * max(1, workers)))


class _SharedInts:
    """Integers in shared memory, seen by the main process and by its DataLoader workers alike,
    whether they were forked (inherited mapping) or spawned (the mapping's descriptor is passed while
    the worker starts). Pickled at any other time (pickle.dumps, deepcopy) it becomes a copy."""

    def __init__(self, values=()):
        self.array = multiprocessing.RawArray(ctypes.c_int64, _RESUME_POSITIONS + _MAX_WORKERS)
        for i, v in enumerate(values):
            self.array[i] = v

    def __getitem__(self, i):
        return int(self.array[i])

    def __setitem__(self, i, v):
        self.array[i] = int(v)

    def __reduce__(self):
        if multiprocessing.context.get_spawning_popen() is not None:
            return _attach_shared, (self.array,)
        return _SharedInts, (list(self.array),)


def _attach_shared(array):
    shared = _SharedInts.__new__(_SharedInts)
    shared.array = array
    return shared


def _advance(start, first, n, batch_size, drop_last, batches):
    """Where the workers' streams stand after the DataLoader handed out `batches` batches of a pass
    that began with stream positions `start` and logical worker `first` serving first.

    A DataLoader over an IterableDataset asks its workers for batches in turn (0, 1, ..., W-1, 0,
    ...) and hands them out in that order; a worker whose stream has ended is skipped. Worker p of a
    pass serves the logical worker (p + first) % W, so a resumed pass goes on in the order the
    interrupted one would have. Returns (positions, next logical worker)."""
    workers = len(start)
    positions = list(start)
    w = first % workers

    def serves(i):
        left = n - positions[i]
        return left >= batch_size if drop_last else left > 0

    for _ in range(batches):
        for _ in range(workers):
            if serves(w):
                break
            w = (w + 1) % workers
        else:
            raise ValueError("the DataLoader handed out more batches than the streams hold")
        positions[w] += min(batch_size, n - positions[w])
        w = (w + 1) % workers
    return positions, w


class ClipDataset(IterableDataset):
    """Yields clips as tensors (T, C, H, W) (channels_first) or (T, H, W, C).

    dtype=None keeps uint8, and gives int32 for uint16 data (torch has no uint16);
    a floating dtype scales to [0, 1] by the pixel type's maximum.
    With return_index=True, yields (clip, sequence, start).
    rank/world_size: this process's place among the training processes (both or neither; default:
    torch.distributed's, else 0 of 1). num_workers: the DataLoader's (ClipDataLoader sets it).
    threads: decoding threads of each stream; None (default) shares this process's CPUs (its
    affinity) among the training processes of the node (torchrun's LOCAL_WORLD_SIZE) and the
    DataLoader workers, at least 1 each, so that workers do not oversubscribe the cores.
    """

    def __init__(self, path, clip_len=1, stride=1, seed=0, shuffle_buffer=256, exchange=1.0,
                 threads=None, prefetch=8, balance="repeat", dtype=None, channels_first=True,
                 return_index=False, rank=None, world_size=None, num_workers=None):
        super().__init__()
        if (rank is None) != (world_size is None):
            raise ValueError("give both rank and world_size, or neither")
        if rank is not None and not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in [0, world_size={world_size})")
        self.path = str(path)
        self.options = dict(clip_len=clip_len, stride=stride, seed=seed, shuffle_buffer=shuffle_buffer,
                            exchange=exchange, threads=threads, prefetch=prefetch, balance=balance)
        self.dtype = dtype
        self.channels_first = channels_first
        self.return_index = return_index
        self.rank = rank
        self.world_size = world_size
        self.num_workers = num_workers
        self._placement = None      # (rank, world_size) found in the main process
        self._shared = _SharedInts()
        self._shared[_RESUME_PASS] = -1  # nothing to resume
        self._lengths = {}          # (epoch, workers, rank, world) -> samples per worker
        self._delivered = None      # this process's own pass: [epoch, position] (num_workers=0)
        self._find_placement()

    # -- where this process stands -----------------------------------------------------------------

    def _find_placement(self):
        if get_worker_info() is not None:
            return  # a worker: only what the main process found counts
        if self.rank is not None:
            self._placement = (self.rank, self.world_size)
        elif dist.is_available() and dist.is_initialized():
            self._placement = (dist.get_rank(), dist.get_world_size())

    def placement(self):
        """(rank, world_size) of this training process."""
        self._find_placement()
        if self._placement is not None:
            return self._placement
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()  # a forked worker, with its parent's group
        return 0, 1

    def _workers(self):
        """(W, this worker's id): the DataLoader's workers, or the main process alone."""
        info = get_worker_info()
        if info is None:
            return 1, 0
        if self.num_workers is not None and max(1, self.num_workers) != info.num_workers:
            raise ValueError(f"ClipDataset(num_workers={self.num_workers}) runs in a DataLoader with "
                             f"{info.num_workers} workers")
        if info.num_workers > _MAX_WORKERS:
            raise ValueError(f"ClipDataset supports at most {_MAX_WORKERS} DataLoader workers")
        return info.num_workers, info.id

    def __getstate__(self):
        self._find_placement()  # pickled for spawned workers, in the process that knows the rank
        return self.__dict__.copy()

    # -- epochs and length -------------------------------------------------------------------------

    @property
    def epoch(self):
        return self._shared[_EPOCH]

    @epoch.setter
    def epoch(self, epoch):
        self.set_epoch(epoch)

    def set_epoch(self, epoch):
        self._find_placement()
        self._shared[_EPOCH] = int(epoch)

    def _stream_options(self, worker, workers, epoch):
        rank, world = self.placement()
        options = dict(rank=rank * workers + worker, world_size=world * workers, epoch=epoch, **self.options)
        if options["threads"] is None:
            options["threads"] = default_threads(workers)
        return options

    def samples_per_worker(self, epoch=None):
        """Samples each DataLoader worker delivers in an epoch (the same for all of them)."""
        epoch = self.epoch if epoch is None else int(epoch)
        workers = max(1, self.num_workers or 0)
        key = (epoch, workers) + self.placement()
        if key not in self._lengths:
            options = self._stream_options(0, workers, epoch)
            options["threads"] = 0
            self._lengths[key] = len(Stream(self.path, **options))
        return self._lengths[key]

    def __len__(self):
        """Samples this rank delivers per epoch, over all its DataLoader workers."""
        return max(1, self.num_workers or 0) * self.samples_per_worker()

    # -- resume ------------------------------------------------------------------------------------

    def _state(self, epoch, positions, next_worker):
        rank, world = self.placement()
        return {"version": _STATE_VERSION, "epoch": int(epoch), "positions": [int(p) for p in positions],
                "next_worker": int(next_worker), "samples": int(sum(positions)),
                "num_workers": len(positions), "rank": rank, "world_size": world,
                "samples_per_worker": self.samples_per_worker(epoch),
                "options": {k: self.options[k] for k in _ORDER_OPTIONS}}

    def _armed(self, workers):
        """The resume that the next pass applies, as (epoch, positions, first), or None."""
        s = self._shared
        if s[_RESUME_PASS] != s[_PASS] + 1 or s[_RESUME_EPOCH] != s[_EPOCH]:
            return None
        return s[_EPOCH], [s[_RESUME_POSITIONS + i] for i in range(workers)], s[_RESUME_NEXT]

    def state_dict(self):
        """Where iterating this dataset in this process (no DataLoader workers) stands."""
        if self._delivered is None:
            armed = self._armed(1)
            if armed is not None:
                return self._state(armed[0], armed[1], 0)
            return self._state(self.epoch, [0], 0)
        return self._state(self._delivered[0], [self._delivered[1]], 0)

    def load_state_dict(self, state):
        """Makes the next pass over epoch state['epoch'] start where `state` was saved (set_epoch to
        another epoch first discards it). Sets the epoch to state['epoch']."""
        if state.get("version") != _STATE_VERSION:
            raise ValueError("not a ClipDataset state (or one of another version)")
        workers = len(state["positions"])
        if max(1, self.num_workers or 0) != workers:
            raise ValueError(f"the state was saved with {workers} DataLoader workers; this dataset runs with "
                             f"{max(1, self.num_workers or 0)}")
        if tuple(self.placement()) != (state["rank"], state["world_size"]):
            raise ValueError(f"the state was saved by rank {state['rank']} of {state['world_size']}; this is "
                             f"rank {self.placement()[0]} of {self.placement()[1]}")
        mine = {k: self.options[k] for k in _ORDER_OPTIONS}
        if mine != state["options"]:
            raise ValueError(f"the state was saved with options {state['options']}, not {mine}")
        epoch = int(state["epoch"])
        if self.samples_per_worker(epoch) != state["samples_per_worker"]:
            raise ValueError("the state was saved for another dataset")
        s = self._shared
        s[_EPOCH] = epoch
        for i, p in enumerate(state["positions"]):
            s[_RESUME_POSITIONS + i] = p
        s[_RESUME_NEXT] = state["next_worker"]
        s[_RESUME_EPOCH] = epoch
        s[_RESUME_PASS] = s[_PASS] + 1

    # -- iteration ---------------------------------------------------------------------------------

    def stream(self, worker=None, workers=None, position=0):
        """The tezip.Stream of one worker's shard in the current epoch (default: this process's)."""
        if worker is None:
            workers, worker = self._workers()
        return self._open(position, self._stream_options(worker, workers, self.epoch))

    def _open(self, position, options, channels_first=False):
        if position:
            return Stream(self.path, position=position, channels_first=channels_first, **options)
        return Stream(self.path, channels_first=channels_first, **options)

    def _tensor(self, frames):
        maximum = 255.0 if frames.dtype == np.uint8 else 65535.0
        if frames.dtype == np.uint16:
            frames = frames.astype(np.int32)
        t = torch.from_numpy(frames)
        if t.dim() == 3:  # gray: (T, H, W) -> (T, 1, H, W) or (T, H, W, 1)
            t = t.unsqueeze(1 if self.channels_first else -1)
        if self.dtype is not None:
            t = t.to(self.dtype)
            if t.is_floating_point():
                t = t / maximum
        return t

    def __iter__(self):
        workers, worker = self._workers()
        main = get_worker_info() is None
        if main:
            self._find_placement()
            self._shared[_PASS] = self._shared[_PASS] + 1  # in a worker, ClipDataLoader counts passes
        s = self._shared
        epoch = s[_EPOCH]
        logical, position = worker, 0
        if s[_RESUME_PASS] == s[_PASS] and s[_RESUME_EPOCH] == epoch:
            logical = (worker + s[_RESUME_NEXT]) % workers
            position = s[_RESUME_POSITIONS + logical]
        # channels_first: the stream hands out the decoder's planes as they are, (T, C, H, W),
        # instead of interleaving them for a permute to undo (a fifth of this loader's time).
        stream = self._open(position, self._stream_options(logical, workers, epoch), self.channels_first)
        if main:
            self._delivered = [epoch, position]
        for sample in stream:
            clip = self._tensor(sample.frames)
            if main:
                self._delivered[1] += 1
            yield (clip, sample.sequence, sample.start) if self.return_index else clip


class ClipDataLoader(DataLoader):
    """A DataLoader over a ClipDataset with state_dict()/load_state_dict() for exact mid-epoch resume.

        loader = ClipDataLoader(dataset, batch_size=8, num_workers=4, persistent_workers=True)
        loader.load_state_dict(checkpoint["loader"])       # on resume; sets the dataset's epoch
        for epoch in range(loader.dataset.epoch, epochs):
            loader.dataset.set_epoch(epoch)
            for batch in loader:
                ...
                checkpoint["loader"] = loader.state_dict()  # per rank
    """

    def __init__(self, dataset, *args, **kwargs):
        if not isinstance(dataset, ClipDataset):
            raise TypeError("ClipDataLoader reads a tezip.torch.ClipDataset")
        super().__init__(dataset, *args, **kwargs)
        workers = max(1, self.num_workers)
        if dataset.num_workers is None:
            dataset.num_workers = self.num_workers
        elif max(1, dataset.num_workers) != workers:
            raise ValueError(f"ClipDataset(num_workers={dataset.num_workers}) in a DataLoader with "
                             f"num_workers={self.num_workers}")
        self._pass = None

    def _batching(self):
        if self.batch_size is None:
            return 1, False
        return self.batch_size, self.drop_last

    def __iter__(self):
        ds = self.dataset
        workers = max(1, self.num_workers)
        armed = ds._armed(workers)
        epoch, start, first = armed if armed is not None else (ds.epoch, [0] * workers, 0)
        self._pass = {"epoch": epoch, "start": start, "first": first, "batches": 0,
                      "n": ds.samples_per_worker(epoch)}
        if self.num_workers > 0:
            ds._find_placement()
            ds._shared[_PASS] = ds._shared[_PASS] + 1  # without workers, the dataset counts its own passes
        for batch in super().__iter__():
            self._pass["batches"] += 1
            yield batch

    def state_dict(self):
        """Where this rank's pass stands: what was handed out, not what workers decoded ahead."""
        ds = self.dataset
        workers = max(1, self.num_workers)
        if self._pass is None:
            armed = ds._armed(workers)
            if armed is not None:
                return ds._state(*armed)
            return ds._state(ds.epoch, [0] * workers, 0)
        p = self._pass
        batch_size, drop_last = self._batching()
        positions, next_worker = _advance(p["start"], p["first"], p["n"], batch_size, drop_last, p["batches"])
        return ds._state(p["epoch"], positions, next_worker)

    def load_state_dict(self, state):
        self._pass = None
        self.dataset.load_state_dict(state)
