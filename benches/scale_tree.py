#!/usr/bin/env python3
"""A dataset tree of N clips for memory-at-scale measurements: tiny 16-bit WAV files
(64 samples at 4096 Hz by default, a 4 KiB block each on disk), each its own file (melctl
refuses two names of one file), so a million clips cost about 4 GB and a minute to write:

    python3 benches/scale_tree.py ROOT N [--splits training=0.8,testing=0.2] [--samples 64]

ROOT/{split}/class_XX/recording_NNNNNNN_ch0.wav, over 10 classes, named with long-ish
paths as real datasets have.
"""

import argparse
import struct
from pathlib import Path


def wav(samples: int, seed: int) -> bytes:
    data = struct.pack(f"<{samples}h", *(((seed * 7919 + i * 104729) % 2001) - 1000 for i in range(samples)))
    header = b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE"
    fmt = b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, 4096, 8192, 2, 16)
    return header + fmt + b"data" + struct.pack("<I", len(data)) + data


def main():
    p = argparse.ArgumentParser()
    p.add_argument("root", type=Path)
    p.add_argument("n", type=int)
    p.add_argument("--splits", default="training=0.8,testing=0.2")
    p.add_argument("--samples", type=int, default=64)
    a = p.parse_args()
    splits = [(name, float(r)) for name, r in (s.split("=") for s in a.splits.split(","))]
    done = 0
    for i, (name, share) in enumerate(splits):
        count = a.n - done if i == len(splits) - 1 else int(a.n * share)
        for c in range(10):
            (a.root / name / f"class_{c:02d}").mkdir(parents=True, exist_ok=True)
        for k in range(count):
            target = a.root / name / f"class_{k % 10:02d}" / f"recording_{k:07d}_ch0.wav"
            if not target.exists():
                target.write_bytes(wav(a.samples, done + k))
        done += count
    print(f"{done} clips under {a.root}")


if __name__ == "__main__":
    main()
