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
    a = ap.parse_args()
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
