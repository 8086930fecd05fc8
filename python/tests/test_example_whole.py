"""``python/examples/train_whole.py`` runs as its docstring says, on whole clips, with
duration buckets and with crops scored over windows: a short run on a small corpus ends
with the promised line and beats chance on two well-separated classes (the accuracies on
the espeak-ng corpora are in BENCHMARKS.md). Needs PyTorch."""

import subprocess
import sys

import numpy as np
import pytest

import melctl
from conftest import ROOT, need_torch
from test_whole import RATE, tone, write_wav

EXAMPLE = ROOT / "python" / "examples" / "train_whole.py"


@pytest.fixture(scope="module")
def whole_build(tmp_path_factory):
    root = tmp_path_factory.mktemp("example") / "data"
    rng = np.random.default_rng(0)
    for split, count in (("training", 24), ("validation", 6), ("testing", 8)):
        for k in range(count):
            c = k % 2
            n = int(RATE * rng.uniform(0.5, 3.0))
            write_wav(root / split / f"c{c}" / f"{k}.wav", tone(n, 300 + 1500 * c, seed=k))
    out = root.parent / "out"
    melctl.build(root, out, preset="speech-16k", config={"audio": {"length": "whole"}})
    return out


@pytest.mark.parametrize("how", [["--max-frames", "3000"], ["--crop", "60"],
                                 ["--max-frames", "3000", "--augment"]])
def test_train_whole_example_runs_and_learns(whole_build, how):
    need_torch()
    out = subprocess.run(
        [sys.executable, EXAMPLE, "--data", whole_build, *how, "--epochs", "3", "--batch", "8",
         "--threads", "2"],
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("file-level accuracy on testing: ") and "(8 files)" in last, last
    accuracy = float(last.split(": ")[1].split()[0])
    assert accuracy >= 0.75, out.stdout
    if how[0] == "--max-frames":
        assert "padding" in out.stdout


def test_train_whole_example_refuses_a_bad_flag_in_one_line(whole_build):
    need_torch()
    out = subprocess.run(
        [sys.executable, EXAMPLE, "--data", whole_build, "--crop", "100000", "--epochs", "1"],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
    assert "crop_frames" in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
