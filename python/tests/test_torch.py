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
