#!/usr/bin/env python3
"""Two or more builds of melctl in one process, their arms interleaved epoch by epoch.

Each build is a directory that holds a ``melctl`` package (a staged release extension).
Its package is copied under another name (``melctl_0``, ``melctl_1``, …: an extension
module's init symbol names only its last component, so the copies load side by side),
one Loader per (build, arm) is built and warmed, then every Loader reads one epoch in
turn, the order reversed every other epoch, so that a shared machine's drift, which moves
a fresh process's rate by 15% here, falls on every build and arm alike (``builds_ab.py``
runs each in a fresh process instead). The table gives each build's median CPU time of
the process an epoch (all threads) per arm, and its cost against its own ``none``.

    python3 python/benches/builds_in_one.py BUILD_A,BUILD_B SPLIT [--arms none,mm,all,gain] [--crop N | --max-frames M] [--epochs 300] [--normalize]

Arms as ``augment_rate.py``'s: ``none``, ``masks``, ``mixup``, ``mm`` (both), ``gain``
(6 dB), ``all`` (the three). Batches of 256, ``prefetch=4``, the Loader's default threads.
"""

import argparse
import importlib
import os
import shutil
import statistics
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

MASKS = dict(time_masks=2, time_mask_frames=20, freq_masks=2, freq_mask_bins=8)


def arms_of(module):
    """Each arm's Augment from one build's module."""
    a = module.Augment
    return {"none": None, "masks": a(**MASKS), "mixup": a(mixup_alpha=0.4),
            "mm": a(mixup_alpha=0.4, **MASKS), "gain": a(gain_db=6.0),
            "all": a(mixup_alpha=0.4, gain_db=6.0, **MASKS)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("builds")
    ap.add_argument("split")
    ap.add_argument("--arms", default="none,mm,all,gain")
    ap.add_argument("--crop", type=int)
    ap.add_argument("--max-frames", type=int)
    ap.add_argument("--epochs", type=int, default=300)
    ap.add_argument("--normalize", action="store_true")
    a = ap.parse_args()
    arms = a.arms.split(",")
    if arms[0] != "none":
        ap.error("the first arm is the baseline: none")
    shape = {}
    if a.crop:
        shape["crop_frames"] = a.crop
    elif a.max_frames:
        shape["max_frames"] = a.max_frames
    staged = tempfile.mkdtemp(prefix="melctl-builds-")
    sys.path.insert(0, staged)
    builds = a.builds.split(",")
    loaders = {}
    for i, build in enumerate(builds):
        shutil.copytree(os.path.join(build, "melctl"), os.path.join(staged, f"melctl_{i}"))
        module = importlib.import_module(f"melctl_{i}")
        made = arms_of(module)
        for arm in arms:
            loaders[i, arm] = module.Loader(a.split, 256, seed=1, augment=made[arm], prefetch=4,
                                            normalize=a.normalize, **shape)
    keys = list(loaders)
    for k in keys:
        for _ in loaders[k]:
            pass
    cpu = {k: [] for k in keys}
    for e in range(a.epochs):
        for k in keys if e % 2 == 0 else keys[::-1]:
            t = time.process_time()
            for _ in loaders[k]:
                pass
            cpu[k].append(time.process_time() - t)
    shutil.rmtree(staged)
    print("| build | " + " | ".join(f"{arm}: ms an epoch, cost" for arm in arms) + " |")
    print("| --- |" + " ---: |" * len(arms))
    for i, build in enumerate(builds):
        base = statistics.median(cpu[i, "none"])
        cells = []
        for arm in arms:
            m = statistics.median(cpu[i, arm])
            cells.append(f"{m * 1e3:.2f}, {100 * (m / base - 1):+.1f}%")
        print(f"| {build} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
