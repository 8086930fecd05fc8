"""``python -m melctl`` and the ``melctl`` console script: the melctl command line.

This is the CLI crate's own code inside the extension module (the same ``melctl`` the
cargo binary is), not a second implementation: ``python -m melctl build -i ROOT -o OUT``
does exactly what ``melctl build`` does, exit status included.
"""

import sys


def main() -> int:
    """Runs ``melctl`` with this process's arguments and exits with its status."""
    from ._melctl import _cli_main

    # Python's own buffers first (None when the stream was closed: `melctl ... >&-`).
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    sys.exit(_cli_main(["melctl", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
