#!/usr/bin/env python3
"""Two or more builds of melctl side by side on the Loader's CPU time a clip, arm by arm.

Each build is a directory that holds a ``melctl`` package (a staged release extension);
every (round, arm, build) runs in a fresh process, builds alternating, so a shared
machine's drift falls on each alike. A process reads one warm epoch, then times eight in
the process's CPU time (``getrusage``); the table gives each build's min and median of
CPU µs a clip per arm.

    python3 python/benches/builds_ab.py BUILD_A,BUILD_B ARMS SHAPE ROUNDS SPLIT

``ARMS``: a comma list of ``none``, ``masks``, ``mixup``, ``gain``, ``all`` (the three
together), ``mm`` (masks and mixup); ``n-`` before one normalises (``n-gain``).
``SHAPE``: ``b`` duration buckets (``max_frames=8000``), ``c`` crops of 300 frames, ``f``
the items as stored (fixed-length splits). One Loader thread, batches of 256.
"""

import json
import os
import statistics
import subprocess
import sys

ONE = r'''
import os, sys, resource, json
os.environ["OPENBLAS_NUM_THREADS"] = "1"
import melctl
A = melctl.Augment
M = dict(time_masks=2, time_mask_frames=20, freq_masks=2, freq_mask_bins=8)
arms = {"none": None, "masks": A(**M), "mixup": A(mixup_alpha=0.4), "gain": A(gain_db=6.0),
        "all": A(mixup_alpha=0.4, gain_db=6.0, **M), "mm": A(mixup_alpha=0.4, **M)}
shape = {"b": dict(max_frames=8000), "c": dict(crop_frames=300), "f": {}}[sys.argv[2]]
arm = sys.argv[1]
norm = arm.startswith("n-")
arm = arm[2:] if norm else arm
L = melctl.Loader(sys.argv[3], batch_size=256, seed=1, augment=arms[arm], prefetch=4,
                  threads=1, normalize=norm, **shape)
def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime
for b in L:
    pass
out = []
for e in range(8):
    c0, n = cpu(), 0
    for b in L:
        n += len(b[0])
    out.append((cpu() - c0) / n * 1e6)
print(json.dumps(out))
'''


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    builds, arms, shape, rounds = sys.argv[1].split(","), sys.argv[2].split(","), sys.argv[3], int(sys.argv[4])
    split = sys.argv[5]
    res = {}
    for _ in range(rounds):
        for arm in arms:
            for b in builds:
                env = dict(os.environ, PYTHONPATH=b, OPENBLAS_NUM_THREADS="1")
                p = subprocess.run([sys.executable, "-c", ONE, arm, shape, split], env=env,
                                   capture_output=True, text=True, check=True)
                res.setdefault((b, arm), []).extend(json.loads(p.stdout))
    print("| arm | build | min CPU µs a clip | median |")
    print("| --- | --- | ---: | ---: |")
    for arm in arms:
        for b in builds:
            v = res[(b, arm)]
            print(f"| {arm} | {b} | {min(v):.2f} | {statistics.median(v):.2f} |")


if __name__ == "__main__":
    main()
