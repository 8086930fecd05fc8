"""melctl for PyTorch: :class:`melctl.Loader`'s numpy batches as torch tensors (pinned,
on a device), a map-style :class:`Dataset` of ``(x, y)`` for ``DataLoader`` and
``DistributedSampler``, and an :class:`IterableDataset` that shards itself by rank and
worker.

Imported only by who asks for it (``import melctl.torch``); torch is not a dependency of
melctl. The numpy-to-torch step costs nothing (``torch.from_numpy`` shares the buffer
Rust filled); pinning is one copy into page-locked memory, and the copy to the device is
asynchronous from pinned memory (``non_blocking``).

    from melctl.torch import TorchLoader
    loader = TorchLoader("out/training.h5", batch_size=5632, normalize=True, device="cuda")
    for x, y in loader:        # x float32 [5632, 32, 5] on cuda, y int64 on cuda
        ...

Worker processes: a :class:`Dataset` pickles by path (fork, spawn and forkserver all
work); an :class:`IterableDataset` makes its Loader in each worker, over that worker's
shard. :class:`TorchLoader` reads with Rust threads in the training process: it needs no
worker processes at all (``num_workers=0`` is its intended use).
"""

from __future__ import annotations

from typing import Any, Iterator, Optional, Tuple, Union

import torch

from . import Loader, Split
from . import open as _open

__all__ = ["TorchLoader", "Dataset", "IterableDataset", "collate_padded", "to_torch"]


def to_torch(
    batch: Tuple[Any, ...],
    device: Union[str, torch.device, None] = None,
    pin_memory: bool = False,
    non_blocking: bool = True,
) -> Tuple[torch.Tensor, ...]:
    """A batch ``(x, y[, clip_index])`` of numpy arrays as tensors: shared with the numpy
    buffers, then pinned if asked, then moved to ``device`` if given."""
    tensors = tuple(torch.from_numpy(a) for a in batch)
    if pin_memory:
        tensors = tuple(t.pin_memory() for t in tensors)
    if device is not None:
        tensors = tuple(t.to(device, non_blocking=non_blocking) for t in tensors)
    return tensors


class TorchLoader:
    """A :class:`melctl.Loader` whose batches are torch tensors.

    ``TorchLoader(path_or_loader, *args, device=None, pin_memory=None, **kwargs)``: the
    other arguments are :class:`melctl.Loader`'s. ``pin_memory`` defaults to True when
    ``device`` is a CUDA device. ``len()``, ``set_epoch``, ``state_dict`` and
    ``load_state_dict`` are the loader's (exact mid-epoch resume).
    """

    def __init__(
        self,
        path_or_loader: Any,
        *args: Any,
        device: Union[str, torch.device, None] = None,
        pin_memory: Optional[bool] = None,
        non_blocking: bool = True,
        **kwargs: Any,
    ) -> None:
        if isinstance(path_or_loader, Loader):
            if args or kwargs:
                raise TypeError("a Loader was given: its options are already set")
            self.loader = path_or_loader
        else:
            self.loader = Loader(path_or_loader, *args, **kwargs)
        self.device = torch.device(device) if device is not None else None
        if pin_memory is None:
            pin_memory = self.device is not None and self.device.type == "cuda"
        self.pin_memory = pin_memory
        self.non_blocking = non_blocking

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, ...]]:
        for batch in self.loader:
            yield to_torch(batch, self.device, self.pin_memory, self.non_blocking)

    def __len__(self) -> int:
        return len(self.loader)

    def set_epoch(self, epoch: int) -> None:
        """Starts the next iteration at ``epoch`` (its own shuffle)."""
        self.loader.set_epoch(epoch)

    def state_dict(self) -> dict:
        """The loader's position, for an exact resume."""
        return self.loader.state_dict()

    def load_state_dict(self, state: dict) -> None:
        """Continues from a :meth:`state_dict`."""
        self.loader.load_state_dict(state)

    def __repr__(self) -> str:
        return f"melctl.torch.TorchLoader({self.loader!r}, device={self.device}, pin_memory={self.pin_memory})"


class Dataset(torch.utils.data.Dataset):
    """A split as a map-style dataset of ``(x, y)`` tensors: ``x`` float32 (or
    ``dtype``) of the clip's shape, ``y`` its class id (int64).

    ``Dataset(path, split=None, dtype=None, normalize=None)``: ``path`` and ``split`` as
    :func:`melctl.open` takes them, or a :class:`melctl.Split`. ``normalize`` is True (the
    split's stored statistics) or ``(mean, std)`` per mel bin. Works with ``DataLoader``
    (shuffle, samplers, worker processes under fork, spawn and forkserver: it pickles by
    path) and ``DistributedSampler``. Whole clips (``audio.length = "whole"``) differ in
    length: batch them with ``collate_fn=collate_padded``.

        ds = melctl.torch.Dataset("out/training.h5")
        sampler = torch.utils.data.DistributedSampler(ds)   # under torch.distributed
        dl = torch.utils.data.DataLoader(ds, batch_size=64, sampler=sampler, num_workers=4)
    """

    def __init__(
        self,
        path: Any,
        split: Optional[str] = None,
        dtype: Any = None,
        normalize: Any = None,
    ) -> None:
        self.split = path if isinstance(path, Split) else _open(path, split, dtype)
        self.labels = torch.from_numpy(self.split.labels.copy())
        self._shift: Optional[torch.Tensor] = None
        self._scale: Optional[torch.Tensor] = None
        if normalize is True:
            stored_mean, stored_std = self.split.mean, self.split.std
            normalize = (
                (stored_mean, stored_std)
                if stored_mean is not None and stored_std is not None
                else self.split.stats()
            )
        if normalize is not None and normalize is not False:
            mean_t, std_t = _statistics(normalize, self.split.clip_shape[-2])
            self._shift = mean_t.to(torch.float32)[:, None]
            self._scale = (1.0 / std_t).to(torch.float32)[:, None]

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, torch.Tensor]:
        x = torch.from_numpy(self.split[index])
        if self._shift is not None and self._scale is not None:
            x = (x.float() - self._shift) * self._scale
        return x, self.labels[index]

    def __repr__(self) -> str:
        return f"melctl.torch.Dataset({self.split!r})"


def _statistics(normalize: Any, n_mels: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """``normalize`` as float64 ``(mean, std)`` of ``n_mels`` values each, checked as the
    Loader checks it: a one-line ``melctl.ConfigError`` naming ``normalize``."""
    from . import ConfigError

    try:
        mean, std = normalize
        mean_t = torch.as_tensor(mean, dtype=torch.float64)
        std_t = torch.as_tensor(std, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError) as e:
        raise ConfigError(f"normalize: True or (mean, std) per mel bin, not {normalize!r:.80}: {e}") from None
    for name, t in (("mean", mean_t), ("std", std_t)):
        if t.shape != (n_mels,):
            raise ConfigError(f"normalize: {name} has shape {tuple(t.shape)}; the split has {n_mels} mel bins")
        if not bool(torch.isfinite(t).all()):
            raise ConfigError(f"normalize: {name} holds a value that is not finite")
    if not bool((std_t > 0).all()):
        raise ConfigError("normalize: every std must be above 0")
    if not bool(torch.isfinite((1.0 / std_t).to(torch.float32)).all()):
        raise ConfigError("normalize: a std so small that 1 / std is not finite in float32")
    return mean_t, std_t


def collate_padded(
    items: Any,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``DataLoader``'s ``collate_fn`` for clips of different lengths: ``(x, y, lengths)``
    with ``x`` ``[batch, ..., longest]`` zero-padded after each clip's frames."""
    if len(items) == 0:
        raise ValueError("collate_padded: an empty batch")
    xs, ys = zip(*items)
    lengths = torch.tensor([x.shape[-1] for x in xs], dtype=torch.int64)
    longest = int(lengths.max())
    x = xs[0].new_zeros((len(xs), *xs[0].shape[:-1], longest))
    for i, item in enumerate(xs):
        x[i, ..., : item.shape[-1]] = item
    return x, torch.stack(ys), lengths


class IterableDataset(torch.utils.data.IterableDataset):
    """Batches of a :class:`melctl.Loader` as an ``IterableDataset`` that shards itself:
    in each ``DataLoader`` worker of each rank (``torch.distributed``, when initialised)
    it reads shard ``rank · workers + worker`` of ``world · workers``, so every item of an
    epoch is read once across them all (``drop_last`` as the Loader's ``shard`` says).

    ``IterableDataset(path, batch_size, **loader_options)`` takes :class:`melctl.Loader`'s
    arguments but ``shard`` (``threads`` defaults to 1 in a worker process, all cores
    without workers). Batches are
    already made: give ``DataLoader`` ``batch_size=None``. Call :meth:`set_epoch` before
    each epoch, as with ``DistributedSampler``: workers made anew each epoch
    (``persistent_workers=False``, the default) read that epoch. Where the same object is
    iterated again (``num_workers=0``, or persistent workers, which never see a later
    ``set_epoch``), each pass moves on to the next epoch by itself (another order, crops
    and augmentation). Works under fork, spawn and forkserver (it pickles as its
    arguments).

        ds = melctl.torch.IterableDataset("out/training.h5", 256, seed=1)
        dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=4)
        for epoch in range(10):
            ds.set_epoch(epoch)
            for x, y in dl: ...
    """

    def __init__(self, path: Any, batch_size: int, **options: Any) -> None:
        if "shard" in options:
            raise TypeError("IterableDataset shards itself by rank and worker: no shard=")
        self.path = path
        self.batch_size = batch_size
        self.options = options
        self.epoch = int(options.pop("epoch", 0))
        self._passes = 0
        # Checked here, in the main process: a bad option is an error now, not in a worker.
        self._probe = Loader(path, batch_size, epoch=self.epoch, **options)

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next pass reads (its own order, crops and augmentation)."""
        if epoch < 0:
            raise ValueError(f"epoch = {epoch}: must be 0 or more")
        self.epoch = epoch
        self._passes = 0

    def shard(self) -> Tuple[int, int]:
        """``(index, count)`` of the shard this process reads: rank and worker."""
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        rank, world = 0, 1
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
        return rank * workers + worker, world * workers

    def loader(self) -> Loader:
        """The Loader of this process's shard, at the epoch the next pass reads."""
        epoch = self.epoch + self._passes
        options = dict(self.options)
        if torch.utils.data.get_worker_info() is not None:
            options.setdefault("threads", 1)  # one thread per worker process by default
        return Loader(self.path, self.batch_size, epoch=epoch, shard=self.shard(), **options)

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, ...]]:
        # A pass left early leaves the epoch where it is, as the Loader's does.
        for batch in self.loader():
            yield to_torch(batch)
        self._passes += 1

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_probe", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"melctl.torch.IterableDataset({self.path!r}, {self.batch_size}, epoch={self.epoch})"
