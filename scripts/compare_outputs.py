#!/usr/bin/env python3
"""Compares two melctl output folders (OUT/{split}.h5 or OUT/{split}.npy.d, and their
build records) independently of melctl, with h5py and numpy.

    python3 scripts/compare_outputs.py A B

Every dataset and attribute must be equal byte for byte, but for the build id (each
build's own), the configuration's `run` options (threads, loader, backend: how the
values were computed, not what they are; the spec must be equal) and the per-mel-bin
statistics (mel_mean, mel_std), which must agree to a relative 1e-12: one pass over the
same rows in the same order gives the same bits, and the order a build's batches reach
its writer may differ between two builds. Prints each
difference and exits 1, or prints how many items were compared and exits 0.
Used by the sharded-build tests: a merge must equal the unsharded build.
"""

import json
import sys
from pathlib import Path

import numpy as np

STATS = {"mel_mean", "mel_std"}
IGNORED = {"build_id"}


def without_run(config):
    """A configuration (JSON text) without its run options."""
    c = json.loads(config)
    c.pop("run", None)
    return json.dumps(c, sort_keys=True)


def h5_items(path):
    import h5py

    items = {}
    with h5py.File(path, "r") as f:
        for k, v in f.attrs.items():
            if k == "config":
                items["@config"] = without_run(v)
            elif k not in IGNORED:
                items[f"@{k}"] = repr(v)

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                data = obj[()]
                if name in STATS:
                    items[name] = ("stats", np.asarray(data, dtype=np.float64))
                elif obj.dtype.kind == "O":
                    items[name] = (obj.dtype.str, obj.shape, repr(list(data)))
                else:
                    items[name] = (obj.dtype.str, obj.shape, np.asarray(data).tobytes())
                for k, v in obj.attrs.items():
                    items[f"{name}@{k}"] = repr(v)

        f.visititems(visit)
    return items


def npy_items(path):
    items = {}
    for p in sorted(Path(path).iterdir()):
        if p.suffix == ".npy":
            a = np.load(p, mmap_mode="r")
            items[p.name] = (a.dtype.str, a.shape, np.asarray(a).tobytes())
        elif p.name == "meta.json":
            meta = json.loads(p.read_text())
            for k, v in meta.items():
                if k in IGNORED:
                    continue
                if k in STATS:
                    items[f"meta.{k}"] = ("stats", np.asarray(v, dtype=np.float64))
                elif k == "config":
                    items["meta.config"] = without_run(v if isinstance(v, str) else json.dumps(v))
                else:
                    items[f"meta.{k}"] = json.dumps(v, sort_keys=True)
        else:
            items[p.name] = p.read_bytes()
    return items


def outputs(folder):
    record = json.loads((Path(folder) / "melctl-build.json").read_text())
    return {split: entry["output"] for split, entry in record["splits"].items()}


def same(a, b):
    if isinstance(a, tuple) and a and a[0] == "stats":
        if not isinstance(b, tuple) or b[0] != "stats" or a[1].shape != b[1].shape:
            return False
        return bool(np.allclose(a[1], b[1], rtol=1e-12, atol=0.0))
    return a == b


def compare(a_dir, b_dir):
    differences, compared = [], 0
    a_out, b_out = outputs(a_dir), outputs(b_dir)
    if a_out != b_out:
        return [f"the build records name other outputs: {a_out} against {b_out}"], 0
    for split, name in sorted(a_out.items()):
        read = npy_items if name.endswith(".npy.d") else h5_items
        a, b = read(Path(a_dir) / name), read(Path(b_dir) / name)
        for key in sorted(set(a) | set(b)):
            compared += 1
            if key not in a or key not in b:
                differences.append(f"{name}: {key} only in {'the first' if key in a else 'the second'}")
            elif not same(a[key], b[key]):
                differences.append(f"{name}: {key} differs")
    return differences, compared


def main():
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} A B (two melctl output folders)")
    differences, compared = compare(sys.argv[1], sys.argv[2])
    for d in differences:
        print(d)
    if differences:
        sys.exit(1)
    print(f"same: {compared} items compared")


if __name__ == "__main__":
    main()
