#!/usr/bin/env python3
"""What ``melctl.Augment`` costs the Loader's rate (all its threads, wall clock), arm against
arm in one process, interleaved epoch by epoch.

One Loader per arm is built and warmed (one epoch) up front and kept. Each round times
``EPOCHS`` epochs of every arm, one epoch of each in turn (the order reversed every other
epoch), so that the machine's drift, which on a shared VM moves the rate by tens of
percent within seconds, falls on every arm alike (before 2026-11-30 each round built its
Loaders anew and timed each arm's epochs as one block). The cost of an arm is
``rate(none) / rate(arm) − 1`` within a round; the table gives each arm's median and best
rate and the median, least and most of its costs over the rounds, then the median of its
cost in CPU time (the process's, all threads: less moved by a noisy machine than the wall
clock, but blind to what the threads wait on).

    python3 python/benches/augment_rate.py SPLIT.h5 [--rounds 6] [--epochs 40] [--crop N | --max-frames M] [--arms none,mm,masks,mixup] [--normalize]

Arms: ``none``; ``masks`` (2 × ≤ 20 frames, 2 × ≤ 8 bins, cut to the items); ``mixup``
(α = 0.4); ``mm`` (both: the settings of ``loader_vs_h5py.py --augment``); ``gain`` (6 dB);
``all`` (the three). Batches of 256, ``prefetch=4``, the Loader's default threads; with
``--normalize``, every arm normalised by the split's statistics (the baseline too).
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import melctl  # noqa: E402


def arms(frames, bins):
    """The Augment of each arm for items of `frames` frames and `bins` mel bins."""
    masks = dict(time_masks=2, time_mask_frames=min(20, frames), freq_masks=2,
                 freq_mask_bins=min(8, bins))
    a = melctl.Augment
    return {"none": None, "masks": a(**masks), "mixup": a(mixup_alpha=0.4),
            "mm": a(mixup_alpha=0.4, **masks), "gain": a(gain_db=6.0),
            "all": a(mixup_alpha=0.4, gain_db=6.0, **masks)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("split")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--crop", type=int, default=None)
    ap.add_argument("--max-frames", type=int, default=None)
    ap.add_argument("--arms", default="none,mm,masks,mixup")
    ap.add_argument("--normalize", action="store_true")
    a = ap.parse_args()
    names = a.arms.split(",")
    if names[0] != "none":
        ap.error("the first arm is the baseline: none")
    split = melctl.open(a.split)
    bins, frames = split.clip_shape[-2:]
    if a.crop:
        frames = a.crop
    elif a.max_frames:
        frames = 20  # whole clips: the masks as set
    table = arms(frames, bins)
    shape = {k: v for k, v in (("crop_frames", a.crop), ("max_frames", a.max_frames)) if v}
    shape["normalize"] = a.normalize
    loaders = {n: melctl.Loader(a.split, 256, seed=0, prefetch=4, augment=table[n], **shape)
               for n in names}
    for loader in loaders.values():
        for _ in loader:
            pass
    rates = {n: [] for n in names}
    cpu = {n: [] for n in names}
    for r in range(a.rounds):
        wall = {n: 0.0 for n in names}
        used = {n: 0.0 for n in names}
        items = {n: 0 for n in names}
        for e in range(a.epochs):
            for n in names if (r * a.epochs + e) % 2 == 0 else names[::-1]:
                t, c = time.perf_counter(), time.process_time()
                for b in loaders[n]:
                    items[n] += len(b[1])
                wall[n] += time.perf_counter() - t
                used[n] += time.process_time() - c
        for n in names:
            rates[n].append(items[n] / wall[n])
            cpu[n].append(used[n] / items[n])
    base = rates["none"]
    print("| arm | median items/s | best | cost to the rate: median | least | most "
          "| cost in CPU time: median |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in names:
        costs = [(b / x - 1) * 100 for b, x in zip(base, rates[n])]
        cpu_costs = [(x / b - 1) * 100 for b, x in zip(cpu["none"], cpu[n])]
        print(f"| {n} | {statistics.median(rates[n]):,.0f} | {max(rates[n]):,.0f} | "
              f"{statistics.median(costs):.1f}% | {min(costs):.1f}% | {max(costs):.1f}% "
              f"| {statistics.median(cpu_costs):.1f}% |")


if __name__ == "__main__":
    main()
