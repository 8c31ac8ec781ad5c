"""Read tezip archives from Python.

    r = tezip.Reader("data.tzp")        # or a dataset index
    r.frame(seq, t)                      # ndarray (H, W) or (H, W, C), uint8 or uint16
    for sample in tezip.Stream("data.tzp", clip_len=8, stride=8, shuffle_buffer=256):
        sample.frames                    # ndarray (T, H, W[, C])

Colour frames keep the channel order they were stored in: BGR for image files read by OpenCV.
`tezip.torch.ClipDataset` wraps Streams for torch.utils.data.DataLoader, and `tezip.torch.ClipDataLoader`
resumes an epoch exactly; `import tezip` alone imports no torch and maps no libtorch.
"""
from ._tezip import DataError, InputError, Reader, Sample, Stream, __version__

__all__ = ["DataError", "InputError", "Reader", "Sample", "Stream", "__version__"]
