#!/usr/bin/env python3
"""melctl.Loader on whole clips against the same pipeline written the usual way.

A split built with ``audio.length = "whole"`` (variable-length clips). Two modes, side by
side in one run, warm (the file read once before each run):

- ``--max-frames M``: duration buckets. melctl's ``Loader(max_frames=M)`` against a torch
  ``DataLoader`` over an h5py ``Dataset`` (each worker its own handle; an item is the
  clip's rows read with one hyperslab, its blocks joined and cut to its frames), with the
  *same* batches (``batch_sampler`` = melctl's plan for the epoch) and the padding done in
  ``collate_fn``, float32.
- ``--crop N``: random crops. ``Loader(crop_frames=N)`` against the same DataLoader whose
  ``Dataset`` reads a random window of N frames of each clip (the rows that hold it),
  padding short clips in ``collate_fn``.

- ``--augment``: both sides augment every batch with two time masks (up to 20 frames), two
  frequency masks (up to 8 bins) and mixup (α = 0.4, soft labels): melctl in the Loader's
  threads (``melctl.Augment``), the peer with the same operations written in torch on each
  batch the DataLoader hands over. A third reader, melctl without augmentation, gives the
  augmentation's cost to the Loader.

    python3 python/benches/whole_vs_h5py.py SPLIT.h5 --max-frames 8000 [--augment] [--rounds 3] [--workers 4] [--epochs E]

Prints a JSON line per run and a Markdown table of clips/s and ratios.
"""

import argparse
import gc
import json
import time

import h5py
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

import melctl


class WholeClips(Dataset):
    """Whole clips from a melctl HDF5 file of whole clips, read with h5py."""

    def __init__(self, path, crop=None, seed=0):
        self.path, self.crop, self.seed = path, crop, seed
        with h5py.File(path, "r") as f:
            paths = f["path"].asstr()[:]
            self.labels = f["label"][:]
        starts = np.flatnonzero(np.r_[True, paths[1:] != paths[:-1]])
        self.rows = list(zip(starts, np.r_[starts[1:], len(paths)]))
        self.frames = melctl.open(path).frames
        self.f = None

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        if self.f is None:
            self.f = h5py.File(self.path, "r")
        r0, r1 = self.rows[i]
        n = int(self.frames[i])
        if self.crop is None:
            blocks = self.f["mel"][r0:r1]
            x = np.concatenate(blocks, axis=-1)[:, :n]
        else:
            at = np.random.default_rng((self.seed, i)).integers(0, max(n - self.crop, 0) + 1)
            length = min(self.crop, n)
            b0, b1 = at // 32, (at + length - 1) // 32 + 1
            blocks = self.f["mel"][r0 + b0 : r0 + b1]
            x = np.concatenate(blocks, axis=-1)[:, at - b0 * 32 : at - b0 * 32 + length]
        return x.astype(np.float32), int(self.labels[r0])


def pad_collate(items):
    """Pads a batch's clips with zeros to its longest: (x, y, lengths)."""
    lengths = [x.shape[1] for x, _ in items]
    out = np.zeros((len(items), items[0][0].shape[0], max(lengths)), np.float32)
    for k, (x, _) in enumerate(items):
        out[k, :, : x.shape[1]] = x
    y = torch.tensor([y for _, y in items])
    return torch.from_numpy(out), y, torch.tensor(lengths)


AUGMENT = dict(time_masks=2, time_mask_frames=20, freq_masks=2, freq_mask_bins=8, mixup_alpha=0.4)


def torch_augment(x, y, lengths, classes, gen):
    """The peer's augmentation, as a trainer writes it in torch: SpecAugment masks within
    each clip's real frames (iid per item), then mixup with soft labels."""
    b, bins, width = x.shape
    t = torch.arange(width)[None, :]
    for _ in range(AUGMENT["time_masks"]):
        w = (torch.rand(b, generator=gen) * (AUGMENT["time_mask_frames"] + 1)).long().clamp(max=lengths)
        start = (torch.rand(b, generator=gen) * (lengths - w + 1)).long()
        x = x.masked_fill(((t >= start[:, None]) & (t < (start + w)[:, None]))[:, None, :], 0.0)
    f = torch.arange(bins)[None, :]
    for _ in range(AUGMENT["freq_masks"]):
        w = (torch.rand(b, generator=gen) * (AUGMENT["freq_mask_bins"] + 1)).long()
        start = (torch.rand(b, generator=gen) * (bins - w + 1)).long()
        x = x.masked_fill(((f >= start[:, None]) & (f < (start + w)[:, None]))[:, :, None], 0.0)
    alpha = AUGMENT["mixup_alpha"]
    lam = torch.distributions.Beta(alpha, alpha).sample((b,))
    perm = torch.randperm(b, generator=gen)
    x = lam[:, None, None] * x + (1 - lam[:, None, None]) * x[perm]
    soft = torch.nn.functional.one_hot(y, classes).float()
    soft = lam[:, None] * soft + (1 - lam[:, None]) * soft[perm]
    return x, soft, torch.maximum(lengths, lengths[perm])


def warm(path):
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def run_melctl(path, a, epoch, augment=None):
    gc.collect()
    t = time.perf_counter()
    loader = melctl.Loader(path, a.batch, shuffle=True, seed=0, epoch=epoch, threads=a.threads,
                           prefetch=4, max_frames=a.max_frames, crop_frames=a.crop,
                           augment=augment)
    n = 0
    for _ in range(a.epochs):  # each pass is the next epoch
        for x, y, lengths in loader:
            n += len(y)
    seconds = time.perf_counter() - t
    name = "melctl" if augment is None else "melctl + Augment"
    return {"reader": name, "clips": n, "seconds": seconds, "clips_per_s": n / seconds}


def run_melctl_augmented(path, a, epoch):
    return run_melctl(path, a, epoch, melctl.Augment(**AUGMENT))


def same_batches(path, a, epoch):
    """The epoch's batches (clip ids) as melctl makes them, read off a pass with
    ``with_index`` (untimed): the peer gets exactly these."""
    loader = melctl.Loader(path, a.batch, shuffle=True, seed=0, epoch=epoch, threads=a.threads,
                           max_frames=a.max_frames, crop_frames=a.crop, with_index=True)
    return [b[-1].tolist() for _ in range(a.epochs) for b in loader]


def run_torch(path, a, epoch):
    batches = same_batches(path, a, epoch)
    warm(path)
    gc.collect()
    t = time.perf_counter()
    data = DataLoader(WholeClips(path, a.crop, seed=epoch), batch_sampler=batches,
                      num_workers=a.workers, collate_fn=pad_collate)
    classes = len(melctl.open(path).label_names)
    gen = torch.Generator().manual_seed(epoch)
    n = 0
    for x, y, lengths in data:
        if a.augment:
            x, y, lengths = torch_augment(x, y, lengths, classes, gen)
        n += len(y)
    seconds = time.perf_counter() - t
    name = "torch DataLoader + h5py" + (" + torch augmentation" if a.augment else "")
    return {"reader": name, "clips": n, "seconds": seconds, "clips_per_s": n / seconds}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("split")
    how = ap.add_mutually_exclusive_group(required=True)
    how.add_argument("--max-frames", type=int)
    how.add_argument("--crop", type=int)
    ap.add_argument("--augment", action="store_true",
                    help="masks and mixup on both sides (and melctl without, for the cost)")
    ap.add_argument("--batch", type=int, default=256, help="clips per batch (at most, with buckets)")
    ap.add_argument("--workers", type=int, default=4, help="DataLoader worker processes")
    ap.add_argument("--threads", type=int, default=None, help="melctl loader threads (default: all cores)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=1,
                    help="epochs per run: one Loader, one DataLoader pass over the epochs' batches")
    a = ap.parse_args()

    rows = []
    readers = (run_melctl, run_melctl_augmented, run_torch) if a.augment else (run_melctl, run_torch)
    for r in range(a.rounds):
        for reader in readers:
            warm(a.split)
            res = reader(a.split, a, r)
            res.update(round=r, state="warm")
            print(json.dumps(res), flush=True)
            rows.append(res)
    print()
    if a.augment:
        print(f"| round | melctl.Loader clips/s | with Augment | torch DataLoader + h5py, {a.workers} "
              "workers, + torch augmentation | ratio (augmented) | augmentation's cost to the Loader |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for r in range(a.rounds):
            m, g, h = [x for x in rows if x["round"] == r]
            print(f"| {r} | {m['clips_per_s']:,.0f} | {g['clips_per_s']:,.0f} | {h['clips_per_s']:,.0f} | "
                  f"{g['clips_per_s'] / h['clips_per_s']:.1f}× | "
                  f"{1 - g['clips_per_s'] / m['clips_per_s']:.1%} |")
        return
    print(f"| round | melctl.Loader clips/s | torch DataLoader + h5py, {a.workers} workers | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for r in range(a.rounds):
        m, h = [x for x in rows if x["round"] == r]
        print(f"| {r} | {m['clips_per_s']:,.0f} | {h['clips_per_s']:,.0f} | "
              f"{m['clips_per_s'] / h['clips_per_s']:.1f}× |")


if __name__ == "__main__":
    main()
