"""Type stubs of melctl's native module (the Rust side, built by maturin)."""

import os
import pathlib
from typing import Any, Callable, Literal, Sequence, Union, final

from typing_extensions import Self

import numpy as np
import numpy.typing as npt

_PathLike = Union[str, os.PathLike[str]]
_DTypeLike = Union[str, type, np.dtype[Any]]
_Batch = Union[
    tuple[npt.NDArray[np.floating[Any]], npt.NDArray[np.int64]],
    tuple[npt.NDArray[np.floating[Any]], npt.NDArray[np.int64], npt.NDArray[np.int64]],
    tuple[
        npt.NDArray[np.floating[Any]],
        npt.NDArray[np.int64],
        npt.NDArray[np.int64],
        npt.NDArray[np.int64],
    ],
]

__version__: str

def open(path: _PathLike, split: str | None = None, dtype: _DTypeLike | None = None) -> Split:
    """Opens a split: a ``.h5`` file, an ``.npy.d`` folder, or an output folder with
    ``split`` naming one of its splits (``melctl.open("out", "training")``).

    ``split[i]`` returns clip ``i`` as ``dtype``: float32 (default; f16 and bf16 widened
    exactly), float64, or float16 (f16 splits only: nothing is rounded). The file is
    checked as melread checks it (the build record, the HDF5 structure, every size
    against the file's length); a file it refuses raises a :class:`Error` subclass.
    """

@final
class Split:
    """One split of a melctl output: a map-style dataset of clips.

    ``len(split)`` clips; ``split[i]`` clip ``i`` as a numpy array of ``clip_shape``
    (negative ``i`` counts from the end; IndexError past either end). A split of whole
    clips (``audio.length = "whole"``, ``length == "whole"``) gives each clip at its own
    length: ``split[i]`` is ``(n_mels, frames[i])``. Reads run in Rust
    with the GIL released. A Split pickles by path and reopens lazily where it is
    unpickled, so it serves torch's DataLoader workers under fork, spawn and forkserver;
    ``melctl.torch.Dataset`` gives ``(x, y)`` tensors for supervised training.
    """

    def __len__(self) -> int: ...
    def __getitem__(self, index: int, /) -> npt.NDArray[np.floating[Any]]:
        """Clip ``index`` as a numpy array of ``clip_shape`` in the split's ``dtype``."""
    def clip(self, index: int, dtype: _DTypeLike | None = None) -> npt.NDArray[np.floating[Any]]:
        """Clip ``index`` in ``dtype`` (the split's by default)."""
    def segment(self, index: int, k: int, dtype: _DTypeLike | None = None) -> npt.NDArray[np.floating[Any]]:
        """Segment ``k`` of clip ``index`` (long-major: ``long_index * short + short_index``),
        shaped ``segment_shape``."""
    def stats(self, threads: int | None = None) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """``(mean, std)`` per mel bin: the stored statistics, or computed from every value
        when the output has none."""
    @property
    def length(self) -> Literal["fixed", "whole", "windows"]:
        """``"whole"`` when each clip has its own number of frames, ``"windows"`` when each
        clip is a window of a longer file, else ``"fixed"``."""
    @property
    def files(self) -> npt.NDArray[np.int64]:
        """Each clip's file (windows of one file share it); otherwise clip i is file i."""
    @property
    def starts(self) -> npt.NDArray[np.float64]:
        """Where each clip starts in its file, in seconds (0.0 for whole files)."""
    @property
    def frames(self) -> npt.NDArray[np.int64]:
        """Every clip's number of frames (all the same for fixed-length clips)."""
    @property
    def path(self) -> pathlib.Path:
        """The ``.h5`` file or ``.npy.d`` folder read."""
    @property
    def name(self) -> str:
        """The split's name (``training``, ...)."""
    @property
    def build_id(self) -> str | None:
        """The id of the build that wrote the split, or None for an output without one."""
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
    def meta_columns(self) -> list[str]:
        """The metadata column names, in order (a manifest's columns beyond path, label
        and split; ``group`` from ``group_pattern``); empty for a split built without."""
    @property
    def metadata(self) -> dict[str, list[str]]:
        """Every clip's metadata as ``{column: [value per clip]}`` (strings)."""
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

@final
class Loader:
    """Shuffled, sharded, resumable, augmented batches of one split, filled by Rust threads.

    Loader(path, batch_size, unit="segment", shuffle=None, seed=0, epoch=0, drop_last=False,
           shard=None, normalize=None, dtype=None, threads=None, prefetch=2, with_index=False,
           split=None, crop_frames=None, max_frames=None, augment=None)

    Iterating yields ``(x, y)``, or ``(x, y, clip_index)`` with ``with_index=True``: ``x``
    float32 (or float16 as stored) ``[batch, *item_shape]``, ``y`` int64 class ids (with
    mixup: float32 soft labels ``[batch, classes]``). Over whole clips (``audio.length =
    "whole"``) batches are ``(x, y, lengths)`` (then ``clip_index``): ``lengths`` int64, each
    item's real frames, zeros after them. Rust threads fill batches ahead (``prefetch``) with
    the GIL released, and a float32 batch's buffer becomes ``x`` without a copy
    (``torch.from_numpy(x)`` is free).

    Arguments:

    - ``path``: a split file or folder, an output folder with ``split=``, or a ``Split``.
    - ``unit``: ``"segment"`` (one ``[n_mels, frames]`` spectrogram) or ``"clip"``.
    - ``shuffle``: True / ``"uniform"`` (every item anywhere; the default), ``"buffered"``
      (clip order through a shuffle buffer), False / ``"none"`` (file order).
    - ``seed``: fixes every epoch's order, crops and augmentation.
    - ``shard=(rank, world)``: rank takes every world-th item; every rank gets as many items
      and batches (as torch's ``DistributedSampler``: without ``drop_last`` the last positions
      wrap to the epoch's first items, fewer than ``world`` seen twice; with it the rest is
      left out).
    - ``normalize``: True (the stored statistics) or ``(mean, std)`` per mel bin.
    - ``dtype``: float32 (default) or float16 as stored. ``threads``: worker threads
      (default: all cores).
    - ``crop_frames=N``: each item is N consecutive frames of its own (every other axis kept)
      from an offset drawn anew each epoch from ``(seed, epoch, item)``; N is 1 to the split's
      frames (whole clips: to the longest clip's; a shorter clip is zero-padded).
    - ``max_frames=M`` (whole clips only): duration buckets, each batch clips of similar
      length padded to its longest, at most M frames in all and at most ``batch_size`` clips
      (sorted by length within pools of 4096 clips). A whole-clip split needs ``crop_frames``
      or ``max_frames``.
    - ``augment``: a ``melctl.Augment`` (time and frequency masks, gain, mixup), applied in
      the Rust threads, drawn from ``(seed, epoch, item)``.

    Every draw (order, crops, augmentation) depends on the seed, the epoch and the item only:
    batches are the same whatever ``threads``.

    Iteration follows ``DataLoader``: ``iter(loader)`` starts the loader's epoch from its
    first batch, and once an epoch's last batch is handed out the loader is at the next epoch
    (another order). Leaving a pass early (peeking at one batch) costs nothing: the next
    ``iter()`` starts that epoch again. ``state_dict()`` records the position mid-epoch, and
    after ``load_state_dict(state)`` the next ``iter()`` continues from there, the same
    batches bit for bit (torchdata's ``StatefulDataLoader`` convention). ``set_epoch(e)``
    starts epoch ``e`` next.

    A Loader pickles as its arguments and position (``multiprocessing`` with spawn or
    forkserver); a forked child may also go on with a pass under way. For torch's
    ``DataLoader`` with worker processes, see ``melctl.torch.IterableDataset``.
    """

    def __new__(
        cls,
        path: _PathLike | Split,
        batch_size: int,
        unit: Literal["segment", "clip"] = "segment",
        shuffle: bool | Literal["uniform", "buffered", "none"] | None = None,
        seed: int = 0,
        epoch: int = 0,
        drop_last: bool = False,
        shard: tuple[int, int] | None = None,
        normalize: bool | tuple[Sequence[float], Sequence[float]] | None = None,
        dtype: _DTypeLike | None = None,
        threads: int | None = None,
        prefetch: int = 2,
        with_index: bool = False,
        split: str | None = None,
        crop_frames: int | None = None,
        max_frames: int | None = None,
        augment: Augment | None = None,
    ) -> Self: ...
    def __getnewargs_ex__(self) -> tuple[tuple[Any, ...], dict[str, Any]]: ...
    def __getstate__(self) -> dict[str, Any]: ...
    def __setstate__(self, state: dict[str, Any]) -> None: ...
    def __len__(self) -> int:
        """Batches per epoch for this shard (with ``max_frames``: of the next epoch)."""
    def padding_share(self, epoch: int | None = None) -> float:
        """The share of padding in epoch ``epoch``'s batches (the next one's by default)."""
    def __iter__(self) -> Batches: ...
    def set_epoch(self, epoch: int) -> None:
        """The next iteration reads epoch ``epoch`` from its first batch."""
    def plan(self, epoch: int) -> npt.NDArray[np.int64]:
        """Epoch ``epoch``'s items in batch order, read nothing: ``(clip, segment)`` rows,
        what iterating that epoch delivers."""
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
        """The most bytes the loader's batch buffers take (``prefetch + 2`` batches: those read
        ahead, one the loop is using and one coming back to be refilled; plus each thread's
        chunk cache, or for whole clips in batches of 4 MiB or more its scratch of at most
        768 KiB for writing them past the caches)."""
    @property
    def split(self) -> Split: ...

@final
class Augment:
    """Augmentation the Loader applies in its Rust threads, off unless asked for.

    ``Augment(time_masks=0, time_mask_frames=0, freq_masks=0, freq_mask_bins=0,
    gain_db=0.0, mixup_alpha=None, mixup_prob=1.0, time_mask_share=1.0)``

    - **Time and frequency masks** (SpecAugment): ``time_masks`` masks per item, each
      ``0..=time_mask_frames`` frames wide (at most ``time_mask_share`` of the item's real
      frames: SpecAugment's ``p``, for sets of short and long clips), and
      ``freq_masks`` masks of ``0..=freq_mask_bins`` mel bins; masked values become 0
      (the mean, when the Loader normalises).
    - **Gain**: a level uniform in ``[-gain_db, +gain_db]`` dB added to each item's
      log-mel values (scaled by each bin's std when the Loader normalises).
    - **Mixup**: with ``mixup_alpha`` set, each item (a share ``mixup_prob`` of them) is
      mixed with another of its batch, ``w·x_i + (1 − w)·x_j``, ``w ~ Beta(α, α)``; the
      batch's ``y`` is then float32 soft labels ``[batch, classes]`` (a target
      ``torch.nn.functional.cross_entropy`` takes). An item left unmixed (the others, or
      the one item of a batch of one) is its own values, bit for bit.

    Every draw is a function of the Loader's seed, the epoch and the item, so batches are
    the same for any number of threads and bit-identical after ``load_state_dict``.
    Order: gain, mixup, masks. Masks and gain touch only the real frames of whole
    clips; mixup gives a short clip's padding ``(1 − w)`` of a longer partner.

    ```python
    aug = melctl.Augment(time_masks=2, time_mask_frames=20, freq_masks=2,
                         freq_mask_bins=8, mixup_alpha=0.4)
    loader = melctl.Loader(path, batch_size=64, augment=aug, max_frames=4000)
    ```
    """

    def __new__(
        cls,
        time_masks: int = 0,
        time_mask_frames: int = 0,
        freq_masks: int = 0,
        freq_mask_bins: int = 0,
        gain_db: float = 0.0,
        mixup_alpha: float | None = None,
        mixup_prob: float = 1.0,
        time_mask_share: float = 1.0,
    ) -> Self: ...
    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]: ...
    def __eq__(self, value: object, /) -> bool: ...
    @property
    def time_masks(self) -> int: ...
    @property
    def time_mask_frames(self) -> int: ...
    @property
    def time_mask_share(self) -> float: ...
    @property
    def freq_masks(self) -> int: ...
    @property
    def freq_mask_bins(self) -> int: ...
    @property
    def gain_db(self) -> float: ...
    @property
    def mixup_alpha(self) -> float | None: ...
    @property
    def mixup_prob(self) -> float: ...

@final
class Batches:
    """One pass over a Loader's batches (from ``iter(loader)``): ``(x, y)``, for whole
    clips ``(x, y, lengths)``, then ``clip_index`` with ``with_index``; read with the GIL released. A pass that crosses a
    ``fork`` goes on in the child (its workers start again there)."""
    def __iter__(self) -> Batches: ...
    def __next__(self) -> _Batch: ...
    def __length_hint__(self) -> int: ...

class Error(Exception):
    """Every error melctl raises for a file or a setting it refuses."""

class ConfigError(Error, ValueError):
    """A configuration value is out of range (names the field and the limit)."""
class ConfigParseError(Error, ValueError):
    """A configuration file or string could not be parsed."""
class UnknownPresetError(Error, ValueError):
    """An unknown preset name."""
class IoError(Error, OSError):
    """The operating system refused an I/O operation on a path."""
class DecodeError(Error):
    """An input file's content is not valid audio."""
class UnsupportedError(Error):
    """Valid input melctl does not handle."""
class LimitError(Error):
    """A bound that keeps memory, time or values finite would be exceeded."""
class DatasetError(Error):
    """A dataset file is not what melctl writes (tampered, truncated, foreign)."""
class DeviceError(Error):
    """A compute device is missing, refused a configuration, or failed."""
class OutputError(Error, OSError):
    """An output could not be written or committed."""
class ShapeError(Error, ValueError):
    """A buffer or shape did not match the plan."""
class InternalError(Error):
    """A worker thread failed outside any input."""
class CancelledError(Error):
    """The run was cancelled."""

__errors__: tuple[str, ...]

def build(
    input: _PathLike,
    output: _PathLike,
    preset: str = "leak-4k",
    config: _PathLike | dict[str, Any] | None = None,
    backend: Literal["auto", "cpu", "cuda", "wgpu"] | None = None,
    *,
    splits: Sequence[str] | None = None,
    resume: bool = False,
    on_error: Literal["skip", "fail"] = "skip",
    labels: Sequence[str] | _PathLike | None = None,
    cache_dir: _PathLike | None = None,
    progress: Callable[[str, int, int], object] | None = None,
    shard: tuple[int, int] | str | None = None,
    split_ratio: dict[str, float] | str | None = None,
    seed: int | None = None,
    group_by: str | None = None,
    group_pattern: str | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Builds ``input`` (a ``ROOT/{split}/{class}/`` folder, or a manifest CSV) into
    ``output``, one file per split, exactly as ``melctl build`` does: the output folder
    locked, every split written under a temporary name and published only when all have
    succeeded, ``resume=True`` continuing an interrupted build.

    The configuration is ``preset``, then ``config`` (a TOML file or a dict of
    sections), then ``backend``, then ``overrides``: a key of one section by its name
    (``n_mels=64``, ``dtype="f32"``, ``precision="fast"``, ``threads=4``,
    ``loader="stream"``), or
    ``section__key`` (``run__stream__readers=4``), or a whole section as a dict (but
    ``output``, which is the output folder: write ``output__dtype="f32"``). Two keywords
    naming one key are refused.

    ``input`` is a folder or a manifest (CSV or JSONL). A manifest without a split
    column is split by ``split_ratio`` (``{"training": 0.8, "testing": 0.2}`` or
    ``"training=0.8,testing=0.2"``; 0.7/0.2/0.1 by default) from ``seed`` (0), as
    ``--split-ratio`` and ``--seed`` do; so is a ``ROOT/{class}/`` folder given either.
    A manifest's columns beyond path, label and split are kept per clip
    (``Split.metadata``). ``group_by="speaker"`` (a manifest column) or
    ``group_pattern=r"([^/]+)_nohash_"`` (the first capture in each path) keeps every
    clip of a group in one split: drawn by a hash of the group, or, where the source
    names the splits, refused if a group is found in two.

    ``progress(split, done, total)`` is called from this thread as clips are computed;
    an exception it raises before the outputs are published stops the build (nothing
    published) and is raised; once the publish has begun it is not called again. Ctrl-C
    does the same with KeyboardInterrupt. The build runs with the GIL released.

    Returns the report (``melctl build --report``'s JSON as a dict, plus ``notices``).
    Files left out (undecodable, with ``on_error="skip"``) are listed in it and named in
    a UserWarning. Errors raise a :class:`Error` subclass.

    ``shard=(k, n)`` (or ``"k/n"``, numbered from 0) builds shard ``k`` of ``n`` into
    ``output/shards/k-of-n/``: each split's sorted file list cut into ``n`` contiguous
    ranges, the whole tree's label map kept. A shard already complete and verified is
    left as it is (the report's ``shard.built`` is False), so retries are safe.
    :func:`merge` then writes what one build of the whole tree would.
    """

def merge(
    output: _PathLike,
    *,
    shards: int | None = None,
    threads: int | None = None,
    progress: Callable[[str, int, int], object] | None = None,
) -> dict[str, Any]:
    """Merges the shards under ``output/shards/k-of-n/`` into ``output/{split}.h5`` (or
    ``.npy.d``), exactly as ``melctl merge`` does: the set checked first (every shard
    present and complete, one configuration, label map and file set), then the datasets
    one build of the whole tree writes, published atomically. ``shards`` picks the count
    when shards of several counts are there. Ctrl-C stops it before the publish.

    Returns the report: each split's clips, output and the files the shards left out.
    """

@final
class Extractor:
    """Computes, in-process, exactly the spectrogram a build stores for a clip: the same
    decoding, resampling, padding, backend and checks. Serve a model the features it
    was trained on.

    ``Extractor(preset, config, backend, dtype, **overrides)`` resolves the configuration
    as :func:`build` does. Results are ``dtype``: float32 (default; stored f16/bf16
    widened exactly), float64, or float16 where the configuration stores f16. It pickles
    by configuration.

    With ``precision="fast"`` the values depend on the backend that computes them (the
    CPU's float32 transform; GPUs run their exact kernels): extract with the backend the
    build used (its report's ``backend``) to get the stored values bit for bit.
    """

    def __new__(
        cls,
        preset: str = "leak-4k",
        config: _PathLike | dict[str, Any] | None = None,
        backend: Literal["auto", "cpu", "cuda", "wgpu"] | None = None,
        dtype: _DTypeLike | None = None,
        **overrides: Any,
    ) -> Self: ...
    @staticmethod
    def from_split(
        split: Split, backend: str | None = None, dtype: _DTypeLike | None = None
    ) -> Extractor:
        """An extractor with exactly the settings ``split`` was built with (its stored
        configuration, dtype included): ``split[i]`` and ``extractor.file(path)`` are the
        same values. Whole clips give each file's spectrogram at its own length; windows a
        ``[windows, ...]`` array per file. ``backend`` overrides the stored one (results
        then agree within the backends' conformance bound); ``dtype`` is the results'
        numpy type (float32 by default, as ``split[i]`` gives)."""
    def __call__(self, audio: npt.ArrayLike, sample_rate: int) -> npt.NDArray[np.floating[Any]]:
        """The spectrogram of ``audio`` (floats in [-1, 1]) at ``sample_rate`` Hz: 1-D is
        one clip (``clip_shape`` back), 2-D a clip per row (``(rows, *clip_shape)``)."""
    def file(self, path: _PathLike) -> npt.NDArray[np.floating[Any]]:
        """The spectrogram of an audio file, decoded exactly as a build decodes it."""
    @property
    def clip_shape(self) -> list[int]:
        """One clip's spectrogram shape (``[79, 3, 32, 5]`` for leak-4k)."""
    @property
    def sample_rate(self) -> int:
        """The rate clips are brought to."""
    @property
    def clip_samples(self) -> int:
        """Samples in one clip."""
    @property
    def backend(self) -> Literal["cpu", "cuda", "wgpu"]:
        """The backend computing."""
    @property
    def dtype(self) -> Literal["float32", "float64", "float16"]:
        """The results' numpy dtype."""
    @property
    def config(self) -> str:
        """The resolved configuration as TOML."""

_EvalReport = dict[str, Any]

@final
class FileEvaluator:
    """Per-segment class probabilities of many files, added in batches of any size and
    order, decided per file.

    ``report()`` returns ``accuracy``, ``files``, ``correct``, ``decisions`` (int64, -1
    for a file with no segment scored), ``truth``, ``scores`` and ``confusion``
    (``[true, decided]``).
    """

    def __new__(cls, truth: Sequence[int], classes: int | None = None) -> Self: ...
    @staticmethod
    def for_split(split: Split, trained_on: Split | None = None) -> FileEvaluator:
        """An evaluator for ``split``'s clips, refused unless ``trained_on`` (default:
        ``split``) shares its label map and mel configuration."""
    def add(self, probs: npt.ArrayLike, files: npt.ArrayLike) -> None:
        """Adds ``probs`` ``[segments, classes]``, row ``k`` a segment of file ``files[k]``."""
    def report(
        self,
        rule: Literal["mean", "vote"] = "mean",
        positive: int | None = None,
        threshold: float | None = None,
    ) -> _EvalReport:
        """Decides every file: mean probability or majority vote; with ``positive`` (and
        ``threshold``, default 0.5) the binary rules on that class."""
    @property
    def classes(self) -> int: ...

def evaluate_files(
    probs: npt.ArrayLike,
    files: npt.ArrayLike,
    truth: Sequence[int],
    classes: int | None = None,
    rule: Literal["mean", "vote"] = "mean",
    positive: int | None = None,
    threshold: float | None = None,
) -> _EvalReport:
    """One call: the file-level report of one batch of per-segment probabilities.

    ``probs`` is ``[segments, classes]`` (softmax outputs), ``files`` each segment's file
    number (``0..len(truth)``), ``truth`` each file's class. ``rule`` is ``"mean"`` (the
    class of the highest mean probability) or ``"vote"`` (the majority of segment
    decisions); ``positive`` with ``threshold`` decides a binary task by the mean
    probability of class ``positive``. Returns :class:`FileEvaluator`'s ``report()``.
    """

def _extractor_from_toml(toml: str, dtype: str) -> Extractor:
    """Unpickles an Extractor (its configuration as TOML, its results' dtype)."""

def verify(out: _PathLike, *, strict: bool = True) -> dict[str, Any]:
    """Checks that the output folder ``out`` is one whole set of splits, as ``melctl
    verify`` does: each opens with every reader check, the build record names each one,
    and they share labels and configuration. Returns the verdict as a dict (``whole``,
    ``build``, ``splits``, ``problems``); raises DatasetError naming each problem (a split
    left by an interrupted build, which h5py would read without a word) unless
    ``strict=False``."""

def _cli_main(argv: Sequence[str | os.PathLike[str]]) -> int:
    """Runs the melctl command line on ``argv`` (the program's name first) and returns its
    exit status: ``python -m melctl`` and the ``melctl`` console script."""

def _reopen_split(
    path: _PathLike, name: str | None, dtype: _DTypeLike, shape: Sequence[int], build: str | None = None
) -> Split:
    """Unpickles a Split: opens it again where it is unpickled."""

__all__ = [
    "__version__",
    "open",
    "_cli_main",
    "verify",
    "build",
    "merge",
    "evaluate_files",
    "_extractor_from_toml",
    "Extractor",
    "FileEvaluator",
    "_reopen_split",
    "Split",
    "Loader",
    "Augment",
    "Batches",
    "Error",
    "ConfigError",
    "ConfigParseError",
    "UnknownPresetError",
    "IoError",
    "DecodeError",
    "UnsupportedError",
    "LimitError",
    "DatasetError",
    "DeviceError",
    "OutputError",
    "ShapeError",
    "InternalError",
    "CancelledError",
    "__errors__",
]
