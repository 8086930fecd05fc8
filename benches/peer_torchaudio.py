#!/usr/bin/env python3
"""torchaudio peers for the CUDA backend (leak-4k), run on the GPU machine.

  kernel   MelSpectrogram + AmplitudeToDB alone on clips already on the GPU
           (CUDA events, median of --reps runs), every one of the 237 short windows
           per clip, as a torchaudio user writes it.
  pipeline A careful torchaudio + h5py build of every split: a thread pool reads the
           WAVs (wave + numpy), batches go to the GPU through pinned memory, results
           come back as float16 and are written to one HDF5 file per split.

Prints one JSON line per measurement.
"""
import argparse
import json
import os
import time
import wave
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
import torchaudio

CLIP = 40960


def transforms(dev):
    mel = torchaudio.transforms.MelSpectrogram(
        sample_rate=4096, n_fft=512, win_length=512, hop_length=128, f_min=0.0,
        f_max=2048.0, n_mels=32, window_fn=torch.hann_window, power=2.0, center=True,
        pad_mode="reflect", norm=None, mel_scale="htk").to(dev)
    db = torchaudio.transforms.AmplitudeToDB(stype="power", top_db=None).to(dev)
    return mel, db


def spectro(x, mel, db):
    """[B, 40960] -> [B, 79, 3, 32, 5]"""
    s = x.unfold(-1, 1024, 512).unfold(-1, 512, 256)
    b = s.shape[0]
    return db(mel(s.reshape(-1, 512))).reshape(b, 79, 3, 32, 5)


def kernel(args):
    dev = torch.device("cuda")
    mel, db = transforms(dev)
    x = (torch.rand(args.clips, CLIP, device=dev) * 2 - 1)
    with torch.no_grad():
        for _ in range(3):
            spectro(x, mel, db)
        torch.cuda.synchronize()
        times = []
        for _ in range(args.reps):
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            y = spectro(x, mel, db).half()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
    ms = sorted(times)[len(times) // 2]
    print(json.dumps({"what": "torchaudio_kernel", "device": torch.cuda.get_device_name(0),
                      "clips": args.clips, "reps": args.reps, "median_ms": round(ms, 4),
                      "clips_per_s": round(args.clips / (ms / 1e3)), "torch": torch.__version__,
                      "torchaudio": torchaudio.__version__, "out_shape": list(y.shape)}))


def read_clip(path):
    with wave.open(path, "rb") as w:
        data = np.frombuffer(w.readframes(CLIP), dtype="<i2")
    out = np.zeros(CLIP, dtype=np.float32)
    out[: len(data)] = data[:CLIP] / 32768.0
    return out


def pipeline(args):
    import h5py
    dev = torch.device("cuda")
    mel, db = transforms(dev)
    t0 = time.perf_counter()
    total = 0
    splits = sorted(d for d in os.listdir(args.root) if os.path.isdir(os.path.join(args.root, d)))
    classes = sorted({c for s in splits for c in os.listdir(os.path.join(args.root, s))})
    os.makedirs(args.out, exist_ok=True)
    with ThreadPoolExecutor(args.threads) as pool, torch.no_grad():
        for split in splits:
            files, labels = [], []
            for ci, c in enumerate(classes):
                d = os.path.join(args.root, split, c)
                if os.path.isdir(d):
                    names = sorted(n for n in os.listdir(d) if n.endswith(".wav"))
                    files += [os.path.join(d, n) for n in names]
                    labels += [ci] * len(names)
            n = len(files)
            final = os.path.join(args.out, f"{split}.h5")
            tmp = final + ".partial"
            with h5py.File(tmp, "w") as f:
                ds = f.create_dataset("mel", (n, 79, 3, 32, 5), dtype="f2")
                f.create_dataset("label", data=np.array(labels, dtype=np.int64))
                host = torch.empty((args.batch, CLIP), dtype=torch.float32).pin_memory()
                for start in range(0, n, args.batch):
                    chunk = files[start:start + args.batch]
                    clips = list(pool.map(read_clip, chunk))
                    k = len(clips)
                    host[:k].copy_(torch.from_numpy(np.stack(clips)))
                    y = spectro(host[:k].to(dev, non_blocking=True), mel, db).half().cpu().numpy()
                    ds[start:start + k] = y
            os.replace(tmp, final)
            total += n
    wall = time.perf_counter() - t0
    print(json.dumps({"what": "torchaudio_h5py_pipeline", "clips": total, "wall_s": round(wall, 3),
                      "clips_per_s": round(total / wall), "threads": args.threads,
                      "batch": args.batch}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["kernel", "pipeline"])
    p.add_argument("--clips", type=int, default=8192)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--root")
    p.add_argument("--out")
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--batch", type=int, default=2048)
    a = p.parse_args()
    kernel(a) if a.mode == "kernel" else pipeline(a)


if __name__ == "__main__":
    main()
