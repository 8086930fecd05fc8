"""melctl from Python: read the log-mel datasets ``melctl build`` writes.

- :func:`open` returns a :class:`Split`, a map-style dataset (``len(split)``,
  ``split[i]``) that pickles by path, so torch's ``DataLoader`` workers can use it under
  fork, spawn and forkserver.
- :class:`Loader` iterates shuffled, sharded, resumable batches ``(x, y)`` filled by Rust
  threads with the GIL released; an f32 batch becomes its numpy array without a copy.
- Errors are :class:`Error` subclasses, one per kind of melctl's Rust errors, with its
  one-line message.

numpy is the only dependency. Everything runs in the same Rust code as ``melctl`` and
``melread``: there is no second implementation.
"""

from ._melctl import (
    CancelledError,
    ConfigError,
    ConfigParseError,
    DatasetError,
    DecodeError,
    DeviceError,
    Error,
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
    open,
)

__all__ = [
    "__version__",
    "open",
    "Split",
    "Loader",
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
]
