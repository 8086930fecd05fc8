#!/usr/bin/env python3
"""What each part of ``melctl.Augment`` costs the Loader, against the Loader without it.

Each arm (none, masks, mixup, gain, masks + mixup, all three) reads the same split with
the same batches, one arm after another and round after round in one process, so the
machine's drift falls on every arm alike. Every epoch is timed on its own, in wall time
and in the process's CPU time (``getrusage``: what a shared machine's neighbours disturb
least). The measure is each arm's best epoch of CPU µs a clip (the least disturbed), and
its median beside it.

numpy's BLAS threads are pinned to one before numpy loads: left alone they spin and count
as the process's CPU (seen in a profile of this benchmark).

    python3 python/benches/augment_cost.py SPLIT.h5 (--crop N | --max-frames M) [--rounds 3] [--epochs 6] [--threads 1]

Prints a Markdown table: per arm, best and median CPU µs a clip, their cost against no
augmentation, and the best epoch's clips/s.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import melctl  # noqa: E402

MASKS = dict(time_masks=2, time_mask_frames=20, freq_masks=2, freq_mask_bins=8)
ARMS = {
    "none": None,
    "masks": dict(MASKS),
    "mixup": dict(mixup_alpha=0.4),
    "gain": dict(gain_db=6.0),
    "masks + mixup": dict(mixup_alpha=0.4, **MASKS),
    "masks + mixup + gain": dict(mixup_alpha=0.4, gain_db=6.0, **MASKS),
}


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("split")
    how = ap.add_mutually_exclusive_group(required=True)
    how.add_argument("--crop", type=int, help="crop_frames")
    how.add_argument("--max-frames", type=int, help="max_frames (duration buckets)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=6, help="epochs per arm per round")
    ap.add_argument("--threads", type=int, default=1, help="Loader threads (1: the least noise)")
    ap.add_argument("--batch", type=int, default=256)
    a = ap.parse_args()
    shape = {"crop_frames": a.crop} if a.crop else {"max_frames": a.max_frames}
    cpu = {k: [] for k in ARMS}
    rate = {k: [] for k in ARMS}
    for _ in range(a.rounds):
        for name, parts in ARMS.items():
            aug = melctl.Augment(**parts) if parts else None
            loader = melctl.Loader(a.split, batch_size=a.batch, seed=1, augment=aug,
                                   prefetch=4, threads=a.threads, **shape)
            for _ in range(a.epochs):
                clips = 0
                t0, c0 = time.perf_counter(), cpu_seconds()
                for batch in loader:
                    clips += len(batch[0])
                t1, c1 = time.perf_counter(), cpu_seconds()
                cpu[name].append((c1 - c0) / clips * 1e6)
                rate[name].append(clips / (t1 - t0))
    best0, median0 = min(cpu["none"]), statistics.median(cpu["none"])
    print(f"| arm | best CPU µs a clip | cost | median | cost | best clips/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in ARMS:
        best, median = min(cpu[name]), statistics.median(cpu[name])
        print(f"| {name} | {best:.2f} | {100 * (best / best0 - 1):+.1f}% | {median:.2f} "
              f"| {100 * (median / median0 - 1):+.1f}% | {max(rate[name]):,.0f} |")


if __name__ == "__main__":
    main()
