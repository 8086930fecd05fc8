"""melctl batches for PyTorch: :class:`melctl.Loader`'s numpy batches as torch tensors,
in pinned memory and on a device when asked.

Imported only by who asks for it (``import melctl.torch``); torch is not a dependency of
melctl. The numpy-to-torch step costs nothing (``torch.from_numpy`` shares the buffer
Rust filled); pinning is one copy into page-locked memory, and the copy to the device is
asynchronous from pinned memory (``non_blocking``).

    from melctl.torch import TorchLoader
    loader = TorchLoader("out/training.h5", batch_size=5632, normalize=True, device="cuda")
    for x, y in loader:        # x float32 [5632, 32, 5] on cuda, y int64 on cuda
        ...
"""

from __future__ import annotations

from typing import Any, Iterator, Optional, Tuple, Union

import torch

from . import Loader

__all__ = ["TorchLoader", "to_torch"]


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
