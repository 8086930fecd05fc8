"""Type stubs of melctl's native module (the Rust side, built by maturin)."""

import os
import pathlib
from typing import Any, Iterator, Literal, Sequence, Union

import numpy as np
import numpy.typing as npt

PathLike = Union[str, os.PathLike[str]]
DTypeLike = Union[str, type, np.dtype[Any]]
Batch = Union[
    tuple[npt.NDArray[np.floating[Any]], npt.NDArray[np.int64]],
    tuple[npt.NDArray[np.floating[Any]], npt.NDArray[np.int64], npt.NDArray[np.int64]],
]

__version__: str

def open(path: PathLike, split: str | None = None, dtype: DTypeLike | None = None) -> Split:
    """Opens a split: a ``.h5`` file, an ``.npy.d`` folder, or an output folder with
    ``split`` naming one of its splits (``melctl.open("out", "training")``).

    ``split[i]`` returns clip ``i`` as ``dtype``: float32 (default; f16 and bf16 widened
    exactly), float64, or float16 (f16 splits only: nothing is rounded). The file is
    checked as melread checks it (the build record, the HDF5 structure, every size
    against the file's length); a file it refuses raises a :class:`Error` subclass.
    """

class Split:
    """One split of a melctl output: a map-style dataset of clips.

    ``len(split)`` clips; ``split[i]`` clip ``i`` as a numpy array of ``clip_shape``
    (negative ``i`` counts from the end; IndexError past either end). Reads run in Rust
    with the GIL released. A Split pickles by path and reopens lazily where it is
    unpickled, so it serves torch's DataLoader workers under fork, spawn and forkserver.
    """

    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> npt.NDArray[np.floating[Any]]:
        """Clip ``index`` as a numpy array of ``clip_shape`` in the split's ``dtype``."""
    def clip(self, index: int, dtype: DTypeLike | None = None) -> npt.NDArray[np.floating[Any]]:
        """Clip ``index`` in ``dtype`` (the split's by default)."""
    def segment(self, index: int, k: int, dtype: DTypeLike | None = None) -> npt.NDArray[np.floating[Any]]:
        """Segment ``k`` of clip ``index`` (long-major: ``long_index * short + short_index``),
        shaped ``segment_shape``."""
    def stats(self, threads: int | None = None) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """``(mean, std)`` per mel bin: the stored statistics, or computed from every value
        when the output has none."""
    @property
    def path(self) -> pathlib.Path:
        """The ``.h5`` file or ``.npy.d`` folder read."""
    @property
    def name(self) -> str:
        """The split's name (``training``, ...)."""
    @property
    def dtype(self) -> Literal["float32", "float64", "float16"]:
        """The numpy element type of ``split[i]``."""
    @property
    def stored_dtype(self) -> Literal["f32", "f16", "bf16"]:
        """The element type stored in the file."""
    @property
    def labels(self) -> npt.NDArray[np.int64]:
        """Every clip's class id (read-only)."""
    @property
    def label_names(self) -> list[str]:
        """Class id -> name, the same in every split of an output."""
    @property
    def paths(self) -> list[str]:
        """Every clip's source path, relative to the dataset root."""
    @property
    def mean(self) -> npt.NDArray[np.float64] | None:
        """The stored per-mel-bin mean, or None."""
    @property
    def std(self) -> npt.NDArray[np.float64] | None:
        """The stored per-mel-bin standard deviation, or None."""
    @property
    def clip_shape(self) -> tuple[int, ...]:
        """One clip's shape: ``(long?, short?, n_mels, frames)``."""
    @property
    def segment_shape(self) -> tuple[int, int]:
        """One segment's shape: ``(n_mels, frames)``."""
    @property
    def segments_per_clip(self) -> int:
        """Segments per clip (``long * short``; 1 without segmentation)."""
    @property
    def config(self) -> dict[str, Any] | None:
        """The configuration the output was built with."""

class Loader:
    """Shuffled, sharded, resumable batches of one split.

    Iterating yields ``(x, y)``, or ``(x, y, clip_index)`` with ``with_index=True``:
    ``x`` float32 (or float16 as stored) ``[batch, *item_shape]``, ``y`` int64 class ids.
    Rust threads fill batches ahead (``prefetch``) with the GIL released, and a float32
    batch's buffer becomes ``x`` without a copy (``torch.from_numpy(x)`` is free).

    ``path`` is a split file or folder, an output folder with ``split=``, or a
    :class:`Split`. ``unit`` is ``"segment"`` (one ``[n_mels, frames]`` spectrogram) or
    ``"clip"``. ``shuffle``: True / ``"uniform"`` (every item anywhere), ``"buffered"``
    (clip order through a shuffle buffer), False / ``"none"`` (file order). ``shard=(rank,
    world)``: rank takes every world-th item, shards disjoint and complete.
    ``normalize``: True (the stored statistics) or ``(mean, std)``. ``threads``: worker
    threads (default: all cores).

    Iteration continues from the loader's position: a whole epoch from its first batch,
    and once its last batch is handed out, the next epoch (another order). ``state_dict``
    records the position; ``load_state_dict`` resumes exactly there.
    """

    def __init__(
        self,
        path: PathLike | Split,
        batch_size: int,
        unit: Literal["segment", "clip"] = "segment",
        shuffle: bool | Literal["uniform", "buffered", "none"] = True,
        seed: int = 0,
        epoch: int = 0,
        drop_last: bool = False,
        shard: tuple[int, int] | None = None,
        normalize: bool | tuple[Sequence[float], Sequence[float]] = False,
        dtype: DTypeLike = "float32",
        threads: int | None = None,
        prefetch: int = 2,
        with_index: bool = False,
        split: str | None = None,
    ) -> None: ...
    def __len__(self) -> int:
        """Batches per epoch for this shard."""
    def __iter__(self) -> Iterator[Batch]: ...
    def set_epoch(self, epoch: int) -> None:
        """The next iteration reads epoch ``epoch`` from its first batch."""
    def state_dict(self) -> dict[str, Any]:
        """The position (``epoch``, ``batch``) and the settings that fix the order."""
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resumes at ``state``'s position; refuses a state of another order."""
    @property
    def epoch(self) -> int:
        """The epoch the next iteration reads."""
    @property
    def batch_size(self) -> int: ...
    @property
    def item_shape(self) -> tuple[int, ...]: ...
    @property
    def items_per_epoch(self) -> int: ...
    @property
    def memory_bound(self) -> int:
        """The most bytes the loader's batch buffers take."""
    @property
    def split(self) -> Split: ...

class Error(Exception):
    """Every error melctl raises for a file or a setting it refuses."""

class ConfigError(Error): ...
class ConfigParseError(Error): ...
class UnknownPresetError(Error): ...
class IoError(Error): ...
class DecodeError(Error): ...
class UnsupportedError(Error): ...
class LimitError(Error): ...
class DatasetError(Error): ...
class DeviceError(Error): ...
class OutputError(Error): ...
class ShapeError(Error): ...
class InternalError(Error): ...
class CancelledError(Error): ...
