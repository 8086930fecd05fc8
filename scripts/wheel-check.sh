#!/usr/bin/env bash
# The wheel as a user gets it: builds it (scripts/wheel.sh; pass --dev for the quick CI
# build), installs it into a fresh virtual environment, and, in a folder holding no Rust
# sources and no python/melctl, with no cargo on PATH, runs `melctl demo`, `python -m
# melctl inspect` and the Python tests against the installed package. A missing file, a
# libpython link, a wrong tag or a console script that does not start fails here.
#
#   scripts/wheel-check.sh [--dev]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
wheel=$(scripts/wheel.sh "$@" target/wheels-check | tail -n1)
work=$(mktemp -d /tmp/melctl-wheel-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
# numpy comes with the wheel's own requirements; pytest and h5py (the tests' independent
# reader), mypy (stubtest) and kubernetes-validate (the Kubernetes recipe's test) are the
# tests' (the system site's copies are not visible in the venv).
start=$(date +%s)
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel"
echo "wheel-check: installed $(basename "$wheel") in $(( $(date +%s) - start )) s" >&2
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    pytest h5py mypy kubernetes-validate
# The tests and what they use from the checkout besides the package: the stubtest
# settings, the audio fixtures, the cluster recipes and scripts, the speech corpus script, the docs whose snippets run.
mkdir -p "$work/check/python" "$work/check/docs"
cp -r python/tests python/pyproject.toml python/stubtest-allowlist.txt "$work/check/python/"
cp -r fixtures "$work/check/fixtures"
cp -r scripts "$work/check/scripts"
cp -r docs/cluster "$work/check/docs/cluster"
cp docs/reading.md "$work/check/docs/"
cd "$work/check"
# PATH: the venv first, and no cargo or rustc anywhere on it.
path=$work/venv/bin
for d in $(echo "$PATH" | tr ':' ' '); do
    if [ ! -x "$d/cargo" ] && [ ! -x "$d/rustc" ]; then path=$path:$d; fi
done
export PATH=$path VIRTUAL_ENV=$work/venv
if command -v cargo >/dev/null; then echo "wheel-check: cargo is still on PATH" >&2; exit 1; fi
melctl --version
melctl demo --clips 40 demo
python -m melctl inspect demo/out/training.h5 | head -n 5
# torch is not installed in this venv (3.8 GB more): the torch tests ran against the same
# package in the step before; here they print their skip, whatever CI requires there.
MELCTL_TEST_INSTALLED=1 MEL_REQUIRE_TORCH=0 python -m pytest python/tests -q -p no:cacheprovider
echo "wheel-check: $(basename "$wheel") passed (installed, demo, inspect, the Python tests) from $root" >&2
