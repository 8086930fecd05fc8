#!/usr/bin/env python3
"""The plain Python peer: soundfile + librosa + h5py, the pipeline melctl replaces.

    OPENBLAS_NUM_THREADS=1 python3 benches/peer_librosa.py ROOT OUT [--procs N]

Same job as `melctl build --preset leak-4k`: per split, every WAV is read with
soundfile, padded/trimmed to 40,960 samples, cut into 79 long x 3 short windows,
turned into a log-mel spectrogram with librosa (HTK, no norm, periodic Hann,
centre reflect padding, power 2, 10*log10(max(x, 1e-10))), stored as float16 in
OUT/{split}.h5 with int64 labels. Decoding and mel run in N worker processes
(default: all cores); the main process writes with h5py in slabs.
"""
import argparse
import os
import sys
import time
from multiprocessing import Pool

import h5py
import librosa
import numpy as np
import soundfile as sf

SR, CLIP, LONG, LHOP, SHORT, SHOP = 4096, 40960, 1024, 512, 512, 256


def mel_of(path):
    x, sr = sf.read(path, dtype="float32", always_2d=True)
    x = x.mean(axis=1)
    x = np.pad(x[:CLIP], (0, max(0, CLIP - len(x))))
    longs = np.lib.stride_tricks.sliding_window_view(x, LONG)[::LHOP]
    shorts = np.lib.stride_tricks.sliding_window_view(longs, SHORT, axis=1)[:, ::SHOP]
    m = librosa.feature.melspectrogram(
        y=np.ascontiguousarray(shorts), sr=SR, n_fft=512, hop_length=128, win_length=512, window="hann",
        center=True, pad_mode="reflect", power=2.0, n_mels=32, fmin=0.0, fmax=2048.0, htk=True, norm=None)
    return (10.0 * np.log10(np.maximum(m, 1e-10))).astype(np.float16)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("out")
    ap.add_argument("--procs", type=int, default=os.cpu_count())
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    splits = sorted(d for d in os.listdir(a.root) if os.path.isdir(os.path.join(a.root, d)))
    classes = sorted({c for s in splits for c in os.listdir(os.path.join(a.root, s))})
    t0 = time.time()
    total = 0
    with Pool(a.procs) as pool:
        for s in splits:
            files = sorted(os.path.join(a.root, s, c, f) for c in os.listdir(os.path.join(a.root, s))
                           for f in os.listdir(os.path.join(a.root, s, c)) if f.endswith(".wav"))
            labels = np.array([classes.index(os.path.basename(os.path.dirname(f))) for f in files], np.int64)
            with h5py.File(os.path.join(a.out, s + ".h5"), "w") as h:
                ds = h.create_dataset("mel", (len(files), 79, 3, 32, 5), np.float16, chunks=(1, 79, 3, 32, 5))
                h["label"] = labels
                slab = 256
                for i in range(0, len(files), slab):
                    ds[i:i + slab] = np.stack(pool.map(mel_of, files[i:i + slab], chunksize=8))
            total += len(files)
    dt = time.time() - t0
    print(f"peer soundfile+librosa+h5py: {total} clips in {dt:.2f} s = {total / dt:.0f} clips/s ({a.procs} processes)")


if __name__ == "__main__":
    sys.exit(main())
