"""Errors: one exception class per kind of melctl's Rust errors, under melctl.Error, with
the one-line message; tampered, truncated and foreign files raise and never crash the
interpreter (each is read in a child interpreter, so a crash fails the test instead of
ending the run)."""

import json
import os
import random
import shutil
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

import melctl

KINDS = [
    "ConfigError", "ConfigParseError", "UnknownPresetError", "IoError", "DecodeError",
    "UnsupportedError", "LimitError", "DatasetError", "DeviceError", "OutputError",
    "ShapeError", "InternalError", "CancelledError",
]

# Reads everything of a split in a child: prints the exception class's name or "ok";
# exits 0 unless something other than a melctl.Error was raised (or it crashed).
READ_ALL = """
import sys, melctl
path, name = sys.argv[1], (sys.argv[2] or None)
try:
    split = melctl.open(path, split=name)
    for i in range(len(split)):
        split[i]
    split.labels, split.paths, split.mean, split.config
    for x, y in melctl.Loader(split, 16, threads=2):
        pass
    print("ok")
except melctl.Error as e:
    assert "\\n" not in str(e), "a one-line message"
    print(type(e).__name__, str(e))
"""


def read_in_child(path, name=""):
    r = subprocess.run(
        [sys.executable, "-c", READ_ALL, str(path), name],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, f"the child failed ({r.returncode}): {r.stderr[-2000:]}"
    return r.stdout.strip()


def test_every_kind_is_a_melctl_error():
    for kind in KINDS:
        cls = getattr(melctl, kind)
        assert issubclass(cls, melctl.Error) and cls.__module__ == "melctl"
    assert issubclass(melctl.Error, Exception)


def test_a_missing_file_is_an_io_error(tmp_path):
    with pytest.raises(melctl.IoError, match="missing.h5"):
        melctl.open(tmp_path / "missing.h5")
    with pytest.raises(melctl.DatasetError, match="no split"):
        melctl.open(tmp_path, split="training")


@pytest.fixture
def copy(outputs, tmp_path):
    """A copy of the f16 output folder to tamper with."""
    out = tmp_path / "out"
    shutil.copytree(outputs["f16"], out)
    return out


def test_a_foreign_file_is_refused(tmp_path):
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"not an HDF5 file at all" * 100)
    assert read_in_child(junk).startswith("DatasetError")


@pytest.mark.parametrize("keep", [0.0, 0.1, 0.5, 0.9, 0.999])
def test_a_truncated_file_is_refused(copy, keep):
    path = copy / "training.h5"
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    out = read_in_child(path)
    assert out != "ok" and out.split()[0] in KINDS, out


def test_a_non_finite_value_is_refused_naming_the_clip(copy):
    path = copy / "training.h5"
    with h5py.File(path, "r+") as f:
        f["mel"][3, 0, 0, 0, 0] = np.nan
    split = melctl.open(path)
    split[2]
    with pytest.raises(melctl.DatasetError, match="clip 3.*not finite"):
        split[3]
    with pytest.raises(melctl.DatasetError, match="not finite"):
        split.clip(3, dtype="float16")
    with pytest.raises(melctl.DatasetError, match="not finite"):
        for _ in melctl.Loader(split, 8):
            pass


def test_statistics_that_are_not_finite_are_refused(copy):
    path = copy / "training.h5"
    with h5py.File(path, "r+") as f:
        f["mel_std"][0] = -1.0
    assert read_in_child(path).startswith("DatasetError")


TRUNCATE_WHILE_MAPPED = """
import os, sys, melctl
path = sys.argv[1]
split = melctl.open(path)
split[0]
os.truncate(path, os.path.getsize(path) // 2)
for what, read in (("item", lambda: split[len(split) - 1]),
                   ("loader", lambda: [b for b in melctl.Loader(split, 4, shuffle=False)]),
                   ("again", lambda: split[0])):
    try:
        read()
        print(what, "read")
    except melctl.DatasetError as e:
        print(what, "refused:", e)
"""


@pytest.mark.parametrize("name", ["training.h5", "training.npy.d"])
def test_a_split_truncated_while_mapped_raises_instead_of_a_bus_error(outputs, tmp_path, name):
    """Another process truncating a mapped split killed the interpreter ("Bus error")."""
    source = outputs["f32"] / "training.h5" if name.endswith(".h5") else outputs["npy"] / name
    split = tmp_path / name
    (shutil.copytree if source.is_dir() else shutil.copy)(source, split)
    target = split / "mel.npy" if source.is_dir() else split
    script = TRUNCATE_WHILE_MAPPED.replace("os.truncate(path", f"os.truncate({str(target)!r}")
    script = script.replace("os.path.getsize(path)", f"os.path.getsize({str(target)!r})")
    r = subprocess.run([sys.executable, "-c", script, str(split)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"the child died ({r.returncode}): {r.stderr[-2000:]}"
    lines = r.stdout.splitlines()
    assert len(lines) == 3, r.stdout
    for line in lines:
        assert "refused:" in line and "changed while it was read" in line, r.stdout


@pytest.mark.parametrize("name", ["training.h5", "training.npy.d"])
@pytest.mark.parametrize("change", ["cut by 100 bytes", "written over in place"])
def test_a_mapped_split_changed_without_a_fault_is_refused(outputs, tmp_path, name, change):
    """Cut within its last page (no fault: the cut bytes read as zeros) or written over in
    place (new bytes under the map), a mapped split read on with no word."""
    source = outputs["f32"] / "training.h5" if name.endswith(".h5") else outputs["npy"] / name
    path = tmp_path / name
    (shutil.copytree if source.is_dir() else shutil.copy)(source, path)
    target = path / "mel.npy" if source.is_dir() else path
    split = melctl.open(path)
    assert len(split) >= 6
    batches = iter(melctl.Loader(split, 1, shuffle=False, prefetch=1))
    next(batches)
    split[0]
    time.sleep(0.03)  # past the file system clock's tick
    if change == "cut by 100 bytes":
        os.truncate(target, os.path.getsize(target) - 100)
    else:
        with open(target, "r+b") as f:
            same = f.read()
            f.seek(0)
            f.write(same)  # the same bytes: only the time of modification tells
    with pytest.raises(melctl.DatasetError, match="changed while it was read"):
        split[len(split) - 1]
    with pytest.raises(melctl.DatasetError, match="changed while it was read"):
        for _ in batches:
            pass


def test_a_truncated_npy_split_is_refused(outputs, tmp_path):
    out = tmp_path / "npy"
    shutil.copytree(outputs["npy"], out)
    mel = out / "training.npy.d" / "mel.npy"
    mel.write_bytes(mel.read_bytes()[:-100])
    assert read_in_child(out, "training").split()[0] in KINDS


def test_tampered_npy_metadata_is_refused(outputs, tmp_path):
    out = tmp_path / "npy"
    shutil.copytree(outputs["npy"], out)
    meta_path = out / "training.npy.d" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["label_names"] = ["x"] * len(meta["label_names"])
    meta_path.write_text(json.dumps(meta))
    assert read_in_child(out, "training").startswith("DatasetError")


@pytest.mark.parametrize("seed", range(12))
def test_random_damage_raises_or_reads_never_crashes(copy, seed):
    path = copy / "training.h5"
    data = bytearray(path.read_bytes())
    rng = random.Random(seed)
    for _ in range(rng.choice([1, 4, 32])):
        # Half the damage in the first 4 KiB (the file's structure), half anywhere.
        at = rng.randrange(4096) if rng.random() < 0.5 else rng.randrange(len(data))
        data[at] = rng.randrange(256)
    path.write_bytes(bytes(data))
    out = read_in_child(path)
    assert out == "ok" or out.split()[0] in KINDS, out
