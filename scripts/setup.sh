#!/usr/bin/env bash
# Installs what a fresh Debian machine with Rust, gcc and Python 3 lacks to build and
# test melctl. Idempotent; run as root (or with rights to pip install and link into /usr/local/bin).
#  - CMake >= 3.26: the static HDF5 build (hdf5-metno "static") needs it; Debian 12 has 3.25.
#  - numpy + h5py: the end-to-end test reads melctl's output back with h5py, as trainers do.
#  - NVRTC (the nvidia-cuda-nvrtc wheel, no GPU needed): the CUDA tests compile the kernel
#    to PTX for every configuration. Optional: without it that test prints a skip.
#  - The Vulkan loader and Mesa's software Vulkan driver (lavapipe): the wgpu backend's
#    conformance suite runs on it. Needs apt as root; without it those tests print a skip.
set -euo pipefail

#  - strace: the integrity tests kill a build at every sync point and fail its writes
#    with strace's fault injection (without it they print a skip).
if ! command -v strace >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: apt-get install strace (for the integrity tests)" >&2
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace; } >/dev/null \
            || echo "setup: could not install strace; those tests will print a skip" >&2
    else
        echo "setup: no strace and no root for apt-get; those tests will print a skip" >&2
    fi
fi

#  - a TrueType font: `melctl show` labels its pictures (its test draws some).
if ! ls /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: apt-get install fonts-dejavu-core (for melctl show)" >&2
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-dejavu-core; } >/dev/null \
            || echo "setup: could not install fonts-dejavu-core; melctl show and its test will fail" >&2
    else
        echo "setup: no DejaVu font and no root for apt-get; melctl show needs a TrueType font" >&2
    fi
fi

if ! ldconfig -p 2>/dev/null | grep -q libvulkan.so.1 || ! ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: apt-get install libvulkan1 mesa-vulkan-drivers (lavapipe, for the wgpu tests)" >&2
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libvulkan1 mesa-vulkan-drivers; } >/dev/null \
            || echo "setup: could not install lavapipe; the wgpu tests will print a skip" >&2
    else
        echo "setup: no Vulkan driver and no root for apt-get; the wgpu tests will print a skip" >&2
    fi
fi

if ! command -v espeak-ng >/dev/null 2>&1 || ! command -v sox >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: apt-get install espeak-ng sox libsox-fmt-all (for the real-speech corpus test)" >&2
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq espeak-ng sox libsox-fmt-all; } >/dev/null \
            || echo "setup: could not install espeak-ng and sox; the speech corpus test will print a skip" >&2
    else
        echo "setup: no espeak-ng or sox and no root for apt-get; the speech corpus test will print a skip" >&2
    fi
fi

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
if ! python3 -m pip show -q nvidia-cuda-nvrtc >/dev/null 2>&1 && ! ldconfig -p 2>/dev/null | grep -q libnvrtc; then
    echo "setup: pip install nvidia-cuda-nvrtc (for the kernel-to-PTX test)" >&2
    python3 -m pip install --quiet --disable-pip-version-check "nvidia-cuda-nvrtc>=13,<14" \
        || echo "setup: NVRTC not installed; the PTX test will print a skip" >&2
fi

#  - The Python package (python/, import name melctl) and its tests: maturin builds it,
#    pytest runs python/tests (which read melctl's files back with h5py). It is built
#    with cargo's dev profile into the workspace's target/, so it shares the compiled
#    dependencies with `cargo test` instead of a release build with LTO (`pip install
#    ./python` without MATURIN_PEP517_ARGS makes that optimised build, for real use).
#    --no-build-isolation: the maturin installed here, and the cmake found above (pip's
#    isolated build environment hides a pip-installed cmake's module).
py_need=()
python3 -c "import maturin" 2>/dev/null || py_need+=("maturin>=1.9.4,<2")
python3 -c "import pytest" 2>/dev/null || py_need+=(pytest)
if [ ${#py_need[@]} -gt 0 ]; then
    echo "setup: pip install ${py_need[*]}" >&2
    python3 -m pip install --quiet --disable-pip-version-check "${py_need[@]}"
fi
root=$(cd "$(dirname "$0")/.." && pwd)
echo "setup: building the Python package melctl (python/, dev profile)" >&2
MATURIN_PEP517_ARGS="--profile dev" python3 -m pip install --quiet --disable-pip-version-check \
    --no-build-isolation --force-reinstall --no-deps "$root/python"
echo "setup: $(cmake --version | head -n1), numpy $(python3 -c 'import numpy; print(numpy.__version__)'), h5py $(python3 -c 'import h5py; print(h5py.__version__)'), melctl $(python3 -c 'import melctl; print(melctl.__version__)')" >&2
