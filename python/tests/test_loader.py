"""melctl.Loader: what an epoch holds, exactness against h5py, normalisation, float16,
shards, len, resume from state_dict, and the batch handed over without a copy."""

import numpy as np
import pytest

import melctl
from helpers import read_all


def segments_of(ref_mel, shape):
    """Every clip's segments: [clips, segments, n_mels, frames]."""
    return ref_mel.reshape(ref_mel.shape[0], -1, *shape)


def epoch_batches(loader):
    return [tuple(np.copy(a) for a in b) for b in loader]


@pytest.mark.parametrize("build", ["f16", "bf16", "f16-chunked", "f32"])
def test_an_epoch_holds_every_segment_once_with_its_values(outputs, build):
    path = outputs[build] / "training.h5"
    ref = read_all(path)
    split = melctl.open(path)
    segs = segments_of(ref["mel"], split.segment_shape)
    loader = melctl.Loader(path, 64, seed=3, with_index=True, threads=2)
    per_clip = {}
    for x, y, clip in loader:
        assert x.dtype == np.float32 and y.dtype == np.int64 and clip.dtype == np.int64
        assert x.shape[1:] == split.segment_shape
        np.testing.assert_array_equal(y, ref["label"][clip])
        for item, c in zip(x, clip):
            per_clip.setdefault(int(c), []).append(item.tobytes())
    # Each clip's items are its segments, each once (as a multiset of values: a clip
    # may hold equal segments).
    assert sorted(per_clip) == list(range(segs.shape[0]))
    for c, items in per_clip.items():
        assert sorted(items) == sorted(s.tobytes() for s in segs[c])


def test_unshuffled_segments_come_in_file_order(outputs, h5):
    ref = read_all(h5)
    split = melctl.open(h5)
    loader = melctl.Loader(h5, 50, shuffle=False)
    xs = np.concatenate([x for x, _ in loader])
    np.testing.assert_array_equal(xs, ref["mel"].reshape(-1, *split.segment_shape))


def test_clip_batches_equal_split_items(h5):
    split = melctl.open(h5)
    loader = melctl.Loader(split, 4, unit="clip", seed=1, with_index=True)
    assert loader.item_shape == split.clip_shape
    clips = []
    for x, y, idx in loader:
        for item, i in zip(x, idx):
            np.testing.assert_array_equal(item, split[int(i)])
        np.testing.assert_array_equal(y, split.labels[idx])
        clips.extend(idx.tolist())
    assert sorted(clips) == list(range(len(split)))


def test_an_exhausted_pass_stays_exhausted(h5):
    it = iter(melctl.Loader(h5, 1000))
    assert len(list(it)) > 0
    for _ in range(3):
        with pytest.raises(StopIteration):
            next(it)


def test_len_and_drop_last(h5):
    split = melctl.open(h5)
    items = len(split) * split.segments_per_clip
    for batch in (1, 7, 64, items, items + 5):
        full = melctl.Loader(h5, batch)
        assert len(full) == -(-items // batch) == len(list(full))
        dropped = melctl.Loader(h5, batch, drop_last=True)
        assert len(dropped) == items // batch == len(list(dropped))
        assert all(len(x) == batch for x, _ in dropped)


def test_normalize_uses_the_stored_statistics(h5):
    split = melctl.open(h5)
    plain = np.concatenate([x for x, _ in melctl.Loader(h5, 100, shuffle=False)])
    normed = np.concatenate([x for x, _ in melctl.Loader(h5, 100, shuffle=False, normalize=True)])
    mean = split.mean.astype(np.float32)[:, None]
    scale = (1.0 / split.std).astype(np.float32)[:, None]
    np.testing.assert_allclose(normed, (plain - mean) * scale, rtol=1e-6, atol=1e-6)
    # Statistics given as (mean, std): a training split's for a validation split.
    given = np.concatenate(
        [x for x, _ in melctl.Loader(h5, 100, shuffle=False, normalize=(split.mean, split.std))]
    )
    np.testing.assert_array_equal(given, normed)
    with pytest.raises(melctl.ConfigError, match="mel bins"):
        melctl.Loader(h5, 10, normalize=([0.0] * 3, [1.0] * 3))
    # A deviation whose reciprocal overflows float32 was accepted; the first batch then
    # raised DatasetError blaming the file.
    n = len(split.mean)
    for mean, std, why in (
        (split.mean, [1e-300] * n, r"mel_std\[0\] is 1e-300, too small"),
        (split.mean, [-1.0] * n, "negative"),
        ([1e39] * n, split.std, r"mel_mean\[0\] is 1e39"),
    ):
        with pytest.raises(ValueError, match=why):
            melctl.Loader(h5, 10, normalize=(mean, std))
    # Statistics that pass but overflow once applied blamed the file ("which melctl never
    # stores"): the statistics are named.
    with pytest.raises(melctl.ConfigError, match="normalising it by the statistics given"):
        for _ in melctl.Loader(h5, 100, normalize=([0.0] * n, [1e-37] * n)):
            pass
    # Worker threads are bounded (20,000 was a Rust panic).
    with pytest.raises(melctl.ConfigError, match="20000"):
        melctl.Loader(h5, 8, threads=20000)


def test_float16_batches_are_the_stored_values(outputs, h5):
    import h5py

    loader = melctl.Loader(h5, 32, shuffle=False, dtype="float16")
    x16 = np.concatenate([x for x, _ in loader])
    assert x16.dtype == np.float16
    with h5py.File(h5) as f:
        np.testing.assert_array_equal(x16, f["mel"][:].reshape(x16.shape))
    with pytest.raises(melctl.ConfigError):
        melctl.Loader(outputs["f32"] / "training.h5", 8, dtype="float16")
    with pytest.raises(ValueError):
        melctl.Loader(h5, 8, dtype="float64")


def test_shards_cover_every_clip_with_as_many_batches_on_every_rank(h5):
    """Ranks once got different batch counts without drop_last (DDP then hangs in its
    last all-reduce): every rank gets as many, as DistributedSampler gives, the padding
    repeating fewer than `world` clips."""
    split = melctl.open(h5)
    for world in (1, 2, 3, 4, 7):
        seen, batches = [], set()
        for rank in range(world):
            loader = melctl.Loader(h5, 5, unit="clip", shard=(rank, world), seed=9, with_index=True)
            got = [int(i) for _, _, idx in loader for i in idx]
            assert len(got) == loader.items_per_epoch
            seen.extend(got)
            batches.add(len(loader))
        assert len(batches) == 1, batches
        assert sorted(set(seen)) == list(range(len(split)))
        assert len(seen) - len(split) < world
        # drop_last: every rank the same number of whole batches.
        lens = {len(melctl.Loader(h5, 2, unit="clip", shard=(r, world), drop_last=True)) for r in range(world)}
        assert len(lens) == 1
    with pytest.raises(melctl.ConfigError, match="rank"):
        melctl.Loader(h5, 5, shard=(2, 2))


def test_epochs_differ_and_a_seed_repeats(h5):
    a = melctl.Loader(h5, 16, seed=5)
    first = epoch_batches(a)
    assert a.epoch == 1
    second = epoch_batches(a)
    assert a.epoch == 2
    assert not all(np.array_equal(p[0], q[0]) for p, q in zip(first, second))
    b = melctl.Loader(h5, 16, seed=5)
    for p, q in zip(first, epoch_batches(b)):
        np.testing.assert_array_equal(p[0], q[0])
    c = melctl.Loader(h5, 16, seed=5, epoch=1)
    for p, q in zip(second, epoch_batches(c)):
        np.testing.assert_array_equal(p[0], q[0])
    b.set_epoch(1)
    for p, q in zip(second, epoch_batches(b)):
        np.testing.assert_array_equal(p[0], q[0])


@pytest.mark.parametrize("stop_after", [0, 1, 7, 12])
def test_state_dict_resumes_exactly_mid_epoch(h5, stop_after):
    settings = dict(batch_size=16, seed=11, with_index=True)
    whole = melctl.Loader(h5, **settings)
    reference = epoch_batches(whole) + epoch_batches(whole)
    first = melctl.Loader(h5, **settings)
    got = []
    it = iter(first)
    for _ in range(stop_after):
        got.append(tuple(np.copy(a) for a in next(it)))
    state = first.state_dict()
    assert state["epoch"] == 0 and state["batch"] == stop_after
    assert state["seed"] == 11 and state["batch_size"] == 16 and state["drop_last"] is False
    del it, first
    resumed = melctl.Loader(h5, **settings)
    resumed.load_state_dict(state)
    got += epoch_batches(resumed)
    assert resumed.state_dict()["epoch"] == 1
    got += epoch_batches(resumed)
    assert len(got) == len(reference)
    for p, q in zip(got, reference):
        for a, b in zip(p, q):
            np.testing.assert_array_equal(a, b)


def test_a_state_of_another_order_is_refused(h5):
    state = melctl.Loader(h5, 16, seed=1).state_dict()
    with pytest.raises(ValueError, match="seed"):
        melctl.Loader(h5, 16, seed=2).load_state_dict(state)
    with pytest.raises(ValueError, match="batch_size"):
        melctl.Loader(h5, 8, seed=1).load_state_dict(state)
    with pytest.raises(KeyError):
        melctl.Loader(h5, 16, seed=1).load_state_dict({"epoch": 0})


def test_a_state_of_another_build_of_the_split_is_refused(demo_data, tmp_path):
    """A state saved before the split was rebuilt (the same clip count) was accepted, and
    the resumed epoch repeated some clips and never delivered others."""
    config = {"audio": {"clip_seconds": 1.0}}
    out = tmp_path / "out"
    melctl.build(demo_data, out, config=config, loader="stream", splits=["training"])
    state = melctl.Loader(melctl.open(out, "training"), 8, seed=1).state_dict()
    assert state["build"] == melctl.open(out, "training").build_id
    melctl.build(demo_data, out, config=config, loader="stream", splits=["training"])
    again = melctl.Loader(melctl.open(out, "training"), 8, seed=1)
    assert again.items_per_epoch == melctl.Loader(melctl.open(out, "training"), 8).items_per_epoch
    with pytest.raises(ValueError, match="build"):
        again.load_state_dict(state)
    again.load_state_dict(again.state_dict())


FORKED = """
import os, pickle, signal, sys
import numpy as np
import melctl
loader = melctl.Loader(sys.argv[1], 16, seed=3)
it = iter(loader)
first = next(it)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    signal.alarm(60)  # a hang fails the test instead of stalling it
    os.close(r)
    sums = [float(x.sum()) for x, _ in it]
    os.write(w, pickle.dumps(sums))
    os._exit(0)
os.close(w)
data = b""
while chunk := os.read(r, 1 << 16):
    data += chunk
_, status = os.waitpid(pid, 0)
child = pickle.loads(data) if data else None
parent = [float(x.sum()) for x, _ in it]
print("status", status, "same", child == parent, "batches", len(parent))
"""


def test_an_iterator_forked_mid_epoch_goes_on_in_the_child(h5):
    """A running Loader iterator drained in a forked child waited for ever: its worker
    threads were the parent's. The child starts its own from where the pass was."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", FORKED, str(h5)],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    words = r.stdout.split()
    assert words[:4] == ["status", "0", "same", "True"], r.stdout
    assert int(words[5]) > 0, r.stdout


def test_a_batch_is_handed_over_without_a_copy(h5):
    x, y = next(iter(melctl.Loader(h5, 256)))
    # numpy does not own the data: the Rust buffer the workers filled does.
    assert not x.flags.owndata and x.base is not None
    assert x.flags.c_contiguous and x.flags.writeable
    x[...] = 0  # the caller's to change


def test_loader_arguments_are_checked(h5):
    with pytest.raises(melctl.ConfigError, match="batch_size"):
        melctl.Loader(h5, 0)
    with pytest.raises(melctl.ConfigError, match="prefetch"):
        melctl.Loader(h5, 8, prefetch=0)
    with pytest.raises(ValueError, match="unit"):
        melctl.Loader(h5, 8, unit="frame")
    with pytest.raises(ValueError, match="shuffle"):
        melctl.Loader(h5, 8, shuffle="sometimes")
    # Counts below 1 say so in the same words, negative or 0; a seed or an epoch outside
    # 0..2^64 - 1 is an error naming it, not an OverflowError naming nothing.
    for field in ("batch_size", "threads"):
        for bad in (0, -1):
            args = dict(batch_size=bad) if field == "batch_size" else dict(batch_size=8, threads=bad)
            with pytest.raises(melctl.ConfigError, match=f"{field}.*{bad}: must be at least 1"):
                melctl.Loader(h5, **args)
    for field in ("seed", "epoch"):
        for bad in (-1, 2**64):
            with pytest.raises(melctl.ConfigError, match=field) as e:
                melctl.Loader(h5, 8, **{field: bad})
            assert len(str(e.value).splitlines()) == 1
    loader = melctl.Loader(h5, 8, seed=2**64 - 1, epoch=2**64 - 1)
    for call in (loader.set_epoch, loader.plan, loader.padding_share):
        with pytest.raises(melctl.ConfigError, match="epoch"):
            call(-1)
    # A batch_size above the epoch's items is one batch of them (memory for those only).
    huge = melctl.Loader(h5, 10**9, unit="clip")
    assert len(huge) == 1 and len(next(iter(huge))[1]) == len(melctl.open(h5))


def test_buffered_shuffle_and_repr(h5):
    loader = melctl.Loader(h5, 16, shuffle="buffered", threads=1, prefetch=1)
    assert sum(len(x) for x, _ in loader) == loader.items_per_epoch
    assert "buffered" in repr(loader) and loader.batch_size == 16
    assert loader.memory_bound > 0
    assert loader.split.path == h5


def test_the_plan_is_what_the_epoch_delivers(h5):
    split = melctl.open(h5)
    loader = melctl.Loader(split, 37, seed=9, with_index=True)
    plan = loader.plan(3)
    assert plan.dtype == np.int64 and plan.shape == (loader.items_per_epoch, 2)
    loader.set_epoch(3)
    clips = np.concatenate([c for _, _, c in loader])
    assert np.array_equal(plan[:, 0], clips)
    # The segment column picks the values: item k of the epoch is split[clip][segment].
    x, _, _ = next(iter(melctl.Loader(split, 37, seed=9, epoch=3, with_index=True)))
    per = split.clip_shape[:-2]
    for k in (0, 5, 36):
        clip, seg = plan[k]
        idx = np.unravel_index(seg, per) if per else ()
        assert np.array_equal(x[k], split[clip][idx])


def test_the_last_epoch_number_iterates_without_overflow(h5):
    loader = melctl.Loader(h5, 64, epoch=2**64 - 1)
    assert len(list(loader)) == len(loader)
    assert loader.epoch == 2**64 - 1
    loader.set_epoch(2**64 - 1)
    assert len(list(loader)) == len(loader) and loader.state_dict()["epoch"] == 2**64 - 1


def test_random_crops_are_windows_that_replay_on_resume_and_with_any_threads(h5):
    """crop_frames (issue 37): each item a window of its own, drawn in the Rust threads
    from (seed, epoch, item); the same with 1 or 4 threads, after load_state_dict, and new
    each epoch."""
    split = melctl.open(h5)
    n_mels, frames = split.segment_shape
    crop = frames - 2
    settings = dict(batch_size=16, seed=5, with_index=True, crop_frames=crop, unit="clip")
    one = melctl.Loader(h5, threads=1, **settings)
    assert one.item_shape == (*split.clip_shape[:-1], crop)
    first = epoch_batches(one)
    for p, q in zip(first, epoch_batches(melctl.Loader(h5, threads=4, **settings))):
        for a, b in zip(p, q):
            np.testing.assert_array_equal(a, b)
    # Each item is a window of its clip: find its offset among those that fit.
    offsets = []
    for x, _, clips in first:
        for item, clip in zip(x, clips):
            whole = split[int(clip)]
            fits = [o for o in range(frames - crop + 1)
                    if np.array_equal(whole[..., o:o + crop], item)]
            assert fits, f"clip {clip}: not a window of its clip"
            offsets.append(fits[0])
    assert len(set(offsets)) > 1, offsets
    second = epoch_batches(one)
    assert any(not np.array_equal(p[0], q[0]) for p, q in zip(first, second)), "new epoch, new crops"
    # A state saved mid-epoch resumes the same crops.
    stopped = melctl.Loader(h5, **settings)
    it = iter(stopped)
    next(it)
    state = stopped.state_dict()
    assert state["crop_frames"] == crop
    resumed = melctl.Loader(h5, **settings)
    resumed.load_state_dict(state)
    for p, q in zip(epoch_batches(resumed), first[1:]):
        np.testing.assert_array_equal(p[0], q[0])
    # Another crop is another order; a state from before crops means none.
    with pytest.raises(ValueError, match="crop_frames"):
        melctl.Loader(h5, **{**settings, "crop_frames": crop - 1}).load_state_dict(state)
    plain = melctl.Loader(h5, 16, seed=5).state_dict()
    del plain["crop_frames"]
    melctl.Loader(h5, 16, seed=5).load_state_dict(plain)
    with pytest.raises(ValueError, match="crop_frames"):
        melctl.Loader(h5, 16, seed=5, crop_frames=3).load_state_dict(plain)


@pytest.mark.parametrize("crop", [0, 10_000])
def test_a_crop_that_does_not_fit_is_one_line(h5, crop):
    with pytest.raises(melctl.ConfigError, match=r"crop_frames: .* a crop is 1 to \d+ frames") as e:
        melctl.Loader(h5, 16, crop_frames=crop)
    assert "\n" not in str(e.value)


def test_a_freed_batch_buffer_is_reused_and_a_kept_one_is_never_overwritten(h5):
    """x's memory is the batch's buffer and goes back to the loader when x is freed (no
    new 25 MB allocation to zero and fault in per batch); a batch the caller keeps is
    its own: no later batch is written into it."""
    import os

    loader = melctl.Loader(h5, 64, seed=1, threads=1, prefetch=1)
    it = iter(loader)
    kept, _ = next(it)
    copy = kept.copy()
    # The array's base is the batch itself (not a copy of its values in a plain holder).
    assert type(kept.base).__name__ == "BatchMemory"
    for x, _ in it:
        assert x.__array_interface__["data"][0] != kept.__array_interface__["data"][0]
        del x
    for x, _ in loader:  # a second epoch, with the buffers the first gave back
        del x
    np.testing.assert_array_equal(kept, copy)
    # Freed in a forked child, a batch is forgotten there (the parent's pool lock may be
    # held by a thread the child lacks), never a hang.
    pid = os.fork()
    if pid == 0:
        del kept
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
