#!/usr/bin/env bash
# Installs what a fresh Debian machine with Rust, gcc and Python 3 lacks to build and
# test melctl. Idempotent; run as root (or with rights to pip install and link into /usr/local/bin).
# `scripts/setup.sh --tests` also installs what only the tests need that is large (torch).
#  - CMake >= 3.26: the static HDF5 build (hdf5-metno "static") needs it; Debian 12 has 3.25.
#  - numpy + h5py: the end-to-end test reads melctl's output back with h5py, as trainers do.
#  - NVRTC (the nvidia-cuda-nvrtc wheel, no GPU needed): the CUDA tests compile the kernel
#    to PTX for every configuration. Optional: without it that test prints a skip.
#  - The Vulkan loader and Mesa's software Vulkan driver (lavapipe): the wgpu backend's
#    conformance suite runs on it. Needs apt as root; without it those tests print a skip.
set -euo pipefail

# Debian packages, installed in one apt-get run (as root; without root each missing one
# is named and the tests that need it print a skip):
#  - strace: the integrity tests kill a build at every sync point and fail its writes
#    with strace's fault injection.
#  - fonts-dejavu-core: `melctl show` labels its pictures (its test draws some).
#  - libvulkan1 + mesa-vulkan-drivers (lavapipe): the wgpu backend's conformance suite.
#  - espeak-ng, sox, libsox-fmt-all: the real-speech corpus test.
#  - slurm-wlm, munge: the sharded build's Slurm recipe (docs/cluster/) is tested on a
#    single-node Slurm that the test starts and stops (scripts/slurm-local.sh).
apt_need=()
command -v strace >/dev/null 2>&1 || apt_need+=(strace)
ls /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf >/dev/null 2>&1 || apt_need+=(fonts-dejavu-core)
if ! ldconfig -p 2>/dev/null | grep -q libvulkan.so.1 || ! ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1; then
    apt_need+=(libvulkan1 mesa-vulkan-drivers)
fi
{ command -v espeak-ng && command -v sox; } >/dev/null 2>&1 || apt_need+=(espeak-ng sox libsox-fmt-all)
{ command -v slurmctld && command -v munged; } >/dev/null 2>&1 || apt_need+=(slurm-wlm munge)
if [ ${#apt_need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: apt-get install ${apt_need[*]}" >&2
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${apt_need[@]}"; } >/dev/null \
            || echo "setup: could not install ${apt_need[*]}; the tests that need them will print a skip (melctl show's test will fail without a font)" >&2
    else
        echo "setup: missing ${apt_need[*]} and no root for apt-get; the tests that need them will print a skip (melctl show's test will fail without a font)" >&2
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

#  - The Python tests: pytest, mypy (its stubtest checks the type stubs against the
#    built module), and kubernetes-validate for the Kubernetes recipe's
#    manifests. They import this checkout's package with the extension module that
#    `cargo test --workspace` compiles (python/tests/conftest.py), so nothing is built here:
#    `pip install ./python` installs the package for use (README, "From Python").
py_need=()
python3 -c "import pytest" 2>/dev/null || py_need+=(pytest)
python3 -c "import kubernetes_validate" 2>/dev/null || py_need+=(kubernetes-validate)
python3 -c "import mypy.stubtest" 2>/dev/null || py_need+=(mypy)
#  - maturin: scripts/wheel.sh builds the package's wheel with it (CI installs and tests it).
python3 -m maturin --version >/dev/null 2>&1 || py_need+=("maturin>=1.9.4,<2")
#  - torch, with --tests only (the test command; the demo needs none of it):
#    melctl.torch, the DataLoader tests and the PyTorch examples (CI requires them:
#    MEL_REQUIRE_TORCH=1). PyPI's Linux wheel is the CUDA build (~3.8 GB with its nvidia-*
#    libraries; it runs on a CPU) and PyPI is the index these machines reach; pip's cache
#    (~/.cache/pip) keeps the wheels, so a second setup installs from disk (57 s to
#    download here, 2026-11-28).
if [ "${1:-}" = "--tests" ]; then
    python3 -c "import torch" 2>/dev/null || py_need+=("torch==2.9.1")
fi
if [ ${#py_need[@]} -gt 0 ]; then
    echo "setup: pip install ${py_need[*]}" >&2
    python3 -m pip install --quiet --disable-pip-version-check "${py_need[@]}" \
        || echo "setup: could not install ${py_need[*]}" >&2
fi
echo "setup: $(cmake --version | head -n1), numpy $(python3 -c 'import numpy; print(numpy.__version__)'), h5py $(python3 -c 'import h5py; print(h5py.__version__)')" >&2
