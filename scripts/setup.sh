#!/usr/bin/env bash
# Installs what a fresh Debian machine with Rust, gcc and Python 3 lacks to build and
# test melctl. Idempotent; run as root (or with rights to pip install and link into /usr/local/bin).
#  - CMake >= 3.26: the static HDF5 build (hdf5-metno "static") needs it; Debian 12 has 3.25.
#  - numpy + h5py: the end-to-end test reads melctl's output back with h5py, as trainers do.
set -euo pipefail

cmake_ok() {
    command -v cmake >/dev/null 2>&1 || return 1
    local v
    v=$(cmake --version | head -n1 | awk '{print $3}')
    python3 - "$v" <<'PY'
import sys
major, minor = (int(x) for x in sys.argv[1].split(".")[:2])
sys.exit(0 if (major, minor) >= (3, 26) else 1)
PY
}

need=()
cmake_ok || need+=("cmake>=3.26")
python3 -c "import numpy, h5py" 2>/dev/null || need+=(numpy h5py)
if [ ${#need[@]} -gt 0 ]; then
    echo "setup: pip install ${need[*]}" >&2
    python3 -m pip install --quiet --disable-pip-version-check "${need[@]}"
fi
if ! cmake_ok; then
    # pip's cmake lives beside the Python it was installed for; make it the one on PATH.
    bin=$(python3 -c "import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR, 'cmake'))")
    ln -sf "$bin" /usr/local/bin/cmake
    hash -r
fi
cmake_ok || { echo "setup: cmake >= 3.26 is still not on PATH" >&2; exit 1; }
echo "setup: $(cmake --version | head -n1), numpy $(python3 -c 'import numpy; print(numpy.__version__)'), h5py $(python3 -c 'import h5py; print(h5py.__version__)')" >&2
