"""Whole clips (issue 37): ``audio.length = "whole"`` stores each file at its own length;
``split[i]`` is exactly the spectrogram of the whole file; h5py reads a clip in two
lines; statistics count real frames only; the Loader crops (short clips padded, with
lengths) and buckets by duration (``max_frames``), every clip once an epoch, the same
batches whatever the threads and after a resume; bad requests are one-line errors."""

import json
import math
import shutil
import subprocess
import wave

import h5py
import numpy as np
import pytest

import melctl
from conftest import melctl_binary

WHOLE = {"audio": {"length": "whole"}}
RATE = 16000
HOP = 160  # speech-16k


def write_wav(path, samples, rate=RATE, channels=1):
    path.parent.mkdir(parents=True, exist_ok=True)
    data = np.clip(np.asarray(samples) * 32767, -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(data.tobytes())


def tone(n, freq, rate=RATE, seed=0):
    t = np.arange(n) / rate
    noise = np.random.default_rng(seed).standard_normal(n)
    return 0.3 * np.sin(2 * np.pi * freq * t) + 0.02 * noise


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Two classes of tones from 0.3 s to 4 s, one file at 22.05 kHz and one in stereo."""
    root = tmp_path_factory.mktemp("whole") / "data"
    rng = np.random.default_rng(1)
    for split, count in (("train", 14), ("test", 6)):
        for k in range(count):
            c = k % 2
            n = int(RATE * rng.uniform(0.3, 4.0))
            write_wav(root / split / f"c{c}" / f"{k}.wav", tone(n, 300 + 600 * c, seed=k))
    write_wav(root / "train" / "c0" / "resampled.wav", tone(30000, 300, 22050), 22050)
    stereo = np.repeat(tone(20000, 900), 2)
    write_wav(root / "train" / "c1" / "stereo.wav", stereo, channels=2)
    return root


@pytest.fixture(scope="module")
def built(corpus):
    out = corpus.parent / "out"
    melctl.build(corpus, out, preset="speech-16k", config=WHOLE)
    return out


def samples_at_16k(path):
    with wave.open(str(path)) as w:
        n, rate = w.getnframes(), w.getframerate()
    return -(-n * RATE // rate)


def test_each_clip_is_the_whole_files_spectrogram(corpus, built):
    s = melctl.open(built, "train")
    assert s.length == "whole" and len(s) == 16 and s.clip_shape == (80, None)
    assert len(s.labels) == len(s.paths) == len(s.frames) == 16
    for i in range(len(s)):
        n = samples_at_16k(corpus / s.paths[i])
        assert s.frames[i] == 1 + n // HOP, s.paths[i]
        want = melctl.Extractor("speech-16k", config={"audio": {"clip_seconds": n / RATE}})
        assert np.array_equal(s[i], want.file(corpus / s.paths[i]).astype(np.float32)), s.paths[i]
        assert s.labels[i] == s.label_names.index(s.paths[i].split("/")[1])


def test_extractor_from_split_gives_each_clip_at_its_own_length(corpus, built):
    """Issue 38: an Extractor made from a split extracts with its stored settings; a
    whole file, or its samples as an array (at any rate), gives the stored clip."""
    s = melctl.open(built, "train")
    ex = melctl.Extractor.from_split(s)
    assert ex.dtype == "float32" and json.loads(json.dumps(s.config)) == s.config
    for i in range(len(s)):
        got = ex.file(corpus / s.paths[i])
        assert got.shape == (80, s.frames[i]) and np.array_equal(got, s[i]), s.paths[i]
    # Samples at their own rate: resampled whole, then cut, as the build does.
    for name in ("c0/resampled.wav", "c0/0.wav"):
        i = s.paths.index(f"train/{name}")
        with wave.open(str(corpus / "train" / name)) as w:
            rate = w.getframerate()
            audio = np.frombuffer(w.readframes(w.getnframes()), "<i2") / 32768
        assert np.array_equal(ex(audio.astype(np.float32), rate), s[i]), name
    # Several rows of different clips at once do not fit one array: refused in one line.
    with pytest.raises(melctl.ShapeError, match="one at a time"):
        ex(np.zeros((2, 16000), np.float32), RATE)
    with pytest.raises(melctl.LimitError, match="too short"):
        ex(np.zeros(10, np.float32), RATE)


def test_h5py_reads_a_clip_in_two_lines_and_statistics_count_real_frames(built):
    s = melctl.open(built, "train")
    with h5py.File(built / "train.h5", "r") as f:
        rows = np.flatnonzero(f["path"].asstr()[:] == s.paths[3])
        clip = np.concatenate(f["mel"][rows[0] : rows[-1] + 1], axis=-1)[:, : s.frames[3]]
        mean, std = f["mel_mean"][:], f["mel_std"][:]
        assert f.attrs["mel_dims"] == "block,mel,frame"
        assert json.loads(f.attrs["config"])["audio"]["length"] == "whole"
    assert np.array_equal(clip.astype(np.float32), s[3])
    every = np.concatenate([s[i] for i in range(len(s))], axis=1).astype(np.float64)
    assert np.allclose(mean, every.mean(axis=1), rtol=1e-9, atol=1e-9)
    assert np.allclose(std, every.std(axis=1), rtol=1e-9, atol=1e-9)


def test_npy_sink_and_cli_give_the_same_clips(corpus, built, tmp_path):
    config = tmp_path / "whole.toml"
    config.write_text('[audio]\nlength = "whole"\n[output]\nsink = "npy"\n')
    subprocess.run(
        [melctl_binary(), "build", "-i", corpus, "-o", tmp_path / "npy", "--preset",
         "speech-16k", "--config", config, "--quiet"],
        check=True,
    )
    a, b = melctl.open(built, "test"), melctl.open(tmp_path / "npy", "test")
    assert b.length == "whole" and list(a.frames) == list(b.frames) and a.paths == b.paths
    for i in range(len(a)):
        assert np.array_equal(a[i], b[i])
    assert np.array_equal(a.mean, b.mean)


def test_whole_clips_refuse_what_they_cannot_honour_in_one_line(corpus, tmp_path):
    cases = [
        ("leak-4k", WHOLE, "segment"),
        ("speech-16k", {"audio": {"length": "whole"}, "log": {"kind": "db", "top_db": 80.0}},
         "log.top_db"),
        ("speech-16k", {"audio": {"length": "whole"}, "run": {"loader": "preload"}}, "run.loader"),
        ("speech-16k", {"audio": {"length": "whole", "max_seconds": 0}}, "audio.max_seconds"),
    ]
    for preset, config, field in cases:
        with pytest.raises(melctl.ConfigError) as e:
            melctl.build(corpus, tmp_path / "x", preset=preset, config=config)
        assert field in str(e.value) and "\n" not in str(e.value), str(e.value)
    with pytest.raises(melctl.ConfigError, match="resume"):
        melctl.build(corpus, tmp_path / "x", preset="speech-16k", config=WHOLE, resume=True)
    assert not (tmp_path / "x").exists()


def test_files_too_long_or_too_short_are_named(tmp_path):
    root = tmp_path / "data"
    write_wav(root / "a" / "ok.wav", tone(8000, 300))
    write_wav(root / "a" / "long.wav", tone(3 * RATE, 300))
    write_wav(root / "b" / "tiny.wav", tone(100, 300))
    write_wav(root / "b" / "ok.wav", tone(8000, 900))
    config = {"audio": {"length": "whole", "max_seconds": 2.0}}
    with pytest.warns(UserWarning, match="2 file"):
        report = melctl.build(root, tmp_path / "out", preset="speech-16k", config=config)
    skipped = {s["path"].split("/")[-2] + "/" + s["path"].split("/")[-1]: s["reason"]
               for s in report["splits"][0]["skipped"]}
    assert set(skipped) == {"a/long.wav", "b/tiny.wav"}, skipped
    assert "audio.max_seconds" in skipped["a/long.wav"]
    assert "too short" in skipped["b/tiny.wav"]
    s = melctl.open(tmp_path / "out", "all")
    assert sorted(s.paths) == ["a/ok.wav", "b/ok.wav"]
    with pytest.raises(melctl.Error, match="long.wav.*audio.max_seconds"):
        melctl.build(root, tmp_path / "fail", preset="speech-16k", config=config,
                     on_error="fail")


def every_batch(loader):
    return [tuple(np.array(a) for a in b) for b in loader]


def test_crops_of_whole_clips_pad_short_ones_and_replay_exactly(built):
    s = melctl.open(built, "train")
    crop = 150
    loader = melctl.Loader(built / "train.h5", batch_size=4, crop_frames=crop, seed=3,
                           with_index=True)
    seen = []
    for x, y, lengths, index in loader:
        assert x.shape[1:] == (80, crop)
        for k, i in enumerate(index):
            n = lengths[k]
            assert n == min(crop, s.frames[i]) and y[k] == s.labels[i]
            clip = s[i]
            window = x[k, :, :n]
            offsets = [o for o in range(s.frames[i] - n + 1)
                       if np.array_equal(clip[:, o : o + n], window)]
            assert offsets, f"clip {i}: the window is not in the clip"
            assert not x[k, :, n:].any()
            seen.append(int(i))
    assert sorted(seen) == list(range(len(s)))
    assert 0 < loader.padding_share(0) < 1
    # The same batches with one thread or three, and after a resume mid-epoch.
    one = every_batch(melctl.Loader(built / "train.h5", batch_size=4, crop_frames=crop,
                                    seed=3, threads=1, epoch=2))
    three = melctl.Loader(built / "train.h5", batch_size=4, crop_frames=crop, seed=3,
                          threads=3, epoch=2)
    it = iter(three)
    first = [tuple(np.array(a) for a in next(it))]
    state = three.state_dict()
    assert state["crop_frames"] == crop and state["max_frames"] == 0
    resumed = melctl.Loader(built / "train.h5", batch_size=4, crop_frames=crop, seed=3)
    resumed.load_state_dict(state)
    rest = every_batch(resumed)
    assert len(one) == len(first) + len(rest)
    for a, b in zip(one, first + rest):
        assert all(np.array_equal(u, v) for u, v in zip(a, b))


@pytest.fixture(scope="module")
def spread(tmp_path_factory):
    """600 clips of 0.5 to 10 s (a realistic spread of lengths), two classes."""
    root = tmp_path_factory.mktemp("spread") / "data"
    rng = np.random.default_rng(5)
    for k in range(600):
        n = int(RATE * rng.uniform(0.5, 10.0))
        write_wav(root / f"c{k % 2}" / f"{k}.wav", tone(n, 300 + 600 * (k % 2), seed=k))
    out = root.parent / "out"
    melctl.build(root, out, preset="speech-16k", config=WHOLE)
    return out


def items_by_index(loader):
    """Each item a loader gives, keyed by its index: (x, lengths)."""
    out = {}
    for x, _, lengths, index in loader:
        for k, i in enumerate(index):
            out[int(i)] = (np.array(x[k]), int(lengths[k]))
    return out


def test_large_crop_batches_written_past_the_caches_equal_small_ones(spread):
    """Crop batches of 64 × 300 frames (6 MB, beyond the caches) are written with
    streaming stores, normalised and given their gain as they are widened; batches of 4 in
    place. Every item is the same bits either way, its window is in its clip, the padding
    of a short clip is zero, and normalisation is the stored statistics'."""
    s = melctl.open(spread, "all")
    crop = 300
    mean = s.mean.astype(np.float32)[:, None]
    scale = (1.0 / s.std).astype(np.float32)[:, None]
    for normalize, augment in ((False, None), (True, None),
                               (True, melctl.Augment(gain_db=6.0, time_masks=1,
                                                     time_mask_frames=20))):
        make = lambda batch: melctl.Loader(spread, split="all", batch_size=batch,
                                           crop_frames=crop, seed=8, with_index=True,
                                           normalize=normalize, augment=augment, threads=2)
        large, small = items_by_index(make(64)), items_by_index(make(4))
        assert sorted(large) == sorted(small) == list(range(len(s)))
        for i, (x, n) in large.items():
            y, m = small[i]
            assert n == m == min(crop, s.frames[i])
            assert np.array_equal(x, y), f"clip {i}: {normalize=}, {augment=}"
            assert not x[:, n:].any(), f"clip {i}: padding"
            if augment is not None:
                continue
            clip = s[i]
            want = (clip - mean) * scale if normalize else clip
            first = np.flatnonzero(np.abs(want.T - x[:, 0]).max(axis=1) <= 1e-5)
            assert any(np.allclose(want[:, o:o + n], x[:, :n], rtol=1e-6, atol=1e-5)
                       for o in first), f"clip {i}: the window is not in the clip"


@pytest.mark.parametrize("shape, batch, large", [
    (dict(crop_frames=300), 256, True), (dict(max_frames=16000), 256, True),
    (dict(crop_frames=300), 255, True),
    (dict(crop_frames=100), 9, False), (dict(max_frames=3000), 9, False)])
@pytest.mark.parametrize("gain", [0.0, 5.0])
def test_mixed_batches_are_the_plain_batches_mixed_bit_for_bit(spread, shape, batch, large, gain):
    """A pair is widened, normalised, given its gains and mixed in one pass (in place, or
    in a scratch pair streamed into a batch beyond the caches: 24 MB of crops, 5 MB of
    buckets): each mixed item is exactly ``w·x_i + (1 − w)·x_j`` in float32 of the items
    the loader gives without mixup (with the same gains), over its whole width (a short
    clip's padding mixes with its partner's frames). Batches of 255 end in a three-cycle,
    whose third scratch item a worker keeps from batch to batch: nothing of a former batch
    shows through."""
    make = lambda aug: melctl.Loader(spread, split="all", batch_size=batch, seed=4,
                                     normalize=True, augment=aug, **shape)
    plain = list(make(melctl.Augment(gain_db=gain) if gain else None))
    mixed = list(make(melctl.Augment(mixup_alpha=0.5, gain_db=gain)))
    assert len(plain) == len(mixed)
    if large:
        assert sum(np.asarray(x).nbytes >= 4 << 20 for x, _, _ in plain) >= len(plain) / 2
    checked = 0
    for (x, y, n), (m, soft, mn) in zip(plain, mixed):
        for i, j in mixed_partners(x, y, m, soft):
            assert mn[i] == max(n[i], n[j])
            checked += 1
    assert checked > 100


def mixed_partners(x, y, m, soft):
    """``(i, j)`` for each item ``i`` of a mixed batch ``m`` (soft labels ``soft``) whose
    weight the soft labels tell (its partner ``j`` of another class): asserts that ``m[i]``
    is ``w·x_i + (1 − w)·x_j`` of the unmixed batch ``x`` (labels ``y``), bit for bit."""
    x, m = np.asarray(x), np.asarray(m)
    assert x.shape == m.shape
    for i in range(len(x)):
        w = np.float32(soft[i, y[i]])
        if w > 0.999:
            continue
        found = [j for j in range(len(x)) if y[j] != y[i]
                 and np.array_equal(m[i], w * x[i] + (np.float32(1) - w) * x[j])]
        assert found, f"item {i}: no partner gives its values bit for bit"
        yield i, found[0]


@pytest.mark.parametrize("shape, batch, large", [
    (dict(crop_frames=300), 256, True), (dict(max_frames=16000), 256, True),
    (dict(crop_frames=100), 9, False), (dict(max_frames=3000), 9, False)])
@pytest.mark.parametrize("gain", [0.0, 5.0])
def test_masked_batches_are_the_plain_batches_with_whole_bins_and_frames_zeroed(
        spread, shape, batch, large, gain):
    """Masks are drawn before an item is read and applied as it is widened (in place, or
    in a scratch item streamed into a batch beyond the caches): each masked item is the
    item the loader gives without masks (with the same gains), bit for bit, but for whole
    mel bins zeroed over its real frames and whole frames zeroed in every other bin, at
    most as many and as wide as the settings allow, and its padding zero."""
    masks = dict(time_masks=2, time_mask_frames=20, freq_masks=2, freq_mask_bins=8)
    make = lambda aug: melctl.Loader(spread, split="all", batch_size=batch, seed=4,
                                     normalize=True, augment=aug, **shape)
    plain = list(make(melctl.Augment(gain_db=gain) if gain else None))
    masked = list(make(melctl.Augment(gain_db=gain, **masks)))
    assert len(plain) == len(masked)
    if large:
        assert sum(np.asarray(x).nbytes >= 4 << 20 for x, _, _ in plain) >= len(plain) / 2
    bins_seen = frames_seen = 0
    for (x, y, n), (m, my, mn) in zip(plain, masked):
        x, m = np.asarray(x), np.asarray(m)
        assert np.array_equal(y, my) and np.array_equal(n, mn)
        for i in range(len(x)):
            real = int(n[i])
            assert not m[i][:, real:].any(), f"item {i}: padding"
            changed = m[i] != x[i]
            assert not m[i][changed].any(), f"item {i}: a mask writes zeros only"
            zero = m[i][:, :real] == 0
            bins = zero.all(axis=1)
            frames = zero[~bins].all(axis=0) if (~bins).any() else np.zeros(real, bool)
            # Everything the masks changed lies in a zero bin or a zero frame, and the
            # rest is the plain item's bits.
            whole = bins[:, None] | frames[None, :]
            assert not changed[:, :real][~whole].any(), f"item {i}: a change outside a mask"
            assert np.array_equal(m[i][:, :real][~whole], x[i][:, :real][~whole])
            assert bins.sum() <= 16 and frames.sum() <= 40 + (x[i][:, :real] == 0).all(0).sum()
            bins_seen += bins.sum()
            frames_seen += frames.sum()
    assert bins_seen > 100 and frames_seen > 100


@pytest.fixture(scope="module")
def spread_chunked(spread):
    """The clips of ``spread`` built again into chunked, deflated files: the same f16
    values, decoded rather than mapped, so each item is widened, then mixed, then masked
    (where a mapped pair is widened, mixed and time-masked in one pass)."""
    out = spread.parent / "out-chunked"
    config = {**WHOLE, "hdf5": {"chunk_clips": 3, "gzip": 1}}
    melctl.build(spread.parent / "data", out, preset="speech-16k", config=config)
    return out


@pytest.mark.parametrize("shape, batch", [
    (dict(crop_frames=300), 256), (dict(max_frames=16000), 256), (dict(crop_frames=300), 255),
    (dict(crop_frames=100), 9), (dict(max_frames=3000), 9)])
@pytest.mark.parametrize("gain", [0.0, 5.0])
def test_pairs_masked_as_they_are_mixed_are_the_bits_of_masking_after(
        spread, spread_chunked, shape, batch, gain):
    """A mapped pair's time masks are applied as it is widened and mixed (its frequency
    masks after), in place or in scratch items streamed into a batch beyond the caches;
    the same clips decoded from chunks are mixed, then masked: every batch is the same
    bits either way (the same pairs, weights, masks and lengths), and the masks zero
    whole frames."""
    aug = melctl.Augment(mixup_alpha=0.5, gain_db=gain, time_masks=2, time_mask_frames=20,
                         freq_masks=2, freq_mask_bins=8)
    make = lambda out: list(melctl.Loader(out, split="all", batch_size=batch, seed=4,
                                          normalize=True, augment=aug, with_index=True,
                                          **shape))
    mapped, decoded = make(spread), make(spread_chunked)
    assert len(mapped) == len(decoded)
    zero_frames = 0
    for (x, y, n, i), (x2, y2, n2, i2) in zip(mapped, decoded):
        x, x2 = np.asarray(x), np.asarray(x2)
        assert np.array_equal(i, i2) and np.array_equal(y, y2) and np.array_equal(n, n2)
        assert x.view(np.uint32).tobytes() == x2.view(np.uint32).tobytes()
        for item, real in zip(x, n):
            zero_frames += int((item[:, :real] == 0).all(axis=0).sum())
    assert zero_frames > 100


@pytest.mark.parametrize("pattern", [0x7C00, 0x7E00, 0xFE01])
@pytest.mark.parametrize("where", ["body", "last"])
def test_a_value_not_finite_in_a_mixed_pair_is_refused_naming_its_clip(
        spread, tmp_path, pattern, where):
    """A pair widened and mixed in one pass judges each member: an infinity or a NaN of
    either sign stored in a clip (a block's body, or the clip's last frame, a run's tail)
    is the one-line error naming that clip, with buckets and crops, normalised or not;
    statistics that overflow float32 are the normalize error."""
    s = melctl.open(spread, "all")
    frames = np.asarray(s.frames)
    rows = -(-frames // 32)
    first = np.concatenate([[0], np.cumsum(rows)[:-1]])
    clip = int(np.argsort(frames)[len(frames) // 2])
    frame = 5 if where == "body" else int(frames[clip]) - 1
    path = tmp_path / "all.h5"
    shutil.copy(spread / "all.h5", path)
    with h5py.File(path, "r+") as f:
        row = f["mel"][first[clip] + frame // 32].view(np.uint16)
        row[7, frame % 32] = pattern
        f["mel"][first[clip] + frame // 32] = row.view(np.float16)
    mixup = melctl.Augment(mixup_alpha=0.5)
    for shape in (dict(max_frames=3000), dict(crop_frames=int(frames.max()))):
        for normalize in (False, True):
            with pytest.raises(melctl.DatasetError) as e:
                for _ in melctl.Loader(path, 16, seed=3, augment=mixup, normalize=normalize,
                                       **shape):
                    pass
            assert f"whole clip {clip} holds a value that is not finite" in str(e.value)
            assert len(str(e.value).splitlines()) == 1
    n = s.clip_shape[-2]
    with pytest.raises(melctl.ConfigError, match="normalize"):
        for _ in melctl.Loader(spread / "all.h5", 16, max_frames=3000, augment=mixup,
                               normalize=(np.zeros(n), np.full(n, 1e-38))):
            pass


def test_duration_buckets_hold_every_clip_once_within_max_frames(spread):
    s = melctl.open(spread, "all")
    max_frames = 8000
    loader = melctl.Loader(spread, split="all", batch_size=64, max_frames=max_frames,
                           seed=1, with_index=True)
    seen, padded, real = [], 0, 0
    for x, y, lengths, index in loader:
        assert x.shape[0] * x.shape[2] <= max_frames
        assert x.shape[2] == max(lengths)
        for k, i in enumerate(index):
            assert lengths[k] == s.frames[i] and y[k] == s.labels[i]
            assert np.array_equal(x[k, :, : lengths[k]], s[i])
            assert not x[k, :, lengths[k]:].any()
        seen.extend(int(i) for i in index)
        padded += x.shape[0] * x.shape[2]
        real += int(lengths.sum())
    assert sorted(seen) == list(range(len(s)))
    share = 1 - real / padded
    assert math.isclose(share, loader.padding_share(0), rel_tol=1e-9, abs_tol=1e-12)
    assert share < 0.05, share
    # Ranks get as many batches; the same plan whatever the threads; another epoch
    # differs.
    ranks = [melctl.Loader(spread, split="all", batch_size=64, max_frames=max_frames,
                           seed=1, shard=(r, 3)) for r in range(3)]
    assert len({len(r) for r in ranks}) == 1
    a = melctl.Loader(spread, split="all", batch_size=64, max_frames=max_frames, seed=1,
                      threads=1)
    b = melctl.Loader(spread, split="all", batch_size=64, max_frames=max_frames, seed=1,
                      threads=4)
    assert a.plan(0).tolist() == b.plan(0).tolist() != a.plan(1).tolist()


@pytest.mark.parametrize("how", [dict(max_frames=8000), dict(crop_frames=300),
                                 dict(max_frames=8000, augment="all")])
def test_epochs_of_one_loader_equal_fresh_loaders_though_buffers_are_reused(spread, how):
    """A loader's buffers go from one epoch to the next (and a batch freed after its
    epoch ended to the epoch running): every epoch's batches are still a fresh loader's,
    padding included, so nothing of an earlier batch is left in a reused buffer."""
    how = dict(how)
    if how.pop("augment", None):
        how["augment"] = melctl.Augment(time_masks=2, time_mask_frames=20, freq_masks=2,
                                        freq_mask_bins=8, gain_db=3, mixup_alpha=0.4)
    make = lambda: melctl.Loader(spread, split="all", batch_size=64, seed=4, **how)
    loader = make()
    for epoch in range(3):
        fresh = make()
        fresh.set_epoch(epoch)
        want = every_batch(fresh)
        got = []
        for batch in loader:  # the previous batch is freed as the next arrives
            got.append(tuple(np.array(a) for a in batch))
        assert len(got) == len(want) > 1
        for a, b in zip(got, want):
            assert all(np.array_equal(u, v) for u, v in zip(a, b)), f"epoch {epoch}"


def test_loader_options_that_do_not_fit_whole_clips_are_one_line_errors(built, demo_data,
                                                                          tmp_path):
    path = built / "train.h5"
    longest = int(melctl.open(path).frames.max())
    cases = [
        ({}, "crop_frames"),
        ({"crop_frames": 10, "max_frames": 1000}, "max_frames"),
        ({"crop_frames": longest + 1}, f"1 to {longest}"),
        ({"max_frames": longest - 1}, "longest clip"),
    ]
    for options, words in cases:
        with pytest.raises(melctl.ConfigError) as e:
            melctl.Loader(path, batch_size=4, **options)
        assert words in str(e.value) and "\n" not in str(e.value), str(e.value)
    melctl.build(demo_data, tmp_path / "fixed", config={"audio": {"clip_seconds": 1.0}})
    with pytest.raises(melctl.ConfigError, match="batch_size"):
        melctl.Loader(tmp_path / "fixed", split="training", batch_size=4, max_frames=1000)
    shutil.rmtree(tmp_path / "fixed")


def test_shards_of_whole_clips_merge_into_the_one_build(corpus, built, tmp_path):
    out = tmp_path / "sharded"
    for k in range(3):
        melctl.build(corpus, out, preset="speech-16k", config=WHOLE, shard=(k, 3))
    melctl.merge(out)
    for split in ("train", "test"):
        a, b = melctl.open(built, split), melctl.open(out, split)
        assert a.paths == b.paths and list(a.frames) == list(b.frames)
        assert all(np.array_equal(a[i], b[i]) for i in range(len(a)))
        assert np.array_equal(a.mean, b.mean) and np.array_equal(a.std, b.std)


def test_attacks_on_whole_clips_are_refused_or_honoured(corpus, built, tmp_path):
    """What an attack round found: each now a one-line refusal or honoured."""
    # The Extractor computes whole clips as the build does (it once returned one block).
    ex = melctl.Extractor("speech-16k", config=WHOLE)
    s = melctl.open(built, "train")
    assert np.array_equal(ex.file(corpus / s.paths[0]), s[0])
    path = built / "train.h5"
    # A max_frames too large for memory names max_frames, never an overflow.
    with pytest.raises(melctl.LimitError, match="max_frames"):
        melctl.Loader(path, batch_size=4, max_frames=10**18)
    # shuffle=False buckets in order, the same every epoch.
    plain = melctl.Loader(path, batch_size=8, max_frames=700, shuffle=False)
    assert plain.plan(0).tolist() == plain.plan(1).tolist()
    assert sorted(plain.plan(0)[:, 0].tolist()) == list(range(len(melctl.open(path))))
    # A bound on the files kept is not a feature setting.
    other = tmp_path / "other"
    config = {"audio": {"length": "whole", "max_seconds": 700}}
    melctl.build(corpus, other, preset="speech-16k", config=config)
    ev = melctl.FileEvaluator.for_split(melctl.open(built, "test"), melctl.open(other, "train"))
    assert ev.classes == 2
    # A file whose rows are two runs (a path twice) is refused at open, in one line.
    copy = tmp_path / "dup.h5"
    shutil.copy(path, copy)
    with h5py.File(copy, "r+") as f:
        paths = f["path"].asstr()[:]
        # The second clip takes the first clip's path, source and label: one path, two runs.
        second = np.flatnonzero(paths != paths[0])[0]
        rows = np.flatnonzero(paths == paths[second])
        for column in ("path", "source_frames", "source_rate", "label"):
            f[column][rows] = f[column][0]
    with pytest.raises(melctl.DatasetError) as e:
        s = melctl.open(copy)
        [s[i] for i in range(len(s))]
    assert "\n" not in str(e.value)
