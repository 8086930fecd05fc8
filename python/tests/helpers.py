"""Reading melctl's files the independent way (h5py, numpy) to compare with melctl's reader."""

import json

import h5py
import numpy as np


def widened(mel: h5py.Dataset, index=slice(None)) -> np.ndarray:
    """`mel[index]` as float32, exactly: f16 widened, bf16 bit patterns shifted into f32."""
    raw = mel[index]
    if str(mel.attrs.get("dtype", "")).startswith("bfloat16"):
        return (raw.astype(np.uint32) << 16).view(np.float32)
    return raw.astype(np.float32)


def read_all(path):
    """Everything a Split exposes, read with h5py (or numpy for an npy split)."""
    path = str(path)
    if path.endswith(".npy.d"):
        mel = np.load(f"{path}/mel.npy", mmap_mode="r")
        meta = json.load(open(f"{path}/meta.json"))
        return {
            "mel": np.asarray(mel, dtype=np.float32),
            "label": np.load(f"{path}/label.npy"),
            "meta": meta,
        }
    with h5py.File(path, "r") as f:
        return {
            "mel": widened(f["mel"]),
            "label": f["label"][:],
            "path": [p.decode() if isinstance(p, bytes) else p for p in f["path"][:]],
            "mean": f["mel_mean"][:] if "mel_mean" in f else None,
            "std": f["mel_std"][:] if "mel_std" in f else None,
            "label_names": list(f.attrs["label_names"]),
            "config": json.loads(f.attrs["config"]),
            "stored": f["mel"].dtype,
        }


def interruptible_child(script: str):
    """Starts `script` in a child interpreter that turns SIGINT into KeyboardInterrupt.

    Python keeps SIGINT ignored when its parent started it ignored (a shell's background
    job, as a CI runner may be), and then a Ctrl-C test would test nothing: the child
    restores the default handler first.
    """
    import subprocess
    import sys

    prelude = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    return subprocess.Popen([sys.executable, "-c", prelude + script], stdout=subprocess.PIPE, text=True)
