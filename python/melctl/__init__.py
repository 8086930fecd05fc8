"""melctl from Python: build, merge, read and extract the log-mel datasets ``melctl build``
writes, with the same Rust code.

- :func:`open` returns a :class:`Split`, a map-style dataset (``len(split)``,
  ``split[i]``) that pickles by path, so torch's ``DataLoader`` workers can use it under
  fork, spawn and forkserver.
- :class:`Loader` iterates shuffled, sharded, resumable batches ``(x, y)`` filled by Rust
  threads with the GIL released; an f32 batch becomes its numpy array without a copy.
- Errors are :class:`Error` subclasses, one per kind of melctl's Rust errors, with its
  one-line message.

- :func:`verify` checks that a folder's splits are one whole set (``melctl verify``).
- :func:`build` builds a dataset exactly as ``melctl build`` does (lock, resume,
  all-or-nothing publish) and returns its report; Ctrl-C stops it cleanly. With
  ``shard=(k, n)`` it builds one shard of a sharded build (one task of a Dask or Ray map,
  a Slurm array, a Kubernetes Indexed Job), and :func:`merge` joins the shards into what
  one build writes.
- :class:`Extractor` computes, from a numpy array or a file, exactly what a build stores
  for that clip: serve a model the features it was trained on.
- :class:`FileEvaluator` and :func:`evaluate_files` turn per-segment probabilities into
  file-level decisions (mean probability, majority vote, thresholds).
- :class:`Augment` adds SpecAugment masks, a gain and mixup to a Loader's batches, in
  its Rust threads, replayed exactly after a resume.
- :mod:`melctl.torch` (only with torch installed): a map-style ``Dataset`` of ``(x, y)``
  tensors, an ``IterableDataset`` sharded by rank and worker, and ``TorchLoader``
  (batches as tensors, pinned or on a device).

numpy is the only dependency. Everything runs in the same Rust code as ``melctl`` and
``melread``: there is no second implementation.
"""

import os as _os
import tempfile as _tempfile


def _quiet_vulkan_loader():
    """The Vulkan loader (probed when the wgpu backend is considered) prints "error:
    XDG_RUNTIME_DIR is invalid or not set" to stderr when the variable names no folder (a
    server, CI, a container). Point it at a private folder first, as the melctl CLI does."""
    if _os.path.isdir(_os.environ.get("XDG_RUNTIME_DIR", "")):
        return
    folder = _os.path.join(_tempfile.gettempdir(), f"melctl-runtime-{_os.getuid()}")
    try:
        _os.makedirs(folder, mode=0o700, exist_ok=True)
        ours = _os.stat(folder).st_uid == _os.getuid()
    except OSError:
        return
    if ours:
        _os.environ["XDG_RUNTIME_DIR"] = folder


_quiet_vulkan_loader()

# The stubs, and these names, are checked against the module by stubtest (CI).
from ._melctl import (  # noqa: E402
    Augment,
    Batches,
    CancelledError,
    ConfigError,
    ConfigParseError,
    DatasetError,
    DecodeError,
    DeviceError,
    Error,
    Extractor,
    FileEvaluator,
    InternalError,
    IoError,
    LimitError,
    Loader,
    OutputError,
    ShapeError,
    Split,
    UnknownPresetError,
    UnsupportedError,
    __version__,
    build,
    evaluate_files,
    merge,
    open,
    verify,
)

__all__ = [
    "__version__",
    "open",
    "Split",
    "Loader",
    "Augment",
    "build",
    "merge",
    "verify",
    "Extractor",
    "FileEvaluator",
    "evaluate_files",
    "Batches",
    "Error",
    # The errors: one class per kind, made from the native module's table (errors.rs).
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
]
