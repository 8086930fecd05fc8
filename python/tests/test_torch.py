"""melctl.torch: Loader batches as tensors (shared, pinned, on a device). Skipped, with
the reason printed, where torch is not installed."""

import numpy as np
import pytest

from conftest import need_torch  # noqa: E402

torch = need_torch()

import melctl  # noqa: E402
from melctl.torch import TorchLoader, to_torch  # noqa: E402


def test_batches_are_the_loaders_as_tensors(h5):
    plain = list(melctl.Loader(h5, 50, seed=4, with_index=True))
    tensors = list(TorchLoader(h5, 50, seed=4, with_index=True))
    assert len(plain) == len(tensors)
    for (x, y, c), (tx, ty, tc) in zip(plain, tensors):
        assert tx.dtype == torch.float32 and ty.dtype == torch.int64
        assert np.array_equal(tx.numpy(), x) and np.array_equal(ty.numpy(), y)
        assert np.array_equal(tc.numpy(), c)


def test_from_numpy_shares_the_batch_and_resume_passes_through(h5):
    x, y = next(iter(melctl.Loader(h5, 10)))
    tx, ty = to_torch((x, y))
    assert tx.data_ptr() == x.ctypes.data
    loader = TorchLoader(h5, 10, seed=1)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    rest = [b[1].tolist() for b in it]
    again = TorchLoader(h5, 10, seed=1)
    again.load_state_dict(state)
    assert [b[1].tolist() for b in again] == rest
    assert len(loader) == len(melctl.Loader(h5, 10))
    with pytest.raises(TypeError):
        TorchLoader(melctl.Loader(h5, 10), 5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: pinned copies untested")
def test_pinned_batches_reach_the_device(h5):
    for x, y in TorchLoader(h5, 50, device="cuda"):
        assert x.is_cuda and y.is_cuda


def test_dataset_gives_x_y_for_dataloader_and_distributed_sampler(h5):
    from melctl.torch import Dataset

    split = melctl.open(h5)
    ds = Dataset(h5)
    assert len(ds) == len(split)
    x, y = ds[3]
    assert torch.equal(x, torch.from_numpy(split[3])) and y.item() == split.labels[3]
    seen = []
    for rank in range(2):
        sampler = torch.utils.data.DistributedSampler(ds, num_replicas=2, rank=rank, shuffle=True,
                                                      seed=1)
        order = list(sampler)
        got = []
        for xb, yb in torch.utils.data.DataLoader(ds, batch_size=8, sampler=sampler):
            assert xb.shape[1:] == tuple(split.clip_shape) and yb.dtype == torch.int64
            got += yb.tolist()
        assert got == split.labels[order].tolist()
        seen += order
    assert set(seen) == set(range(len(ds))) and len(seen) == 2 * -(-len(ds) // 2)
    # Normalised with the stored statistics, as the Loader normalises.
    normed = Dataset(h5, normalize=True)
    mean, std = split.mean, split.std
    want = (split[0].astype(np.float64) - mean[:, None]) / std[:, None]
    assert np.allclose(normed[0][0].numpy(), want, atol=1e-4)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataset_in_worker_processes_reads_every_clip(h5, method):
    from melctl.torch import Dataset

    ds = Dataset(h5)
    dl = torch.utils.data.DataLoader(ds, batch_size=16, num_workers=2,
                                     multiprocessing_context=method)
    ys = torch.cat([y for _, y in dl])
    assert ys.tolist() == melctl.open(h5).labels.tolist()


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_iterable_dataset_shards_by_worker_and_reads_each_item_once(h5, method):
    from melctl.torch import IterableDataset

    ds = IterableDataset(h5, 32, seed=2, with_index=True, drop_last=False)
    ds.set_epoch(1)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2,
                                     multiprocessing_context=method)
    items = []
    for x, y, clip in dl:
        assert x.dtype == torch.float32 and x.shape[1:] == (32, 5)
        items += clip.tolist()
    plain = melctl.Loader(h5, 32)
    # Every clip's segments, each once (two shards of an epoch wrap by at most one item).
    per_clip = melctl.open(h5).segments_per_clip
    counts = np.bincount(items, minlength=len(melctl.open(h5)))
    assert len(items) - plain.items_per_epoch in (0, 1)
    assert counts.min() >= per_clip and counts.sum() == len(items)
    with pytest.raises(TypeError, match="shard"):
        IterableDataset(h5, 32, shard=(0, 2))


def test_whole_clips_collate_padded(tmp_path):
    from melctl.torch import Dataset, collate_padded
    from test_whole import RATE, tone, write_wav

    for k in range(6):
        write_wav(tmp_path / "d" / "all" / f"c{k % 2}" / f"{k}.wav", tone(RATE // 2 * (k + 1), 400))
    melctl.build(tmp_path / "d", tmp_path / "o", preset="speech-16k",
                 config={"audio": {"length": "whole"}})
    ds = Dataset(tmp_path / "o" / "all.h5")
    x, y, lengths = next(iter(torch.utils.data.DataLoader(ds, batch_size=6,
                                                          collate_fn=collate_padded)))
    assert x.shape == (6, 80, int(lengths.max()))
    for i in range(6):
        assert torch.equal(x[i, :, : lengths[i]], ds[i][0])
        assert torch.all(x[i, :, lengths[i]:] == 0)


def test_attack_round_findings_on_the_torch_helpers(h5):
    from melctl.torch import Dataset, IterableDataset, collate_padded

    n = melctl.open(h5).clip_shape[-2]
    for normalize, why in [
        ((np.full(n, np.nan), np.ones(n)), "not finite"),
        ((np.zeros(n), -np.ones(n)), "above 0"),
        ((np.zeros(n), np.zeros(n)), "above 0"),
        ((np.zeros(5), np.ones(5)), "mel bins"),
        ("yes", "normalize"),
        ((1.0, 2.0), "shape"),
    ]:
        with pytest.raises(melctl.ConfigError, match=why):
            Dataset(h5, normalize=normalize)
    with pytest.raises(ValueError, match="empty"):
        collate_padded([])
    # Iterated again (num_workers=0, persistent workers), each pass is the next epoch.
    ds = IterableDataset(h5, 50, seed=3, with_index=True)
    first = [c.tolist() for _, _, c in ds]
    second = [c.tolist() for _, _, c in ds]
    assert first != second and sorted(sum(first, [])) == sorted(sum(second, []))
    ds.set_epoch(0)
    assert [c.tolist() for _, _, c in ds] == first
    dl = torch.utils.data.DataLoader(IterableDataset(h5, 50, seed=3, with_index=True),
                                     batch_size=None, num_workers=1, persistent_workers=True)
    a = [c.tolist() for _, _, c in dl]
    b = [c.tolist() for _, _, c in dl]
    assert a == first and b == second
