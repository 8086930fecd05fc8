#!/usr/bin/env python3
"""melctl.Loader against h5py, from Python, on the same segment ids.

Uniformly shuffled segment batches (default 5,632, the field report's), stored f16
widened to float32, of one leak-4k split. The peer is the report's trainer pattern
(`crates/melread/benches/peer_h5py.py`: N forked worker processes, one h5py handle
each, one `mel[clip, long, short]` read per segment, collated as float32), reading the
segment ids `melctl.Loader.plan` lists for the same epoch. Each round runs, side by side:
melctl warm, h5py warm, then melctl cold and h5py cold (the file evicted from the page
cache with posix_fadvise(DONTNEED) after every map of it is dropped; `fincore` reports
the residency).

    python3 python/benches/loader_vs_h5py.py SPLIT.h5 [--rounds 2] [--workers 4] [--crop N]

`--crop N`: random crops of N frames; melctl's `crop_frames=N` (in its threads) against the
peer reading each segment's window with an h5py hyperslab at a random offset, as a
`Dataset.__getitem__` with a random crop does.

`--augment`: warm only, three readers side by side: melctl, melctl with masks and mixup
in its threads (`melctl.Augment`, the settings of `whole_vs_h5py.py`, mask widths cut to
the items), and a torch `DataLoader` (N workers) over an h5py `Dataset` (a handle per
worker, one item a `__getitem__`) with the same batches (`batch_sampler`: melctl's plan),
augmented in torch on each batch as a trainer writes it.

Prints a JSON line per run and a Markdown table of segments/s and ratios.
"""

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import melctl

PEER = Path(__file__).resolve().parents[2] / "crates" / "melread" / "benches" / "peer_h5py.py"


def evict(path):
    """Drops the file's pages from the page cache; returns the residency after, as fincore says."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    out = subprocess.run(["fincore", "-b", "-n", "-o", "RES", str(path)], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def warm(path):
    """Reads the whole file once, so its pages are cached."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def run_melctl(path, batch, threads, epoch, crop=None, epochs=1):
    gc.collect()
    t = time.perf_counter()
    loader = melctl.Loader(path, batch, shuffle=True, seed=0, epoch=epoch, threads=threads, prefetch=4,
                           crop_frames=crop)
    n = 0
    for _ in range(epochs):
        for x, y in loader:
            n += len(y)
    seconds = time.perf_counter() - t
    del loader, x, y
    gc.collect()
    return {"reader": "melctl", "segments": n, "seconds": seconds, "segments_per_s": n / seconds}


def run_h5py(path, ids_file, batch, workers, crop=None):
    crop_args = ["--crop", str(crop)] if crop else []
    out = subprocess.run(
        [sys.executable, str(PEER), str(path), ids_file, "--batch", str(batch), "--workers", str(workers),
         *crop_args],
        check=True, capture_output=True, text=True,
    )
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["reader"] = "h5py"
    return r


def run_augmented(path, a, epoch, plan):
    """melctl, melctl + Augment and the torch peer + torch augmentation, warm, one round."""
    import h5py
    import torch
    from torch.utils.data import DataLoader, Dataset

    import whole_vs_h5py as w

    split = melctl.open(path)
    bins, frames = split.clip_shape[-2:]
    w.AUGMENT.update(time_mask_frames=min(20, frames), freq_mask_bins=min(8, bins))
    aug = melctl.Augment(**w.AUGMENT)
    classes = len(split.label_names)
    seg_dims = tuple(split.clip_shape[:-2])
    del split

    class Items(Dataset):
        """One item (a segment, or a clip of the unsegmented layout) a call, h5py."""

        def __init__(self):
            self.f = None

        def __len__(self):
            return len(plan)

        def __getitem__(self, g):
            if self.f is None:  # opened in the worker
                self.f = h5py.File(path, "r")
                self.mel, self.label = self.f["mel"], self.f["label"][:]
            clip, s = divmod(int(g), int(np.prod(seg_dims)) if seg_dims else 1)
            index = [clip]
            for d in reversed(seg_dims):
                s, r = divmod(s, d)
                index.insert(1, r)
            return torch.from_numpy(self.mel[tuple(index)].astype(np.float32)), int(self.label[clip])

    per = int(np.prod(seg_dims)) if seg_dims else 1
    ids = (plan[:, 0] * per + plan[:, 1]).tolist()
    batches = [ids[i:i + a.batch] for i in range(0, len(ids), a.batch)] * a.epochs
    rows = []
    for reader in ("melctl", "melctl + Augment", "torch DataLoader + h5py + torch augmentation"):
        warm(path)
        gc.collect()
        t = time.perf_counter()
        n = 0
        if reader.startswith("melctl"):
            loader = melctl.Loader(path, a.batch, shuffle=True, seed=0, epoch=epoch, threads=a.threads,
                                   prefetch=4, augment=aug if reader.endswith("Augment") else None)
            for _ in range(a.epochs):
                for x, y in loader:
                    n += len(y)
            del loader
        else:
            gen = torch.Generator().manual_seed(epoch)
            data = DataLoader(Items(), batch_sampler=batches, num_workers=a.workers)
            for x, y in data:
                x, y, _ = w.torch_augment(x, y, torch.full((len(y),), frames), classes, gen)
                n += len(y)
        seconds = time.perf_counter() - t
        res = {"reader": reader, "segments": n, "seconds": seconds, "segments_per_s": n / seconds,
               "round": epoch}
        print(json.dumps(res), flush=True)
        rows.append(res)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("split")
    ap.add_argument("--batch", type=int, default=5632)
    ap.add_argument("--workers", type=int, default=4, help="h5py worker processes")
    ap.add_argument("--threads", type=int, default=None, help="melctl loader threads (default: all cores)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--crop", type=int, default=None, help="random crops of this many frames")
    ap.add_argument("--epochs", type=int, default=1,
                    help="epochs per run, one Loader (one worker pool for the peer): the steady rate")
    ap.add_argument("--augment", action="store_true",
                    help="masks and mixup: melctl's against the same in torch (warm only)")
    a = ap.parse_args()
    if a.augment:
        rows = []
        for r in range(a.rounds):
            plan = melctl.Loader(a.split, a.batch, shuffle=True, seed=0, epoch=r).plan(r)
            rows += run_augmented(a.split, a, r, plan)
        print()
        print(f"| round | melctl.Loader items/s | with Augment | torch DataLoader + h5py, {a.workers} "
              "workers, + torch augmentation | ratio (augmented) | augmentation's cost to the Loader |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for r in range(a.rounds):
            m, g, h = (x["segments_per_s"] for x in rows if x["round"] == r)
            print(f"| {r} | {m:,.0f} | {g:,.0f} | {h:,.0f} | {g / h:.1f}× | {(m / g - 1) * 100:.1f}% |")
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        ids_file = os.path.join(tmp, "ids.npy")
        for r in range(a.rounds):
            split = melctl.open(a.split)
            per = int(np.prod(split.clip_shape[:-2]))
            plan = melctl.Loader(split, a.batch, shuffle=True, seed=0, epoch=r).plan(r)
            # The peer reads the same epoch `epochs` times (its crops differ each time anyway).
            np.save(ids_file, np.tile(plan[:, 0] * per + plan[:, 1], a.epochs))
            # No map of the file may outlive this: a mapped page cannot be evicted.
            del split, plan
            gc.collect()
            for state in ("warm", "cold"):
                for reader in ("melctl", "h5py"):
                    if state == "warm":
                        warm(a.split)
                        residency = "warm"
                    else:
                        gc.collect()
                        residency = evict(a.split)
                    if reader == "melctl":
                        res = run_melctl(a.split, a.batch, a.threads, r, a.crop, a.epochs)
                    else:
                        res = run_h5py(a.split, ids_file, a.batch, a.workers, a.crop)
                    res.update(round=r, state=state, resident_bytes_before=residency)
                    print(json.dumps(res), flush=True)
                    rows.append(res)
    print()
    print("| round | state | melctl.Loader segments/s | h5py, %d processes | ratio |" % a.workers)
    print("| --- | --- | ---: | ---: | ---: |")
    for r in range(a.rounds):
        for state in ("warm", "cold"):
            m = next(x for x in rows if x["round"] == r and x["state"] == state and x["reader"] == "melctl")
            h = next(x for x in rows if x["round"] == r and x["state"] == state and x["reader"] == "h5py")
            print(f"| {r} | {state} | {m['segments_per_s']:,.0f} | {h['segments_per_s']:,.0f} | "
                  f"{m['segments_per_s'] / h['segments_per_s']:.1f}× |")


if __name__ == "__main__":
    main()
