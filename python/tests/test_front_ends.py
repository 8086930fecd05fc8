"""`melctl build` and `melctl.build` are two front ends of one prepared build (melkit's
BuildRequest): on a messy corpus they write the same outputs, report the same (skipped,
unreadable and ignored lists, backend line, verdict), and refuse the same requests with
the same words."""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import melctl
from conftest import melctl_binary
from test_build import datasets


@pytest.fixture
def messy(demo_data, tmp_path):
    """The demo clips, one of them truncated to garbage, one hidden audio file the scan
    ignores, one that is not audio, and an empty class folder."""
    root = tmp_path / "messy"
    shutil.copytree(demo_data, root)
    victim = sorted((root / "training").rglob("*.wav"))[0]
    victim.write_bytes(b"RIFF\x10\x00\x00\x00WAVEjunk")
    classes = sorted(p for p in (root / "training").iterdir() if p.is_dir())
    (classes[0] / ".hidden.wav").write_bytes((classes[0] / next(
        p.name for p in classes[0].iterdir() if p.name.endswith(".wav") and p != victim
    )).read_bytes())
    (classes[0] / "notes.txt").write_text("not audio\n")
    (root / "validation" / "empty-class").mkdir(parents=True)
    return root


def cli(*args, cwd, env=None):
    return subprocess.run([melctl_binary(), *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, env=None if env is None else {**os.environ, **env})


def comparable(report):
    """What both front ends must agree on: per split the clips, skipped and unreadable
    files, the classes, the loader's choice and the verdict's fields (its figures are
    timings); the ignored list, the backend line and whether it was published."""
    return {
        "ok": report["ok"],
        "published": report["published"],
        "backend": report["backend"],
        "ignored": report["ignored"],
        "splits": [
            {k: s[k] for k in ("split", "files", "clips", "skipped", "unreadable", "classes",
                               "loader_choice")}
            | {"verdict": sorted(s["bottleneck"]["verdict"])}
            for s in report["splits"]
        ],
    }


def test_cli_and_python_build_a_messy_corpus_alike(messy, tmp_path):
    config = tmp_path / "short.toml"
    config.write_text('[audio]\nclip_seconds = 1.0\n[run]\nbackend = "cpu"\nloader = "stream"\n')
    done = cli("build", "-i", messy, "-o", "cli", "--config", config, "--report",
               "cli.json", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with pytest.warns(UserWarning, match="left out"):
        ours = melctl.build(messy, tmp_path / "py", config=config)
    theirs = json.loads((tmp_path / "cli.json").read_text())
    assert comparable(ours) == comparable(theirs)
    # The broken file and the hidden one are named, not dropped.
    assert any(s["skipped"] for s in ours["splits"]), ours["splits"]
    assert any(".hidden.wav" in i["path"] for i in ours["ignored"]), ours["ignored"]
    for split in ("testing", "training", "validation"):
        a = datasets(tmp_path / "py" / f"{split}.h5")
        b = datasets(tmp_path / "cli" / f"{split}.h5")
        assert a.keys() == b.keys()
        for key in a:
            if isinstance(a[key], np.ndarray):
                assert np.array_equal(a[key], b[key]), f"{split}/{key}"


@pytest.mark.parametrize("case", ["unknown split", "report over an input", "cpu device",
                                  "batch of 0", "shard of a split"])
def test_cli_and_python_refuse_the_same_request_with_the_same_words(messy, tmp_path, case):
    victim = sorted((messy / "testing").rglob("*.wav"))[0]
    # A shard from an array task's environment: --shard and --split are exclusive flags.
    array_task = {"MELCTL_SHARDS": "2", "JOB_COMPLETION_INDEX": "0"}
    flags, keywords, words = {
        "unknown split": (["--split", "nope"], {"splits": ["nope"]}, 'no split named "nope"'),
        "report over an input": (["--report", victim], None, "would overwrite an input"),
        "cpu device": (["--backend", "cpu", "--device", "0"], {"backend": "cpu", "device": 0},
                       "the cpu backend uses none"),
        "batch of 0": (["--batch", "0"], {"batch_clips": 0}, "run.batch_clips"),
        "shard of a split": (["--split", "training"],
                             {"shard": "0/2", "splits": ["training"]},
                             "a shard holds its part of every split"),
    }[case]
    before = victim.read_bytes()
    env = array_task if case == "shard of a split" else None
    done = cli("build", "-i", messy, "-o", "out", *flags, cwd=tmp_path, env=env)
    assert done.returncode != 0 and words in done.stderr, done.stderr
    if keywords is not None:
        with pytest.raises(melctl.Error, match=words.replace("(", r"\(")):
            melctl.build(messy, tmp_path / "py", **keywords)
    assert victim.read_bytes() == before
    assert not (tmp_path / "out").exists() and not (tmp_path / "py").exists()


def test_empty_paths_are_named_not_shown_as_nothing(demo_data, tmp_path):
    """`melctl.build("", ...)` raised "IoError: : No such file or directory", naming
    nothing; an empty cache_dir reached the file system."""
    with pytest.raises(melctl.IoError, match="an empty path"):
        melctl.build("", tmp_path / "o")
    with pytest.raises(melctl.ConfigError, match="cache_dir.*empty path"):
        melctl.build(demo_data, tmp_path / "o2", cache_dir="", loader="memmap")
    assert not (tmp_path / "o2").exists()


def test_a_refused_build_leaves_no_output_folder_it_made(tmp_path):
    """A split all of whose files were left out is refused; the output folder the build
    made for it stayed behind, empty."""
    root = tmp_path / "broken" / "training" / "leak"
    root.mkdir(parents=True)
    (root / "a.wav").write_bytes(b"RIFF\x10\x00\x00\x00WAVEjunk")
    with pytest.raises(melctl.DatasetError, match="left out"):
        melctl.build(tmp_path / "broken", tmp_path / "out")
    assert not (tmp_path / "out").exists()
