"""Read tezip archives from Python.

    r = tezip.Reader("data.tzp")        # or a dataset index
    r.frame(seq, t)                      # ndarray (H, W) or (H, W, C), uint8 or uint16
    for sample in tezip.Stream("data.tzp", clip_len=8, stride=8, shuffle_buffer=256):
        sample.frames                    # ndarray (T, H, W[, C])

Colour frames keep the channel order they were stored in: BGR for image files read by OpenCV.
`tezip.torch.ClipDataset` wraps Streams for torch.utils.data.DataLoader, and `tezip.torch.ClipDataLoader`
resumes an epoch exactly; `import tezip` alone imports no torch and maps no libtorch.

Node-local stores and the partial exchange (docs/distributed.md): one Stream per epoch,

    for epoch in range(epochs):
        for sample in tezip.Stream("/gpfs/data.tzp", epoch=epoch, exchange=0.1,
                                   store="/local/ssd/tezip", comm=MPI.COMM_WORLD):
            ...

reads the global file once (the first epoch stages this rank's chunks), then only the store; each
later epoch's chunks arrive from the other ranks over MPI while the previous epoch is consumed.
"""
import atexit

from ._tezip import (ChunkMissing, DataError, ExchangeError, InputError, Reader, Sample, Stream, StoreFull,
                     __version__, buffer_pool_bytes, built_with_mpi, finish_exchanges, release_buffers,
                     store_traffic)

# Before mpi4py finalises MPI (its own atexit hook was registered earlier, so it runs later).
atexit.register(finish_exchanges)

__all__ = ["ChunkMissing", "DataError", "ExchangeError", "InputError", "Reader", "Sample", "Stream", "StoreFull",
           "__version__", "buffer_pool_bytes", "built_with_mpi", "finish_exchanges", "release_buffers",
           "store_traffic"]
