#!/usr/bin/env python3
"""Opens a melctl HDF5 file with h5py, as a trainer would, and checks it against a spec:

    python3 tests/h5py_check.py SPEC.json

SPEC: {"file": ..., "dtype": "float32"|"float16"|"uint16", "shape": [...],
       "labels": [...], "paths": [...], "label_names": [...],
       "expected": "golden.npy", "expected_rows": [i, ...] (golden clip of each row)}
Values are compared with the suite's rule: |ours - ref| <= 0.01 dB (+1 ulp of the
stored type) on bins within 100 dB of each spectrogram's peak. Prints 'N passed, 0 failed'.
"""
import json
import sys

import h5py
import numpy as np


def main():
    spec = json.load(open(sys.argv[1]))
    f = h5py.File(spec["file"], "r")
    checks = []

    def check(name, ok, detail=""):
        checks.append((name, bool(ok), detail))

    mel = f["mel"]
    check("mel shape", list(mel.shape) == spec["shape"], f"{mel.shape} vs {spec['shape']}")
    check("mel dtype", mel.dtype == np.dtype(spec["dtype"]), str(mel.dtype))
    check("label dtype int64", f["label"].dtype == np.int64, str(f["label"].dtype))
    check("labels", list(f["label"][:]) == spec["labels"], str(list(f["label"][:])))
    paths = [p.decode() for p in f["path"][:]]
    check("paths", paths == spec["paths"], str(paths))
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in f.attrs["label_names"]]
    check("label_names", names == spec["label_names"], str(names))
    config = json.loads(f.attrs["config"])
    check("config attribute is JSON", config["mel"]["n_mels"] == spec["shape"][-2], str(config["mel"]))
    check("version attribute", len(f.attrs["melctl_version"]) > 0)

    ours = mel[:].astype(np.float64)
    ref = np.load(spec["expected"])[spec["expected_rows"]]
    per_spec = ours.shape[-2] * ours.shape[-1]
    o = ours.reshape(-1, per_spec)
    r = ref.reshape(-1, per_spec)
    inside = r >= r.max(axis=1, keepdims=True) - 100.0
    if mel.dtype == np.float16:
        ulp = np.spacing(np.abs(r).astype(np.float16)).astype(np.float64)
    else:
        ulp = 0.0
    allowed = 0.01 + ulp
    err = np.abs(o - r)
    bad = inside & ~(err <= allowed)
    check("values within 0.01 dB of the golden", not bad.any(),
          f"worst {err[inside].max():.5f} dB over {inside.sum()} bins")

    failed = [c for c in checks if not c[1]]
    for name, ok, detail in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}")
    print(f"{len(checks) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
