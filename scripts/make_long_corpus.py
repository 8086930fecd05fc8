#!/usr/bin/env python3
"""Generates the long-recordings corpus: minutes-long files, one class per file (the
language spoken), as ROOT/{training,validation,testing}/{language}/*.wav.

Each file is espeak-ng reading a long run of random numbers in one language (English,
German, French, Spanish) in one voice variant, speed and pitch, with a random gain. The
voice variants are disjoint across the splits, so the testing split is spoken by voices
the model never heard. For whole clips (``audio.length = "whole"``) trained on random
crops and scored per file over all windows.

Needs espeak-ng and sox (Debian: espeak-ng sox). Deterministic for a seed. Usage:

    scripts/make_long_corpus.py OUT [--files 8] [--seconds 60 150] [--seed 0] [--jobs N]
"""

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

LANGUAGES = {"english": "en", "german": "de", "french": "fr", "spanish": "es"}
VARIANTS = {
    "training": ["m1", "m2", "m4", "m6", "f1", "f3", "klatt", "croak"],
    "validation": ["m5", "f4"],
    "testing": ["m3", "f2", "klatt2", "m7"],
}
# Numbers espeak reads at about 2.2 a second at 150 words a minute.
NUMBERS_PER_SECOND = 2.2


def make(job):
    """Speaks one long run of numbers and writes it as 16-bit WAV at 16 kHz."""
    path, text, voice, speed, pitch, gain, tmp = job
    raw = os.path.join(tmp, os.path.basename(path))
    subprocess.run(
        ["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", raw, text],
        check=True, capture_output=True,
    )
    subprocess.run(
        ["sox", raw, "-r", "16000", "-b", "16", path, "gain", f"{gain:.1f}"],
        check=True, capture_output=True,
    )
    os.remove(raw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--files", type=int, default=8, help="training files per language (testing half, validation a quarter)")
    ap.add_argument("--seconds", type=float, nargs=2, default=[60.0, 150.0], metavar=("MIN", "MAX"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    for tool in ("espeak-ng", "sox"):
        if shutil.which(tool) is None:
            sys.exit(f"make_long_corpus: {tool} is not installed (Debian: apt-get install espeak-ng sox)")
    rng = random.Random(args.seed)
    tmp = tempfile.mkdtemp(prefix="long-corpus-")
    jobs = []
    counts = {"training": args.files, "validation": max(1, args.files // 4), "testing": max(1, args.files // 2)}
    for split, count in counts.items():
        for name, code in LANGUAGES.items():
            folder = os.path.join(args.out, split, name)
            os.makedirs(folder, exist_ok=True)
            for k in range(count):
                variant = VARIANTS[split][k % len(VARIANTS[split])]
                seconds = rng.uniform(*args.seconds)
                speed = rng.randint(130, 180)
                numbers = int(seconds * NUMBERS_PER_SECOND * speed / 150)
                text = " ".join(str(rng.randint(0, 999)) for _ in range(numbers))
                path = os.path.join(folder, f"{variant}-{k}.wav")
                jobs.append((path, text, f"{code}+{variant}", speed, rng.randint(20, 80), -rng.uniform(0, 12), tmp))
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(make, jobs))
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(jobs)} files of {len(LANGUAGES)} languages under {args.out}")


if __name__ == "__main__":
    main()
