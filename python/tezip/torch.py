"""PyTorch adapter: `ClipDataset`, an IterableDataset over a tezip Stream.

Each DataLoader worker of each torch.distributed rank reads its own shard: the stream is opened with
rank = rank * num_workers + worker_id and world_size = world_size * num_workers, so shards are
disjoint, cut on GOP boundaries, and every (rank, worker) yields the same number of samples (short
shards repeat a few of their own samples; see tezip.Stream's balance). Call set_epoch(e) before
each epoch, as with DistributedSampler, for a new shuffle and the partial exchange of blocks.
"""
import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import IterableDataset, get_worker_info

from . import Stream


class ClipDataset(IterableDataset):
    """Yields clips as tensors (T, C, H, W) (channels_first) or (T, H, W, C).

    dtype=None keeps uint8, and gives int32 for uint16 data (torch has no uint16);
    a floating dtype scales to [0, 1] by the pixel type's maximum.
    With return_index=True, yields (clip, sequence, start).
    """

    def __init__(self, path, clip_len=1, stride=1, seed=0, shuffle_buffer=256, exchange=1.0,
                 threads=2, prefetch=8, balance="repeat", dtype=None, channels_first=True,
                 return_index=False, rank=None, world_size=None):
        super().__init__()
        self.path = str(path)
        self.options = dict(clip_len=clip_len, stride=stride, seed=seed, shuffle_buffer=shuffle_buffer,
                            exchange=exchange, threads=threads, prefetch=prefetch, balance=balance)
        self.dtype = dtype
        self.channels_first = channels_first
        self.return_index = return_index
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def _shard(self):
        rank, world = self.rank, self.world_size
        if rank is None or world is None:
            if dist.is_available() and dist.is_initialized():
                rank, world = dist.get_rank(), dist.get_world_size()
            else:
                rank, world = 0, 1
        info = get_worker_info()
        workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
        return rank * workers + worker, world * workers

    def stream(self):
        rank, world = self._shard()
        return Stream(self.path, rank=rank, world_size=world, epoch=self.epoch, **self.options)

    def __len__(self):
        # Samples this rank yields per epoch over all its DataLoader workers.
        rank, world = self._shard()
        return len(Stream(self.path, rank=rank, world_size=world, epoch=self.epoch, threads=0,
                          **{k: v for k, v in self.options.items() if k != "threads"}))

    def _tensor(self, frames):
        maximum = 255.0 if frames.dtype == np.uint8 else 65535.0
        if frames.dtype == np.uint16:
            frames = frames.astype(np.int32)
        t = torch.from_numpy(frames)
        if t.dim() == 3:  # gray: (T, H, W) -> (T, H, W, 1)
            t = t.unsqueeze(-1)
        if self.channels_first:
            t = t.permute(0, 3, 1, 2).contiguous()
        if self.dtype is not None:
            t = t.to(self.dtype)
            if t.is_floating_point():
                t = t / maximum
        return t

    def __iter__(self):
        for sample in self.stream():
            clip = self._tensor(sample.frames)
            yield (clip, sample.sequence, sample.start) if self.return_index else clip
