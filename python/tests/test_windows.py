"""Long recordings as windows (issue 37): ``audio.windows = {seconds, hop_seconds}`` cuts
each file into clips of ``seconds`` every ``hop_seconds``, the last partial one placed per
``audio.pad``; each row records its file and start; ``FileEvaluator.for_split`` decides
per file over all its windows."""

import wave

import numpy as np
import pytest

import melctl
from test_whole import RATE, tone, write_wav

WINDOWS = {"audio": {"windows": {"seconds": 1.0, "hop_seconds": 0.5}}}


def windows_of(n, window=RATE, hop=RATE // 2):
    return 1 if n <= window else 1 + -(-(n - window) // hop)


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    root = tmp_path_factory.mktemp("windows") / "data"
    for k, seconds in enumerate([0.4, 1.0, 2.3, 3.0, 4.75]):
        c = k % 2
        write_wav(root / f"c{c}" / f"{k}.wav", tone(int(RATE * seconds), 300 + 600 * c, seed=k))
    out = root.parent / "out"
    melctl.build(root, out, preset="speech-16k", config=WINDOWS)
    return root, out


def read(path):
    with wave.open(str(path)) as w:
        return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768


def test_each_window_is_its_excerpt_with_its_file_and_start(recordings):
    root, out = recordings
    s = melctl.open(out, "all")
    assert s.length == "windows" and s.clip_shape == (80, 101)
    one_second = melctl.Extractor("speech-16k", config={"audio": {"clip_seconds": 1.0}})
    files = sorted({p for p in s.paths})
    assert len(s) == sum(windows_of(len(read(root / p))) for p in files)
    for i in range(len(s)):
        audio = read(root / s.paths[i])
        k = int(round(s.starts[i] / 0.5))
        assert s.files[i] == files.index(s.paths[i])
        assert k == list(np.flatnonzero(s.files == s.files[i])).index(i)
        excerpt = audio[k * RATE // 2 : k * RATE // 2 + RATE]
        assert np.array_equal(s[i], one_second(excerpt, RATE).astype(np.float32)), (s.paths[i], k)
        assert s.labels[i] == s.label_names.index(s.paths[i].split("/")[0])


def test_extractor_from_split_gives_a_files_windows(recordings):
    root, out = recordings
    s = melctl.open(out, "all")
    ex = melctl.Extractor.from_split(s)
    for path in sorted(set(s.paths)):
        rows = np.flatnonzero(np.array(s.paths) == path)
        got = ex.file(root / path)
        assert got.shape == (len(rows), 80, 101), path
        for k, i in enumerate(rows):
            assert np.array_equal(got[k], s[i]), (path, k)


def test_file_evaluator_decides_each_file_over_its_windows(recordings):
    _, out = recordings
    s = melctl.open(out, "all")
    ev = melctl.FileEvaluator.for_split(s)
    # Each window votes for its file's class, but the first window of every file votes
    # wrong: a file of two or more windows is still decided right by the mean.
    probs = np.zeros((len(s), 2), np.float32)
    probs[np.arange(len(s)), s.labels] = 0.9
    probs[np.arange(len(s)), 1 - s.labels] = 0.1
    first = np.r_[True, s.files[1:] != s.files[:-1]]
    probs[first] = probs[first][:, ::-1]
    loader = melctl.Loader(out, split="all", batch_size=3, with_index=True, seed=2)
    for _, _, index in loader:
        ev.add(probs[index], index)
    report = ev.report()
    assert report["files"] == 5
    singles = sum(1 for f in range(5) if (s.files == f).sum() == 1)
    assert report["correct"] == 5 - singles
    with pytest.raises(melctl.ShapeError, match="beyond"):
        ev.add(probs[:1], [len(s)])


def test_windows_refuse_what_they_cannot_honour(recordings, tmp_path):
    root, _ = recordings
    for config, field in [
        ({"audio": {"windows": {"seconds": 1.0, "hop_seconds": 0}}}, "hop_seconds"),
        ({"audio": {"windows": {"seconds": -1, "hop_seconds": 1}}}, "windows.seconds"),
        ({"audio": {"length": "whole", "windows": {"seconds": 1, "hop_seconds": 1}}},
         "audio.windows"),
    ]:
        with pytest.raises(melctl.ConfigError, match=field):
            melctl.build(root, tmp_path / "x", preset="speech-16k", config=config)
    assert not (tmp_path / "x").exists()


def test_shards_of_windows_merge_into_the_one_build(recordings, tmp_path):
    """Windows give several clips a file: a shard's record, the merge's checks and its
    order check take that (the merge refused them before)."""
    root, out = recordings
    sharded = tmp_path / "sharded"
    for k in range(2):
        melctl.build(root, sharded, preset="speech-16k", config=WINDOWS, shard=(k, 2))
    melctl.merge(sharded)
    a, b = melctl.open(out, "all"), melctl.open(sharded, "all")
    assert a.paths == b.paths and list(a.files) == list(b.files) and list(a.starts) == list(b.starts)
    assert all(np.array_equal(a[i], b[i]) for i in range(len(a)))
    assert np.array_equal(a.mean, b.mean)


def test_gaps_make_no_window_past_the_end_and_fixed_models_score_windows(recordings, tmp_path):
    """With a hop longer than the window, audio left in a gap makes no window of padding
    alone; windows of S seconds are scored by a model trained on fixed S-second clips."""
    root, out = recordings
    gap = {"audio": {"windows": {"seconds": 0.5, "hop_seconds": 1.3}}}
    melctl.build(root, tmp_path / "gap", preset="speech-16k", config=gap)
    s = melctl.open(tmp_path / "gap", "all")
    for i in range(len(s)):
        assert s.starts[i] * RATE < len(read(root / s.paths[i])), (s.paths[i], s.starts[i])
    melctl.build(root, tmp_path / "fixed", preset="speech-16k", config={"audio": {"clip_seconds": 1.0}})
    ev = melctl.FileEvaluator.for_split(melctl.open(out, "all"),
                                       trained_on=melctl.open(tmp_path / "fixed", "all"))
    assert ev.classes == 2
