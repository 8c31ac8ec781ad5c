"""The tezip Python module: Reader, Stream, and the torch adapter when torch imports."""
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import tezip


def synthetic(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    base = np.linspace(0, 1, shape[2])[None, None, :]
    if len(shape) == 4:
        base = base[..., None]
    frames = (base * 0.6 + rng.random(shape) * 0.4) * np.iinfo(dtype).max
    return frames.astype(dtype)


class TezipTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        binary = os.environ.get("TEZIP_BINARY", "tezip")
        cls.gray = synthetic((3, 11, 12, 10), np.uint8, 1)        # 3 sequences of 11 frames
        cls.colour = synthetic((9, 8, 6, 3), np.uint16, 2)       # 9 frames (H, W, C)
        cls.paths = {}
        for name, array in (("gray", cls.gray), ("colour", cls.colour)):
            npy = os.path.join(cls.tmp.name, name + ".npy")
            np.save(npy, array)
            out = os.path.join(cls.tmp.name, name + ".tzp")
            subprocess.run([binary, "compress", npy, "-o", out, "--gop", "3", "-q"], check=True)
            cls.paths[name] = out

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_reader(self):
        r = tezip.Reader(self.paths["gray"])
        self.assertEqual(r.num_sequences, 3)
        self.assertEqual([r.num_frames(s) for s in range(3)], [11, 11, 11])
        f = r.frame(1, 4)
        self.assertEqual(f.shape, (12, 10))
        self.assertEqual(f.dtype, np.uint8)
        np.testing.assert_array_equal(f, self.gray[1, 4])
        c = r.clip(2, 2, 5)
        self.assertEqual(c.shape, (5, 12, 10))
        np.testing.assert_array_equal(c, self.gray[2, 2:7])
        with self.assertRaises(IndexError):
            r.frame(0, 11)

    def test_release_buffers(self):
        # Frames large enough that decoding takes blocks of the buffer pool (64 KiB and more).
        frames = synthetic((1, 4, 192, 256), np.uint8, 3)
        npy, out = os.path.join(self.tmp.name, "large.npy"), os.path.join(self.tmp.name, "large.tzp")
        np.save(npy, frames[0])
        subprocess.run([os.environ.get("TEZIP_BINARY", "tezip"), "compress", npy, "-o", out, "-q"], check=True)
        r = tezip.Reader(out)
        np.testing.assert_array_equal(r.clip(0, 0, 4), frames[0])
        del r
        self.assertGreater(tezip.buffer_pool_bytes(), 0)
        tezip.release_buffers()
        self.assertEqual(tezip.buffer_pool_bytes(), 0)
        np.testing.assert_array_equal(tezip.Reader(out).frame(0, 3), frames[0, 3])  # decodes as before

    def test_colour_uint16(self):
        r = tezip.Reader(self.paths["colour"])
        f = r.frame(0, 3)
        self.assertEqual(f.shape, (8, 6, 3))
        self.assertEqual(f.dtype, np.uint16)
        np.testing.assert_array_equal(f, self.colour[3])
        np.testing.assert_array_equal(r.clip(0, 0, 9), self.colour)
        # channels_first: the same pixels, planes first (the decoder's own layout, no interleave).
        np.testing.assert_array_equal(r.frame(0, 3, channels_first=True), np.moveaxis(self.colour[3], -1, 0))
        np.testing.assert_array_equal(r.clip(0, 1, 4, channels_first=True), np.moveaxis(self.colour[1:5], -1, 1))
        self.assertEqual(tezip.Reader(self.paths["gray"]).clip(0, 0, 2, channels_first=True).shape, (2, 12, 10))

    def test_stream_channels_first(self):
        kwargs = dict(clip_len=3, stride=3, seed=4, shuffle_buffer=4, threads=2)
        planar = list(tezip.Stream(self.paths["colour"], channels_first=True, **kwargs))
        interleaved = list(tezip.Stream(self.paths["colour"], **kwargs))
        self.assertEqual([(x.sequence, x.start) for x in planar], [(x.sequence, x.start) for x in interleaved])
        for p, i in zip(planar, interleaved):
            self.assertEqual(p.frames.shape, (3, 3, 8, 6))
            self.assertTrue(p.frames.flags["C_CONTIGUOUS"])
            np.testing.assert_array_equal(p.frames, np.moveaxis(i.frames, -1, 1))
            np.testing.assert_array_equal(p.frames, np.moveaxis(self.colour[p.start:p.start + 3], -1, 1))
        gray = next(iter(tezip.Stream(self.paths["gray"], clip_len=2, channels_first=True)))
        self.assertEqual(gray.frames.shape, (2, 12, 10))

    def test_stream_lossless_and_complete(self):
        s = tezip.Stream(self.paths["gray"], clip_len=4, stride=2, shuffle_buffer=8, threads=2, prefetch=4)
        seen = set()
        for sample in s:
            self.assertEqual(sample.frames.shape, (4, 12, 10))
            np.testing.assert_array_equal(sample.frames, self.gray[sample.sequence, sample.start:sample.start + 4])
            seen.add((sample.sequence, sample.start))
        self.assertEqual(seen, {(q, t) for q in range(3) for t in range(0, 8, 2)})
        self.assertEqual(len(s), len(seen))

    def test_stream_shards(self):
        shards = []
        for rank in range(2):
            s = tezip.Stream(self.paths["gray"], clip_len=2, rank=rank, world_size=2, seed=3, epoch=1)
            shards.append([(x.sequence, x.start) for x in s if not x.repeated])
        self.assertFalse(set(shards[0]) & set(shards[1]))
        self.assertEqual(len(set(shards[0]) | set(shards[1])), 3 * 10)
        rep = tezip.Stream(self.paths["gray"], clip_len=2, rank=0, world_size=2).exchange_report()
        self.assertEqual(len(rep["bytes"]), 2)

    def test_resume(self):
        kwargs = dict(clip_len=1, seed=5, epoch=2, shuffle_buffer=16, threads=2)
        whole = [(x.sequence, x.start) for x in tezip.Stream(self.paths["gray"], **kwargs)]
        s = tezip.Stream(self.paths["gray"], **kwargs)
        head = [(next(s).sequence, 0)[0] for _ in range(7)]
        state = s.state_dict()
        self.assertEqual(state["position"], 7)
        rest = [(x.sequence, x.start) for x in tezip.Stream(self.paths["gray"], state=state, **kwargs)]
        self.assertEqual(rest, whole[7:])
        self.assertEqual(head, [q for q, _ in whole[:7]])

    def test_prednet_archive_without_libtorch(self):
        """A PredNet archive (the default exact arithmetic) decodes in the module with no libtorch:
        the CLI writes it without the learned module, and this process never maps libtorch."""
        binary = os.environ.get("TEZIP_BINARY", "tezip")
        npy = os.path.join(self.tmp.name, "gray.npy")
        out = os.path.join(self.tmp.name, "prednet.tzp")
        env = dict(os.environ, TEZIP_LEARNED_MODULE=os.path.join(self.tmp.name, "none.so"))
        subprocess.run([binary, "compress", npy, "-o", out, "--predictor", "prednet", "--gop", "4", "-q"],
                       check=True, env=env)
        r = tezip.Reader(out)
        self.assertEqual(r.num_sequences, 3)
        for q in range(3):
            np.testing.assert_array_equal(r.clip(q, 0, 11), self.gray[q])
        frames = [x.frames for x in tezip.Stream(out, clip_len=2, stride=5, threads=2)]
        self.assertEqual(len(frames), 3 * 2)
        # This process may hold the user's torch (the torch tests import it): check in a fresh one.
        check = ("import sys, tezip; r = tezip.Reader(sys.argv[1]); r.clip(0, 0, 11); "
                 "assert 'libtorch' not in open('/proc/self/maps').read(), 'libtorch is mapped'")
        subprocess.run([sys.executable, "-c", check, out], check=True)

    def test_stream_over_a_store(self):
        store = os.path.join(self.tmp.name, "store")
        path = self.paths["gray"]
        for epoch in range(3):
            kwargs = dict(clip_len=2, rank=1, world_size=2, seed=3, epoch=epoch, exchange=0.0, shuffle_buffer=4)
            got = [(s.sequence, s.start, s.frames.tobytes()) for s in tezip.Stream(path, store=store, **kwargs)]
            want = [(s.sequence, s.start, s.frames.tobytes()) for s in tezip.Stream(path, **kwargs)]
            self.assertEqual(got, want)
            stats = tezip.Stream(path, store=store, **kwargs).store_stats()
            self.assertEqual(stats["staged_bytes"], 0)  # held since the first epoch
        traffic = tezip.store_traffic(store)
        self.assertLess(traffic["chunks_held"], traffic["chunks"])
        self.assertTrue(os.path.exists(os.path.join(store, "tezip-store.json")))
        self.assertTrue(issubclass(tezip.ChunkMissing, LookupError))
        with self.assertRaisesRegex(ValueError, "comm= needs store="):
            tezip.Stream(path, comm="world")
        if not tezip.built_with_mpi:
            with self.assertRaisesRegex(RuntimeError, "built without MPI"):
                tezip.Stream(path, store=os.path.join(self.tmp.name, "store2"), comm="world")

    def test_corrupt_chunk_raises(self):
        damaged = os.path.join(self.tmp.name, "damaged.tzp")
        with open(self.paths["gray"], "rb") as f:
            data = bytearray(f.read())
        data[100] ^= 0x5A  # inside the first chunks, past the 16-byte header
        with open(damaged, "wb") as f:
            f.write(bytes(data))
        with self.assertRaises(tezip.DataError):
            for _ in tezip.Stream(damaged, threads=2):
                pass


try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


@unittest.skipUnless(HAVE_TORCH, "torch is not installed")
class TorchTest(unittest.TestCase):
    def test_clip_dataset_with_workers(self):
        import torch
        import tezip.torch as tt
        TezipTest.setUpClass()
        try:
            ds = tt.ClipDataset(TezipTest.paths["gray"], clip_len=2, stride=2, return_index=True,
                                dtype=torch.float32)
            loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2)
            keys = []
            for clips, seqs, starts in loader:
                self.assertEqual(tuple(clips.shape[1:]), (2, 1, 12, 10))
                self.assertEqual(clips.dtype, torch.float32)
                keys += list(zip(seqs.tolist(), starts.tolist()))
            self.assertEqual(set(keys), {(q, t) for q in range(3) for t in range(0, 10, 2)})
        finally:
            TezipTest.tearDownClass()

    def test_clip_dataset_layouts(self):
        import torch
        import tezip.torch as tt
        TezipTest.setUpClass()
        try:
            for name, channels in (("colour", 3), ("gray", 1)):
                kwargs = dict(clip_len=3, stride=3, seed=2, return_index=True)
                first = list(tt.ClipDataset(TezipTest.paths[name], **kwargs))
                last = list(tt.ClipDataset(TezipTest.paths[name], channels_first=False, **kwargs))
                self.assertEqual([k[1:] for k in first], [k[1:] for k in last])
                for (a, _, _), (b, _, _) in zip(first, last):
                    self.assertEqual(tuple(a.shape[1:2]), (channels,))
                    self.assertTrue(a.is_contiguous())
                    self.assertTrue(torch.equal(a, b.permute(0, 3, 1, 2)))
        finally:
            TezipTest.tearDownClass()


if __name__ == "__main__":
    unittest.main()
