"""melctl.build: the same outputs as `melctl build`, the configuration layered and
checked, progress, errors by kind, files left out named, and Ctrl-C stopping cleanly."""

import json
import os
import signal
import textwrap

import h5py
import numpy as np
import pytest

import melctl
from helpers import interruptible_child

SHORT = {"audio": {"clip_seconds": 1.0}}


def datasets(path):
    """Every dataset of an output file and its attributes but the build's times and versions."""
    out = {}
    with h5py.File(path, "r") as f:
        for name, ds in f.items():
            out[name] = ds[()]
        attrs = dict(f.attrs)
    for k in ("created", "melctl_version", "build_id", "created_unix"):
        attrs.pop(k, None)
    config = json.loads(attrs.pop("config"))
    config["run"] = None  # how it ran (loader, threads), not what it computed
    out["attrs"] = attrs
    out["config"] = config
    return out


def test_build_writes_what_the_cli_writes(demo_data, outputs, tmp_path):
    calls = []
    report = melctl.build(
        demo_data, tmp_path / "out", config=SHORT, loader="stream",
        progress=lambda split, done, total: calls.append((split, done, total)),
    )
    assert report["ok"] and report["published"]
    assert [s["split"] for s in report["splits"]] == ["testing", "training", "validation"]
    for split in ("testing", "training", "validation"):
        ours = datasets(tmp_path / "out" / f"{split}.h5")
        cli = datasets(outputs["f16"] / f"{split}.h5")
        assert ours.keys() == cli.keys()
        for key in ours:
            if key == "attrs":
                assert ours[key].keys() == cli[key].keys()
                continue
            a, b = ours[key], cli[key]
            if isinstance(a, np.ndarray):
                assert a.dtype == b.dtype and np.array_equal(a, b), f"{split}/{key}"
            else:
                assert a == b, f"{split}/{key}"
        # Per split, the callback saw 0 .. total, never going back.
        seen = [(d, t) for s, d, t in calls if s == split]
        assert seen[0][0] == 0 and seen[-1][0] == seen[-1][1] == len(ours["label"])
        assert all(x[0] <= y[0] for x, y in zip(seen, seen[1:]))
    # The report is the CLI's JSON: figures per split, the resolved configuration.
    assert report["config"]["audio"]["clip_seconds"] == 1.0
    assert sum(s["clips"] for s in report["splits"]) == 40


def test_overrides_land_in_their_section_and_bad_ones_are_refused(demo_data, tmp_path):
    melctl.build(demo_data, tmp_path / "a", config=SHORT, loader="stream", n_mels=16,
                 dtype="f32", splits=["testing"])
    a = melctl.open(tmp_path / "a", "testing")
    assert a.clip_shape[-2] == 16 and a.stored_dtype == "f32"
    # `section__key`, and a section as a dict, say the same.
    melctl.build(demo_data, tmp_path / "b", config=SHORT, loader="stream", mel={"n_mels": 16},
                 output__dtype="f32", splits=["testing"])
    b = melctl.open(tmp_path / "b", "testing")
    assert np.array_equal(a[0], b[0])
    with pytest.raises(melctl.ConfigError, match="hop: ambiguous: segment.long.hop, segment.short.hop"):
        melctl.build(demo_data, tmp_path / "c", hop=3)
    with pytest.raises(melctl.ConfigError, match="no_such_key: no configuration key"):
        melctl.build(demo_data, tmp_path / "c", no_such_key=3)
    with pytest.raises(melctl.ConfigParseError):
        melctl.build(demo_data, tmp_path / "c", n_mels="many")
    with pytest.raises(melctl.ConfigError, match="n_fft"):
        melctl.build(demo_data, tmp_path / "c", n_fft=3)
    with pytest.raises(melctl.UnknownPresetError):
        melctl.build(demo_data, tmp_path / "c", preset="nope")
    with pytest.raises(TypeError, match="no TOML form"):
        melctl.build(demo_data, tmp_path / "c", n_mels=None)
    with pytest.raises(ValueError, match="on_error"):
        melctl.build(demo_data, tmp_path / "c", on_error="ignore")
    assert not (tmp_path / "c").exists()


def test_a_keyword_for_a_key_unset_by_default_lands_in_its_section(demo_data, tmp_path):
    """`top_db=80.0` was refused as an unknown key (unset keys were missing from the
    lookup), though documented."""
    melctl.build(demo_data, tmp_path / "out", config=SHORT, loader="stream",
                 splits=["testing"], top_db=80.0)
    assert melctl.open(tmp_path / "out", "testing").config["log"]["top_db"] == 80.0


def test_a_manifest_is_split_by_ratio_and_seed_as_the_cli_splits_it(demo_data, tmp_path):
    """melctl.build had no split_ratio or seed: a small manifest without a split column
    was refused ("give it a larger ratio") with no way to give one."""
    import subprocess

    wavs = sorted(demo_data.glob("*/*/*.wav"))[:20]
    manifest = tmp_path / "m.csv"
    manifest.write_text("path,label\n" + "".join(f"{w},{w.parent.name}\n" for w in wavs))
    ratio = {"training": 0.6, "testing": 0.4}
    melctl.build(manifest, tmp_path / "py", config=SHORT, loader="stream",
                 split_ratio=ratio, seed=5)
    from conftest import melctl_binary as binary
    (tmp_path / "short.toml").write_text("[audio]\nclip_seconds = 1.0\n")
    subprocess.run([binary(), "build", "--manifest", manifest, "-o", tmp_path / "cli", "-q",
                    "--config", tmp_path / "short.toml", "--split-ratio",
                    "training=0.6,testing=0.4", "--seed", "5"], check=True)
    for split in ("training", "testing"):
        assert melctl.open(tmp_path / "py", split).paths == melctl.open(tmp_path / "cli", split).paths
    with pytest.raises(melctl.DatasetError, match="first-level folders name the splits"):
        melctl.build(demo_data, tmp_path / "x", config=SHORT, seed=1)
    with pytest.raises(ValueError, match="split_ratio"):
        melctl.build(manifest, tmp_path / "x", config=SHORT, split_ratio="training:1")
    with pytest.raises(melctl.ConfigError, match="mel.n_mels: set twice, as n_mels and mel__n_mels"):
        melctl.build(manifest, tmp_path / "x", config=SHORT, n_mels=16, mel__n_mels=24)
    # A keyword and the `backend` argument that name one key: one would silently win.
    with pytest.raises(melctl.ConfigError, match="run.backend: set twice, as backend and run__backend"):
        melctl.build(manifest, tmp_path / "x", config=SHORT, backend="cpu", run__backend="cpu")


def test_a_config_file_is_read_and_a_missing_one_named(demo_data, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[audio]\nclip_seconds = 1.0\n[mel]\nn_mels = 20\n")
    melctl.build(demo_data, tmp_path / "out", config=cfg, loader="stream", splits=["testing"])
    assert melctl.open(tmp_path / "out", "testing").clip_shape[-2] == 20
    with pytest.raises(melctl.IoError, match="nope.toml"):
        melctl.build(demo_data, tmp_path / "out", config=tmp_path / "nope.toml")


def test_errors_are_raised_by_kind_and_nothing_is_published(demo_data, tmp_path):
    with pytest.raises(melctl.IoError, match="missing"):
        melctl.build(tmp_path / "missing", tmp_path / "out")
    # An output folder that is a file is refused before any work.
    (tmp_path / "file").write_text("x")
    with pytest.raises(melctl.Error, match="file"):
        melctl.build(demo_data, tmp_path / "file", config=SHORT, loader="stream")
    assert (tmp_path / "file").read_text() == "x"

    def stop(split, done, total):
        raise RuntimeError("stop here")

    # Long clips on one thread: the build outlasts the first call of the callback (made
    # within 50 ms of the start), so the exception stops it before its publish.
    with pytest.raises(RuntimeError, match="stop here"):
        melctl.build(demo_data, tmp_path / "out", loader="stream", threads=1,
                     clip_seconds=60.0, progress=stop)
    assert not list((tmp_path / "out").glob("*.h5"))
    with pytest.raises(TypeError, match="progress"):
        melctl.build(demo_data, tmp_path / "out", progress=3)


def test_an_exception_from_the_callback_at_the_end_stops_the_publish(demo_data, tmp_path):
    """The callback's last call (the last split done) raised after the outputs were
    published: the caller was told the build failed while the folder held it."""
    last = sorted(p.name for p in demo_data.iterdir())[-1]

    def fail_at_the_end(split, done, total):
        if split in (last, "merge") and done == total:
            raise RuntimeError("at the end")

    for attempt in range(3):  # the old race lost nearly every time; three to be sure
        out = tmp_path / f"out{attempt}"
        with pytest.raises(RuntimeError, match="at the end"):
            melctl.build(demo_data, out, config=SHORT, loader="stream", progress=fail_at_the_end)
        assert not list(out.glob("*.h5")), "published, then raised"
        assert not (out / "melctl-build.json").exists()
    # The same for a merge.
    shards = tmp_path / "sharded"
    for k in range(2):
        melctl.build(demo_data, shards, config=SHORT, loader="stream", shard=(k, 2))
    with pytest.raises(RuntimeError, match="at the end"):
        melctl.merge(shards, progress=fail_at_the_end)
    assert not list(shards.glob("*.h5"))
    report = melctl.merge(shards)
    assert len(report["splits"]) == 3


def test_names_in_messages_are_escaped_and_on_one_line(demo_data, tmp_path):
    """A file named with terminal escapes reached Python's warning and exception raw (the
    screen cleared), and a folder name with a newline made a two-line error."""
    import shutil

    root = tmp_path / "data"
    shutil.copytree(demo_data, root)
    (root / "testing" / "leak" / "evil\x1b[2J\x1b[31mred.wav").write_bytes(b"RIFF....WAVEjunk")
    with pytest.warns(UserWarning) as warned:
        melctl.build(root, tmp_path / "out", config=SHORT, loader="stream")
    text = " ".join(str(w.message) for w in warned)
    assert "\x1b" not in text and "\\u{1b}[2J" in text, text
    with pytest.raises(melctl.DecodeError) as e:
        melctl.build(root, tmp_path / "out2", config=SHORT, loader="stream", on_error="fail")
    assert "\x1b" not in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(melctl.Error) as e:
        melctl.open(tmp_path / "a\nb" / "x.h5")
    assert "\n" not in str(e.value), str(e.value)


def test_a_file_left_out_is_named_or_stops_the_build(demo_data, tmp_path):
    import shutil

    root = tmp_path / "data"
    shutil.copytree(demo_data, root)
    bad = next((root / "testing").glob("*/*.wav"))
    bad.write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk")
    with pytest.warns(UserWarning, match="1 file\\(s\\) left out"):
        report = melctl.build(root, tmp_path / "out", config=SHORT, loader="stream")
    testing = next(s for s in report["splits"] if s["split"] == "testing")
    assert len(testing["skipped"]) + len(testing["unreadable"]) == 1
    assert bad.name in json.dumps(testing)
    with pytest.raises(melctl.DecodeError, match=bad.name):
        melctl.build(root, tmp_path / "out2", config=SHORT, loader="stream", on_error="fail")
    assert not list((tmp_path / "out2").glob("*.h5"))


def test_labels_fix_the_ids(demo_data, tmp_path):
    names = sorted(p.name for p in (demo_data / "training").iterdir())
    wanted = list(reversed(names)) + ["extra"]
    melctl.build(demo_data, tmp_path / "out", config=SHORT, loader="stream", labels=wanted,
                 splits=["testing"])
    s = melctl.open(tmp_path / "out", "testing")
    assert s.label_names == wanted
    for i in range(len(s)):
        assert wanted[s.labels[i]] == s.paths[i].split("/")[1]
    with pytest.raises(melctl.ConfigError, match="classes not in the label map"):
        melctl.build(demo_data, tmp_path / "o2", config=SHORT, loader="stream", labels=["x"])


def test_ctrl_c_stops_the_build_cleanly(demo_data, tmp_path):
    """A real SIGINT in a child process: KeyboardInterrupt, nothing published."""
    script = textwrap.dedent(
        f"""
        import sys, melctl
        def progress(split, done, total):
            print("progress", flush=True)
        try:
            # Long clips (60 s) and one thread: the build outlasts the signal.
            melctl.build({str(demo_data)!r}, {str(tmp_path / "out")!r}, loader="stream",
                         threads=1, clip_seconds=60.0, progress=progress)
            print("finished")
        except KeyboardInterrupt:
            print("interrupted")
        """
    )
    child = interruptible_child(script)
    assert child.stdout.readline().strip() == "progress"
    child.send_signal(signal.SIGINT)
    rest = child.stdout.read()
    assert child.wait(timeout=120) == 0
    assert "interrupted" in rest, rest
    # Nothing published, and the folder the build made for it is not left behind.
    assert not (tmp_path / "out").exists(), os.listdir(tmp_path / "out")


def test_label_lists_are_checked_like_label_maps(demo_data, tmp_path):
    names = sorted(p.name for p in (demo_data / "training").iterdir())
    for bad, why in ((names + [names[0]], "both"), (names + [""], "label"), (names + ["a\nb"], "label")):
        with pytest.raises(melctl.ConfigError, match=why):
            melctl.build(demo_data, tmp_path / "out", config=SHORT, loader="stream", labels=bad)
    assert not list((tmp_path / "out").glob("*.h5"))
    with pytest.raises(TypeError, match="list of split names"):
        melctl.build(demo_data, tmp_path / "out", config=SHORT, loader="stream", splits="training")


def test_the_progress_callback_is_told_each_change_once(demo_data, tmp_path):
    calls = []
    melctl.build(demo_data, tmp_path / "out", config=SHORT, loader="stream",
                 progress=lambda *a: calls.append(a))
    assert all(a != b for a, b in zip(calls, calls[1:])), calls


def test_keywords_that_set_one_key_twice_or_say_nothing_are_refused(tmp_path, demo_data):
    """Found by an attack: a section dict and a key inside it, `cache_dir=` and
    `run__cache_dir=`, each silently let one value win (the stored configuration named a
    cache folder the build never used); `None` for a key that cannot be unset kept the
    preset's value; an array given for a section was read by position."""
    out = tmp_path / "x"
    with pytest.raises(melctl.ConfigError, match="mel.n_mels: set twice, as mel and n_mels"):
        melctl.build(demo_data, out, mel={"n_mels": 16}, n_mels=64)
    with pytest.raises(melctl.ConfigError, match="run.threads: set twice"):
        melctl.build(demo_data, out, run={"threads": 1}, threads=2)
    with pytest.raises(melctl.ConfigError, match="run.cache_dir: set twice, as cache_dir and run__cache_dir"):
        melctl.build(demo_data, out, cache_dir=tmp_path / "a", run__cache_dir=str(tmp_path / "b"))
    with pytest.raises(ValueError, match="audio.clip_seconds: None is not a value"):
        melctl.build(demo_data, out, config={"audio": {"clip_seconds": None}})
    with pytest.raises(melctl.ConfigParseError, match="`mel` is a section"):
        melctl.build(demo_data, out, mel=[512])
    with pytest.raises(melctl.ConfigError, match="shard"):
        melctl.build(demo_data, out, shard=(1, 0))
    assert not out.exists()


def test_numpy_integers_are_integers_and_cache_dir_is_the_cache_used(tmp_path, demo_data):
    cache = tmp_path / "cache"
    melctl.build(demo_data, tmp_path / "o", config={"audio": {"clip_seconds": 1.0}},
                 threads=np.int64(1), loader="memmap", cache_dir=cache, splits=["testing"])
    split = melctl.open(tmp_path / "o", "testing")
    assert split.config["run"]["cache_dir"] == str(cache)
    assert any(cache.iterdir())
