#!/usr/bin/env python3
"""The PyTorch DataLoader pattern without torch: N worker processes (multiprocessing,
fork), each with its own h5py handle opened in the worker, reading one segment per
`__getitem__` (`mel[clip, long, short]`) and collating a batch as float32, sent back to
the main process through the pool's pipe.

Reads exactly the segments listed in IDS.npy (global segment ids, int64, in batch
order: what melread's loader plans for the same epoch), BATCH at a time, and prints one
JSON line: {"segments", "seconds", "segments_per_s", "workers", "batch"}.

    python3 peer_h5py.py FILE.h5 IDS.npy --batch 5632 --workers 4 [--crop N]

`--crop N`: each segment's window of N frames at a random offset, read as an h5py
hyperslab (`mel[clip, long, short, :, o:o + N]`), as a random-crop `__getitem__` does.
"""
import argparse
import json
import multiprocessing as mp
import time

import h5py
import numpy as np

mel = None
seg_dims = None
crop = None
rng = None


def init(path, crop_frames=None):
    global mel, seg_dims, crop, rng
    mel = h5py.File(path, "r")["mel"]
    seg_dims = mel.shape[1:-2]
    crop = crop_frames
    rng = np.random.default_rng()


def load(ids):
    """One batch: each segment read on its own, as Dataset.__getitem__ would."""
    frames = mel.shape[-1]
    out = np.empty((len(ids), mel.shape[-2], crop or frames), np.float32)
    per = int(np.prod(seg_dims)) if seg_dims else 1
    for j, g in enumerate(ids):
        clip, s = divmod(int(g), per)
        index = [clip]
        for d in reversed(seg_dims):
            s, r = divmod(s, d)
            index.insert(1, r)
        if crop:
            at = int(rng.integers(frames - crop + 1))
            out[j] = mel[tuple(index) + (slice(None), slice(at, at + crop))]
        else:
            out[j] = mel[tuple(index)]
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("ids")
    p.add_argument("--batch", type=int, default=5632)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--crop", type=int, default=None)
    a = p.parse_args()
    ids = np.load(a.ids)
    batches = [ids[i : i + a.batch] for i in range(0, len(ids), a.batch)]
    with mp.get_context("fork").Pool(a.workers, initializer=init, initargs=(a.file, a.crop)) as pool:
        # Worker start-up (imports, opening the file) is not timed: one segment each.
        pool.map(load, [ids[:1]] * a.workers, chunksize=1)
        t = time.perf_counter()
        n = 0
        for out in pool.imap(load, batches, chunksize=1):
            n += len(out)
        dt = time.perf_counter() - t
    print(json.dumps({"segments": n, "seconds": dt, "segments_per_s": n / dt,
                      "workers": a.workers, "batch": a.batch}))


if __name__ == "__main__":
    main()
