#!/usr/bin/env python3
"""Generates the real-speech keyword corpus: words spoken by espeak-ng, in several
formats and sample rates, as ROOT/{training,validation,testing}/{word}/*.

Speakers are espeak-ng voices (an English accent, a voice variant, a speed and a pitch)
and are disjoint across the splits: every voice *variant* belongs to exactly one split,
so the testing split is spoken by voices the model never heard. Each file gets a random
gain and a random lead-in of silence, and one of six formats: 16-bit WAV at 22,050 Hz
(espeak's own), 16-bit WAV at 16 kHz, 24-bit FLAC at 44.1 kHz, 32-bit float WAV at 8 kHz,
Ogg Vorbis at 48 kHz, MP3 at 24 kHz (stereo: the same voice in both channels).

With ``--repeat K`` each file says its word 1 to K times (drawn per file), so the
utterances run from about half a second to several seconds: the variable-length corpus
for whole clips (``audio.length = "whole"``) and duration buckets.

Needs espeak-ng and sox (Debian: espeak-ng sox libsox-fmt-all). Deterministic for a seed:
the same tools give the same files. Usage:

    scripts/make_speech_corpus.py OUT [--speakers 6] [--repeat 1] [--seed 0] [--jobs N]
"""

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

WORDS = ["yes", "no", "up", "down", "left", "right", "stop", "go", "on", "off"]
ACCENTS = ["en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en-029", "en-gb-x-gbcwmd"]
# Every variant speaks in one split only.
VARIANTS = {
    "training": ["m1", "m2", "m4", "m6", "m7", "f1", "f3", "f5", "klatt", "klatt4", "croak", "m8"],
    "validation": ["m5", "f4", "klatt3"],
    "testing": ["m3", "f2", "klatt2"],
}
# (extension, sox output options): format, sample rate, sample type, channels.
FORMATS = [
    ("wav", []),
    ("wav", ["-r", "16000", "-b", "16"]),
    ("flac", ["-r", "44100", "-b", "24"]),
    ("wav", ["-r", "8000", "-e", "floating-point", "-b", "32"]),
    ("ogg", ["-r", "48000"]),
    ("mp3", ["-r", "24000", "-c", "2"]),
]


def speakers(split, per_variant, rng):
    """`per_variant` speakers per variant of `split`: (name, voice, speed, pitch)."""
    out = []
    for variant in VARIANTS[split]:
        for k in range(per_variant):
            accent = rng.choice(ACCENTS)
            speed = rng.randint(130, 200)
            pitch = rng.randint(20, 80)
            out.append((f"{variant}-{k}", f"{accent}+{variant}", speed, pitch))
    return out


def make(job):
    """Speaks one word as one speaker and writes it in its format."""
    path, word, voice, speed, pitch, gain, lead, fmt, tmp = job
    raw = os.path.join(tmp, os.path.basename(path) + ".wav")
    subprocess.run(
        ["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", raw, word],
        check=True, capture_output=True,
    )
    ext, opts = fmt
    subprocess.run(
        ["sox", raw, *opts, path, "gain", f"{gain:.1f}", "pad", f"{lead:.3f}", "0"],
        check=True, capture_output=True,
    )
    os.remove(raw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--speakers", type=int, default=6, help="speakers per voice variant (validation gets half)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1, help="each file says its word 1 to this many times")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    for tool in ("espeak-ng", "sox"):
        if shutil.which(tool) is None:
            sys.exit(f"make_speech_corpus: {tool} is not installed (Debian: apt-get install espeak-ng sox libsox-fmt-all)")
    rng = random.Random(args.seed)
    jobs = []
    tmp = tempfile.mkdtemp(prefix="speech-corpus-")
    n = 0
    for split in ("training", "validation", "testing"):
        per = max(1, args.speakers // 2) if split == "validation" else args.speakers
        for name, voice, speed, pitch in speakers(split, per, rng):
            for word in WORDS:
                folder = os.path.join(args.out, split, word)
                os.makedirs(folder, exist_ok=True)
                fmt = FORMATS[n % len(FORMATS)]
                n += 1
                path = os.path.join(folder, f"{name}_{word}.{fmt[0]}")
                gain = -rng.uniform(0.0, 12.0)
                lead = rng.uniform(0.0, 0.1)
                said = ", ".join([word] * rng.randint(1, args.repeat)) if args.repeat > 1 else word
                jobs.append((path, said, voice, speed, pitch, gain, lead, fmt, tmp))
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(make, jobs))
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(jobs)} files of {len(WORDS)} words under {args.out}")


if __name__ == "__main__":
    main()
