"""A Split in other processes: pickled by path, reopened lazily, read under fork, spawn
and forkserver; torch's DataLoader if torch is installed. And the GIL: a Python thread
keeps running while Rust threads fill a batch."""

import multiprocessing as mp
import pickle
import threading
import time

import numpy as np
import pytest

import melctl
from conftest import need_torch


def clip_sums(args):
    """Runs in a worker: the sum of each asked clip of the pickled split."""
    split, indices = args
    return [float(split[i].sum()) for i in indices], len(split), split.labels.tolist()


def test_a_split_pickles_by_path_and_reopens_lazily(h5, tmp_path):
    split = melctl.open(h5)
    data = pickle.dumps(split)
    assert len(data) < 1000  # the path, not the data
    copy = pickle.loads(data)
    assert len(copy) == len(split)
    np.testing.assert_array_equal(copy[5], split[5])
    assert copy.dtype == split.dtype
    f16 = pickle.loads(pickle.dumps(melctl.open(h5, dtype="float16")))
    assert f16[0].dtype == np.float16
    # Unpickling opens nothing: a split that is gone fails at its first use.
    moved = tmp_path / "moved.h5"
    moved.write_bytes(h5.read_bytes())
    lazy = pickle.dumps(melctl.open(moved))
    moved.unlink()
    gone = pickle.loads(lazy)
    with pytest.raises(melctl.Error):
        len(gone)


def test_a_split_by_name_pickles_too(outputs):
    split = melctl.open(outputs["npy"], split="validation")
    copy = pickle.loads(pickle.dumps(split))
    assert copy.name == "validation"
    np.testing.assert_array_equal(copy[-1], split[-1])


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_pool_workers_read_a_pickled_split(h5, method):
    split = melctl.open(h5)
    split[0]  # opened and read in the parent first, as a training script would
    want = [float(split[i].sum()) for i in range(len(split))]
    chunks = [list(range(i, len(split), 3)) for i in range(3)]
    with mp.get_context(method).Pool(3) as pool:
        results = pool.map(clip_sums, [(split, c) for c in chunks])
    for chunk, (sums, n, labels) in zip(chunks, results):
        assert n == len(split)
        assert labels == split.labels.tolist()
        assert sums == [want[i] for i in chunk]


def test_a_replaced_split_is_refused_where_it_is_reopened(h5, tmp_path, outputs):
    import shutil

    out = tmp_path / "out"
    shutil.copytree(outputs["f16"], out)
    data = pickle.dumps(melctl.open(out / "training.h5"))
    # Another build's training split (another shape) in its place.
    shutil.copy(outputs["f16"] / "testing.h5", out / "training.h5")
    shutil.copy(outputs["f16"] / "melctl-build.json", out / "melctl-build.json")
    with pytest.raises(melctl.DatasetError, match="replaced|shape"):
        len(pickle.loads(data))


def test_a_split_built_again_with_its_shape_is_refused_where_it_is_reopened(demo_data, tmp_path):
    """A pickled Split reopened a rebuilt output of the same shape without a word: a
    spawn worker read other clips (another label map) than its parent."""
    out = tmp_path / "out"
    config = {"audio": {"clip_seconds": 1.0}}
    melctl.build(demo_data, out, config=config, loader="stream", splits=["training"])
    data = pickle.dumps(melctl.open(out, "training"))
    assert len(pickle.loads(data)) > 0  # the same build reopens
    melctl.build(demo_data, out, config=config, loader="stream", splits=["training"])
    with pytest.raises(melctl.DatasetError, match="built again"):
        len(pickle.loads(data))


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_torch_dataloader_workers(h5, method):
    torch = need_torch()
    split = melctl.open(h5)
    loader = torch.utils.data.DataLoader(
        split, batch_size=4, num_workers=2, multiprocessing_context=method
    )
    got = torch.cat(list(loader))
    np.testing.assert_array_equal(got.numpy(), np.stack([split[i] for i in range(len(split))]))


def test_the_gil_is_free_while_a_batch_is_filled(h5):
    """A counting thread keeps running while the main thread waits in next() for big
    batches the Rust workers fill; were the GIL held, it would stand still."""
    split = melctl.open(h5)
    # Whole clips, every clip 8 times per batch worth of work: slow enough to measure.
    loader = melctl.Loader(h5, len(split), unit="clip", threads=1, prefetch=1, shuffle=False)
    count = 0
    stop = False

    def counter():
        nonlocal count
        while not stop:
            count += 1

    t = threading.Thread(target=counter)
    t.start()
    try:
        inside = 0.0
        counted = 0
        while inside < 0.2:
            it = iter(loader)
            start, before = time.perf_counter(), count
            next(it)
            inside += time.perf_counter() - start
            counted += count - before
            del it
    finally:
        stop = True
        t.join()
    # The counter ran during the calls: it counts millions a second when it can run.
    rate = counted / inside
    print(f"GIL test: {counted} counts in {inside:.3f} s inside next()")
    assert rate > 50_000, f"the counting thread ran {counted} times in {inside:.3f} s inside next()"
