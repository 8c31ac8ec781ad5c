"""Trains a small next-frame predictor from a tezip archive with PyTorch's DataLoader.

    python3 examples/train_from_archive.py DATA.tzp [epochs]        # after pip install ./python
    PYTHONPATH=build/python /usr/bin/python3 examples/train_from_archive.py DATA.tzp [epochs]

Under torchrun, each rank (and each DataLoader worker) reads its own GOP-aligned shard.
loader.state_dict() is where the epoch stands; ClipDataLoader.load_state_dict resumes it exactly.
"""
import sys

import torch
from tezip.torch import ClipDataLoader, ClipDataset


def main():
    path = sys.argv[1]
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    clip_len = 4
    dataset = ClipDataset(path, clip_len=clip_len, stride=clip_len, shuffle_buffer=64,
                          dtype=torch.float32)  # clips (T, C, H, W) in [0, 1]
    loader = ClipDataLoader(dataset, batch_size=16, num_workers=2, persistent_workers=True)
    probe = next(iter(dataset))
    channels = probe.shape[1]
    model = torch.nn.Sequential(
        torch.nn.Conv2d(channels * (clip_len - 1), 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, channels, 3, padding=1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(epochs):
        dataset.set_epoch(epoch)
        total, steps = 0.0, 0
        for clips in loader:  # (B, T, C, H, W)
            b, t, c, h, w = clips.shape
            inputs = clips[:, :-1].reshape(b, (t - 1) * c, h, w)
            loss = torch.nn.functional.mse_loss(model(inputs), clips[:, -1])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total, steps = total + loss.item(), steps + 1
        print(f"epoch {epoch}: {steps} steps, mean loss {total / max(steps, 1):.5f}")


if __name__ == "__main__":
    main()
