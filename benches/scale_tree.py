#!/usr/bin/env python3
"""A dataset tree of N clips for memory-at-scale measurements, made of hard links to a
few real WAV files (so a million clips cost directory entries, not gigabytes):

    python3 benches/scale_tree.py SOURCE_DIR ROOT N [--splits training=0.8,testing=0.2]

SOURCE_DIR holds WAV files (e.g. a `melctl demo --no-build` tree); ROOT/{split}/{class}/
gets N links in all, spread over the splits by the given shares and over 10 classes,
named with long-ish paths (as real datasets have: `recording_0001234_ch0.wav`).
"""

import argparse
import os
from pathlib import Path


def main():
    p = argparse.ArgumentParser()
    p.add_argument("source", type=Path)
    p.add_argument("root", type=Path)
    p.add_argument("n", type=int)
    p.add_argument("--splits", default="training=0.8,testing=0.2")
    a = p.parse_args()
    sources = sorted(a.source.rglob("*.wav"))
    if not sources:
        raise SystemExit(f"no WAV files under {a.source}")
    splits = [(name, float(r)) for name, r in (s.split("=") for s in a.splits.split(","))]
    done = 0
    for i, (name, share) in enumerate(splits):
        count = a.n - done if i == len(splits) - 1 else int(a.n * share)
        for c in range(10):
            (a.root / name / f"class_{c:02d}").mkdir(parents=True, exist_ok=True)
        for k in range(count):
            target = a.root / name / f"class_{k % 10:02d}" / f"recording_{k:07d}_ch0.wav"
            if not target.exists():
                os.link(sources[k % len(sources)], target)
        done += count
    print(f"{done} clips under {a.root}")


if __name__ == "__main__":
    main()
